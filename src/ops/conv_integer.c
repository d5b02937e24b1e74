/* conv_integer.c -- ConvInteger: a convolution of int8 / uint8 x and w, each less its zero
 * point (x's per tensor, w's per tensor or per output channel), summed in int32. */
#include "ops/op_util.h"
#include "ops/quant.h"

static const ir_tensor *opt(const ir_node *n, ir_tensor *const *in, int i) {
    return i < n->nin ? in[i] : NULL;
}

static wpk_status setup(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, sp_geom *g,
                        int64_t *group, int64_t *m) {
    wpk_status st = op_need_input(ctx, n, in, 0, "x");
    if (!st) st = op_need_input(ctx, n, in, 1, "w");
    if (st) return st;
    for (int i = 0; i < 4 && i < n->nin; i++)
        if (in[i] && !quant_is_int8(in[i]->dtype))
            return op_unsupported(ctx, n, "input %d has dtype %s; int8 and uint8 are supported",
                                  i, wpk_dtype_name(in[i]->dtype));
    if ((st = quant_conv_geometry(ctx, n, in[0], in[1], g, group, m))) return st;
    if ((st = quant_check_param(ctx, n, opt(n, in, 2), 1, "x_zero_point"))) return st;
    return quant_check_param(ctx, n, opt(n, in, 3), *m, "w_zero_point");
}

wpk_status op_conv_integer_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                 ir_tensor *const *out) {
    sp_geom g;
    int64_t group, m;
    wpk_status st = op_need_output(ctx, n, out, 0);
    if (!st) st = setup(ctx, n, in, &g, &group, &m);
    if (st) return st;
    int64_t dims[WPK_MAX_DIMS];
    op_set_shape(out[0], WPK_DTYPE_INT32, sp_out_dims(&g, in[0]->dims[0], m, dims), dims);
    return WPK_OK;
}

wpk_status op_conv_integer_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                               ir_tensor *const *out) {
    sp_geom g;
    int64_t group, m;
    wpk_status st = setup(ctx, n, in, &g, &group, &m);
    if (st) return st;
    const ir_tensor *wzp = opt(n, in, 3);
    int32_t xzp = quant_int_at(opt(n, in, 2), 0);
    int64_t batch = in[0]->dims[0], plane = m ? ir_numel(out[0]) / (batch * m) : 0;
    bool per_channel = wzp && ir_numel(wzp) > 1;
    int32_t *y = out[0]->data;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t oc = 0; oc < m; oc++)
            quant_conv_plane(y + (b * m + oc) * plane, &g, group, in[0], xzp, in[1],
                             quant_int_at(wzp, per_channel ? oc : 0), b, oc);
    return WPK_OK;
}
