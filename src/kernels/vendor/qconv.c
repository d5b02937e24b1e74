/* qconv.c -- the int8 convolution provider ("int8"): QLinearConv and wpk::QLinearConv (2-D,
 * NCHW, constant weights, scales and zero points) on the provider interface of lib.h, its
 * weights packed when the kernel is made. One group: the convolution as a GEMM (qgemm.h) of
 * the s8 weights [M, C*KH*KW] with the u8 activations, gathered (im2col, skipped for 1x1
 * stride-1 unpadded convs) and packed in 16-column blocks; bias, requantization and the
 * activation's clamp run in the GEMM's epilogue; few input channels (qstem.h) are gathered
 * and packed a slice of positions at a time. Depthwise (one channel per group): qdepthwise.h
 * a channel at a time. Threads split the GEMM over
 * output tiles (rows x column blocks), the gathering over rows and blocks, the depthwise
 * convolution over channels.
 *
 * Asymmetric weights (a nonzero w zero point), u8 weights, float16 scales and other groupings
 * are left to the reference kernel. Results are the reference kernel's bytes: the sums are
 * exact and the requantization does the same float operations. */
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "kernels/vendor/lib.h"
#include "kernels/vendor/qdepthwise.h"
#include "kernels/vendor/qgemm.h"
#include "kernels/vendor/qstem.h"
#include "ops/quant.h"

enum { X, XS, XZP, W, WS, WZP, YS, YZP, B };

struct lib_kernel {
    char name[64];
    sp_geom g;
    int64_t batch, c, m, k, k4, rows_pad, plane_in, plane_out, blocks;
    bool depthwise, direct, stem, x_signed, y_signed;
    int32_t xzp, yzp, lo, hi;
    int threads;
    int8_t *w;         /* GEMM: rows_pad x 4 k4; depthwise: m x taps */
    int32_t *bias;     /* GEMM: bias - (x zero point, as u8) x row sum; depthwise: bias */
    float *mult;       /* x_scale * w_scale[m] / y_scale */
    uint8_t *col;      /* im2col rows: k x plane_out (NULL when direct) */
    uint8_t *packed;   /* blocks x k4 x 64; stem: scratch per thread, stem_bytes each */
    size_t stem_bytes;
    uint8_t *pad;      /* depthwise: scratch per thread, pad_bytes each (qdepthwise.h) */
    size_t pad_bytes;
};

static const char *version(const kernel_provider *self) {
    (void)self;
    static char buf[64];
    snprintf(buf, sizeof buf, "wpk int8 (%s)", qgemm_isa());
    return buf;
}

/* ---- what it takes ---- */

static bool all_zero(const ir_tensor *t) {
    for (int64_t i = 0; i < ir_numel(t); i++)
        if (quant_int_at(t, i)) return false;
    return true;
}

static wpk_status check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out, sp_geom *g, int64_t *group, int64_t *m) {
    if (n->op != IR_OP_QLINEAR_CONV && n->op != IR_OP_QLINEAR_CONV_WPK)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "the int8 provider takes QLinearConv, not %s",
                         n->op_type);
    if (n->nin < 8 || !out || !out[0]) return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "inputs");
    for (int i = 0; i < n->nin; i++) {
        if (i == X) continue;
        if (!in[i] || !in[i]->data)
            return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s': input %d is not a constant",
                             n->name, i);
    }
    if (!in[X] || in[X]->ndim != 4 || !quant_is_int8(in[X]->dtype))
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s': x is not a 4-D 8-bit tensor",
                         n->name);
    if (in[W]->dtype != WPK_DTYPE_INT8 || !all_zero(in[WZP]))
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s': the weights are not symmetric "
                         "int8", n->name);
    if (in[XS]->dtype != WPK_DTYPE_FLOAT32 || in[WS]->dtype != WPK_DTYPE_FLOAT32 ||
        in[YS]->dtype != WPK_DTYPE_FLOAT32 || !quant_is_int8(out[0]->dtype))
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s': scales other than float32",
                         n->name);
    wpk_status st = quant_conv_geometry(ctx, n, in[X], in[W], g, group, m);
    if (st) return st;
    bool depthwise = *group == in[X]->dims[1] && *group == *m;
    if (*group != 1 && !depthwise)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s': %lld groups (one, or depthwise, "
                         "are taken)", n->name, (long long)*group);
    for (int i = 0; i < 4; i++)
        if (in[X]->dims[i] <= 0) return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "dims unknown");
    return WPK_OK;
}

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out) {
    (void)self;
    sp_geom g;
    int64_t group, m;
    return check(NULL, n, in, out, &g, &group, &m) == WPK_OK;
}

