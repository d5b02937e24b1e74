/* gather_scatter_nd.c -- GatherND and ScatterND: the last dim of the index tensor is a tuple
 * addressing a slice of the data (its leading dims after batch_dims); gather copies the
 * slices out, scatter writes (or combines) update slices into a copy of the data. A slice is
 * contiguous, so each moves as one run. */
#include "ops/op_util.h"

#include <string.h>

#include "ops/scatter_reduce.h"

#define PAR_MIN_BYTES (1 << 20)

static int64_t prod(const int64_t *dims, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= dims[i];
    return p;
}

static wpk_status index_dtype(wpk_context *ctx, const ir_node *n, const ir_tensor *idx) {
    if (idx->dtype != WPK_DTYPE_INT64 && idx->dtype != WPK_DTYPE_INT32)
        return op_fail(ctx, n, "input 'indices' must be int32 or int64, not %s",
                       wpk_dtype_name(idx->dtype));
    if (idx->ndim < 1) return op_fail(ctx, n, "input 'indices' is a scalar; it needs rank >= 1");
    return WPK_OK;
}

/* The element offset (in units of slices of the dims after b + k) of the tuple at t within
 * batch item `batch`; WPK_ERR_MODEL for an index out of range. */
static wpk_status tuple_offset(wpk_context *ctx, const ir_node *n, const ir_tensor *x,
                               const ir_tensor *idx, int b, int k, int64_t batch, int64_t t,
                               int64_t *off) {
    int64_t o = batch;
    for (int i = 0; i < k; i++) {
        int64_t d = x->dims[b + i], v = op_int_at(idx, t * k + i);
        if (v < -d || v >= d)
            return op_fail(ctx, n, "index %lld (element %lld of 'indices') is out of range for "
                           "dim %d of size %lld", (long long)v, (long long)(t * k + i), b + i,
                           (long long)d);
        o = o * d + (v < 0 ? v + d : v);
    }
    *off = o;
    return WPK_OK;
}

/* ---- GatherND ---- */

static wpk_status gather_nd_check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                  int *batch_dims) {
    wpk_status st = op_need_input(ctx, n, in, 0, "data");
    if (!st) st = op_need_input(ctx, n, in, 1, "indices");
    if (st) return st;
    const ir_tensor *x = in[0], *idx = in[1];
    if (!wpk_dtype_size(x->dtype))
        return op_unsupported(ctx, n, "dtype %d is not supported", (int)x->dtype);
    st = index_dtype(ctx, n, idx);
    if (st) return st;
    int64_t b = ir_attr_int(n, "batch_dims", 0);
    if (b < 0 || b >= x->ndim || b >= idx->ndim)
        return op_fail(ctx, n, "attribute 'batch_dims' is %lld; it must be in [0, %d)",
                       (long long)b, x->ndim < idx->ndim ? x->ndim : idx->ndim);
    char b1[160], b2[160];
    for (int i = 0; i < b; i++)
        if (x->dims[i] != idx->dims[i])
            return op_fail(ctx, n, "batch dim %d differs: data %s, indices %s", i,
                           op_dims_str(b1, sizeof b1, x->ndim, x->dims),
                           op_dims_str(b2, sizeof b2, idx->ndim, idx->dims));
    int64_t k = idx->dims[idx->ndim - 1];
    if (k < 1 || k > x->ndim - b)
        return op_fail(ctx, n, "the last dim of 'indices' is %lld; with batch_dims %lld it must "
                       "be in [1, %lld]", (long long)k, (long long)b, (long long)(x->ndim - b));
    *batch_dims = (int)b;
    return WPK_OK;
}

wpk_status op_gather_nd_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                              ir_tensor *const *out) {
    int b;
    wpk_status st = gather_nd_check(ctx, n, in, &b);
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    const ir_tensor *x = in[0], *idx = in[1];
    int k = (int)idx->dims[idx->ndim - 1];
    int rank = idx->ndim - 1 + x->ndim - b - k;
    if (rank > WPK_MAX_DIMS)
        return op_unsupported(ctx, n, "the output would have %d dims; at most %d are supported",
                              rank, WPK_MAX_DIMS);
    int64_t dims[WPK_MAX_DIMS];
    int r = 0;
    for (int i = 0; i < idx->ndim - 1; i++) dims[r++] = idx->dims[i];
    for (int i = b + k; i < x->ndim; i++) dims[r++] = x->dims[i];
    op_set_shape(out[0], x->dtype, rank, dims);
    return WPK_OK;
}

