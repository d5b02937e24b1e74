/* test_fused_groups.c -- the fusion group kernels (wpk::FusedDwPw, wpk::FusedConvPool) against
 * the unfused reference ops they replace (Conv, activation, Add, MaxPool/AveragePool) on random
 * data over strides, pads, dilations, groups, residuals and pool modes, on one thread and on
 * several; and their must-fail cases (FusedElementwise's too: tests/cli/test_fusion_search.py
 * checks its chains against ONNX Runtime). */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/graph.h"
#include "ops/activation.h"

static uint32_t seed = 77;
static float rnd(void) {
    seed = seed * 1664525u + 1013904223u;
    return (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static ir_tensor tensor(int64_t n, int64_t c, int64_t h, int64_t w, bool fill) {
    ir_tensor t = {.dtype = WPK_DTYPE_FLOAT32, .ndim = 4, .dims = {n, c, h, w}};
    if (c < 0) { /* a 1-D bias of n values */
        t.ndim = 1;
        t.dims[1] = t.dims[2] = t.dims[3] = 0;
    }
    t.data = calloc((size_t)ir_numel(&t) + 1, sizeof(float));
    for (int64_t i = 0; fill && i < ir_numel(&t); i++) ((float *)t.data)[i] = rnd();
    return t;
}

static ir_node node(ir_op op, int nin, ir_attr *attrs, int nattr) {
    static int ins[8];
    static int outs[1];
    ir_node n = {.name = "group", .nin = nin, .nout = 1, .in = ins, .out = outs,
                 .attrs = attrs, .nattr = nattr, .opset = 17};
    ir_node_set_op(&n, op);
    return n;
}

/* Shape function then kernel into a fresh output. */
static wpk_status run(wpk_context *ctx, const ir_node *n, ir_tensor **in, ir_tensor *y) {
    const ir_op_info *info = ir_op_get(n->op);
    *y = (ir_tensor){0};
    ir_tensor *ys[1] = {y};
    wpk_status st = info->shape(ctx, n, in, ys);
    if (st) return st;
    y->data = calloc((size_t)ir_numel(y) + 1, sizeof(float));
    return info->ref(ctx, n, in, ys);
}

static ir_attr ints(const char *name, int n, int64_t *v) {
    return (ir_attr){.name = name, .kind = IR_ATTR_INTS, .n = n, .ints = v};
}
static ir_attr one(const char *name, int64_t v) {
    return (ir_attr){.name = name, .kind = IR_ATTR_INT, .i = v};
}
static ir_attr str(const char *name, const char *s) {
    return (ir_attr){.name = name, .kind = IR_ATTR_STRING, .s = s};
}
static ir_attr flt(const char *name, float f) {
    return (ir_attr){.name = name, .kind = IR_ATTR_FLOAT, .f = f};
}

static void check_close(const ir_tensor *got, const ir_tensor *want, const char *what) {
    bool same = got->ndim == want->ndim;
    for (int i = 0; same && i < got->ndim; i++) same = got->dims[i] == want->dims[i];
    CHECK(same);
    if (!same) return;
    double worst = 0;
    for (int64_t i = 0; i < ir_numel(want); i++) {
        double a = ((float *)got->data)[i], b = ((float *)want->data)[i];
        double err = fabs(a - b) / (1.0 + fabs(b));
        if (err > worst || err != err) worst = err != err ? INFINITY : err;
    }
    if (worst > 1e-5) fprintf(stderr, "%s: relative error %g\n", what, worst);
    CHECK(worst <= 1e-5);
}

/* y = act(x + z) elementwise (z may be NULL), in place */
static void finish(ir_tensor *y, const ir_tensor *z, const act_params *act) {
    float *d = y->data;
    for (int64_t i = 0; z && i < ir_numel(y); i++) d[i] += ((float *)z->data)[i];
    act_apply(act, d, ir_numel(y));
}

typedef struct dwpw_case {
    int64_t n, c, h, w, k, kh, kw, stride, pad, dil;
    bool bias, residual;
    const char *dw_act, *pw_act;
} dwpw_case;

static void test_dwpw(wpk_context *ctx, const dwpw_case *t) {
    ir_tensor x = tensor(t->n, t->c, t->h, t->w, true);
    ir_tensor wdw = tensor(t->c, 1, t->kh, t->kw, true), bdw = tensor(t->c, -1, 0, 0, true);
    ir_tensor wpw = tensor(t->k, t->c, 1, 1, true), bpw = tensor(t->k, -1, 0, 0, true);
    int64_t st[2] = {t->stride, t->stride}, pads[4] = {t->pad, t->pad, t->pad, t->pad};
    int64_t dil[2] = {t->dil, t->dil};
    /* unfused: Conv (depthwise), act, Conv (1x1), + Z, act */
    ir_attr dw_attrs[] = {ints("strides", 2, st), ints("pads", 4, pads), ints("dilations", 2, dil),
                          one("group", t->c)};
    ir_node dw = node(IR_OP_CONV, t->bias ? 3 : 2, dw_attrs, 4);
    ir_tensor mid, ref;
    ir_tensor *dw_in[3] = {&x, &wdw, t->bias ? &bdw : NULL};
    CHECK(run(ctx, &dw, dw_in, &mid) == WPK_OK);
    act_params dact = {.kind = ACT_NONE}, pact = {.kind = ACT_NONE};
    if (t->dw_act && !strcmp(t->dw_act, "Clip")) dact = (act_params){ACT_CLIP, 0, 0, 0.0f, 6.0f};
    if (t->dw_act && !strcmp(t->dw_act, "Relu")) dact.kind = ACT_RELU;
    if (t->pw_act && !strcmp(t->pw_act, "Relu")) pact.kind = ACT_RELU;
    finish(&mid, NULL, &dact);
    ir_node pw = node(IR_OP_CONV, t->bias ? 3 : 2, NULL, 0);
    ir_tensor *pw_in[3] = {&mid, &wpw, t->bias ? &bpw : NULL};
    CHECK(run(ctx, &pw, pw_in, &ref) == WPK_OK);
    ir_tensor z = tensor(ref.dims[0], ref.dims[1], ref.dims[2], ref.dims[3], true);
    finish(&ref, t->residual ? &z : NULL, &pact);
    /* fused */
    ir_attr attrs[12];
    int na = 0;
    attrs[na++] = ints("dw_strides", 2, st);
    attrs[na++] = ints("dw_pads", 4, pads);
    attrs[na++] = ints("dw_dilations", 2, dil);
    attrs[na++] = one("dw_group", t->c);
    if (t->dw_act) attrs[na++] = str("dw_activation", t->dw_act);
    if (t->dw_act && !strcmp(t->dw_act, "Clip")) {
        attrs[na++] = flt("dw_clip_min", 0.0f);
        attrs[na++] = flt("dw_clip_max", 6.0f);
    }
    if (t->pw_act) attrs[na++] = str("activation", t->pw_act);
    ir_tensor *in[6] = {&x, &wdw, t->bias ? &bdw : NULL, &wpw, t->bias ? &bpw : NULL,
                        t->residual ? &z : NULL};
    ir_node f = node(IR_OP_FUSED_DW_PW, t->residual ? 6 : 5, attrs, na);
    for (int threads = 1; threads <= 3; threads += 2) {
        omp_set_num_threads(threads);
        ir_tensor y;
        CHECK(run(ctx, &f, in, &y) == WPK_OK);
        check_close(&y, &ref, "FusedDwPw");
        free(y.data);
    }
    free(x.data), free(wdw.data), free(bdw.data), free(wpw.data), free(bpw.data);
    free(mid.data), free(ref.data), free(z.data);
}

typedef struct conv_pool_case {
    int64_t n, c, h, w, k, kh, stride, pad, group;
    const char *pool;
    int64_t pk, ps, pp, ceil, include_pad;
    const char *act;
} conv_pool_case;

static void test_conv_pool(wpk_context *ctx, const conv_pool_case *t) {
    ir_tensor x = tensor(t->n, t->c, t->h, t->w, true);
    ir_tensor w = tensor(t->k, t->c / t->group, t->kh, t->kh, true);
    ir_tensor b = tensor(t->k, -1, 0, 0, true);
    int64_t st[2] = {t->stride, t->stride}, pads[4] = {t->pad, t->pad, t->pad, t->pad};
    int64_t pk[2] = {t->pk, t->pk}, ps[2] = {t->ps, t->ps};
    int64_t pp[4] = {t->pp, t->pp, t->pp, t->pp};
    ir_attr conv_attrs[] = {ints("strides", 2, st), ints("pads", 4, pads), one("group", t->group)};
    ir_node cv = node(IR_OP_CONV, 3, conv_attrs, 3);
    ir_tensor mid, ref;
    ir_tensor *cin[3] = {&x, &w, &b};
    CHECK(run(ctx, &cv, cin, &mid) == WPK_OK);
    act_params act = {.kind = t->act ? ACT_RELU : ACT_NONE};
    finish(&mid, NULL, &act);
    ir_attr pool_attrs[] = {ints("kernel_shape", 2, pk), ints("strides", 2, ps),
                            ints("pads", 4, pp), one("ceil_mode", t->ceil),
                            one("count_include_pad", t->include_pad)};
    bool is_max = !strcmp(t->pool, "MaxPool");
    ir_node pool = node(is_max ? IR_OP_MAX_POOL : IR_OP_AVERAGE_POOL, 1, pool_attrs,
                        is_max ? 4 : 5);
    ir_tensor *pin[1] = {&mid};
    CHECK(run(ctx, &pool, pin, &ref) == WPK_OK);
    ir_attr attrs[] = {ints("strides", 2, st), ints("pads", 4, pads), one("group", t->group),
                       ints("pool_kernel_shape", 2, pk), ints("pool_strides", 2, ps),
                       ints("pool_pads", 4, pp), one("pool_ceil_mode", t->ceil),
                       one("pool_count_include_pad", t->include_pad), str("pool_op", t->pool),
                       str("activation", "Relu")};
    ir_node f = node(IR_OP_FUSED_CONV_POOL, 3, attrs, t->act ? 10 : 9);
    for (int threads = 1; threads <= 3; threads += 2) {
        omp_set_num_threads(threads);
        ir_tensor y;
        CHECK(run(ctx, &f, cin, &y) == WPK_OK);
        check_close(&y, &ref, "FusedConvPool");
        free(y.data);
    }
    free(x.data), free(w.data), free(b.data), free(mid.data), free(ref.data);
}

static void test_must_fail(wpk_context *ctx) {
    ir_tensor x = tensor(1, 4, 6, 6, true), wdw = tensor(4, 1, 3, 3, true);
    ir_tensor w3 = tensor(8, 4, 3, 3, true), y = {0};
    ir_tensor *ys[1] = {&y};
    /* a second stage that is not pointwise */
    ir_tensor *in[5] = {&x, &wdw, NULL, &w3, NULL};
    ir_node f = node(IR_OP_FUSED_DW_PW, 5, NULL, 0);
    CHECK_ERR(ctx, ir_op_get(f.op)->shape(ctx, &f, in, ys), WPK_ERR_MODEL, "W expects");
    ir_attr grp = one("dw_group", 4);
    f = node(IR_OP_FUSED_DW_PW, 5, &grp, 1);
    CHECK_ERR(ctx, ir_op_get(f.op)->shape(ctx, &f, in, ys), WPK_ERR_MODEL, "pointwise");
    /* an unknown pool */
    ir_attr bad = str("pool_op", "LpPool");
    ir_node g = node(IR_OP_FUSED_CONV_POOL, 2, &bad, 1);
    ir_tensor *cin[2] = {&x, &w3};
    CHECK_ERR(ctx, ir_op_get(g.op)->shape(ctx, &g, cin, ys), WPK_ERR_MODEL, "pool_op");
    /* a chain step it does not fuse, and an operand that would broadcast */
    const char *ops[2] = {"Relu", "Softmax"};
    int64_t operands[2] = {-1, -1}, swapped[2] = {0, 0};
    ir_attr chain[3] = {{.name = "ops", .kind = IR_ATTR_STRINGS, .n = 2, .strs = ops},
                        ints("operands", 2, operands), ints("swapped", 2, swapped)};
    ir_node e = node(IR_OP_FUSED_ELEMENTWISE, 1, chain, 3);
    ir_tensor *ein[2] = {&x, &wdw};
    CHECK_ERR(ctx, ir_op_get(e.op)->shape(ctx, &e, ein, ys), WPK_ERR_MODEL,
              "'Softmax' is not an elementwise op it fuses");
    ops[1] = "Add";
    operands[1] = 1;
    e = node(IR_OP_FUSED_ELEMENTWISE, 2, chain, 3);
    CHECK_ERR(ctx, ir_op_get(e.op)->shape(ctx, &e, ein, ys), WPK_ERR_MODEL,
              "X's shape or one element");
    free(x.data), free(wdw.data), free(w3.data);
}

int main(void) {
    wpk_context *ctx = wpk_context_create();
    static const dwpw_case dwpw[] = {
        {1, 8, 9, 11, 16, 3, 3, 1, 1, 1, true, false, "Clip", NULL},
        {2, 5, 12, 7, 3, 3, 3, 2, 1, 1, true, true, "Relu", "Relu"},
        {1, 13, 10, 10, 6, 5, 3, 1, 2, 2, false, true, NULL, NULL},
        {1, 96, 14, 14, 24, 3, 3, 2, 1, 1, true, false, "Clip", NULL},
        {1, 600, 7, 70, 20, 3, 3, 1, 1, 1, true, true, "Clip", NULL}, /* several strips */
    };
    for (size_t i = 0; i < sizeof dwpw / sizeof dwpw[0]; i++) test_dwpw(ctx, &dwpw[i]);
    static const conv_pool_case cp[] = {
        {1, 3, 16, 16, 8, 3, 1, 1, 1, "MaxPool", 2, 2, 0, 0, 0, "Relu"},
        {2, 4, 15, 13, 6, 3, 2, 1, 2, "MaxPool", 3, 2, 1, 1, 0, NULL},
        {1, 5, 12, 12, 4, 1, 1, 0, 1, "AveragePool", 3, 2, 1, 0, 1, "Relu"},
        {1, 5, 12, 12, 4, 3, 1, 1, 1, "AveragePool", 3, 2, 1, 0, 0, NULL},
        {1, 16, 27, 27, 9, 3, 1, 0, 1, "MaxPool", 3, 2, 0, 1, 0, "Relu"},
    };
    for (size_t i = 0; i < sizeof cp / sizeof cp[0]; i++) test_conv_pool(ctx, &cp[i]);
    test_must_fail(ctx);
    wpk_context_free(ctx);
    CHECK_DONE();
}
