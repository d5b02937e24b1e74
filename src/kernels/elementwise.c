/* elementwise.c -- the template of single elementwise ops on float32: the unary activations
 * and math functions (Relu, LeakyRelu, Clip with constant bounds, Sigmoid, HardSigmoid,
 * HardSwish, Tanh, Erf, Gelu, Sqrt, Exp, Log, Neg, Abs, Reciprocal, Floor, Ceil, Sign, Elu,
 * Selu, Softplus, Softsign, Mish) and the broadcasting binary ops (Add, Sub, Mul, Div, Pow,
 * PRelu), each as one compute over the output's shape.
 *
 * The schedule: the output's dims split into an outer and an inner group such that every
 * input is either read whole or broadcast over the whole inner group (Add of [N, C, H, W] and
 * a per-channel [C, 1, 1]: inner = H x W, and the per-channel value is one broadcast per row).
 * Each group is fused into one loop; the inner one is cut into vectors (`vec` lanes), a few of
 * them unrolled (`unroll`), and blocks of `grain` elements that run in parallel together with
 * the outer loop (`parallel`). The memory planner may give the output the first input's
 * buffer (an in-place op): element i is read before element i is written, in every schedule. */
#include <float.h>
#include <string.h>

#include "kernels/common.h"
#include "kernels/conv.h"

#define NAME "elementwise"

/* Elements below which a kernel runs on one thread: waking the pool costs more. */
#define PAR_MIN 32768

static bool is_unary(ir_op op) {
    switch (op) {
    case IR_OP_RELU: case IR_OP_LEAKY_RELU: case IR_OP_CLIP: case IR_OP_SIGMOID:
    case IR_OP_HARD_SIGMOID: case IR_OP_HARD_SWISH: case IR_OP_TANH: case IR_OP_ERF:
    case IR_OP_GELU: case IR_OP_SQRT: case IR_OP_EXP: case IR_OP_LOG: case IR_OP_NEG:
    case IR_OP_ABS: case IR_OP_RECIPROCAL: case IR_OP_FLOOR: case IR_OP_CEIL: case IR_OP_SIGN:
    case IR_OP_ELU: case IR_OP_SELU: case IR_OP_SOFTPLUS: case IR_OP_SOFTSIGN: case IR_OP_MISH:
        return true;
    default: return false;
    }
}

static bool is_binary(ir_op op) {
    return op == IR_OP_ADD || op == IR_OP_SUB || op == IR_OP_MUL || op == IR_OP_DIV ||
           op == IR_OP_POW || op == IR_OP_PRELU;
}

/* Clip's bound i (1: min, 2: max): its value when given, the default when absent. False when
 * given but not a known one-element float32 constant. */
static bool clip_bound(const ir_tensor *t, float def, float *v) {
    *v = def;
    if (!t) return true;
    if (t->dtype != WPK_DTYPE_FLOAT32 || !t->data || ir_numel(t) != 1) return false;
    *v = *(const float *)t->data;
    return true;
}

/* a broadcasts to out: right-aligned, each dim equal or 1. */
static bool broadcasts(const ir_tensor *a, const ir_tensor *out) {
    if (a->ndim > out->ndim) return false;
    for (int i = 0; i < a->ndim; i++) {
        int64_t d = a->dims[i], o = out->dims[out->ndim - a->ndim + i];
        if (d != o && d != 1) return false;
    }
    return true;
}

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out) {
    (void)self;
    if (!n || n->nout < 1 || !out || !out[0] || !tune_static_f32(out[0]) || out[0]->ndim < 1)
        return false;
    if (n->nout > 1 && out[1]) return false;
    if (is_unary(n->op)) {
        if (!in || !in[0] || !tune_static_f32(in[0]) || !ir_same_shape(in[0], out[0])) return false;
        if (n->op == IR_OP_CLIP) {
            float v;
            return (n->nin < 2 || clip_bound(in[1], 0, &v)) &&
                   (n->nin < 3 || clip_bound(in[2], 0, &v)) && n->nin <= 3;
        }
        if (n->op == IR_OP_GELU) {
            const char *a = ir_attr_str(n, "approximate", "none");
            if (strcmp(a, "none") && strcmp(a, "tanh")) return false;
        }
        return n->nin == 1;
    }
    if (!is_binary(n->op) || n->nin != 2 || !in || !in[0] || !in[1]) return false;
    for (int i = 0; i < 2; i++)
        if (!tune_static_f32(in[i]) || !broadcasts(in[i], out[0])) return false;
    return true;
}

/* The op's parameters as they enter the key and the expression. */
typedef struct ew {
    float alpha, beta, gamma, lo, hi;
    bool gelu_tanh;
} ew;

