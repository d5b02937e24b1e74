/* fuse_epilogue.c -- Epilogue fusion: bias, residual Add and activation into Conv/Gemm/MatMul.
 *
 * From each Conv, Gemm and MatMul the pass follows its output through, in this order:
 *   - Adds of a constant that broadcasts per output channel (Conv) or per column (Gemm,
 *     MatMul): a bias, summed into the node's own bias (Conv B, Gemm C) or FusedMatMul's;
 *   - one Add of another tensor of exactly the output's shape: the residual Z;
 *   - one activation: Relu, LeakyRelu, Clip with constant bounds, HardSigmoid, HardSwish,
 *     Sigmoid, Tanh, Gelu (exact), SiLU as Mul(x, Sigmoid(x)), and Gelu as PyTorch exports it,
 *     0.5 * x * (1 + Erf(x / sqrt(2))), matched node by node with its constants checked.
 * Every value in between must have exactly one reader (the next op; SiLU's and Gelu's x are
 * read by their own pattern alone) and must not be a graph output. The result keeps the last
 * value's name: a bias alone leaves a standard Conv or Gemm (a MatMul of 2-D operands becomes
 * Gemm); a residual or activation gives wpk::FusedConv/FusedGemm/FusedMatMul (ops/fused.c).
 * The fused node takes the place of the chain's last node, where Z is already computed.
 *
 * Symbolic dims: Z must have the output's shape, not merely broadcast to it. Where dims are
 * unknown statically, shapes are inferred twice more with every symbolic input dim bound to an
 * unusual number (the same name, the same number); Z is fused only when both bindings give
 * equal shapes. */
#include "passes/pass.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "ir/eval.h"
#include "ops/activation.h"

#define Z_INPUT 3
#define MAX_CHAIN 16

/* ---- helpers ---- */

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

/* v is a constant float32 scalar (any shape of one element) within a relative 1e-6 of want. */
static bool const_near(const ir_graph *g, int v, double want) {
    const ir_tensor *t = const_f32(g, v);
    if (!t || ir_numel(t) != 1) return false;
    double have = ((const float *)t->data)[0];
    return fabs(have - want) <= 1e-6 * fabs(want);
}

/* A new float32 constant named after base (made unique), data in the graph's arena returned
 * in *data for the caller to fill. -1 when out of memory. */
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

/* The live nodes reading v, one entry per input slot, at most max of them; returns the number
 * of reads (may exceed max). */
static int readers(const ir_graph *g, int v, int *out, int max) {
    int count = 0;
    for (int k = 0; k < g->nnodes; k++) {
        if (g->nodes[k].dead) continue;
        for (int i = 0; i < g->nodes[k].nin; i++)
            if (g->nodes[k].in[i] == v) {
                if (count < max) out[count] = k;
                count++;
            }
    }
    return count;
}

/* For a binary node reading v: its other operand; -1 when it does not read v exactly once. */
static int other_operand(const ir_node *n, int v) {
    if (n->nin != 2) return -1;
    if (n->in[0] == v && n->in[1] != v) return n->in[1];
    if (n->in[1] == v && n->in[0] != v) return n->in[0];
    return -1;
}

/* ---- symbolic dims: probe bindings ---- */

typedef struct probe {
    bool tried;
    int n;              /* values covered (those that existed when it ran) */
    ir_tensor *vals[2]; /* NULL when the probe could not run */
} probe;

/* The number bound to dim d of graph input v in binding b: one per distinct dim name (or per
 * unnamed dim), far from any size a model writes down. */
static int64_t probe_dim(const ir_graph *g, int v, int d, int b) {
    const char *name = g->values[v].dim_names[d];
    int id = 0;
    for (int i = 0; i < g->ninputs; i++) {
        const ir_value *in = &g->values[g->inputs[i]];
        for (int j = 0; j < in->t.ndim; j++) {
            if (g->inputs[i] == v && j == d) goto found;
            if (in->t.dims[j] >= 0) continue;
            bool same = name && in->dim_names[j] && strcmp(name, in->dim_names[j]) == 0;
            if (same) goto found;
            id++;
        }
    }
found:
    return b ? 7919 + 3 * (int64_t)id : 6007 + 7 * (int64_t)id;
}

