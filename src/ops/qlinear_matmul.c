/* qlinear_matmul.c -- QLinearMatMul: an integer matmul of quantized a and b (int32 sums)
 * requantized to y's scale and zero point; a and y per tensor, b per tensor or per column. */
#include "base/alloc.h"
#include "ops/op_util.h"
#include "ops/quant.h"

enum { A, AS, AZP, B, BS, BZP, YS, YZP };

static wpk_status check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in) {
    static const char *const names[] = {"a", "a_scale", "a_zero_point", "b", "b_scale",
                                        "b_zero_point", "y_scale", "y_zero_point"};
    wpk_status st;
    for (int i = 0; i < 8; i++)
        if ((st = op_need_input(ctx, n, in, i, names[i]))) return st;
    for (int i = 0; i < 8; i++) {
        bool scale = i == AS || i == BS || i == YS;
        if (scale ? !quant_is_scale_dtype(in[i]->dtype) : !quant_is_int8(in[i]->dtype))
            return op_unsupported(ctx, n, "input '%s' has dtype %s", names[i],
                                  wpk_dtype_name(in[i]->dtype));
    }
    if (in[AZP]->dtype != in[A]->dtype || in[BZP]->dtype != in[B]->dtype)
        return op_fail(ctx, n, "a zero point's dtype differs from its tensor's");
    int64_t cols = in[B]->ndim >= 2 ? in[B]->dims[in[B]->ndim - 1] : 1;
    if ((st = quant_check_param(ctx, n, in[AS], 1, "a_scale")) ||
        (st = quant_check_param(ctx, n, in[AZP], 1, "a_zero_point")) ||
        (st = quant_check_param(ctx, n, in[BS], cols, "b_scale")) ||
        (st = quant_check_param(ctx, n, in[BZP], cols, "b_zero_point")) ||
        (st = quant_check_param(ctx, n, in[YS], 1, "y_scale")) ||
        (st = quant_check_param(ctx, n, in[YZP], 1, "y_zero_point")))
        return st;
    return WPK_OK;
}

wpk_status op_qlinear_matmul_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                   ir_tensor *const *out) {
    wpk_status st = op_need_output(ctx, n, out, 0);
    if (!st) st = check(ctx, n, in);
    if (st) return st;
    out[0]->dtype = in[YZP]->dtype;
    return quant_matmul_shape(ctx, n, in[A], in[B], out[0]);
}

wpk_status op_qlinear_matmul_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                 ir_tensor *const *out) {
    wpk_status st = check(ctx, n, in);
    if (st) return st;
    int64_t count = ir_numel(out[0]);
    int32_t *acc = wpk_malloc((size_t)(count ? count : 1) * sizeof *acc);
    if (!acc) return op_fail(ctx, n, "out of memory for the accumulators");
    quant_matmul_acc(acc, in[A], in[AZP], in[B], in[BZP], out[0]);
    int64_t cols = out[0]->ndim ? out[0]->dims[out[0]->ndim - 1] : 1;
    bool per_col = ir_numel(in[BS]) > 1;
    float as = quant_float_at(in[AS], 0), ys = quant_float_at(in[YS], 0);
    int32_t yzp = quant_int_at(in[YZP], 0);
    wpk_dtype yt = out[0]->dtype;
    for (int64_t i = 0; i < count; i++) {
        float mult = as * quant_float_at(in[BS], per_col ? i % cols : 0) / ys;
        quant_store8(out[0]->data, yt, i,
                     quant_saturate((float)acc[i] * mult, yzp, yt));
    }
    wpk_free(acc);
    return WPK_OK;
}
