/* conv.c -- Conv and ConvTranspose over any number of spatial dims: attribute checking, output
 * shapes (explicit pads, auto_pad, output_shape/output_padding) and the reference kernels. The
 * attributes and the window rules shared with the pools are ops/spatial.h's.
 *
 * Both kernels work one output-channel plane at a time (the parallel loop), and reduce every
 * spatial rank to a loop over "outer" spatial dims around a 2-D core whose innermost loop runs
 * over contiguous output (Conv) or input (ConvTranspose) width, with the in-bounds range of
 * each kernel tap computed once instead of testing padding per element. */
#include <string.h>

#include "ops/op_util.h"
#include "ops/spatial.h"

/* floor(v / 2) for negative v too (C division truncates): ConvTranspose's padding split
 * follows the spec's Python arithmetic, and its total padding may be negative. */
static int64_t floor_half(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

/* X (N, C, spatial...) and W: checks shared by Conv and ConvTranspose, then the attributes
 * both have. Fills g->nsp, in, kernel, stride, dil, the explicit pads, *group and *mode. */
static wpk_status read_common(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                              sp_geom *g, int64_t *group, sp_pad_mode *mode) {
    wpk_status st;
    if ((st = op_need_input(ctx, n, in, 0, "X")) || (st = op_need_input(ctx, n, in, 1, "W")) ||
        (st = op_need_f32(ctx, n, in, 0)) || (st = op_need_f32(ctx, n, in, 1)))
        return st;
    if (n->nin > 2 && in[2] && (st = op_need_f32(ctx, n, in, 2))) return st;
    const ir_tensor *x = in[0], *w = in[1];
    if (x->ndim < 3)
        return op_fail(ctx, n, "input X has %d dims, expected at least 3 (N, C, spatial...)",
                       x->ndim);
    if (w->ndim != x->ndim)
        return op_fail(ctx, n, "weight W has %d dims but X has %d; they must match", w->ndim,
                       x->ndim);
    g->nsp = x->ndim - 2;
    for (int i = 0; i < g->nsp; i++) {
        g->in[i] = x->dims[2 + i];
        g->kernel[i] = w->dims[2 + i];
    }
    /* kernel_shape is optional here: W has the kernel; a kernel_shape must agree with it */
    int nk;
    const int64_t *ks = ir_attr_ints(n, "kernel_shape", &nk);
    if (ks && nk) {
        if (nk != g->nsp)
            return op_fail(ctx, n, "attribute 'kernel_shape' has %d values, expected %d", nk,
                           g->nsp);
        for (int i = 0; i < nk; i++) {
            if (ks[i] < 1 || ks[i] > SP_ATTR_MAX)
                return op_fail(ctx, n, "attribute 'kernel_shape' value %lld at index %d is out of "
                               "range", (long long)ks[i], i);
            if (g->kernel[i] >= 0 && ks[i] != g->kernel[i])
                return op_fail(ctx, n, "attribute 'kernel_shape' is %lld in spatial dim %d but W's "
                               "kernel is %lld", (long long)ks[i], i, (long long)g->kernel[i]);
            g->kernel[i] = ks[i];
        }
    }
    for (int i = 0; i < g->nsp; i++)
        if (g->kernel[i] == 0 || g->kernel[i] > SP_ATTR_MAX)
            return op_fail(ctx, n,
                           "weight W has kernel size %lld in spatial dim %d; it must be positive",
                           (long long)g->kernel[i], i);
    if ((st = sp_read_attrs(ctx, n, g, mode))) return st;
    *group = ir_attr_int(n, "group", 1);
    if (*group < 1 || *group > SP_ATTR_MAX)
        return op_fail(ctx, n, "attribute 'group' is %lld, expected a positive count",
                       (long long)*group);
    return WPK_OK;
}

/* Optional bias B: 1-D with one value per output channel m (-1 when unknown). */
static wpk_status check_bias(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, int64_t m) {
    if (n->nin <= 2 || !in[2]) return WPK_OK;
    const ir_tensor *b = in[2];
    if (b->ndim != 1 || (m >= 0 && b->dims[0] >= 0 && b->dims[0] != m))
        return op_fail(ctx, n, "bias B must be 1-D with %lld values (one per output channel)",
                       (long long)m);
    return WPK_OK;
}

/* Conv: checks, then output channels in *m and the spatial output and pads in g. */
static wpk_status conv_setup(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             sp_geom *g, int64_t *group, int64_t *m) {
    sp_pad_mode mode = SP_PAD_NOTSET;
    wpk_status st = read_common(ctx, n, in, g, group, &mode);
    if (st) return st;
    const ir_tensor *x = in[0], *w = in[1];
    int64_t c = x->dims[1], cg = w->dims[1];
    *m = w->dims[0];
    if (*m >= 0 && *m % *group)
        return op_fail(ctx, n, "attribute 'group' (%lld) does not divide the %lld output channels "
                       "of W", (long long)*group, (long long)*m);
    if (c >= 0 && cg >= 0 && c != cg * *group)
        return op_fail(ctx, n, "input X has %lld channels but W expects %lld x group %lld = %lld",
                       (long long)c, (long long)cg, (long long)*group,
                       (long long)(cg * *group));
    if ((st = check_bias(ctx, n, in, *m))) return st;
    for (int i = 0; i < g->nsp; i++)
        if (!sp_resolve(g, i, mode, false))
            return op_fail(ctx, n,
                           "spatial dim %d: the kernel spans %lld (with dilation) but the "
                           "padded input is only %lld",
                           i, (long long)sp_span(g, i),
                           (long long)(g->in[i] + g->pad0[i] + g->pad1[i]));
    return WPK_OK;
}

/* ConvTranspose: checks, then output channels in *m and the spatial output and begin pads. */
static wpk_status conv_transpose_setup(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                       sp_geom *g, int64_t *group, int64_t *m) {
    sp_pad_mode mode = SP_PAD_NOTSET;
    int64_t opad[SP_MAX], oshape[SP_MAX + 2];
    wpk_status st = read_common(ctx, n, in, g, group, &mode);
    if (st) return st;
    const ir_tensor *x = in[0], *w = in[1];
    int64_t c = x->dims[1], wc = w->dims[0];
    if (c >= 0 && wc >= 0 && c != wc)
        return op_fail(ctx, n, "input X has %lld channels but W (C, M/group, kernel...) has %lld",
                       (long long)c, (long long)wc);
    if (wc >= 0 && wc % *group)
        return op_fail(ctx, n, "attribute 'group' (%lld) does not divide the %lld input channels",
                       (long long)*group, (long long)wc);
    *m = w->dims[1] < 0 ? -1 : w->dims[1] * *group;
    if ((st = check_bias(ctx, n, in, *m))) return st;
    if ((st = sp_attr_ints(ctx, n, "output_padding", g->nsp, 0, 0, opad))) return st;
    /* output_shape lists the spatial sizes; older exporters also wrote N and C in front. */
    const ir_attr *osa = ir_attr_find(n, "output_shape");
    bool have_oshape = osa && osa->kind == IR_ATTR_INTS && osa->n > 0;
    if (have_oshape) {
        int skip = osa->n == g->nsp + 2 ? 2 : 0;
        if ((st = sp_attr_ints(ctx, n, "output_shape", g->nsp + skip, 0, 1, oshape))) return st;
        memmove(oshape, oshape + skip, sizeof(int64_t) * (size_t)g->nsp);
    }
    for (int i = 0; i < g->nsp; i++) {
        int64_t s = g->stride[i], len = g->in[i];
        if (opad[i] >= s && opad[i] >= g->dil[i])
            return op_fail(ctx, n,
                           "attribute 'output_padding' value %lld in spatial dim %d must be "
                           "smaller than the stride or the dilation",
                           (long long)opad[i], i);
        if (len < 0 || g->kernel[i] < 0) {
            g->out[i] = have_oshape ? oshape[i] : -1;
            g->pad0[i] = 0;
            continue;
        }
        int64_t full = s * (len - 1) + opad[i] + sp_span(g, i); /* the output without padding */
        if (have_oshape || mode == SP_PAD_SAME_UPPER || mode == SP_PAD_SAME_LOWER) {
            g->out[i] = have_oshape ? oshape[i] : len * s;
            int64_t total = full - g->out[i];
            g->pad0[i] = mode == SP_PAD_SAME_UPPER ? floor_half(total) : total - floor_half(total);
        } else {
            if (mode == SP_PAD_VALID) g->pad0[i] = g->pad1[i] = 0;
            g->out[i] = full - g->pad0[i] - g->pad1[i];
            if (g->out[i] < 1)
                return op_fail(ctx, n, "attribute 'pads' leaves spatial dim %d with %lld outputs",
                               i, (long long)g->out[i]);
        }
    }
    return WPK_OK;
}

wpk_status op_conv_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out) {
    sp_geom g;
    int64_t group, m;
    wpk_status st = conv_setup(ctx, n, in, &g, &group, &m);
    if (st) return st;
    int64_t dims[WPK_MAX_DIMS];
    op_set_shape(out[0], WPK_DTYPE_FLOAT32, sp_out_dims(&g, in[0]->dims[0], m, dims), dims);
    return WPK_OK;
}

