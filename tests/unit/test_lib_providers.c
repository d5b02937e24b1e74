/* test_lib_providers.c -- the vendor-library providers (src/kernels/vendor: onednn, openblas) against the
 * reference kernels: real nodes (Conv 3x3 pad 1, 1x1, stride 2 with asymmetric pads, dilation,
 * depthwise, FusedConv with bias + residual + every activation, blocked ConvNCHWc with full,
 * padded and NCHW-input blocks and depthwise, Gemm with transA/transB/alpha/beta and C,
 * FusedGemm, MatMul 2-D and batched with broadcast, FusedMatMul), every config of every
 * provider that supports the node, each run twice (the second time on moved input and output
 * buffers, with the constant inputs' data overwritten after create: they must have been
 * copied, and the constants hook lists a buffer for each), compared with the node's reference kernel: max |got - want| <= 1e-4 * max(1,
 * max |want|). A config the library refuses must come back WPK_ERR_UNSUPPORTED with a message.
 * Must-fail: what each provider does not take (supports() false, create WPK_ERR_UNSUPPORTED), a
 * config index out of range, a run on the wrong output, and failed allocations during create
 * (fault injection: a status, no crash). Runs after the first allocate nothing (counted by the
 * malloc family defined here, outside AddressSanitizer builds) for openblas on one thread, on
 * products big enough (M*N*K > 10^6, the BIG_FLOPS cases) that OpenBLAS's small-matrix
 * kernels, which allocate a buffer per call, are not used; OpenBLAS's threaded gemm allocates
 * its job list per call and oneDNN's execute its argument map: those are reported, not failed.
 * The big cases run on two threads, the others on one; the caller's OpenMP thread count is
 * the same after create and run. A provider not
 * built in is reported and skipped. */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "check.h"
#include "ir/graph.h"
#include "kernels/vendor/lib.h"
#include "ops/blocked.h"

#define TOL 1e-4
/* Nodes past this many FLOPs hold products past OpenBLAS's small-matrix sizes (M*N*K <= 10^6). */
#define BIG_FLOPS 4e7
#define NPROV 2

/* ---- counting allocations ---- */

#if defined(__SANITIZE_ADDRESS__)
#define COUNTING 0 /* the sanitizer owns malloc */
#else
#define COUNTING 1
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static atomic_bool counting;
static atomic_long allocs;

static void *counted(void *p) {
    if (atomic_load(&counting)) atomic_fetch_add(&allocs, 1);
    return p;
}

void *malloc(size_t n);
void *calloc(size_t count, size_t size);
void *realloc(void *p, size_t n);
int posix_memalign(void **out, size_t align, size_t n);
void *aligned_alloc(size_t align, size_t n);
void *memalign(size_t align, size_t n);

void *malloc(size_t n) { return counted(__libc_malloc(n)); }
void *calloc(size_t count, size_t size) { return counted(__libc_calloc(count, size)); }
void *realloc(void *p, size_t n) { return counted(__libc_realloc(p, n)); }
int posix_memalign(void **out, size_t align, size_t n) {
    *out = counted(__libc_memalign(align, n));
    return *out ? 0 : ENOMEM;
}
void *aligned_alloc(size_t align, size_t n) { return counted(__libc_memalign(align, n)); }
void *memalign(size_t align, size_t n) { return counted(__libc_memalign(align, n)); }
#endif

static const char *const PROVIDERS[NPROV] = {"onednn", "openblas"};
enum { ONEDNN = 1, OPENBLAS = 2, BOTH = 3 };

static unsigned rng_state = 2024;
static float frand(void) {
    rng_state = rng_state * 1103515245u + 12345u;
    return (float)((rng_state >> 9) & 0xffff) / 32768.0f - 1.0f;
}

