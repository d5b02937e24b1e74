/* cublaslt.c -- cuBLASLt's matmul (cuda_libs.h): one row-major product described once, the bias
 * and ReLU epilogue fused, every algorithm cuBLASLt's heuristic offers a config, one workspace
 * for all of them; and the provider lib_cublaslt over it, for Gemm / wpk::FusedGemm / MatMul /
 * wpk::FusedMatMul nodes of one matrix. cuBLASLt is loaded with dlopen.
 *
 * cuBLASLt is column-major. A row-major [r, c] matrix is the column-major [c, r] one with the
 * same bytes, so row-major C = A B is column-major C^T = B^T A^T: Lt's first operand is our B,
 * its second our A, D is [n rows, m cols] with leading dimension n, and Lt's bias (one value per
 * row of D) is one per column of our C -- Gemm's C row / FusedMatMul's bias. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "kernels/vendor/cuda_libs.h"
#include "kernels/vendor/lib.h"
#include "kernels/vendor/lib_node.h"
#include "ops/op_util.h"
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

/* ---- the provider (kernels/provider.h) ---- */

struct lib_kernel {
    char name[64];           /* the node's, for messages */
    rt_cublaslt_gemm *gemm;
    int config;
    bool bias;
    lib_cuda_consts consts;  /* B (and the bias) when constant */
};

/* The node as one cuBLASLt product; what its epilogues cannot compute exactly is refused. */
static wpk_status check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out, rt_gemm_desc *d) {
    if (n->nin > LIB_CUDA_MAX_IN) return op_unsupported(ctx, n, "has %d inputs", n->nin);
    lib_gemm g;
    wpk_status st = lib_gemm_read(ctx, n, in, out, &g);
    if (st) return st;
    int64_t count = 1;
    for (int i = 0; i < g.nb; i++) count *= g.batch[i];
    if (count > 1)
        return op_unsupported(ctx, n, "a batch of %lld products; the cublaslt provider takes "
                              "one", (long long)count);
    if (g.act.kind != ACT_NONE && g.act.kind != ACT_RELU)
        return op_unsupported(ctx, n, "activation %s; cuBLASLt's epilogues fuse ReLU only",
                              act_name(g.act.kind));
    if (g.has_z)
        return op_unsupported(ctx, n, "a residual input; the cublaslt provider's epilogue has "
                              "none");
    if (g.alpha != 1.0f)
        return op_unsupported(ctx, n, "alpha %g; the cublaslt provider scales nothing",
                              (double)g.alpha);
    if (g.has_c && (g.cm != 1 || g.cn != g.n || g.beta != 1.0f))
        return op_unsupported(ctx, n, "C broadcast from [%lld, %lld] with beta %g; cuBLASLt's "
                              "bias epilogue adds a row [1, %lld] as it is", (long long)g.cm,
                              (long long)g.cn, (double)g.beta, (long long)g.n);
    if (!fits_int(g.m) || !fits_int(g.n) || !fits_int(g.k))
        return op_unsupported(ctx, n, "matrices past cuBLASLt's int sizes");
    *d = (rt_gemm_desc){.m = g.m, .n = g.n, .k = g.k, .trans_a = g.ta, .trans_b = g.tb,
                        .bias = g.has_c || g.has_bias, .relu = g.act.kind == ACT_RELU};
    return WPK_OK;
}

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out) {
    (void)self;
    rt_gemm_desc d;
    return check(NULL, n, in, out, &d) == WPK_OK;
}

/* The heuristic needs a device, which configs does not have: the configs are its first
 * RT_CUBLASLT_MAX_ALGOS answers, and create refuses those it does not give for the node. */
static int configs(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                   ir_tensor *const *out, char (*names)[LIB_CONFIG_MAX]) {
    if (!supports(self, n, in, out)) return 0;
    for (int i = 0; i < RT_CUBLASLT_MAX_ALGOS; i++)
        snprintf(names[i], LIB_CONFIG_MAX, "heuristic_%d", i);
    return RT_CUBLASLT_MAX_ALGOS;
}

static void destroy(const kernel_provider *self, lib_kernel *k) {
    (void)self;
    if (!k) return;
    rt_cublaslt_gemm_free(k->gemm);
    lib_cuda_consts_free(&k->consts);
    wpk_free(k);
}

static wpk_status create(const kernel_provider *self, wpk_context *ctx, const ir_node *n,
                         ir_tensor *const *in, ir_tensor *const *out, int config,
                         const kernel_device *dev, lib_kernel **out_k) {
    *out_k = NULL;
    if (!dev->cuda) return lib_cuda_device_only(ctx, self, n);
    rt_gemm_desc d;
    wpk_status st = check(ctx, n, in, out, &d);
    if (st) return st;
    if (config < 0 || config >= RT_CUBLASLT_MAX_ALGOS)
        return op_unsupported(ctx, n, "the cublaslt provider has %d configs, not %d",
                              RT_CUBLASLT_MAX_ALGOS, config);
    lib_kernel *k = wpk_calloc(1, sizeof *k);
    if (!k) return wpk_error(ctx, WPK_ERR_NOMEM, "node '%s': out of memory creating a cublaslt "
                             "kernel", n->name);
    snprintf(k->name, sizeof k->name, "%s", n->name);
    k->config = config;
    k->bias = d.bias;
    rt_cuda *dv = dev->cuda;
    st = lib_cuda_relay(ctx, dv, n->name, self->name, rt_cublaslt_gemm_create(dv, &d, &k->gemm));
    if (!st && config >= rt_cublaslt_gemm_configs(k->gemm))
        st = op_unsupported(ctx, n, "cuBLASLt's heuristic offers %d algorithms for it, not "
                            "config %d", rt_cublaslt_gemm_configs(k->gemm), config);
    if (!st) st = lib_cuda_consts_upload(ctx, dv, self->name, n, in, &k->consts);
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
    /* the bias is Gemm's C or FusedMatMul's bias: input 2 either way */
    uint64_t bias = k->bias ? lib_cuda_in(c, in, LIB_IN_BIAS) : 0;
    st = rt_cublaslt_gemm_run(k->gemm, k->config, lib_cuda_in(c, in, 0), lib_cuda_in(c, in, 1),
                              bias, (uint64_t)(uintptr_t)out[0]->data);
    return lib_cuda_relay(ctx, k->gemm->d, k->name, self->name, st);
}

/* The constants live in device memory: there is nothing for the host's cache flush to touch. */
static int constants(const kernel_provider *self, const lib_kernel *k, const void **start,
                     size_t *bytes, int max) {
    (void)self, (void)k, (void)start, (void)bytes, (void)max;
    return 0;
}

static char version_buf[64];
static pthread_once_t version_once = PTHREAD_ONCE_INIT;

static void version_init(void) {
    char why[768];
    const rt_cublaslt_api *lt = rt_cublaslt_load(why, sizeof why);
    if (lt) snprintf(version_buf, sizeof version_buf, "cuBLASLt %zu", lt->version());
    else snprintf(version_buf, sizeof version_buf, "cuBLASLt (unavailable)");
}

static const char *version(const kernel_provider *self) {
    (void)self;
    pthread_once(&version_once, version_init);
    return version_buf;
}

const kernel_provider lib_cublaslt = {
    .name = "cublaslt",
    .family = "cublaslt",
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
