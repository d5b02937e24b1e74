/* cudnn.c -- cuDNN's forward convolution (cuda_libs.h): one conv described once, every forward
 * algorithm cuDNN offers for it a config, the fused bias + residual + ReLU epilogue where cuDNN
 * has it, the workspace grown on demand; and the provider lib_cudnn over it, for Conv /
 * wpk::FusedConv nodes. cuDNN is loaded with dlopen. */
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

struct rt_cudnn_conv {
    rt_cuda *d;
    const rt_cudnn_api *api;
    rt_conv_desc desc;
    cudnn_handle h;
    cudnn_tensor_desc x, y, b;
    cudnn_filter_desc w;
    cudnn_conv_desc conv;
    cudnn_act_desc act;
    bool fused;
    uint64_t zero_bias;      /* ReLU without a bias: cuDNN's fused call wants one */
    uint64_t ws;
    size_t ws_bytes;
    int algos[CUDNN_ALGO_COUNT];
    int nalgos;
};

static const char *const ALGO_NAMES[CUDNN_ALGO_COUNT] = {
    "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
    "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
#define ALGO_PRECOMP 1

const char *rt_cudnn_algo_name(int algo) {
    return algo >= 0 && algo < CUDNN_ALGO_COUNT ? ALGO_NAMES[algo] : "?";
}

size_t rt_cudnn_version(wpk_context *ctx) {
    char why[768];
    const rt_cudnn_api *api = rt_cudnn_load(why, sizeof why);
    if (!api) {
        wpk_error(ctx, WPK_ERR_UNSUPPORTED, "cuDNN unavailable: %s", why);
        return 0;
    }
    return api->version();
}

/* A cuDNN status as the runtime's: allocation failures are out-of-memory, "not supported" is
 * WPK_ERR_UNSUPPORTED, the rest a library failure. */
static wpk_status failed(rt_cudnn_conv *c, cudnn_status s, const char *what, int algo) {
    wpk_context *ctx = rt_cuda_ctx(c->d);
    const char *text = c->api->error_string ? c->api->error_string(s) : "?";
    char where[64] = "";
    if (algo >= 0) snprintf(where, sizeof where, " with %s", rt_cudnn_algo_name(algo));
    if (s == 4003 || s == 4004) {
        rt_cuda_set_fault(c->d, RT_CUDA_FAULT_OOM);
        return wpk_error(ctx, WPK_ERR_NOMEM, "cuDNN: out of memory: %s%s: %s", what, where, text);
    }
    if (s >= 3000 && s < 4000) {
        rt_cuda_set_fault(c->d, RT_CUDA_FAULT_CONFIG);
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "cuDNN: %s%s: not supported: %s", what, where,
                         text);
    }
    rt_cuda_set_fault(c->d, RT_CUDA_FAULT_LIBRARY);
    return wpk_error(ctx, WPK_ERR_INTERNAL, "cuDNN: %s%s: %s (status %d)", what, where, text, s);
}

#define TRY_DNN(call, what)                                                                \
    do {                                                                                   \
        cudnn_status s_ = (call);                                                          \
        if (s_ != 0) {                                                                     \
            wpk_status st_ = failed(c, s_, what, -1);                                      \
            rt_cudnn_conv_free(c);                                                         \
            return st_;                                                                    \
        }                                                                                  \
    } while (0)

static bool fits_int(int64_t v) { return v >= 0 && v <= 0x7fffffff; }

