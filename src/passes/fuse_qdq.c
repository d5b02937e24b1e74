/* fuse_qdq.c -- QDQ graphs (as ONNX Runtime's quantize_static writes them) into integer
 * kernels: DequantizeLinear(x) and DequantizeLinear(w) (and of the bias) feeding a Conv whose
 * output goes, alone or through a Relu, into a QuantizeLinear become one QLinearConv on the
 * quantized tensors, so the convolution runs in u8/s8 x s8 -> s32 with the bias added in int32
 * and the requantization fused. A Relu between Conv and QuantizeLinear makes a wpk::QLinearConv
 * with activation "Relu": the clamp at y's zero point (the quantized 0). DequantizeLinear(a) and
 * DequantizeLinear(b) feeding an Add (-> Relu) -> QuantizeLinear, all per tensor (the residual
 * adds), become one wpk::QLinearAdd on the quantized tensors. DequantizeLinear -> MaxPool ->
 * QuantizeLinear with one scale and zero point becomes wpk::MaxPool on the bytes (a Flatten or
 * Reshape between such a pair moves the bytes); with a GlobalAveragePool, per tensor,
 * wpk::QLinearGlobalAveragePool. The classifier's Gemm (DQ(x) x DQ(w)^T -> Q) becomes a 1x1
 * QLinearConv between Reshapes.
 *
 * Declines (leaves the float path, which the DQ/Q reference kernels run as written) when a
 * scale or zero point is not a constant, x or y is not quantized per tensor, w is not per
 * tensor or per output channel along axis 0, or the conv output has other readers. The bias
 * is requantized to x_scale * w_scale[m] in double: exact when it was quantized with that
 * scale, as quantize_static does. */
#include "passes/pass.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

/* The constant tensor of value v (an initializer or a Constant node's value); NULL otherwise. */
static const ir_tensor *constant(const ir_graph *g, int v) {
    if (v < 0) return NULL;
    const ir_value *val = &g->values[v];
    if (val->is_const) return val->t.data || ir_numel(&val->t) == 0 ? &val->t : NULL;
    if (val->producer >= 0 && g->nodes[val->producer].op == IR_OP_CONSTANT &&
        !g->nodes[val->producer].dead) {
        const ir_attr *a = ir_attr_find(&g->nodes[val->producer], "value");
        if (a && a->kind == IR_ATTR_TENSOR && a->t && a->t->data) return a->t;
    }
    return NULL;
}

/* The live node producing v when it has op `op`; -1 otherwise. */
static int producer(const ir_graph *g, int v, ir_op op) {
    if (v < 0) return -1;
    int p = g->values[v].producer;
    return p >= 0 && !g->nodes[p].dead && g->nodes[p].op == op ? p : -1;
}

static bool is_int8(wpk_dtype t) { return t == WPK_DTYPE_INT8 || t == WPK_DTYPE_UINT8; }

static float f32_at(const ir_tensor *t, int64_t i) { return ((const float *)t->data)[i]; }

static int32_t zp_at(const ir_tensor *t, int64_t i) {
    if (!t) return 0;
    if (t->dtype == WPK_DTYPE_INT8) return ((const int8_t *)t->data)[i];
    if (t->dtype == WPK_DTYPE_UINT8) return ((const uint8_t *)t->data)[i];
    return ((const int32_t *)t->data)[i];
}

/* The (quantized input, scale, zero point) of a Q or DQ node k with constant float32 scale
 * and zero point of `count` or 1 elements (count 1: per tensor only). For a DQ with a per-
 * element scale, its axis must be `axis`. */
typedef struct qnode {
    int node, q, scale, zp; /* value indices; zp -1 when absent */
    const ir_tensor *s, *z;
} qnode;

