/* fold_batchnorm.c -- BatchNormalization folding into Conv/Gemm/MatMul, or into a per-channel scale+shift.
 *
 * Inference BN is y = x * a + b per channel c (dim 1), with a = scale / sqrt(var + eps) and
 * b = B - mean * a. When x comes from a Conv, ConvTranspose, Gemm or MatMul with constant
 * weights whose output only the BN reads, a and b fold into the weights (scaled per output
 * channel) and the bias: the BN disappears and the result is standard ONNX. Any other BN with
 * constant statistics becomes Mul(x, a) -> Add(., b) with [C, 1, ..., 1] constants (DenseNet's
 * BN before ReLU -> Conv, or a BN whose conv output has other readers). A BN with non-constant
 * parameters, an unknown input rank, training outputs or per-position statistics (spatial = 0)
 * is left as it is.
 *
 * a and b are computed in double from the float parameters, as the BN reference kernel does,
 * so the scale+shift form computes bit for bit what the BN did. */
#include "passes/pass.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

/* The float32 data of v when it is fixed before running: an initializer, or the value of a
 * Constant node (when constant folding has not turned it into one yet). NULL otherwise. */
static const ir_tensor *const_f32(const ir_graph *g, int v) {
    if (v < 0) return NULL;
    const ir_value *val = &g->values[v];
    const ir_tensor *t = NULL;
    if (val->is_const) {
        t = &val->t;
    } else if (val->producer >= 0 && g->nodes[val->producer].op == IR_OP_CONSTANT &&
               !g->nodes[val->producer].dead) {
        const ir_attr *a = ir_attr_find(&g->nodes[val->producer], "value");
        if (a && a->kind == IR_ATTR_TENSOR) t = a->t;
    }
    return t && t->dtype == WPK_DTYPE_FLOAT32 && t->data ? t : NULL;
}

/* A new float32 constant named after base (made unique), its data in the graph's arena and
 * returned in *data for the caller to fill. -1 when out of memory. */
static int new_const(ir_graph *g, const char *base, int ndim, const int64_t *dims, float **data) {
    int64_t shape[WPK_MAX_DIMS]; /* dims may point into the value table, which may move */
    for (int i = 0; i < ndim; i++) shape[i] = dims[i];
    const char *name = ir_graph_unique_name(g, base);
    int v = name ? ir_graph_add_value(g, name) : -1;
    if (v < 0) return -1;
    ir_tensor *t = &g->values[v].t;
    t->dtype = WPK_DTYPE_FLOAT32;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->dims[i] = shape[i];
    *data = arena_alloc(&g->mem, ir_nbytes(t) + sizeof(float));
    if (!*data) return -1;
    t->data = *data;
    g->values[v].is_const = true;
    return v;
}

static const char *suffixed(char *buf, size_t cap, const char *name, const char *suffix) {
    snprintf(buf, cap, "%.400s%s", name, suffix);
    return buf;
}

/* The BN as y = x * a[c] + b[c]: c channels, a and b (owned by the caller) in double. */
typedef struct affine {
    int64_t c;
    double *a, *b;
} affine;

/* Fill f from BN node n; false (decline) when it is not an inference BN with constant
 * per-channel parameters. */
static bool bn_affine(const ir_graph *g, const ir_node *n, affine *f) {
    if (n->nin < 5 || n->in[0] < 0) return false;
    if (n->opset >= 14 && ir_attr_int(n, "training_mode", 0) != 0) return false;
    for (int i = 1; i < n->nout; i++)
        if (n->out[i] >= 0 && ir_graph_count_uses(g, n->out[i]) > 0) return false;
    const ir_tensor *p[4];
    for (int i = 0; i < 4; i++)
        if (!(p[i] = const_f32(g, n->in[1 + i]))) return false;
    int64_t c = ir_numel(p[0]);
    for (int i = 1; i < 4; i++)
        if (ir_numel(p[i]) != c) return false;
    /* spatial = 0 (before opset 9): statistics per channel and position, unless there is no
     * position to speak of */
    const ir_tensor *x = &g->values[n->in[0]].t;
    bool spatial = n->opset >= 9 || ir_attr_int(n, "spatial", 1) != 0;
    if (!spatial && (x->dtype == WPK_DTYPE_UNDEFINED || x->ndim != 2)) return false;
    if (x->dtype != WPK_DTYPE_UNDEFINED && x->ndim >= 2 && x->dims[1] >= 0 && x->dims[1] != c)
        return false;
    const float *scale = p[0]->data, *bias = p[1]->data, *mean = p[2]->data, *var = p[3]->data;
    const double eps = ir_attr_float(n, "epsilon", 1e-5f);
    f->c = c;
    for (int64_t i = 0; i < c; i++) {
        f->a[i] = scale[i] / sqrt((double)var[i] + eps);
        f->b[i] = bias[i] - mean[i] * f->a[i];
    }
    return true;
}

