/* simplify_reshape.c -- Transpose/Reshape simplification: a chain of Reshape, Flatten, Squeeze
 * and Unsqueeze becomes one Reshape to the final (known) shape, two Transposes become one, a
 * Transpose that moves only dims of 1 becomes a Reshape, and reshapes to the input's own shape,
 * identity Transposes and Squeeze/Unsqueeze pairs that cancel are removed. */
#include "passes/pass.h"

#include <stdio.h>
#include <string.h>

/* Ops whose output is the input's bytes under another shape. */
static bool reshape_like(ir_op op) {
    return op == IR_OP_RESHAPE || op == IR_OP_FLATTEN || op == IR_OP_SQUEEZE ||
           op == IR_OP_UNSQUEEZE;
}

/* The live node producing value v when it has op kind `want` (reshape-like when want is
 * IR_OP_RESHAPE); -1 otherwise. */
static int producer_of(const ir_graph *g, int v, ir_op want) {
    int p = v >= 0 ? g->values[v].producer : -1;
    if (p < 0 || g->nodes[p].dead || g->nodes[p].nin < 1 || g->nodes[p].in[0] < 0) return -1;
    ir_op op = g->nodes[p].op;
    return (want == IR_OP_RESHAPE ? reshape_like(op) : op == want) ? p : -1;
}

/* Remove node k, whose output y holds the same tensor as its input x (see
 * eliminate_identity.c, which does the same): readers of y read x, or, when y is a graph
 * output whose name must survive, x's producer writes y. Declines when x is a graph input,
 * a constant or a graph output itself. */
static bool bypass(ir_graph *g, int k, int x, int y) {
    if (!ir_graph_is_output(g, y)) {
        ir_graph_replace_uses(g, y, x);
        g->nodes[k].dead = true;
        return true;
    }
    int p = g->values[x].producer;
    if (p < 0 || ir_graph_is_output(g, x)) return false;
    ir_node *pn = &g->nodes[p];
    for (int o = 0; o < pn->nout; o++)
        if (pn->out[o] == x) pn->out[o] = y;
    ir_graph_replace_uses(g, x, y);
    g->values[y].producer = p;
    g->values[x].producer = -1;
    g->nodes[k].dead = true;
    return true;
}

static bool same_known_shape(const ir_tensor *a, const ir_tensor *b) {
    return pass_shape_known(a) && pass_shape_known(b) && ir_same_shape(a, b);
}

/* ---- Reshape chains ---- */

/* Turn reshape-like node k into Reshape(src, <its output's known shape>). */
static wpk_status to_reshape(wpk_context *ctx, ir_graph *g, int k, int src) {
    ir_node *n = &g->nodes[k];
    const ir_tensor *y = &g->values[n->out[0]].t;
    int64_t dims[WPK_MAX_DIMS];
    memcpy(dims, y->dims, sizeof(int64_t) * (size_t)y->ndim);
    ir_tensor shape = {.dtype = WPK_DTYPE_INT64, .ndim = 1, .dims = {y->ndim}, .data = dims};
    char base[300];
    snprintf(base, sizeof base, "%.280s_shape", n->name);
    const char *name = ir_graph_unique_name(g, base);
    int c = name ? ir_graph_add_const(g, name, &shape) : -1;
    if (c < 0 || ir_node_resize(g, n, 2, 1))
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory rewriting node '%s'", n->name);
    ir_node_set_op(n, IR_OP_RESHAPE);
    /* Flatten's axis, Reshape's allowzero: none applies to an explicit shape without zeros */
    n->nattr = 0;
    n->in[0] = src;
    n->in[1] = c;
    return WPK_OK;
}

/* Whether the chain may be collapsed at reshape-like node n: its output's shape is known and
 * free of zeros (0 means "copy the input's dim" to Reshape), and Reshape takes its shape as an
 * input (opset 5). */
static bool collapsible(const ir_graph *g, const ir_node *n) {
    const ir_tensor *t = &g->values[n->out[0]].t;
    if (!reshape_like(n->op) || n->nout < 1 || n->out[0] < 0 || n->opset < 5 || !pass_shape_known(t))
        return false;
    for (int i = 0; i < t->ndim; i++)
        if (t->dims[i] == 0) return false;
    return true;
}

/* True when y is read only by reshape-like nodes that will collapse the chain further on:
 * then rewriting the node producing y would only leave one more dead Reshape behind. */
