/* memory_plan.c -- activation memory planning: liveness over the execution order, buffer sharing
 * (in-place ops, views, concat inputs in their slice of the output), and best-fit placement of
 * the buffers in one workspace. */
#include "passes/memory_plan.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "passes/pass.h"

static size_t align_up(size_t n) {
    return (n + MEMORY_PLAN_ALIGN - 1) / MEMORY_PLAN_ALIGN * MEMORY_PLAN_ALIGN;
}

void memory_plan_free(memory_plan *p) {
    wpk_free(p->offset);
    wpk_free(p->root);
    wpk_free(p->first);
    wpk_free(p->last);
    wpk_free(p->bytes);
    memset(p, 0, sizeof *p);
}

/* Ops whose output is their input relabelled: the reference kernel is the byte copy. Dropout
 * (inference) copies its first output the same way and also writes an optional mask. */
static bool is_view(const ir_node *n) {
    return ir_op_get(n->op)->ref == op_copy_ref || n->op == IR_OP_DROPOUT;
}

/* What the planner tracks per buffer while it decides sharing (indexed by the root value). */
typedef struct group {
    int first;    /* step that defines its first member */
    int last;     /* last step any member is read */
    bool pinned;  /* holds a graph input or output: never written over */
    int slot;     /* index of its slot once placement starts */
} group;

/* Marks activations, checks their shapes are static, and computes each one's live range. */
static wpk_status liveness(wpk_context *ctx, const ir_graph *g, memory_plan *p) {
    int nn = g->nnodes;
    for (int i = 0; i < g->ninputs; i++) {
        int v = g->inputs[i];
        p->root[v] = v;
        p->first[v] = -1;
        p->last[v] = nn;
    }
    for (int k = 0; k < nn; k++)
        for (int o = 0; o < g->nodes[k].nout; o++) {
            int v = g->nodes[k].out[o];
            if (v < 0) continue;
            p->root[v] = v;
            p->first[v] = p->last[v] = k;
        }
    for (int k = 0; k < nn; k++)
        for (int i = 0; i < g->nodes[k].nin; i++) {
            int v = g->nodes[k].in[i];
            if (v >= 0 && p->root[v] >= 0 && p->last[v] < k) p->last[v] = k;
        }
    for (int i = 0; i < g->noutputs; i++)
        if (p->root[g->outputs[i]] >= 0) p->last[g->outputs[i]] = nn;
    for (int v = 0; v < g->nvalues; v++) {
        if (p->root[v] < 0) continue;
        const ir_value *val = &g->values[v];
        if (!pass_shape_known(&val->t)) {
            int k = val->producer;
            return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "value '%s'%s%s%s has no static shape",
                             val->name, k >= 0 ? " (output of node '" : "",
                             k >= 0 ? g->nodes[k].name : "", k >= 0 ? "')" : "");
        }
        p->bytes[v] = ir_nbytes(&val->t);
        p->unplanned += p->bytes[v];
    }
    return WPK_OK;
}

/* Whether node k (in-place capable) may write its output over its first input's buffer. */
static bool can_overwrite(const ir_graph *g, const memory_plan *p, const group *grp, int k) {
    const ir_node *n = &g->nodes[k];
    if (n->nin < 1 || n->nout < 1 || n->in[0] < 0 || n->out[0] < 0) return false;
    for (int o = 1; o < n->nout; o++)
        if (n->out[o] >= 0) return false;
    int x = n->in[0], y = n->out[0], r = p->root[x];
    if (r < 0 || g->values[r].is_const || grp[r].pinned || grp[r].last != k) return false;
    const ir_tensor *tx = &g->values[x].t, *ty = &g->values[y].t;
    if (ir_numel(tx) != ir_numel(ty) || wpk_dtype_size(tx->dtype) != wpk_dtype_size(ty->dtype))
        return false;
    /* another input on the same buffer under another shape (a view of x) would be read at
     * other positions than the ones being written */
    for (int i = 1; i < n->nin; i++)
        if (n->in[i] >= 0 && n->in[i] != x && p->root[n->in[i]] == r) return false;
    return true;
}

/* The bytes before input i's part of Concat node n's output (whose dims y are), when every
 * input's part is one contiguous run of the output (nothing but ones before the axis) at a
 * multiple of MEMORY_PLAN_ALIGN; -1 otherwise. */
static int64_t concat_slice(const ir_graph *g, const ir_node *n, const ir_tensor *y, int i) {
    const ir_attr *a = ir_attr_find(n, "axis");
    int64_t axis = a ? a->i : 1;
    if (axis < 0) axis += y->ndim;
    if (axis < 0 || axis >= y->ndim) return -1;
    for (int d = 0; d < axis; d++)
        if (y->dims[d] != 1) return -1;
    int64_t at = 0;
    for (int j = 0; j < i; j++) at += (int64_t)ir_nbytes(&g->values[n->in[j]].t);
    return at % MEMORY_PLAN_ALIGN == 0 ? at : -1;
}