/* The bias after folding: B' = B * a + b, B from the node's bias input (absent: 0), one value
 * per channel. Returns the new constant, -1 when out of memory, -2 when the bias is there but
 * not a constant of c values. */
static int fold_bias(ir_graph *g, const ir_node *n, int slot, const affine *f) {
    const ir_tensor *old = NULL;
    if (slot < n->nin && n->in[slot] >= 0) {
        old = const_f32(g, n->in[slot]);
        if (!old || ir_numel(old) != f->c) return -2;
    }
    char buf[512];
    float *d;
    int64_t dims[1] = {f->c};
    int v = new_const(g, old ? suffixed(buf, sizeof buf, g->values[n->in[slot]].name, "_bn")
                             : suffixed(buf, sizeof buf, n->name, "_bias_bn"),
                      1, dims, &d);
    if (v < 0) return -1;
    /* re-read: new_const may have moved the value table */
    old = old ? const_f32(g, n->in[slot]) : NULL;
    const float *ob = old ? old->data : NULL;
    for (int64_t i = 0; i < f->c; i++) d[i] = (float)((ob ? ob[i] : 0.0) * f->a[i] + f->b[i]);
    return v;
}

/* Conv W [M, C/g, k...] (scale block o) or ConvTranspose W [C, M/g, k...] (block (c, j) of
 * output channel grp * M/g + j). Returns 1 folded, 0 declined, WPK_ERR_NOMEM as -1. */
static int fold_conv(ir_graph *g, int k, const affine *f) {
    ir_node *n = &g->nodes[k];
    const ir_tensor *w = const_f32(g, n->in[1]);
    if (!w || w->ndim < 3) return 0;
    bool transpose = n->op == IR_OP_CONV_TRANSPOSE;
    int64_t group = ir_attr_int(n, "group", 1);
    if (group < 1 || w->dims[0] % group) return 0;
    int64_t m = transpose ? w->dims[1] * group : w->dims[0];
    if (m != f->c) return 0;
    if (n->nin > 2 && n->in[2] >= 0) {
        const ir_tensor *b = const_f32(g, n->in[2]);
        if (!b || ir_numel(b) != f->c) return 0;
    }
    char buf[512];
    float *d;
    int wv = new_const(g, suffixed(buf, sizeof buf, g->values[n->in[1]].name, "_bn"), w->ndim,
                       w->dims, &d);
    if (wv < 0) return -1;
    w = const_f32(g, g->nodes[k].in[1]);
    int64_t block = 1;
    for (int i = 2; i < w->ndim; i++) block *= w->dims[i];
    int64_t rows = w->dims[0], cols = w->dims[1];
    const float *src = w->data;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) {
            int64_t o = transpose ? r / (rows / group) * cols + j : r;
            const float *s = src + (r * cols + j) * block;
            float *t = d + (r * cols + j) * block;
            for (int64_t i = 0; i < block; i++) t[i] = (float)(s[i] * f->a[o]);
        }
    int bv = fold_bias(g, &g->nodes[k], 2, f);
    if (bv == -1) return -1;
    n = &g->nodes[k];
    if (n->nin < 3 && ir_node_resize(g, n, 3, n->nout)) return -1;
    n->in[1] = wv;
    n->in[2] = bv;
    return 1;
}

/* Gemm: Y = alpha A' B' + beta C, BN over Y's columns: scale column j of B' (row j of B when
 * transB), C' = beta C a + b with beta = 1. C must be absent or a constant of 1 or N values
 * ([N] or [1, N]). A MatMul with a 2-D A and a constant 2-D B is the Gemm with no C.
 * Returns 1 folded, 0 declined, -1 out of memory. */
