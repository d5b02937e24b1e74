/* qconv.c -- the int8 convolution provider ("int8"): QLinearConv and wpk::QLinearConv (2-D,
 * NCHW, constant weights, scales and zero points) on the provider interface of lib.h, its
 * weights packed when the kernel is made. One group: the convolution as a GEMM (qgemm.h) of
 * the s8 weights [M, C*KH*KW] with the u8 activations, read in place from a padded copy of x
 * with 4 channels interleaved per pixel (an implicit GEMM: no im2col), or where that would
 * compute too many dropped columns from an im2col matrix gathered 4 rows at a time; bias,
 * requantization and the activation's clamp run in the GEMM's epilogue. Small planes take the
 * GEMM with channels in the lanes (qgemm_lanes_run). Depthwise (one channel per group):
 * qdepthwise.h a channel at a time. Threads split the copy of x over channel quads (or the
 * gathering over column blocks), then the GEMM over output tiles, the depthwise convolution
 * over channels; a 1x1 stride-1 convolution on a large plane is split by columns instead,
 * each thread copying the pixels its own tiles read.
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
#include "ops/quant.h"

enum { X, XS, XZP, W, WS, WZP, YS, YZP, B };

struct lib_kernel {
    char name[64];
    sp_geom g;
    int64_t batch, c, m, k, k4, rows_pad, plane_in, plane_out, blocks;
    bool depthwise, implicit, lanes, own_columns, split_rows, x_signed, y_signed;
    int32_t xzp, yzp, lo, hi;
    int threads;
    int8_t *w;         /* GEMM: rows_pad x 4 k4 (lanes: qgemm_lanes_run's order); depthwise:
                        * m x taps */
    int32_t *bias;     /* GEMM: bias - (x zero point, as u8) x row sum; depthwise: bias */
    float *mult;       /* x_scale * w_scale[m] / y_scale */
    /* The GEMM's activations (qgemm_args): implicit, x copied into padded planes of xp_h x
     * xp_w pixels, 4 channels interleaved per pixel (a quad), one plane per quad, the
     * padding holding x's zero point; otherwise the im2col matrix, packed 4 rows a quad. */
    uint8_t *packed;   /* quads x quad_stride */
    int64_t *tap_off;  /* per kernel tap, its offset into a quad's plane (bytes) */
    int64_t taps, quads, quad_stride, cols, row_w, xp_h, xp_w, phase_size;
    uint64_t phases_read; /* implicit: bit a stride_w + b when a tap reads phase (a, b) */
    uint8_t *rows4;    /* per thread, 4 rows of span bytes: im2col's, or x's by column phase */
    int64_t span;
    uint8_t *zero_row; /* implicit: a plane of zeros, the channels past c of the last quad */
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
    wpk_free(k->rows4);
    wpk_free(k->tap_off);
    wpk_free(k->zero_row);
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

/* How the GEMM reads x. As an implicit GEMM over a padded copy of x, split into stride_h x
 * stride_w phases (phase (a, b) holds padded pixels (a + stride_h u, b + stride_w v); one
 * phase at stride 1): column p is output (p / xp_w, p % xp_w) with xp_w a phase's width,
 * whose window under tap (i, j) starts in phase (i dil_h % stride_h, j dil_w % stride_w) at
 * p + (i dil_h / stride_h) xp_w + j dil_w / stride_w, so no im2col is built; the columns past
 * the output width (xp_w - out_w per row) are computed and dropped. That waste is taken while
 * it costs at most 1/8 more column blocks than the im2col matrix (3x3 and 1x1, stride 1 or 2,
 * on 7x7 to 56x56 planes); else the im2col matrix is gathered and packed at every run. */
