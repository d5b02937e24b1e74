/* quant.h -- the affine integer quantization shared by the quantized ops: reading scales
 * (float32, float16, bfloat16) and zero points (int8, uint8, int32), round-half-to-even and
 * saturation, the per-tensor / per-axis / blocked parameter index, and the integer conv and
 * matmul accumulation cores (ops/integer_conv.c, ops/integer_matmul.c). */
#ifndef WPK_OPS_QUANT_H
#define WPK_OPS_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/graph.h"
#include "ops/spatial.h"

/* Whether t's dtype is a scale's: float32, float16 or bfloat16. */
bool quant_is_scale_dtype(wpk_dtype t);
/* Whether t's dtype is an 8-bit integer. */
bool quant_is_int8(wpk_dtype t);
/* Element i of a float32 / float16 / bfloat16 tensor as float. */
float quant_float_at(const ir_tensor *t, int64_t i);
/* Element i of an int8 / uint8 / int32 tensor as int32; 0 when t is NULL (an absent zero
 * point). */
int32_t quant_int_at(const ir_tensor *t, int64_t i);

/* round(v) + zp clamped to [lo, hi], rounding half to even: the requantization of every
 * quantized kernel. v is first clamped to +-1024, where any zp and 8-bit range saturate alike,
 * so that adding and taking away 1.5 * 2^23 rounds it in the current (nearest-even) mode:
 * nearbyintf without a library call, which vectorizes. NaN goes to lo. */
static inline int32_t quant_round_clamp(float v, int32_t zp, int32_t lo, int32_t hi) {
    const float magic = 12582912.0f;
    v = v >= -1024.0f ? v : -1024.0f;
    v = v <= 1024.0f ? v : 1024.0f;
    int32_t q = (int32_t)((v + magic) - magic) + zp;
    return q < lo ? lo : q > hi ? hi : q;
}

/* round(v) + zp, saturated to the range of dtype (int8 or uint8). */
static inline int32_t quant_saturate(float v, int32_t zp, wpk_dtype dtype) {
    return dtype == WPK_DTYPE_INT8 ? quant_round_clamp(v, zp, -128, 127)
                                   : quant_round_clamp(v, zp, 0, 255);
}

/* Write v (already in range) as element i of an int8 / uint8 tensor's data. */
static inline void quant_store8(void *data, wpk_dtype dtype, int64_t i, int32_t v) {
    if (dtype == WPK_DTYPE_INT8)
        ((int8_t *)data)[i] = (int8_t)v;
    else
        ((uint8_t *)data)[i] = (uint8_t)v;
}

/* Checks that an optional scalar-or-per-element parameter has 1 or `count` elements (and is
 * 0-D or 1-D); `what` names it in the message. */
wpk_status quant_check_param(wpk_context *ctx, const ir_node *n, const ir_tensor *t,
                             int64_t count, const char *what);

/* The spatial geometry of an integer convolution (ConvInteger, QLinearConv) read from X and
 * W's shapes and the node's Conv attributes, with the output resolved; group and the output
 * channels in *group, *m. */
wpk_status quant_conv_geometry(wpk_context *ctx, const ir_node *n, const ir_tensor *x,
                               const ir_tensor *w, sp_geom *g, int64_t *group, int64_t *m);

/* int32 accumulators of an integer convolution, one output plane (batch b, output channel oc)
 * into acc[out spatial], zero padded (padding is the real value 0, i.e. the zero point). x and
 * w are int8 or uint8 by their dtypes; xzp and wzp the zero points of X and of channel oc. */
void quant_conv_plane(int32_t *acc, const sp_geom *g, int64_t group, const ir_tensor *x,
                      int32_t xzp, const ir_tensor *w, int32_t wzp, int64_t b, int64_t oc);

/* The matmul geometry of MatMulInteger / QLinearMatMul (numpy broadcasting of the batch dims
 * as MatMul): the output shape into out (dtype left to the caller); 1-D A and B as MatMul. */
wpk_status quant_matmul_shape(wpk_context *ctx, const ir_node *n, const ir_tensor *a,
                              const ir_tensor *b, ir_tensor *out);

/* int32 products of an integer matmul: for every output element, sum over k of
 * (A - azp[row]) (B - bzp[col]), where azp has 1 or M elements and bzp 1 or N, into acc
 * (ir_numel(out) values, out's layout). */
void quant_matmul_acc(int32_t *acc, const ir_tensor *a, const ir_tensor *azp,
                      const ir_tensor *b, const ir_tensor *bzp, const ir_tensor *out);

#endif
