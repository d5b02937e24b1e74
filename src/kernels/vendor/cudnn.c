/* cudnn.c -- cuDNN's forward convolution as a kernel provider (cuda_rt.h): one conv described
 * once, every forward algorithm cuDNN offers for it a config, the fused bias + residual + ReLU
 * epilogue where cuDNN has it, the workspace grown on demand. cuDNN is loaded with dlopen. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
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

wpk_status rt_cudnn_conv_run(rt_cudnn_conv *c, int algo, uint64_t x, uint64_t w, uint64_t bias,
                             uint64_t z, uint64_t y) {
    size_t need;
    wpk_status st = rt_cudnn_conv_workspace(c, algo, &need);
    if (st) return st;
    if (need > c->ws_bytes) {
        /* the old workspace may still be in use by queued work: wait before freeing it */
        if (c->ws && (st = rt_cuda_sync(c->d, 0))) return st;
        rt_cuda_free(c->d, c->ws);
        c->ws = 0;
        c->ws_bytes = 0;
        if ((st = rt_cuda_alloc(c->d, need, &c->ws))) return st;
        c->ws_bytes = need;
    }
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
