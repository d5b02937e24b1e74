/* test_layout.c -- the blocked channel layout NCHW[x]c: Reorder (element positions, padding,
 * round trip), ConvNCHWc against the NCHW reference Conv on random shapes (odd sizes, strides,
 * asymmetric padding, dilation, 1x1, 7x7, groups, depthwise, channels that are not whole
 * blocks, NCHW input, the fused bias/residual/activation epilogue, blocks of 4, 8 and 16),
 * must-fail cases of both ops, and the layout pass on small graphs: which nodes it moves,
 * where the Reorders go, what it declines, that the rewritten graph computes what the original
 * does (reference interpreter, rel 1e-4), and that every allocation failing in turn gives
 * WPK_ERR_NOMEM. The IR text the pass produces is checked by tests/passes golden cases. */
#include <math.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "check.h"
#include "ir/eval.h"
#include "ir/graph.h"
#include "ops/activation.h"
#include "ops/blocked.h"
#include "passes/pass.h"

static uint32_t seed = 4242;
static float rnd(void) {
    seed = seed * 1664525u + 1013904223u;
    return (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}
static float *rnd_buf(int64_t count) {
    float *p = malloc(sizeof(float) * (size_t)(count + 1));
    for (int64_t i = 0; i < count; i++) p[i] = rnd();
    return p;
}

static ir_tensor f32(int ndim, const int64_t *dims, void *data) {
    ir_tensor t = {.dtype = WPK_DTYPE_FLOAT32, .ndim = ndim, .data = data};
    for (int i = 0; i < ndim; i++) t.dims[i] = dims[i];
    return t;
}

/* |got - want| <= tol * (1 + |want|) everywhere; reports the first miss. */
static bool near(const float *got, const float *want, int64_t count, float tol) {
    for (int64_t i = 0; i < count; i++)
        if (!(fabsf(got[i] - want[i]) <= tol * (1.0f + fabsf(want[i])))) {
            fprintf(stderr, "  element %lld: got %.7g, want %.7g\n", (long long)i, got[i],
                    want[i]);
            return false;
        }
    return true;
}

/* ---- calling one op ---- */

typedef struct op_call {
    ir_node node;
    ir_attr attrs[16];
    ir_tensor *in[4];
    ir_tensor y, *out[1];
} op_call;

static void op_init(op_call *c, const char *op_type, const char *domain, int nin) {
    memset(c, 0, sizeof *c);
    c->node.name = "n0";
    c->node.op_type = op_type;
    c->node.domain = domain;
    c->node.op = ir_op_from_onnx(domain, op_type);
    c->node.nin = nin;
    c->node.nout = 1;
    c->node.attrs = c->attrs;
    c->out[0] = &c->y;
}

static void op_attr(op_call *c, ir_attr a) { c->attrs[c->node.nattr++] = a; }
static ir_attr a_int(const char *name, int64_t v) {
    return (ir_attr){.name = name, .kind = IR_ATTR_INT, .i = v};
}
static ir_attr a_str(const char *name, const char *s) {
    return (ir_attr){.name = name, .kind = IR_ATTR_STRING, .s = s};
}
static ir_attr a_float(const char *name, float f) {
    return (ir_attr){.name = name, .kind = IR_ATTR_FLOAT, .f = f};
}
static ir_attr a_ints(const char *name, int n, const int64_t *v) {
    return (ir_attr){.name = name, .kind = IR_ATTR_INTS, .n = n, .ints = (int64_t *)v};
}

/* Shape function, then the kernel into a fresh output (freed by the caller). */
static wpk_status op_run(wpk_context *ctx, op_call *c) {
    const ir_op_info *info = ir_op_get(c->node.op);
    free(c->y.data);
    memset(&c->y, 0, sizeof c->y);
    wpk_status st = info->shape(ctx, &c->node, c->in, c->out);
    if (st) return st;
    /* garbage, not zeros: a kernel must write every element, padding lanes included */
    size_t bytes = (size_t)ir_numel(&c->y) * sizeof(float);
    c->y.data = malloc(bytes + sizeof(float));
    memset(c->y.data, 0x7f, bytes);
    return info->ref(ctx, &c->node, c->in, c->out);
}

static wpk_status reorder(wpk_context *ctx, const ir_tensor *t, bool to_blocked, int64_t x,
                          int64_t channels, ir_tensor *out) {
    op_call c;
    op_init(&c, "Reorder", "wpk", 1);
    c.in[0] = (ir_tensor *)t;
    op_attr(&c, a_str("to", to_blocked ? "NCHWc" : "NCHW"));
    op_attr(&c, a_int("block", x));
    if (channels) op_attr(&c, a_int("channels", channels));
    wpk_status st = op_run(ctx, &c);
    *out = c.y;
    return st;
}

/* ---- Reorder ---- */

static void test_reorder(wpk_context *ctx) {
    /* C = 20 with x = 8: three blocks, the last with 4 padded lanes; 3 spatial dims */
    int64_t dims[5] = {2, 20, 3, 5, 2}, x = 8;
    int64_t count = 2 * 20 * 3 * 5 * 2, size = 30;
    float *d = rnd_buf(count);
    ir_tensor t = f32(5, dims, d), b = {0}, back = {0};
    CHECK(reorder(ctx, &t, true, x, 0, &b) == WPK_OK);
    CHECK(b.ndim == 6 && b.dims[0] == 2 && b.dims[1] == 3 && b.dims[2] == 3 && b.dims[4] == 2 &&
          b.dims[5] == 8);
    const float *bd = b.data;
    bool placed = true, zeros = true;
    for (int64_t n = 0; n < 2; n++)
        for (int64_t c = 0; c < 24; c++)
            for (int64_t s = 0; s < size; s++) {
                float got = bd[((n * 3 + c / x) * size + s) * x + c % x];
                if (c < 20) placed &= got == d[(n * 20 + c) * size + s];
                else zeros &= got == 0.0f;
            }
    CHECK(placed);
    CHECK(zeros);
    CHECK(reorder(ctx, &b, false, x, 20, &back) == WPK_OK);
    CHECK(back.ndim == 5 && back.dims[1] == 20 && back.dims[4] == 2);
    CHECK(memcmp(back.data, d, sizeof(float) * (size_t)count) == 0);
    free(back.data);
    /* without `channels` the padded lanes come back as channels */
    CHECK(reorder(ctx, &b, false, x, 0, &back) == WPK_OK);
    CHECK(back.dims[1] == 24);
    free(back.data);
    free(b.data);
    free(d);
}

static void test_reorder_errors(wpk_context *ctx) {
    int64_t d4[4] = {1, 16, 2, 2}, d5[5] = {1, 2, 2, 2, 8};
    float buf[64] = {0};
    ir_tensor t4 = f32(4, d4, buf), t5 = f32(5, d5, buf);
    op_call c;
    op_init(&c, "Reorder", "wpk", 1);
    c.in[0] = &t4;
    op_attr(&c, a_int("block", 8));
    CHECK_ERR(ctx, op_run(ctx, &c), WPK_ERR_MODEL, "attribute 'to'");
    op_attr(&c, a_str("to", "NHWC"));
    CHECK_ERR(ctx, op_run(ctx, &c), WPK_ERR_MODEL, "'NHWC'");
    c.attrs[1] = a_str("to", "NCHWc");
    c.attrs[0] = a_int("block", 5);
    CHECK_ERR(ctx, op_run(ctx, &c), WPK_ERR_UNSUPPORTED, "blocks of 4, 8 or 16");
    c.attrs[0] = a_int("block", 8);
    CHECK(op_run(ctx, &c) == WPK_OK);
    c.attrs[1] = a_str("to", "NCHW");
    c.in[0] = &t5;
    c.attrs[0] = a_int("block", 4);
    CHECK_ERR(ctx, op_run(ctx, &c), WPK_ERR_MODEL, "last dim");
    c.attrs[0] = a_int("block", 8);
    op_attr(&c, a_int("channels", 8));
    CHECK_ERR(ctx, op_run(ctx, &c), WPK_ERR_MODEL, "attribute 'channels' is 8");
    c.attrs[2] = a_int("channels", 9);
    CHECK(op_run(ctx, &c) == WPK_OK && c.y.dims[1] == 9);
    free(c.y.data);
}

/* ---- ConvNCHWc against Conv ---- */

typedef struct kcase {
    int64_t x, n, c, m, h, w, kh, kw, sh, sw, dh, dw, pads[4], group;
    bool bias, direct, z; /* direct: the input stays NCHW (bi = 1) */
    const char *act;
} kcase;

static void conv_case(wpk_context *ctx, const kcase *k) {
    int64_t cg = k->c / k->group;
    bool dw = k->group > 1 && k->group == k->c && k->group == k->m;
    int64_t xd[4] = {k->n, k->c, k->h, k->w}, wd[4] = {k->m, cg, k->kh, k->kw}, bd[1] = {k->m};
    float *xv = rnd_buf(k->n * k->c * k->h * k->w), *wv = rnd_buf(k->m * cg * k->kh * k->kw);
    float *bv = rnd_buf(k->m);
    ir_tensor X = f32(4, xd, xv), W = f32(4, wd, wv), B = f32(1, bd, bv);
    int64_t strides[2] = {k->sh, k->sw}, dil[2] = {k->dh, k->dw};

    op_call ref;
    op_init(&ref, "Conv", "", k->bias ? 3 : 2);
    ref.in[0] = &X, ref.in[1] = &W, ref.in[2] = &B;
    op_attr(&ref, a_ints("strides", 2, strides));
    op_attr(&ref, a_ints("dilations", 2, dil));
    op_attr(&ref, a_ints("pads", 4, k->pads));
    op_attr(&ref, a_int("group", k->group));
    CHECK(op_run(ctx, &ref) == WPK_OK);
    int64_t ycount = ir_numel(&ref.y);
    float *zv = k->z ? rnd_buf(ycount) : NULL;
    ir_tensor Z = f32(4, ref.y.dims, zv), Zb = {0}, Xb = {0};

    op_call blk;
    op_init(&blk, "ConvNCHWc", "wpk", k->z ? 4 : k->bias ? 3 : 2);
    for (int i = 0; i < ref.node.nattr; i++) op_attr(&blk, ref.attrs[i]);
    op_attr(&blk, a_int("channels", k->m));
    if (k->act) {
        op_attr(&blk, a_str("activation", k->act));
        if (!strcmp(k->act, "Clip")) {
            op_attr(&blk, a_float("clip_min", -0.5f));
            op_attr(&blk, a_float("clip_max", 0.25f));
        }
        if (!strcmp(k->act, "LeakyRelu")) op_attr(&blk, a_float("alpha", 0.3f));
    }
    int64_t bi = k->direct ? 1 : k->x, pd[6];
    blocked_weight_dims(k->m, cg, k->kh, k->kw, bi, k->x, dw, pd);
    float *packed = malloc(sizeof(float) * (size_t)(pd[0] * pd[1] * pd[2] * pd[3] * pd[4] * pd[5]));
    blocked_pack_weights(wv, k->m, cg, k->kh, k->kw, bi, k->x, dw, packed);
    ir_tensor WP = f32(6, pd, packed);
    if (!k->direct) CHECK(reorder(ctx, &X, true, k->x, 0, &Xb) == WPK_OK);
    if (k->z) CHECK(reorder(ctx, &Z, true, k->x, 0, &Zb) == WPK_OK);
    blk.in[0] = k->direct ? &X : &Xb, blk.in[1] = &WP;
    blk.in[2] = k->bias ? &B : NULL, blk.in[3] = k->z ? &Zb : NULL;
    wpk_status st = op_run(ctx, &blk);
    CHECK(st == WPK_OK);
    if (st) fprintf(stderr, "  %s\n", wpk_context_error(ctx));

    /* the reference epilogue, computed the way FusedConv does: conv (+ Z), then activation */
    float *want = ref.y.data;
    if (zv)
        for (int64_t i = 0; i < ycount; i++) want[i] += zv[i];
    act_params act;
    CHECK(act_read(ctx, &blk.node, &act) == WPK_OK);
    act_apply(&act, want, ycount);

    ir_tensor back = {0};
    if (st == WPK_OK) {
        const float *yb = blk.y.data;
        int64_t cb = blk.y.dims[1], plane = blk.y.dims[2] * blk.y.dims[3];
        bool zeros = true;
        for (int64_t n = 0; n < k->n; n++)
            for (int64_t c = k->m; c < cb * k->x; c++)
                for (int64_t s = 0; s < plane; s++)
                    zeros &= yb[((n * cb + c / k->x) * plane + s) * k->x + c % k->x] == 0.0f;
        CHECK(zeros);
        CHECK(reorder(ctx, &blk.y, false, k->x, k->m, &back) == WPK_OK);
        CHECK(ir_same_shape(&back, &ref.y));
        bool ok = near(back.data, want, ycount, 1e-4f);
        CHECK(ok);
        if (!ok)
            fprintf(stderr, "  x=%lld n=%lld c=%lld m=%lld %lldx%lld k=%lldx%lld s=%lld,%lld "
                    "d=%lld,%lld group=%lld direct=%d act=%s z=%d\n", (long long)k->x,
                    (long long)k->n, (long long)k->c, (long long)k->m, (long long)k->h,
                    (long long)k->w, (long long)k->kh, (long long)k->kw, (long long)k->sh,
                    (long long)k->sw, (long long)k->dh, (long long)k->dw, (long long)k->group,
                    k->direct, k->act ? k->act : "-", k->z);
    }
    free(back.data), free(blk.y.data), free(ref.y.data), free(Xb.data), free(Zb.data);
    free(xv), free(wv), free(bv), free(zv), free(packed);
}

static void test_conv_nchwc(wpk_context *ctx) {
    static const int64_t xs[3] = {4, 8, 16};
    for (int xi = 0; xi < 3; xi++) {
        int64_t x = xs[xi];
        kcase cases[] = {
            /* x, n, c, m, h, w, kh, kw, sh, sw, dh, dw, pads, group, bias, direct, z, act */
            {x, 1, 2 * x, 2 * x, 7, 9, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, true, false, false, NULL},
            {x, 2, x, 3 * x, 11, 13, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 1, true, false, false, "Relu"},
            {x, 1, x, x, 12, 23, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, 1, false, false, false, NULL},
            {x, 1, 2 * x, x, 5, 31, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1, true, false, true, "Relu"},
            {x, 1, x, 2 * x, 9, 9, 1, 1, 2, 2, 1, 1, {0, 0, 0, 0}, 1, true, false, false, NULL},
            {x, 1, 3, x, 23, 21, 7, 7, 2, 2, 1, 1, {3, 3, 3, 3}, 1, true, true, false, "Relu"},
            {x, 1, x, x, 8, 17, 3, 5, 1, 2, 1, 1, {0, 2, 1, 1}, 1, true, false, true, "Sigmoid"},
            /* channels that are not whole blocks, in and out */
            {x, 1, x + 3, 2 * x - 1, 6, 10, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, true, false, true,
             "HardSigmoid"},
            {x, 1, 5, x + 1, 6, 7, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, true, true, false, "Clip"},
            /* groups of whole blocks, depthwise (also padded), strided depthwise */
            {x, 1, 4 * x, 2 * x, 9, 10, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 2, true, false, true,
             "LeakyRelu"},
            {x, 2, 2 * x, 2 * x, 10, 19, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 2 * x, true, false, false,
             "Clip"},
            {x, 1, x + 2, x + 2, 9, 9, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, x + 2, true, false, true,
             "HardSwish"},
            {x, 1, x, x, 14, 14, 5, 5, 2, 1, 2, 1, {4, 2, 3, 2}, x, false, false, false, "Tanh"},
            /* a kernel as large as the padded input; an input row narrower than a tile */
            {x, 1, x, x, 3, 3, 5, 5, 1, 1, 1, 1, {1, 1, 1, 1}, 1, true, false, false, "SiLU"},
            {x, 1, x, x, 4, 2, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 1, true, false, false, "Gelu"},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) conv_case(ctx, &cases[i]);
    }
}

static void test_conv_nchwc_errors(wpk_context *ctx) {
    int64_t xd[5] = {1, 2, 5, 5, 8}, wd[6] = {2, 2, 3, 3, 8, 8}, w4[4] = {16, 16, 3, 3};
    int64_t bd[1] = {15}, zd[5] = {1, 2, 5, 4, 8}, x4[4] = {1, 16, 5, 5};
    static float buf[16 * 16 * 9 * 2];
    ir_tensor X = f32(5, xd, buf), W = f32(6, wd, buf), W4 = f32(4, w4, buf), B = f32(1, bd, buf);
    ir_tensor Z = f32(5, zd, buf), X4 = f32(4, x4, buf);
    op_call c;
    op_init(&c, "ConvNCHWc", "wpk", 2);
    c.in[0] = &X, c.in[1] = &W4;
    CHECK_ERR(ctx, op_run(ctx, &c), WPK_ERR_MODEL, "expected 6");
    c.in[1] = &W;
    CHECK_ERR(ctx, op_run(ctx, &c), WPK_ERR_MODEL, "attribute 'channels'");
    op_attr(&c, a_int("channels", 17));
    CHECK_ERR(ctx, op_run(ctx, &c), WPK_ERR_MODEL, "2 output blocks of 8");
    c.attrs[0] = a_int("channels", 16);
    CHECK(op_run(ctx, &c) == WPK_OK);
    CHECK(c.y.ndim == 5 && c.y.dims[1] == 2 && c.y.dims[2] == 3 && c.y.dims[3] == 3);
    op_attr(&c, a_str("auto_pad", "SAME_UPPER"));
    CHECK_ERR(ctx, op_run(ctx, &c), WPK_ERR_MODEL, "explicit pads");
    c.attrs[1] = a_str("activation", "Swish");
    CHECK_ERR(ctx, op_run(ctx, &c), WPK_ERR_MODEL, "'Swish'");
    c.attrs[1] = a_int("group", 2);
    CHECK_ERR(ctx, op_run(ctx, &c), WPK_ERR_MODEL, "per group");
    c.attrs[1] = a_int("group", 1);
    c.in[0] = &X4; /* an NCHW input with W packed for blocks of 8 */
    CHECK_ERR(ctx, op_run(ctx, &c), WPK_ERR_MODEL, "input blocks of 8 lanes but X has 1");
    c.in[0] = &X;
    c.node.nin = 3;
    c.in[2] = &B;
    CHECK_ERR(ctx, op_run(ctx, &c), WPK_ERR_MODEL, "bias B");
    c.in[2] = NULL;
    c.node.nin = 4;
    c.in[3] = &Z;
    CHECK_ERR(ctx, op_run(ctx, &c), WPK_ERR_MODEL, "residual input Z");
    free(c.y.data);
}

/* ---- MaxPoolNCHWc, AveragePoolNCHWc against MaxPool, AveragePool ---- */

typedef struct pcase {
    bool is_max;
    int64_t x, n, c, h, w, k[2], s[2], d[2], pads[4];
    bool ceil_mode, include_pad;
    const char *auto_pad;
} pcase;

static void pool_case(wpk_context *ctx, const pcase *p) {
    int64_t xd[4] = {p->n, p->c, p->h, p->w};
    float *xv = rnd_buf(p->n * p->c * p->h * p->w);
    xv[3] = NAN; /* max propagates it; average too */
    ir_tensor X = f32(4, xd, xv), Xb = {0}, back = {0};
    op_call ref, blk;
    op_init(&ref, p->is_max ? "MaxPool" : "AveragePool", "", 1);
    ref.in[0] = &X;
    op_attr(&ref, a_ints("kernel_shape", 2, p->k));
    op_attr(&ref, a_ints("strides", 2, p->s));
    op_attr(&ref, a_ints("dilations", 2, p->d));
    if (p->auto_pad) op_attr(&ref, a_str("auto_pad", p->auto_pad));
    else op_attr(&ref, a_ints("pads", 4, p->pads));
    if (p->ceil_mode) op_attr(&ref, a_int("ceil_mode", 1));
    if (p->include_pad) op_attr(&ref, a_int("count_include_pad", 1));
    CHECK(op_run(ctx, &ref) == WPK_OK);
    op_init(&blk, p->is_max ? "MaxPoolNCHWc" : "AveragePoolNCHWc", "wpk", 1);
    for (int i = 0; i < ref.node.nattr; i++) op_attr(&blk, ref.attrs[i]);
    CHECK(reorder(ctx, &X, true, p->x, 0, &Xb) == WPK_OK);
    blk.in[0] = &Xb;
    wpk_status st = op_run(ctx, &blk);
    CHECK(st == WPK_OK);
    if (st == WPK_OK) {
        CHECK(reorder(ctx, &blk.y, false, p->x, p->c, &back) == WPK_OK);
        CHECK(ir_same_shape(&back, &ref.y));
        const float *a = back.data, *b = ref.y.data;
        bool ok = true;
        for (int64_t i = 0; i < ir_numel(&ref.y) && ok; i++)
            ok = (isnan(a[i]) && isnan(b[i])) || fabsf(a[i] - b[i]) <= 1e-5f * (1 + fabsf(b[i]));
        CHECK(ok);
        /* padded lanes: pools of zeros are zeros */
        const float *yb = blk.y.data;
        int64_t cb = blk.y.dims[1], plane = blk.y.dims[2] * blk.y.dims[3];
        bool zeros = true;
        for (int64_t c = p->c; c < cb * p->x; c++)
            for (int64_t s = 0; s < plane; s++)
                zeros &= yb[((c / p->x) * plane + s) * p->x + c % p->x] == 0.0f;
        CHECK(p->n != 1 || zeros);
    }
    free(back.data), free(blk.y.data), free(ref.y.data), free(Xb.data), free(xv);
}

static void test_pools(wpk_context *ctx) {
    pcase cases[] = {
        /* max, x, n, c, h, w, k, s, d, pads, ceil, include_pad, auto_pad */
        {true, 16, 1, 20, 13, 12, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, false, false, NULL},
        {true, 8, 2, 16, 9, 11, {3, 2}, {2, 3}, {1, 1}, {0, 1, 2, 0}, true, false, NULL},
        {true, 4, 1, 6, 10, 10, {2, 2}, {1, 1}, {2, 3}, {1, 0, 0, 1}, false, false, NULL},
        {true, 16, 1, 16, 7, 9, {3, 3}, {2, 2}, {1, 1}, {0}, false, false, "SAME_LOWER"},
        {false, 16, 1, 24, 13, 12, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, false, false, NULL},
        {false, 8, 1, 8, 13, 12, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, true, true, NULL},
        {false, 8, 2, 12, 8, 9, {2, 3}, {2, 1}, {1, 2}, {1, 0, 1, 2}, true, false, NULL},
        {false, 4, 1, 4, 6, 7, {3, 3}, {1, 1}, {1, 1}, {0}, false, true, "SAME_UPPER"},
        {false, 16, 1, 32, 7, 7, {7, 7}, {1, 1}, {1, 1}, {0}, false, false, "VALID"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) pool_case(ctx, &cases[i]);

    int64_t d4[4] = {1, 16, 4, 4};
    static float buf[256];
    ir_tensor t4 = f32(4, d4, buf);
    op_call c;
    op_init(&c, "MaxPoolNCHWc", "wpk", 1);
    c.in[0] = &t4;
    int64_t k[2] = {2, 2};
    op_attr(&c, a_ints("kernel_shape", 2, k));
    CHECK_ERR(ctx, op_run(ctx, &c), WPK_ERR_MODEL, "expected 5");
    free(c.y.data);
}

/* ---- the pass ---- */

/* Add node `op` (default domain, or wpk when not an ONNX op) reading and writing the named
 * values (created on first mention; "" is an omitted input). */
static int add(ir_graph *g, const char *op, const char *ins, const char *outs) {
    const char *lists[2] = {ins, outs};
    int ids[2][8], counts[2] = {0, 0};
    for (int l = 0; l < 2; l++)
        for (const char *p = lists[l]; *p;) {
            char name[64];
            int len = 0;
            while (p[len] && p[len] != ',') len++;
            snprintf(name, sizeof name, "%.*s", len, p);
            ids[l][counts[l]++] = len ? ir_graph_value(g, name) : -1;
            p += len + (p[len] == ',');
        }
    char node_name[64];
    snprintf(node_name, sizeof node_name, "%s_%d", op, g->nnodes);
    bool onnx = ir_op_from_onnx("", op) != IR_OP_UNSUPPORTED;
    int k = ir_graph_add_node(g, node_name, op, onnx ? "" : "wpk", onnx ? 17 : 1, counts[0],
                              counts[1]);
    g->nodes[k].attrs = arena_alloc(&g->mem, sizeof(ir_attr));
    memset(g->nodes[k].attrs, 0, sizeof(ir_attr));
    for (int i = 0; i < counts[0]; i++) g->nodes[k].in[i] = ids[0][i];
    for (int i = 0; i < counts[1]; i++) g->nodes[k].out[i] = ids[1][i];
    return k;
}

static ir_node *last(ir_graph *g) { return &g->nodes[g->nnodes - 1]; }

/* A random float32 initializer. */
static void weight(ir_graph *g, const char *name, int ndim, const int64_t *dims) {
    ir_tensor t = f32(ndim, dims, NULL);
    t.data = rnd_buf(ir_numel(&t));
    ir_graph_add_const(g, name, &t);
    free(t.data);
}
#define WEIGHT(g, name, ...) \
    weight(g, name, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
           (int64_t[]){__VA_ARGS__})

static ir_graph *new_graph(const char *input, int64_t n, int64_t c, int64_t h, int64_t w) {
    ir_graph *g = ir_graph_create();
    g->opset = 17;
    int x = ir_graph_add_value(g, input);
    g->values[x].is_input = true;
    g->values[x].t = (ir_tensor){.dtype = WPK_DTYPE_FLOAT32, .ndim = 4, .dims = {n, c, h, w}};
    g->inputs = arena_alloc(&g->mem, sizeof(int));
    g->inputs[0] = x;
    g->ninputs = 1;
    g->outputs = arena_alloc(&g->mem, 4 * sizeof(int));
    return g;
}

static void set_outputs(ir_graph *g, const char *a, const char *b) {
    g->outputs[0] = ir_graph_find_value(g, a);
    g->noutputs = 1;
    if (b) g->outputs[g->noutputs++] = ir_graph_find_value(g, b);
}

static void conv_attrs(ir_graph *g, ir_node *n, int64_t k, int64_t s, int64_t p, int64_t group) {
    int64_t ks[2] = {k, k}, ss[2] = {s, s}, ps[4] = {p, p, p, p};
    ir_node_set_ints(g, n, "kernel_shape", ks, 2);
    ir_node_set_ints(g, n, "strides", ss, 2);
    ir_node_set_ints(g, n, "pads", ps, 4);
    if (group != 1) ir_node_set_int(g, n, "group", group);
}

/* Run g (reference interpreter) on a seeded input (symbolic dims bound to 2); copies of its
 * outputs in outs[]. */
static bool run_graph(wpk_context *ctx, const ir_graph *g, float **outs, int64_t *counts) {
    ir_exec ex;
    if (ir_exec_init(ctx, &ex, g)) return false;
    ir_tensor in = g->values[g->inputs[0]].t;
    for (int i = 0; i < in.ndim; i++)
        if (in.dims[i] < 0) in.dims[i] = 2; /* a symbolic batch */
    bool ok = ir_exec_reserve(ctx, &ex, g->inputs[0], WPK_DTYPE_FLOAT32, in.ndim, in.dims) ==
              WPK_OK;
    if (ok) {
        uint32_t keep = seed;
        seed = 99;
        float *d = ex.vals[g->inputs[0]].data;
        for (int64_t i = 0; i < ir_numel(&in); i++) d[i] = rnd();
        seed = keep;
        ok = ir_exec_run(ctx, &ex, g) == WPK_OK;
        if (!ok) fprintf(stderr, "  run failed: %s\n", wpk_context_error(ctx));
    }
    for (int o = 0; ok && o < g->noutputs; o++) {
        const ir_tensor *t = &ex.vals[g->outputs[o]];
        counts[o] = ir_numel(t);
        outs[o] = malloc(sizeof(float) * (size_t)(counts[o] + 1));
        memcpy(outs[o], t->data, sizeof(float) * (size_t)counts[o]);
    }
    ir_exec_free(&ex);
    return ok;
}

static int count_op(const ir_graph *g, ir_op op) {
    int n = 0;
    for (int k = 0; k < g->nnodes; k++) n += g->nodes[k].op == op;
    return n;
}

/* The node producing value `name`; NULL when none. */
static const ir_node *producer(const ir_graph *g, const char *name) {
    int v = ir_graph_find_value(g, name);
    return v >= 0 && g->values[v].producer >= 0 ? &g->nodes[g->values[v].producer] : NULL;
}

typedef struct expect {
    int convs, reorders, changes; /* ConvNCHWc and Reorder nodes after; -1: don't check */
} expect;

/* Run the layout pass alone on a clone of src with block x; check the counts and that the
 * outputs are unchanged. Returns the rewritten clone (the caller frees it). */
static ir_graph *check_layout(wpk_context *ctx, ir_graph *src, int x, expect e) {
    CHECK(ir_graph_toposort(ctx, src) == WPK_OK);
    CHECK(pass_infer_shapes(ctx, src) == WPK_OK);
    float *want[4] = {0}, *got[4] = {0};
    int64_t nwant[4], ngot[4];
    CHECK(run_graph(ctx, src, want, nwant));
    ir_graph *g = ir_graph_clone(src);
    pass_options opt = pass_default_options();
    opt.level = 3;
    opt.vector_floats = x;
    int changes = -1;
    CHECK(pass_infer_shapes(ctx, g) == WPK_OK);
    wpk_status st = pass_layout(ctx, g, &opt, &changes);
    CHECK(st == WPK_OK);
    if (st) fprintf(stderr, "  %s\n", wpk_context_error(ctx));
    CHECK(pass_infer_shapes(ctx, g) == WPK_OK);
    CHECK(count_op(g, IR_OP_CONV_NCHWC) == e.convs);
    CHECK(count_op(g, IR_OP_REORDER) == e.reorders);
    if (e.changes >= 0) CHECK(changes == e.changes);
    if (count_op(g, IR_OP_CONV_NCHWC) != e.convs || count_op(g, IR_OP_REORDER) != e.reorders)
        fprintf(stderr, "  got %d ConvNCHWc, %d Reorder\n", count_op(g, IR_OP_CONV_NCHWC),
                count_op(g, IR_OP_REORDER));
    CHECK(run_graph(ctx, g, got, ngot));
    for (int o = 0; o < src->noutputs; o++) {
        CHECK(g->outputs[o] >= 0 && !strcmp(g->values[g->outputs[o]].name,
                                             src->values[src->outputs[o]].name));
        CHECK(want[o] && got[o] && nwant[o] == ngot[o] && near(got[o], want[o], nwant[o], 1e-4f));
        free(want[o]), free(got[o]);
    }
    return g;
}

/* conv -> relu -> strided conv, 32 -> 32 -> 48 channels: one region, Reorders at x and y. */
static void test_chain(wpk_context *ctx) {
    for (int x = 4; x <= 16; x *= 2) {
        ir_graph *g = new_graph("x", 1, 32, 10, 12);
        WEIGHT(g, "w1", 32, 32, 3, 3);
        WEIGHT(g, "b1", 32);
        WEIGHT(g, "w2", 48, 32, 3, 3);
        add(g, "Conv", "x,w1,b1", "c1");
        conv_attrs(g, last(g), 3, 1, 1, 1);
        add(g, "Relu", "c1", "r1");
        add(g, "Conv", "r1,w2", "y");
        conv_attrs(g, last(g), 3, 2, 1, 1);
        set_outputs(g, "y", NULL);
        ir_graph *opt = check_layout(ctx, g, x, (expect){2, 2, 5});
        const ir_node *exit = producer(opt, "y"), *relu = producer(opt, "r1_nchwc");
        CHECK(exit && exit->op == IR_OP_REORDER && ir_attr_int(exit, "channels", 0) == 48);
        CHECK(relu && relu->op == IR_OP_RELU);
        int r1 = ir_graph_find_value(opt, "r1");
        CHECK(r1 < 0 || ir_graph_count_uses(opt, r1) == 0); /* nothing reads an NCHW copy */
        ir_graph_free(opt);
        ir_graph_free(g);
    }
}

/* A ResNet-shaped body: RGB stem (read as NCHW, no Reorder), max pool, a basic block with
 * the residual Add and Relu unfused, then the fused form of the same block, global pool,
 * Flatten and Gemm. Everything up to the global pool runs blocked; the one exit Reorder moves
 * 32 values. */
static ir_graph *resnetish(bool fused) {
    ir_graph *g = new_graph("img", 1, 3, 33, 31);
    WEIGHT(g, "ws", 32, 3, 7, 7);
    WEIGHT(g, "bs", 32);
    WEIGHT(g, "wa", 32, 32, 3, 3);
    WEIGHT(g, "wb", 32, 32, 3, 3);
    WEIGHT(g, "wc", 32, 32, 3, 3);
    WEIGHT(g, "wd", 32, 32, 3, 3);
    WEIGHT(g, "bd", 32);
    WEIGHT(g, "fc", 10, 32);
    add(g, "Conv", "img,ws,bs", "s");
    conv_attrs(g, last(g), 7, 2, 3, 1);
    add(g, "Relu", "s", "sr");
    add(g, "MaxPool", "sr", "p");
    int64_t k3[2] = {3, 3}, s2[2] = {2, 2}, p1[4] = {1, 1, 1, 1};
    ir_node_set_ints(g, last(g), "kernel_shape", k3, 2);
    ir_node_set_ints(g, last(g), "strides", s2, 2);
    ir_node_set_ints(g, last(g), "pads", p1, 4);
    add(g, "Conv", "p,wa", "a");
    conv_attrs(g, last(g), 3, 1, 1, 1);
    add(g, "Relu", "a", "ar");
    add(g, "Conv", "ar,wb", "b");
    conv_attrs(g, last(g), 3, 1, 1, 1);
    add(g, "Add", "b,p", "sum");
    add(g, "Relu", "sum", "blk");
    if (fused) {
        add(g, "FusedConv", "blk,wc", "c");
        conv_attrs(g, last(g), 3, 1, 1, 1);
        ir_node_set_str(g, last(g), "activation", "Relu");
        add(g, "FusedConv", "c,wd,bd,blk", "d");
        conv_attrs(g, last(g), 3, 1, 1, 1);
        ir_node_set_str(g, last(g), "activation", "Relu");
    } else {
        add(g, "Conv", "blk,wc", "c");
        conv_attrs(g, last(g), 3, 1, 1, 1);
        add(g, "Conv", "c,wd,bd", "dd");
        conv_attrs(g, last(g), 3, 1, 1, 1);
        add(g, "Add", "blk,dd", "d");
    }
    add(g, "GlobalAveragePool", "d", "gap");
    add(g, "Flatten", "gap", "f");
    add(g, "Gemm", "f,fc", "logits");
    ir_node_set_int(g, last(g), "transB", 1);
    set_outputs(g, "logits", NULL);
    return g;
}

static void test_resnetish(wpk_context *ctx) {
    for (int fused = 0; fused < 2; fused++) {
        ir_graph *g = resnetish(fused);
        ir_graph *opt = check_layout(ctx, g, 16, (expect){5, 1, -1});
        const ir_node *stem = producer(opt, "s_nchwc"), *pool = producer(opt, "p_nchwc");
        const ir_node *gap = producer(opt, "gap_nchwc"), *exit = producer(opt, "gap");
        CHECK(stem && stem->op == IR_OP_CONV_NCHWC &&
              stem->in[0] == ir_graph_find_value(opt, "img"));
        int count = 0;
        const int64_t *ks = pool ? ir_attr_ints(pool, "kernel_shape", &count) : NULL;
        CHECK(pool && pool->op == IR_OP_MAX_POOL_NCHWC && count == 2 && ks[0] == 3);
        ks = gap ? ir_attr_ints(gap, "kernel_shape", &count) : NULL;
        CHECK(gap && gap->op == IR_OP_AVERAGE_POOL_NCHWC && count == 2 && ks[0] == 9 &&
              ks[1] == 8);
        CHECK(exit && exit->op == IR_OP_REORDER);
        CHECK(count_op(opt, IR_OP_ADD) == 2 - fused);
        ir_graph_free(opt);
        ir_graph_free(g);
    }
}

/* 24 channels at x = 16: padded. Relu keeps the padding zero, so one region; Sigmoid would
 * not, so it splits the chain into two regions, each with its own Reorders. */
static void test_padded(wpk_context *ctx) {
    for (int sig = 0; sig < 2; sig++) {
        ir_graph *g = new_graph("x", 1, 24, 9, 9);
        WEIGHT(g, "w1", 24, 24, 3, 3);
        WEIGHT(g, "w2", 24, 24, 3, 3);
        add(g, "Conv", "x,w1", "c1");
        conv_attrs(g, last(g), 3, 1, 1, 1);
        add(g, sig ? "Sigmoid" : "Relu", "c1", "r");
        add(g, "Conv", "r,w2", "y");
        conv_attrs(g, last(g), 3, 1, 1, 1);
        set_outputs(g, "y", NULL);
        ir_graph *opt = check_layout(ctx, g, 16, (expect){2, sig ? 4 : 2, -1});
        const ir_node *act = producer(opt, sig ? "r" : "r_nchwc");
        CHECK(act && act->op == (sig ? IR_OP_SIGMOID : IR_OP_RELU));
        ir_graph_free(opt);
        ir_graph_free(g);
    }
}

/* Two convs concatenated along channels, a per-channel scale and shift (a lone BN's form),
 * a 1x1 conv; one conv's output is also read outside (Flatten, a second graph output). */
static void test_concat_branch(wpk_context *ctx) {
    ir_graph *g = new_graph("x", 1, 16, 8, 8);
    WEIGHT(g, "wa", 16, 16, 3, 3);
    WEIGHT(g, "wb", 32, 16, 3, 3);
    WEIGHT(g, "scale", 48, 1, 1);
    WEIGHT(g, "shift", 1, 48, 1, 1);
    WEIGHT(g, "wc", 16, 48, 1, 1);
    add(g, "Conv", "x,wa", "a");
    conv_attrs(g, last(g), 3, 1, 1, 1);
    add(g, "Conv", "x,wb", "b");
    conv_attrs(g, last(g), 3, 1, 1, 1);
    add(g, "Concat", "a,b", "cat");
    ir_node_set_int(g, last(g), "axis", -3);
    add(g, "Mul", "cat,scale", "m");
    add(g, "Add", "shift,m", "sh");
    add(g, "Conv", "sh,wc", "y");
    conv_attrs(g, last(g), 1, 1, 0, 1);
    add(g, "Flatten", "a", "fa");
    set_outputs(g, "y", "fa");
    /* entries: x once; exits: y and a */
    ir_graph *opt = check_layout(ctx, g, 8, (expect){3, 3, -1});
    const ir_node *cat = producer(opt, "cat_nchwc"), *mul = producer(opt, "m_nchwc");
    CHECK(cat && cat->op == IR_OP_CONCAT && ir_attr_int(cat, "axis", 0) == 1);
    CHECK(mul && mul->op == IR_OP_MUL && opt->values[mul->in[1]].t.ndim == 5);
    CHECK(producer(opt, "a") && producer(opt, "a")->op == IR_OP_REORDER);
    ir_graph_free(opt);
    ir_graph_free(g);
}

/* Squeeze-excitation: the scale [N, C, 1, 1] multiplies the blocked tensor by broadcasting; the
 * reduce conv (4 output channels, fewer than a block) stays NCHW and the expand conv reads its
 * NCHW output directly. Then a Pad of H and W and an AveragePool, as PyTorch exports
 * AvgPool2d with padding. */
static void test_squeeze_excite(wpk_context *ctx) {
    ir_graph *g = new_graph("x", 1, 16, 9, 9);
    WEIGHT(g, "w", 32, 16, 3, 3);
    WEIGHT(g, "wr", 4, 32, 1, 1);
    WEIGHT(g, "we", 32, 4, 1, 1);
    WEIGHT(g, "be", 32);
    add(g, "Conv", "x,w", "c");
    conv_attrs(g, last(g), 3, 1, 1, 1);
    add(g, "GlobalAveragePool", "c", "gap");
    add(g, "Conv", "gap,wr", "red");
    conv_attrs(g, last(g), 1, 1, 0, 1);
    add(g, "Relu", "red", "redr");
    add(g, "Conv", "redr,we,be", "exp");
    conv_attrs(g, last(g), 1, 1, 0, 1);
    add(g, "Sigmoid", "exp", "s");
    add(g, "Mul", "s,c", "m");
    int64_t pads[8] = {0, 0, 1, 2, 0, 0, 1, 0};
    ir_tensor pt = {.dtype = WPK_DTYPE_INT64, .ndim = 1, .dims = {8}, .data = pads};
    ir_graph_add_const(g, "pads", &pt);
    add(g, "Pad", "m,pads", "pm");
    add(g, "AveragePool", "pm", "y");
    int64_t k2[2] = {2, 2};
    ir_node_set_ints(g, last(g), "kernel_shape", k2, 2);
    ir_node_set_ints(g, last(g), "strides", k2, 2);
    set_outputs(g, "y", NULL);
    ir_graph *opt = check_layout(ctx, g, 16, (expect){2, 3, -1});
    const ir_node *exp = producer(opt, "exp_nchwc"), *pad = producer(opt, "pm_nchwc");
    CHECK(exp && exp->op == IR_OP_CONV_NCHWC && exp->in[0] == ir_graph_find_value(opt, "redr"));
    CHECK(producer(opt, "red") && producer(opt, "red")->op == IR_OP_CONV);
    CHECK(producer(opt, "gap") && producer(opt, "gap")->op == IR_OP_REORDER);
    CHECK(pad && pad->op == IR_OP_PAD && ir_numel(&opt->values[pad->in[1]].t) == 10);
    ir_graph_free(opt);
    ir_graph_free(g);
}

/* Grouped convs: 24 channels in 3 groups of 8 run blocked at x = 8 and are declined at
 * x = 16 (8 is not a whole block); a depthwise conv next to a 1x1 conv is taken. */
static void test_groups(wpk_context *ctx) {
    for (int x = 8; x <= 16; x *= 2) {
        ir_graph *g = new_graph("x", 1, 24, 10, 10);
        WEIGHT(g, "w1", 48, 8, 3, 3);
        WEIGHT(g, "w2", 48, 48, 1, 1);
        add(g, "Conv", "x,w1", "c1");
        conv_attrs(g, last(g), 3, 1, 1, 3);
        add(g, "Conv", "c1,w2", "y");
        conv_attrs(g, last(g), 1, 1, 0, 1);
        set_outputs(g, "y", NULL);
        /* at x = 16 only the 1x1 conv remains: 48*48*100 MACs against 2*4800 moved pays */
        ir_graph *opt = check_layout(ctx, g, x, (expect){x == 8 ? 2 : 1, 2, -1});
        ir_graph_free(opt);
        ir_graph_free(g);
    }
    ir_graph *g = new_graph("x", 1, 32, 14, 14);
    WEIGHT(g, "dw", 32, 1, 3, 3);
    WEIGHT(g, "pw", 64, 32, 1, 1);
    add(g, "Conv", "x,dw", "d");
    conv_attrs(g, last(g), 3, 2, 1, 32);
    add(g, "Clip", "d", "d6");
    add(g, "Conv", "d6,pw", "y");
    conv_attrs(g, last(g), 1, 1, 0, 1);
    set_outputs(g, "y", NULL);
    ir_graph *opt = check_layout(ctx, g, 16, (expect){2, 2, -1});
    ir_graph_free(opt);
    ir_graph_free(g);
}

/* What the pass leaves alone: a lone depthwise conv (4.5 MACs per element reordered, below the
 * rule's 8), weights that are not constant, fewer output channels than a block, a 1-D conv,
 * unknown spatial dims. */
static void test_declines(wpk_context *ctx) {
    ir_graph *g = new_graph("x", 1, 32, 16, 16);
    WEIGHT(g, "dw", 32, 1, 3, 3);
    add(g, "Conv", "x,dw", "y");
    conv_attrs(g, last(g), 3, 1, 1, 32);
    set_outputs(g, "y", NULL);
    ir_graph *opt = check_layout(ctx, g, 16, (expect){0, 0, 0});
    ir_graph_free(opt);
    ir_graph_free(g);

    g = new_graph("x", 1, 32, 8, 8);
    WEIGHT(g, "w", 32, 32, 3, 3);
    add(g, "Relu", "w", "wr"); /* computed weights */
    add(g, "Conv", "x,wr", "y");
    conv_attrs(g, last(g), 3, 1, 1, 1);
    set_outputs(g, "y", NULL);
    opt = check_layout(ctx, g, 16, (expect){0, 0, 0});
    ir_graph_free(opt);
    ir_graph_free(g);

    g = new_graph("x", 1, 32, 8, 8);
    WEIGHT(g, "w", 4, 32, 3, 3);
    add(g, "Conv", "x,w", "y");
    conv_attrs(g, last(g), 3, 1, 1, 1);
    set_outputs(g, "y", NULL);
    opt = check_layout(ctx, g, 8, (expect){0, 0, 0});
    ir_graph_free(opt);
    ir_graph_free(g);

    int changes = -1;
    pass_options o = pass_default_options();
    o.vector_floats = 16;
    g = ir_graph_create();
    int x = ir_graph_add_value(g, "x");
    g->values[x].is_input = true;
    g->values[x].t = (ir_tensor){.dtype = WPK_DTYPE_FLOAT32, .ndim = 3, .dims = {1, 32, 50}};
    g->inputs = arena_alloc(&g->mem, sizeof(int));
    g->inputs[0] = x;
    g->ninputs = 1;
    g->outputs = arena_alloc(&g->mem, sizeof(int));
    WEIGHT(g, "w", 32, 32, 3);
    add(g, "Conv", "x,w", "y");
    set_outputs(g, "y", NULL);
    CHECK(pass_infer_shapes(ctx, g) == WPK_OK);
    changes = -1;
    CHECK(pass_layout(ctx, g, &o, &changes) == WPK_OK && changes == 0);
    ir_graph_free(g);

    g = new_graph("x", 1, 32, -1, 8);
    WEIGHT(g, "w", 32, 32, 3, 3);
    add(g, "Conv", "x,w", "y");
    conv_attrs(g, last(g), 3, 1, 1, 1);
    set_outputs(g, "y", NULL);
    CHECK(pass_infer_shapes(ctx, g) == WPK_OK);
    changes = -1;
    CHECK(pass_layout(ctx, g, &o, &changes) == WPK_OK && changes == 0);
    ir_graph_free(g);
}

/* A symbolic batch is fine: the blocked ops take N at run time and the rule compares work per
 * image. Run with N = 2. */
static void test_symbolic_batch(wpk_context *ctx) {
    ir_graph *g = new_graph("x", -1, 16, 6, 7);
    WEIGHT(g, "w1", 32, 16, 3, 3);
    WEIGHT(g, "w2", 32, 32, 3, 3);
    add(g, "Conv", "x,w1", "c");
    conv_attrs(g, last(g), 3, 1, 1, 1);
    add(g, "Relu", "c", "r");
    add(g, "Conv", "r,w2", "d");
    conv_attrs(g, last(g), 3, 1, 1, 1);
    add(g, "Add", "d,r", "y");
    set_outputs(g, "y", NULL);
    ir_graph *opt = check_layout(ctx, g, 16, (expect){2, 2, 6});
    const ir_value *r = &opt->values[ir_graph_find_value(opt, "r_nchwc")];
    CHECK(r->t.ndim == 5 && r->t.dims[0] == -1 && r->t.dims[1] == 2 && r->t.dims[4] == 16);
    ir_graph_free(opt);
    ir_graph_free(g);
}

/* Every allocation of the pass failing in turn: WPK_ERR_NOMEM with a message, no crash (the
 * sanitizer build checks for leaks). */
static void test_alloc_faults(wpk_context *ctx) {
    ir_graph *src = resnetish(true);
    CHECK(ir_graph_toposort(ctx, src) == WPK_OK);
    CHECK(pass_infer_shapes(ctx, src) == WPK_OK);
    pass_options opt = pass_default_options();
    opt.vector_floats = 16;
    long total = 0;
    for (long n = 0;; n++) {
        ir_graph *g = ir_graph_clone(src);
        int changes;
        wpk_clear_error(ctx);
        wpk_alloc_fail_at(n);
        wpk_status st = pass_layout(ctx, g, &opt, &changes);
        long made = wpk_alloc_count();
        wpk_alloc_fail_at(0);
        ir_graph_free(g);
        if (n == 0) {
            CHECK(st == WPK_OK);
            total = made;
            continue;
        }
        CHECK(st == WPK_ERR_NOMEM && wpk_context_error(ctx)[0]);
        if (st != WPK_ERR_NOMEM)
            fprintf(stderr, "  allocation %ld of %ld failing gave %s\n", n, total,
                    wpk_status_name(st));
        if (n >= total) break;
    }
    CHECK(total > 10);
    ir_graph_free(src);
}

int main(void) {
    wpk_context *ctx = wpk_context_create();
    test_reorder(ctx);
    test_reorder_errors(ctx);
    test_conv_nchwc(ctx);
    test_conv_nchwc_errors(ctx);
    test_pools(ctx);
    test_chain(ctx);
    test_resnetish(ctx);
    test_padded(ctx);
    test_concat_branch(ctx);
    test_groups(ctx);
    test_squeeze_excite(ctx);
    test_declines(ctx);
    test_symbolic_batch(ctx);
    test_alloc_faults(ctx);
    wpk_context_free(ctx);
    CHECK_DONE();
}