static void probe_run(wpk_context *ctx, const ir_graph *g, probe *p) {
    p->tried = true;
    p->n = g->nvalues;
    for (int b = 0; b < 2; b++) {
        ir_tensor *vals = wpk_calloc((size_t)g->nvalues + 1, sizeof(ir_tensor));
        p->vals[b] = vals;
        if (!vals) break;
        for (int v = 0; v < g->nvalues; v++)
            if (g->values[v].is_const) vals[v] = g->values[v].t;
        for (int i = 0; i < g->ninputs; i++) {
            int v = g->inputs[i];
            vals[v] = g->values[v].t;
            vals[v].data = NULL;
            for (int d = 0; d < vals[v].ndim; d++)
                if (vals[v].dims[d] < 0) vals[v].dims[d] = probe_dim(g, v, d, b);
        }
        if (ir_infer(ctx, g, vals, NULL) != WPK_OK) {
            /* a fixed-size reshape of a probed dim, say: the probe proves nothing */
            wpk_clear_error(ctx);
            break;
        }
    }
    if (!p->vals[0] || !p->vals[1]) {
        wpk_free(p->vals[0]);
        wpk_free(p->vals[1]);
        p->vals[0] = p->vals[1] = NULL;
    }
}

static bool equal_known(const ir_tensor *a, const ir_tensor *b) {
    if (a->dtype == WPK_DTYPE_UNDEFINED || a->dtype != b->dtype || a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] < 0 || a->dims[i] != b->dims[i]) return false;
    return true;
}

/* Values a and b have the same shape whatever the symbolic dims are bound to. */
static bool same_shape(wpk_context *ctx, const ir_graph *g, probe *p, int a, int b) {
    const ir_tensor *ta = &g->values[a].t, *tb = &g->values[b].t;
    if (ta->dtype == WPK_DTYPE_UNDEFINED || ta->dtype != tb->dtype || ta->ndim != tb->ndim)
        return false;
    if (equal_known(ta, tb)) return true;
    for (int i = 0; i < ta->ndim; i++)
        if (ta->dims[i] >= 0 && tb->dims[i] >= 0 && ta->dims[i] != tb->dims[i]) return false;
    if (!p->tried) probe_run(ctx, g, p);
    if (!p->vals[0] || a >= p->n || b >= p->n) return false;
    return equal_known(&p->vals[0][a], &p->vals[0][b]) &&
           equal_known(&p->vals[1][a], &p->vals[1][b]);
}

/* ---- the chain from one Conv/Gemm/MatMul ---- */

typedef struct chain {
    int base;         /* the Conv/Gemm/MatMul */
    int value;        /* the value reached so far */
    int last;         /* the node producing it */
    int dead[MAX_CHAIN], ndead;
    /* bias length (Conv output channels, Gemm/MatMul columns); -1 when unknown */
    int64_t channels;
    double *bias;     /* accumulated bias (channels values), valid when has_bias */
    bool has_bias;
    int z;            /* the residual, -1 for none */
    act_params act;
    /* a wpk-domain fused node may be made (FusedGemm needs the product's alpha = beta = 1) */
    bool fusable;
} chain;

static void absorb(chain *c, int node, int value) {
    c->dead[c->ndead++] = node;
    c->last = node;
    c->value = value;
}

