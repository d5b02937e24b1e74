/* test_cuda_libs.c -- the vendor-library providers of the CUDA runtime (cuDNN forward
 * convolution, cuBLAS sgemm, cuBLASLt matmul with fused epilogues) against mock libraries:
 * argv[1] the mock driver (tests/cuda/mock_libcuda.c: device memory is host memory), argv[2]
 * the mock cuDNN/cuBLAS/cuBLASLt (tests/cuda/mock_cudalibs.c: they really compute, naively).
 * Checked: the call sequence (handle on the backend's stream, descriptors, FMA/pedantic math
 * unless TF32 is asked for, the algorithm list with unsupported ones dropped, workspace sized
 * per algorithm), every algorithm as a config giving the reference result (plain C here) for
 * plain and fused (bias + residual + ReLU) convolutions and for row-major products with every
 * transpose, cuBLASLt's bias/ReLU epilogues, and refusals named (asymmetric pads, a config out
 * of range). Then the three as kernel_providers (lib_cudnn, lib_cublas, lib_cublaslt) on real
 * nodes against the reference kernels: supports and configs, the task's key and space, every
 * config created on the mock device (those the library lacks refused, WPK_ERR_UNSUPPORTED),
 * run twice on device buffers with the constants copied at create, destroyed; a host device
 * refused naming the node; what each cannot compute exactly refused with its cause. Then the
 * libraries as candidates of the CUDA target: the choice from a records database (a library
 * where its record beats the template's, the template where not, a library record alone), and
 * a conv chosen as cuDNN's step of a CUDA plan, written and read back, run by rt_exec on the
 * mock device against the reference; and through the public API, `wpk compile --target cuda`'s
 * .wpk with the records favouring cuDNN, loaded and run by wpk_plan_load against the reference
 * session. What this cannot check -- the real libraries' numerics
 * and speed -- is test_cuda_gpu's part on a GPU. */
#define _DEFAULT_SOURCE

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "../unit/check.h"
#include "api/exec_plan.h"
#include "api/model.h"
#include "base/alloc.h"
#include "base/context.h"
#include "compile/cuda_choice.h"
#include "kernels/conv.h"
#include "kernels/templates_cuda.h"
#include "runtime/exec.h"
#include "tune/measure.h"
#include "ir/graph.h"
#include "ir/ops.h"
#include "kernels/vendor/cuda_libs.h"
#include "passes/pass.h"
#include "runtime/artifact.h"
#include "wpk.h"
#include "kernels/vendor/lib.h"
#include "runtime/cuda/cuda_rt.h"
#include "test_data.h"

static const char *(*mock_log)(void);
static void (*mock_reset)(void);

static bool logged(const char *needle) {
    bool ok = strstr(mock_log(), needle) != NULL;
    if (!ok) fprintf(stderr, "not in the call log: %s\n--- log ---\n%s", needle, mock_log());
    return ok;
}

/* A device buffer holding host[0..n). */
static uint64_t upload(rt_cuda *d, const float *host, int64_t n) {
    uint64_t p = 0;
    CHECK(rt_cuda_alloc(d, (size_t)n * 4, &p) == WPK_OK);
    if (p && host) CHECK(rt_cuda_upload(d, p, host, (size_t)n * 4) == WPK_OK);
    return p;
}

/* ---- cuDNN ---- */

static void conv_ref(const rt_conv_desc *g, const float *x, const float *w, const float *b,
                     const float *z, float *y, int64_t oh, int64_t ow) {
    const int64_t cg = g->c / g->groups, per = g->k / g->groups;
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t k = 0; k < g->k; k++)
            for (int64_t i = 0; i < oh; i++)
                for (int64_t j = 0; j < ow; j++) {
                    double s = 0;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t r = 0; r < g->kh; r++)
                            for (int64_t q = 0; q < g->kw; q++) {
                                int64_t ih = i * g->stride[0] - g->pad[0] + r * g->dilation[0];
                                int64_t iw = j * g->stride[1] - g->pad[1] + q * g->dilation[1];
                                if (ih < 0 || ih >= g->h || iw < 0 || iw >= g->w) continue;
                                int64_t ic = (k / per) * cg + c;
                                s += (double)x[((n * g->c + ic) * g->h + ih) * g->w + iw] *
                                     w[((k * cg + c) * g->kh + r) * g->kw + q];
                            }
                    int64_t o = ((n * g->k + k) * oh + i) * ow + j;
                    float v = (float)s + (g->bias ? b[k] : 0) + (g->residual ? z[o] : 0);
                    y[o] = g->relu && v < 0 ? 0 : v;
                }
}

