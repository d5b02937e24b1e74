/* cublas.c -- cuBLAS sgemm as a kernel provider for MatMul / Gemm (cuda_rt.h): row-major
 * products on the backend's stream, pedantic FP32 math unless TF32 is asked for. cuBLAS is
 * loaded with dlopen. */
#include <stdio.h>

#include "base/alloc.h"
#include "base/context.h"
#include "runtime/cuda/cuda_api.h"

struct rt_cublas {
    rt_cuda *d;
    const rt_cublas_api *api;
    cublas_handle h;
};

static wpk_status failed(rt_cuda *d, const rt_cublas_api *api, cublas_status s, const char *what) {
    const char *text = api->status_string ? api->status_string(s) : "?";
    if (s == CUBLAS_ALLOC_FAILED) {
        rt_cuda_set_fault(d, RT_CUDA_FAULT_OOM);
        return wpk_error(rt_cuda_ctx(d), WPK_ERR_NOMEM, "cuBLAS: out of memory: %s: %s", what, text);
    }
    rt_cuda_set_fault(d, RT_CUDA_FAULT_LIBRARY);
    return wpk_error(rt_cuda_ctx(d), WPK_ERR_INTERNAL, "cuBLAS: %s: %s (status %d)", what, text, s);
}

wpk_status rt_cublas_create(rt_cuda *d, bool tf32, rt_cublas **out) {
    *out = NULL;
    char why[768];
    const rt_cublas_api *api = rt_cublas_load(why, sizeof why);
    if (!api) {
        rt_cuda_set_fault(d, RT_CUDA_FAULT_UNAVAILABLE);
        return wpk_error(rt_cuda_ctx(d), WPK_ERR_UNSUPPORTED, "cuBLAS unavailable: %s", why);
    }
    rt_cublas *b = wpk_calloc(1, sizeof *b);
    if (!b) return wpk_error(rt_cuda_ctx(d), WPK_ERR_NOMEM, "out of memory");
    b->d = d;
    b->api = api;
    cublas_status s = api->create(&b->h);
    if (s == 0) s = api->set_stream(b->h, rt_cuda_stream(d));
    if (s == 0) s = api->set_math_mode(b->h, tf32 ? CUBLAS_MATH_TF32 : CUBLAS_MATH_PEDANTIC);
    if (s != 0) {
        wpk_status st = failed(d, api, s, "creating a handle");
        rt_cublas_free(b);
        return st;
    }
    *out = b;
    return WPK_OK;
}

void rt_cublas_free(rt_cublas *b) {
    if (!b) return;
    if (b->h) b->api->destroy(b->h);
    wpk_free(b);
}

wpk_status rt_cublas_matmul(rt_cublas *b, int64_t m, int64_t n, int64_t k, uint64_t a,
                            uint64_t bm, bool trans_b, uint64_t c) {
    if (m < 1 || n < 1 || k < 1 || m > 0x7fffffff || n > 0x7fffffff || k > 0x7fffffff)
        return wpk_error(rt_cuda_ctx(b->d), WPK_ERR_UNSUPPORTED, "cuBLAS: matmul %lld x %lld x "
                         "%lld is outside its int range", (long long)m, (long long)n, (long long)k);
    const float one = 1.0f, zero = 0.0f;
    /* row-major C = A B is column-major C^T = B^T A^T: swap the operands, keep the shapes */
    cublas_status s = b->api->sgemm(b->h, trans_b ? CUBLAS_T : CUBLAS_N, CUBLAS_N, (int)n, (int)m,
                                    (int)k, &one, (const float *)(uintptr_t)bm,
                                    trans_b ? (int)k : (int)n, (const float *)(uintptr_t)a, (int)k,
                                    &zero, (float *)(uintptr_t)c, (int)n);
    if (s != 0) return failed(b->d, b->api, s, "sgemm");
    rt_cuda_set_fault(b->d, RT_CUDA_FAULT_NONE);
    return WPK_OK;
}
