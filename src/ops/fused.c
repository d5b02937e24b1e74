/* fused.c -- Fused ops the graph optimizer creates: Conv/Gemm/MatMul with a bias, residual and activation epilogue. */
#include "ops/op_util.h"

wpk_status op_fused_conv_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_fused_conv_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_fused_gemm_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_fused_gemm_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_fused_matmul_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}

wpk_status op_fused_matmul_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)in; (void)out;
    return op_unsupported(ctx, n, "not implemented yet");
}
