/* conv_resnet18.c -- the twelve convolutions of ResNet-18 at batch 1: GFLOP/s of wpk's default
 * schedules (conv templates -> loop_lower -> cg_c_emit -> cg_c_compile), of oneDNN at its best
 * (memory formats `any`, reorders outside the timed region, algorithm `auto`), and of the
 * machine's FMA peak, measured in one run with the same timing method and thread count.
 *
 *     conv_resnet18 [--threads 1,2] [--min-ms 200] [--only c2,c6] [--nchw]
 *                   [--config ow_block=7,oc_tile=2]
 *
 * Each conv runs as the layout pass (-O3) hands it to the templates: a wpk::ConvNCHWc node on
 * blocked tensors (NCHW16c on AVX-512; the RGB stem reads its 3-channel NCHW input directly)
 * with weights packed at compile time, bias and ReLU fused. --nchw also measures the Conv node
 * in plain NCHW (the template transforms input and output inside the kernel and packs the
 * weights through tune_build.prepack). --config replaces knobs of the blocked kernels' default
 * config (a knob a conv's space lacks, or a value it does not allow, is an error naming the
 * conv). oneDNN computes the same: bias and a ReLU post-op.
 * Every output is checked once against the reference kernel (op_fused_conv_ref, which runs
 * op_conv_ref) before anything is timed.
 *
 * Timing: after a warm-up, samples alternate between wpk and oneDNN (so load from other
 * processes hits both alike) until each has run for --min-ms; a sample is the mean over enough
 * calls to last about 5 ms. Reported: median and best GFLOP/s and every sample, by wall time
 * and by the process's CPU time per thread (what the cores did for it: on a machine shared
 * with other work the wall time of a sample also holds other processes' time slices). The FMA
 * peak replicates bench/fma_peak.c's method (independent FMA chains on the widest vectors) at
 * the same thread count, by wall time. Output: a markdown table per thread count with the
 * ratio wpk / oneDNN per conv and their geometric means, then provenance and raw samples. */
#define _GNU_SOURCE

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dnnl.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/target.h"
#include "codegen/c/cg_c.h"
#include "kernels/cpu_kernel.h"
#include "ir/graph.h"
#include "loop/lower.h"
#include "ops/blocked.h"
#include "kernels/provider.h"

#define MAX_SAMPLES 128
#define SAMPLE_S 0.005
#define MAX_THREADS 8
#define TOL 1e-4

typedef struct conv_spec {
    const char *name;
    int64_t c, hw, k, r, s, p;
} conv_spec;

/* Issue 4's c1..c12 (ResNet-18's distinct convs at batch 1). */
static const conv_spec CONVS[] = {
    {"c1", 3, 224, 64, 7, 2, 3},     {"c2", 64, 56, 64, 3, 1, 1},    {"c3", 64, 56, 64, 1, 1, 0},
    {"c4", 64, 56, 128, 3, 2, 1},    {"c5", 64, 56, 128, 1, 2, 0},   {"c6", 128, 28, 128, 3, 1, 1},
    {"c7", 128, 28, 256, 3, 2, 1},   {"c8", 128, 28, 256, 1, 2, 0},  {"c9", 256, 14, 256, 3, 1, 1},
    {"c10", 256, 14, 512, 3, 2, 1},  {"c11", 256, 14, 512, 1, 2, 0}, {"c12", 512, 7, 512, 3, 1, 1},
};
#define NCONVS ((int)(sizeof CONVS / sizeof CONVS[0]))

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what, const char *msg) {
    fprintf(stderr, "conv_resnet18: %s: %s\n", what, msg);
    exit(2);
}

static void *alloc64(size_t bytes) {
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) die("out of memory", "");
    return p;
}

static float *random_floats(int64_t n, unsigned *seed) {
    float *p = alloc64(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        p[i] = (float)((*seed >> 9) & 0xffff) / 32768.0f - 1.0f;
    }
    return p;
}

static int64_t out_size(const conv_spec *c) { return (c->hw + 2 * c->p - c->r) / c->s + 1; }
static double flops_of(const conv_spec *c) {
    double o = (double)out_size(c);
    return 2.0 * (double)c->k * (double)c->c * (double)(c->r * c->r) * o * o;
}

/* ---- one conv's data and its reference output ---- */

typedef struct problem {
    const conv_spec *spec;
    int64_t oh;
    float *x, *w, *b;   /* NCHW input, OIHW weight, bias */
    float *ref;         /* NCHW output of the reference kernel: relu(conv + bias) */
} problem;

static ir_node *conv_node(ir_graph *g, const conv_spec *c, bool blocked) {
    int k = ir_graph_add_node(g, c->name, blocked ? "ConvNCHWc" : "FusedConv", "wpk", 1, 3, 1);
    if (k < 0) die("graph", "out of memory");
    ir_node *n = &g->nodes[k];
    ir_node_set_ints(g, n, "strides", (const int64_t[]){c->s, c->s}, 2);
    ir_node_set_ints(g, n, "pads", (const int64_t[]){c->p, c->p, c->p, c->p}, 4);
    ir_node_set_ints(g, n, "kernel_shape", (const int64_t[]){c->r, c->r}, 2);
    ir_node_set_str(g, n, "activation", "Relu");
    if (blocked) ir_node_set_int(g, n, "channels", c->k);
    return n;
}