static void test_cudnn(rt_cuda *d, wpk_context *ctx) {
    rt_conv_desc g = {.n = 2, .c = 4, .h = 7, .w = 6, .k = 6, .kh = 3, .kw = 3, .stride = {2, 1},
                      .pad = {1, 1, 1, 1}, .dilation = {1, 2}, .groups = 2};
    /* dilation 2 along w: a 5-wide tap span */
    const int64_t oh = (7 + 2 - 3) / 2 + 1, ow = (6 + 2 - 5) / 1 + 1;
    const int64_t nx = 2 * 4 * 7 * 6, nw = 6 * 2 * 3 * 3, ny = 2 * 6 * oh * ow;
    float *x = randoms(nx), *w = randoms(nw), *b = randoms(6), *z = randoms(ny);
    float *want = nans(ny), *got = nans(ny);
    uint64_t dx = upload(d, x, nx), dw = upload(d, w, nw), db = upload(d, b, 6);
    uint64_t dz = upload(d, z, ny), dy = upload(d, NULL, ny);
    for (int variant = 0; variant < 3; variant++) {
        /* plain; bias + residual + relu (every algorithm); bias alone (PRECOMP only) */
        g.bias = variant > 0, g.residual = variant == 1, g.relu = variant == 1;
        mock_reset();
        rt_cudnn_conv *c = NULL;
        wpk_status st = rt_cudnn_conv_create(d, &g, &c);
        if (st) fprintf(stderr, "cudnn create: %s\n", wpk_context_error(ctx));
        CHECK(st == WPK_OK && c);
        if (!c) continue;
        CHECK(logged("cudnnCreate\ncudnnSetStream(stream)"));
        CHECK(logged("cudnnSetTensor4dDescriptor(0,0,2,4,7,6)"));
        CHECK(logged("cudnnSetFilter4dDescriptor(0,0,6,2,3,3)"));
        CHECK(logged("cudnnSetConvolution2dDescriptor(1,1,2,1,1,2,1,0)"));
        CHECK(logged("cudnnSetConvolutionGroupCount(2)"));
        CHECK(logged("cudnnSetConvolutionMathType(3)")); /* FMA: no TF32 unless asked */
        CHECK(logged("cudnnSetTensor4dDescriptor(0,0,2,6,4,4)"));
        int algos[8];
        int n = rt_cudnn_conv_algos(c, algos, 8);
        if (variant == 2) {
            CHECK(n == 1 && algos[0] == 1);
        } else {
            /* offered 1, 0, 4 (not supported), 6, 2: FFT dropped, the library's order kept */
            CHECK(n == 4 && algos[0] == 1 && algos[1] == 0 && algos[2] == 6 && algos[3] == 2);
        }
        conv_ref(&g, x, w, b, z, want, oh, ow);
        for (int i = 0; i < n && i < 8; i++) {
            size_t ws = 0;
            CHECK(rt_cudnn_conv_workspace(c, algos[i], &ws) == WPK_OK);
            CHECK(ws == (size_t)algos[i] * 1024);
            CHECK(rt_cuda_memset_async(d, dy, 0xff, (size_t)ny * 4) == WPK_OK);
            st = rt_cudnn_conv_run(c, algos[i], dx, dw, db, dz, dy);
            if (st) fprintf(stderr, "cudnn run %s: %s\n", rt_cudnn_algo_name(algos[i]),
                            wpk_context_error(ctx));
            CHECK(st == WPK_OK);
            CHECK(rt_cuda_download(d, got, dy, (size_t)ny * 4) == WPK_OK);
            char what[96];
            snprintf(what, sizeof what, "cuDNN variant %d algo %s", variant,
                     rt_cudnn_algo_name(algos[i]));
            CHECK(close_all(got, want, ny, what));
        }
        CHECK(logged(variant ? "cudnnConvolutionBiasActivationForward(algo=1,ws=1024)"
                             : "cudnnConvolutionForward(algo=1,ws=1024)"));
        if (variant == 1) CHECK(logged("cudnnSetActivationDescriptor(1,1,0)"));
        /* an algorithm it did not offer is refused before any call */
        CHECK_ERR(ctx, rt_cudnn_conv_run(c, 4, dx, dw, db, dz, dy), WPK_ERR_UNSUPPORTED,
                  "algorithm 4 (FFT) does not run this conv");
        rt_cudnn_conv_free(c);
        CHECK(logged("cudnnDestroy"));
    }
    g.pad[3] = 2;
    rt_cudnn_conv *c = NULL;
    CHECK_ERR(ctx, rt_cudnn_conv_create(d, &g, &c), WPK_ERR_UNSUPPORTED, "asymmetric padding");
    CHECK(c == NULL);
    rt_cuda_free(d, dx), rt_cuda_free(d, dw), rt_cuda_free(d, db), rt_cuda_free(d, dz);
    rt_cuda_free(d, dy);
    free(x), free(w), free(b), free(z), free(want), free(got);
}

/* ---- cuBLAS and cuBLASLt ---- */

/* row-major C[m, n] = A B (+ bias[n], relu) with A [m, k] or [k, m], B [k, n] or [n, k] */
static void mm_ref(const rt_gemm_desc *g, const float *a, const float *b, const float *bias,
                   float *c) {
    for (int64_t i = 0; i < g->m; i++)
        for (int64_t j = 0; j < g->n; j++) {
            double s = 0;
            for (int64_t p = 0; p < g->k; p++)
                s += (double)(g->trans_a ? a[p * g->m + i] : a[i * g->k + p]) *
                     (g->trans_b ? b[j * g->k + p] : b[p * g->n + j]);
            float v = (float)s + (g->bias ? bias[j] : 0);
            c[i * g->n + j] = g->relu && v < 0 ? 0 : v;
        }
}

