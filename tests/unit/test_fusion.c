/* test_fusion.c -- the fused ops' kernels (FusedConv, FusedGemm, FusedMatMul) against the unfused
 * reference ops they replace, on random data, with every activation; their must-fail cases;
 * and the fold-batchnorm + fuse-epilogue passes on a hand-built graph: what they rewrite, that
 * the rewritten graph computes what the original did, and that running out of memory at any
 * allocation inside them fails cleanly. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "check.h"
#include "ir/eval.h"
#include "ir/graph.h"
#include "ir/verify.h"
#include "passes/pass.h"

/* ---- nodes and tensors ---- */

static ir_node make_node(ir_op op, int nin, int nout, int nattr, ir_attr *attrs) {
    const ir_op_info *info = ir_op_get(op);
    ir_node n = {0};
    n.name = "n0";
    n.op_type = info->name;
    n.domain = info->domain;
    n.op = op;
    n.opset = 17;
    n.nin = nin;
    n.nout = nout;
    n.nattr = nattr;
    n.attrs = attrs;
    return n;
}

static ir_tensor f32(int ndim, const int64_t *dims, float *data) {
    ir_tensor t = {.dtype = WPK_DTYPE_FLOAT32, .ndim = ndim, .data = data};
    for (int i = 0; i < ndim; i++) t.dims[i] = dims[i];
    return t;
}

