/* test_ops_data.c -- shape functions and reference kernels of the elementwise, reshape,
 * movement and constant ops, called directly on hand-built nodes with known answers, and the
 * must-fail cases with their status and message. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "ir/graph.h"
#include "ops/op_util.h"

static wpk_context *ctx;

/* expr returns WPK_OK; otherwise print the message it left */
#define CHECK_OK(expr)                                                                 \
    do {                                                                               \
        wpk_status s_ = (expr);                                                        \
        if (s_ != WPK_OK) {                                                            \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr,       \
                    wpk_context_error(ctx));                                           \
            check_failures++;                                                          \
        }                                                                              \
    } while (0)

/* ---- building nodes and tensors ---- */

static int dummy_ids[16] = {0};

static ir_node node(ir_op op, int opset, int nin, int nout) {
    ir_node n = {0};
    n.name = "n0";
    n.op = op;
    n.op_type = ir_op_get(op)->name;
    n.domain = "";
    n.opset = opset;
    n.nin = nin;
    n.nout = nout;
    n.in = dummy_ids;
    n.out = dummy_ids;
    return n;
}

static ir_tensor tensor(wpk_dtype dt, int ndim, const int64_t *dims, const void *data) {
    ir_tensor t = {0};
    t.dtype = dt;
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++) t.dims[i] = dims[i];
    t.data = (void *)data;
    return t;
}

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define F32(...) ((const float[]){__VA_ARGS__})
#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define I32(...) ((const int32_t[]){__VA_ARGS__})
#define T_F32(nd, dims, data) tensor(WPK_DTYPE_FLOAT32, nd, dims, data)
#define T_I64(nd, dims, data) tensor(WPK_DTYPE_INT64, nd, dims, data)

static ir_attr attr_int(const char *name, int64_t v) {
    ir_attr a = {0};
    a.name = name;
    a.kind = IR_ATTR_INT;
    a.i = v;
    return a;
}

static ir_attr attr_float(const char *name, float v) {
    ir_attr a = {0};
    a.name = name;
    a.kind = IR_ATTR_FLOAT;
    a.f = v;
    return a;
}

static ir_attr attr_str(const char *name, const char *s) {
    ir_attr a = {0};
    a.name = name;
    a.kind = IR_ATTR_STRING;
    a.s = s;
    return a;
}

static ir_attr attr_ints(const char *name, int count, const int64_t *v) {
    ir_attr a = {0};
    a.name = name;
    a.kind = IR_ATTR_INTS;
    a.n = count;
    a.ints = (int64_t *)v;
    return a;
}

/* Shape function, then allocate the outputs and run the kernel. The outputs' buffers are
 * freed by release(). */
static wpk_status run(const ir_node *n, ir_tensor **in, ir_tensor **out) {
    const ir_op_info *info = ir_op_get(n->op);
    for (int i = 0; i < n->nout; i++)
        if (out[i]) *out[i] = (ir_tensor){0};
    wpk_clear_error(ctx);
    wpk_status st = info->shape(ctx, n, in, out);
    if (st) return st;
    for (int i = 0; i < n->nout; i++)
        if (out[i]) out[i]->data = calloc(1, ir_nbytes(out[i]) + 1);
    return info->ref(ctx, n, in, out);
}

static void release(const ir_node *n, ir_tensor **out) {
    for (int i = 0; i < n->nout; i++)
        if (out[i]) {
            free(out[i]->data);
            out[i]->data = NULL;
        }
}

static bool shape_is(const ir_tensor *t, int ndim, const int64_t *dims) {
    if (t->ndim != ndim) return false;
    for (int i = 0; i < ndim; i++)
        if (t->dims[i] != dims[i]) return false;
    return true;
}

static bool f32_eq(const ir_tensor *t, const float *want, int64_t count, float tol) {
    if (t->dtype != WPK_DTYPE_FLOAT32 || ir_numel(t) != count) return false;
    const float *y = t->data;
    for (int64_t i = 0; i < count; i++)
        if (!(fabsf(y[i] - want[i]) <= tol)) {
            fprintf(stderr, "  element %lld: got %g want %g\n", (long long)i, y[i], want[i]);
            return false;
        }
    return true;
}

static bool i64_eq(const ir_tensor *t, const int64_t *want, int64_t count) {
    if (t->dtype != WPK_DTYPE_INT64 || ir_numel(t) != count) return false;
    for (int64_t i = 0; i < count; i++)
        if (((const int64_t *)t->data)[i] != want[i]) {
            fprintf(stderr, "  element %lld: got %lld want %lld\n", (long long)i,
                    (long long)((const int64_t *)t->data)[i], (long long)want[i]);
            return false;
        }
    return true;
}

static bool i32_eq(const ir_tensor *t, const int32_t *want, int64_t count) {
    if (t->dtype != WPK_DTYPE_INT32 || ir_numel(t) != count) return false;
    for (int64_t i = 0; i < count; i++)
        if (((const int32_t *)t->data)[i] != want[i]) {
            fprintf(stderr, "  element %lld: got %d want %d\n", (long long)i,
                    ((const int32_t *)t->data)[i], want[i]);
            return false;
        }
    return true;
}

static uint32_t rng = 12345;
static float frand(void) {
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / (float)(1 << 24) * 4.0f - 2.0f;
}

/* ---- elementwise ---- */

/* Binary ops against per-element index math, over the broadcast patterns the fast path
 * special-cases and a few it does not. */
