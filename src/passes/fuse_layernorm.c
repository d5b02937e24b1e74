/* fuse_layernorm.c -- LayerNormalization recognized from the form exporters emit before opset
 * 17 (PyTorch's nn.LayerNorm at opset <= 16):
 *     m = ReduceMean(x, [-1]); d = x - m; v = ReduceMean(d ^ 2, [-1]);
 *     y = d / Sqrt(v + eps); optionally y * gamma, then + beta
 * into one LayerNormalization(x, gamma, beta, axis = -1, epsilon = eps) (wpk::LayerNormalization
 * below opset 17, where the default domain lacks it), which runs as one
 * pass over each row instead of eight elementwise and reduction nodes. gamma and beta must be
 * constants with one value per element of the last dim; eps and the exponent 2 constant
 * scalars. Every value inside has one reader (d: the Pow and the Div) and is not a graph
 * output; x's last dim must be known. */
#include "passes/pass.h"

#include <string.h>

#include "base/arena.h"

static ir_node *single_reader(ir_graph *g, int v, ir_op op) {
    int k = ir_graph_single_consumer(g, v);
    return k >= 0 && g->nodes[k].op == op ? &g->nodes[k] : NULL;
}

static bool const_scalar(const ir_graph *g, int v, float *out) {
    if (v < 0 || !g->values[v].is_const) return false;
    const ir_tensor *t = &g->values[v].t;
    if (t->dtype != WPK_DTYPE_FLOAT32 || ir_numel(t) != 1 || !t->data) return false;
    *out = ((const float *)t->data)[0];
    return true;
}

/* A ReduceMean over the last axis alone, keeping dims. */
static bool mean_last(const ir_graph *g, const ir_node *n) {
    if (!n || n->nin < 2 || n->in[1] < 0 || !g->values[n->in[1]].is_const) return false;
    if (ir_attr_int(n, "keepdims", 1) != 1) return false;
    const ir_tensor *axes = &g->values[n->in[1]].t;
    int x = n->in[0];
    if (ir_numel(axes) != 1 || !axes->data || g->values[x].t.dtype == WPK_DTYPE_UNDEFINED)
        return false;
    int64_t a;
    if (axes->dtype == WPK_DTYPE_INT64) a = ((const int64_t *)axes->data)[0];
    else if (axes->dtype == WPK_DTYPE_INT32) a = ((const int32_t *)axes->data)[0];
    else return false;
    return a == -1 || a == g->values[x].t.ndim - 1;
}

/* The other operand of binary node n when one operand is v; -1 otherwise. */
static int other_operand(const ir_node *n, int v) {
    if (n->nin != 2) return -1;
    if (n->in[0] == v) return n->in[1];
    if (n->in[1] == v) return n->in[0];
    return -1;
}

/* A constant float32 with c elements, the per-element parameter of a row of c. */
static bool row_param(const ir_graph *g, int v, int64_t c) {
    if (v < 0 || !g->values[v].is_const) return false;
    const ir_tensor *t = &g->values[v].t;
    return t->dtype == WPK_DTYPE_FLOAT32 && t->data && ir_numel(t) == c && t->ndim >= 1 &&
           t->dims[t->ndim - 1] == c;
}

/* A 1-D float32 constant of c elements: v's data (v < 0: all `fill`). -1 when out of memory. */
static int make_param(ir_graph *g, int v, int64_t c, float fill, const char *base) {
    if (v >= 0 && g->values[v].t.ndim == 1) return v;
    const char *name = ir_graph_unique_name(g, base);
    int nv = name ? ir_graph_add_value(g, name) : -1;
    if (nv < 0) return -1;
    float *data = arena_alloc(&g->mem, sizeof(float) * (size_t)c);
    if (!data) return -1;
    for (int64_t i = 0; i < c; i++)
        data[i] = v >= 0 ? ((const float *)g->values[v].t.data)[i] : fill;
    ir_tensor *t = &g->values[nv].t;
    memset(t, 0, sizeof *t);
    t->dtype = WPK_DTYPE_FLOAT32;
    t->ndim = 1;
    t->dims[0] = c;
    t->data = data;
    g->values[nv].is_const = true;
    g->values[nv].producer = -1;
    return nv;
}

typedef struct ln_match {
    ir_node *nodes[9]; /* mean, sub, pow, var, add_eps, sqrt, div, mul?, add? */
    int x, gamma, beta;
    float eps;
} ln_match;