static bool read_q(const ir_graph *g, int k, int64_t count, int axis, qnode *out) {
    const ir_node *n = &g->nodes[k];
    if (n->nin < 2 || n->in[0] < 0 || n->in[1] < 0) return false;
    if (ir_attr_int(n, "block_size", 0) != 0) return false;
    out->node = k;
    out->q = n->in[0];
    out->scale = n->in[1];
    out->zp = n->nin > 2 ? n->in[2] : -1;
    out->s = constant(g, out->scale);
    out->z = out->zp >= 0 ? constant(g, out->zp) : NULL;
    if (!out->s || out->s->dtype != WPK_DTYPE_FLOAT32 || (out->zp >= 0 && !out->z)) return false;
    int64_t ns = ir_numel(out->s);
    if (out->s->ndim > 1 || (ns != 1 && ns != count)) return false;
    if (out->z && (ir_numel(out->z) != ns || out->z->ndim > 1)) return false;
    if (ns > 1) {
        const ir_tensor *x = &g->values[out->q].t;
        int64_t a = ir_attr_int(n, "axis", 1);
        if (x->ndim <= 0 || (a < 0 ? a + x->ndim : a) != axis) return false;
    }
    for (int64_t i = 0; i < ns; i++)
        if (!(f32_at(out->s, i) > 0) || !isfinite(f32_at(out->s, i))) return false;
    return true;
}

/* An int32 [m] constant: the bias requantized to x_scale * w_scale[m]. -1 when the bias is
 * not a constant (float, or a DQ of constants), -2 when out of memory. */
static int int32_bias(ir_graph *g, int b, int64_t m, float xs, const ir_tensor *ws,
                      const char *base) {
    double *bf = wpk_malloc(sizeof(double) * (size_t)m);
    if (!bf) return -2;
    bool ok = false;
    int dq = producer(g, b, IR_OP_DEQUANTIZE_LINEAR);
    qnode q;
    const ir_tensor *c = constant(g, b);
    if (dq >= 0 && read_q(g, dq, m, 0, &q)) {
        const ir_tensor *bq = constant(g, q.q);
        if (bq && bq->dtype == WPK_DTYPE_INT32 && ir_numel(bq) == m) {
            bool per = ir_numel(q.s) > 1;
            for (int64_t i = 0; i < m; i++)
                bf[i] = ((double)zp_at(bq, i) - zp_at(q.z, per ? i : 0)) *
                        f32_at(q.s, per ? i : 0);
            ok = true;
        }
    } else if (c && c->dtype == WPK_DTYPE_FLOAT32 && ir_numel(c) == m) {
        for (int64_t i = 0; i < m; i++) bf[i] = f32_at(c, i);
        ok = true;
    }
    int v = -1;
    if (ok) {
        int32_t *d = wpk_malloc(sizeof(int32_t) * (size_t)m);
        if (!d) {
            wpk_free(bf);
            return -2;
        }
        bool per = ir_numel(ws) > 1;
        for (int64_t i = 0; i < m && ok; i++) {
            double r = nearbyint(bf[i] / ((double)xs * f32_at(ws, per ? i : 0)));
            ok = fabs(r) < 2147483647.0;
            d[i] = ok ? (int32_t)r : 0;
        }
        ir_tensor t = {.dtype = WPK_DTYPE_INT32, .ndim = 1, .dims = {m}, .data = d};
        char name[512];
        snprintf(name, sizeof name, "%.400s_bias_s32", base);
        const char *unique = ir_graph_unique_name(g, name);
        v = !ok ? -1 : unique ? ir_graph_add_const(g, unique, &t) : -2;
        if (ok && v == -1) v = -2;
        wpk_free(d);
    }
    wpk_free(bf);
    return v;
}

/* A [1] constant 0 of dtype dt (a zero point the model left out). -1 when out of memory. */
static int zero_of(ir_graph *g, wpk_dtype dt, const char *base) {
    uint8_t zero[1] = {0};
    ir_tensor t = {.dtype = dt, .ndim = 1, .dims = {1}, .data = zero};
    char name[512];
    snprintf(name, sizeof name, "%.400s_zero_point", base);
    const char *unique = ir_graph_unique_name(g, name);
    return unique ? ir_graph_add_const(g, unique, &t) : -1;
}

