/* elementwise.c -- elementwise ops: unary activations and math (Relu ... Reciprocal), Clip,
 * broadcasting binary arithmetic (Add, Sub, Mul, Div, Pow) and Cast. */
#include "base/half.h"
#include "ops/activation.h"
#include "ops/op_util.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* Loops over fewer elements than this run on one thread: below it, waking the pool costs more
 * than the work. The loops are `simd`: an output aliases its input only element for element
 * (in place). */
#define PAR_MIN 32768

static const ir_tensor *opt_input(const ir_node *n, ir_tensor *const *in, int i) {
    return i < n->nin ? in[i] : NULL;
}

static bool is_signed_int(wpk_dtype t) {
    return t == WPK_DTYPE_INT8 || t == WPK_DTYPE_INT32 || t == WPK_DTYPE_INT64;
}

/* The dtypes the arithmetic kernels are generated for, in the order of their tables. */
enum { T_F32, T_F64, T_I8, T_U8, T_I32, T_I64, T_COUNT };

static int arith_index(wpk_dtype t) {
    switch (t) {
    case WPK_DTYPE_FLOAT32: return T_F32;
    case WPK_DTYPE_FLOAT64: return T_F64;
    case WPK_DTYPE_INT8: return T_I8;
    case WPK_DTYPE_UINT8: return T_U8;
    case WPK_DTYPE_INT32: return T_I32;
    case WPK_DTYPE_INT64: return T_I64;
    default: return -1;
    }
}

/* ---- unary ---- */

/* Clip's bounds must be one-element tensors of the input's dtype; Clip runs on every numeric
 * dtype we have. */
static wpk_status clip_check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in) {
    const ir_tensor *x = in[0];
    if (arith_index(x->dtype) < 0)
        return op_unsupported(ctx, n, "input has dtype %s, which Clip does not support",
                              wpk_dtype_name(x->dtype));
    static const char *const names[3] = {"input", "min", "max"};
    for (int i = 1; i <= 2; i++) {
        const ir_tensor *b = opt_input(n, in, i);
        if (!b) continue;
        if (b->dtype != x->dtype)
            return op_fail(ctx, n, "input '%s' has dtype %s but the input has %s", names[i],
                           wpk_dtype_name(b->dtype), wpk_dtype_name(x->dtype));
        if (ir_numel(b) != 1)
            return op_fail(ctx, n, "input '%s' must be a scalar, but has %lld elements",
                           names[i], (long long)ir_numel(b));
    }
    return WPK_OK;
}

wpk_status op_unary_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                          ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "X");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    const ir_tensor *x = in[0];
    if (n->op == IR_OP_CLIP) {
        st = clip_check(ctx, n, in);
        if (st) return st;
    } else if (x->dtype != WPK_DTYPE_FLOAT32) {
        bool int_ok = n->op == IR_OP_RELU || n->op == IR_OP_NEG || n->op == IR_OP_ABS;
        if (!(int_ok && is_signed_int(x->dtype)))
            return op_unsupported(ctx, n, "input has dtype %s; only float32%s is supported",
                                  wpk_dtype_name(x->dtype),
                                  int_ok ? ", int8, int32 and int64" : "");
    }
    if (n->op == IR_OP_GELU) {
        const char *approx = ir_attr_str(n, "approximate", "none");
        if (strcmp(approx, "none") != 0 && strcmp(approx, "tanh") != 0)
            return op_fail(ctx, n, "attribute 'approximate' is '%s'; it must be 'none' or "
                           "'tanh'", approx);
    }
    op_set_shape(out[0], x->dtype, x->ndim, x->dims);
    return WPK_OK;
}

/* ---- element ranges ---- */

/* The unary, Clip and Cast kernels: elements [i0, i1) of node n. False when there is no
 * kernel for the node (then nothing is written; an empty range asks just that). */
typedef bool (*range_fn)(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out,
                         int64_t i0, int64_t i1);

/* fn over the `count` elements of out[0]: in blocks spread over the threads when there are
 * enough, else as one range on this thread (no OpenMP region: see op_parallel). Checks first,
 * with an empty range, that fn has a kernel for n; false (nothing run) when it has none. */