wpk_status op_conv_transpose_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                   ir_tensor *const *out) {
    sp_geom g;
    int64_t group, m;
    wpk_status st = conv_transpose_setup(ctx, n, in, &g, &group, &m);
    if (st) return st;
    int64_t dims[WPK_MAX_DIMS];
    op_set_shape(out[0], WPK_DTYPE_FLOAT32, sp_out_dims(&g, in[0]->dims[0], m, dims), dims);
    return WPK_OK;
}

/* ---- kernels ---- */

/* The last two spatial dims of a geometry: the 2-D core's view. */
typedef struct plane {
    int64_t ih, iw, oh, ow, kh, kw, sh, sw, dh, dw, ph, pw;
} plane;

/* Conv, one input plane into one output plane: y[oh][ow] += w[kh][kw] * x[ih][iw] with
 * ih = oh*sh + kh*dh - ph (likewise for w), over the taps that fall inside x. */
static void conv_plane(float *restrict y, const float *restrict x, const float *restrict w,
                       const plane *p) {
    for (int64_t kh = 0; kh < p->kh; kh++) {
        int64_t offh = kh * p->dh - p->ph, oh0, oh1;
        sp_tap_range(p->oh, p->sh, offh, p->ih, &oh0, &oh1);
        for (int64_t kw = 0; kw < p->kw; kw++) {
            int64_t offw = kw * p->dw - p->pw, ow0, ow1;
            sp_tap_range(p->ow, p->sw, offw, p->iw, &ow0, &ow1);
            const float wv = w[kh * p->kw + kw];
            if (p->sh == 1 && p->sw == 1 && offw == 0 && p->iw == p->ow) {
                /* Whole rows on both sides, consecutive in memory: one long loop instead of
                 * a short one per row (1x1 convs, the middle column of 3x3 ones). */
                float *restrict yr = y + oh0 * p->ow;
                const float *restrict xr = x + (oh0 + offh) * p->iw;
                const int64_t len = (oh1 - oh0) * p->ow;
#pragma omp simd
                for (int64_t i = 0; i < len; i++) yr[i] += wv * xr[i];
                continue;
            }
            for (int64_t oh = oh0; oh < oh1; oh++) {
                float *restrict yr = y + oh * p->ow;
                const float *restrict xr = x + (oh * p->sh + offh) * p->iw;
                if (p->sw == 1) {
#pragma omp simd
                    for (int64_t ow = ow0; ow < ow1; ow++) yr[ow] += wv * xr[ow + offw];
                } else {
                    const int64_t sw = p->sw;
#pragma omp simd
                    for (int64_t ow = ow0; ow < ow1; ow++) yr[ow] += wv * xr[ow * sw + offw];
                }
            }
        }
    }
}

