/* mod.c -- Mod with numpy broadcasting: fmod=0 takes the divisor's sign (Python's %, numpy's
 * mod), fmod=1 the dividend's (C's fmod and %); integer and float types. */
#include "ops/broadcast.h"
#include "ops/op_util.h"

#include <math.h>

enum { M_F32, M_F64, M_I8, M_U8, M_I32, M_I64, M_COUNT };

static int mod_index(wpk_dtype t) {
    switch (t) {
    case WPK_DTYPE_FLOAT32: return M_F32;
    case WPK_DTYPE_FLOAT64: return M_F64;
    case WPK_DTYPE_INT8: return M_I8;
    case WPK_DTYPE_UINT8: return M_U8;
    case WPK_DTYPE_INT32: return M_I32;
    case WPK_DTYPE_INT64: return M_I64;
    default: return -1;
    }
}

wpk_status op_mod_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "A");
    if (!st) st = op_need_input(ctx, n, in, 1, "B");
    if (!st) st = op_need_output(ctx, n, out, 0);
    bool fmod_flag;
    if (!st) st = op_attr_flag(ctx, n, "fmod", &fmod_flag);
    if (st) return st;
    const ir_tensor *a = in[0], *b = in[1];
    if (a->dtype != b->dtype)
        return op_fail(ctx, n, "inputs have different dtypes, %s and %s",
                       wpk_dtype_name(a->dtype), wpk_dtype_name(b->dtype));
    if (mod_index(a->dtype) < 0)
        return op_unsupported(ctx, n, "inputs have dtype %s, which Mod does not support",
                              wpk_dtype_name(a->dtype));
    st = op_broadcast(ctx, n, a, b, out[0]);
    if (st) return st;
    out[0]->dtype = a->dtype;
    return WPK_OK;
}

/* numpy's floating mod: fmod, moved into the divisor's sign; a zero result takes the
 * divisor's sign too. Division by zero and an infinite dividend give NaN, as fmod does. */
static inline double floor_mod(double a, double b) {
    double r = fmod(a, b);
    if (b == 0) return r;
    if (r != 0) {
        if ((r < 0) != (b < 0)) r += b;
        return r;
    }
    return copysign(0.0, b);
}

static inline float floor_modf(float a, float b) {
    float r = fmodf(a, b);
    if (b == 0) return r;
    if (r != 0) {
        if ((r < 0) != (b < 0)) r += b;
        return r;
    }
    return copysignf(0.0f, b);
}

/* Integer remainders with a nonzero divisor (checked before the loop); x % -1 is 0 written
 * out, since INT_MIN % -1 traps on x86. */
#define TRUNC_MOD(x0, x1) ((x1) == -1 ? 0 : (x0) % (x1))
#define FLOOR_MOD_INT(T, x0, x1)                                                   \
    ((x1) == -1 ? (T)0                                                              \
                : (T)(((x0) % (x1) != 0 && (((x0) % (x1) < 0) != ((x1) < 0)))      \
                          ? (x0) % (x1) + (x1)                                     \
                          : (x0) % (x1)))

BCAST_BINARY_FN(fmod_f32, float, float, float, fmodf(x0, x1))
BCAST_BINARY_FN(fmod_f64, double, double, double, fmod(x0, x1))
BCAST_BINARY_FN(mod_f32, float, float, float, floor_modf(x0, x1))
BCAST_BINARY_FN(mod_f64, double, double, double, floor_mod(x0, x1))
#define DEF_MOD_INT(SUFFIX, T)                                                     \
    BCAST_BINARY_FN(fmod_##SUFFIX, T, T, T, (T)TRUNC_MOD(x0, x1))                  \
    BCAST_BINARY_FN(mod_##SUFFIX, T, T, T, FLOOR_MOD_INT(T, x0, x1))
DEF_MOD_INT(i8, int8_t)
DEF_MOD_INT(i32, int32_t)
DEF_MOD_INT(i64, int64_t)
/* unsigned: both rules agree */
BCAST_BINARY_FN(mod_u8, uint8_t, uint8_t, uint8_t, (uint8_t)(x0 % x1))

/* Indexed [fmod][dtype index]. */
static const bcast_run_fn mod_fns[2][M_COUNT] = {
    {mod_f32, mod_f64, mod_i8, mod_u8, mod_i32, mod_i64},
    {fmod_f32, fmod_f64, fmod_i8, mod_u8, fmod_i32, fmod_i64},
};

static bool has_zero(const ir_tensor *b) {
    int64_t count = ir_numel(b);
    for (int64_t i = 0; i < count; i++) {
        bool zero;
        switch (b->dtype) {
        case WPK_DTYPE_INT8: case WPK_DTYPE_UINT8: zero = ((const uint8_t *)b->data)[i] == 0; break;
        case WPK_DTYPE_INT32: zero = ((const int32_t *)b->data)[i] == 0; break;
        case WPK_DTYPE_INT64: zero = ((const int64_t *)b->data)[i] == 0; break;
        default: zero = false; break;
        }
        if (zero) return true;
    }
    return false;
}

wpk_status op_mod_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                      ir_tensor *const *out) {
    int t = mod_index(in[0]->dtype);
    if (t < 0 || in[1]->dtype != in[0]->dtype)
        return op_unsupported(ctx, n, "inputs have dtype %s", wpk_dtype_name(in[0]->dtype));
    bool fmod_flag;
    wpk_status st = op_attr_flag(ctx, n, "fmod", &fmod_flag);
    if (st) return st;
    if (t >= M_I8 && has_zero(in[1]))
        return op_fail(ctx, n, "integer modulo by zero (an element of B is 0)");
    op_bcast_apply((const ir_tensor *const *)in, 2, out[0], mod_fns[fmod_flag][t], NULL);
    return WPK_OK;
}
