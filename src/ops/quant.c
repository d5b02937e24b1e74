/* quant.c -- the pieces the quantized ops share: scale and zero-point reading, parameter shape
 * checks, and the integer convolution and matmul accumulation cores (int8 / uint8 operands,
 * int32 sums) that ConvInteger, QLinearConv, MatMulInteger and QLinearMatMul finish
 * differently. */
#include "ops/quant.h"

#include <string.h>

#include "base/half.h"
#include "ops/op_util.h"

bool quant_is_scale_dtype(wpk_dtype t) {
    return t == WPK_DTYPE_FLOAT32 || t == WPK_DTYPE_FLOAT16 || t == WPK_DTYPE_BFLOAT16;
}

bool quant_is_int8(wpk_dtype t) { return t == WPK_DTYPE_INT8 || t == WPK_DTYPE_UINT8; }

float quant_float_at(const ir_tensor *t, int64_t i) {
    switch (t->dtype) {
    case WPK_DTYPE_FLOAT16: return half_f16_to_f32(((const uint16_t *)t->data)[i]);
    case WPK_DTYPE_BFLOAT16: return half_bf16_to_f32(((const uint16_t *)t->data)[i]);
    default: return ((const float *)t->data)[i];
    }
}

int32_t quant_int_at(const ir_tensor *t, int64_t i) {
    if (!t) return 0;
    switch (t->dtype) {
    case WPK_DTYPE_INT8: return ((const int8_t *)t->data)[i];
    case WPK_DTYPE_UINT8: return ((const uint8_t *)t->data)[i];
    default: return ((const int32_t *)t->data)[i];
    }
}

wpk_status quant_check_param(wpk_context *ctx, const ir_node *n, const ir_tensor *t,
                             int64_t count, const char *what) {
    if (!t) return WPK_OK;
    int64_t len = ir_numel(t);
    if (t->ndim > 1 || (len != 1 && len != count)) {
        if (count == 1)
            return op_fail(ctx, n, "input '%s' must be a scalar (one value), not %d-D with %lld",
                           what, t->ndim, (long long)len);
        return op_fail(ctx, n, "input '%s' must be a scalar or 1-D with 1 or %lld values, not "
                       "%d-D with %lld", what, (long long)count, t->ndim, (long long)len);
    }
    return WPK_OK;
}

wpk_status quant_conv_geometry(wpk_context *ctx, const ir_node *n, const ir_tensor *x,
                               const ir_tensor *w, sp_geom *g, int64_t *group, int64_t *m) {
    if (x->ndim < 3 || x->ndim - 2 > 3)
        return op_unsupported(ctx, n, "input x has %d dims; 1 to 3 spatial dims are supported "
                              "(N, C, spatial...)", x->ndim);
    if (w->ndim != x->ndim)
        return op_fail(ctx, n, "weight w has %d dims but x has %d; they must match", w->ndim,
                       x->ndim);
    memset(g, 0, sizeof *g);
    g->nsp = x->ndim - 2;
    for (int i = 0; i < g->nsp; i++) {
        g->in[i] = x->dims[2 + i];
        g->kernel[i] = w->dims[2 + i];
        if (g->kernel[i] < 1)
            return op_fail(ctx, n, "weight w has kernel size %lld in spatial dim %d",
                           (long long)g->kernel[i], i);
    }
    int nk;
    const int64_t *ks = ir_attr_ints(n, "kernel_shape", &nk);
    for (int i = 0; ks && i < nk; i++)
        if (nk != g->nsp || ks[i] != g->kernel[i])
            return op_fail(ctx, n, "attribute 'kernel_shape' does not match w's kernel");
    sp_pad_mode mode = SP_PAD_NOTSET;
    wpk_status st = sp_read_attrs(ctx, n, g, &mode);
    if (st) return st;
    *group = ir_attr_int(n, "group", 1);
    *m = w->dims[0];
    if (*group < 1 || *m % *group || x->dims[1] != w->dims[1] * *group)
        return op_fail(ctx, n, "x has %lld channels, w is [%lld, %lld, ...] and group is %lld: "
                       "they do not agree", (long long)x->dims[1], (long long)w->dims[0],
                       (long long)w->dims[1], (long long)*group);
    for (int i = 0; i < g->nsp; i++)
        if (!sp_resolve(g, i, mode, false))
            return op_fail(ctx, n, "spatial dim %d: the kernel spans %lld (with dilation) but "
                           "the padded input is only %lld", i, (long long)sp_span(g, i),
                           (long long)(g->in[i] + g->pad0[i] + g->pad1[i]));
    return WPK_OK;
}

