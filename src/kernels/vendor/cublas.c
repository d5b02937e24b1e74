/* cublas.c -- cuBLAS sgemm (cuda_libs.h): row-major products on the backend's stream, pedantic
 * FP32 math unless TF32 is asked for; and the provider lib_cublas over it, for Gemm / MatMul
 * (batched ones as one sgemm per matrix) whose epilogue is at most Gemm's C as a row or column,
 * which a rank-1 sgemm writes before the product accumulates onto it. cuBLAS is loaded with
 * dlopen. */
#include <pthread.h>
#include <stdio.h>

#include "base/alloc.h"
#include "base/context.h"
#include "kernels/vendor/cuda_libs.h"
#include "kernels/vendor/lib.h"
#include "kernels/vendor/lib_node.h"
#include "ops/op_util.h"
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
        return wpk_error(rt_cuda_ctx(d), WPK_ERR_NOMEM, "cuBLAS: out of memory: %s: %s", what,
                         text);
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

static bool fits_int(int64_t v) { return v >= 1 && v <= 0x7fffffff; }

/* Row-major C[m, n] = alpha * A' B' + beta * C (A' = A [m, k] or, with ta, A stored [k, m];
 * B' likewise with tb), queued on d's stream. */
static wpk_status sgemm(rt_cublas *b, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                        float alpha, uint64_t a, uint64_t bm, float beta, uint64_t c) {
    if (!fits_int(m) || !fits_int(n) || !fits_int(k))
        return wpk_error(rt_cuda_ctx(b->d), WPK_ERR_UNSUPPORTED, "cuBLAS: matmul %lld x %lld x "
                         "%lld is outside its int range", (long long)m, (long long)n, (long long)k);
    /* row-major C = A B is column-major C^T = B^T A^T: swap the operands, keep the shapes */
    cublas_status s = b->api->sgemm(b->h, tb ? CUBLAS_T : CUBLAS_N, ta ? CUBLAS_T : CUBLAS_N,
                                    (int)n, (int)m, (int)k, &alpha, (const float *)(uintptr_t)bm,
                                    tb ? (int)k : (int)n, (const float *)(uintptr_t)a,
                                    ta ? (int)m : (int)k, &beta, (float *)(uintptr_t)c, (int)n);
    if (s != 0) return failed(b->d, b->api, s, "sgemm");
    rt_cuda_set_fault(b->d, RT_CUDA_FAULT_NONE);
    return WPK_OK;
}

wpk_status rt_cublas_matmul(rt_cublas *b, int64_t m, int64_t n, int64_t k, uint64_t a,
                            uint64_t bm, bool trans_b, uint64_t c) {
    return sgemm(b, false, trans_b, m, n, k, 1.0f, a, bm, 0.0f, c);
}

/* ---- the provider (kernels/provider.h) ---- */

struct lib_kernel {
    char name[64];           /* the node's, for messages */
    rt_cublas *blas;
    lib_gemm g;
    bool c_row;              /* Gemm's C is a row [1, n] (else, when has_c, a column [m, 1]) */
    uint64_t ones;           /* max(m, n) ones: the other factor of C's rank-1 broadcast */
    lib_cuda_consts consts;  /* B (and C) when constant */
};

/* The node as sgemms; an epilogue sgemm cannot compute is refused. */
static wpk_status check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out, lib_gemm *g) {
    if (n->nin > LIB_CUDA_MAX_IN) return op_unsupported(ctx, n, "has %d inputs", n->nin);
    wpk_status st = lib_gemm_read(ctx, n, in, out, g);
    if (st) return st;
    if (g->act.kind != ACT_NONE || g->has_bias || g->has_z)
        return op_unsupported(ctx, n, "an epilogue (bias, residual or activation); the cublas "
                              "provider's sgemm has none (the cublaslt provider fuses some)");
    if (g->has_c && !(g->cm == 1 && g->cn == g->n) && !(g->cn == 1 && g->cm == g->m))
        return op_unsupported(ctx, n, "C broadcast from [%lld, %lld]; the cublas provider takes "
                              "a row [1, %lld] or a column [%lld, 1]", (long long)g->cm,
                              (long long)g->cn, (long long)g->n, (long long)g->m);
    if (!fits_int(g->m) || !fits_int(g->n) || !fits_int(g->k) || g->m * g->n > 0x7fffffff)
        return op_unsupported(ctx, n, "matrices past cuBLAS's int sizes");
    return WPK_OK;
}

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out) {
    (void)self;
    lib_gemm g;
    return check(NULL, n, in, out, &g) == WPK_OK;
}

static int configs(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                   ir_tensor *const *out, char (*names)[LIB_CONFIG_MAX]) {
    if (!supports(self, n, in, out)) return 0;
    snprintf(names[0], LIB_CONFIG_MAX, "sgemm");
    return 1;
}

static void destroy(const kernel_provider *self, lib_kernel *k) {
    (void)self;
    if (!k) return;
    rt_cublas_free(k->blas);
    if (k->ones) rt_cuda_free(k->consts.d, k->ones);
    lib_cuda_consts_free(&k->consts);
    wpk_free(k);
}