static bool match(ir_graph *g, ir_node *mean, ln_match *m) {
    memset(m, 0, sizeof *m);
    m->gamma = m->beta = -1;
    if (!mean_last(g, mean)) return false;
    m->x = mean->in[0];
    const ir_tensor *xt = &g->values[m->x].t;
    if (xt->dtype != WPK_DTYPE_FLOAT32 || xt->ndim < 1 || xt->dims[xt->ndim - 1] <= 0)
        return false;
    const int64_t c = xt->dims[xt->ndim - 1];
    ir_node *sub = single_reader(g, mean->out[0], IR_OP_SUB);
    if (!sub || sub->in[0] != m->x || sub->in[1] != mean->out[0]) return false;
    int d = sub->out[0];
    if (ir_graph_count_uses(g, d) != 2 || ir_graph_is_output(g, d)) return false;
    ir_node *pow = NULL, *div = NULL;
    for (int k = 0; k < g->nnodes; k++) {
        ir_node *n = &g->nodes[k];
        if (n->dead || n->nin < 1 || n->in[0] != d) continue;
        if (n->op == IR_OP_POW) pow = n;
        else if (n->op == IR_OP_DIV) div = n;
    }
    float two;
    if (!pow || !div || !const_scalar(g, pow->in[1], &two) || two != 2.0f) return false;
    ir_node *var = single_reader(g, pow->out[0], IR_OP_REDUCE_MEAN);
    if (!var || !mean_last(g, var)) return false;
    ir_node *add_eps = single_reader(g, var->out[0], IR_OP_ADD);
    if (!add_eps || !const_scalar(g, other_operand(add_eps, var->out[0]), &m->eps) ||
        !(m->eps >= 0.0f))
        return false;
    ir_node *sqrt_node = single_reader(g, add_eps->out[0], IR_OP_SQRT);
    if (!sqrt_node || single_reader(g, sqrt_node->out[0], IR_OP_DIV) != div ||
        div->in[1] != sqrt_node->out[0])
        return false;
    ir_node *list[9] = {mean, sub, pow, var, add_eps, sqrt_node, div, NULL, NULL};
    ir_node *mul = single_reader(g, div->out[0], IR_OP_MUL);
    if (mul && row_param(g, other_operand(mul, div->out[0]), c)) {
        m->gamma = other_operand(mul, div->out[0]);
        list[7] = mul;
        ir_node *add = single_reader(g, mul->out[0], IR_OP_ADD);
        if (add && row_param(g, other_operand(add, mul->out[0]), c)) {
            m->beta = other_operand(add, mul->out[0]);
            list[8] = add;
        }
    }
    memcpy(m->nodes, list, sizeof list);
    /* the result keeps its shape: x must not broadcast against gamma or beta into more dims */
    for (int i = 0; i < 2; i++) {
        int p = i ? m->beta : m->gamma;
        if (p >= 0 && g->values[p].t.ndim > xt->ndim) return false;
    }
    return true;
}

static wpk_status rewrite(wpk_context *ctx, ir_graph *g, ln_match *m) {
    ir_node *last = NULL;
    for (int i = 0; i < 9; i++)
        if (m->nodes[i]) last = m->nodes[i];
    const ir_tensor *xt = &g->values[m->x].t;
    const int64_t c = xt->dims[xt->ndim - 1];
    int x = m->x, out = last->out[0];
    int gamma = make_param(g, m->gamma, c, 1.0f, "layernorm_scale");
    int beta = m->beta >= 0 ? make_param(g, m->beta, c, 0.0f, "layernorm_bias") : -1;
    if (gamma < 0 || (m->beta >= 0 && beta < 0))
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory fusing LayerNormalization at '%s'",
                         last->name);
    last = NULL; /* the value table may have moved; node pointers stay valid */
    for (int i = 0; i < 9; i++)
        if (m->nodes[i]) {
            last = m->nodes[i];
            last->dead = true;
        }
    last->dead = false;
    while (last->nattr > 0) ir_node_remove_attr(last, last->attrs[0].name);
    /* the default domain has LayerNormalization from opset 17 on; before, wpk's twin */
    ir_node_set_op(last, g->opset >= 17 ? IR_OP_LAYER_NORM : IR_OP_LAYER_NORM_WPK);
    wpk_status st = ir_node_resize(g, last, beta >= 0 ? 3 : 2, 1);
    if (!st) {
        last->in[0] = x;
        last->in[1] = gamma;
        if (beta >= 0) last->in[2] = beta;
        last->out[0] = out;
        st = ir_node_set_int(g, last, "axis", -1);
    }
    if (!st) st = ir_node_set_float(g, last, "epsilon", m->eps);
    if (st) return wpk_error(ctx, st, "out of memory fusing LayerNormalization at '%s'",
                             last->name);
    return WPK_OK;
}

wpk_status pass_fuse_layernorm(wpk_context *ctx, ir_graph *g, const pass_options *opt,
                               int *changed) {
    (void)opt;
    *changed = 0;
    for (int k = 0; k < g->nnodes; k++) {
        ir_node *n = &g->nodes[k];
        if (n->dead || n->op != IR_OP_REDUCE_MEAN) continue;
        ln_match m;
        if (!match(g, n, &m)) continue;
        wpk_status st = rewrite(ctx, g, &m);
        if (st) return st;
        ++*changed;
    }
    if (*changed) ir_graph_compact(g);
    return WPK_OK;
}