static void test_cublas(rt_cuda *d, wpk_context *ctx) {
    const int64_t m = 5, n = 7, k = 3;
    float *a = randoms(m * k), *b = randoms(k * n), *bias = randoms(n);
    float *want = nans(m * n), *got = nans(m * n);
    uint64_t da = upload(d, a, m * k), db = upload(d, b, k * n), dbias = upload(d, bias, n);
    uint64_t dc = upload(d, NULL, m * n);
    mock_reset();
    rt_cublas *bl = NULL;
    CHECK(rt_cublas_create(d, false, &bl) == WPK_OK && bl);
    CHECK(logged("cublasCreate_v2\ncublasSetStream_v2(stream)\ncublasSetMathMode(2)"));
    for (int tb = 0; tb < 2 && bl; tb++) {
        rt_gemm_desc g = {.m = m, .n = n, .k = k, .trans_b = tb};
        mm_ref(&g, a, b, NULL, want);
        CHECK(rt_cublas_matmul(bl, m, n, k, da, db, tb, dc) == WPK_OK);
        CHECK(rt_cuda_download(d, got, dc, (size_t)(m * n) * 4) == WPK_OK);
        CHECK(close_all(got, want, m * n, tb ? "cuBLAS sgemm, B transposed" : "cuBLAS sgemm"));
    }
    CHECK(logged("cublasSgemm_v2(N,N,7,5,3,lda=7,ldb=3,ldc=7)"));
    CHECK(logged("cublasSgemm_v2(T,N,7,5,3,lda=3,ldb=3,ldc=7)"));
    if (bl) CHECK_ERR(ctx, rt_cublas_matmul(bl, 0, n, k, da, db, false, dc), WPK_ERR_UNSUPPORTED,
                      "outside its int range");
    rt_cublas_free(bl);

    /* cuBLASLt: every transpose, every epilogue, every algorithm the heuristic offers */
    for (int v = 0; v < 8; v++) {
        rt_gemm_desc g = {.m = m, .n = n, .k = k, .trans_a = v & 1, .trans_b = (v >> 1) & 1,
                          .bias = (v >> 2) & 1, .relu = v == 3 || v == 7};
        mock_reset();
        rt_cublaslt_gemm *lt = NULL;
        wpk_status st = rt_cublaslt_gemm_create(d, &g, &lt);
        if (st) fprintf(stderr, "cuBLASLt create: %s\n", wpk_context_error(ctx));
        CHECK(st == WPK_OK && lt);
        if (!lt) continue;
        CHECK(logged("cublasLtMatmulDescCreate(69,0)")); /* pedantic FP32 */
        CHECK(logged("cublasLtMatrixLayoutCreate(0,7,5,7)")); /* C: [n rows, m cols], ld n */
        CHECK(rt_cublaslt_gemm_configs(lt) == 2); /* the failed heuristic result dropped */
        mm_ref(&g, a, b, bias, want);
        for (int cfg = 0; cfg < rt_cublaslt_gemm_configs(lt); cfg++) {
            CHECK(rt_cuda_memset_async(d, dc, 0xff, (size_t)(m * n) * 4) == WPK_OK);
            st = rt_cublaslt_gemm_run(lt, cfg, da, db, dbias, dc);
            if (st) fprintf(stderr, "cuBLASLt run: %s\n", wpk_context_error(ctx));
            CHECK(st == WPK_OK);
            CHECK(rt_cuda_download(d, got, dc, (size_t)(m * n) * 4) == WPK_OK);
            char what[96];
            snprintf(what, sizeof what, "cuBLASLt ta=%d tb=%d bias=%d relu=%d config %d",
                     g.trans_a, g.trans_b, g.bias, g.relu, cfg);
            CHECK(close_all(got, want, m * n, what));
        }
        CHECK(logged(g.bias ? (g.relu ? "epilogue=6" : "epilogue=4")
                            : (g.relu ? "epilogue=2" : "epilogue=1")));
        CHECK(logged("cublasLtMatmul(algo=2,") && logged("ws=8192)"));
        CHECK_ERR(ctx, rt_cublaslt_gemm_run(lt, 2, da, db, dbias, dc), WPK_ERR_INVALID_ARG,
                  "config 2 of 2");
        rt_cublaslt_gemm_free(lt);
    }
    rt_gemm_desc tf = {.m = m, .n = n, .k = k, .tf32 = true};
    rt_cublaslt_gemm *lt = NULL;
    mock_reset();
    CHECK(rt_cublaslt_gemm_create(d, &tf, &lt) == WPK_OK);
    CHECK(logged("cublasLtMatmulDescCreate(77,0)"));
    rt_cublaslt_gemm_free(lt);
    rt_cuda_free(d, da), rt_cuda_free(d, db), rt_cuda_free(d, dbias), rt_cuda_free(d, dc);
    free(a), free(b), free(bias), free(want), free(got);
}

/* ---- the three through the kernel_provider interface ---- */

/* A node with its tensors: inputs 0..3 and output 4 (host data, the output's the reference's). */
typedef struct problem {
    ir_graph *g;
    ir_node *node;
    ir_tensor t[5];
    ir_tensor *in[4], *out[1];
    unsigned dynamic;        /* inputs given at run time, on the device (a bit each) */
    float *want;
    int64_t ny;
} problem;

static void problem_free(problem *p) {
    for (int i = 0; i < 5; i++) free(p->t[i].data);
    free(p->want);
    ir_graph_free(p->g);
}

/* Shape and reference result of p's node. */
static bool problem_finish(wpk_context *ctx, problem *p) {
    ir_tensor *y = &p->t[4];
    p->out[0] = y;
    if (ir_op_get(p->node->op)->shape(ctx, p->node, p->in, p->out)) {
        fprintf(stderr, "%s: shape: %s\n", p->node->name, wpk_context_error(ctx));
        return false;
    }
    p->ny = ir_numel(y);
    y->data = nans(p->ny);
    p->want = nans(p->ny);
    if (ir_op_get(p->node->op)->ref(ctx, p->node, p->in, p->out)) {
        fprintf(stderr, "%s: reference: %s\n", p->node->name, wpk_context_error(ctx));
        return false;
    }
    memcpy(p->want, y->data, sizeof(float) * (size_t)p->ny);
    return true;
}

static void set_input(problem *p, int i, int ndim, const int64_t *dims) {
    p->t[i] = (ir_tensor){.dtype = WPK_DTYPE_FLOAT32, .ndim = ndim};
    memcpy(p->t[i].dims, dims, sizeof(int64_t) * (size_t)ndim);
    p->t[i].data = randoms(ir_numel(&p->t[i]));
    p->in[i] = &p->t[i];
}

/* Y = act(conv(X, W) + B + Z): X [1 or 2, c, h, w], W [k, c/group, 3, 3]. */
static bool conv_problem(wpk_context *ctx, problem *p, const char *name, const char *op,
                         int64_t group, const int64_t *pads, bool bias, bool residual,
                         const char *act) {
    memset(p, 0, sizeof *p);
    p->g = ir_graph_create();
    bool onnx = !strcmp(op, "Conv");
    int nin = residual ? 4 : bias ? 3 : 2;
    int idx = ir_graph_add_node(p->g, name, op, onnx ? "" : "wpk", onnx ? 17 : 1, nin, 1);
    ir_node *n = p->node = &p->g->nodes[idx];
    ir_node_set_ints(p->g, n, "strides", (const int64_t[]){2, 1}, 2);
    ir_node_set_ints(p->g, n, "dilations", (const int64_t[]){1, 2}, 2);
    ir_node_set_ints(p->g, n, "pads", pads, 4);
    ir_node_set_int(p->g, n, "group", group);
    if (act) ir_node_set_str(p->g, n, "activation", act);
    if (act && !strcmp(act, "LeakyRelu")) ir_node_set_float(p->g, n, "alpha", 0.1f);
    set_input(p, 0, 4, (const int64_t[]){2, 4, 7, 6});
    set_input(p, 1, 4, (const int64_t[]){6, 4 / group, 3, 3});
    if (bias) set_input(p, 2, 1, (const int64_t[]){6});
    p->dynamic = 1u;
    if (residual) {
        /* Z has Y's shape: inferred first, without it */
        ir_tensor y = {0};
        ir_tensor *yo[1] = {&y};
        n->nin = 3;
        if (ir_op_get(n->op)->shape(ctx, n, p->in, yo)) return false;
        n->nin = 4;
        set_input(p, 3, y.ndim, y.dims);
        p->dynamic |= 1u << 3;
    }
    return problem_finish(ctx, p);
}