/* Every spatial rank as three dims (leading ones of size 1). */
typedef struct geom3 {
    int64_t in[3], out[3], k[3], s[3], d[3], p[3];
} geom3;

static geom3 as_3d(const sp_geom *g) {
    geom3 r;
    int lead = 3 - g->nsp;
    for (int i = 0; i < 3; i++) {
        int j = i - lead;
        bool real = j >= 0;
        r.in[i] = real ? g->in[j] : 1;
        r.out[i] = real ? g->out[j] : 1;
        r.k[i] = real ? g->kernel[j] : 1;
        r.s[i] = real ? g->stride[j] : 1;
        r.d[i] = real ? g->dil[j] : 1;
        r.p[i] = real ? g->pad0[j] : 0;
    }
    return r;
}

static inline int32_t at8(const void *data, bool is_signed, int64_t i) {
    return is_signed ? ((const int8_t *)data)[i] : ((const uint8_t *)data)[i];
}

void quant_conv_plane(int32_t *acc, const sp_geom *g, int64_t group, const ir_tensor *x,
                      int32_t xzp, const ir_tensor *w, int32_t wzp, int64_t b, int64_t oc) {
    geom3 q = as_3d(g);
    int64_t cg = w->dims[1], mg = w->dims[0] / group, c0 = oc / mg * cg;
    int64_t in_plane = q.in[0] * q.in[1] * q.in[2], out_plane = q.out[0] * q.out[1] * q.out[2];
    int64_t taps = q.k[0] * q.k[1] * q.k[2];
    bool xs = x->dtype == WPK_DTYPE_INT8, ws = w->dtype == WPK_DTYPE_INT8;
    memset(acc, 0, (size_t)out_plane * sizeof *acc);
    for (int64_t c = 0; c < cg; c++) {
        int64_t xbase = (b * x->dims[1] + c0 + c) * in_plane, wbase = (oc * cg + c) * taps;
        for (int64_t kd = 0; kd < q.k[0]; kd++)
            for (int64_t kh = 0; kh < q.k[1]; kh++)
                for (int64_t kw = 0; kw < q.k[2]; kw++) {
                    int32_t wv = at8(w->data, ws, wbase + (kd * q.k[1] + kh) * q.k[2] + kw) - wzp;
                    if (wv == 0) continue;
                    int64_t d0, d1, h0, h1, w0, w1;
                    sp_tap_range(q.out[0], q.s[0], kd * q.d[0] - q.p[0], q.in[0], &d0, &d1);
                    sp_tap_range(q.out[1], q.s[1], kh * q.d[1] - q.p[1], q.in[1], &h0, &h1);
                    sp_tap_range(q.out[2], q.s[2], kw * q.d[2] - q.p[2], q.in[2], &w0, &w1);
                    for (int64_t od = d0; od < d1; od++)
                        for (int64_t oh = h0; oh < h1; oh++) {
                            int64_t id = od * q.s[0] + kd * q.d[0] - q.p[0];
                            int64_t ih = oh * q.s[1] + kh * q.d[1] - q.p[1];
                            int64_t row = xbase + (id * q.in[1] + ih) * q.in[2];
                            int32_t *arow = acc + (od * q.out[1] + oh) * q.out[2];
                            for (int64_t ow = w0; ow < w1; ow++) {
                                int64_t iw = ow * q.s[2] + kw * q.d[2] - q.p[2];
                                arow[ow] += (at8(x->data, xs, row + iw) - xzp) * wv;
                            }
                        }
                }
    }
}