static bool chain_continues(const ir_graph *g, int y) {
    if (ir_graph_is_output(g, y)) return false;
    bool read = false;
    for (int k = 0; k < g->nnodes; k++) {
        const ir_node *n = &g->nodes[k];
        if (n->dead) continue;
        for (int i = 0; i < n->nin; i++) {
            if (n->in[i] != y) continue;
            if (i != 0 || !collapsible(g, n)) return false;
            read = true;
        }
    }
    return read;
}

/* Reshape-like node k is removed when its output has its input's shape. */
static void reshape_noop(ir_graph *g, int k, int *changed) {
    int x = g->nodes[k].in[0], y = g->nodes[k].out[0];
    if (x >= 0 && y >= 0 && same_known_shape(&g->values[x].t, &g->values[y].t) &&
        bypass(g, k, x, y))
        ++*changed;
}

/* Reshape-like node k, when it ends a chain of reshape-like nodes and its output's shape is
 * known, is made to reshape the chain's source directly (the chain's other nodes die once
 * nothing else reads them), or removed when the source has the output's shape already. */
static wpk_status reshape_chain(wpk_context *ctx, ir_graph *g, int k, int *changed) {
    ir_node *n = &g->nodes[k];
    int x = n->in[0], y = n->out[0];
    if (x < 0 || !collapsible(g, n) || chain_continues(g, y)) return WPK_OK;
    int src = x;
    for (int p; (p = producer_of(g, src, IR_OP_RESHAPE)) >= 0;) src = g->nodes[p].in[0];
    if (src == x) return WPK_OK;
    if (same_known_shape(&g->values[src].t, &g->values[y].t) && bypass(g, k, src, y)) {
        ++*changed;
        return WPK_OK;
    }
    wpk_status st = to_reshape(ctx, g, k, src);
    if (st == WPK_OK) ++*changed;
    return st;
}

/* ---- Squeeze/Unsqueeze pairs ---- */

/* Read node n's constant axes input (input 1) normalized to [0, rank) into mask; false when
 * absent, not constant, out of range or repeated. */
static bool axes_mask(const ir_graph *g, const ir_node *n, int rank, bool *mask) {
    memset(mask, 0, sizeof(bool) * WPK_MAX_DIMS);
    if (n->nin < 2 || n->in[1] < 0 || rank > WPK_MAX_DIMS) return false;
    const ir_value *a = &g->values[n->in[1]];
    if (!a->is_const || a->t.ndim != 1 || a->t.dims[0] < 1) return false;
    for (int64_t i = 0; i < a->t.dims[0]; i++) {
        int64_t ax;
        if (a->t.dtype == WPK_DTYPE_INT64) ax = ((const int64_t *)a->t.data)[i];
        else if (a->t.dtype == WPK_DTYPE_INT32) ax = ((const int32_t *)a->t.data)[i];
        else return false;
        if (ax < 0) ax += rank;
        if (ax < 0 || ax >= rank || mask[ax]) return false;
        mask[ax] = true;
    }
    return true;
}

/* Squeeze(Unsqueeze(x, A), A) is x for any x. Unsqueeze(Squeeze(x, A), A) is x when x's dims
 * at A are known to be 1 (Squeeze checks that at run time; removing it must not hide a
 * failure). Both need constant axes and x's rank. */
static void squeeze_pair(ir_graph *g, int k, int *changed) {
    ir_node *n = &g->nodes[k];
    ir_op inner_op = n->op == IR_OP_SQUEEZE ? IR_OP_UNSQUEEZE : IR_OP_SQUEEZE;
    int p = producer_of(g, n->in[0], inner_op);
    if (p < 0) return;
    int x = g->nodes[p].in[0];
    const ir_tensor *xt = &g->values[x].t, *mid = &g->values[n->in[0]].t;
    if (xt->dtype == WPK_DTYPE_UNDEFINED || mid->dtype == WPK_DTYPE_UNDEFINED) return;
    /* both axes lists index the larger (unsqueezed) rank */
    int rank = xt->ndim > mid->ndim ? xt->ndim : mid->ndim;
    bool outer[WPK_MAX_DIMS], inner[WPK_MAX_DIMS];
    if (!axes_mask(g, n, rank, outer) || !axes_mask(g, &g->nodes[p], rank, inner)) return;
    if (memcmp(outer, inner, sizeof outer) != 0) return;
    if (n->op == IR_OP_UNSQUEEZE)
        for (int i = 0; i < xt->ndim; i++)
            if (inner[i] && xt->dims[i] != 1) return;
    if (bypass(g, k, x, n->out[0])) ++*changed;
}