/* The per-tensor QuantizeLinear with an 8-bit zero point that alone reads value v, directly
 * or through one Relu (*relu: that Relu's node, else -1): its node, else -1. */
static int quantized_by(const ir_graph *g, int v, int *relu, qnode *y) {
    int c = ir_graph_single_consumer(g, v);
    *relu = -1;
    if (c >= 0 && g->nodes[c].op == IR_OP_RELU) {
        *relu = c;
        c = ir_graph_single_consumer(g, g->nodes[c].out[0]);
    }
    if (c < 0 || g->nodes[c].op != IR_OP_QUANTIZE_LINEAR || g->nodes[c].out[0] < 0 ||
        !read_q(g, c, 1, 0, y) || !y->z || !is_int8(y->z->dtype))
        return -1;
    return c;
}

static void kill_if_unread(ir_graph *g, int k) {
    if (k < 0 || g->nodes[k].dead) return;
    for (int i = 0; i < g->nodes[k].nout; i++)
        if (g->nodes[k].out[i] >= 0 && ir_graph_count_uses(g, g->nodes[k].out[i]) > 0) return;
    g->nodes[k].dead = true;
}

/* Conv node k into a QLinearConv. 1: rewritten, 0: declined, <0: out of memory. */
static int fuse_conv(ir_graph *g, int k) {
    const ir_node *n = &g->nodes[k];
    if (n->nin < 2 || n->nout != 1 || n->out[0] < 0) return 0;
    int dx = producer(g, n->in[0], IR_OP_DEQUANTIZE_LINEAR);
    int dw = producer(g, n->in[1], IR_OP_DEQUANTIZE_LINEAR);
    if (dx < 0 || dw < 0) return 0;
    const ir_tensor *wq = constant(g, g->nodes[dw].in[0]);
    if (!wq || !is_int8(wq->dtype) || wq->ndim < 3) return 0;
    int64_t m = wq->dims[0];
    wpk_dtype wdt = wq->dtype; /* wq points into the value table, which adding constants moves */
    qnode x, w, y;
    if (!read_q(g, dx, 1, 0, &x) || !read_q(g, dw, m, 0, &w)) return 0;
    if (!is_int8(g->values[x.q].t.dtype) || (x.z && x.z->dtype != g->values[x.q].t.dtype) ||
        (w.z && w.z->dtype != wq->dtype))
        return 0;
    int relu, c = quantized_by(g, n->out[0], &relu, &y);
    if (c < 0) return 0;
    int bias = -1;
    if (n->nin > 2 && n->in[2] >= 0) {
        bias = int32_bias(g, g->nodes[k].in[2], m, f32_at(x.s, 0), w.s, g->nodes[k].name);
        if (bias == -1) return 0;
        if (bias < 0) return -1;
    }
    int xzp = x.zp, wzp = w.zp;
    wpk_dtype xdt = g->values[x.q].t.dtype;
    if (xzp < 0 && (xzp = zero_of(g, xdt, g->nodes[k].name)) < 0) return -1;
    if (wzp < 0 && (wzp = zero_of(g, wdt, g->nodes[k].name)) < 0) return -1;
    int yout = g->nodes[c].out[0], wqv = g->nodes[dw].in[0];
    ir_node *conv = &g->nodes[k];
    if (ir_node_resize(g, conv, bias >= 0 ? 9 : 8, 1)) return -1;
    int ins[9] = {x.q, x.scale, xzp, wqv, w.scale, wzp, y.scale, y.zp, bias};
    for (int i = 0; i < conv->nin; i++) conv->in[i] = ins[i];
    conv->out[0] = yout;
    ir_node_set_op(conv, relu >= 0 ? IR_OP_QLINEAR_CONV_WPK : IR_OP_QLINEAR_CONV);
    if (relu >= 0 && ir_node_set_str(g, conv, "activation", "Relu")) return -1;
    g->nodes[c].dead = true;
    if (relu >= 0) g->nodes[relu].dead = true;
    g->values[yout].producer = k;
    kill_if_unread(g, dx);
    kill_if_unread(g, dw);
    return 1;
}

