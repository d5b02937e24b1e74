/* reduce.c -- the Reduce ops (Sum, Mean, Max, Min, Prod, L1, L2, SumSquare, LogSum, LogSumExp):
 * which axes they reduce, their output shape, and one kernel that walks X once per output row
 * for all of them. Float types accumulate in double, integer types in int64 (wrapping). */
#include <math.h>
#include <string.h>

#include "ops/op_util.h"

typedef enum red_kind {
    RED_SUM,
    RED_MEAN,
    RED_MAX,
    RED_MIN,
    RED_PROD,
    RED_L1,
    RED_L2,
    RED_SUM_SQUARE,
    RED_LOG_SUM,
    RED_LOG_SUM_EXP
} red_kind;

static red_kind kind_of(ir_op op) {
    switch (op) {
    case IR_OP_REDUCE_MEAN: return RED_MEAN;
    case IR_OP_REDUCE_MAX: return RED_MAX;
    case IR_OP_REDUCE_MIN: return RED_MIN;
    case IR_OP_REDUCE_PROD: return RED_PROD;
    case IR_OP_REDUCE_L1: return RED_L1;
    case IR_OP_REDUCE_L2: return RED_L2;
    case IR_OP_REDUCE_SUM_SQUARE: return RED_SUM_SQUARE;
    case IR_OP_REDUCE_LOG_SUM: return RED_LOG_SUM;
    case IR_OP_REDUCE_LOG_SUM_EXP: return RED_LOG_SUM_EXP;
    default: return RED_SUM;
    }
}

static bool is_float(wpk_dtype t) { return t == WPK_DTYPE_FLOAT32 || t == WPK_DTYPE_FLOAT64; }

/* Float types take every kind; int32/int64 the kinds whose integer result is exact; the
 * narrow types (and bool) only Max and Min, as ONNX defines them for. */
static bool dtype_ok(red_kind k, wpk_dtype t) {
    if (is_float(t)) return true;
    bool wide = t == WPK_DTYPE_INT32 || t == WPK_DTYPE_INT64;
    bool narrow = t == WPK_DTYPE_UINT8 || t == WPK_DTYPE_INT8 || t == WPK_DTYPE_BOOL;
    switch (k) {
    case RED_MAX:
    case RED_MIN: return wide || narrow;
    case RED_SUM:
    case RED_PROD:
    case RED_L1:
    case RED_SUM_SQUARE: return wide;
    default: return false;
    }
}

/* Which dims are reduced (*noop: none, the output is the input). Axes come from input 1
 * (the frontend moves older opsets' attribute there); absent or empty means all dims, or
 * none when noop_with_empty_axes = 1. */
static wpk_status reduce_setup(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                               bool *reduced, bool *noop) {
    wpk_status st;
    if ((st = op_need_input(ctx, n, in, 0, "data"))) return st;
    red_kind kind = kind_of(n->op);
    if (!dtype_ok(kind, in[0]->dtype))
        return op_unsupported(ctx, n, "input 0 has dtype %s, which %s does not support here",
                              wpk_dtype_name(in[0]->dtype), n->op_type);
    int nd = in[0]->ndim, count = 0;
    int64_t axes[WPK_MAX_DIMS];
    if (1 < n->nin && in[1] && ir_numel(in[1]) != 0) {
        if ((st = op_need_data(ctx, n, in, 1, "axes")) ||
            (st = op_read_ints(ctx, n, in[1], axes, WPK_MAX_DIMS, &count, "axes")))
            return st;
    }
    bool flag;
    if ((st = op_attr_flag(ctx, n, "noop_with_empty_axes", &flag)) ||
        (st = op_attr_flag(ctx, n, "keepdims", &(bool){false})))
        return st;
    *noop = count == 0 && flag;
    for (int i = 0; i < nd; i++) reduced[i] = count == 0 && !*noop;
    for (int i = 0; i < count; i++) {
        int a;
        if ((st = op_axis(ctx, n, axes[i], nd, &a, "axis"))) return st;
        if (reduced[a])
            return op_fail(ctx, n, "axis %lld appears twice in 'axes'", (long long)axes[i]);
        reduced[a] = true;
    }
    return WPK_OK;
}