static uint32_t seed = 4242;
static float rnd(void) {
    seed = seed * 1664525u + 1013904223u;
    return (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}
static float *rnd_buf(int64_t count, float scale) {
    float *p = malloc(sizeof(float) * (size_t)(count + 1));
    for (int64_t i = 0; i < count; i++) p[i] = scale * rnd();
    return p;
}

/* Shape function, then the reference kernel into a fresh output (free its data). */
static wpk_status run(wpk_context *ctx, const ir_node *n, ir_tensor **in, ir_tensor *out) {
    const ir_op_info *info = ir_op_get(n->op);
    *out = (ir_tensor){0};
    ir_tensor *outs[1] = {out};
    wpk_status st = info->shape(ctx, n, in, outs);
    if (st) return st;
    out->data = calloc((size_t)ir_numel(out) + 1, sizeof(float));
    return info->ref(ctx, n, in, outs);
}

/* y = op(a) or op(a, b) with an unfused op and its attributes; replaces *a (freed). */
static void apply(wpk_context *ctx, ir_op op, int nattr, ir_attr *attrs, ir_tensor *a,
                  ir_tensor *b) {
    ir_node n = make_node(op, b ? 2 : 1, 1, nattr, attrs);
    ir_tensor *in[2] = {a, b}, y;
    CHECK(run(ctx, &n, in, &y) == WPK_OK);
    free(a->data);
    *a = y;
}

static bool near(const ir_tensor *got, const ir_tensor *want, float tol, const char *what) {
    if (!ir_same_shape(got, want)) {
        fprintf(stderr, "  %s: shapes differ\n", what);
        return false;
    }
    const float *g = got->data, *w = want->data;
    for (int64_t i = 0; i < ir_numel(want); i++)
        if (!(fabsf(g[i] - w[i]) <= tol * (1.0f + fabsf(w[i])))) {
            fprintf(stderr, "  %s: element %lld: got %.9g, want %.9g\n", what, (long long)i,
                    g[i], w[i]);
            return false;
        }
    return true;
}

/* ---- activations: fused attributes and the unfused ops that compute the same ---- */

typedef struct act_case {
    const char *name;
    float alpha, beta, lo, hi; /* as the fused attributes */
} act_case;

static const act_case acts[] = {
    {NULL, 0, 0, 0, 0},          {"Relu", 0, 0, 0, 0},    {"LeakyRelu", 0.1f, 0, 0, 0},
    {"Clip", 0, 0, -0.5f, 0.75f}, {"HardSigmoid", 0.3f, 0.4f, 0, 0},
    {"HardSwish", 0, 0, 0, 0},   {"Sigmoid", 0, 0, 0, 0}, {"SiLU", 0, 0, 0, 0},
    {"Gelu", 0, 0, 0, 0},        {"Tanh", 0, 0, 0, 0},
};

/* The fused node's activation attributes into attrs (after *nattr existing ones). */
static void act_attrs(const act_case *a, ir_attr *attrs, int *nattr) {
    if (!a->name) return;
    attrs[(*nattr)++] = (ir_attr){.name = "activation", .kind = IR_ATTR_STRING, .s = a->name};
    if (!strcmp(a->name, "LeakyRelu") || !strcmp(a->name, "HardSigmoid"))
        attrs[(*nattr)++] = (ir_attr){.name = "alpha", .kind = IR_ATTR_FLOAT, .f = a->alpha};
    if (!strcmp(a->name, "HardSigmoid"))
        attrs[(*nattr)++] = (ir_attr){.name = "beta", .kind = IR_ATTR_FLOAT, .f = a->beta};
    if (!strcmp(a->name, "Clip")) {
        attrs[(*nattr)++] = (ir_attr){.name = "clip_min", .kind = IR_ATTR_FLOAT, .f = a->lo};
        attrs[(*nattr)++] = (ir_attr){.name = "clip_max", .kind = IR_ATTR_FLOAT, .f = a->hi};
    }
}

/* *y = act(*y) with the unfused ops. */
static void unfused_act(wpk_context *ctx, const act_case *a, ir_tensor *y) {
    if (!a->name) return;
    ir_attr at[2];
    if (!strcmp(a->name, "Relu")) apply(ctx, IR_OP_RELU, 0, NULL, y, NULL);
    if (!strcmp(a->name, "LeakyRelu")) {
        at[0] = (ir_attr){.name = "alpha", .kind = IR_ATTR_FLOAT, .f = a->alpha};
        apply(ctx, IR_OP_LEAKY_RELU, 1, at, y, NULL);
    }
    if (!strcmp(a->name, "Clip")) {
        float lo = a->lo, hi = a->hi;
        ir_tensor tl = f32(0, NULL, &lo), th = f32(0, NULL, &hi), out;
        ir_node n = make_node(IR_OP_CLIP, 3, 1, 0, NULL);
        ir_tensor *in[3] = {y, &tl, &th};
        CHECK(run(ctx, &n, in, &out) == WPK_OK);
        free(y->data);
        *y = out;
    }
    if (!strcmp(a->name, "HardSigmoid")) {
        at[0] = (ir_attr){.name = "alpha", .kind = IR_ATTR_FLOAT, .f = a->alpha};
        at[1] = (ir_attr){.name = "beta", .kind = IR_ATTR_FLOAT, .f = a->beta};
        apply(ctx, IR_OP_HARD_SIGMOID, 2, at, y, NULL);
    }
    if (!strcmp(a->name, "HardSwish")) apply(ctx, IR_OP_HARD_SWISH, 0, NULL, y, NULL);
    if (!strcmp(a->name, "Sigmoid")) apply(ctx, IR_OP_SIGMOID, 0, NULL, y, NULL);
    if (!strcmp(a->name, "SiLU")) { /* Mul(x, Sigmoid(x)) */
        ir_tensor s = *y;
        s.data = malloc(ir_nbytes(y));
        memcpy(s.data, y->data, ir_nbytes(y));
        apply(ctx, IR_OP_SIGMOID, 0, NULL, &s, NULL);
        apply(ctx, IR_OP_MUL, 0, NULL, y, &s);
        free(s.data);
    }
    if (!strcmp(a->name, "Gelu")) apply(ctx, IR_OP_GELU, 0, NULL, y, NULL);
    if (!strcmp(a->name, "Tanh")) apply(ctx, IR_OP_TANH, 0, NULL, y, NULL);
}

/* ---- kernels ---- */

static void test_fused_conv(wpk_context *ctx) {
    int64_t xd[4] = {2, 4, 7, 6}, wd[4] = {6, 2, 3, 3}, bd[1] = {6}, yd[4] = {2, 6, 3, 6};
    float *xv = rnd_buf(2 * 4 * 7 * 6, 1.0f), *wv = rnd_buf(6 * 2 * 9, 0.5f);
    float *bv = rnd_buf(6, 1.0f);
    float *zv = rnd_buf(2 * 6 * 3 * 6, 1.0f);
    ir_tensor x = f32(4, xd, xv), w = f32(4, wd, wv), b = f32(1, bd, bv), z = f32(4, yd, zv);
    static const int64_t pads[4] = {0, 1, 0, 1}, strides[2] = {2, 1};
    ir_attr conv_attrs[8] = {
        {.name = "group", .kind = IR_ATTR_INT, .i = 2},
        {.name = "pads", .kind = IR_ATTR_INTS, .n = 4, .ints = (int64_t *)pads},
        {.name = "strides", .kind = IR_ATTR_INTS, .n = 2, .ints = (int64_t *)strides},
    };
    for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++)
        for (int with_z = 0; with_z < 2; with_z++) {
            ir_node conv = make_node(IR_OP_CONV, 3, 1, 3, conv_attrs);
            ir_tensor *in[4] = {&x, &w, &b, &z}, want, got;
            CHECK(run(ctx, &conv, in, &want) == WPK_OK);
            if (with_z) apply(ctx, IR_OP_ADD, 0, NULL, &want, &z);
            unfused_act(ctx, &acts[a], &want);
            ir_attr fattrs[8];
            memcpy(fattrs, conv_attrs, sizeof fattrs);
            int nattr = 3;
            act_attrs(&acts[a], fattrs, &nattr);
            ir_node fused = make_node(IR_OP_FUSED_CONV, with_z ? 4 : 3, 1, nattr, fattrs);
            CHECK(run(ctx, &fused, in, &got) == WPK_OK);
            CHECK(near(&got, &want, 1e-6f, acts[a].name ? acts[a].name : "no activation"));
            free(want.data);
            free(got.data);
        }
    /* no bias, Z in slot 3 */
    ir_node conv = make_node(IR_OP_CONV, 2, 1, 3, conv_attrs), fused;
    ir_tensor *in[4] = {&x, &w, NULL, &z}, want, got;
    CHECK(run(ctx, &conv, in, &want) == WPK_OK);
    apply(ctx, IR_OP_ADD, 0, NULL, &want, &z);
    fused = make_node(IR_OP_FUSED_CONV, 4, 1, 3, conv_attrs);
    CHECK(run(ctx, &fused, in, &got) == WPK_OK);
    CHECK(near(&got, &want, 0.0f, "conv without bias + Z"));
    free(want.data);
    free(got.data);

    /* must-fail: Z of another shape, an unknown activation, too many inputs */
    int64_t zbad[4] = {2, 6, 3, 5};
    ir_tensor zb = f32(4, zbad, zv);
    ir_tensor *bad_in[5] = {&x, &w, &b, &zb, &z};
    fused = make_node(IR_OP_FUSED_CONV, 4, 1, 3, conv_attrs);
    CHECK_ERR(ctx, run(ctx, &fused, bad_in, &got), WPK_ERR_MODEL,
              "residual input Z has shape [2, 6, 3, 5] but the output has [2, 6, 3, 6]");
    fused = make_node(IR_OP_FUSED_CONV, 5, 1, 3, conv_attrs);
    bad_in[3] = &z;
    CHECK_ERR(ctx, run(ctx, &fused, bad_in, &got), WPK_ERR_MODEL, "has 5 inputs; at most 4");
    ir_attr swish[4];
    memcpy(swish, conv_attrs, sizeof(ir_attr) * 3);
    swish[3] = (ir_attr){.name = "activation", .kind = IR_ATTR_STRING, .s = "Swish"};
    fused = make_node(IR_OP_FUSED_CONV, 3, 1, 4, swish);
    CHECK_ERR(ctx, run(ctx, &fused, in, &got), WPK_ERR_MODEL,
              "node 'n0' (FusedConv): attribute 'activation' is 'Swish'");
    swish[3] = (ir_attr){.name = "activation", .kind = IR_ATTR_INT, .i = 1};
    CHECK_ERR(ctx, run(ctx, &fused, in, &got), WPK_ERR_MODEL, "'activation' must be a string");
    /* static inference: unknown dims of Z are not compared */
    int64_t zsym[4] = {-1, 6, 3, 6};
    ir_tensor zs = f32(4, zsym, NULL), xs = x, ys = {0};
    xs.dims[0] = -1;
    ir_tensor *sym_in[4] = {&xs, &w, &b, &zs}, *sym_out[1] = {&ys};
    fused = make_node(IR_OP_FUSED_CONV, 4, 1, 3, conv_attrs);
    CHECK(op_fused_conv_shape(ctx, &fused, sym_in, sym_out) == WPK_OK);
    CHECK(ys.ndim == 4 && ys.dims[0] == -1 && ys.dims[1] == 6);
    free(xv), free(wv), free(bv), free(zv);
}