static float *buffer(int64_t n) {
    float *p = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

/* One node with its tensors: t[0..4) the inputs (data only for the constant ones, as the
 * providers see them at create), t[4] the output. */
typedef struct problem {
    const char *name;
    ir_graph *g;
    ir_node *node;
    ir_tensor t[5];
    ir_tensor *in[4], *out[1];
    float *data[4];          /* every input's values (the node may hide them: dynamic) */
    int64_t ny;
    float *want;
    int expect;              /* providers that must support it */
    double flops;            /* of the product (the epilogue left out) */
} problem;

static void problem_free(problem *p) {
    for (int i = 0; i < 4; i++) free(p->data[i]);
    free(p->t[4].data);
    free(p->want);
    ir_graph_free(p->g);
}

/* Shape, then the reference output with every input's data present; then hide the data of the
 * inputs in `dynamic` (a bit per input) so the providers treat them as run-time inputs. */
static bool problem_finish(wpk_context *ctx, problem *p, unsigned dynamic) {
    for (int i = 0; i < 4; i++)
        if (p->in[i]) p->data[i] = p->in[i]->data;
    ir_tensor *y = &p->t[4];
    p->out[0] = y;
    if (ir_op_get(p->node->op)->shape(ctx, p->node, p->in, p->out)) {
        fprintf(stderr, "%s: shape: %s\n", p->name, wpk_context_error(ctx));
        return false;
    }
    p->ny = ir_numel(y);
    y->data = buffer(p->ny);
    p->want = malloc(sizeof(float) * (size_t)p->ny);
    if (ir_op_get(p->node->op)->ref(ctx, p->node, p->in, p->out)) {
        fprintf(stderr, "%s: reference: %s\n", p->name, wpk_context_error(ctx));
        return false;
    }
    memcpy(p->want, y->data, sizeof(float) * (size_t)p->ny);
    /* X (A) and Z are activations: never constant */
    dynamic |= 1u | 1u << 3;
    for (int i = 0; i < 4; i++)
        if (p->in[i] && (dynamic >> i & 1)) p->in[i]->data = NULL;
    return true;
}

/* ---- conv nodes ---- */

typedef struct conv_case {
    const char *name, *op;   /* Conv, FusedConv or ConvNCHWc */
    int64_t n, c, h, w, k, kh, kw, stride, dil, group;
    int64_t pads[4];
    bool bias, residual;
    const char *act;         /* NULL: none */
    float alpha, beta;       /* LeakyRelu / HardSigmoid parameters; Clip bounds */
    int64_t block, oblock;   /* ConvNCHWc lanes of X (1: NCHW) and Y */
    int expect;
    unsigned dynamic;        /* inputs the provider must take at run time (a bit each) */
} conv_case;

static const conv_case CONVS[] = {
    {"conv 3x3 pad 1", "Conv", 1, 16, 12, 12, 32, 3, 3, 1, 1, 1, {1, 1, 1, 1}, true, false,
     NULL, 0, 0, 0, 0, BOTH, 0},
    {"conv 1x1", "Conv", 1, 32, 10, 10, 16, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, false, NULL, 0, 0,
     0, 0, BOTH, 0},
    {"conv 1x1 no bias, batch 2", "Conv", 2, 24, 7, 5, 40, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false,
     false, NULL, 0, 0, 0, 0, BOTH, 0},
    {"conv stride 2, asymmetric pads, batch 2", "Conv", 2, 8, 11, 9, 16, 3, 3, 2, 1, 1,
     {1, 0, 2, 1}, true, false, NULL, 0, 0, 0, 0, BOTH, 0},
    {"conv 1x1 stride 2", "Conv", 1, 16, 9, 9, 16, 1, 1, 2, 1, 1, {0, 0, 0, 0}, true, false, NULL,
     0, 0, 0, 0, BOTH, 0},
    {"conv 7x7 stride 2 stem", "Conv", 1, 3, 20, 20, 16, 7, 7, 2, 1, 1, {3, 3, 3, 3}, true, false,
     NULL, 0, 0, 0, 0, BOTH, 0},
    {"big fused 3x3 + residual + relu", "FusedConv", 1, 64, 28, 28, 64, 3, 3, 1, 1, 1,
     {1, 1, 1, 1}, true, true, "Relu", 0, 0, 0, 0, BOTH, 0},
    {"conv weights at run time, batch 2", "Conv", 2, 8, 7, 7, 16, 3, 3, 1, 1, 1, {1, 1, 1, 1},
     true, false, NULL, 0, 0, 0, 0, BOTH, 0x2},
    {"depthwise weights at run time", "Conv", 1, 16, 7, 7, 16, 3, 3, 1, 1, 16, {1, 1, 1, 1},
     true, false, NULL, 0, 0, 0, 0, ONEDNN, 0x2},
    {"fused residual without bias", "FusedConv", 1, 8, 6, 6, 8, 3, 3, 1, 1, 1, {1, 1, 1, 1},
     false, true, "Relu", 0, 0, 0, 0, BOTH, 0},
    {"fused dilation 2 + sigmoid", "FusedConv", 1, 8, 10, 9, 16, 3, 3, 1, 2, 1, {2, 2, 2, 2},
     false, false, "Sigmoid", 0, 0, 0, 0, BOTH, 0},
    {"fused bias + relu + residual", "FusedConv", 1, 16, 9, 9, 16, 3, 3, 1, 1, 1, {1, 1, 1, 1},
     true, true, "Relu", 0, 0, 0, 0, BOTH, 0},
    {"fused residual + leaky relu", "FusedConv", 1, 8, 6, 6, 8, 3, 3, 1, 1, 1, {1, 1, 1, 1}, true,
     true, "LeakyRelu", 0.1f, 0, 0, 0, BOTH, 0},
    {"fused residual + hard sigmoid", "FusedConv", 1, 8, 6, 6, 8, 3, 3, 1, 1, 1, {1, 1, 1, 1},
     true, true, "HardSigmoid", 0.3f, 0.4f, 0, 0, BOTH, 0},
    {"fused hard swish", "FusedConv", 1, 8, 6, 6, 8, 3, 3, 1, 1, 1, {1, 1, 1, 1}, true, false,
     "HardSwish", 0, 0, 0, 0, BOTH, 0},
    {"fused silu + residual", "FusedConv", 1, 8, 6, 6, 8, 3, 3, 1, 1, 1, {1, 1, 1, 1}, true, true,
     "SiLU", 0, 0, 0, 0, BOTH, 0},
    {"fused gelu", "FusedConv", 1, 8, 6, 6, 8, 3, 3, 1, 1, 1, {1, 1, 1, 1}, true, false, "Gelu", 0,
     0, 0, 0, BOTH, 0},
    {"fused tanh", "FusedConv", 1, 8, 6, 6, 8, 3, 3, 1, 1, 1, {1, 1, 1, 1}, true, false, "Tanh", 0,
     0, 0, 0, BOTH, 0},
    {"fused clip [-0.5, 0.5]", "FusedConv", 1, 8, 6, 6, 8, 3, 3, 1, 1, 1, {1, 1, 1, 1}, true,
     false, "Clip", -0.5f, 0.5f, 0, 0, BOTH, 0},
    {"depthwise + relu6", "FusedConv", 1, 16, 8, 7, 16, 3, 3, 1, 1, 16, {1, 1, 1, 1}, true,
     false, "Clip", 0.0f, 6.0f, 0, 0, ONEDNN, 0},
    {"depthwise stride 2, batch 2", "Conv", 2, 24, 9, 9, 24, 3, 3, 2, 1, 24, {1, 1, 1, 1}, false,
     false, NULL, 0, 0, 0, 0, ONEDNN, 0},
    {"2 groups + residual", "FusedConv", 1, 16, 6, 6, 32, 3, 3, 1, 1, 2, {1, 1, 1, 1}, true, true,
     "Relu", 0, 0, 0, 0, ONEDNN, 0},
    {"blocked 16 + bias + residual + relu", "ConvNCHWc", 1, 32, 8, 8, 32, 3, 3, 1, 1, 1,
     {1, 1, 1, 1}, true, true, "Relu", 0, 0, 16, 16, ONEDNN, 0},
    {"blocked 8, padded lanes, hard sigmoid", "ConvNCHWc", 1, 16, 7, 7, 20, 3, 3, 1, 1, 1,
     {1, 1, 1, 1}, true, true, "HardSigmoid", 0.2f, 0.5f, 8, 8, ONEDNN, 0},
    {"blocked stem from NCHW", "ConvNCHWc", 1, 3, 9, 10, 16, 3, 3, 2, 1, 1, {1, 1, 1, 1}, true,
     false, "Relu", 0, 0, 1, 8, ONEDNN, 0},
    {"blocked depthwise, batch 2", "ConvNCHWc", 2, 16, 6, 6, 16, 3, 3, 1, 1, 16, {1, 1, 1, 1},
     true, false, NULL, 0, 0, 8, 8, ONEDNN, 0},
    {"blocked 1x1 stride 2, 16 lanes", "ConvNCHWc", 1, 32, 8, 8, 32, 1, 1, 2, 1, 1, {0, 0, 0, 0},
     true, false, "Relu", 0, 0, 16, 16, ONEDNN, 0},
    /* oneDNN's clip gives min below min: with min > max the reference's answer (max) is not it */
    {"clip min > max", "FusedConv", 1, 8, 6, 6, 8, 3, 3, 1, 1, 1, {1, 1, 1, 1}, true, false,
     "Clip", 1.0f, -1.0f, 0, 0, OPENBLAS, 0},
};
#define NCONVS ((int)(sizeof CONVS / sizeof CONVS[0]))

/* [N, C, H, W] as [N, C/b, H, W, b] with zero lanes past C. */
static float *to_blocked(const float *x, int64_t n, int64_t c, int64_t hw, int64_t b) {
    int64_t cb = (c + b - 1) / b;
    float *y = calloc((size_t)(n * cb * hw * b), sizeof(float));
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t s = 0; s < hw; s++)
                y[((i * cb + ch / b) * hw + s) * b + ch % b] = x[(i * c + ch) * hw + s];
    return y;
}

