/* blocked.c -- ops on the blocked channel layout NCHW[x]c (ops/blocked.h): Reorder between NCHW
 * and blocked tensors, and ConvNCHWc, a 2-D Conv with FusedConv's epilogue (bias, residual Z,
 * activation) on blocked tensors with weights packed by the layout pass.
 *
 * ConvNCHWc computes one output row (image n, output block ob, row oh) at a time. Tiles of
 * TILE output pixels x bo lanes accumulate in local arrays the compiler keeps in vector
 * registers, while the kernel walks input blocks, taps and input lanes; each step multiplies one
 * broadcast input value by one bo-wide row of the packed weight, so the innermost loop runs over
 * the bo output lanes (`omp simd`) and every weight row loaded serves TILE pixels. Pixels whose
 * taps reach into the padding take a checked path; the interior runs without checks. The hot
 * function is compiled for AVX-512 and AVX2 as well as the baseline, and picked at load time,
 * since the library itself is built for the baseline ISA. */
#include "ops/blocked.h"

#include <omp.h>
#include <string.h>

#include "ops/activation.h"
#include "ops/op_util.h"
#include "ops/spatial.h"

#define MAX_BLOCK 16
/* Output pixels accumulated at once: TILE x 16 floats is 8 AVX-512 registers of 32. */
#define TILE 8
#define Z_INPUT 3

#define INLINE static inline __attribute__((always_inline))

#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define MULTI_ISA __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
#endif
#ifndef MULTI_ISA
#define MULTI_ISA
#endif

bool blocked_block_ok(int64_t x) { return x == 4 || x == 8 || x == 16; }

void blocked_weight_dims(int64_t cout, int64_t cin_group, int64_t kh, int64_t kw, int64_t bi,
                         int64_t bo, bool depthwise, int64_t dims[6]) {
    dims[0] = (cout + bo - 1) / bo;
    dims[1] = depthwise ? 1 : (cin_group + bi - 1) / bi;
    dims[2] = kh;
    dims[3] = kw;
    dims[4] = depthwise ? 1 : bi;
    dims[5] = bo;
}

void blocked_pack_weights(const float *w, int64_t cout, int64_t cin_group, int64_t kh,
                          int64_t kw, int64_t bi, int64_t bo, bool depthwise, float *out) {
    int64_t d[6];
    blocked_weight_dims(cout, cin_group, kh, kw, bi, bo, depthwise, d);
    const int64_t taps = kh * kw;
    for (int64_t ob = 0; ob < d[0]; ob++)
        for (int64_t kb = 0; kb < d[1]; kb++)
            for (int64_t k = 0; k < taps; k++)
                for (int64_t i = 0; i < d[4]; i++)
                    for (int64_t o = 0; o < bo; o++) {
                        int64_t oc = ob * bo + o, ic = kb * d[4] + i;
                        *out++ = oc < cout && ic < cin_group ? w[(oc * cin_group + ic) * taps + k]
                                                             : 0.0f;
                    }
}

/* An int attribute that must be present, in [lo, SP_ATTR_MAX]. */
static wpk_status attr_required_int(wpk_context *ctx, const ir_node *n, const char *name,
                                    int64_t lo, const char *what, int64_t *out) {
    const ir_attr *a = ir_attr_find(n, name);
    if (!a) return op_fail(ctx, n, "attribute '%s' (%s) is required", name, what);
    if (a->kind != IR_ATTR_INT) return op_fail(ctx, n, "attribute '%s' must be an int", name);
    if (a->i < lo || a->i > SP_ATTR_MAX)
        return op_fail(ctx, n, "attribute '%s' is %lld, out of range [%lld, %lld]", name,
                       (long long)a->i, (long long)lo, (long long)SP_ATTR_MAX);
    *out = a->i;
    return WPK_OK;
}

static wpk_status check_block(wpk_context *ctx, const ir_node *n, int64_t x, const char *what) {
    if (x < 0 || blocked_block_ok(x)) return WPK_OK;
    return op_unsupported(ctx, n, "%s is %lld lanes; blocks of 4, 8 or 16 are supported", what,
                          (long long)x);
}

