/* test_te.c -- tensor expressions: the checks of the constructors (must-fail constructions with
 * their messages), the printer (precedence, constants, clashing names), printer goldens of every
 * op algorithm in src/te/algo on small shapes, the algorithms' must-fail cases, and running out
 * of memory at every allocation of an algorithm. Numeric checks of the algorithms are in
 * test_te_algo.c. */
#include <math.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "check.h"
#include "te/algo/conv2d.h"
#include "te/algo/conv2d_nchwc.h"
#include "te/algo/dense.h"
#include "te/algo/layer_norm.h"
#include "te/algo/pool.h"
#include "te/algo/softmax.h"

static wpk_context *ctx;
static te_ctx C;

static void fresh(void) {
    te_ctx_free(&C);
    te_ctx_init(&C, ctx);
    wpk_clear_error(ctx);
}

#define SHAPE(...) \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

static te_tensor *ph(const char *name, int ndim, const int64_t *shape) {
    return te_placeholder(&C, name, TE_F32, ndim, shape);
}

/* got == want, or a report with both texts */
static void same_text(const char *file, int line, const char *got, const char *want) {
    if (strcmp(got, want) == 0) return;
    fprintf(stderr, "%s:%d: text differs\n--- got:\n%s\n--- want:\n%s\n", file, line, got, want);
    check_failures++;
}

static void graph_is(const char *file, int line, te_tensor *t, const char *want) {
    if (!t) {
        fprintf(stderr, "%s:%d: no tensor: %s\n", file, line, wpk_context_error(ctx));
        check_failures++;
        return;
    }
    strbuf b = {0};
    te_print_graph(&t, 1, &b);
    same_text(file, line, b.s ? b.s : "", want);
    sb_free(&b);
}
#define GRAPH_IS(t, want) graph_is(__FILE__, __LINE__, t, want)

static void expr_is(const char *file, int line, const te_expr *e, const char *want) {
    strbuf b = {0};
    te_print_expr(e, &b);
    same_text(file, line, b.s ? b.s : "", want);
    sb_free(&b);
}
#define EXPR_IS(e, want) expr_is(__FILE__, __LINE__, e, want)

/* NULL result and an INVALID_ARG message containing needle */
#define CHECK_FAILS(t, needle)                                                                   \
    do {                                                                                         \
        wpk_clear_error(ctx);                                                                    \
        const void *t_ = (t);                                                                    \
        CHECK(t_ == NULL);                                                                       \
        CHECK_ERR(ctx, ctx->status, WPK_ERR_INVALID_ARG, needle);                                \
    } while (0)

/* ---- constructors ---- */

static void test_constructors(void) {
    fresh();
    CHECK_FAILS(ph("x", SHAPE(2, 0)), "placeholder 'x': dim 1 is 0");
    CHECK_FAILS(ph("x", 9, (int64_t[9]){1, 1, 1, 1, 1, 1, 1, 1, 1}), "9 dims (1 to 8");
    CHECK_FAILS(te_reduce_axis(&C, "k", 0, 0), "reduce axis 'k': extent 0");

    te_tensor *x = ph("x", SHAPE(4, 5));
    te_iter **ax = te_compute_axes(&C, SHAPE(4, 5), (const char *const[]){"i", "j"});
    const te_expr *i = te_var(&C, ax[0]), *j = te_var(&C, ax[1]);
    CHECK_FAILS(te_load(&C, x, 1, &i), "load of 'x': 1 indices for a 2-d tensor");
    CHECK_FAILS(te_load(&C, x, 2, (const te_expr *[]){i, te_float(&C, 1.0)}),
                "load of 'x': index 1 is not an integer expression");

    /* a body that uses another compute's axis */
    te_iter **other = te_compute_axes(&C, SHAPE(4, 5), NULL);
    const te_expr *foreign = te_load(&C, x, 2, (const te_expr *[]){te_var(&C, other[0]), j});
    CHECK_FAILS(te_compute(&C, "y", SHAPE(4, 5), ax, foreign),
                "compute 'y': body uses 'i0', which is not one of its axes");
    /* axes that do not match the shape */
    CHECK_FAILS(te_compute(&C, "y", SHAPE(4, 6), ax, te_load(&C, x, 2, (const te_expr *[]){i, j})),
                "compute 'y': axis 1 does not match dim 1");
    /* a reduction axis outside any reduction, and outside its own */
    te_iter *k = te_reduce_axis(&C, "k", 0, 5), *k2 = te_reduce_axis(&C, "k2", 0, 5);
    te_iter **ax1 = te_compute_axes(&C, SHAPE(4), (const char *const[]){"i"});
    const te_expr *i1 = te_var(&C, ax1[0]);
    const te_expr *xk = te_load(&C, x, 2, (const te_expr *[]){i1, te_var(&C, k)});
    CHECK_FAILS(te_compute(&C, "y", SHAPE(4), ax1, xk),
                "compute 'y': reduction axis 'k' is used outside a reduction");
    CHECK_FAILS(te_compute(&C, "y", SHAPE(4), ax1, te_reduce(&C, TE_REDUCE_SUM, xk, 1, &k2)),
                "reduction axis 'k' is used outside its reduction");
    /* reductions only at the top */
    const te_expr *red = te_reduce(&C, TE_REDUCE_SUM, xk, 1, &k);
    CHECK_FAILS(te_compute(&C, "y", SHAPE(4), ax1, te_add(&C, red, te_float(&C, 1.0))),
                "a reduction inside an expression");
    /* reducing over a data axis */
    CHECK_FAILS(te_compute(&C, "y", SHAPE(4), ax1, te_reduce(&C, TE_REDUCE_SUM, xk, 1, &ax[1])),
                "reduction over 'j', which is not a reduction axis");
    /* an axis given twice */
    te_iter *twice[2] = {ax[0], ax[0]};
    CHECK_FAILS(te_compute(&C, "y", SHAPE(4, 4), twice, i), "compute 'y': axis 'i' is given twice");
    /* loop-level nodes do not belong in a tensor expression */
    CHECK_FAILS(te_compute(&C, "y", SHAPE(4), ax1, te_broadcast(&C, te_float(&C, 1.0), 4)),
                "compute 'y'");

    /* a good one, and what it reads */
    te_tensor *w = ph("w", SHAPE(5));
    w->constant = true;
    const te_expr *body = te_add(&C, te_load(&C, x, 2, (const te_expr *[]){i, j}),
                                 te_load(&C, w, 1, &j));
    te_tensor *y = te_compute(&C, "y", SHAPE(4, 5), ax, te_mul(&C, body, body));
    CHECK(y && y->dtype == TE_F32 && y->kind == TE_COMPUTE);
    const te_tensor *in[4];
    CHECK(te_tensor_inputs(y, in, 4) == 2 && in[0] == x && in[1] == w);
    CHECK(te_tensor_inputs(y, in, 1) == 1 && in[0] == x);
    CHECK(!te_tensor_is_constant(y));
    CHECK(te_tensor_is_constant(w));
    te_iter **ax2 = te_compute_axes(&C, SHAPE(5), NULL);
    te_tensor *w2 = te_compute(&C, "w2", SHAPE(5), ax2,
                               te_load(&C, w, 1, (const te_expr *[]){te_var(&C, ax2[0])}));
    CHECK(te_tensor_is_constant(w2));
    GRAPH_IS(y, "float32[4, 5] x = placeholder\n"
                "float32[5] w = constant\n"
                "float32[4, 5] y[i, j] = (x[i, j] + w[j]) * (x[i, j] + w[j])\n");
}

