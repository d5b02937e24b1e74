/* test_conv_templates.c -- the conv schedule templates (src/kernels) end to end: each
 * template on many conv nodes (odd sizes, 1x1, 7x7, stride 2, asymmetric and SAME padding,
 * dilation, groups, depthwise with and without a channel multiplier, batch > 1, padded channel
 * blocks, weights known only at run time, blocked ConvNCHWc nodes, every epilogue part) under
 * its default config and random legal configs (tune_config_random, fixed seed), built ->
 * pre-packed -> lowered, and run both on the loop interpreter (bounds-checked) and as C
 * compiled by cg_c_compile, against the reference kernels of the nodes (op_conv_ref,
 * op_fused_conv_ref, op_conv_nchwc_ref). Tolerance: max |got - want| <= 1e-5 * max(1,
 * max |want|). Also: the registry's choice of template, task keys and FLOPs, and must-fail
 * configs (a value index outside a knob, a config of another workload's space) that name
 * the knob. Compiled kernels go to the user's kernel cache, whose keys cover the source, the
 * compiler and its flags: the ASan run of the suite reuses the plain run's objects.
 * WPK_TEST_SEED changes the random configs. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "codegen/c/cg_c.h"
#include "kernels/cpu_kernel.h"
#include "ir/graph.h"
#include "loop/interp.h"
#include "loop/lower.h"
#include "ops/blocked.h"
#include "kernels/provider.h"
#include "kernels/conv.h"

#define TOL 1e-5
#define RANDOM_CONFIGS 3 /* per case and template, all interpreted */
/* Compiling is what takes time (a second or more for big unrolled kernels): every config runs
 * on the interpreter; the compiler gets the default config of the template a node gets (and
 * of the other template on every other case) and the first random config when its C is
 * under this size. */
#define COMPILE_MAX_SOURCE (32 * 1024)

typedef struct conv_case {
    const char *name;
    const char *op;          /* Conv, FusedConv or ConvNCHWc */
    int64_t n, c, h, w, k, kh, kw;
    int64_t stride, dil, group;
    int64_t pads[4];
    const char *auto_pad;    /* NULL: explicit pads */
    bool bias, residual, dynamic_w;
    const char *act;         /* FusedConv / ConvNCHWc activation (NULL: none) */
    float alpha, lo, hi;     /* LeakyRelu alpha; Clip bounds */
    int64_t block;           /* ConvNCHWc: lanes of X (1: NCHW) ... */
    int64_t oblock;          /* ... and of the output */
    const char *expect;      /* the template kernel_provider_for picks */
} conv_case;