static void test_binary_broadcast(void) {
    static const struct { int na; int64_t a[4]; int nb; int64_t b[4]; } cases[] = {
        {3, {2, 3, 1}, 1, {4}},           {4, {2, 3, 4, 5}, 4, {1, 3, 1, 1}},
        {2, {3, 4}, 2, {3, 4}},           {2, {3, 4}, 0, {0}},
        {0, {0}, 3, {2, 2, 3}},           {2, {3, 1}, 2, {1, 4}},
        {3, {1, 3, 1}, 3, {2, 1, 5}},     {4, {2, 1, 3, 1}, 3, {4, 1, 1}},
        {3, {2, 0, 3}, 1, {3}},           {1, {70000}, 1, {1}},
    };
    const ir_op ops[] = {IR_OP_ADD, IR_OP_SUB, IR_OP_MUL, IR_OP_DIV, IR_OP_POW};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ir_tensor a = T_F32(cases[c].na, cases[c].a, NULL), b = T_F32(cases[c].nb, cases[c].b, NULL);
        float *da = malloc(sizeof(float) * (size_t)ir_numel(&a) + 4);
        float *db = malloc(sizeof(float) * (size_t)ir_numel(&b) + 4);
        for (int64_t i = 0; i < ir_numel(&a); i++) da[i] = frand();
        for (int64_t i = 0; i < ir_numel(&b); i++) db[i] = frand() + 3.0f; /* positive: Pow, Div */
        a.data = da;
        b.data = db;
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            ir_node n = node(ops[k], 14, 2, 1);
            ir_tensor y, *in[] = {&a, &b}, *out[] = {&y};
            wpk_status st = run(&n, in, out);
            CHECK_OK(st);
            if (st) continue;
            int64_t sa[WPK_MAX_DIMS], sb[WPK_MAX_DIMS], total = ir_numel(&y);
            op_broadcast_strides(&a, y.ndim, y.dims, sa);
            op_broadcast_strides(&b, y.ndim, y.dims, sb);
            int bad = 0;
            for (int64_t i = 0; i < total; i++) {
                int64_t rem = i, ia = 0, ib = 0;
                for (int d = y.ndim - 1; d >= 0; d--) {
                    int64_t idx = rem % y.dims[d];
                    rem /= y.dims[d];
                    ia += idx * sa[d];
                    ib += idx * sb[d];
                }
                float x0 = da[ia], x1 = db[ib], want;
                switch (ops[k]) {
                case IR_OP_ADD: want = x0 + x1; break;
                case IR_OP_SUB: want = x0 - x1; break;
                case IR_OP_MUL: want = x0 * x1; break;
                case IR_OP_DIV: want = x0 / x1; break;
                default: want = powf(x0, x1); break;
                }
                float got = ((float *)y.data)[i];
                if (!(got == want || (isnan(got) && isnan(want)))) bad++;
            }
            if (bad) fprintf(stderr, "  case %zu op %d: %d wrong\n", c, (int)ops[k], bad);
            CHECK(bad == 0);
            release(&n, out);
        }
        free(da);
        free(db);
    }
}

static void test_binary_known(void) {
    /* [2,3,1] + [4] -> [2,3,4] */
    ir_tensor a = T_F32(3, DIMS(2, 3, 1), F32(0, 10, 20, 30, 40, 50));
    ir_tensor b = T_F32(1, DIMS(4), F32(1, 2, 3, 4));
    ir_node n = node(IR_OP_ADD, 14, 2, 1);
    ir_tensor y, *in[] = {&a, &b}, *out[] = {&y};
    CHECK_OK(run(&n, in, out));
    CHECK(shape_is(&y, 3, DIMS(2, 3, 4)));
    CHECK(f32_eq(&y, F32(1, 2, 3, 4, 11, 12, 13, 14, 21, 22, 23, 24, 31, 32, 33, 34, 41, 42,
                         43, 44, 51, 52, 53, 54), 24, 0));
    release(&n, out);

    /* integer Div truncates toward zero; int64 Mul wraps */
    ir_tensor ia = T_I64(1, DIMS(4), I64(-7, 7, -8, INT64_MIN));
    ir_tensor ib = T_I64(1, DIMS(4), I64(2, -2, 3, -1));
    n = node(IR_OP_DIV, 14, 2, 1);
    in[0] = &ia;
    in[1] = &ib;
    CHECK_OK(run(&n, in, out));
    CHECK(i64_eq(&y, I64(-3, -3, -2, INT64_MIN), 4));
    release(&n, out);

    ir_tensor i32a = tensor(WPK_DTYPE_INT32, 1, DIMS(3), I32(5, -9, 100));
    ir_tensor i32b = tensor(WPK_DTYPE_INT32, 0, NULL, I32(3));
    n = node(IR_OP_SUB, 14, 2, 1);
    in[0] = &i32a;
    in[1] = &i32b;
    CHECK_OK(run(&n, in, out));
    CHECK(i32_eq(&y, I32(2, -12, 97), 3));
    release(&n, out);

    /* must fail: integer division by zero, mismatched dtypes, shapes that do not broadcast */
    ir_tensor zero = T_I64(1, DIMS(2), I64(1, 0));
    ir_tensor two = T_I64(1, DIMS(2), I64(1, 2));
    n = node(IR_OP_DIV, 14, 2, 1);
    in[0] = &two;
    in[1] = &zero;
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_MODEL, "integer division by zero");
    release(&n, out);
    in[0] = &a;
    in[1] = &two;
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_MODEL, "different dtypes");
    ir_tensor c = T_F32(2, DIMS(2, 1), F32(1, 2));
    in[1] = &c;
    n = node(IR_OP_MUL, 14, 2, 1);
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_MODEL, "cannot be broadcast");
}