static int configs(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                   ir_tensor *const *out, char (*names)[LIB_CONFIG_MAX]) {
    if (!supports(self, n, in, out)) return 0;
    snprintf(names[0], LIB_CONFIG_MAX, "%s", "gemm");
    return 1;
}

/* ---- create / destroy ---- */

static void destroy(const kernel_provider *self, lib_kernel *k) {
    (void)self;
    if (!k) return;
    wpk_free(k->w);
    wpk_free(k->bias);
    wpk_free(k->mult);
    wpk_free(k->col);
    wpk_free(k->packed);
    wpk_free(k->pad);
    wpk_free(k);
}

static int constants(const kernel_provider *self, const lib_kernel *k, const void **start,
                     size_t *bytes, int max) {
    (void)self;
    if (max < 1) return 0;
    start[0] = k->w;
    bytes[0] = k->depthwise ? (size_t)(k->m * k->k) : (size_t)(k->rows_pad * k->k4 * 4);
    return 1;
}

static int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

/* Weights, bias and multipliers in the kernel's layout. */
static void pack_constants(lib_kernel *k, const ir_node *n, ir_tensor *const *in) {
    const int8_t *w = in[W]->data;
    const ir_tensor *bias = n->nin > B ? in[B] : NULL;
    float xs = quant_float_at(in[XS], 0), ys = quant_float_at(in[YS], 0);
    bool per = ir_numel(in[WS]) > 1;
    int32_t xzpu = k->xzp + (k->x_signed ? 128 : 0);
    for (int64_t r = 0; r < k->rows_pad; r++) {
        bool real = r < k->m;
        int64_t rowsum = 0;
        if (!k->depthwise) {
            int8_t *dst = k->w + r * k->k4 * 4;
            for (int64_t i = 0; i < k->k4 * 4; i++) {
                dst[i] = real && i < k->k ? w[r * k->k + i] : 0;
                rowsum += dst[i];
            }
        }
        int32_t bv = real && bias ? quant_int_at(bias, r) : 0;
        k->bias[r] = k->depthwise ? bv : (int32_t)(bv - (int64_t)xzpu * rowsum);
        /* the reference kernel's expression, so the products round alike */
        k->mult[r] = real ? xs * quant_float_at(in[WS], per ? r : 0) / ys : 0.0f;
    }
    if (k->depthwise) memcpy(k->w, w, (size_t)(k->m * k->k));
}