static int64_t ceil_div(int64_t a, int64_t b) { return a < 0 ? -1 : (a + b - 1) / b; }

/* ---- Reorder ---- */

/* One Reorder node: n images of c channels (cb blocks of x lanes) over `size` spatial points. */
typedef struct reorder_geom {
    bool to_blocked;
    int64_t n, c, cb, x, size;
} reorder_geom;

/* Checks and the output shape (dims, *ndim); spatial sizes or C may be -1 (unknown). */
static wpk_status reorder_setup(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                reorder_geom *r, int64_t *dims, int *ndim) {
    wpk_status st;
    if ((st = op_need_input(ctx, n, in, 0, "X")) || (st = op_need_f32(ctx, n, in, 0))) return st;
    const ir_tensor *x = in[0];
    const char *to = ir_attr_str(n, "to", NULL);
    if (!to) return op_fail(ctx, n, "attribute 'to' (\"NCHWc\" or \"NCHW\") is required");
    if (strcmp(to, "NCHWc") && strcmp(to, "NCHW"))
        return op_fail(ctx, n, "attribute 'to' is '%s', expected \"NCHWc\" or \"NCHW\"", to);
    r->to_blocked = strcmp(to, "NCHWc") == 0;
    if ((st = attr_required_int(ctx, n, "block", 1, "lanes per channel block", &r->x)) ||
        (st = check_block(ctx, n, r->x, "attribute 'block'")))
        return st;
    r->n = x->dims[0];
    r->size = 1;
    if (r->to_blocked) {
        if (x->ndim < 3 || x->ndim + 1 > WPK_MAX_DIMS)
            return op_fail(ctx, n, "input X has %d dims; to NCHWc it needs 3 to %d (N, C, "
                           "spatial...)", x->ndim, WPK_MAX_DIMS - 1);
        r->c = x->dims[1];
        r->cb = ceil_div(r->c, r->x);
        for (int i = 2; i < x->ndim; i++) r->size *= x->dims[i];
        *ndim = x->ndim + 1;
        memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->ndim);
        dims[1] = r->cb;
        dims[x->ndim] = r->x;
    } else {
        if (x->ndim < 4)
            return op_fail(ctx, n, "input X has %d dims; from NCHWc it needs at least 4 (N, "
                           "C/x, spatial..., x)", x->ndim);
        if (x->dims[x->ndim - 1] != r->x)
            return op_fail(ctx, n, "input X has %lld lanes in its last dim but attribute 'block' "
                           "is %lld", (long long)x->dims[x->ndim - 1], (long long)r->x);
        r->cb = x->dims[1];
        r->c = r->cb * r->x;
        if (ir_attr_find(n, "channels")) {
            if ((st = attr_required_int(ctx, n, "channels", 1, "", &r->c))) return st;
            if (r->cb >= 0 && (r->c > r->cb * r->x || r->c <= (r->cb - 1) * r->x))
                return op_fail(ctx, n, "attribute 'channels' is %lld but X has %lld blocks of "
                               "%lld lanes", (long long)r->c, (long long)r->cb, (long long)r->x);
        } else if (r->cb < 0) {
            r->c = -1;
        }
        for (int i = 2; i < x->ndim - 1; i++) r->size *= x->dims[i];
        *ndim = x->ndim - 1;
        memcpy(dims, x->dims, sizeof(int64_t) * (size_t)(x->ndim - 1));
        dims[1] = r->c;
    }
    return WPK_OK;
}

wpk_status op_reorder_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                            ir_tensor *const *out) {
    reorder_geom r;
    int64_t dims[WPK_MAX_DIMS];
    int ndim;
    wpk_status st = reorder_setup(ctx, n, in, &r, dims, &ndim);
    if (st) return st;
    op_set_shape(out[0], WPK_DTYPE_FLOAT32, ndim, dims);
    return WPK_OK;
}