/* Whether value x, input of Concat node k, can be written by its producer straight into its
 * part of the output: x heads a buffer of its own that nothing else shares, is neither a
 * graph input, output nor constant, is read by node k alone, and once only. */
static bool concat_input_alone(const ir_graph *g, const memory_plan *p, const group *grp, int k,
                               int x) {
    if (x < 0 || g->values[x].is_const || p->root[x] != x || grp[x].pinned ||
        g->values[x].producer < 0 || p->last[x] != k)
        return false;
    for (int v = 0; v < g->nvalues; v++)
        if (v != x && p->root[v] == x) return false;
    int reads = 0;
    for (int j = 0; j < g->nnodes; j++)
        for (int i = 0; i < g->nodes[j].nin; i++) reads += g->nodes[j].in[i] == x;
    return reads == 1;
}

/* Concat node k without a copy: each input that can be joins the output's buffer at its slice
 * (at[] its byte offset there), so its producer writes it in place and the concat finds its
 * bytes where they belong (op_concat_ref then copies nothing). All inputs or none: a partial
 * join would save less than it complicates. */
static void share_concat(const ir_graph *g, memory_plan *p, group *grp, int64_t *at, int k) {
    const ir_node *n = &g->nodes[k];
    int y = n->out[0];
    if (n->nout != 1 || y < 0 || p->root[y] != y || n->nin < 2) return;
    for (int i = 0; i < n->nin; i++)
        if (!concat_input_alone(g, p, grp, k, n->in[i]) ||
            concat_slice(g, n, &g->values[y].t, i) < 0)
            return;
    for (int i = 0; i < n->nin; i++) {
        int x = n->in[i];
        p->root[x] = y;
        at[x] = concat_slice(g, n, &g->values[y].t, i);
        if (grp[x].first < grp[y].first) grp[y].first = grp[x].first;
    }
    p->concat_inputs += n->nin;
}

/* Decides which values share a buffer, in execution order, so that a group's members are all
 * known when a later node asks whether the group is dead. */
static void share(const ir_graph *g, memory_plan *p, group *grp, int64_t *at) {
    for (int v = 0; v < g->nvalues; v++)
        if (p->root[v] == v) grp[v] = (group){.first = p->first[v], .last = p->last[v],
                                              .pinned = g->values[v].is_input ||
                                                        ir_graph_is_output(g, v)};
    for (int k = 0; k < g->nnodes; k++) {
        const ir_node *n = &g->nodes[k];
        if (n->nin < 1 || n->nout < 1 || n->in[0] < 0 || n->out[0] < 0) continue;
        if (n->op == IR_OP_CONCAT) {
            share_concat(g, p, grp, at, k);
            continue;
        }
        int x = n->in[0], y = n->out[0];
        int r = g->values[x].is_const ? x : p->root[x];
        bool join = false;
        if (is_view(n)) {
            join = r >= 0 && (g->values[x].is_const ? ir_nbytes(&g->values[x].t) : p->bytes[x]) ==
                                 p->bytes[y];
            p->views += join;
        } else if (ir_op_get(n->op)->inplace && can_overwrite(g, p, grp, k)) {
            join = true;
            p->inplace++;
        }
        if (!join) continue;
        p->root[y] = r;
        if (g->values[r].is_const) continue;
        if (grp[y].last > grp[r].last) grp[r].last = grp[y].last;
        grp[r].pinned |= grp[y].pinned;
    }
}

/* A buffer to place: a root value, its lifetime [lo, hi] over all members, its aligned size. */
typedef struct slot {
    int root, lo, hi;
    size_t size;
    int64_t offset;
} slot;

/* Placement orders; each falls back on the next criteria, ending with the root's index, so a
 * plan is deterministic. */
static int cmp_size(const slot *x, const slot *y) {
    return x->size != y->size ? (x->size > y->size ? -1 : 1) : 0;
}

static int cmp_span(const slot *x, const slot *y) {
    return x->hi - x->lo != y->hi - y->lo ? (x->hi - x->lo > y->hi - y->lo ? -1 : 1) : 0;
}

static int cmp_start(const slot *x, const slot *y) {
    return x->lo != y->lo ? (x->lo < y->lo ? -1 : 1) : x->root - y->root;
}

/* largest first (ties: longest lifetime) */
static int by_size(const void *a, const void *b) {
    int c = cmp_size(a, b);
    if (!c) c = cmp_span(a, b);
    return c ? c : cmp_start(a, b);
}

/* longest lifetime first (ties: largest) */
static int by_span(const void *a, const void *b) {
    int c = cmp_span(a, b);
    if (!c) c = cmp_size(a, b);
    return c ? c : cmp_start(a, b);
}