static bool conv_problem(wpk_context *ctx, const conv_case *cc, problem *p) {
    memset(p, 0, sizeof *p);
    p->name = cc->name;
    p->expect = cc->expect;
    ir_graph *g = p->g = ir_graph_create();
    bool blocked = !strcmp(cc->op, "ConvNCHWc"), onnx = !strcmp(cc->op, "Conv");
    int k = ir_graph_add_node(g, cc->name, cc->op, onnx ? "" : "wpk", onnx ? 17 : 1,
                              cc->residual ? 4 : 3, 1);
    ir_node *n = p->node = &g->nodes[k];
    ir_node_set_ints(g, n, "strides", (const int64_t[]){cc->stride, cc->stride}, 2);
    ir_node_set_ints(g, n, "dilations", (const int64_t[]){cc->dil, cc->dil}, 2);
    ir_node_set_ints(g, n, "pads", cc->pads, 4);
    ir_node_set_int(g, n, "group", cc->group);
    if (cc->act) {
        ir_node_set_str(g, n, "activation", cc->act);
        if (!strcmp(cc->act, "LeakyRelu")) ir_node_set_float(g, n, "alpha", cc->alpha);
        if (!strcmp(cc->act, "HardSigmoid")) {
            ir_node_set_float(g, n, "alpha", cc->alpha);
            ir_node_set_float(g, n, "beta", cc->beta);
        }
        if (!strcmp(cc->act, "Clip")) {
            ir_node_set_float(g, n, "clip_min", cc->alpha);
            ir_node_set_float(g, n, "clip_max", cc->beta);
        }
    }
    const int64_t cg = cc->c / cc->group, hw = cc->h * cc->w;
    ir_tensor *x = &p->t[0], *w = &p->t[1], *b = &p->t[2], *z = &p->t[3];
    *x = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {cc->n, cc->c, cc->h, cc->w}, buffer(cc->n * cc->c * hw)};
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
        wp.data = malloc(sizeof(float) * (size_t)ir_numel(&wp));
        blocked_pack_weights(w->data, cc->k, cg, cc->kh, cc->kw, cc->block, cc->oblock, dw,
                             wp.data);
        free(w->data);
        *w = wp;
    }
    p->in[0] = x, p->in[1] = w, p->in[2] = cc->bias ? b : NULL;
    if (!cc->bias) {
        free(b->data);
        b->data = NULL;
    }
    if (cc->residual) {
        /* Z has the output's shape: infer it first (without Z) */
        ir_tensor y = {0};
        ir_tensor *yo[1] = {&y};
        n->nin = 3;
        if (ir_op_get(n->op)->shape(ctx, n, p->in, yo)) return false;
        n->nin = 4;
        *z = y;
        z->data = buffer(ir_numel(&y));
        if (blocked) { /* the blocked layout's padding lanes are zero */
            float *zd = z->data;
            for (int64_t i = 0; i < ir_numel(&y); i++) {
                int64_t lane = i % cc->oblock, blk = i / (cc->oblock * y.dims[2] * y.dims[3]) % y.dims[1];
                if (blk * cc->oblock + lane >= cc->k) zd[i] = 0.0f;
            }
        }
        p->in[3] = z;
    }
    if (!problem_finish(ctx, p, cc->dynamic)) return false;
    p->flops = 2.0 * (double)p->ny * (double)(cg * cc->kh * cc->kw);
    return true;
}

