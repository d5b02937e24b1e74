/* cum_sum.c -- CumSum: running sums along an axis given as an input, inclusive or exclusive,
 * forward or reverse. Each output slice is the previous one plus one input slice, so the inner
 * loop runs over the axis's contiguous inner dims. */
#include "ops/op_util.h"

/* Inner lanes one task carries along the axis. */
#define CUM_BLOCK 1024

static bool cum_dtype_ok(wpk_dtype t) {
    return t == WPK_DTYPE_FLOAT32 || t == WPK_DTYPE_FLOAT64 || t == WPK_DTYPE_INT32 ||
           t == WPK_DTYPE_INT64;
}

static wpk_status cum_check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                            bool *exclusive, bool *reverse) {
    wpk_status st;
    if ((st = op_need_input(ctx, n, in, 0, "x")) || (st = op_need_input(ctx, n, in, 1, "axis")) ||
        (st = op_attr_flag(ctx, n, "exclusive", exclusive)) ||
        (st = op_attr_flag(ctx, n, "reverse", reverse)))
        return st;
    if (!cum_dtype_ok(in[0]->dtype))
        return op_unsupported(ctx, n, "input 0 has dtype %s, which CumSum does not support",
                              wpk_dtype_name(in[0]->dtype));
    const ir_tensor *a = in[1];
    if (a->dtype != WPK_DTYPE_INT32 && a->dtype != WPK_DTYPE_INT64)
        return op_fail(ctx, n, "input 'axis' must be int32 or int64, not %s",
                       wpk_dtype_name(a->dtype));
    if (a->ndim > 1 || ir_numel(a) != 1)
        return op_fail(ctx, n, "input 'axis' must be a scalar (or hold one value)");
    return WPK_OK;
}

wpk_status op_cum_sum_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                            ir_tensor *const *out) {
    bool exclusive, reverse;
    wpk_status st = cum_check(ctx, n, in, &exclusive, &reverse);
    if (st) return st;
    int axis;
    if (in[1]->data &&
        (st = op_axis(ctx, n, op_int_at(in[1], 0), in[0]->ndim, &axis, "input 'axis'")))
        return st;
    op_set_shape(out[0], in[0]->dtype, in[0]->ndim, in[0]->dims);
    return WPK_OK;
}

typedef struct cum_job {
    int64_t len, inner, chunks;
    bool exclusive, reverse;
    const void *x;
    void *y;
} cum_job;

#define ADD_F(a, b) ((a) + (b))
/* Integer sums wrap, as ONNX's fixed-width results do. */
#define PLUS_I32(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define PLUS_I64(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))

#define CUM_TASK(SUF, T, PLUS)                                                                  \
    static void SUF##_task(const cum_job *j, int64_t t) {                                      \
        const int64_t len = j->len, s = j->inner;                                              \
        int64_t o = t / j->chunks, c0 = (t % j->chunks) * CUM_BLOCK;                           \
        int64_t cn = s - c0 < CUM_BLOCK ? s - c0 : CUM_BLOCK;                                  \
        const T *x = (const T *)j->x + o * len * s + c0;                                       \
        T *y = (T *)j->y + o * len * s + c0;                                                   \
        /* step through the axis from `first` by `dir` */                                      \
        int64_t first = j->reverse ? len - 1 : 0, dir = j->reverse ? -1 : 1;                   \
        T *y0 = y + first * s;                                                                 \
        const T *x0 = x + first * s;                                                           \
        for (int64_t i = 0; i < cn; i++) y0[i] = j->exclusive ? (T)0 : x0[i];                  \
        for (int64_t l = 1; l < len; l++) {                                                    \
            T *yl = y + (first + l * dir) * s, *yp = yl - dir * s;                             \
            const T *xl = x + (first + (j->exclusive ? l - 1 : l) * dir) * s;                  \
            for (int64_t i = 0; i < cn; i++) yl[i] = PLUS(yp[i], xl[i]);                       \
        }                                                                                      \
    }

CUM_TASK(f32, float, ADD_F)
CUM_TASK(f64, double, ADD_F)
CUM_TASK(i32, int32_t, PLUS_I32)
CUM_TASK(i64, int64_t, PLUS_I64)

typedef void cum_task_fn(const cum_job *j, int64_t t);

wpk_status op_cum_sum_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                          ir_tensor *const *out) {
    bool exclusive, reverse;
    wpk_status st = cum_check(ctx, n, in, &exclusive, &reverse);
    if (st) return st;
    const ir_tensor *x = in[0];
    int axis;
    if ((st = op_axis(ctx, n, op_int_at(in[1], 0), x->ndim, &axis, "input 'axis'"))) return st;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= x->dims[i];
    for (int i = axis + 1; i < x->ndim; i++) inner *= x->dims[i];
    cum_job j = {.len = x->dims[axis], .inner = inner,
                 .chunks = (inner + CUM_BLOCK - 1) / CUM_BLOCK, .exclusive = exclusive,
                 .reverse = reverse, .x = x->data, .y = out[0]->data};
    if (ir_numel(x) == 0) return WPK_OK;
    cum_task_fn *task;
    switch (x->dtype) {
    case WPK_DTYPE_FLOAT32: task = f32_task; break;
    case WPK_DTYPE_FLOAT64: task = f64_task; break;
    case WPK_DTYPE_INT32: task = i32_task; break;
    default: task = i64_task; break;
    }
    int64_t tasks = outer * j.chunks;
    if (tasks > 1 && op_parallel(ir_numel(x), 1 << 15)) {
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < tasks; t++) task(&j, t);
    } else {
        for (int64_t t = 0; t < tasks; t++) task(&j, t);
    }
    return WPK_OK;
}
