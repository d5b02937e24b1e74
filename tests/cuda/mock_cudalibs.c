/* mock_cudalibs.c -- stand-ins for cuDNN, cuBLAS and cuBLASLt with the ABI of the functions
 * src/runtime/cuda uses, for testing the providers without a GPU ($WPK_CUDNN_LIBRARY,
 * $WPK_CUBLAS_LIBRARY, $WPK_CUBLASLT_LIBRARY = libwpk_mock_cudalibs.so, with the mock driver
 * tests/cuda/mock_libcuda.c, whose device memory is host memory). The compute calls really
 * compute, naively, on those host addresses (cuDNN: NCHW cross-correlation with groups, strides,
 * pads, dilations, the fused bias + z + activation form; cuBLAS: column-major sgemm; cuBLASLt:
 * column-major matmul with its transposes and bias/ReLU epilogues), so a test can check the
 * providers' layout mapping against a reference. Every call is appended to a log
 * (wpk_mock_log) so a test can check the sequence. Offered algorithms: cuDNN lists 1, 0, 6, 2 as
 * usable and 4 (FFT) as not supported, workspace algo * 1 KiB; cuBLASLt's heuristic returns
 * three results, the second with a failed state, workspace index * 4 KiB. A call given less
 * workspace than its algorithm needs fails. Each compute call counts as a launch of the mock
 * driver's (its wpk_mock_device_work), so events time it. */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/cuda_api.h"

static char log_buf[1 << 16];
static size_t log_len;

const char *wpk_mock_log(void);
void wpk_mock_log_reset(void);
const char *wpk_mock_log(void) { return log_buf; }
void wpk_mock_log_reset(void) { log_len = 0, log_buf[0] = '\0'; }

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...) {
    if (log_len + 256 >= sizeof log_buf) return;
    va_list ap;
    va_start(ap, fmt);
    log_len += (size_t)vsnprintf(log_buf + log_len, sizeof log_buf - log_len, fmt, ap);
    va_end(ap);
    log_buf[log_len++] = '\n';
    log_buf[log_len] = '\0';
}

/* A compute call's device time, on the mock driver's clock (when it is the driver loaded). */
static void device_work(void) {
    const char *path = getenv("WPK_CUDA_DRIVER_LIBRARY");
    void *drv = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    void *fn = drv ? dlsym(drv, "wpk_mock_device_work") : NULL;
    void (*work)(void) = NULL;
    memcpy(&work, &fn, sizeof fn);
    if (work) work();
    if (drv) dlclose(drv);
}

/* ---- cuDNN ---- */

struct cudnn_context_s { void *stream; };
struct cudnn_tensor_s { int n, c, h, w; };
struct cudnn_filter_s { int k, c, h, w; };
struct cudnn_conv_s { int pad[2], stride[2], dil[2], groups, math; };
struct cudnn_act_s { int mode; };