static wpk_status create(const kernel_provider *self, wpk_context *ctx, const ir_node *n,
                         ir_tensor *const *in, ir_tensor *const *out, int config,
                         const kernel_device *dev, lib_kernel **out_k) {
    *out_k = NULL;
    if (!dev->cuda) return lib_cuda_device_only(ctx, self, n);
    lib_gemm g;
    wpk_status st = check(ctx, n, in, out, &g);
    if (st) return st;
    if (config != 0) return op_unsupported(ctx, n, "cublas has one config (0), not %d", config);
    lib_kernel *k = wpk_calloc(1, sizeof *k);
    if (!k) return wpk_error(ctx, WPK_ERR_NOMEM, "node '%s': out of memory creating a cublas "
                             "kernel", n->name);
    snprintf(k->name, sizeof k->name, "%s", n->name);
    k->g = g;
    k->c_row = g.cm == 1 && g.cn == g.n;
    rt_cuda *d = dev->cuda;
    st = lib_cuda_consts_upload(ctx, d, self->name, n, in, &k->consts);
    if (!st)
        st = lib_cuda_relay(ctx, d, n->name, self->name, rt_cublas_create(d, false, &k->blas));
    if (!st && g.has_c) {
        int64_t len = g.m > g.n ? g.m : g.n;
        float *ones = wpk_malloc(sizeof(float) * (size_t)len);
        if (!ones) {
            st = wpk_error(ctx, WPK_ERR_NOMEM, "node '%s': out of memory creating a cublas "
                           "kernel", n->name);
        } else {
            for (int64_t i = 0; i < len; i++) ones[i] = 1.0f;
            st = rt_cuda_alloc(d, sizeof(float) * (size_t)len, &k->ones);
            if (!st) st = rt_cuda_upload(d, k->ones, ones, sizeof(float) * (size_t)len);
            st = lib_cuda_relay(ctx, d, n->name, self->name, st);
            wpk_free(ones);
        }
    }
    if (st) {
        destroy(self, k);
        return st;
    }
    *out_k = k;
    return WPK_OK;
}

static wpk_status run(const kernel_provider *self, wpk_context *ctx, lib_kernel *k,
                      ir_tensor *const *in, ir_tensor *const *out) {
    const lib_cuda_consts *c = &k->consts;
    wpk_status st = lib_cuda_check_run(ctx, k->name, self->name, c, in, out);
    if (st) return st;
    const lib_gemm *g = &k->g;
    const uint64_t a = lib_cuda_in(c, in, 0), b = lib_cuda_in(c, in, 1);
    const uint64_t y = (uint64_t)(uintptr_t)out[0]->data;
    const uint64_t cc = g->has_c ? lib_cuda_in(c, in, LIB_IN_BIAS) : 0;
    int64_t count = 1;
    for (int i = 0; i < g->nb; i++) count *= g->batch[i];
    for (int64_t bi = 0; bi < count && !st; bi++) {
        /* the matrices of batch index bi, broadcast dims of A and B staying at 0 */
        int64_t ao = 0, bo = 0, as = g->m * g->k, bs = g->k * g->n, rest = bi;
        for (int i = g->nb - 1; i >= 0; i--) {
            int64_t at = rest % g->batch[i];
            rest /= g->batch[i];
            if (g->abatch[i] > 1) ao += at * as;
            if (g->bbatch[i] > 1) bo += at * bs;
            as *= g->abatch[i];
            bs *= g->bbatch[i];
        }
        uint64_t yb = y + (uint64_t)(bi * g->m * g->n) * 4;
        float beta = 0.0f;
        if (cc) {
            /* Y = beta * C broadcast, as the rank-1 product ones[m] C[1, n] (or C[m, 1] ones[n]);
             * the product then accumulates onto it */
            st = k->c_row ? sgemm(k->blas, false, false, g->m, g->n, 1, g->beta, k->ones, cc,
                                  0.0f, yb)
                          : sgemm(k->blas, false, false, g->m, g->n, 1, g->beta, cc, k->ones,
                                  0.0f, yb);
            beta = 1.0f;
        }
        if (!st)
            st = sgemm(k->blas, g->ta, g->tb, g->m, g->n, g->k, g->alpha,
                       a + (uint64_t)ao * 4, b + (uint64_t)bo * 4, beta, yb);
    }
    return lib_cuda_relay(ctx, k->consts.d, k->name, self->name, st);
}

/* The constants live in device memory: there is nothing for the host's cache flush to touch. */
static int constants(const kernel_provider *self, const lib_kernel *k, const void **start,
                     size_t *bytes, int max) {
    (void)self, (void)k, (void)start, (void)bytes, (void)max;
    return 0;
}

static char version_buf[64];
static pthread_once_t version_once = PTHREAD_ONCE_INIT;

/* cuBLAS tells its version only through a handle, and making one initializes CUDA in the
 * calling process (which a tuner forking measurement children must not do); cuBLASLt, which
 * ships with it and carries its version, tells it without. */
static void version_init(void) {
    char why[768];
    const rt_cublaslt_api *lt = rt_cublaslt_load(why, sizeof why);
    if (lt) snprintf(version_buf, sizeof version_buf, "cuBLAS %zu", lt->version());
    else snprintf(version_buf, sizeof version_buf, "cuBLAS (unavailable)");
}

static const char *version(const kernel_provider *self) {
    (void)self;
    pthread_once(&version_once, version_init);
    return version_buf;
}

const kernel_provider lib_cublas = {
    .name = "cublas",
    .family = "cublas",
    .describe = lib_describe,
    .space = lib_space,
    .default_config = lib_default_config,
    .legal = kernel_legal_in_space,
    .supports = supports,
    .configs = configs,
    .create = create,
    .run = run,
    .destroy = destroy,
    .constants = constants,
    .version = version,
};
