/* gather_scatter_elements.c -- GatherElements and ScatterElements: an index tensor of the
 * data's rank picks, along one axis, the element each output element reads (gather) or each
 * update lands on (scatter). Elements move by size, so gather runs on every dtype. */
#include "ops/op_util.h"

#include <string.h>

#include "ops/scatter_reduce.h"

#define PAR_MIN_ELEMS (1 << 16)

/* indices must be int32/int64, of the data's rank, no larger than the data off the axis. */
static wpk_status check_indices(wpk_context *ctx, const ir_node *n, const ir_tensor *x,
                                const ir_tensor *idx, int axis) {
    if (idx->dtype != WPK_DTYPE_INT64 && idx->dtype != WPK_DTYPE_INT32)
        return op_fail(ctx, n, "input 'indices' must be int32 or int64, not %s",
                       wpk_dtype_name(idx->dtype));
    char b1[160], b2[160];
    if (idx->ndim != x->ndim)
        return op_fail(ctx, n, "input 'indices' %s has rank %d but the data %s has rank %d",
                       op_dims_str(b1, sizeof b1, idx->ndim, idx->dims), idx->ndim,
                       op_dims_str(b2, sizeof b2, x->ndim, x->dims), x->ndim);
    for (int k = 0; k < x->ndim; k++)
        if (k != axis && idx->dims[k] >= 0 && x->dims[k] >= 0 && idx->dims[k] > x->dims[k])
            return op_fail(ctx, n, "input 'indices' %s is larger than the data %s in dim %d",
                           op_dims_str(b1, sizeof b1, idx->ndim, idx->dims),
                           op_dims_str(b2, sizeof b2, x->ndim, x->dims), k);
    return WPK_OK;
}

static wpk_status read_axis(wpk_context *ctx, const ir_node *n, const ir_tensor *x, int *axis) {
    return op_axis(ctx, n, ir_attr_int(n, "axis", 0), x->ndim > 0 ? x->ndim : 1, axis,
                   "attribute 'axis'");
}

/* Element strides of x in elements. */
static void strides_of(const ir_tensor *x, int64_t *s) {
    int64_t v = 1;
    for (int k = x->ndim - 1; k >= 0; k--) {
        s[k] = v;
        v *= x->dims[k];
    }
}

/* The data offset of index row r (rows: the last dim of `idx`) with the axis's coordinate
 * left out. */
static int64_t row_base(const ir_tensor *idx, const int64_t *xs, int axis, int64_t r) {
    int64_t off = 0;
    for (int k = idx->ndim - 2; k >= 0; k--) {
        int64_t i = r % idx->dims[k];
        r /= idx->dims[k];
        if (k != axis) off += i * xs[k];
    }
    return off;
}

/* ---- GatherElements ---- */

wpk_status op_gather_elements_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                    ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "data");
    if (!st) st = op_need_input(ctx, n, in, 1, "indices");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    const ir_tensor *x = in[0], *idx = in[1];
    if (!wpk_dtype_size(x->dtype))
        return op_unsupported(ctx, n, "dtype %d is not supported", (int)x->dtype);
    if (x->ndim == 0) return op_fail(ctx, n, "input 'data' is a scalar; it needs a rank >= 1");
    int axis;
    st = read_axis(ctx, n, x, &axis);
    if (!st) st = check_indices(ctx, n, x, idx, axis);
    if (st) return st;
    op_set_shape(out[0], x->dtype, idx->ndim, idx->dims);
    return WPK_OK;
}

typedef struct elements_job {
    const ir_tensor *idx;
    int axis, last;
    int64_t xs[WPK_MAX_DIMS], d, width;
    size_t es;
    char *data;        /* gather: the source; scatter: the output */
    char *other;       /* gather: the output; scatter: the updates */
} elements_job;

static void gather_row(const elements_job *j, int64_t r) {
    int64_t base = row_base(j->idx, j->xs, j->axis, r), first = r * j->width;
    int64_t along = j->xs[j->axis], step = j->axis == j->last ? 0 : j->xs[j->last];
    for (int64_t c = 0; c < j->width; c++) {
        int64_t v = op_int_at(j->idx, first + c);
        if (v < 0) v += j->d;
        memcpy(j->other + (size_t)(first + c) * j->es,
               j->data + (size_t)(base + c * step + v * along) * j->es, j->es);
    }
}