/* Set up c for base node k; false when k cannot start a chain. */
static bool chain_start(const ir_graph *g, int k, chain *c) {
    const ir_node *n = &g->nodes[k];
    if (n->nout < 1 || n->out[0] < 0 || n->nin < 2 || n->in[0] < 0 || n->in[1] < 0) return false;
    for (int i = 1; i < n->nout; i++)
        if (n->out[i] >= 0) return false;
    const ir_tensor *y = &g->values[n->out[0]].t;
    if (y->dtype != WPK_DTYPE_FLOAT32) return false;
    c->base = c->last = k;
    c->value = n->out[0];
    c->ndead = 0;
    c->has_bias = false;
    c->z = -1;
    memset(&c->act, 0, sizeof c->act);
    c->fusable = true;
    c->channels = -1;
    const ir_tensor *w = &g->values[n->in[1]].t;
    if (n->op == IR_OP_CONV) {
        if (w->dtype != WPK_DTYPE_UNDEFINED && w->ndim >= 3) c->channels = w->dims[0];
    } else if (n->op == IR_OP_GEMM) {
        if (w->dtype != WPK_DTYPE_UNDEFINED && w->ndim == 2)
            c->channels = w->dims[ir_attr_int(n, "transB", 0) ? 0 : 1];
        /* FusedGemm's alpha and beta belong to the activation: the product must have 1s */
        float beta = ir_attr_float(n, "beta", 1.0f);
        bool has_c = n->nin > 2 && n->in[2] >= 0;
        c->fusable = ir_attr_float(n, "alpha", 1.0f) == 1.0f &&
                     (beta == 1.0f || !has_c || const_f32(g, n->in[2]));
    } else {
        if (y->ndim >= 1) c->channels = y->dims[y->ndim - 1];
    }
    return true;
}

/* The bias the node already has, as the start of the accumulator: Conv B or Gemm beta * C
 * (one value, or one per column). False when it is not a constant of that form. */
static bool bias_init(const ir_graph *g, chain *c) {
    const ir_node *n = &g->nodes[c->base];
    for (int64_t j = 0; j < c->channels; j++) c->bias[j] = 0.0;
    if (n->op == IR_OP_MATMUL || n->nin < 3 || n->in[2] < 0) return true;
    const ir_tensor *b = const_f32(g, n->in[2]);
    if (!b) return false;
    int64_t cnt = ir_numel(b);
    const float *d = b->data;
    if (n->op == IR_OP_CONV) {
        if (cnt != c->channels) return false;
        for (int64_t j = 0; j < cnt; j++) c->bias[j] = d[j];
        return true;
    }
    bool row = b->ndim == 1 || (b->ndim == 2 && b->dims[0] == 1);
    if (!(cnt == 1 || (cnt == c->channels && row))) return false;
    double beta = ir_attr_float(n, "beta", 1.0f);
    for (int64_t j = 0; j < c->channels; j++) c->bias[j] = beta * d[cnt == 1 ? 0 : j];
    return true;
}

/* Add node a reads c->value and a constant that broadcasts along the bias axis: fold it into
 * the accumulator. The constant, right-aligned against the output, may only have the bias
 * axis (Conv: dim 1; Gemm/MatMul: the last) not 1, and only that many values there. */
static bool try_bias(const ir_graph *g, chain *c, int a) {
    const ir_node *n = &g->nodes[a];
    int other = other_operand(n, c->value);
    const ir_tensor *b = other >= 0 ? const_f32(g, other) : NULL;
    if (!b || c->channels < 0) return false;
    const ir_tensor *y = &g->values[c->value].t;
    int rank = g->nodes[c->base].op == IR_OP_CONV ? g->values[g->nodes[c->base].in[1]].t.ndim
                                                  : y->ndim;
    if (y->dtype == WPK_DTYPE_UNDEFINED || rank != y->ndim || b->ndim > rank) return false;
    int axis = g->nodes[c->base].op == IR_OP_CONV ? 1 : rank - 1;
    for (int i = 0; i < b->ndim; i++) {
        int at = rank - b->ndim + i;
        if (b->dims[i] != 1 && !(at == axis && b->dims[i] == c->channels)) return false;
    }
    if (!c->has_bias && !bias_init(g, c)) return false;
    c->has_bias = true;
    const float *d = b->data;
    bool one = ir_numel(b) == 1;
    for (int64_t j = 0; j < c->channels; j++) c->bias[j] += d[one ? 0 : j];
    absorb(c, a, n->out[0]);
    return true;
}

/* Add node a reads c->value and another tensor of exactly its shape: the residual. */
static bool try_residual(wpk_context *ctx, const ir_graph *g, probe *p, chain *c, int a) {
    const ir_node *n = &g->nodes[a];
    int other = other_operand(n, c->value);
    if (other < 0 || c->z >= 0 || !c->fusable || n->out[0] < 0) return false;
    if (!same_shape(ctx, g, p, c->value, other)) return false;
    c->z = other;
    absorb(c, a, n->out[0]);
    return true;
}

