/* qlinear_add.c -- wpk::QLinearAdd, the quantized residual add that passes/fuse_qdq.c makes of
 * DequantizeLinear(a), DequantizeLinear(b) -> Add (-> Relu) -> QuantizeLinear: its shape
 * function and reference kernel, which compute the float graph it replaces element by element
 * (so the rewrite changes no byte). */
#include <string.h>

#include "ops/op_util.h"
#include "ops/quant.h"

enum { A, AS, AZP, B, BS, BZP, CS, CZP };

static wpk_status check_param(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, int s,
                              int z, const char *what, wpk_dtype qtype) {
    wpk_status st = op_need_input(ctx, n, in, s, what);
    if (!st) st = op_need_input(ctx, n, in, z, what);
    if (st) return st;
    if (in[s]->dtype != WPK_DTYPE_FLOAT32 || ir_numel(in[s]) != 1)
        return op_unsupported(ctx, n, "%s's scale must be one float32 value (%s, %lld values)",
                              what, wpk_dtype_name(in[s]->dtype), (long long)ir_numel(in[s]));
    if (ir_numel(in[z]) != 1 || (qtype != WPK_DTYPE_UNDEFINED && in[z]->dtype != qtype) ||
        !quant_is_int8(in[z]->dtype))
        return op_fail(ctx, n, "%s's zero point must be one 8-bit value of the tensor's dtype "
                       "(%s, %lld values)", what, wpk_dtype_name(in[z]->dtype),
                       (long long)ir_numel(in[z]));
    return WPK_OK;
}

static wpk_status setup(wpk_context *ctx, const ir_node *n, ir_tensor *const *in) {
    if (n->nin != 8)
        return op_fail(ctx, n, "takes 8 inputs (A, A_scale, A_zero_point, B, B_scale, "
                       "B_zero_point, C_scale, C_zero_point), not %d", n->nin);
    wpk_status st = op_need_input(ctx, n, in, A, "A");
    if (!st) st = op_need_input(ctx, n, in, B, "B");
    if (st) return st;
    if (!quant_is_int8(in[A]->dtype) || in[B]->dtype != in[A]->dtype)
        return op_unsupported(ctx, n, "A and B must both be int8 or both uint8 (%s, %s)",
                              wpk_dtype_name(in[A]->dtype), wpk_dtype_name(in[B]->dtype));
    if (in[A]->ndim != in[B]->ndim ||
        memcmp(in[A]->dims, in[B]->dims, sizeof(int64_t) * (size_t)in[A]->ndim))
        return op_unsupported(ctx, n, "A and B must have the same shape (no broadcasting)");
    const char *act = ir_attr_str(n, "activation", "");
    if (*act && strcmp(act, "Relu"))
        return op_unsupported(ctx, n, "attribute 'activation' is '%s'; only Relu is fused",
                              act);
    st = check_param(ctx, n, in, AS, AZP, "A", in[A]->dtype);
    if (!st) st = check_param(ctx, n, in, BS, BZP, "B", in[B]->dtype);
    if (!st) st = check_param(ctx, n, in, CS, CZP, "C", WPK_DTYPE_UNDEFINED);
    return st;
}

wpk_status op_qlinear_add_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                ir_tensor *const *out) {
    wpk_status st = op_need_output(ctx, n, out, 0);
    if (!st) st = setup(ctx, n, in);
    if (st) return st;
    op_set_shape(out[0], in[CZP]->dtype, in[A]->ndim, in[A]->dims);
    return WPK_OK;
}

wpk_status op_qlinear_add_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                              ir_tensor *const *out) {
    wpk_status st = setup(ctx, n, in);
    if (st) return st;
    float sa = quant_float_at(in[AS], 0), sb = quant_float_at(in[BS], 0);
    float sc = quant_float_at(in[CS], 0);
    int32_t za = quant_int_at(in[AZP], 0), zb = quant_int_at(in[BZP], 0);
    int32_t zc = quant_int_at(in[CZP], 0);
    bool relu = !strcmp(ir_attr_str(n, "activation", ""), "Relu");
    wpk_dtype yt = out[0]->dtype;
    for (int64_t i = 0; i < ir_numel(in[A]); i++) {
        /* two statements: no compiler may contract them into a fused multiply-add, which the
           float graph's separate DequantizeLinear and Add never are */
        float fa = (float)(quant_int_at(in[A], i) - za) * sa;
        float fb = (float)(quant_int_at(in[B], i) - zb) * sb;
        float v = fa + fb;
        if (relu) v = v > 0.0f ? v : 0.0f;
        quant_store8(out[0]->data, yt, i, quant_saturate(v / sc, zc, yt));
    }
    return WPK_OK;
}