static void problem_init(problem *pb, const conv_spec *c, wpk_context *ctx) {
    unsigned seed = 42;
    pb->spec = c;
    pb->oh = out_size(c);
    pb->x = random_floats(c->c * c->hw * c->hw, &seed);
    pb->w = random_floats(c->k * c->c * c->r * c->r, &seed);
    pb->b = random_floats(c->k, &seed);
    pb->ref = alloc64(sizeof(float) * (size_t)(c->k * pb->oh * pb->oh));
    ir_graph *g = ir_graph_create();
    ir_node *n = conv_node(g, c, false);
    ir_tensor x = {WPK_DTYPE_FLOAT32, 4, {1, c->c, c->hw, c->hw}, pb->x};
    ir_tensor w = {WPK_DTYPE_FLOAT32, 4, {c->k, c->c, c->r, c->r}, pb->w};
    ir_tensor b = {WPK_DTYPE_FLOAT32, 1, {c->k}, pb->b};
    ir_tensor y = {WPK_DTYPE_FLOAT32, 4, {1, c->k, pb->oh, pb->oh}, pb->ref};
    ir_tensor *in[] = {&x, &w, &b}, *out[] = {&y};
    if (ir_op_get(n->op)->ref(ctx, n, in, out)) die("reference", wpk_context_error(ctx));
    ir_graph_free(g);
}

static void problem_free(problem *pb) {
    free(pb->x), free(pb->w), free(pb->b), free(pb->ref);
}

/* Largest |got - want| relative to the largest |want|. */
static double rel_err(const float *got, const float *want, int64_t n) {
    double e = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= e)) e = d; /* NaN counts */
        if (fabs(want[i]) > m) m = fabs(want[i]);
    }
    return m > 0 ? e / m : e;
}

/* ---- wpk: template -> lower -> emit -> compile ---- */

/* The block the layout pass uses: a vector of floats (pass_options.vector_floats). */
static int64_t block_lanes(void) {
    return target_vector_floats() >= 8 ? target_vector_floats() : 8;
}

typedef struct wpk_conv {
    cg_module *mods[2];
    cg_kernel_fn fn;
    void *args[TUNE_MAX_ARGS * 2];
    float *bufs[4];       /* what this struct owns: packed weight, blocked x, output */
    int nbufs;
    float *y;             /* the kernel's output */
    char config[256];
    char tmpl[64];
} wpk_conv;

static cg_kernel_fn compile_kernel(wpk_context *ctx, te_ctx *c, te_schedule *s, const char *name,
                                   te_tensor *const *args, int nargs, cg_module **mod) {
    loop_func *f;
    if (loop_lower(c, s, name, args, nargs, &f)) die("loop_lower", wpk_context_error(ctx));
    strbuf src = {0};
    cg_c_options o = cg_c_default_options();
    if (cg_c_emit(ctx, f, &o, &src)) die("cg_c_emit", wpk_context_error(ctx));
    if (cg_c_compile(ctx, src.s, mod)) die("cg_c_compile", wpk_context_error(ctx));
    sb_free(&src);
    cg_kernel_fn fn = cg_module_fn(*mod, name);
    if (!fn) die("cg_module_fn", name);
    return fn;
}

/* Build the conv as the node `blocked` says; the weights are packed here, once, outside any
 * timing: by the layout pass's packer for ConvNCHWc, by the template's prepack for Conv. */