wpk_status rt_cudnn_conv_create(rt_cuda *d, const rt_conv_desc *g, rt_cudnn_conv **out) {
    *out = NULL;
    wpk_context *ctx = rt_cuda_ctx(d);
    char why[768];
    const rt_cudnn_api *api = rt_cudnn_load(why, sizeof why);
    if (!api) {
        rt_cuda_set_fault(d, RT_CUDA_FAULT_UNAVAILABLE);
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "cuDNN unavailable: %s", why);
    }
    if (g->pad[0] != g->pad[2] || g->pad[1] != g->pad[3])
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "cuDNN: asymmetric padding (%lld, %lld, %lld, "
                         "%lld) is not something it takes", (long long)g->pad[0],
                         (long long)g->pad[1], (long long)g->pad[2], (long long)g->pad[3]);
    if (g->groups < 1 || g->c % g->groups || g->k % g->groups)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "cuDNN: %lld groups for %lld -> %lld channels",
                         (long long)g->groups, (long long)g->c, (long long)g->k);
    const int64_t dims[] = {g->n, g->c, g->h, g->w, g->k, g->kh, g->kw, g->stride[0], g->stride[1],
                            g->pad[0], g->pad[1], g->dilation[0], g->dilation[1]};
    for (size_t i = 0; i < sizeof dims / sizeof *dims; i++)
        if (!fits_int(dims[i]))
            return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "cuDNN: a conv dimension (%lld) beyond int",
                             (long long)dims[i]);
    rt_cudnn_conv *c = wpk_calloc(1, sizeof *c);
    if (!c) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory");
    c->d = d;
    c->api = api;
    c->desc = *g;
    c->fused = g->bias || g->residual || g->relu;
    TRY_DNN(api->create(&c->h), "creating a handle");
    TRY_DNN(api->set_stream(c->h, rt_cuda_stream(d)), "setting the stream");
    TRY_DNN(api->create_tensor(&c->x), "creating a tensor descriptor");
    TRY_DNN(api->create_tensor(&c->y), "creating a tensor descriptor");
    TRY_DNN(api->create_tensor(&c->b), "creating a tensor descriptor");
    TRY_DNN(api->create_filter(&c->w), "creating a filter descriptor");
    TRY_DNN(api->create_conv(&c->conv), "creating a convolution descriptor");
    TRY_DNN(api->create_act(&c->act), "creating an activation descriptor");
    TRY_DNN(api->set_tensor4d(c->x, CUDNN_NCHW, CUDNN_FLOAT, (int)g->n, (int)g->c, (int)g->h,
                              (int)g->w), "describing X");
    TRY_DNN(api->set_filter4d(c->w, CUDNN_FLOAT, CUDNN_NCHW, (int)g->k, (int)(g->c / g->groups),
                              (int)g->kh, (int)g->kw), "describing W");
    TRY_DNN(api->set_conv2d(c->conv, (int)g->pad[0], (int)g->pad[1], (int)g->stride[0],
                            (int)g->stride[1], (int)g->dilation[0], (int)g->dilation[1],
                            CUDNN_XCORR, CUDNN_FLOAT), "describing the convolution");
    TRY_DNN(api->set_group_count(c->conv, (int)g->groups), "setting the group count");
    /* FMA math: no TF32 tensor cores unless asked, so results match the reference kernels */
    TRY_DNN(api->set_math_type(c->conv, g->tf32 ? CUDNN_MATH_DEFAULT : CUDNN_MATH_FMA),
            "setting the math type");
    int n, k, oh, ow;
    TRY_DNN(api->output_dim(c->conv, c->x, c->w, &n, &k, &oh, &ow), "computing the output shape");
    TRY_DNN(api->set_tensor4d(c->y, CUDNN_NCHW, CUDNN_FLOAT, n, k, oh, ow), "describing Y");
    TRY_DNN(api->set_tensor4d(c->b, CUDNN_NCHW, CUDNN_FLOAT, 1, k, 1, 1), "describing the bias");
    TRY_DNN(api->set_act(c->act, g->relu ? CUDNN_ACT_RELU : CUDNN_ACT_IDENTITY, CUDNN_NAN_PROPAGATE,
                         0.0), "describing the activation");
    cudnn_algo_perf perf[CUDNN_ALGO_COUNT];
    int got = 0;
    TRY_DNN(api->get_algos(c->h, c->x, c->w, c->conv, c->y, CUDNN_ALGO_COUNT, &got, perf),
            "listing the forward algorithms");
    for (int i = 0; i < got && i < CUDNN_ALGO_COUNT; i++) {
        if (perf[i].status != 0 || perf[i].algo < 0 || perf[i].algo >= CUDNN_ALGO_COUNT) continue;
        /* the fused call without an activation runs only with IMPLICIT_PRECOMP_GEMM */
        if (c->fused && !g->relu && perf[i].algo != ALGO_PRECOMP) continue;
        bool dup = false;
        for (int j = 0; j < c->nalgos; j++) dup |= c->algos[j] == perf[i].algo;
        if (!dup) c->algos[c->nalgos++] = perf[i].algo;
    }
    if (c->fused && !g->bias) {
        wpk_status st = rt_cuda_alloc(d, (size_t)g->k * 4, &c->zero_bias);
        if (!st) st = rt_cuda_memset_async(d, c->zero_bias, 0, (size_t)g->k * 4);
        if (st) {
            rt_cudnn_conv_free(c);
            return st;
        }
    }
    *out = c;
    return WPK_OK;
}

void rt_cudnn_conv_free(rt_cudnn_conv *c) {
    if (!c) return;
    const rt_cudnn_api *api = c->api;
    if (c->act) api->destroy_act(c->act);
    if (c->conv) api->destroy_conv(c->conv);
    if (c->w) api->destroy_filter(c->w);
    if (c->b) api->destroy_tensor(c->b);
    if (c->y) api->destroy_tensor(c->y);
    if (c->x) api->destroy_tensor(c->x);
    if (c->h) api->destroy(c->h);
    rt_cuda_free(c->d, c->ws);
    rt_cuda_free(c->d, c->zero_bias);
    wpk_free(c);
}