/* Spatial points moved per inner pass: the lanes of CHUNK points of one block (CHUNK x x
 * floats, 4 KiB at x = 16) stay in L1 while each channel's CHUNK contiguous values go by. */
#define CHUNK 64

/* Channel block t = (image, block) of r: x's planes into y's block (to NCHWc, zeros in the
 * padded lanes) or back. */
static void reorder_block(const reorder_geom *r, const float *xd, float *yd, int64_t t) {
    const int64_t x = r->x, size = r->size, c = r->c, cb = r->cb;
    const bool to_blocked = r->to_blocked;
    int64_t img = t / cb, blk = t % cb;
    int64_t lanes = c - blk * x < x ? c - blk * x : x;
    float *blocked = (float *)(to_blocked ? yd : xd) + t * size * x;
    for (int64_t s0 = 0; s0 < size; s0 += CHUNK) {
        int64_t len = size - s0 < CHUNK ? size - s0 : CHUNK;
        for (int64_t l = 0; l < lanes; l++) {
            int64_t plane = (img * c + blk * x + l) * size + s0;
            float *b = blocked + s0 * x + l;
            if (to_blocked) {
                const float *src = xd + plane;
                for (int64_t s = 0; s < len; s++) b[s * x] = src[s];
            } else {
                float *dst = yd + plane;
                for (int64_t s = 0; s < len; s++) dst[s] = b[s * x];
            }
        }
        if (to_blocked)
            for (int64_t l = lanes; l < x; l++)
                for (int64_t s = 0; s < len; s++) blocked[(s0 + s) * x + l] = 0.0f;
    }
}

wpk_status op_reorder_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                          ir_tensor *const *out) {
    reorder_geom r;
    int64_t dims[WPK_MAX_DIMS];
    int ndim;
    wpk_status st = reorder_setup(ctx, n, in, &r, dims, &ndim);
    if (st) return st;
    const float *xd = in[0]->data;
    float *yd = out[0]->data;
    const int64_t blocks = r.n * r.cb;
    if (op_parallel(blocks * r.size, 32768)) {
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < blocks; t++) reorder_block(&r, xd, yd, t);
    } else {
        for (int64_t t = 0; t < blocks; t++) reorder_block(&r, xd, yd, t);
    }
    return WPK_OK;
}

/* ---- ConvNCHWc ---- */

/* The geometry of one ConvNCHWc node; -1 for sizes unknown during static inference. */
typedef struct nchwc_geom {
    int64_t n, cxb, ih, iw, bi;   /* X: images, channel blocks (channels if bi = 1), plane, lanes */
    int64_t cob, ckb, kh, kw, bo; /* W: output blocks, input blocks per group, taps, lanes */
    int64_t oh, ow, sh, sw, dh, dw, ph, pw;
    int64_t group, channels;      /* channels: the output's real channel count */
    bool depthwise;
} nchwc_geom;

