/* fuse_groups.c -- finding and applying the fusion groups of fuse_groups.h. Every pattern asks
 * that the producer's output has one reader, is no graph output, and that the shapes the fused
 * kernels need are known and fit their buffers (ops/fused_stage.h). */
#include "passes/fuse_groups.h"

#include <stdio.h>
#include <string.h>

#include "base/arena.h"
#include "ops/fused_stage.h"

const char *fusion_kind_name(fusion_kind kind) {
    static const char *const names[FUSION_KIND_COUNT] = {"pad+conv", "dw+pw", "conv+pool",
                                                               "elementwise"};
    return kind >= 0 && kind < FUSION_KIND_COUNT ? names[kind] : "?";
}

static bool is_conv(const ir_node *n) {
    return !n->dead && (n->op == IR_OP_CONV || n->op == IR_OP_FUSED_CONV) && n->nin >= 2 &&
           n->nout == 1 && n->out[0] >= 0 && n->in[0] >= 0 && n->in[1] >= 0;
}

/* v's shape when it is float32 and known but for the batch (dim 0), which the kernels take
 * at any size; NULL otherwise. */
static const ir_tensor *shape_of(const ir_graph *g, int v) {
    const ir_tensor *t = v >= 0 ? &g->values[v].t : NULL;
    if (!t || t->dtype != WPK_DTYPE_FLOAT32) return NULL;
    for (int i = 1; i < t->ndim; i++)
        if (t->dims[i] < 0) return NULL;
    return t;
}

/* The conv's X and W are 4-D with known shapes, it has no residual input, no auto_pad. */
static bool plain_conv(const ir_graph *g, const ir_node *n) {
    const ir_tensor *x = shape_of(g, n->in[0]), *w = shape_of(g, n->in[1]);
    const char *pad = ir_attr_str(n, "auto_pad", "NOTSET");
    return is_conv(n) && n->nin <= 3 && x && w && x->ndim == 4 && w->ndim == 4 &&
           (strcmp(pad, "NOTSET") == 0 || *pad == 0);
}

/* The node reading `first`'s output when it is its only reader; -1 otherwise. */
static int only_reader(const ir_graph *g, int first) {
    const ir_node *n = &g->nodes[first];
    if (n->dead || n->nout < 1 || n->out[0] < 0) return -1;
    return ir_graph_single_consumer(g, n->out[0]);
}

/* A Pad of constant zeros, with constant pads only on dims 2 and 3, none negative. */
static bool zero_pad(const ir_graph *g, const ir_node *p, int64_t *spatial) {
    if (p->dead || p->op != IR_OP_PAD || p->nin < 2 || p->in[0] < 0 || p->in[1] < 0 ||
        strcmp(ir_attr_str(p, "mode", "constant"), "constant") != 0)
        return false;
    if (p->nin > 3 && p->in[3] >= 0) return false; /* axes */
    const ir_tensor *pads = &g->values[p->in[1]].t;
    if (!g->values[p->in[1]].is_const || pads->dtype != WPK_DTYPE_INT64 || !pads->data ||
        ir_numel(pads) != 8)
        return false;
    if (p->nin > 2 && p->in[2] >= 0) {
        const ir_tensor *cv = &g->values[p->in[2]].t;
        if (!g->values[p->in[2]].is_const || cv->dtype != WPK_DTYPE_FLOAT32 || !cv->data ||
            ir_numel(cv) != 1 || ((const float *)cv->data)[0] != 0.0f)
            return false;
    }
    const int64_t *d = pads->data;
    /* begins of N, C, H, W, then the ends */
    if (d[0] || d[1] || d[4] || d[5]) return false;
    spatial[0] = d[2];
    spatial[1] = d[3];
    spatial[2] = d[6];
    spatial[3] = d[7];
    for (int i = 0; i < 4; i++)
        if (spatial[i] < 0) return false;
    return true;
}

static bool match_pad_conv(const ir_graph *g, int p, int c) {
    int64_t spatial[4];
    const ir_node *pn = &g->nodes[p], *cn = &g->nodes[c];
    return zero_pad(g, pn, spatial) && plain_conv(g, cn) && cn->in[0] == pn->out[0] &&
           cn->in[1] != pn->out[0] && (cn->nin < 3 || cn->in[2] != pn->out[0]);
}

