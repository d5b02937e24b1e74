/* cublaslt.c -- cuBLASLt's matmul as a kernel provider for Gemm / FusedGemm / MatMul
 * (cuda_rt.h): one row-major product described once, the bias and ReLU epilogue fused, every
 * algorithm cuBLASLt's heuristic offers a config, one workspace for all of them. cuBLASLt is
 * loaded with dlopen.
 *
 * cuBLASLt is column-major. A row-major [r, c] matrix is the column-major [c, r] one with the
 * same bytes, so row-major C = A B is column-major C^T = B^T A^T: Lt's first operand is our B,
 * its second our A, D is [n rows, m cols] with leading dimension n, and Lt's bias (one value per
 * row of D) is one per column of our C -- Gemm's C row / FusedMatMul's bias. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "runtime/cuda/cuda_api.h"

struct rt_cublaslt_gemm {
    rt_cuda *d;
    const rt_cublaslt_api *api;
    rt_gemm_desc g;
    cublaslt_handle h;
    cublaslt_desc op;
    cublaslt_layout la, lb, lc;  /* Lt's A (our B), B (our A), C = D */
    cublaslt_pref pref;
    cublaslt_heuristic algos[RT_CUBLASLT_MAX_ALGOS];
    int nalgos;
    uint64_t ws;
    size_t ws_bytes;
};

static wpk_status failed(rt_cuda *d, cublas_status s, const char *what) {
    if (s == CUBLAS_ALLOC_FAILED) {
        rt_cuda_set_fault(d, RT_CUDA_FAULT_OOM);
        return wpk_error(rt_cuda_ctx(d), WPK_ERR_NOMEM, "cuBLASLt: out of memory: %s", what);
    }
    rt_cuda_set_fault(d, RT_CUDA_FAULT_LIBRARY);
    return wpk_error(rt_cuda_ctx(d), WPK_ERR_INTERNAL, "cuBLASLt: %s (status %d)", what, s);
}

#define TRY_LT(call, what)                                                                 \
    do {                                                                                   \
        cublas_status s_ = (call);                                                         \
        if (s_ != 0) {                                                                     \
            wpk_status st_ = failed(d, s_, what);                                          \
            rt_cublaslt_gemm_free(x);                                                      \
            return st_;                                                                    \
        }                                                                                  \
    } while (0)

static bool fits_int(int64_t v) { return v >= 1 && v <= 0x7fffffff; }