static void test_pow(void) {
    ir_node n = node(IR_OP_POW, 15, 2, 1);
    ir_tensor a = T_F32(1, DIMS(3), F32(2, 3, -2)), y, *in[] = {&a, NULL}, *out[] = {&y};
    ir_tensor e64 = T_I64(1, DIMS(3), I64(3, 2, 3));
    in[1] = &e64;
    CHECK_OK(run(&n, in, out));
    CHECK(f32_eq(&y, F32(8, 9, -8), 3, 0));
    release(&n, out);
    ir_tensor two = T_F32(0, NULL, F32(2));
    in[1] = &two;
    CHECK_OK(run(&n, in, out));
    CHECK(f32_eq(&y, F32(4, 9, 4), 3, 0));
    release(&n, out);
    ir_tensor ib = tensor(WPK_DTYPE_INT32, 1, DIMS(3), I32(1, 2, 3));
    ir_tensor ie = tensor(WPK_DTYPE_INT32, 1, DIMS(3), I32(4, 5, 6));
    in[0] = &ib;
    in[1] = &ie;
    CHECK_OK(run(&n, in, out));
    CHECK(i32_eq(&y, I32(1, 32, 729), 3));
    release(&n, out);
}

static void test_unary(void) {
    const float xs[] = {-3.0f, -1.0f, -0.25f, 0.0f, 0.5f, 2.0f, 4.0f};
    const int nx = 7;
    ir_tensor x = T_F32(1, DIMS(7), xs), y, *in[] = {&x}, *out[] = {&y};
    struct { ir_op op; ir_attr attr; int nattr; } cases[] = {
        {IR_OP_RELU, {0}, 0},          {IR_OP_LEAKY_RELU, attr_float("alpha", 0.1f), 1},
        {IR_OP_SIGMOID, {0}, 0},       {IR_OP_HARD_SIGMOID, attr_float("alpha", 0.25f), 1},
        {IR_OP_HARD_SWISH, {0}, 0},    {IR_OP_TANH, {0}, 0},
        {IR_OP_ERF, {0}, 0},           {IR_OP_GELU, {0}, 0},
        {IR_OP_GELU, attr_str("approximate", "tanh"), 1},
        {IR_OP_EXP, {0}, 0},           {IR_OP_NEG, {0}, 0},
        {IR_OP_ABS, {0}, 0},           {IR_OP_RECIPROCAL, {0}, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ir_node n = node(cases[c].op, 20, 1, 1);
        n.nattr = cases[c].nattr;
        n.attrs = &cases[c].attr;
        CHECK_OK(run(&n, in, out));
        CHECK(shape_is(&y, 1, DIMS(7)) && y.dtype == WPK_DTYPE_FLOAT32);
        for (int i = 0; i < nx && y.data; i++) {
            double v = xs[i], want;
            switch (cases[c].op) {
            case IR_OP_RELU: want = v > 0 ? v : 0; break;
            case IR_OP_LEAKY_RELU: want = v >= 0 ? v : 0.1 * v; break;
            case IR_OP_SIGMOID: want = 1 / (1 + exp(-v)); break;
            case IR_OP_HARD_SIGMOID: want = fmax(0, fmin(1, 0.25 * v + 0.5)); break;
            case IR_OP_HARD_SWISH: want = v * fmax(0, fmin(1, v / 6 + 0.5)); break;
            case IR_OP_TANH: want = tanh(v); break;
            case IR_OP_ERF: want = erf(v); break;
            case IR_OP_GELU:
                want = cases[c].nattr
                           ? 0.5 * v * (1 + tanh(sqrt(2 / 3.14159265358979) *
                                                 (v + 0.044715 * v * v * v)))
                           : 0.5 * v * (1 + erf(v / sqrt(2)));
                break;
            case IR_OP_EXP: want = exp(v); break;
            case IR_OP_NEG: want = -v; break;
            case IR_OP_ABS: want = fabs(v); break;
            default: want = 1 / v; break;
            }
            float got = ((float *)y.data)[i];
            if (!(fabs(got - want) <= 1e-6 * fmax(1, fabs(want)) || (isinf(got) && isinf(want)))) {
                fprintf(stderr, "  op %d x=%g: got %.9g want %.9g\n", (int)cases[c].op, v, got,
                        want);
                check_failures++;
            }
        }
        release(&n, out);
    }
    /* integer Relu, Neg of the most negative value wraps */
    ir_tensor xi = T_I64(1, DIMS(3), I64(-5, 7, INT64_MIN));
    in[0] = &xi;
    ir_node n = node(IR_OP_NEG, 13, 1, 1);
    CHECK_OK(run(&n, in, out));
    CHECK(i64_eq(&y, I64(5, -7, INT64_MIN), 3));
    release(&n, out);
    n = node(IR_OP_RELU, 14, 1, 1);
    CHECK_OK(run(&n, in, out));
    CHECK(i64_eq(&y, I64(0, 7, 0), 3));
    release(&n, out);
    /* must fail: float-only op on int64, bad Gelu mode */
    n = node(IR_OP_SIGMOID, 13, 1, 1);
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_UNSUPPORTED, "int64");
    in[0] = &x;
    ir_attr bad = attr_str("approximate", "fast");
    n = node(IR_OP_GELU, 20, 1, 1);
    n.nattr = 1;
    n.attrs = &bad;
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_MODEL, "'approximate' is 'fast'");
}