/* Checks X, W, B and the attributes; fills g. */
static wpk_status nchwc_setup(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                              nchwc_geom *g) {
    wpk_status st;
    if ((st = op_need_input(ctx, n, in, 0, "X")) || (st = op_need_input(ctx, n, in, 1, "W")) ||
        (st = op_need_f32(ctx, n, in, 0)) || (st = op_need_f32(ctx, n, in, 1)))
        return st;
    const ir_tensor *x = in[0], *w = in[1];
    if (x->ndim != 4 && x->ndim != 5)
        return op_fail(ctx, n, "input X has %d dims, expected 5 (N, C/x, H, W, x) or 4 (N, C, "
                       "H, W)", x->ndim);
    if (w->ndim != 6)
        return op_fail(ctx, n, "weight W has %d dims, expected 6 (packed as [Cout/x, Cin/x, "
                       "KH, KW, x, x])", w->ndim);
    for (int i = 0; i < 6; i++)
        if (w->dims[i] < 1)
            return op_fail(ctx, n, "weight W has size %lld in dim %d", (long long)w->dims[i], i);
    memset(g, 0, sizeof *g);
    g->n = x->dims[0];
    g->cxb = x->dims[1];
    g->ih = x->dims[2];
    g->iw = x->dims[3];
    g->bi = x->ndim == 5 ? x->dims[4] : 1;
    g->cob = w->dims[0];
    g->ckb = w->dims[1];
    g->kh = w->dims[2];
    g->kw = w->dims[3];
    g->bo = w->dims[5];
    if ((st = check_block(ctx, n, g->bo, "W's output block (its last dim)")) ||
        (x->ndim == 5 && (st = check_block(ctx, n, g->bi, "X's block (its last dim)"))))
        return st;
    int nk;
    const int64_t *ks = ir_attr_ints(n, "kernel_shape", &nk);
    if (ks && nk && (nk != 2 || ks[0] != g->kh || ks[1] != g->kw))
        return op_fail(ctx, n, "attribute 'kernel_shape' does not match W's %lld x %lld taps",
                       (long long)g->kh, (long long)g->kw);
    const char *auto_pad = ir_attr_str(n, "auto_pad", "NOTSET");
    if (auto_pad[0] && strcmp(auto_pad, "NOTSET"))
        return op_fail(ctx, n, "attribute 'auto_pad' is '%s'; ConvNCHWc takes explicit pads",
                       auto_pad);
    /* auto_pad is NOTSET by now; sp_read_attrs reads strides, dilations and pads */
    sp_geom sp = {.nsp = 2, .in = {g->ih, g->iw}, .kernel = {g->kh, g->kw}};
    sp_pad_mode mode;
    if ((st = sp_read_attrs(ctx, n, &sp, &mode)) ||
        (st = attr_required_int(ctx, n, "channels", 1, "the output's channel count",
                                &g->channels)))
        return st;
    g->sh = sp.stride[0], g->sw = sp.stride[1], g->dh = sp.dil[0], g->dw = sp.dil[1];
    g->ph = sp.pad0[0], g->pw = sp.pad0[1];
    g->group = ir_attr_int(n, "group", 1);
    if (g->group < 1 || g->group > SP_ATTR_MAX)
        return op_fail(ctx, n, "attribute 'group' is %lld, expected a positive count",
                       (long long)g->group);
    if (g->channels > g->cob * g->bo || g->channels <= (g->cob - 1) * g->bo)
        return op_fail(ctx, n, "attribute 'channels' is %lld but W has %lld output blocks of "
                       "%lld lanes", (long long)g->channels, (long long)g->cob, (long long)g->bo);
    int64_t wbi = w->dims[4];
    g->depthwise = g->group > 1 && wbi == 1 && g->bi > 1;
    if (g->depthwise) {
        if (g->ckb != 1 || g->bo != g->bi)
            return op_fail(ctx, n, "depthwise W must be [C/x, 1, KH, KW, 1, x] with X's block "
                           "%lld as x; it is [%lld, %lld, ..., 1, %lld]", (long long)g->bi,
                           (long long)g->cob, (long long)g->ckb, (long long)g->bo);
        if (g->cxb >= 0 && g->cxb != g->cob)
            return op_fail(ctx, n, "input X has %lld channel blocks but the depthwise W has "
                           "%lld", (long long)g->cxb, (long long)g->cob);
        if (g->group != g->channels)
            return op_fail(ctx, n, "a depthwise W needs attribute 'group' (%lld) equal to "
                           "'channels' (%lld)", (long long)g->group, (long long)g->channels);
    } else {
        if (g->bi >= 0 && wbi != g->bi)
            return op_fail(ctx, n, "weight W is packed for input blocks of %lld lanes but X has "
                           "%lld", (long long)wbi, (long long)g->bi);
        if (g->cob % g->group || (g->group > 1 && g->channels != g->cob * g->bo))
            return op_fail(ctx, n, "attribute 'group' (%lld) must split the %lld output "
                           "channels into whole blocks of %lld", (long long)g->group,
                           (long long)g->channels, (long long)g->bo);
        if (g->cxb >= 0 && g->cxb != g->ckb * g->group)
            return op_fail(ctx, n, "input X has %lld channel blocks but W expects %lld per group "
                           "x group %lld", (long long)g->cxb, (long long)g->ckb,
                           (long long)g->group);
    }
    if (n->nin > 2 && in[2]) {
        const ir_tensor *b = in[2];
        if ((st = op_need_f32(ctx, n, in, 2))) return st;
        if (b->ndim != 1 || b->dims[0] != g->channels)
            return op_fail(ctx, n, "bias B must be 1-D with %lld values (one per output "
                           "channel)", (long long)g->channels);
    }
    for (int i = 0; i < 2; i++)
        if (!sp_resolve(&sp, i, SP_PAD_NOTSET, false))
            return op_fail(ctx, n, "spatial dim %d: the kernel spans %lld (with dilation) but "
                           "the padded input is only %lld", i, (long long)sp_span(&sp, i),
                           (long long)(sp.in[i] + sp.pad0[i] + sp.pad1[i]));
    g->oh = sp.out[0];
    g->ow = sp.out[1];
    return WPK_OK;
}