static void read_params(const tune_task *t, ew *p) {
    const ir_node *n = t->node;
    memset(p, 0, sizeof *p);
    switch (n->op) {
    case IR_OP_LEAKY_RELU: p->alpha = ir_attr_float(n, "alpha", 0.01f); break;
    case IR_OP_HARD_SIGMOID:
        p->alpha = ir_attr_float(n, "alpha", 0.2f);
        p->beta = ir_attr_float(n, "beta", 0.5f);
        break;
    case IR_OP_CLIP:
        clip_bound(tune_task_in(t, 1), -FLT_MAX, &p->lo);
        clip_bound(tune_task_in(t, 2), FLT_MAX, &p->hi);
        break;
    case IR_OP_GELU: p->gelu_tanh = !strcmp(ir_attr_str(n, "approximate", "none"), "tanh"); break;
    case IR_OP_ELU: p->alpha = ir_attr_float(n, "alpha", 1.0f); break;
    case IR_OP_SELU:
        p->alpha = ir_attr_float(n, "alpha", 1.67326319217681884765625f);
        p->gamma = ir_attr_float(n, "gamma", 1.05070102214813232421875f);
        break;
    default: break;
    }
}

static void describe(const kernel_provider *self, tune_task *t) {
    (void)self;
    ew p;
    read_params(t, &p);
    tune_key_add(t, NAME ":%s", t->node->op_type);
    switch (t->node->op) {
    case IR_OP_LEAKY_RELU: tune_key_add(t, "(%g)", (double)p.alpha); break;
    case IR_OP_HARD_SIGMOID: tune_key_add(t, "(%g,%g)", (double)p.alpha, (double)p.beta); break;
    case IR_OP_CLIP: tune_key_add(t, "(%g,%g)", (double)p.lo, (double)p.hi); break;
    case IR_OP_GELU: if (p.gelu_tanh) tune_key_add(t, "(tanh)"); break;
    case IR_OP_ELU: tune_key_add(t, "(%g)", (double)p.alpha); break;
    case IR_OP_SELU: tune_key_add(t, "(%g,%g)", (double)p.alpha, (double)p.gamma); break;
    default: break;
    }
    tune_key_add(t, ":");
    int nin = is_binary(t->node->op) ? 2 : 1;
    for (int i = 0; i < nin; i++) {
        if (i) tune_key_add(t, ",");
        tune_key_dims(t, &t->in[i]);
    }
    t->flops = ir_numel(&t->out[0]);
}

/* The first output dim of the inner group: from there on every input is either whole or
 * broadcast over all of it (dims of extent 1 in the output do not matter). */
static int inner_start(const tune_task *t) {
    const ir_tensor *o = &t->out[0];
    int nin = is_binary(t->node->op) ? 2 : 1;
    int start = o->ndim;
    int pattern[2] = {-1, -1}; /* per input: 1 whole, 0 broadcast, -1 not seen yet */
    for (int d = o->ndim - 1; d >= 0; d--) {
        if (o->dims[d] == 1) {
            start = d;
            continue;
        }
        bool fits = true;
        int next[2];
        for (int i = 0; i < nin; i++) {
            const ir_tensor *a = &t->in[i];
            int ad = d - (o->ndim - a->ndim);
            next[i] = ad >= 0 && a->dims[ad] == o->dims[d];
            fits &= pattern[i] < 0 || pattern[i] == next[i];
        }
        if (!fits) break;
        for (int i = 0; i < nin; i++) pattern[i] = next[i];
        start = d;
    }
    return start;
}

static int64_t extent(const ir_tensor *o, int from, int to) {
    int64_t n = 1;
    for (int d = from; d < to; d++) n *= o->dims[d];
    return n;
}

static void space(const kernel_provider *self, const tune_task *t, tune_space *s) {
    (void)self;
    memset(s, 0, sizeof *s);
    const ir_tensor *o = &t->out[0];
    int64_t ninner = extent(o, inner_start(t), o->ndim), total = ir_numel(o);
    static const int64_t vecs[] = {1, 4, 8, 16, 32}, unrolls[] = {1, 2, 4};
    static const int64_t grains[] = {1024, 4096, 16384, 65536}, flag[] = {0, 1};
    int nv = 1;
    while (nv < 5 && vecs[nv] <= ninner) nv++;
    tune_space_add(s, "vec", nv, vecs);
    tune_space_add(s, "unroll", ninner >= 8 ? 3 : 1, unrolls);
    tune_space_add(s, "grain", 4, grains);
    tune_space_add(s, "parallel", total >= 1024 ? 2 : 1, flag);
}