static int fold_gemm(ir_graph *g, int k, const affine *f) {
    ir_node *n = &g->nodes[k];
    bool matmul = n->op == IR_OP_MATMUL;
    const ir_tensor *a = &g->values[n->in[0]].t, *w = const_f32(g, n->in[1]);
    if (!w || w->ndim != 2) return 0;
    if (matmul && (a->dtype == WPK_DTYPE_UNDEFINED || a->ndim != 2)) return 0;
    bool tb = !matmul && ir_attr_int(n, "transB", 0) != 0;
    int64_t nn = w->dims[tb ? 0 : 1];
    if (nn != f->c) return 0;
    float beta = matmul ? 1.0f : ir_attr_float(n, "beta", 1.0f);
    const ir_tensor *c = NULL;
    if (!matmul && n->nin > 2 && n->in[2] >= 0) {
        c = const_f32(g, n->in[2]);
        if (!c) return 0;
        int64_t cn = ir_numel(c);
        bool row = c->ndim == 1 || (c->ndim == 2 && c->dims[0] == 1);
        if (!(cn == 1 || (cn == nn && row))) return 0;
    }
    char buf[512];
    float *d, *cd;
    int wv = new_const(g, suffixed(buf, sizeof buf, g->values[n->in[1]].name, "_bn"), 2, w->dims,
                       &d);
    int64_t cdims[1] = {nn};
    int cv = wv < 0 ? -1
                    : new_const(g, suffixed(buf, sizeof buf, g->nodes[k].name, "_bias_bn"), 1,
                                cdims, &cd);
    if (cv < 0) return -1;
    n = &g->nodes[k];
    w = const_f32(g, n->in[1]);
    c = c ? const_f32(g, n->in[2]) : NULL;
    const float *src = w->data, *cs = c ? c->data : NULL;
    int64_t rows = w->dims[0], cols = w->dims[1];
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++)
            d[r * cols + j] = (float)(src[r * cols + j] * f->a[tb ? r : j]);
    for (int64_t j = 0; j < nn; j++) {
        double cj = cs ? (double)beta * cs[ir_numel(c) == 1 ? 0 : j] : 0.0;
        cd[j] = (float)(cj * f->a[j] + f->b[j]);
    }
    if (matmul) {
        ir_node_set_op(n, IR_OP_GEMM);
        if (ir_node_resize(g, n, 3, n->nout)) return -1;
    } else if (n->nin < 3 && ir_node_resize(g, n, 3, n->nout)) {
        return -1;
    }
    n->in[1] = wv;
    n->in[2] = cv;
    if (!matmul && beta != 1.0f && ir_node_set_float(g, n, "beta", 1.0f)) return -1;
    return 1;
}

/* BN node k -> Mul(x, a) -> Add(., b) with [C, 1, ..., 1] constants (rank of x minus one, so
 * they broadcast over dim 1). The BN node becomes the Mul; the Add is appended and its index
 * stored in *add. Returns 1 done, 0 declined, -1 out of memory. */
static int scale_shift(ir_graph *g, int k, const affine *f, int *add) {
    const ir_tensor x = g->values[g->nodes[k].in[0]].t;
    if (x.dtype != WPK_DTYPE_FLOAT32 || x.ndim < 2) return 0;
    int64_t dims[WPK_MAX_DIMS];
    dims[0] = f->c;
    for (int i = 1; i < x.ndim - 1; i++) dims[i] = 1;
    char buf[512];
    const char *bn = g->nodes[k].name;
    float *ad, *bd;
    int av = new_const(g, suffixed(buf, sizeof buf, bn, "_scale"), x.ndim - 1, dims, &ad);
    int bv = av < 0 ? -1 : new_const(g, suffixed(buf, sizeof buf, bn, "_shift"), x.ndim - 1,
                                     dims, &bd);
    const char *mid =
        bv < 0 ? NULL : ir_graph_unique_name(g, suffixed(buf, sizeof buf, bn, "_scaled"));
    int mv = mid ? ir_graph_add_value(g, mid) : -1;
    if (mv < 0) return -1;
    for (int64_t i = 0; i < f->c; i++) {
        ad[i] = (float)f->a[i];
        bd[i] = (float)f->b[i];
    }
    ir_node *n = &g->nodes[k];
    int y = n->out[0];
    g->values[mv].t = g->values[y].t;
    /* the Add producing the BN's output takes its name; the Mul is "<name>_mul" */
    const char *mul_name = arena_strdup(&g->mem, suffixed(buf, sizeof buf, bn, "_mul"));
    int a = mul_name ? ir_graph_add_node(g, bn, "Add", "", g->nodes[k].opset, 2, 1) : -1;
    /* an attribute array even when empty: ir_graph_clone copies nattr + 1 entries of it */
    if (a < 0 || !(g->nodes[a].attrs = arena_alloc(&g->mem, sizeof(ir_attr)))) return -1;
    n = &g->nodes[k];
    g->nodes[a].in[0] = mv;
    g->nodes[a].in[1] = bv;
    g->nodes[a].out[0] = y;
    /* the BN becomes the Mul: stripped of BN's attributes and extra slots (shrinking in place
     * allocates nothing, so the graph stays whole when memory runs out above) */
    n->nin = 2;
    n->nout = 1;
    n->name = mul_name;
    ir_node_set_op(n, IR_OP_MUL);
    n->nattr = 0;
    n->in[1] = av;
    n->out[0] = mv;
    *add = a;
    return 1;
}