/* A single-input activation node (Clip: with constant or absent bounds). */
static bool try_activation(const ir_graph *g, chain *c, int a) {
    const ir_node *n = &g->nodes[a];
    if (n->nin < 1 || n->in[0] != c->value || n->out[0] < 0) return false;
    act_params *p = &c->act;
    switch (n->op) {
    case IR_OP_RELU: p->kind = ACT_RELU; break;
    case IR_OP_LEAKY_RELU:
        p->kind = ACT_LEAKY_RELU;
        p->alpha = ir_attr_float(n, "alpha", 0.01f);
        break;
    case IR_OP_HARD_SIGMOID:
        p->kind = ACT_HARD_SIGMOID;
        p->alpha = ir_attr_float(n, "alpha", 0.2f);
        p->beta = ir_attr_float(n, "beta", 0.5f);
        break;
    case IR_OP_HARD_SWISH: p->kind = ACT_HARD_SWISH; break;
    case IR_OP_SIGMOID: p->kind = ACT_SIGMOID; break;
    case IR_OP_TANH: p->kind = ACT_TANH; break;
    case IR_OP_GELU:
        /* the tanh approximation has no fused form */
        if (strcmp(ir_attr_str(n, "approximate", "none"), "none") != 0) return false;
        p->kind = ACT_GELU;
        break;
    case IR_OP_CLIP: {
        float bound[2] = {-3.4028234663852886e38f, 3.4028234663852886e38f};
        for (int i = 1; i <= 2; i++) {
            if (i >= n->nin || n->in[i] < 0) continue;
            const ir_tensor *t = const_f32(g, n->in[i]);
            if (!t || ir_numel(t) != 1) return false;
            bound[i - 1] = ((const float *)t->data)[0];
        }
        p->kind = ACT_CLIP;
        p->lo = bound[0];
        p->hi = bound[1];
        break;
    }
    default: return false;
    }
    absorb(c, a, n->out[0]);
    return true;
}

/* x = c->value read by exactly Sigmoid(x) and Mul(x, that), nothing else: SiLU. */
static bool try_silu(const ir_graph *g, chain *c) {
    int x = c->value, r[2];
    if (ir_graph_is_output(g, x) || readers(g, x, r, 2) != 2 || r[0] == r[1]) return false;
    for (int s = 0; s < 2; s++) {
        const ir_node *sig = &g->nodes[r[s]], *mul = &g->nodes[r[1 - s]];
        if (sig->op != IR_OP_SIGMOID || mul->op != IR_OP_MUL || sig->out[0] < 0) continue;
        if (other_operand(mul, x) != sig->out[0] || mul->out[0] < 0) continue;
        if (ir_graph_single_consumer(g, sig->out[0]) != r[1 - s]) continue;
        absorb(c, r[s], sig->out[0]);
        absorb(c, r[1 - s], mul->out[0]);
        c->act.kind = ACT_SILU;
        return true;
    }
    return false;
}

/* The single reader of v if it is a binary `op` reading v once; its index, else -1. */
static int next_binary(const ir_graph *g, int v, ir_op op) {
    int k = ir_graph_single_consumer(g, v);
    if (k < 0 || g->nodes[k].op != op || other_operand(&g->nodes[k], v) < 0 ||
        g->nodes[k].out[0] < 0)
        return -1;
    return k;
}

/* Gelu as PyTorch exports it: x read by exactly
 *   d = Div(x, sqrt 2) or Mul(x, 1/sqrt 2);  e = Erf(d);  a = Add(e, 1)
 * and by the product, either Mul(Mul(x, a), 0.5) or Mul(Mul(x, 0.5), a) (operands in any
 * order). Every intermediate has one reader. */
