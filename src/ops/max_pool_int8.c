/* max_pool_int8.c -- wpk::MaxPool, ONNX's MaxPool on int8/uint8 tensors (what passes/fuse_qdq.c
 * makes of DequantizeLinear -> MaxPool -> QuantizeLinear with one scale and zero point): its
 * shape function and reference kernel. Both reuse the float MaxPool's (ops/pool.c): every 8-bit
 * value is exact in float32 and max commutes with the monotone DequantizeLinear, so the bytes
 * are those of the float graph. */
#include "base/alloc.h"
#include "ops/op_util.h"
#include "ops/quant.h"

/* A float32 MaxPool node and input descriptor with n's attributes and x's shape. */
static wpk_status as_float(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                           ir_node *fn, ir_tensor *fx) {
    wpk_status st = op_need_input(ctx, n, in, 0, "X");
    if (st) return st;
    if (!quant_is_int8(in[0]->dtype))
        return op_unsupported(ctx, n, "input X is %s; wpk::MaxPool takes int8 or uint8",
                              wpk_dtype_name(in[0]->dtype));
    if (n->nout > 1)
        return op_fail(ctx, n, "wpk::MaxPool has one output (no Indices), the node has %d",
                       n->nout);
    *fn = *n;
    fn->op = IR_OP_MAX_POOL;
    *fx = *in[0];
    fx->dtype = WPK_DTYPE_FLOAT32;
    fx->data = NULL;
    return WPK_OK;
}

wpk_status op_max_pool_int8_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                  ir_tensor *const *out) {
    ir_node fn;
    ir_tensor fx;
    wpk_status st = op_need_output(ctx, n, out, 0);
    if (!st) st = as_float(ctx, n, in, &fn, &fx);
    ir_tensor *fin[1] = {&fx};
    if (!st) st = op_pool_shape(ctx, &fn, fin, out);
    if (st) return st;
    out[0]->dtype = in[0]->dtype;
    return WPK_OK;
}

wpk_status op_max_pool_int8_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                ir_tensor *const *out) {
    ir_node fn;
    ir_tensor fx, fy;
    wpk_status st = as_float(ctx, n, in, &fn, &fx);
    if (st) return st;
    int64_t nx = ir_numel(in[0]), ny = ir_numel(out[0]);
    float *x = wpk_malloc(sizeof(float) * (size_t)(nx > 0 ? nx : 1));
    float *y = wpk_malloc(sizeof(float) * (size_t)(ny > 0 ? ny : 1));
    if (!x || !y) {
        wpk_free(x);
        wpk_free(y);
        return op_fail(ctx, n, "out of memory in the reference kernel");
    }
    for (int64_t i = 0; i < nx; i++) x[i] = (float)quant_int_at(in[0], i);
    fx.data = x;
    fy = *out[0];
    fy.dtype = WPK_DTYPE_FLOAT32;
    fy.data = y;
    ir_tensor *fin[1] = {&fx}, *fout[1] = {&fy};
    st = op_pool_ref(ctx, &fn, fin, fout);
    wpk_dtype yt = out[0]->dtype;
    int32_t lo = yt == WPK_DTYPE_INT8 ? -128 : 0;
    /* a window that sees no input (possible only past the end in ceil mode) gives -inf */
    for (int64_t i = 0; !st && i < ny; i++)
        quant_store8(out[0]->data, yt, i, y[i] >= (float)lo ? (int32_t)y[i] : lo);
    wpk_free(x);
    wpk_free(y);
    return st;
}