static void test_clip(void) {
    ir_tensor x = T_F32(1, DIMS(5), F32(-2, -0.5f, 0, 0.5f, 2)), y;
    ir_tensor lo = T_F32(0, NULL, F32(-1)), hi = T_F32(0, NULL, F32(1));
    ir_node n = node(IR_OP_CLIP, 13, 3, 1);
    ir_tensor *in[] = {&x, &lo, &hi}, *out[] = {&y};
    CHECK_OK(run(&n, in, out));
    CHECK(f32_eq(&y, F32(-1, -0.5f, 0, 0.5f, 1), 5, 0));
    release(&n, out);
    in[1] = NULL; /* max only */
    CHECK_OK(run(&n, in, out));
    CHECK(f32_eq(&y, F32(-2, -0.5f, 0, 0.5f, 1), 5, 0));
    release(&n, out);
    ir_tensor big = T_F32(0, NULL, F32(3)); /* min > max: everything is max */
    in[1] = &big;
    CHECK_OK(run(&n, in, out));
    CHECK(f32_eq(&y, F32(1, 1, 1, 1, 1), 5, 0));
    release(&n, out);
    /* int8 with min only (a 2-input node) */
    const int8_t xs[] = {-128, -3, 0, 100};
    const int8_t m = -5;
    ir_tensor x8 = tensor(WPK_DTYPE_INT8, 1, DIMS(4), xs), m8 = tensor(WPK_DTYPE_INT8, 0, NULL, &m);
    n = node(IR_OP_CLIP, 13, 2, 1);
    in[0] = &x8;
    in[1] = &m8;
    CHECK_OK(run(&n, in, out));
    const int8_t *y8 = y.data;
    CHECK(y.dtype == WPK_DTYPE_INT8 && y8[0] == -5 && y8[1] == -3 && y8[2] == 0 && y8[3] == 100);
    release(&n, out);
    /* must fail: bound of another dtype, non-scalar bound */
    in[1] = &lo;
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_MODEL, "input 'min' has dtype float32");
    in[0] = &x;
    in[1] = &x;
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_MODEL, "must be a scalar");
}

static void test_cast(void) {
    ir_tensor x = T_F32(1, DIMS(6), F32(-2.7f, 2.7f, 0, 1e20f, NAN, -0.5f)), y;
    ir_tensor *in[] = {&x}, *out[] = {&y};
    ir_attr to = attr_int("to", WPK_DTYPE_INT32);
    ir_node n = node(IR_OP_CAST, 13, 1, 1);
    n.nattr = 1;
    n.attrs = &to;
    CHECK_OK(run(&n, in, out));
    CHECK(i32_eq(&y, I32(-2, 2, 0, INT32_MAX, 0, 0), 6));
    release(&n, out);
    to.i = WPK_DTYPE_BOOL;
    CHECK_OK(run(&n, in, out));
    const uint8_t *yb = y.data;
    CHECK(y.dtype == WPK_DTYPE_BOOL && yb[0] == 1 && yb[2] == 0 && yb[4] == 1 && yb[5] == 1);
    release(&n, out);
    ir_tensor xi = T_I64(1, DIMS(3), I64(-3, 0, (int64_t)1 << 40));
    in[0] = &xi;
    to.i = WPK_DTYPE_FLOAT32;
    CHECK_OK(run(&n, in, out));
    CHECK(f32_eq(&y, F32(-3, 0, 1099511627776.0f), 3, 0));
    release(&n, out);
    to.i = WPK_DTYPE_UINT8;
    ir_tensor xneg = T_I64(1, DIMS(2), I64(257, -1));
    in[0] = &xneg;
    CHECK_OK(run(&n, in, out));
    const uint8_t *yu = y.data;
    CHECK(y.dtype == WPK_DTYPE_UINT8 && yu[0] == 1 && yu[1] == 255);
    release(&n, out);
    /* must fail: a type we do not have, named */
    to.i = 5;
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_UNSUPPORTED, "INT16");
    n.nattr = 0;
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_MODEL, "attribute 'to' is missing");
}

/* ---- reshape family ---- */

