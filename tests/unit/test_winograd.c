/* test_winograd.c -- the Winograd conv template (src/kernels/conv2d_winograd.c over
 * te/algo/winograd.h) end to end: F(2x2,3x3), F(4x4,3x3) and F(6x6,3x3) on ResNet-sized 3x3
 * stride-1 convs (56x56 64->64, 28x28 128->128, 7x7 512->512) and odd ones (13x13, 9x11, 1x2,
 * channels that do not fill a block, batch 2, asymmetric pads, an NCHW input to a blocked
 * conv), as the layout pass hands them over (wpk::ConvNCHWc on blocked tensors, -O3) and as
 * -O2 does (FusedConv / Conv in NCHW), with bias + ReLU and a residual. Each kernel is built by
 * the cpu backend's builder (cpu_kernel_build: the weight transform as a pack kernel, scratch
 * arguments), all compiled together (cpu_units_compile), the weights transformed once, run,
 * and compared with the node's reference kernel (op_conv_nchwc_ref, op_fused_conv_ref,
 * op_conv_ref): relative L2 error <= 1e-4 (the measured worst is printed); the batch-2 cases
 * also built for one image and run image by image (cpu_kernel_build_per_image). Also: random
 * legal configs on small convs, that the registry never makes it a node's first template but
 * lists it among the node's implementations, that supports() refuses stride 2, 1x1, dilation
 * 2, groups > 1 and weights known only at run time, the messages of configs and shapes it must
 * refuse, and a kernel build with each of its allocations failed in turn (WPK_ERR_NOMEM, never
 * a crash). Compiled kernels go to the user's kernel cache, whose keys cover the source, the
 * compiler and its flags: the ASan run of the suite reuses the plain run's objects. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/target.h"
#include "check.h"
#include "kernels/cpu_kernel.h"
#include "loop/interp.h"
#include "kernels/cpu_unit.h"
#include "ir/graph.h"
#include "ops/blocked.h"
#include "te/algo/winograd.h"
#include "kernels/provider.h"

#define TOL 1e-4
#define RANDOM_CONFIGS 1

typedef struct wcase {
    const char *name;
    const char *op;          /* ConvNCHWc, FusedConv or Conv */
    int64_t n, c, h, w, k;
    int64_t pads[4];
    bool bias, residual;
    const char *act;         /* FusedConv / ConvNCHWc activation (NULL: none) */
    int64_t block, oblock;   /* ConvNCHWc: lanes of X (1: NCHW) and of the output; 0: vector */
} wcase;

