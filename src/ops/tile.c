/* tile.c -- Tile: the input repeated along every dim as many times as 'repeats' says. Rows of
 * the last dim are copied whole, so every dtype runs. */
#include "ops/op_util.h"

#include <string.h>

#define PAR_MIN_BYTES (1 << 20)

static wpk_status tile_repeats(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                               int64_t *rep) {
    wpk_status st = op_need_input(ctx, n, in, 0, "input");
    if (!st) st = op_need_data(ctx, n, in, 1, "repeats");
    if (st) return st;
    const ir_tensor *x = in[0];
    if (!wpk_dtype_size(x->dtype))
        return op_unsupported(ctx, n, "dtype %d is not supported", (int)x->dtype);
    int count;
    st = op_read_ints(ctx, n, in[1], rep, WPK_MAX_DIMS, &count, "repeats");
    if (st) return st;
    if (in[1]->ndim != 1 || count != x->ndim)
        return op_fail(ctx, n, "input 'repeats' has %d values; it must be 1-D with one value per "
                       "input dim (%d)", count, x->ndim);
    for (int i = 0; i < count; i++)
        if (rep[i] < 0)
            return op_fail(ctx, n, "input 'repeats' has the negative value %lld at index %d",
                           (long long)rep[i], i);
    return WPK_OK;
}

wpk_status op_tile_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out) {
    int64_t rep[WPK_MAX_DIMS], dims[WPK_MAX_DIMS];
    wpk_status st = tile_repeats(ctx, n, in, rep);
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    const ir_tensor *x = in[0];
    for (int i = 0; i < x->ndim; i++) dims[i] = x->dims[i] < 0 ? -1 : x->dims[i] * rep[i];
    op_set_shape(out[0], x->dtype, x->ndim, dims);
    return WPK_OK;
}

typedef struct tile_job {
    const ir_tensor *x, *y;
    int64_t in_strides[WPK_MAX_DIMS];
    size_t es;
} tile_job;

/* Output row r (rows of the last dim): the matching input row, repeated. */
static void tile_row(const tile_job *j, int64_t r) {
    const ir_tensor *x = j->x, *y = j->y;
    int last = x->ndim - 1;
    int64_t off = 0, rem = r;
    for (int k = last - 1; k >= 0; k--) {
        off += (rem % y->dims[k]) % x->dims[k] * j->in_strides[k];
        rem /= y->dims[k];
    }
    size_t row = (size_t)x->dims[last] * j->es;
    const char *src = (const char *)x->data + (size_t)off * j->es;
    char *dst = (char *)y->data + (size_t)(r * y->dims[last]) * j->es;
    for (int64_t t = 0; t < y->dims[last] / x->dims[last]; t++) memcpy(dst + t * row, src, row);
}

wpk_status op_tile_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                       ir_tensor *const *out) {
    int64_t rep[WPK_MAX_DIMS];
    wpk_status st = tile_repeats(ctx, n, in, rep);
    if (st) return st;
    const ir_tensor *x = in[0], *y = out[0];
    size_t es = wpk_dtype_size(x->dtype);
    int64_t total = ir_numel(y);
    if (total == 0) return WPK_OK;
    if (x->ndim == 0) {
        memcpy(y->data, x->data, es);
        return WPK_OK;
    }
    tile_job j = {.x = x, .y = y, .es = es};
    int64_t s = 1;
    for (int k = x->ndim - 1; k >= 0; k--) {
        j.in_strides[k] = s;
        s *= x->dims[k];
    }
    int64_t rows = total / y->dims[x->ndim - 1];
    if (op_parallel(total * (int64_t)es, PAR_MIN_BYTES)) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++) tile_row(&j, r);
    } else {
        for (int64_t r = 0; r < rows; r++) tile_row(&j, r);
    }
    return WPK_OK;
}