static void test_reshape(void) {
    float data[24];
    for (int i = 0; i < 24; i++) data[i] = (float)i;
    ir_tensor x = T_F32(3, DIMS(2, 3, 4), data), y;
    ir_tensor shape = T_I64(1, DIMS(3), I64(0, -1, 2));
    ir_node n = node(IR_OP_RESHAPE, 14, 2, 1);
    ir_tensor *in[] = {&x, &shape}, *out[] = {&y};
    CHECK_OK(run(&n, in, out));
    CHECK(shape_is(&y, 3, DIMS(2, 6, 2)) && f32_eq(&y, data, 24, 0));
    release(&n, out);
    /* allowzero: 0 is a literal zero; with -1 as well it is ambiguous */
    ir_attr az = attr_int("allowzero", 1);
    n.nattr = 1;
    n.attrs = &az;
    ir_tensor empty = T_F32(2, DIMS(0, 3), data);
    ir_tensor s2 = T_I64(1, DIMS(2), I64(3, 0));
    in[0] = &empty;
    in[1] = &s2;
    CHECK_OK(run(&n, in, out));
    CHECK(shape_is(&y, 2, DIMS(3, 0)));
    release(&n, out);
    ir_tensor s3 = T_I64(1, DIMS(2), I64(0, -1));
    in[1] = &s3;
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_MODEL, "both 0 and -1");
    n.nattr = 0;
    in[0] = &x;
    ir_tensor bad = T_I64(1, DIMS(2), I64(5, 5));
    in[1] = &bad;
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_MODEL, "cannot reshape [2,3,4] (24 elements) to [5,5]");
    ir_tensor two = T_I64(1, DIMS(2), I64(-1, -1));
    in[1] = &two;
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_MODEL, "more than one -1");
    ir_tensor nodata = T_I64(1, DIMS(2), NULL);
    in[1] = &nodata;
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_UNSUPPORTED, "not constant");

    /* Flatten, negative axis */
    ir_attr axis = attr_int("axis", -1);
    n = node(IR_OP_FLATTEN, 13, 1, 1);
    n.nattr = 1;
    n.attrs = &axis;
    CHECK_OK(run(&n, in, out));
    CHECK(shape_is(&y, 2, DIMS(6, 4)) && f32_eq(&y, data, 24, 0));
    release(&n, out);
    axis.i = 3;
    CHECK_OK(run(&n, in, out));
    CHECK(shape_is(&y, 2, DIMS(24, 1)));
    release(&n, out);
    axis.i = 4;
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_MODEL, "attribute 'axis' 4 is out of range");

    /* Unsqueeze with negative axes (relative to the output rank), Squeeze */
    ir_tensor axes = T_I64(1, DIMS(2), I64(-1, 1));
    n = node(IR_OP_UNSQUEEZE, 13, 2, 1);
    in[1] = &axes;
    CHECK_OK(run(&n, in, out));
    CHECK(shape_is(&y, 5, DIMS(2, 1, 3, 4, 1)));
    ir_tensor y2, *out2[] = {&y2};
    ir_node sq = node(IR_OP_SQUEEZE, 13, 1, 1);
    ir_tensor *in2[] = {&y};
    CHECK_OK(run(&sq, in2, out2));
    CHECK(shape_is(&y2, 3, DIMS(2, 3, 4)));
    CHECK(f32_eq(&y2, data, 24, 0));
    release(&sq, out2);
    ir_tensor sq_axes = T_I64(1, DIMS(1), I64(-1));
    ir_tensor *in3[] = {&y, &sq_axes};
    sq = node(IR_OP_SQUEEZE, 13, 2, 1);
    CHECK_OK(run(&sq, in3, out2));
    CHECK(shape_is(&y2, 4, DIMS(2, 1, 3, 4)));
    release(&sq, out2);
    ir_tensor sq_bad = T_I64(1, DIMS(1), I64(2));
    in3[1] = &sq_bad;
    CHECK_ERR(ctx, run(&sq, in3, out2), WPK_ERR_MODEL, "cannot squeeze axis 2");
    release(&n, out);
    ir_tensor dup = T_I64(1, DIMS(2), I64(0, -5));
    in[1] = &dup;
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_MODEL, "twice");

    /* Shape with start/end (opset 15), and before opset 15 where they do not exist */
    ir_attr se[2] = {attr_int("start", 1), attr_int("end", -1)};
    n = node(IR_OP_SHAPE, 15, 1, 1);
    n.nattr = 2;
    n.attrs = se;
    CHECK_OK(run(&n, in, out));
    CHECK(i64_eq(&y, I64(3), 1));
    release(&n, out);
    se[0].i = 5;
    CHECK_OK(run(&n, in, out));
    CHECK(shape_is(&y, 1, DIMS(0)));
    release(&n, out);
    n.nattr = 0;
    CHECK_OK(run(&n, in, out));
    CHECK(i64_eq(&y, I64(2, 3, 4), 3));
    release(&n, out);

    /* Dropout: identity plus an all-true mask; training mode refused */
    ir_tensor mask;
    ir_tensor *dout[] = {&y, &mask};
    n = node(IR_OP_DROPOUT, 13, 1, 2);
    CHECK_OK(run(&n, in, dout));
    CHECK(f32_eq(&y, data, 24, 0));
    CHECK(mask.dtype == WPK_DTYPE_BOOL && shape_is(&mask, 3, DIMS(2, 3, 4)));
    CHECK(((uint8_t *)mask.data)[0] == 1 && ((uint8_t *)mask.data)[23] == 1);
    release(&n, dout);
    const uint8_t yes = 1;
    ir_tensor train = tensor(WPK_DTYPE_BOOL, 0, NULL, &yes);
    ir_tensor *din[] = {&x, NULL, &train};
    n = node(IR_OP_DROPOUT, 13, 3, 2);
    CHECK_ERR(ctx, run(&n, din, dout), WPK_ERR_UNSUPPORTED, "training_mode");
}

/* ---- movement ---- */

static void test_transpose(void) {
    float data[24];
    for (int i = 0; i < 24; i++) data[i] = (float)i;
    ir_tensor x = T_F32(3, DIMS(2, 3, 4), data), y, *in[] = {&x}, *out[] = {&y};
    ir_attr perm = attr_ints("perm", 3, I64(2, 0, 1));
    ir_node n = node(IR_OP_TRANSPOSE, 13, 1, 1);
    n.nattr = 1;
    n.attrs = &perm;
    CHECK_OK(run(&n, in, out));
    CHECK(shape_is(&y, 3, DIMS(4, 2, 3)));
    int bad = 0;
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                bad += ((float *)y.data)[(k * 2 + i) * 3 + j] != data[(i * 3 + j) * 4 + k];
    CHECK(bad == 0);
    release(&n, out);
    n.nattr = 0; /* default: reverse */
    CHECK_OK(run(&n, in, out));
    CHECK(shape_is(&y, 3, DIMS(4, 3, 2)));
    CHECK(((float *)y.data)[1] == 12 && ((float *)y.data)[2] == 4);
    release(&n, out);
    ir_attr bad_perm = attr_ints("perm", 3, I64(0, 0, 1));
    n.nattr = 1;
    n.attrs = &bad_perm;
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_MODEL, "not a permutation");
}