static void wpk_conv_build(wpk_conv *k, const problem *pb, bool blocked, const char *config,
                           wpk_context *ctx) {
    const conv_spec *c = pb->spec;
    memset(k, 0, sizeof *k);
    const int64_t blk = block_lanes();
    ir_graph *g = ir_graph_create();
    ir_node *n = conv_node(g, c, blocked);
    ir_tensor tx, tw, tb = {WPK_DTYPE_FLOAT32, 1, {c->k}, pb->b}, ty;
    if (blocked) {
        /* the stem reads NCHW directly (fewer channels than a block), as the layout pass does */
        int64_t bi = c->c < blk ? 1 : blk;
        tx = (ir_tensor){WPK_DTYPE_FLOAT32, bi > 1 ? 5 : 4,
                         {1, bi > 1 ? (c->c + bi - 1) / bi : c->c, c->hw, c->hw, bi}, NULL};
        float *xb = pb->x;
        if (bi > 1) {
            xb = alloc64(sizeof(float) * (size_t)ir_numel(&tx));
            for (int64_t ch = 0; ch < tx.dims[1] * bi; ch++)
                for (int64_t i = 0; i < c->hw * c->hw; i++)
                    xb[((ch / bi) * c->hw * c->hw + i) * bi + ch % bi] =
                        ch < c->c ? pb->x[ch * c->hw * c->hw + i] : 0.0f;
            k->bufs[k->nbufs++] = xb;
        }
        tx.data = xb;
        tw = (ir_tensor){WPK_DTYPE_FLOAT32, 6, {0}, NULL};
        blocked_weight_dims(c->k, c->c, c->r, c->r, bi, blk, false, tw.dims);
        float *wp = alloc64(sizeof(float) * (size_t)ir_numel(&tw));
        blocked_pack_weights(pb->w, c->k, c->c, c->r, c->r, bi, blk, false, wp);
        k->bufs[k->nbufs++] = wp;
        tw.data = wp;
        ty = (ir_tensor){WPK_DTYPE_FLOAT32, 5, {1, (c->k + blk - 1) / blk, pb->oh, pb->oh, blk},
                         NULL};
    } else {
        tx = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {1, c->c, c->hw, c->hw}, pb->x};
        tw = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {c->k, c->c, c->r, c->r}, pb->w};
        ty = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {1, c->k, pb->oh, pb->oh}, NULL};
    }
    k->y = alloc64(sizeof(float) * (size_t)ir_numel(&ty));
    k->bufs[k->nbufs++] = k->y;
    ir_tensor *in[] = {&tx, &tw, &tb}, *out[] = {&ty};
    const kernel_provider *t = kernel_provider_for(n, in, out);
    if (!t) die(c->name, "no template takes this conv");
    tune_task task;
    tune_task_init(&task, t, n, in, out);
    tune_space sp;
    tune_config cfg;
    t->space(t, &task, &sp);
    if (cpu_config_resolve(ctx, &task, &sp, config, &cfg)) die(c->name, wpk_context_error(ctx));
    strbuf cs = {0};
    tune_config_print(&sp, &cfg, &cs);
    snprintf(k->config, sizeof k->config, "%s", cs.s ? cs.s : "");
    snprintf(k->tmpl, sizeof k->tmpl, "%s", t->name);
    sb_free(&cs);

    te_ctx tc;
    te_ctx_init(&tc, ctx);
    tune_build b;
    if (t->build(t, &tc, &task, &sp, &cfg, &b)) die("template build", wpk_context_error(ctx));
    void *data[] = {tx.data, tw.data, tb.data};
    for (int i = 0; i < b.ninputs; i++) {
        k->args[i] = data[i];
        if (!b.prepack[i]) continue;
        te_schedule *ps = te_schedule_create(&tc, &b.prepack[i], 1);
        if (!ps) die("prepack schedule", wpk_context_error(ctx));
        cg_kernel_fn pack = compile_kernel(ctx, &tc, ps, "prepack",
                                           (te_tensor *[]){b.prepack_src[i], b.prepack[i]}, 2,
                                           &k->mods[1]);
        int64_t size = 1;
        for (int d = 0; d < b.prepack[i]->ndim; d++) size *= b.prepack[i]->shape[d];
        float *packed = alloc64(sizeof(float) * (size_t)size);
        pack((void *[]){data[i], packed});
        k->bufs[k->nbufs++] = packed;
        k->args[i] = packed;
    }
    k->args[b.ninputs] = k->y;
    k->fn = compile_kernel(ctx, &tc, b.schedule, "conv", b.args, b.nargs, &k->mods[0]);
    te_ctx_free(&tc);
    ir_graph_free(g);
}

/* The output as NCHW (unblocked when blocked). */
static void wpk_conv_output(const wpk_conv *k, const problem *pb, bool blocked, float *dst) {
    const int64_t kk = pb->spec->k, plane = pb->oh * pb->oh;
    if (!blocked) {
        memcpy(dst, k->y, sizeof(float) * (size_t)(kk * plane));
        return;
    }
    const int64_t blk = block_lanes();
    for (int64_t ch = 0; ch < kk; ch++)
        for (int64_t i = 0; i < plane; i++)
            dst[ch * plane + i] = k->y[((ch / blk) * plane + i) * blk + ch % blk];
}

static void wpk_conv_free(wpk_conv *k) {
    for (int i = 0; i < k->nbufs; i++) free(k->bufs[i]);
    cg_module_free(k->mods[0]);
    cg_module_free(k->mods[1]);
}

static void wpk_run(void *p) {
    wpk_conv *k = p;
    k->fn(k->args);
}

/* ---- oneDNN ---- */

typedef struct onednn_conv {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, bias, dst;
    dnnl_exec_arg_t args[4];
    char impl[128];
} onednn_conv;

#define DNNL_CHECK(call)                                                                   \
    do {                                                                                   \
        dnnl_status_t s_ = (call);                                                         \
        if (s_ != dnnl_success) {                                                          \
            char m_[64];                                                                   \
            snprintf(m_, sizeof m_, "status %d", (int)s_);                                 \
            die(#call, m_);                                                                \
        }                                                                                  \
    } while (0)

/* user memory (plain layout, given data) -> a new memory of the primitive's layout */
static dnnl_memory_t reordered(onednn_conv *d, const dnnl_memory_desc_t *want, int ndims,
                               const dnnl_dims_t dims, dnnl_format_tag_t tag, void *data) {
    dnnl_memory_desc_t user_md;
    dnnl_memory_t user, mem;
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&user_md, ndims, dims, dnnl_f32, tag));
    DNNL_CHECK(dnnl_memory_create(&user, &user_md, d->eng, data));
    DNNL_CHECK(dnnl_memory_create(&mem, want, d->eng, DNNL_MEMORY_ALLOCATE));
    dnnl_primitive_desc_t rpd;
    dnnl_primitive_t r;
    DNNL_CHECK(dnnl_reorder_primitive_desc_create(&rpd, &user_md, d->eng, want, d->eng, NULL));
    DNNL_CHECK(dnnl_primitive_create(&r, rpd));
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, mem}};
    DNNL_CHECK(dnnl_primitive_execute(r, d->stream, 2, a));
    DNNL_CHECK(dnnl_stream_wait(d->stream));
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_memory_destroy(user);
    return mem;
}

