/* layout.c -- the layout pass: runs convolution chains in the blocked channel layout NCHW[x]c
 * (ops/blocked.h, x = pass_options.vector_floats), with Reorder nodes only at a chain's edges,
 * where that pays.
 *
 * Regions grow in node order. A node joins when it is a conv the blocked kernel takes (2-D
 * Conv or FusedConv with constant weights and known shapes: group 1, depthwise, or groups
 * whose channel counts per group are whole blocks; at least x output channels), or when one of
 * its inputs is already blocked and it can run on blocked tensors:
 *   - elementwise unary ops, and Add/Sub/Mul whose operands have the output's channels and
 *     broadcast only over N, H, W (a squeeze-excitation scale), or are constants that
 *     broadcast per channel (repacked to [1, C/x, 1, 1, x]): blocked tensors line up element
 *     for element and broadcast over N, H, W alike, so the NCHW kernels serve unchanged;
 *   - Pad of H and W (pads input constant): the same Pad with a zero pad for the lane dim;
 *   - MaxPool and AveragePool (2-D) become MaxPoolNCHWc and AveragePoolNCHWc with the same
 *     attributes (ops/blocked_pool.c); GlobalAveragePool and GlobalMaxPool become those with
 *     an H x W window;
 *   - Concat along channels when every input's channels are a whole number of blocks.
 * Connected nodes form a region. Where a region reads an NCHW tensor it gets a Reorder to
 * blocked (one per tensor); a conv whose NCHW input has fewer channels than a block (the RGB
 * stem) reads it directly instead, as padding three channels to x would waste most of its
 * work. Every region value that something outside reads, or that is a graph output, gets a
 * Reorder back under its old name, so the rest of the graph is untouched.
 *
 * The cost rule: a region is kept when its convs' multiply-adds are at least PAYS_RATIO times
 * the elements its Reorders move. Measured on this code (bench/layout_conv.py): a Reorder
 * costs about 0.4-0.6 ns per element, and the blocked conv saves about 0.35 ns per
 * multiply-add over the NCHW one (5 -> 40+ GFLOP/s), so the break-even is near 2; 8 leaves
 * room for shapes the blocked kernel does less well. A lone 3x3 depthwise conv (4.5) stays.
 *
 * Channel counts that are not a whole number of blocks are padded: the lanes past C hold
 * zeros, which Reorder writes and ConvNCHWc keeps (zero weights in, zeroed after the
 * epilogue). Ops in a region must keep them zero, so a padded tensor only flows through ops
 * that map zero to zero (not Sigmoid, HardSigmoid, or a Clip that excludes 0).
 *
 * The pass declines (leaves nodes in NCHW) where C, H or W is not known (a symbolic batch is
 * fine), for convs with non-constant weights, 1-D/3-D convs, depthwise convs with a channel
 * multiplier, groups whose per-group channel counts are not whole blocks, and convs with
 * fewer output channels than a block. */
#include "passes/pass.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "ops/blocked.h"

#define PAYS_RATIO 8.0
#define Z_INPUT 3
#define WPK_OPSET 1

typedef enum role { ROLE_NONE, ROLE_CONV, ROLE_FOLLOW } role;

/* What the rewrite needs to know about one conv of a region. */
typedef struct conv_plan {
    int64_t cin, cout, kh, kw, group, pads[4];
    bool depthwise, direct; /* direct: reads its NCHW input without a Reorder */
    double macs;
} conv_plan;

typedef struct layout {
    ir_graph *g;
    int x;
    role *role;        /* per node */
    int *parent;       /* per node: union-find of regions */
    bool *keep;        /* per node (indexed by region root): the region pays */
    conv_plan *plan;   /* per node, for ROLE_CONV */
    bool *in_region;   /* per value: produced by a region node */
    int *blocked;      /* per value: its blocked twin (a region value's new name, or the output
                          of an entry Reorder), -1 before it exists */
    int *producer;     /* per value: the node writing it, -1 for inputs and constants */
    int nnodes;        /* nodes before the pass added any */
    int *place;        /* per added node: where it goes (see place_nodes) */
    int anchor;        /* the place of an entry Reorder made now */
} layout;

/* ---- reading the graph ---- */

static const ir_tensor *type_of(const ir_graph *g, int v) { return &g->values[v].t; }

/* v is a float32 [N, C, H, W] tensor whose C, H and W are known; N may be symbolic (-1): the
 * blocked ops take it at run time, and the cost rule compares work per image. */