static void test_concat_split(void) {
    ir_tensor a = T_F32(2, DIMS(2, 2), F32(1, 2, 3, 4)), b = T_F32(2, DIMS(2, 0), NULL);
    ir_tensor c = T_F32(2, DIMS(2, 1), F32(5, 6)), y, *in[] = {&a, &b, &c}, *out[] = {&y};
    ir_attr axis = attr_int("axis", -1);
    ir_node n = node(IR_OP_CONCAT, 13, 3, 1);
    n.nattr = 1;
    n.attrs = &axis;
    CHECK_OK(run(&n, in, out));
    CHECK(shape_is(&y, 2, DIMS(2, 3)));
    CHECK(f32_eq(&y, F32(1, 2, 5, 3, 4, 6), 6, 0));
    release(&n, out);
    axis.i = 0;
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_MODEL, "input 1 has shape [2,0]");
    n.nattr = 0;
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_MODEL, "attribute 'axis' is missing");

    /* Large enough to be copied in chunks by the team (over 1 MiB, parts over 256 KiB): three
       rows, parts of 70000 and 50000 floats with an empty input between them */
    enum { ROWS = 3, NA = 70000, NC = 50000 };
    float *da = malloc(sizeof(float) * ROWS * NA), *dc = malloc(sizeof(float) * ROWS * NC);
    CHECK(da && dc);
    if (!da || !dc) {
        free(da);
        free(dc);
        return;
    }
    for (int i = 0; i < ROWS * NA; i++) da[i] = (float)i;
    for (int i = 0; i < ROWS * NC; i++) dc[i] = -(float)i - 1;
    a = T_F32(2, DIMS(ROWS, NA), da);
    b = T_F32(2, DIMS(ROWS, 0), NULL);
    c = T_F32(2, DIMS(ROWS, NC), dc);
    axis.i = 1;
    n.nattr = 1;
    CHECK_OK(run(&n, in, out));
    CHECK(shape_is(&y, 2, DIMS(ROWS, NA + NC)));
    const float *yv = y.data;
    int wrong = 0;
    for (int r = 0; r < ROWS; r++)
        for (int j = 0; j < NA + NC; j++) {
            float want = j < NA ? da[r * NA + j] : dc[r * NC + j - NA];
            wrong += yv[(size_t)r * (NA + NC) + (size_t)j] != want;
        }
    CHECK(wrong == 0);
    release(&n, out);
    free(da);
    free(dc);

    /* Split: opset 18 num_outputs, uneven: 7 -> 2,2,2,1 */
    ir_tensor x = T_F32(1, DIMS(7), F32(1, 2, 3, 4, 5, 6, 7));
    ir_tensor o[4], *outs[] = {&o[0], &o[1], &o[2], &o[3]}, *sin[] = {&x, NULL};
    ir_attr num = attr_int("num_outputs", 4);
    n = node(IR_OP_SPLIT, 18, 1, 4);
    n.nattr = 1;
    n.attrs = &num;
    CHECK_OK(run(&n, sin, outs));
    CHECK(f32_eq(&o[0], F32(1, 2), 2, 0) && f32_eq(&o[2], F32(5, 6), 2, 0));
    CHECK(f32_eq(&o[3], F32(7), 1, 0));
    release(&n, outs);
    /* opset 13, no sizes: must divide evenly */
    n = node(IR_OP_SPLIT, 13, 1, 4);
    CHECK_ERR(ctx, run(&n, sin, outs), WPK_ERR_MODEL, "cannot be split into 4 outputs");
    /* sizes input, along axis 1 */
    ir_tensor m = T_F32(2, DIMS(2, 3), F32(1, 2, 3, 4, 5, 6));
    ir_tensor sizes = T_I64(1, DIMS(2), I64(1, 2));
    sin[0] = &m;
    sin[1] = &sizes;
    ir_attr ax1 = attr_int("axis", 1);
    n = node(IR_OP_SPLIT, 13, 2, 2);
    n.nattr = 1;
    n.attrs = &ax1;
    CHECK_OK(run(&n, sin, outs));
    CHECK(shape_is(&o[0], 2, DIMS(2, 1)) && f32_eq(&o[0], F32(1, 4), 2, 0));
    CHECK(shape_is(&o[1], 2, DIMS(2, 2)) && f32_eq(&o[1], F32(2, 3, 5, 6), 4, 0));
    release(&n, outs);
    ir_tensor bad_sizes = T_I64(1, DIMS(2), I64(1, 1));
    sin[1] = &bad_sizes;
    CHECK_ERR(ctx, run(&n, sin, outs), WPK_ERR_MODEL, "sums to 2");
}

static ir_tensor arange(float *buf, int count) {
    for (int i = 0; i < count; i++) buf[i] = (float)i;
    return T_F32(1, DIMS(count), buf);
}

