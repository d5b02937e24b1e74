/* fused_stage.c -- the member-op views of fusion group nodes (fused_stage.h). */
#include "ops/fused_stage.h"

#include <string.h>

#include "ops/op_util.h"

static bool has_prefix(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

wpk_status fused_stage_view(wpk_context *ctx, const ir_node *n, ir_op op, int nin,
                            const char *prefix, const char *const *skip, fused_stage *out) {
    out->node = *n;
    ir_node_set_op(&out->node, op);
    out->node.nattr = 0;
    out->node.attrs = out->attrs;
    if (nin > FUSED_STAGE_MAX_INPUTS) nin = FUSED_STAGE_MAX_INPUTS;
    out->node.nin = nin;
    for (int i = 0; i < nin; i++) out->in[i] = 0;
    out->node.in = out->in;
    for (int i = 0; i < n->nattr; i++) {
        const ir_attr *a = &n->attrs[i];
        const char *name = a->name;
        if (prefix) {
            if (!has_prefix(name, prefix)) continue;
            name += strlen(prefix);
        } else {
            bool skipped = false;
            for (int s = 0; skip && skip[s] && !skipped; s++) skipped = has_prefix(name, skip[s]);
            if (skipped) continue;
        }
        if (out->node.nattr == FUSED_STAGE_MAX_ATTRS)
            return op_fail(ctx, n, "more than %d attributes", FUSED_STAGE_MAX_ATTRS);
        out->attrs[out->node.nattr] = *a;
        out->attrs[out->node.nattr++].name = name;
    }
    return WPK_OK;
}
