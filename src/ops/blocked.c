/* blocked.c -- Ops on the blocked channel layout NCHW[x]c: convolution and reorders to and from NCHW. */
#include "ops/op_util.h"

wpk_status op_conv_nchwc_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_conv_nchwc_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_reorder_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_reorder_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}
