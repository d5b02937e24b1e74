/* blocked_pool.c -- MaxPoolNCHWc and AveragePoolNCHWc: 2-D MaxPool and AveragePool on blocked
 * tensors [N, C/x, H, W, x] (ops/blocked.h), with the ONNX ops' attributes and semantics
 * (explicit pads, auto_pad, ceil_mode, dilations, count_include_pad), so the layout pass keeps
 * pooling in the blocked layout. One output pixel is a window over x-lane vectors: the lane
 * loop vectorizes, where the NCHW kernel walks one channel's window at a time.
 *
 * The output size and padding rules mirror ops/pool.c (a separate module; the rules are the
 * spec's): ceil_mode's extra windows reach past the end padding and see neither input nor
 * padding there, and a last window that would start inside the end padding is dropped. */
#include <math.h>
#include <string.h>

#include "ops/blocked.h"
#include "ops/op_util.h"

#define ATTR_MAX ((int64_t)1 << 30)
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

/* Ints attribute `name` with exactly `count` values in [lo, ATTR_MAX]; `def` when absent. */
static wpk_status attr_ints(wpk_context *ctx, const ir_node *n, const char *name, int count,
                            int64_t def, int64_t lo, int64_t *out) {
    const ir_attr *a = ir_attr_find(n, name);
    if (!a || (a->kind == IR_ATTR_INTS && a->n == 0)) {
        for (int i = 0; i < count; i++) out[i] = def;
        return WPK_OK;
    }
    if (a->kind != IR_ATTR_INTS)
        return op_fail(ctx, n, "attribute '%s' must be a list of ints", name);
    if (a->n != count)
        return op_fail(ctx, n, "attribute '%s' has %d values, expected %d", name, a->n, count);
    for (int i = 0; i < count; i++) {
        if (a->ints[i] < lo || a->ints[i] > ATTR_MAX)
            return op_fail(ctx, n, "attribute '%s' value %lld at index %d is out of range "
                           "[%lld, %lld]", name, (long long)a->ints[i], i, (long long)lo,
                           (long long)ATTR_MAX);
        out[i] = a->ints[i];
    }
    return WPK_OK;
}

static wpk_status attr_flag(wpk_context *ctx, const ir_node *n, const char *name, bool *out) {
    int64_t v = ir_attr_int(n, name, 0);
    if (v != 0 && v != 1)
        return op_fail(ctx, n, "attribute '%s' is %lld, expected 0 or 1", name, (long long)v);
    *out = v == 1;
    return WPK_OK;
}

/* Output size and pads of one dim; d->in, k, s, d set. pad0/pad1 are the explicit pads. */
static wpk_status resolve_dim(wpk_context *ctx, const ir_node *n, const char *mode, bool ceil_mode,
                              int i, pool_dim *d) {
    int64_t span = (d->k - 1) * d->d + 1;
    if (!strcmp(mode, "SAME_UPPER") || !strcmp(mode, "SAME_LOWER")) {
        d->out = (d->in + d->s - 1) / d->s;
        int64_t total = (d->out - 1) * d->s + span - d->in;
        if (total < 0) total = 0;
        d->pad0 = !strcmp(mode, "SAME_UPPER") ? total / 2 : total - total / 2;
        d->pad1 = total - d->pad0;
        return WPK_OK;
    }
    if (!strcmp(mode, "VALID")) {
        d->pad0 = d->pad1 = 0;
    } else if (d->pad0 >= span || d->pad1 >= span) {
        return op_fail(ctx, n, "attribute 'pads' in spatial dim %d (%lld, %lld) must be smaller "
                       "than the window (%lld)", i, (long long)d->pad0, (long long)d->pad1,
                       (long long)span);
    }
    int64_t room = d->in + d->pad0 + d->pad1 - span;
    if (room < 0)
        return op_fail(ctx, n, "attribute 'kernel_shape': the window spans %lld in spatial dim "
                       "%d but the padded input is only %lld", (long long)span, i,
                       (long long)(d->in + d->pad0 + d->pad1));
    if (ceil_mode && strcmp(mode, "VALID")) {
        d->out = (room + d->s - 1) / d->s + 1;
        if ((d->out - 1) * d->s >= d->in + d->pad0) d->out--;
    } else {
        d->out = room / d->s + 1;
    }
    return WPK_OK;
}

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
    int64_t k[2], s[2], d[2], pads[4];
    bool ceil_mode = false;
    if ((st = attr_ints(ctx, n, "kernel_shape", 2, 1, 1, k)) ||
        (st = attr_ints(ctx, n, "strides", 2, 1, 1, s)) ||
        (st = attr_ints(ctx, n, "dilations", 2, 1, 1, d)) ||
        (st = attr_ints(ctx, n, "pads", 4, 0, 0, pads)) ||
        (st = attr_flag(ctx, n, "ceil_mode", &ceil_mode)) ||
        (st = attr_flag(ctx, n, "count_include_pad", &g->include_pad)))
        return st;
    if (g->is_max && g->include_pad)
        return op_fail(ctx, n, "attribute 'count_include_pad' belongs to AveragePoolNCHWc");
    const char *mode = ir_attr_str(n, "auto_pad", "NOTSET");
    if (!mode[0]) mode = "NOTSET";
    if (strcmp(mode, "NOTSET") && strcmp(mode, "SAME_UPPER") && strcmp(mode, "SAME_LOWER") &&
        strcmp(mode, "VALID"))
        return op_fail(ctx, n, "attribute 'auto_pad' is '%s', expected NOTSET, SAME_UPPER, "
                       "SAME_LOWER or VALID", mode);
    pool_dim *dims[2] = {&g->h, &g->w};
    for (int i = 0; i < 2; i++) {
        *dims[i] = (pool_dim){.in = x->dims[2 + i], .k = k[i], .s = s[i], .d = d[i],
                              .pad0 = pads[i], .pad1 = pads[2 + i], .out = -1};
        if (dims[i]->in < 0) continue;
        if ((st = resolve_dim(ctx, n, mode, ceil_mode, i, dims[i]))) return st;
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
static void taps(int64_t count, int64_t start, int64_t step, int64_t from, int64_t to,
                 int64_t *lo, int64_t *hi) {
    int64_t off = start - from, bound = to - from;
    int64_t l = off >= 0 ? 0 : (-off + step - 1) / step;
    int64_t last = bound - 1 - off;
    int64_t h = last < 0 ? 0 : last / step + 1;
    if (h > count) h = count;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
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

wpk_status op_pool_nchwc_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             ir_tensor *const *out) {
    pool_geom g;
    wpk_status st = pool_setup(ctx, n, in, &g);
    if (st) return st;
    const float *xd = in[0]->data;
    float *yd = out[0]->data;
    const int64_t rows = g.n * g.cb * g.h.out, xplane = g.h.in * g.w.in * g.x;
    const int64_t yrow = g.w.out * g.x;
#pragma omp parallel for schedule(static) if (rows * yrow > 32768)
    for (int64_t r = 0; r < rows; r++) {
        const float *x = xd + (r / g.h.out) * xplane;
        float *y = yd + r * yrow;
        switch (g.x) {
        case 16: pool_row(&g, x, y, r % g.h.out, 16); break;
        case 8: pool_row(&g, x, y, r % g.h.out, 8); break;
        default: pool_row(&g, x, y, r % g.h.out, 4); break;
        }
    }
    return WPK_OK;
}
