/* reshape.c -- Ops that only relabel a shape (Flatten, Reshape, Squeeze, Unsqueeze, Identity, Dropout) and Shape. */
#include "ops/op_util.h"

wpk_status op_flatten_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_reshape_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_unsqueeze_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_squeeze_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_identity_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_dropout_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_copy_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_dropout_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_shape_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_shape_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}