static void test_slice(void) {
    float buf[10];
    ir_tensor x = arange(buf, 10), y, *out[] = {&y};
    struct { int64_t s, e, st; int count; float want[10]; } cases[] = {
        {-1, INT64_MIN, -1, 10, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}},
        {20, -20, -3, 4, {9, 6, 3, 0}},
        {1, 1000, 1, 9, {1, 2, 3, 4, 5, 6, 7, 8, 9}},
        {-3, INT64_MAX, 2, 2, {7, 9}},
        {5, 2, 1, 0, {0}},
        {2, 5, -1, 0, {0}},
        {-100, 3, 1, 3, {0, 1, 2}},
        {8, -100, INT64_MIN, 1, {8}},
        {0, 10, INT64_MAX, 1, {0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ir_tensor s = T_I64(1, DIMS(1), &cases[c].s), e = T_I64(1, DIMS(1), &cases[c].e);
        ir_tensor ax = T_I64(1, DIMS(1), I64(0)), st = T_I64(1, DIMS(1), &cases[c].st);
        ir_tensor *in[] = {&x, &s, &e, &ax, &st};
        ir_node n = node(IR_OP_SLICE, 13, 5, 1);
        CHECK_OK(run(&n, in, out));
        if (!f32_eq(&y, cases[c].want, cases[c].count, 0)) {
            fprintf(stderr, "  slice case %zu\n", c);
            check_failures++;
        }
        release(&n, out);
    }
    /* 2-D, the spec's examples: default axes/steps, and steps on both axes */
    ir_tensor m = T_F32(2, DIMS(2, 4), F32(1, 2, 3, 4, 5, 6, 7, 8));
    ir_tensor s = T_I64(1, DIMS(2), I64(0, 1)), e = T_I64(1, DIMS(2), I64(-1, 1000));
    ir_tensor *in[] = {&m, &s, &e, NULL, NULL};
    ir_node n = node(IR_OP_SLICE, 13, 3, 1);
    CHECK_OK(run(&n, in, out));
    CHECK(shape_is(&y, 2, DIMS(1, 3)));
    CHECK(f32_eq(&y, F32(2, 3, 4), 3, 0));
    release(&n, out);
    ir_tensor s2 = T_I64(1, DIMS(2), I64(1, 0)), e2 = T_I64(1, DIMS(2), I64(2, 3));
    ir_tensor ax2 = T_I64(1, DIMS(2), I64(0, -1)), st2 = T_I64(1, DIMS(2), I64(1, 2));
    ir_tensor *in2[] = {&m, &s2, &e2, &ax2, &st2};
    n = node(IR_OP_SLICE, 13, 5, 1);
    CHECK_OK(run(&n, in2, out));
    CHECK(f32_eq(&y, F32(5, 7), 2, 0));
    release(&n, out);
    /* reverse both axes: the strided path with negative strides */
    ir_tensor s3 = T_I64(1, DIMS(2), I64(-1, -1)), e3 = T_I64(1, DIMS(2), I64(INT64_MIN, INT64_MIN));
    ir_tensor st3 = T_I64(1, DIMS(2), I64(-1, -2));
    ir_tensor *in3[] = {&m, &s3, &e3, &ax2, &st3};
    CHECK_OK(run(&n, in3, out));
    CHECK(f32_eq(&y, F32(8, 6, 4, 2), 4, 0));
    release(&n, out);
    ir_tensor zero = T_I64(1, DIMS(2), I64(1, 0));
    in2[4] = &zero;
    CHECK_ERR(ctx, run(&n, in2, out), WPK_ERR_MODEL, "'steps' is 0 for axis 1");
}

static void test_gather(void) {
    ir_tensor x = T_F32(2, DIMS(3, 3), F32(1, 2, 3, 4, 5, 6, 7, 8, 9)), y, *out[] = {&y};
    ir_tensor idx = T_I64(2, DIMS(1, 2), I64(0, -1));
    ir_attr axis = attr_int("axis", 1);
    ir_node n = node(IR_OP_GATHER, 13, 2, 1);
    n.nattr = 1;
    n.attrs = &axis;
    ir_tensor *in[] = {&x, &idx};
    CHECK_OK(run(&n, in, out));
    CHECK(shape_is(&y, 3, DIMS(3, 1, 2)));
    CHECK(f32_eq(&y, F32(1, 3, 4, 6, 7, 9), 6, 0));
    release(&n, out);
    /* a scalar int32 index drops the axis */
    ir_tensor one = tensor(WPK_DTYPE_INT32, 0, NULL, I32(-2));
    axis.i = 0;
    in[1] = &one;
    CHECK_OK(run(&n, in, out));
    CHECK(shape_is(&y, 1, DIMS(3)) && f32_eq(&y, F32(4, 5, 6), 3, 0));
    release(&n, out);
    ir_tensor oob = T_I64(1, DIMS(2), I64(1, 3));
    in[1] = &oob;
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_MODEL, "index 3 (element 1 of 'indices') is out of range");
}

static void test_expand(void) {
    ir_tensor x = T_F32(2, DIMS(3, 1), F32(1, 2, 3)), y, *out[] = {&y};
    ir_tensor shape = T_I64(1, DIMS(3), I64(2, 1, 4));
    ir_tensor *in[] = {&x, &shape};
    ir_node n = node(IR_OP_EXPAND, 13, 2, 1);
    CHECK_OK(run(&n, in, out));
    CHECK(shape_is(&y, 3, DIMS(2, 3, 4)));
    float want[24];
    for (int i = 0; i < 24; i++) want[i] = (float)((i / 4) % 3 + 1);
    CHECK(f32_eq(&y, want, 24, 0));
    release(&n, out);
    ir_tensor bad = T_I64(1, DIMS(2), I64(2, 2));
    in[1] = &bad;
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_MODEL, "cannot expand [3,1] to shape [2,2]");
}