/* Same static shape. */
static bool same_shape(const ir_tensor *a, const ir_tensor *b) {
    if (a->ndim != b->ndim || a->dtype != b->dtype) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i] || a->dims[i] <= 0) return false;
    return true;
}

/* Add node k into a wpk::QLinearAdd: DQ(a) + DQ(b) (-> Relu) -> Q, all per tensor, a and b of
 * one 8-bit dtype and shape. 1: rewritten, 0: declined, <0: out of memory. */
static int fuse_add(ir_graph *g, int k) {
    const ir_node *n = &g->nodes[k];
    if (n->nin != 2 || n->nout != 1 || n->out[0] < 0) return 0;
    int da = producer(g, n->in[0], IR_OP_DEQUANTIZE_LINEAR);
    int db = producer(g, n->in[1], IR_OP_DEQUANTIZE_LINEAR);
    qnode a, b, y;
    if (da < 0 || db < 0 || !read_q(g, da, 1, 0, &a) || !read_q(g, db, 1, 0, &b)) return 0;
    const ir_tensor *ta = &g->values[a.q].t, *tb = &g->values[b.q].t;
    if (!is_int8(ta->dtype) || !same_shape(ta, tb) || (a.z && a.z->dtype != ta->dtype) ||
        (b.z && b.z->dtype != tb->dtype))
        return 0;
    int relu, c = quantized_by(g, n->out[0], &relu, &y);
    if (c < 0) return 0;
    wpk_dtype dt = ta->dtype;
    int azp = a.zp, bzp = b.zp;
    if (azp < 0 && (azp = zero_of(g, dt, g->nodes[k].name)) < 0) return -1;
    if (bzp < 0 && (bzp = zero_of(g, dt, g->nodes[k].name)) < 0) return -1;
    int yout = g->nodes[c].out[0];
    ir_node *add = &g->nodes[k];
    if (ir_node_resize(g, add, 8, 1)) return -1;
    int ins[8] = {a.q, a.scale, azp, b.q, b.scale, bzp, y.scale, y.zp};
    for (int i = 0; i < 8; i++) add->in[i] = ins[i];
    add->out[0] = yout;
    ir_node_set_op(add, IR_OP_QLINEAR_ADD_WPK);
    if (relu >= 0 && ir_node_set_str(g, add, "activation", "Relu")) return -1;
    g->nodes[c].dead = true;
    if (relu >= 0) g->nodes[relu].dead = true;
    g->values[yout].producer = k;
    kill_if_unread(g, da);
    kill_if_unread(g, db);
    return 1;
}

/* Node k (MaxPool, Flatten or Reshape) onto the bytes: DQ(x) -> op -> Q with Q's scale and
 * zero point equal to the DQ's (per tensor) is op on x (a MaxPool as `to`: wpk::MaxPool), since
 * DQ is monotone and Q inverts it on its image: Q(max(DQ(x))) = max(x), and moving elements
 * commutes with both. 1: rewritten, 0: declined, <0: out of memory. */