static void default_config(const kernel_provider *self, const tune_task *t, const tune_space *s,
                           tune_config *cfg) {
    (void)self;
    memset(cfg, 0, sizeof *cfg);
    const ir_tensor *o = &t->out[0];
    int64_t ninner = extent(o, inner_start(t), o->ndim), total = ir_numel(o);
    int64_t vec = tune_vector_floats();
    tune_config_set(s, cfg, "vec", ninner >= vec ? vec : ninner >= 8 ? 8 : 4);
    tune_config_set(s, cfg, "unroll", 1);
    /* at least a few blocks per thread, none smaller than a few pages */
    int64_t grain = total / (4 * tune_threads());
    tune_config_set(s, cfg, "grain", grain < 4096 ? 4096 : grain);
    tune_config_set(s, cfg, "parallel", total >= PAR_MIN);
}

/* The element of input a (broadcast to the output's axes). */
static const te_expr *load_bcast(te_ctx *c, te_tensor *a, const ir_tensor *ai, int ondim,
                                 te_iter *const *axes) {
    const te_expr *idx[TE_MAX_DIMS];
    if (ai->ndim == 0) {
        idx[0] = te_int(c, 0);
        return te_load(c, a, 1, idx);
    }
    for (int i = 0; i < ai->ndim; i++) {
        int od = i + ondim - ai->ndim;
        idx[i] = ai->dims[i] == 1 ? te_int(c, 0) : te_var(c, axes[od]);
    }
    return te_load(c, a, ai->ndim, idx);
}

/* log(1 + exp(v)) as max(v, 0) + log(1 + exp(-|v|)), so large |v| neither overflows nor
 * loses the tail (ops/math_unary.c takes log1p of the same term). */
static const te_expr *softplus(te_ctx *c, const te_expr *v) {
    const te_expr *tail = te_call(c, TE_FN_EXP, te_sub(c, te_float(c, 0.0),
                                                       te_call(c, TE_FN_ABS, v, NULL)), NULL);
    return te_add(c, te_max(c, v, te_float(c, 0.0)),
                  te_call(c, TE_FN_LOG, te_add(c, te_float(c, 1.0), tail), NULL));
}

/* v < 0 (Selu: v <= 0) ? alpha (exp(v) - 1) : v */
static const te_expr *exp_linear(te_ctx *c, te_expr_kind cmp, double alpha, const te_expr *v) {
    const te_expr *neg = te_mul(c, te_float(c, alpha),
                                te_sub(c, te_call(c, TE_FN_EXP, v, NULL), te_float(c, 1.0)));
    return te_select(c, te_cmp(c, cmp, v, te_float(c, 0.0)), neg, v);
}

static const te_expr *unary(te_ctx *c, ir_op op, const ew *p, const te_expr *v) {
    te_act a;
    const te_expr *zero = te_float(c, 0.0), *one = te_float(c, 1.0);
    switch (op) {
    case IR_OP_RELU: a = te_act_default(TE_ACT_RELU); break;
    case IR_OP_LEAKY_RELU:
        a = te_act_default(TE_ACT_LEAKY_RELU);
        a.alpha = p->alpha;
        break;
    case IR_OP_CLIP:
        a = te_act_default(TE_ACT_CLIP);
        a.lo = p->lo;
        a.hi = p->hi;
        break;
    case IR_OP_SIGMOID: a = te_act_default(TE_ACT_SIGMOID); break;
    case IR_OP_HARD_SIGMOID:
        a = te_act_default(TE_ACT_HARD_SIGMOID);
        a.alpha = p->alpha;
        a.beta = p->beta;
        break;
    case IR_OP_HARD_SWISH: a = te_act_default(TE_ACT_HARD_SWISH); break;
    case IR_OP_TANH: a = te_act_default(TE_ACT_TANH); break;
    case IR_OP_GELU:
        if (p->gelu_tanh) {
            /* 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))), as ops/activation.h */
            const te_expr *v3 = te_mul(c, te_mul(c, te_mul(c, v, te_float(c, 0.044715)), v), v);
            const te_expr *in = te_mul(c, te_add(c, v, v3), te_float(c, 0.79788456080286535588));
            return te_mul(c, te_mul(c, te_float(c, 0.5), v),
                          te_add(c, te_float(c, 1.0), te_call(c, TE_FN_TANH, in, NULL)));
        }
        a = te_act_default(TE_ACT_GELU);
        break;
    case IR_OP_ERF: return te_call(c, TE_FN_ERF, v, NULL);
    case IR_OP_SQRT: return te_call(c, TE_FN_SQRT, v, NULL);
    case IR_OP_EXP: return te_call(c, TE_FN_EXP, v, NULL);
    case IR_OP_LOG: return te_call(c, TE_FN_LOG, v, NULL);
    case IR_OP_NEG: return te_mul(c, v, te_float(c, -1.0)); /* exact, -0 for 0 as -v */
    case IR_OP_ABS: return te_call(c, TE_FN_ABS, v, NULL);
    case IR_OP_RECIPROCAL: return te_div(c, te_float(c, 1.0), v);
    case IR_OP_FLOOR: return te_call(c, TE_FN_FLOOR, v, NULL);
    case IR_OP_CEIL: /* exact: floor(-v) is an integer, and negation is exact */
        return te_sub(c, zero, te_call(c, TE_FN_FLOOR, te_sub(c, zero, v), NULL));
    case IR_OP_SIGN: /* NaN stays NaN, as in the reference kernel */
        return te_select(c, te_cmp(c, TE_LT, zero, v), one,
                         te_select(c, te_cmp(c, TE_LT, v, zero), te_float(c, -1.0),
                                   te_select(c, te_cmp(c, TE_EQ, v, zero), zero, v)));
    case IR_OP_ELU: return exp_linear(c, TE_LT, p->alpha, v);
    case IR_OP_SELU: return te_mul(c, te_float(c, p->gamma), exp_linear(c, TE_LE, p->alpha, v));
    case IR_OP_SOFTPLUS: return softplus(c, v);
    case IR_OP_SOFTSIGN: return te_div(c, v, te_add(c, one, te_call(c, TE_FN_ABS, v, NULL)));
    case IR_OP_MISH: return te_mul(c, v, te_call(c, TE_FN_TANH, softplus(c, v), NULL));
    default: return NULL;
    }
    return te_activation(c, &a, v);
}