static bool match_dw_pw(const ir_graph *g, int a, int b) {
    const ir_node *dw = &g->nodes[a], *pw = &g->nodes[b];
    if (!plain_conv(g, dw) || !is_conv(pw) || pw->in[0] != dw->out[0]) return false;
    for (int i = 1; i < pw->nin; i++)
        if (pw->in[i] == dw->out[0]) return false;
    const ir_tensor *x = shape_of(g, dw->in[0]), *w = shape_of(g, dw->in[1]);
    const ir_tensor *pw_w = shape_of(g, pw->in[1]);
    int64_t c = x->dims[1];
    bool depthwise = ir_attr_int(dw, "group", 1) == c && w->dims[0] == c && w->dims[1] == 1 &&
                     c <= FUSED_DWPW_MAX_CHANNELS;
    const char *pad = ir_attr_str(pw, "auto_pad", "NOTSET");
    bool pointwise = pw_w && pw_w->ndim == 4 && pw_w->dims[1] == c && pw_w->dims[2] == 1 &&
                     pw_w->dims[3] == 1 && ir_attr_int(pw, "group", 1) == 1 &&
                     (strcmp(pad, "NOTSET") == 0 || *pad == 0);
    int count;
    const int64_t *v = ir_attr_ints(pw, "strides", &count);
    for (int i = 0; v && i < count; i++) pointwise = pointwise && v[i] == 1;
    v = ir_attr_ints(pw, "pads", &count);
    for (int i = 0; v && i < count; i++) pointwise = pointwise && v[i] == 0;
    return depthwise && pointwise;
}

static bool match_conv_pool(const ir_graph *g, int a, int p) {
    const ir_node *cv = &g->nodes[a], *pool = &g->nodes[p];
    if (!plain_conv(g, cv) || pool->dead || pool->nin != 1 || pool->in[0] != cv->out[0] ||
        (pool->op != IR_OP_MAX_POOL && pool->op != IR_OP_AVERAGE_POOL))
        return false;
    for (int i = 1; i < pool->nout; i++)
        if (pool->out[i] >= 0) return false; /* MaxPool's Indices */
    const ir_tensor *y = shape_of(g, cv->out[0]);
    const char *pad = ir_attr_str(pool, "auto_pad", "NOTSET");
    if (!y || y->ndim != 4 || y->dims[2] * y->dims[3] > FUSED_CONV_POOL_MAX_PLANE ||
        !(strcmp(pad, "NOTSET") == 0 || *pad == 0) || ir_attr_int(pool, "storage_order", 0))
        return false;
    if (pool->op == IR_OP_AVERAGE_POOL && ir_attr_int(pool, "ceil_mode", 0)) return false;
    int count;
    const int64_t *dil = ir_attr_ints(pool, "dilations", &count);
    for (int i = 0; dil && i < count; i++)
        if (dil[i] != 1) return false;
    return true;
}

/* ---- elementwise chains ---- */

/* a and b have the same shape: equal known dims, or symbolic dims of the same name. */
static bool same_dims(const ir_graph *g, int a, int b) {
    const ir_value *va = &g->values[a], *vb = &g->values[b];
    if (va->t.dtype != WPK_DTYPE_FLOAT32 || vb->t.dtype != WPK_DTYPE_FLOAT32 ||
        va->t.ndim != vb->t.ndim)
        return false;
    for (int d = 0; d < va->t.ndim; d++) {
        if (va->t.dims[d] != vb->t.dims[d]) return false;
        if (va->t.dims[d] >= 0) continue;
        const char *na = va->dim_names[d], *nb = vb->dim_names[d];
        if (!na || !nb || strcmp(na, nb) != 0) return false;
    }
    return true;
}

static bool one_element(const ir_graph *g, int v) {
    const ir_tensor *t = &g->values[v].t;
    if (t->dtype != WPK_DTYPE_FLOAT32) return false;
    for (int d = 0; d < t->ndim; d++)
        if (t->dims[d] != 1) return false;
    return true;
}

/* A plain elementwise node that can be a step reading `from` (its other operand, if any, of
 * from's shape or one element, its output of from's shape). */
static bool step_reads(const ir_graph *g, const ir_node *n, int from) {
    bool binary;
    if (n->dead || n->nout != 1 || n->out[0] < 0 || !n->domain || *n->domain ||
        !fused_elementwise_step(n->op_type, &binary) || n->nin != (binary ? 2 : 1))
        return false;
    if (n->op == IR_OP_RELU && n->nattr) return false;
    int reads = 0, other = -1;
    for (int i = 0; i < n->nin; i++) {
        if (n->in[i] == from) reads++;
        else other = n->in[i];
    }
    if (reads != 1 || !same_dims(g, n->out[0], from)) return false;
    return !binary || (other >= 0 && (same_dims(g, other, from) || one_element(g, other)));
}

/* The value a plain elementwise node's chain would start from (-1: none): its only input, or
 * the first operand of its output's shape. */