static void plan_gemm(lib_kernel *k) {
    const sp_geom *g = &k->g;
    int64_t kh = g->kernel[0], kw = g->kernel[1], sh = g->stride[0], sw = g->stride[1];
    int64_t gathered = (k->plane_out + QGEMM_LANES - 1) / QGEMM_LANES;
    k->xp_h = (g->in[0] + g->pad0[0] + g->pad1[0] + sh - 1) / sh;
    k->xp_w = (g->in[1] + g->pad0[1] + g->pad1[1] + sw - 1) / sw;
    int64_t implicit = (g->out[0] * k->xp_w + QGEMM_LANES - 1) / QGEMM_LANES;
    k->implicit = implicit * 8 <= gathered * 9 && sh * sw < 64;
    if (k->implicit) {
        k->taps = kh * kw;
        k->quads = (k->c + 3) / 4;
        k->blocks = implicit;
        k->cols = g->out[0] * k->xp_w;
        k->row_w = k->xp_w;
        int64_t reach = (kh - 1) * g->dil[0] / sh * k->xp_w + (kw - 1) * g->dil[1] / sw;
        int64_t plane = k->xp_h * k->xp_w, read = k->blocks * QGEMM_LANES + reach;
        k->phase_size = plane > read ? plane : read;
        k->quad_stride = 4 * sh * sw * k->phase_size;
        k->span = g->in[1]; /* a row's pixels of one column phase, per channel */
    } else {
        k->taps = 1;
        k->quads = k->k4;
        k->blocks = gathered;
        k->cols = k->plane_out;
        k->row_w = g->out[1];
        k->quad_stride = k->blocks * QGEMM_LANES * 4;
        k->span = k->blocks * QGEMM_LANES; /* a team smaller than asked gives a thread more */
    }
    k->k4 = k->taps * k->quads;
    /* Turned around (channels in lanes, positions broadcast: qgemm_lanes_run) when 16-column
     * blocks would compute more lanes per output than positions in tiles of 6 and rows in
     * blocks of 64 do, counting a last column tile of 1 or 2 blocks (fewer sums per load) as
     * 1.3 or 2.28 blocks and the turned tile's stores (a byte per row and position) as 100
     * more k's (both measured on 7x7 to 56x56 planes, K 256 to 4608): 7x7 planes with a
     * long K and 3x3 convs on 14x14 go turned, short K and larger planes do not. */
    double pos = (double)k->plane_out, m = (double)k->m, kk = (double)k->k4 * 4;
    int64_t rest = k->blocks % QGEMM_NB;
    double blocks = (double)(k->blocks - rest) + (rest == 1 ? 1.3 : rest == 2 ? 2.28 : 0.0);
    double per_out_blocks = blocks * QGEMM_LANES / pos * round_up(k->m, QGEMM_MR) / m;
    double per_out_lanes = round_up(k->plane_out, QGEMM_LANES_NP) / pos *
                           round_up(k->m, QGEMM_LANES_MR) / m;
    k->lanes = per_out_lanes * (kk + 100) < per_out_blocks * kk;
    if (k->lanes) k->rows_pad = round_up(k->m, QGEMM_LANES_MR);
    /* A 1x1 stride-1 convolution without padding reads column p of the GEMM at pixel p of each
     * quad, so a thread that takes whole column tiles can copy just their pixels and start on
     * them at once, with no barrier between copy and GEMM and the copy still in its own cache.
     * Whole tiles balance the threads only when there are many of them: at least 4 a thread
     * (a plane of 14x14 or more on 2 threads). */
    int64_t column_tiles = (k->blocks + QGEMM_NB - 1) / QGEMM_NB;
    k->own_columns = k->implicit && !k->lanes && kh == 1 && kw == 1 && sh == 1 && sw == 1 &&
                     k->xp_w == g->in[1] && k->xp_h == g->in[0] &&
                     column_tiles >= 4 * (int64_t)k->threads;
    /* Threads split the GEMM's rows where its weights (rows x K) outweigh its activations
     * (columns x K), else its columns (measured on resnet50 on 2 threads: a 1x1 256->1024
     * conv on 14x14 takes 0.069 ms split by rows, 0.092 by columns). */
    k->split_rows = k->rows_pad >= k->blocks * QGEMM_LANES;
    /* an odd number of cache lines between quads: a tile reads a piece of every quad, and an
     * even stride (a plane of 56x56 is 196 lines) would crowd them into a few L1 sets */
    int64_t lines = (k->quad_stride + 63) / 64;
    k->quad_stride = (lines | 1) * 64;
}

