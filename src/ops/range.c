/* range.c -- Range: start, start + delta, ... up to (not including) limit, for float32,
 * float64, int32 and int64 scalars. Its length depends on the three values, so they must be
 * known when shapes are inferred (constants, or the data of a run). */
#include "ops/op_util.h"

#include <math.h>

static bool range_dtype(wpk_dtype t) {
    return t == WPK_DTYPE_FLOAT32 || t == WPK_DTYPE_FLOAT64 || t == WPK_DTYPE_INT32 ||
           t == WPK_DTYPE_INT64;
}

static double value_at(const ir_tensor *t) {
    switch (t->dtype) {
    case WPK_DTYPE_FLOAT32: return *(const float *)t->data;
    case WPK_DTYPE_FLOAT64: return *(const double *)t->data;
    default: return (double)op_int_at(t, 0);
    }
}

/* The element count; WPK_ERR_MODEL for a zero delta or mismatched inputs. */
static wpk_status range_count(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                              int64_t *count) {
    static const char *const names[] = {"start", "limit", "delta"};
    for (int i = 0; i < 3; i++) {
        wpk_status st = op_need_data(ctx, n, in, i, names[i]);
        if (st) return st;
        if (ir_numel(in[i]) != 1)
            return op_fail(ctx, n, "input '%s' must be a scalar, but has %lld elements",
                           names[i], (long long)ir_numel(in[i]));
        if (in[i]->dtype != in[0]->dtype)
            return op_fail(ctx, n, "input '%s' has dtype %s but 'start' has %s", names[i],
                           wpk_dtype_name(in[i]->dtype), wpk_dtype_name(in[0]->dtype));
    }
    if (!range_dtype(in[0]->dtype))
        return op_unsupported(ctx, n, "dtype %s is not supported (float32, float64, int32, "
                              "int64 are)", wpk_dtype_name(in[0]->dtype));
    if (in[0]->dtype == WPK_DTYPE_INT32 || in[0]->dtype == WPK_DTYPE_INT64) {
        int64_t s = op_int_at(in[0], 0), l = op_int_at(in[1], 0), d = op_int_at(in[2], 0);
        if (d == 0) return op_fail(ctx, n, "input 'delta' is 0");
        int64_t span = l - s; /* ceil(span / d), never below 0 */
        int64_t c = span / d + ((span % d != 0) && ((span > 0) == (d > 0)));
        *count = c > 0 ? c : 0;
        return WPK_OK;
    }
    double s = value_at(in[0]), l = value_at(in[1]), d = value_at(in[2]);
    if (d == 0 || !isfinite(s) || !isfinite(l) || !isfinite(d))
        return op_fail(ctx, n, "start %g, limit %g, delta %g do not give a finite range", s, l,
                       d);
    double c = ceil((l - s) / d);
    if (c > (double)((int64_t)1 << 40))
        return op_fail(ctx, n, "start %g, limit %g, delta %g give %g elements, too many", s, l,
                       d, c);
    *count = c > 0 ? (int64_t)c : 0;
    return WPK_OK;
}

wpk_status op_range_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                          ir_tensor *const *out) {
    int64_t count;
    wpk_status st = range_count(ctx, n, in, &count);
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    op_set_shape(out[0], in[0]->dtype, 1, &count);
    return WPK_OK;
}

wpk_status op_range_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out) {
    int64_t count;
    wpk_status st = range_count(ctx, n, in, &count);
    if (st) return st;
    void *y = out[0]->data;
    switch (in[0]->dtype) {
    case WPK_DTYPE_FLOAT32: {
        float s = *(const float *)in[0]->data, d = *(const float *)in[2]->data;
        for (int64_t i = 0; i < count; i++) ((float *)y)[i] = s + (float)i * d;
        break;
    }
    case WPK_DTYPE_FLOAT64: {
        double s = *(const double *)in[0]->data, d = *(const double *)in[2]->data;
        for (int64_t i = 0; i < count; i++) ((double *)y)[i] = s + (double)i * d;
        break;
    }
    case WPK_DTYPE_INT32: {
        int32_t s = *(const int32_t *)in[0]->data, d = *(const int32_t *)in[2]->data;
        for (int64_t i = 0; i < count; i++) ((int32_t *)y)[i] = (int32_t)(s + i * d);
        break;
    }
    default: {
        int64_t s = op_int_at(in[0], 0), d = op_int_at(in[2], 0);
        for (int64_t i = 0; i < count; i++) ((int64_t *)y)[i] = s + i * d;
        break;
    }
    }
    return WPK_OK;
}