wpk_status op_conv_nchwc_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                               ir_tensor *const *out) {
    nchwc_geom g;
    act_params act;
    wpk_status st = nchwc_setup(ctx, n, in, &g);
    if (!st) st = act_read(ctx, n, &act);
    if (st) return st;
    int64_t dims[5] = {g.n, g.cob, g.oh, g.ow, g.bo};
    if (n->nin > Z_INPUT + 1)
        return op_fail(ctx, n, "has %d inputs; at most %d are allowed", n->nin, Z_INPUT + 1);
    const ir_tensor *z = n->nin > Z_INPUT ? in[Z_INPUT] : NULL;
    if (z) {
        if ((st = op_need_f32(ctx, n, in, Z_INPUT))) return st;
        bool same = z->ndim == 5;
        for (int i = 0; same && i < 5; i++)
            same = z->dims[i] == dims[i] || z->dims[i] < 0 || dims[i] < 0;
        if (!same)
            return op_fail(ctx, n, "residual input Z must have the output's blocked shape "
                           "[%lld, %lld, %lld, %lld, %lld]", (long long)dims[0],
                           (long long)dims[1], (long long)dims[2], (long long)dims[3],
                           (long long)dims[4]);
    }
    op_set_shape(out[0], WPK_DTYPE_FLOAT32, 5, dims);
    return WPK_OK;
}

/* Everything one run needs, read-only, shared by the threads. */
typedef struct conv_job {
    nchwc_geom g;
    const float *x, *w, *b, *z;
    float *y;
    act_params act;
} conv_job;

/* The bias of output block ob: zero where there is none and in padded lanes. */
INLINE void block_bias(const conv_job *j, int64_t ob, float *bv, const int64_t B) {
    for (int64_t l = 0; l < B; l++) {
        int64_t oc = ob * B + l;
        bv[l] = j->b && oc < j->g.channels ? j->b[oc] : 0.0f;
    }
}

/* Regular conv, TILE consecutive output pixels from ow0 whose taps all lie inside the input
 * row (no checks). x: the group's first input block of this image; w: this output block's
 * weights; kh0..kh1: the kernel rows inside the input for this output row. */
INLINE void tile_regular(const conv_job *j, const float *x, const float *w, float *y,
                         int64_t oh, int64_t ow0, int64_t kh0, int64_t kh1, const float *bv,
                         const int64_t B) {
    const nchwc_geom *g = &j->g;
    const int64_t T = TILE, bi = g->bi, plane = g->ih * g->iw * bi, xstep = g->sw * bi;
    float acc[TILE * MAX_BLOCK];
    for (int64_t t = 0; t < T; t++)
        for (int64_t l = 0; l < B; l++) acc[t * B + l] = bv[l];
    for (int64_t kb = 0; kb < g->ckb; kb++) {
        for (int64_t kh = kh0; kh < kh1; kh++) {
            const float *xr = x + kb * plane + (oh * g->sh + kh * g->dh - g->ph) * g->iw * bi +
                              (ow0 * g->sw - g->pw) * bi;
            const float *wr = w + ((kb * g->kh + kh) * g->kw) * bi * B;
            for (int64_t kw = 0; kw < g->kw; kw++) {
                const float *xp = xr + kw * g->dw * bi;
                const float *wp = wr + kw * bi * B;
                for (int64_t i = 0; i < bi; i++) {
                    const float *restrict wv = wp + i * B;
#pragma GCC unroll 8
                    for (int64_t t = 0; t < T; t++) {
                        const float xv = xp[t * xstep + i];
#pragma omp simd
                        for (int64_t l = 0; l < B; l++) acc[t * B + l] += xv * wv[l];
                    }
                }
            }
        }
    }
    memcpy(y + ow0 * B, acc, sizeof(float) * (size_t)(T * B));
}