wpk_status quant_matmul_shape(wpk_context *ctx, const ir_node *n, const ir_tensor *a,
                              const ir_tensor *b, ir_tensor *out) {
    if (a->ndim < 1 || b->ndim < 1)
        return op_fail(ctx, n, "inputs A and B must have at least one dim");
    int64_t ka = a->dims[a->ndim - 1], kb = b->ndim == 1 ? b->dims[0] : b->dims[b->ndim - 2];
    if (ka != kb)
        return op_fail(ctx, n, "A's last dim (%lld) and B's contraction dim (%lld) differ",
                       (long long)ka, (long long)kb);
    /* batch dims broadcast as numpy's; a 1-D operand has none and drops its matrix dim */
    int ba = a->ndim > 2 ? a->ndim - 2 : 0, bb = b->ndim > 2 ? b->ndim - 2 : 0;
    int nb = ba > bb ? ba : bb;
    int64_t dims[WPK_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < nb; i++) {
        int64_t da = i - (nb - ba) >= 0 ? a->dims[i - (nb - ba)] : 1;
        int64_t db = i - (nb - bb) >= 0 ? b->dims[i - (nb - bb)] : 1;
        if (da != db && da != 1 && db != 1)
            return op_fail(ctx, n, "batch dim %d of A (%lld) and B (%lld) do not broadcast", i,
                           (long long)da, (long long)db);
        dims[nd++] = da == 1 ? db : da;
    }
    if (a->ndim >= 2) dims[nd++] = a->dims[a->ndim - 2];
    if (b->ndim >= 2) dims[nd++] = b->dims[b->ndim - 1];
    op_set_shape(out, out->dtype, nd, dims);
    return WPK_OK;
}

void quant_matmul_acc(int32_t *acc, const ir_tensor *a, const ir_tensor *azp,
                      const ir_tensor *b, const ir_tensor *bzp, const ir_tensor *out) {
    int64_t m = a->ndim >= 2 ? a->dims[a->ndim - 2] : 1, k = a->dims[a->ndim - 1];
    int64_t nn = b->ndim >= 2 ? b->dims[b->ndim - 1] : 1;
    int64_t batch = m > 0 && nn > 0 ? ir_numel(out) / (m * nn) : 0;
    int ob = out->ndim - (a->ndim >= 2) - (b->ndim >= 2);
    int ba = a->ndim > 2 ? a->ndim - 2 : 0, bb = b->ndim > 2 ? b->ndim - 2 : 0;
    bool as = a->dtype == WPK_DTYPE_INT8, bs = b->dtype == WPK_DTYPE_INT8;
    bool arow = azp && ir_numel(azp) > 1, bcol = bzp && ir_numel(bzp) > 1;
    for (int64_t t = 0; t < batch; t++) {
        /* the batch index of A and of B under broadcasting */
        int64_t rem = t, ia = 0, ib = 0, sa = 1, sb = 1;
        for (int i = ob - 1; i >= 0; i--) {
            int64_t idx = rem % out->dims[i];
            rem /= out->dims[i];
            int ja = i - (ob - ba), jb = i - (ob - bb);
            if (ja >= 0) {
                ia += (a->dims[ja] == 1 ? 0 : idx) * sa;
                sa *= a->dims[ja];
            }
            if (jb >= 0) {
                ib += (b->dims[jb] == 1 ? 0 : idx) * sb;
                sb *= b->dims[jb];
            }
        }
        int64_t abase = ia * m * k, bbase = ib * k * nn;
        int32_t *c = acc + t * m * nn;
        for (int64_t i = 0; i < m; i++) {
            int32_t za = quant_int_at(azp, arow ? i : 0);
            for (int64_t j = 0; j < nn; j++) {
                int32_t zb = quant_int_at(bzp, bcol ? j : 0), s = 0;
                for (int64_t p = 0; p < k; p++)
                    s += (at8(a->data, as, abase + i * k + p) - za) *
                         (at8(b->data, bs, bbase + p * nn + j) - zb);
                c[i * nn + j] = s;
            }
        }
    }
}
