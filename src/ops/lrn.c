/* lrn.c -- LRN (local response normalization across channels, AlexNet's): each element divided
 * by (bias + alpha / size * the sum of squares over `size` neighbouring channels) ^ beta. */
#include <math.h>

#include "ops/op_util.h"

/* Spatial positions one task handles; the window sums run over them as contiguous lanes. */
#define LRN_BLOCK 512

typedef struct lrn_job {
    int64_t c, spatial, chunks, before, after; /* the window: c - before .. c + after */
    float alpha_over_size, beta, bias;
    const float *x;
    float *y;
} lrn_job;

static wpk_status lrn_check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                            int64_t *size) {
    wpk_status st;
    if ((st = op_need_input(ctx, n, in, 0, "X")) || (st = op_need_f32(ctx, n, in, 0))) return st;
    if (in[0]->ndim < 2)
        return op_fail(ctx, n, "input X has %d dims, expected at least 2 (N, C, ...)",
                       in[0]->ndim);
    const ir_attr *a = ir_attr_find(n, "size");
    if (!a || a->kind != IR_ATTR_INT)
        return op_fail(ctx, n, "attribute 'size' (an int) is required");
    if (a->i < 1) return op_fail(ctx, n, "attribute 'size' = %lld must be at least 1",
                                 (long long)a->i);
    *size = a->i;
    return WPK_OK;
}

wpk_status op_lrn_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out) {
    int64_t size;
    wpk_status st = lrn_check(ctx, n, in, &size);
    if (st) return st;
    op_set_shape(out[0], WPK_DTYPE_FLOAT32, in[0]->ndim, in[0]->dims);
    return WPK_OK;
}

static void lrn_task(const lrn_job *j, int64_t t) {
    int64_t img = t / j->chunks, s0 = (t % j->chunks) * LRN_BLOCK;
    int64_t sn = j->spatial - s0 < LRN_BLOCK ? j->spatial - s0 : LRN_BLOCK;
    const float *x = j->x + img * j->c * j->spatial + s0;
    float *y = j->y + img * j->c * j->spatial + s0;
    for (int64_t c = 0; c < j->c; c++) {
        float sq[LRN_BLOCK];
        for (int64_t k = 0; k < sn; k++) sq[k] = 0.0f;
        int64_t lo = c - j->before < 0 ? 0 : c - j->before;
        int64_t hi = c + j->after >= j->c ? j->c - 1 : c + j->after;
        for (int64_t w = lo; w <= hi; w++) {
            const float *xw = x + w * j->spatial;
#pragma omp simd
            for (int64_t k = 0; k < sn; k++) sq[k] += xw[k] * xw[k];
        }
        const float *xc = x + c * j->spatial;
        float *yc = y + c * j->spatial;
        for (int64_t k = 0; k < sn; k++)
            yc[k] = xc[k] / powf(j->bias + j->alpha_over_size * sq[k], j->beta);
    }
}

wpk_status op_lrn_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                      ir_tensor *const *out) {
    int64_t size;
    wpk_status st = lrn_check(ctx, n, in, &size);
    if (st) return st;
    const ir_tensor *x = in[0];
    int64_t spatial = 1;
    for (int i = 2; i < x->ndim; i++) spatial *= x->dims[i];
    lrn_job j = {.c = x->dims[1], .spatial = spatial,
                 .chunks = (spatial + LRN_BLOCK - 1) / LRN_BLOCK, .before = (size - 1) / 2,
                 .after = size / 2,
                 .alpha_over_size = ir_attr_float(n, "alpha", 1e-4f) / (float)size,
                 .beta = ir_attr_float(n, "beta", 0.75f), .bias = ir_attr_float(n, "bias", 1.0f),
                 .x = x->data, .y = out[0]->data};
    if (ir_numel(x) == 0) return WPK_OK;
    int64_t tasks = x->dims[0] * j.chunks;
    if (tasks > 1 && op_parallel(ir_numel(x) * size, 1 << 15)) {
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < tasks; t++) lrn_task(&j, t);
    } else {
        for (int64_t t = 0; t < tasks; t++) lrn_task(&j, t);
    }
    return WPK_OK;
}
