/* matmul_integer.c -- MatMulInteger: a matmul (numpy batching, as MatMul) of int8 / uint8 A and
 * B less their zero points (A's per tensor or per row, B's per tensor or per column), summed in
 * int32. */
#include "ops/op_util.h"
#include "ops/quant.h"

static const ir_tensor *opt(const ir_node *n, ir_tensor *const *in, int i) {
    return i < n->nin ? in[i] : NULL;
}

wpk_status op_matmul_integer_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                   ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "A");
    if (!st) st = op_need_input(ctx, n, in, 1, "B");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    for (int i = 0; i < 4 && i < n->nin; i++)
        if (in[i] && !quant_is_int8(in[i]->dtype))
            return op_unsupported(ctx, n, "input %d has dtype %s; int8 and uint8 are supported",
                                  i, wpk_dtype_name(in[i]->dtype));
    const ir_tensor *a = in[0], *b = in[1];
    int64_t rows = a->ndim >= 2 ? a->dims[a->ndim - 2] : 1;
    int64_t cols = b->ndim >= 2 ? b->dims[b->ndim - 1] : 1;
    if ((st = quant_check_param(ctx, n, opt(n, in, 2), rows, "a_zero_point")) ||
        (st = quant_check_param(ctx, n, opt(n, in, 3), cols, "b_zero_point")))
        return st;
    out[0]->dtype = WPK_DTYPE_INT32;
    return quant_matmul_shape(ctx, n, a, b, out[0]);
}

wpk_status op_matmul_integer_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                 ir_tensor *const *out) {
    (void)ctx;
    quant_matmul_acc(out[0]->data, in[0], opt(n, in, 2), in[1], opt(n, in, 3), out[0]);
    return WPK_OK;
}