/* The tap offsets and, implicit, the padding of the planes: x's zero point as the GEMM
 * reads it (s8 turned u8), written once; a run writes only the inside of each plane. */
static void init_activations(lib_kernel *k) {
    const sp_geom *g = &k->g;
    if (!k->implicit) {
        k->tap_off[0] = 0;
        return;
    }
    int64_t sh = g->stride[0], sw = g->stride[1];
    for (int64_t i = 0; i < g->kernel[0]; i++)
        for (int64_t j = 0; j < g->kernel[1]; j++) {
            int64_t di = i * g->dil[0], dj = j * g->dil[1];
            int64_t phase = di % sh * sw + dj % sw;
            k->phases_read |= (uint64_t)1 << phase;
            k->tap_off[i * g->kernel[1] + j] =
                4 * (phase * k->phase_size + di / sh * k->xp_w + dj / sw);
        }
    uint8_t pad = (uint8_t)k->xzp ^ (k->x_signed ? 0x80 : 0);
    memset(k->packed, pad, (size_t)(k->quads * k->quad_stride));
}

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
            /* implicit: k-groups tap-major, 4 channels each; packed: im2col's row order.
             * Row-major, or for qgemm_lanes_run 64-row blocks with the rows inside a group */
            int64_t per_tap = k->k / k->taps, mb = r / QGEMM_LANES_MR, l = r % QGEMM_LANES_MR;
            for (int64_t i = 0; i < k->k4 * 4; i++) {
                int64_t tap = i / (k->quads * 4), ch = i % (k->quads * 4);
                int8_t v = real && ch < per_tap ? w[r * k->k + ch * k->taps + tap] : 0;
                int64_t at = k->lanes
                                 ? ((mb * k->k4 + i / 4) * QGEMM_LANES_MR + l) * 4 + i % 4
                                 : r * k->k4 * 4 + i;
                k->w[at] = v;
                rowsum += v;
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
    if (!k->depthwise) plan_gemm(k);
    qdw_channel geometry = {.ih = g->in[0], .iw = g->in[1], .oh = g->out[0], .ow = g->out[1],
                            .kh = g->kernel[0], .kw = g->kernel[1], .sh = g->stride[0],
                            .sw = g->stride[1], .dh = g->dil[0], .dw = g->dil[1],
                            .pad_top = g->pad0[0], .pad_left = g->pad0[1]};
    k->pad_bytes = qdw_scratch_bytes(&geometry);
    bool nomem = !(k->bias = wpk_malloc(sizeof(int32_t) * (size_t)k->rows_pad)) ||
                 !(k->mult = wpk_malloc(sizeof(float) * (size_t)k->rows_pad));
    if (k->depthwise) {
        nomem = nomem || !(k->w = wpk_malloc((size_t)(k->m * k->k))) ||
                !(k->pad = wpk_malloc(k->pad_bytes * (size_t)k->threads));
    } else {
        nomem = nomem || !(k->w = wpk_malloc((size_t)(k->rows_pad * k->k4 * 4))) ||
                !(k->packed = wpk_malloc((size_t)(k->quads * k->quad_stride))) ||
                !(k->tap_off = wpk_malloc(sizeof(int64_t) * (size_t)k->taps)) ||
                (k->implicit && !(k->zero_row = wpk_calloc((size_t)k->plane_in, 1))) ||
                !(k->rows4 = wpk_malloc((size_t)(4 * k->span * k->threads)));
    }
    if (nomem) {
        destroy(self, k);
        return wpk_error(ctx, WPK_ERR_NOMEM, "node '%s' (%s): out of memory creating an int8 "
                         "kernel", n->name, n->op_type);
    }
    pack_constants(k, n, in);
    if (!k->depthwise) init_activations(k);
    *out_k = k;
    return WPK_OK;
}