static const te_expr *binary(te_ctx *c, ir_op op, const te_expr *a, const te_expr *b) {
    switch (op) {
    case IR_OP_ADD: return te_add(c, a, b);
    case IR_OP_SUB: return te_sub(c, a, b);
    case IR_OP_MUL: return te_mul(c, a, b);
    case IR_OP_DIV: return te_div(c, a, b);
    case IR_OP_POW: return te_call(c, TE_FN_POW, a, b);
    case IR_OP_PRELU:
        return te_select(c, te_cmp(c, TE_LT, a, te_float(c, 0.0)), te_mul(c, a, b), a);
    default: return NULL;
    }
}

static wpk_status build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                        const tune_space *s,
                        const tune_config *cfg, tune_build *out) {
    memset(out, 0, sizeof *out);
    const ir_node *n = t->node;
    if (!n || !(is_unary(n->op) || is_binary(n->op)))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, NAME ": node '%s' is not an elementwise op "
                         "this template takes", n ? n->name : "(null)");
    TRY(tune_check_legal(c, self, t, s, cfg));
    ew p;
    read_params(t, &p);
    const ir_tensor *o = &t->out[0];
    const int nin = is_binary(n->op) ? 2 : 1;
    te_tensor *x[2] = {NULL, NULL};
    for (int i = 0; i < nin; i++) {
        x[i] = tune_placeholder(c, i ? "b" : "a", &t->in[i]);
        if (!x[i]) return tune_failed(c, NAME);
        out->args[out->nargs++] = x[i];
    }
    out->ninputs = out->nargs;
    te_iter **ax = te_compute_axes(c, o->ndim, o->dims, NULL);
    if (!ax) return tune_failed(c, NAME);
    const te_expr *v = load_bcast(c, x[0], &t->in[0], o->ndim, ax);
    v = nin == 2 ? binary(c, n->op, v, load_bcast(c, x[1], &t->in[1], o->ndim, ax))
                 : unary(c, n->op, &p, v);
    te_tensor *y = v ? te_compute(c, "y", o->ndim, o->dims, ax, v) : NULL;
    if (!y) return tune_failed(c, NAME);
    out->args[out->nargs++] = y;

    te_schedule *sc = te_schedule_create(c, &y, 1);
    if (!sc) return tune_failed(c, NAME);
    out->schedule = sc;
    te_stage *st = te_stage_of(sc, y);
    const int start = inner_start(t);
    te_iter *outer = NULL, *inner = NULL;
    for (int d = 0; d < o->ndim; d++) {
        te_iter **grp = d < start ? &outer : &inner;
        if (!*grp) *grp = ax[d];
        else TRY(te_fuse(st, *grp, ax[d], grp));
    }
    /* inner_start() < ndim: the last dim always fits the inner group */
    int64_t ninner = extent(o, start, o->ndim), nouter = outer ? extent(o, 0, start) : 1;
    return tune_schedule_flat(st, outer, nouter, inner, ninner, tune_value(s, cfg, "vec"),
                              tune_value(s, cfg, "unroll"), tune_value(s, cfg, "grain"),
                              tune_value(s, cfg, "parallel") != 0);
}

const kernel_provider tune_elementwise = {
    .name = NAME,
    .family = "generated",
    .supports = supports,
    .describe = describe,
    .space = space,
    .default_config = default_config,
    .legal = kernel_legal_in_space,
    .build = build,
};