/* ---- product nodes ---- */

typedef struct gemm_case {
    const char *name, *op;   /* Gemm, FusedGemm, MatMul, FusedMatMul */
    int an, bn;              /* ranks of A and B */
    int64_t adims[4], bdims[4];
    int cn;                  /* rank of C / bias (-1: none) */
    int64_t cdims[2];
    bool ta, tb, residual;
    float alpha, beta;       /* Gemm's */
    const char *act;
    unsigned dynamic;        /* inputs the provider must take at run time (a bit each) */
    int expect;
} gemm_case;

static const gemm_case GEMMS[] = {
    {"gemm transB + bias", "Gemm", 2, 2, {7, 24}, {20, 24}, 1, {20}, false, true, false, 1.0f,
     1.0f, NULL, 0, BOTH},
    {"gemm transA, alpha, beta, C [M, 1]", "Gemm", 2, 2, {16, 5}, {16, 12}, 2, {5, 1}, true, false,
     false, 0.5f, 2.0f, NULL, 0, BOTH},
    {"gemm run-time B and C", "Gemm", 2, 2, {6, 10}, {10, 9}, 2, {6, 9}, false, false, false, 1.0f,
     1.0f, NULL, 0x6, BOTH},
    {"big gemm transB + bias", "Gemm", 2, 2, {256, 512}, {256, 512}, 1, {256}, false, true, false,
     1.0f, 1.0f, NULL, 0, BOTH},
    {"fused gemm + residual + relu", "FusedGemm", 2, 2, {8, 32}, {16, 32}, 1, {16}, false, true,
     true, 1.0f, 1.0f, "Relu", 0, BOTH},
    {"matmul 2-D run-time B", "MatMul", 2, 2, {5, 7}, {7, 11}, -1, {0}, false, false, false, 1.0f,
     1.0f, NULL, 0x2, BOTH},
    {"matmul batched, B broadcast", "MatMul", 3, 2, {3, 4, 6}, {6, 5}, -1, {0}, false, false,
     false, 1.0f, 1.0f, NULL, 0, BOTH},
    {"matmul batched 4-D run-time", "MatMul", 4, 4, {2, 3, 4, 8}, {2, 3, 8, 4}, -1, {0}, false,
     false, false, 1.0f, 1.0f, NULL, 0x3, BOTH},
    {"fused matmul bias + residual + gelu", "FusedMatMul", 3, 2, {2, 5, 12}, {12, 10}, 1, {10},
     false, false, true, 1.0f, 1.0f, "Gelu", 0, BOTH},
    /* oneDNN folds alpha into a constant B only, and broadcasts a column C in its reference
     * implementation only (a constant one is expanded: the second case above) */
    {"gemm column C at run time", "Gemm", 2, 2, {6, 4}, {4, 5}, 2, {6, 1}, false, false, false,
     1.0f, 1.0f, NULL, 0x4, OPENBLAS},
    {"gemm alpha with run-time B", "Gemm", 2, 2, {4, 6}, {6, 3}, -1, {0}, false, false, false, 2.0f,
     1.0f, NULL, 0x2, OPENBLAS},
};
#define NGEMMS ((int)(sizeof GEMMS / sizeof GEMMS[0]))