/* What a tap outside the input reads: as many zeros as a block has lanes. */
static const float zeros[MAX_BLOCK];

/* Per pixel t < count of a tile from ow0, the kernel columns [lo[t], hi[t]) that lie inside
 * the input row (empty for t >= count); [*a, *b): their union. */
INLINE void tile_columns(const nchwc_geom *g, int64_t ow0, int64_t count, int64_t *lo,
                         int64_t *hi, int64_t *a, int64_t *b) {
    *a = g->kw;
    *b = 0;
    for (int64_t t = 0; t < TILE; t++) {
        lo[t] = hi[t] = 0;
        if (t < count)
            sp_tap_range(g->kw, g->dw, (ow0 + t) * g->sw - g->pw, g->iw, &lo[t], &hi[t]);
        if (lo[t] < hi[t]) {
            if (lo[t] < *a) *a = lo[t];
            if (hi[t] > *b) *b = hi[t];
        }
    }
}

/* Regular conv, up to TILE output pixels from ow0 (count of them) whose taps may leave the
 * input row: each pixel takes only its columns inside (the padding border, narrow rows). */
INLINE void tile_regular_checked(const conv_job *j, const float *x, const float *w, float *y,
                                 int64_t oh, int64_t ow0, int64_t count, int64_t kh0,
                                 int64_t kh1, const float *bv, const int64_t B) {
    const nchwc_geom *g = &j->g;
    const int64_t bi = g->bi, plane = g->ih * g->iw * bi;
    int64_t lo[TILE], hi[TILE], kwa, kwb, col[TILE];
    tile_columns(g, ow0, count, lo, hi, &kwa, &kwb);
    for (int64_t t = 0; t < TILE; t++) col[t] = ((ow0 + t) * g->sw - g->pw) * bi;
    float acc[TILE * MAX_BLOCK];
    for (int64_t t = 0; t < TILE; t++)
        for (int64_t l = 0; l < B; l++) acc[t * B + l] = bv[l];
    for (int64_t kb = 0; kb < g->ckb; kb++)
        for (int64_t kh = kh0; kh < kh1; kh++) {
            const float *xr = x + kb * plane + (oh * g->sh + kh * g->dh - g->ph) * g->iw * bi;
            const float *wr = w + ((kb * g->kh + kh) * g->kw) * bi * B;
            for (int64_t kw = kwa; kw < kwb; kw++) {
                /* taps outside the row read zeros: no branch in the loop below */
                const float *xs[TILE];
                for (int64_t t = 0; t < TILE; t++)
                    xs[t] = kw >= lo[t] && kw < hi[t] ? xr + col[t] + kw * g->dw * bi : zeros;
                const float *wp = wr + kw * bi * B;
                for (int64_t i = 0; i < bi; i++) {
                    const float *restrict wv = wp + i * B;
#pragma GCC unroll 8
                    for (int64_t t = 0; t < TILE; t++) {
                        const float xv = xs[t][i];
#pragma omp simd
                        for (int64_t l = 0; l < B; l++) acc[t * B + l] += xv * wv[l];
                    }
                }
            }
        }
    memcpy(y + ow0 * B, acc, sizeof(float) * (size_t)(count * B));
}