static void test_fused_gemm(wpk_context *ctx) {
    int64_t ad[2] = {5, 7}, bd[2] = {9, 7}, cd[1] = {9}, yd[2] = {5, 9};
    float *av = rnd_buf(35, 1.0f), *bv = rnd_buf(63, 0.5f), *cv = rnd_buf(9, 1.0f);
    float *zv = rnd_buf(45, 1.0f);
    ir_tensor a = f32(2, ad, av), b = f32(2, bd, bv), c = f32(1, cd, cv), z = f32(2, yd, zv);
    ir_attr gemm_attrs[8] = {{.name = "transB", .kind = IR_ATTR_INT, .i = 1}};
    for (size_t k = 0; k < sizeof acts / sizeof acts[0]; k++) {
        ir_node gemm = make_node(IR_OP_GEMM, 3, 1, 1, gemm_attrs);
        ir_tensor *in[4] = {&a, &b, &c, &z}, want, got;
        CHECK(run(ctx, &gemm, in, &want) == WPK_OK);
        apply(ctx, IR_OP_ADD, 0, NULL, &want, &z);
        unfused_act(ctx, &acts[k], &want);
        /* the activation's alpha and beta are not the product's (which has 1s) */
        ir_attr fattrs[8];
        memcpy(fattrs, gemm_attrs, sizeof fattrs);
        int nattr = 1;
        act_attrs(&acts[k], fattrs, &nattr);
        ir_node fused = make_node(IR_OP_FUSED_GEMM, 4, 1, nattr, fattrs);
        CHECK(run(ctx, &fused, in, &got) == WPK_OK);
        CHECK(near(&got, &want, 1e-6f, acts[k].name ? acts[k].name : "no activation"));
        free(want.data);
        free(got.data);
    }
    ir_tensor zb = z, got;
    zb.ndim = 1;
    ir_tensor *in[4] = {&a, &b, &c, &zb};
    ir_node fused = make_node(IR_OP_FUSED_GEMM, 4, 1, 1, gemm_attrs);
    CHECK_ERR(ctx, run(ctx, &fused, in, &got), WPK_ERR_MODEL, "residual input Z has shape [5]");
    free(av), free(bv), free(cv), free(zv);
}

