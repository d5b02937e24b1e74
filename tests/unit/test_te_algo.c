/* test_te_algo.c -- the op algorithms of src/te/algo computed on random inputs and compared with
 * the reference kernels of src/ops (called on hand-built nodes: Conv/FusedConv, ConvNCHWc and
 * Reorder, MatMul/FusedMatMul/FusedGemm, the pools, Softmax, LayerNormalization), over odd
 * sizes, 1x1 and 7x7 kernels, strides, padding, dilation, groups, depthwise and batch > 1.
 *
 * The tensor expressions run on an evaluator written here, straight from their meaning: every
 * compute materialized element by element, float32 arithmetic, floor division. It is strict
 * where generated code may be: both sides of a select are evaluated and every load is
 * bounds-checked, so an algorithm that relies on a select to skip an out-of-range read fails.
 * Each algorithm is also lowered (src/loop) under its default schedule and under a schedule
 * like a template's (pad inlined, the reduction computed per tile of its epilogue on the stack,
 * cache_write, statistics computed per row, splits that leave tails, vectorized and parallel
 * loops), and the loops run on the loop interpreter against the same references; the scheduled
 * kernel is also compiled to C (src/codegen/c, into a fresh $WPK_CACHE_DIR unless one is set)
 * and run natively.
 * Tolerance: |got - want| <= 1e-4 * (1 + |want|) (the references accumulate in double). */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "codegen/c/cg_c.h"
#include "ir/graph.h"
#include "loop/interp.h"
#include "loop/lower.h"
#include "ops/activation.h"
#include "ops/blocked.h"
#include "te/algo/conv2d.h"
#include "te/algo/conv2d_nchwc.h"
#include "te/algo/dense.h"
#include "te/algo/layer_norm.h"
#include "te/algo/movement.h"
#include "te/algo/pad.h"
#include "te/algo/pool.h"
#include "te/algo/softmax.h"

#define TOL 1e-4f

/* ---- the evaluator ---- */

#define MAX_TENSORS 64

typedef struct evaluator {
    const te_tensor *t[MAX_TENSORS];
    float *data[MAX_TENSORS];
    bool owned[MAX_TENSORS];
    int n;
    int64_t *env; /* by iterator id */
    int nenv;
    char error[256];
} evaluator;

static void ev_init(evaluator *ev, const te_ctx *c) {
    memset(ev, 0, sizeof *ev);
    ev->nenv = c->next_id;
    ev->env = calloc((size_t)ev->nenv + 1, sizeof(int64_t));
}

static void ev_free(evaluator *ev) {
    for (int i = 0; i < ev->n; i++)
        if (ev->owned[i]) free(ev->data[i]);
    free(ev->env);
}

static void ev_bind(evaluator *ev, const te_tensor *t, float *data) {
    ev->t[ev->n] = t;
    ev->data[ev->n++] = data;
}

static int64_t numel(const te_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

static float *ev_tensor(evaluator *ev, const te_tensor *t);

static bool is_float(const te_expr *e) { return e->type.scalar == TE_F32; }

static int64_t fdiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* One value: integers and booleans as int64, floats as float (rounded at every step). */
typedef struct val {
    int64_t i;
    float f;
} val;

static val ev_expr(evaluator *ev, const te_expr *e);

static float ev_load(evaluator *ev, const te_expr *e) {
    const te_tensor *t = e->tensor;
    int64_t flat = 0;
    for (int d = 0; d < e->nindex; d++) {
        int64_t i = ev_expr(ev, e->index[d]).i;
        if (i < 0 || i >= t->shape[d]) {
            if (!ev->error[0])
                snprintf(ev->error, sizeof ev->error, "load of '%s': index %lld out of [0, %lld) "
                         "in dim %d", t->name, (long long)i, (long long)t->shape[d], d);
            return NAN;
        }
        flat = flat * t->shape[d] + i;
    }
    float *data = ev_tensor(ev, t);
    return data ? data[flat] : NAN;
}

static float reduce(evaluator *ev, const te_expr *e, int axis, float acc) {
    if (axis == e->nraxes) {
        float v = ev_expr(ev, e->a).f;
        switch (e->rop) {
        case TE_REDUCE_SUM: return acc + v;
        case TE_REDUCE_MAX: return v > acc || isnan(v) ? v : acc;
        case TE_REDUCE_MIN: return v < acc || isnan(v) ? v : acc;
        }
    }
    const te_iter *r = e->raxes[axis];
    for (int64_t k = r->min; k < r->min + r->extent; k++) {
        ev->env[r->id] = k;
        acc = reduce(ev, e, axis + 1, acc);
    }
    return acc;
}

static val ev_expr(evaluator *ev, const te_expr *e) {
    val r = {0, 0.0f}, a = {0, 0.0f}, b = {0, 0.0f};
    bool fl = is_float(e);
    switch (e->kind) {
    case TE_INT: r.i = e->i; r.f = (float)e->i; return r;
    case TE_FLOAT: r.f = (float)e->f; return r;
    case TE_VAR: r.i = ev->env[e->var->id]; return r;
    case TE_LOAD: r.f = ev_load(ev, e); return r;
    case TE_REDUCE:
        r.f = reduce(ev, e, 0, e->rop == TE_REDUCE_SUM ? 0.0f
                               : e->rop == TE_REDUCE_MAX ? -INFINITY : INFINITY);
        return r;
    case TE_SELECT: {
        /* strict: both sides run, as in vectorized code */
        val c = ev_expr(ev, e->a), t = ev_expr(ev, e->b), f = ev_expr(ev, e->c);
        return c.i ? t : f;
    }
    case TE_CAST:
        a = ev_expr(ev, e->a);
        if (fl) r.f = is_float(e->a) ? a.f : (float)a.i;
        else r.i = is_float(e->a) ? (int64_t)a.f : a.i;
        return r;
    case TE_CALL:
        a = ev_expr(ev, e->a);
        switch (e->fn) {
        case TE_FN_EXP: r.f = expf(a.f); break;
        case TE_FN_LOG: r.f = logf(a.f); break;
        case TE_FN_TANH: r.f = tanhf(a.f); break;
        case TE_FN_ERF: r.f = erff(a.f); break;
        case TE_FN_SQRT: r.f = sqrtf(a.f); break;
        case TE_FN_ABS: r.f = fabsf(a.f); break;
        case TE_FN_FLOOR: r.f = floorf(a.f); break;
        case TE_FN_POW: r.f = powf(a.f, ev_expr(ev, e->b).f); break;
        }
        return r;
    case TE_NOT: r.i = !ev_expr(ev, e->a).i; return r;
    default: break;
    }
    a = ev_expr(ev, e->a);
    b = ev_expr(ev, e->b);
    bool ofl = is_float(e->a);
    switch (e->kind) {
    case TE_ADD: fl ? (r.f = a.f + b.f) : (r.i = a.i + b.i); break;
    case TE_SUB: fl ? (r.f = a.f - b.f) : (r.i = a.i - b.i); break;
    case TE_MUL: fl ? (r.f = a.f * b.f) : (r.i = a.i * b.i); break;
    case TE_DIV: fl ? (r.f = a.f / b.f) : (r.i = fdiv(a.i, b.i)); break;
    case TE_MOD: r.i = a.i - fdiv(a.i, b.i) * b.i; break;
    case TE_MIN: fl ? (r.f = fminf(a.f, b.f)) : (r.i = a.i < b.i ? a.i : b.i); break;
    case TE_MAX: fl ? (r.f = fmaxf(a.f, b.f)) : (r.i = a.i > b.i ? a.i : b.i); break;
    case TE_LT: r.i = ofl ? a.f < b.f : a.i < b.i; break;
    case TE_LE: r.i = ofl ? a.f <= b.f : a.i <= b.i; break;
    case TE_EQ: r.i = ofl ? a.f == b.f : a.i == b.i; break;
    case TE_NE: r.i = ofl ? a.f != b.f : a.i != b.i; break;
    case TE_AND: r.i = a.i && b.i; break;
    case TE_OR: r.i = a.i || b.i; break;
    default:
        snprintf(ev->error, sizeof ev->error, "expression kind %d in a tensor expression",
                 (int)e->kind);
        break;
    }
    return r;
}

/* The values of t: bound data, or a compute materialized once. */
static float *ev_tensor(evaluator *ev, const te_tensor *t) {
    for (int i = 0; i < ev->n; i++)
        if (ev->t[i] == t) return ev->data[i];
    if (t->kind != TE_COMPUTE || ev->n == MAX_TENSORS) {
        snprintf(ev->error, sizeof ev->error, "no data bound for '%s'", t->name);
        return NULL;
    }
    int64_t count = numel(t), idx[TE_MAX_DIMS] = {0};
    float *out = malloc(sizeof(float) * (size_t)count);
    for (int64_t flat = 0; flat < count; flat++) {
        for (int d = 0; d < t->ndim; d++) ev->env[t->axes[d]->id] = idx[d];
        out[flat] = ev_expr(ev, t->body).f;
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d]) break;
            idx[d] = 0;
        }
    }
    ev->t[ev->n] = t;
    ev->owned[ev->n] = true;
    ev->data[ev->n++] = out;
    return out;
}

