/* fold_batchnorm.c -- BatchNormalization folding into Conv/Gemm/MatMul, or into a per-channel scale+shift. */
#include "passes/pass.h"

wpk_status pass_fold_batchnorm(wpk_context *ctx, ir_graph *g, const pass_options *opt, int *changed) {
    (void)ctx; (void)g; (void)opt;
    *changed = 0;
    return WPK_OK;
}