static bool gemm_problem(wpk_context *ctx, const gemm_case *gc, problem *p) {
    memset(p, 0, sizeof *p);
    p->name = gc->name;
    p->expect = gc->expect;
    ir_graph *g = p->g = ir_graph_create();
    bool onnx = !strcmp(gc->op, "Gemm") || !strcmp(gc->op, "MatMul");
    int nin = gc->residual ? 4 : gc->cn >= 0 ? 3 : 2;
    int k = ir_graph_add_node(g, gc->name, gc->op, onnx ? "" : "wpk", onnx ? 17 : 1, nin, 1);
    ir_node *n = p->node = &g->nodes[k];
    if (!strcmp(gc->op, "Gemm") || !strcmp(gc->op, "FusedGemm")) {
        ir_node_set_int(g, n, "transA", gc->ta);
        ir_node_set_int(g, n, "transB", gc->tb);
    }
    if (!strcmp(gc->op, "Gemm")) {
        ir_node_set_float(g, n, "alpha", gc->alpha);
        ir_node_set_float(g, n, "beta", gc->beta);
    }
    if (gc->act) ir_node_set_str(g, n, "activation", gc->act);
    ir_tensor *a = &p->t[0], *b = &p->t[1], *c = &p->t[2], *z = &p->t[3];
    *a = (ir_tensor){WPK_DTYPE_FLOAT32, gc->an, {0}, NULL};
    *b = (ir_tensor){WPK_DTYPE_FLOAT32, gc->bn, {0}, NULL};
    memcpy(a->dims, gc->adims, sizeof gc->adims);
    memcpy(b->dims, gc->bdims, sizeof gc->bdims);
    a->data = buffer(ir_numel(a));
    b->data = buffer(ir_numel(b));
    p->in[0] = a, p->in[1] = b;
    if (gc->cn >= 0) {
        *c = (ir_tensor){WPK_DTYPE_FLOAT32, gc->cn, {gc->cdims[0], gc->cdims[1]}, NULL};
        c->data = buffer(ir_numel(c));
        p->in[2] = c;
    }
    if (gc->residual) {
        ir_tensor y = {0};
        ir_tensor *yo[1] = {&y};
        n->nin = 3;
        if (ir_op_get(n->op)->shape(ctx, n, p->in, yo)) return false;
        n->nin = 4;
        *z = y;
        z->data = buffer(ir_numel(&y));
        p->in[3] = z;
    }
    if (!problem_finish(ctx, p, gc->dynamic)) return false;
    int64_t kdim = gc->an == 2 && gc->ta ? gc->adims[0] : gc->adims[gc->an - 1];
    p->flops = 2.0 * (double)p->ny * (double)kdim;
    return true;
}