wpk_status rt_cublaslt_gemm_create(rt_cuda *d, const rt_gemm_desc *g, rt_cublaslt_gemm **out) {
    *out = NULL;
    wpk_context *ctx = rt_cuda_ctx(d);
    char why[768];
    const rt_cublaslt_api *api = rt_cublaslt_load(why, sizeof why);
    if (!api) {
        rt_cuda_set_fault(d, RT_CUDA_FAULT_UNAVAILABLE);
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "cuBLASLt unavailable: %s", why);
    }
    if (!fits_int(g->m) || !fits_int(g->n) || !fits_int(g->k))
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "cuBLASLt: matmul %lld x %lld x %lld is outside "
                         "its int range", (long long)g->m, (long long)g->n, (long long)g->k);
    rt_cublaslt_gemm *x = wpk_calloc(1, sizeof *x);
    if (!x) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory");
    x->d = d;
    x->api = api;
    x->g = *g;
    const unsigned long long m = (unsigned long long)g->m, n = (unsigned long long)g->n;
    const unsigned long long k = (unsigned long long)g->k;
    TRY_LT(api->create(&x->h), "creating a handle");
    TRY_LT(api->desc_create(&x->op, g->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                           : CUBLAS_COMPUTE_32F_PEDANTIC, CUDA_R_32F),
           "creating the matmul descriptor");
    /* Lt's A is our B: [n, k] as Lt sees it, stored [k, n] (ld n) or, transposed, [n, k] (ld k) */
    const int ta = g->trans_b ? CUBLAS_T : CUBLAS_N, tb = g->trans_a ? CUBLAS_T : CUBLAS_N;
    TRY_LT(api->desc_set(x->op, CUBLASLT_DESC_TRANSA, &ta, sizeof ta), "setting TRANSA");
    TRY_LT(api->desc_set(x->op, CUBLASLT_DESC_TRANSB, &tb, sizeof tb), "setting TRANSB");
    const int ep = g->bias ? (g->relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                           : (g->relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
    TRY_LT(api->desc_set(x->op, CUBLASLT_DESC_EPILOGUE, &ep, sizeof ep), "setting the epilogue");
    TRY_LT(api->layout_create(&x->la, CUDA_R_32F, g->trans_b ? k : n, g->trans_b ? n : k,
                              (long long)(g->trans_b ? k : n)), "describing B");
    TRY_LT(api->layout_create(&x->lb, CUDA_R_32F, g->trans_a ? m : k, g->trans_a ? k : m,
                              (long long)(g->trans_a ? m : k)), "describing A");
    TRY_LT(api->layout_create(&x->lc, CUDA_R_32F, n, m, (long long)n), "describing C");
    TRY_LT(api->pref_create(&x->pref), "creating the preference");
    const size_t cap = RT_CUBLASLT_MAX_WORKSPACE;
    TRY_LT(api->pref_set(x->pref, CUBLASLT_PREF_MAX_WORKSPACE, &cap, sizeof cap),
           "capping the workspace");
    cublaslt_heuristic found[RT_CUBLASLT_MAX_ALGOS];
    int got = 0;
    TRY_LT(api->heuristic(x->h, x->op, x->la, x->lb, x->lc, x->lc, x->pref, RT_CUBLASLT_MAX_ALGOS,
                          found, &got), "asking the heuristic for algorithms");
    for (int i = 0; i < got && i < RT_CUBLASLT_MAX_ALGOS; i++) {
        if (found[i].state != 0) continue;
        x->algos[x->nalgos++] = found[i];
        if (found[i].workspace > x->ws_bytes) x->ws_bytes = found[i].workspace;
    }
    if (x->nalgos == 0) {
        rt_cublaslt_gemm_free(x);
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "cuBLASLt: no algorithm for matmul %lld x %lld "
                         "x %lld%s%s", (long long)g->m, (long long)g->n, (long long)g->k,
                         g->bias ? " + bias" : "", g->relu ? " + relu" : "");
    }
    if (x->ws_bytes) {
        wpk_status st = rt_cuda_alloc(d, x->ws_bytes, &x->ws);
        if (st) {
            rt_cublaslt_gemm_free(x);
            return st;
        }
    }
    *out = x;
    return WPK_OK;
}

void rt_cublaslt_gemm_free(rt_cublaslt_gemm *x) {
    if (!x) return;
    const rt_cublaslt_api *api = x->api;
    if (x->pref) api->pref_destroy(x->pref);
    if (x->lc) api->layout_destroy(x->lc);
    if (x->lb) api->layout_destroy(x->lb);
    if (x->la) api->layout_destroy(x->la);
    if (x->op) api->desc_destroy(x->op);
    if (x->h) api->destroy(x->h);
    rt_cuda_free(x->d, x->ws);
    wpk_free(x);
}

int rt_cublaslt_gemm_configs(const rt_cublaslt_gemm *x) { return x->nalgos; }

wpk_status rt_cublaslt_gemm_run(rt_cublaslt_gemm *x, int config, uint64_t a, uint64_t b,
                                uint64_t bias, uint64_t c) {
    rt_cuda *d = x->d;
    if (config < 0 || config >= x->nalgos)
        return wpk_error(rt_cuda_ctx(d), WPK_ERR_INVALID_ARG, "cuBLASLt: config %d of %d", config,
                         x->nalgos);
    if (x->g.bias) {
        /* the pointer is an attribute of the descriptor, set per call (buffers move) */
        void *p = (void *)(uintptr_t)bias;
        cublas_status s = x->api->desc_set(x->op, CUBLASLT_DESC_BIAS_POINTER, &p, sizeof p);
        if (s != 0) return failed(d, s, "setting the bias pointer");
    }
    const float one = 1.0f, zero = 0.0f;
    cublas_status s = x->api->matmul(x->h, x->op, &one, (const void *)(uintptr_t)b, x->la,
                                     (const void *)(uintptr_t)a, x->lb, &zero,
                                     (const void *)(uintptr_t)c, x->lc, (void *)(uintptr_t)c,
                                     x->lc, &x->algos[config].algo, (void *)(uintptr_t)x->ws,
                                     x->ws_bytes, rt_cuda_stream(d));
    if (s != 0) return failed(d, s, "matmul");
    rt_cuda_set_fault(d, RT_CUDA_FAULT_NONE);
    return WPK_OK;
}