static const conv_case CASES[] = {
    {"odd 3x3", "Conv", 1, 8, 9, 11, 16, 3, 3, 1, 1, 1, {1, 1, 1, 1}, NULL, true, false, false,
     NULL, 0, 0, 0, 0, 0, "conv2d_nchwc"},
    {"batch 2, padded blocks, stride 2, asymmetric pads, residual", "FusedConv", 2, 16, 7, 10, 24,
     3, 3, 2, 1, 1, {1, 0, 2, 1}, NULL, true, true, false, "Relu", 0, 0, 0, 0, 0, "conv2d_nchwc"},
    {"stem 7x7 stride 2", "FusedConv", 1, 3, 13, 12, 8, 7, 7, 2, 1, 1, {3, 3, 3, 3}, NULL, true,
     false, false, "Relu", 0, 0, 0, 0, 0, "conv2d_nchwc"},
    {"1x1", "Conv", 1, 32, 6, 5, 16, 1, 1, 1, 1, 1, {0, 0, 0, 0}, NULL, false, false, false, NULL,
     0, 0, 0, 0, 0, "conv2d_nchwc"},
    {"1x1 stride 2", "FusedConv", 1, 24, 9, 9, 40, 1, 1, 2, 1, 1, {0, 0, 0, 0}, NULL, true, false,
     false, "HardSwish", 0, 0, 0, 0, 0, "conv2d_nchwc"},
    {"dilation 2", "FusedConv", 1, 16, 10, 9, 16, 3, 3, 1, 2, 1, {2, 2, 2, 2}, NULL, false, false,
     false, "Sigmoid", 0, 0, 0, 0, 0, "conv2d_nchwc"},
    {"depthwise + relu6", "FusedConv", 1, 16, 8, 7, 16, 3, 3, 1, 1, 16, {1, 1, 1, 1}, NULL, true,
     false, false, "Clip", 0, 0.0f, 6.0f, 0, 0, "conv2d_nchwc"},
    {"depthwise stride 2, batch 2", "Conv", 2, 24, 9, 9, 24, 3, 3, 2, 1, 24, {1, 1, 1, 1}, NULL,
     false, false, false, NULL, 0, 0, 0, 0, 0, "conv2d_nchwc"},
    {"2 groups of 16", "FusedConv", 1, 32, 6, 6, 32, 3, 3, 1, 1, 2, {1, 1, 1, 1}, NULL, true,
     true, false, "LeakyRelu", 0.1f, 0, 0, 0, 0, "conv2d_nchwc"},
    {"SAME_UPPER", "Conv", 1, 8, 7, 8, 8, 3, 3, 2, 1, 1, {0, 0, 0, 0}, "SAME_UPPER", true, false,
     false, NULL, 0, 0, 0, 0, 0, "conv2d_nchwc"},
    {"blocked, padded lanes, residual", "ConvNCHWc", 1, 16, 7, 7, 20, 3, 3, 1, 1, 1,
     {1, 1, 1, 1}, NULL, true, true, false, "LeakyRelu", 0.2f, 0, 0, 8, 8, "conv2d_nchwc"},
    {"blocked direct stem", "ConvNCHWc", 1, 3, 9, 10, 16, 3, 3, 2, 1, 1, {1, 1, 1, 1}, NULL, true,
     false, false, "Relu", 0, 0, 0, 1, 8, "conv2d_nchwc"},
    {"blocked depthwise, batch 2", "ConvNCHWc", 2, 16, 6, 6, 16, 3, 3, 1, 1, 16, {1, 1, 1, 1},
     NULL, true, false, false, NULL, 0, 0, 0, 8, 8, "conv2d_nchwc"},
    {"blocked 1x1 stride 2, 16 lanes", "ConvNCHWc", 1, 32, 8, 8, 32, 1, 1, 2, 1, 1,
     {0, 0, 0, 0}, NULL, true, false, false, "Relu", 0, 0, 0, 16, 16, "conv2d_nchwc"},
    /* ResNet's last 3x3 in small: a 7x7 output of 4 channel blocks (oc_tile 2 tiles) */
    {"blocked 7x7 output, 4 channel blocks", "ConvNCHWc", 1, 16, 7, 7, 32, 3, 3, 1, 1, 1,
     {1, 1, 1, 1}, NULL, true, true, false, "Relu", 0, 0, 0, 8, 8, "conv2d_nchwc"},
    {"few output channels", "Conv", 1, 3, 10, 10, 4, 3, 3, 1, 1, 1, {1, 1, 1, 1}, NULL, true,
     false, false, NULL, 0, 0, 0, 0, 0, "conv2d_nchw"},
    {"depthwise x2 multiplier", "FusedConv", 1, 4, 9, 9, 8, 3, 3, 2, 1, 4, {1, 1, 1, 1}, NULL,
     true, false, false, "Tanh", 0, 0, 0, 0, 0, "conv2d_nchw"},
    {"3 groups of odd channels", "FusedConv", 1, 6, 7, 7, 9, 3, 3, 1, 1, 3, {1, 1, 1, 1}, NULL,
     true, true, false, "Gelu", 0, 0, 0, 0, 0, "conv2d_nchw"},
    {"weights at run time, batch 2", "Conv", 2, 5, 8, 8, 12, 3, 3, 1, 1, 1, {0, 1, 1, 0}, NULL,
     false, false, true, NULL, 0, 0, 0, 0, 0, "conv2d_nchw"},
    {"dilation 2 stride 2, 1 channel", "FusedConv", 1, 1, 12, 11, 1, 3, 3, 2, 2, 1, {2, 1, 0, 2},
     NULL, true, true, false, "SiLU", 0, 0, 0, 0, 0, "conv2d_nchw"},
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

static unsigned rng_state = 12345;
static float frand(void) {
    rng_state = rng_state * 1103515245u + 12345u;
    return (float)((rng_state >> 9) & 0xffff) / 32768.0f - 1.0f;
}

static float *buffer(int64_t n) {
    float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));
    for (int64_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

/* One case's node and tensors: in[] as the node sees them (blocked for ConvNCHWc). */
typedef struct problem {
    ir_graph *g;
    ir_node *node;
    ir_tensor t[5];          /* X, W, B, Z, Y */
    ir_tensor *in[4], *out[1];
    float *wdata;            /* W's data for the kernel (the node's W has none when dynamic) */
    int64_t ny;
    float *want;
} problem;

/* [N, C, H, W] data as [N, C/b, H, W, b] with zero lanes past C. */
static float *to_blocked(const float *x, int64_t n, int64_t c, int64_t hw, int64_t b) {
    int64_t cb = (c + b - 1) / b;
    float *y = aligned_alloc(64, (size_t)((n * cb * hw * b * 4 + 63) / 64 * 64));
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < cb * b; ch++)
            for (int64_t s = 0; s < hw; s++)
                y[((i * cb + ch / b) * hw + s) * b + ch % b] =
                    ch < c ? x[(i * c + ch) * hw + s] : 0.0f;
    return y;
}

