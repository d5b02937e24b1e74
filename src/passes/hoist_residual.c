/* hoist_residual.c -- A residual Add after Reshapes of a Gemm or MatMul output moves in front of
 * them: Add(Reshape...(Gemm(..)), z) becomes Reshape...(Add(Gemm(..), Reshape(z))), so epilogue
 * fusion takes the residual into the GEMM (nn.MultiheadAttention's out_proj is a 2-D Gemm whose
 * output is reshaped back to [seq, batch, dim] and [batch, seq, dim] before the residual Add).
 * Only exact-shape Adds (no broadcast) of float32 tensors with static shapes; every value of
 * the Reshape chain, and the GEMM's output, must have that chain as its only reader and not be
 * a graph output. The Add's output keeps its name: the last Reshape now produces it. */
#include "passes/pass.h"

#include <stdio.h>
#include <string.h>

#define MAX_RESHAPES 8

static bool static_f32(const ir_graph *g, int v) {
    return v >= 0 && g->values[v].t.dtype == WPK_DTYPE_FLOAT32 &&
           pass_shape_known(&g->values[v].t);
}

/* The Reshapes from a GEMM's output to v (chain[0] reads the GEMM), when v is such a chain;
 * their count, 0 otherwise. */
static int reshape_chain(const ir_graph *g, int v, int *chain) {
    int n = 0;
    for (;;) {
        int p = g->values[v].producer;
        if (p < 0 || g->nodes[p].dead) return 0;
        const ir_node *node = &g->nodes[p];
        if (node->op == IR_OP_GEMM || node->op == IR_OP_MATMUL) break;
        if (node->op != IR_OP_RESHAPE || n == MAX_RESHAPES) return 0;
        v = node->in[0];
        if (ir_graph_single_consumer(g, v) != p || !static_f32(g, v)) return 0;
        chain[n++] = p;
    }
    /* the chain was collected from the end: reverse it */
    for (int i = 0; i < n / 2; i++) {
        int t = chain[i];
        chain[i] = chain[n - 1 - i];
        chain[n - 1 - i] = t;
    }
    return n;
}

/* Reshape(z) to the dims of `like`, as a new node and value; -1 when out of memory. */
static int reshaped(ir_graph *g, const ir_node *at, int z, const ir_tensor *like) {
    int64_t dims[WPK_MAX_DIMS];
    memcpy(dims, like->dims, sizeof(int64_t) * (size_t)like->ndim);
    ir_tensor shape = {.dtype = WPK_DTYPE_INT64, .ndim = 1, .dims = {like->ndim}, .data = dims};
    char base[300];
    snprintf(base, sizeof base, "%.280s_residual", at->name);
    const char *cname = ir_graph_unique_name(g, base);
    int c = cname ? ir_graph_add_const(g, cname, &shape) : -1;
    const char *vname = c >= 0 ? ir_graph_unique_name(g, base) : NULL;
    int v = vname ? ir_graph_add_value(g, vname) : -1;
    int k = v >= 0 ? ir_graph_add_node(g, vname, "Reshape", "", g->opset, 2, 1) : -1;
    if (k < 0) return -1;
    g->nodes[k].in[0] = z;
    g->nodes[k].in[1] = c;
    g->nodes[k].out[0] = v;
    ir_tensor *t = &g->values[v].t;
    *t = *like;
    t->data = NULL;
    g->values[v].producer = k;
    return v;
}

/* Add node k rewritten when one operand is such a chain; false when it is not. */
static wpk_status hoist(wpk_context *ctx, ir_graph *g, int k, bool *done) {
    *done = false;
    const ir_node *a = &g->nodes[k];
    /* Reshape takes its shape as an input from opset 5 */
    if (g->opset < 5 || a->nin != 2 || !static_f32(g, a->in[0]) || !static_f32(g, a->in[1]) ||
        !ir_same_shape(&g->values[a->in[0]].t, &g->values[a->in[1]].t) ||
        a->in[0] == a->in[1])
        return WPK_OK;
    for (int side = 0; side < 2; side++) {
        int y = a->in[side], z = a->in[1 - side], chain[MAX_RESHAPES];
        if (ir_graph_single_consumer(g, y) != k) continue;
        int n = reshape_chain(g, y, chain);
        if (n == 0) continue;
        int first = chain[0], last = chain[n - 1], gemm_out = g->nodes[first].in[0];
        if (!static_f32(g, gemm_out)) continue;
        const ir_tensor like = g->values[gemm_out].t;
        int zr = reshaped(g, &g->nodes[k], z, &like);
        const char *name = zr >= 0 ? ir_graph_unique_name(g, g->values[gemm_out].name) : NULL;
        int sum = name ? ir_graph_add_value(g, name) : -1;
        if (sum < 0)
            return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory moving Add '%s'",
                             g->nodes[k].name);
        ir_node *add = &g->nodes[k]; /* adding nodes may have moved the table */
        int out = add->out[0];
        g->values[sum].t = like;
        g->values[sum].t.data = NULL;
        add->in[0] = gemm_out;
        add->in[1] = zr;
        add->out[0] = sum;
        g->nodes[first].in[0] = sum;
        g->nodes[last].out[0] = out;
        *done = true;
        return WPK_OK;
    }
    return WPK_OK;
}

wpk_status pass_hoist_residual(wpk_context *ctx, ir_graph *g, const pass_options *opt,
                               int *changed) {
    (void)opt;
    *changed = 0;
    const int nnodes = g->nnodes;
    for (int k = 0; k < nnodes; k++) {
        if (g->nodes[k].dead || g->nodes[k].op != IR_OP_ADD) continue;
        bool done;
        wpk_status st = hoist(ctx, g, k, &done);
        if (st) return st;
        *changed += done;
    }
    if (!*changed) return WPK_OK;
    ir_graph_compact(g);
    return ir_graph_toposort(ctx, g);
}