/* largest area in the size x lifetime plane first */
static int by_area(const void *a, const void *b) {
    const slot *x = a, *y = b;
    double ax = (double)x->size * (x->hi - x->lo + 1), ay = (double)y->size * (y->hi - y->lo + 1);
    return ax != ay ? (ax > ay ? -1 : 1) : by_size(a, b);
}

static int by_offset(const void *a, const void *b) {
    const slot *x = *(const slot *const *)a, *y = *(const slot *const *)b;
    return x->offset != y->offset ? (x->offset < y->offset ? -1 : 1) : x->root - y->root;
}

/* Greedy with best fit: each slot, in the order of slots[0..n), goes into the smallest gap left
 * between the already placed slots that are live at the same time, or above them all. Returns
 * the workspace size. */
static size_t place(slot *slots, int n, const slot **live) {
    size_t workspace = 0;
    for (int i = 0; i < n; i++) {
        slot *s = &slots[i];
        int m = 0;
        for (int j = 0; j < i; j++)
            if (slots[j].size && slots[j].lo <= s->hi && s->lo <= slots[j].hi)
                live[m++] = &slots[j];
        qsort(live, (size_t)m, sizeof *live, by_offset);
        int64_t best = -1, top = 0;
        size_t best_gap = 0;
        for (int j = 0; j < m; j++) {
            size_t gap = live[j]->offset > top ? (size_t)(live[j]->offset - top) : 0;
            if (gap >= s->size && (best < 0 || gap < best_gap)) {
                best = top;
                best_gap = gap;
            }
            int64_t end = live[j]->offset + (int64_t)live[j]->size;
            if (end > top) top = end;
        }
        s->offset = s->size == 0 ? 0 : best >= 0 ? best : top;
        if ((size_t)s->offset + s->size > workspace) workspace = (size_t)s->offset + s->size;
    }
    return workspace;
}

wpk_status memory_plan_build(wpk_context *ctx, const ir_graph *g, memory_plan *p) {
    memset(p, 0, sizeof *p);
    size_t nv = (size_t)g->nvalues + 1;
    p->nvalues = g->nvalues;
    p->offset = wpk_malloc(nv * sizeof *p->offset);
    p->root = wpk_malloc(nv * sizeof *p->root);
    p->first = wpk_malloc(nv * sizeof *p->first);
    p->last = wpk_malloc(nv * sizeof *p->last);
    p->bytes = wpk_calloc(nv, sizeof *p->bytes);
    group *grp = wpk_calloc(nv, sizeof *grp);
    int64_t *at = wpk_calloc(nv, sizeof *at); /* a value's bytes after its buffer's start */
    slot *slots = wpk_calloc(nv, sizeof *slots);
    const slot **live = wpk_calloc(nv, sizeof *live);
    wpk_status st = WPK_OK;
    if (!p->offset || !p->root || !p->first || !p->last || !p->bytes || !grp || !at || !slots ||
        !live) {
        st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory planning activation memory");
        goto out;
    }
    for (int v = 0; v < g->nvalues; v++) {
        p->offset[v] = -1;
        p->root[v] = p->first[v] = p->last[v] = -1;
    }
    st = liveness(ctx, g, p);
    if (st) goto out;
    share(g, p, grp, at);

    int n = 0;
    for (int v = 0; v < g->nvalues; v++)
        if (p->root[v] == v) {
            slots[n] = (slot){.root = v, .lo = grp[v].first, .hi = grp[v].last};
            grp[v].slot = n++;
        }
    for (int v = 0; v < g->nvalues; v++) {
        int r = p->root[v];
        if (r < 0 || g->values[r].is_const) continue;
        slot *s = &slots[grp[r].slot];
        if (align_up(p->bytes[v]) > s->size) s->size = align_up(p->bytes[v]);
    }
    /* No order wins everywhere (largest-first fragments when a long-lived tensor lands between
     * short ones): place in each, keep the smallest workspace. */
    static int (*const orders[])(const void *, const void *) = {by_size, by_span, by_area};
    for (size_t o = 0; o < sizeof orders / sizeof orders[0]; o++) {
        qsort(slots, (size_t)n, sizeof *slots, orders[o]);
        size_t size = place(slots, n, live);
        if (o == 0 || size < p->workspace) {
            p->workspace = size;
            for (int i = 0; i < n; i++) p->offset[slots[i].root] = slots[i].offset;
        }
    }
    for (int v = 0; v < g->nvalues; v++) {
        int r = p->root[v];
        if (r >= 0 && r != v && !g->values[r].is_const) p->offset[v] = p->offset[r] + at[v];
    }
out:
    wpk_free(at);
    wpk_free(grp);
    wpk_free(slots);
    wpk_free(live);
    if (st) memory_plan_free(p);
    return st;
}