static const wcase CASES[] = {
    {"resnet 56x56 64->64, residual", "ConvNCHWc", 1, 64, 56, 56, 64, {1, 1, 1, 1}, true, true,
     "Relu", 0, 0},
    {"resnet 28x28 128->128", "ConvNCHWc", 1, 128, 28, 28, 128, {1, 1, 1, 1}, true, false,
     "Relu", 0, 0},
    {"resnet 7x7 512->512, residual", "ConvNCHWc", 1, 512, 7, 7, 512, {1, 1, 1, 1}, true, true,
     "Relu", 0, 0},
    {"13x13 padded lanes 20->24 (blocks of 8), batch 2", "ConvNCHWc", 2, 20, 13, 13, 24,
     {1, 1, 1, 1}, true, true, "Relu", 8, 8},
    {"NCHW input to a blocked conv, 9x11", "ConvNCHWc", 1, 3, 9, 11, 16, {1, 1, 1, 1}, true,
     false, "Relu", 1, 0},
    {"-O2 NCHW 13x13 20->36, batch 2, residual", "FusedConv", 2, 20, 13, 13, 36, {1, 1, 1, 1},
     true, true, "Relu", 0, 0},
    {"-O2 NCHW 14x14 64->64", "FusedConv", 1, 64, 14, 14, 64, {1, 1, 1, 1}, true, false, "Relu",
     0, 0},
    {"Conv, no bias, asymmetric pads 10x9", "Conv", 1, 16, 10, 9, 8, {0, 1, 2, 0}, false, false,
     NULL, 0, 0},
    {"valid 3x3 (no pads, whole tiles) 10x10", "ConvNCHWc", 1, 16, 10, 10, 16, {0, 0, 0, 0},
     false, true, NULL, 0, 0},
    {"a 1x2 image (one partial tile)", "ConvNCHWc", 2, 16, 1, 2, 16, {1, 1, 1, 1}, true, false,
     "Relu", 0, 0},
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

static unsigned rng_state = 12345;
static float frand(void) {
    rng_state = rng_state * 1103515245u + 12345u;
    return (float)((rng_state >> 9) & 0xffff) / 32768.0f - 1.0f;
}

static void *alloc64(int64_t bytes) { return aligned_alloc(64, (size_t)((bytes + 63) / 64 * 64)); }

static float *buffer(int64_t n) {
    float *p = alloc64(n * 4);
    for (int64_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

/* One case's node and tensors: in[] as the node sees them (blocked for ConvNCHWc). */
typedef struct problem {
    ir_graph *g;
    ir_node *node;
    ir_tensor t[5];          /* X, W, B, Z, Y */
    ir_tensor *in[4], *out[1];
    int64_t ny;
    float *want;
} problem;

static float *to_blocked(const float *x, int64_t n, int64_t c, int64_t hw, int64_t b) {
    int64_t cb = (c + b - 1) / b;
    float *y = alloc64(n * cb * hw * b * 4);
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < cb * b; ch++)
            for (int64_t s = 0; s < hw; s++)
                y[((i * cb + ch / b) * hw + s) * b + ch % b] =
                    ch < c ? x[(i * c + ch) * hw + s] : 0.0f;
    return y;
}

/* A node of `op` with strides/dilations/group as given (3x3 weights unless kernel > 0). */
static bool problem_init(problem *p, const wcase *wc, int64_t stride, int64_t dil, int64_t group,
                         int64_t kernel, wpk_context *ctx) {
    memset(p, 0, sizeof *p);
    p->g = ir_graph_create();
    const bool blocked = !strcmp(wc->op, "ConvNCHWc"), onnx = !strcmp(wc->op, "Conv");
    const int64_t vec = target_vector_floats();
    const int64_t bi = wc->block ? wc->block : vec, bo = wc->oblock ? wc->oblock : vec;
    const int64_t kk = kernel ? kernel : 3;
    int nin = 3 + (wc->residual ? 1 : 0);
    int k = ir_graph_add_node(p->g, wc->name, wc->op, onnx ? "" : "wpk", onnx ? 17 : 1, nin, 1);
    ir_node *n = p->node = &p->g->nodes[k];
    ir_graph *g = p->g;
    ir_node_set_ints(g, n, "strides", (const int64_t[]){stride, stride}, 2);
    ir_node_set_ints(g, n, "dilations", (const int64_t[]){dil, dil}, 2);
    ir_node_set_ints(g, n, "pads", wc->pads, 4);
    ir_node_set_int(g, n, "group", group);
    if (wc->act) ir_node_set_str(g, n, "activation", wc->act);
    const int64_t cg = wc->c / group, hw = wc->h * wc->w;
    ir_tensor *x = &p->t[0], *w = &p->t[1], *b = &p->t[2], *z = &p->t[3], *y = &p->t[4];
    *x = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {wc->n, wc->c, wc->h, wc->w},
                     buffer(wc->n * wc->c * hw)};
    *w = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {wc->k, cg, kk, kk}, buffer(wc->k * cg * kk * kk)};
    *b = (ir_tensor){WPK_DTYPE_FLOAT32, 1, {wc->k}, buffer(wc->k)};
    if (blocked) {
        ir_node_set_int(g, n, "channels", wc->k);
        if (bi > 1) {
            float *xb = to_blocked(x->data, wc->n, wc->c, hw, bi);
            free(x->data);
            *x = (ir_tensor){WPK_DTYPE_FLOAT32, 5, {wc->n, (wc->c + bi - 1) / bi, wc->h, wc->w, bi},
                             xb};
        }
        ir_tensor wp = {WPK_DTYPE_FLOAT32, 6, {0}, NULL};
        blocked_weight_dims(wc->k, cg, kk, kk, bi, bo, false, wp.dims);
        wp.data = alloc64(ir_numel(&wp) * 4);
        blocked_pack_weights(w->data, wc->k, cg, kk, kk, bi, bo, false, wp.data);
        free(w->data);
        *w = wp;
    }
    p->in[0] = x, p->in[1] = w, p->in[2] = wc->bias ? b : NULL;
    p->out[0] = y;
    *y = (ir_tensor){WPK_DTYPE_FLOAT32, 0, {0}, NULL};
    if (ir_op_get(n->op)->shape(ctx, n, p->in, p->out)) {
        fprintf(stderr, "%s: shape: %s\n", wc->name, wpk_context_error(ctx));
        return false;
    }
    p->ny = ir_numel(y);
    if (wc->residual) {
        *z = (ir_tensor){WPK_DTYPE_FLOAT32, y->ndim, {0}, buffer(p->ny)};
        memcpy(z->dims, y->dims, sizeof z->dims);
        if (blocked) /* the blocked layout's padding lanes are zero */
            for (int64_t i = 0; i < p->ny; i++)
                if ((i % bo) + ((i / (bo * y->dims[2] * y->dims[3])) % y->dims[1]) * bo >= wc->k)
                    ((float *)z->data)[i] = 0.0f;
        p->in[3] = z;
    }
    y->data = alloc64(p->ny * 4);
    p->want = malloc(sizeof(float) * (size_t)p->ny);
    if (ir_op_get(n->op)->ref(ctx, n, p->in, p->out)) {
        fprintf(stderr, "%s: reference: %s\n", wc->name, wpk_context_error(ctx));
        return false;
    }
    memcpy(p->want, y->data, sizeof(float) * (size_t)p->ny);
    return true;
}