static int fuse_on_bytes(ir_graph *g, int k, ir_op to) {
    const ir_node *n = &g->nodes[k];
    if (n->nin < 1 || n->nout < 1 || n->out[0] < 0) return 0;
    for (int i = 1; i < n->nout; i++)
        if (n->out[i] >= 0) return 0;
    int dx = producer(g, n->in[0], IR_OP_DEQUANTIZE_LINEAR);
    qnode x, y;
    if (dx < 0 || !read_q(g, dx, 1, 0, &x)) return 0;
    int c = ir_graph_single_consumer(g, n->out[0]);
    if (c < 0 || g->nodes[c].op != IR_OP_QUANTIZE_LINEAR || g->nodes[c].out[0] < 0 ||
        !read_q(g, c, 1, 0, &y) || !y.z)
        return 0;
    wpk_dtype xt = g->values[x.q].t.dtype;
    if (!is_int8(xt) || y.z->dtype != xt || (x.z && x.z->dtype != xt)) return 0;
    if (f32_at(x.s, 0) != f32_at(y.s, 0) || zp_at(x.z, 0) != zp_at(y.z, 0)) return 0;
    int yout = g->nodes[c].out[0];
    ir_node *node = &g->nodes[k];
    if (ir_node_resize(g, node, node->nin, 1)) return -1;
    node->in[0] = x.q;
    node->out[0] = yout;
    if (node->op != to) ir_node_set_op(node, to);
    g->nodes[c].dead = true;
    g->values[yout].producer = k;
    kill_if_unread(g, dx);
    return 1;
}

/* GlobalAveragePool node k into a wpk::QLinearGlobalAveragePool: DQ(x) -> GlobalAveragePool ->
 * Q, per tensor, x 8-bit. The bytes' sums are exact in integers; only the float sum's order
 * differs from the float graph's. 1: rewritten, 0: declined, <0: out of memory. */
static int fuse_global_pool(ir_graph *g, int k) {
    const ir_node *n = &g->nodes[k];
    if (n->nin != 1 || n->nout != 1 || n->out[0] < 0) return 0;
    int dx = producer(g, n->in[0], IR_OP_DEQUANTIZE_LINEAR);
    qnode x, y;
    if (dx < 0 || !read_q(g, dx, 1, 0, &x)) return 0;
    const ir_tensor *xt = &g->values[x.q].t;
    if (!is_int8(xt->dtype) || xt->ndim < 3 || (x.z && x.z->dtype != xt->dtype)) return 0;
    int relu, c = quantized_by(g, n->out[0], &relu, &y);
    if (c < 0 || relu >= 0) return 0;
    int xzp = x.zp;
    if (xzp < 0 && (xzp = zero_of(g, xt->dtype, g->nodes[k].name)) < 0) return -1;
    int yout = g->nodes[c].out[0];
    ir_node *pool = &g->nodes[k];
    if (ir_node_resize(g, pool, 5, 1)) return -1;
    int ins[5] = {x.q, x.scale, xzp, y.scale, y.zp};
    for (int i = 0; i < 5; i++) pool->in[i] = ins[i];
    pool->out[0] = yout;
    ir_node_set_op(pool, IR_OP_QLINEAR_GLOBAL_POOL_WPK);
    g->nodes[c].dead = true;
    g->values[yout].producer = k;
    kill_if_unread(g, dx);
    return 1;
}

/* A new value of dtype dt and shape dims (named after base), made by Reshape(v) when v >= 0;
 * the value, or -1 when out of memory. */
static int reshape_value(ir_graph *g, int v, const char *base, wpk_dtype dt, int ndim,
                         const int64_t *dims) {
    int64_t shape_data[4];
    memcpy(shape_data, dims, sizeof(int64_t) * (size_t)ndim);
    ir_tensor shape = {.dtype = WPK_DTYPE_INT64, .ndim = 1, .dims = {ndim}, .data = shape_data};
    const char *cname = ir_graph_unique_name(g, base);
    int c = cname ? ir_graph_add_const(g, cname, &shape) : -1;
    const char *vname = c >= 0 ? ir_graph_unique_name(g, base) : NULL;
    int r = vname ? ir_graph_add_value(g, vname) : -1;
    if (r < 0) return -1;
    ir_tensor *t = &g->values[r].t;
    t->dtype = dt;
    t->ndim = ndim;
    memcpy(t->dims, dims, sizeof(int64_t) * (size_t)ndim);
    if (v < 0) return r;
    int k = ir_graph_add_node(g, vname, "Reshape", "", g->opset, 2, 1);
    if (k < 0) return -1;
    g->nodes[k].in[0] = v;
    g->nodes[k].in[1] = c;
    g->nodes[k].out[0] = r;
    g->values[r].producer = k;
    return r;
}