static bool try_gelu(const ir_graph *g, chain *c) {
    int x = c->value, r[2];
    if (ir_graph_is_output(g, x) || readers(g, x, r, 2) != 2 || r[0] == r[1]) return false;
    for (int s = 0; s < 2; s++) {
        const ir_node *dn = &g->nodes[r[s]];
        int dv = dn->out[0];
        bool scaled = (dn->op == IR_OP_DIV && dn->nin == 2 && dn->in[0] == x &&
                       const_near(g, dn->in[1], 1.4142135623730951)) ||
                      (dn->op == IR_OP_MUL &&
                       const_near(g, other_operand(dn, x), 0.7071067811865476));
        int e = scaled && dv >= 0 ? ir_graph_single_consumer(g, dv) : -1;
        if (e < 0 || g->nodes[e].op != IR_OP_ERF || g->nodes[e].out[0] < 0) continue;
        int ev = g->nodes[e].out[0], a = next_binary(g, ev, IR_OP_ADD);
        if (a < 0 || !const_near(g, other_operand(&g->nodes[a], ev), 1.0)) continue;
        int av = g->nodes[a].out[0];
        const ir_node *m1 = &g->nodes[r[1 - s]];
        int k1 = other_operand(m1, x), v1 = m1->out[0];
        if (m1->op != IR_OP_MUL || k1 < 0 || v1 < 0) continue;
        int m2 = next_binary(g, v1, IR_OP_MUL);
        if (m2 < 0) continue;
        int k2 = other_operand(&g->nodes[m2], v1);
        bool form_a = k1 == av && const_near(g, k2, 0.5);  /* (x * a) * 0.5 */
        bool form_b = k2 == av && const_near(g, k1, 0.5);  /* (x * 0.5) * a */
        if (!form_a && !form_b) continue;
        if (ir_graph_single_consumer(g, av) != (form_a ? r[1 - s] : m2)) continue;
        absorb(c, r[s], dv);
        absorb(c, e, ev);
        absorb(c, a, av);
        absorb(c, r[1 - s], v1);
        absorb(c, m2, g->nodes[m2].out[0]);
        c->act.kind = ACT_GELU;
        return true;
    }
    return false;
}

/* Follow the output of c->base as far as it fuses. */
static void chain_grow(wpk_context *ctx, const ir_graph *g, probe *p, chain *c) {
    for (;;) {
        if (c->ndead + 5 > MAX_CHAIN) return;
        int k = ir_graph_single_consumer(g, c->value);
        if (k >= 0 && g->nodes[k].op == IR_OP_ADD) {
            if (c->bias && try_bias(g, c, k)) continue;
            if (try_residual(ctx, g, p, c, k)) continue;
            return;
        }
        if (!c->fusable) return;
        if (k >= 0) {
            try_activation(g, c, k);
            return;
        }
        if (!try_silu(g, c)) try_gelu(g, c);
        return;
    }
}

/* Turn the chain into one node in the place of its last node. Returns WPK_ERR_NOMEM. */
static wpk_status chain_commit(ir_graph *g, chain *c) {
    ir_node *n = &g->nodes[c->base];
    ir_op base = n->op;
    bool act = c->act.kind != ACT_NONE;
    /* a bias alone keeps standard ONNX: Conv B, Gemm C; MatMul of 2-D operands is a Gemm */
    bool gemmable = base == IR_OP_MATMUL && g->values[n->in[0]].t.ndim == 2 &&
                    g->values[n->in[1]].t.ndim == 2;
    bool fused = act || c->z >= 0 || (base == IR_OP_MATMUL && !gemmable);
    if (c->has_bias) {
        char buf[512];
        float *d;
        int64_t dims[1] = {c->channels};
        snprintf(buf, sizeof buf, "%.400s_bias", n->name);
        int bv = new_const(g, buf, 1, dims, &d);
        if (bv < 0) return WPK_ERR_NOMEM;
        n = &g->nodes[c->base];
        for (int64_t j = 0; j < c->channels; j++) d[j] = (float)c->bias[j];
        if (n->nin < 3 && ir_node_resize(g, n, 3, n->nout)) return WPK_ERR_NOMEM;
        n->in[2] = bv;
        if (base == IR_OP_GEMM && ir_attr_find(n, "beta") && ir_node_set_float(g, n, "beta", 1.0f))
            return WPK_ERR_NOMEM;
        if (base == IR_OP_MATMUL && !fused) ir_node_set_op(n, IR_OP_GEMM);
    }
    if (fused) {
        if (c->z >= 0) {
            if (n->nin < Z_INPUT + 1 && ir_node_resize(g, n, Z_INPUT + 1, n->nout))
                return WPK_ERR_NOMEM;
            n->in[Z_INPUT] = c->z;
        }
        if (base == IR_OP_GEMM) {
            /* 1 (checked by chain_start, beta folded above when C is there) */
            ir_node_remove_attr(n, "alpha");
            ir_node_remove_attr(n, "beta");
        }
        ir_node_set_op(n, base == IR_OP_CONV ? IR_OP_FUSED_CONV
                          : base == IR_OP_GEMM ? IR_OP_FUSED_GEMM
                                               : IR_OP_FUSED_MATMUL);
        if (act_write(g, n, &c->act)) return WPK_ERR_NOMEM;
    }
    n->out[0] = c->value;
    ir_node moved = *n;
    n->dead = true;
    g->nodes[c->last] = moved;
    for (int i = 0; i < c->ndead; i++)
        if (c->dead[i] != c->last) g->nodes[c->dead[i]].dead = true;
    return WPK_OK;
}