static bool known_4d(const ir_graph *g, int v) {
    if (v < 0) return false;
    const ir_tensor *t = type_of(g, v);
    return t->dtype == WPK_DTYPE_FLOAT32 && t->ndim == 4 && t->dims[0] != 0 && t->dims[1] > 0 &&
           t->dims[2] > 0 && t->dims[3] > 0;
}

/* Elements of one image of a 4-D tensor. */
static double per_image(const ir_graph *g, int v) {
    const ir_tensor *t = type_of(g, v);
    return (double)(t->dims[1] * t->dims[2] * t->dims[3]);
}

/* The float32 data of v when it is fixed before running: an initializer or a Constant node's
 * value. NULL otherwise. */
static const ir_tensor *const_f32(const ir_graph *g, int v) {
    if (v < 0) return NULL;
    const ir_value *val = &g->values[v];
    const ir_tensor *t = NULL;
    if (val->is_const) {
        t = &val->t;
    } else if (val->producer >= 0 && val->producer < g->nnodes &&
               g->nodes[val->producer].op == IR_OP_CONSTANT &&
               g->nodes[val->producer].out[0] == v) {
        const ir_attr *a = ir_attr_find(&g->nodes[val->producer], "value");
        if (a && a->kind == IR_ATTR_TENSOR) t = a->t;
    }
    return t && t->dtype == WPK_DTYPE_FLOAT32 && t->data ? t : NULL;
}

/* Two positive ints from attribute `name` (absent or empty: def); false when malformed. */
static bool two_ints(const ir_node *n, const char *name, int64_t def, int64_t out[2]) {
    const ir_attr *a = ir_attr_find(n, name);
    out[0] = out[1] = def;
    if (!a || (a->kind == IR_ATTR_INTS && a->n == 0)) return true;
    if (a->kind != IR_ATTR_INTS || a->n != 2 || a->ints[0] < 1 || a->ints[1] < 1) return false;
    out[0] = a->ints[0];
    out[1] = a->ints[1];
    return true;
}

/* The begin/end pads of a conv from its attributes, checked against the shapes inference
 * gave (in -> out). pads: [h0, w0, h1, w1] as ONNX orders them. */