wpk_status op_reduce_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                           ir_tensor *const *out) {
    bool reduced[WPK_MAX_DIMS], noop;
    wpk_status st = reduce_setup(ctx, n, in, reduced, &noop);
    if (st) return st;
    bool keep = ir_attr_int(n, "keepdims", 1) != 0;
    const ir_tensor *x = in[0];
    int64_t dims[WPK_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (!reduced[i]) dims[nd++] = x->dims[i];
        else if (keep) dims[nd++] = 1;
    }
    op_set_shape(out[0], x->dtype, nd, dims);
    return WPK_OK;
}

/* ---- the steps: one pass of a contiguous run of X into the accumulators ---- */

/* An accumulator lane: double for float inputs, int64 for integer ones. */
typedef union red_lane {
    double d;
    int64_t i;
} red_lane;

/* Combines n contiguous elements of X: "lanes" into acc[0..n) one each, "fold" all into
 * acc[0]. shift (LogSumExp's maximum) has as many lanes as acc. */
typedef void step_fn(red_lane *restrict acc, const void *x, int64_t n, const red_lane *shift);

typedef enum step_kind {
    ST_SUM, ST_ABS, ST_SQUARE, ST_PROD, ST_MAX, ST_MIN, ST_EXP, ST_COUNT
} step_kind;

typedef struct step_set {
    step_fn *lanes[ST_COUNT], *fold[ST_COUNT];
} step_set;

/* NaN propagates through Max and Min (v != v only for NaN), as numpy's maximum does. */
#define F_SUM(a, v, s) ((a) + (v))
#define F_ABS(a, v, s) ((a) + fabs(v))
#define F_SQUARE(a, v, s) ((a) + (v) * (v))
#define F_PROD(a, v, s) ((a) * (v))
#define F_MAX(a, v, s) ((v) > (a) || (v) != (v) ? (v) : (a))
#define F_MIN(a, v, s) ((v) < (a) || (v) != (v) ? (v) : (a))
#define F_EXP(a, v, s) ((a) + exp((v) - (s)))
/* integer arithmetic wraps, as the int64 result of an overflowing ONNX reduction does */
#define I_SUM(a, v, s) ((int64_t)((uint64_t)(a) + (uint64_t)(v)))
#define I_ABS(a, v, s) ((int64_t)((uint64_t)(a) + ((v) < 0 ? 0 - (uint64_t)(v) : (uint64_t)(v))))
#define I_SQUARE(a, v, s) ((int64_t)((uint64_t)(a) + (uint64_t)(v) * (uint64_t)(v)))
#define I_PROD(a, v, s) ((int64_t)((uint64_t)(a) * (uint64_t)(v)))
#define I_MAX(a, v, s) ((v) > (a) ? (v) : (a))
#define I_MIN(a, v, s) ((v) < (a) ? (v) : (a))

/* FOLD_SIMD: the pragma that lets a fold's loop run in vector partial sums (reassociating the
 * sum or product), or nothing where the combine order matters (Max/Min's NaN rule). */
#define STEP_PAIR(NAME, T, F, A, OP, FOLD_SIMD)                                                 \
    static void NAME##_lanes(red_lane *restrict acc, const void *xv, int64_t n,                \
                             const red_lane *shift) {                                          \
        const T *x = xv;                                                                       \
        (void)shift; /* read only by LogSumExp's step */                                       \
        for (int64_t k = 0; k < n; k++) acc[k].F = OP(acc[k].F, (A)x[k], shift[k].F);          \
    }                                                                                          \
    static void NAME##_fold(red_lane *restrict acc, const void *xv, int64_t n,                 \
                            const red_lane *shift) {                                           \
        const T *x = xv;                                                                       \
        A a = acc[0].F, s = shift[0].F;                                                        \
        (void)s;                                                                               \
        FOLD_SIMD                                                                              \
        for (int64_t k = 0; k < n; k++) a = OP(a, (A)x[k], s);                                 \
        acc[0].F = a;                                                                          \
    }

#define SIMD_SUM _Pragma("omp simd reduction(+ : a)")
#define SIMD_PROD _Pragma("omp simd reduction(* : a)")

/* Integer folds stay in order: their sums wrap through uint64, which the pragma's combine of
 * partial sums would not. */