/* Created with the current OpenMP thread count, which oneDNN sizes its work to. */
static void onednn_build(onednn_conv *d, const problem *pb) {
    const conv_spec *c = pb->spec;
    memset(d, 0, sizeof *d);
    DNNL_CHECK(dnnl_engine_create(&d->eng, dnnl_cpu, 0));
    DNNL_CHECK(dnnl_stream_create(&d->stream, d->eng, dnnl_stream_default_flags));
    dnnl_dims_t sd = {1, c->c, c->hw, c->hw}, wd = {c->k, c->c, c->r, c->r}, bd = {c->k},
                dd = {1, c->k, pb->oh, pb->oh};
    dnnl_dims_t strides = {c->s, c->s}, dil = {0, 0}, pad = {c->p, c->p};
    dnnl_memory_desc_t s_any, w_any, b_md, d_any;
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&s_any, 4, sd, dnnl_f32, dnnl_format_tag_any));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&w_any, 4, wd, dnnl_f32, dnnl_format_tag_any));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&d_any, 4, dd, dnnl_f32, dnnl_format_tag_any));
    dnnl_convolution_desc_t cd;
    DNNL_CHECK(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference,
                                                          dnnl_convolution_auto, &s_any, &w_any,
                                                          &b_md, &d_any, strides, dil, pad, pad));
    dnnl_post_ops_t po;
    dnnl_primitive_attr_t attr;
    DNNL_CHECK(dnnl_post_ops_create(&po));
    DNNL_CHECK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f));
    DNNL_CHECK(dnnl_primitive_attr_create(&attr));
    DNNL_CHECK(dnnl_primitive_attr_set_post_ops(attr, po));
    dnnl_primitive_desc_t pd;
    DNNL_CHECK(dnnl_primitive_desc_create(&pd, &cd, attr, d->eng, NULL));
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    snprintf(d->impl, sizeof d->impl, "%s", impl ? impl : "?");
    d->src = reordered(d, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), 4, sd,
                       dnnl_nchw, pb->x);
    d->wei = reordered(d, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), 4, wd,
                       dnnl_oihw, pb->w);
    d->bias = reordered(d, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1), 1, bd,
                        dnnl_a, pb->b);
    DNNL_CHECK(dnnl_memory_create(&d->dst, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0),
                                  d->eng, DNNL_MEMORY_ALLOCATE));
    DNNL_CHECK(dnnl_primitive_create(&d->prim, pd));
    d->args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, d->src};
    d->args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, d->wei};
    d->args[2] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, d->bias};
    d->args[3] = (dnnl_exec_arg_t){DNNL_ARG_DST, d->dst};
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    dnnl_post_ops_destroy(po);
}

static void onednn_run(void *p) {
    onednn_conv *d = p;
    dnnl_primitive_execute(d->prim, d->stream, 4, d->args);
    dnnl_stream_wait(d->stream);
}

/* The output reordered to NCHW. */
static void onednn_output(onednn_conv *d, const problem *pb, float *dst) {
    const dnnl_memory_desc_t *md;
    DNNL_CHECK(dnnl_memory_get_memory_desc(d->dst, &md));
    dnnl_memory_desc_t user_md;
    dnnl_dims_t dd = {1, pb->spec->k, pb->oh, pb->oh};
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&user_md, 4, dd, dnnl_f32, dnnl_nchw));
    dnnl_memory_t user;
    DNNL_CHECK(dnnl_memory_create(&user, &user_md, d->eng, dst));
    dnnl_primitive_desc_t rpd;
    dnnl_primitive_t r;
    DNNL_CHECK(dnnl_reorder_primitive_desc_create(&rpd, md, d->eng, &user_md, d->eng, NULL));
    DNNL_CHECK(dnnl_primitive_create(&r, rpd));
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, d->dst}, {DNNL_ARG_TO, user}};
    DNNL_CHECK(dnnl_primitive_execute(r, d->stream, 2, a));
    DNNL_CHECK(dnnl_stream_wait(d->stream));
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_memory_destroy(user);
}

static void onednn_free(onednn_conv *d) {
    dnnl_primitive_destroy(d->prim);
    dnnl_memory_destroy(d->src), dnnl_memory_destroy(d->wei);
    dnnl_memory_destroy(d->bias), dnnl_memory_destroy(d->dst);
    dnnl_stream_destroy(d->stream);
    dnnl_engine_destroy(d->eng);
}

/* ---- timing ---- */

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One contender's samples: GFLOP/s by wall time (what a caller gets) and by the process's CPU
 * time per thread (what the cores did while it ran: on a machine shared with other work, time
 * taken by other processes is not counted; idle OpenMP threads sleep, see main). */
#define MAX_CONSTS 4