#define EXPORT_DNN(ret, name, args) ret name args; ret name args
EXPORT_DNN(size_t, cudnnGetVersion, (void)) { return 91000; }
EXPORT_DNN(const char *, cudnnGetErrorString, (cudnn_status s)) {
    return s == 0 ? "CUDNN_STATUS_SUCCESS" : s == 3000 ? "CUDNN_STATUS_NOT_SUPPORTED"
                                                       : "CUDNN_STATUS_BAD_PARAM";
}
EXPORT_DNN(cudnn_status, cudnnCreate, (cudnn_handle *h)) {
    note("cudnnCreate");
    *h = calloc(1, sizeof **h);
    return 0;
}
EXPORT_DNN(cudnn_status, cudnnDestroy, (cudnn_handle h)) {
    note("cudnnDestroy");
    free(h);
    return 0;
}
EXPORT_DNN(cudnn_status, cudnnSetStream, (cudnn_handle h, cu_stream s)) {
    note("cudnnSetStream(%s)", s ? "stream" : "null");
    h->stream = s;
    return 0;
}
EXPORT_DNN(cudnn_status, cudnnCreateTensorDescriptor, (cudnn_tensor_desc *d)) {
    *d = calloc(1, sizeof **d);
    return 0;
}
EXPORT_DNN(cudnn_status, cudnnSetTensor4dDescriptor,
           (cudnn_tensor_desc d, int fmt, int type, int n, int c, int h, int w)) {
    note("cudnnSetTensor4dDescriptor(%d,%d,%d,%d,%d,%d)", fmt, type, n, c, h, w);
    *d = (struct cudnn_tensor_s){n, c, h, w};
    return 0;
}
EXPORT_DNN(cudnn_status, cudnnDestroyTensorDescriptor, (cudnn_tensor_desc d)) {
    free(d);
    return 0;
}
EXPORT_DNN(cudnn_status, cudnnCreateFilterDescriptor, (cudnn_filter_desc *d)) {
    *d = calloc(1, sizeof **d);
    return 0;
}
EXPORT_DNN(cudnn_status, cudnnSetFilter4dDescriptor,
           (cudnn_filter_desc d, int type, int fmt, int k, int c, int h, int w)) {
    note("cudnnSetFilter4dDescriptor(%d,%d,%d,%d,%d,%d)", type, fmt, k, c, h, w);
    *d = (struct cudnn_filter_s){k, c, h, w};
    return 0;
}
EXPORT_DNN(cudnn_status, cudnnDestroyFilterDescriptor, (cudnn_filter_desc d)) {
    free(d);
    return 0;
}
EXPORT_DNN(cudnn_status, cudnnCreateConvolutionDescriptor, (cudnn_conv_desc *d)) {
    *d = calloc(1, sizeof **d);
    (*d)->groups = 1;
    return 0;
}
EXPORT_DNN(cudnn_status, cudnnSetConvolution2dDescriptor,
           (cudnn_conv_desc d, int ph, int pw, int sh, int sw, int dh, int dw, int mode,
            int type)) {
    note("cudnnSetConvolution2dDescriptor(%d,%d,%d,%d,%d,%d,%d,%d)", ph, pw, sh, sw, dh, dw, mode,
         type);
    d->pad[0] = ph, d->pad[1] = pw, d->stride[0] = sh, d->stride[1] = sw;
    d->dil[0] = dh, d->dil[1] = dw;
    return mode == CUDNN_XCORR ? 0 : 2000;
}
EXPORT_DNN(cudnn_status, cudnnSetConvolutionGroupCount, (cudnn_conv_desc d, int g)) {
    note("cudnnSetConvolutionGroupCount(%d)", g);
    d->groups = g;
    return 0;
}
EXPORT_DNN(cudnn_status, cudnnSetConvolutionMathType, (cudnn_conv_desc d, int m)) {
    note("cudnnSetConvolutionMathType(%d)", m);
    d->math = m;
    return 0;
}
EXPORT_DNN(cudnn_status, cudnnDestroyConvolutionDescriptor, (cudnn_conv_desc d)) {
    free(d);
    return 0;
}
EXPORT_DNN(cudnn_status, cudnnCreateActivationDescriptor, (cudnn_act_desc *d)) {
    *d = calloc(1, sizeof **d);
    return 0;
}
EXPORT_DNN(cudnn_status, cudnnSetActivationDescriptor,
           (cudnn_act_desc d, int mode, int nan, double coef)) {
    note("cudnnSetActivationDescriptor(%d,%d,%g)", mode, nan, coef);
    d->mode = mode;
    return 0;
}
EXPORT_DNN(cudnn_status, cudnnDestroyActivationDescriptor, (cudnn_act_desc d)) {
    free(d);
    return 0;
}

static int out_size(int in, int k, int pad, int stride, int dil) {
    return (in + 2 * pad - ((k - 1) * dil + 1)) / stride + 1;
}

EXPORT_DNN(cudnn_status, cudnnGetConvolution2dForwardOutputDim,
           (cudnn_conv_desc c, cudnn_tensor_desc x, cudnn_filter_desc w, int *n, int *k, int *h,
            int *wo)) {
    *n = x->n, *k = w->k;
    *h = out_size(x->h, w->h, c->pad[0], c->stride[0], c->dil[0]);
    *wo = out_size(x->w, w->w, c->pad[1], c->stride[1], c->dil[1]);
    return 0;
}

static const int OFFERED[] = {1, 0, 4, 6, 2};

EXPORT_DNN(cudnn_status, cudnnGetConvolutionForwardAlgorithm_v7,
           (cudnn_handle h, cudnn_tensor_desc x, cudnn_filter_desc w, cudnn_conv_desc c,
            cudnn_tensor_desc y, int want, int *got, cudnn_algo_perf *perf)) {
    (void)h, (void)x, (void)w, (void)c, (void)y;
    note("cudnnGetConvolutionForwardAlgorithm_v7(%d)", want);
    int n = 0;
    for (int i = 0; i < 5 && n < want; i++, n++) {
        memset(&perf[n], 0, sizeof perf[n]);
        perf[n].algo = OFFERED[i];
        perf[n].status = OFFERED[i] == 4 ? 3000 : 0;
        perf[n].memory = (size_t)OFFERED[i] * 1024;
    }
    *got = n;
    return 0;
}

