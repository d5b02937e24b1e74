/* dce.c -- Dead-node elimination: remove nodes none of whose outputs is read, then stop
 * treating unread constants as constants.
 *
 * Value indices stay valid: an unread constant keeps its slot in g->values but loses is_const
 * (and its data pointer), so it is no initializer any more to the printer, the exporter or
 * the parameter count; no node reads it, so nothing else sees the difference. */
#include "passes/pass.h"

#include "base/alloc.h"

wpk_status pass_dce(wpk_context *ctx, ir_graph *g, const pass_options *opt, int *changed) {
    (void)opt;
    *changed = 0;
    int *uses = wpk_calloc((size_t)g->nvalues + 1, sizeof *uses);
    if (!uses) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory removing dead nodes");
    for (int k = 0; k < g->nnodes; k++)
        if (!g->nodes[k].dead)
            for (int i = 0; i < g->nodes[k].nin; i++)
                if (g->nodes[k].in[i] >= 0) uses[g->nodes[k].in[i]]++;
    for (int i = 0; i < g->noutputs; i++) uses[g->outputs[i]]++;
    /* Backwards, a node's readers are decided before it is, so in the topological order the
     * verifier guarantees one sweep reaches the fixpoint; the loop covers any other order. */
    for (bool progress = true; progress;) {
        progress = false;
        for (int k = g->nnodes - 1; k >= 0; k--) {
            ir_node *n = &g->nodes[k];
            if (n->dead) continue;
            bool read = false;
            for (int o = 0; o < n->nout && !read; o++) read = n->out[o] >= 0 && uses[n->out[o]];
            if (read) continue;
            n->dead = true;
            for (int i = 0; i < n->nin; i++)
                if (n->in[i] >= 0) uses[n->in[i]]--;
            ++*changed;
            progress = true;
        }
    }
    for (int v = 0; v < g->nvalues; v++) {
        ir_value *val = &g->values[v];
        if (!val->is_const || val->is_input || uses[v]) continue;
        val->is_const = false;
        val->t.data = NULL;
        ++*changed;
    }
    wpk_free(uses);
    if (*changed) ir_graph_compact(g);
    return WPK_OK;
}