static wpk_status create(const kernel_provider *self, wpk_context *ctx, const ir_node *n,
                         ir_tensor *const *in, ir_tensor *const *out, int config,
                         const kernel_device *dev, lib_kernel **out_k) {
    *out_k = NULL;
    if (dev->cuda) return lib_host_only(ctx, self, n);
    lib_kernel *k = wpk_calloc(1, sizeof *k);
    if (!k) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory creating an int8 kernel");
    int64_t group;
    wpk_status st = check(ctx, n, in, out, &k->g, &group, &k->m);
    if (!st && config != 0)
        st = wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s': the int8 provider has one config "
                       "(0), not %d", n->name, config);
    if (st) {
        destroy(self, k);
        return st;
    }
    snprintf(k->name, sizeof k->name, "%s", n->name);
    const sp_geom *g = &k->g;
    k->batch = in[X]->dims[0];
    k->c = in[X]->dims[1];
    k->depthwise = group != 1;
    k->k = in[W]->dims[1] * g->kernel[0] * g->kernel[1];
    k->k4 = (k->k + 3) / 4;
    k->plane_in = g->in[0] * g->in[1];
    k->plane_out = g->out[0] * g->out[1];
    k->direct = g->kernel[0] == 1 && g->kernel[1] == 1 && g->stride[0] == 1 &&
                g->stride[1] == 1 && !g->pad0[0] && !g->pad0[1];
    k->x_signed = in[X]->dtype == WPK_DTYPE_INT8;
    k->y_signed = out[0]->dtype == WPK_DTYPE_INT8;
    k->xzp = quant_int_at(in[XZP], 0);
    k->yzp = quant_int_at(in[YZP], 0);
    k->lo = k->y_signed ? -128 : 0;
    k->hi = k->y_signed ? 127 : 255;
    bool relu = n->op == IR_OP_QLINEAR_CONV_WPK &&
                !strcmp(ir_attr_str(n, "activation", ""), "Relu");
    if (relu && k->yzp > k->lo) k->lo = k->yzp;
    k->threads = dev->threads > 0 ? dev->threads : 1;
    k->rows_pad = k->depthwise ? k->m : round_up(k->m, QGEMM_MR);
    k->blocks = (k->plane_out + QGEMM_LANES - 1) / QGEMM_LANES;
    qdw_channel geometry = {.ih = g->in[0], .iw = g->in[1], .oh = g->out[0], .ow = g->out[1],
                            .kh = g->kernel[0], .kw = g->kernel[1], .sh = g->stride[0],
                            .sw = g->stride[1], .dh = g->dil[0], .dw = g->dil[1],
                            .pad_top = g->pad0[0], .pad_left = g->pad0[1]};
    k->pad_bytes = qdw_scratch_bytes(&geometry);
    bool nomem = !(k->bias = wpk_malloc(sizeof(int32_t) * (size_t)k->rows_pad)) ||
                 !(k->mult = wpk_malloc(sizeof(float) * (size_t)k->rows_pad));
    k->stem = !k->depthwise && qstem_takes(g, k->c);
    if (k->stem) {
        k->stem_bytes = qstem_scratch_bytes(k->k);
        nomem = nomem || !(k->w = wpk_malloc((size_t)(k->rows_pad * k->k4 * 4))) ||
                !(k->packed = wpk_malloc(k->stem_bytes * (size_t)k->threads));
    } else if (k->depthwise) {
        nomem = nomem || !(k->w = wpk_malloc((size_t)(k->m * k->k))) ||
                !(k->pad = wpk_malloc(k->pad_bytes * (size_t)k->threads));
    } else {
        nomem = nomem || !(k->w = wpk_malloc((size_t)(k->rows_pad * k->k4 * 4))) ||
                !(k->packed = wpk_malloc((size_t)(k->blocks * k->k4 * 64))) ||
                (!k->direct && !(k->col = wpk_malloc((size_t)(k->k * k->plane_out))));
    }
    if (nomem) {
        destroy(self, k);
        return wpk_error(ctx, WPK_ERR_NOMEM, "node '%s' (%s): out of memory creating an int8 "
                         "kernel", n->name, n->op_type);
    }
    pack_constants(k, n, in);
    *out_k = k;
    return WPK_OK;
}

/* ---- run ---- */

/* Row r of the im2col matrix of image xb: the input pixel under tap (c, i, j) for every
 * output position, x's zero point (the real 0) where the tap falls in the padding. */
static void im2col_row(const lib_kernel *k, const uint8_t *xb, int64_t r, uint8_t *dst) {
    const sp_geom *g = &k->g;
    int64_t kh = g->kernel[0], kw = g->kernel[1];
    int64_t c = r / (kh * kw), i = r / kw % kh, j = r % kw;
    const uint8_t *src = xb + c * k->plane_in;
    uint8_t pad = (uint8_t)k->xzp;
    for (int64_t oh = 0; oh < g->out[0]; oh++) {
        int64_t ih = oh * g->stride[0] + i * g->dil[0] - g->pad0[0];
        uint8_t *d = dst + oh * g->out[1];
        if (ih < 0 || ih >= g->in[0]) {
            memset(d, pad, (size_t)g->out[1]);
            continue;
        }
        const uint8_t *s = src + ih * g->in[1];
        int64_t w0, w1, off = j * g->dil[1] - g->pad0[1];
        sp_tap_range(g->out[1], g->stride[1], off, g->in[1], &w0, &w1);
        if (w0 > 0) memset(d, pad, (size_t)w0);
        if (g->stride[1] == 1)
            memcpy(d + w0, s + w0 + off, (size_t)(w1 - w0));
        else
            for (int64_t ow = w0; ow < w1; ow++) d[ow] = s[ow * g->stride[1] + off];
        if (w1 < g->out[1]) memset(d + w1, pad, (size_t)(g->out[1] - w1));
    }
}

