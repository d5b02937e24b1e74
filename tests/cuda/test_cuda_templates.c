/* test_cuda_templates.c -- every CUDA template (src/kernels/templates_cuda.h) on a few shapes under
 * a few configs, checked without a GPU: for each (template, shape, config) the kernel is
 *   - built and lowered, and run on the loop interpreter against the node's reference kernel
 *     (tolerance 1e-5 * max(1, max |want|)),
 *   - emitted as CUDA C (blockIdx/threadIdx bound, __launch_bounds__) and compiled by NVRTC for
 *     sm_90, and the PTX holds the kernel's entry (".entry NAME("),
 *   - for the default config, run on the CPU emulator of the generated CUDA
 *     (tests/cuda/cuda_emu.h: a block's threads as pthreads with real barriers) against the
 *     same reference.
 *   - on a GPU when there is one (rt_cuda_open succeeds): loaded, launched and compared with
 *     the same reference; without one that part is skipped, saying "no CUDA device: <reason>".
 * Configs: the default, hand-picked ones (shared memory on and off, register tiles, float4),
 * and random ones (those the template refuses must be refused with WPK_ERR_INVALID_ARG, and
 * the template's legal must agree). Plus the registry (the CPU registry holds no CUDA
 * template and the reverse), nodes the templates must decline, and configs beyond the limits
 * named in the message. Without NVRTC or a host C++ compiler those parts are skipped with a message.
 * The conv template has its own test (tests/unit/test_codegen_cuda.c). */
#define _DEFAULT_SOURCE

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "../unit/check.h"
#include "base/alloc.h"
#include "base/context.h"
#include "codegen/cuda/cg_cuda.h"
#include "test_data.h"
#include "cuda_emu.h"
#include "ir/graph.h"
#include "ir/ops.h"
#include "loop/interp.h"
#include "loop/lower.h"
#include "runtime/cuda/cuda_rt.h"
#include "kernels/conv.h"
#include "kernels/templates_cuda.h"

static char tmp_dir[64];
static bool have_nvrtc, have_emu;
static int n_interpreted, n_compiled, n_emulated, n_refused, n_device;
static rt_cuda *dev; /* NULL without a GPU */
static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* ---- one node with random inputs and its reference output ---- */

#define MAX_IN 5

typedef struct tensor_spec {
    int ndim;
    int64_t dims[4];
    bool constant;          /* data known at compile time (weights, Clip's bounds) */
    float fill;             /* NAN: random values; else every element this value */
    bool i64;               /* int64 elements fill, fill + 1, ...: a constant of axes */
    const int64_t *vals;    /* with i64: the elements instead (pads, indices) */
} tensor_spec;

typedef struct node_case {
    const char *name;
    const char *op, *domain;
    int opset;
    int nin;
    tensor_spec in[MAX_IN];       /* ndim 0 with dims[0] == -1: omitted */
    const char *ints[4];          /* "name=v,v,..." */
    const char *floats[4];        /* "name=v" */
    const char *strs[2];          /* "name=value" */
    const char *tmpl;             /* the CUDA template expected to take it */
    const char *configs[3];       /* hand-picked configs besides the default */
} node_case;

typedef struct problem2 {
    ir_graph *g;
    ir_node *node;
    ir_tensor t[MAX_IN + 1];
    ir_tensor *in[MAX_IN], *out[1];
    int64_t ny;
    float *want;
} problem2;

