/* top_k.c -- TopK: the k largest (or smallest) elements along an axis and their int64 indices,
 * best first; equal values keep their index order. Each row is a heap selection that keeps the
 * heap in the Indices output itself, so the kernel needs no scratch memory. */
#include "ops/op_util.h"

static bool top_k_dtype_ok(wpk_dtype t) {
    return t == WPK_DTYPE_FLOAT32 || t == WPK_DTYPE_FLOAT64 || t == WPK_DTYPE_INT32 ||
           t == WPK_DTYPE_INT64 || t == WPK_DTYPE_UINT8 || t == WPK_DTYPE_INT8;
}

static wpk_status top_k_setup(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                              int *axis, int64_t *k, bool *largest) {
    wpk_status st;
    if ((st = op_need_input(ctx, n, in, 0, "X")) || (st = op_need_data(ctx, n, in, 1, "K")))
        return st;
    const ir_tensor *x = in[0];
    if (!top_k_dtype_ok(x->dtype))
        return op_unsupported(ctx, n, "input 0 has dtype %s, which TopK does not support",
                              wpk_dtype_name(x->dtype));
    int64_t kv[1];
    int count;
    if ((st = op_read_ints(ctx, n, in[1], kv, 1, &count, "K"))) return st;
    if (count != 1) return op_fail(ctx, n, "input 'K' must hold one value, it holds none");
    bool sorted; /* read to check it; the output is sorted either way, as sorted = 0 allows */
    if ((st = op_axis(ctx, n, ir_attr_int(n, "axis", -1), x->ndim, axis, "attribute 'axis'")) ||
        (st = op_attr_flag(ctx, n, "sorted", &sorted)))
        return st;
    *largest = true;
    if (ir_attr_find(n, "largest") && (st = op_attr_flag(ctx, n, "largest", largest))) return st;
    *k = kv[0];
    int64_t len = x->dims[*axis];
    if (*k < 0 || (len >= 0 && *k > len))
        return op_fail(ctx, n, "K = %lld is outside [0, %lld], the size of axis %d",
                       (long long)*k, (long long)len, *axis);
    return WPK_OK;
}

wpk_status op_top_k_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                          ir_tensor *const *out) {
    int axis;
    int64_t k;
    bool largest;
    wpk_status st = top_k_setup(ctx, n, in, &axis, &k, &largest);
    if (st) return st;
    int64_t dims[WPK_MAX_DIMS];
    const ir_tensor *x = in[0];
    for (int i = 0; i < x->ndim; i++) dims[i] = i == axis ? k : x->dims[i];
    if (n->nout > 0 && out[0]) op_set_shape(out[0], x->dtype, x->ndim, dims);
    if (n->nout > 1 && out[1]) op_set_shape(out[1], WPK_DTYPE_INT64, x->ndim, dims);
    return WPK_OK;
}

typedef struct top_k_job {
    int64_t len, inner, k;
    bool largest;
    const void *x;
    void *values; /* NULL when the output is not used */
    int64_t *idx; /* the Indices output, which holds each row's heap */
} top_k_job;

/* A heap of the k best seen so far with the worst at its root; slot m of a row's heap is
 * h[m * inner]. BETTER(a, b) orders (value, index) pairs: the better value, then the lower
 * index. */