static void test_fused_matmul(wpk_context *ctx) {
    int64_t ad[4] = {2, 3, 5, 6}, bd[2] = {6, 7}, biasd[1] = {7}, yd[4] = {2, 3, 5, 7};
    float *av = rnd_buf(180, 1.0f), *bv = rnd_buf(42, 0.5f), *biasv = rnd_buf(7, 1.0f);
    float *zv = rnd_buf(210, 1.0f);
    ir_tensor a = f32(4, ad, av), b = f32(2, bd, bv), bias = f32(1, biasd, biasv),
              z = f32(4, yd, zv);
    for (size_t k = 0; k < sizeof acts / sizeof acts[0]; k++)
        for (int mask = 0; mask < 4; mask++) { /* bit 0: bias, bit 1: Z */
            ir_node mm = make_node(IR_OP_MATMUL, 2, 1, 0, NULL);
            ir_tensor *in[4] = {&a, &b, mask & 1 ? &bias : NULL, mask & 2 ? &z : NULL};
            ir_tensor want, got;
            CHECK(run(ctx, &mm, in, &want) == WPK_OK);
            if (mask & 1) apply(ctx, IR_OP_ADD, 0, NULL, &want, &bias);
            if (mask & 2) apply(ctx, IR_OP_ADD, 0, NULL, &want, &z);
            unfused_act(ctx, &acts[k], &want);
            ir_attr fattrs[8];
            int nattr = 0;
            act_attrs(&acts[k], fattrs, &nattr);
            ir_node fused = make_node(IR_OP_FUSED_MATMUL, 4, 1, nattr, fattrs);
            CHECK(run(ctx, &fused, in, &got) == WPK_OK);
            CHECK(near(&got, &want, 1e-6f, acts[k].name ? acts[k].name : "no activation"));
            free(want.data);
            free(got.data);
        }
    int64_t bad[1] = {6};
    ir_tensor bb = f32(1, bad, biasv), got;
    ir_tensor *in[3] = {&a, &b, &bb};
    ir_node fused = make_node(IR_OP_FUSED_MATMUL, 3, 1, 0, NULL);
    CHECK_ERR(ctx, run(ctx, &fused, in, &got), WPK_ERR_MODEL,
              "input 'bias' must be 1-D with 7 values (the output's last dim), but has 1 dims "
              "and 6 values");
    free(av), free(bv), free(biasv), free(zv);
}

