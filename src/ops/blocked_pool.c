/* blocked_pool.c -- MaxPoolNCHWc and AveragePoolNCHWc: 2-D MaxPool and AveragePool on blocked
 * tensors [N, C/x, H, W, x] (ops/blocked.h), with the ONNX ops' attributes and semantics
 * (explicit pads, auto_pad, ceil_mode, dilations, count_include_pad), so the layout pass keeps
 * pooling in the blocked layout. One output pixel is a window over x-lane vectors: the lane
 * loop vectorizes, where the NCHW kernel walks one channel's window at a time.
 *
 * The attributes and the output size and padding rules are ops/spatial.h's, shared with
 * ops/pool.c: ceil_mode's extra windows reach past the end padding and see neither input nor
 * padding there, and a last window that would start inside the end padding is dropped. */
#include <math.h>
#include <string.h>

#include "ops/blocked.h"
#include "ops/op_util.h"
#include "ops/spatial.h"

#define MAX_BLOCK 16

/* One spatial dim: input, window, stride, dilation, begin/end pads in effect, output. */
typedef struct pool_dim {
    int64_t in, k, s, d, pad0, pad1, out;
} pool_dim;

typedef struct pool_geom {
    int64_t n, cb, x;
    pool_dim h, w;
    bool is_max, include_pad;
} pool_geom;

static wpk_status pool_setup(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             pool_geom *g) {
    wpk_status st;
    if ((st = op_need_input(ctx, n, in, 0, "X")) || (st = op_need_f32(ctx, n, in, 0))) return st;
    const ir_tensor *x = in[0];
    if (x->ndim != 5)
        return op_fail(ctx, n, "input X has %d dims, expected 5 (N, C/x, H, W, x)", x->ndim);
    memset(g, 0, sizeof *g);
    g->is_max = n->op == IR_OP_MAX_POOL_NCHWC;
    g->n = x->dims[0];
    g->cb = x->dims[1];
    g->x = x->dims[4];
    if (!blocked_block_ok(g->x))
        return op_unsupported(ctx, n, "X's block (its last dim) is %lld lanes; blocks of 4, 8 or "
                              "16 are supported", (long long)g->x);
    const ir_attr *ks = ir_attr_find(n, "kernel_shape");
    if (!ks || ks->kind != IR_ATTR_INTS || ks->n == 0)
        return op_fail(ctx, n, "attribute 'kernel_shape' is required");
    sp_geom sp = {.nsp = 2, .in = {x->dims[2], x->dims[3]}};
    sp_pad_mode mode = SP_PAD_NOTSET;
    bool ceil_mode = false;
    if ((st = sp_attr_ints(ctx, n, "kernel_shape", 2, 1, 1, sp.kernel)) ||
        (st = sp_read_attrs(ctx, n, &sp, &mode)) ||
        (st = op_attr_flag(ctx, n, "ceil_mode", &ceil_mode)) ||
        (st = op_attr_flag(ctx, n, "count_include_pad", &g->include_pad)))
        return st;
    if (g->is_max && g->include_pad)
        return op_fail(ctx, n, "attribute 'count_include_pad' belongs to AveragePoolNCHWc");
    pool_dim *dims[2] = {&g->h, &g->w};
    for (int i = 0; i < 2; i++) {
        int64_t span = sp_span(&sp, i);
        if (mode == SP_PAD_NOTSET && (sp.pad0[i] >= span || sp.pad1[i] >= span))
            return op_fail(ctx, n, "attribute 'pads' in spatial dim %d (%lld, %lld) must be "
                           "smaller than the window (%lld)", i, (long long)sp.pad0[i],
                           (long long)sp.pad1[i], (long long)span);
        if (!sp_resolve(&sp, i, mode, ceil_mode))
            return op_fail(ctx, n, "attribute 'kernel_shape': the window spans %lld in spatial "
                           "dim %d but the padded input is only %lld", (long long)span, i,
                           (long long)(sp.in[i] + sp.pad0[i] + sp.pad1[i]));
        *dims[i] = (pool_dim){.in = sp.in[i], .k = sp.kernel[i], .s = sp.stride[i],
                              .d = sp.dil[i], .pad0 = sp.pad0[i], .pad1 = sp.pad1[i],
                              .out = sp.out[i]};
    }
    return WPK_OK;
}