/* Column block b of the GEMM's right operand, from the rows (im2col's, or x's planes). */
static void pack_block(const lib_kernel *k, const uint8_t *rows, int64_t b) {
    static const uint8_t zeros[QGEMM_LANES];
    uint8_t *out = k->packed + b * k->k4 * 64;
    int64_t col = b * QGEMM_LANES, n = k->plane_out - col;
    uint8_t tail[4][QGEMM_LANES];
    uint8_t flip = k->x_signed ? 0x80 : 0;
    for (int64_t kg = 0; kg < k->k4; kg++) {
        const uint8_t *r[4];
        for (int t = 0; t < 4; t++) {
            int64_t row = kg * 4 + t;
            if (row >= k->k || n <= 0) {
                r[t] = zeros; /* its weights are 0 / its columns are not stored */
            } else if (n >= QGEMM_LANES) {
                r[t] = rows + row * k->plane_out + col;
            } else {
                memset(tail[t], 0, sizeof tail[t]);
                memcpy(tail[t], rows + row * k->plane_out + col, (size_t)n);
                r[t] = tail[t];
            }
        }
        qgemm_pack_group(out + kg * 64, r, flip);
    }
}

/* [*lo, *hi): part t of nt of count items. */
static void share(int64_t count, int t, int nt, int64_t *lo, int64_t *hi) {
    *lo = count * t / nt;
    *hi = count * (t + 1) / nt;
}

/* Thread t's part (of nt) of one image: gathering, packing, then the GEMM's output tiles, with
 * a barrier between the steps when the team has more than one thread. */
static void gemm_image(const lib_kernel *k, const uint8_t *xb, uint8_t *yb, int t, int nt) {
    if (k->stem) { /* few input channels: qstem.h */
        qgemm_args s = {.w = k->w, .k4 = k->k4, .m = k->m, .bias = k->bias, .mult = k->mult,
                        .yzp = k->yzp, .lo = k->lo, .hi = k->hi, .y_signed = k->y_signed};
        qstem_image(&k->g, k->c, xb, (uint8_t)k->xzp, k->x_signed ? 0x80 : 0, &s, k->rows_pad,
                    yb, k->packed + (size_t)t * k->stem_bytes, t, nt);
        return;
    }
    int64_t lo, hi;
    const uint8_t *rows = k->direct ? xb : k->col;
    if (!k->direct) {
        share(k->k, t, nt, &lo, &hi);
        for (int64_t r = lo; r < hi; r++) im2col_row(k, xb, r, k->col + r * k->plane_out);
        if (nt > 1) {
#pragma omp barrier
        }
    }
    share(k->blocks, t, nt, &lo, &hi);
    for (int64_t b = lo; b < hi; b++) pack_block(k, rows, b);
    if (nt > 1) {
#pragma omp barrier
    }
    qgemm_args a = {.w = k->w, .a = k->packed, .k4 = k->k4, .m = k->m, .p = k->plane_out,
                    .ldy = k->plane_out, .bias = k->bias, .mult = k->mult, .yzp = k->yzp,
                    .lo = k->lo, .hi = k->hi, .y_signed = k->y_signed, .y = yb};
    /* Tiles in column-tile-major order; a tile's work is its blocks (the last column tile may
     * be 1 or 2 blocks), and a thread takes the tiles whose first block-row falls in its share
     * of all rows x blocks, so that narrow tiles do not leave one thread the heavier half. */
    const int64_t tiles_r = k->rows_pad / QGEMM_MR;
    share(tiles_r * k->blocks, t, nt, &lo, &hi);
    for (int64_t b0 = 0; b0 < k->blocks; b0 += QGEMM_NB) {
        int64_t nb = k->blocks - b0 < QGEMM_NB ? k->blocks - b0 : QGEMM_NB;
        for (int64_t tr = 0; tr < tiles_r; tr++) {
            int64_t start = b0 * tiles_r + tr * nb;
            if (start >= lo && start < hi)
                qgemm_run(&a, tr * QGEMM_MR, (tr + 1) * QGEMM_MR, b0, b0 + nb);
        }
    }
}