#define FLOAT_STEPS(SUF, T)                                                                     \
    STEP_PAIR(SUF##_sum, T, d, double, F_SUM, SIMD_SUM)                                        \
    STEP_PAIR(SUF##_abs, T, d, double, F_ABS, SIMD_SUM)                                        \
    STEP_PAIR(SUF##_square, T, d, double, F_SQUARE, SIMD_SUM)                                  \
    STEP_PAIR(SUF##_prod, T, d, double, F_PROD, SIMD_PROD)                                     \
    STEP_PAIR(SUF##_max, T, d, double, F_MAX, )                                                \
    STEP_PAIR(SUF##_min, T, d, double, F_MIN, )                                                \
    STEP_PAIR(SUF##_exp, T, d, double, F_EXP, SIMD_SUM)                                        \
    static const step_set SUF##_steps = {                                                      \
        {SUF##_sum_lanes, SUF##_abs_lanes, SUF##_square_lanes, SUF##_prod_lanes,               \
         SUF##_max_lanes, SUF##_min_lanes, SUF##_exp_lanes},                                   \
        {SUF##_sum_fold, SUF##_abs_fold, SUF##_square_fold, SUF##_prod_fold, SUF##_max_fold,   \
         SUF##_min_fold, SUF##_exp_fold}};

#define INT_STEPS(SUF, T)                                                                       \
    STEP_PAIR(SUF##_sum, T, i, int64_t, I_SUM, )                                               \
    STEP_PAIR(SUF##_abs, T, i, int64_t, I_ABS, )                                               \
    STEP_PAIR(SUF##_square, T, i, int64_t, I_SQUARE, )                                         \
    STEP_PAIR(SUF##_prod, T, i, int64_t, I_PROD, )                                             \
    STEP_PAIR(SUF##_max, T, i, int64_t, I_MAX, )                                               \
    STEP_PAIR(SUF##_min, T, i, int64_t, I_MIN, )                                               \
    static const step_set SUF##_steps = {                                                      \
        {SUF##_sum_lanes, SUF##_abs_lanes, SUF##_square_lanes, SUF##_prod_lanes,               \
         SUF##_max_lanes, SUF##_min_lanes, NULL},                                              \
        {SUF##_sum_fold, SUF##_abs_fold, SUF##_square_fold, SUF##_prod_fold, SUF##_max_fold,   \
         SUF##_min_fold, NULL}};

FLOAT_STEPS(f32, float)
FLOAT_STEPS(f64, double)
INT_STEPS(i32, int32_t)
INT_STEPS(i64, int64_t)
INT_STEPS(u8, uint8_t)
INT_STEPS(i8, int8_t)

static const step_set *steps_for(wpk_dtype t) {
    switch (t) {
    case WPK_DTYPE_FLOAT32: return &f32_steps;
    case WPK_DTYPE_FLOAT64: return &f64_steps;
    case WPK_DTYPE_INT32: return &i32_steps;
    case WPK_DTYPE_INT64: return &i64_steps;
    case WPK_DTYPE_INT8: return &i8_steps;
    default: return &u8_steps; /* uint8, bool */
    }
}

static step_kind step_of(red_kind k) {
    switch (k) {
    case RED_MAX: return ST_MAX;
    case RED_MIN: return ST_MIN;
    case RED_PROD: return ST_PROD;
    case RED_L1: return ST_ABS;
    case RED_L2:
    case RED_SUM_SQUARE: return ST_SQUARE;
    case RED_LOG_SUM_EXP: return ST_EXP;
    default: return ST_SUM;
    }
}

/* ---- the walk ---- */

/* A reduction over X's dims merged into groups that alternate kept and reduced. An output
 * row is one index of the kept groups (all but the last group when that one is kept: then a
 * row is `run` consecutive outputs); it combines, for every index of the reduced groups (all
 * but the last when that one is reduced: then each is a contiguous run), the X elements at
 * row offset + reduced offset. Accumulators live in a fixed stack block: nothing is allocated
 * while the model runs. */
typedef struct reduce_job {
    int nk, nr; /* kept and reduced groups before the last, outermost first */
    int64_t ksize[WPK_MAX_DIMS], kstr[WPK_MAX_DIMS], rsize[WPK_MAX_DIMS], rstr[WPK_MAX_DIMS];
    int64_t combos, run; /* product of rsize; the last group's size */
    bool last_reduced;
    red_kind kind;
    wpk_dtype dtype;
    size_t esize;
    double inv; /* 1 / elements per mean */
    step_fn *step, *max_step;
    const char *x;
    char *y;
} reduce_job;

/* Output columns a kept last group accumulates at once. */
#define REDUCE_BLOCK 256

static red_lane lane_init(red_kind k, bool fl) {
    red_lane v;
    switch (k) {
    case RED_PROD:
        if (fl) v.d = 1.0;
        else v.i = 1;
        break;
    case RED_MAX:
        if (fl) v.d = -INFINITY;
        else v.i = INT64_MIN;
        break;
    case RED_MIN:
        if (fl) v.d = INFINITY;
        else v.i = INT64_MAX;
        break;
    default:
        if (fl) v.d = 0.0;
        else v.i = 0;
    }
    return v;
}

/* Integer Max/Min of nothing is the type's lowest/highest value (ONNX's empty-set rule). */
static int64_t clamp_to(wpk_dtype t, int64_t v) {
    switch (t) {
    case WPK_DTYPE_INT32: return v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : v;
    case WPK_DTYPE_INT8: return v < INT8_MIN ? INT8_MIN : v > INT8_MAX ? INT8_MAX : v;
    case WPK_DTYPE_UINT8: return v < 0 ? 0 : v > UINT8_MAX ? UINT8_MAX : v;
    case WPK_DTYPE_BOOL: return v < 0 ? 0 : v > 1 ? 1 : v;
    default: return v;
    }
}

/* Writes output element at from its accumulator (and LogSumExp's shift). */
static void store(const reduce_job *j, int64_t at, red_lane acc, red_lane shift) {
    if (is_float(j->dtype)) {
        double v = acc.d;
        switch (j->kind) {
        case RED_MEAN: v *= j->inv; break;
        case RED_L2: v = sqrt(v); break;
        case RED_LOG_SUM: v = log(v); break;
        case RED_LOG_SUM_EXP: v = shift.d + log(v); break;
        default: break;
        }
        if (j->dtype == WPK_DTYPE_FLOAT32) ((float *)j->y)[at] = (float)v;
        else ((double *)j->y)[at] = v;
        return;
    }
    int64_t v = acc.i;
    if (j->kind == RED_MAX || j->kind == RED_MIN) v = clamp_to(j->dtype, v);
    switch (j->dtype) {
    case WPK_DTYPE_INT32: ((int32_t *)j->y)[at] = (int32_t)(uint32_t)(uint64_t)v; break;
    case WPK_DTYPE_INT64: ((int64_t *)j->y)[at] = v; break;
    case WPK_DTYPE_INT8: ((int8_t *)j->y)[at] = (int8_t)v; break;
    default: ((uint8_t *)j->y)[at] = (uint8_t)v; break;
    }
}

/* Runs step over every reduced run of one row's block of nc columns from c0. */
static void walk(const reduce_job *j, int64_t base, int64_t c0, int64_t nc, step_fn *step,
                 red_lane *acc, const red_lane *shift) {
    int64_t idx[WPK_MAX_DIMS] = {0}, off = 0; /* off: the reduced groups' offset */
    int64_t first = j->last_reduced ? 0 : c0, n = j->last_reduced ? j->run : nc;
    for (int64_t q = 0; q < j->combos; q++) {
        step(acc, j->x + (size_t)(base + off + first) * j->esize, n, shift);
        for (int g = j->nr - 1; g >= 0; g--) {
            off += j->rstr[g];
            if (++idx[g] < j->rsize[g]) break;
            off -= idx[g] * j->rstr[g];
            idx[g] = 0;
        }
    }
}

static void reduce_row(const reduce_job *j, int64_t r) {
    int64_t base = 0, rem = r;
    for (int g = j->nk - 1; g >= 0; g--) {
        base += rem % j->ksize[g] * j->kstr[g];
        rem /= j->ksize[g];
    }
    bool fl = is_float(j->dtype);
    int64_t cols = j->last_reduced ? 1 : j->run;
    for (int64_t c0 = 0; c0 < cols; c0 += REDUCE_BLOCK) {
        int64_t nc = cols - c0 < REDUCE_BLOCK ? cols - c0 : REDUCE_BLOCK;
        red_lane acc[REDUCE_BLOCK], shift[REDUCE_BLOCK];
        red_lane init = lane_init(j->kind, fl), zero = lane_init(RED_SUM, fl);
        for (int64_t k = 0; k < nc; k++) {
            acc[k] = init;
            shift[k] = zero;
        }
        if (j->kind == RED_LOG_SUM_EXP) {
            /* subtracting each lane's maximum keeps exp() from overflowing */
            red_lane low = lane_init(RED_MAX, true);
            for (int64_t k = 0; k < nc; k++) shift[k] = low;
            walk(j, base, c0, nc, j->max_step, shift, acc); /* Max reads no shift */
            for (int64_t k = 0; k < nc; k++)
                if (!isfinite(shift[k].d)) shift[k].d = 0.0;
        }
        walk(j, base, c0, nc, j->step, acc, shift);
        for (int64_t k = 0; k < nc; k++) store(j, r * cols + c0 + k, acc[k], shift[k]);
    }
}

wpk_status op_reduce_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out) {
    bool reduced[WPK_MAX_DIMS], noop;
    wpk_status st = reduce_setup(ctx, n, in, reduced, &noop);
    if (st) return st;
    const ir_tensor *x = in[0];
    size_t esize = wpk_dtype_size(x->dtype);
    int64_t total = ir_numel(x), ny = ir_numel(out[0]);
    if (noop) {
        if (out[0]->data != x->data) memcpy(out[0]->data, x->data, esize * (size_t)total);
        return WPK_OK;
    }
    /* Merge neighbouring dims that are both reduced or both kept; dims of size 1 vanish (all
     * of them: one reduced group of 1). The last group is contiguous in memory. */
    int64_t gsize[WPK_MAX_DIMS], count = 1;
    bool gred[WPK_MAX_DIMS];
    int ng = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (reduced[i]) count *= x->dims[i];
        if (x->dims[i] == 1) continue;
        if (ng && gred[ng - 1] == reduced[i]) {
            gsize[ng - 1] *= x->dims[i];
        } else {
            gsize[ng] = x->dims[i];
            gred[ng++] = reduced[i];
        }
    }
    if (ng == 0) {
        gsize[0] = 1;
        gred[ng++] = true;
    }
    const step_set *steps = steps_for(x->dtype);
    red_kind kind = kind_of(n->op);
    reduce_job j = {.run = gsize[ng - 1], .last_reduced = gred[ng - 1], .combos = 1,
                    .kind = kind, .dtype = x->dtype, .esize = esize,
                    .inv = 1.0 / (double)count, .x = x->data, .y = out[0]->data};
    j.step = (j.last_reduced ? steps->fold : steps->lanes)[step_of(kind)];
    j.max_step = (j.last_reduced ? steps->fold : steps->lanes)[ST_MAX];
    if (ny == 0) return WPK_OK;
    if (total == 0) {
        /* the reduction of nothing: each output is its kind's identity, finished */
        bool fl = is_float(x->dtype);
        for (int64_t i = 0; i < ny; i++)
            store(&j, i, lane_init(kind, fl), lane_init(RED_SUM, fl));
        return WPK_OK;
    }
    int64_t gstr[WPK_MAX_DIMS]; /* each group's stride in X */
    gstr[ng - 1] = 1;
    for (int g = ng - 2; g >= 0; g--) gstr[g] = gstr[g + 1] * gsize[g + 1];
    for (int g = 0; g < ng - 1; g++) {
        if (gred[g]) {
            j.combos *= gsize[g];
            j.rsize[j.nr] = gsize[g];
            j.rstr[j.nr++] = gstr[g];
        } else {
            j.ksize[j.nk] = gsize[g];
            j.kstr[j.nk++] = gstr[g];
        }
    }
    int64_t rows = j.last_reduced ? ny : ny / j.run;
    if (rows > 1 && op_parallel(total, 1 << 15)) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++) reduce_row(&j, r);
    } else {
        for (int64_t r = 0; r < rows; r++) reduce_row(&j, r);
    }
    return WPK_OK;
}