static void set_attrs(ir_graph *g, ir_node *n, const node_case *nc) {
    for (int i = 0; i < 4 && nc->ints[i]; i++) {
        char name[64];
        int64_t v[8];
        int k = 0;
        const char *eq = strchr(nc->ints[i], '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - nc->ints[i]), nc->ints[i]);
        for (const char *p = eq + 1; *p && k < 8;) {
            char *end;
            v[k++] = strtoll(p, &end, 10);
            p = *end == ',' ? end + 1 : end;
        }
        if (k == 1 && strchr(eq + 1, ',') == NULL && strcmp(name, "kernel_shape") &&
            strcmp(name, "strides") && strcmp(name, "pads") && strcmp(name, "dilations"))
            ir_node_set_int(g, n, name, v[0]);
        else
            ir_node_set_ints(g, n, name, v, k);
    }
    for (int i = 0; i < 4 && nc->floats[i]; i++) {
        char name[64];
        const char *eq = strchr(nc->floats[i], '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - nc->floats[i]), nc->floats[i]);
        ir_node_set_float(g, n, name, strtof(eq + 1, NULL));
    }
    for (int i = 0; i < 2 && nc->strs[i]; i++) {
        char name[64];
        const char *eq = strchr(nc->strs[i], '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - nc->strs[i]), nc->strs[i]);
        ir_node_set_str(g, n, name, eq + 1);
    }
}

static bool problem2_init(problem2 *p, const node_case *nc, wpk_context *ctx) {
    memset(p, 0, sizeof *p);
    p->g = ir_graph_create();
    int k = ir_graph_add_node(p->g, nc->name, nc->op, nc->domain, nc->opset, nc->nin, 1);
    ir_node *n = p->node = &p->g->nodes[k];
    set_attrs(p->g, n, nc);
    for (int i = 0; i < nc->nin; i++) {
        const tensor_spec *s = &nc->in[i];
        if (s->ndim == 0 && s->dims[0] == -1) continue;
        ir_tensor *t = &p->t[i];
        *t = (ir_tensor){WPK_DTYPE_FLOAT32, s->ndim, {0}, NULL};
        int64_t count = 1;
        for (int d = 0; d < s->ndim; d++) t->dims[d] = s->dims[d], count *= s->dims[d];
        if (s->i64) {
            int64_t *v = malloc(sizeof *v * (size_t)count);
            for (int64_t e = 0; e < count; e++) v[e] = s->vals ? s->vals[e] : (int64_t)s->fill + e;
            t->dtype = WPK_DTYPE_INT64, t->data = v, p->in[i] = t;
            continue;
        }
        float *data = isnan(s->fill) ? randoms(count) : nans(count);
        if (!isnan(s->fill))
            for (int64_t e = 0; e < count; e++) data[e] = s->fill;
        t->data = data;
        p->in[i] = t;
    }
    ir_tensor *y = &p->t[MAX_IN];
    *y = (ir_tensor){WPK_DTYPE_FLOAT32, 0, {0}, NULL};
    p->out[0] = y;
    if (ir_op_get(n->op)->shape(ctx, n, p->in, p->out)) {
        fprintf(stderr, "%s: shape: %s\n", nc->name, wpk_context_error(ctx));
        return false;
    }
    p->ny = ir_numel(y);
    y->data = nans(p->ny);
    p->want = malloc(sizeof(float) * (size_t)p->ny);
    if (ir_op_get(n->op)->ref(ctx, n, p->in, p->out)) {
        fprintf(stderr, "%s: reference: %s\n", nc->name, wpk_context_error(ctx));
        return false;
    }
    memcpy(p->want, y->data, sizeof(float) * (size_t)p->ny);
    return true;
}

static void problem2_free(problem2 *p) {
    for (int i = 0; i <= MAX_IN; i++) free(p->t[i].data);
    free(p->want);
    ir_graph_free(p->g);
}

/* The tensors as the templates see them: constants keep their data, the rest none. */
static void task_tensors(const problem2 *p, const node_case *nc, ir_tensor *in_view,
                         ir_tensor **in) {
    for (int i = 0; i < MAX_IN; i++) {
        in[i] = NULL;
        if (!p->in[i]) continue;
        in_view[i] = *p->in[i];
        if (!nc->in[i].constant) in_view[i].data = NULL;
        in[i] = &in_view[i];
    }
}

#define NAN_FILL .fill = NAN
#define T1(a) {1, {a}, false, NAN_FILL}
#define T2(a, b) {2, {a, b}, false, NAN_FILL}
#define T3(a, b, c) {3, {a, b, c}, false, NAN_FILL}
#define T4(a, b, c, d) {4, {a, b, c, d}, false, NAN_FILL}
#define W2(a, b) {2, {a, b}, true, NAN_FILL}
#define W1(a) {1, {a}, true, NAN_FILL}
#define CONST1(v) {1, {1}, true, .fill = (v)}
/* a constant int64 vector of n given values; a scalar (0-d) of one */
#define I64S(n, ...) {1, {n}, true, .fill = 0, .i64 = true, .vals = (const int64_t[]){__VA_ARGS__}}
#define I64_SCALAR(v) {0, {0}, true, .fill = 0, .i64 = true, .vals = (const int64_t[]){v}}

static const node_case NODE_CASES[] = {
    /* dense_cuda */
    {"fc 1x512 -> 1000 (ResNet-18's classifier)", "Gemm", "", 13, 3,
     {T2(1, 512), W2(1000, 512), W1(1000)}, {"transB=1"}, {0}, {0}, "dense_cuda",
     {"thread_x=128,thread_y=1,tile_n=2,tile_m=1,tile_k=16,shared=1",
      "thread_x=32,thread_y=1,tile_n=1,tile_m=1,tile_k=4,shared=0", NULL}},
    {"gemm alpha beta, tails", "Gemm", "", 13, 3, {T2(13, 40), W2(30, 40), T2(13, 30)},
     {"transB=1"}, {"alpha=0.5", "beta=2"}, {0}, "dense_cuda",
     {"thread_x=4,thread_y=4,tile_n=4,tile_m=2,tile_k=8,shared=1",
      "thread_x=8,thread_y=2,tile_n=2,tile_m=4,tile_k=16,shared=0", NULL}},
    {"gemm transA, C per row", "Gemm", "", 13, 3, {T2(40, 5), T2(40, 33), T2(5, 1)},
     {"transA=1"}, {0}, {0}, "dense_cuda",
     {"thread_x=8,thread_y=2,tile_n=2,tile_m=2,tile_k=4,shared=1", NULL, NULL}},
    {"fused gemm residual relu", "FusedGemm", "wpk", 1, 4,
     {T2(6, 24), W2(24, 20), W1(20), T2(6, 20)}, {0}, {0}, {"activation=Relu"}, "dense_cuda",
     {"thread_x=4,thread_y=2,tile_n=4,tile_m=2,tile_k=8,shared=1", NULL, NULL}},
    {"matmul 17x9 * 9x70", "MatMul", "", 13, 2, {T2(17, 9), T2(9, 70)}, {0}, {0}, {0},
     "dense_cuda", {"thread_x=16,thread_y=4,tile_n=4,tile_m=4,tile_k=2,shared=1", NULL, NULL}},
    {"fused matmul bias sigmoid", "FusedMatMul", "wpk", 1, 3, {T2(3, 16), W2(16, 10), W1(10)},
     {0}, {0}, {"activation=Sigmoid"}, "dense_cuda", {NULL, NULL, NULL}},
    /* pool2d_cuda */
    {"maxpool 3x3 s2 p1 (ResNet's stem)", "MaxPool", "", 13, 1, {T4(1, 8, 17, 17)},
     {"kernel_shape=3,3", "strides=2,2", "pads=1,1,1,1"}, {0}, {0}, "pool2d_cuda",
     {"threads=64,per_thread=2,vec=1", "threads=32,per_thread=4,vec=1", NULL}},
    {"avgpool 2x2 pads not counted", "AveragePool", "", 13, 1, {T4(2, 3, 9, 10)},
     {"kernel_shape=2,2", "strides=2,2", "pads=1,0,1,0"}, {0}, {0}, "pool2d_cuda",
     {"threads=128,per_thread=1,vec=1", NULL, NULL}},
    {"avgpool ceil, pads counted", "AveragePool", "", 13, 1, {T4(1, 4, 11, 11)},
     {"kernel_shape=3,3", "strides=2,2", "pads=1,1,1,1", "ceil_mode=1"},
     {0}, {0}, "pool2d_cuda", {NULL, NULL, NULL}},
    {"maxpool dilation 2", "MaxPool", "", 13, 1, {T4(1, 3, 12, 12)},
     {"kernel_shape=2,2", "dilations=2,2"}, {0}, {0}, "pool2d_cuda", {NULL, NULL, NULL}},
    /* global_pool_cuda */
    {"global avgpool 512x7x7", "GlobalAveragePool", "", 13, 1, {T4(1, 512, 7, 7)}, {0}, {0},
     {0}, "global_pool_cuda", {"threads=32,per_thread=4,vec=1", NULL, NULL}},
    {"global maxpool, odd", "GlobalMaxPool", "", 13, 1, {T4(2, 5, 3, 4)}, {0}, {0}, {0},
     "global_pool_cuda", {NULL, NULL, NULL}},
    /* softmax_cuda */
    {"softmax 1x1000", "Softmax", "", 13, 1, {T2(1, 1000)}, {0}, {0}, {0}, "softmax_cuda",
     {NULL, NULL, NULL}},
    {"softmax over channels", "Softmax", "", 13, 1, {T3(2, 5, 37)}, {"axis=1"}, {0}, {0},
     "softmax_cuda", {"threads=64", NULL, NULL}},
    {"softmax opset 11 flattens", "Softmax", "", 11, 1, {T3(2, 3, 4)}, {"axis=1"}, {0}, {0},
     "softmax_cuda", {NULL, NULL, NULL}},
    /* elementwise_cuda */
    {"relu 64x56x56", "Relu", "", 13, 1, {T4(1, 64, 56, 56)}, {0}, {0}, {0}, "elementwise_cuda",
     {"threads=128,per_thread=4,vec=4", "threads=256,per_thread=2,vec=1", NULL}},
    {"add per-channel broadcast", "Add", "", 13, 2, {T4(1, 8, 5, 8), T3(8, 1, 1)}, {0}, {0},
     {0}, "elementwise_cuda", {"threads=64,per_thread=1,vec=4", NULL, NULL}},
    {"mul broadcast last dim, tail", "Mul", "", 13, 2, {T4(2, 3, 5, 7), T1(7)}, {0}, {0}, {0},
     "elementwise_cuda", {"threads=32,per_thread=2,vec=1", NULL, NULL}},
    {"clip 0..6", "Clip", "", 13, 3, {T2(3, 100), CONST1(0.0f), CONST1(6.0f)}, {0}, {0}, {0},
     "elementwise_cuda", {NULL, NULL, NULL}},
    {"hardswish", "HardSwish", "", 14, 1, {T2(4, 96)}, {0}, {0}, {0}, "elementwise_cuda",
     {NULL, NULL, NULL}},
    {"sigmoid odd size", "Sigmoid", "", 13, 1, {T1(1001)}, {0}, {0}, {0}, "elementwise_cuda",
     {NULL, NULL, NULL}},
    {"div", "Div", "", 13, 2, {T2(16, 20), T2(16, 20)}, {0}, {0}, {0}, "elementwise_cuda",
     {NULL, NULL, NULL}},
    /* concat_cuda, transpose_cuda, slice_cuda, reduce_mean_cuda */
    {"slice channels 3.. of 8 (ShuffleNet's split)", "Slice", "", 13, 4,
     {T4(1, 8, 5, 6), {1, {1}, true, .fill = 3.0f, .i64 = true},
      {1, {1}, true, .fill = 8.0f, .i64 = true}, {1, {1}, true, .fill = 1.0f, .i64 = true}},
     {0}, {0}, {0}, "slice_cuda", {NULL, NULL, NULL}},
    {"slice backwards with step -2, negative start", "Slice", "", 13, 5,
     {T3(2, 9, 7), {1, {1}, true, .fill = -1.0f, .i64 = true},
      {1, {1}, true, .fill = -100.0f, .i64 = true}, {1, {1}, true, .fill = 1.0f, .i64 = true},
      {1, {1}, true, .fill = -2.0f, .i64 = true}},
     {0}, {0}, {0}, "slice_cuda", {"threads=32,per_thread=2", NULL, NULL}},
    {"concat 3 over channels", "Concat", "", 13, 3,
     {T4(1, 3, 5, 6), T4(1, 8, 5, 6), T4(1, 1, 5, 6)}, {"axis=1"}, {0}, {0}, "concat_cuda",
     {"threads=64,per_thread=4", NULL, NULL}},
    {"concat last axis, negative", "Concat", "", 13, 2, {T3(2, 3, 7), T3(2, 3, 2)}, {"axis=-1"},
     {0}, {0}, "concat_cuda", {NULL, NULL, NULL}},
    {"channel shuffle transpose", "Transpose", "", 13, 1, {T4(2, 3, 4, 10)}, {"perm=0,2,1,3"},
     {0}, {0}, "transpose_cuda", {"threads=32,per_thread=2", NULL, NULL}},
    {"transpose reversed", "Transpose", "", 13, 1, {T3(3, 5, 7)}, {0}, {0}, {0},
     "transpose_cuda", {NULL, NULL, NULL}},
    {"mean over h, w (axes as the importer writes them)", "ReduceMean", "", 18, 2,
     {T4(1, 16, 7, 9), {1, {2}, true, .fill = 2.0f, .i64 = true}}, {"keepdims=0"}, {0}, {0},
     "reduce_mean_cuda", {"threads=32,per_thread=1", NULL, NULL}},
    {"mean opset 18, axes input, kept", "ReduceMean", "", 18, 2,
     {T3(2, 5, 6), {1, {1}, true, .fill = 1.0f, .i64 = true}}, {0}, {0}, {0},
     "reduce_mean_cuda",
     {NULL, NULL, NULL}},
    /* dense_cuda with batch dims: folded into rows (B has none), over blockIdx.z otherwise */
    {"fused matmul 2x9x16 * 16x10 bias relu (an MLP on tokens)", "FusedMatMul", "wpk", 1, 4,
     {T3(2, 9, 16), W2(16, 10), W1(10), T3(2, 9, 10)}, {0}, {0}, {"activation=Relu"},
     "dense_cuda", {"thread_x=4,thread_y=4,tile_n=2,tile_m=2,tile_k=4,shared=1", NULL, NULL}},
    {"matmul 1x3x5x8 * 8x6 (B not constant)", "MatMul", "", 13, 2, {T4(1, 3, 5, 8), T2(8, 6)},
     {0}, {0}, {0}, "dense_cuda", {NULL, NULL, NULL}},
    {"batched matmul 2x3x5x7 * 2x3x7x4 (attention)", "MatMul", "", 13, 2,
     {T4(2, 3, 5, 7), T4(2, 3, 7, 4)}, {0}, {0}, {0}, "dense_cuda",
     {"thread_x=4,thread_y=2,tile_n=1,tile_m=2,tile_k=4,shared=1",
      "thread_x=2,thread_y=4,tile_n=2,tile_m=1,tile_k=2,shared=0", NULL}},
    {"batched matmul, batch broadcast 2x1x5x6 * 3x6x4", "MatMul", "", 13, 2,
     {T4(2, 1, 5, 6), T3(3, 6, 4)}, {0}, {0}, {0}, "dense_cuda",
     {"thread_x=4,thread_y=4,tile_n=1,tile_m=1,tile_k=8,shared=1", NULL, NULL}},
    /* layernorm_cuda */
    {"layernorm last axis, bias", "LayerNormalization", "", 17, 3,
     {T3(2, 5, 24), W1(24), W1(24)}, {"axis=-1"}, {0}, {0}, "layernorm_cuda",
     {"threads=32", NULL, NULL}},
    {"layernorm over 2 dims, no bias", "LayerNormalization", "", 17, 2, {T3(37, 4, 6), W2(4, 6)},
     {"axis=1"}, {"epsilon=0.001"}, {0}, "layernorm_cuda", {"threads=64", NULL, NULL}},
    /* pad_cuda */
    {"pad constant 1.5, h and w", "Pad", "", 13, 3,
     {T4(1, 3, 5, 6), I64S(8, 0, 0, 1, 2, 0, 0, 2, 1), CONST1(1.5f)}, {0}, {0}, {0}, "pad_cuda",
     {"threads=64,per_thread=2", NULL, NULL}},
    {"pad reflect", "Pad", "", 13, 2, {T3(2, 5, 6), I64S(6, 0, 2, 3, 0, 4, 5)}, {0}, {0},
     {"mode=reflect"}, "pad_cuda", {NULL, NULL, NULL}},
    {"pad edge with a crop", "Pad", "", 13, 2, {T3(2, 5, 6), I64S(6, 0, -1, 3, 0, 2, -2)}, {0},
     {0}, {"mode=edge"}, "pad_cuda", {NULL, NULL, NULL}},
    {"pad wrap over axes (opset 18)", "Pad", "", 18, 4,
     {T3(2, 5, 6), I64S(2, 5, 3), {0, {-1}, false, 0, false, NULL}, I64S(1, -1)}, {0}, {0},
     {"mode=wrap"}, "pad_cuda",
     {NULL, NULL, NULL}},
    /* gather_cuda */
    {"gather a class token (scalar index)", "Gather", "", 13, 2, {T3(2, 7, 40), I64_SCALAR(0)},
     {"axis=1"}, {0}, {0}, "gather_cuda", {"threads=32,per_thread=2", NULL, NULL}},
    {"gather q of qkv (negative index)", "Gather", "", 13, 2, {T4(3, 2, 4, 5), I64_SCALAR(-2)},
     {"axis=0"}, {0}, {0}, "gather_cuda", {NULL, NULL, NULL}},
    {"gather a strided range of 2x2 indices", "Gather", "", 13, 2,
     {T3(2, 3, 11), {2, {2, 2}, true, .i64 = true, .vals = (const int64_t[]){1, 4, 7, 10}}},
     {"axis=-1"}, {0}, {0}, "gather_cuda", {NULL, NULL, NULL}},
};
#define NNODE_CASES ((int)(sizeof NODE_CASES / sizeof NODE_CASES[0]))

/* ---- one config end to end ---- */

static char *emit_kernel(wpk_context *ctx, const loop_func *f, cg_cuda_launch *L,
                         const char *what) {
    strbuf sb = {0};
    wpk_status st = cg_cuda_emit(ctx, f, NULL, &sb, L);
    if (st) {
        fprintf(stderr, "%s: emit: %s\n", what, wpk_context_error(ctx));
        CHECK(st == WPK_OK);
        sb_free(&sb);
        return NULL;
    }
    return sb_take(&sb);
}

/* The kernel on the GPU: arguments uploaded (outputs NaN), one launch, the output back. */
static void device_run(wpk_context *ctx, const cg_cuda_image *img, const char *kname,
                       const cg_cuda_launch *L, void *const *args, const int64_t *bytes,
                       int nargs, float *y, int64_t ny, const float *want, const char *what) {
    uint64_t dargs[TUNE_MAX_ARGS * 2] = {0};
    rt_cuda_dims dims;
    memcpy(dims.grid, L->grid, sizeof dims.grid);
    memcpy(dims.block, L->block, sizeof dims.block);
    dims.shared_bytes = L->shared_bytes;
    rt_cuda_kernel *k = NULL;
    wpk_status st = rt_cuda_kernel_load(dev, img->data, img->size, kname, &dims, &k);
    for (int a = 0; a < nargs && !st; a++) {
        st = rt_cuda_alloc(dev, (size_t)bytes[a], &dargs[a]);
        if (!st && a < nargs - 1) st = rt_cuda_upload(dev, dargs[a], args[a], (size_t)bytes[a]);
        if (!st && a == nargs - 1) st = rt_cuda_memset_async(dev, dargs[a], 0xff, (size_t)bytes[a]);
    }
    if (!st) st = rt_cuda_kernel_launch(dev, k, dargs, nargs);
    if (!st) st = rt_cuda_sync(dev, 0);
    if (!st) st = rt_cuda_download(dev, y, dargs[nargs - 1], (size_t)ny * 4);
    if (st) fprintf(stderr, "%s: on the GPU: %s\n", what, wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    if (!st) {
        char tag[600];
        snprintf(tag, sizeof tag, "%s (GPU)", what);
        CHECK(close_all(y, want, ny, tag));
        n_device++;
    }
    for (int a = 0; a < nargs; a++) rt_cuda_free(dev, dargs[a]);
    rt_cuda_kernel_free(k);
}

typedef struct run_args {
    void *const *args;
    const int64_t *bytes;
    int nargs;
    float *y;
    int64_t ny;
    const float *want;
} run_args;

static void nvrtc_check(wpk_context *ctx, const char *src, const char *kname, const char *what,
                        const cg_cuda_launch *L, const run_args *ra) {
    if (!have_nvrtc) return;
    cg_cuda_image img;
    cg_cuda_compile_options o = cg_cuda_default_compile_options();
    o.sm = 90;
    wpk_status st = cg_cuda_compile(ctx, src, &o, &img);
    if (st) {
        fprintf(stderr, "%s: NVRTC: %s\n--- source ---\n%s\n", what, wpk_context_error(ctx), src);
        CHECK(st == WPK_OK);
        return;
    }
    char entry[160];
    snprintf(entry, sizeof entry, ".entry %s(", kname);
    const char *ptx = img.data;
    if (!strstr(ptx, entry)) fprintf(stderr, "%s: no '%s' in the PTX\n", what, entry);
    CHECK(!img.cubin && strstr(ptx, entry) != NULL);
    CHECK(strstr(ptx, ".target sm_90") != NULL);
    n_compiled++;
    if (dev && ra) {
        /* for the device's own SM version */
        cg_cuda_image_free(&img);
        o.sm = rt_cuda_device_info(dev)->sm;
        if (cg_cuda_compile(ctx, src, &o, &img) == WPK_OK)
            device_run(ctx, &img, kname, L, ra->args, ra->bytes, ra->nargs, ra->y, ra->ny,
                       ra->want, what);
        else
            CHECK(!"NVRTC for the device's SM version");
    }
    cg_cuda_image_free(&img);
}

/* false when the template refuses the config (a random config may be invalid). */
static bool run_config(wpk_context *ctx, const node_case *nc, problem2 *p, const tune_task *task,
                       const tune_space *sp, const tune_config *cfg, const char *label, int idx,
                       bool must_build, bool emulate) {
    const kernel_provider *tm = task->tmpl;
    strbuf cs = {0};
    tune_config_print(sp, cfg, &cs);
    char what[512];
    snprintf(what, sizeof what, "%s: %s [%s %s]", tm->name, nc->name, label, cs.s ? cs.s : "");
    sb_free(&cs);
    te_ctx c;
    te_ctx_init(&c, ctx);
    tune_build b;
    wpk_status st = tm->build(tm, &c, task, sp, cfg, &b);
    if (task->tmpl->legal(task->tmpl, task, sp, cfg) != (st == WPK_OK)) {
        fprintf(stderr, "%s: legal says %d, build %s\n", what, task->tmpl->legal(task->tmpl, task, sp, cfg),
                st ? wpk_context_error(ctx) : "ok");
        CHECK(!"legal agrees with build");
    }
    if (st) {
        if (must_build) fprintf(stderr, "%s: build: %s\n", what, wpk_context_error(ctx));
        CHECK(!must_build && st == WPK_ERR_INVALID_ARG);
        n_refused++;
        te_ctx_free(&c);
        return false;
    }
    void *args[TUNE_MAX_ARGS * 2];
    int64_t bytes[TUNE_MAX_ARGS * 2];
    int ai = 0;
    for (int i = 0; i < nc->nin && ai < b.ninputs; i++)
        if (p->in[i]) bytes[ai] = (int64_t)ir_nbytes(p->in[i]), args[ai++] = p->in[i]->data;
    CHECK(ai == b.ninputs);
    float *y = p->t[MAX_IN].data;
    bytes[ai] = p->ny * 4;
    args[ai] = y;
    char kname[64];
    snprintf(kname, sizeof kname, "k%d_%s", idx, tm->name);
    loop_func *f = NULL;
    st = loop_lower(&c, b.schedule, kname, b.args, b.nargs, &f);
    if (st) {
        fprintf(stderr, "%s: lower: %s\n", what, wpk_context_error(ctx));
        CHECK(st == WPK_OK);
        te_ctx_free(&c);
        return true;
    }
    for (int64_t i = 0; i < p->ny; i++) y[i] = NAN;
    st = loop_interp_run(ctx, f, args);
    if (st) fprintf(stderr, "%s: interpreter: %s\n", what, wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    char tag[600];
    snprintf(tag, sizeof tag, "%s (interpreted)", what);
    CHECK(close_all(y, p->want, p->ny, tag));
    n_interpreted++;
    cg_cuda_launch L;
    char *src = emit_kernel(ctx, f, &L, what);
    if (src) {
        CHECK(L.block[0] * L.block[1] * L.block[2] <= CUDA_MAX_THREADS);
        CHECK(L.shared_bytes <= CUDA_MAX_SHARED);
        CHECK(strstr(src, "__launch_bounds__(") && strstr(src, "threadIdx.x") &&
              strstr(src, "blockIdx."));
        run_args ra = {args, bytes, ai + 1, y, p->ny, p->want};
        nvrtc_check(ctx, src, kname, what, &L, &ra);
        if (emulate && have_emu) {
            emu_kernel ek;
            int rc = emu_build(src, f, tmp_dir, kname, &ek);
            CHECK(rc == 0);
            if (rc == 0) {
                for (int64_t i = 0; i < p->ny; i++) y[i] = NAN;
                CHECK(emu_run(&ek, &L, args) == 0);
                snprintf(tag, sizeof tag, "%s (emulated)", what);
                CHECK(close_all(y, p->want, p->ny, tag));
                n_emulated++;
            }
            emu_free(&ek);
        }
    }
    wpk_free(src);
    te_ctx_free(&c);
    return true;
}

static void test_cases(wpk_context *ctx) {
    int idx = 0;
    bool seen[32] = {0};
    for (int i = 0; i < NNODE_CASES; i++) {
        const node_case *nc = &NODE_CASES[i];
        problem2 p;
        if (!problem2_init(&p, nc, ctx)) {
            CHECK(!"problem2_init");
            problem2_free(&p);
            continue;
        }
        ir_tensor view[MAX_IN], *in[MAX_IN];
        task_tensors(&p, nc, view, in);
        const kernel_provider *tm = kernel_provider_cuda_for(p.node, in, p.out);
        if (!tm || strcmp(tm->name, nc->tmpl)) {
            fprintf(stderr, "%s: template %s, expected %s\n", nc->name, tm ? tm->name : "none",
                    nc->tmpl);
            CHECK(!"the expected CUDA template");
            problem2_free(&p);
            continue;
        }
        for (int k = 0; kernel_providers_cuda()[k]; k++)
            if (kernel_providers_cuda()[k] == tm && k < 32) seen[k] = true;
        tune_task task;
        tune_task_init(&task, tm, p.node, in, p.out);
        CHECK(strncmp(task.key, tm->name, strlen(tm->name)) == 0 &&
              task.key[strlen(tm->name)] == ':');
        CHECK(task.flops > 0);
        tune_space sp;
        tm->space(tm, &task, &sp);
        CHECK(sp.nknobs > 0);
        tune_config cfg;
        tm->default_config(tm, &task, &sp, &cfg);
        run_config(ctx, nc, &p, &task, &sp, &cfg, "default", idx++, true, true);
        for (int k = 0; k < 3 && nc->configs[k]; k++) {
            wpk_status st = tune_config_parse(ctx, &sp, nc->configs[k], &cfg);
            if (st) fprintf(stderr, "%s: config '%s': %s\n", nc->name, nc->configs[k],
                            wpk_context_error(ctx));
            CHECK(st == WPK_OK);
            if (!st) run_config(ctx, nc, &p, &task, &sp, &cfg, "config", idx++, true, false);
        }
        for (int r = 0, tries = 0; r < 2 && tries < 30; tries++) {
            tune_config_random(&sp, &rng, &cfg);
            if (run_config(ctx, nc, &p, &task, &sp, &cfg, "random", idx, false, false)) r++;
            idx++;
        }
        problem2_free(&p);
    }
    /* every template but the conv's (tests/unit/test_codegen_cuda.c) was exercised */
    for (int k = 0; kernel_providers_cuda()[k]; k++)
        if (kernel_providers_cuda()[k] != &tune_conv2d_cuda && (k >= 32 || !seen[k])) {
            fprintf(stderr, "no case for %s\n", kernel_providers_cuda()[k]->name);
            CHECK(!"a case per CUDA template");
        }
}

/* ---- the registries, declined nodes, configs beyond the limits ---- */

static void test_registry(wpk_context *ctx) {
    const kernel_provider *const *cuda = kernel_providers_cuda();
    int n = 0;
    for (; cuda[n]; n++) {
        CHECK(strstr(cuda[n]->name, "_cuda") != NULL && kernel_provider_generates(cuda[n]));
        CHECK(kernel_provider_cuda_find(cuda[n]->name) == cuda[n]);
        /* the cpu backend never picks a GPU template */
        CHECK(kernel_provider_find(cuda[n]->name) == NULL);
        for (int k = 0; kernel_providers()[k]; k++) CHECK(kernel_providers()[k] != cuda[n]);
    }
    CHECK(n == 13);
    CHECK(kernel_provider_cuda_find("dense") == NULL && kernel_provider_cuda_find(NULL) == NULL);

    /* declined: a 1-D operand, a Gather whose indices are no sequence or not constant */
    const node_case declined[] = {
        {"matrix-vector matmul", "MatMul", "", 13, 2, {T3(2, 4, 5), T1(5)}, {0}, {0}, {0}, NULL,
         {0}},
        {"gather of scattered indices", "Gather", "", 13, 2, {T2(6, 3), I64S(3, 0, 4, 1)},
         {"axis=0"}, {0}, {0}, NULL, {0}},
        {"pad reflect wider than the input", "Pad", "", 13, 2, {T2(2, 3), I64S(4, 0, 3, 0, 0)},
         {0}, {0}, {"mode=reflect"}, NULL, {0}},
    };
    problem2 p;
    for (int i = 0; i < 3; i++) {
        if (problem2_init(&p, &declined[i], ctx)) {
            const kernel_provider *got = kernel_provider_cuda_for(p.node, p.in, p.out);
            if (got) fprintf(stderr, "%s: taken by %s\n", declined[i].name, got->name);
            CHECK(got == NULL);
        } else {
            CHECK(!"problem2_init of a declined case");
        }
        problem2_free(&p);
    }
    const node_case dyn_gather = {"gather of run-time indices", "Gather", "", 13, 2,
                                  {T2(6, 3), I64S(2, 0, 1)}, {"axis=0"}, {0}, {0}, NULL, {0}};
    if (problem2_init(&p, &dyn_gather, ctx)) {
        ir_tensor view[MAX_IN], *in[MAX_IN];
        node_case nc = dyn_gather;
        nc.in[1].constant = false;
        task_tensors(&p, &nc, view, in);
        CHECK(kernel_provider_cuda_for(p.node, in, p.out) == NULL);
    }
    problem2_free(&p);

    /* dense_cuda: each limit named */
    const node_case *mmc = &NODE_CASES[4];
    if (!problem2_init(&p, mmc, ctx)) {
        problem2_free(&p);
        return;
    }
    tune_task task;
    tune_task_init(&task, &tune_dense_cuda, p.node, p.in, p.out);
    tune_space sp;
    tune_dense_cuda.space(&tune_dense_cuda, &task, &sp);
    tune_config cfg;
    te_ctx c;
    te_ctx_init(&c, ctx);
    tune_build b;
    CHECK(tune_config_parse(ctx, &sp, "thread_x=128,thread_y=16,tile_n=1,tile_m=1,tile_k=1,"
                            "shared=0", &cfg) == WPK_OK);
    CHECK_ERR(ctx, tune_dense_cuda.build(&tune_dense_cuda, &c, &task, &sp, &cfg, &b),
              WPK_ERR_INVALID_ARG,
              "dense_cuda: 2048 threads per block");
    CHECK(!task.tmpl->legal(task.tmpl, &task, &sp, &cfg));
    CHECK(tune_config_parse(ctx, &sp, "thread_x=128,thread_y=8,tile_n=8,tile_m=8,tile_k=16,"
                            "shared=1", &cfg) == WPK_OK);
    CHECK_ERR(ctx, tune_dense_cuda.build(&tune_dense_cuda, &c, &task, &sp, &cfg, &b),
              WPK_ERR_INVALID_ARG,
              "bytes of shared memory (more than 49152)");
    CHECK(tune_config_parse(ctx, &sp, "thread_x=1,thread_y=1,tile_n=8,tile_m=8,tile_k=1,shared=0",
                            &cfg) == WPK_OK);
    CHECK(tune_dense_cuda.build(&tune_dense_cuda, &c, &task, &sp, &cfg,
          &b) == WPK_OK); /* 64: at the limit */
    cfg.choice[0] = 99;
    CHECK_ERR(ctx, tune_dense_cuda.build(&tune_dense_cuda, &c, &task, &sp, &cfg, &b),
              WPK_ERR_INVALID_ARG,
              "thread_x");
    CHECK(!task.tmpl->legal(task.tmpl, &task, &sp, &cfg));
    te_ctx_free(&c);
    problem2_free(&p);

    /* the float4 knob exists only where the last dim holds whole groups of four */
    const node_case *odd = NULL;
    for (int i = 0; i < NNODE_CASES; i++)
        if (!strcmp(NODE_CASES[i].name, "sigmoid odd size")) odd = &NODE_CASES[i];
    CHECK(odd != NULL);
    if (!odd) return;
    if (problem2_init(&p, odd, ctx)) {
        tune_task_init(&task, &tune_elementwise_cuda, p.node, p.in, p.out);
        tune_elementwise_cuda.space(&tune_elementwise_cuda, &task, &sp);
        CHECK(tune_config_parse(ctx, &sp, "threads=32,per_thread=1,vec=4", &cfg) != WPK_OK ||
              tune_value(&sp, &cfg, "vec") == 1);
    }
    problem2_free(&p);
}

int main(void) {
    wpk_context *ctx = wpk_context_create();
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/wpk_cuda_tmpl_XXXXXX");
    CHECK(mkdtemp(tmp_dir) != NULL);
    setenv("WPK_CACHE_DIR", tmp_dir, 1); /* a fresh NVRTC cache: every kernel really compiles */
    const char *seed = getenv("WPK_TEST_SEED");
    if (seed) rng ^= strtoull(seed, NULL, 10) * 0x2545f4914f6cdd1dull;
    have_nvrtc = cg_cuda_nvrtc_available(ctx) == WPK_OK;
    if (!have_nvrtc)
        fprintf(stderr, "NVRTC not available (%s): compile checks skipped\n",
                wpk_context_error(ctx));
    else
        fprintf(stderr, "NVRTC %d\n", cg_cuda_nvrtc_version());
    char *argv[] = {(char *)emu_compiler(), "--version", NULL};
    char log[128];
    snprintf(log, sizeof log, "%s/cxx.log", tmp_dir);
    have_emu = emu_spawn(argv, log) == 0;
    if (!have_emu) fprintf(stderr, "no host C++ compiler (%s): emulated runs skipped\n",
                           emu_compiler());
    if (rt_cuda_open(ctx, 0, &dev) != WPK_OK) {
        fprintf(stderr, "no CUDA device: %s -- the GPU runs are skipped\n",
                wpk_context_error(ctx) + strlen("CUDA unavailable: "));
        dev = NULL;
    }
    test_cases(ctx);
    test_registry(ctx);
    fprintf(stderr, "kernels: %d interpreted, %d compiled by NVRTC for sm_90, %d emulated, "
            "%d run on a GPU, %d random configs refused\n", n_interpreted, n_compiled, n_emulated,
            n_device, n_refused);
    rt_cuda_close(dev);
    if (getenv("WPK_TEST_KEEP")) {
        fprintf(stderr, "kernels and their sources kept in %s\n", tmp_dir);
    } else {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_dir);
    }
    wpk_context_free(ctx);
    CHECK_DONE();
}
