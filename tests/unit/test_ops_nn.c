/* test_ops_nn.c -- the NN ops' shape functions and reference kernels (Conv, ConvTranspose,
 * pools, BatchNormalization, LayerNormalization, Softmax, ReduceMean, Gemm, MatMul), called
 * directly on hand-built nodes: hand-computed cases (mostly the examples of the ONNX operator
 * docs), random cases against naive references written here with a different loop structure
 * (one output element at a time, straight from the spec's formulas), and must-fail cases. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "ir/graph.h"

/* ---- building nodes and tensors ---- */

static ir_attr attr_ints(const char *name, int count, const int64_t *v) {
    return (ir_attr){.name = name, .kind = IR_ATTR_INTS, .n = count, .ints = (int64_t *)v};
}
#define INTS(name, ...)                                                     \
    attr_ints(name, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
              (int64_t[]){__VA_ARGS__})
static ir_attr attr_int(const char *name, int64_t v) {
    return (ir_attr){.name = name, .kind = IR_ATTR_INT, .i = v};
}
static ir_attr attr_float(const char *name, float v) {
    return (ir_attr){.name = name, .kind = IR_ATTR_FLOAT, .f = v};
}
static ir_attr attr_str(const char *name, const char *s) {
    return (ir_attr){.name = name, .kind = IR_ATTR_STRING, .s = s};
}

static ir_node node(const char *op_type, int opset, int nin, int nout, int nattr, ir_attr *attrs) {
    ir_node n = {0};
    n.name = "n0";
    n.op_type = op_type;
    n.domain = "";
    n.op = ir_op_from_onnx("", op_type);
    n.opset = opset;
    n.nin = nin;
    n.nout = nout;
    n.nattr = nattr;
    n.attrs = attrs;
    return n;
}

static ir_tensor tensor(wpk_dtype dtype, int ndim, const int64_t *dims, void *data) {
    ir_tensor t = {.dtype = dtype, .ndim = ndim, .data = data};
    for (int i = 0; i < ndim; i++) t.dims[i] = dims[i];
    return t;
}
#define DIMS(...) \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}
#define F32(data, ...) tensor(WPK_DTYPE_FLOAT32, DIMS(__VA_ARGS__), data)

/* Shape function, then the reference kernel into freshly allocated outputs (freed by the
 * caller with release()). */
static wpk_status run(wpk_context *ctx, const ir_node *n, ir_tensor **in, ir_tensor **out) {
    const ir_op_info *info = ir_op_get(n->op);
    for (int i = 0; i < n->nout; i++)
        if (out[i]) *out[i] = (ir_tensor){0};
    wpk_status st = info->shape(ctx, n, in, out);
    if (st) return st;
    for (int i = 0; i < n->nout; i++)
        if (out[i])
            out[i]->data = calloc((size_t)ir_numel(out[i]) + 1, wpk_dtype_size(out[i]->dtype));
    return info->ref(ctx, n, in, out);
}

static void release(ir_tensor **out, int nout) {
    for (int i = 0; i < nout; i++)
        if (out[i]) {
            free(out[i]->data);
            out[i]->data = NULL;
        }
}

static bool has_dims(const ir_tensor *t, int ndim, const int64_t *dims) {
    if (t->ndim != ndim) return false;
    for (int i = 0; i < ndim; i++)
        if (t->dims[i] != dims[i]) return false;
    return true;
}
#define CHECK_DIMS(t, ...) CHECK(has_dims(t, DIMS(__VA_ARGS__)))

/* got ~= want elementwise within an absolute+relative tolerance; reports the first miss */
static bool near(const float *got, const float *want, int64_t count, float tol) {
    for (int64_t i = 0; i < count; i++) {
        bool both_nan = isnan(got[i]) && isnan(want[i]);
        if (!both_nan && !(fabsf(got[i] - want[i]) <= tol * (1.0f + fabsf(want[i])))) {
            fprintf(stderr, "  element %lld: got %.7g, want %.7g\n", (long long)i, got[i], want[i]);
            return false;
        }
    }
    return true;
}