/* One parallel region per image (none on one thread: libgomp allocates a team for a region
 * even when it runs on one thread, and a run allocates nothing). */
static void run_gemm(const lib_kernel *k, const uint8_t *x, uint8_t *y) {
    for (int64_t img = 0; img < k->batch; img++) {
        const uint8_t *xb = x + img * k->c * k->plane_in;
        uint8_t *yb = y + img * k->m * k->plane_out;
        if (k->threads > 1) {
#pragma omp parallel num_threads(k->threads)
            gemm_image(k, xb, yb, omp_get_thread_num(), omp_get_num_threads());
        } else {
            gemm_image(k, xb, yb, 0, 1);
        }
    }
}

/* One depthwise output plane (qdepthwise.h), pad: this thread's scratch. */
static void depthwise_channel(const lib_kernel *k, const ir_tensor *x, uint8_t *y, int64_t img,
                              int64_t ch, uint8_t *pad) {
    const sp_geom *g = &k->g;
    qdw_channel c = {.x = (const uint8_t *)x->data + (img * k->c + ch) * k->plane_in,
                     .ih = g->in[0], .iw = g->in[1], .oh = g->out[0], .ow = g->out[1],
                     .kh = g->kernel[0], .kw = g->kernel[1], .sh = g->stride[0],
                     .sw = g->stride[1], .dh = g->dil[0], .dw = g->dil[1],
                     .pad_top = g->pad0[0], .pad_left = g->pad0[1], .w = k->w + ch * k->k,
                     .is_signed = k->x_signed, .xzp = k->xzp, .bias = k->bias[ch],
                     .yzp = k->yzp, .lo = k->lo, .hi = k->hi, .mult = k->mult[ch],
                     .y = y + (img * k->m + ch) * k->plane_out};
    qdw_run_channel(&c, pad);
}

static void run_depthwise(const lib_kernel *k, const ir_tensor *x, uint8_t *y) {
    int64_t total = k->batch * k->m;
    if (k->threads > 1) {
#pragma omp parallel num_threads(k->threads)
        {
            uint8_t *pad = k->pad + (size_t)omp_get_thread_num() * k->pad_bytes;
#pragma omp for schedule(static)
            for (int64_t t = 0; t < total; t++)
                depthwise_channel(k, x, y, t / k->m, t % k->m, pad);
        }
    } else {
        for (int64_t t = 0; t < total; t++) depthwise_channel(k, x, y, t / k->m, t % k->m, k->pad);
    }
}

static wpk_status run(const kernel_provider *self, wpk_context *ctx, lib_kernel *k,
                      ir_tensor *const *in, ir_tensor *const *out) {
    (void)self;
    if (!out || !out[0] || !out[0]->data || ir_numel(out[0]) != k->batch * k->m * k->plane_out)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "node '%s' (int8): the output is not the "
                         "one the kernel was created for", k->name);
    if (!in[X] || !in[X]->data || ir_numel(in[X]) != k->batch * k->c * k->plane_in)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "node '%s' (int8): input x is not the one "
                         "the kernel was created for", k->name);
    if (k->depthwise)
        run_depthwise(k, in[X], out[0]->data);
    else
        run_gemm(k, in[X]->data, out[0]->data);
    return WPK_OK;
}

const kernel_provider lib_int8 = {
    .name = "int8",
    .family = "int8",
    .describe = lib_describe,
    .space = lib_space,
    .default_config = lib_default_config,
    .legal = kernel_legal_in_space,
    .supports = supports,
    .configs = configs,
    .create = create,
    .run = run,
    .destroy = destroy,
    .constants = constants,
    .version = version,
};
