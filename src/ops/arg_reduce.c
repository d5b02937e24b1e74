/* arg_reduce.c -- ArgMax and ArgMin: the int64 index of the largest (smallest) element along
 * one axis, the first such index or, with select_last_index, the last. */
#include "ops/op_util.h"

/* Lanes of the axis's inner dims scanned together, so the compare loop runs over contiguous
 * memory. */
#define ARG_BLOCK 256

typedef struct arg_job {
    int64_t len, inner, chunks;
    bool is_max, last;
    const void *x;
    int64_t *y;
} arg_job;

static bool arg_dtype_ok(wpk_dtype t) {
    return t == WPK_DTYPE_FLOAT32 || t == WPK_DTYPE_FLOAT64 || t == WPK_DTYPE_INT32 ||
           t == WPK_DTYPE_INT64 || t == WPK_DTYPE_UINT8 || t == WPK_DTYPE_INT8;
}

static wpk_status arg_setup(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, int *axis,
                            bool *keep, bool *last) {
    wpk_status st;
    if ((st = op_need_input(ctx, n, in, 0, "data"))) return st;
    const ir_tensor *x = in[0];
    if (!arg_dtype_ok(x->dtype))
        return op_unsupported(ctx, n, "input 0 has dtype %s, which %s does not support",
                              wpk_dtype_name(x->dtype), n->op_type);
    if ((st = op_axis(ctx, n, ir_attr_int(n, "axis", 0), x->ndim, axis, "attribute 'axis'")) ||
        (st = op_attr_flag(ctx, n, "select_last_index", last)))
        return st;
    *keep = true;
    if (ir_attr_find(n, "keepdims") && (st = op_attr_flag(ctx, n, "keepdims", keep))) return st;
    if (x->dims[*axis] == 0)
        return op_fail(ctx, n, "axis %d has size 0: there is no element to pick", *axis);
    return WPK_OK;
}

wpk_status op_arg_reduce_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                               ir_tensor *const *out) {
    int axis;
    bool keep, last;
    wpk_status st = arg_setup(ctx, n, in, &axis, &keep, &last);
    if (st) return st;
    const ir_tensor *x = in[0];
    int64_t dims[WPK_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (i != axis) dims[nd++] = x->dims[i];
        else if (keep) dims[nd++] = 1;
    }
    op_set_shape(out[0], WPK_DTYPE_INT64, nd, dims);
    return WPK_OK;
}

/* One task: up to ARG_BLOCK lanes of one outer index. `BETTER(v, b)` says whether v replaces
 * the lane's best b. */
#define ARG_SCAN(BETTER)                                                                        \
    for (int64_t l = 1; l < len; l++)                                                          \
        for (int64_t i = 0; i < cn; i++) {                                                     \
            if (BETTER(x[l * inner + i], best[i])) {                                           \
                best[i] = x[l * inner + i];                                                    \
                at[i] = l;                                                                     \
            }                                                                                  \
        }

#define GT(v, b) ((v) > (b))
#define GE(v, b) ((v) >= (b))
#define LT(v, b) ((v) < (b))
#define LE(v, b) ((v) <= (b))

#define ARG_TASK(SUF, T)                                                                        \
    static void SUF##_task(const arg_job *j, int64_t t) {                                      \
        const int64_t len = j->len, inner = j->inner;                                          \
        int64_t o = t / j->chunks, c0 = (t % j->chunks) * ARG_BLOCK;                           \
        int64_t cn = inner - c0 < ARG_BLOCK ? inner - c0 : ARG_BLOCK;                          \
        const T *x = (const T *)j->x + o * len * inner + c0;                                   \
        T best[ARG_BLOCK];                                                                     \
        int64_t at[ARG_BLOCK];                                                                 \
        for (int64_t i = 0; i < cn; i++) {                                                     \
            best[i] = x[i];                                                                    \
            at[i] = 0;                                                                         \
        }                                                                                      \
        if (j->is_max && j->last) ARG_SCAN(GE)                                                 \
        else if (j->is_max) ARG_SCAN(GT)                                                       \
        else if (j->last) ARG_SCAN(LE)                                                         \
        else ARG_SCAN(LT)                                                                      \
        int64_t *y = j->y + o * inner + c0;                                                    \
        for (int64_t i = 0; i < cn; i++) y[i] = at[i];                                         \
    }

ARG_TASK(f32, float)
ARG_TASK(f64, double)
ARG_TASK(i32, int32_t)
ARG_TASK(i64, int64_t)
ARG_TASK(u8, uint8_t)
ARG_TASK(i8, int8_t)

typedef void arg_task_fn(const arg_job *j, int64_t t);

wpk_status op_arg_reduce_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             ir_tensor *const *out) {
    int axis;
    bool keep, last;
    wpk_status st = arg_setup(ctx, n, in, &axis, &keep, &last);
    if (st) return st;
    const ir_tensor *x = in[0];
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= x->dims[i];
    for (int i = axis + 1; i < x->ndim; i++) inner *= x->dims[i];
    arg_job j = {.len = x->dims[axis], .inner = inner,
                 .chunks = (inner + ARG_BLOCK - 1) / ARG_BLOCK, .is_max = n->op == IR_OP_ARG_MAX,
                 .last = last, .x = x->data, .y = out[0]->data};
    arg_task_fn *task;
    switch (x->dtype) {
    case WPK_DTYPE_FLOAT32: task = f32_task; break;
    case WPK_DTYPE_FLOAT64: task = f64_task; break;
    case WPK_DTYPE_INT32: task = i32_task; break;
    case WPK_DTYPE_INT64: task = i64_task; break;
    case WPK_DTYPE_UINT8: task = u8_task; break;
    default: task = i8_task; break;
    }
    int64_t tasks = outer * j.chunks;
    if (tasks > 1 && op_parallel(tasks * j.len, 1 << 15)) {
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < tasks; t++) task(&j, t);
    } else {
        for (int64_t t = 0; t < tasks; t++) task(&j, t);
    }
    return WPK_OK;
}