/* ---- running a provider ---- */

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

/* The tensors of a run: the non-constant inputs' data (fresh copies when `moved`), the output
 * cleared to NaN so nothing stale passes. */
static void run_tensors(const problem *p, bool moved, ir_tensor *t, ir_tensor **in,
                        ir_tensor **out, float **fresh) {
    for (int i = 0; i < 4; i++) {
        in[i] = NULL;
        fresh[i] = NULL;
        if (!p->in[i]) continue;
        t[i] = *p->in[i];
        in[i] = &t[i];
        if (p->in[i]->data) continue; /* a constant: the copy made at create serves */
        if (moved) {
            size_t bytes = ir_nbytes(&t[i]);
            fresh[i] = malloc(bytes);
            memcpy(fresh[i], p->data[i], bytes);
            t[i].data = fresh[i];
        } else {
            t[i].data = p->data[i];
        }
    }
    t[4] = p->t[4];
    fresh[4] = malloc(sizeof(float) * (size_t)p->ny);
    for (int64_t i = 0; i < p->ny; i++) fresh[4][i] = NAN;
    t[4].data = fresh[4];
    out[0] = &t[4];
}

/* Every config of provider lp on p; returns how many ran. */
static const kernel_device ONE_THREAD = {1, NULL};

static int run_configs(wpk_context *ctx, const kernel_provider *lp, problem *p) {
    char names[LIB_MAX_CONFIGS][LIB_CONFIG_MAX];
    int count = lp->configs(lp, p->node, p->in, p->out, names), ran = 0;
    CHECK(count >= 1 && count <= LIB_MAX_CONFIGS);
    /* the big gemm runs on two threads (the kernel's own count, set around its work only) */
    const bool big = p->flops > BIG_FLOPS;
    const int threads = big && p->node->op != IR_OP_FUSED_CONV ? 2 : 1, caller_threads = omp_get_max_threads();
    for (int cfg = 0; cfg < count; cfg++) {
        char what[256];
        snprintf(what, sizeof what, "%s [%s %s, %d thread%s]", p->name, lp->name, names[cfg],
                 threads, threads > 1 ? "s" : "");
        lib_kernel *k = NULL;
        wpk_status st = lp->create(lp, ctx, p->node, p->in, p->out, cfg, &(kernel_device){threads, NULL},
                                    &k);
        CHECK(omp_get_max_threads() == caller_threads);
        if (st == WPK_ERR_UNSUPPORTED) {
            CHECK(k == NULL && wpk_context_error(ctx)[0] != 0);
            printf("  %-50s refused: %s\n", what, wpk_context_error(ctx));
            continue;
        }
        if (st) {
            fprintf(stderr, "%s: create: %s: %s\n", what, wpk_status_name(st),
                    wpk_context_error(ctx));
            CHECK(st == WPK_OK);
            continue;
        }
        /* the constants hook lists one buffer per constant input, each holding all of it
           (oneDNN's layouts may pad) */
        const void *kstart[8];
        size_t kbytes[8], want = 0, got = 0;
        int nconst = 0, nk = lp->constants ? lp->constants(lp, k, kstart, kbytes, 8) : -1;
        for (int i = 0; i < 4; i++)
            if (p->in[i] && p->in[i]->data) nconst++, want += ir_nbytes(p->in[i]);
        for (int i = 0; i < nk; i++) got += kstart[i] ? kbytes[i] : 0;
        CHECK(nk == nconst && got >= want);
        /* constants were copied at create: scribble on them (put back below) */
        float *saved[4] = {0};
        for (int i = 1; i < 4; i++) {
            if (!p->in[i] || !p->in[i]->data) continue;
            size_t bytes = ir_nbytes(p->in[i]);
            saved[i] = malloc(bytes);
            memcpy(saved[i], p->in[i]->data, bytes);
            for (size_t e = 0; e < bytes / sizeof(float); e++) ((float *)p->in[i]->data)[e] = 1e6f;
        }
        for (int round = 0; round < 2; round++) {
            ir_tensor t[5], *in[4], *out[1];
            float *fresh[5];
            run_tensors(p, round == 1, t, in, out, fresh);
            st = lp->run(lp, ctx, k, in, out);
            CHECK(omp_get_max_threads() == caller_threads);
            if (st) fprintf(stderr, "%s: run: %s\n", what, wpk_context_error(ctx));
            CHECK(st == WPK_OK);
            char label[300];
            snprintf(label, sizeof label, "%s run %d", what, round + 1);
            CHECK(st || close_enough(p, out[0]->data, label));
#if COUNTING
            if (round == 0 && !st) { /* the same buffers again: nothing allocated */
                atomic_store(&allocs, 0);
                atomic_store(&counting, true);
                for (int r = 0; r < 3; r++) lp->run(lp, ctx, k, in, out);
                atomic_store(&counting, false);
                long made = atomic_load(&allocs);
                if (!strcmp(lp->name, "onednn") || !big || threads > 1) {
                    if (made) printf("  %-50s %ld allocations in 3 runs (the library's)\n",
                                     what, made);
                } else {
                    if (made) fprintf(stderr, "%s: %ld allocations in 3 runs\n", what, made);
                    CHECK(made == 0);
                }
            }
#endif
            for (int i = 0; i < 5; i++) free(fresh[i]);
        }
        for (int i = 1; i < 4; i++)
            if (saved[i]) {
                memcpy(p->in[i]->data, saved[i], ir_nbytes(p->in[i]));
                free(saved[i]);
            }
        lp->destroy(lp, k);
        printf("  %-50s ok\n", what);
        ran++;
    }
    return ran;
}

