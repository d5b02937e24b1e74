/* qlinear_conv.c -- QLinearConv: an integer convolution of quantized x and w (int32 sums, plus
 * an int32 bias) requantized to y's scale and zero point; w's scale and zero point per tensor or
 * per output channel. wpk::QLinearConv (passes/fuse_qdq.c) adds attribute `activation`: "Relu"
 * clamps the result at y's zero point, the quantized 0, folding a Relu that followed. */
#include <string.h>

#include "base/alloc.h"
#include "ops/op_util.h"
#include "ops/quant.h"

enum { X, XS, XZP, W, WS, WZP, YS, YZP, B };

static wpk_status setup(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, sp_geom *g,
                        int64_t *group, int64_t *m) {
    static const char *const names[] = {"x", "x_scale", "x_zero_point", "w", "w_scale",
                                        "w_zero_point", "y_scale", "y_zero_point"};
    wpk_status st;
    for (int i = 0; i < 8; i++)
        if ((st = op_need_input(ctx, n, in, i, names[i]))) return st;
    for (int i = 0; i < 8; i++) {
        bool scale = i == XS || i == WS || i == YS;
        if (scale ? !quant_is_scale_dtype(in[i]->dtype) : !quant_is_int8(in[i]->dtype))
            return op_unsupported(ctx, n, "input '%s' has dtype %s", names[i],
                                  wpk_dtype_name(in[i]->dtype));
    }
    if (in[XZP]->dtype != in[X]->dtype || in[WZP]->dtype != in[W]->dtype)
        return op_fail(ctx, n, "a zero point's dtype differs from its tensor's");
    if ((st = quant_conv_geometry(ctx, n, in[X], in[W], g, group, m))) return st;
    if ((st = quant_check_param(ctx, n, in[XS], 1, "x_scale")) ||
        (st = quant_check_param(ctx, n, in[XZP], 1, "x_zero_point")) ||
        (st = quant_check_param(ctx, n, in[WS], *m, "w_scale")) ||
        (st = quant_check_param(ctx, n, in[WZP], *m, "w_zero_point")) ||
        (st = quant_check_param(ctx, n, in[YS], 1, "y_scale")) ||
        (st = quant_check_param(ctx, n, in[YZP], 1, "y_zero_point")))
        return st;
    if (n->nin > B && in[B]) {
        if (in[B]->dtype != WPK_DTYPE_INT32 || in[B]->ndim != 1 || in[B]->dims[0] != *m)
            return op_fail(ctx, n, "bias B must be int32 and 1-D with %lld values",
                           (long long)*m);
    }
    if (n->op == IR_OP_QLINEAR_CONV_WPK) {
        const char *act = ir_attr_str(n, "activation", "");
        if (*act && strcmp(act, "Relu"))
            return op_unsupported(ctx, n, "attribute 'activation' is '%s'; only \"Relu\" is "
                                  "supported", act);
    }
    return WPK_OK;
}

wpk_status op_qlinear_conv_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                 ir_tensor *const *out) {
    sp_geom g;
    int64_t group, m;
    wpk_status st = op_need_output(ctx, n, out, 0);
    if (!st) st = setup(ctx, n, in, &g, &group, &m);
    if (st) return st;
    int64_t dims[WPK_MAX_DIMS];
    op_set_shape(out[0], in[YZP]->dtype, sp_out_dims(&g, in[X]->dims[0], m, dims), dims);
    return WPK_OK;
}

wpk_status op_qlinear_conv_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                               ir_tensor *const *out) {
    sp_geom g;
    int64_t group, m;
    wpk_status st = setup(ctx, n, in, &g, &group, &m);
    if (st) return st;
    int64_t batch = in[X]->dims[0], plane = m ? ir_numel(out[0]) / (batch * m) : 0;
    int32_t *acc = wpk_malloc((size_t)(plane ? plane : 1) * sizeof *acc);
    if (!acc) return op_fail(ctx, n, "out of memory for the accumulators");
    bool wpc = ir_numel(in[WS]) > 1, zpc = ir_numel(in[WZP]) > 1;
    bool relu = n->op == IR_OP_QLINEAR_CONV_WPK && !strcmp(ir_attr_str(n, "activation", ""),
                                                           "Relu");
    const ir_tensor *bias = n->nin > B ? in[B] : NULL;
    float xs = quant_float_at(in[XS], 0), ys = quant_float_at(in[YS], 0);
    int32_t xzp = quant_int_at(in[XZP], 0), yzp = quant_int_at(in[YZP], 0);
    wpk_dtype yt = out[0]->dtype;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t oc = 0; oc < m; oc++) {
            quant_conv_plane(acc, &g, group, in[X], xzp, in[W],
                             quant_int_at(in[WZP], zpc ? oc : 0), b, oc);
            float mult = xs * quant_float_at(in[WS], wpc ? oc : 0) / ys;
            int32_t bv = bias ? quant_int_at(bias, oc) : 0;
            int64_t base = (b * m + oc) * plane;
            for (int64_t i = 0; i < plane; i++) {
                int32_t q = quant_saturate((float)(acc[i] + bv) * mult, yzp, yt);
                if (relu && q < yzp) q = yzp;
                quant_store8(out[0]->data, yt, base + i, q);
            }
        }
    wpk_free(acc);
    return WPK_OK;
}