/* Depthwise conv, T interior output pixels from ow0: lane l of the output block reads lane l
 * of the same input block, one weight per lane and tap. */
INLINE void tile_depthwise(const conv_job *j, const float *x, const float *w, float *y,
                           int64_t oh, int64_t ow0, int64_t kh0, int64_t kh1, const float *bv,
                           const int64_t T, const int64_t B) {
    const nchwc_geom *g = &j->g;
    const int64_t xstep = g->sw * B;
    float acc[TILE * MAX_BLOCK];
    for (int64_t t = 0; t < T; t++)
        for (int64_t l = 0; l < B; l++) acc[t * B + l] = bv[l];
    for (int64_t kh = kh0; kh < kh1; kh++) {
        const float *xr = x + (oh * g->sh + kh * g->dh - g->ph) * g->iw * B +
                          (ow0 * g->sw - g->pw) * B;
        for (int64_t kw = 0; kw < g->kw; kw++) {
            const float *xp = xr + kw * g->dw * B;
            const float *restrict wv = w + (kh * g->kw + kw) * B;
#pragma GCC unroll 8
            for (int64_t t = 0; t < T; t++) {
                const float *restrict xv = xp + t * xstep;
#pragma omp simd
                for (int64_t l = 0; l < B; l++) acc[t * B + l] += xv[l] * wv[l];
            }
        }
    }
    memcpy(y + ow0 * B, acc, sizeof(float) * (size_t)(T * B));
}

/* Depthwise conv, one output pixel whose taps may leave the input: only those inside count.
 * (Border pixels go one at a time here: with one multiply-add per load, a tile that reads
 * zeros for its missing taps, as the regular conv's does, would cost more than it saves.) */
INLINE void pixel_depthwise(const conv_job *j, const float *x, const float *w, float *y,
                            int64_t oh, int64_t ow, int64_t kh0, int64_t kh1, const float *bv,
                            const int64_t B) {
    const nchwc_geom *g = &j->g;
    const int64_t start = ow * g->sw - g->pw;
    int64_t kw0, kw1;
    sp_tap_range(g->kw, g->dw, start, g->iw, &kw0, &kw1);
    float acc[MAX_BLOCK];
    for (int64_t l = 0; l < B; l++) acc[l] = bv[l];
    for (int64_t kh = kh0; kh < kh1; kh++) {
        const float *xr = x + (oh * g->sh + kh * g->dh - g->ph) * g->iw * B;
        for (int64_t kw = kw0; kw < kw1; kw++) {
            const float *restrict xv = xr + (start + kw * g->dw) * B;
            const float *restrict wv = w + (kh * g->kw + kw) * B;
#pragma omp simd
            for (int64_t l = 0; l < B; l++) acc[l] += xv[l] * wv[l];
        }
    }
    memcpy(y + ow * B, acc, sizeof(float) * (size_t)B);
}

/* Residual, activation and the zero padding lanes of one finished output row. */
static void row_epilogue(const conv_job *j, float *restrict y, const float *restrict z,
                         int64_t ob, int64_t B) {
    const int64_t len = j->g.ow * B;
    if (z) {
#pragma omp simd
        for (int64_t i = 0; i < len; i++) y[i] += z[i];
    }
    act_apply(&j->act, y, len);
    int64_t valid = j->g.channels - ob * B;
    if (valid < B)
        for (int64_t p = 0; p < j->g.ow; p++)
            for (int64_t l = valid; l < B; l++) y[p * B + l] = 0.0f;
}