static bool run_ranges(range_fn fn, const ir_node *n, ir_tensor *const *in,
                       ir_tensor *const *out, int64_t count) {
    if (!fn(n, in, out, 0, 0)) return false;
    const int64_t block = 16384, nblock = (count + block - 1) / block;
    if (op_parallel(count, PAR_MIN)) {
#pragma omp parallel for schedule(static)
        for (int64_t b = 0; b < nblock; b++)
            fn(n, in, out, b * block, b == nblock - 1 ? count : (b + 1) * block);
    } else {
        fn(n, in, out, 0, count);
    }
    return true;
}

/* y = EXPR(v) for each element v of x in [i0, i1). */
#define MAP(T, EXPR)                                                               \
    do {                                                                           \
        const T *x_ = in[0]->data;                                                 \
        T *y_ = out[0]->data;                                                      \
        _Pragma("omp simd")                                                        \
        for (int64_t i = i0; i < i1; i++) {                                        \
            T v = x_[i];                                                           \
            y_[i] = (EXPR);                                                        \
        }                                                                          \
    } while (0)

static bool unary_f32(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out, int64_t i0,
                      int64_t i1) {
    switch (n->op) {
    case IR_OP_RELU: MAP(float, act_relu(v)); break;
    case IR_OP_LEAKY_RELU: {
        float alpha = ir_attr_float(n, "alpha", 0.01f);
        MAP(float, act_leaky_relu(v, alpha));
        break;
    }
    case IR_OP_SIGMOID: MAP(float, act_sigmoid(v)); break;
    case IR_OP_HARD_SIGMOID: {
        float alpha = ir_attr_float(n, "alpha", 0.2f), beta = ir_attr_float(n, "beta", 0.5f);
        MAP(float, act_hard_sigmoid(v, alpha, beta));
        break;
    }
    case IR_OP_HARD_SWISH: MAP(float, act_hard_swish(v)); break;
    case IR_OP_TANH: MAP(float, tanhf(v)); break;
    case IR_OP_ERF: MAP(float, erff(v)); break;
    case IR_OP_GELU:
        if (strcmp(ir_attr_str(n, "approximate", "none"), "tanh") == 0)
            MAP(float, act_gelu_tanh(v));
        else
            MAP(float, act_gelu(v));
        break;
    case IR_OP_SQRT: MAP(float, sqrtf(v)); break;
    case IR_OP_EXP: MAP(float, expf(v)); break;
    case IR_OP_LOG: MAP(float, logf(v)); break;
    case IR_OP_NEG: MAP(float, -v); break;
    case IR_OP_ABS: MAP(float, fabsf(v)); break;
    case IR_OP_RECIPROCAL: MAP(float, 1.0f / v); break;
    default: return false;
    }
    return true;
}

/* Negation and absolute value through the unsigned type, so the most negative value wraps
 * (as in two's complement hardware and ONNX Runtime) instead of being undefined behaviour. */
#define UNARY_INT(T, U)                                                            \
    switch (n->op) {                                                               \
    case IR_OP_RELU: MAP(T, v < 0 ? (T)0 : v); break;                              \
    case IR_OP_NEG: MAP(T, (T)((U)0 - (U)v)); break;                               \
    case IR_OP_ABS: MAP(T, v < 0 ? (T)((U)0 - (U)v) : v); break;                   \
    default: return false;                                                         \
    }

static bool unary_int(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out, int64_t i0,
                      int64_t i1) {
    switch (in[0]->dtype) {
    case WPK_DTYPE_INT8: UNARY_INT(int8_t, uint8_t) break;
    case WPK_DTYPE_INT32: UNARY_INT(int32_t, uint32_t) break;
    case WPK_DTYPE_INT64: UNARY_INT(int64_t, uint64_t) break;
    default: return false;
    }
    return true;
}

wpk_status op_unary_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out) {
    int64_t count = ir_numel(out[0]);
    if (count == 0) return WPK_OK;
    wpk_dtype dt = in[0]->dtype;
    if (dt != WPK_DTYPE_FLOAT32 && !is_signed_int(dt))
        return op_unsupported(ctx, n, "input has dtype %s", wpk_dtype_name(dt));
    bool f32 = dt == WPK_DTYPE_FLOAT32;
    if (!run_ranges(f32 ? unary_f32 : unary_int, n, in, out, count))
        return op_unsupported(ctx, n, f32 ? "no unary kernel for this op"
                                          : "no integer kernel for this op");
    return WPK_OK;
}

/* Clip: Min(max, Max(x, min)), so max wins when min > max (as the spec says); comparisons
 * rather than fminf/fmaxf so a NaN input stays NaN. Absent bounds are the type's lowest and
 * highest values, as the spec defines them. */