/* ---- the passes on a hand-built graph ---- */

static int value(ir_graph *g, const char *name) { return ir_graph_value(g, name); }

static void input(ir_graph *g, const char *name, int ndim, const int64_t *dims) {
    int v = value(g, name);
    g->values[v].is_input = true;
    g->values[v].t = f32(ndim, dims, NULL);
    g->inputs[g->ninputs++] = v;
}

/* A random constant; positive (in [0.5, 1.5)) when `positive`, for variances and scales. */
static void weight(ir_graph *g, const char *name, int ndim, const int64_t *dims, bool positive) {
    ir_tensor t = f32(ndim, dims, NULL);
    float *d = rnd_buf(ir_numel(&t), 1.0f);
    for (int64_t i = 0; positive && i < ir_numel(&t); i++) d[i] = 1.0f + 0.5f * d[i];
    t.data = d;
    CHECK(ir_graph_add_const(g, name, &t) >= 0);
    free(d);
}

static int add(ir_graph *g, const char *op, const char *ins, const char *out) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", ins);
    int nin = 1;
    for (char *p = buf; *p; p++) nin += *p == ',';
    int k = ir_graph_add_node(g, out, op, "", 17, nin, 1);
    g->nodes[k].attrs = arena_alloc(&g->mem, sizeof(ir_attr)); /* as the importer gives */
    char *save = NULL;
    int i = 0;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save), i++)
        g->nodes[k].in[i] = strcmp(tok, "_") ? value(g, tok) : -1;
    g->nodes[k].out[0] = value(g, out);
    return k;
}

static void bn_params(ir_graph *g, const char *prefix, int64_t c) {
    char name[64];
    int64_t dims[1] = {c};
    const char *parts[4] = {"s", "b", "m", "v"};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s_%s", prefix, parts[i]);
        weight(g, name, 1, dims, i == 0 || i == 3);
    }
}

/* Three chains:
 *   x -> Conv -> BN -> Add(Conv2(x)) -> Relu -> y1    (fold, residual, activation)
 *   x -> BN (lone: scale+shift) -> y2; and Conv3(x) -> BN read twice is also a lone BN
 *   a -> Gemm(transB) -> BN -> SiLU -> y3; a -> MatMul -> Add(bias) -> Clip(x, lo, hi) -> y4,
 *   with hi a graph input (not constant: Clip stays, the bias still folds into a Gemm) */
