/* qglobal_pool.c -- the int8 global average pool provider ("qgap"):
 * wpk::QLinearGlobalAveragePool on NCHW planes of int8/uint8, each plane's bytes summed in
 * integers (SSE2's sum of absolute differences against 0, 16 bytes at a time, where the CPU
 * has it; int8 bytes flipped into unsigned order and the offset taken back), then requantized
 * by ops/qlinear_global_pool.h's rule, the reference kernel's. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "kernels/vendor/lib.h"
#include "ops/qlinear_global_pool.h"
#include "ops/quant.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

struct lib_kernel {
    char name[64];
    int64_t planes, count;
    float xs, ys;
    int32_t xz, yz;
    wpk_dtype xt, yt;
};

static bool param_ok(const ir_tensor *s, const ir_tensor *z) {
    return s && z && s->data && z->data && s->dtype == WPK_DTYPE_FLOAT32 && ir_numel(s) == 1 &&
           ir_numel(z) == 1 && quant_is_int8(z->dtype) && quant_float_at(s, 0) != 0.0f;
}

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out) {
    (void)self;
    if (n->op != IR_OP_QLINEAR_GLOBAL_POOL_WPK || n->nin != 5 || !in[0] || !out || !out[0])
        return false;
    const ir_tensor *x = in[0];
    if (!quant_is_int8(x->dtype) || x->ndim < 3 || !param_ok(in[1], in[2]) ||
        !param_ok(in[3], in[4]) || in[2]->dtype != x->dtype || out[0]->dtype != in[4]->dtype)
        return false;
    for (int i = 0; i < x->ndim; i++)
        if (x->dims[i] <= 0) return false;
    return ir_numel(x) < ((int64_t)1 << 40);
}

static int configs(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                   ir_tensor *const *out, char (*names)[LIB_CONFIG_MAX]) {
    if (!supports(self, n, in, out)) return 0;
    snprintf(names[0], LIB_CONFIG_MAX, "%s", "planes");
    return 1;
}

static const char *version(const kernel_provider *self) {
    (void)self;
#if defined(__SSE2__)
    return "wpk int8 global average pool (sse2)";
#else
    return "wpk int8 global average pool (portable)";
#endif
}

static void destroy(const kernel_provider *self, lib_kernel *k) {
    (void)self;
    wpk_free(k);
}

static wpk_status create(const kernel_provider *self, wpk_context *ctx, const ir_node *n,
                         ir_tensor *const *in, ir_tensor *const *out, int config,
                         const kernel_device *dev, lib_kernel **out_k) {
    *out_k = NULL;
    if (dev->cuda) return lib_host_only(ctx, self, n);
    if (!supports(self, n, in, out) || config != 0)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s' (%s): the qgap provider takes "
                         "wpk::QLinearGlobalAveragePool with constant per-tensor parameters, "
                         "config 0 (asked %d)", n->name, n->op_type, config);
    lib_kernel *k = wpk_calloc(1, sizeof *k);
    if (!k) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory creating an int8 kernel");
    snprintf(k->name, sizeof k->name, "%s", n->name);
    k->planes = in[0]->dims[0] * in[0]->dims[1];
    k->count = ir_numel(in[0]) / k->planes;
    k->xs = quant_float_at(in[1], 0);
    k->xz = quant_int_at(in[2], 0);
    k->ys = quant_float_at(in[3], 0);
    k->yz = quant_int_at(in[4], 0);
    k->xt = in[0]->dtype;
    k->yt = out[0]->dtype;
    *out_k = k;
    return WPK_OK;
}

/* The sum of n bytes, each x ^ flip as unsigned. */
static int64_t byte_sum(const uint8_t *x, int64_t n, uint8_t flip) {
    int64_t sum = 0, i = 0;
#if defined(__SSE2__)
    const __m128i f = _mm_set1_epi8((char)flip), zero = _mm_setzero_si128();
    __m128i acc = zero;
    for (; i + 16 <= n; i += 16) {
        __m128i v = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(x + i)), f);
        acc = _mm_add_epi64(acc, _mm_sad_epu8(v, zero));
    }
    int64_t lanes[2];
    _mm_storeu_si128((__m128i *)lanes, acc);
    sum = lanes[0] + lanes[1];
#endif
    for (; i < n; i++) sum += (uint8_t)(x[i] ^ flip);
    return sum;
}

static wpk_status run(const kernel_provider *self, wpk_context *ctx, lib_kernel *k,
                      ir_tensor *const *in, ir_tensor *const *out) {
    (void)self;
    if (!in[0] || !in[0]->data || ir_numel(in[0]) != k->planes * k->count || !out ||
        !out[0] || !out[0]->data || ir_numel(out[0]) != k->planes)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "node '%s' (qgap): a tensor is not the one "
                         "the kernel was created for", k->name);
    const uint8_t *x = in[0]->data;
    bool is_signed = k->xt == WPK_DTYPE_INT8;
    /* int8 bytes are summed as x + 128: take the offset back with the zero point */
    int64_t offset = (is_signed ? 128 : 0) + k->xz;
    for (int64_t p = 0; p < k->planes; p++) {
        int64_t sum = byte_sum(x + p * k->count, k->count, is_signed ? 0x80 : 0);
        quant_store8(out[0]->data, k->yt, p,
                     qgap_quantize(sum - offset * k->count, k->count, k->xs, k->ys, k->yz,
                                   k->yt));
    }
    return WPK_OK;
}

const kernel_provider lib_qgap = {
    .name = "qgap",
    .family = "int8",
    .describe = lib_describe,
    .space = lib_space,
    .default_config = lib_default_config,
    .legal = kernel_legal_in_space,
    .supports = supports,
    .configs = configs,
    .create = create,
    .run = run,
    .destroy = destroy,
    .version = version,
};