/* Y = act(alpha A' B' + beta C + bias + Z) for Gemm / FusedGemm / MatMul / FusedMatMul. */
static bool gemm_problem(wpk_context *ctx, problem *p, const char *name, const char *op, int an,
                         const int64_t *adims, int bn, const int64_t *bdims, int cn,
                         const int64_t *cdims, bool ta, bool tb, float alpha, float beta,
                         const char *act, unsigned dynamic) {
    memset(p, 0, sizeof *p);
    p->g = ir_graph_create();
    bool onnx = !strcmp(op, "Gemm") || !strcmp(op, "MatMul");
    int idx = ir_graph_add_node(p->g, name, op, onnx ? "" : "wpk", onnx ? 17 : 1,
                                cn >= 0 ? 3 : 2, 1);
    ir_node *n = p->node = &p->g->nodes[idx];
    if (!strcmp(op, "Gemm") || !strcmp(op, "FusedGemm")) {
        ir_node_set_int(p->g, n, "transA", ta);
        ir_node_set_int(p->g, n, "transB", tb);
    }
    if (!strcmp(op, "Gemm")) {
        ir_node_set_float(p->g, n, "alpha", alpha);
        ir_node_set_float(p->g, n, "beta", beta);
    }
    if (act) ir_node_set_str(p->g, n, "activation", act);
    set_input(p, 0, an, adims);
    set_input(p, 1, bn, bdims);
    if (cn >= 0) set_input(p, 2, cn, cdims);
    p->dynamic = dynamic | 1u;
    return problem_finish(ctx, p);
}

static float *dup_floats(const ir_tensor *t) {
    float *q = malloc(ir_nbytes(t));
    memcpy(q, t->data, ir_nbytes(t));
    return q;
}

/* Provider lp on p through the interface: supports, configs, the task's key and space; every
 * config created on device d (ok_configs: the bits of those the library has, the others
 * refused naming `refused`), run on device buffers and compared with the reference, destroyed;
 * a host device refused. Constant inputs are handed to create as host copies overwritten
 * after it (they must have been copied), and given no data at run. */
static void drive(rt_cuda *d, wpk_context *ctx, const kernel_provider *lp, problem *p,
                  int want_configs, unsigned ok_configs, const char *refused) {
    char what[1200];
    snprintf(what, sizeof what, "%s on '%s'", lp->name, p->node->name);
    CHECK(lp->supports(lp, p->node, p->in, p->out));
    char names[LIB_MAX_CONFIGS][LIB_CONFIG_MAX];
    int nc = lp->configs(lp, p->node, p->in, p->out, names);
    if (nc != want_configs) fprintf(stderr, "%s: %d configs, want %d\n", what, nc, want_configs);
    CHECK(nc == want_configs);
    tune_task task;
    tune_task_init(&task, lp, p->node, p->in, p->out);
    CHECK(!strncmp(task.key, lp->name, strlen(lp->name)) && task.key[strlen(lp->name)] == '|');
    tune_space sp;
    lp->space(lp, &task, &sp);
    CHECK(sp.nknobs == 1 && !strcmp(sp.knobs[0].name, "algo") && sp.knobs[0].nvalues == nc);
    CHECK(lp->version(lp) && strstr(lp->version(lp), "cu"));

    ir_tensor ct[4], rt[4], ot = *p->out[0], yt = *p->out[0];
    ir_tensor *cin[4] = {0}, *rin[4] = {0}, *cout[1] = {&ot}, *rout[1] = {&yt};
    uint64_t dev_in[4] = {0};
    ot.data = NULL;
    for (int i = 0; i < 4; i++) {
        if (!p->in[i]) continue;
        ct[i] = rt[i] = *p->in[i];
        cin[i] = &ct[i], rin[i] = &rt[i];
        rt[i].data = NULL;
        if (p->dynamic >> i & 1) {
            ct[i].data = NULL;
            dev_in[i] = upload(d, p->in[i]->data, ir_numel(p->in[i]));
            rt[i].data = (void *)(uintptr_t)dev_in[i];
        }
    }
    uint64_t dy[2] = {upload(d, NULL, p->ny), upload(d, NULL, p->ny)};
    float *got = nans(p->ny);
    const kernel_device dev = {.threads = 1, .cuda = d};
    for (int cfg = 0; cfg < nc; cfg++) {
        float *copies[4] = {0};
        for (int i = 0; i < 4; i++)
            if (cin[i] && ct[i].data) ct[i].data = copies[i] = dup_floats(p->in[i]);
        lib_kernel *k = NULL;
        wpk_status st = lp->create(lp, ctx, p->node, cin, cout, cfg, &dev, &k);
        for (int i = 0; i < 4; i++)
            if (copies[i]) {
                for (int64_t j = 0; j < ir_numel(&ct[i]); j++) copies[i][j] = NAN;
                free(copies[i]);
                ct[i].data = p->in[i]->data;
            }
        if (!(ok_configs >> cfg & 1)) {
            CHECK_ERR(ctx, st, WPK_ERR_UNSUPPORTED, refused);
            CHECK(k == NULL);
            continue;
        }
        if (st) fprintf(stderr, "%s config %d (%s): %s\n", what, cfg, names[cfg],
                        wpk_context_error(ctx));
        CHECK(st == WPK_OK && k);
        if (!k) continue;
        const void *cs[4];
        size_t cb[4];
        CHECK(lp->constants(lp, k, cs, cb, 4) == 0);
        /* twice, on two output buffers: nothing of the first run's is kept */
        for (int r = 0; r < 2; r++) {
            yt.data = (void *)(uintptr_t)dy[r];
            CHECK(rt_cuda_memset_async(d, dy[r], 0xff, (size_t)p->ny * 4) == WPK_OK);
            st = lp->run(lp, ctx, k, rin, rout);
            if (st) fprintf(stderr, "%s config %d run: %s\n", what, cfg, wpk_context_error(ctx));
            CHECK(st == WPK_OK);
            CHECK(rt_cuda_download(d, got, dy[r], (size_t)p->ny * 4) == WPK_OK);
            char w2[2600];
            snprintf(w2, sizeof w2, "%s config %d (%s) run %d", what, cfg, names[cfg], r);
            CHECK(close_all(got, p->want, p->ny, w2));
        }
        yt.data = NULL;
        CHECK_ERR(ctx, lp->run(lp, ctx, k, rin, rout), WPK_ERR_INVALID_ARG,
                  "output 0 has no device address");
        lp->destroy(lp, k);
    }
    /* the host is not a device these providers run on */
    const kernel_device host = {.threads = 1};
    lib_kernel *k = NULL;
    char needle[1200];
    snprintf(needle, sizeof needle, "node '%s': %s runs on a CUDA device, not on the host",
             p->node->name, lp->name);
    CHECK_ERR(ctx, lp->create(lp, ctx, p->node, cin, cout, 0, &host, &k), WPK_ERR_UNSUPPORTED,
              needle);
    CHECK(k == NULL);
    for (int i = 0; i < 4; i++) rt_cuda_free(d, dev_in[i]);
    rt_cuda_free(d, dy[0]), rt_cuda_free(d, dy[1]);
    free(got);
}

