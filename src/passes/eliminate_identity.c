/* eliminate_identity.c -- Remove Identity and inference-mode Dropout nodes: their output is
 * their input, so readers of the output can read the input directly. */
#include "ops/op_util.h"
#include "passes/pass.h"

/* Dropout is the identity at inference when nothing reads its mask and it is not told to
 * train: training_mode absent or a constant false (a graph input could be true at run time),
 * or true with a constant ratio of 0 (nothing dropped), and, before opset 7, is_test not set
 * to 0. */
static bool inference_dropout(const ir_graph *g, const ir_node *n) {
    if (n->nout > 1 && n->out[1] >= 0 && ir_graph_count_uses(g, n->out[1]) > 0) return false;
    if (ir_attr_int(n, "is_test", 1) == 0) return false;
    if (n->nin > 2 && n->in[2] >= 0) {
        const ir_value *t = &g->values[n->in[2]];
        if (!t->is_const || t->t.dtype != WPK_DTYPE_BOOL || ir_numel(&t->t) != 1) return false;
        const ir_value *r = n->in[1] >= 0 ? &g->values[n->in[1]] : NULL;
        bool drops_none = r && r->is_const && op_dropout_ratio_zero(&r->t);
        if (*(const unsigned char *)t->t.data && !drops_none) return false;
    }
    return true;
}

/* Remove node k, whose output y holds the same tensor as its input x. Readers of y read x;
 * when y is a graph output its name must survive (users bind outputs by name), so instead
 * x's producer writes y and x's readers follow. That needs x to come from a node and not be a
 * graph output itself (one value cannot carry two output names); otherwise decline. */
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
    /* the producer comes before node k, so readers of x between them still see y produced */
    ir_graph_replace_uses(g, x, y);
    g->values[y].producer = p;
    g->values[x].producer = -1;
    g->nodes[k].dead = true;
    return true;
}

wpk_status pass_eliminate_identity(wpk_context *ctx, ir_graph *g, const pass_options *opt,
                                   int *changed) {
    (void)ctx;
    (void)opt;
    *changed = 0;
    for (int k = 0; k < g->nnodes; k++) {
        ir_node *n = &g->nodes[k];
        if (n->dead || n->nin < 1 || n->nout < 1) continue;
        bool identity = n->op == IR_OP_IDENTITY || (n->op == IR_OP_DROPOUT && inference_dropout(g, n));
        int x = n->in[0], y = n->out[0];
        if (!identity || x < 0 || y < 0) continue;
        if (bypass(g, k, x, y)) ++*changed;
    }
    if (*changed) ir_graph_compact(g);
    return WPK_OK;
}
