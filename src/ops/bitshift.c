/* bitshift.c -- BitShift (direction LEFT or RIGHT) on integer tensors with numpy broadcasting.
 * The shift amount counts as unsigned: one at or above the type's width (a negative amount
 * included) shifts every bit out, leaving 0, or for a right shift of a negative value -1. Left
 * shifts wrap; right shifts of signed values are arithmetic. */
#include "ops/broadcast.h"
#include "ops/op_util.h"

#include <string.h>

/* The direction attribute: *left true for LEFT, false for RIGHT; WPK_ERR_MODEL otherwise. */
static wpk_status read_direction(wpk_context *ctx, const ir_node *n, bool *left) {
    const ir_attr *a = ir_attr_find(n, "direction");
    if (!a) return op_fail(ctx, n, "attribute 'direction' is missing");
    if (a->kind != IR_ATTR_STRING || !a->s ||
        (strcmp(a->s, "LEFT") != 0 && strcmp(a->s, "RIGHT") != 0))
        return op_fail(ctx, n, "attribute 'direction' must be the string LEFT or RIGHT");
    *left = strcmp(a->s, "LEFT") == 0;
    return WPK_OK;
}

static bool shift_dtype_ok(wpk_dtype t) {
    return t == WPK_DTYPE_UINT8 || t == WPK_DTYPE_INT8 || t == WPK_DTYPE_INT32 ||
           t == WPK_DTYPE_INT64;
}

wpk_status op_bitshift_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "X");
    if (!st) st = op_need_input(ctx, n, in, 1, "Y");
    if (!st) st = op_need_output(ctx, n, out, 0);
    bool left;
    if (!st) st = read_direction(ctx, n, &left);
    if (st) return st;
    if (in[0]->dtype != in[1]->dtype)
        return op_fail(ctx, n, "inputs have different dtypes, %s and %s",
                       wpk_dtype_name(in[0]->dtype), wpk_dtype_name(in[1]->dtype));
    if (!shift_dtype_ok(in[0]->dtype))
        return op_unsupported(ctx, n, "inputs have dtype %s; BitShift supports uint8, int8, "
                              "int32 and int64", wpk_dtype_name(in[0]->dtype));
    st = op_broadcast(ctx, n, in[0], in[1], out[0]);
    if (st) return st;
    out[0]->dtype = in[0]->dtype;
    return WPK_OK;
}

/* Shifts in the unsigned type U of width W bits (the int promotion of narrow types is cut
 * back by the cast to T). */
#define SHL(T, U, W) ((U)x1 >= (W) ? (T)0 : (T)(U)((U)x0 << (U)x1))
#define SHR_SIGNED(T, U, W)                                                        \
    ((U)x1 >= (W) ? (T)(x0 < 0 ? -1 : 0)                                           \
                  : (T)(x0 < 0 ? ~(T)((T)~x0 >> (U)x1) : (T)(x0 >> (U)x1)))
#define SHR_UNSIGNED(T, W) ((T)x1 >= (W) ? (T)0 : (T)(x0 >> x1))

BCAST_BINARY_FN(shl_u8, uint8_t, uint8_t, uint8_t, SHL(uint8_t, uint8_t, 8))
BCAST_BINARY_FN(shr_u8, uint8_t, uint8_t, uint8_t, SHR_UNSIGNED(uint8_t, 8))
BCAST_BINARY_FN(shl_i8, int8_t, int8_t, int8_t, SHL(int8_t, uint8_t, 8))
BCAST_BINARY_FN(shr_i8, int8_t, int8_t, int8_t, SHR_SIGNED(int8_t, uint8_t, 8))
BCAST_BINARY_FN(shl_i32, int32_t, int32_t, int32_t, SHL(int32_t, uint32_t, 32))
BCAST_BINARY_FN(shr_i32, int32_t, int32_t, int32_t, SHR_SIGNED(int32_t, uint32_t, 32))
BCAST_BINARY_FN(shl_i64, int64_t, int64_t, int64_t, SHL(int64_t, uint64_t, 64))
BCAST_BINARY_FN(shr_i64, int64_t, int64_t, int64_t, SHR_SIGNED(int64_t, uint64_t, 64))

wpk_status op_bitshift_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                           ir_tensor *const *out) {
    bool left;
    wpk_status st = read_direction(ctx, n, &left);
    if (st) return st;
    if (in[1]->dtype != in[0]->dtype)
        return op_fail(ctx, n, "inputs have different dtypes, %s and %s",
                       wpk_dtype_name(in[0]->dtype), wpk_dtype_name(in[1]->dtype));
    bcast_run_fn fn;
    switch (in[0]->dtype) {
    case WPK_DTYPE_UINT8: fn = left ? shl_u8 : shr_u8; break;
    case WPK_DTYPE_INT8: fn = left ? shl_i8 : shr_i8; break;
    case WPK_DTYPE_INT32: fn = left ? shl_i32 : shr_i32; break;
    case WPK_DTYPE_INT64: fn = left ? shl_i64 : shr_i64; break;
    default:
        return op_unsupported(ctx, n, "inputs have dtype %s", wpk_dtype_name(in[0]->dtype));
    }
    op_bcast_apply((const ir_tensor *const *)in, 2, out[0], fn, NULL);
    return WPK_OK;
}