/* ---- Transposes ---- */

/* Node n's permutation for a rank-`rank` input (absent: reversed); false when malformed. */
static bool get_perm(const ir_node *n, int rank, int *perm) {
    int count;
    const int64_t *p = ir_attr_ints(n, "perm", &count);
    if (rank > WPK_MAX_DIMS) return false;
    bool seen[WPK_MAX_DIMS] = {false};
    for (int i = 0; i < rank; i++) {
        int64_t v = p ? (count == rank ? p[i] : -1) : rank - 1 - i;
        if (v < 0 || v >= rank || seen[v]) return false;
        seen[v] = true;
        perm[i] = (int)v;
    }
    return true;
}

/* Whether Transpose(x, perm) keeps x's bytes in order: the dims longer than 1 keep their order
 * (a batch-1 model's seq-first/batch-first flips move only dims of 1), and both shapes are
 * known and free of zeros, so that it can be a Reshape, which the memory plan makes a view. */
static bool moves_only_unit_dims(const ir_tensor *x, const ir_tensor *y, const int *perm) {
    if (!pass_shape_known(x) || !pass_shape_known(y) || y->ndim != x->ndim) return false;
    int last = -1;
    for (int i = 0; i < x->ndim; i++) {
        if (y->dims[i] == 0) return false;
        if (x->dims[perm[i]] == 1) continue;
        if (perm[i] < last) return false;
        last = perm[i];
    }
    return true;
}

/* Transpose(Transpose(x, p1), p2) is Transpose(x, p) with p[i] = p1[p2[i]]; an identity
 * permutation is removed, one that moves only dims of 1 becomes a Reshape. */
static wpk_status transpose(wpk_context *ctx, ir_graph *g, int k, int *changed) {
    ir_node *n = &g->nodes[k];
    int x = n->in[0], y = n->out[0];
    if (x < 0 || y < 0 || g->values[x].t.dtype == WPK_DTYPE_UNDEFINED) return WPK_OK;
    int rank = g->values[x].t.ndim, perm[WPK_MAX_DIMS];
    if (!get_perm(n, rank, perm)) return WPK_OK;
    int p = producer_of(g, x, IR_OP_TRANSPOSE), inner[WPK_MAX_DIMS];
    if (p >= 0 && get_perm(&g->nodes[p], rank, inner)) {
        int64_t merged[WPK_MAX_DIMS];
        for (int i = 0; i < rank; i++) merged[i] = inner[perm[i]];
        if (ir_node_set_ints(g, n, "perm", merged, rank))
            return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory rewriting node '%s'", n->name);
        n->in[0] = x = g->nodes[p].in[0];
        for (int i = 0; i < rank; i++) perm[i] = (int)merged[i];
        ++*changed;
    }
    bool identity = true;
    for (int i = 0; i < rank; i++) identity &= perm[i] == i;
    if (identity && bypass(g, k, x, y)) {
        ++*changed;
    } else if (!identity && n->opset >= 5 &&
               moves_only_unit_dims(&g->values[x].t, &g->values[y].t, perm)) {
        wpk_status st = to_reshape(ctx, g, k, x);
        if (st) return st;
        ++*changed;
    }
    return WPK_OK;
}

wpk_status pass_simplify_reshape(wpk_context *ctx, ir_graph *g, const pass_options *opt,
                                 int *changed) {
    (void)opt;
    *changed = 0;
    wpk_status st = WPK_OK;
    /* No-ops go first, so that a chain ends where it ends once they are gone. */
    for (int k = 0; k < g->nnodes; k++) {
        ir_node *n = &g->nodes[k];
        if (n->dead || n->nin < 1 || n->nout < 1) continue;
        if (reshape_like(n->op)) reshape_noop(g, k, changed);
    }
    for (int k = 0; k < g->nnodes && st == WPK_OK; k++) {
        ir_node *n = &g->nodes[k];
        if (n->dead || n->nin < 1 || n->nout < 1) continue;
        if (n->op == IR_OP_TRANSPOSE) {
            st = transpose(ctx, g, k, changed);
        } else if (reshape_like(n->op)) {
            int before = *changed;
            st = reshape_chain(ctx, g, k, changed);
            if (st == WPK_OK && *changed == before &&
                (n->op == IR_OP_SQUEEZE || n->op == IR_OP_UNSQUEEZE))
                squeeze_pair(g, k, changed);
        }
    }
    if (st) return st;
    if (*changed) ir_graph_compact(g);
    return WPK_OK;
}