#define CLIP(T, LOWEST, HIGHEST)                                                   \
    do {                                                                           \
        T lo = mn ? *(const T *)mn->data : (LOWEST);                               \
        T hi = mx ? *(const T *)mx->data : (HIGHEST);                              \
        MAP(T, v < lo ? (lo > hi ? hi : lo) : (v > hi ? hi : v));                  \
    } while (0)

static bool clip_range(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out,
                       int64_t i0, int64_t i1) {
    const ir_tensor *mn = opt_input(n, in, 1), *mx = opt_input(n, in, 2);
    switch (in[0]->dtype) {
    case WPK_DTYPE_FLOAT32: CLIP(float, -FLT_MAX, FLT_MAX); break;
    case WPK_DTYPE_FLOAT64: CLIP(double, -DBL_MAX, DBL_MAX); break;
    case WPK_DTYPE_INT8: CLIP(int8_t, INT8_MIN, INT8_MAX); break;
    case WPK_DTYPE_UINT8: CLIP(uint8_t, 0, UINT8_MAX); break;
    case WPK_DTYPE_INT32: CLIP(int32_t, INT32_MIN, INT32_MAX); break;
    case WPK_DTYPE_INT64: CLIP(int64_t, INT64_MIN, INT64_MAX); break;
    default: return false;
    }
    return true;
}

wpk_status op_clip_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                       ir_tensor *const *out) {
    const ir_tensor *mn = opt_input(n, in, 1), *mx = opt_input(n, in, 2);
    if ((mn && !mn->data) || (mx && !mx->data))
        return op_fail(ctx, n, "input 'min' or 'max' has no data");
    int64_t count = ir_numel(out[0]);
    if (count == 0) return WPK_OK;
    if (!run_ranges(clip_range, n, in, out, count))
        return op_unsupported(ctx, n, "input has dtype %s", wpk_dtype_name(in[0]->dtype));
    return WPK_OK;
}

/* ---- binary, with numpy broadcasting ---- */

wpk_status op_binary_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                           ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "A");
    if (!st) st = op_need_input(ctx, n, in, 1, "B");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    const ir_tensor *a = in[0], *b = in[1];
    if (n->op == IR_OP_POW) {
        /* Pow's exponent may have another numeric type than its base (opset 12+). */
        if (a->dtype != WPK_DTYPE_FLOAT32 && a->dtype != WPK_DTYPE_FLOAT64 &&
            a->dtype != WPK_DTYPE_INT32 && a->dtype != WPK_DTYPE_INT64)
            return op_unsupported(ctx, n, "base X has dtype %s; float32, float64, int32 and "
                                  "int64 are supported", wpk_dtype_name(a->dtype));
        if (arith_index(b->dtype) < 0)
            return op_unsupported(ctx, n, "exponent Y has dtype %s, which is not supported",
                                  wpk_dtype_name(b->dtype));
    } else {
        if (a->dtype != b->dtype)
            return op_fail(ctx, n, "inputs have different dtypes: A is %s and B is %s",
                           wpk_dtype_name(a->dtype), wpk_dtype_name(b->dtype));
        if (arith_index(a->dtype) < 0)
            return op_unsupported(ctx, n, "inputs have dtype %s, which is not supported",
                                  wpk_dtype_name(a->dtype));
    }
    st = op_broadcast(ctx, n, a, b, out[0]);
    if (st) return st;
    out[0]->dtype = a->dtype;
    return WPK_OK;
}

/* One run of a binary op: y[i] = f(a[i * sa], b[i * sb]) for i < len, where sa and sb are 0
 * (that side is broadcast along the run) or 1. The pointers are already at the run's start. */
typedef void (*bin_fn)(const void *a, int64_t sa, const void *b, int64_t sb, void *y,
                       int64_t len);

/* The four stride cases get a loop each so the compiler vectorizes the common ones (same
 * shape, one side scalar or per-channel) without a multiply per element. `omp simd` asserts
 * what the compiler cannot prove: y only ever aliases an input element for element (in-place),
 * which vector code handles like scalar code. */