/* Gemm node k (the classifier: DQ(a) [M, K] x DQ(w)^T, w a constant [N, K] per tensor or per
 * row, + bias, -> Q) into Reshape(a) [M, K, 1, 1] -> QLinearConv with w as [N, K, 1, 1] ->
 * Reshape [M, N], the int8 provider's GEMM over s8 weights instead of a float GEMM streaming
 * four times the bytes. The numerics are QLinearConv's: the products summed in int32, the bias
 * requantized as for a Conv. 1: rewritten, 0: declined, <0: out of memory. */
static int fuse_gemm(ir_graph *g, int k) {
    const ir_node *n = &g->nodes[k];
    if (n->nin < 2 || n->nout != 1 || n->out[0] < 0) return 0;
    if (ir_attr_float(n, "alpha", 1.0f) != 1.0f || ir_attr_float(n, "beta", 1.0f) != 1.0f ||
        ir_attr_int(n, "transA", 0) != 0 || ir_attr_int(n, "transB", 0) != 1)
        return 0;
    int dx = producer(g, n->in[0], IR_OP_DEQUANTIZE_LINEAR);
    int dw = producer(g, n->in[1], IR_OP_DEQUANTIZE_LINEAR);
    if (dx < 0 || dw < 0) return 0;
    const ir_tensor *wq = constant(g, g->nodes[dw].in[0]);
    if (!wq || !is_int8(wq->dtype) || wq->ndim != 2) return 0;
    int64_t nn = wq->dims[0], kk = wq->dims[1];
    qnode x, w, y;
    if (!read_q(g, dx, 1, 0, &x) || !read_q(g, dw, nn, 0, &w)) return 0;
    const ir_tensor *xt = &g->values[x.q].t;
    if (!is_int8(xt->dtype) || xt->ndim != 2 || xt->dims[0] <= 0 || xt->dims[1] != kk ||
        (x.z && x.z->dtype != xt->dtype) || (w.z && w.z->dtype != wq->dtype))
        return 0;
    if (n->nin > 2 && n->in[2] >= 0) {
        const ir_tensor *bt = &g->values[n->in[2]].t;
        if (bt->ndim != 1 || bt->dims[0] != nn) return 0;
    }
    int relu, c = quantized_by(g, n->out[0], &relu, &y);
    if (c < 0) return 0;
    int64_t mm = xt->dims[0];
    wpk_dtype xdt = xt->dtype, wdt = wq->dtype, ydt = y.z->dtype;
    /* the weights as [N, K, 1, 1]: the same bytes (copied before values are added: adding one
       may move every ir_tensor of g->values, wq, x.s and w.s with them) */
    ir_tensor w4 = *wq;
    w4.ndim = 4;
    w4.dims[2] = w4.dims[3] = 1;
    int bias = -1;
    if (n->nin > 2 && n->in[2] >= 0) {
        bias = int32_bias(g, g->nodes[k].in[2], nn, f32_at(x.s, 0), w.s, g->nodes[k].name);
        if (bias == -1) return 0;
        if (bias < 0) return -1;
    }
    char name[512];
    snprintf(name, sizeof name, "%.400s_weight_4d", g->nodes[k].name);
    const char *wname = ir_graph_unique_name(g, name);
    int wv = wname ? ir_graph_add_const(g, wname, &w4) : -1;
    if (wv < 0) return -1;
    int xzp = x.zp, wzp = w.zp;
    if (xzp < 0 && (xzp = zero_of(g, xdt, g->nodes[k].name)) < 0) return -1;
    if (wzp < 0 && (wzp = zero_of(g, wdt, g->nodes[k].name)) < 0) return -1;
    snprintf(name, sizeof name, "%.400s_input_4d", g->nodes[k].name);
    int64_t x4[4] = {mm, kk, 1, 1}, y4[4] = {mm, nn, 1, 1}, y2[2] = {mm, nn};
    int xr = reshape_value(g, x.q, name, xdt, 4, x4);
    snprintf(name, sizeof name, "%.400s_output_4d", g->nodes[k].name);
    int yr = xr >= 0 ? reshape_value(g, -1, name, ydt, 4, y4) : -1;
    if (yr < 0) return -1;
    int yout = g->nodes[c].out[0];
    ir_node *conv = &g->nodes[k];
    if (ir_node_resize(g, conv, bias >= 0 ? 9 : 8, 1)) return -1;
    int ins[9] = {xr, x.scale, xzp, wv, w.scale, wzp, y.scale, y.zp, bias};
    for (int i = 0; i < conv->nin; i++) conv->in[i] = ins[i];
    conv->out[0] = yr;
    static const char *const gemm_attrs[] = {"alpha", "beta", "transA", "transB"};
    for (int i = 0; i < 4; i++) ir_node_remove_attr(conv, gemm_attrs[i]);
    ir_node_set_op(conv, relu >= 0 ? IR_OP_QLINEAR_CONV_WPK : IR_OP_QLINEAR_CONV);
    if (relu >= 0 && ir_node_set_str(g, &g->nodes[k], "activation", "Relu")) return -1;
    g->values[yr].producer = k;
    g->nodes[c].dead = true;
    if (relu >= 0) g->nodes[relu].dead = true;
    /* Q's output now comes from Reshape(yr) */
    snprintf(name, sizeof name, "%.400s_output_2d", g->nodes[k].name);
    int r = reshape_value(g, yr, name, ydt, 2, y2);
    if (r < 0) return -1;
    int rk = g->values[r].producer;
    g->nodes[rk].out[0] = yout;
    g->values[yout].producer = rk;
    kill_if_unread(g, dx);
    kill_if_unread(g, dw);
    return 1;
}

