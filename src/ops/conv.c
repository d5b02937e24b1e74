/* conv.c -- Conv and ConvTranspose: shape functions and reference kernels. */
#include "ops/op_util.h"

wpk_status op_conv_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_conv_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_conv_transpose_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_conv_transpose_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}