/* What lp does not take: supports false, no configs, create refused naming the cause. */
static void refuse(rt_cuda *d, wpk_context *ctx, const kernel_provider *lp, const problem *p,
                   const char *needle) {
    char names[LIB_MAX_CONFIGS][LIB_CONFIG_MAX];
    if (lp->supports(lp, p->node, p->in, p->out))
        fprintf(stderr, "%s supports '%s'\n", lp->name, p->node->name);
    CHECK(!lp->supports(lp, p->node, p->in, p->out));
    CHECK(lp->configs(lp, p->node, p->in, p->out, names) == 0);
    const kernel_device dev = {.cuda = d};
    lib_kernel *k = NULL;
    CHECK_ERR(ctx, lp->create(lp, ctx, p->node, p->in, p->out, 0, &dev, &k), WPK_ERR_UNSUPPORTED,
              needle);
    CHECK(k == NULL);
}

static void test_providers(rt_cuda *d, wpk_context *ctx) {
    const kernel_provider *const *list = lib_cuda_providers();
    CHECK(list[0] == &lib_cudnn && list[1] == &lib_cublas && list[2] == &lib_cublaslt &&
          !list[3]);
    CHECK(lib_cuda_provider_find("cublaslt") == &lib_cublaslt);
    CHECK(!lib_cuda_provider_find("onednn") && !lib_provider_find("cudnn"));
    for (int i = 0; list[i]; i++) CHECK(!strcmp(list[i]->family, list[i]->name));
    const kernel_provider *dnn = &lib_cudnn, *blas = &lib_cublas, *lt = &lib_cublaslt;
    const int64_t sym[4] = {1, 1, 1, 1}, asym[4] = {1, 1, 1, 2};
    /* mock cuDNN offers algorithms 1, 0, 4 (failing), 6, 2: configs 0..7 are algorithms 1, 0,
     * 2, 3, 4, 5, 6, 7, so configs 0, 1, 2 and 6 run */
    problem p;
    if (conv_problem(ctx, &p, "fused conv", "FusedConv", 2, sym, true, true, "Relu")) {
        drive(d, ctx, dnn, &p, 8, 0x47, "does not run this conv");
        refuse(d, ctx, blas, &p, "not a matrix product");
        refuse(d, ctx, lt, &p, "not a matrix product");
    }
    problem_free(&p);
    if (conv_problem(ctx, &p, "conv", "Conv", 1, sym, false, false, NULL))
        drive(d, ctx, dnn, &p, 8, 0x47, "does not run this conv");
    problem_free(&p);
    /* a bias without an activation: cuDNN's fused call runs IMPLICIT_PRECOMP_GEMM alone */
    if (conv_problem(ctx, &p, "conv + bias", "Conv", 1, sym, true, false, NULL))
        drive(d, ctx, dnn, &p, 1, 0x1, "");
    problem_free(&p);
    if (conv_problem(ctx, &p, "asymmetric conv", "Conv", 1, asym, true, false, NULL))
        refuse(d, ctx, dnn, &p, "asymmetric pads (1, 1, 1, 2)");
    problem_free(&p);
    if (conv_problem(ctx, &p, "leaky conv", "FusedConv", 1, sym, true, false, "LeakyRelu"))
        refuse(d, ctx, dnn, &p, "cuDNN fuses ReLU only");
    problem_free(&p);

    /* mock cuBLASLt's heuristic gives 2 algorithms (a third failing): configs 0 and 1 */
    if (gemm_problem(ctx, &p, "gemm row C", "Gemm", 2, (const int64_t[]){5, 3}, 2,
                     (const int64_t[]){7, 3}, 1, (const int64_t[]){7}, false, true, 1, 1, NULL,
                     0)) {
        drive(d, ctx, blas, &p, 1, 0x1, "");
        drive(d, ctx, lt, &p, RT_CUBLASLT_MAX_ALGOS, 0x3, "heuristic offers 2 algorithms");
        refuse(d, ctx, dnn, &p, "not a convolution");
    }
    problem_free(&p);
    if (gemm_problem(ctx, &p, "gemm column C, alpha, beta", "Gemm", 2, (const int64_t[]){3, 5}, 2,
                     (const int64_t[]){3, 7}, 2, (const int64_t[]){5, 1}, true, false, 0.5f, 2.0f,
                     NULL, 0x4)) {
        drive(d, ctx, blas, &p, 1, 0x1, "");
        refuse(d, ctx, lt, &p, "alpha 0.5");
    }
    problem_free(&p);
    if (gemm_problem(ctx, &p, "gemm full C", "Gemm", 2, (const int64_t[]){5, 3}, 2,
                     (const int64_t[]){3, 7}, 2, (const int64_t[]){5, 7}, false, false, 1, 1,
                     NULL, 0)) {
        refuse(d, ctx, blas, &p, "a row [1, 7] or a column [5, 1]");
        refuse(d, ctx, lt, &p, "C broadcast from [5, 7]");
    }
    problem_free(&p);
    if (gemm_problem(ctx, &p, "batched matmul", "MatMul", 3, (const int64_t[]){3, 4, 6}, 2,
                     (const int64_t[]){6, 5}, -1, NULL, false, false, 1, 1, NULL, 0x2)) {
        drive(d, ctx, blas, &p, 1, 0x1, "");
        refuse(d, ctx, lt, &p, "a batch of 3 products");
    }
    problem_free(&p);
    if (gemm_problem(ctx, &p, "fused matmul", "FusedMatMul", 2, (const int64_t[]){5, 3}, 2,
                     (const int64_t[]){3, 7}, 1, (const int64_t[]){7}, false, false, 1, 1, "Relu",
                     0)) {
        drive(d, ctx, lt, &p, RT_CUBLASLT_MAX_ALGOS, 0x3, "heuristic offers 2 algorithms");
        refuse(d, ctx, blas, &p, "an epilogue");
    }
    problem_free(&p);
    if (gemm_problem(ctx, &p, "fused gemm gelu", "FusedGemm", 2, (const int64_t[]){5, 3}, 2,
                     (const int64_t[]){7, 3}, 1, (const int64_t[]){7}, false, true, 1, 1, "Gelu",
                     0)) {
        refuse(d, ctx, lt, &p, "activation Gelu");
        refuse(d, ctx, blas, &p, "an epilogue");
    }
    problem_free(&p);
}