wpk_status pass_fuse_qdq(wpk_context *ctx, ir_graph *g, const pass_options *opt, int *changed) {
    (void)opt;
    *changed = 0;
    int gemms = 0;
    int nodes = g->nnodes; /* the Reshapes a Gemm's rewrite appends need no visit */
    for (int k = 0; k < nodes; k++) {
        if (g->nodes[k].dead) continue;
        ir_op op = g->nodes[k].op;
        int r;
        if (op == IR_OP_CONV) r = fuse_conv(g, k);
        else if (op == IR_OP_ADD) r = fuse_add(g, k);
        else if (op == IR_OP_MAX_POOL) r = fuse_on_bytes(g, k, IR_OP_MAX_POOL_INT8_WPK);
        else if (op == IR_OP_FLATTEN || op == IR_OP_RESHAPE) r = fuse_on_bytes(g, k, op);
        else if (op == IR_OP_GEMM) r = fuse_gemm(g, k);
        else if (op == IR_OP_GLOBAL_AVERAGE_POOL) r = fuse_global_pool(g, k);
        else continue;
        gemms += op == IR_OP_GEMM && r > 0;
        if (r < 0)
            return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory fusing node '%s' with its "
                             "QuantizeLinear/DequantizeLinear", g->nodes[k].name);
        *changed += r;
    }
    if (*changed) {
        for (int k = 0; k < g->nnodes; k++)
            if (!g->nodes[k].dead && g->nodes[k].op == IR_OP_DEQUANTIZE_LINEAR)
                kill_if_unread(g, k);
        ir_graph_compact(g);
    }
    return gemms ? ir_graph_toposort(ctx, g) : WPK_OK;
}
