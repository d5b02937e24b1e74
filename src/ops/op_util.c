/* op_util.c -- helpers shared by the op files. */
#include "ops/op_util.h"

#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static wpk_status vfail(wpk_context *ctx, wpk_status st, const ir_node *n, const char *fmt,
                        va_list ap) {
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return wpk_error(ctx, st, "node '%s' (%s): %s", n->name, n->op_type, msg);
}

wpk_status op_fail(wpk_context *ctx, const ir_node *n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    wpk_status st = vfail(ctx, WPK_ERR_MODEL, n, fmt, ap);
    va_end(ap);
    return st;
}

wpk_status op_unsupported(wpk_context *ctx, const ir_node *n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    wpk_status st = vfail(ctx, WPK_ERR_UNSUPPORTED, n, fmt, ap);
    va_end(ap);
    return st;
}

wpk_status op_need_input(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, int i,
                         const char *what) {
    if (i >= n->nin || !in[i]) return op_fail(ctx, n, "input %d ('%s') is missing", i, what);
    return WPK_OK;
}

wpk_status op_need_output(wpk_context *ctx, const ir_node *n, ir_tensor *const *out, int i) {
    if (i >= n->nout || !out[i]) return op_fail(ctx, n, "output %d is missing", i);
    return WPK_OK;
}

wpk_status op_need_data(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, int i,
                        const char *what) {
    wpk_status st = op_need_input(ctx, n, in, i, what);
    if (st) return st;
    if (!in[i]->data)
        return op_unsupported(ctx, n, "input %d ('%s') is not constant; its value must be known "
                              "before the graph runs", i, what);
    return WPK_OK;
}

wpk_status op_need_f32(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, int i) {
    if (in[i]->dtype != WPK_DTYPE_FLOAT32)
        return op_unsupported(ctx, n, "input %d has dtype %s; only float32 is supported", i,
                              wpk_dtype_name(in[i]->dtype));
    return WPK_OK;
}

int64_t op_int_at(const ir_tensor *t, int64_t i) {
    return t->dtype == WPK_DTYPE_INT32 ? ((const int32_t *)t->data)[i]
                                       : ((const int64_t *)t->data)[i];
}

wpk_status op_check_indices(wpk_context *ctx, const ir_node *n, const ir_tensor *idx, int64_t d,
                            int axis) {
    int64_t count = ir_numel(idx);
    for (int64_t i = 0; i < count; i++) {
        int64_t v = op_int_at(idx, i);
        if (v < -d || v >= d)
            return op_fail(ctx, n, "index %lld (element %lld of 'indices') is out of range for "
                           "axis %d of size %lld", (long long)v, (long long)i, axis,
                           (long long)d);
    }
    return WPK_OK;
}

wpk_status op_read_ints(wpk_context *ctx, const ir_node *n, const ir_tensor *t, int64_t *out,
                        int max, int *count, const char *what) {
    if (t->dtype != WPK_DTYPE_INT64 && t->dtype != WPK_DTYPE_INT32)
        return op_fail(ctx, n, "'%s' must be int64 or int32, not %s", what,
                       wpk_dtype_name(t->dtype));
    int64_t len = ir_numel(t);
    if (len > max) return op_fail(ctx, n, "'%s' has %lld values, at most %d are allowed", what,
                                  (long long)len, max);
    for (int64_t i = 0; i < len; i++) out[i] = op_int_at(t, i);
    *count = (int)len;
    return WPK_OK;
}

wpk_status op_attr_flag(wpk_context *ctx, const ir_node *n, const char *name, bool *out) {
    int64_t v = ir_attr_int(n, name, 0);
    if (v != 0 && v != 1)
        return op_fail(ctx, n, "attribute '%s' is %lld, expected 0 or 1", name, (long long)v);
    *out = v == 1;
    return WPK_OK;
}

wpk_status op_axis(wpk_context *ctx, const ir_node *n, int64_t axis, int ndim, int *out,
                   const char *what) {
    if (axis < -ndim || axis >= ndim)
        return op_fail(ctx, n, "%s %lld is out of range for a %d-d tensor", what,
                       (long long)axis, ndim);
    *out = (int)(axis < 0 ? axis + ndim : axis);
    return WPK_OK;
}

wpk_status op_broadcast(wpk_context *ctx, const ir_node *n, const ir_tensor *a,
                        const ir_tensor *b, ir_tensor *out) {
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    int64_t dims[WPK_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        int ia = i - (nd - a->ndim), ib = i - (nd - b->ndim);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da < 0 || db < 0) { /* symbolic: known only when the other side is a real dim */
            dims[i] = (da > 1) ? da : (db > 1) ? db : -1;
            continue;
        }
        if (da != db && da != 1 && db != 1)
            return op_fail(ctx, n, "shapes cannot be broadcast: dim %d is %lld in one input and "
                           "%lld in the other", i, (long long)da, (long long)db);
        dims[i] = da == 1 ? db : da;
    }
    out->ndim = nd;
    memcpy(out->dims, dims, sizeof(int64_t) * (size_t)nd);
    return WPK_OK;
}

void op_set_shape(ir_tensor *t, wpk_dtype dtype, int ndim, const int64_t *dims) {
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim) memcpy(t->dims, dims, sizeof(int64_t) * (size_t)ndim);
}

void op_broadcast_strides(const ir_tensor *t, int out_ndim, const int64_t *out_dims,
                          int64_t *strides) {
    int64_t s = 1;
    for (int i = out_ndim - 1; i >= 0; i--) {
        int ti = i - (out_ndim - t->ndim);
        if (ti < 0) {
            strides[i] = 0;
            continue;
        }
        strides[i] = (t->dims[ti] == 1 && out_dims[i] != 1) ? 0 : s;
        s *= t->dims[ti];
    }
}

const char *op_dims_str(char *buf, size_t cap, int ndim, const int64_t *dims) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "," : "", (long long)dims[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
    return buf;
}

bool op_parallel(int64_t work, int64_t min_work) {
    /* the thread count second: omp_get_max_threads is cheap, but the size test is cheaper */
    return work >= min_work && omp_get_max_threads() > 1;
}
