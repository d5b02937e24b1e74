/* layout.c -- Blocked channel layout NCHW[x]c for convolution chains, reorders at the edges. */
#include "passes/pass.h"

wpk_status pass_layout(wpk_context *ctx, ir_graph *g, const pass_options *opt, int *changed) {
    (void)ctx; (void)g; (void)opt;
    *changed = 0;
    return WPK_OK;
}
