/* where.c -- Where(condition, X, Y): X's element where condition holds, else Y's, with numpy
 * broadcasting of all three. A selection moves bytes, so one kernel per element size serves
 * every dtype. */
#include "ops/broadcast.h"
#include "ops/op_util.h"

#include <string.h>

wpk_status op_where_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                          ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "condition");
    if (!st) st = op_need_input(ctx, n, in, 1, "X");
    if (!st) st = op_need_input(ctx, n, in, 2, "Y");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    const ir_tensor *c = in[0], *x = in[1], *y = in[2];
    if (c->dtype != WPK_DTYPE_BOOL)
        return op_fail(ctx, n, "input 'condition' has dtype %s; it must be bool",
                       wpk_dtype_name(c->dtype));
    if (x->dtype != y->dtype)
        return op_fail(ctx, n, "inputs 'X' and 'Y' have different dtypes, %s and %s",
                       wpk_dtype_name(x->dtype), wpk_dtype_name(y->dtype));
    size_t es = wpk_dtype_size(x->dtype);
    if (es != 1 && es != 4 && es != 8)
        return op_unsupported(ctx, n, "inputs 'X' and 'Y' have dtype %s",
                              wpk_dtype_name(x->dtype));
    ir_tensor xy;
    memset(&xy, 0, sizeof xy);
    st = op_broadcast(ctx, n, x, y, &xy);
    if (!st) st = op_broadcast(ctx, n, c, &xy, out[0]);
    if (st) return st;
    out[0]->dtype = x->dtype;
    return WPK_OK;
}

#define DEF_SELECT(NAME, T)                                                        \
    static void NAME(const void *self, const char *const *src, const int64_t *step, \
                     char *dst, int64_t len) {                                     \
        (void)self;                                                                \
        const uint8_t *c = (const uint8_t *)src[0];                                \
        const T *x = (const T *)src[1], *y = (const T *)src[2];                    \
        T *out = (T *)dst;                                                         \
        if (step[0] && step[1] && step[2]) {                                       \
            _Pragma("omp simd")                                                    \
            for (int64_t i = 0; i < len; i++) out[i] = c[i] ? x[i] : y[i];         \
        } else {                                                                   \
            const int64_t sc = step[0], sx = step[1], sy = step[2];                \
            for (int64_t i = 0; i < len; i++)                                      \
                out[i] = c[i * sc] ? x[i * sx] : y[i * sy];                        \
        }                                                                          \
    }

DEF_SELECT(select_1, uint8_t)
DEF_SELECT(select_4, uint32_t)
DEF_SELECT(select_8, uint64_t)

wpk_status op_where_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out) {
    bcast_run_fn fn;
    switch (wpk_dtype_size(in[1]->dtype)) {
    case 1: fn = select_1; break;
    case 4: fn = select_4; break;
    case 8: fn = select_8; break;
    default:
        return op_unsupported(ctx, n, "inputs 'X' and 'Y' have dtype %s",
                              wpk_dtype_name(in[1]->dtype));
    }
    op_bcast_apply((const ir_tensor *const *)in, 3, out[0], fn, NULL);
    return WPK_OK;
}