static int chain_source(const ir_graph *g, const ir_node *n) {
    bool binary;
    if (n->dead || n->nout != 1 || n->out[0] < 0 || !n->domain || *n->domain ||
        !fused_elementwise_step(n->op_type, &binary) || n->nin != (binary ? 2 : 1) ||
        (n->op == IR_OP_RELU && n->nattr))
        return -1;
    for (int i = 0; i < n->nin; i++)
        if (n->in[i] >= 0 && step_reads(g, n, n->in[i])) return n->in[i];
    return -1;
}

static bool match_elementwise(const ir_graph *g, int a, int b) {
    const ir_node *first = &g->nodes[a];
    if (first->op == IR_OP_FUSED_ELEMENTWISE) {
        const ir_attr *ops = ir_attr_find(first, "ops");
        if (!ops || ops->n >= FUSED_ELEMENTWISE_MAX_STEPS || first->nout != 1) return false;
    } else if (chain_source(g, first) < 0) {
        return false;
    }
    return step_reads(g, &g->nodes[b], first->out[0]);
}

static bool matches(const ir_graph *g, const fusion_group *f) {
    if (f->first < 0 || f->second < 0 || f->first >= g->nnodes || f->second >= g->nnodes ||
        only_reader(g, f->first) != f->second)
        return false;
    switch (f->kind) {
    case FUSION_PAD_CONV: return match_pad_conv(g, f->first, f->second);
    case FUSION_DW_PW: return match_dw_pw(g, f->first, f->second);
    case FUSION_CONV_POOL: return match_conv_pool(g, f->first, f->second);
    case FUSION_ELEMENTWISE: return match_elementwise(g, f->first, f->second);
    default: return false;
    }
}

int fusion_groups_find(const ir_graph *g, fusion_group *out, int max) {
    int count = 0;
    for (int k = 0; k < g->nnodes; k++) {
        int r = only_reader(g, k);
        if (r < 0) continue;
        for (int kind = 0; kind < FUSION_KIND_COUNT; kind++) {
            fusion_group f = {(fusion_kind)kind, k, r};
            if (!matches(g, &f)) continue;
            if (count < max) out[count] = f;
            count++;
        }
    }
    return count;
}

/* ---- applying ---- */

static wpk_status apply_pad_conv(ir_graph *g, const fusion_group *f) {
    int64_t spatial[4], pads[4] = {0, 0, 0, 0};
    ir_node *p = &g->nodes[f->first];
    zero_pad(g, p, spatial);
    ir_node *c = &g->nodes[f->second];
    int count;
    const int64_t *old = ir_attr_ints(c, "pads", &count);
    for (int i = 0; old && i < count && i < 4; i++) pads[i] = old[i];
    for (int i = 0; i < 4; i++) pads[i] += spatial[i];
    if (ir_node_set_ints(g, c, "pads", pads, 4)) return WPK_ERR_NOMEM;
    c->in[0] = p->in[0];
    p->dead = true;
    return WPK_OK;
}

/* Add attribute a of another node to n, its name prefixed. */
static wpk_status add_prefixed(ir_graph *g, ir_node *n, const char *prefix, const ir_attr *a) {
    size_t len = strlen(prefix) + strlen(a->name) + 1;
    char *name = arena_alloc(&g->mem, len);
    if (!name) return WPK_ERR_NOMEM;
    snprintf(name, len, "%s%s", prefix, a->name);
    ir_attr copy = *a;
    copy.name = name;
    return ir_node_set_attr(g, n, &copy);
}

static bool threads_attr(const ir_attr *a) { return strcmp(a->name, IR_ATTR_THREADS) == 0; }

static wpk_status apply_dw_pw(ir_graph *g, const fusion_group *f) {
    ir_node dw = g->nodes[f->first];
    ir_node *pw = &g->nodes[f->second];
    int w = pw->in[1], b = pw->nin > 2 ? pw->in[2] : -1, z = pw->nin > 3 ? pw->in[3] : -1;
    if (ir_node_resize(g, pw, 6, pw->nout)) return WPK_ERR_NOMEM;
    pw->in[0] = dw.in[0];
    pw->in[1] = dw.in[1];
    pw->in[2] = dw.nin > 2 ? dw.in[2] : -1;
    pw->in[3] = w;
    pw->in[4] = b;
    pw->in[5] = z;
    for (int i = 0; i < dw.nattr; i++)
        if (!threads_attr(&dw.attrs[i]) && add_prefixed(g, pw, "dw_", &dw.attrs[i]))
            return WPK_ERR_NOMEM;
    ir_node_set_op(pw, IR_OP_FUSED_DW_PW);
    g->nodes[f->first].dead = true;
    return WPK_OK;
}