static ir_graph *build(void) {
    ir_graph *g = ir_graph_create();
    g->opset = 17;
    g->inputs = arena_alloc(&g->mem, sizeof(int) * 4);
    g->outputs = arena_alloc(&g->mem, sizeof(int) * 8);
    input(g, "x", 4, (int64_t[]){2, 3, 6, 6});
    input(g, "a", 2, (int64_t[]){4, 5});
    input(g, "hi", 0, NULL);
    weight(g, "W1", 4, (int64_t[]){8, 3, 3, 3}, false);
    weight(g, "B1", 1, (int64_t[]){8}, false);
    weight(g, "W2", 4, (int64_t[]){8, 3, 3, 3}, false);
    weight(g, "W3", 4, (int64_t[]){3, 3, 1, 1}, false);
    weight(g, "G", 2, (int64_t[]){6, 5}, false);
    weight(g, "M", 2, (int64_t[]){5, 6}, false);
    weight(g, "bias", 1, (int64_t[]){6}, false);
    weight(g, "lo", 0, NULL, false);
    bn_params(g, "bn1", 8);
    bn_params(g, "bn2", 3);
    bn_params(g, "bn3", 6);
    bn_params(g, "bn4", 3);
    int k = add(g, "Conv", "x,W1,B1", "c1");
    static const int64_t pads[4] = {1, 1, 1, 1};
    CHECK(ir_node_set_ints(g, &g->nodes[k], "pads", pads, 4) == WPK_OK);
    add(g, "BatchNormalization", "c1,bn1_s,bn1_b,bn1_m,bn1_v", "n1");
    k = add(g, "Conv", "x,W2", "c2");
    CHECK(ir_node_set_ints(g, &g->nodes[k], "pads", pads, 4) == WPK_OK);
    add(g, "Add", "n1,c2", "r1");
    add(g, "Relu", "r1", "y1");
    add(g, "BatchNormalization", "x,bn2_s,bn2_b,bn2_m,bn2_v", "y2");
    k = add(g, "Gemm", "a,G", "g1");
    CHECK(ir_node_set_int(g, &g->nodes[k], "transB", 1) == WPK_OK);
    add(g, "BatchNormalization", "g1,bn3_s,bn3_b,bn3_m,bn3_v", "n3");
    add(g, "Sigmoid", "n3", "sg");
    add(g, "Mul", "sg,n3", "y3");
    add(g, "MatMul", "a,M", "m1");
    add(g, "Add", "bias,m1", "m2");
    add(g, "Clip", "m2,lo,hi", "y4");
    add(g, "Conv", "x,W3", "c3");
    add(g, "BatchNormalization", "c3,bn4_s,bn4_b,bn4_m,bn4_v", "n4");
    add(g, "Add", "c3,n4", "y5");
    const char *outs[5] = {"y1", "y2", "y3", "y4", "y5"};
    for (int i = 0; i < 5; i++) g->outputs[g->noutputs++] = value(g, outs[i]);
    return g;
}

static int count_op(const ir_graph *g, ir_op op) {
    int c = 0;
    for (int k = 0; k < g->nnodes; k++) c += g->nodes[k].op == op;
    return c;
}

/* Run g on fixed inputs; outputs copied into out[] (malloc'd). */
static wpk_status execute(wpk_context *ctx, const ir_graph *g, float **out) {
    ir_exec x;
    wpk_status st = ir_exec_init(ctx, &x, g);
    if (st) return st;
    float hi = 0.8f;
    for (int i = 0; i < g->ninputs && st == WPK_OK; i++) {
        int v = g->inputs[i];
        const ir_tensor *t = &g->values[v].t;
        st = ir_exec_reserve(ctx, &x, v, t->dtype, t->ndim, t->dims);
        float *d = x.vals[v].data;
        uint32_t s = 99u + (uint32_t)i;
        for (int64_t j = 0; st == WPK_OK && j < ir_numel(t); j++) {
            s = s * 1664525u + 1013904223u;
            d[j] = t->ndim ? (float)((s >> 8) & 0xffff) / 16384.0f - 2.0f : hi;
        }
    }
    if (st == WPK_OK) st = ir_exec_run(ctx, &x, g);
    for (int i = 0; i < g->noutputs && st == WPK_OK; i++) {
        const ir_tensor *t = &x.vals[g->outputs[i]];
        out[i] = malloc(ir_nbytes(t) + 1);
        memcpy(out[i], t->data, ir_nbytes(t));
    }
    ir_exec_free(&x);
    return st;
}