static void problem_free(problem *p) {
    for (int i = 0; i < 5; i++) free(p->t[i].data);
    free(p->want);
    ir_graph_free(p->g);
}

/* sqrt(sum (got - want)^2 / sum want^2); NaN anywhere makes it NaN. */
static double rel_l2(const float *got, const float *want, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ---- kernels built by the cpu backend's builder, compiled together, then run ---- */

#define MAX_KERNELS 128
typedef struct built {
    cpu_kernel k;
    problem *p;
    char what[400];
    int m;
} built;
static built kernels[MAX_KERNELS];
static int nkernels;
static double worst[7]; /* by m */

static const kernel_provider *winograd(void) { return kernel_provider_find("conv2d_winograd"); }

/* images > 1: built for one image and run once per image (cpu_kernel_build_per_image, what a
 * plan does with a config from batch-1 records), on the whole batch's tensors. */
static void add_kernel_images(wpk_context *ctx, problem *p, const char *name, const char *config,
                              int64_t images) {
    CHECK(nkernels < MAX_KERNELS);
    if (nkernels == MAX_KERNELS) return;
    built *b = &kernels[nkernels];
    tune_task task;
    wpk_status st;
    if (images > 1) {
        /* as a plan sees them: the tensors computed at run time have no data yet */
        ir_tensor t[5], *in[4] = {0}, *out[1];
        for (int i = 0; i < 4; i++)
            if (p->in[i]) {
                t[i] = *p->in[i];
                if (i == 0 || i == 3) t[i].data = NULL;
                in[i] = &t[i];
            }
        t[4] = *p->out[0];
        t[4].data = NULL;
        out[0] = &t[4];
        tune_task_init(&task, winograd(), p->node, in, out);
        st = cpu_kernel_build_per_image(ctx, &task, nkernels, config, images, NULL, &b->k);
    } else {
        tune_task_init(&task, winograd(), p->node, p->in, p->out);
        st = cpu_kernel_build(ctx, &task, nkernels, config, NULL, &b->k);
    }
    char cfg[sizeof b->k.config];
    snprintf(cfg, sizeof cfg, "%s", st ? config : b->k.config);
    snprintf(b->what, sizeof b->what, "%s [%s]%s", name, cfg, images > 1 ? " per image" : "");
    if (st) fprintf(stderr, "%s: build: %s\n", b->what, wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    if (st) return;
    const char *m = strstr(b->k.config, "m=");
    b->m = m ? atoi(m + 2) : 0;
    b->p = p;
    nkernels++;
}

static void add_kernel(wpk_context *ctx, problem *p, const char *name, const char *config) {
    add_kernel_images(ctx, p, name, config, 1);
}

static void run_kernels(wpk_context *ctx) {
    cpu_kernel *ks[MAX_KERNELS];
    for (int i = 0; i < nkernels; i++) ks[i] = &kernels[i].k;
    cpu_units u;
    wpk_status st = cpu_units_compile(ctx, ks, nkernels, &u);
    if (st) fprintf(stderr, "compile: %s\n", wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    for (int i = 0; !st && i < nkernels; i++) {
        built *b = &kernels[i];
        problem *p = b->p;
        void *args[CPU_MAX_KERNEL_ARGS];
        void *packed = NULL, *scratch = NULL;
        int na = 0;
        for (int a = 0; a < p->node->nin; a++)
            if (p->in[a]) args[na++] = p->in[a]->data;
        CHECK(na == b->k.ninputs && b->k.noutputs == 1 && b->k.fn);
        /* the weight transform: a pack kernel of argument 1, run once */
        CHECK(b->k.pack_numel[1] > 0 && b->k.pack_fn[1]);
        if (b->k.pack_numel[1] <= 0 || !b->k.pack_fn[1] || !b->k.fn) continue;
        packed = alloc64(b->k.pack_numel[1] * 4);
        b->k.pack_fn[1]((void *[]){args[1], packed});
        args[1] = packed;
        float *y = p->t[4].data;
        args[na++] = y;
        if (b->k.scratch_bytes) scratch = alloc64(b->k.scratch_bytes);
        for (int s = 0; s < b->k.nscratch; s++) args[na++] = (char *)scratch + b->k.scratch_off[s];
        for (int64_t e = 0; e < p->ny; e++) y[e] = NAN;
        b->k.fn(args);
        double err = rel_l2(y, p->want, p->ny);
        printf("%-64s relative L2 error %.3g\n", b->what, err);
        if (!(err <= TOL)) fprintf(stderr, "%s: relative L2 error %g > %g\n", b->what, err, TOL);
        CHECK(err <= TOL);
        if (b->m >= 0 && b->m < 7 && !(err <= worst[b->m])) worst[b->m] = err;
        /* twice: scratch left from the first run must not leak into the second */
        for (int64_t e = 0; e < p->ny; e++) y[e] = NAN;
        b->k.fn(args);
        CHECK(rel_l2(y, p->want, p->ny) == err);
        free(scratch);
        free(packed);
    }
    if (!st) cpu_units_free(&u);
    for (int i = 0; i < nkernels; i++) cpu_kernel_free(&kernels[i].k);
    nkernels = 0;
}

static uint64_t seed_of(void) {
    const char *s = getenv("WPK_TEST_SEED");
    return s && *s ? strtoull(s, NULL, 10) : 20240612u;
}

/* The registry: Winograd is one of the node's implementations, never its first. */
static void check_registry(const problem *p) {
    const kernel_provider *first = kernel_provider_for(p->node, p->in, p->out);
    CHECK(first && first != winograd());
    const kernel_provider *list[16];
    int n = kernel_providers_for(p->node, p->in, p->out, list, 16), at = -1;
    for (int i = 0; i < n; i++)
        if (list[i] == winograd()) at = i;
    CHECK(at > 0 && list[0] == first);
}

/* Every case at every tile size under the default config otherwise and under the fused and
 * whole-block schedules; the small ones also under random legal configs. */
static void test_cases(wpk_context *ctx, uint64_t *rng) {
    problem probs[NCASES];
    bool ok[NCASES];
    for (int i = 0; i < NCASES; i++) {
        ok[i] = problem_init(&probs[i], &CASES[i], 1, 1, 1, 0, ctx);
        CHECK(ok[i]);
        if (!ok[i]) continue;
        CHECK(winograd()->supports(winograd(), probs[i].node, probs[i].in, probs[i].out));
        check_registry(&probs[i]);
        add_kernel(ctx, &probs[i], CASES[i].name, "m=2");
        add_kernel(ctx, &probs[i], CASES[i].name, "m=4");
        add_kernel(ctx, &probs[i], CASES[i].name, "m=6");
        /* the fused schedules: by blocks of tile rows, by halves of the output channels, by
         * both */
        add_kernel(ctx, &probs[i], CASES[i].name, "m=4,parallel=2");
        add_kernel(ctx, &probs[i], CASES[i].name, "m=2,parallel=3");
        add_kernel(ctx, &probs[i], CASES[i].name, "m=4,parallel=4");
        add_kernel(ctx, &probs[i], CASES[i].name, "m=6,parallel=2");
        /* the whole conv per block, the input read in place (padding, NCHW input, batches,
         * partial tiles): by tile rows, by rows x channel halves; on every other case (each
         * compiles its partitioned input transform in a few seconds) */
        if (i % 2 == 0) add_kernel(ctx, &probs[i], CASES[i].name, "m=4,parallel=5");
        else add_kernel(ctx, &probs[i], CASES[i].name, "m=2,parallel=6");
        /* the whole conv per thread's share of the output channels, every tile of an image
         * at once or tile row by tile row */
        add_kernel(ctx, &probs[i], CASES[i].name, i % 2 ? "m=4,parallel=7" : "m=2,parallel=7");
        add_kernel(ctx, &probs[i], CASES[i].name, i % 2 ? "m=2,parallel=8" : "m=4,parallel=8");
        /* a register tile of 8 on a row of 28 tiles (test_whole_bounds checks its reads) */
        if (i == 0) add_kernel(ctx, &probs[i], CASES[i].name, "m=2,tile_p=8,parallel=6");
        /* a batch image by image: each image's input, residual and output one image further */
        if (CASES[i].n > 1) {
            add_kernel_images(ctx, &probs[i], CASES[i].name, "m=4", CASES[i].n);
            add_kernel_images(ctx, &probs[i], CASES[i].name, "m=2,parallel=3", CASES[i].n);
        }
        if (probs[i].ny > 40000) continue;
        tune_task task;
        tune_task_init(&task, winograd(), probs[i].node, probs[i].in, probs[i].out);
        tune_space sp;
        winograd()->space(winograd(), &task, &sp);
        for (int r = 0; r < RANDOM_CONFIGS; r++) {
            tune_config cfg;
            tune_config_random(&sp, rng, &cfg);
            strbuf cs = {0};
            tune_config_print(&sp, &cfg, &cs);
            add_kernel(ctx, &probs[i], CASES[i].name, cs.s);
            sb_free(&cs);
        }
    }
    run_kernels(ctx);
    printf("worst relative L2 error: F(2x2,3x3) %.3g, F(4x4,3x3) %.3g, F(6x6,3x3) %.3g\n",
           worst[2], worst[4], worst[6]);
    for (int i = 0; i < NCASES; i++)
        if (ok[i]) problem_free(&probs[i]);
}

/* supports() takes 3x3 stride-1 dilation-1 one-group convs with constant weights only. */
static void test_refuses(wpk_context *ctx) {
    /* two groups of the blocked conv need whole output blocks per group: 32 channels */
    static const wcase base = {"refused", "FusedConv", 1, 32, 12, 12, 32, {1, 1, 1, 1}, true,
                               false, "Relu", 0, 0};
    static const wcase blocked = {"refused blocked", "ConvNCHWc", 1, 32, 12, 12, 32,
                                  {1, 1, 1, 1}, true, false, "Relu", 0, 0};
    static const struct {
        const char *what;
        int64_t stride, dil, group, kernel;
    } R[] = {{"stride 2", 2, 1, 1, 0}, {"1x1", 1, 1, 1, 1}, {"dilation 2", 1, 2, 1, 0},
             {"2 groups", 1, 1, 2, 0}, {"5x5", 1, 1, 1, 5}};
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < (int)(sizeof R / sizeof R[0]); i++) {
            const wcase *wc = b ? &blocked : &base;
            wcase one = *wc;
            if (R[i].kernel == 1) memset(one.pads, 0, sizeof one.pads);
            if (R[i].kernel == 5 || R[i].dil == 2) for (int k = 0; k < 4; k++) one.pads[k] = 2;
            problem p;
            bool ok = problem_init(&p, &one, R[i].stride, R[i].dil, R[i].group, R[i].kernel, ctx);
            CHECK(ok);
            if (!ok) continue;
            if (winograd()->supports(winograd(), p.node, p.in, p.out))
                fprintf(stderr, "%s %s: supported\n", wc->op, R[i].what);
            CHECK(!winograd()->supports(winograd(), p.node, p.in, p.out));
            problem_free(&p);
        }
    /* weights known only at run time: nothing to transform ahead */
    problem p;
    CHECK(problem_init(&p, &base, 1, 1, 1, 0, ctx));
    CHECK(winograd()->supports(winograd(), p.node, p.in, p.out));
    void *wdata = p.t[1].data;
    p.t[1].data = NULL;
    CHECK(!winograd()->supports(winograd(), p.node, p.in, p.out));
    p.t[1].data = wdata;
    problem_free(&p);
}

/* Configs and shapes that must fail, with a message naming the cause. */
static void test_must_fail(wpk_context *ctx) {
    problem p;
    CHECK(problem_init(&p, &CASES[7], 1, 1, 1, 0, ctx));
    tune_task task;
    tune_task_init(&task, winograd(), p.node, p.in, p.out);
    CHECK(!strcmp(task.key, "conv2d_winograd:n1,c16,h10,w9,k8,r3,s3,st1,1,pd0,1,2,0,dl1,1,g1"));
    /* the direct conv's FLOPs (a 10x8 output), so GFLOP/s compare across implementations */
    CHECK(task.flops == 2LL * 8 * 10 * 8 * 16 * 9);
    cpu_kernel k;
    CHECK_ERR(ctx, cpu_kernel_build(ctx, &task, 0, "m=3", NULL, &k), WPK_ERR_INVALID_ARG, "'m'");
    CHECK_ERR(ctx, cpu_kernel_build(ctx, &task, 0, "tile_q=2", NULL, &k), WPK_ERR_INVALID_ARG,
              "no knob 'tile_q'");
    tune_space sp;
    winograd()->space(winograd(), &task, &sp);
    tune_config cfg;
    winograd()->default_config(winograd(), &task, &sp, &cfg);
    te_ctx c;
    te_ctx_init(&c, ctx);
    tune_build b;
    tune_config bad = cfg;
    bad.choice[0] = sp.knobs[0].nvalues;
    CHECK_ERR(ctx, winograd()->build(winograd(), &c, &task, &sp, &bad, &b), WPK_ERR_INVALID_ARG,
              sp.knobs[0].name);
    /* the algorithm itself refuses what Winograd does not compute */
    te_tensor *x = te_placeholder(&c, "x", TE_F32, 5, (const int64_t[]){1, 2, 8, 8, 8});
    te_tensor *w6 = te_placeholder(&c, "w", TE_F32, 6, (const int64_t[]){2, 2, 3, 3, 8, 8});
    te_tensor *w5 = te_placeholder(&c, "w5", TE_F32, 6, (const int64_t[]){2, 2, 5, 5, 8, 8});
    te_tensor *u = te_winograd_weight(&c, "u", w6, 4);
    CHECK(x && w6 && u && u->ndim == 5 && u->shape[0] == 6 && u->shape[3] == 16);
    CHECK(!te_winograd_weight(&c, "u3", w6, 3) && strstr(wpk_context_error(ctx), "tile size 3"));
    CHECK(!te_winograd_weight(&c, "u5", w5, 2) && strstr(wpk_context_error(ctx), "not 3x3"));
    te_winograd_params wp = {.m = 4, .conv = te_conv2d_default_params(), .channels = 16};
    wp.conv.stride[0] = 2;
    CHECK(!te_conv2d_winograd(&c, "s2", x, u, &wp, NULL, NULL) &&
          strstr(wpk_context_error(ctx), "stride 1"));
    wp.conv = te_conv2d_default_params();
    wp.m = 2;
    CHECK(!te_conv2d_winograd(&c, "m2", x, u, &wp, NULL, NULL) &&
          strstr(wpk_context_error(ctx), "needs 4x4"));
    wp.m = 4;
    wp.channels = 17;
    CHECK(!te_conv2d_winograd(&c, "k17", x, u, &wp, NULL, NULL) &&
          strstr(wpk_context_error(ctx), "17 output channels"));
    wp.channels = 16;
    CHECK(te_conv2d_winograd(&c, "ok", x, u, &wp, NULL, NULL) != NULL);
    te_ctx_free(&c);
    problem_free(&p);
}

/* A whole block is a row of tiles (an image's tiles, for a thread's share of the channels)
 * and V only its tiles: a register tile that does not divide them (8 on 13x13's 7 tiles, or
 * its 49, at m = 2) must read no V past the block's buffer. The loop interpreter checks every
 * access (the compiled kernel read it unnoticed, or crashed on 56x56). */
static void test_whole_bounds(wpk_context *ctx) {
    problem p;
    CHECK(problem_init(&p, &CASES[3], 1, 1, 1, 0, ctx));
    tune_task task;
    tune_task_init(&task, winograd(), p.node, p.in, p.out);
    static const char *const configs[] = {"m=2,tile_p=8,parallel=5", "m=2,tile_p=8,parallel=6",
                                          "m=4,tile_p=3,parallel=6", "m=2,tile_p=8,parallel=7",
                                          "m=2,tile_p=8,parallel=8"};
    for (int i = 0; i < 5; i++) {
        te_ctx c;
        te_ctx_init(&c, ctx);
        loop_func *f = NULL;
        CHECK(cpu_kernel_lower(&c, &task, configs[i], &f) == WPK_OK);
        void *args[16] = {0};
        for (int a = 0; f && a < f->nargs && a < 16; a++) args[a] = buffer(f->args[a]->size);
        wpk_status st = f ? loop_interp_run(ctx, f, args) : WPK_ERR_INTERNAL;
        if (st) fprintf(stderr, "whole block %s: %s\n", configs[i], wpk_context_error(ctx));
        CHECK(st == WPK_OK);
        for (int a = 0; a < 16; a++) free(args[a]);
        te_ctx_free(&c);
    }
    problem_free(&p);
}

/* Every allocation of building a kernel (template, lowering, emission) failed in turn: a status
 * with a message each time, never a crash (the sanitizer build checks for leaks). */
static void test_alloc_faults(wpk_context *ctx) {
    problem p;
    CHECK(problem_init(&p, &CASES[3], 1, 1, 1, 0, ctx));
    tune_task task;
    tune_task_init(&task, winograd(), p.node, p.in, p.out);
    long n = 1;
    for (; n < 100000; n++) {
        cpu_kernel k;
        wpk_alloc_fail_at(n);
        wpk_status st = cpu_kernel_build(ctx, &task, 0, NULL, NULL, &k);
        long used = wpk_alloc_count();
        wpk_alloc_fail_at(0);
        if (st == WPK_OK) {
            cpu_kernel_free(&k);
            if (used < n) break; /* no allocation failed: all were tried */
            continue;
        }
        if (st != WPK_ERR_NOMEM || !*wpk_context_error(ctx))
            fprintf(stderr, "allocation %ld failed: %s: %s\n", n, wpk_status_name(st),
                    wpk_context_error(ctx));
        CHECK(st == WPK_ERR_NOMEM && *wpk_context_error(ctx));
    }
    printf("kernel build with each of its %ld allocations failed in turn: ok\n", n - 1);
    problem_free(&p);
}

int main(void) {
    wpk_context *ctx = wpk_context_create();
    CHECK(winograd() != NULL);
    if (!winograd()) CHECK_DONE();
    uint64_t rng = seed_of();
    test_refuses(ctx);
    test_must_fail(ctx);
    test_whole_bounds(ctx);
    test_alloc_faults(ctx);
    test_cases(ctx, &rng);
    wpk_context_free(ctx);
    CHECK_DONE();
}