int rt_cudnn_conv_algos(rt_cudnn_conv *c, int *algos, int max) {
    for (int i = 0; i < c->nalgos && i < max; i++) algos[i] = c->algos[i];
    return c->nalgos;
}

static bool offered(const rt_cudnn_conv *c, int algo) {
    for (int i = 0; i < c->nalgos; i++)
        if (c->algos[i] == algo) return true;
    return false;
}

wpk_status rt_cudnn_conv_workspace(rt_cudnn_conv *c, int algo, size_t *bytes) {
    *bytes = 0;
    if (!offered(c, algo))
        return wpk_error(rt_cuda_ctx(c->d), WPK_ERR_UNSUPPORTED, "cuDNN: algorithm %d (%s) does "
                         "not run this conv", algo, rt_cudnn_algo_name(algo));
    cudnn_status s = c->api->workspace_size(c->h, c->x, c->w, c->conv, c->y, algo, bytes);
    return s == 0 ? WPK_OK : failed(c, s, "sizing the workspace", algo);
}

/* A workspace of at least algo's size, kept for later runs. */
static wpk_status reserve(rt_cudnn_conv *c, int algo) {
    size_t need;
    wpk_status st = rt_cudnn_conv_workspace(c, algo, &need);
    if (st || need <= c->ws_bytes) return st;
    /* the old workspace may still be in use by queued work: wait before freeing it */
    if (c->ws && (st = rt_cuda_sync(c->d, 0))) return st;
    rt_cuda_free(c->d, c->ws);
    c->ws = 0;
    c->ws_bytes = 0;
    if ((st = rt_cuda_alloc(c->d, need, &c->ws))) return st;
    c->ws_bytes = need;
    return WPK_OK;
}

wpk_status rt_cudnn_conv_run(rt_cudnn_conv *c, int algo, uint64_t x, uint64_t w, uint64_t bias,
                             uint64_t z, uint64_t y) {
    wpk_status st = reserve(c, algo);
    if (st) return st;
    const float one = 1.0f, zero = 0.0f;
    void *wsp = (void *)(uintptr_t)c->ws;
    cudnn_status s;
    if (!c->fused) {
        s = c->api->forward(c->h, &one, c->x, (const void *)(uintptr_t)x, c->w,
                            (const void *)(uintptr_t)w, c->conv, algo, wsp, c->ws_bytes, &zero,
                            c->y, (void *)(uintptr_t)y);
    } else {
        /* y = act(1 * conv + alpha2 * z + bias); without a residual z is y itself, weighted 0 */
        uint64_t zz = c->desc.residual ? z : y, bb = c->desc.bias ? bias : c->zero_bias;
        s = c->api->bias_act_forward(c->h, &one, c->x, (const void *)(uintptr_t)x, c->w,
                                     (const void *)(uintptr_t)w, c->conv, algo, wsp, c->ws_bytes,
                                     c->desc.residual ? &one : &zero, c->y,
                                     (const void *)(uintptr_t)zz, c->b,
                                     (const void *)(uintptr_t)bb, c->act, c->y,
                                     (void *)(uintptr_t)y);
    }
    if (s != 0) return failed(c, s, "running the convolution", algo);
    rt_cuda_set_fault(c->d, RT_CUDA_FAULT_NONE);
    return WPK_OK;
}

/* ---- the provider (kernels/provider.h) ---- */

/* Configs in this order, so that config 0 (the default) is the one algorithm cuDNN's fused
 * call runs without an activation (IMPLICIT_PRECOMP_GEMM): then the rest by id. */
static const int CONFIG_ALGOS[CUDNN_ALGO_COUNT] = {ALGO_PRECOMP, 0, 2, 3, 4, 5, 6, 7};

struct lib_kernel {
    char name[64];           /* the node's, for messages */
    rt_cudnn_conv *conv;
    int algo;
    bool bias, z;
    lib_cuda_consts consts;  /* W (and B, Z) when constant */
};

/* The node as a cuDNN conv; what cuDNN's legacy API cannot compute exactly is refused. */
static wpk_status check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out, rt_conv_desc *d) {
    if (n->op == IR_OP_CONV_NCHWC)
        return op_unsupported(ctx, n, "blocked tensors (NCHW[x]c); the cudnn provider takes NCHW");
    if (n->nin > LIB_CUDA_MAX_IN) return op_unsupported(ctx, n, "has %d inputs", n->nin);
    lib_conv c;
    wpk_status st = lib_conv_read(ctx, n, in, out, &c);
    if (st) return st;
    if (c.pad0[0] != c.pad1[0] || c.pad0[1] != c.pad1[1])
        return op_unsupported(ctx, n, "asymmetric pads (%lld, %lld, %lld, %lld); cuDNN's "
                              "convolution descriptor takes one pad per side pair",
                              (long long)c.pad0[0], (long long)c.pad0[1], (long long)c.pad1[0],
                              (long long)c.pad1[1]);
    if (c.act.kind != ACT_NONE && c.act.kind != ACT_RELU)
        return op_unsupported(ctx, n, "activation %s; cuDNN fuses ReLU only",
                              act_name(c.act.kind));
    *d = (rt_conv_desc){.n = c.n, .c = c.c, .h = c.h, .w = c.w, .k = c.k, .kh = c.kh,
                        .kw = c.kw, .stride = {c.stride[0], c.stride[1]},
                        .pad = {c.pad0[0], c.pad0[1], c.pad1[0], c.pad1[1]},
                        .dilation = {c.dil[0], c.dil[1]}, .groups = c.group,
                        .bias = c.has_bias, .residual = c.has_z, .relu = c.act.kind == ACT_RELU};
    return WPK_OK;
}

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out) {
    (void)self;
    rt_conv_desc d;
    return check(NULL, n, in, out, &d) == WPK_OK;
}