static wpk_status apply_conv_pool(ir_graph *g, const fusion_group *f) {
    ir_node pool = g->nodes[f->second];
    ir_node *cv = &g->nodes[f->first];
    for (int i = 0; i < pool.nattr; i++)
        if (!threads_attr(&pool.attrs[i]) && add_prefixed(g, cv, "pool_", &pool.attrs[i]))
            return WPK_ERR_NOMEM;
    if (ir_node_set_str(g, cv, "pool_op", pool.op_type)) return WPK_ERR_NOMEM;
    ir_node_set_op(cv, IR_OP_FUSED_CONV_POOL);
    cv->out[0] = pool.out[0];
    /* the group takes the pool's place, where its readers already come after; it keeps the
       conv's name and attributes (its team size among them) */
    ir_node moved = *cv;
    cv->dead = true;
    g->nodes[f->second] = moved;
    return WPK_OK;
}

/* The steps of a chain being built: op names, operand inputs, swapped flags. */
typedef struct steps {
    const char *ops[FUSED_ELEMENTWISE_MAX_STEPS];
    int64_t operand[FUSED_ELEMENTWISE_MAX_STEPS], swapped[FUSED_ELEMENTWISE_MAX_STEPS];
    int inputs[FUSED_ELEMENTWISE_MAX_STEPS + 1];
    int n, nin;
} steps;

/* Node n as a step reading `from`: its op, its other operand as a new input. */
static void add_step(steps *c, const ir_node *n, int from) {
    c->ops[c->n] = n->op_type;
    c->operand[c->n] = -1;
    c->swapped[c->n] = 0;
    if (n->nin == 2) {
        bool second = n->in[1] == from;
        c->swapped[c->n] = second;
        c->operand[c->n] = c->nin;
        c->inputs[c->nin++] = n->in[second ? 0 : 1];
    }
    c->n++;
}

static wpk_status apply_elementwise(ir_graph *g, const fusion_group *f) {
    const ir_node *first = &g->nodes[f->first];
    steps c = {.n = 0, .nin = 1};
    if (first->op == IR_OP_FUSED_ELEMENTWISE) {
        const ir_attr *ops = ir_attr_find(first, "ops");
        int no, ns;
        const int64_t *operand = ir_attr_ints(first, "operands", &no);
        const int64_t *swapped = ir_attr_ints(first, "swapped", &ns);
        c.n = ops->n;
        c.nin = first->nin;
        for (int i = 0; i < first->nin; i++) c.inputs[i] = first->in[i];
        for (int s = 0; s < c.n; s++) {
            c.ops[s] = ops->strs[s];
            c.operand[s] = operand[s];
            c.swapped[s] = swapped[s];
        }
    } else {
        c.inputs[0] = chain_source(g, first);
        add_step(&c, first, c.inputs[0]);
    }
    ir_node *n = &g->nodes[f->second];
    add_step(&c, n, first->out[0]);
    int64_t team = ir_attr_int(n, IR_ATTR_THREADS, 0);
    if (ir_node_resize(g, n, c.nin, n->nout)) return WPK_ERR_NOMEM;
    for (int i = 0; i < c.nin; i++) n->in[i] = c.inputs[i];
    n->nattr = 0;
    ir_node_set_op(n, IR_OP_FUSED_ELEMENTWISE);
    ir_attr ops = {.name = "ops", .kind = IR_ATTR_STRINGS, .n = c.n, .strs = c.ops};
    if (ir_node_set_attr(g, n, &ops) || ir_node_set_ints(g, n, "operands", c.operand, c.n) ||
        ir_node_set_ints(g, n, "swapped", c.swapped, c.n) ||
        (team > 0 && ir_node_set_int(g, n, IR_ATTR_THREADS, team)))
        return WPK_ERR_NOMEM;
    g->nodes[f->first].dead = true;
    return WPK_OK;
}

wpk_status fusion_groups_apply(wpk_context *ctx, ir_graph *g, const fusion_group *groups, int n,
                               const bool *chosen, int *applied) {
    int done = 0;
    wpk_status st = WPK_OK;
    for (int i = 0; i < n && st == WPK_OK; i++) {
        if ((chosen && !chosen[i]) || !matches(g, &groups[i])) continue;
        switch (groups[i].kind) {
        case FUSION_PAD_CONV: st = apply_pad_conv(g, &groups[i]); break;
        case FUSION_DW_PW: st = apply_dw_pw(g, &groups[i]); break;
        case FUSION_CONV_POOL: st = apply_conv_pool(g, &groups[i]); break;
        case FUSION_ELEMENTWISE: st = apply_elementwise(g, &groups[i]); break;
        default: break;
        }
        if (st)
            st = wpk_error(ctx, st, "out of memory fusing %s at node '%s'",
                           fusion_kind_name(groups[i].kind), g->nodes[groups[i].second].name);
        else
            done++;
    }
    ir_graph_compact(g);
    if (applied) *applied = done;
    return st;
}