/* ---- run ---- */

/* Columns [c0, c1) of row r of the im2col matrix of image xb, at dst[0...]: the input pixel
 * under tap (c, i, j) for each output position, x's zero point (the real 0) where the tap
 * falls in the padding. */
static void im2col_part(const lib_kernel *k, const uint8_t *xb, int64_t r, int64_t c0,
                        int64_t c1, uint8_t *dst) {
    const sp_geom *g = &k->g;
    int64_t kh = g->kernel[0], kw = g->kernel[1], ow_n = g->out[1];
    int64_t c = r / (kh * kw), i = r / kw % kh, j = r % kw;
    const uint8_t *src = xb + c * k->plane_in;
    uint8_t pad = (uint8_t)k->xzp;
    int64_t w0, w1, off = j * g->dil[1] - g->pad0[1], sw = g->stride[1];
    sp_tap_range(ow_n, sw, off, g->in[1], &w0, &w1);
    for (int64_t oh = c0 / ow_n; oh * ow_n < c1; oh++) {
        /* this output row's part of [c0, c1), as [a, b) within the row */
        int64_t a = c0 - oh * ow_n > 0 ? c0 - oh * ow_n : 0;
        int64_t b = c1 - oh * ow_n < ow_n ? c1 - oh * ow_n : ow_n;
        uint8_t *d = dst + oh * ow_n - c0;
        int64_t ih = oh * g->stride[0] + i * g->dil[0] - g->pad0[0];
        if (ih < 0 || ih >= g->in[0]) {
            memset(d + a, pad, (size_t)(b - a));
            continue;
        }
        const uint8_t *s = src + ih * g->in[1] + off;
        int64_t va = a > w0 ? a : w0, vb = b < w1 ? b : w1;
        if (va >= vb) {
            memset(d + a, pad, (size_t)(b - a));
            continue;
        }
        if (va > a) memset(d + a, pad, (size_t)(va - a));
        if (sw == 1)
            memcpy(d + va, s + va, (size_t)(vb - va));
        else
            for (int64_t ow = va; ow < vb; ow++) d[ow] = s[ow * sw];
        if (vb < b) memset(d + vb, pad, (size_t)(b - vb));
    }
}

/* A row of 4 channels at column stride 2 into its column phases: pixel w lands in phase
 * (w + pad) % 2 at (w + pad) / 2, so the even ones go to phase pad % 2. read: the phases a tap
 * reads (bit b: phase b); the odd pixels are not written when only the even ones' is read. */
static void interleave_pairs(const lib_kernel *k, uint8_t *row, const uint8_t *const r[4],
                             int64_t w_n, uint8_t flip, unsigned read) {
    int64_t pl = k->g.pad0[1];
    uint8_t *even = row + (pl % 2 * k->phase_size + pl / 2) * 4;
    uint8_t *odd = row + ((pl + 1) % 2 * k->phase_size + (pl + 1) / 2) * 4;
    qgemm_interleave_pairs(even, read >> ((pl + 1) % 2) & 1 ? odd : NULL, r, w_n, flip);
}

/* Quad q of image xb into the inside of its padded phases: channels 4q..4q+3 interleaved per
 * pixel (channels past c read as 0: their weights are 0). At stride 1 without left and right
 * padding the rows are one run; at a column stride above 1 each row is split by column phase
 * through rows4 (4 x span bytes). */
