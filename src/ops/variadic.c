/* variadic.c -- Min, Max, Sum and Mean of one or more inputs, broadcast together (numpy rules):
 * folded pairwise into the output, input by input. */
#include "ops/broadcast.h"
#include "ops/op_util.h"

#include <stdio.h>
#include <string.h>

/* The dtypes the kernels are generated for, in the order of their tables. */
enum { V_F32, V_F64, V_I8, V_U8, V_I32, V_I64, V_COUNT };

static int var_index(wpk_dtype t) {
    switch (t) {
    case WPK_DTYPE_FLOAT32: return V_F32;
    case WPK_DTYPE_FLOAT64: return V_F64;
    case WPK_DTYPE_INT8: return V_I8;
    case WPK_DTYPE_UINT8: return V_U8;
    case WPK_DTYPE_INT32: return V_I32;
    case WPK_DTYPE_INT64: return V_I64;
    default: return -1;
    }
}

/* Sum and Mean are defined on float types only; Min and Max on every numeric type. */
static bool float_only(ir_op op) { return op == IR_OP_SUM || op == IR_OP_MEAN; }

wpk_status op_variadic_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             ir_tensor *const *out) {
    if (n->nin < 1) return op_fail(ctx, n, "takes at least one input, but has none");
    wpk_status st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    ir_tensor acc;
    memset(&acc, 0, sizeof acc);
    for (int i = 0; i < n->nin; i++) {
        char what[24];
        snprintf(what, sizeof what, "data_%d", i);
        st = op_need_input(ctx, n, in, i, what);
        if (st) return st;
        if (in[i]->dtype != in[0]->dtype)
            return op_fail(ctx, n, "input %d has dtype %s but input 0 has %s", i,
                           wpk_dtype_name(in[i]->dtype), wpk_dtype_name(in[0]->dtype));
        if (i == 0) {
            op_set_shape(&acc, in[0]->dtype, in[0]->ndim, in[0]->dims);
            continue;
        }
        ir_tensor next;
        memset(&next, 0, sizeof next);
        st = op_broadcast(ctx, n, &acc, in[i], &next);
        if (st) return st;
        acc.ndim = next.ndim;
        memcpy(acc.dims, next.dims, sizeof next.dims);
    }
    int t = var_index(in[0]->dtype);
    if (t < 0 || (float_only(n->op) && t != V_F32 && t != V_F64))
        return op_unsupported(ctx, n, "inputs have dtype %s; %s supports %s",
                              wpk_dtype_name(in[0]->dtype), n->op_type,
                              float_only(n->op) ? "float32 and float64"
                                                : "float32, float64, int8, uint8, int32, int64");
    op_set_shape(out[0], in[0]->dtype, acc.ndim, acc.dims);
    return WPK_OK;
}

/* Max and Min propagate NaN, as numpy's maximum/minimum (the ONNX reference) do. */
#define MAX_OF(a, b) ((a) > (b) || (a) != (a) ? (a) : (b))
#define MIN_OF(a, b) ((a) < (b) || (a) != (a) ? (a) : (b))

#define DEF_MINMAX(SUFFIX, T)                                                      \
    BCAST_BINARY_FN(max_##SUFFIX, T, T, T, MAX_OF(x0, x1))                         \
    BCAST_BINARY_FN(min_##SUFFIX, T, T, T, MIN_OF(x0, x1))

DEF_MINMAX(f32, float)
DEF_MINMAX(f64, double)
DEF_MINMAX(i8, int8_t)
DEF_MINMAX(u8, uint8_t)
DEF_MINMAX(i32, int32_t)
DEF_MINMAX(i64, int64_t)
BCAST_BINARY_FN(sum_f32, float, float, float, x0 + x1)
BCAST_BINARY_FN(sum_f64, double, double, double, x0 + x1)

static const bcast_run_fn max_fns[V_COUNT] = {max_f32, max_f64, max_i8, max_u8, max_i32, max_i64};
static const bcast_run_fn min_fns[V_COUNT] = {min_f32, min_f64, min_i8, min_u8, min_i32, min_i64};

/* The same-shape copy of a single input. */
static void copy_run(const void *self, const char *const *src, const int64_t *step, char *dst,
                     int64_t len) {
    size_t es = *(const size_t *)self;
    if (step[0]) {
        if (dst != src[0]) memcpy(dst, src[0], (size_t)len * es);
    } else {
        for (int64_t i = 0; i < len; i++) memcpy(dst + (size_t)i * es, src[0], es);
    }
}

wpk_status op_variadic_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                           ir_tensor *const *out) {
    ir_tensor *y = out[0];
    int t = var_index(in[0]->dtype);
    if (t < 0 || (float_only(n->op) && t != V_F32 && t != V_F64))
        return op_unsupported(ctx, n, "inputs have dtype %s", wpk_dtype_name(in[0]->dtype));
    bcast_run_fn fn;
    switch (n->op) {
    case IR_OP_MAX: fn = max_fns[t]; break;
    case IR_OP_MIN: fn = min_fns[t]; break;
    case IR_OP_SUM: case IR_OP_MEAN: fn = t == V_F32 ? sum_f32 : sum_f64; break;
    default: return op_unsupported(ctx, n, "no variadic kernel for this op");
    }
    if (n->nin == 1) {
        size_t es = wpk_dtype_size(y->dtype);
        op_bcast_apply((const ir_tensor *const *)in, 1, y, copy_run, &es);
        return WPK_OK;
    }
    /* y = f(x0, x1), then y = f(y, xk): y has the final shape throughout, so each step reads
     * y whole and only xk broadcasts. */
    const ir_tensor *pair[2] = {in[0], in[1]};
    op_bcast_apply(pair, 2, y, fn, NULL);
    for (int k = 2; k < n->nin; k++) {
        pair[0] = y;
        pair[1] = in[k];
        op_bcast_apply(pair, 2, y, fn, NULL);
    }
    if (n->op == IR_OP_MEAN) {
        int64_t count = ir_numel(y);
        if (t == V_F32) {
            float *v = y->data, k = (float)n->nin;
            for (int64_t i = 0; i < count; i++) v[i] /= k;
        } else {
            double *v = y->data, k = (double)n->nin;
            for (int64_t i = 0; i < count; i++) v[i] /= k;
        }
    }
    return WPK_OK;
}
