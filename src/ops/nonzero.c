/* nonzero.c -- NonZero: the indices of the input's nonzero elements, as an int64 tensor
 * [rank, count]. The count depends on the input's values, so the input must be known when
 * shapes are inferred: a constant (then the node folds away) or the data of a run that infers
 * shapes as it goes. */
#include "ops/op_util.h"

#include <string.h>

static bool nonzero_at(const ir_tensor *x, int64_t i) {
    switch (x->dtype) {
    case WPK_DTYPE_FLOAT32: return ((const float *)x->data)[i] != 0;
    case WPK_DTYPE_FLOAT64: return ((const double *)x->data)[i] != 0;
    case WPK_DTYPE_INT32: return ((const int32_t *)x->data)[i] != 0;
    case WPK_DTYPE_INT64: return ((const int64_t *)x->data)[i] != 0;
    default: return ((const uint8_t *)x->data)[i] != 0; /* bool, int8, uint8 */
    }
}

static wpk_status nonzero_count(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                int64_t *count) {
    wpk_status st = op_need_input(ctx, n, in, 0, "X");
    if (st) return st;
    const ir_tensor *x = in[0];
    if (wpk_dtype_size(x->dtype) == 0)
        return op_unsupported(ctx, n, "dtype %d is not supported", (int)x->dtype);
    if (!x->data)
        return op_unsupported(ctx, n, "the output's shape depends on the values of input 'X', "
                              "which are not known before the graph runs (NonZero runs only "
                              "on a constant input or where shapes are inferred from the "
                              "data)");
    int64_t c = 0, total = ir_numel(x);
    for (int64_t i = 0; i < total; i++) c += nonzero_at(x, i);
    *count = c;
    return WPK_OK;
}

wpk_status op_nonzero_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                            ir_tensor *const *out) {
    int64_t count;
    wpk_status st = nonzero_count(ctx, n, in, &count);
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    int64_t dims[2] = {in[0]->ndim, count};
    op_set_shape(out[0], WPK_DTYPE_INT64, 2, dims);
    return WPK_OK;
}

wpk_status op_nonzero_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                          ir_tensor *const *out) {
    int64_t count;
    wpk_status st = nonzero_count(ctx, n, in, &count);
    if (st) return st;
    const ir_tensor *x = in[0];
    if (out[0]->dims[1] != count)
        return op_fail(ctx, n, "the input has %lld nonzero elements but the output was sized "
                       "for %lld", (long long)count, (long long)out[0]->dims[1]);
    int64_t *y = out[0]->data, total = ir_numel(x), k = 0, idx[WPK_MAX_DIMS] = {0};
    for (int64_t i = 0; i < total; i++) {
        if (nonzero_at(x, i)) {
            for (int d = 0; d < x->ndim; d++) y[d * count + k] = idx[d];
            k++;
        }
        for (int d = x->ndim - 1; d >= 0 && ++idx[d] == x->dims[d]; d--) idx[d] = 0;
    }
    return WPK_OK;
}