/* Put every node appended at index >= first right after the node after[i - first] names. */
static wpk_status place_appended(wpk_context *ctx, ir_graph *g, int first, const int *after) {
    int nn = g->nnodes;
    ir_node *order = wpk_malloc(sizeof(ir_node) * (size_t)(nn + 1));
    int *next = wpk_malloc(sizeof(int) * (size_t)(nn + 1));
    if (!order || !next) {
        wpk_free(order);
        wpk_free(next);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory reordering the graph");
    }
    for (int k = 0; k < nn; k++) next[k] = -1;
    for (int i = first; i < nn; i++) next[after[i - first]] = i;
    int j = 0;
    for (int k = 0; k < first; k++)
        for (int q = k; q >= 0; q = next[q]) order[j++] = g->nodes[q];
    memcpy(g->nodes, order, sizeof(ir_node) * (size_t)nn);
    wpk_free(order);
    wpk_free(next);
    return WPK_OK;
}

wpk_status pass_fold_batchnorm(wpk_context *ctx, ir_graph *g, const pass_options *opt, int *changed) {
    (void)opt;
    *changed = 0;
    ir_graph_compact(g); /* refresh producers */
    int first = g->nnodes, nbn = 0;
    int64_t cmax = 1;
    for (int k = 0; k < first; k++)
        if (g->nodes[k].op == IR_OP_BATCH_NORM) {
            nbn++;
            const ir_tensor *s = g->nodes[k].nin > 1 ? const_f32(g, g->nodes[k].in[1]) : NULL;
            if (s && ir_numel(s) > cmax) cmax = ir_numel(s);
        }
    if (!nbn) return WPK_OK;
    double *coef = wpk_malloc(sizeof(double) * (size_t)(2 * cmax));
    int *after = wpk_malloc(sizeof(int) * (size_t)(nbn + 1));
    wpk_status st = WPK_OK;
    if (!coef || !after) {
        st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory folding BatchNormalization");
        goto out;
    }
    affine f = {0, coef, coef + cmax};
    for (int k = 0; k < first && st == WPK_OK; k++) {
        if (g->nodes[k].op != IR_OP_BATCH_NORM || g->nodes[k].dead) continue;
        if (!bn_affine(g, &g->nodes[k], &f)) continue;
        int x = g->nodes[k].in[0], p = g->values[x].producer, done = 0, add = -1;
        ir_op pop = p >= 0 ? g->nodes[p].op : IR_OP_UNSUPPORTED;
        if (p >= 0 && ir_graph_single_consumer(g, x) == k && g->nodes[p].out[0] == x) {
            if (pop == IR_OP_CONV || pop == IR_OP_CONV_TRANSPOSE) done = fold_conv(g, p, &f);
            else if (pop == IR_OP_GEMM || pop == IR_OP_MATMUL) done = fold_gemm(g, p, &f);
            if (done == 1) {
                g->nodes[p].out[0] = g->nodes[k].out[0];
                g->nodes[k].dead = true;
            }
        }
        if (done == 0) done = scale_shift(g, k, &f, &add);
        if (done < 0) st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory folding node '%s'",
                                     g->nodes[k].name);
        if (add >= 0) after[add - first] = k;
        *changed += done == 1;
    }
    if (st == WPK_OK && g->nnodes > first) st = place_appended(ctx, g, first, after);
    if (st == WPK_OK) ir_graph_compact(g);
out:
    wpk_free(coef);
    wpk_free(after);
    return st;
}
