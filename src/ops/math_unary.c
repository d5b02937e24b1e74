/* math_unary.c -- elementwise math on float tensors that the activation table does not hold:
 * rounding (Floor, Ceil, Round half to even), Sign, trigonometric and hyperbolic functions,
 * the activations Elu, Selu, Softplus, Softsign and Mish, and the tests IsNaN and IsInf (bool
 * outputs). float32 and float64; Sign also on signed integers. */
#include "ops/op_util.h"

#include <math.h>
#include <string.h>

/* Loops over fewer elements than this run on one thread (op_parallel); blocks of BLOCK
 * elements are the parallel tasks. */
#define PAR_MIN 32768
#define BLOCK 16384

static bool bool_output(ir_op op) { return op == IR_OP_IS_NAN || op == IR_OP_IS_INF; }

static bool is_float(wpk_dtype t) { return t == WPK_DTYPE_FLOAT32 || t == WPK_DTYPE_FLOAT64; }

static bool is_signed_int(wpk_dtype t) {
    return t == WPK_DTYPE_INT8 || t == WPK_DTYPE_INT32 || t == WPK_DTYPE_INT64;
}

/* A float attribute must be a float when given. */
static wpk_status check_float_attr(wpk_context *ctx, const ir_node *n, const char *name) {
    const ir_attr *a = ir_attr_find(n, name);
    if (a && a->kind != IR_ATTR_FLOAT)
        return op_fail(ctx, n, "attribute '%s' must be a float", name);
    return WPK_OK;
}

/* IsInf's detect_negative / detect_positive: 0 or 1, absent meaning 1. */
static wpk_status detect_flag(wpk_context *ctx, const ir_node *n, const char *name, bool *out) {
    const ir_attr *a = ir_attr_find(n, name);
    *out = true;
    if (!a) return WPK_OK;
    if (a->kind != IR_ATTR_INT || (a->i != 0 && a->i != 1))
        return op_fail(ctx, n, "attribute '%s' must be 0 or 1", name);
    *out = a->i == 1;
    return WPK_OK;
}

wpk_status op_math_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "X");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    if (n->nin > 1) return op_fail(ctx, n, "takes 1 input, but has %d", n->nin);
    const ir_tensor *x = in[0];
    bool sign_int = n->op == IR_OP_SIGN && is_signed_int(x->dtype);
    if (!is_float(x->dtype) && !sign_int)
        return op_unsupported(ctx, n, "input has dtype %s; %s supports float32 and float64%s",
                              wpk_dtype_name(x->dtype), n->op_type,
                              n->op == IR_OP_SIGN ? ", int8, int32 and int64" : "");
    bool b;
    switch (n->op) {
    case IR_OP_ELU: st = check_float_attr(ctx, n, "alpha"); break;
    case IR_OP_SELU:
        st = check_float_attr(ctx, n, "alpha");
        if (!st) st = check_float_attr(ctx, n, "gamma");
        break;
    case IR_OP_IS_INF:
        st = detect_flag(ctx, n, "detect_negative", &b);
        if (!st) st = detect_flag(ctx, n, "detect_positive", &b);
        break;
    default: break;
    }
    if (st) return st;
    op_set_shape(out[0], bool_output(n->op) ? WPK_DTYPE_BOOL : x->dtype, x->ndim, x->dims);
    return WPK_OK;
}

/* The op's attributes, read once per call. */
typedef struct math_params {
    float alpha, gamma;
    bool neg, pos;
} math_params;

/* Round half to even without a libm call per element (nearbyint is one, and does not
 * vectorize): below 2^23 (2^52 for double) adding and taking away 2^23 leaves the integer the
 * default rounding mode rounds to, which is half to even; larger magnitudes, infinities and
 * NaN are returned as they are. The sign is put back so -0.4 rounds to -0. */
static inline float round_even_f(float v) {
    float a = fabsf(v);
    return a < 8388608.0f ? copysignf((a + 8388608.0f) - 8388608.0f, v) : v;
}

static inline double round_even_d(double v) {
    double a = fabs(v);
    return a < 4503599627370496.0 ? copysign((a + 4503599627370496.0) - 4503599627370496.0, v) : v;
}

/* y = EXPR(v) over elements [i0, i1). */
#define MAP(TX, TY, EXPR)                                                          \
    do {                                                                           \
        const TX *x_ = x;                                                          \
        TY *y_ = y;                                                                \
        _Pragma("omp simd")                                                        \
        for (int64_t i = i0; i < i1; i++) {                                        \
            TX v = x_[i];                                                          \
            y_[i] = (EXPR);                                                        \
        }                                                                          \
    } while (0)

/* The float cases, for T = float (F(fn) = fnf) and T = double (F(fn) = fn). Softplus takes
 * log1p of exp(-|v|) so large inputs neither overflow nor lose digits. */