/* Output row r = (image, output block, oh) of the output, with B = g->bo lanes. */
INLINE void conv_row(const conv_job *j, int64_t r, const int64_t B) {
    const nchwc_geom *g = &j->g;
    const int64_t oh = r % g->oh, ob = (r / g->oh) % g->cob, img = r / (g->oh * g->cob);
    const int64_t plane = g->ih * g->iw * g->bi;
    float *y = j->y + r * g->ow * B;
    const float *x, *w;
    if (g->depthwise) {
        x = j->x + (img * g->cxb + ob) * plane;
        w = j->w + ob * g->kh * g->kw * B;
    } else {
        int64_t grp = ob / (g->cob / g->group);
        x = j->x + (img * g->cxb + grp * g->ckb) * plane;
        w = j->w + ob * g->ckb * g->kh * g->kw * g->bi * B;
    }
    float bv[MAX_BLOCK];
    block_bias(j, ob, bv, B);
    int64_t kh0, kh1;
    sp_tap_range(g->kh, g->dh, oh * g->sh - g->ph, g->ih, &kh0, &kh1);
    /* [lo, hi): the output pixels whose every kernel column lies inside the input row */
    int64_t lo = (g->pw + g->sw - 1) / g->sw, last = g->iw - 1 - (g->kw - 1) * g->dw + g->pw;
    int64_t hi = last < 0 ? 0 : last / g->sw + 1;
    if (lo > g->ow) lo = g->ow;
    if (hi > g->ow) hi = g->ow;
    if (hi < lo) hi = lo;
    /* regular: checked tiles over the left border, unchecked full tiles over the interior,
     * checked tiles (possibly short) for the rest; depthwise: see pixel_depthwise */
    int64_t o = 0, count;
    if (g->depthwise) {
        for (; o < lo; o++) pixel_depthwise(j, x, w, y, oh, o, kh0, kh1, bv, B);
        for (; o + TILE <= hi; o += TILE) tile_depthwise(j, x, w, y, oh, o, kh0, kh1, bv, TILE, B);
        for (; o + 4 <= hi; o += 4) tile_depthwise(j, x, w, y, oh, o, kh0, kh1, bv, 4, B);
        for (; o < hi; o++) tile_depthwise(j, x, w, y, oh, o, kh0, kh1, bv, 1, B);
        for (; o < g->ow; o++) pixel_depthwise(j, x, w, y, oh, o, kh0, kh1, bv, B);
    } else {
        for (; o < lo; o += count) {
            count = g->ow - o < TILE ? g->ow - o : TILE;
            tile_regular_checked(j, x, w, y, oh, o, count, kh0, kh1, bv, B);
        }
        for (; o + TILE <= hi; o += TILE) tile_regular(j, x, w, y, oh, o, kh0, kh1, bv, B);
        for (; o < g->ow; o += count) {
            count = g->ow - o < TILE ? g->ow - o : TILE;
            tile_regular_checked(j, x, w, y, oh, o, count, kh0, kh1, bv, B);
        }
    }
    row_epilogue(j, y, j->z ? j->z + r * g->ow * B : NULL, ob, B);
}

/* Output rows [r0, r1). The block size becomes a constant in each specialization, so the lane
 * loops have fixed trip counts and vectorize without remainders. */
MULTI_ISA static void conv_rows(const conv_job *j, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        switch (j->g.bo) {
        case 16: conv_row(j, r, 16); break;
        case 8: conv_row(j, r, 8); break;
        default: conv_row(j, r, 4); break;
        }
    }
}

wpk_status op_conv_nchwc_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             ir_tensor *const *out) {
    conv_job j;
    wpk_status st = nchwc_setup(ctx, n, in, &j.g);
    if (!st) st = act_read(ctx, n, &j.act);
    if (st) return st;
    j.x = in[0]->data;
    j.w = in[1]->data;
    j.b = n->nin > 2 && in[2] ? in[2]->data : NULL;
    j.z = n->nin > Z_INPUT && in[Z_INPUT] ? in[Z_INPUT]->data : NULL;
    j.y = out[0]->data;
    const int64_t rows = j.g.n * j.g.cob * j.g.oh;
    if (rows == 0 || j.g.ow == 0) return WPK_OK;
    /* Contiguous runs of rows per thread: neighbouring rows share input rows and weights. */
    if (op_parallel(rows, 2)) {
#pragma omp parallel
        {
            int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
            conv_rows(&j, rows * t / nt, rows * (t + 1) / nt);
        }
    } else {
        conv_rows(&j, 0, rows);
    }
    return WPK_OK;
}
