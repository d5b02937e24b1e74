/* compare.c -- comparison and logic ops with numpy broadcasting: Equal, Less, Greater,
 * LessOrEqual, GreaterOrEqual (numeric or bool inputs of one dtype) and And, Or, Xor, Not
 * (bool). Every output is bool. */
#include "ops/broadcast.h"
#include "ops/op_util.h"

#include <stdbool.h>

/* The dtypes the comparison kernels are generated for, in the order of their table. */
enum { C_F32, C_F64, C_I8, C_U8, C_I32, C_I64, C_BOOL, C_COUNT };

static int cmp_index(wpk_dtype t) {
    switch (t) {
    case WPK_DTYPE_FLOAT32: return C_F32;
    case WPK_DTYPE_FLOAT64: return C_F64;
    case WPK_DTYPE_INT8: return C_I8;
    case WPK_DTYPE_UINT8: return C_U8;
    case WPK_DTYPE_INT32: return C_I32;
    case WPK_DTYPE_INT64: return C_I64;
    case WPK_DTYPE_BOOL: return C_BOOL;
    default: return -1;
    }
}

static bool is_logic(ir_op op) {
    return op == IR_OP_AND || op == IR_OP_OR || op == IR_OP_XOR || op == IR_OP_NOT;
}

wpk_status op_compare_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                            ir_tensor *const *out) {
    int nin = n->op == IR_OP_NOT ? 1 : 2;
    wpk_status st = op_need_input(ctx, n, in, 0, nin == 1 ? "X" : "A");
    if (!st && nin == 2) st = op_need_input(ctx, n, in, 1, "B");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    if (n->nin > nin) return op_fail(ctx, n, "takes %d input(s), but has %d", nin, n->nin);
    const ir_tensor *a = in[0], *b = nin == 2 ? in[1] : in[0];
    if (is_logic(n->op)) {
        for (int i = 0; i < nin; i++)
            if (in[i]->dtype != WPK_DTYPE_BOOL)
                return op_fail(ctx, n, "input %d has dtype %s; %s takes bool tensors", i,
                               wpk_dtype_name(in[i]->dtype), n->op_type);
    } else {
        if (a->dtype != b->dtype)
            return op_fail(ctx, n, "inputs have different dtypes, %s and %s",
                           wpk_dtype_name(a->dtype), wpk_dtype_name(b->dtype));
        if (cmp_index(a->dtype) < 0)
            return op_unsupported(ctx, n, "inputs have dtype %s, which %s does not support",
                                  wpk_dtype_name(a->dtype), n->op_type);
    }
    if (nin == 2) {
        st = op_broadcast(ctx, n, a, b, out[0]);
        if (st) return st;
        out[0]->dtype = WPK_DTYPE_BOOL;
    } else {
        op_set_shape(out[0], WPK_DTYPE_BOOL, a->ndim, a->dims);
    }
    return WPK_OK;
}

/* A bool byte other than 0 is true, whatever its value; the outputs are 0 or 1. */
#define B(v) ((v) != 0)