/* ConvTranspose, one input plane scattered into one output plane: y[oh][ow] += w * x[ih][iw]
 * with oh = ih*sh + kh*dh - ph, over the inputs whose target lies inside y. */
static void conv_transpose_plane(float *restrict y, const float *restrict x,
                                 const float *restrict w, const plane *p) {
    for (int64_t kh = 0; kh < p->kh; kh++) {
        int64_t offh = kh * p->dh - p->ph, ih0, ih1;
        sp_tap_range(p->ih, p->sh, offh, p->oh, &ih0, &ih1);
        for (int64_t kw = 0; kw < p->kw; kw++) {
            int64_t offw = kw * p->dw - p->pw, iw0, iw1;
            sp_tap_range(p->iw, p->sw, offw, p->ow, &iw0, &iw1);
            const float wv = w[kh * p->kw + kw];
            const int64_t sw = p->sw;
            if (p->sh == 1 && sw == 1 && offw == 0 && p->iw == p->ow) {
                /* whole consecutive rows on both sides, as in conv_plane */
                float *restrict yr = y + (ih0 + offh) * p->ow;
                const float *restrict xr = x + ih0 * p->iw;
                const int64_t len = (ih1 - ih0) * p->iw;
#pragma omp simd
                for (int64_t i = 0; i < len; i++) yr[i] += wv * xr[i];
                continue;
            }
            for (int64_t ih = ih0; ih < ih1; ih++) {
                float *restrict yr = y + (ih * p->sh + offh) * p->ow;
                const float *restrict xr = x + ih * p->iw;
#pragma omp simd
                for (int64_t iw = iw0; iw < iw1; iw++) yr[iw * sw + offw] += wv * xr[iw];
            }
        }
    }
}

