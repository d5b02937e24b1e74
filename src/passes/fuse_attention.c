/* fuse_attention.c -- Scaled dot-product attention recognized into one wpk::Attention node.
 *
 * From each Softmax over the last axis the pass walks its input back through an optional Add
 * (the mask: the other operand, any float tensor broadcasting to the scores), an optional Div
 * or Mul by a constant scalar (the scale) to MatMul(Q, K^T), and its output forward to
 * MatMul(., V), optionally followed by a Transpose. Q may carry its own scalar Div/Mul (as
 * nn.MultiheadAttention scales it). The Transposes that split heads in front of Q, K^T and V
 * and the one merging them after are absorbed as the op's perms, as long as each keeps the
 * last dim last: the kernel reads rows in place instead of materialized transposes.
 * Swin's shifted windows add their window mask in a reshaped view of the scores (Reshape, Add,
 * Reshape back); with both masks constant they are summed into one of the scores' shape.
 * An operand that is a Reshape of a Slice along one axis (the split of a fused QKV projection)
 * becomes a strided view of the sliced tensor (q_view, k_view, v_view): read in place, the
 * Slice's copy is left unread. Every value inside the pattern has exactly one reader and is
 * not a graph output; shapes must be static (the pass declines on symbolic dims;
 * specialization runs it again once the input shapes are bound). */
#include "passes/pass.h"

#include <string.h>

#include "base/arena.h"
#include "ops/op_util.h"

#define NO_VALUE (-1)

/* The live node producing v, when its op is `op`; NULL otherwise. */
static ir_node *producer_of(ir_graph *g, int v, ir_op op) {
    if (v < 0 || g->values[v].producer < 0) return NULL;
    ir_node *n = &g->nodes[g->values[v].producer];
    return !n->dead && n->op == op ? n : NULL;
}

/* v's only reader (not a graph output), when it is live and its op is `op`; NULL otherwise. */
static ir_node *single_reader(ir_graph *g, int v, ir_op op) {
    int k = ir_graph_single_consumer(g, v);
    return k >= 0 && g->nodes[k].op == op ? &g->nodes[k] : NULL;
}

static bool inner(const ir_graph *g, int v) {
    return ir_graph_single_consumer(g, v) >= 0;
}

static bool static_f32(const ir_graph *g, int v) {
    return v >= 0 && g->values[v].t.dtype == WPK_DTYPE_FLOAT32 &&
           pass_shape_known(&g->values[v].t);
}

/* The value of a constant float32 scalar (any shape of one element) in *out. */
static bool const_scalar(const ir_graph *g, int v, float *out) {
    if (v < 0 || !g->values[v].is_const) return false;
    const ir_tensor *t = &g->values[v].t;
    if (t->dtype != WPK_DTYPE_FLOAT32 || ir_numel(t) != 1 || !t->data) return false;
    *out = ((const float *)t->data)[0];
    return true;
}

/* If n is x * c, c * x or x / c with c a nonzero constant scalar: x into *x and the factor
 * into *scale. */
static bool scaling(const ir_graph *g, const ir_node *n, int *x, float *scale) {
    float c;
    if (!n || n->nin != 2) return false;
    if (n->op == IR_OP_DIV && const_scalar(g, n->in[1], &c) && c != 0.0f) {
        *x = n->in[0];
        *scale = 1.0f / c;
        return true;
    }
    if (n->op != IR_OP_MUL) return false;
    for (int i = 0; i < 2; i++)
        if (const_scalar(g, n->in[i], &c)) {
            *x = n->in[1 - i];
            *scale = c;
            return true;
        }
    return false;
}

/* Walk value *v back through Transposes while the accumulated perm (logical =
 * Transpose(*v, perm)) keeps the last dim last; *v and perm are updated in place. */
static void absorb_transposes(ir_graph *g, int *v, int *perm, int r) {
    for (;;) {
        ir_node *t = producer_of(g, *v, IR_OP_TRANSPOSE);
        if (!t) return;
        int count;
        const int64_t *p = ir_attr_ints(t, "perm", &count);
        if (!p || count != r) return;
        int next[WPK_MAX_DIMS];
        for (int i = 0; i < r; i++) next[i] = (int)p[perm[i]];
        if (next[r - 1] != r - 1) return;
        memcpy(perm, next, sizeof(int) * (size_t)r);
        *v = t->in[0];
    }
}