/* ---- the printer ---- */

static void test_printer(void) {
    fresh();
    te_iter *a = te_iter_new(&C, "a", TE_ITER_LOOP, 0, 8);
    te_iter *b = te_iter_new(&C, "b", TE_ITER_LOOP, 0, 8);
    te_iter *a2 = te_iter_new(&C, "a", TE_ITER_LOOP, 0, 8);
    const te_expr *va = te_var(&C, a), *vb = te_var(&C, b), *vc = te_var(&C, a2);
    CHECK(a2->id != a->id);
    /* the fewest parentheses that keep the tree: operators associate to the left */
    EXPR_IS(te_mul(&C, te_add(&C, va, vb), vb), "(a + b) * b");
    EXPR_IS(te_add(&C, va, te_mul(&C, vb, vb)), "a + b * b");
    EXPR_IS(te_sub(&C, te_sub(&C, va, vb), vb), "a - b - b");
    EXPR_IS(te_sub(&C, va, te_sub(&C, vb, va)), "a - (b - a)");
    EXPR_IS(te_div(&C, va, te_mul(&C, vb, te_int(&C, 3))), "a / (b * 3)");
    EXPR_IS(te_mod(&C, te_add(&C, va, te_int(&C, 1)), te_int(&C, 4)), "(a + 1) % 4");
    EXPR_IS(te_or(&C, te_and(&C, te_cmp(&C, TE_LT, va, vb), te_cmp(&C, TE_LE, vb, va)),
                  te_not(&C, te_cmp(&C, TE_EQ, va, te_int(&C, 0)))),
            "a < b && b <= a || !(a == 0)");
    /* constants fold; floats always show a point; infinities by name */
    EXPR_IS(te_add(&C, te_int(&C, 2), te_int(&C, 3)), "5");
    EXPR_IS(te_mul(&C, va, te_int(&C, 1)), "a");
    EXPR_IS(te_float(&C, 2.0), "2.0");
    EXPR_IS(te_float(&C, 0.25), "0.25");
    EXPR_IS(te_float(&C, -INFINITY), "-inf");
    EXPR_IS(te_cmp(&C, TE_LT, te_int(&C, 1), te_int(&C, 2)), "true");
    const te_expr *fa = te_cast(&C, te_t(TE_F32), va);
    EXPR_IS(te_select(&C, te_cmp(&C, TE_NE, va, vb), te_call(&C, TE_FN_EXP, fa, NULL),
                      te_call(&C, TE_FN_POW, fa, te_float(&C, 2.0))),
            "select(a != b, exp(float32(a)), pow(float32(a), 2.0))");
    EXPR_IS(te_max(&C, te_min(&C, va, vb), te_int(&C, 0)), "max(min(a, b), 0)");
    /* two iterators named alike: both get their ids; alone, the name is enough */
    char want[64];
    snprintf(want, sizeof want, "a_%d + a_%d", a->id, a2->id);
    EXPR_IS(te_add(&C, va, vc), want);
    /* the loop printers' form: ids everywhere, ramps and broadcasts */
    strbuf s = {0};
    te_print_expr_opts(te_add(&C, te_ramp(&C, va, te_int(&C, 1), 4), te_broadcast(&C, vb, 4)),
                       &(te_print_opts){.ids = true}, &s);
    snprintf(want, sizeof want, "ramp(a_%d, 1, 4) + x4(b_%d)", a->id, b->id);
    same_text(__FILE__, __LINE__, s.s, want);
    sb_free(&s);
    /* a reduction axis with a non-zero start */
    te_tensor *x = ph("x", SHAPE(8));
    te_iter **ax = te_compute_axes(&C, SHAPE(1), NULL);
    te_iter *k = te_reduce_axis(&C, "k", 2, 5);
    te_tensor *y = te_compute(&C, "y", SHAPE(1), ax,
                              te_reduce(&C, TE_REDUCE_MIN, te_load(&C, x, 1, (const te_expr *[]){
                                                                       te_var(&C, k)}), 1, &k));
    GRAPH_IS(y, "float32[8] x = placeholder\n"
                "float32[1] y[i0] = min(2<=k<7: x[k])\n");
}

