/* qlinear_global_pool.c -- wpk::QLinearGlobalAveragePool, what passes/fuse_qdq.c makes of
 * DequantizeLinear -> GlobalAveragePool -> QuantizeLinear (per tensor): inputs X, X_scale,
 * X_zero_point, Y_scale, Y_zero_point; Y [N, C, 1, ...] of Y_zero_point's dtype. Its shape
 * function and reference kernel. Each plane's sum of (x - x_zero_point) is exact in integers;
 * the mean is (float)sum * x_scale / count, quantized with Y's parameters: the float graph's
 * result up to the order of its float sum (within a step of it). */
#include "ops/qlinear_global_pool.h"

#include "ops/op_util.h"
#include "ops/quant.h"

enum { X, XS, XZP, YS, YZP };

static wpk_status check_param(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, int s,
                              int z, const char *what) {
    wpk_status st = op_need_input(ctx, n, in, s, what);
    if (!st) st = op_need_input(ctx, n, in, z, what);
    if (st) return st;
    if (in[s]->dtype != WPK_DTYPE_FLOAT32 || ir_numel(in[s]) != 1 || !in[s]->data)
        return op_unsupported(ctx, n, "%s's scale must be one constant float32 value", what);
    if (ir_numel(in[z]) != 1 || !quant_is_int8(in[z]->dtype) || !in[z]->data)
        return op_fail(ctx, n, "%s's zero point must be one constant 8-bit value (%s, %lld "
                       "values)", what, wpk_dtype_name(in[z]->dtype),
                       (long long)ir_numel(in[z]));
    return WPK_OK;
}

static wpk_status setup(wpk_context *ctx, const ir_node *n, ir_tensor *const *in) {
    if (n->nin != 5)
        return op_fail(ctx, n, "takes 5 inputs (X, X_scale, X_zero_point, Y_scale, "
                       "Y_zero_point), not %d", n->nin);
    wpk_status st = op_need_input(ctx, n, in, X, "X");
    if (st) return st;
    if (!quant_is_int8(in[X]->dtype) || in[X]->ndim < 3)
        return op_unsupported(ctx, n, "X must be an int8 or uint8 tensor of 3 or more dims "
                              "(%s, %d dims)", wpk_dtype_name(in[X]->dtype), in[X]->ndim);
    st = check_param(ctx, n, in, XS, XZP, "X");
    if (!st && in[XZP]->dtype != in[X]->dtype)
        return op_fail(ctx, n, "X's zero point is %s, X is %s", wpk_dtype_name(in[XZP]->dtype),
                       wpk_dtype_name(in[X]->dtype));
    if (!st) st = check_param(ctx, n, in, YS, YZP, "Y");
    return st;
}

wpk_status op_qlinear_global_pool_shape(wpk_context *ctx, const ir_node *n,
                                        ir_tensor *const *in, ir_tensor *const *out) {
    wpk_status st = op_need_output(ctx, n, out, 0);
    if (!st) st = setup(ctx, n, in);
    if (st) return st;
    int64_t dims[WPK_MAX_DIMS];
    for (int i = 0; i < in[X]->ndim; i++) dims[i] = i < 2 ? in[X]->dims[i] : 1;
    op_set_shape(out[0], in[YZP]->dtype, in[X]->ndim, dims);
    return WPK_OK;
}

int32_t qgap_quantize(int64_t sum, int64_t count, float xs, float ys, int32_t yz,
                      wpk_dtype yt) {
    /* separate statements: no contraction into a fused multiply-add */
    float v = (float)sum * xs;
    v = v / (float)count;
    return quant_saturate(v / ys, yz, yt);
}

wpk_status op_qlinear_global_pool_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                      ir_tensor *const *out) {
    wpk_status st = setup(ctx, n, in);
    if (st) return st;
    const ir_tensor *x = in[X];
    int64_t planes = x->dims[0] * x->dims[1], count = planes ? ir_numel(x) / planes : 0;
    float xs = quant_float_at(in[XS], 0), ys = quant_float_at(in[YS], 0);
    int32_t xz = quant_int_at(in[XZP], 0), yz = quant_int_at(in[YZP], 0);
    for (int64_t p = 0; p < planes; p++) {
        int64_t sum = 0;
        for (int64_t i = 0; i < count; i++) sum += quant_int_at(x, p * count + i) - xz;
        quant_store8(out[0]->data, out[0]->dtype, p,
                     qgap_quantize(sum, count, xs, ys, yz, out[0]->dtype));
    }
    return WPK_OK;
}
