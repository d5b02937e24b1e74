/* onnx_float16.c -- 16-bit float models computed in float32 (onnx_float16.h): constants
 * widened, Casts retargeted, Casts at the graph's 16-bit inputs and outputs. Done at import, so
 * shape inference, every pass and every kernel see float32 alone. */
#include "onnx/onnx_float16.h"

#include <stdio.h>
#include <string.h>

#include "base/half.h"

static bool is_half(wpk_dtype t) { return t == WPK_DTYPE_FLOAT16 || t == WPK_DTYPE_BFLOAT16; }

/* A float32 copy of the 16-bit tensor t, its data in g's arena; false when out of memory. */
static bool widen(ir_graph *g, const ir_tensor *t, ir_tensor *out) {
    *out = *t;
    out->dtype = WPK_DTYPE_FLOAT32;
    if (!t->data) return true;
    int64_t n = ir_numel(t);
    float *d = arena_alloc(&g->mem, (size_t)n * sizeof(float) + 1);
    if (!d) return false;
    const uint16_t *s = t->data;
    for (int64_t i = 0; i < n; i++)
        d[i] = t->dtype == WPK_DTYPE_FLOAT16 ? half_f16_to_f32(s[i]) : half_bf16_to_f32(s[i]);
    out->data = d;
    return true;
}

/* A Cast node `name` from value in to value out, to dtype `to`; false when out of memory. */
static bool add_cast(ir_graph *g, const char *name, int in, int out, wpk_dtype to) {
    int k = ir_graph_add_node(g, name, "Cast", "", g->opset, 1, 1);
    if (k < 0) return false;
    g->nodes[k].in[0] = in;
    g->nodes[k].out[0] = out;
    g->values[out].producer = k;
    return ir_node_set_int(g, &g->nodes[k], "to", to) == WPK_OK;
}

static bool has_half(const ir_graph *g) {
    for (int v = 0; v < g->nvalues; v++)
        if (is_half(g->values[v].t.dtype)) return true;
    for (int k = 0; k < g->nnodes; k++) {
        const ir_node *n = &g->nodes[k];
        if (n->op == IR_OP_CAST && is_half((wpk_dtype)ir_attr_int(n, "to", 0))) return true;
        for (int a = 0; a < n->nattr; a++)
            if (n->attrs[a].kind == IR_ATTR_TENSOR && n->attrs[a].t &&
                is_half(n->attrs[a].t->dtype))
                return true;
    }
    return false;
}

/* A new value named after base (made unique), of t's dtype and shape; -1 when out of
 * memory. */
static int new_value(ir_graph *g, const char *base, const char *suffix, const ir_tensor *t) {
    char buf[512];
    snprintf(buf, sizeof buf, "%.400s%s", base, suffix);
    ir_tensor copy = *t; /* t may point into the value table, which adding a value moves */
    const char *name = ir_graph_unique_name(g, buf);
    int v = name ? ir_graph_add_value(g, name) : -1;
    if (v < 0) return -1;
    g->values[v].t = copy;
    g->values[v].t.data = NULL;
    return v;
}

static wpk_status nomem(wpk_context *ctx) {
    return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory widening float16 tensors to float32");
}

wpk_status onnx_float16_to_f32(wpk_context *ctx, ir_graph *g) {
    if (!has_half(g)) return WPK_OK;
    /* constants and attribute tensors */
    for (int v = 0; v < g->nvalues; v++) {
        ir_value *val = &g->values[v];
        if (!val->is_const || !is_half(val->t.dtype)) continue;
        ir_tensor t;
        if (!widen(g, &val->t, &t)) return nomem(ctx);
        g->values[v].t = t;
    }
    for (int k = 0; k < g->nnodes; k++) {
        ir_node *n = &g->nodes[k];
        for (int a = 0; a < n->nattr; a++) {
            const ir_attr *at = &n->attrs[a];
            if (at->kind != IR_ATTR_TENSOR || !at->t || !is_half(at->t->dtype)) continue;
            ir_tensor *t = arena_alloc(&g->mem, sizeof *t);
            if (!t || !widen(g, at->t, t)) return nomem(ctx);
            ir_attr copy = *at;
            copy.t = t;
            if (ir_node_set_attr(g, n, &copy)) return nomem(ctx);
        }
        if (n->op == IR_OP_CAST && is_half((wpk_dtype)ir_attr_int(n, "to", 0)) &&
            ir_node_set_int(g, n, "to", WPK_DTYPE_FLOAT32))
            return nomem(ctx);
    }
    /* the values between nodes: their declared dtypes are the file's, inference redoes them */
    int nvalues = g->nvalues;
    for (int v = 0; v < nvalues; v++)
        if (!g->values[v].is_input && !ir_graph_is_output(g, v) && is_half(g->values[v].t.dtype))
            g->values[v].t.dtype = WPK_DTYPE_FLOAT32;
    /* 16-bit graph inputs: read through a Cast to float32 */
    for (int i = 0; i < g->ninputs; i++) {
        int in = g->inputs[i];
        if (!is_half(g->values[in].t.dtype)) continue;
        int w = new_value(g, g->values[in].name, "_f32", &g->values[in].t);
        if (w < 0) return nomem(ctx);
        g->values[w].t.dtype = WPK_DTYPE_FLOAT32;
        ir_graph_replace_uses(g, in, w);
        char name[512];
        snprintf(name, sizeof name, "%.400s_to_f32", g->values[in].name);
        if (!add_cast(g, name, in, w, WPK_DTYPE_FLOAT32)) return nomem(ctx);
        /* replace_uses also pointed a graph output that is this input at w: put it back */
        for (int o = 0; o < g->noutputs; o++)
            if (g->outputs[o] == w) g->outputs[o] = in;
    }
    /* 16-bit graph outputs: computed in float32 into a new value, then cast */
    for (int o = 0; o < g->noutputs; o++) {
        int out = g->outputs[o];
        wpk_dtype dt = g->values[out].t.dtype;
        if (!is_half(dt) || g->values[out].is_input || g->values[out].is_const) continue;
        bool seen = false; /* an output listed twice is cast once */
        for (int e = 0; e < o; e++) seen |= g->outputs[e] == out;
        int p = g->values[out].producer;
        if (seen) continue;
        if (p < 0) continue;
        int w = new_value(g, g->values[out].name, "_f32", &g->values[out].t);
        if (w < 0) return nomem(ctx);
        g->values[w].t.dtype = WPK_DTYPE_FLOAT32;
        /* every reader (and the producer's slot) moves to w; the graph output stays `out` */
        for (int k = 0; k < g->nnodes; k++) {
            ir_node *n = &g->nodes[k];
            for (int i = 0; i < n->nin; i++)
                if (n->in[i] == out) n->in[i] = w;
            for (int i = 0; i < n->nout; i++)
                if (n->out[i] == out) n->out[i] = w;
        }
        g->values[w].producer = p;
        char name[512];
        snprintf(name, sizeof name, "%.400s_from_f32", g->values[out].name);
        if (!add_cast(g, name, w, out, dt)) return nomem(ctx);
    }
    return ir_graph_toposort(ctx, g);
}