/* Whether p's tensors are in 16-lane blocks on a CPU without AVX-512: there oneDNN has only its
 * reference implementation for them, which the provider refuses (each refusal names it). */
static bool blocks_need_avx512(const problem *p) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return p->in[0]->ndim == 5 && p->in[0]->dims[4] == 16 && !__builtin_cpu_supports("avx512f");
#else
    return p->in[0]->ndim == 5 && p->in[0]->dims[4] == 16;
#endif
}

static void test_problem(wpk_context *ctx, const kernel_provider *const *lps, problem *p) {
    for (int i = 0; i < NPROV; i++) {
        const kernel_provider *lp = lps[i];
        if (!lp) continue;
        bool want = p->expect >> i & 1, has = lp->supports(lp, p->node, p->in, p->out);
        if (want != has)
            fprintf(stderr, "%s: %s supports() is %d, expected %d\n", p->name, lp->name, has, want);
        CHECK(want == has);
        if (!has) {
            /* refused: create says so, and names the cause */
            lib_kernel *k = NULL;
            CHECK_ERR(ctx, lp->create(lp, ctx, p->node, p->in, p->out, 0, &ONE_THREAD, &k),
                      WPK_ERR_UNSUPPORTED,
                      p->node->name);
            CHECK(k == NULL);
            continue;
        }
        /* at least one config of a node a provider supports must run (oneDNN's 16-lane
           blocks: where the CPU has AVX-512) */
        const int ran = run_configs(ctx, lp, p);
        CHECK(ran >= 1 || (!strcmp(lp->name, "onednn") && blocks_need_avx512(p)));
    }
}