/* A Gemm with beta != 1 and a constant C gets its bias rewritten (beta folded) when it fuses:
 * the accumulator must be set up even without a bias Add. False: it cannot fuse after all. */
static bool gemm_fold_beta(const ir_graph *g, chain *c) {
    const ir_node *n = &g->nodes[c->base];
    if (n->op != IR_OP_GEMM || c->has_bias || ir_attr_float(n, "beta", 1.0f) == 1.0f ||
        n->nin < 3 || n->in[2] < 0)
        return true;
    if (!c->bias || !bias_init(g, c)) return false;
    c->has_bias = true;
    return true;
}

wpk_status pass_fuse_epilogue(wpk_context *ctx, ir_graph *g, const pass_options *opt, int *changed) {
    (void)opt;
    *changed = 0;
    ir_graph_compact(g); /* refresh producers */
    int64_t cmax = 0;
    for (int k = 0; k < g->nnodes; k++) {
        const ir_node *n = &g->nodes[k];
        if (n->op != IR_OP_CONV && n->op != IR_OP_GEMM && n->op != IR_OP_MATMUL) continue;
        /* bias lengths: a dim of the output or of the weight */
        int vs[2] = {n->nout > 0 ? n->out[0] : -1, n->nin > 1 ? n->in[1] : -1};
        for (int i = 0; i < 2; i++)
            if (vs[i] >= 0) {
                const ir_tensor *t = &g->values[vs[i]].t;
                for (int d = 0; d < t->ndim; d++)
                    if (t->dims[d] > cmax) cmax = t->dims[d];
            }
    }
    double *acc = wpk_malloc(sizeof(double) * (size_t)(cmax + 1));
    if (!acc) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory fusing epilogues");
    probe p = {0};
    wpk_status st = WPK_OK;
    for (int k = 0; k < g->nnodes && st == WPK_OK; k++) {
        ir_op op = g->nodes[k].op;
        if (g->nodes[k].dead || (op != IR_OP_CONV && op != IR_OP_GEMM && op != IR_OP_MATMUL))
            continue;
        chain c;
        if (!chain_start(g, k, &c)) continue;
        /* the accumulator holds one bias value per channel/column when their count is known */
        c.bias = c.channels >= 0 && c.channels <= cmax ? acc : NULL;
        chain_grow(ctx, g, &p, &c);
        if (c.ndead == 0) continue;
        if ((c.z >= 0 || c.act.kind != ACT_NONE) && !gemm_fold_beta(g, &c)) continue;
        if ((st = chain_commit(g, &c)))
            st = wpk_error(ctx, st, "out of memory fusing node '%s'", g->nodes[c.last].name);
        (*changed)++;
    }
    if (st == WPK_OK) ir_graph_compact(g);
    wpk_free(acc);
    wpk_free(p.vals[0]);
    wpk_free(p.vals[1]);
    return st;
}