EXPORT_DNN(cudnn_status, cudnnGetConvolutionForwardWorkspaceSize,
           (cudnn_handle h, cudnn_tensor_desc x, cudnn_filter_desc w, cudnn_conv_desc c,
            cudnn_tensor_desc y, int algo, size_t *bytes)) {
    (void)h, (void)x, (void)w, (void)c, (void)y;
    *bytes = (size_t)algo * 1024;
    return algo == 4 ? 3000 : 0;
}

/* y[n, k, oh, ow] = sum over the group's channels and taps (zero padding), naive. */
static float conv_at(const struct cudnn_tensor_s *x, const struct cudnn_filter_s *w,
                     const struct cudnn_conv_s *c, const float *xp, const float *wp, int n, int k,
                     int oh, int ow) {
    const int per = w->k / c->groups, g = k / per;
    double s = 0;
    for (int ci = 0; ci < w->c; ci++)
        for (int r = 0; r < w->h; r++)
            for (int q = 0; q < w->w; q++) {
                int ih = oh * c->stride[0] - c->pad[0] + r * c->dil[0];
                int iw = ow * c->stride[1] - c->pad[1] + q * c->dil[1];
                if (ih < 0 || ih >= x->h || iw < 0 || iw >= x->w) continue;
                int ic = g * w->c + ci;
                s += (double)xp[((n * x->c + ic) * x->h + ih) * x->w + iw] *
                     wp[((k * w->c + ci) * w->h + r) * w->w + q];
            }
    return (float)s;
}

static cudnn_status conv_common(const char *fn, int algo, size_t ws, cudnn_tensor_desc x,
                                cudnn_filter_desc w, cudnn_conv_desc c, cudnn_tensor_desc y) {
    note("%s(algo=%d,ws=%zu)", fn, algo, ws);
    if (algo == 4 || ws < (size_t)algo * 1024) return 2000;
    if (x->c != w->c * c->groups || y->c != w->k) return 2000;
    device_work();
    return 0;
}

EXPORT_DNN(cudnn_status, cudnnConvolutionForward,
           (cudnn_handle h, const void *alpha, cudnn_tensor_desc x, const void *xp,
            cudnn_filter_desc w, const void *wp, cudnn_conv_desc c, int algo, void *wsp,
            size_t ws, const void *beta, cudnn_tensor_desc y, void *yp)) {
    (void)h, (void)wsp;
    cudnn_status s = conv_common("cudnnConvolutionForward", algo, ws, x, w, c, y);
    if (s) return s;
    const float a = *(const float *)alpha, b = *(const float *)beta;
    float *out = yp;
    for (int n = 0; n < y->n; n++)
        for (int k = 0; k < y->c; k++)
            for (int oh = 0; oh < y->h; oh++)
                for (int ow = 0; ow < y->w; ow++) {
                    float *o = &out[((n * y->c + k) * y->h + oh) * y->w + ow];
                    float v = a * conv_at(x, w, c, xp, wp, n, k, oh, ow);
                    *o = b == 0 ? v : v + b * *o;
                }
    return 0;
}

EXPORT_DNN(cudnn_status, cudnnConvolutionBiasActivationForward,
           (cudnn_handle h, const void *alpha1, cudnn_tensor_desc x, const void *xp,
            cudnn_filter_desc w, const void *wp, cudnn_conv_desc c, int algo, void *wsp,
            size_t ws, const void *alpha2, cudnn_tensor_desc zd, const void *zp,
            cudnn_tensor_desc bd, const void *bp, cudnn_act_desc act, cudnn_tensor_desc y,
            void *yp)) {
    (void)h, (void)wsp, (void)zd, (void)bd;
    cudnn_status s = conv_common("cudnnConvolutionBiasActivationForward", algo, ws, x, w, c, y);
    if (s) return s;
    /* cuDNN's documented limit: an identity activation only with IMPLICIT_PRECOMP_GEMM */
    if (act->mode == CUDNN_ACT_IDENTITY && algo != 1) return 3000;
    const float a1 = *(const float *)alpha1, a2 = *(const float *)alpha2;
    const float *z = zp, *b = bp;
    float *out = yp;
    for (int n = 0; n < y->n; n++)
        for (int k = 0; k < y->c; k++)
            for (int oh = 0; oh < y->h; oh++)
                for (int ow = 0; ow < y->w; ow++) {
                    int64_t i = ((n * y->c + k) * y->h + oh) * y->w + ow;
                    float v = a1 * conv_at(x, w, c, xp, wp, n, k, oh, ow) + b[k];
                    if (a2 != 0) v += a2 * z[i];
                    if (act->mode == CUDNN_ACT_RELU) v = v > 0 ? v : 0;
                    out[i] = v;
                }
    return 0;
}