static uint32_t seed = 12345;
static float rnd(void) {
    seed = seed * 1664525u + 1013904223u;
    return (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}
static float *rnd_buf(int64_t count) {
    float *p = malloc(sizeof(float) * (size_t)(count + 1));
    for (int64_t i = 0; i < count; i++) p[i] = rnd();
    return p;
}

/* ---- Conv ---- */

/* A conv case with up to 3 spatial dims (unused dims have size 1). */
typedef struct conv_case {
    int nsp;
    int64_t n, c, m, group;
    int64_t in[3], k[3], s[3], d[3], p0[3], p1[3];
    bool bias;
    const char *auto_pad; /* NULL: explicit pads */
} conv_case;

/* out size and begin pad of one dim, straight from the spec */
static void conv_out_dim(const conv_case *cc, int i, int64_t *out, int64_t *pad0) {
    int64_t span = (cc->k[i] - 1) * cc->d[i] + 1;
    if (cc->auto_pad && strncmp(cc->auto_pad, "SAME", 4) == 0) {
        *out = (cc->in[i] + cc->s[i] - 1) / cc->s[i];
        int64_t total = (*out - 1) * cc->s[i] + span - cc->in[i];
        if (total < 0) total = 0;
        *pad0 = strcmp(cc->auto_pad, "SAME_UPPER") == 0 ? total / 2 : (total + 1) / 2;
    } else if (cc->auto_pad) { /* VALID */
        *out = (cc->in[i] - span) / cc->s[i] + 1;
        *pad0 = 0;
    } else {
        *out = (cc->in[i] + cc->p0[i] + cc->p1[i] - span) / cc->s[i] + 1;
        *pad0 = cc->p0[i];
    }
}

static void check_conv_case(wpk_context *ctx, const conv_case *cc) {
    int64_t in3[3] = {1, 1, 1}, k3[3] = {1, 1, 1}, s3[3] = {1, 1, 1}, d3[3] = {1, 1, 1};
    int64_t o3[3] = {1, 1, 1}, p3[3] = {0, 0, 0};
    int off = 3 - cc->nsp;
    for (int i = 0; i < cc->nsp; i++) {
        in3[off + i] = cc->in[i], k3[off + i] = cc->k[i];
        s3[off + i] = cc->s[i], d3[off + i] = cc->d[i];
        conv_out_dim(cc, i, &o3[off + i], &p3[off + i]);
    }
    int64_t xdims[5] = {cc->n, cc->c}, wdims[5] = {cc->m, cc->c / cc->group};
    for (int i = 0; i < cc->nsp; i++) {
        xdims[2 + i] = cc->in[i];
        wdims[2 + i] = cc->k[i];
    }
    int64_t xsz = cc->n * cc->c * in3[0] * in3[1] * in3[2];
    int64_t wsz = cc->m * (cc->c / cc->group) * k3[0] * k3[1] * k3[2];
    int64_t osp = o3[0] * o3[1] * o3[2], ysz = cc->n * cc->m * osp;
    float *x = rnd_buf(xsz), *w = rnd_buf(wsz), *b = rnd_buf(cc->m),
          *want = malloc(sizeof(float) * (size_t)ysz);

    int64_t cg = cc->c / cc->group, mg = cc->m / cc->group;
    for (int64_t n = 0; n < cc->n; n++)
        for (int64_t m = 0; m < cc->m; m++)
            for (int64_t o = 0; o < osp; o++) {
                int64_t od = o / (o3[1] * o3[2]), oh = o / o3[2] % o3[1], ow = o % o3[2];
                double sum = cc->bias ? b[m] : 0.0;
                for (int64_t j = 0; j < cg; j++)
                    for (int64_t kd = 0; kd < k3[0]; kd++)
                        for (int64_t kh = 0; kh < k3[1]; kh++)
                            for (int64_t kw = 0; kw < k3[2]; kw++) {
                                int64_t id = od * s3[0] - p3[0] + kd * d3[0];
                                int64_t ih = oh * s3[1] - p3[1] + kh * d3[1];
                                int64_t iw = ow * s3[2] - p3[2] + kw * d3[2];
                                if (id < 0 || id >= in3[0] || ih < 0 || ih >= in3[1] || iw < 0 ||
                                    iw >= in3[2])
                                    continue;
                                int64_t ic = m / mg * cg + j;
                                int64_t xi = ((n * cc->c + ic) * in3[0] + id) * in3[1] + ih;
                                int64_t wi = ((m * cg + j) * k3[0] + kd) * k3[1] + kh;
                                sum += x[xi * in3[2] + iw] * w[wi * k3[2] + kw];
                            }
                want[(n * cc->m + m) * osp + o] = (float)sum;
            }

    ir_attr attrs[8];
    int na = 0;
    attrs[na++] = attr_int("group", cc->group);
    attrs[na++] = attr_ints("strides", cc->nsp, cc->s);
    attrs[na++] = attr_ints("dilations", cc->nsp, cc->d);
    int64_t pads[6];
    for (int i = 0; i < cc->nsp; i++) pads[i] = cc->p0[i], pads[cc->nsp + i] = cc->p1[i];
    if (cc->auto_pad) attrs[na++] = attr_str("auto_pad", cc->auto_pad);
    else attrs[na++] = attr_ints("pads", 2 * cc->nsp, pads);
    ir_node n = node("Conv", 11, cc->bias ? 3 : 2, 1, na, attrs);
    ir_tensor tx = tensor(WPK_DTYPE_FLOAT32, cc->nsp + 2, xdims, x);
    ir_tensor tw = tensor(WPK_DTYPE_FLOAT32, cc->nsp + 2, wdims, w);
    ir_tensor tb = F32(b, cc->m), y;
    ir_tensor *in[3] = {&tx, &tw, &tb}, *out[1] = {&y};
    wpk_status st = run(ctx, &n, in, out);
    CHECK(st == WPK_OK);
    if (st == WPK_OK) {
        CHECK(ir_numel(&y) == ysz && y.dims[1] == cc->m);
        for (int i = 0; i < cc->nsp; i++) CHECK(y.dims[2 + i] == o3[off + i]);
        if (ir_numel(&y) == ysz && !near(y.data, want, ysz, 1e-4f))
            fprintf(stderr, "  conv case: nsp %d group %lld auto_pad %s\n", cc->nsp,
                    (long long)cc->group, cc->auto_pad ? cc->auto_pad : "-");
        CHECK(ir_numel(&y) == ysz && near(y.data, want, ysz, 1e-4f));
    } else {
        fprintf(stderr, "  %s\n", wpk_context_error(ctx));
    }
    release(out, 1);
    free(x), free(w), free(b), free(want);
}

static void test_conv(wpk_context *ctx) {
    /* the ONNX doc example: 5x5 ramp, 3x3 ones */
    float x[25], w[9];
    for (int i = 0; i < 25; i++) x[i] = (float)i;
    for (int i = 0; i < 9; i++) w[i] = 1.0f;
    ir_tensor tx = F32(x, 1, 1, 5, 5), tw = F32(w, 1, 1, 3, 3), y;
    ir_tensor *in[3] = {&tx, &tw, NULL}, *out[1] = {&y};

    ir_attr a1[] = {INTS("kernel_shape", 3, 3), INTS("pads", 1, 1, 1, 1)};
    ir_node n = node("Conv", 11, 2, 1, 2, a1);
    CHECK(run(ctx, &n, in, out) == WPK_OK);
    CHECK_DIMS(&y, 1, 1, 5, 5);
    static const float padded[25] = {12, 21, 27, 33, 24, 33, 54, 63, 72, 51, 63, 99, 108, 117, 81,
                                     93, 144, 153, 162, 111, 72, 111, 117, 123, 84};
    CHECK(near(y.data, padded, 25, 1e-6f));
    release(out, 1);

    ir_attr a2[] = {INTS("strides", 2, 2), INTS("pads", 1, 1, 1, 1)};
    n = node("Conv", 1, 2, 1, 2, a2);
    CHECK(run(ctx, &n, in, out) == WPK_OK);
    CHECK_DIMS(&y, 1, 1, 3, 3);
    static const float strided[9] = {12, 27, 24, 63, 108, 81, 72, 117, 84};
    CHECK(near(y.data, strided, 9, 1e-6f));
    release(out, 1);

    /* asymmetric pads with stride: 7x5 -> 4x3 (conv_with_strides_and_asymmetric_padding) */
    float x7[35];
    for (int i = 0; i < 35; i++) x7[i] = (float)i;
    ir_tensor tx7 = F32(x7, 1, 1, 7, 5);
    ir_tensor *in7[2] = {&tx7, &tw};
    ir_attr a3[] = {INTS("strides", 2, 2), INTS("pads", 1, 0, 1, 0)};
    n = node("Conv", 11, 2, 1, 2, a3);
    CHECK(run(ctx, &n, in7, out) == WPK_OK);
    CHECK_DIMS(&y, 1, 1, 4, 2);
    static const float asym[8] = {21, 33, 99, 117, 189, 207, 171, 183};
    CHECK(near(y.data, asym, 8, 1e-6f));
    release(out, 1);

    /* random cases against the naive reference */
    const conv_case cases[] = {
        {2, 2, 4, 6, 2, {9, 8}, {3, 2}, {2, 1}, {2, 3}, {2, 1}, {1, 3}, true, NULL},
        {2, 1, 3, 5, 1, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, false, NULL},
        {2, 1, 4, 4, 4, {6, 5}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, true, "SAME_UPPER"},
        {2, 1, 4, 8, 4, {6, 5}, {3, 2}, {2, 3}, {1, 2}, {0, 0}, {0, 0}, true, "SAME_LOWER"},
        {2, 2, 2, 3, 1, {6, 7}, {2, 3}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, true, "VALID"},
        {1, 2, 3, 4, 1, {11}, {3}, {2}, {2}, {1}, {2}, true, NULL},
        {1, 1, 6, 6, 3, {10}, {4}, {3}, {1}, {0}, {3}, false, "SAME_UPPER"},
        {3, 1, 2, 3, 1, {5, 6, 4}, {2, 3, 2}, {1, 2, 1}, {2, 1, 1}, {1, 1, 0}, {0, 1, 1},
         true, NULL},
        {3, 2, 4, 2, 2, {4, 4, 5}, {3, 1, 3}, {2, 1, 2}, {1, 1, 2}, {1, 0, 2}, {1, 0, 1},
         false, NULL},
        /* 1x1 stride 2 (ResNet downsample) and a 7x7 stem-like case */
        {2, 1, 8, 4, 1, {9, 9}, {1, 1}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, false, NULL},
        {2, 1, 3, 2, 1, {15, 14}, {7, 7}, {2, 2}, {1, 1}, {3, 3}, {3, 3}, true, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_conv_case(ctx, &cases[i]);

    /* must-fail cases name the attribute or the mismatch */
    float wbad[2 * 3 * 9];
    ir_tensor tw3 = F32(wbad, 2, 3, 3, 3);
    ir_tensor *inb[2] = {&tx, &tw3};
    ir_attr s3[] = {INTS("strides", 1, 1, 1)};
    n = node("Conv", 11, 2, 1, 1, s3);
    CHECK_ERR(ctx, run(ctx, &n, in, out), WPK_ERR_MODEL,
              "attribute 'strides' has 3 values, expected 2");
    n = node("Conv", 11, 2, 1, 0, NULL);
    CHECK_ERR(ctx, run(ctx, &n, inb, out), WPK_ERR_MODEL, "input X has 1 channels but W expects 3");
    ir_attr g2[] = {attr_int("group", 2)};
    n = node("Conv", 11, 2, 1, 1, g2);
    ir_tensor tw4 = F32(wbad, 3, 1, 3, 3);
    ir_tensor *inc[2] = {&tx, &tw4};
    CHECK_ERR(ctx, run(ctx, &n, inc, out), WPK_ERR_MODEL, "attribute 'group' (2) does not divide");
    ir_attr ap[] = {attr_str("auto_pad", "SAME")};
    n = node("Conv", 11, 2, 1, 1, ap);
    CHECK_ERR(ctx, run(ctx, &n, in, out), WPK_ERR_MODEL, "attribute 'auto_pad' is 'SAME'");
    ir_attr ks[] = {INTS("kernel_shape", 2, 2)};
    n = node("Conv", 11, 2, 1, 1, ks);
    CHECK_ERR(ctx, run(ctx, &n, in, out), WPK_ERR_MODEL, "attribute 'kernel_shape' is 2");
    ir_attr big[] = {INTS("dilations", 4, 4)};
    n = node("Conv", 11, 2, 1, 1, big);
    CHECK_ERR(ctx, run(ctx, &n, in, out), WPK_ERR_MODEL, "the kernel spans 9");
    ir_attr neg[] = {INTS("pads", 0, -1, 0, 0)};
    n = node("Conv", 11, 2, 1, 1, neg);
    CHECK_ERR(ctx, run(ctx, &n, in, out), WPK_ERR_MODEL, "attribute 'pads' value -1");
    int64_t xi[25] = {0};
    ir_tensor txi = tensor(WPK_DTYPE_INT64, DIMS(1, 1, 5, 5), xi);
    ir_tensor *ini[2] = {&txi, &tw};
    n = node("Conv", 11, 2, 1, 0, NULL);
    CHECK_ERR(ctx, run(ctx, &n, ini, out), WPK_ERR_UNSUPPORTED, "int64");
    float bb[2];
    ir_tensor tbb = F32(bb, 2);
    ir_tensor *inbb[3] = {&tx, &tw, &tbb};
    n = node("Conv", 11, 3, 1, 0, NULL);
    CHECK_ERR(ctx, run(ctx, &n, inbb, out), WPK_ERR_MODEL, "bias B must be 1-D with 1 values");
    ir_tensor *in1[1] = {&tx};
    n = node("Conv", 11, 1, 1, 0, NULL);
    CHECK_ERR(ctx, run(ctx, &n, in1, out), WPK_ERR_MODEL, "input 1 ('W') is missing");
}

/* ---- ConvTranspose ---- */

static void check_conv_transpose_case(wpk_context *ctx, int64_t c, int64_t m, int64_t group,
                                      const int64_t *in, const int64_t *k, const int64_t *s,
                                      const int64_t *d, const int64_t *p, const int64_t *op) {
    /* 2-D; output size and the naive gather: y[o] sums x[i] w[k] over i*s + k*d - p0 == o */
    int64_t o[2];
    for (int i = 0; i < 2; i++)
        o[i] = s[i] * (in[i] - 1) + op[i] + (k[i] - 1) * d[i] + 1 - p[i] - p[2 + i];
    int64_t mg = m / group, cg = c / group, n = 2;
    float *x = rnd_buf(n * c * in[0] * in[1]), *w = rnd_buf(c * mg * k[0] * k[1]), *b = rnd_buf(m);
    int64_t ysz = n * m * o[0] * o[1];
    float *want = malloc(sizeof(float) * (size_t)ysz);
    for (int64_t bi = 0; bi < n; bi++)
        for (int64_t oc = 0; oc < m; oc++)
            for (int64_t oh = 0; oh < o[0]; oh++)
                for (int64_t ow = 0; ow < o[1]; ow++) {
                    double sum = b[oc];
                    for (int64_t j = 0; j < cg; j++)
                        for (int64_t kh = 0; kh < k[0]; kh++)
                            for (int64_t kw = 0; kw < k[1]; kw++) {
                                int64_t th = oh + p[0] - kh * d[0], tw = ow + p[1] - kw * d[1];
                                if (th < 0 || tw < 0 || th % s[0] || tw % s[1]) continue;
                                int64_t ih = th / s[0], iw = tw / s[1];
                                if (ih >= in[0] || iw >= in[1]) continue;
                                int64_t ic = oc / mg * cg + j;
                                sum += x[((bi * c + ic) * in[0] + ih) * in[1] + iw] *
                                       w[((ic * mg + oc % mg) * k[0] + kh) * k[1] + kw];
                            }
                    want[((bi * m + oc) * o[0] + oh) * o[1] + ow] = (float)sum;
                }
    ir_attr attrs[] = {attr_int("group", group), attr_ints("strides", 2, s),
                       attr_ints("dilations", 2, d), attr_ints("pads", 4, p),
                       attr_ints("output_padding", 2, op)};
    ir_node nd = node("ConvTranspose", 11, 3, 1, 5, attrs);
    ir_tensor tx = F32(x, n, c, in[0], in[1]), tw = F32(w, c, mg, k[0], k[1]), tb = F32(b, m), y;
    ir_tensor *ins[3] = {&tx, &tw, &tb}, *out[1] = {&y};
    CHECK(run(ctx, &nd, ins, out) == WPK_OK);
    CHECK(y.ndim == 4 && y.dims[1] == m && y.dims[2] == o[0] && y.dims[3] == o[1]);
    if (ir_numel(&y) == ysz) CHECK(near(y.data, want, ysz, 1e-4f));
    release(out, 1);
    free(x), free(w), free(b), free(want);
}

static void test_conv_transpose(wpk_context *ctx) {
    float x[9], w[18];
    for (int i = 0; i < 9; i++) x[i] = (float)i;
    for (int i = 0; i < 18; i++) w[i] = 1.0f;
    ir_tensor tx = F32(x, 1, 1, 3, 3), tw = F32(w, 1, 2, 3, 3), y;
    ir_tensor *in[2] = {&tx, &tw}, *out[1] = {&y};

    ir_node n = node("ConvTranspose", 11, 2, 1, 0, NULL);
    CHECK(run(ctx, &n, in, out) == WPK_OK);
    CHECK_DIMS(&y, 1, 2, 5, 5);
    static const float basic[25] = {0, 1, 3, 3, 2, 3, 8, 15, 12, 7, 9, 21, 36, 27, 15,
                                    9, 20, 33, 24, 13, 6, 13, 21, 15, 8};
    CHECK(near(y.data, basic, 25, 1e-6f) && near((float *)y.data + 25, basic, 25, 1e-6f));
    release(out, 1);

    ir_attr a1[] = {INTS("strides", 3, 2), INTS("pads", 1, 2, 1, 2)};
    n = node("ConvTranspose", 11, 2, 1, 2, a1);
    CHECK(run(ctx, &n, in, out) == WPK_OK);
    CHECK_DIMS(&y, 1, 2, 7, 3);
    static const float pads[21] = {1, 1, 3, 1, 1,  3, 7,  4,  9, 7, 4,
                                   9, 7, 4, 9, 13, 7, 15, 13, 7, 15};
    CHECK(near(y.data, pads, 21, 1e-6f));
    release(out, 1);

    /* output_shape sets the pads (here the total is negative: one extra row and column of 0) */
    ir_attr a2[] = {INTS("strides", 3, 2), INTS("output_shape", 10, 8)};
    n = node("ConvTranspose", 11, 2, 1, 2, a2);
    CHECK(run(ctx, &n, in, out) == WPK_OK);
    CHECK_DIMS(&y, 1, 2, 10, 8);
    static const float row0[8] = {0, 0, 1, 1, 3, 2, 2, 0}, row9[8] = {0};
    CHECK(near(y.data, row0, 8, 1e-6f) && near((float *)y.data + 72, row9, 8, 1e-6f));
    release(out, 1);
    ir_attr a3[] = {INTS("strides", 3, 2), INTS("output_padding", 1, 1)};
    n = node("ConvTranspose", 11, 2, 1, 2, a3);
    CHECK(run(ctx, &n, in, out) == WPK_OK);
    CHECK_DIMS(&y, 1, 2, 10, 8);
    CHECK(near(y.data, row0, 8, 1e-6f) && near((float *)y.data + 72, row9, 8, 1e-6f));
    release(out, 1);

    /* auto_pad SAME_UPPER: output = input * stride, the odd pad at the end */
    ir_attr a4[] = {attr_str("auto_pad", "SAME_UPPER"), INTS("strides", 2, 2)};
    n = node("ConvTranspose", 11, 2, 1, 2, a4);
    CHECK(run(ctx, &n, in, out) == WPK_OK);
    CHECK_DIMS(&y, 1, 2, 6, 6);
    static const float same0[6] = {0, 0, 1, 1, 3, 2};
    CHECK(near(y.data, same0, 6, 1e-6f));
    release(out, 1);

    check_conv_transpose_case(ctx, 4, 6, 2, (int64_t[]){4, 5}, (int64_t[]){3, 2}, (int64_t[]){2, 3},
                              (int64_t[]){1, 2}, (int64_t[]){1, 0, 2, 1}, (int64_t[]){1, 0});
    check_conv_transpose_case(ctx, 3, 3, 3, (int64_t[]){5, 4}, (int64_t[]){3, 3}, (int64_t[]){1, 1},
                              (int64_t[]){2, 1}, (int64_t[]){0, 0, 0, 0}, (int64_t[]){0, 0});
    check_conv_transpose_case(ctx, 2, 4, 1, (int64_t[]){3, 3}, (int64_t[]){4, 4}, (int64_t[]){2, 2},
                              (int64_t[]){1, 1}, (int64_t[]){1, 1, 1, 1}, (int64_t[]){0, 1});
    /* stride 1 with pads that keep the width: the kernel's whole-row path */
    check_conv_transpose_case(ctx, 2, 2, 1, (int64_t[]){5, 6}, (int64_t[]){3, 3}, (int64_t[]){1, 1},
                              (int64_t[]){1, 1}, (int64_t[]){1, 1, 1, 1}, (int64_t[]){0, 0});

    ir_attr bad[] = {INTS("output_padding", 2, 0), INTS("strides", 2, 2)};
    n = node("ConvTranspose", 11, 2, 1, 2, bad);
    CHECK_ERR(ctx, run(ctx, &n, in, out), WPK_ERR_MODEL, "attribute 'output_padding' value 2");
    ir_attr g2[] = {attr_int("group", 2)};
    n = node("ConvTranspose", 11, 2, 1, 1, g2);
    CHECK_ERR(ctx, run(ctx, &n, in, out), WPK_ERR_MODEL, "attribute 'group' (2) does not divide");
}

/* ---- pooling ---- */

typedef struct pool_case {
    bool is_max, include_pad, ceil_mode;
    int64_t in[2], k[2], s[2], d[2], p[4];
} pool_case;

static void check_pool_case(wpk_context *ctx, const pool_case *pc) {
    int64_t o[2];
    for (int i = 0; i < 2; i++) {
        int64_t span = (pc->k[i] - 1) * pc->d[i] + 1,
                room = pc->in[i] + pc->p[i] + pc->p[2 + i] - span;
        o[i] = (pc->ceil_mode ? (room + pc->s[i] - 1) / pc->s[i] : room / pc->s[i]) + 1;
        if (pc->ceil_mode && (o[i] - 1) * pc->s[i] >= pc->in[i] + pc->p[i]) o[i]--;
    }
    int64_t planes = 3, ysz = planes * o[0] * o[1];
    float *x = rnd_buf(planes * pc->in[0] * pc->in[1]), *want = malloc(sizeof(float) * (size_t)ysz);
    for (int64_t pl = 0; pl < planes; pl++)
        for (int64_t oh = 0; oh < o[0]; oh++)
            for (int64_t ow = 0; ow < o[1]; ow++) {
                double sum = 0.0;
                float best = -INFINITY;
                int valid = 0, padded = 0;
                for (int64_t kh = 0; kh < pc->k[0]; kh++)
                    for (int64_t kw = 0; kw < pc->k[1]; kw++) {
                        int64_t ih = oh * pc->s[0] - pc->p[0] + kh * pc->d[0];
                        int64_t iw = ow * pc->s[1] - pc->p[1] + kw * pc->d[1];
                        if (ih >= -pc->p[0] && ih < pc->in[0] + pc->p[2] && iw >= -pc->p[1] &&
                            iw < pc->in[1] + pc->p[3])
                            padded++;
                        if (ih < 0 || ih >= pc->in[0] || iw < 0 || iw >= pc->in[1]) continue;
                        float v = x[(pl * pc->in[0] + ih) * pc->in[1] + iw];
                        valid++;
                        sum += v;
                        if (v > best) best = v;
                    }
                want[(pl * o[0] + oh) * o[1] + ow] =
                    pc->is_max ? best : (float)(sum / (pc->include_pad ? padded : valid));
            }
    ir_attr attrs[] = {
        attr_ints("kernel_shape", 2, pc->k),  attr_ints("strides", 2, pc->s),
        attr_ints("dilations", 2, pc->d),     attr_ints("pads", 4, pc->p),
        attr_int("ceil_mode", pc->ceil_mode), attr_int("count_include_pad", pc->include_pad)};
    ir_node n = node(pc->is_max ? "MaxPool" : "AveragePool", 19, 1, 1, pc->is_max ? 5 : 6, attrs);
    ir_tensor tx = F32(x, 1, planes, pc->in[0], pc->in[1]), y;
    ir_tensor *in[1] = {&tx}, *out[1] = {&y};
    CHECK(run(ctx, &n, in, out) == WPK_OK);
    CHECK(y.ndim == 4 && y.dims[2] == o[0] && y.dims[3] == o[1]);
    if (ir_numel(&y) == ysz) CHECK(near(y.data, want, ysz, 1e-5f));
    release(out, 1);
    free(x), free(want);
}

static void test_pool(wpk_context *ctx) {
    float x16[16];
    for (int i = 0; i < 16; i++) x16[i] = (float)(i + 1);
    ir_tensor tx = F32(x16, 1, 1, 4, 4), y, idx;
    ir_tensor *in[1] = {&tx}, *out[2] = {&y, &idx};

    /* ceil_mode: 4 -> 2 windows of 3 with stride 2 (maxpool_2d_ceil) */
    ir_attr a1[] = {INTS("kernel_shape", 3, 3), INTS("strides", 2, 2), attr_int("ceil_mode", 1)};
    ir_node n = node("MaxPool", 10, 1, 1, 3, a1);
    CHECK(run(ctx, &n, in, out) == WPK_OK);
    CHECK_DIMS(&y, 1, 1, 2, 2);
    static const float ceil_max[4] = {11, 12, 15, 16};
    CHECK(near(y.data, ceil_max, 4, 0));
    release(out, 1);

    /* 1-D, 4 long, window 2, stride 2, end pad 1, ceil_mode: the third window would start in
     * the end padding, so it is dropped */
    float x4[4] = {1, 2, 3, 4};
    ir_tensor t4 = F32(x4, 1, 1, 4);
    ir_tensor *in4[1] = {&t4};
    ir_attr a2[] = {INTS("kernel_shape", 2), INTS("strides", 2), INTS("pads", 0, 1),
                    attr_int("ceil_mode", 1)};
    n = node("AveragePool", 11, 1, 1, 4, a2);
    CHECK(run(ctx, &n, in4, out) == WPK_OK);
    CHECK_DIMS(&y, 1, 1, 2);
    release(out, 1);
    /* 5 long: the third window starts in the input and holds one element; the ceil part is
     * padding that never counts, even with count_include_pad */
    float x5[5] = {1, 2, 3, 4, 5};
    ir_tensor t5 = F32(x5, 1, 1, 5);
    ir_tensor *in5[1] = {&t5};
    ir_attr a3[] = {INTS("kernel_shape", 2), INTS("strides", 2), attr_int("ceil_mode", 1),
                    attr_int("count_include_pad", 1)};
    n = node("AveragePool", 11, 1, 1, 4, a3);
    CHECK(run(ctx, &n, in5, out) == WPK_OK);
    CHECK_DIMS(&y, 1, 1, 3);
    static const float avg5[3] = {1.5f, 3.5f, 5.0f};
    CHECK(near(y.data, avg5, 3, 1e-6f));
    release(out, 1);

    /* count_include_pad: 3x3 ramp, window 3, pads 1 */
    float x9[9];
    for (int i = 0; i < 9; i++) x9[i] = (float)(i + 1);
    ir_tensor t9 = F32(x9, 1, 1, 3, 3);
    ir_tensor *in9[1] = {&t9};
    ir_attr a4[] = {INTS("kernel_shape", 3, 3), INTS("pads", 1, 1, 1, 1),
                    attr_int("count_include_pad", 1)};
    n = node("AveragePool", 11, 1, 1, 3, a4);
    CHECK(run(ctx, &n, in9, out) == WPK_OK);
    CHECK_DIMS(&y, 1, 1, 3, 3);
    CHECK(fabsf(((float *)y.data)[0] - 12.0f / 9.0f) < 1e-6f &&
          fabsf(((float *)y.data)[4] - 5.0f) < 1e-6f);
    release(out, 1);
    n = node("AveragePool", 11, 1, 1, 2, a4);
    CHECK(run(ctx, &n, in9, out) == WPK_OK);
    CHECK(fabsf(((float *)y.data)[0] - 3.0f) < 1e-6f && fabsf(((float *)y.data)[1] - 3.5f) < 1e-6f);
    release(out, 1);

    /* SAME_UPPER / SAME_LOWER put the odd pad at the end / the beginning */
    ir_attr a5[] = {INTS("kernel_shape", 2, 2), attr_str("auto_pad", "SAME_UPPER")};
    n = node("MaxPool", 11, 1, 1, 2, a5);
    CHECK(run(ctx, &n, in9, out) == WPK_OK);
    CHECK_DIMS(&y, 1, 1, 3, 3);
    static const float upper[9] = {5, 6, 6, 8, 9, 9, 8, 9, 9},
                       lower[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    CHECK(near(y.data, upper, 9, 0));
    release(out, 1);
    ir_attr a6[] = {INTS("kernel_shape", 2, 2), attr_str("auto_pad", "SAME_LOWER")};
    n = node("MaxPool", 11, 1, 1, 2, a6);
    CHECK(run(ctx, &n, in9, out) == WPK_OK);
    CHECK(near(y.data, lower, 9, 0));
    release(out, 1);

    /* Indices, row-major and column-major (maxpool_with_argmax_2d_precomputed_strides) */
    float x25[25];
    for (int i = 0; i < 25; i++) x25[i] = (float)(i + 1);
    ir_tensor t25 = F32(x25, 1, 1, 5, 5);
    ir_tensor *in25[1] = {&t25};
    ir_attr a7[] = {INTS("kernel_shape", 2, 2), INTS("strides", 2, 2),
                    attr_int("storage_order", 0)};
    n = node("MaxPool", 12, 1, 2, 3, a7);
    CHECK(run(ctx, &n, in25, out) == WPK_OK);
    CHECK_DIMS(&y, 1, 1, 2, 2);
    CHECK(idx.dtype == WPK_DTYPE_INT64);
    CHECK_DIMS(&idx, 1, 1, 2, 2);
    static const float argmax_y[4] = {7, 9, 17, 19};
    CHECK(near(y.data, argmax_y, 4, 0));
    int64_t *id = idx.data;
    CHECK(id[0] == 6 && id[1] == 8 && id[2] == 16 && id[3] == 18);
    release(out, 2);
    a7[2] = attr_int("storage_order", 1);
    CHECK(run(ctx, &n, in25, out) == WPK_OK);
    id = idx.data;
    CHECK(id[0] == 6 && id[1] == 16 && id[2] == 8 && id[3] == 18);
    release(out, 2);
    /* indices count across channels and batch */
    float x2c[2 * 4] = {1, 2, 3, 4, 8, 7, 6, 5};
    ir_tensor t2c = F32(x2c, 1, 2, 2, 2);
    ir_tensor *in2c[1] = {&t2c};
    ir_attr a8[] = {INTS("kernel_shape", 2, 2)};
    n = node("MaxPool", 12, 1, 2, 1, a8);
    CHECK(run(ctx, &n, in2c, out) == WPK_OK);
    id = idx.data;
    CHECK(id[0] == 3 && id[1] == 4);
    release(out, 2);

    const pool_case cases[] = {
        {true, false, false, {7, 6}, {3, 2}, {2, 2}, {1, 1}, {1, 0, 1, 1}},
        {true, false, true, {7, 8}, {3, 3}, {2, 3}, {1, 1}, {1, 1, 1, 0}},
        {true, false, true, {9, 8}, {2, 3}, {3, 2}, {2, 2}, {1, 2, 1, 0}},
        {false, false, true, {7, 8}, {3, 3}, {2, 3}, {1, 1}, {1, 1, 1, 0}},
        {false, true, true, {7, 8}, {3, 3}, {2, 3}, {1, 1}, {1, 1, 1, 0}},
        {false, true, false, {6, 9}, {2, 3}, {1, 2}, {2, 2}, {1, 2, 0, 1}},
        {false, false, false, {6, 9}, {2, 3}, {1, 2}, {2, 2}, {1, 2, 0, 1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_pool_case(ctx, &cases[i]);

    /* global pools keep rank with 1s */
    float xg[2 * 3 * 2] = {1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6};
    ir_tensor tg = F32(xg, 1, 2, 3, 2);
    ir_tensor *ing[1] = {&tg};
    n = node("GlobalAveragePool", 1, 1, 1, 0, NULL);
    CHECK(run(ctx, &n, ing, out) == WPK_OK);
    CHECK_DIMS(&y, 1, 2, 1, 1);
    static const float gavg[2] = {3.5f, -3.5f}, gmax[2] = {6, -1};
    CHECK(near(y.data, gavg, 2, 1e-6f));
    release(out, 1);
    n = node("GlobalMaxPool", 1, 1, 1, 0, NULL);
    CHECK(run(ctx, &n, ing, out) == WPK_OK);
    CHECK(near(y.data, gmax, 2, 0));
    release(out, 1);

    n = node("MaxPool", 11, 1, 1, 0, NULL);
    CHECK_ERR(ctx, run(ctx, &n, in, out), WPK_ERR_MODEL, "attribute 'kernel_shape' is required");
    ir_attr b1[] = {INTS("kernel_shape", 2, 2), INTS("pads", 2, 0, 0, 0)};
    n = node("MaxPool", 11, 1, 1, 2, b1);
    CHECK_ERR(ctx, run(ctx, &n, in, out), WPK_ERR_MODEL, "attribute 'pads' in spatial dim 0");
    ir_attr b2[] = {INTS("kernel_shape", 5, 5)};
    n = node("AveragePool", 11, 1, 1, 1, b2);
    CHECK_ERR(ctx, run(ctx, &n, in, out), WPK_ERR_MODEL, "the window spans 5");
    ir_attr b3[] = {INTS("kernel_shape", 2, 2), attr_int("ceil_mode", 2)};
    n = node("MaxPool", 11, 1, 1, 2, b3);
    CHECK_ERR(ctx, run(ctx, &n, in, out), WPK_ERR_MODEL, "attribute 'ceil_mode' is 2");
}

/* ---- normalization ---- */

static void test_batch_norm(wpk_context *ctx) {
    float x[6] = {-1, 0, 1, 2, 3, 4}, scale[2] = {1, 1.5f}, bias[2] = {0, 1}, mean[2] = {0, 3},
          var[2] = {1, 1.5f};
    ir_tensor tx = F32(x, 1, 2, 1, 3), ts = F32(scale, 2), tb = F32(bias, 2), tm = F32(mean, 2),
              tv = F32(var, 2), y;
    ir_tensor *in[5] = {&tx, &ts, &tb, &tm, &tv}, *out[1] = {&y};
    ir_attr eps[] = {attr_float("epsilon", 1e-5f)};
    ir_node n = node("BatchNormalization", 15, 5, 1, 1, eps);
    CHECK(run(ctx, &n, in, out) == WPK_OK);
    CHECK_DIMS(&y, 1, 2, 1, 3);
    float want[6];
    for (int i = 0; i < 6; i++) {
        int c = i / 3;
        want[i] = (float)((x[i] - mean[c]) / sqrt(var[c] + 1e-5) * scale[c] + bias[c]);
    }
    CHECK(near(y.data, want, 6, 1e-6f));
    release(out, 1);

    /* opset 7, spatial = 0: one parameter per channel and position */
    float s6[6] = {1, 2, 3, 4, 5, 6}, z6[6] = {0}, v6[6] = {1, 1, 1, 1, 1, 1};
    ir_tensor ts6 = F32(s6, 2, 1, 3), tz6 = F32(z6, 2, 1, 3), tv6 = F32(v6, 2, 1, 3);
    ir_tensor *in6[5] = {&tx, &ts6, &tz6, &tz6, &tv6};
    ir_attr sp[] = {attr_int("spatial", 0), attr_float("epsilon", 0.0f)};
    n = node("BatchNormalization", 7, 5, 1, 2, sp);
    CHECK(run(ctx, &n, in6, out) == WPK_OK);
    float want6[6];
    for (int i = 0; i < 6; i++) want6[i] = x[i] * s6[i];
    CHECK(near(y.data, want6, 6, 1e-6f));
    release(out, 1);

    ir_attr tr[] = {attr_int("training_mode", 1)};
    n = node("BatchNormalization", 15, 5, 1, 1, tr);
    CHECK_ERR(ctx, run(ctx, &n, in, out), WPK_ERR_UNSUPPORTED, "training_mode");
    ir_tensor rm, rv;
    ir_tensor *out3[3] = {&y, &rm, &rv};
    n = node("BatchNormalization", 9, 5, 3, 0, NULL);
    CHECK_ERR(ctx, run(ctx, &n, in, out3), WPK_ERR_UNSUPPORTED, "training mode");
    float s3[3] = {0};
    ir_tensor ts3 = F32(s3, 3);
    ir_tensor *in3[5] = {&tx, &ts3, &tb, &tm, &tv};
    n = node("BatchNormalization", 15, 5, 1, 0, NULL);
    CHECK_ERR(ctx, run(ctx, &n, in3, out), WPK_ERR_MODEL, "input 'scale' has 3 values, expected 2");
}

static void test_layer_norm(wpk_context *ctx) {
    float x[12], scale[4] = {1, 2, 0.5f, -1}, bias[4] = {0, 1, 2, 3};
    for (int i = 0; i < 12; i++) x[i] = (float)(i * i % 7) - 2.0f;
    ir_tensor tx = F32(x, 3, 4), ts = F32(scale, 4), tb = F32(bias, 4), y, mean, inv;
    ir_tensor *in[3] = {&tx, &ts, &tb}, *out[3] = {&y, &mean, &inv};
    ir_attr a[] = {attr_float("epsilon", 1e-3f)};
    ir_node n = node("LayerNormalization", 17, 3, 3, 1, a);
    CHECK(run(ctx, &n, in, out) == WPK_OK);
    CHECK_DIMS(&y, 3, 4);
    CHECK_DIMS(&mean, 3, 1);
    CHECK_DIMS(&inv, 3, 1);
    float want[12], wm[3], wi[3];
    for (int r = 0; r < 3; r++) {
        double m = 0, v = 0;
        for (int j = 0; j < 4; j++) m += x[r * 4 + j] / 4.0;
        for (int j = 0; j < 4; j++) v += (x[r * 4 + j] - m) * (x[r * 4 + j] - m) / 4.0;
        wm[r] = (float)m;
        wi[r] = (float)(1.0 / sqrt(v + 1e-3));
        for (int j = 0; j < 4; j++)
            want[r * 4 + j] = (float)((x[r * 4 + j] - m) * wi[r] * scale[j] + bias[j]);
    }
    CHECK(near(y.data, want, 12, 1e-5f) && near(mean.data, wm, 3, 1e-6f) &&
          near(inv.data, wi, 3, 1e-5f));
    release(out, 3);

    /* axis 0 of a (3, 4) input: one row of 12; Scale of shape (4) broadcast over it, no B */
    ir_attr a0[] = {attr_int("axis", 0), attr_float("epsilon", 1e-3f)};
    n = node("LayerNormalization", 17, 2, 2, 2, a0);
    CHECK(run(ctx, &n, in, out) == WPK_OK);
    CHECK_DIMS(&mean, 1, 1);
    double m = 0, v = 0;
    for (int j = 0; j < 12; j++) m += x[j] / 12.0;
    for (int j = 0; j < 12; j++) v += (x[j] - m) * (x[j] - m) / 12.0;
    for (int j = 0; j < 12; j++) want[j] = (float)((x[j] - m) / sqrt(v + 1e-3) * scale[j % 4]);
    CHECK(near(y.data, want, 12, 1e-5f));
    release(out, 2);

    float s3[3] = {0};
    ir_tensor ts3 = F32(s3, 3);
    ir_tensor *in3[2] = {&tx, &ts3};
    n = node("LayerNormalization", 17, 2, 1, 0, NULL);
    CHECK_ERR(ctx, run(ctx, &n, in3, out), WPK_ERR_MODEL, "input 'Scale' does not broadcast");
    ir_attr ax[] = {attr_int("axis", 2)};
    n = node("LayerNormalization", 17, 2, 1, 1, ax);
    CHECK_ERR(ctx, run(ctx, &n, in, out), WPK_ERR_MODEL, "attribute 'axis' 2 is out of range");
}

static void test_softmax(wpk_context *ctx) {
    /* (2, 2, 3) with large values: stable, and the groups differ between opsets */
    float x[12];
    for (int i = 0; i < 12; i++) x[i] = 1000.0f + (float)(i % 5);
    ir_tensor tx = F32(x, 2, 2, 3), y;
    ir_tensor *in[1] = {&tx}, *out[1] = {&y};
    ir_attr a1[] = {attr_int("axis", 1)};

    /* opset 11, axis 1: each batch's 6 values form one distribution */
    ir_node n = node("Softmax", 11, 1, 1, 1, a1);
    CHECK(run(ctx, &n, in, out) == WPK_OK);
    float want[12];
    for (int b = 0; b < 2; b++) {
        double s = 0;
        for (int j = 0; j < 6; j++) s += exp(x[b * 6 + j] - 1000.0);
        for (int j = 0; j < 6; j++) want[b * 6 + j] = (float)(exp(x[b * 6 + j] - 1000.0) / s);
    }
    CHECK(near(y.data, want, 12, 1e-6f));
    release(out, 1);

    /* opset 13, axis 1: pairs 3 apart */
    n = node("Softmax", 13, 1, 1, 1, a1);
    CHECK(run(ctx, &n, in, out) == WPK_OK);
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < 3; k++) {
            double e0 = exp(x[b * 6 + k] - 1000.0), e1 = exp(x[b * 6 + 3 + k] - 1000.0);
            want[b * 6 + k] = (float)(e0 / (e0 + e1));
            want[b * 6 + 3 + k] = (float)(e1 / (e0 + e1));
        }
    CHECK(near(y.data, want, 12, 1e-6f));
    release(out, 1);

    /* defaults: axis 1 before 13 (flatten), -1 from 13 */
    n = node("Softmax", 1, 1, 1, 0, NULL);
    CHECK(run(ctx, &n, in, out) == WPK_OK);
    float sum = 0;
    for (int j = 0; j < 6; j++) sum += ((float *)y.data)[j];
    CHECK(fabsf(sum - 1.0f) < 1e-5f);
    release(out, 1);
    n = node("Softmax", 13, 1, 1, 0, NULL);
    CHECK(run(ctx, &n, in, out) == WPK_OK);
    sum = 0;
    for (int j = 0; j < 3; j++) sum += ((float *)y.data)[j];
    CHECK(fabsf(sum - 1.0f) < 1e-5f && isfinite(((float *)y.data)[0]));
    release(out, 1);

    /* a wide strided case crossing the kernel's column chunk */
    int64_t cols = 300;
    float *xw = rnd_buf(3 * cols), *ww = malloc(sizeof(float) * 3 * (size_t)cols);
    for (int64_t c = 0; c < cols; c++) {
        double s = 0;
        for (int r = 0; r < 3; r++) s += exp(xw[r * cols + c]);
        for (int r = 0; r < 3; r++) ww[r * cols + c] = (float)(exp(xw[r * cols + c]) / s);
    }
    ir_tensor tw = F32(xw, 3, cols);
    ir_tensor *inw[1] = {&tw};
    ir_attr a0[] = {attr_int("axis", 0)};
    n = node("Softmax", 13, 1, 1, 1, a0);
    CHECK(run(ctx, &n, inw, out) == WPK_OK);
    CHECK(near(y.data, ww, 3 * cols, 1e-6f));
    release(out, 1);
    free(xw), free(ww);

    ir_attr bad[] = {attr_int("axis", 3)};
    n = node("Softmax", 13, 1, 1, 1, bad);
    CHECK_ERR(ctx, run(ctx, &n, in, out), WPK_ERR_MODEL, "attribute 'axis' 3 is out of range");
}

static void test_reduce_mean(wpk_context *ctx) {
    float x[24];
    for (int i = 0; i < 24; i++) x[i] = (float)i;
    ir_tensor tx = F32(x, 2, 3, 4), y;
    ir_tensor *out[1] = {&y};
    ir_attr keep0[] = {attr_int("keepdims", 0)};
    ir_attr noop[] = {attr_int("noop_with_empty_axes", 1)};

    int64_t ax1[1] = {1};
    ir_tensor ta1 = tensor(WPK_DTYPE_INT64, DIMS(1), ax1);
    ir_tensor *in1[2] = {&tx, &ta1};
    ir_node n = node("ReduceMean", 18, 2, 1, 0, NULL);
    CHECK(run(ctx, &n, in1, out) == WPK_OK);
    CHECK_DIMS(&y, 2, 1, 4);
    static const float m1[8] = {4, 5, 6, 7, 16, 17, 18, 19};
    CHECK(near(y.data, m1, 8, 1e-6f));
    release(out, 1);

    /* axes -1 and 0 (two reduced groups, the generic path), keepdims 0 */
    int64_t ax2[2] = {-1, 0};
    ir_tensor ta2 = tensor(WPK_DTYPE_INT64, DIMS(2), ax2);
    ir_tensor *in2[2] = {&tx, &ta2};
    n = node("ReduceMean", 18, 2, 1, 1, keep0);
    CHECK(run(ctx, &n, in2, out) == WPK_OK);
    CHECK_DIMS(&y, 3);
    static const float m2[3] = {7.5f, 11.5f, 15.5f};
    CHECK(near(y.data, m2, 3, 1e-6f));
    release(out, 1);

    /* trailing axes (the decomposed-LayerNorm pattern) */
    int64_t ax3[2] = {2, 1};
    ir_tensor ta3 = tensor(WPK_DTYPE_INT64, DIMS(2), ax3);
    ir_tensor *in3[2] = {&tx, &ta3};
    n = node("ReduceMean", 13, 2, 1, 0, NULL);
    CHECK(run(ctx, &n, in3, out) == WPK_OK);
    CHECK_DIMS(&y, 2, 1, 1);
    static const float m3[2] = {5.5f, 17.5f};
    CHECK(near(y.data, m3, 2, 1e-6f));
    release(out, 1);

    /* no axes: everything; with noop_with_empty_axes: nothing */
    ir_tensor *in0[1] = {&tx};
    n = node("ReduceMean", 13, 1, 1, 1, keep0);
    CHECK(run(ctx, &n, in0, out) == WPK_OK);
    CHECK(y.ndim == 0 && fabsf(((float *)y.data)[0] - 11.5f) < 1e-6f);
    release(out, 1);
    n = node("ReduceMean", 18, 1, 1, 1, noop);
    CHECK(run(ctx, &n, in0, out) == WPK_OK);
    CHECK_DIMS(&y, 2, 3, 4);
    CHECK(near(y.data, x, 24, 0));
    release(out, 1);

    /* an empty axes tensor is the same as none */
    ir_tensor tempty = tensor(WPK_DTYPE_INT64, DIMS(0), NULL);
    ir_tensor *inempty[2] = {&tx, &tempty};
    n = node("ReduceMean", 18, 2, 1, 1, noop);
    CHECK(run(ctx, &n, inempty, out) == WPK_OK);
    CHECK_DIMS(&y, 2, 3, 4);
    release(out, 1);
    n = node("ReduceMean", 18, 2, 1, 0, NULL);
    CHECK(run(ctx, &n, inempty, out) == WPK_OK);
    CHECK(has_dims(&y, DIMS(1, 1, 1)) && fabsf(((float *)y.data)[0] - 11.5f) < 1e-6f);
    release(out, 1);

    int64_t dup[2] = {1, -2};
    ir_tensor tdup = tensor(WPK_DTYPE_INT64, DIMS(2), dup);
    ir_tensor *indup[2] = {&tx, &tdup};
    n = node("ReduceMean", 18, 2, 1, 0, NULL);
    CHECK_ERR(ctx, run(ctx, &n, indup, out), WPK_ERR_MODEL, "appears twice");
    ir_tensor tax = tensor(WPK_DTYPE_INT64, DIMS(1), NULL);
    ir_tensor *inax[2] = {&tx, &tax};
    CHECK_ERR(ctx, run(ctx, &n, inax, out), WPK_ERR_UNSUPPORTED, "is not constant");
}

/* ---- Gemm, MatMul ---- */

static void check_gemm_case(wpk_context *ctx, int64_t m, int64_t k, int64_t nn, bool ta, bool tb,
                            int cnd, const int64_t *cdims, float alpha, float beta) {
    float *a = rnd_buf(m * k), *b = rnd_buf(k * nn), *c = rnd_buf(m * nn);
    float *want = malloc(sizeof(float) * (size_t)(m * nn));
    int64_t cm = cnd == 2 ? cdims[0] : 1, cn = cnd >= 1 ? cdims[cnd - 1] : 1;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < nn; j++) {
            double s = 0;
            for (int64_t q = 0; q < k; q++)
                s += (double)(ta ? a[q * m + i] : a[i * k + q]) *
                     (tb ? b[j * k + q] : b[q * nn + j]);
            double cv = cnd < 0 ? 0.0 : c[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
            want[i * nn + j] = (float)(alpha * s + beta * cv);
        }
    ir_attr attrs[] = {attr_int("transA", ta), attr_int("transB", tb), attr_float("alpha", alpha),
                       attr_float("beta", beta)};
    ir_node n = node("Gemm", 13, cnd < 0 ? 2 : 3, 1, 4, attrs);
    ir_tensor tA = ta ? F32(a, k, m) : F32(a, m, k), tB = tb ? F32(b, nn, k) : F32(b, k, nn);
    ir_tensor tC = tensor(WPK_DTYPE_FLOAT32, cnd < 0 ? 0 : cnd, cdims, c), y;
    ir_tensor *in[3] = {&tA, &tB, &tC}, *out[1] = {&y};
    CHECK(run(ctx, &n, in, out) == WPK_OK);
    CHECK(y.ndim == 2 && y.dims[0] == m && y.dims[1] == nn);
    if (ir_numel(&y) == m * nn) CHECK(near(y.data, want, m * nn, 1e-5f));
    release(out, 1);
    free(a), free(b), free(c), free(want);
}

static void test_gemm(wpk_context *ctx) {
    for (int t = 0; t < 4; t++) {
        check_gemm_case(ctx, 5, 7, 300, t & 1, t & 2, 2, (int64_t[]){5, 300}, 1.0f, 1.0f);
        check_gemm_case(ctx, 9, 3, 4, t & 1, t & 2, 1, (int64_t[]){4}, 0.5f, 2.0f);
    }
    check_gemm_case(ctx, 6, 5, 3, false, true, 2, (int64_t[]){6, 1}, 1.0f, -1.0f);
    check_gemm_case(ctx, 6, 5, 3, true, false, 0, NULL, 1.0f, 0.5f);
    check_gemm_case(ctx, 1, 64, 10, false, true, 2, (int64_t[]){1, 10}, 1.0f, 1.0f);
    check_gemm_case(ctx, 4, 8, 8, false, false, -1, NULL, 2.0f, 1.0f);

    float a[6] = {0}, b[8] = {0}, c[3] = {0};
    ir_tensor tA = F32(a, 2, 3), tB = F32(b, 4, 2), tC = F32(c, 3), y;
    ir_tensor *in[3] = {&tA, &tB, &tC}, *out[1] = {&y};
    ir_node n = node("Gemm", 13, 2, 1, 0, NULL);
    CHECK_ERR(ctx, run(ctx, &n, in, out), WPK_ERR_MODEL, "inner dims differ");
    ir_attr tb[] = {attr_int("transB", 1)};
    ir_tensor tB2 = F32(b, 4, 3);
    ir_tensor *in2[3] = {&tA, &tB2, &tC};
    n = node("Gemm", 13, 3, 1, 1, tb);
    CHECK_ERR(ctx, run(ctx, &n, in2, out), WPK_ERR_MODEL,
              "input C (1-d) does not broadcast to the 2 x 4");
}

/* MatMul of a (..., m, k) by b (..., k, n) against the naive batched loop; 1-D promotion is
 * checked through the shapes. */
static void check_matmul_case(wpk_context *ctx, int na, const int64_t *ad, int nb,
                              const int64_t *bd, int ny, const int64_t *yd) {
    ir_tensor ta = tensor(WPK_DTYPE_FLOAT32, na, ad, NULL),
              tb = tensor(WPK_DTYPE_FLOAT32, nb, bd, NULL), y;
    ta.data = rnd_buf(ir_numel(&ta));
    tb.data = rnd_buf(ir_numel(&tb));
    ir_tensor *in[2] = {&ta, &tb}, *out[1] = {&y};
    ir_node n = node("MatMul", 13, 2, 1, 0, NULL);
    CHECK(run(ctx, &n, in, out) == WPK_OK);
    CHECK(has_dims(&y, ny, yd));
    /* the naive loop: promote to >= 2-D, broadcast batch by index arithmetic */
    int64_t m = na == 1 ? 1 : ad[na - 2], k = ad[na - 1], nn = nb == 1 ? 1 : bd[nb - 1];
    int nbd = (na > nb ? na : nb) - 2;
    if (nbd < 0) nbd = 0;
    int64_t batch[WPK_MAX_DIMS], total = 1;
    for (int i = 0; i < nbd; i++) {
        int ia = i - (nbd - (na - 2)), ib = i - (nbd - (nb - 2));
        int64_t da = ia >= 0 && na > 2 ? ad[ia] : 1, db = ib >= 0 && nb > 2 ? bd[ib] : 1;
        batch[i] = da > db ? da : db;
        total *= batch[i];
    }
    float *want = malloc(sizeof(float) * (size_t)(total * m * nn + 1));
    for (int64_t t = 0; t < total; t++) {
        int64_t aoff = 0, boff = 0, as = 1, bs = 1, rest = t;
        for (int i = nbd - 1; i >= 0; i--) {
            int64_t at = rest % batch[i];
            rest /= batch[i];
            int ia = i - (nbd - (na - 2)), ib = i - (nbd - (nb - 2));
            int64_t da = ia >= 0 && na > 2 ? ad[ia] : 1, db = ib >= 0 && nb > 2 ? bd[ib] : 1;
            aoff += (da == 1 ? 0 : at) * as;
            boff += (db == 1 ? 0 : at) * bs;
            as *= da;
            bs *= db;
        }
        const float *A = (const float *)ta.data + aoff * m * k,
                    *B = (const float *)tb.data + boff * k * nn;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < nn; j++) {
                double s = 0;
                for (int64_t q = 0; q < k; q++) s += (double)A[i * k + q] * B[q * nn + j];
                want[(t * m + i) * nn + j] = (float)s;
            }
    }
    if (ir_numel(&y) == total * m * nn) CHECK(near(y.data, want, total * m * nn, 1e-5f));
    release(out, 1);
    free(ta.data), free(tb.data), free(want);
}

static void test_matmul(wpk_context *ctx) {
    check_matmul_case(ctx, DIMS(7, 9), DIMS(9, 270), DIMS(7, 270));
    check_matmul_case(ctx, DIMS(5), DIMS(5), 0, NULL);
    check_matmul_case(ctx, DIMS(5), DIMS(5, 3), DIMS(3));
    check_matmul_case(ctx, DIMS(4, 5), DIMS(5), DIMS(4));
    check_matmul_case(ctx, DIMS(2, 1, 3, 4), DIMS(5, 4, 2), DIMS(2, 5, 3, 2));
    check_matmul_case(ctx, DIMS(3, 6), DIMS(2, 6, 5), DIMS(2, 3, 5));
    check_matmul_case(ctx, DIMS(2, 3, 6), DIMS(6), DIMS(2, 3));

    float a[12] = {0};
    ir_tensor tA = F32(a, 2, 2, 3), tB = F32(a, 3, 3, 1), tC = F32(a, 2, 2), y;
    ir_tensor *in[2] = {&tA, &tB}, *out[1] = {&y};
    ir_node n = node("MatMul", 13, 2, 1, 0, NULL);
    CHECK_ERR(ctx, run(ctx, &n, in, out), WPK_ERR_MODEL,
              "batch dims cannot be broadcast: 2 in A and 3 in B");
    ir_tensor *in2[2] = {&tA, &tC};
    CHECK_ERR(ctx, run(ctx, &n, in2, out), WPK_ERR_MODEL,
              "inner dims differ: A has K = 3, B has K = 2");
}

/* Static inference with an unknown (-1) dim propagates it instead of failing. */
static void test_unknown_dims(wpk_context *ctx) {
    ir_tensor tx = tensor(WPK_DTYPE_FLOAT32, DIMS(-1, 3, 8, -1), NULL);
    ir_tensor tw = tensor(WPK_DTYPE_FLOAT32, DIMS(4, 3, 3, 3), NULL), y = {0};
    ir_tensor *in[2] = {&tx, &tw}, *out[1] = {&y};
    ir_attr a[] = {INTS("pads", 1, 1, 1, 1)};
    ir_node n = node("Conv", 11, 2, 1, 1, a);
    CHECK(op_conv_shape(ctx, &n, in, out) == WPK_OK);
    CHECK_DIMS(&y, -1, 4, 8, -1);
    ir_tensor tb = tensor(WPK_DTYPE_FLOAT32, DIMS(-1, 4, 5), NULL);
    ir_tensor *in2[2] = {&tx, &tb};
    n = node("MatMul", 13, 2, 1, 0, NULL);
    CHECK(op_matmul_shape(ctx, &n, in2, out) == WPK_OK);
    CHECK_DIMS(&y, -1, 3, 8, 5);
}

int main(void) {
    wpk_context *ctx = wpk_context_create();
    test_conv(ctx);
    test_conv_transpose(ctx);
    test_pool(ctx);
    test_batch_norm(ctx);
    test_layer_norm(ctx);
    test_softmax(ctx);
    test_reduce_mean(ctx);
    test_gemm(ctx);
    test_matmul(ctx);
    test_unknown_dims(ctx);
    wpk_context_free(ctx);
    CHECK_DONE();
}