wpk_status op_pool_nchwc_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                               ir_tensor *const *out) {
    pool_geom g;
    wpk_status st = pool_setup(ctx, n, in, &g);
    if (st) return st;
    int64_t dims[5] = {g.n, g.cb, g.h.out, g.w.out, g.x};
    op_set_shape(out[0], WPK_DTYPE_FLOAT32, 5, dims);
    return WPK_OK;
}

/* [*lo, *hi): the taps j in [0, count) with start + j*step inside [from, to). */
static inline void taps(int64_t count, int64_t start, int64_t step, int64_t from, int64_t to,
                        int64_t *lo, int64_t *hi) {
    sp_tap_range(count, step, start - from, to - from, lo, hi);
}

/* One output row (image and block in x, row oh) of B lanes. */
static inline __attribute__((always_inline)) void pool_row(const pool_geom *g,
                                                           const float *restrict x,
                                                           float *restrict y, int64_t oh,
                                                           const int64_t B) {
    const pool_dim *h = &g->h, *w = &g->w;
    int64_t start_h = oh * h->s - h->pad0, kh0, kh1, ph0, ph1;
    taps(h->k, start_h, h->d, 0, h->in, &kh0, &kh1);
    taps(h->k, start_h, h->d, -h->pad0, h->in + h->pad1, &ph0, &ph1);
    for (int64_t ow = 0; ow < w->out; ow++) {
        int64_t start_w = ow * w->s - w->pad0, kw0, kw1, pw0, pw1;
        taps(w->k, start_w, w->d, 0, w->in, &kw0, &kw1);
        taps(w->k, start_w, w->d, -w->pad0, w->in + w->pad1, &pw0, &pw1);
        float acc[MAX_BLOCK];
        for (int64_t l = 0; l < B; l++) acc[l] = g->is_max ? -INFINITY : 0.0f;
        for (int64_t kh = kh0; kh < kh1; kh++) {
            const float *xr = x + (start_h + kh * h->d) * w->in * B;
            for (int64_t kw = kw0; kw < kw1; kw++) {
                const float *restrict xv = xr + (start_w + kw * w->d) * B;
                if (g->is_max) {
                    /* NaN wins and stays, as in the NCHW kernel */
#pragma omp simd
                    for (int64_t l = 0; l < B; l++)
                        acc[l] = xv[l] > acc[l] || xv[l] != xv[l] ? xv[l] : acc[l];
                } else {
#pragma omp simd
                    for (int64_t l = 0; l < B; l++) acc[l] += xv[l];
                }
            }
        }
        float *yv = y + ow * B;
        if (g->is_max) {
            memcpy(yv, acc, sizeof(float) * (size_t)B);
            continue;
        }
        int64_t valid = (kh1 - kh0) * (kw1 - kw0), padded = (ph1 - ph0) * (pw1 - pw0);
        int64_t count = g->include_pad ? padded : valid;
        /* an empty window: 0 where padding counts and is there, else 0/0 as the spec's formula */
        for (int64_t l = 0; l < B; l++)
            yv[l] = valid ? acc[l] / (float)count : g->include_pad && padded ? 0.0f : NAN;
    }
}

/* Output rows [r0, r1) of rows = (image, block, oh). */
static void pool_rows(const pool_geom *g, const float *xd, float *yd, int64_t r0, int64_t r1) {
    const int64_t xplane = g->h.in * g->w.in * g->x, yrow = g->w.out * g->x;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = xd + (r / g->h.out) * xplane;
        float *y = yd + r * yrow;
        switch (g->x) {
        case 16: pool_row(g, x, y, r % g->h.out, 16); break;
        case 8: pool_row(g, x, y, r % g->h.out, 8); break;
        default: pool_row(g, x, y, r % g->h.out, 4); break;
        }
    }
}

wpk_status op_pool_nchwc_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             ir_tensor *const *out) {
    pool_geom g;
    wpk_status st = pool_setup(ctx, n, in, &g);
    if (st) return st;
    const float *xd = in[0]->data;
    float *yd = out[0]->data;
    const int64_t rows = g.n * g.cb * g.h.out;
    if (op_parallel(rows * g.w.out * g.x, 32768)) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++) pool_rows(&g, xd, yd, r, r + 1);
    } else {
        pool_rows(&g, xd, yd, 0, rows);
    }
    return WPK_OK;
}