/* ---- cuBLAS ---- */

struct cublas_context_s { int math; };

/* column-major C[m, n] = op(A) op(B) * alpha + beta * C */
static void gemm_cm(bool ta, bool tb, int m, int n, int k, float alpha, const float *a, int lda,
                    const float *b, int ldb, float beta, float *c, int ldc) {
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int p = 0; p < k; p++) {
                float av = ta ? a[p + (int64_t)i * lda] : a[i + (int64_t)p * lda];
                float bv = tb ? b[j + (int64_t)p * ldb] : b[p + (int64_t)j * ldb];
                s += (double)av * bv;
            }
            float *o = &c[i + (int64_t)j * ldc];
            *o = (float)(alpha * s) + (beta == 0 ? 0 : beta * *o);
        }
}

#define EXPORT(ret, name, args) ret name args; ret name args
EXPORT(cublas_status, cublasCreate_v2, (cublas_handle *h)) {
    note("cublasCreate_v2");
    *h = calloc(1, sizeof **h);
    return 0;
}
EXPORT(cublas_status, cublasDestroy_v2, (cublas_handle h)) {
    note("cublasDestroy_v2");
    free(h);
    return 0;
}
EXPORT(cublas_status, cublasGetVersion_v2, (cublas_handle h, int *v)) {
    (void)h;
    *v = 130000;
    return 0;
}
EXPORT(cublas_status, cublasSetStream_v2, (cublas_handle h, cu_stream s)) {
    (void)h;
    note("cublasSetStream_v2(%s)", s ? "stream" : "null");
    return 0;
}
EXPORT(cublas_status, cublasSetMathMode, (cublas_handle h, int m)) {
    note("cublasSetMathMode(%d)", m);
    h->math = m;
    return 0;
}
EXPORT(const char *, cublasGetStatusString, (cublas_status s)) {
    return s == 0 ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_INVALID_VALUE";
}
EXPORT(cublas_status, cublasSgemm_v2,
       (cublas_handle h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a,
        int lda, const float *b, int ldb, const float *beta, float *c, int ldc)) {
    (void)h;
    note("cublasSgemm_v2(%c,%c,%d,%d,%d,lda=%d,ldb=%d,ldc=%d)", ta ? 'T' : 'N', tb ? 'T' : 'N', m,
         n, k, lda, ldb, ldc);
    if (lda < (ta ? k : m) || ldb < (tb ? n : k) || ldc < m) return 7; /* INVALID_VALUE */
    device_work();
    gemm_cm(ta, tb, m, n, k, *alpha, a, lda, b, ldb, *beta, c, ldc);
    return 0;
}

/* ---- cuBLASLt ---- */

struct cublaslt_context_s { int unused; };
struct cublaslt_desc_s { int compute, ta, tb, epilogue; const float *bias; };
struct cublaslt_layout_s { unsigned long long rows, cols; long long ld; };
struct cublaslt_pref_s { size_t max_ws; };