static bool resolve_pads(const ir_node *n, const int64_t *in, const int64_t *out,
                         const int64_t *k, const int64_t *s, const int64_t *d, int64_t pads[4]) {
    const char *mode = ir_attr_str(n, "auto_pad", "NOTSET");
    bool same_upper = !strcmp(mode, "SAME_UPPER"), same_lower = !strcmp(mode, "SAME_LOWER");
    if (!strcmp(mode, "NOTSET") || !mode[0]) {
        int count;
        const int64_t *p = ir_attr_ints(n, "pads", &count);
        if (p && count != 4 && count != 0) return false;
        for (int i = 0; i < 4; i++) pads[i] = p && count ? p[i] : 0;
    } else if (!strcmp(mode, "VALID")) {
        memset(pads, 0, 4 * sizeof(int64_t));
    } else if (same_upper || same_lower) {
        for (int i = 0; i < 2; i++) {
            int64_t total = (out[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in[i];
            if (total < 0) total = 0;
            pads[i] = same_upper ? total / 2 : total - total / 2;
            pads[2 + i] = total - pads[i];
        }
    } else {
        return false;
    }
    for (int i = 0; i < 2; i++) {
        int64_t span = (k[i] - 1) * d[i] + 1, padded = in[i] + pads[i] + pads[2 + i];
        if (pads[i] < 0 || pads[2 + i] < 0 || padded < span ||
            (padded - span) / s[i] + 1 != out[i])
            return false;
    }
    return true;
}

/* Whether conv node n can run as ConvNCHWc with block x; fills *p. */
static bool conv_ok(const ir_graph *g, const ir_node *n, int64_t x, conv_plan *p) {
    if (n->op != IR_OP_CONV && n->op != IR_OP_FUSED_CONV) return false;
    if (n->nin < 2 || n->nout != 1 || n->nin > Z_INPUT + 1) return false;
    int xv = n->in[0], yv = n->out[0];
    if (!known_4d(g, xv) || !known_4d(g, yv)) return false;
    const ir_tensor *w = const_f32(g, n->in[1]);
    if (!w || w->ndim != 4) return false;
    if (n->nin > 2 && n->in[2] >= 0) {
        const ir_tensor *b = type_of(g, n->in[2]);
        if (b->dtype != WPK_DTYPE_FLOAT32 || b->ndim != 1 || b->dims[0] != w->dims[0])
            return false;
    }
    const ir_tensor *xt = type_of(g, xv), *yt = type_of(g, yv);
    if (n->nin > Z_INPUT && n->in[Z_INPUT] >= 0 &&
        !(known_4d(g, n->in[Z_INPUT]) && ir_same_shape(type_of(g, n->in[Z_INPUT]), yt)))
        return false;
    memset(p, 0, sizeof *p);
    p->cin = xt->dims[1];
    p->cout = w->dims[0];
    p->kh = w->dims[2];
    p->kw = w->dims[3];
    p->group = ir_attr_int(n, "group", 1);
    if (p->group < 1 || p->cin % p->group || p->cout % p->group || yt->dims[1] != p->cout ||
        w->dims[1] * p->group != p->cin)
        return false;
    int64_t k[2] = {p->kh, p->kw}, s[2], d[2];
    int count;
    const int64_t *ks = ir_attr_ints(n, "kernel_shape", &count);
    if (ks && count && (count != 2 || ks[0] != p->kh || ks[1] != p->kw)) return false;
    if (!two_ints(n, "strides", 1, s) || !two_ints(n, "dilations", 1, d) ||
        !resolve_pads(n, xt->dims + 2, yt->dims + 2, k, s, d, p->pads))
        return false;
    int64_t cin_g = p->cin / p->group, cout_g = p->cout / p->group;
    p->depthwise = p->group > 1 && cin_g == 1 && cout_g == 1;
    if (p->group > 1 && !p->depthwise && (cin_g % x || cout_g % x)) return false;
    /* Fewer output channels than a block would waste most of every lane. */
    if (p->cout < x) return false;
    p->macs = (double)(p->cout * cin_g * p->kh * p->kw) * (double)(yt->dims[2] * yt->dims[3]);
    return true;
}

/* Unary ops that run on blocked tensors as they are, and whether they map 0 to 0 (keeping
 * padded lanes zero). */
static bool unary_ok(const ir_graph *g, const ir_node *n, bool padded) {
    switch (n->op) {
    case IR_OP_RELU: case IR_OP_LEAKY_RELU: case IR_OP_HARD_SWISH: case IR_OP_TANH:
    case IR_OP_NEG: case IR_OP_ABS: case IR_OP_GELU: case IR_OP_ERF:
        return true;
    case IR_OP_SIGMOID: case IR_OP_HARD_SIGMOID:
        return !padded;
    case IR_OP_CLIP: {
        float lo = -INFINITY, hi = INFINITY;
        for (int i = 1; i < n->nin && i < 3; i++) {
            if (n->in[i] < 0) continue;
            const ir_tensor *t = const_f32(g, n->in[i]);
            if (!t || ir_numel(t) != 1) return false;
            *(i == 1 ? &lo : &hi) = ((const float *)t->data)[0];
        }
        return !padded || (lo <= 0.0f && hi >= 0.0f);
    }
    default: return false;
    }
}

/* A constant that broadcasts against [N, C, H, W] per channel or as a scalar. */
static bool per_channel_const(const ir_graph *g, int v, int64_t c) {
    const ir_tensor *t = const_f32(g, v);
    if (!t || t->ndim > 4) return false;
    for (int i = 0; i < t->ndim; i++) {
        int pos = 4 - t->ndim + i;
        if (t->dims[i] != 1 && !(pos == 1 && t->dims[i] == c)) return false;
    }
    return true;
}

/* A 4-D operand of an elementwise op with output y that runs blocked: y's channels exactly
 * (lanes cannot broadcast), N, H and W each y's or 1 (they broadcast the same way blocked). */
static bool channel_operand(const ir_graph *g, int v, const ir_tensor *y) {
    if (!known_4d(g, v)) return false;
    const ir_tensor *t = type_of(g, v);
    if (t->dims[1] != y->dims[1]) return false;
    for (int i = 0; i < 4; i += i == 0 ? 2 : 1)
        if (t->dims[i] != y->dims[i] && t->dims[i] != 1) return false;
    return true;
}

/* The pads of a Pad node: constant, 8 of them (no `axes`), none on N or C. */
static const int64_t *pad_amounts(const ir_graph *g, const ir_node *n) {
    if (n->nin < 2 || n->in[1] < 0 || (n->nin > 3 && n->in[3] >= 0)) return NULL;
    const ir_value *p = &g->values[n->in[1]];
    if (!p->is_const || p->t.dtype != WPK_DTYPE_INT64 || ir_numel(&p->t) != 8) return NULL;
    const int64_t *v = p->t.data;
    return v[0] || v[1] || v[4] || v[5] ? NULL : v;
}

/* Pad of H and W runs blocked in every mode (the lane dim is not padded); padding with a
 * constant other than 0 would put it into padded lanes too. */
static bool pad_ok(const ir_graph *g, const ir_node *n, bool padded) {
    if (!pad_amounts(g, n)) return false;
    if (n->nin > 2 && n->in[2] >= 0 && padded &&
        strcmp(ir_attr_str(n, "mode", "constant"), "constant") == 0) {
        const ir_tensor *c = const_f32(g, n->in[2]);
        return c && ir_numel(c) == 1 && ((const float *)c->data)[0] == 0.0f;
    }
    return true;
}

/* Whether node n can run on blocked tensors, given which values are blocked so far. */
static bool follower_ok(const layout *L, const ir_node *n) {
    const ir_graph *g = L->g;
    if (n->nout < 1 || !known_4d(g, n->out[0])) return false;
    for (int o = 1; o < n->nout; o++)
        if (n->out[o] >= 0) return false; /* MaxPool's Indices */
    const ir_tensor *y = type_of(g, n->out[0]);
    bool padded = y->dims[1] % L->x != 0;
    int x0 = n->nin > 0 ? n->in[0] : -1;
    switch (n->op) {
    case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: {
        if (n->nin != 2) return false;
        bool any = false;
        for (int i = 0; i < 2; i++) {
            int v = n->in[i];
            if (v < 0) return false;
            if (per_channel_const(g, v, y->dims[1])) continue;
            if (!channel_operand(g, v, y)) return false;
            any |= L->in_region[v];
        }
        return any;
    }
    case IR_OP_PAD:
        return x0 >= 0 && L->in_region[x0] && known_4d(g, x0) && pad_ok(g, n, padded);
    case IR_OP_MAX_POOL: case IR_OP_AVERAGE_POOL: {
        int count;
        ir_attr_ints(n, "kernel_shape", &count);
        return x0 >= 0 && L->in_region[x0] && known_4d(g, x0) && count == 2;
    }
    case IR_OP_GLOBAL_AVERAGE_POOL: case IR_OP_GLOBAL_MAX_POOL:
        return x0 >= 0 && L->in_region[x0] && known_4d(g, x0);
    case IR_OP_CONCAT: {
        int64_t axis = ir_attr_int(n, "axis", 1);
        if (axis != 1 && axis != -3) return false;
        bool any = false;
        for (int i = 0; i < n->nin; i++) {
            int v = n->in[i];
            if (!known_4d(g, v) || type_of(g, v)->dims[1] % L->x) return false;
            any |= L->in_region[v];
        }
        return any && !padded;
    }
    default:
        return x0 >= 0 && L->in_region[x0] && known_4d(g, x0) &&
               ir_same_shape(type_of(g, x0), y) && unary_ok(g, n, padded);
    }
}

/* ---- regions ---- */

static int find(int *parent, int k) {
    while (parent[k] != k) k = parent[k] = parent[parent[k]];
    return k;
}

/* Mark region nodes in node order, join connected ones, and keep the regions that pay. */
static wpk_status find_regions(wpk_context *ctx, layout *L) {
    ir_graph *g = L->g;
    for (int k = 0; k < g->nnodes; k++) {
        ir_node *n = &g->nodes[k];
        L->parent[k] = k;
        if (n->dead) continue;
        if (conv_ok(g, n, L->x, &L->plan[k])) L->role[k] = ROLE_CONV;
        else if (follower_ok(L, n)) L->role[k] = ROLE_FOLLOW;
        else continue;
        L->in_region[n->out[0]] = true;
        for (int i = 0; i < n->nin; i++) {
            int v = n->in[i];
            if (v >= 0 && L->in_region[v]) {
                int a = find(L->parent, k), b = find(L->parent, L->producer[v]);
                L->parent[a] = b;
            }
        }
    }
    /* A conv reads its NCHW input directly (no entry Reorder) when padding it would waste most
     * of a block: fewer input channels than a block, group 1. */
    for (int k = 0; k < g->nnodes; k++) {
        conv_plan *p = &L->plan[k];
        if (L->role[k] == ROLE_CONV)
            p->direct = !L->in_region[g->nodes[k].in[0]] && p->group == 1 && p->cin < L->x;
    }
    /* Per region: conv work against elements reordered at the entries and exits, per image. */
    double *macs = wpk_calloc((size_t)g->nnodes + 1, sizeof(double));
    double *moved = wpk_calloc((size_t)g->nnodes + 1, sizeof(double));
    int *entered = wpk_malloc(sizeof(int) * ((size_t)g->nvalues + 1));
    if (!macs || !moved || !entered) {
        wpk_free(macs), wpk_free(moved), wpk_free(entered);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory in the layout pass");
    }
    for (int v = 0; v < g->nvalues; v++) entered[v] = -1;
    for (int k = 0; k < g->nnodes; k++) {
        if (L->role[k] == ROLE_NONE) continue;
        const ir_node *n = &g->nodes[k];
        int r = find(L->parent, k);
        if (L->role[k] == ROLE_CONV) macs[r] += L->plan[k].macs;
        for (int i = 0; i < n->nin; i++) {
            int v = n->in[i];
            if (v < 0 || L->in_region[v] || !known_4d(g, v) || entered[v] == r) continue;
            if (L->role[k] == ROLE_CONV && (i == 1 || i == 2 || (i == 0 && L->plan[k].direct)))
                continue;
            if (L->role[k] == ROLE_FOLLOW &&
                per_channel_const(g, v, type_of(g, n->out[0])->dims[1]))
                continue; /* repacked at compile time */
            entered[v] = r;
            moved[r] += per_image(g, v);
        }
    }
    for (int v = 0; v < g->nvalues; v++) {
        if (!L->in_region[v]) continue;
        bool outside = ir_graph_is_output(g, v);
        for (int k = 0; k < g->nnodes && !outside; k++) {
            if (g->nodes[k].dead || L->role[k] != ROLE_NONE) continue;
            for (int i = 0; i < g->nodes[k].nin; i++) outside |= g->nodes[k].in[i] == v;
        }
        if (outside) moved[find(L->parent, L->producer[v])] += per_image(g, v);
    }
    for (int k = 0; k < g->nnodes; k++)
        if (L->role[k] != ROLE_NONE && find(L->parent, k) == k)
            L->keep[k] = macs[k] > 0 && macs[k] >= PAYS_RATIO * moved[k];
    for (int k = 0; k < g->nnodes; k++)
        if (L->role[k] != ROLE_NONE && !L->keep[find(L->parent, k)]) L->role[k] = ROLE_NONE;
    for (int v = 0; v < g->nvalues; v++)
        if (L->in_region[v]) L->in_region[v] = L->role[L->producer[v]] != ROLE_NONE;
    wpk_free(macs), wpk_free(moved), wpk_free(entered);
    return WPK_OK;
}

/* ---- rewriting ---- */

/* A new value named after base, typed float32 [dims]; -1 when out of memory. */
static int new_value(ir_graph *g, const char *base, int ndim, const int64_t *dims) {
    int64_t shape[WPK_MAX_DIMS]; /* dims may point into the value table, which may move */
    memcpy(shape, dims, sizeof(int64_t) * (size_t)ndim);
    const char *name = ir_graph_unique_name(g, base);
    int v = name ? ir_graph_add_value(g, name) : -1;
    if (v < 0) return -1;
    ir_tensor *t = &g->values[v].t;
    t->dtype = WPK_DTYPE_FLOAT32;
    t->ndim = ndim;
    memcpy(t->dims, shape, sizeof(int64_t) * (size_t)ndim);
    return v;
}

/* The blocked shape of an NCHW 4-D shape. */
static void blocked_dims(const int64_t *nchw, int64_t x, int64_t out[5]) {
    out[0] = nchw[0];
    out[1] = (nchw[1] + x - 1) / x;
    out[2] = nchw[2];
    out[3] = nchw[3];
    out[4] = x;
}

static char *suffixed(const char *name, const char *suffix, char *buf, size_t size) {
    snprintf(buf, size, "%s%s", name, suffix);
    return buf;
}

/* A Reorder node from -> to (both existing values), to go at `place` (see place_nodes). */
static wpk_status add_reorder(wpk_context *ctx, layout *L, int from, int to, bool to_blocked,
                              int64_t channels, int place) {
    ir_graph *g = L->g;
    char buf[512];
    /* named after the NCHW side */
    suffixed(g->values[to_blocked ? from : to].name, to_blocked ? "_to_nchwc" : "_to_nchw", buf,
             sizeof buf);
    int k = ir_graph_add_node(g, buf, "Reorder", "wpk", WPK_OPSET, 1, 1);
    if (k < 0) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory adding a Reorder");
    L->place[k - L->nnodes] = place;
    ir_node *n = &g->nodes[k];
    n->in[0] = from;
    n->out[0] = to;
    wpk_status st = ir_node_set_str(g, n, "to", to_blocked ? "NCHWc" : "NCHW");
    if (!st) st = ir_node_set_int(g, n, "block", L->x);
    if (!st && !to_blocked) st = ir_node_set_int(g, n, "channels", channels);
    return st ? wpk_error(ctx, st, "out of memory adding a Reorder") : WPK_OK;
}

/* The blocked twin of NCHW value v read at a region's entry: a Reorder made once. */
static wpk_status entry(wpk_context *ctx, layout *L, int v, int *out) {
    ir_graph *g = L->g;
    if (L->blocked[v] < 0) {
        char buf[512];
        int64_t dims[5];
        blocked_dims(type_of(g, v)->dims, L->x, dims);
        int b = new_value(g, suffixed(g->values[v].name, "_nchwc", buf, sizeof buf), 5, dims);
        if (b < 0) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory adding a value");
        L->blocked[v] = b;
        wpk_status st = add_reorder(ctx, L, v, b, true, 0, L->anchor);
        if (st) return st;
    }
    *out = L->blocked[v];
    return WPK_OK;
}

/* A float32 constant named after base, with the data of t (copied). */
static int add_const(ir_graph *g, const char *base, const ir_tensor *t) {
    const char *name = ir_graph_unique_name(g, base);
    return name ? ir_graph_add_const(g, name, t) : -1;
}

/* A per-channel (or scalar) constant as [1, C/x, 1, 1, x], zero in padded lanes. */
static wpk_status repack_const(wpk_context *ctx, layout *L, int v, int64_t c, int *out) {
    ir_graph *g = L->g;
    const ir_tensor *t = const_f32(g, v);
    int64_t x = L->x, cb = (c + x - 1) / x;
    ir_tensor p = {.dtype = WPK_DTYPE_FLOAT32, .ndim = 5, .dims = {1, cb, 1, 1, x}};
    float *d = wpk_calloc((size_t)(cb * x), sizeof(float));
    if (!d) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory repacking a constant");
    const float *src = t->data;
    bool scalar = ir_numel(t) == 1;
    for (int64_t i = 0; i < c; i++) d[i] = src[scalar ? 0 : i];
    p.data = d;
    char buf[512];
    *out = add_const(g, suffixed(g->values[v].name, "_nchwc", buf, sizeof buf), &p);
    wpk_free(d);
    return *out < 0 ? wpk_error(ctx, WPK_ERR_NOMEM, "out of memory repacking a constant")
                    : WPK_OK;
}

/* Input i of region node k, rewritten: its blocked twin. */
static wpk_status blocked_input(wpk_context *ctx, layout *L, int k, int i) {
    int v = L->g->nodes[k].in[i], b = -1;
    if (L->in_region[v]) {
        L->g->nodes[k].in[i] = L->blocked[v];
        return WPK_OK;
    }
    wpk_status st = entry(ctx, L, v, &b);
    if (!st) L->g->nodes[k].in[i] = b;
    return st;
}

static wpk_status rewrite_conv(wpk_context *ctx, layout *L, int k) {
    ir_graph *g = L->g;
    const conv_plan *p = &L->plan[k];
    wpk_status st = WPK_OK;
    if (!p->direct) st = blocked_input(ctx, L, k, 0);
    if (!st && L->g->nodes[k].nin > Z_INPUT && L->g->nodes[k].in[Z_INPUT] >= 0)
        st = blocked_input(ctx, L, k, Z_INPUT);
    if (st) return st;
    int64_t bi = p->direct ? 1 : L->x, dims[6], cin_g = p->cin / p->group;
    blocked_weight_dims(p->cout, cin_g, p->kh, p->kw, bi, L->x, p->depthwise, dims);
    ir_tensor packed = {.dtype = WPK_DTYPE_FLOAT32, .ndim = 6};
    memcpy(packed.dims, dims, sizeof dims);
    packed.data = wpk_malloc(ir_nbytes(&packed));
    if (!packed.data) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory packing weights");
    const ir_tensor *w = const_f32(g, g->nodes[k].in[1]);
    blocked_pack_weights(w->data, p->cout, cin_g, p->kh, p->kw, bi, L->x, p->depthwise,
                         packed.data);
    char buf[512];
    int wv = add_const(g, suffixed(g->values[g->nodes[k].in[1]].name, "_nchwc", buf, sizeof buf),
                       &packed);
    wpk_free(packed.data);
    if (wv < 0) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory packing weights");
    ir_node *n = &g->nodes[k];
    n->in[1] = wv;
    ir_node_set_op(n, IR_OP_CONV_NCHWC);
    n->opset = WPK_OPSET;
    ir_node_remove_attr(n, "auto_pad");
    st = ir_node_set_ints(g, n, "pads", p->pads, 4);
    if (!st) st = ir_node_set_int(g, n, "channels", p->cout);
    return st ? wpk_error(ctx, st, "out of memory rewriting a conv") : WPK_OK;
}

static wpk_status rewrite_follower(wpk_context *ctx, layout *L, int k) {
    ir_graph *g = L->g;
    ir_node *n = &g->nodes[k];
    wpk_status st = WPK_OK;
    int64_t c = type_of(g, n->out[0])->dims[1];
    switch (n->op) {
    case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL:
        for (int i = 0; i < 2 && !st; i++) {
            int v = g->nodes[k].in[i], b = -1;
            if (!per_channel_const(g, v, c)) {
                st = blocked_input(ctx, L, k, i);
            } else if (!(st = repack_const(ctx, L, v, c, &b))) {
                g->nodes[k].in[i] = b;
            }
        }
        return st;
    case IR_OP_PAD: {
        const int64_t *p = pad_amounts(g, n);
        int64_t pads[10] = {0, 0, p[2], p[3], 0, 0, 0, p[6], p[7], 0};
        ir_tensor t = {.dtype = WPK_DTYPE_INT64, .ndim = 1, .dims = {10}, .data = pads};
        char buf[512];
        int pv = add_const(g, suffixed(g->values[n->in[1]].name, "_nchwc", buf, sizeof buf), &t);
        if (pv < 0) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory rewriting a Pad");
        g->nodes[k].in[1] = pv;
        return blocked_input(ctx, L, k, 0);
    }
    case IR_OP_MAX_POOL: case IR_OP_AVERAGE_POOL:
        ir_node_set_op(n, n->op == IR_OP_MAX_POOL ? IR_OP_MAX_POOL_NCHWC
                                                  : IR_OP_AVERAGE_POOL_NCHWC);
        n->opset = WPK_OPSET;
        ir_node_remove_attr(n, "storage_order"); /* it orders the Indices output, absent here */
        return blocked_input(ctx, L, k, 0);
    case IR_OP_GLOBAL_AVERAGE_POOL: case IR_OP_GLOBAL_MAX_POOL: {
        const ir_tensor *t = type_of(g, n->in[0]);
        int64_t window[2] = {t->dims[2], t->dims[3]};
        ir_node_set_op(n, n->op == IR_OP_GLOBAL_MAX_POOL ? IR_OP_MAX_POOL_NCHWC
                                                         : IR_OP_AVERAGE_POOL_NCHWC);
        n->opset = WPK_OPSET;
        if ((st = ir_node_set_ints(g, n, "kernel_shape", window, 2)))
            return wpk_error(ctx, st, "out of memory rewriting a pool");
        return blocked_input(ctx, L, k, 0);
    }
    case IR_OP_CONCAT:
        for (int i = 0; i < n->nin && !st; i++) st = blocked_input(ctx, L, k, i);
        if (!st && (st = ir_node_set_int(g, &g->nodes[k], "axis", 1)))
            return wpk_error(ctx, st, "out of memory rewriting a Concat");
        return st;
    default: /* unary: X only; Clip's bounds stay scalars */
        return blocked_input(ctx, L, k, 0);
    }
}

/* Node order: each entry Reorder just before the first node reading its output, each exit
 * Reorder just after the node it copies, so blocked and NCHW copies live no longer than they
 * must. Places: 3k for entries before original node k, 3k + 1 for node k, 3k + 2 for exits
 * after it; a stable sort by place. */
static wpk_status place_nodes(wpk_context *ctx, layout *L) {
    ir_graph *g = L->g;
    int n = g->nnodes;
    ir_node *sorted = wpk_malloc(sizeof(ir_node) * ((size_t)n + 1));
    int *count = wpk_calloc(3 * (size_t)L->nnodes + 4, sizeof(int));
    if (!sorted || !count) {
        wpk_free(sorted), wpk_free(count);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory ordering nodes");
    }
    /* a counting sort: stable, and places are small */
    for (int k = 0; k < n; k++) count[(k < L->nnodes ? 3 * k + 1 : L->place[k - L->nnodes]) + 1]++;
    for (int p = 1; p < 3 * L->nnodes + 4; p++) count[p] += count[p - 1];
    for (int k = 0; k < n; k++)
        sorted[count[k < L->nnodes ? 3 * k + 1 : L->place[k - L->nnodes]]++] = g->nodes[k];
    memcpy(g->nodes, sorted, sizeof(ir_node) * (size_t)n);
    wpk_free(sorted), wpk_free(count);
    return ir_graph_toposort(ctx, g);
}

static wpk_status rewrite(wpk_context *ctx, layout *L, int *changed) {
    ir_graph *g = L->g;
    int nvalues = g->nvalues, nnodes = g->nnodes;
    char buf[512];
    /* every region value gets its blocked twin first, so inputs can be pointed at them */
    for (int v = 0; v < nvalues; v++) {
        if (!L->in_region[v]) continue;
        int64_t dims[5];
        blocked_dims(type_of(g, v)->dims, L->x, dims);
        int b = new_value(g, suffixed(g->values[v].name, "_nchwc", buf, sizeof buf), 5, dims);
        if (b < 0) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory adding a value");
        L->blocked[v] = b;
    }
    for (int k = 0; k < nnodes; k++) {
        if (L->role[k] == ROLE_NONE) continue;
        int y = g->nodes[k].out[0];
        L->anchor = 3 * k;
        wpk_status st = L->role[k] == ROLE_CONV ? rewrite_conv(ctx, L, k)
                                                : rewrite_follower(ctx, L, k);
        if (st) return st;
        g->nodes[k].out[0] = L->blocked[y];
        (*changed)++;
    }
    /* exits: what outside the regions still reads gets an NCHW copy under the old name */
    for (int v = 0; v < nvalues; v++) {
        if (!L->in_region[v] || ir_graph_count_uses(g, v) == 0) continue;
        wpk_status st = add_reorder(ctx, L, L->blocked[v], v, false, type_of(g, v)->dims[1],
                                    3 * L->producer[v] + 2);
        if (st) return st;
    }
    *changed += g->nnodes - nnodes;
    return *changed ? place_nodes(ctx, L) : WPK_OK;
}

wpk_status pass_layout(wpk_context *ctx, ir_graph *g, const pass_options *opt, int *changed) {
    *changed = 0;
    if (!blocked_block_ok(opt->vector_floats) || g->nnodes == 0) return WPK_OK;
    layout L = {.g = g, .x = opt->vector_floats};
    size_t nn = (size_t)g->nnodes + 1, nv = (size_t)g->nvalues + 1;
    L.role = wpk_calloc(nn, sizeof *L.role);
    L.parent = wpk_calloc(nn, sizeof *L.parent);
    L.keep = wpk_calloc(nn, sizeof *L.keep);
    L.plan = wpk_calloc(nn, sizeof *L.plan);
    L.in_region = wpk_calloc(nv, sizeof *L.in_region);
    L.blocked = wpk_malloc(nv * sizeof *L.blocked);
    L.producer = wpk_malloc(nv * sizeof *L.producer);
    L.place = wpk_malloc(2 * nv * sizeof *L.place); /* at most one entry and one exit per value */
    L.nnodes = g->nnodes;
    wpk_status st = WPK_OK;
    if (!L.role || !L.parent || !L.keep || !L.plan || !L.in_region || !L.blocked || !L.producer ||
        !L.place) {
        st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory in the layout pass");
        goto out;
    }
    for (size_t v = 0; v < nv; v++) L.blocked[v] = L.producer[v] = -1;
    for (int k = 0; k < g->nnodes; k++)
        for (int o = 0; o < g->nodes[k].nout && !g->nodes[k].dead; o++)
            if (g->nodes[k].out[o] >= 0) L.producer[g->nodes[k].out[o]] = k;
    st = find_regions(ctx, &L);
    if (!st) st = rewrite(ctx, &L, changed);
out:
    wpk_free(L.role), wpk_free(L.parent), wpk_free(L.keep), wpk_free(L.plan);
    wpk_free(L.in_region), wpk_free(L.blocked), wpk_free(L.producer), wpk_free(L.place);
    return st;
}
