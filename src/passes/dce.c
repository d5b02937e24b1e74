/* dce.c -- Dead-node elimination. */
#include "passes/pass.h"

wpk_status pass_dce(wpk_context *ctx, ir_graph *g, const pass_options *opt, int *changed) {
    (void)ctx; (void)g; (void)opt;
    *changed = 0;
    return WPK_OK;
}
