/* fold_constants.c -- Constant folding: evaluate nodes whose inputs are all known, with the
 * reference kernels, and turn their outputs into constants. Shape of a value whose shape is
 * fully known counts as known, which collapses the Shape->Gather->Unsqueeze->Concat->Reshape
 * chains exporters emit around Flatten/Reshape into a constant Reshape shape. */
#include "passes/pass.h"

#include <string.h>

#include "base/alloc.h"

/* Outputs above this many elements are folded only when they are no bigger than the inputs:
 * an Expand or ConstantOfShape blowing a scalar up into a huge tensor would bloat the model
 * more than computing it at run time costs. */
#define FOLD_GROWTH_MAX_ELEMS ((int64_t)16 << 20)

/* Whether node n may be evaluated now: every present input a constant (for Shape: any input
 * whose rank is known; op_shape_ref itself declines a symbolic dim in the reported range), no
 * output a graph output (a folded output would stop being produced by a node). */
static bool candidate(const ir_graph *g, const ir_node *n) {
    const ir_op_info *info = ir_op_get(n->op);
    if (n->dead || !info->shape || !info->ref) return false;
    bool any_out = false;
    for (int o = 0; o < n->nout; o++) {
        if (n->out[o] < 0) continue;
        if (ir_graph_is_output(g, n->out[o])) return false;
        any_out = true;
    }
    if (!any_out) return false;
    if (n->op == IR_OP_SHAPE)
        return n->nin >= 1 && n->in[0] >= 0 && g->values[n->in[0]].t.dtype != WPK_DTYPE_UNDEFINED;
    for (int i = 0; i < n->nin; i++)
        if (n->in[i] >= 0 && !g->values[n->in[i]].is_const) return false;
    return true;
}

static int first_output(const ir_node *n) {
    for (int o = 0; o < n->nout; o++)
        if (n->out[o] >= 0) return n->out[o];
    return -1;
}

/* Evaluate node n into outs (data in the graph arena). *folded is false when the node
 * declines: an op or dtype the reference kernels do not cover, a symbolic dim, an output too
 * big to be worth storing. */
static wpk_status evaluate(wpk_context *ctx, ir_graph *g, const ir_node *n, ir_tensor *ins,
                           ir_tensor **in, ir_tensor *outs, ir_tensor **out, bool *folded) {
    const ir_op_info *info = ir_op_get(n->op);
    *folded = false;
    int64_t in_elems = 0;
    for (int i = 0; i < n->nin; i++) {
        in[i] = NULL;
        if (n->in[i] < 0) continue;
        ins[i] = g->values[n->in[i]].t;
        in[i] = &ins[i];
        if (ins[i].data) in_elems += ir_numel(&ins[i]);
    }
    for (int o = 0; o < n->nout; o++) {
        memset(&outs[o], 0, sizeof outs[o]);
        out[o] = n->out[o] >= 0 ? &outs[o] : NULL;
    }
    wpk_status st = info->shape(ctx, n, in, out);
    int64_t out_elems = 0;
    for (int o = 0; o < n->nout && st == WPK_OK; o++)
        if (out[o]) {
            if (!pass_shape_known(out[o])) return WPK_OK;
            out_elems += ir_numel(out[o]);
        }
    if (st == WPK_OK && out_elems > FOLD_GROWTH_MAX_ELEMS && out_elems > in_elems) return WPK_OK;
    for (int o = 0; o < n->nout && st == WPK_OK; o++) {
        if (!out[o]) continue;
        size_t bytes = ir_nbytes(out[o]);
        /* a zero-size tensor still gets a pointer: is_const values always carry data */
        out[o]->data = arena_alloc(&g->mem, bytes ? bytes : 1);
        if (!out[o]->data)
            return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory folding node '%s' (%s)", n->name,
                             n->op_type);
        memset(out[o]->data, 0, bytes ? bytes : 1);
    }
    if (st == WPK_OK) st = info->ref(ctx, n, in, out);
    if (st == WPK_ERR_UNSUPPORTED) {
        /* valid, but not something the reference kernels evaluate: leave it for run time */
        wpk_clear_error(ctx);
        return WPK_OK;
    }
    *folded = st == WPK_OK;
    return st;
}

wpk_status pass_fold_constants(wpk_context *ctx, ir_graph *g, const pass_options *opt,
                               int *changed) {
    (void)opt;
    *changed = 0;
    int max_in = 1, max_out = 1;
    for (int k = 0; k < g->nnodes; k++) {
        if (g->nodes[k].nin > max_in) max_in = g->nodes[k].nin;
        if (g->nodes[k].nout > max_out) max_out = g->nodes[k].nout;
    }
    ir_tensor *ins = wpk_calloc((size_t)max_in, sizeof *ins);
    ir_tensor **in = wpk_calloc((size_t)max_in, sizeof *in);
    ir_tensor *outs = wpk_calloc((size_t)max_out, sizeof *outs);
    ir_tensor **out = wpk_calloc((size_t)max_out, sizeof *out);
    /* by a node's first output (value indices survive compaction): nodes that declined for
     * good, so later sweeps do not evaluate them again */
    char *declined = wpk_calloc((size_t)g->nvalues + 1, 1);
    wpk_status st = WPK_OK;
    if (!ins || !in || !outs || !out || !declined)
        st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory folding constants");
    /* In graph order, so a folded output makes its readers candidates in the same sweep. A
     * value downstream of a Reshape whose shape input just folded only gets its shape from
     * inference, so sweeps alternate with inference until one folds nothing (Shape chains
     * that depend on one another: one sweep per level). */
    for (int folded_now = 1; folded_now && st == WPK_OK;) {
        folded_now = 0;
        for (int k = 0; k < g->nnodes && st == WPK_OK; k++) {
            ir_node *n = &g->nodes[k];
            if (!candidate(g, n) || declined[first_output(n)]) continue;
            bool folded;
            st = evaluate(ctx, g, n, ins, in, outs, out, &folded);
            /* a Shape may fold once inference knows more; other inputs are constant already */
            if (st == WPK_OK && !folded && n->op != IR_OP_SHAPE) declined[first_output(n)] = 1;
            if (st || !folded) continue;
            for (int o = 0; o < n->nout; o++) {
                if (n->out[o] < 0) continue;
                ir_value *v = &g->values[n->out[o]];
                v->t = outs[o];
                v->is_const = true;
                v->producer = -1;
            }
            n->dead = true;
            folded_now++;
        }
        *changed += folded_now;
        if (folded_now && st == WPK_OK) {
            ir_graph_compact(g);
            st = pass_infer_shapes(ctx, g);
        }
    }
    wpk_free(ins);
    wpk_free(in);
    wpk_free(outs);
    wpk_free(out);
    wpk_free(declined);
    return st;
}