/* How many configs the node has: its epilogue without an activation runs with one algorithm. */
static int nconfigs(const rt_conv_desc *d) {
    return (d->bias || d->residual) && !d->relu ? 1 : CUDNN_ALGO_COUNT;
}

static int configs(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                   ir_tensor *const *out, char (*names)[LIB_CONFIG_MAX]) {
    (void)self;
    rt_conv_desc d;
    if (check(NULL, n, in, out, &d)) return 0;
    int count = nconfigs(&d);
    for (int i = 0; i < count; i++)
        snprintf(names[i], LIB_CONFIG_MAX, "%s", rt_cudnn_algo_name(CONFIG_ALGOS[i]));
    return count;
}

static void destroy(const kernel_provider *self, lib_kernel *k) {
    (void)self;
    if (!k) return;
    rt_cudnn_conv_free(k->conv);
    lib_cuda_consts_free(&k->consts);
    wpk_free(k);
}

static wpk_status create(const kernel_provider *self, wpk_context *ctx, const ir_node *n,
                         ir_tensor *const *in, ir_tensor *const *out, int config,
                         const kernel_device *dev, lib_kernel **out_k) {
    *out_k = NULL;
    if (!dev->cuda) return lib_cuda_device_only(ctx, self, n);
    rt_conv_desc d;
    wpk_status st = check(ctx, n, in, out, &d);
    if (st) return st;
    if (config < 0 || config >= nconfigs(&d))
        return op_unsupported(ctx, n, "the cudnn provider has %d configs for it, not %d",
                              nconfigs(&d), config);
    lib_kernel *k = wpk_calloc(1, sizeof *k);
    if (!k) return wpk_error(ctx, WPK_ERR_NOMEM, "node '%s': out of memory creating a cudnn "
                             "kernel", n->name);
    snprintf(k->name, sizeof k->name, "%s", n->name);
    k->algo = CONFIG_ALGOS[config];
    k->bias = d.bias, k->z = d.residual;
    rt_cuda *dv = dev->cuda;
    st = lib_cuda_relay(ctx, dv, n->name, self->name, rt_cudnn_conv_create(dv, &d, &k->conv));
    /* an algorithm cuDNN does not offer for this conv is refused now, and the workspace of the
     * one it runs allocated now: run allocates nothing */
    if (!st) st = lib_cuda_relay(ctx, dv, n->name, self->name, reserve(k->conv, k->algo));
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
    uint64_t x = lib_cuda_in(c, in, 0), w = lib_cuda_in(c, in, 1);
    uint64_t b = k->bias ? lib_cuda_in(c, in, LIB_IN_BIAS) : 0;
    uint64_t z = k->z ? lib_cuda_in(c, in, LIB_IN_Z) : 0;
    st = rt_cudnn_conv_run(k->conv, k->algo, x, w, b, z, (uint64_t)(uintptr_t)out[0]->data);
    return lib_cuda_relay(ctx, k->conv->d, k->name, self->name, st);
}

/* The weights live in device memory: there is nothing for the host's cache flush to touch. */
static int constants(const kernel_provider *self, const lib_kernel *k, const void **start,
                     size_t *bytes, int max) {
    (void)self, (void)k, (void)start, (void)bytes, (void)max;
    return 0;
}

static char version_buf[64];
static pthread_once_t version_once = PTHREAD_ONCE_INIT;

static void version_init(void) {
    char why[768];
    const rt_cudnn_api *api = rt_cudnn_load(why, sizeof why);
    if (api) snprintf(version_buf, sizeof version_buf, "cuDNN %zu", api->version());
    else snprintf(version_buf, sizeof version_buf, "cuDNN (unavailable)");
}

static const char *version(const kernel_provider *self) {
    (void)self;
    pthread_once(&version_once, version_init);
    return version_buf;
}

const kernel_provider lib_cudnn = {
    .name = "cudnn",
    .family = "cudnn",
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