EXPORT(cublas_status, cublasLtCreate, (cublaslt_handle *h)) {
    note("cublasLtCreate");
    *h = calloc(1, sizeof **h);
    return 0;
}
EXPORT(cublas_status, cublasLtDestroy, (cublaslt_handle h)) {
    note("cublasLtDestroy");
    free(h);
    return 0;
}
EXPORT(size_t, cublasLtGetVersion, (void)) { return 130000; }
EXPORT(cublas_status, cublasLtMatmulDescCreate, (cublaslt_desc *d, int compute, int scale)) {
    note("cublasLtMatmulDescCreate(%d,%d)", compute, scale);
    *d = calloc(1, sizeof **d);
    (*d)->compute = compute;
    (*d)->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    return 0;
}
EXPORT(cublas_status, cublasLtMatmulDescDestroy, (cublaslt_desc d)) {
    free(d);
    return 0;
}
EXPORT(cublas_status, cublasLtMatmulDescSetAttribute,
       (cublaslt_desc d, int attr, const void *buf, size_t size)) {
    switch (attr) {
    case CUBLASLT_DESC_TRANSA: if (size != 4) return 7; memcpy(&d->ta, buf, 4); break;
    case CUBLASLT_DESC_TRANSB: if (size != 4) return 7; memcpy(&d->tb, buf, 4); break;
    case CUBLASLT_DESC_EPILOGUE: if (size != 4) return 7; memcpy(&d->epilogue, buf, 4); break;
    case CUBLASLT_DESC_BIAS_POINTER:
        if (size != sizeof(void *)) return 7;
        memcpy(&d->bias, buf, sizeof(void *));
        break;
    default: return 7;
    }
    note("cublasLtMatmulDescSetAttribute(%d)", attr);
    return 0;
}
EXPORT(cublas_status, cublasLtMatrixLayoutCreate,
       (cublaslt_layout *l, int type, unsigned long long rows, unsigned long long cols,
        long long ld)) {
    note("cublasLtMatrixLayoutCreate(%d,%llu,%llu,%lld)", type, rows, cols, ld);
    if (ld < (long long)rows) return 7;
    *l = calloc(1, sizeof **l);
    **l = (struct cublaslt_layout_s){rows, cols, ld};
    return 0;
}
EXPORT(cublas_status, cublasLtMatrixLayoutDestroy, (cublaslt_layout l)) {
    free(l);
    return 0;
}
EXPORT(cublas_status, cublasLtMatmulPreferenceCreate, (cublaslt_pref *p)) {
    *p = calloc(1, sizeof **p);
    return 0;
}
EXPORT(cublas_status, cublasLtMatmulPreferenceDestroy, (cublaslt_pref p)) {
    free(p);
    return 0;
}
EXPORT(cublas_status, cublasLtMatmulPreferenceSetAttribute,
       (cublaslt_pref p, int attr, const void *buf, size_t size)) {
    if (attr != CUBLASLT_PREF_MAX_WORKSPACE || size != sizeof(size_t)) return 7;
    memcpy(&p->max_ws, buf, size);
    note("cublasLtMatmulPreferenceSetAttribute(max_ws=%zu)", p->max_ws);
    return 0;
}
EXPORT(cublas_status, cublasLtMatmulAlgoGetHeuristic,
       (cublaslt_handle h, cublaslt_desc d, cublaslt_layout a, cublaslt_layout b,
        cublaslt_layout c, cublaslt_layout dd, cublaslt_pref p, int want, cublaslt_heuristic *out,
        int *got)) {
    (void)h, (void)d, (void)a, (void)b, (void)c, (void)dd, (void)p;
    note("cublasLtMatmulAlgoGetHeuristic(%d)", want);
    int n = want < 3 ? want : 3;
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].algo.data[0] = (unsigned long long)i;
        out[i].workspace = (size_t)i * 4096;
        out[i].state = i == 1 ? 15 /* NOT_SUPPORTED */ : 0;
    }
    *got = n;
    return 0;
}

/* Lt's op(X) as [rows, cols] of a layout: element (i, j). */
static float at(const float *x, const struct cublaslt_layout_s *l, bool t, int64_t i, int64_t j) {
    return t ? x[j + i * l->ld] : x[i + j * l->ld];
}

EXPORT(cublas_status, cublasLtMatmul,
       (cublaslt_handle h, cublaslt_desc d, const void *alpha, const void *a, cublaslt_layout la,
        const void *b, cublaslt_layout lb, const void *beta, const void *c, cublaslt_layout lc,
        void *dp, cublaslt_layout ld, const cublaslt_algo *algo, void *ws, size_t wsb,
        cu_stream s)) {
    (void)h, (void)ws, (void)c, (void)lc, (void)s;
    note("cublasLtMatmul(algo=%llu,ta=%d,tb=%d,epilogue=%d,ws=%zu)", algo->data[0], d->ta, d->tb,
         d->epilogue, wsb);
    if (wsb < algo->data[0] * 4096 || algo->data[0] == 1) return 7;
    device_work();
    const int64_t m = (int64_t)ld->rows, n = (int64_t)ld->cols;
    const int64_t k = (int64_t)(d->ta ? la->rows : la->cols);
    if ((int64_t)(d->ta ? la->cols : la->rows) != m ||
        (int64_t)(d->tb ? lb->cols : lb->rows) != k || (int64_t)(d->tb ? lb->rows : lb->cols) != n)
        return 7;
    const bool bias = d->epilogue & CUBLASLT_EPILOGUE_BIAS;
    const bool relu = d->epilogue & CUBLASLT_EPILOGUE_RELU;
    if (bias && !d->bias) return 7;
    const float al = *(const float *)alpha, be = *(const float *)beta;
    float *out = dp;
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) {
            double acc = 0;
            for (int64_t p = 0; p < k; p++)
                acc += (double)at(a, la, d->ta, i, p) * at(b, lb, d->tb, p, j);
            float *o = &out[i + j * ld->ld];
            float v = (float)(al * acc) + (be == 0 ? 0 : be * *o);
            if (bias) v += d->bias[i];
            if (relu) v = v > 0 ? v : 0;
            *o = v;
        }
    return 0;
}
