/* test_cuda_libs.c -- the vendor-library providers of the CUDA runtime (cuDNN forward
 * convolution, cuBLAS sgemm, cuBLASLt matmul with fused epilogues) against mock libraries:
 * argv[1] the mock driver (tests/cuda/mock_libcuda.c: device memory is host memory), argv[2]
 * the mock cuDNN/cuBLAS/cuBLASLt (tests/cuda/mock_cudalibs.c: they really compute, naively).
 * Checked: the call sequence (handle on the backend's stream, descriptors, FMA/pedantic math
 * unless TF32 is asked for, the algorithm list with unsupported ones dropped, workspace sized
 * per algorithm), every algorithm as a config giving the reference result (plain C here) for
 * plain and fused (bias + residual + ReLU) convolutions and for row-major products with every
 * transpose, cuBLASLt's bias/ReLU epilogues, and refusals named (asymmetric pads, a config out
 * of range). What this cannot check -- the real libraries' numerics and speed -- is
 * test_cuda_gpu's part on a GPU. */
#define _DEFAULT_SOURCE

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "../unit/check.h"
#include "base/context.h"
#include "kernels/vendor/cuda_libs.h"
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
    rt_cuda_close(d);
    wpk_context_free(ctx);
    dlclose(lib);
    CHECK_DONE();
}
