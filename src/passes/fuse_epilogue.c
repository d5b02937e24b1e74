/* fuse_epilogue.c -- Epilogue fusion: bias, residual Add and activation into Conv/Gemm/MatMul. */
#include "passes/pass.h"

wpk_status pass_fuse_epilogue(wpk_context *ctx, ir_graph *g, const pass_options *opt, int *changed) {
    (void)ctx; (void)g; (void)opt;
    *changed = 0;
    return WPK_OK;
}