static void test_pad(void) {
    ir_tensor x = T_F32(2, DIMS(3, 2), F32(1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f)), y, *out[] = {&y};
    ir_tensor pads = T_I64(1, DIMS(4), I64(0, 2, 0, 0));
    ir_tensor *in[] = {&x, &pads, NULL, NULL};
    ir_attr mode = attr_str("mode", "reflect");
    ir_node n = node(IR_OP_PAD, 19, 2, 1);
    n.nattr = 1;
    n.attrs = &mode;
    CHECK_OK(run(&n, in, out));
    CHECK(shape_is(&y, 2, DIMS(3, 4)));
    CHECK(f32_eq(&y, F32(1.0f, 1.2f, 1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f, 4.5f, 5.7f),
                 12, 0));
    release(&n, out);
    mode.s = "edge";
    CHECK_OK(run(&n, in, out));
    CHECK(f32_eq(&y, F32(1.0f, 1.0f, 1.0f, 1.2f, 2.3f, 2.3f, 2.3f, 3.4f, 4.5f, 4.5f, 4.5f, 5.7f),
                 12, 0));
    release(&n, out);
    mode.s = "wrap";
    ir_tensor wpads = T_I64(1, DIMS(4), I64(2, 1, 1, 1));
    in[1] = &wpads;
    CHECK_OK(run(&n, in, out));
    CHECK(shape_is(&y, 2, DIMS(6, 4)));
    CHECK(f32_eq(&y, F32(3.4f, 2.3f, 3.4f, 2.3f, 5.7f, 4.5f, 5.7f, 4.5f, 1.2f, 1.0f, 1.2f, 1.0f,
                         3.4f, 2.3f, 3.4f, 2.3f, 5.7f, 4.5f, 5.7f, 4.5f, 1.2f, 1.0f, 1.2f, 1.0f),
                 24, 0));
    release(&n, out);
    /* reflect further than the axis is long repeats the mirror, like numpy */
    float buf[3];
    ir_tensor r = arange(buf, 3);
    ir_tensor rpads = T_I64(1, DIMS(2), I64(5, 4));
    mode.s = "reflect";
    in[0] = &r;
    in[1] = &rpads;
    CHECK_OK(run(&n, in, out));
    CHECK(f32_eq(&y, F32(1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2), 12, 0));
    release(&n, out);
    /* constant with a value and axes (opset 18), negative pads crop */
    ir_tensor cv = T_F32(0, NULL, F32(9));
    ir_tensor apads = T_I64(1, DIMS(2), I64(-1, 2)), axes = T_I64(1, DIMS(1), I64(-1));
    ir_tensor *cin[] = {&x, &apads, &cv, &axes};
    n = node(IR_OP_PAD, 18, 4, 1);
    CHECK_OK(run(&n, cin, out));
    CHECK(shape_is(&y, 2, DIMS(3, 3)));
    CHECK(f32_eq(&y, F32(1.2f, 9, 9, 3.4f, 9, 9, 5.7f, 9, 9), 9, 0));
    release(&n, out);
    /* rows that are entirely padding */
    ir_tensor rowpads = T_I64(1, DIMS(4), I64(1, 0, 0, 0));
    ir_tensor *rin[] = {&x, &rowpads, &cv, NULL};
    CHECK_OK(run(&n, rin, out));
    CHECK(shape_is(&y, 2, DIMS(4, 2)));
    CHECK(f32_eq(&y, F32(9, 9, 1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f), 8, 0));
    release(&n, out);
    /* must fail */
    ir_tensor short_pads = T_I64(1, DIMS(2), I64(1, 1));
    rin[1] = &short_pads;
    CHECK_ERR(ctx, run(&n, rin, out), WPK_ERR_MODEL, "'pads' has 2 values; 2 axes need 4");
    ir_tensor crop = T_I64(1, DIMS(4), I64(0, -3, 0, 0));
    rin[1] = &crop;
    CHECK_ERR(ctx, run(&n, rin, out), WPK_ERR_MODEL, "crop more than its size 2");
    mode.s = "mirror";
    n.nattr = 1;
    n.attrs = &mode;
    rin[1] = &pads;
    CHECK_ERR(ctx, run(&n, rin, out), WPK_ERR_MODEL, "'mode' is 'mirror'");
}

/* ---- constants ---- */

static void test_constant(void) {
    ir_tensor y, *out[] = {&y};
    ir_attr v = attr_ints("value_ints", 3, I64(4, 5, 6));
    ir_node n = node(IR_OP_CONSTANT, 13, 0, 1);
    n.nattr = 1;
    n.attrs = &v;
    CHECK_OK(run(&n, NULL, out));
    CHECK(shape_is(&y, 1, DIMS(3)) && i64_eq(&y, I64(4, 5, 6), 3));
    release(&n, out);
    ir_attr f = attr_float("value_float", 2.5f);
    n.attrs = &f;
    CHECK_OK(run(&n, NULL, out));
    CHECK(y.ndim == 0 && f32_eq(&y, F32(2.5f), 1, 0));
    release(&n, out);
    ir_tensor t = T_F32(2, DIMS(1, 2), F32(7, 8));
    ir_attr ta = {.name = "value", .kind = IR_ATTR_TENSOR, .t = &t};
    n.attrs = &ta;
    CHECK_OK(run(&n, NULL, out));
    CHECK(shape_is(&y, 2, DIMS(1, 2)) && f32_eq(&y, F32(7, 8), 2, 0));
    release(&n, out);
    ir_attr two[2] = {ta, f};
    n.nattr = 2;
    n.attrs = two;
    CHECK_ERR(ctx, run(&n, NULL, out), WPK_ERR_MODEL, "has both attribute 'value' and 'value_float'");
    ir_attr s = attr_str("value_string", "hi");
    n.nattr = 1;
    n.attrs = &s;
    CHECK_ERR(ctx, run(&n, NULL, out), WPK_ERR_UNSUPPORTED, "value_string");

    /* ConstantOfShape: default float 0, an int64 value, an empty shape (a scalar) */
    ir_tensor shape = T_I64(1, DIMS(2), I64(2, 3));
    ir_tensor *in[] = {&shape};
    n = node(IR_OP_CONSTANT_OF_SHAPE, 13, 1, 1);
    CHECK_OK(run(&n, in, out));
    CHECK(shape_is(&y, 2, DIMS(2, 3)));
    CHECK(f32_eq(&y, F32(0, 0, 0, 0, 0, 0), 6, 0));
    release(&n, out);
    ir_tensor val = T_I64(1, DIMS(1), I64(-7));
    ir_attr va = {.name = "value", .kind = IR_ATTR_TENSOR, .t = &val};
    n.nattr = 1;
    n.attrs = &va;
    CHECK_OK(run(&n, in, out));
    CHECK(i64_eq(&y, I64(-7, -7, -7, -7, -7, -7), 6));
    release(&n, out);
    ir_tensor scalar_shape = T_I64(1, DIMS(0), I64(0));
    in[0] = &scalar_shape;
    CHECK_OK(run(&n, in, out));
    CHECK(y.ndim == 0 && i64_eq(&y, I64(-7), 1));
    release(&n, out);
    ir_tensor neg = T_I64(1, DIMS(2), I64(2, -3));
    in[0] = &neg;
    CHECK_ERR(ctx, run(&n, in, out), WPK_ERR_MODEL, "negative dim -3");
}

int main(void) {
    ctx = wpk_context_create();
    test_binary_broadcast();
    test_binary_known();
    test_pow();
    test_unary();
    test_clip();
    test_cast();
    test_reshape();
    test_transpose();
    test_concat_split();
    test_slice();
    test_gather();
    test_expand();
    test_pad();
    test_constant();
    wpk_context_free(ctx);
    CHECK_DONE();
}