/* ---- references ---- */

static wpk_context *ctx;
static te_ctx C;

/* Buffers handed to kernels: generated code assumes 64-byte aligned arguments (loop.h). */
static float *falloc(int64_t n) {
    return aligned_alloc(64, (size_t)((n * (int64_t)sizeof(float) + 63) / 64 * 64));
}

static uint32_t seed = 7;
static float rnd(void) {
    seed = seed * 1664525u + 1013904223u;
    return (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* A placeholder with random data (kept in `data`, freed by the caller). */
static te_tensor *input(const char *name, int ndim, const int64_t *shape, float **data) {
    te_tensor *t = te_placeholder(&C, name, TE_F32, ndim, shape);
    int64_t n = numel(t);
    *data = falloc(n);
    for (int64_t i = 0; i < n; i++) (*data)[i] = rnd();
    return t;
}
#define SHAPE(...) \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

static ir_tensor irt(const te_tensor *t, float *data) {
    ir_tensor r = {.dtype = WPK_DTYPE_FLOAT32, .ndim = t->ndim, .data = data};
    for (int i = 0; i < t->ndim; i++) r.dims[i] = t->shape[i];
    return r;
}

#define MAX_ATTRS 16

typedef struct node_builder {
    ir_node n;
    ir_attr attrs[MAX_ATTRS];
    int64_t ints[MAX_ATTRS][8];
} node_builder;

static void nb_init(node_builder *b, const char *domain, const char *op_type, int opset) {
    memset(b, 0, sizeof *b);
    b->n.name = "ref";
    b->n.op_type = op_type;
    b->n.domain = domain;
    b->n.op = ir_op_from_onnx(domain, op_type);
    b->n.opset = opset;
    b->n.nout = 1;
    b->n.attrs = b->attrs;
}

static void nb_ints(node_builder *b, const char *name, int count, const int64_t *v) {
    int k = b->n.nattr++;
    memcpy(b->ints[k], v, sizeof(int64_t) * (size_t)count);
    b->attrs[k] = (ir_attr){.name = name, .kind = IR_ATTR_INTS, .n = count, .ints = b->ints[k]};
}

static void nb_int(node_builder *b, const char *name, int64_t v) {
    b->attrs[b->n.nattr++] = (ir_attr){.name = name, .kind = IR_ATTR_INT, .i = v};
}

static void nb_float(node_builder *b, const char *name, float v) {
    b->attrs[b->n.nattr++] = (ir_attr){.name = name, .kind = IR_ATTR_FLOAT, .f = v};
}

static void nb_act(node_builder *b, const te_act *a) {
    if (a->kind == TE_ACT_NONE) return;
    /* te_act mirrors act_params kind for kind (epilogue.h) */
    b->attrs[b->n.nattr++] = (ir_attr){.name = "activation", .kind = IR_ATTR_STRING,
                                       .s = act_name((act_kind)a->kind)};
    nb_float(b, "alpha", a->alpha);
    nb_float(b, "beta", a->beta);
    nb_float(b, "clip_min", a->lo);
    nb_float(b, "clip_max", a->hi);
}

/* Run the reference kernel of b on inputs in[0..nin) (NULL entries: omitted) into a fresh
 * buffer (*want, freed by the caller); false with a message when it refuses. */
static bool run_ref(node_builder *b, ir_tensor **in, int nin, float **want, int64_t *count) {
    const ir_op_info *info = ir_op_get(b->n.op);
    b->n.nin = nin;
    ir_tensor out = {0}, *outs[1] = {&out};
    wpk_clear_error(ctx);
    wpk_status st = info->shape(ctx, &b->n, in, outs);
    if (!st) {
        *count = ir_numel(&out);
        out.data = *want = calloc((size_t)*count + 1, sizeof(float));
        st = info->ref(ctx, &b->n, in, outs);
    }
    if (st) fprintf(stderr, "reference %s refused: %s\n", b->n.op_type, wpk_context_error(ctx));
    return st == WPK_OK;
}

/* Evaluate `got` (its placeholders bound in ev) and compare with want. */
static void compare(const char *file, int line, const char *what, evaluator *ev,
                    const te_tensor *got, const float *want, int64_t count) {
    if (!got) {
        fprintf(stderr, "%s:%d: %s: no tensor: %s\n", file, line, what, wpk_context_error(ctx));
        check_failures++;
        return;
    }
    const float *g = ev_tensor(ev, got);
    if (ev->error[0] || !g) {
        fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, ev->error);
        check_failures++;
        return;
    }
    if (numel(got) != count) {
        fprintf(stderr, "%s:%d: %s: %lld elements, the reference has %lld\n", file, line, what,
                (long long)numel(got), (long long)count);
        check_failures++;
        return;
    }
    for (int64_t i = 0; i < count; i++) {
        bool both_nan = isnan(g[i]) && isnan(want[i]);
        if (!both_nan && !(fabsf(g[i] - want[i]) <= TOL * (1.0f + fabsf(want[i])))) {
            fprintf(stderr, "%s:%d: %s: element %lld is %.7g, the reference says %.7g\n", file,
                    line, what, (long long)i, g[i], want[i]);
            check_failures++;
            return;
        }
    }
}
#define COMPARE(what, ev, got, want, count) compare(__FILE__, __LINE__, what, ev, got, want, count)

/* ---- the lowered path ---- */

/* Lowered kernels run and compared, so a path that silently stopped running shows. */
static int lowered_runs, lowered_calls, compiled_runs;

/* The first element of got that is not within TOL of want, or -1. */
static int64_t first_miss(const float *got, const float *want, int64_t count) {
    for (int64_t i = 0; i < count; i++) {
        bool both_nan = isnan(got[i]) && isnan(want[i]);
        if (!both_nan && !(fabsf(got[i] - want[i]) <= TOL * (1.0f + fabsf(want[i])))) return i;
    }
    return -1;
}

/* f compiled by the C code generator and run on argv (the output last, `count` floats). */
static void compiled(const char *file, int line, const char *what, const loop_func *f,
                     void **argv, float *got, const float *want, int64_t count) {
    strbuf src = {0};
    cg_c_options o = cg_c_default_options();
    cg_module *m = NULL;
    wpk_status st = cg_c_emit(ctx, f, &o, &src);
    if (!st) st = cg_c_compile(ctx, src.s, &m);
    cg_kernel_fn fn = m ? cg_module_fn(m, f->name) : NULL;
    if (st || !fn) {
        fprintf(stderr, "%s:%d: %s, compiled: %s\n", file, line, what,
                st ? wpk_context_error(ctx) : "no kernel symbol");
        check_failures++;
    } else {
        for (int64_t i = 0; i < count; i++) got[i] = NAN;
        fn(argv);
        compiled_runs++;
        int64_t i = first_miss(got, want, count);
        if (i >= 0) {
            fprintf(stderr, "%s:%d: %s, compiled: element %lld is %.7g, the reference says "
                    "%.7g\n", file, line, what, (long long)i, got[i], want[i]);
            check_failures++;
        }
    }
    cg_module_free(m);
    sb_free(&src);
}

/* A template-like schedule for the algorithm whose computes are `parts`; false when a
 * primitive refuses (a bug in the schedule or the primitives: reported). */
typedef bool (*sched_fn)(te_schedule *s, const te_algo_parts *parts);

/* Lower out's schedule (default, then `fn`'s when given) with the evaluator's bound
 * placeholders as the kernel's inputs, run it on the loop interpreter and compare with want.
 * Run after the evaluator: fn may rewrite bodies (cache_write). */
static void lowered(const char *file, int line, const char *what, const evaluator *ev,
                    te_tensor *out, const te_algo_parts *parts, sched_fn fn, const float *want,
                    int64_t count) {
    lowered_calls += fn ? 2 : 1;
    if (!out) return; /* compare() reported it */
    te_tensor *args[MAX_TENSORS + 1];
    void *argv[MAX_TENSORS + 1];
    int nargs = 0;
    for (int i = 0; i < ev->n; i++)
        if (ev->t[i]->kind == TE_PLACEHOLDER) {
            args[nargs] = (te_tensor *)ev->t[i];
            argv[nargs++] = ev->data[i];
        }
    args[nargs] = out;
    float *got = falloc(count);
    argv[nargs++] = got;
    for (int pass = 0; pass < (fn ? 2 : 1); pass++) {
        const char *sched = pass ? "scheduled" : "default";
        te_schedule *s = te_schedule_create(&C, &out, 1);
        loop_func *f = NULL;
        wpk_status st = s ? WPK_OK : WPK_ERR_INVALID_ARG;
        if (!st && pass && !fn(s, parts)) st = WPK_ERR_INVALID_ARG;
        if (!st) st = loop_lower(&C, s, "kernel", args, nargs, &f);
        for (int64_t i = 0; i < count; i++) got[i] = NAN;
        if (!st) st = loop_interp_run(ctx, f, argv);
        if (st) {
            fprintf(stderr, "%s:%d: %s, %s schedule: %s\n", file, line, what, sched,
                    wpk_context_error(ctx));
            check_failures++;
            continue;
        }
        lowered_runs++;
        int64_t i = first_miss(got, want, count);
        if (i >= 0) {
            fprintf(stderr, "%s:%d: %s, %s schedule, lowered: element %lld is %.7g, the "
                    "reference says %.7g\n", file, line, what, sched, (long long)i, got[i],
                    want[i]);
            check_failures++;
        }
        if (pass == 1) compiled(file, line, what, f, argv, got, want, count);
    }
    free(got);
}
#define LOWERED(what, ev, out, parts, fn, want, count) \
    lowered(__FILE__, __LINE__, what, ev, out, parts, fn, want, count)

/* A primitive that must succeed in a test schedule. */
static bool ok(wpk_status st, const char *what) {
    if (st) fprintf(stderr, "schedule: %s: %s\n", what, wpk_context_error(ctx));
    return st == WPK_OK;
}

/* The data axes of the stage computing t. */
static te_iter *ax_of(const te_tensor *t, int i) { return t->axes[i]; }

/* The reduction of a fused op computed per tile of its epilogue's last axis (split by 4,
 * vectorized), on the stack; without an epilogue, a cache_write accumulator instead. The pad
 * is inlined and the outermost axis runs in parallel. */
static bool sched_tiled(te_schedule *s, const te_algo_parts *p) {
    te_stage *out = te_stage_of(s, p->out);
    int last = p->out->ndim - 1;
    bool good = true;
    if (p->pad) good &= ok(te_compute_inline(te_stage_of(s, p->pad)), "inline pad");
    te_tensor *acc = p->main;
    if (p->main == p->out && p->main->body->kind == TE_REDUCE) {
        good &= ok(te_cache_write(s, p->out, "local", &acc), "cache_write");
        out = te_stage_of(s, p->out);
    }
    te_iter *o, *i;
    good &= ok(te_split(out, ax_of(p->out, last), 4, &o, &i), "split");
    good &= ok(te_vectorize(out, i), "vectorize");
    good &= ok(te_parallel(out, ax_of(p->out, 0)), "parallel");
    if (acc != p->out) {
        te_stage *as = te_stage_of(s, acc);
        good &= ok(te_compute_at(as, out, o), "compute_at");
        good &= ok(te_set_scope(as, "local"), "set_scope");
        good &= ok(te_vectorize(as, ax_of(acc, last)), "vectorize acc");
    }
    return good;
}

/* The second statistic (softmax's sum, layer norm's variance) computed per row of the output,
 * at its axis just outside the normalized ones. The first stays a root stage: it is read by
 * both the second and the output, and lowering places a compute_at stage for one consumer. */
static bool sched_rows(te_schedule *s, const te_algo_parts *p) {
    te_stage *out = te_stage_of(s, p->out);
    int at = -1;
    for (int d = 0; d < p->out->ndim; d++)
        if (p->stats[0]->shape[d] != 1 || p->out->shape[d] == 1) at = d;
        else break;
    if (at < 0) return true; /* the whole tensor is one row: roots are right */
    return ok(te_compute_at(te_stage_of(s, p->stats[1]), out, ax_of(p->out, at)),
              "compute_at stats");
}

static void fresh(void) {
    te_ctx_free(&C);
    te_ctx_init(&C, ctx);
    wpk_clear_error(ctx);
}

/* ---- conv2d NCHW ---- */

typedef struct conv_case {
    int64_t n, c, h, w, cout, kh, kw, groups;
    te_conv2d_params p;
    bool bias, residual;
    te_act_kind act;
} conv_case;

#define P(sh, sw, pt, pl, pb, pr, dh, dw, g) {{sh, sw}, {pt, pl, pb, pr}, {dh, dw}, g}

static const conv_case conv_cases[] = {
    /* odd sizes, 3x3, padding 1 */
    {1, 3, 7, 9, 5, 3, 3, 1, P(1, 1, 1, 1, 1, 1, 1, 1, 1), false, false, TE_ACT_NONE},
    /* 1x1 */
    {1, 8, 5, 6, 7, 1, 1, 1, P(1, 1, 0, 0, 0, 0, 1, 1, 1), true, false, TE_ACT_RELU},
    /* 7x7 stride 2 padding 3 (ResNet's stem) */
    {1, 3, 13, 11, 4, 7, 7, 1, P(2, 2, 3, 3, 3, 3, 1, 1, 1), true, false, TE_ACT_NONE},
    /* stride 2, asymmetric padding, batch 2, residual + HardSwish */
    {2, 4, 8, 7, 6, 3, 3, 1, P(2, 2, 0, 1, 1, 0, 1, 1, 1), true, true, TE_ACT_HARD_SWISH},
    /* 1x1 stride 2 (a downsampling shortcut) */
    {1, 6, 9, 9, 8, 1, 1, 1, P(2, 2, 0, 0, 0, 0, 1, 1, 1), false, true, TE_ACT_NONE},
    /* dilation 2, non-square kernel */
    {1, 3, 10, 9, 4, 3, 2, 1, P(1, 1, 2, 1, 2, 1, 2, 2, 1), false, false, TE_ACT_SIGMOID},
    /* groups */
    {2, 6, 6, 5, 4, 3, 3, 2, P(1, 1, 1, 1, 1, 1, 1, 1, 2), true, false, TE_ACT_LEAKY_RELU},
    /* depthwise 3x3 stride 2, and with a channel multiplier */
    {1, 8, 9, 9, 8, 3, 3, 8, P(2, 2, 1, 1, 1, 1, 1, 1, 8), true, false, TE_ACT_CLIP},
    {2, 4, 6, 6, 8, 3, 3, 4, P(1, 1, 1, 1, 1, 1, 1, 1, 4), false, true, TE_ACT_SILU},
    /* depthwise 1x1: no reduction at all */
    {1, 5, 4, 4, 5, 1, 1, 5, P(1, 1, 0, 0, 0, 0, 1, 1, 5), true, true, TE_ACT_GELU},
    {1, 2, 5, 5, 3, 5, 5, 1, P(1, 1, 2, 2, 2, 2, 1, 1, 1), true, false, TE_ACT_TANH},
    {1, 3, 6, 6, 2, 3, 3, 1, P(1, 1, 1, 1, 1, 1, 1, 1, 1), false, false, TE_ACT_HARD_SIGMOID},
};

static te_act act_of(te_act_kind k) {
    te_act a = te_act_default(k);
    if (k == TE_ACT_CLIP) {
        a.lo = -0.25f;
        a.hi = 0.5f;
    }
    return a;
}

/* The conv as a GPU schedule builds it: the reduction over an output rounded up to whole 4x3x5
 * blocks (channels, rows, columns), reading te_pad_to views of x and w that cover it, and the
 * epilogue over the real output. The strict evaluator checks every read stays inside. */
static te_tensor *conv_rounded_up(te_tensor *x, te_tensor *w, const te_conv2d_params *p,
                                  const te_epilogue *ep, int64_t oh, int64_t ow) {
    const int64_t n = x->shape[0], cin = x->shape[1], cout = w->shape[0], cg = w->shape[1];
    const int64_t kh = w->shape[2], kw = w->shape[3], per = cout / p->groups;
    const int64_t cop = te_ceil_div(cout, 4) * 4, ohp = te_ceil_div(oh, 3) * 3;
    const int64_t owp = te_ceil_div(ow, 5) * 5;
    const int64_t hp = (ohp - 1) * p->stride[0] + (kh - 1) * p->dilation[0] + 1;
    const int64_t wp = (owp - 1) * p->stride[1] + (kw - 1) * p->dilation[1] + 1;
    const int64_t cp = p->groups > 1 ? te_ceil_div(cop, per) * cg : cin;
    te_tensor *pad = te_pad_to(&C, "pad", x, (int64_t[]){0, 0, p->pad[0], p->pad[1]},
                               (int64_t[]){n, cp, hp, wp}, 0.0, NULL);
    te_tensor *wv = te_pad_to(&C, "w.pad", w, (int64_t[]){0, 0, 0, 0},
                              (int64_t[]){cop, cg, kh, kw}, 0.0, NULL);
    te_tensor *acc = pad && wv ? te_conv2d_nchw_reduce(&C, "acc", pad, wv, p,
                                                       (int64_t[]){n, cop, ohp, owp}, per)
                               : NULL;
    return te_epilogue_compute_to(&C, "y2", acc, (int64_t[]){n, cout, oh, ow}, ep, 1);
}

static void test_conv2d(void) {
    for (size_t ci = 0; ci < sizeof conv_cases / sizeof conv_cases[0]; ci++) {
        const conv_case *k = &conv_cases[ci];
        fresh();
        float *xd, *wd, *bd = NULL, *zd = NULL, *want = NULL;
        te_tensor *x = input("x", SHAPE(k->n, k->c, k->h, k->w), &xd);
        te_tensor *w = input("w", SHAPE(k->cout, k->c / k->groups, k->kh, k->kw), &wd);
        te_tensor *b = k->bias ? input("b", SHAPE(k->cout), &bd) : NULL;
        int64_t oh = 0, ow = 0;
        te_conv2d_out_size(&C, "conv2d", "y", k->h, k->w, k->kh, k->kw, &k->p, &oh, &ow);
        te_tensor *z = k->residual ? input("z", SHAPE(k->n, k->cout, oh, ow), &zd) : NULL;
        te_epilogue ep = {.bias = b, .residual = z, .act = act_of(k->act)};
        te_algo_parts parts;
        te_tensor *y = te_conv2d_nchw(&C, "y", x, w, &k->p, &ep, &parts);
        te_tensor *y2 = conv_rounded_up(x, w, &k->p, &ep, oh, ow);

        node_builder nb;
        nb_init(&nb, "wpk", "FusedConv", 1);
        nb_ints(&nb, "strides", 2, k->p.stride);
        nb_ints(&nb, "pads", 4, (int64_t[]){k->p.pad[0], k->p.pad[1], k->p.pad[2], k->p.pad[3]});
        nb_ints(&nb, "dilations", 2, k->p.dilation);
        nb_int(&nb, "group", k->groups);
        nb_act(&nb, &ep.act);
        ir_tensor tx = irt(x, xd), tw = irt(w, wd), tb = b ? irt(b, bd) : (ir_tensor){0};
        ir_tensor tz = z ? irt(z, zd) : (ir_tensor){0};
        ir_tensor *in[4] = {&tx, &tw, b ? &tb : NULL, z ? &tz : NULL};
        int64_t count = 0;
        char what[64];
        snprintf(what, sizeof what, "conv2d case %zu", ci);
        if (run_ref(&nb, in, z ? 4 : 3, &want, &count)) {
            evaluator ev;
            ev_init(&ev, &C);
            ev_bind(&ev, x, xd);
            ev_bind(&ev, w, wd);
            if (b) ev_bind(&ev, b, bd);
            if (z) ev_bind(&ev, z, zd);
            COMPARE(what, &ev, y, want, count);
            LOWERED(what, &ev, y, &parts, sched_tiled, want, count);
            snprintf(what, sizeof what, "conv2d case %zu, rounded up", ci);
            COMPARE(what, &ev, y2, want, count);
            ev_free(&ev);
        } else {
            check_failures++;
        }
        free(xd), free(wd), free(bd), free(zd), free(want);
    }
}

/* ---- conv2d NCHWc, packing and layout transforms ---- */

typedef struct nchwc_case {
    int64_t n, c, h, w, cout, kh, kw;
    int64_t bi, bo; /* bi 1: a plain NCHW input */
    te_conv2d_params p;
    bool bias, residual, depthwise;
    te_act_kind act;
} nchwc_case;

static const nchwc_case nchwc_cases[] = {
    /* channels that do not fill their blocks, 3x3 pad 1 */
    {1, 6, 7, 7, 10, 3, 3, 4, 4, P(1, 1, 1, 1, 1, 1, 1, 1, 1), true, false, false, TE_ACT_RELU},
    /* the stem: plain input, 7x7 stride 2 */
    {1, 3, 11, 11, 8, 7, 7, 1, 8, P(2, 2, 3, 3, 3, 3, 1, 1, 1), true, false, false, TE_ACT_NONE},
    /* 1x1 stride 2, batch 2, residual + HardSigmoid (the padding lanes must stay 0) */
    {2, 8, 6, 6, 6, 1, 1, 8, 4, P(2, 2, 0, 0, 0, 0, 1, 1, 1), true, true, false,
     TE_ACT_HARD_SIGMOID},
    /* groups: 2 groups of one 4-lane output block each */
    {1, 8, 5, 5, 8, 3, 3, 4, 4, P(1, 1, 1, 1, 1, 1, 1, 1, 2), false, false, false, TE_ACT_NONE},
    /* depthwise, stride 2, dilation 2 */
    {1, 8, 9, 9, 8, 3, 3, 4, 4, P(2, 2, 2, 2, 2, 2, 2, 2, 8), true, true, true, TE_ACT_SILU},
};

static void test_conv2d_nchwc(void) {
    for (size_t ci = 0; ci < sizeof nchwc_cases / sizeof nchwc_cases[0]; ci++) {
        const nchwc_case *k = &nchwc_cases[ci];
        fresh();
        const int64_t g = k->p.groups, cg = k->c / g;
        float *xd, *wd, *bd = NULL, *zd = NULL;
        te_tensor *x = input("x", SHAPE(k->n, k->c, k->h, k->w), &xd);
        te_tensor *w = input("w", SHAPE(k->cout, cg, k->kh, k->kw), &wd);
        w->constant = true;
        te_tensor *b = k->bias ? input("b", SHAPE(k->cout), &bd) : NULL;
        int64_t oh = 0, ow = 0, cob = (k->cout + k->bo - 1) / k->bo;
        te_conv2d_out_size(&C, "conv2d", "y", k->h, k->w, k->kh, k->kw, &k->p, &oh, &ow);
        te_tensor *xb = k->bi > 1 ? te_layout_to_nchwc(&C, "xb", x, k->bi) : x;
        te_tensor *wp = te_conv2d_pack_weight(&C, "wp", w, k->bi, k->bo, k->depthwise);
        CHECK(te_tensor_is_constant(wp));
        /* the residual arrives blocked, with zero padding lanes, as a Reorder writes it */
        te_tensor *z = NULL, *zb = NULL;
        if (k->residual) {
            z = input("z", SHAPE(k->n, k->cout, oh, ow), &zd);
            zb = te_layout_to_nchwc(&C, "zb", z, k->bo);
        }
        te_epilogue ep = {.bias = b, .residual = zb, .act = act_of(k->act)};
        te_algo_parts parts;
        te_tensor *yb = te_conv2d_nchwc(&C, "yb", xb, wp, k->cout, &k->p, &ep, &parts);
        te_tensor *y = yb ? te_layout_from_nchwc(&C, "y", yb, k->cout) : NULL;

        /* reference: pack with ops/blocked.c, ConvNCHWc on blocked tensors, Reorder back */
        int64_t wdims[6];
        blocked_weight_dims(k->cout, cg, k->kh, k->kw, k->bi, k->bo, k->depthwise, wdims);
        int64_t wcount = wdims[0] * wdims[1] * wdims[2] * wdims[3] * wdims[4] * wdims[5];
        float *wpd = malloc(sizeof(float) * (size_t)wcount), *xbd = NULL, *zbd = NULL;
        float *ybd = NULL, *want = NULL;
        blocked_pack_weights(wd, k->cout, cg, k->kh, k->kw, k->bi, k->bo, k->depthwise, wpd);
        int64_t count = 0, c2;
        bool ok = true;
        ir_tensor tx = irt(x, xd), txb = {0}, tz = {0}, tzb = {0};
        if (k->bi > 1) {
            node_builder r;
            nb_init(&r, "wpk", "Reorder", 1);
            r.attrs[r.n.nattr++] = (ir_attr){.name = "to", .kind = IR_ATTR_STRING, .s = "NCHWc"};
            nb_int(&r, "block", k->bi);
            ok &= run_ref(&r, (ir_tensor *[]){&tx}, 1, &xbd, &c2);
            txb = irt(xb, xbd);
        } else {
            txb = tx;
        }
        if (z) {
            node_builder r;
            nb_init(&r, "wpk", "Reorder", 1);
            r.attrs[r.n.nattr++] = (ir_attr){.name = "to", .kind = IR_ATTR_STRING, .s = "NCHWc"};
            nb_int(&r, "block", k->bo);
            tz = irt(z, zd);
            ok &= run_ref(&r, (ir_tensor *[]){&tz}, 1, &zbd, &c2);
            tzb = irt(zb, zbd);
        }
        ir_tensor tw = {.dtype = WPK_DTYPE_FLOAT32, .ndim = 6, .data = wpd};
        memcpy(tw.dims, wdims, sizeof wdims);
        ir_tensor tb = b ? irt(b, bd) : (ir_tensor){0};
        node_builder nb;
        nb_init(&nb, "wpk", "ConvNCHWc", 1);
        nb_ints(&nb, "strides", 2, k->p.stride);
        nb_ints(&nb, "pads", 4, (int64_t[]){k->p.pad[0], k->p.pad[1], k->p.pad[2], k->p.pad[3]});
        nb_ints(&nb, "dilations", 2, k->p.dilation);
        nb_int(&nb, "group", g);
        nb_int(&nb, "channels", k->cout);
        nb_act(&nb, &ep.act);
        ir_tensor *in[4] = {&txb, &tw, b ? &tb : NULL, z ? &tzb : NULL};
        ok = ok && run_ref(&nb, in, z ? 4 : 3, &ybd, &count);
        char what[64];
        if (ok) {
            evaluator ev;
            ev_init(&ev, &C);
            ev_bind(&ev, x, xd);
            ev_bind(&ev, w, wd);
            if (b) ev_bind(&ev, b, bd);
            if (z) ev_bind(&ev, z, zd);
            snprintf(what, sizeof what, "nchwc case %zu: packed weight", ci);
            COMPARE(what, &ev, wp, wpd, wcount);
            if (k->bi > 1) {
                snprintf(what, sizeof what, "nchwc case %zu: input to NCHWc", ci);
                COMPARE(what, &ev, xb, xbd, numel(xb));
            }
            snprintf(what, sizeof what, "nchwc case %zu: blocked output", ci);
            COMPARE(what, &ev, yb, ybd, count);
            LOWERED(what, &ev, yb, &parts, sched_tiled, ybd, count);
            /* and back to NCHW, against Reorder */
            node_builder r;
            nb_init(&r, "wpk", "Reorder", 1);
            r.attrs[r.n.nattr++] = (ir_attr){.name = "to", .kind = IR_ATTR_STRING, .s = "NCHW"};
            nb_int(&r, "block", k->bo);
            nb_int(&r, "channels", k->cout);
            ir_tensor tyb = {.dtype = WPK_DTYPE_FLOAT32, .ndim = 5, .data = ybd,
                             .dims = {k->n, cob, oh, ow, k->bo}};
            if (run_ref(&r, (ir_tensor *[]){&tyb}, 1, &want, &c2)) {
                snprintf(what, sizeof what, "nchwc case %zu: output to NCHW", ci);
                COMPARE(what, &ev, y, want, c2);
            }
            ev_free(&ev);
        } else {
            check_failures++;
        }
        free(xd), free(wd), free(bd), free(zd), free(wpd), free(xbd), free(zbd), free(ybd);
        free(want);
    }
}

/* ---- matmul, dense ---- */

static void test_matmul(void) {
    static const struct {
        int ra, rb;
        int64_t a[4], b[4];
        bool trans_b, bias, residual;
        te_act_kind act;
    } cases[] = {
        {2, 2, {5, 7}, {7, 3}, false, false, false, TE_ACT_NONE},
        {3, 3, {2, 4, 5}, {2, 5, 6}, false, true, false, TE_ACT_RELU},
        {4, 3, {2, 1, 3, 4}, {3, 4, 5}, false, false, true, TE_ACT_GELU},
        {3, 2, {3, 5, 9}, {9, 2}, false, true, true, TE_ACT_TANH},
        {2, 2, {1, 16}, {10, 16}, true, true, false, TE_ACT_NONE}, /* dense: FusedGemm */
        {2, 2, {3, 8}, {5, 8}, true, true, true, TE_ACT_HARD_SWISH},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        fresh();
        float *ad, *bd, *biasd = NULL, *zd = NULL, *want = NULL;
        te_tensor *a = input("a", cases[ci].ra, cases[ci].a, &ad);
        te_tensor *b = input("b", cases[ci].rb, cases[ci].b, &bd);
        te_matmul_params mp = {false, cases[ci].trans_b};
        te_tensor *probe = te_matmul(&C, "probe", a, b, &mp, NULL, NULL);
        if (!probe) {
            fprintf(stderr, "matmul case %zu: %s\n", ci, wpk_context_error(ctx));
            check_failures++;
            continue;
        }
        int64_t ncols = probe->shape[probe->ndim - 1];
        te_tensor *bias = cases[ci].bias ? input("bias", SHAPE(ncols), &biasd) : NULL;
        te_tensor *z = cases[ci].residual ? input("z", probe->ndim, probe->shape, &zd) : NULL;
        te_epilogue ep = {.bias = bias, .residual = z, .act = act_of(cases[ci].act)};
        te_algo_parts parts;
        te_tensor *y = cases[ci].trans_b ? te_dense(&C, "y", a, b, &ep, &parts)
                                         : te_matmul(&C, "y", a, b, &mp, &ep, &parts);
        node_builder nb;
        if (cases[ci].trans_b) {
            nb_init(&nb, "wpk", "FusedGemm", 1);
            nb_int(&nb, "transB", 1);
        } else {
            nb_init(&nb, "wpk", "FusedMatMul", 1);
        }
        nb_act(&nb, &ep.act);
        ir_tensor ta = irt(a, ad), tb = irt(b, bd);
        ir_tensor tbias = bias ? irt(bias, biasd) : (ir_tensor){0};
        ir_tensor tz = z ? irt(z, zd) : (ir_tensor){0};
        ir_tensor *in[4] = {&ta, &tb, bias ? &tbias : NULL, z ? &tz : NULL};
        int64_t count = 0;
        char what[64];
        snprintf(what, sizeof what, "matmul case %zu", ci);
        if (run_ref(&nb, in, z ? 4 : 3, &want, &count)) {
            evaluator ev;
            ev_init(&ev, &C);
            ev_bind(&ev, a, ad);
            ev_bind(&ev, b, bd);
            if (bias) ev_bind(&ev, bias, biasd);
            if (z) ev_bind(&ev, z, zd);
            COMPARE(what, &ev, y, want, count);
            LOWERED(what, &ev, y, &parts, sched_tiled, want, count);
            ev_free(&ev);
        } else {
            check_failures++;
        }
        free(ad), free(bd), free(biasd), free(zd), free(want);
    }
}

/* ---- pooling ---- */

static void test_pool(void) {
    static const struct {
        te_pool_kind kind;
        int64_t n, c, h, w, k[2], s[2], pad[4], d[2];
        bool ceil, include;
    } cases[] = {
        {TE_POOL_MAX, 1, 3, 9, 9, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, false},
        {TE_POOL_MAX, 2, 2, 7, 8, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true, false},
        {TE_POOL_MAX, 1, 2, 10, 9, {3, 2}, {1, 2}, {1, 0, 2, 1}, {2, 1}, true, false},
        {TE_POOL_AVG, 1, 3, 7, 7, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, false},
        {TE_POOL_AVG, 1, 3, 7, 7, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, true},
        {TE_POOL_AVG, 2, 2, 8, 6, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, true},
        {TE_POOL_AVG, 1, 2, 8, 9, {2, 3}, {3, 2}, {1, 1, 0, 1}, {1, 2}, true, false},
        {TE_POOL_AVG, 1, 4, 5, 5, {5, 5}, {1, 1}, {0, 0, 0, 0}, {1, 1}, false, false},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        fresh();
        float *xd, *want = NULL;
        te_tensor *x = input("x", SHAPE(cases[ci].n, cases[ci].c, cases[ci].h, cases[ci].w), &xd);
        te_pool2d_params p = te_pool2d_default_params(cases[ci].kind, cases[ci].k[0],
                                                      cases[ci].k[1]);
        memcpy(p.stride, cases[ci].s, sizeof p.stride);
        memcpy(p.pad, cases[ci].pad, sizeof p.pad);
        memcpy(p.dilation, cases[ci].d, sizeof p.dilation);
        p.ceil_mode = cases[ci].ceil;
        p.count_include_pad = cases[ci].include;
        te_algo_parts parts;
        te_tensor *y = te_pool2d(&C, "y", x, &p, &parts);
        node_builder nb;
        nb_init(&nb, "", cases[ci].kind == TE_POOL_MAX ? "MaxPool" : "AveragePool", 19);
        nb_ints(&nb, "kernel_shape", 2, p.kernel);
        nb_ints(&nb, "strides", 2, p.stride);
        nb_ints(&nb, "pads", 4, p.pad);
        nb_ints(&nb, "dilations", 2, p.dilation);
        nb_int(&nb, "ceil_mode", p.ceil_mode);
        if (cases[ci].kind == TE_POOL_AVG) nb_int(&nb, "count_include_pad", p.count_include_pad);
        ir_tensor tx = irt(x, xd);
        int64_t count = 0;
        char what[64];
        snprintf(what, sizeof what, "pool case %zu", ci);
        if (run_ref(&nb, (ir_tensor *[]){&tx}, 1, &want, &count)) {
            evaluator ev;
            ev_init(&ev, &C);
            ev_bind(&ev, x, xd);
            COMPARE(what, &ev, y, want, count);
            LOWERED(what, &ev, y, &parts, sched_tiled, want, count);
            ev_free(&ev);
        } else {
            check_failures++;
        }
        free(xd), free(want);
    }
    for (int kind = 0; kind < 2; kind++) {
        for (int rank = 3; rank <= 5; rank++) {
            fresh();
            float *xd, *want = NULL;
            int64_t shape[5] = {2, 3, 5, 4, 3};
            te_tensor *x = input("x", rank, shape, &xd);
            te_algo_parts parts;
            te_tensor *y = te_global_pool(&C, "y", x, (te_pool_kind)kind, &parts);
            node_builder nb;
            nb_init(&nb, "", kind == TE_POOL_MAX ? "GlobalMaxPool" : "GlobalAveragePool", 19);
            ir_tensor tx = irt(x, xd);
            int64_t count = 0;
            char what[64];
            snprintf(what, sizeof what, "global pool kind %d rank %d", kind, rank);
            if (run_ref(&nb, (ir_tensor *[]){&tx}, 1, &want, &count)) {
                evaluator ev;
                ev_init(&ev, &C);
                ev_bind(&ev, x, xd);
                COMPARE(what, &ev, y, want, count);
                LOWERED(what, &ev, y, &parts, sched_tiled, want, count);
                ev_free(&ev);
            } else {
                check_failures++;
            }
            free(xd), free(want);
        }
    }
}

/* ---- softmax, layer norm ---- */

static void test_softmax_layer_norm(void) {
    static const struct {
        int ndim;
        int64_t shape[4];
        int axis;
    } cases[] = {
        {2, {3, 10}, -1}, {3, {2, 5, 4}, 1}, {4, {2, 3, 4, 5}, 0}, {1, {7}, 0}, {3, {2, 3, 6}, -2},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        fresh();
        float *xd, *want = NULL;
        te_tensor *x = input("x", cases[ci].ndim, cases[ci].shape, &xd);
        /* a wider range than [-1, 1), so the max subtraction matters */
        for (int64_t i = 0; i < numel(x); i++) xd[i] *= 20.0f;
        te_algo_parts parts;
        te_tensor *y2 = te_softmax_split_max(&C, "y2", x, cases[ci].axis, &parts);
        CHECK(y2 && parts.stats[2] && parts.stats[2] != parts.stats[0]);
        te_tensor *y = te_softmax(&C, "y", x, cases[ci].axis, &parts);
        node_builder nb;
        nb_init(&nb, "", "Softmax", 13);
        nb_int(&nb, "axis", cases[ci].axis);
        ir_tensor tx = irt(x, xd);
        int64_t count = 0;
        char what[64];
        snprintf(what, sizeof what, "softmax case %zu", ci);
        if (run_ref(&nb, (ir_tensor *[]){&tx}, 1, &want, &count)) {
            evaluator ev;
            ev_init(&ev, &C);
            ev_bind(&ev, x, xd);
            COMPARE(what, &ev, y, want, count);
            LOWERED(what, &ev, y, &parts, sched_rows, want, count);
            COMPARE(what, &ev, y2, want, count);
            ev_free(&ev);
        } else {
            check_failures++;
        }
        free(want);
        want = NULL;

        /* layer norm over the same axis on, scale over the normalized dims, bias broadcast */
        int axis = cases[ci].axis < 0 ? cases[ci].axis + x->ndim : cases[ci].axis;
        float *sd, *bd;
        te_tensor *s = input("s", x->ndim - axis, x->shape + axis, &sd);
        te_tensor *b = input("b", SHAPE(x->shape[x->ndim - 1]), &bd);
        te_tensor *ln = te_layer_norm(&C, "ln", x, s, b, cases[ci].axis, 1e-5f, &parts);
        nb_init(&nb, "", "LayerNormalization", 17);
        nb_int(&nb, "axis", cases[ci].axis);
        nb_float(&nb, "epsilon", 1e-5f);
        ir_tensor ts = irt(s, sd), tb = irt(b, bd);
        snprintf(what, sizeof what, "layer norm case %zu", ci);
        if (run_ref(&nb, (ir_tensor *[]){&tx, &ts, &tb}, 3, &want, &count)) {
            evaluator ev;
            ev_init(&ev, &C);
            ev_bind(&ev, x, xd);
            ev_bind(&ev, s, sd);
            ev_bind(&ev, b, bd);
            COMPARE(what, &ev, ln, want, count);
            LOWERED(what, &ev, ln, &parts, sched_rows, want, count);
            ev_free(&ev);
        } else {
            check_failures++;
        }
        free(xd), free(sd), free(bd), free(want);
    }

    /* the lanes form: x [3, 4, 8] normalized over its 32-element rows, scale per element, a
       one-value bias, an offset mean so the variance's (x - mean) matters */
    fresh();
    float *xd, *sd, *bd, *want = NULL;
    te_tensor *x = input("x", SHAPE(3, 4, 8), &xd);
    for (int64_t i = 0; i < numel(x); i++) xd[i] = xd[i] * 20.0f + 5.0f;
    te_tensor *s = input("s", SHAPE(4, 8), &sd), *b = input("b", SHAPE(1, 1), &bd);
    te_algo_parts parts;
    te_tensor *lane_parts[2] = {NULL, NULL};
    te_tensor *ln = te_layer_norm_lanes(&C, "ln", x, s, b, 1e-5f, &parts, lane_parts);
    CHECK(ln && lane_parts[0] && lane_parts[1] && parts.stats[0] && parts.stats[1]);
    node_builder nb;
    nb_init(&nb, "", "LayerNormalization", 17);
    nb_int(&nb, "axis", 1);
    nb_float(&nb, "epsilon", 1e-5f);
    ir_tensor tx = irt(x, xd), ts = irt(s, sd), tb = irt(b, bd);
    int64_t count = 0;
    if (ln && run_ref(&nb, (ir_tensor *[]){&tx, &ts, &tb}, 3, &want, &count)) {
        evaluator ev;
        ev_init(&ev, &C);
        ev_bind(&ev, x, xd);
        ev_bind(&ev, s, sd);
        ev_bind(&ev, b, bd);
        COMPARE("layer norm lanes", &ev, ln, want, count);
        ev_free(&ev);
    } else {
        check_failures++;
    }
    free(xd), free(sd), free(bd), free(want);
}

/* ---- Gemm's epilogue over a rounded-up product ---- */

/* acc over [M, N] rounded up to whole 4x8 tiles and K to whole steps of 3, reading te_pad_to
 * views of A and B (as the GPU template does), then alpha * acc + beta * C (broadcast) + Z and
 * an activation over the real [M, N], against the reference Gemm / FusedGemm. */
static void test_gemm_epilogue(void) {
    static const struct {
        int64_t m, n, k;
        bool ta, tb;
        int cdims; /* 0: no C, 1: [N], 2: [M, 1] */
        float alpha, beta;
        bool residual;
        te_act_kind act;
    } cases[] = {
        {5, 7, 9, false, false, 1, 0.5f, 2.0f, false, TE_ACT_NONE},
        {3, 10, 4, true, true, 2, 1.0f, 1.0f, true, TE_ACT_RELU},
        {9, 3, 7, false, true, 0, 1.0f, 1.0f, false, TE_ACT_SIGMOID},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        fresh();
        const int64_t m = cases[ci].m, n = cases[ci].n, k = cases[ci].k;
        const bool ta = cases[ci].ta, tb = cases[ci].tb;
        float *ad, *bd, *cd = NULL, *zd = NULL, *want = NULL;
        te_tensor *a = ta ? input("a", SHAPE(k, m), &ad) : input("a", SHAPE(m, k), &ad);
        te_tensor *b = tb ? input("b", SHAPE(n, k), &bd) : input("b", SHAPE(k, n), &bd);
        te_tensor *cin = cases[ci].cdims == 1   ? input("c", SHAPE(n), &cd)
                         : cases[ci].cdims == 2 ? input("c", SHAPE(m, 1), &cd)
                                                : NULL;
        te_tensor *z = cases[ci].residual ? input("z", SHAPE(m, n), &zd) : NULL;
        const int64_t mp = te_ceil_div(m, 4) * 4, np = te_ceil_div(n, 8) * 8;
        const int64_t kp = te_ceil_div(k, 3) * 3;
        te_tensor *ap = te_pad_to(&C, "a.pad", a, (int64_t[]){0, 0},
                                  ta ? (int64_t[]){kp, mp} : (int64_t[]){mp, kp}, 0.0, NULL);
        te_tensor *bp = te_pad_to(&C, "b.pad", b, (int64_t[]){0, 0},
                                  tb ? (int64_t[]){np, kp} : (int64_t[]){kp, np}, 0.0, NULL);
        te_matmul_params mp_ = {ta, tb};
        te_tensor *acc = te_matmul(&C, "acc", ap, bp, &mp_, NULL, NULL);
        te_gemm_epilogue ep = {cases[ci].alpha, cases[ci].beta, cin, z, act_of(cases[ci].act)};
        te_tensor *y = te_gemm_epilogue_compute(&C, "y", acc, (int64_t[]){m, n}, &ep);
        node_builder nb;
        nb_init(&nb, "wpk", "FusedGemm", 1);
        nb_int(&nb, "transA", ta);
        nb_int(&nb, "transB", tb);
        nb_act(&nb, &ep.act);
        ir_tensor tA = irt(a, ad), tB = irt(b, bd);
        ir_tensor tc = cin ? irt(cin, cd) : (ir_tensor){0}, tz = z ? irt(z, zd) : (ir_tensor){0};
        ir_tensor *in[4] = {&tA, &tB, cin ? &tc : NULL, z ? &tz : NULL};
        /* FusedGemm has no alpha/beta: scale the reference's inputs instead */
        for (int64_t i = 0; i < m * k; i++) ad[i] *= cases[ci].alpha;
        for (int64_t i = 0; cin && i < numel(cin); i++) cd[i] *= cases[ci].beta;
        int64_t count = 0;
        bool ok = run_ref(&nb, in, z ? 4 : 3, &want, &count);
        for (int64_t i = 0; i < m * k; i++) ad[i] /= cases[ci].alpha;
        for (int64_t i = 0; cin && i < numel(cin); i++) cd[i] /= cases[ci].beta;
        char what[64];
        snprintf(what, sizeof what, "gemm epilogue case %zu", ci);
        if (ok) {
            evaluator ev;
            ev_init(&ev, &C);
            ev_bind(&ev, a, ad);
            ev_bind(&ev, b, bd);
            if (cin) ev_bind(&ev, cin, cd);
            if (z) ev_bind(&ev, z, zd);
            COMPARE(what, &ev, y, want, count);
            ev_free(&ev);
        } else {
            check_failures++;
        }
        free(ad), free(bd), free(cd), free(zd), free(want);
    }
}

/* ---- data movement and the mean ---- */

static void ref_compare(const char *what, node_builder *nb, ir_tensor **in, int nin,
                        te_tensor *const *xs, float *const *xd, int nx, te_tensor *y) {
    float *want = NULL;
    int64_t count = 0;
    if (!run_ref(nb, in, nin, &want, &count)) {
        check_failures++;
        return;
    }
    evaluator ev;
    ev_init(&ev, &C);
    for (int i = 0; i < nx; i++) ev_bind(&ev, xs[i], xd[i]);
    COMPARE(what, &ev, y, want, count);
    ev_free(&ev);
    free(want);
}

static void test_movement(void) {
    fresh();
    float *d[3];
    te_tensor *x[3] = {input("x0", SHAPE(2, 3, 4), &d[0]), input("x1", SHAPE(2, 1, 4), &d[1]),
                       input("x2", SHAPE(2, 5, 4), &d[2])};
    ir_tensor t[3] = {irt(x[0], d[0]), irt(x[1], d[1]), irt(x[2], d[2])};
    node_builder nb;
    nb_init(&nb, "", "Concat", 13);
    nb_int(&nb, "axis", 1);
    ref_compare("concat", &nb, (ir_tensor *[]){&t[0], &t[1], &t[2]}, 3, x, d, 3,
                te_concat(&C, "y", x, 3, 1));

    nb_init(&nb, "", "Transpose", 13);
    nb_ints(&nb, "perm", 3, (int64_t[]){2, 0, 1});
    ref_compare("transpose", &nb, (ir_tensor *[]){&t[2]}, 1, &x[2], &d[2], 1,
                te_transpose(&C, "y", x[2], (int[]){2, 0, 1}));

    /* x2[:, 4:0:-2, 1:4] */
    int64_t starts[2] = {4, 1}, ends[2] = {0, 4}, axes[2] = {1, 2}, steps[2] = {-2, 1};
    ir_tensor ti[4];
    int64_t *vals[4] = {starts, ends, axes, steps};
    for (int i = 0; i < 4; i++)
        ti[i] = (ir_tensor){.dtype = WPK_DTYPE_INT64, .ndim = 1, .dims = {2}, .data = vals[i]};
    nb_init(&nb, "", "Slice", 13);
    ref_compare("slice", &nb, (ir_tensor *[]){&t[2], &ti[0], &ti[1], &ti[2], &ti[3]}, 5, &x[2],
                &d[2], 1,
                te_slice_affine(&C, "y", x[2], (int64_t[]){2, 2, 3}, (int64_t[]){0, 4, 1},
                                (int64_t[]){1, -2, 1}));

    for (int keep = 0; keep < 2; keep++) {
        nb_init(&nb, "", "ReduceMean", 18);
        nb_int(&nb, "keepdims", keep);
        int64_t mean_axes[2] = {0, 2};
        ir_tensor ta = {.dtype = WPK_DTYPE_INT64, .ndim = 1, .dims = {2}, .data = mean_axes};
        te_algo_parts parts;
        te_tensor *y = te_reduce_mean(&C, "y", x[0], (bool[]){true, false, true}, keep, &parts);
        CHECK(y && parts.main && parts.main != y);
        ref_compare(keep ? "reduce_mean keepdims" : "reduce_mean", &nb,
                    (ir_tensor *[]){&t[0], &ta}, 2, &x[0], &d[0], 1, y);
    }
    for (int i = 0; i < 3; i++) free(d[i]);
}

/* The evaluator itself must be able to fail: a load the algorithm would clamp, unclamped. */
static void test_evaluator_is_strict(void) {
    fresh();
    float *xd;
    te_tensor *x = input("x", SHAPE(4), &xd);
    te_iter **ax = te_compute_axes(&C, SHAPE(6), NULL);
    const te_expr *i = te_var(&C, ax[0]);
    const te_expr *load = te_load(&C, x, 1, (const te_expr *[]){te_sub(&C, i, te_int(&C, 1))});
    te_tensor *y = te_compute(&C, "y", SHAPE(6), ax,
                              te_select(&C, te_and(&C, te_cmp(&C, TE_LE, te_int(&C, 1), i),
                                                   te_cmp(&C, TE_LT, i, te_int(&C, 5))),
                                        load, te_float(&C, 0.0)));
    evaluator ev;
    ev_init(&ev, &C);
    ev_bind(&ev, x, xd);
    ev_tensor(&ev, y);
    CHECK(strstr(ev.error, "load of 'x': index -1 out of [0, 4)") != NULL);
    ev_free(&ev);
    free(xd);
}

int main(void) {
    ctx = wpk_context_create();
    /* compiled kernels go to a directory of this run's, removed at the end */
    char dir[] = "/tmp/wpk_te_algo_XXXXXX";
    bool own_cache = !getenv("WPK_CACHE_DIR");
    if (own_cache) {
        CHECK(mkdtemp(dir) != NULL);
        setenv("WPK_CACHE_DIR", dir, 1);
    }
    te_ctx_init(&C, ctx);
    test_evaluator_is_strict();
    test_conv2d();
    test_conv2d_nchwc();
    test_matmul();
    test_pool();
    test_softmax_layer_norm();
    test_gemm_epilogue();
    test_movement();
    CHECK(lowered_calls >= 70 && lowered_runs == lowered_calls);
    CHECK(compiled_runs == lowered_calls / 2);
    if (own_cache) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        CHECK(system(cmd) == 0);
    }
    te_ctx_free(&C);
    wpk_context_free(ctx);
    CHECK_DONE();
}