static void interleave_quad(const lib_kernel *k, const uint8_t *xb, int64_t q, uint8_t *rows4) {
    const sp_geom *g = &k->g;
    int64_t sh = g->stride[0], sw = g->stride[1];
    bool one_run = sh == 1 && sw == 1 && k->xp_w == g->in[1];
    int64_t rows = one_run ? 1 : g->in[0], w_n = one_run ? k->plane_in : g->in[1];
    uint8_t flip = k->x_signed ? 0x80 : 0;
    const uint8_t *plane[4];
    for (int t = 0; t < 4; t++)
        plane[t] = q * 4 + t < k->c ? xb + (q * 4 + t) * k->plane_in : NULL;
    uint8_t *base = k->packed + q * k->quad_stride;
    for (int64_t h = 0; h < rows; h++) {
        const uint8_t *r[4];
        for (int t = 0; t < 4; t++) r[t] = plane[t] ? plane[t] + h * w_n : k->zero_row;
        int64_t hp = h + g->pad0[0];
        if (!(k->phases_read >> (hp % sh * sw) & (((uint64_t)1 << sw) - 1)))
            continue; /* no tap reads this row (a 1x1 stride-2 conv reads every other one) */
        uint8_t *row = base + (hp % sh * sw * k->phase_size + hp / sh * k->xp_w) * 4;
        if (sw == 1) {
            qgemm_interleave(row + g->pad0[1] * 4, r, w_n, flip);
            continue;
        }
        unsigned read = (unsigned)(k->phases_read >> (hp % sh * sw) & 3);
        if (sw == 2 && (read == 3 || read >> (g->pad0[1] % 2) & 1)) {
            interleave_pairs(k, row, r, w_n, flip, read);
            continue;
        }
        for (int64_t pw = 0; pw < sw; pw++) {
            /* the pixels w with (w + pad) % sw == pw, at v = (w + pad) / sw of phase pw */
            int64_t w0 = ((pw - g->pad0[1]) % sw + sw) % sw;
            if (w0 >= w_n || !(k->phases_read >> (hp % sh * sw + pw) & 1)) continue;
            int64_t n = (w_n - w0 + sw - 1) / sw;
            const uint8_t *split[4];
            for (int t = 0; t < 4; t++) {
                uint8_t *d = rows4 + t * k->span;
                const uint8_t *src = r[t] + w0;
                if (sw == 2) /* a constant stride, which the compiler vectorizes */
                    for (int64_t i = 0; i < n; i++) d[i] = src[2 * i];
                else
                    for (int64_t i = 0; i < n; i++) d[i] = src[i * sw];
                split[t] = d;
            }
            qgemm_interleave(row + (pw * k->phase_size + (w0 + g->pad0[1]) / sw) * 4, split, n,
                           flip);
        }
    }
}

/* Pixels [p0, p1) (cut at the plane) of every quad of image xb, interleaved, for a 1x1
 * stride-1 convolution without padding (own_columns): pixel p at 4 p of its quad. */
static void copy_columns(const lib_kernel *k, const uint8_t *xb, int64_t p0, int64_t p1) {
    if (p1 > k->plane_in) p1 = k->plane_in;
    uint8_t flip = k->x_signed ? 0x80 : 0;
    for (int64_t q = 0; q < k->quads; q++) {
        const uint8_t *r[4];
        for (int t = 0; t < 4; t++)
            r[t] = (q * 4 + t < k->c ? xb + (q * 4 + t) * k->plane_in : k->zero_row) + p0;
        qgemm_interleave(k->packed + q * k->quad_stride + p0 * 4, r, p1 - p0, flip);
    }
}

/* Column blocks [b0, b1) of the GEMM's right operand, gathered from image xb 4 im2col rows at
 * a time into rows4 (4 x span bytes, small enough to stay in L1) and packed from there, so the
 * im2col matrix never goes through memory as a whole. */