/* ---- the libraries as candidates of the CUDA target ---- */

/* A record of config for task t under target, median ms. */
static void add_record(tune_db *db, const char *target, const tune_task *t, const char *config,
                       double ms) {
    const double sample = ms * 1e-3;
    tune_record r = {target, t->key, t->tmpl->name, config, TUNE_OK, &sample, 1, sample,
                     "test", 0};
    CHECK(tune_db_add(db, &r) == WPK_OK);
}

/* The choice between a node's template and the libraries, from records. */
static void test_choice(wpk_context *ctx, const char *target, const char *dir) {
    problem conv, mm;
    /* no bias: every cuDNN algorithm is a config (a bias alone takes one) */
    if (!conv_problem(ctx, &conv, "conv", "Conv", 1, (const int64_t[]){1, 1, 1, 1}, false, false,
                      NULL) ||
        !gemm_problem(ctx, &mm, "mm", "MatMul", 2, (const int64_t[]){5, 12}, 2,
                      (const int64_t[]){12, 7}, -1, NULL, false, false, 1, 1, NULL, 2u)) {
        CHECK(!"the choice's problems");
        problem_free(&conv), problem_free(&mm);
        return;
    }
    char path[256];
    snprintf(path, sizeof path, "%s/choice.db", dir);
    tune_db *db = NULL;
    CHECK(tune_db_open(ctx, path, &db) == WPK_OK);
    tune_task ct, cl, mt, ml;
    const kernel_provider *tc = kernel_provider_cuda_for(conv.node, conv.in, conv.out);
    const kernel_provider *tm = kernel_provider_cuda_for(mm.node, mm.in, mm.out);
    CHECK(tc && tm);
    if (!db || !tc || !tm) {
        tune_db_close(db);
        problem_free(&conv), problem_free(&mm);
        return;
    }
    tune_task_init(&ct, tc, conv.node, conv.in, conv.out);
    tune_task_init(&cl, &lib_cudnn, conv.node, conv.in, conv.out);
    tune_task_init(&mt, tm, mm.node, mm.in, mm.out);
    tune_task_init(&ml, &lib_cublas, mm.node, mm.in, mm.out);
    CHECK(!strncmp(cl.key, "cudnn|", 6) && !strncmp(ml.key, "cublas|", 7));
    cuda_choice c;
    memset(&c, 0, sizeof c);
    c.db = db;
    snprintf(c.target, sizeof c.target, "%s", target);
    int config = -1;
    /* no records: the template */
    CHECK(cuda_choice_lib(&c, &ct, &config) == NULL);
    /* cuDNN's algo 2 beats the template's best, its algo 1 does not */
    add_record(db, target, &ct, "threads_k=8", 2.0);
    add_record(db, target, &cl, "algo=1", 3.0);
    CHECK(cuda_choice_lib(&c, &ct, &config) == NULL);
    add_record(db, target, &cl, "algo=2", 1.0);
    CHECK(cuda_choice_lib(&c, &ct, &config) == &lib_cudnn && config == 2);
    /* another GPU's records count for nothing */
    c.target[0] = 'x';
    CHECK(cuda_choice_lib(&c, &ct, &config) == NULL);
    c.target[0] = target[0];
    /* the product: a library record alone wins; a fastest record outside its library's space
       is passed over */
    add_record(db, target, &ml, "algo=0", 0.9);
    config = -1;
    CHECK(cuda_choice_lib(&c, &mt, &config) == &lib_cublas && config == 0);
    tune_task mlt;
    tune_task_init(&mlt, &lib_cublaslt, mm.node, mm.in, mm.out);
    add_record(db, target, &mlt, "algo=99", 0.3);
    CHECK(cuda_choice_lib(&c, &mt, &config) == &lib_cublas && config == 0);
    add_record(db, target, &mt, "thread_x=8", 0.1);
    CHECK(cuda_choice_lib(&c, &mt, &config) == NULL);
    CHECK(c.libs == 3);
    tune_db_close(db);
    problem_free(&conv), problem_free(&mm);
}

/* x [1, 3, 9, 9] -> Conv (w [5, 3, 3, 3], b, pads 1) -> y */
static ir_graph *conv_graph(void) {
    ir_graph *g = ir_graph_create();
    int x = ir_graph_value(g, "x");
    g->values[x].t = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {1, 3, 9, 9}, NULL};
    g->values[x].is_input = true;
    g->inputs = arena_alloc(&g->mem, sizeof(int));
    g->inputs[0] = x, g->ninputs = 1;
    ir_tensor w = {WPK_DTYPE_FLOAT32, 4, {5, 3, 3, 3}, randoms(5 * 27)};
    ir_tensor b = {WPK_DTYPE_FLOAT32, 1, {5}, randoms(5)};
    int wv = ir_graph_add_const(g, "w", &w), bv = ir_graph_add_const(g, "b", &b);
    free(w.data), free(b.data);
    int k = ir_graph_add_node(g, "conv", "Conv", "", 13, 3, 1);
    ir_node *n = &g->nodes[k];
    n->in[0] = x, n->in[1] = wv, n->in[2] = bv;
    ir_node_set_ints(g, n, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    ir_node_set_ints(g, n, "kernel_shape", (const int64_t[]){3, 3}, 2);
    int y = ir_graph_value(g, "y");
    n->out[0] = y;
    g->values[y].producer = k;
    g->outputs = arena_alloc(&g->mem, sizeof(int));
    g->outputs[0] = y, g->noutputs = 1;
    return g;
}