/* The int64 or int32 constant v as n int64 values (at most WPK_MAX_DIMS); false otherwise. */
static bool const_ints(const ir_graph *g, int v, int64_t *out, int *n) {
    if (v < 0 || !g->values[v].is_const || !g->values[v].t.data) return false;
    const ir_tensor *t = &g->values[v].t;
    int64_t count = ir_numel(t);
    if (count > WPK_MAX_DIMS || t->ndim > 1) return false;
    for (int64_t i = 0; i < count; i++) {
        if (t->dtype == WPK_DTYPE_INT64) out[i] = ((const int64_t *)t->data)[i];
        else if (t->dtype == WPK_DTYPE_INT32) out[i] = ((const int32_t *)t->data)[i];
        else return false;
    }
    *n = (int)count;
    return true;
}

/* Slice node s as one range [*start, *start + *len) along *axis of its input with step 1, the
 * other axes whole (*axis -1: nothing cut); false for anything else. */
static bool one_axis_slice(const ir_graph *g, const ir_node *s, int *axis, int64_t *start,
                           int64_t *len) {
    const ir_tensor *x = &g->values[s->in[0]].t;
    int64_t starts[WPK_MAX_DIMS], ends[WPK_MAX_DIMS], axes[WPK_MAX_DIMS], steps[WPK_MAX_DIMS];
    int ns, ne, na, nst;
    if (s->nin < 3 || !const_ints(g, s->in[1], starts, &ns) ||
        !const_ints(g, s->in[2], ends, &ne) || ne != ns)
        return false;
    if (s->nin > 3 && s->in[3] >= 0) {
        if (!const_ints(g, s->in[3], axes, &na) || na != ns) return false;
    } else {
        for (int i = 0; i < ns; i++) axes[i] = i;
    }
    if (s->nin > 4 && s->in[4] >= 0) {
        if (!const_ints(g, s->in[4], steps, &nst) || nst != ns) return false;
        for (int i = 0; i < ns; i++)
            if (steps[i] != 1) return false;
    }
    *axis = -1;
    for (int i = 0; i < ns; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + x->ndim : axes[i];
        if (a < 0 || a >= x->ndim) return false;
        int64_t d = x->dims[a], b = starts[i], e = ends[i];
        if (b < 0) b += d;
        if (e < 0) e += d;
        b = b < 0 ? 0 : b > d ? d : b;
        e = e < b ? b : e > d ? d : e;
        if (b == 0 && e == d) continue;
        if (*axis >= 0 && *axis != a) return false;
        *axis = (int)a;
        *start = b;
        *len = e - b;
    }
    return true;
}

/* Operand *v, when Reshapes of a Slice along one axis of x: *v becomes x and view the elements
 * of *v inside x ([offset, dims..., strides...], q_view's form). Such a view exists when the
 * trailing dims of *v span exactly the sliced part of a row of x (a head split of one of Q, K,
 * V in a fused projection); else false and nothing changes. */
static bool absorb_slice(ir_graph *g, int *v, int64_t *view) {
    const ir_tensor o = g->values[*v].t;
    const int r = o.ndim;
    int x = *v;
    ir_node *reshape;
    while ((reshape = producer_of(g, x, IR_OP_RESHAPE))) x = reshape->in[0];
    ir_node *s = producer_of(g, x, IR_OP_SLICE);
    if (!s || !static_f32(g, s->in[0]) || !static_f32(g, x)) return false;
    const ir_tensor *src = &g->values[s->in[0]].t;
    int axis;
    int64_t start = 0, len = 0;
    if (!one_axis_slice(g, s, &axis, &start, &len)) return false;
    if (axis < 0) {
        axis = 0;
        len = src->dims[0];
    }
    int64_t inner = 1;
    for (int i = axis + 1; i < src->ndim; i++) inner *= src->dims[i];
    const int64_t part = len * inner, row = src->dims[axis] * inner;
    if (part == 0 || ir_numel(&o) != ir_numel(&g->values[x].t)) return false;
    /* the first dim of the trailing group spanning `part` */
    int split = r;
    int64_t span = 1;
    while (split > 0 && span < part) span *= o.dims[--split];
    if (span != part) return false;
    view[0] = start * inner;
    int64_t contiguous = 1;
    for (int i = r - 1; i >= 0; i--) {
        view[1 + i] = o.dims[i];
        view[1 + r + i] = i >= split ? contiguous : contiguous / part * row;
        contiguous *= o.dims[i];
    }
    *v = s->in[0];
    return true;
}

