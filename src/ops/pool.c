/* pool.c -- MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool. */
#include "ops/op_util.h"

wpk_status op_pool_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_pool_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_global_pool_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_global_pool_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}
