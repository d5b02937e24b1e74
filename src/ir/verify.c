/* verify.c -- graph invariants: edges in range, order topological, single producers. */
#include "ir/verify.h"

#include "base/alloc.h"

wpk_status ir_verify(wpk_context *ctx, const ir_graph *g) {
    char *ready = wpk_calloc((size_t)g->nvalues + 1, 1);
    if (!ready) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory verifying the graph");
    wpk_status st = WPK_OK;
    const char *path = g->path ? g->path : "graph";
    for (int v = 0; v < g->nvalues; v++) ready[v] = g->values[v].is_const || g->values[v].is_input;
    for (int k = 0; k < g->nnodes && st == WPK_OK; k++) {
        const ir_node *n = &g->nodes[k];
        for (int i = 0; i < n->nin && st == WPK_OK; i++) {
            int v = n->in[i];
            if (v < -1 || v >= g->nvalues)
                st = wpk_error(ctx, WPK_ERR_INTERNAL, "%s: node '%s' input %d is out of range",
                               path, n->name, i);
            else if (v >= 0 && !ready[v])
                st = wpk_error(ctx, WPK_ERR_MODEL, "%s: node '%s' (%s) reads '%s' before it is "
                               "produced", path, n->name, n->op_type, g->values[v].name);
        }
        for (int i = 0; i < n->nout && st == WPK_OK; i++) {
            int v = n->out[i];
            if (v < -1 || v >= g->nvalues)
                st = wpk_error(ctx, WPK_ERR_INTERNAL, "%s: node '%s' output %d is out of range",
                               path, n->name, i);
            else if (v >= 0 && ready[v])
                st = wpk_error(ctx, WPK_ERR_MODEL, "%s: node '%s' (%s) writes '%s', which "
                               "already has a value", path, n->name, n->op_type,
                               g->values[v].name);
            else if (v >= 0)
                ready[v] = 1;
        }
    }
    for (int i = 0; i < g->noutputs && st == WPK_OK; i++) {
        int v = g->outputs[i];
        if (v < 0 || v >= g->nvalues || !ready[v])
            st = wpk_error(ctx, WPK_ERR_MODEL, "%s: graph output '%s' is not produced by any node",
                           path, v >= 0 && v < g->nvalues ? g->values[v].name : "?");
    }
    wpk_free(ready);
    return st;
}