/* A geometry with at least two spatial dims (a 1-D one gets a unit dim in front), so every
 * rank runs through the 2-D core. */
static sp_geom as_2d(const sp_geom *g) {
    if (g->nsp >= 2) return *g;
    sp_geom r = *g;
    r.nsp = 2;
    r.in[1] = g->in[0], r.out[1] = g->out[0], r.kernel[1] = g->kernel[0];
    r.stride[1] = g->stride[0], r.dil[1] = g->dil[0];
    r.pad0[1] = g->pad0[0], r.pad1[1] = g->pad1[0];
    r.in[0] = r.out[0] = r.kernel[0] = r.stride[0] = r.dil[0] = 1;
    r.pad0[0] = r.pad1[0] = 0;
    return r;
}

static int64_t prod(const int64_t *d, int count) {
    int64_t p = 1;
    for (int i = 0; i < count; i++) p *= d[i];
    return p;
}

/* Advance a row-major multi-index over dims[0..count). */
static void next_index(int64_t *idx, const int64_t *dims, int count) {
    for (int d = count - 1; d >= 0; d--) {
        if (++idx[d] < dims[d]) return;
        idx[d] = 0;
    }
}

/* One (input channel, output channel) pair over all spatial dims: the dims in front of the
 * last two are walked here, the last two go to the 2-D core. Conv walks output positions
 * and gathers; ConvTranspose walks input positions and scatters. The position on the other
 * side is idx*stride + k*dilation - pad0 in both. */