/* ---- must-fail ---- */

static void test_must_fail(wpk_context *ctx, const kernel_provider *const *lps) {
    problem p;
    if (!conv_problem(ctx, &CONVS[0], &p)) {
        CHECK(false);
        return;
    }
    for (int i = 0; i < NPROV; i++) {
        const kernel_provider *lp = lps[i];
        if (!lp) continue;
        lib_kernel *k = NULL;
        CHECK_ERR(ctx, lp->create(lp, ctx, p.node, p.in, p.out, 7, &ONE_THREAD, &k), WPK_ERR_UNSUPPORTED,
                  "not 7");
        CHECK(k == NULL);
        /* a run on an output of another size */
        CHECK(lp->create(lp, ctx, p.node, p.in, p.out, 0, &ONE_THREAD, &k) == WPK_OK);
        if (k) {
            ir_tensor x = *p.in[0], y = p.t[4];
            x.data = p.data[0];
            float small[4];
            y.dims[1] = 1, y.data = small;
            ir_tensor *in[3] = {&x, p.in[1], p.in[2]}, *out[1] = {&y};
            CHECK_ERR(ctx, lp->run(lp, ctx, k, in, out), WPK_ERR_INVALID_ARG, "output");
            lp->destroy(lp, k);
        }
        /* every allocation of create failing in turn: a status, nothing leaked or crashed */
        for (long at = 1; at <= 40; at++) {
            wpk_alloc_fail_at(at);
            k = NULL;
            wpk_status st = lp->create(lp, ctx, p.node, p.in, p.out, 0, &ONE_THREAD, &k);
            wpk_alloc_fail_at(0);
            CHECK(st == WPK_OK || st == WPK_ERR_NOMEM);
            CHECK((st == WPK_OK) == (k != NULL));
            if (k) lp->destroy(lp, k);
        }
        /* a 1-D conv: neither provider takes it */
        ir_graph *g = ir_graph_create();
        int ni = ir_graph_add_node(g, "conv1d", "Conv", "", 17, 2, 1);
        ir_node *n = &g->nodes[ni];
        float xd[2 * 8] = {0}, wd[4 * 2 * 3] = {0};
        ir_tensor x = {WPK_DTYPE_FLOAT32, 3, {1, 2, 8}, xd}, w = {WPK_DTYPE_FLOAT32, 3, {4, 2, 3}, wd};
        ir_tensor y = {WPK_DTYPE_FLOAT32, 3, {1, 4, 6}, NULL};
        ir_tensor *in[2] = {&x, &w}, *out[1] = {&y};
        CHECK(!lp->supports(lp, n, in, out));
        CHECK_ERR(ctx, lp->create(lp, ctx, n, in, out, 0, &ONE_THREAD, &k), WPK_ERR_UNSUPPORTED, "1-D");
        /* an output shape the inputs do not give: the node is inconsistent */
        y.dims[2] = 5;
        CHECK_ERR(ctx, lp->create(lp, ctx, n, in, out, 0, &ONE_THREAD, &k), WPK_ERR_MODEL, "conv1d");
        ir_graph_free(g);
    }
    problem_free(&p);
}

int main(void) {
    wpk_context *ctx = wpk_context_create();
    const kernel_provider *lps[NPROV];
    int built = 0;
    for (int i = 0; i < NPROV; i++) {
        lps[i] = lib_provider_find(PROVIDERS[i]);
        if (lps[i]) {
            printf("%s: %s\n", PROVIDERS[i], lps[i]->version(lps[i]));
            CHECK(lps[i]->version(lps[i])[0] != 0);
            built++;
        } else {
            printf("%s: not built in (the library was not found at build time): skipped\n",
                   PROVIDERS[i]);
        }
    }
    if (!built) {
        wpk_context_free(ctx);
        return 0;
    }
    for (int i = 0; i < NCONVS; i++) {
        problem p;
        if (!conv_problem(ctx, &CONVS[i], &p)) CHECK(false);
        else test_problem(ctx, lps, &p);
        problem_free(&p);
    }
    for (int i = 0; i < NGEMMS; i++) {
        problem p;
        if (!gemm_problem(ctx, &GEMMS[i], &p)) CHECK(false);
        else test_problem(ctx, lps, &p);
        problem_free(&p);
    }
    test_must_fail(ctx, lps);
    wpk_context_free(ctx);
    CHECK_DONE();
}