#define DEF_BIN(NAME, TA, TB, TY, EXPR)                                            \
    static void NAME(const void *av, int64_t sa, const void *bv, int64_t sb, void *yv, \
                     int64_t len) {                                                \
        const TA *a = av;                                                          \
        const TB *b = bv;                                                          \
        TY *y = yv;                                                                \
        if (sa && sb) {                                                            \
            _Pragma("omp simd")                                                    \
            for (int64_t i = 0; i < len; i++) {                                    \
                TA x0 = a[i];                                                      \
                TB x1 = b[i];                                                      \
                y[i] = (EXPR);                                                     \
            }                                                                      \
        } else if (sa) {                                                           \
            TB x1 = b[0];                                                          \
            _Pragma("omp simd")                                                    \
            for (int64_t i = 0; i < len; i++) {                                    \
                TA x0 = a[i];                                                      \
                y[i] = (EXPR);                                                     \
            }                                                                      \
        } else if (sb) {                                                           \
            TA x0 = a[0];                                                          \
            _Pragma("omp simd")                                                    \
            for (int64_t i = 0; i < len; i++) {                                    \
                TB x1 = b[i];                                                      \
                y[i] = (EXPR);                                                     \
            }                                                                      \
        } else {                                                                   \
            TA x0 = a[0];                                                          \
            TB x1 = b[0];                                                          \
            TY r = (EXPR);                                                         \
            for (int64_t i = 0; i < len; i++) y[i] = r;                            \
        }                                                                          \
    }

/* Float arithmetic as written; integer Add/Sub/Mul through the unsigned type so overflow
 * wraps (what ONNX Runtime's hardware arithmetic does) rather than being undefined. Integer
 * Div truncates toward zero like C and ONNX Runtime; a zero divisor is refused before the
 * loop runs, and x / -1 is a wrapping negation so INT_MIN / -1 cannot trap. */