static void accumulate(float *y, const float *x, const float *w, const sp_geom *g,
                       bool transpose) {
    int no = g->nsp - 2;
    plane p = {g->in[no], g->in[no + 1], g->out[no], g->out[no + 1], g->kernel[no],
               g->kernel[no + 1], g->stride[no], g->stride[no + 1], g->dil[no], g->dil[no + 1],
               g->pad0[no], g->pad0[no + 1]};
    int64_t ysz = p.oh * p.ow, xsz = p.ih * p.iw, wsz = p.kh * p.kw;
    const int64_t *walk = transpose ? g->in : g->out, *other = transpose ? g->out : g->in;
    int64_t kidx[SP_MAX] = {0}, kcount = prod(g->kernel, no), wcount = prod(walk, no);
    for (int64_t kf = 0; kf < kcount; kf++, next_index(kidx, g->kernel, no)) {
        int64_t idx[SP_MAX] = {0};
        for (int64_t wf = 0; wf < wcount; wf++, next_index(idx, walk, no)) {
            int64_t of = 0;
            bool inside = true;
            for (int d = 0; d < no && inside; d++) {
                int64_t pos = idx[d] * g->stride[d] + kidx[d] * g->dil[d] - g->pad0[d];
                inside = pos >= 0 && pos < other[d];
                of = of * other[d] + pos;
            }
            if (!inside) continue;
            if (transpose) conv_transpose_plane(y + of * ysz, x + wf * xsz, w + kf * wsz, &p);
            else conv_plane(y + wf * ysz, x + of * xsz, w + kf * wsz, &p);
        }
    }
}

/* One Conv/ConvTranspose node's data and sizes, for the per-plane tasks. */
typedef struct conv_job {
    sp_geom g; /* as_2d */
    bool transpose;
    int64_t c, m, cg, mg, xsz, ysz, wsz;
    const float *x, *w, *b;
    float *y;
} conv_job;

/* Task t: output plane t (image t / m, output channel t % m), filled with its bias (or 0),
 * then accumulated from the input channels of its group. Conv's W is (M, C/group, k...),
 * ConvTranspose's (C, M/group, k...). */
static void conv_task(const conv_job *j, int64_t t) {
    int64_t bi = t / j->m, oc = t % j->m, grp = oc / j->mg;
    float *yp = j->y + t * j->ysz;
    const float bias = j->b ? j->b[oc] : 0.0f;
    for (int64_t i = 0; i < j->ysz; i++) yp[i] = bias;
    for (int64_t k = 0; k < j->cg; k++) {
        int64_t ic = grp * j->cg + k;
        const float *xp = j->x + (bi * j->c + ic) * j->xsz;
        const float *wp =
            j->w + (j->transpose ? ic * j->mg + oc % j->mg : oc * j->cg + k) * j->wsz;
        accumulate(yp, xp, wp, &j->g, j->transpose);
    }
}

/* Every output plane is a task, handed out one at a time. */
static void run(const sp_geom *g0, int64_t group, const ir_tensor *x, const ir_tensor *w,
                const ir_tensor *b, ir_tensor *y, bool transpose) {
    conv_job j = {.g = as_2d(g0), .transpose = transpose, .c = x->dims[1], .m = y->dims[1],
                  .x = x->data, .w = w->data, .b = b ? b->data : NULL, .y = y->data};
    j.cg = j.c / group;
    j.mg = j.m / group;
    j.xsz = prod(j.g.in, j.g.nsp);
    j.ysz = prod(j.g.out, j.g.nsp);
    j.wsz = prod(j.g.kernel, j.g.nsp);
    int64_t tasks = x->dims[0] * j.m;
    if (op_parallel(tasks, 2)) {
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t t = 0; t < tasks; t++) conv_task(&j, t);
    } else {
        for (int64_t t = 0; t < tasks; t++) conv_task(&j, t);
    }
}

wpk_status op_conv_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                       ir_tensor *const *out) {
    sp_geom g;
    int64_t group, m;
    wpk_status st = conv_setup(ctx, n, in, &g, &group, &m);
    if (st) return st;
    run(&g, group, in[0], in[1], n->nin > 2 ? in[2] : NULL, out[0], false);
    return WPK_OK;
}

wpk_status op_conv_transpose_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                 ir_tensor *const *out) {
    sp_geom g;
    int64_t group, m;
    wpk_status st = conv_transpose_setup(ctx, n, in, &g, &group, &m);
    if (st) return st;
    run(&g, group, in[0], in[1], n->nin > 2 ? in[2] : NULL, out[0], true);
    return WPK_OK;
}