/* ---- algorithm goldens ---- */

static void test_conv2d(void) {
    fresh();
    te_tensor *x = ph("x", SHAPE(1, 3, 8, 8)), *w = ph("w", SHAPE(8, 3, 3, 3));
    te_tensor *b = ph("b", SHAPE(8));
    w->constant = true;
    te_conv2d_params p = te_conv2d_default_params();
    /* stride 2, padding 1, bias + Relu */
    p.stride[0] = p.stride[1] = 2;
    p.pad[0] = p.pad[1] = p.pad[2] = p.pad[3] = 1;
    te_epilogue ep = {.bias = b, .act = te_act_default(TE_ACT_RELU)};
    te_algo_parts parts;
    te_tensor *y = te_conv2d_nchw(&C, "conv", x, w, &p, &ep, &parts);
    GRAPH_IS(y,
        "float32[1, 3, 8, 8] x = placeholder\n"
        "float32[1, 3, 10, 10] conv.pad[n, c, h, w] = select(1 <= h && h < 9 && 1 <= w && w < 9, "
        "x[n, c, min(max(h - 1, 0), 7), min(max(w - 1, 0), 7)], 0.0)\n"
        "float32[8, 3, 3, 3] w = constant\n"
        "float32[1, 8, 4, 4] conv.acc[n, oc, oh, ow] = sum(rc<3, kh<3, kw<3: "
        "conv.pad[n, rc, oh * 2 + kh, ow * 2 + kw] * w[oc, rc, kh, kw])\n"
        "float32[8] b = placeholder\n"
        "float32[1, 8, 4, 4] conv[n, oc, oh, ow] = max(conv.acc[n, oc, oh, ow] + b[oc], 0.0)\n");
    CHECK(parts.out == y && parts.epilogue == y && parts.main && parts.pad &&
          parts.main->body->kind == TE_REDUCE && !strcmp(parts.pad->name, "conv.pad"));

    /* no padding, no epilogue: the reduction is the output; dilation 2 */
    p = te_conv2d_default_params();
    p.dilation[0] = p.dilation[1] = 2;
    y = te_conv2d_nchw(&C, "c2", x, w, &p, NULL, &parts);
    GRAPH_IS(y,
        "float32[1, 3, 8, 8] x = placeholder\n"
        "float32[8, 3, 3, 3] w = constant\n"
        "float32[1, 8, 4, 4] c2[n, oc, oh, ow] = sum(rc<3, kh<3, kw<3: "
        "x[n, rc, oh + kh * 2, ow + kw * 2] * w[oc, rc, kh, kw])\n");
    CHECK(parts.out == y && parts.main == y && !parts.pad && !parts.epilogue);

    /* groups: 2 groups of 2 input channels; depthwise with a channel multiplier of 2 */
    te_tensor *x4 = ph("x4", SHAPE(2, 4, 5, 5)), *wg = ph("wg", SHAPE(6, 2, 1, 1));
    p = te_conv2d_default_params();
    p.groups = 2;
    GRAPH_IS(te_conv2d_nchw(&C, "g", x4, wg, &p, NULL, NULL),
        "float32[2, 4, 5, 5] x4 = placeholder\n"
        "float32[6, 2, 1, 1] wg = placeholder\n"
        "float32[2, 6, 5, 5] g[n, oc, oh, ow] = sum(rc<2: x4[n, oc / 3 * 2 + rc, oh, ow] * "
        "wg[oc, rc, 0, 0])\n");
    te_tensor *wd = ph("wd", SHAPE(8, 1, 3, 3));
    p.groups = 4;
    GRAPH_IS(te_conv2d_nchw(&C, "dw", x4, wd, &p, NULL, NULL),
        "float32[2, 4, 5, 5] x4 = placeholder\n"
        "float32[8, 1, 3, 3] wd = placeholder\n"
        "float32[2, 8, 3, 3] dw[n, oc, oh, ow] = sum(kh<3, kw<3: x4[n, oc / 2, oh + kh, ow + kw] * "
        "wd[oc, 0, kh, kw])\n");
    /* depthwise 1x1 with an epilogue: no reduction, so one compute holds it all */
    te_tensor *w11 = ph("w11", SHAPE(4, 1, 1, 1)), *z = ph("z", SHAPE(2, 4, 5, 5));
    ep = (te_epilogue){.residual = z, .act = te_act_default(TE_ACT_TANH)};
    GRAPH_IS(te_conv2d_nchw(&C, "d1", x4, w11, &p, &ep, &parts),
        "float32[2, 4, 5, 5] x4 = placeholder\n"
        "float32[4, 1, 1, 1] w11 = placeholder\n"
        "float32[2, 4, 5, 5] z = placeholder\n"
        "float32[2, 4, 5, 5] d1[n, oc, oh, ow] = tanh(x4[n, oc, oh, ow] * w11[oc, 0, 0, 0] + "
        "z[n, oc, oh, ow])\n");
    CHECK(parts.main == parts.out && !parts.epilogue);

    /* must-fail */
    p = te_conv2d_default_params();
    CHECK_FAILS(te_conv2d_nchw(&C, "bad", x4, w, &p, NULL, NULL),
                "conv2d 'bad': weight 'w' has 3 input channels per group but input 'x4' has 4 "
                "channels in 1 groups");
    p.groups = 3;
    CHECK_FAILS(te_conv2d_nchw(&C, "bad", x4, wg, &p, NULL, NULL),
                "conv2d 'bad': 3 groups do not divide 4 input and 6 output channels");
    p = te_conv2d_default_params();
    te_tensor *w9 = ph("w9", SHAPE(8, 3, 9, 9));
    CHECK_FAILS(te_conv2d_nchw(&C, "bad", x, w9, &p, NULL, NULL),
                "conv2d 'bad': spatial dim 0: the kernel spans 9 (with dilation) but the padded "
                "input is only 8");
    p.stride[1] = 0;
    CHECK_FAILS(te_conv2d_nchw(&C, "bad", x, w, &p, NULL, NULL), "stride 0 and dilation 1");
    p = te_conv2d_default_params();
    p.pad[2] = -1;
    CHECK_FAILS(te_conv2d_nchw(&C, "bad", x, w, &p, NULL, NULL), "pad 2 is -1");
    p = te_conv2d_default_params();
    CHECK_FAILS(te_conv2d_nchw(&C, "bad", b, w, &p, NULL, NULL),
                "conv2d 'bad': input 'b' has 1 dims, expected 4");
    ep = (te_epilogue){.bias = ph("b7", SHAPE(7))};
    CHECK_FAILS(te_conv2d_nchw(&C, "bad", x, w, &p, &ep, NULL),
                "epilogue of 'bad': bias 'b7' must be 1-D float32 with 8 values");
    ep = (te_epilogue){.residual = ph("zz", SHAPE(1, 8, 6, 5))};
    CHECK_FAILS(te_conv2d_nchw(&C, "bad", x, w, &p, &ep, NULL),
                "epilogue of 'bad': residual 'zz' must be float32 with the output's shape");
}