/* The mask m broadcasts to scores of shape s (rank r). */
static bool mask_fits(const ir_tensor *m, const ir_tensor *s) {
    if (m->ndim > s->ndim) return false;
    for (int i = 0; i < m->ndim; i++) {
        int64_t md = m->dims[i], sd = s->dims[s->ndim - m->ndim + i];
        if (md != 1 && md != sd) return false;
    }
    return true;
}

typedef struct attn_match {
    ir_node *softmax, *qk, *pv, *add, *scale_node, *q_scale_node, *out_transpose;
    int q, k, v, mask, rank;
    /* operands read in place from a fused projection: [offset, dims, strides] (absorb_slice) */
    bool has_view[3];
    int64_t view[3][1 + 2 * WPK_MAX_DIMS];
    int q_perm[WPK_MAX_DIMS], k_perm[WPK_MAX_DIMS], v_perm[WPK_MAX_DIMS],
        out_perm[WPK_MAX_DIMS];
    float scale;
    /* Swin's shifted windows: Reshape -> Add(window mask) -> Reshape back between the scores
     * and the Softmax; both masks constant, they become one of the scores' shape */
    ir_node *win_in, *win_add, *win_out;
    int win_mask;
} attn_match;

static bool same_dims(const ir_tensor *a, const ir_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

/* The constant of the operand of binary node n that is not v, when it is a static float32
 * constant; -1 otherwise. */
static int const_operand(const ir_graph *g, const ir_node *n, int v) {
    if (n->nin != 2 || (n->in[0] != v && n->in[1] != v)) return -1;
    int o = n->in[0] == v ? n->in[1] : n->in[0];
    return o >= 0 && g->values[o].is_const && g->values[o].t.data && static_f32(g, o) ? o : -1;
}

/* x = Reshape(Add(Reshape(s), constant)) with s of x's own shape: the window-mask detour. */
static void match_window_mask(ir_graph *g, int *x, attn_match *m) {
    ir_node *back = producer_of(g, *x, IR_OP_RESHAPE);
    if (!back || !inner(g, *x)) return;
    int y = back->in[0];
    ir_node *add = producer_of(g, y, IR_OP_ADD);
    if (!add || !inner(g, y) || !static_f32(g, y)) return;
    for (int i = 0; i < 2; i++) {
        int s5 = add->in[i], mk = const_operand(g, add, s5);
        ir_node *fwd = producer_of(g, s5, IR_OP_RESHAPE);
        if (mk < 0 || !fwd || !inner(g, s5) || !static_f32(g, fwd->in[0])) continue;
        if (!same_dims(&g->values[fwd->in[0]].t, &g->values[*x].t)) continue;
        if (!mask_fits(&g->values[mk].t, &g->values[y].t)) continue;
        m->win_in = fwd;
        m->win_add = add;
        m->win_out = back;
        m->win_mask = mk;
        *x = fwd->in[0];
        return;
    }
}

/* Offset in t (broadcast to the ndim dims of out) of out's element at flat index f. */
static int64_t broadcast_offset(const int64_t *strides, const int64_t *dims, int ndim,
                                int64_t f) {
    int64_t off = 0;
    for (int i = ndim - 1; i >= 0; i--) {
        off += f % dims[i] * strides[i];
        f /= dims[i];
    }
    return off;
}

/* One constant of the scores' shape: mask m1 (broadcast; -1: none) plus the window mask m2
 * added in the windowed view of the same elements. -1 when out of memory. */
static int combined_mask(ir_graph *g, int m1, int m2, int scores, int windowed) {
    const ir_tensor s4 = g->values[scores].t, s5 = g->values[windowed].t;
    int64_t st1[WPK_MAX_DIMS] = {0}, st2[WPK_MAX_DIMS];
    if (m1 >= 0) op_broadcast_strides(&g->values[m1].t, s4.ndim, s4.dims, st1);
    op_broadcast_strides(&g->values[m2].t, s5.ndim, s5.dims, st2);
    const float *d1 = m1 >= 0 ? g->values[m1].t.data : NULL, *d2 = g->values[m2].t.data;
    const int64_t count = ir_numel(&s4);
    float *data = arena_alloc(&g->mem, sizeof(float) * (size_t)count);
    const char *name = ir_graph_unique_name(g, "attention_mask");
    int v = data && name ? ir_graph_add_value(g, name) : -1;
    if (v < 0) return -1;
    for (int64_t f = 0; f < count; f++)
        data[f] = (d1 ? d1[broadcast_offset(st1, s4.dims, s4.ndim, f)] : 0.0f) +
                  d2[broadcast_offset(st2, s5.dims, s5.ndim, f)];
    ir_tensor *t = &g->values[v].t;
    *t = s4;
    t->data = data;
    g->values[v].is_const = true;
    g->values[v].producer = -1;
    return v;
}

static bool match(ir_graph *g, ir_node *sm, attn_match *m) {
    memset(m, 0, sizeof *m);
    m->softmax = sm;
    m->mask = NO_VALUE;
    m->scale = 1.0f;
    int x = sm->in[0];
    if (!static_f32(g, x)) return false;
    const int r = g->values[x].t.ndim;
    if (r < 3 || r > WPK_MAX_DIMS) return false;
    m->rank = r;
    int64_t axis = ir_attr_int(sm, "axis", sm->opset >= 13 ? -1 : 1);
    if (axis != -1 && axis != r - 1) return false;
    const ir_tensor scores = g->values[x].t;
    m->win_mask = NO_VALUE;
    match_window_mask(g, &x, m);

    ir_node *add = producer_of(g, x, IR_OP_ADD);
    if (add && inner(g, x)) {
        for (int i = 0; i < 2 && !m->add; i++) {
            int s = add->in[i], mk = add->in[1 - i];
            ir_node *p = s >= 0 && g->values[s].producer >= 0 ? &g->nodes[g->values[s].producer]
                                                               : NULL;
            bool from_scores = p && !p->dead && (p->op == IR_OP_MATMUL || p->op == IR_OP_DIV ||
                                                 p->op == IR_OP_MUL);
            if (!from_scores || !static_f32(g, mk) || !static_f32(g, s)) continue;
            if (!mask_fits(&g->values[mk].t, &scores) || g->values[s].t.ndim != r) continue;
            m->add = add;
            m->mask = mk;
            x = s;
        }
        if (!m->add) return false;
    }
    if (m->win_in && m->mask >= 0 && !g->values[m->mask].is_const) return false;
    ir_node *sc = x >= 0 && g->values[x].producer >= 0 ? &g->nodes[g->values[x].producer] : NULL;
    int y;
    float f;
    if (sc && !sc->dead && inner(g, x) && scaling(g, sc, &y, &f)) {
        m->scale_node = sc;
        m->scale *= f;
        x = y;
    }
    m->qk = producer_of(g, x, IR_OP_MATMUL);
    if (!m->qk || !inner(g, x) || !static_f32(g, x) || g->values[x].t.ndim != r) return false;
    if (!inner(g, sm->out[0])) return false;
    m->pv = single_reader(g, sm->out[0], IR_OP_MATMUL);
    if (!m->pv || m->pv->in[0] != sm->out[0]) return false;

    m->q = m->qk->in[0];
    m->k = m->qk->in[1];
    m->v = m->pv->in[1];
    ir_node *qs = m->q >= 0 && g->values[m->q].producer >= 0
                      ? &g->nodes[g->values[m->q].producer] : NULL;
    if (qs && !qs->dead && inner(g, m->q) && scaling(g, qs, &y, &f)) {
        m->q_scale_node = qs;
        m->scale *= f;
        m->q = y;
    }
    for (int i = 0; i < r; i++) m->q_perm[i] = m->v_perm[i] = m->out_perm[i] = m->k_perm[i] = i;
    /* logical K = the second operand with its last two dims swapped */
    m->k_perm[r - 2] = r - 1;
    m->k_perm[r - 1] = r - 2;
    absorb_transposes(g, &m->q, m->q_perm, r);
    absorb_transposes(g, &m->k, m->k_perm, r);
    absorb_transposes(g, &m->v, m->v_perm, r);
    if (m->k_perm[r - 1] != r - 1) return false; /* K^T was not a transpose of row-major K */
    int *operands[3] = {&m->q, &m->k, &m->v};
    for (int i = 0; i < 3; i++)
        if (!static_f32(g, *operands[i]) || g->values[*operands[i]].t.ndim != r) return false;
    for (int i = 0; i < 3; i++) m->has_view[i] = absorb_slice(g, operands[i], m->view[i]);
    int o = m->pv->out[0];
    if (!static_f32(g, o)) return false;
    ir_node *t = single_reader(g, o, IR_OP_TRANSPOSE);
    int count;
    const int64_t *p = t ? ir_attr_ints(t, "perm", &count) : NULL;
    if (p && count == r && p[r - 1] == r - 1) {
        m->out_transpose = t;
        for (int i = 0; i < r; i++) m->out_perm[i] = (int)p[i];
    }
    return true;
}

static wpk_status set_perm(ir_graph *g, ir_node *n, const char *name, const int *perm, int r) {
    int64_t p[WPK_MAX_DIMS];
    bool identity = true;
    for (int i = 0; i < r; i++) {
        p[i] = perm[i];
        identity = identity && perm[i] == i;
    }
    if (identity) return WPK_OK;
    return ir_node_set_ints(g, n, name, p, r);
}

/* Turn the pattern's last node into the Attention node; the nodes before it die. */
static wpk_status rewrite(wpk_context *ctx, ir_graph *g, attn_match *m) {
    ir_node *last = m->out_transpose ? m->out_transpose : m->pv;
    int out = last->out[0], r = m->rank;
    if (m->win_in) {
        int scores = m->win_in->in[0], mask = combined_mask(g, m->mask, m->win_mask, scores,
                                                            m->win_in->out[0]);
        if (mask < 0)
            return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory fusing attention at '%s'",
                             last->name);
        m->mask = mask;
    }
    ir_node *dying[] = {m->softmax, m->qk, m->add, m->scale_node, m->q_scale_node,
                        m->out_transpose ? m->pv : NULL, m->win_in, m->win_add, m->win_out};
    for (size_t i = 0; i < sizeof dying / sizeof dying[0]; i++)
        if (dying[i]) dying[i]->dead = true;
    while (last->nattr > 0) ir_node_remove_attr(last, last->attrs[0].name);
    ir_node_set_op(last, IR_OP_ATTENTION);
    wpk_status st = ir_node_resize(g, last, m->mask >= 0 ? 4 : 3, 1);
    if (st) return wpk_error(ctx, st, "out of memory fusing attention at '%s'", last->name);
    last->in[0] = m->q;
    last->in[1] = m->k;
    last->in[2] = m->v;
    if (m->mask >= 0) last->in[3] = m->mask;
    last->out[0] = out;
    st = ir_node_set_float(g, last, "scale", m->scale);
    if (!st) st = set_perm(g, last, "q_perm", m->q_perm, r);
    if (!st) st = set_perm(g, last, "k_perm", m->k_perm, r);
    if (!st) st = set_perm(g, last, "v_perm", m->v_perm, r);
    if (!st) st = set_perm(g, last, "out_perm", m->out_perm, r);
    static const char *const views[3] = {"q_view", "k_view", "v_view"};
    for (int i = 0; i < 3 && !st; i++)
        if (m->has_view[i]) st = ir_node_set_ints(g, last, views[i], m->view[i], 1 + 2 * r);
    if (st) return wpk_error(ctx, st, "out of memory fusing attention at '%s'", last->name);
    return WPK_OK;
}

wpk_status pass_fuse_attention(wpk_context *ctx, ir_graph *g, const pass_options *opt,
                               int *changed) {
    (void)opt;
    *changed = 0;
    for (int k = 0; k < g->nnodes; k++) {
        ir_node *n = &g->nodes[k];
        if (n->dead || n->op != IR_OP_SOFTMAX) continue;
        attn_match m;
        if (!match(g, n, &m)) continue;
        wpk_status st = rewrite(ctx, g, &m);
        if (st) return st;
        ++*changed;
    }
    if (*changed) ir_graph_compact(g);
    return WPK_OK;
}