static bool problem_init(problem *p, const conv_case *cc, wpk_context *ctx) {
    memset(p, 0, sizeof *p);
    p->g = ir_graph_create();
    bool blocked = !strcmp(cc->op, "ConvNCHWc"), onnx = !strcmp(cc->op, "Conv");
    int nin = 3 + (cc->residual ? 1 : 0);
    int k = ir_graph_add_node(p->g, cc->name, cc->op, onnx ? "" : "wpk", onnx ? 17 : 1, nin, 1);
    ir_node *n = p->node = &p->g->nodes[k];
    ir_graph *g = p->g;
    ir_node_set_ints(g, n, "strides", (const int64_t[]){cc->stride, cc->stride}, 2);
    ir_node_set_ints(g, n, "dilations", (const int64_t[]){cc->dil, cc->dil}, 2);
    if (cc->auto_pad) ir_node_set_str(g, n, "auto_pad", cc->auto_pad);
    else ir_node_set_ints(g, n, "pads", cc->pads, 4);
    ir_node_set_int(g, n, "group", cc->group);
    if (cc->act) {
        ir_node_set_str(g, n, "activation", cc->act);
        if (!strcmp(cc->act, "LeakyRelu")) ir_node_set_float(g, n, "alpha", cc->alpha);
        if (!strcmp(cc->act, "Clip")) {
            ir_node_set_float(g, n, "clip_min", cc->lo);
            ir_node_set_float(g, n, "clip_max", cc->hi);
        }
    }
    const int64_t cg = cc->c / cc->group, hw = cc->h * cc->w;
    ir_tensor *x = &p->t[0], *w = &p->t[1], *b = &p->t[2], *z = &p->t[3], *y = &p->t[4];
    *x = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {cc->n, cc->c, cc->h, cc->w},
                     buffer(cc->n * cc->c * hw)};
    *w = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {cc->k, cg, cc->kh, cc->kw},
                     buffer(cc->k * cg * cc->kh * cc->kw)};
    *b = (ir_tensor){WPK_DTYPE_FLOAT32, 1, {cc->k}, buffer(cc->k)};
    if (blocked) {
        ir_node_set_int(g, n, "channels", cc->k);
        bool dw = cc->group > 1 && cg == 1 && cc->group == cc->k;
        if (cc->block > 1) {
            float *xb = to_blocked(x->data, cc->n, cc->c, hw, cc->block);
            free(x->data);
            *x = (ir_tensor){WPK_DTYPE_FLOAT32, 5,
                             {cc->n, (cc->c + cc->block - 1) / cc->block, cc->h, cc->w, cc->block},
                             xb};
        }
        ir_tensor wp = {WPK_DTYPE_FLOAT32, 6, {0}, NULL};
        blocked_weight_dims(cc->k, cg, cc->kh, cc->kw, cc->block, cc->oblock, dw, wp.dims);
        wp.data = aligned_alloc(64, (size_t)((ir_numel(&wp) * 4 + 63) / 64 * 64));
        blocked_pack_weights(w->data, cc->k, cg, cc->kh, cc->kw, cc->block, cc->oblock, dw,
                             wp.data);
        free(w->data);
        *w = wp;
    }
    p->in[0] = x, p->in[1] = w, p->in[2] = cc->bias ? b : NULL;
    p->out[0] = y;
    *y = (ir_tensor){WPK_DTYPE_FLOAT32, 0, {0}, NULL};
    if (ir_op_get(n->op)->shape(ctx, n, p->in, p->out)) {
        fprintf(stderr, "%s: shape: %s\n", cc->name, wpk_context_error(ctx));
        return false;
    }
    p->ny = ir_numel(y);
    if (cc->residual) {
        *z = (ir_tensor){WPK_DTYPE_FLOAT32, y->ndim, {0}, buffer(p->ny)};
        memcpy(z->dims, y->dims, sizeof z->dims);
        if (blocked) /* the blocked layout's padding lanes are zero */
            for (int64_t i = 0; i < p->ny; i++)
                if ((i % cc->oblock) + ((i / (cc->oblock * y->dims[2] * y->dims[3])) %
                                        y->dims[1]) * cc->oblock >= cc->k)
                    ((float *)z->data)[i] = 0.0f;
        p->in[3] = z;
    }
    y->data = aligned_alloc(64, (size_t)((p->ny * 4 + 63) / 64 * 64));
    p->want = malloc(sizeof(float) * (size_t)p->ny);
    if (ir_op_get(n->op)->ref(ctx, n, p->in, p->out)) {
        fprintf(stderr, "%s: reference: %s\n", cc->name, wpk_context_error(ctx));
        return false;
    }
    memcpy(p->want, y->data, sizeof(float) * (size_t)p->ny);
    /* weights unknown at compile time: the template must not see their data */
    p->wdata = p->t[1].data;
    if (cc->dynamic_w) p->t[1].data = NULL;
    return true;
}