static void test_activations(void) {
    fresh();
    te_iter *v = te_iter_new(&C, "v", TE_ITER_LOOP, 0, 1);
    const te_expr *x = te_cast(&C, te_t(TE_F32), te_var(&C, v));
    static const struct {
        te_act_kind kind;
        const char *want;
    } cases[] = {
        {TE_ACT_NONE, "float32(v)"},
        {TE_ACT_RELU, "max(float32(v), 0.0)"},
        {TE_ACT_LEAKY_RELU, "select(float32(v) < 0.0, float32(v) * 0.00999999978, float32(v))"},
        {TE_ACT_CLIP, "min(max(float32(v), -3.40282347e+38), 3.40282347e+38)"},
        {TE_ACT_HARD_SIGMOID, "min(max(float32(v) * 0.200000003 + 0.5, 0.0), 1.0)"},
        {TE_ACT_HARD_SWISH, "float32(v) * min(max(float32(v) * 0.166666667 + 0.5, 0.0), 1.0)"},
        {TE_ACT_SIGMOID, "1.0 / (1.0 + exp(0.0 - float32(v)))"},
        {TE_ACT_SILU, "float32(v) * (1.0 / (1.0 + exp(0.0 - float32(v))))"},
        {TE_ACT_GELU, "float32(v) * 0.5 * (1.0 + erf(float32(v) * 0.707106781))"},
        {TE_ACT_TANH, "tanh(float32(v))"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        te_act a = te_act_default(cases[i].kind);
        EXPR_IS(te_activation(&C, &a, x), cases[i].want);
    }
    /* Clip with lo > hi: hi wins on both sides, as ONNX's Min(hi, Max(v, lo)) */
    te_act a = {TE_ACT_CLIP, 0, 0, 2.0f, 1.0f};
    EXPR_IS(te_activation(&C, &a, x),
            "min(max(float32(v), 2.0), 1.0)");
    CHECK(te_epilogue_empty(NULL));
    CHECK(te_epilogue_empty(&(te_epilogue){.act = te_act_default(TE_ACT_NONE)}));
}

static void test_conv2d_nchwc(void) {
    fresh();
    /* 3 input channels into blocks of 4 (a padding lane), 7 output channels in blocks of 4 */
    te_tensor *x = ph("x", SHAPE(1, 3, 6, 6)), *w = ph("w", SHAPE(7, 3, 3, 3));
    te_tensor *b = ph("b", SHAPE(7)), *z = ph("z", SHAPE(1, 2, 6, 6, 4));
    w->constant = true;
    te_tensor *xb = te_layout_to_nchwc(&C, "xb", x, 4);
    te_tensor *wp = te_conv2d_pack_weight(&C, "wp", w, 4, 4, false);
    CHECK(te_tensor_is_constant(wp) && !te_tensor_is_constant(xb));
    te_conv2d_params p = te_conv2d_default_params();
    p.pad[0] = p.pad[1] = p.pad[2] = p.pad[3] = 1;
    te_epilogue ep = {.bias = b, .residual = z, .act = te_act_default(TE_ACT_SIGMOID)};
    te_algo_parts parts;
    te_tensor *y = te_conv2d_nchwc(&C, "cb", xb, wp, 7, &p, &ep, &parts);
    GRAPH_IS(te_layout_from_nchwc(&C, "y", y, 7),
        "float32[1, 3, 6, 6] x = placeholder\n"
        "float32[1, 1, 6, 6, 4] xb[n, cb, h, w, ci] = select(cb * 4 + ci < 3, "
        "x[n, min(cb * 4 + ci, 2), h, w], 0.0)\n"
        "float32[1, 1, 8, 8, 4] cb.pad[n, cb, h, w, ci] = select(1 <= h && h < 7 && 1 <= w && "
        "w < 7, xb[n, cb, min(max(h - 1, 0), 5), min(max(w - 1, 0), 5), ci], 0.0)\n"
        "float32[7, 3, 3, 3] w = constant\n"
        "float32[2, 1, 3, 3, 4, 4] wp[ocb, icb, kh, kw, ici, oci] = select(ocb * 4 + oci < 7 && "
        "icb * 4 + ici < 3, w[min(ocb * 4 + oci, 6), min(icb * 4 + ici, 2), kh, kw], 0.0)\n"
        "float32[1, 2, 6, 6, 4] cb.acc[n, ocb, oh, ow, oci] = sum(kh<3, kw<3, ici<4: "
        "cb.pad[n, 0, oh + kh, ow + kw, ici] * wp[ocb, 0, kh, kw, ici, oci])\n"
        "float32[7] b = placeholder\n"
        "float32[1, 2, 6, 6, 4] z = placeholder\n"
        "float32[1, 2, 6, 6, 4] cb[n, ocb, oh, ow, oci] = select(ocb * 4 + oci < 7, 1.0 / (1.0 + "
        "exp(0.0 - (cb.acc[n, ocb, oh, ow, oci] + b[min(ocb * 4 + oci, 6)] + "
        "z[n, ocb, oh, ow, oci]))), 0.0)\n"
        "float32[1, 7, 6, 6] y[n, c, h, w] = cb[n, c / 4, h, w, c % 4]\n");
    CHECK(parts.pad && parts.main && parts.epilogue == y);

    /* plain NCHW input (bi = 1), grouped: 2 groups of 2 output blocks, stride 2 */
    te_tensor *x8 = ph("x8", SHAPE(1, 8, 5, 5)), *wg = ph("wg", SHAPE(16, 4, 1, 1));
    te_tensor *wgp = te_conv2d_pack_weight(&C, "wgp", wg, 1, 4, false);
    p = te_conv2d_default_params();
    p.groups = 2;
    p.stride[0] = p.stride[1] = 2;
    GRAPH_IS(te_conv2d_nchwc(&C, "g", x8, wgp, 16, &p, NULL, NULL),
        "float32[1, 8, 5, 5] x8 = placeholder\n"
        "float32[16, 4, 1, 1] wg = placeholder\n"
        "float32[4, 4, 1, 1, 1, 4] wgp[ocb, icb, kh, kw, ici, oci] = wg[ocb * 4 + oci, icb + ici, "
        "kh, kw]\n"
        "float32[1, 4, 3, 3, 4] g[n, ocb, oh, ow, oci] = sum(icb<4: x8[n, ocb / 2 * 4 + icb, "
        "oh * 2, ow * 2] * wgp[ocb, icb, 0, 0, 0, oci])\n");

    /* depthwise: 8 channels in blocks of 4 */
    te_tensor *xd = ph("xd", SHAPE(1, 2, 5, 5, 4)), *wd = ph("wd", SHAPE(8, 1, 3, 3));
    te_tensor *wdp = te_conv2d_pack_weight(&C, "wdp", wd, 4, 4, true);
    p = te_conv2d_default_params();
    p.groups = 8;
    GRAPH_IS(te_conv2d_nchwc(&C, "dw", xd, wdp, 8, &p, NULL, NULL),
        "float32[1, 2, 5, 5, 4] xd = placeholder\n"
        "float32[8, 1, 3, 3] wd = placeholder\n"
        "float32[2, 1, 3, 3, 1, 4] wdp[ocb, icb, kh, kw, ici, oci] = wd[ocb * 4 + oci, icb + ici, "
        "kh, kw]\n"
        "float32[1, 2, 3, 3, 4] dw[n, ocb, oh, ow, oci] = sum(kh<3, kw<3: xd[n, ocb, oh + kh, "
        "ow + kw, oci] * wdp[ocb, 0, kh, kw, 0, oci])\n");

    /* must-fail */
    CHECK_FAILS(te_conv2d_nchwc(&C, "bad", xb, wp, 9, &p, NULL, NULL),
                "conv2d_nchwc 'bad': 9 output channels but weight 'wp' has 2 blocks of 4 lanes");
    p = te_conv2d_default_params();
    te_tensor *wp8 = te_conv2d_pack_weight(&C, "wp8", w, 8, 4, false);
    CHECK_FAILS(te_conv2d_nchwc(&C, "bad", xb, wp8, 7, &p, NULL, NULL),
                "weight 'wp8' is packed for input blocks of 8 lanes but input 'xb' has 4");
    p.groups = 8;
    te_tensor *wdp8 = te_conv2d_pack_weight(&C, "wdp8", wd, 8, 8, true);
    CHECK_FAILS(te_conv2d_nchwc(&C, "bad", xd, wdp8, 8, &p, NULL, NULL),
                "a depthwise weight must be [C/x, 1, KH, KW, 1, x] with the input's block 4 as x");
    CHECK_FAILS(te_conv2d_pack_weight(&C, "bad", w, 4, 4, true),
                "pack_weight 'bad': a depthwise weight has 1 input channel per group, 'w' has 3");
    CHECK_FAILS(te_layout_from_nchwc(&C, "bad", xb, 5), "5 channels do not end in the last of 1 "
                "blocks of 4 lanes");
    CHECK_FAILS(te_layout_to_nchwc(&C, "bad", x, 0), "block of 0 lanes");
}

static void test_dense(void) {
    fresh();
    te_tensor *a = ph("a", SHAPE(2, 1, 4, 5)), *b = ph("b", SHAPE(3, 5, 6));
    GRAPH_IS(te_matmul(&C, "mm", a, b, &(te_matmul_params){false, false}, NULL, NULL),
        "float32[2, 1, 4, 5] a = placeholder\n"
        "float32[3, 5, 6] b = placeholder\n"
        "float32[2, 3, 4, 6] mm[b0, b1, m, n] = sum(k<5: a[b0, 0, m, k] * b[b1, k, n])\n");
    te_tensor *at = ph("at", SHAPE(5, 4)), *bt = ph("bt", SHAPE(6, 5));
    te_tensor *bias = ph("bias", SHAPE(6));
    te_epilogue ep = {.bias = bias, .act = te_act_default(TE_ACT_GELU)};
    GRAPH_IS(te_matmul(&C, "t", at, bt, &(te_matmul_params){true, true}, &ep, NULL),
        "float32[5, 4] at = placeholder\n"
        "float32[6, 5] bt = placeholder\n"
        "float32[4, 6] t.acc[m, n] = sum(k<5: at[k, m] * bt[n, k])\n"
        "float32[6] bias = placeholder\n"
        "float32[4, 6] t[m, n] = (t.acc[m, n] + bias[n]) * 0.5 * (1.0 + erf((t.acc[m, n] + "
        "bias[n]) * 0.707106781))\n");
    te_tensor *x = ph("x", SHAPE(4, 5));
    te_algo_parts parts;
    te_tensor *d = te_dense(&C, "fc", x, bt, NULL, &parts);
    GRAPH_IS(d, "float32[4, 5] x = placeholder\n"
                "float32[6, 5] bt = placeholder\n"
                "float32[4, 6] fc[m, n] = sum(k<5: x[m, k] * bt[n, k])\n");
    CHECK(parts.main == d && parts.out == d);
    CHECK_FAILS(te_matmul(&C, "bad", a, bt, &(te_matmul_params){false, false}, NULL, NULL),
                "matmul 'bad': 'a' has 5 columns but 'bt' has 6 rows");
    te_tensor *b4 = ph("b4", SHAPE(4, 5, 6));
    CHECK_FAILS(te_matmul(&C, "bad", ph("a3", SHAPE(3, 4, 5)), b4,
                          &(te_matmul_params){false, false}, NULL, NULL),
                "matmul 'bad': batch dim 0 is 3 in 'a3' and 4 in 'b4'");
    CHECK_FAILS(te_dense(&C, "bad", a, bt, NULL, NULL), "dense 'bad': input 'a' has 4 dims");
}

static void test_pool(void) {
    fresh();
    te_tensor *x = ph("x", SHAPE(1, 2, 7, 7));
    /* 3x3 stride 2 pad 1, ceil mode: the windows count 1 to 3 elements per dim */
    te_pool2d_params p = te_pool2d_default_params(TE_POOL_AVG, 3, 3);
    p.stride[0] = p.stride[1] = 2;
    p.pad[0] = p.pad[1] = p.pad[2] = p.pad[3] = 1;
    GRAPH_IS(te_pool2d(&C, "ap", x, &p, NULL),
        "float32[1, 2, 7, 7] x = placeholder\n"
        "float32[1, 2, 9, 9] ap.pad[n, c, h, w] = select(1 <= h && h < 8 && 1 <= w && w < 8, "
        "x[n, c, min(max(h - 1, 0), 6), min(max(w - 1, 0), 6)], 0.0)\n"
        "float32[1, 2, 4, 4] ap.sum[n, c, oh, ow] = sum(kh<3, kw<3: ap.pad[n, c, oh * 2 + kh, "
        "ow * 2 + kw])\n"
        "float32[1, 2, 4, 4] ap[n, c, oh, ow] = ap.sum[n, c, oh, ow] / (float32(max(min(3, 8 - "
        "oh * 2) - max(0, 1 - oh * 2), 0)) * float32(max(min(3, 8 - ow * 2) - max(0, 1 - ow * 2), "
        "0)))\n");
    /* counting the padding: every window covers 9 (padded) elements */
    p.count_include_pad = true;
    GRAPH_IS(te_pool2d(&C, "ai", x, &p, NULL),
        "float32[1, 2, 7, 7] x = placeholder\n"
        "float32[1, 2, 9, 9] ai.pad[n, c, h, w] = select(1 <= h && h < 8 && 1 <= w && w < 8, "
        "x[n, c, min(max(h - 1, 0), 6), min(max(w - 1, 0), 6)], 0.0)\n"
        "float32[1, 2, 4, 4] ai.sum[n, c, oh, ow] = sum(kh<3, kw<3: ai.pad[n, c, oh * 2 + kh, "
        "ow * 2 + kw])\n"
        "float32[1, 2, 4, 4] ai[n, c, oh, ow] = ai.sum[n, c, oh, ow] / 9.0\n");
    /* max, ceil mode reaching past the end padding: the padded tensor grows by the overhang */
    p = te_pool2d_default_params(TE_POOL_MAX, 2, 2);
    p.stride[0] = p.stride[1] = 2;
    p.ceil_mode = true;
    te_algo_parts parts;
    GRAPH_IS(te_pool2d(&C, "mp", x, &p, &parts),
        "float32[1, 2, 7, 7] x = placeholder\n"
        "float32[1, 2, 8, 8] mp.pad[n, c, h, w] = select(h < 7 && w < 7, x[n, c, min(h, 6), "
        "min(w, 6)], -inf)\n"
        "float32[1, 2, 4, 4] mp[n, c, oh, ow] = max(kh<2, kw<2: mp.pad[n, c, oh * 2 + kh, "
        "ow * 2 + kw])\n");
    CHECK(parts.main == parts.out && parts.pad && !parts.epilogue);
    /* floor mode, no padding: no pad compute; dilation 2 */
    p.ceil_mode = false;
    p.dilation[0] = p.dilation[1] = 2;
    GRAPH_IS(te_pool2d(&C, "md", x, &p, &parts),
        "float32[1, 2, 7, 7] x = placeholder\n"
        "float32[1, 2, 3, 3] md[n, c, oh, ow] = max(kh<2, kw<2: x[n, c, oh * 2 + kh * 2, "
        "ow * 2 + kw * 2])\n");
    CHECK(!parts.pad);
    GRAPH_IS(te_global_pool(&C, "gap", x, TE_POOL_AVG, NULL),
        "float32[1, 2, 7, 7] x = placeholder\n"
        "float32[1, 2, 1, 1] gap.sum[n, c, h, w] = sum(rh<7, rw<7: x[n, c, rh, rw])\n"
        "float32[1, 2, 1, 1] gap[n, c, h, w] = gap.sum[n, c, h, w] / 49.0\n");
    GRAPH_IS(te_global_pool(&C, "gmp", ph("x3", SHAPE(2, 3, 5)), TE_POOL_MAX, NULL),
        "float32[2, 3, 5] x3 = placeholder\n"
        "float32[2, 3, 1] gmp[n, c, s0] = max(r0<5: x3[n, c, r0])\n");
    p = te_pool2d_default_params(TE_POOL_MAX, 3, 3);
    p.pad[1] = 3;
    CHECK_FAILS(te_pool2d(&C, "bad", x, &p, NULL),
                "pool2d 'bad': pads in spatial dim 1 (3, 0) must be in [0, 3), smaller than the "
                "window");
    p = te_pool2d_default_params(TE_POOL_MAX, 8, 3);
    CHECK_FAILS(te_pool2d(&C, "bad", x, &p, NULL),
                "pool2d 'bad': the window spans 8 in spatial dim 0 but the padded input is only 7");
    p = te_pool2d_default_params(TE_POOL_MAX, 3, 3);
    p.stride[0] = 0;
    CHECK_FAILS(te_pool2d(&C, "bad", x, &p, NULL), "kernel 3, stride 0, dilation 1");
    CHECK_FAILS(te_global_pool(&C, "bad", ph("v", SHAPE(4, 4)), TE_POOL_AVG, NULL),
                "global_pool 'bad': input 'v' must be float32 [N, C, spatial...]");
}

static void test_softmax_layer_norm(void) {
    fresh();
    te_tensor *x = ph("x", SHAPE(2, 3, 4));
    te_algo_parts parts;
    GRAPH_IS(te_softmax(&C, "sm", x, 1, &parts),
        "float32[2, 3, 4] x = placeholder\n"
        "float32[2, 1, 4] sm.max[d0, d1, d2] = max(k<3: x[d0, k, d2])\n"
        "float32[2, 1, 4] sm.sum[d0, d1, d2] = sum(k<3: exp(x[d0, k, d2] - sm.max[d0, 0, d2]))\n"
        "float32[2, 3, 4] sm[d0, d1, d2] = exp(x[d0, d1, d2] - sm.max[d0, 0, d2]) / "
        "sm.sum[d0, 0, d2]\n");
    CHECK(parts.stats[0] && parts.stats[1] && parts.main == parts.out);
    CHECK_FAILS(te_softmax(&C, "bad", x, 3, NULL),
                "softmax 'bad': axis 3 is out of range for 3 dims");
    CHECK_FAILS(te_softmax(&C, "bad", x, -4, NULL), "axis -4 is out of range");

    te_tensor *s = ph("s", SHAPE(3, 1)), *b = ph("b", SHAPE(4));
    GRAPH_IS(te_layer_norm(&C, "ln", x, s, b, -2, 0.5f, &parts),
        "float32[2, 3, 4] x = placeholder\n"
        "float32[2, 1, 1] ln.mean[d0, d1, d2] = sum(r0<3, r1<4: x[d0, r0, r1] * 0.0833333333)\n"
        "float32[2, 1, 1] ln.var[d0, d1, d2] = sum(r0<3, r1<4: (x[d0, r0, r1] - ln.mean[d0, 0, 0]) "
        "* (x[d0, r0, r1] - ln.mean[d0, 0, 0]) * 0.0833333333)\n"
        "float32[3, 1] s = placeholder\n"
        "float32[4] b = placeholder\n"
        "float32[2, 3, 4] ln[d0, d1, d2] = (x[d0, d1, d2] - ln.mean[d0, 0, 0]) * (1.0 / "
        "sqrt(ln.var[d0, 0, 0] + 0.5)) * s[d1, 0] + b[d2]\n");
    CHECK(parts.stats[0] && !strcmp(parts.stats[1]->name, "ln.var"));
    CHECK_FAILS(te_layer_norm(&C, "bad", x, ph("s5", SHAPE(5)), NULL, -1, 1e-5f, NULL),
                "layer_norm 'bad': scale 's5' must be float32 and broadcast to the normalized "
                "dims (x's dims from axis 2 on)");
    CHECK_FAILS(te_layer_norm(&C, "bad", x, s, ph("b2", SHAPE(2, 3, 4)), 1, 1e-5f, NULL),
                "layer_norm 'bad': bias 'b2'");
    CHECK_FAILS(te_layer_norm(&C, "bad", x, NULL, NULL, 1, 1e-5f, NULL), "scale is missing");
}

/* ---- running out of memory ---- */

/* Fail each allocation of building a fused conv in turn: a NULL result with WPK_ERR_NOMEM,
 * never a crash (the sanitizer run checks for leaks). */
static void test_out_of_memory(void) {
    bool built = false;
    for (long n = 1; n < 10000 && !built; n++) {
        fresh();
        te_tensor *x = ph("x", SHAPE(1, 3, 8, 8)), *w = ph("w", SHAPE(8, 3, 3, 3));
        te_tensor *b = ph("b", SHAPE(8));
        te_conv2d_params p = te_conv2d_default_params();
        p.pad[0] = p.pad[1] = p.pad[2] = p.pad[3] = 1;
        te_epilogue ep = {.bias = b, .act = te_act_default(TE_ACT_HARD_SWISH)};
        wpk_alloc_fail_at(n);
        te_tensor *y = x && w && b ? te_conv2d_nchw(&C, "conv", x, w, &p, &ep, NULL) : NULL;
        bool failed = wpk_alloc_count() >= n;
        wpk_alloc_fail_at(0);
        if (y) {
            built = !failed;
            continue;
        }
        if (!C.oom || ctx->status != WPK_ERR_NOMEM) {
            fprintf(stderr, "allocation %ld failed without an out-of-memory report: %s\n", n,
                    wpk_context_error(ctx));
            check_failures++;
            break;
        }
    }
    CHECK(built);
}

int main(void) {
    ctx = wpk_context_create();
    te_ctx_init(&C, ctx);
    test_constructors();
    test_printer();
    test_conv2d();
    test_activations();
    test_conv2d_nchwc();
    test_dense();
    test_pool();
    test_softmax_layer_norm();
    test_out_of_memory();
    te_ctx_free(&C);
    wpk_context_free(ctx);
    CHECK_DONE();
}
