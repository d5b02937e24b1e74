/* prelu.c -- PRelu: y = x < 0 ? slope * x : x, with slope broadcast to X's shape (numpy rules,
 * one direction: the output has X's shape). */
#include "ops/broadcast.h"
#include "ops/op_util.h"

wpk_status op_prelu_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                          ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "X");
    if (!st) st = op_need_input(ctx, n, in, 1, "slope");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    const ir_tensor *x = in[0], *s = in[1];
    if (x->dtype != s->dtype)
        return op_fail(ctx, n, "input 'slope' has dtype %s but 'X' has %s",
                       wpk_dtype_name(s->dtype), wpk_dtype_name(x->dtype));
    if (x->dtype != WPK_DTYPE_FLOAT32 && x->dtype != WPK_DTYPE_FLOAT64 &&
        x->dtype != WPK_DTYPE_INT32 && x->dtype != WPK_DTYPE_INT64)
        return op_unsupported(ctx, n, "input 'X' has dtype %s; PRelu supports float32, "
                              "float64, int32 and int64", wpk_dtype_name(x->dtype));
    char sbuf[96], xbuf[96];
    bool fits = s->ndim <= x->ndim;
    for (int i = 0; fits && i < s->ndim; i++) {
        int64_t d = s->dims[i], xd = x->dims[x->ndim - s->ndim + i];
        /* a symbolic dim is checked when the shapes are known */
        fits = d == 1 || d == xd || d < 0 || xd < 0;
    }
    if (!fits)
        return op_fail(ctx, n, "'slope' of shape %s does not broadcast to 'X' of shape %s",
                       op_dims_str(sbuf, sizeof sbuf, s->ndim, s->dims),
                       op_dims_str(xbuf, sizeof xbuf, x->ndim, x->dims));
    op_set_shape(out[0], x->dtype, x->ndim, x->dims);
    return WPK_OK;
}

/* Integer products through the unsigned type, so overflow wraps instead of being undefined. */
BCAST_BINARY_FN(prelu_f32, float, float, float, x0 < 0 ? x0 * x1 : x0)
BCAST_BINARY_FN(prelu_f64, double, double, double, x0 < 0 ? x0 * x1 : x0)
BCAST_BINARY_FN(prelu_i32, int32_t, int32_t, int32_t,
                x0 < 0 ? (int32_t)((uint32_t)x0 * (uint32_t)x1) : x0)
BCAST_BINARY_FN(prelu_i64, int64_t, int64_t, int64_t,
                x0 < 0 ? (int64_t)((uint64_t)x0 * (uint64_t)x1) : x0)

wpk_status op_prelu_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out) {
    bcast_run_fn fn;
    switch (in[0]->dtype) {
    case WPK_DTYPE_FLOAT32: fn = prelu_f32; break;
    case WPK_DTYPE_FLOAT64: fn = prelu_f64; break;
    case WPK_DTYPE_INT32: fn = prelu_i32; break;
    case WPK_DTYPE_INT64: fn = prelu_i64; break;
    default:
        return op_unsupported(ctx, n, "input 'X' has dtype %s", wpk_dtype_name(in[0]->dtype));
    }
    if (in[1]->dtype != in[0]->dtype)
        return op_fail(ctx, n, "input 'slope' has dtype %s but 'X' has %s",
                       wpk_dtype_name(in[1]->dtype), wpk_dtype_name(in[0]->dtype));
    op_bcast_apply((const ir_tensor *const *)in, 2, out[0], fn, NULL);
    return WPK_OK;
}