/* A conv the records give to cuDNN: a "cudnn" step in the CUDA plan, through a .wpk's bytes,
 * run on the mock device against the reference. */
static void test_plan_step(wpk_context *ctx, rt_cuda *d, const char *target, const char *dir) {
    ir_graph *g = conv_graph();
    ir_tensor shape = g->values[g->inputs[0]].t;
    exec_plan *p = NULL;
    wpk_status st = exec_plan_create(ctx, g, &shape, true, &p);
    if (st) fprintf(stderr, "plan: %s\n", wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    char path[256];
    snprintf(path, sizeof path, "%s/plan.db", dir);
    tune_db *db = NULL;
    CHECK(tune_db_open(ctx, path, &db) == WPK_OK);
    if (st || !db) {
        tune_db_close(db);
        exec_plan_free(p);
        ir_graph_free(g);
        return;
    }
    const ir_graph *pg = p->g;
    const ir_node *n = &pg->nodes[0];
    ir_tensor *in[3] = {&pg->values[n->in[0]].t, &pg->values[n->in[1]].t,
                        &pg->values[n->in[2]].t};
    ir_tensor *out[1] = {&pg->values[n->out[0]].t};
    tune_task lt;
    tune_task_init(&lt, &lib_cudnn, n, in, out);
    add_record(db, target, &lt, "algo=0", 0.5); /* with a bias: cuDNN's one fused algorithm */
    cuda_choice c;
    memset(&c, 0, sizeof c);
    c.db = db;
    snprintf(c.target, sizeof c.target, "%s", target);
    tune_cuda_program_options opt = tune_cuda_program_default_options();
    opt.choose = cuda_choice_pick;
    opt.choose_lib = cuda_choice_lib;
    opt.choose_user = &c;
    tune_cuda_program prog;
    st = tune_cuda_program_build(ctx, pg, &p->mem, &opt, &prog);
    if (st) fprintf(stderr, "program: %s\n", wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    if (st == WPK_OK) {
        prog.plan.target = RT_TARGET_CUDA;
        CHECK(prog.nlib_steps == 1 && prog.plan.nsteps == 1 && prog.nimages == 0);
        const rt_step *s = &prog.plan.steps[0];
        CHECK(!strcmp(s->runner, "cudnn") && !strncmp(s->impl, "cudnn ", 6) &&
              !strcmp(s->source, "tuned"));
        byte_writer w = {0};
        CHECK(rt_plan_write(ctx, &prog.plan, &w) == WPK_OK);
        byte_reader r = {w.data, w.data + w.len, false};
        rt_plan back;
        st = rt_plan_read(ctx, "conv.wpk", &r, &back);
        if (st) fprintf(stderr, "read back: %s\n", wpk_context_error(ctx));
        CHECK(st == WPK_OK);
        const bool have_back = st == WPK_OK;
        /* the reference: the conv on the host */
        const int64_t nx = 3 * 81, ny = 5 * 81;
        float *x = randoms(nx), *want = nans(ny), *got = nans(ny);
        ir_tensor xt = *in[0], yt = *out[0];
        xt.data = x, yt.data = want;
        ir_tensor *ri[3] = {&xt, in[1], in[2]}, *ro[1] = {&yt};
        CHECK(ir_op_get(n->op)->ref(ctx, n, ri, ro) == WPK_OK);
        rt_cuda_backend_options bo = {false, 0}; /* the mock libraries compute when called */
        rt_backend *be = NULL;
        rt_exec *ex = NULL;
        if (st == WPK_OK) st = rt_cuda_backend_create(ctx, d, &bo, &be);
        if (st == WPK_OK) st = rt_exec_create(ctx, "conv plan", &back, be, false, &ex);
        if (st) fprintf(stderr, "exec: %s\n", wpk_context_error(ctx));
        CHECK(st == WPK_OK);
        for (int run = 0; ex && run < 2; run++) {
            const int tx = back.inputs[0].tensor, ty = back.outputs[0].tensor;
            CHECK(rt_exec_upload(ex, ctx, tx, x, sizeof(float) * (size_t)nx) == WPK_OK);
            CHECK(rt_exec_run(ex, ctx) == WPK_OK);
            CHECK(rt_exec_download(ex, ctx, ty, got, sizeof(float) * (size_t)ny) == WPK_OK);
            CHECK(close_all(got, want, ny, "the plan's cuDNN step"));
        }
        CHECK(logged("cudnnConvolutionForward"));
        rt_exec_free(ex);
        rt_cuda_backend_free(be);
        /* the same step in a plan for the cpu is refused, naming it */
        if (have_back) {
            rt_backend cpu;
            rt_cpu_backend_init(&cpu, 1);
            CHECK_ERR(ctx, rt_exec_create(ctx, "conv plan", &back, &cpu, false, &ex),
                      WPK_ERR_UNSUPPORTED, "node 'conv' runs cudnn, a CUDA library, on the cpu "
                      "backend");
            back.target = RT_TARGET_CPU;
            CHECK_ERR(ctx, rt_exec_create(ctx, "conv plan", &back, &cpu, false, &ex),
                      WPK_ERR_PARSE, "node 'conv' runs cudnn, a CUDA library, in a plan for the "
                      "cpu");
            rt_plan_free(&back);
        }
        bw_free(&w);
        free(x), free(want), free(got);
        tune_cuda_program_free(&prog);
    }
    tune_db_close(db);
    exec_plan_free(p);
    ir_graph_free(g);
}

/* The public API's way: records favour cuDNN for conv_relu's conv, wpk_compile writes a .wpk
 * with a "cudnn" step, wpk_plan_load runs it on the mock device like the reference session. */
static void test_compiled_plan(wpk_context *ctx, const char *target, const char *dir) {
    wpk_model *m = NULL;
    CHECK(wpk_model_load(ctx, "tests/fuzz/corpus/conv_relu.onnx", &m) == WPK_OK);
    if (!m) return;
    /* the conv's library key, on the graph the compile specializes for the GPU (batch 1) */
    ir_graph *g = ir_graph_clone(m->g);
    pass_options po = pass_default_options();
    po.level = wpk_compile_default_params().opt_level;
    po.vector_floats = 0;
    CHECK(g && passes_run(ctx, g, &po) == WPK_OK);
    ir_tensor shape = g->values[g->inputs[0]].t;
    for (int d = 0; d < shape.ndim; d++)
        if (shape.dims[d] < 1) shape.dims[d] = 1;
    shape.data = NULL;
    exec_plan *p = NULL;
    CHECK(exec_plan_create(ctx, g, &shape, true, &p) == WPK_OK);
    char db_path[256], path[256];
    snprintf(db_path, sizeof db_path, "%s/compile.db", dir);
    snprintf(path, sizeof path, "%s/conv_relu.wpk", dir);
    tune_db *db = NULL;
    CHECK(tune_db_open(ctx, db_path, &db) == WPK_OK);
    int found = 0;
    for (int k = 0; p && db && k < p->g->nnodes; k++) {
        const ir_node *n = &p->g->nodes[k];
        ir_tensor *in[4] = {0}, *out[1] = {&p->g->values[n->out[0]].t};
        for (int i = 0; i < n->nin && i < 4; i++)
            in[i] = n->in[i] >= 0 ? &p->g->values[n->in[i]].t : NULL;
        if (n->dead || n->nin > 4 || !lib_cudnn.supports(&lib_cudnn, n, in, out)) continue;
        tune_task lt;
        tune_task_init(&lt, &lib_cudnn, n, in, out);
        add_record(db, target, &lt, "algo=0", 0.01);
        found++;
    }
    CHECK(found == 1);
    tune_db_close(db);
    exec_plan_free(p);
    ir_graph_free(g);
    wpk_compile_params cp = wpk_compile_default_params();
    cp.target = WPK_BACKEND_CUDA;
    cp.records = db_path;
    wpk_status st = wpk_compile(ctx, m, &cp, path);
    if (st) fprintf(stderr, "compile: %s\n", wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    /* the plan holds the library's step */
    uint8_t *file = NULL;
    byte_reader body;
    rt_plan back;
    int libs = 0;
    if (artifact_read(ctx, path, NULL, &file, &body, NULL, 0) == WPK_OK &&
        rt_plan_read(ctx, path, &body, &back) == WPK_OK) {
        for (int i = 0; i < back.nsteps; i++) libs += !strcmp(back.steps[i].runner, "cudnn");
        rt_plan_free(&back);
    }
    wpk_free(file);
    CHECK(libs == 1);
    /* it runs as the reference session does */
    float x[3 * 8 * 8];
    for (int i = 0; i < 3 * 64; i++) x[i] = (float)((i * 37) % 19) / 9.0f - 1.0f;
    const int64_t dims[4] = {1, 3, 8, 8};
    wpk_session_params sp = wpk_session_default_params();
    sp.backend = WPK_BACKEND_REF;
    wpk_session *s = NULL;
    wpk_plan *pl = NULL;
    wpk_tensor_view want, got;
    CHECK(wpk_session_create(ctx, m, &sp, &s) == WPK_OK);
    CHECK(s && wpk_session_set_input(s, "x", WPK_DTYPE_FLOAT32, dims, 4, x) == WPK_OK);
    CHECK(s && wpk_session_run(s) == WPK_OK && wpk_session_output(s, 0, &want) == WPK_OK);
    st = wpk_plan_load(ctx, path, NULL, &pl);
    if (st) fprintf(stderr, "load: %s\n", wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    if (pl && s) {
        CHECK(wpk_plan_set_input(pl, "x", WPK_DTYPE_FLOAT32, dims, 4, x) == WPK_OK);
        CHECK(wpk_plan_run(pl) == WPK_OK && wpk_plan_output(pl, 0, &got) == WPK_OK);
        int64_t n = 1;
        for (int d = 0; d < want.ndim; d++) n *= want.dims[d];
        CHECK(got.ndim == want.ndim && got.data &&
              close_all(got.data, want.data, n, "the compiled plan's cuDNN step"));
    }
    wpk_plan_free(pl);
    wpk_session_free(s);
    wpk_model_free(m);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s libwpk_mock_cuda.so libwpk_mock_cudalibs.so\n", argv[0]);
        return 1;
    }
    setenv("WPK_CUDA_DRIVER_LIBRARY", argv[1], 1);
    setenv("WPK_CUDNN_LIBRARY", argv[2], 1);
    setenv("WPK_CUBLAS_LIBRARY", argv[2], 1);
    setenv("WPK_CUBLASLT_LIBRARY", argv[2], 1);
    void *lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "%s: %s\n", argv[2], dlerror());
        return 1;
    }
    void *p = dlsym(lib, "wpk_mock_log"), *q = dlsym(lib, "wpk_mock_log_reset");
    memcpy(&mock_log, &p, sizeof p);
    memcpy(&mock_reset, &q, sizeof q);
    if (!mock_log || !mock_reset) return 1;
    wpk_context *ctx = wpk_context_create();
    rt_cuda *d = NULL;
    CHECK(rt_cuda_open(ctx, 0, &d) == WPK_OK);
    if (!d) return 1;
    CHECK(rt_cudnn_version(ctx) == 91000);
    test_cudnn(d, ctx);
    test_cublas(d, ctx);
    test_providers(d, ctx);
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/wpk_cuda_libs_XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    setenv("WPK_CACHE_DIR", dir, 1);
    rt_cuda_info info;
    CHECK(rt_cuda_probe(ctx, 0, &info) == WPK_OK);
    char target[700];
    tune_cuda_target(&info, target, sizeof target);
    test_choice(ctx, target, dir);
    test_plan_step(ctx, d, target, dir);
    test_compiled_plan(ctx, target, dir);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    rt_cuda_close(d);
    wpk_context_free(ctx);
    dlclose(lib);
    CHECK_DONE();
}