#define FLOAT_CASES(T, F, ROUND)                                                   \
    case IR_OP_FLOOR: MAP(T, T, F(floor)(v)); break;                               \
    case IR_OP_CEIL: MAP(T, T, F(ceil)(v)); break;                                 \
    case IR_OP_ROUND: MAP(T, T, ROUND(v)); break;                                  \
    case IR_OP_SIGN: MAP(T, T, v > 0 ? (T)1 : v < 0 ? (T)-1 : v == 0 ? (T)0 : v); break; \
    case IR_OP_SIN: MAP(T, T, F(sin)(v)); break;                                   \
    case IR_OP_COS: MAP(T, T, F(cos)(v)); break;                                   \
    case IR_OP_TAN: MAP(T, T, F(tan)(v)); break;                                   \
    case IR_OP_ASIN: MAP(T, T, F(asin)(v)); break;                                 \
    case IR_OP_ACOS: MAP(T, T, F(acos)(v)); break;                                 \
    case IR_OP_ATAN: MAP(T, T, F(atan)(v)); break;                                 \
    case IR_OP_SINH: MAP(T, T, F(sinh)(v)); break;                                 \
    case IR_OP_COSH: MAP(T, T, F(cosh)(v)); break;                                 \
    case IR_OP_ASINH: MAP(T, T, F(asinh)(v)); break;                               \
    case IR_OP_ACOSH: MAP(T, T, F(acosh)(v)); break;                               \
    case IR_OP_ATANH: MAP(T, T, F(atanh)(v)); break;                               \
    case IR_OP_SOFTSIGN: MAP(T, T, v / ((T)1 + F(fabs)(v))); break;                \
    case IR_OP_SOFTPLUS:                                                           \
        MAP(T, T, (v > 0 ? v : (T)0) + F(log1p)(F(exp)(-F(fabs)(v))));             \
        break;                                                                     \
    case IR_OP_MISH:                                                               \
        MAP(T, T, v * F(tanh)((v > 0 ? v : (T)0) + F(log1p)(F(exp)(-F(fabs)(v))))); \
        break;                                                                     \
    case IR_OP_ELU: {                                                              \
        const T alpha = p->alpha;                                                  \
        MAP(T, T, v < 0 ? alpha * F(expm1)(v) : v);                                \
        break;                                                                     \
    }                                                                              \
    case IR_OP_SELU: {                                                             \
        const T alpha = p->alpha, gamma = p->gamma;                                \
        MAP(T, T, gamma * (v <= 0 ? alpha * F(expm1)(v) : v));                     \
        break;                                                                     \
    }                                                                              \
    case IR_OP_IS_NAN: MAP(T, uint8_t, v != v); break;                             \
    case IR_OP_IS_INF: {                                                           \
        const bool neg = p->neg, pos = p->pos;                                     \
        MAP(T, uint8_t, (pos && v == (T)INFINITY) || (neg && v == -(T)INFINITY));  \
        break;                                                                     \
    }

#define F32_FN(name) name##f
#define F64_FN(name) name

static bool math_range(const ir_node *n, const math_params *p, wpk_dtype dt, const void *x,
                       void *y, int64_t i0, int64_t i1) {
    switch (dt) {
    case WPK_DTYPE_FLOAT32:
        switch (n->op) {
            FLOAT_CASES(float, F32_FN, round_even_f)
        default: return false;
        }
        break;
    case WPK_DTYPE_FLOAT64:
        switch (n->op) {
            FLOAT_CASES(double, F64_FN, round_even_d)
        default: return false;
        }
        break;
    case WPK_DTYPE_INT8:
        if (n->op != IR_OP_SIGN) return false;
        MAP(int8_t, int8_t, (int8_t)((v > 0) - (v < 0)));
        break;
    case WPK_DTYPE_INT32:
        if (n->op != IR_OP_SIGN) return false;
        MAP(int32_t, int32_t, (v > 0) - (v < 0));
        break;
    case WPK_DTYPE_INT64:
        if (n->op != IR_OP_SIGN) return false;
        MAP(int64_t, int64_t, (v > 0) - (v < 0));
        break;
    default: return false;
    }
    return true;
}

wpk_status op_math_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                       ir_tensor *const *out) {
    math_params p = {
        .alpha = ir_attr_float(n, "alpha", n->op == IR_OP_SELU ? 1.67326319217681884765625f
                                                               : 1.0f),
        .gamma = ir_attr_float(n, "gamma", 1.05070102214813232421875f),
        .neg = ir_attr_int(n, "detect_negative", 1) != 0,
        .pos = ir_attr_int(n, "detect_positive", 1) != 0,
    };
    const wpk_dtype dt = in[0]->dtype;
    const void *x = in[0]->data;
    void *y = out[0]->data;
    /* an empty range asks whether there is a kernel at all */
    if (!math_range(n, &p, dt, x, y, 0, 0))
        return op_unsupported(ctx, n, "input has dtype %s, which %s does not support",
                              wpk_dtype_name(dt), n->op_type);
    const int64_t count = ir_numel(out[0]), nblock = (count + BLOCK - 1) / BLOCK;
    if (op_parallel(count, PAR_MIN)) {
#pragma omp parallel for schedule(static)
        for (int64_t b = 0; b < nblock; b++)
            math_range(n, &p, dt, x, y, b * BLOCK, b == nblock - 1 ? count : (b + 1) * BLOCK);
    } else {
        math_range(n, &p, dt, x, y, 0, count);
    }
    return WPK_OK;
}