typedef struct timed {
    void (*run)(void *);
    void *arg;
    /* cold: every call timed on its own, its constants (weights, bias) flushed from the caches
       before it, as the tuner times a model whose weights outgrow the last-level cache */
    bool cold;
    const void *konst[MAX_CONSTS];
    size_t konst_bytes[MAX_CONSTS];
    int nkonst;
    int calls;                 /* per sample */
    double spent;              /* wall seconds measured so far */
    double wall[MAX_SAMPLES], cpu[MAX_SAMPLES];
    int n;
} timed;

static void calibrate(timed *t) {
    for (int i = 0; i < 3; i++) t->run(t->arg); /* warm-up: caches, pages, thread pool */
    double t0 = now();
    t->run(t->arg);
    double one = now() - t0;
    t->calls = one >= SAMPLE_S ? 1 : (int)(SAMPLE_S / (one > 1e-7 ? one : 1e-7)) + 1;
}

/* t's constants written back and dropped from every cache, as a model's other layers would. */
static void flush_constants(const timed *t) {
#if defined(__x86_64__)
    for (int i = 0; i < t->nkonst; i++)
        for (size_t o = 0; o < t->konst_bytes[i]; o += 64)
            _mm_clflush((const char *)t->konst[i] + o);
    _mm_mfence();
#else
    (void)t;
#endif
}