#define DEF_CMP(SUFFIX, T)                                                         \
    BCAST_BINARY_FN(eq_##SUFFIX, T, T, uint8_t, x0 == x1)                          \
    BCAST_BINARY_FN(lt_##SUFFIX, T, T, uint8_t, x0 < x1)                           \
    BCAST_BINARY_FN(gt_##SUFFIX, T, T, uint8_t, x0 > x1)                           \
    BCAST_BINARY_FN(le_##SUFFIX, T, T, uint8_t, x0 <= x1)                          \
    BCAST_BINARY_FN(ge_##SUFFIX, T, T, uint8_t, x0 >= x1)

DEF_CMP(f32, float)
DEF_CMP(f64, double)
DEF_CMP(i8, int8_t)
DEF_CMP(u8, uint8_t)
DEF_CMP(i32, int32_t)
DEF_CMP(i64, int64_t)
BCAST_BINARY_FN(eq_b, uint8_t, uint8_t, uint8_t, B(x0) == B(x1))
BCAST_BINARY_FN(lt_b, uint8_t, uint8_t, uint8_t, B(x0) < B(x1))
BCAST_BINARY_FN(gt_b, uint8_t, uint8_t, uint8_t, B(x0) > B(x1))
BCAST_BINARY_FN(le_b, uint8_t, uint8_t, uint8_t, B(x0) <= B(x1))
BCAST_BINARY_FN(ge_b, uint8_t, uint8_t, uint8_t, B(x0) >= B(x1))
BCAST_BINARY_FN(and_b, uint8_t, uint8_t, uint8_t, B(x0) & B(x1))
BCAST_BINARY_FN(or_b, uint8_t, uint8_t, uint8_t, B(x0) | B(x1))
BCAST_BINARY_FN(xor_b, uint8_t, uint8_t, uint8_t, B(x0) ^ B(x1))

/* Indexed [op - IR_OP_EQUAL][dtype index]. */
_Static_assert(IR_OP_LESS == IR_OP_EQUAL + 1 && IR_OP_GREATER == IR_OP_EQUAL + 2 &&
               IR_OP_LESS_OR_EQUAL == IR_OP_EQUAL + 3 &&
               IR_OP_GREATER_OR_EQUAL == IR_OP_EQUAL + 4,
               "ops.def must keep Equal, Less, Greater, LessOrEqual, GreaterOrEqual in order");
static const bcast_run_fn cmp_fns[5][C_COUNT] = {
    {eq_f32, eq_f64, eq_i8, eq_u8, eq_i32, eq_i64, eq_b},
    {lt_f32, lt_f64, lt_i8, lt_u8, lt_i32, lt_i64, lt_b},
    {gt_f32, gt_f64, gt_i8, gt_u8, gt_i32, gt_i64, gt_b},
    {le_f32, le_f64, le_i8, le_u8, le_i32, le_i64, le_b},
    {ge_f32, ge_f64, ge_i8, ge_u8, ge_i32, ge_i64, ge_b},
};

static void not_run(const void *self, const char *const *src, const int64_t *step, char *dst,
                    int64_t len) {
    (void)self;
    const uint8_t *x = (const uint8_t *)src[0];
    uint8_t *y = (uint8_t *)dst;
    if (step[0]) {
#pragma omp simd
        for (int64_t i = 0; i < len; i++) y[i] = !x[i];
    } else {
        for (int64_t i = 0; i < len; i++) y[i] = !x[0];
    }
}

wpk_status op_compare_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                          ir_tensor *const *out) {
    bcast_run_fn fn;
    int nin = 2;
    switch (n->op) {
    case IR_OP_AND: fn = and_b; break;
    case IR_OP_OR: fn = or_b; break;
    case IR_OP_XOR: fn = xor_b; break;
    case IR_OP_NOT: fn = not_run; nin = 1; break;
    default: {
        int t = cmp_index(in[0]->dtype);
        if (n->op < IR_OP_EQUAL || n->op > IR_OP_GREATER_OR_EQUAL || t < 0 ||
            in[1]->dtype != in[0]->dtype)
            return op_unsupported(ctx, n, "no comparison kernel for dtype %s",
                                  wpk_dtype_name(in[0]->dtype));
        fn = cmp_fns[n->op - IR_OP_EQUAL][t];
    }
    }
    if (is_logic(n->op))
        for (int i = 0; i < nin; i++)
            if (in[i]->dtype != WPK_DTYPE_BOOL)
                return op_fail(ctx, n, "input %d has dtype %s; %s takes bool tensors", i,
                               wpk_dtype_name(in[i]->dtype), n->op_type);
    op_bcast_apply((const ir_tensor *const *)in, nin, out[0], fn, NULL);
    return WPK_OK;
}