wpk_status op_gather_nd_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                            ir_tensor *const *out) {
    int b;
    wpk_status st = gather_nd_check(ctx, n, in, &b);
    if (st) return st;
    const ir_tensor *x = in[0], *idx = in[1];
    int k = (int)idx->dims[idx->ndim - 1];
    int64_t batches = prod(x->dims, 0, b);
    int64_t per_batch = prod(idx->dims, b, idx->ndim - 1); /* tuples per batch item */
    size_t slice = (size_t)prod(x->dims, b + k, x->ndim) * wpk_dtype_size(x->dtype);
    int64_t tuples = batches * per_batch;
    /* offsets first (they may fail), then the copies */
    for (int64_t t = 0; t < tuples; t++) {
        int64_t off;
        st = tuple_offset(ctx, n, x, idx, b, k, t / (per_batch ? per_batch : 1), t, &off);
        if (st) return st;
    }
    const char *src = x->data;
    char *dst = out[0]->data;
    if (op_parallel(tuples * (int64_t)slice, PAR_MIN_BYTES)) {
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < tuples; t++) {
            int64_t off;
            tuple_offset(ctx, n, x, idx, b, k, t / per_batch, t, &off);
            memcpy(dst + (size_t)t * slice, src + (size_t)off * slice, slice);
        }
    } else {
        for (int64_t t = 0; t < tuples; t++) {
            int64_t off;
            tuple_offset(ctx, n, x, idx, b, k, t / per_batch, t, &off);
            memcpy(dst + (size_t)t * slice, src + (size_t)off * slice, slice);
        }
    }
    return WPK_OK;
}

/* ---- ScatterND ---- */

static wpk_status scatter_nd_check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                   scatter_reduction *red) {
    wpk_status st = op_need_input(ctx, n, in, 0, "data");
    if (!st) st = op_need_input(ctx, n, in, 1, "indices");
    if (!st) st = op_need_input(ctx, n, in, 2, "updates");
    if (st) return st;
    const ir_tensor *x = in[0], *idx = in[1], *u = in[2];
    if (!wpk_dtype_size(x->dtype))
        return op_unsupported(ctx, n, "dtype %d is not supported", (int)x->dtype);
    st = index_dtype(ctx, n, idx);
    if (!st) st = scatter_reduction_read(ctx, n, x->dtype, red);
    if (st) return st;
    if (u->dtype != x->dtype)
        return op_fail(ctx, n, "input 'updates' has dtype %s but the data has %s",
                       wpk_dtype_name(u->dtype), wpk_dtype_name(x->dtype));
    int64_t k = idx->dims[idx->ndim - 1];
    if (k < 1 || k > x->ndim)
        return op_fail(ctx, n, "the last dim of 'indices' is %lld; it must be in [1, %d]",
                       (long long)k, x->ndim);
    /* updates: indices' dims without the last, then the data's dims after k */
    int64_t want[WPK_MAX_DIMS];
    int r = 0;
    for (int i = 0; i < idx->ndim - 1; i++) want[r++] = idx->dims[i];
    for (int i = (int)k; i < x->ndim && r < WPK_MAX_DIMS; i++) want[r++] = x->dims[i];
    bool ok = u->ndim == r;
    for (int i = 0; ok && i < r; i++)
        if (u->dims[i] != want[i] && u->dims[i] >= 0 && want[i] >= 0) ok = false;
    char b1[160], b2[160];
    if (!ok)
        return op_fail(ctx, n, "input 'updates' has shape %s; the indices and data need %s",
                       op_dims_str(b1, sizeof b1, u->ndim, u->dims),
                       op_dims_str(b2, sizeof b2, r, want));
    return WPK_OK;
}

wpk_status op_scatter_nd_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                               ir_tensor *const *out) {
    scatter_reduction red;
    wpk_status st = scatter_nd_check(ctx, n, in, &red);
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    op_set_shape(out[0], in[0]->dtype, in[0]->ndim, in[0]->dims);
    return WPK_OK;
}

wpk_status op_scatter_nd_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             ir_tensor *const *out) {
    scatter_reduction red;
    wpk_status st = scatter_nd_check(ctx, n, in, &red);
    if (st) return st;
    const ir_tensor *x = in[0], *idx = in[1];
    int k = (int)idx->dims[idx->ndim - 1];
    int64_t tuples = prod(idx->dims, 0, idx->ndim - 1), elems = prod(x->dims, k, x->ndim);
    size_t es = wpk_dtype_size(x->dtype);
    for (int64_t t = 0; t < tuples; t++) {
        int64_t off;
        st = tuple_offset(ctx, n, x, idx, 0, k, 0, t, &off);
        if (st) return st;
    }
    if (out[0]->data != x->data) memcpy(out[0]->data, x->data, ir_nbytes(x));
    /* in order: a later update of the same slice wins, or is combined after the earlier */
    char *dst = out[0]->data;
    const char *src = in[2]->data;
    for (int64_t t = 0; t < tuples; t++) {
        int64_t off;
        tuple_offset(ctx, n, x, idx, 0, k, 0, t, &off);
        scatter_combine(red, x->dtype, dst + (size_t)(off * elems) * es,
                        src + (size_t)(t * elems) * es, elems);
    }
    return WPK_OK;
}