static void sample(timed *t, double flops, int threads) {
    double d = 0, dc = 0;
    if (t->cold) {
        for (int i = 0; i < t->calls; i++) {
            flush_constants(t);
            double c0 = cpu_now(), t0 = now();
            t->run(t->arg);
            d += now() - t0, dc += cpu_now() - c0;
        }
    } else {
        double c0 = cpu_now(), t0 = now();
        for (int i = 0; i < t->calls; i++) t->run(t->arg);
        d = now() - t0, dc = cpu_now() - c0;
    }
    t->spent += d;
    if (t->n == MAX_SAMPLES) return;
    t->wall[t->n] = flops * t->calls / d * 1e-9;
    t->cpu[t->n] = flops * t->calls / (dc / threads) * 1e-9;
    t->n++;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n) {
    double s[MAX_SAMPLES];
    if (n == 0) return 0;
    memcpy(s, v, sizeof *s * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static double best(const double *v, int n) {
    double b = 0;
    for (int i = 0; i < n; i++) b = v[i] > b ? v[i] : b;
    return b;
}

/* Samples of all `n` contenders, interleaved (in turn, every other round backwards, so that
 * a drift in the machine's load favours no one), until each has run min_s (at least 5
 * samples each). */
static void measure(timed *ts, int n, double flops, int threads, double min_s) {
    for (int i = 0; i < n; i++) calibrate(&ts[i]);
    for (int round = 0;; round++) {
        bool done = true;
        for (int i = 0; i < n; i++) done &= (ts[i].spent >= min_s && ts[i].n >= 5) ||
                                           ts[i].n == MAX_SAMPLES;
        if (done) return;
        for (int i = 0; i < n; i++) sample(&ts[round % 2 ? n - 1 - i : i], flops, threads);
    }
}

/* ---- FMA peak (bench/fma_peak.c's method: independent chains, explicit FMAs) ---- */

#if defined(__x86_64__)
/* 16 chains of 16 floats (4-cycle latency x 2 pipes x 2), in named variables so that they live
 * in registers: what bench/fma_peak.c does */
#define CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define CHAINS16(X) CHAINS(X) X(12) X(13) X(14) X(15)
__attribute__((target("avx512f"))) static double fma512(long iters) {
    __m512 m = _mm512_set1_ps(0.9999999f), a = _mm512_set1_ps(1e-7f), s;
#define DECL(i) __m512 c##i = _mm512_set1_ps(0.5f + 0.01f * i);
#define STEP(i) c##i = _mm512_fmadd_ps(c##i, m, a);
#define SUM(i) s = _mm512_add_ps(s, c##i);
    CHAINS16(DECL)
    for (long it = 0; it < iters; it++) {
        CHAINS16(STEP)
    }
    s = _mm512_setzero_ps();
    CHAINS16(SUM)
    return (double)_mm512_reduce_add_ps(s);
#undef DECL
#undef STEP
#undef SUM
}

/* 12 chains of 8 floats: without AVX-512 there are 16 vector registers */
__attribute__((target("avx2,fma"))) static double fma256(long iters) {
    __m256 m = _mm256_set1_ps(0.9999999f), a = _mm256_set1_ps(1e-7f), s;
#define DECL(i) __m256 c##i = _mm256_set1_ps(0.5f + 0.01f * i);
#define STEP(i) c##i = _mm256_fmadd_ps(c##i, m, a);
#define SUM(i) s = _mm256_add_ps(s, c##i);
    CHAINS(DECL)
    for (long it = 0; it < iters; it++) {
        CHAINS(STEP)
    }
    s = _mm256_setzero_ps();
    CHAINS(SUM)
    float o[8];
    _mm256_storeu_ps(o, s);
    return (double)(o[0] + o[1] + o[2] + o[3] + o[4] + o[5] + o[6] + o[7]);
#undef DECL
#undef STEP
#undef SUM
}
#endif

static volatile double sink;

/* `threads` threads running FMA chains, 7 samples of about 50 ms, by wall and CPU time. */
typedef struct peak {
    const char *isa;
    double wall[7], cpu[7];
} peak;

static void fma_peak(int threads, peak *p) {
    double (*fn)(long) = NULL;
    double per_iter = 0;
    memset(p, 0, sizeof *p);
    p->isa = "none";
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) fn = fma512, per_iter = 16 * 16 * 2, p->isa = "avx512";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        fn = fma256, per_iter = 12 * 8 * 2, p->isa = "avx2";
#endif
    if (!fn) return;
    const long iters = 10000000; /* 5 GFLOP per thread at AVX-512 */
    for (int r = 0; r < 7; r++) {
        double t0 = now(), c0 = cpu_now();
#pragma omp parallel num_threads(threads)
        {
            double v = fn(iters / 5);
#pragma omp atomic
            sink += v;
        }
        double f = per_iter * (double)(iters / 5) * threads;
        p->wall[r] = f / (now() - t0) * 1e-9;
        p->cpu[r] = f / ((cpu_now() - c0) / threads) * 1e-9;
    }
}

/* ---- provenance ---- */

static void first_line(const char *cmd, char *dst, size_t cap) {
    snprintf(dst, cap, "unknown");
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (fgets(dst, (int)cap, p)) dst[strcspn(dst, "\n")] = '\0';
    if (pclose(p) != 0 || !dst[0]) snprintf(dst, cap, "unknown");
}

static void cpu_model(char *dst, size_t cap) {
    snprintf(dst, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            char *p = strchr(line, ':') + 2;
            p[strcspn(p, "\n")] = '\0';
            snprintf(dst, cap, "%s", p);
            break;
        }
    fclose(f);
}

static void loadavg(char *dst, size_t cap) {
    snprintf(dst, cap, "?");
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return;
    if (fgets(dst, (int)cap, f)) dst[strcspn(dst, "\n")] = '\0';
    fclose(f);
}

/* ---- main ---- */

typedef struct row {
    double flops;
    timed wpk, nchw, dnnl;
    char config[352], config_nchw[352], impl[128];
    double err, err_nchw, err_dnnl;
} row;

static double geomean(const double *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += log(v[i]);
    return n ? exp(s / n) : 0;
}

static void print_samples(const char *who, const double *v, int n) {
    printf("  %-12s", who);
    for (int i = 0; i < n; i++) printf(" %.1f", v[i]);
    printf("\n");
}

static bool selected(const char *only, const char *name) {
    if (!only) return true;
    size_t len = strlen(name);
    for (const char *p = only; (p = strstr(p, name)); p += len)
        if ((p == only || p[-1] == ',') && (p[len] == ',' || !p[len])) return true;
    return false;
}

/* One thread count's table: medians (best) by wall and by CPU time, ratios, geometric means. */
static void print_table(const row *rows, int nthreads, int ti, int threads, const char *only,
                        bool nchw) {
    peak pk;
    fma_peak(threads, &pk);
    const double peak_cpu = best(pk.cpu, 7);
    printf("## %d thread%s\n\n", threads, threads == 1 ? "" : "s");
    printf("FMA peak (%s): wall best %.1f, median %.1f GFLOP/s; CPU time best %.1f, median %.1f "
           "GFLOP/s.\n\n", pk.isa, best(pk.wall, 7), median(pk.wall, 7), peak_cpu,
           median(pk.cpu, 7));
    printf("| conv | shape | GFLOP | wpk wall | oneDNN wall | ratio wall (of bests) | "
           "wpk CPU-time | oneDNN CPU-time | ratio CPU | %% of peak (CPU) |%s\n",
           nchw ? " wpk NCHW wall | NCHW CPU-time | ratio NCHW (CPU) |" : "");
    printf("|---|---|---|---|---|---|---|---|---|---|%s\n", nchw ? "---|---|---|" : "");
    double rw[NCONVS], rc[NCONVS], rw3[NCONVS], rc3[NCONVS], rn[NCONVS], rb[NCONVS];
    double min3w = 1e9, min3c = 1e9, min3b = 1e9;
    int nr = 0, nr3 = 0;
    for (int ci = 0; ci < NCONVS; ci++) {
        if (!selected(only, CONVS[ci].name)) continue;
        const row *r = &rows[ci * nthreads + ti];
        const conv_spec *c = &CONVS[ci];
        double ww = median(r->wpk.wall, r->wpk.n), dw = median(r->dnnl.wall, r->dnnl.n);
        double wc = median(r->wpk.cpu, r->wpk.n), dc = median(r->dnnl.cpu, r->dnnl.n);
        rw[nr] = ww / dw;
        rc[nr] = wc / dc;
        /* noise only ever slows a sample: the best samples are the least disturbed */
        rb[nr] = best(r->wpk.wall, r->wpk.n) / best(r->dnnl.wall, r->dnnl.n);
        rn[nr] = nchw ? median(r->nchw.cpu, r->nchw.n) / dc : 0;
        if (c->r == 3) {
            rw3[nr3] = rw[nr], rc3[nr3++] = rc[nr];
            if (rw[nr] < min3w) min3w = rw[nr];
            if (rc[nr] < min3c) min3c = rc[nr];
            if (rb[nr] < min3b) min3b = rb[nr];
        }
        printf("| %s | %lldx%lld %lld->%lld k%lld s%lld p%lld | %.3f | %.1f (%.1f) | %.1f (%.1f) "
               "| %.2f (%.2f) | %.1f (%.1f) | %.1f (%.1f) | %.2f | %.0f%%, %.0f%% |", c->name,
               (long long)c->hw, (long long)c->hw, (long long)c->c, (long long)c->k,
               (long long)c->r, (long long)c->s, (long long)c->p, r->flops * 1e-9, ww,
               best(r->wpk.wall, r->wpk.n), dw, best(r->dnnl.wall, r->dnnl.n), rw[nr], rb[nr], wc,
               best(r->wpk.cpu, r->wpk.n), dc, best(r->dnnl.cpu, r->dnnl.n), rc[nr],
               100 * wc / peak_cpu, 100 * dc / peak_cpu);
        if (nchw)
            printf(" %.1f (%.1f) | %.1f (%.1f) | %.2f |", median(r->nchw.wall, r->nchw.n),
                   best(r->nchw.wall, r->nchw.n), median(r->nchw.cpu, r->nchw.n),
                   best(r->nchw.cpu, r->nchw.n), rn[nr]);
        printf("\n");
        nr++;
    }
    printf("\nGeometric mean of wpk/oneDNN: wall %.2f (of bests %.2f), CPU time %.2f (all %d "
           "convs); wall %.2f, CPU time %.2f (the %d 3x3 convs)", geomean(rw, nr),
           geomean(rb, nr), geomean(rc, nr), nr, geomean(rw3, nr3), geomean(rc3, nr3), nr3);
    if (nchw) printf("; NCHW/oneDNN by CPU time %.2f", geomean(rn, nr));
    printf(".\n");
    if (nr3)
        printf("Issue 4's bar, every 3x3 conv at least half of oneDNN: %s by median wall time "
               "(lowest %.2f), %s by best wall time (lowest %.2f), %s by median CPU time (lowest "
               "%.2f).\n", min3w >= 0.5 ? "met" : "NOT met", min3w,
               min3b >= 0.5 ? "met" : "NOT met", min3b, min3c >= 0.5 ? "met" : "NOT met", min3c);
    printf("\n");
}

int main(int argc, char **argv) {
    /* Idle OpenMP threads must sleep rather than spin, or CPU time would count their waiting.
     * libgomp reads the policy when it loads, so set it and start again. */
    if (!getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "passive", 1);
        execv("/proc/self/exe", argv);
    }
    int threads[MAX_THREADS] = {1, 2}, nthreads = 2;
    double min_s = 0.2;
    const char *only = NULL, *config = NULL;
    bool nchw = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            nthreads = 0;
            for (char *p = argv[++i]; *p && nthreads < MAX_THREADS;) {
                threads[nthreads] = (int)strtol(p, &p, 10);
                if (threads[nthreads] >= 1) nthreads++;
                if (*p == ',') p++;
                else break;
            }
        } else if (!strcmp(argv[i], "--min-ms") && i + 1 < argc) {
            min_s = atof(argv[++i]) * 1e-3;
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
        } else if (!strcmp(argv[i], "--nchw")) {
            nchw = true;
        } else if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            config = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--threads 1,2] [--min-ms 200] [--only c2,c6] [--nchw] "
                    "[--config K=V,...]\n", argv[0]);
            return 1;
        }
    }
    if (nthreads == 0) nthreads = 1, threads[0] = 1;

    wpk_context *ctx = wpk_context_create();
    char commit[64], cc[256], cpu[256], load0[128], load1[128], dirty[16];
    first_line("git rev-parse --short HEAD 2>/dev/null", commit, sizeof commit);
    first_line("git status --porcelain --untracked-files=no 2>/dev/null | wc -l", dirty,
               sizeof dirty);
    const char *cc_env = getenv("CC");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "%s --version 2>/dev/null", cc_env && *cc_env ? cc_env : "cc");
    first_line(cmd, cc, sizeof cc);
    cpu_model(cpu, sizeof cpu);
    loadavg(load0, sizeof load0);
    const dnnl_version_t *dv = dnnl_version();

    row *rows = calloc((size_t)(NCONVS * nthreads), sizeof(row));
    if (!rows) die("out of memory", "");
    for (int ci = 0; ci < NCONVS; ci++) {
        if (!selected(only, CONVS[ci].name)) continue;
        problem pb;
        problem_init(&pb, &CONVS[ci], ctx);
        int64_t ny = CONVS[ci].k * pb.oh * pb.oh;
        float *got = alloc64(sizeof(float) * (size_t)ny);
        wpk_conv kb, kn;
        wpk_conv_build(&kb, &pb, true, config, ctx);
        if (nchw) wpk_conv_build(&kn, &pb, false, NULL, ctx);
        for (int ti = 0; ti < nthreads; ti++) {
            omp_set_num_threads(threads[ti]);
            row *r = &rows[ci * nthreads + ti];
            r->flops = flops_of(&CONVS[ci]);
            onednn_conv d;
            onednn_build(&d, &pb);
            /* one checked run of each before any timing */
            wpk_run(&kb);
            wpk_conv_output(&kb, &pb, true, got);
            r->err = rel_err(got, pb.ref, ny);
            onednn_run(&d);
            onednn_output(&d, &pb, got);
            r->err_dnnl = rel_err(got, pb.ref, ny);
            if (nchw) {
                wpk_run(&kn);
                wpk_conv_output(&kn, &pb, false, got);
                r->err_nchw = rel_err(got, pb.ref, ny);
            }
            if (!(r->err <= TOL) || !(r->err_dnnl <= TOL) || (nchw && !(r->err_nchw <= TOL))) {
                fprintf(stderr, "conv_resnet18: %s: wrong output (relative error wpk %.3g, "
                        "wpk nchw %.3g, oneDNN %.3g)\n", CONVS[ci].name, r->err, r->err_nchw,
                        r->err_dnnl);
                return 2;
            }
            timed ts[3] = {{.run = wpk_run, .arg = &kb}, {.run = onednn_run, .arg = &d},
                           {.run = wpk_run, .arg = &kn}};
            measure(ts, nchw ? 3 : 2, r->flops, threads[ti], min_s);
            r->wpk = ts[0], r->dnnl = ts[1], r->nchw = ts[2];
            snprintf(r->config, sizeof r->config, "%s %s", kb.tmpl, kb.config);
            if (nchw) snprintf(r->config_nchw, sizeof r->config_nchw, "%s %s", kn.tmpl, kn.config);
            snprintf(r->impl, sizeof r->impl, "%s", d.impl);
            onednn_free(&d);
            fprintf(stderr, "%s, %d thread%s: wpk %.1f, oneDNN %.1f GFLOP/s (median by CPU "
                    "time)\n", CONVS[ci].name, threads[ti], threads[ti] == 1 ? "" : "s",
                    median(r->wpk.cpu, r->wpk.n), median(r->dnnl.cpu, r->dnnl.n));
        }
        wpk_conv_free(&kb);
        if (nchw) wpk_conv_free(&kn);
        free(got);
        problem_free(&pb);
    }
    loadavg(load1, sizeof load1);

    printf("# wpk conv templates vs oneDNN: ResNet-18 convolutions, batch 1\n\n");
    printf("GFLOP/s as median (best) of the samples; wall: by wall-clock time, CPU time: by the "
           "process's CPU time per thread (insensitive to other processes on a shared "
           "machine).\n\n");
    for (int ti = 0; ti < nthreads; ti++) print_table(rows, nthreads, ti, threads[ti], only, nchw);

    printf("## Provenance\n\n");
    printf("- commit %s%s; bench compiled by gcc %s; kernels by `%s` (cg_c_compile: -O3 "
           "-march=native -fopenmp -std=c11 -ffp-contract=fast -fno-math-errno)\n",
           commit, atoi(dirty) > 0 ? " with uncommitted changes" : "", __VERSION__, cc);
    printf("- CPU %s, %d logical CPUs; cg_c vectors of %d bits; OMP_WAIT_POLICY=%s; load "
           "average before: %s; after: %s\n", cpu, omp_get_num_procs(),
           cg_c_default_options().vector_bits, getenv("OMP_WAIT_POLICY"), load0, load1);
    printf("- oneDNN %d.%d.%d (git %s), CPU runtime %s; convolution_auto, formats any, bias + "
           "ReLU post-op, reorders outside the timed region\n", dv->major, dv->minor, dv->patch,
           dv->hash ? dv->hash : "?", dv->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other");
    printf("- timing: 3 warm-up calls, then alternating samples of ~%.0f ms each until each side "
           "ran %.0f ms (at least 5 samples); GFLOP/s = 2*K*C*R*S*OH*OW / time\n\n",
           SAMPLE_S * 1e3, min_s * 1e3);
    printf("## Configurations, implementations, checks, samples (GFLOP/s)\n\n");
    for (int ci = 0; ci < NCONVS; ci++) {
        if (!selected(only, CONVS[ci].name)) continue;
        for (int ti = 0; ti < nthreads; ti++) {
            const row *r = &rows[ci * nthreads + ti];
            printf("%s, %d thread%s: wpk `%s` (rel err %.1e)", CONVS[ci].name, threads[ti],
                   threads[ti] == 1 ? "" : "s", r->config, r->err);
            if (nchw) printf("; NCHW `%s` (rel err %.1e)", r->config_nchw, r->err_nchw);
            printf("; oneDNN `%s` (rel err %.1e)\n", r->impl, r->err_dnnl);
            print_samples("wpk wall", r->wpk.wall, r->wpk.n);
            print_samples("wpk cpu", r->wpk.cpu, r->wpk.n);
            if (nchw) print_samples("nchw wall", r->nchw.wall, r->nchw.n);
            if (nchw) print_samples("nchw cpu", r->nchw.cpu, r->nchw.n);
            print_samples("oneDNN wall", r->dnnl.wall, r->dnnl.n);
            print_samples("oneDNN cpu", r->dnnl.cpu, r->dnnl.n);
        }
    }
    free(rows);
    wpk_context_free(ctx);
    return 0;
}