/* The two passes alone, each after shape inference, as the pass manager runs them. */
static wpk_status run_passes(wpk_context *ctx, ir_graph *g) {
    pass_options opt = pass_default_options();
    int changed;
    wpk_status st = pass_infer_shapes(ctx, g);
    if (!st) st = pass_fold_batchnorm(ctx, g, &opt, &changed);
    if (!st) st = pass_infer_shapes(ctx, g);
    if (!st) st = pass_fuse_epilogue(ctx, g, &opt, &changed);
    return st;
}

static void test_passes(wpk_context *ctx) {
    ir_graph *g = build();
    CHECK(ir_verify(ctx, g) == WPK_OK);
    pass_options opt = pass_default_options();
    opt.only = "fold-batchnorm,fuse-epilogue";
    opt.dump = "";
    ir_graph *o = ir_graph_clone(g);
    CHECK(passes_run(ctx, o, &opt) == WPK_OK);
    CHECK(ir_verify(ctx, o) == WPK_OK);
    /* bn1 folds and Conv+Add+Relu fuse; bn3 folds into the Gemm, SiLU fuses; bn2 (a graph
     * input) and bn4 (its conv output read twice) become Mul+Add; MatMul+bias is a Gemm and the
     * Clip with a non-constant bound stays */
    CHECK(count_op(o, IR_OP_BATCH_NORM) == 0);
    CHECK(count_op(o, IR_OP_FUSED_CONV) == 1);
    CHECK(count_op(o, IR_OP_FUSED_GEMM) == 1);
    CHECK(count_op(o, IR_OP_GEMM) == 1);
    CHECK(count_op(o, IR_OP_CLIP) == 1);
    CHECK(count_op(o, IR_OP_MATMUL) == 0 && count_op(o, IR_OP_RELU) == 0);
    CHECK(count_op(o, IR_OP_SIGMOID) == 0);
    CHECK(count_op(o, IR_OP_MUL) == 2);
    CHECK(count_op(o, IR_OP_ADD) == 3);
    CHECK(o->nnodes == 11);
    for (int k = 0; k < o->nnodes; k++) {
        const ir_node *n = &o->nodes[k];
        if (n->op == IR_OP_FUSED_CONV) {
            CHECK(n->nin == 4 && !strcmp(o->values[n->in[3]].name, "c2"));
            CHECK(!strcmp(ir_attr_str(n, "activation", ""), "Relu"));
            CHECK(!strcmp(o->values[n->out[0]].name, "y1"));
        }
        if (n->op == IR_OP_FUSED_GEMM) {
            CHECK(!strcmp(ir_attr_str(n, "activation", ""), "SiLU"));
            CHECK(!strcmp(o->values[n->out[0]].name, "y3"));
        }
    }
    float *want[5] = {0}, *got[5] = {0};
    CHECK(execute(ctx, g, want) == WPK_OK);
    CHECK(execute(ctx, o, got) == WPK_OK);
    for (int i = 0; i < 5 && want[i] && got[i]; i++) {
        ir_tensor w = g->values[g->outputs[i]].t, t = w;
        w.data = want[i];
        t.data = got[i];
        CHECK(near(&t, &w, 1e-5f, o->values[o->outputs[i]].name));
    }
    for (int i = 0; i < 5; i++) free(want[i]), free(got[i]);
    ir_graph_free(o);

    /* out of memory at every allocation the passes make: a status, no crash, no leak */
    int failures = 0;
    for (long n = 1; n < 100000; n++) {
        ir_graph *c = ir_graph_clone(g);
        if (!c) continue;
        wpk_clear_error(ctx);
        wpk_alloc_fail_at(n);
        wpk_status st = run_passes(ctx, c);
        wpk_alloc_fail_at(0);
        ir_graph_free(c);
        if (st == WPK_OK) break;
        CHECK(st == WPK_ERR_NOMEM);
        failures++;
    }
    CHECK(failures > 5);
    ir_graph_free(g);
}

int main(void) {
    wpk_context *ctx = wpk_context_create();
    test_fused_conv(ctx);
    test_fused_gemm(ctx);
    test_fused_matmul(ctx);
    test_passes(ctx);
    wpk_context_free(ctx);
    CHECK_DONE();
}