static void pack_blocks_gathered(const lib_kernel *k, const uint8_t *xb, int64_t b0, int64_t b1,
                                 uint8_t *rows4) {
    int64_t c0 = b0 * QGEMM_LANES, c1 = b1 * QGEMM_LANES;
    if (c1 > k->plane_out) c1 = k->plane_out;
    uint8_t flip = k->x_signed ? 0x80 : 0;
    /* the columns past the plane are packed but never stored: 0 keeps them defined */
    for (int t = 0; t < 4; t++)
        memset(rows4 + t * k->span + (c1 - c0), 0, (size_t)((b1 - b0) * QGEMM_LANES - (c1 - c0)));
    for (int64_t kg = 0; kg < k->k4; kg++) {
        const uint8_t *r[4];
        for (int t = 0; t < 4; t++) {
            int64_t row = kg * 4 + t;
            uint8_t *dst = rows4 + t * k->span;
            if (row < k->k)
                im2col_part(k, xb, row, c0, c1, dst);
            else
                memset(dst, 0, (size_t)(c1 - c0)); /* its weights are 0 */
            r[t] = dst;
        }
        for (int64_t b = b0; b < b1; b++) {
            qgemm_pack_group(k->packed + kg * k->quad_stride + b * 64, r, flip);
            for (int t = 0; t < 4; t++) r[t] += QGEMM_LANES;
        }
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
    int64_t lo, hi;
    qgemm_args a = {.w = k->w, .a = k->packed, .tap_off = k->tap_off, .taps = k->taps,
                    .quads = k->quads, .quad_stride = k->quad_stride, .m = k->m,
                    .cols = k->cols, .row_w = k->row_w, .out_w = k->g.out[1],
                    .ldy = k->plane_out, .bias = k->bias, .mult = k->mult, .yzp = k->yzp,
                    .lo = k->lo, .hi = k->hi, .y_signed = k->y_signed, .y = yb};
    if (k->own_columns) {
        share((k->blocks + QGEMM_NB - 1) / QGEMM_NB, t, nt, &lo, &hi);
        int64_t b0 = lo * QGEMM_NB, b1 = hi * QGEMM_NB < k->blocks ? hi * QGEMM_NB : k->blocks;
        if (b0 < b1) {
            copy_columns(k, xb, b0 * QGEMM_LANES, b1 * QGEMM_LANES);
            qgemm_run(&a, 0, k->rows_pad, b0, b1);
        }
        return;
    }
    if (k->implicit) {
        share(k->quads, t, nt, &lo, &hi);
        for (int64_t q = lo; q < hi; q++) interleave_quad(k, xb, q, k->rows4 + 4 * k->span * t);
    } else {
        share(k->blocks, t, nt, &lo, &hi);
        if (lo < hi) pack_blocks_gathered(k, xb, lo, hi, k->rows4 + 4 * k->span * t);
    }
    if (nt > 1) {
#pragma omp barrier
    }
    if (k->lanes) {
        /* tiles of 64 rows x 6 positions, rows-major: a thread's tiles share weights */
        int64_t pos = k->plane_out, ptiles = (pos + QGEMM_LANES_NP - 1) / QGEMM_LANES_NP;
        share(k->rows_pad / QGEMM_LANES_MR * ptiles, t, nt, &lo, &hi);
        for (int64_t u = lo; u < hi; u++) {
            int64_t j0 = u % ptiles * QGEMM_LANES_NP;
            qgemm_lanes_run(&a, u / ptiles, j0, j0 + QGEMM_LANES_NP < pos ? j0 + QGEMM_LANES_NP
                                                                         : pos);
        }
        return;
    }
    /* A tile's work is its blocks (the last column tile may be 1 or 2 blocks); a thread takes
     * the tiles whose first block falls in its share of all rows x blocks, so that narrow
     * tiles do not leave one thread the heavier half. The blocks are counted row by row
     * (split_rows) or column tile by column tile, so that the threads split the larger of the
     * two operands and each reads only its part of it. Each thread walks its tiles column
     * tile by column tile, the tile's activations staying in cache across its rows. */
    const int64_t tiles_r = k->rows_pad / QGEMM_MR;
    share(tiles_r * k->blocks, t, nt, &lo, &hi);
    for (int64_t b0 = 0; b0 < k->blocks; b0 += QGEMM_NB) {
        int64_t nb = k->blocks - b0 < QGEMM_NB ? k->blocks - b0 : QGEMM_NB;
        for (int64_t tr = 0; tr < tiles_r; tr++) {
            int64_t start = k->split_rows ? tr * k->blocks + b0 : b0 * tiles_r + tr * nb;
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