wpk_status op_gather_elements_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                  ir_tensor *const *out) {
    const ir_tensor *x = in[0], *idx = in[1];
    int axis;
    wpk_status st = read_axis(ctx, n, x, &axis);
    if (!st) st = op_check_indices(ctx, n, idx, x->dims[axis], axis);
    if (st) return st;
    int64_t total = ir_numel(idx);
    if (total == 0) return WPK_OK;
    elements_job j = {.idx = idx, .axis = axis, .last = x->ndim - 1, .d = x->dims[axis],
                      .width = idx->dims[x->ndim - 1], .es = wpk_dtype_size(x->dtype),
                      .data = x->data, .other = out[0]->data};
    strides_of(x, j.xs);
    int64_t rows = total / j.width;
    if (op_parallel(total, PAR_MIN_ELEMS)) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++) gather_row(&j, r);
    } else {
        for (int64_t r = 0; r < rows; r++) gather_row(&j, r);
    }
    return WPK_OK;
}

/* ---- ScatterElements ---- */

static wpk_status scatter_check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                int *axis, scatter_reduction *red) {
    wpk_status st = op_need_input(ctx, n, in, 0, "data");
    if (!st) st = op_need_input(ctx, n, in, 1, "indices");
    if (!st) st = op_need_input(ctx, n, in, 2, "updates");
    if (st) return st;
    const ir_tensor *x = in[0], *idx = in[1], *u = in[2];
    if (!wpk_dtype_size(x->dtype))
        return op_unsupported(ctx, n, "dtype %d is not supported", (int)x->dtype);
    if (x->ndim == 0) return op_fail(ctx, n, "input 'data' is a scalar; it needs a rank >= 1");
    st = read_axis(ctx, n, x, axis);
    if (!st) st = check_indices(ctx, n, x, idx, *axis);
    if (!st) st = scatter_reduction_read(ctx, n, x->dtype, red);
    if (st) return st;
    char b1[160], b2[160];
    if (u->dtype != x->dtype)
        return op_fail(ctx, n, "input 'updates' has dtype %s but the data has %s",
                       wpk_dtype_name(u->dtype), wpk_dtype_name(x->dtype));
    if (!ir_same_shape(u, idx))
        return op_fail(ctx, n, "input 'updates' %s must have the shape of 'indices' %s",
                       op_dims_str(b1, sizeof b1, u->ndim, u->dims),
                       op_dims_str(b2, sizeof b2, idx->ndim, idx->dims));
    return WPK_OK;
}

wpk_status op_scatter_elements_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                     ir_tensor *const *out) {
    int axis;
    scatter_reduction red;
    wpk_status st = scatter_check(ctx, n, in, &axis, &red);
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    op_set_shape(out[0], in[0]->dtype, in[0]->ndim, in[0]->dims);
    return WPK_OK;
}

wpk_status op_scatter_elements_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                   ir_tensor *const *out) {
    int axis;
    scatter_reduction red;
    wpk_status st = scatter_check(ctx, n, in, &axis, &red);
    const ir_tensor *x = in[0], *idx = in[1];
    if (!st) st = op_check_indices(ctx, n, idx, x->dims[axis], axis);
    if (st) return st;
    if (out[0]->data != x->data) memcpy(out[0]->data, x->data, ir_nbytes(x));
    int64_t total = ir_numel(idx);
    if (total == 0) return WPK_OK;
    elements_job j = {.idx = idx, .axis = axis, .last = x->ndim - 1, .d = x->dims[axis],
                      .width = idx->dims[x->ndim - 1], .es = wpk_dtype_size(x->dtype),
                      .data = out[0]->data, .other = in[2]->data};
    strides_of(x, j.xs);
    /* in order, one element at a time: with duplicate indices the later update wins (none) or
     * each one is combined in turn */
    int64_t along = j.xs[axis], step = axis == j.last ? 0 : j.xs[j.last];
    for (int64_t r = 0; r < total / j.width; r++) {
        int64_t base = row_base(idx, j.xs, axis, r), first = r * j.width;
        for (int64_t c = 0; c < j.width; c++) {
            int64_t v = op_int_at(idx, first + c);
            if (v < 0) v += j.d;
            scatter_combine(red, x->dtype, j.data + (size_t)(base + c * step + v * along) * j.es,
                            j.other + (size_t)(first + c) * j.es, 1);
        }
    }
    return WPK_OK;
}