static void problem_free(problem *p) {
    p->t[1].data = p->wdata;
    for (int i = 0; i < 5; i++) free(p->t[i].data);
    free(p->want);
    ir_graph_free(p->g);
}

static bool close_enough(const problem *p, const float *got, const char *what) {
    double err = 0, big = 1;
    int64_t at = 0;
    for (int64_t i = 0; i < p->ny; i++) {
        double d = fabs((double)got[i] - p->want[i]);
        if (!(d <= err)) err = d, at = i;
        if (fabs(p->want[i]) > big) big = fabs(p->want[i]);
    }
    if (err <= TOL * big) return true;
    fprintf(stderr, "%s: [%lld] = %g, want %g (max error %g)\n", what, (long long)at, got[at],
            p->want[at], err);
    return false;
}

/* Build cfg, pre-pack, lower; run interpreted (and compiled when `compile`). */
static void run_config(wpk_context *ctx, const conv_case *cc, problem *p, const kernel_provider *t,
                       const tune_task *task, const tune_space *sp, const tune_config *cfg,
                       bool compile, const char *label) {
    strbuf cs = {0};
    tune_config_print(sp, cfg, &cs);
    char what[512];
    snprintf(what, sizeof what, "%s [%s, %s %s]", cc->name, t->name, label, cs.s ? cs.s : "");
    sb_free(&cs);
    te_ctx c;
    te_ctx_init(&c, ctx);
    tune_build b;
    wpk_status st = t->build(t, &c, task, sp, cfg, &b);
    if (st) {
        fprintf(stderr, "%s: build: %s\n", what, wpk_context_error(ctx));
        CHECK(st == WPK_OK);
        te_ctx_free(&c);
        return;
    }
    /* the kernel's arguments: the node's present inputs (or their packed forms), the output */
    void *args[TUNE_MAX_ARGS * 2];
    float *packed[TUNE_MAX_ARGS] = {0};
    int ai = 0;
    for (int i = 0; i < task->nin && ai < b.ninputs; i++)
        if (p->in[i]) args[ai++] = i == 1 ? p->wdata : p->in[i]->data;
    CHECK(ai == b.ninputs);
    for (int i = 0; i < b.ninputs; i++) {
        if (!b.prepack[i]) continue;
        CHECK(te_tensor_is_constant(b.prepack[i]));
        te_schedule *ps = te_schedule_create(&c, &b.prepack[i], 1);
        loop_func *pf = NULL;
        CHECK(ps && loop_lower(&c, ps, "prepack", (te_tensor *[]){b.prepack_src[i], b.prepack[i]},
                               2, &pf) == WPK_OK);
        if (!pf) break;
        int64_t size = 1;
        for (int d = 0; d < b.prepack[i]->ndim; d++) size *= b.prepack[i]->shape[d];
        packed[i] = aligned_alloc(64, (size_t)((size * 4 + 63) / 64 * 64));
        CHECK(loop_interp_run(ctx, pf, (void *[]){args[i], packed[i]}) == WPK_OK);
        args[i] = packed[i];
    }
    float *y = p->t[4].data;
    args[b.ninputs] = y;
    CHECK(b.nargs == b.ninputs + 1);
    loop_func *f = NULL;
    st = loop_lower(&c, b.schedule, "conv", b.args, b.nargs, &f);
    if (st) fprintf(stderr, "%s: lower: %s\n", what, wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    if (f) {
        for (int64_t i = 0; i < p->ny; i++) y[i] = NAN;
        st = loop_interp_run(ctx, f, args);
        if (st) fprintf(stderr, "%s: interpreter: %s\n", what, wpk_context_error(ctx));
        CHECK(st == WPK_OK);
        char w2[600];
        snprintf(w2, sizeof w2, "%s interpreted", what);
        CHECK(!st && close_enough(p, y, w2));
    }
    strbuf src = {0};
    cg_c_options o = cg_c_default_options();
    if (f && compile) {
        st = cg_c_emit(ctx, f, &o, &src);
        if (st) fprintf(stderr, "%s: emit: %s\n", what, wpk_context_error(ctx));
        CHECK(st == WPK_OK);
        compile = !st && (!strcmp(label, "default") || src.len < COMPILE_MAX_SOURCE);
    }
    if (f && compile) {
        cg_module *m = NULL;
        st = cg_c_compile(ctx, src.s, &m);
        if (st) fprintf(stderr, "%s: emit/compile: %s\n", what, wpk_context_error(ctx));
        CHECK(st == WPK_OK);
        cg_kernel_fn fn = m ? cg_module_fn(m, "conv") : NULL;
        CHECK(!m || fn);
        if (fn) {
            for (int64_t i = 0; i < p->ny; i++) y[i] = NAN;
            fn(args);
            char w2[600];
            snprintf(w2, sizeof w2, "%s compiled", what);
            CHECK(close_enough(p, y, w2));
        }
        cg_module_free(m);
    }
    sb_free(&src);
    for (int i = 0; i < TUNE_MAX_ARGS; i++) free(packed[i]);
    te_ctx_free(&c);
}

static uint64_t seed_of(void) {
    const char *s = getenv("WPK_TEST_SEED");
    return s && *s ? strtoull(s, NULL, 10) : 20240604u;
}

static const tune_knob *knob(const tune_space *s, const char *name) {
    for (int i = 0; i < s->nknobs; i++)
        if (!strcmp(s->knobs[i].name, name)) return &s->knobs[i];
    return NULL;
}

/* Every template that takes the case, under default and random configs (and the default with each
 * oc_tile). */
static void test_case(wpk_context *ctx, int index, const conv_case *cc, uint64_t *rng) {
    problem p;
    bool ok = problem_init(&p, cc, ctx);
    CHECK(ok);
    if (!ok) return;
    const kernel_provider *chosen = kernel_provider_for(p.node, p.in, p.out);
    CHECK(chosen && !strcmp(chosen->name, cc->expect));
    if (!chosen || strcmp(chosen->name, cc->expect))
        fprintf(stderr, "%s: template %s, expected %s\n", cc->name, chosen ? chosen->name : "none",
                cc->expect);
    for (const kernel_provider *const *t = kernel_providers(); *t; t++) {
        if (!(*t)->supports((*t), p.node, p.in, p.out)) continue;
        tune_task task;
        tune_task_init(&task, *t, p.node, p.in, p.out);
        CHECK(!strncmp(task.key, (*t)->name, strlen((*t)->name)) && task.flops > 0);
        tune_space sp;
        (*t)->space((*t), &task, &sp);
        CHECK(sp.nknobs > 0 && tune_space_size(&sp) >= 1);
        tune_config cfg;
        (*t)->default_config((*t), &task, &sp, &cfg);
        bool mine = *t == chosen;
        run_config(ctx, cc, &p, *t, &task, &sp, &cfg, mine || index % 2 == 0, "default");
        /* every register tile over channel blocks, on the default's other knobs */
        const tune_knob *oct = knob(&sp, "oc_tile");
        for (int v = 0; oct && v < oct->nvalues; v++) {
            int k = (int)(oct - sp.knobs);
            if (v == cfg.choice[k]) continue;
            tune_config c2 = cfg;
            c2.choice[k] = v;
            run_config(ctx, cc, &p, *t, &task, &sp, &c2, mine, "oc_tile");
        }
        for (int r = 0; r < RANDOM_CONFIGS; r++) {
            tune_config_random(&sp, rng, &cfg);
            run_config(ctx, cc, &p, *t, &task, &sp, &cfg, mine && r == 0, "random");
        }
    }
    problem_free(&p);
}

/* Keys and FLOPs of one workload; the registry declines what no template takes. */
static void test_registry(wpk_context *ctx) {
    problem p;
    const conv_case *cc = &CASES[1];
    CHECK(problem_init(&p, cc, ctx));
    const kernel_provider *t = kernel_provider_for(p.node, p.in, p.out);
    CHECK(t != NULL);
    if (!t) return;
    tune_task task;
    tune_task_init(&task, t, p.node, p.in, p.out);
    CHECK(!strcmp(task.key, "conv2d_nchwc:n2,c16,h7,w10,k24,r3,s3,st2,2,pd1,0,2,1,dl1,1,g1,"
                            "ep=bias+res+relu"));
    /* 2 x N x K x OH x OW x C x KH x KW: OH = (7 + 3 - 3)/2 + 1 = 4, OW = (10 + 1 - 3)/2 + 1 = 5 */
    CHECK(task.flops == 2LL * 2 * 24 * 4 * 5 * 16 * 9);
    CHECK(task.node == p.node && task.nin == 4 && task.nout == 1);
    /* a Relu node is no conv */
    int k = ir_graph_add_node(p.g, "relu", "Relu", "", 17, 1, 1);
    CHECK(kernel_provider_for(&p.g->nodes[k], p.in, p.out) == NULL);
    problem_free(&p);
}

static bool knob_has(const tune_space *s, const char *name, int64_t v) {
    const tune_knob *k = knob(s, name);
    for (int i = 0; k && i < k->nvalues; i++)
        if (k->values[i] == v) return true;
    return false;
}

/* Configs the templates must refuse, each with WPK_ERR_INVALID_ARG naming the knob. */
static void test_must_fail(wpk_context *ctx) {
    problem p, q;
    CHECK(problem_init(&p, &CASES[0], ctx));  /* 9x11 output */
    CHECK(problem_init(&q, &CASES[3], ctx));  /* 1x1: a 6x5 output */
    for (const kernel_provider *const *t = kernel_providers(); *t; t++) {
        if (!(*t)->supports((*t), p.node, p.in, p.out)) continue;
        tune_task task, small;
        tune_task_init(&task, *t, p.node, p.in, p.out);
        tune_space sp;
        (*t)->space((*t), &task, &sp);
        tune_config cfg;
        (*t)->default_config((*t), &task, &sp, &cfg);
        te_ctx c;
        te_ctx_init(&c, ctx);
        tune_build b;
        /* a value index past the knob's values */
        int k = sp.nknobs - 1;
        tune_config bad = cfg;
        bad.choice[k] = sp.knobs[k].nvalues;
        CHECK_ERR(ctx, (*t)->build((*t), &c, &task, &sp, &bad, &b), WPK_ERR_INVALID_ARG,
                  sp.knobs[k].name);
        bad = cfg;
        bad.choice[0] = -1;
        CHECK_ERR(ctx, (*t)->build((*t), &c, &task, &sp, &bad, &b), WPK_ERR_INVALID_ARG,
                  sp.knobs[0].name);
        /* a config from another workload's space: an ow_block this workload has (9x11
         * output) and the small one (a 5-wide output) has not */
        if (!(*t)->supports((*t), q.node, q.in, q.out)) {
            te_ctx_free(&c);
            continue;
        }
        tune_task_init(&small, *t, q.node, q.in, q.out);
        tune_space ssp;
        (*t)->space((*t), &small, &ssp);
        int64_t v = -1;
        const tune_knob *ow = knob(&sp, "ow_block");
        for (int j = ow ? ow->nvalues - 1 : -1; j >= 0 && v < 0; j--)
            if (!knob_has(&ssp, "ow_block", ow->values[j])) v = ow->values[j];
        tune_config_set(&sp, &cfg, "ow_block", v);
        CHECK(v > 0);
        char want[96];
        snprintf(want, sizeof want, "knob 'ow_block' = %lld is not a legal value", (long long)v);
        CHECK_ERR(ctx, (*t)->build((*t), &c, &small, &sp, &cfg, &b), WPK_ERR_INVALID_ARG, want);
        /* and the text form of a value not in the space names the knob */
        char text[64];
        snprintf(text, sizeof text, "ow_block=%lld", (long long)v);
        CHECK_ERR(ctx, tune_config_parse(ctx, &ssp, text, &cfg), WPK_ERR_INVALID_ARG, "'ow_block'");
        te_ctx_free(&c);
    }
    problem_free(&p);
    problem_free(&q);
}

/* A record stored before oc_tile existed names the other knobs only: it resolves to the one
 * channel block it was measured with, not to today's default of two. */
static void test_unnamed_knob(wpk_context *ctx) {
    const conv_case *cc = NULL;
    for (int i = 0; i < NCASES; i++)
        if (!strcmp(CASES[i].name, "blocked 7x7 output, 4 channel blocks")) cc = &CASES[i];
    problem p;
    CHECK(cc && problem_init(&p, cc, ctx));
    if (!cc) return;
    tune_task task;
    tune_task_init(&task, &tune_conv2d_nchwc, p.node, p.in, p.out);
    tune_space sp;
    tune_conv2d_nchwc.space(&tune_conv2d_nchwc, &task, &sp);
    tune_config cfg;
    /* today's default spans two blocks where a 7-column row fits twice in the registers
       (AVX-512's 16 accumulators; on AVX2 the 16-lane blocks leave 6) */
    CHECK(cpu_config_resolve(ctx, &task, &sp, NULL, &cfg) == WPK_OK &&
          tune_config_get(&sp, &cfg, "oc_tile", 0) == (tune_vector_floats() >= 16 ? 2 : 1));
    CHECK(cpu_config_resolve(ctx, &task, &sp, "ow_block=7,oh_block=1", &cfg) == WPK_OK &&
          tune_config_get(&sp, &cfg, "oc_tile", 0) == 1 &&
          tune_config_get(&sp, &cfg, "ow_block", 0) == 7);
    CHECK(cpu_config_resolve(ctx, &task, &sp, "ow_block=7,oc_tile=2", &cfg) == WPK_OK &&
          tune_config_get(&sp, &cfg, "oc_tile", 0) == 2);
    problem_free(&p);
}

int main(void) {
    wpk_context *ctx = wpk_context_create();
    uint64_t rng = seed_of();
    test_registry(ctx);
    test_must_fail(ctx);
    test_unnamed_knob(ctx);
    for (int i = 0; i < NCASES; i++) test_case(ctx, i, &CASES[i], &rng);
    wpk_context_free(ctx);
    CHECK_DONE();
}