#define TOP_K_ROW(SUF, T)                                                                       \
    static bool SUF##_better(const top_k_job *j, const T *x, int64_t a, int64_t b) {           \
        T va = x[a * j->inner], vb = x[b * j->inner];                                          \
        if (va != vb) return j->largest ? va > vb : va < vb;                                   \
        return a < b;                                                                          \
    }                                                                                          \
    static void SUF##_sift(const top_k_job *j, const T *x, int64_t *h, int64_t size,           \
                           int64_t m) {                                                        \
        const int64_t s = j->inner;                                                            \
        for (;;) {                                                                             \
            int64_t worst = m, c = 2 * m + 1;                                                  \
            if (c < size && SUF##_better(j, x, h[worst * s], h[c * s])) worst = c;             \
            if (c + 1 < size && SUF##_better(j, x, h[worst * s], h[(c + 1) * s])) worst = c + 1; \
            if (worst == m) return;                                                            \
            int64_t t = h[m * s];                                                              \
            h[m * s] = h[worst * s];                                                           \
            h[worst * s] = t;                                                                  \
            m = worst;                                                                         \
        }                                                                                      \
    }                                                                                          \
    static void SUF##_row(const top_k_job *j, int64_t r) {                                     \
        const int64_t s = j->inner, k = j->k, o = r / s, i = r % s;                            \
        const T *x = (const T *)j->x + o * j->len * s + i;                                     \
        int64_t *h = j->idx + o * k * s + i;                                                   \
        for (int64_t e = 0; e < k; e++) h[e * s] = e;                                          \
        for (int64_t m = k / 2 - 1; m >= 0; m--) SUF##_sift(j, x, h, k, m);                    \
        for (int64_t e = k; e < j->len; e++)                                                   \
            if (SUF##_better(j, x, e, h[0])) {                                                 \
                h[0] = e;                                                                      \
                SUF##_sift(j, x, h, k, 0);                                                     \
            }                                                                                  \
        /* heap sort: moving the worst to the end each time leaves the best first */           \
        for (int64_t end = k - 1; end > 0; end--) {                                            \
            int64_t t = h[0];                                                                  \
            h[0] = h[end * s];                                                                 \
            h[end * s] = t;                                                                    \
            SUF##_sift(j, x, h, end, 0);                                                       \
        }                                                                                      \
        if (j->values) {                                                                       \
            T *v = (T *)j->values + o * k * s + i;                                             \
            for (int64_t e = 0; e < k; e++) v[e * s] = x[h[e * s] * s];                        \
        }                                                                                      \
    }

TOP_K_ROW(f32, float)
TOP_K_ROW(f64, double)
TOP_K_ROW(i32, int32_t)
TOP_K_ROW(i64, int64_t)
TOP_K_ROW(u8, uint8_t)
TOP_K_ROW(i8, int8_t)

typedef void top_k_row_fn(const top_k_job *j, int64_t r);

wpk_status op_top_k_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out) {
    int axis;
    int64_t k;
    bool largest;
    wpk_status st = top_k_setup(ctx, n, in, &axis, &k, &largest);
    if (st) return st;
    const ir_tensor *x = in[0];
    bool has_values = n->nout > 0 && out[0], has_idx = n->nout > 1 && out[1];
    if (!has_idx)
        return op_unsupported(ctx, n, "output 1 (Indices) is not used; the kernel keeps its "
                              "selection there, so it must be present");
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= x->dims[i];
    for (int i = axis + 1; i < x->ndim; i++) inner *= x->dims[i];
    top_k_job j = {.len = x->dims[axis], .inner = inner, .k = k, .largest = largest,
                   .x = x->data, .values = has_values ? out[0]->data : NULL,
                   .idx = out[1]->data};
    if (k == 0) return WPK_OK;
    top_k_row_fn *row;
    switch (x->dtype) {
    case WPK_DTYPE_FLOAT32: row = f32_row; break;
    case WPK_DTYPE_FLOAT64: row = f64_row; break;
    case WPK_DTYPE_INT32: row = i32_row; break;
    case WPK_DTYPE_INT64: row = i64_row; break;
    case WPK_DTYPE_UINT8: row = u8_row; break;
    default: row = i8_row; break;
    }
    int64_t rows = outer * inner;
    if (rows > 1 && op_parallel(rows * j.len, 1 << 14)) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++) row(&j, r);
    } else {
        for (int64_t r = 0; r < rows; r++) row(&j, r);
    }
    return WPK_OK;
}
