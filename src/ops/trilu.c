/* trilu.c -- Trilu: the upper or lower triangle (from diagonal k) of each matrix in the last
 * two dims kept, the rest zeroed. Bytes are copied and zeroed, so every dtype runs. */
#include "ops/op_util.h"

#include <string.h>

#define PAR_MIN_BYTES (1 << 20)

static wpk_status trilu_read(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             bool *upper, int64_t *k) {
    wpk_status st = op_need_input(ctx, n, in, 0, "input");
    if (!st) st = op_attr_flag(ctx, n, "upper", upper);
    if (st) return st;
    /* the attribute's default is 1 (upper) */
    if (!ir_attr_find(n, "upper")) *upper = true;
    const ir_tensor *x = in[0];
    if (!wpk_dtype_size(x->dtype))
        return op_unsupported(ctx, n, "dtype %d is not supported", (int)x->dtype);
    if (x->ndim < 2) return op_fail(ctx, n, "the input has %d dims; it needs at least 2", x->ndim);
    *k = 0;
    if (n->nin > 1 && in[1]) {
        st = op_need_data(ctx, n, in, 1, "k");
        if (st) return st;
        if (in[1]->dtype != WPK_DTYPE_INT64 || ir_numel(in[1]) != 1)
            return op_fail(ctx, n, "input 'k' must be an int64 scalar (%s, %lld elements)",
                           wpk_dtype_name(in[1]->dtype), (long long)ir_numel(in[1]));
        *k = op_int_at(in[1], 0);
    }
    return WPK_OK;
}

wpk_status op_trilu_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                          ir_tensor *const *out) {
    bool upper;
    int64_t k;
    wpk_status st = trilu_read(ctx, n, in, &upper, &k);
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    op_set_shape(out[0], in[0]->dtype, in[0]->ndim, in[0]->dims);
    return WPK_OK;
}

/* Row i of a matrix: columns [lo, hi) are kept (j - i >= k upper, j - i <= k lower). */
static void trilu_row(const char *src, char *dst, size_t es, int64_t rows, int64_t cols,
                      bool upper, int64_t k, int64_t r) {
    int64_t i = r % rows, lo = upper ? i + k : 0, hi = upper ? cols : i + k + 1;
    lo = lo < 0 ? 0 : lo > cols ? cols : lo;
    hi = hi < lo ? lo : hi > cols ? cols : hi;
    size_t row = (size_t)cols * es;
    const char *s = src + (size_t)r * row;
    char *d = dst + (size_t)r * row;
    memset(d, 0, (size_t)lo * es);
    if (d != s) memcpy(d + (size_t)lo * es, s + (size_t)lo * es, (size_t)(hi - lo) * es);
    memset(d + (size_t)hi * es, 0, (size_t)(cols - hi) * es);
}

wpk_status op_trilu_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out) {
    bool upper;
    int64_t k;
    wpk_status st = trilu_read(ctx, n, in, &upper, &k);
    if (st) return st;
    const ir_tensor *x = in[0];
    int64_t total = ir_numel(x), rows = x->dims[x->ndim - 2], cols = x->dims[x->ndim - 1];
    if (total == 0) return WPK_OK;
    size_t es = wpk_dtype_size(x->dtype);
    int64_t all_rows = total / cols;
    const char *src = x->data;
    char *dst = out[0]->data;
    if (op_parallel(total * (int64_t)es, PAR_MIN_BYTES)) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < all_rows; r++) trilu_row(src, dst, es, rows, cols, upper, k, r);
    } else {
        for (int64_t r = 0; r < all_rows; r++) trilu_row(src, dst, es, rows, cols, upper, k, r);
    }
    return WPK_OK;
}