#define DEF_ARITH_FLOAT(SUFFIX, T)                                                 \
    DEF_BIN(add_##SUFFIX, T, T, T, x0 + x1)                                        \
    DEF_BIN(sub_##SUFFIX, T, T, T, x0 - x1)                                        \
    DEF_BIN(mul_##SUFFIX, T, T, T, x0 * x1)                                        \
    DEF_BIN(div_##SUFFIX, T, T, T, x0 / x1)
#define DEF_ARITH_INT(SUFFIX, T, U, DIV)                                           \
    DEF_BIN(add_##SUFFIX, T, T, T, (T)((U)x0 + (U)x1))                             \
    DEF_BIN(sub_##SUFFIX, T, T, T, (T)((U)x0 - (U)x1))                             \
    DEF_BIN(mul_##SUFFIX, T, T, T, (T)((U)x0 * (U)x1))                             \
    DEF_BIN(div_##SUFFIX, T, T, T, DIV)

#define SIGNED_DIV(T, U) (x1 == -1 ? (T)((U)0 - (U)x0) : (T)(x0 / x1))

DEF_ARITH_FLOAT(f32, float)
DEF_ARITH_FLOAT(f64, double)
DEF_ARITH_INT(i8, int8_t, uint8_t, SIGNED_DIV(int8_t, uint8_t))
DEF_ARITH_INT(u8, uint8_t, unsigned, (uint8_t)(x0 / x1))
DEF_ARITH_INT(i32, int32_t, uint32_t, SIGNED_DIV(int32_t, uint32_t))
DEF_ARITH_INT(i64, int64_t, uint64_t, SIGNED_DIV(int64_t, uint64_t))

/* Indexed [op - IR_OP_ADD][dtype index]; Pow has its own table below. */
_Static_assert(IR_OP_SUB == IR_OP_ADD + 1 && IR_OP_MUL == IR_OP_ADD + 2 &&
               IR_OP_DIV == IR_OP_ADD + 3, "ops.def must keep Add, Sub, Mul, Div in order");
static const bin_fn arith_fns[4][T_COUNT] = {
    {add_f32, add_f64, add_i8, add_u8, add_i32, add_i64},
    {sub_f32, sub_f64, sub_i8, sub_u8, sub_i32, sub_i64},
    {mul_f32, mul_f64, mul_i8, mul_u8, mul_i32, mul_i64},
    {div_f32, div_f64, div_i8, div_u8, div_i32, div_i64},
};

/* Pow. float^float is powf, as in ONNX Runtime; mixed and integer cases go through double
 * (exact for the integer results that fit in 53 bits) and truncate back to the base's type,
 * saturating, so a huge result cannot hit the undefined float-to-int conversion. */
static int64_t sat_i64(double v) {
    if (v != v) return 0;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

static int32_t sat_i32(double v) {
    if (v != v) return 0;
    if (v >= 2147483647.0) return INT32_MAX;
    if (v <= -2147483648.0) return INT32_MIN;
    return (int32_t)v;
}

DEF_BIN(pow_f32_f32, float, float, float, powf(x0, x1))
#define DEF_POW(SUFFIX, TA, TY, STORE)                                             \
    DEF_BIN(pow_##SUFFIX##_f64, TA, double, TY, STORE(pow((double)x0, x1)))        \
    DEF_BIN(pow_##SUFFIX##_i8, TA, int8_t, TY, STORE(pow((double)x0, (double)x1))) \
    DEF_BIN(pow_##SUFFIX##_u8, TA, uint8_t, TY, STORE(pow((double)x0, (double)x1))) \
    DEF_BIN(pow_##SUFFIX##_i32, TA, int32_t, TY, STORE(pow((double)x0, (double)x1))) \
    DEF_BIN(pow_##SUFFIX##_i64, TA, int64_t, TY, STORE(pow((double)x0, (double)x1)))
#define TO_F32(v) ((float)(v))
#define TO_F64(v) (v)
DEF_POW(f32, float, float, TO_F32)
DEF_POW(f64, double, double, TO_F64)
DEF_POW(i32, int32_t, int32_t, sat_i32)
DEF_POW(i64, int64_t, int64_t, sat_i64)
DEF_BIN(pow_f64_f32, double, float, double, pow(x0, (double)x1))
DEF_BIN(pow_i32_f32, int32_t, float, int32_t, sat_i32(pow((double)x0, (double)x1)))
DEF_BIN(pow_i64_f32, int64_t, float, int64_t, sat_i64(pow((double)x0, (double)x1)))
/* Squaring is the common Pow in exported models (variance in decomposed LayerNorm);
 * x * x is exactly powf(x, 2). */
DEF_BIN(square_f32, float, float, float, ((void)x1, x0 * x0))

/* Indexed [base: f32, f64, i32, i64][exponent dtype index]. */
static const bin_fn pow_fns[4][T_COUNT] = {
    {pow_f32_f32, pow_f32_f64, pow_f32_i8, pow_f32_u8, pow_f32_i32, pow_f32_i64},
    {pow_f64_f32, pow_f64_f64, pow_f64_i8, pow_f64_u8, pow_f64_i32, pow_f64_i64},
    {pow_i32_f32, pow_i32_f64, pow_i32_i8, pow_i32_u8, pow_i32_i32, pow_i32_i64},
    {pow_i64_f32, pow_i64_f64, pow_i64_i8, pow_i64_u8, pow_i64_i32, pow_i64_i64},
};

/* A broadcast binary op as runs: y's dims merged into m dims (dim), the inputs' element
 * strides along them (da, db, 0 where broadcast); a task is one block of up to `block` elements
 * of one run of the innermost dim. */
typedef struct bin_job {
    bin_fn fn;
    int m;
    int64_t dim[WPK_MAX_DIMS], da[WPK_MAX_DIMS], db[WPK_MAX_DIMS];
    int64_t inner, block, nblock;
    size_t ea, eb, ey;
    const char *pa, *pb;
    char *py;
} bin_job;

static void bin_task(const bin_job *j, int64_t t) {
    int64_t row = t / j->nblock, start = (t % j->nblock) * j->block;
    int64_t len = j->inner - start < j->block ? j->inner - start : j->block;
    int64_t ia = j->da[j->m - 1], ib = j->db[j->m - 1];
    int64_t oa = start * ia, ob = start * ib, rem = row;
    for (int d = j->m - 2; d >= 0; d--) {
        int64_t idx = rem % j->dim[d];
        rem /= j->dim[d];
        oa += idx * j->da[d];
        ob += idx * j->db[d];
    }
    j->fn(j->pa + oa * (int64_t)j->ea, ia, j->pb + ob * (int64_t)j->eb, ib,
          j->py + (row * j->inner + start) * (int64_t)j->ey, len);
}

/* Runs fn over y = f(a, b) with broadcasting. Dims of size 1 are dropped and neighbouring
 * dims that stay contiguous on both sides merge, so a same-shape op is one long run, a scalar
 * operand is a run with stride 0, and [N,C,H,W] + [1,C,1,1] is N*C runs of H*W. The runs
 * (split into blocks so one long run still spreads over threads) are the parallel loop. */
static void bin_run(const ir_tensor *a, const ir_tensor *b, ir_tensor *y, bin_fn fn) {
    int64_t total = ir_numel(y);
    if (total == 0) return;
    int64_t sa[WPK_MAX_DIMS], sb[WPK_MAX_DIMS];
    op_broadcast_strides(a, y->ndim, y->dims, sa);
    op_broadcast_strides(b, y->ndim, y->dims, sb);
    bin_job j = {.fn = fn, .block = 16384, .ea = wpk_dtype_size(a->dtype),
                 .eb = wpk_dtype_size(b->dtype), .ey = wpk_dtype_size(y->dtype),
                 .pa = a->data, .pb = b->data, .py = y->data};
    int m = 0;
    for (int i = 0; i < y->ndim; i++) {
        int64_t d = y->dims[i];
        if (d == 1) continue;
        if (m > 0 && j.da[m - 1] == sa[i] * d && j.db[m - 1] == sb[i] * d) {
            j.dim[m - 1] *= d;
            j.da[m - 1] = sa[i];
            j.db[m - 1] = sb[i];
        } else {
            j.dim[m] = d;
            j.da[m] = sa[i];
            j.db[m] = sb[i];
            m++;
        }
    }
    if (m == 0) { /* one element */
        j.dim[0] = 1;
        j.da[0] = j.db[0] = 1;
        m = 1;
    }
    j.m = m;
    j.inner = j.dim[m - 1];
    j.nblock = (j.inner + j.block - 1) / j.block;
    int64_t tasks = total / j.inner * j.nblock;
    if (op_parallel(total, PAR_MIN)) {
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < tasks; t++) bin_task(&j, t);
    } else {
        for (int64_t t = 0; t < tasks; t++) bin_task(&j, t);
    }
}

static bool is_scalar_value(const ir_tensor *t, float v) {
    return t->dtype == WPK_DTYPE_FLOAT32 && ir_numel(t) == 1 && ((const float *)t->data)[0] == v;
}

wpk_status op_binary_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out) {
    const ir_tensor *a = in[0], *b = in[1];
    int ta = arith_index(a->dtype), tb = arith_index(b->dtype);
    if (ta < 0 || tb < 0)
        return op_unsupported(ctx, n, "inputs have dtypes %s and %s",
                              wpk_dtype_name(a->dtype), wpk_dtype_name(b->dtype));
    bin_fn fn;
    if (n->op == IR_OP_POW) {
        int base = ta == T_F32 ? 0 : ta == T_F64 ? 1 : ta == T_I32 ? 2 : ta == T_I64 ? 3 : -1;
        if (base < 0)
            return op_unsupported(ctx, n, "base X has dtype %s", wpk_dtype_name(a->dtype));
        fn = pow_fns[base][tb];
        if (ta == T_F32 && is_scalar_value(b, 2.0f)) fn = square_f32;
    } else {
        if (n->op < IR_OP_ADD || n->op > IR_OP_DIV || ta != tb)
            return op_unsupported(ctx, n, "no binary kernel for this op and dtypes");
        fn = arith_fns[n->op - IR_OP_ADD][ta];
        if (n->op == IR_OP_DIV && ta >= T_I8) {
            int64_t nb = ir_numel(b);
            for (int64_t i = 0; i < nb; i++) {
                bool zero;
                switch (ta) {
                case T_I8: case T_U8: zero = ((const uint8_t *)b->data)[i] == 0; break;
                case T_I32: zero = ((const int32_t *)b->data)[i] == 0; break;
                default: zero = ((const int64_t *)b->data)[i] == 0; break;
                }
                if (zero)
                    return op_fail(ctx, n, "integer division by zero (element %lld of B)",
                                   (long long)i);
            }
        }
    }
    bin_run(a, b, out[0], fn);
    return WPK_OK;
}

/* ---- Cast ---- */

/* ONNX TensorProto.DataType names, for messages about types we do not have. */
static const char *onnx_type_name(int64_t t) {
    static const char *const names[] = {
        "UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64",
        "STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64",
        "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
        "FLOAT8E5M2FNUZ", "UINT4", "INT4", "FLOAT4E2M1", "FLOAT8E8M0", "UINT2", "INT2"};
    if (t >= 0 && t < (int64_t)(sizeof names / sizeof names[0])) return names[t];
    return "unknown";
}

static bool is_half(int64_t t) { return t == WPK_DTYPE_FLOAT16 || t == WPK_DTYPE_BFLOAT16; }

static bool cast_type_ok(int64_t t) {
    return t == WPK_DTYPE_FLOAT32 || t == WPK_DTYPE_FLOAT64 || t == WPK_DTYPE_INT32 ||
           t == WPK_DTYPE_INT64 || t == WPK_DTYPE_INT8 || t == WPK_DTYPE_UINT8 ||
           t == WPK_DTYPE_BOOL || is_half(t);
}

wpk_status op_cast_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "input");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    const ir_attr *to = ir_attr_find(n, "to");
    if (!to) return op_fail(ctx, n, "attribute 'to' is missing");
    if (to->kind != IR_ATTR_INT)
        return op_unsupported(ctx, n, "attribute 'to' is not an integer (the string form of "
                              "opset 1 is not supported)");
    if (!cast_type_ok(to->i))
        return op_unsupported(ctx, n, "cast to %s (ONNX type %lld) is not supported",
                              onnx_type_name(to->i), (long long)to->i);
    if (!cast_type_ok(in[0]->dtype))
        return op_unsupported(ctx, n, "cast from %s (ONNX type %d) is not supported",
                              onnx_type_name(in[0]->dtype), (int)in[0]->dtype);
    op_set_shape(out[0], (wpk_dtype)to->i, in[0]->ndim, in[0]->dims);
    return WPK_OK;
}

/* Float to integer truncates toward zero. Out-of-range values and NaN are undefined in C and
 * unspecified by ONNX; we saturate to the target's range and send NaN to 0, so the result is
 * at least defined and the same on every machine. */
#define SAT(v, T, LO, HI) \
    ((v) != (v) ? (T)0 : (v) <= (double)(LO) ? (T)(LO) : (v) >= (double)(HI) ? (T)(HI) : (T)(v))
#define F2I8(v) SAT((double)(v), int8_t, INT8_MIN, INT8_MAX)
#define F2U8(v) SAT((double)(v), uint8_t, 0, UINT8_MAX)
#define F2I32(v) SAT((double)(v), int32_t, INT32_MIN, INT32_MAX)
#define F2I64(v) sat_i64((double)(v))
#define TO_BOOL(v) ((uint8_t)((v) != 0))
/* Integer to narrower integer wraps (two's complement), as C compilers and ONNX Runtime do. */
#define CONV_F32(v) ((float)(v))
#define CONV_F64(v) ((double)(v))
#define CONV_I8(v) ((int8_t)(v))
#define CONV_U8(v) ((uint8_t)(v))
#define CONV_I32(v) ((int32_t)(v))
#define CONV_I64(v) ((int64_t)(v))

#define AS_IS(v) (v)
#define CAST_LOOP(S, CONV, READ)                                                   \
    {                                                                              \
        const S *x = src;                                                          \
        for (int64_t i = i0; i < i1; i++) y[i] = CONV(READ(x[i]));                 \
        break;                                                                     \
    }

/* A bool byte other than 0 is true, whatever its value. */
#define BOOL_BYTE(v) ((v) != 0)

/* cast_to_<D>: convert elements [i0, i1) of any supported dtype to D. FROM_FLOAT converts a
 * float/double, FROM_INT an integer; bool sources are read as 0/1 and then as integers. */
#define DEF_CAST_TO(NAME, D, FROM_FLOAT, FROM_INT)                                 \
    static void NAME(wpk_dtype from, const void *src, void *dst, int64_t i0, int64_t i1) { \
        D *y = dst;                                                                \
        switch (from) {                                                            \
        case WPK_DTYPE_FLOAT32: CAST_LOOP(float, FROM_FLOAT, AS_IS)                \
        case WPK_DTYPE_FLOAT64: CAST_LOOP(double, FROM_FLOAT, AS_IS)               \
        case WPK_DTYPE_INT8: CAST_LOOP(int8_t, FROM_INT, AS_IS)                    \
        case WPK_DTYPE_UINT8: CAST_LOOP(uint8_t, FROM_INT, AS_IS)                  \
        case WPK_DTYPE_INT32: CAST_LOOP(int32_t, FROM_INT, AS_IS)                  \
        case WPK_DTYPE_INT64: CAST_LOOP(int64_t, FROM_INT, AS_IS)                  \
        case WPK_DTYPE_BOOL: CAST_LOOP(uint8_t, FROM_INT, BOOL_BYTE)               \
        default: break;                                                            \
        }                                                                          \
    }

DEF_CAST_TO(cast_to_f32, float, CONV_F32, CONV_F32)
DEF_CAST_TO(cast_to_f64, double, CONV_F64, CONV_F64)
DEF_CAST_TO(cast_to_i8, int8_t, F2I8, CONV_I8)
DEF_CAST_TO(cast_to_u8, uint8_t, F2U8, CONV_U8)
DEF_CAST_TO(cast_to_i32, int32_t, F2I32, CONV_I32)
DEF_CAST_TO(cast_to_i64, int64_t, F2I64, CONV_I64)
DEF_CAST_TO(cast_to_bool, uint8_t, TO_BOOL, TO_BOOL)

static bool cast_plain(wpk_dtype from, const void *src, wpk_dtype to, void *dst, int64_t i0,
                       int64_t i1);

/* Casts from and to the 16-bit floats go through float32 (every float16 and bfloat16 value is
 * one), a chunk at a time on the stack. */
static void cast_half(wpk_dtype from, const void *src, wpk_dtype to, void *dst, int64_t i0,
                      int64_t i1) {
    float buf[256];
    for (int64_t c0 = i0; c0 < i1; c0 += 256) {
        int64_t c1 = i1 - c0 < 256 ? i1 : c0 + 256;
        if (is_half(from)) {
            const uint16_t *h = src;
            for (int64_t i = c0; i < c1; i++)
                buf[i - c0] = from == WPK_DTYPE_FLOAT16 ? half_f16_to_f32(h[i])
                                                        : half_bf16_to_f32(h[i]);
        } else {
            cast_plain(from, (const uint8_t *)src + c0 * (int64_t)wpk_dtype_size(from),
                       WPK_DTYPE_FLOAT32, buf, 0, c1 - c0);
        }
        if (is_half(to)) {
            uint16_t *h = dst;
            for (int64_t i = c0; i < c1; i++)
                h[i] = to == WPK_DTYPE_FLOAT16 ? half_f32_to_f16(buf[i - c0])
                                               : half_f32_to_bf16(buf[i - c0]);
        } else {
            cast_plain(WPK_DTYPE_FLOAT32, buf, to,
                       (uint8_t *)dst + c0 * (int64_t)wpk_dtype_size(to), 0, c1 - c0);
        }
    }
}

static bool cast_range(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out,
                       int64_t i0, int64_t i1) {
    (void)n;
    const ir_tensor *x = in[0];
    ir_tensor *y = out[0];
    if (is_half(x->dtype) || is_half(y->dtype)) {
        cast_half(x->dtype, x->data, y->dtype, y->data, i0, i1);
        return true;
    }
    return cast_plain(x->dtype, x->data, y->dtype, y->data, i0, i1);
}

static bool cast_plain(wpk_dtype from, const void *src, wpk_dtype to, void *dst, int64_t i0,
                       int64_t i1) {
    switch (to) {
    case WPK_DTYPE_FLOAT32: cast_to_f32(from, src, dst, i0, i1); break;
    case WPK_DTYPE_FLOAT64: cast_to_f64(from, src, dst, i0, i1); break;
    case WPK_DTYPE_INT8: cast_to_i8(from, src, dst, i0, i1); break;
    case WPK_DTYPE_UINT8: cast_to_u8(from, src, dst, i0, i1); break;
    case WPK_DTYPE_INT32: cast_to_i32(from, src, dst, i0, i1); break;
    case WPK_DTYPE_INT64: cast_to_i64(from, src, dst, i0, i1); break;
    case WPK_DTYPE_BOOL: cast_to_bool(from, src, dst, i0, i1); break;
    default: return false;
    }
    return true;
}

wpk_status op_cast_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                       ir_tensor *const *out) {
    const ir_tensor *x = in[0];
    ir_tensor *y = out[0];
    int64_t count = ir_numel(y);
    if (!cast_type_ok(x->dtype) || !cast_type_ok(y->dtype))
        return op_unsupported(ctx, n, "cast from %s to %s is not supported",
                              onnx_type_name(x->dtype), onnx_type_name(y->dtype));
    if (count == 0) return WPK_OK;
    if (x->dtype == y->dtype) {
        if (x->data != y->data) memcpy(y->data, x->data, ir_nbytes(y));
        return WPK_OK;
    }
    run_ranges(cast_range, n, in, out, count); /* cast_type_ok: every pair has a kernel */
    return WPK_OK;
}
