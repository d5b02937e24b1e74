/* mvn.c -- MeanVarianceNormalization: X minus its mean over `axes` (default N, H, W), divided
 * by the standard deviation over the same axes plus ONNX's 1e-9. Statistics in double. */
#include <math.h>

#include "ops/op_util.h"

/* The epsilon of ONNX's function body for this op (added to the standard deviation). */
#define MVN_EPSILON 1e-9

typedef struct mvn_job {
    int nk, nr;                          /* kept dims; reduced dims but the innermost */
    int64_t ksize[WPK_MAX_DIMS], kstr[WPK_MAX_DIMS];
    int64_t rsize[WPK_MAX_DIMS], rstr[WPK_MAX_DIMS];
    int64_t combos, last, last_str, count; /* count: elements per statistic */
    const float *x;
    float *y;
} mvn_job;

static wpk_status mvn_setup(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                            bool *reduced) {
    wpk_status st;
    if ((st = op_need_input(ctx, n, in, 0, "X")) || (st = op_need_f32(ctx, n, in, 0))) return st;
    int nd = in[0]->ndim, count = 3;
    static const int64_t nchw_axes[3] = {0, 2, 3};
    const int64_t *axes = nchw_axes;
    const ir_attr *a = ir_attr_find(n, "axes");
    if (a) {
        if (a->kind != IR_ATTR_INTS) return op_fail(ctx, n, "attribute 'axes' must be ints");
        axes = a->ints;
        count = a->n;
    } else if (nd != 4) {
        return op_fail(ctx, n, "attribute 'axes' is absent, so its default [0, 2, 3] applies, "
                       "but X has %d dims, not 4", nd);
    }
    for (int i = 0; i < nd; i++) reduced[i] = false;
    for (int i = 0; i < count; i++) {
        int ax;
        if ((st = op_axis(ctx, n, axes[i], nd, &ax, "attribute 'axes'"))) return st;
        if (reduced[ax])
            return op_fail(ctx, n, "axis %lld appears twice in 'axes'", (long long)axes[i]);
        reduced[ax] = true;
    }
    return WPK_OK;
}

wpk_status op_mvn_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out) {
    bool reduced[WPK_MAX_DIMS];
    wpk_status st = mvn_setup(ctx, n, in, reduced);
    if (st) return st;
    op_set_shape(out[0], WPK_DTYPE_FLOAT32, in[0]->ndim, in[0]->dims);
    return WPK_OK;
}

/* Calls BODY with `p` the offset of each element of one statistic's set, row base `base`. */
#define MVN_WALK(BODY)                                                                          \
    do {                                                                                       \
        int64_t idx[WPK_MAX_DIMS] = {0}, off = base;                                           \
        for (int64_t q = 0; q < j->combos; q++) {                                              \
            for (int64_t l = 0; l < j->last; l++) {                                            \
                int64_t p = off + l * j->last_str;                                             \
                BODY;                                                                          \
            }                                                                                  \
            for (int g = j->nr - 1; g >= 0; g--) {                                             \
                off += j->rstr[g];                                                             \
                if (++idx[g] < j->rsize[g]) break;                                             \
                off -= idx[g] * j->rstr[g];                                                    \
                idx[g] = 0;                                                                    \
            }                                                                                  \
        }                                                                                      \
    } while (0)

static void mvn_row(const mvn_job *j, int64_t r) {
    int64_t base = 0, rem = r;
    for (int g = j->nk - 1; g >= 0; g--) {
        base += rem % j->ksize[g] * j->kstr[g];
        rem /= j->ksize[g];
    }
    const float *x = j->x;
    float *y = j->y;
    double sum = 0.0, sq = 0.0;
    MVN_WALK(sum += x[p]);
    double mean = sum / (double)j->count;
    MVN_WALK(sq += (x[p] - mean) * (x[p] - mean));
    double scale = 1.0 / (sqrt(sq / (double)j->count) + MVN_EPSILON);
    MVN_WALK(y[p] = (float)((x[p] - mean) * scale));
}

wpk_status op_mvn_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                      ir_tensor *const *out) {
    bool reduced[WPK_MAX_DIMS];
    wpk_status st = mvn_setup(ctx, n, in, reduced);
    if (st) return st;
    const ir_tensor *x = in[0];
    if (ir_numel(x) == 0) return WPK_OK;
    mvn_job j = {.combos = 1, .last = 1, .last_str = 0, .count = 1, .x = x->data,
                 .y = out[0]->data};
    int64_t str = 1, rows = 1;
    int innermost = -1; /* the innermost reduced dim: the inner loop */
    for (int d = x->ndim - 1; d >= 0; d--)
        if (reduced[d] && innermost < 0) innermost = d;
    int64_t strides[WPK_MAX_DIMS];
    for (int d = x->ndim - 1; d >= 0; d--) {
        strides[d] = str;
        str *= x->dims[d];
    }
    for (int d = 0; d < x->ndim; d++) {
        if (!reduced[d]) {
            j.ksize[j.nk] = x->dims[d];
            j.kstr[j.nk++] = strides[d];
            rows *= x->dims[d];
        } else if (d == innermost) {
            j.last = x->dims[d];
            j.last_str = strides[d];
            j.count *= x->dims[d];
        } else {
            j.rsize[j.nr] = x->dims[d];
            j.rstr[j.nr++] = strides[d];
            j.combos *= x->dims[d];
            j.count *= x->dims[d];
        }
    }
    if (rows > 1 && op_parallel(ir_numel(x), 1 << 14)) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++) mvn_row(&j, r);
    } else {
        for (int64_t r = 0; r < rows; r++) mvn_row(&j, r);
    }
    return WPK_OK;
}
