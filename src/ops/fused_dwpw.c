/* fused_dwpw.c -- wpk::FusedDwPw: a depthwise convolution (bias, activation) whose output only
 * a pointwise (1x1) convolution (bias, residual Z, activation) reads, as one kernel, so the
 * depthwise output never goes to memory: each task computes a strip of depthwise output
 * columns for every channel into a buffer on its stack and reduces it at once into the
 * pointwise output.
 *
 * Inputs: X, Wdw [C, 1, kh, kw], Bdw?, Wpw [K, C, 1, 1], Bpw?, Z? (Y's shape).
 * Attributes: the depthwise Conv's under `dw_` (strides, pads, dilations, group, auto_pad,
 * kernel_shape, and its activation: dw_activation, dw_clip_min, ...), the pointwise Conv's and
 * its activation without a prefix. 2-D images only. */
#include <string.h>

#include "ops/activation.h"
#include "ops/fused_stage.h"
#include "ops/op_util.h"
#include "ops/spatial.h"

enum { IN_X, IN_WDW, IN_BDW, IN_WPW, IN_BPW, IN_Z, NUM_INPUTS };
/* Columns per task at most: the accumulators of one output row strip. */
#define MAX_TILE 64
/* Elements of a task's depthwise strip (channels x columns). */
#define STRIP FUSED_DWPW_MAX_CHANNELS

static const char *const no_prefix[] = {"dw_", NULL};

static const ir_tensor *opt_in(const ir_node *n, ir_tensor *const *in, int i) {
    return i < n->nin ? in[i] : NULL;
}

typedef struct dwpw {
    fused_stage dw, pw;
    act_params dw_act, pw_act;
    sp_geom g;              /* the depthwise window, pads resolved */
    ir_tensor mid;          /* the depthwise output's shape */
} dwpw;

/* Both stages checked by their own ops' shape functions; *out's shape set. */
static wpk_status setup(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out, dwpw *d) {
    wpk_status st;
    if (n->nin < IN_WPW + 1 || n->nin > NUM_INPUTS)
        return op_fail(ctx, n, "has %d inputs; expected X, Wdw, Bdw?, Wpw, Bpw?, Z?", n->nin);
    if ((st = op_need_input(ctx, n, in, IN_X, "X")) ||
        (st = op_need_input(ctx, n, in, IN_WDW, "Wdw")) ||
        (st = op_need_input(ctx, n, in, IN_WPW, "Wpw")))
        return st;
    if (in[IN_X]->ndim != 4) return op_unsupported(ctx, n, "supports 2-D images (4-D X) only");
    if ((st = fused_stage_view(ctx, n, IR_OP_CONV, 3, "dw_", NULL, &d->dw)) ||
        (st = fused_stage_view(ctx, n, IR_OP_CONV, 3, NULL, no_prefix, &d->pw)) ||
        (st = act_read(ctx, &d->dw.node, &d->dw_act)) ||
        (st = act_read(ctx, &d->pw.node, &d->pw_act)))
        return st;
    ir_tensor *dw_in[3] = {in[IN_X], in[IN_WDW], (ir_tensor *)opt_in(n, in, IN_BDW)};
    memset(&d->mid, 0, sizeof d->mid);
    ir_tensor *mid_out[1] = {&d->mid};
    if ((st = op_conv_shape(ctx, &d->dw.node, dw_in, mid_out))) return st;
    int64_t c = in[IN_X]->dims[1];
    const ir_tensor *wdw = in[IN_WDW];
    if (ir_attr_int(&d->dw.node, "group", 1) != c || wdw->dims[0] != c || wdw->dims[1] != 1)
        return op_fail(ctx, n, "the first stage must be depthwise (group = %lld channels, Wdw "
                       "[C, 1, kh, kw])", (long long)c);
    if (c > FUSED_DWPW_MAX_CHANNELS)
        return op_unsupported(ctx, n, "has %lld channels; at most %d fit its kernel",
                              (long long)c, FUSED_DWPW_MAX_CHANNELS);
    ir_tensor *pw_in[3] = {&d->mid, in[IN_WPW], (ir_tensor *)opt_in(n, in, IN_BPW)};
    if ((st = op_conv_shape(ctx, &d->pw.node, pw_in, out))) return st;
    const ir_tensor *wpw = in[IN_WPW];
    int64_t strides[2], pads[4], dil[2];
    if ((st = sp_attr_ints(ctx, &d->pw.node, "strides", 2, 1, 1, strides)) ||
        (st = sp_attr_ints(ctx, &d->pw.node, "pads", 4, 0, 0, pads)) ||
        (st = sp_attr_ints(ctx, &d->pw.node, "dilations", 2, 1, 1, dil)))
        return st;
    bool unit = wpw->dims[2] == 1 && wpw->dims[3] == 1 && strides[0] == 1 && strides[1] == 1 &&
                ir_attr_int(&d->pw.node, "group", 1) == 1;
    for (int i = 0; i < 4; i++) unit = unit && pads[i] == 0;
    if (!unit)
        return op_fail(ctx, n, "the second stage must be a pointwise conv (1x1 W, stride 1, no "
                       "pads, group 1)");
    const ir_tensor *z = opt_in(n, in, IN_Z);
    if (z) {
        if ((st = op_need_f32(ctx, n, in, IN_Z))) return st;
        bool same = z->ndim == 4;
        for (int i = 0; same && i < 4; i++)
            same = z->dims[i] == out[0]->dims[i] || z->dims[i] < 0 || out[0]->dims[i] < 0;
        if (!same) return op_fail(ctx, n, "residual input Z must have the output's shape");
    }
    sp_pad_mode mode;
    d->g.nsp = 2;
    if ((st = sp_read_attrs(ctx, &d->dw.node, &d->g, &mode))) return st;
    for (int i = 0; i < 2; i++) {
        d->g.in[i] = in[IN_X]->dims[2 + i];
        d->g.kernel[i] = wdw->dims[2 + i];
        if (d->g.in[i] >= 0 && !sp_resolve(&d->g, i, mode, false))
            return op_fail(ctx, n, "the depthwise window does not fit the padded input");
    }
    return WPK_OK;
}

wpk_status op_fused_dwpw_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                               ir_tensor *const *out) {
    dwpw d;
    return setup(ctx, n, in, out, &d);
}

typedef struct dwpw_job {
    const float *x, *wdw, *bdw, *wpw, *bpw, *z;
    float *y;
    int64_t c, h, w, k, oh, ow, tile, tiles;
    const sp_geom *g;
    const act_params *dw_act, *pw_act;
} dwpw_job;

/* Output row `row` (image and row), columns [ow0, ow0 + tw). */
FUSED_MULTI_ISA static void dwpw_task(const dwpw_job *j, int64_t t) {
    int64_t ow0 = (t % j->tiles) * j->tile, row = t / j->tiles;
    int64_t oh = row % j->oh, img = row / j->oh;
    int64_t tw = j->ow - ow0 < j->tile ? j->ow - ow0 : j->tile;
    const sp_geom *g = j->g;
    float strip[STRIP], acc[MAX_TILE];
    for (int64_t c = 0; c < j->c; c++) {
        float *restrict s = strip + c * tw;
        float b = j->bdw ? j->bdw[c] : 0.0f;
        for (int64_t i = 0; i < tw; i++) s[i] = b;
        const float *xc = j->x + (img * j->c + c) * j->h * j->w;
        const float *wc = j->wdw + c * g->kernel[0] * g->kernel[1];
        for (int64_t r = 0; r < g->kernel[0]; r++) {
            int64_t ih = oh * g->stride[0] - g->pad0[0] + r * g->dil[0];
            if (ih < 0 || ih >= j->h) continue;
            const float *xr = xc + ih * j->w;
            for (int64_t q = 0; q < g->kernel[1]; q++) {
                float wv = wc[r * g->kernel[1] + q];
                int64_t off = q * g->dil[1] - g->pad0[1], lo, hi;
                sp_tap_range(ow0 + tw, g->stride[1], off, j->w, &lo, &hi);
                if (lo < ow0) lo = ow0;
                if (g->stride[1] == 1) {
                    const float *restrict xo = xr + off + ow0;
#pragma omp simd
                    for (int64_t o = lo - ow0; o < hi - ow0; o++) s[o] += wv * xo[o];
                } else {
                    for (int64_t o = lo; o < hi; o++) s[o - ow0] += wv * xr[o * g->stride[1] + off];
                }
            }
        }
        act_apply(j->dw_act, s, tw);
    }
    for (int64_t k = 0; k < j->k; k++) {
        float b = j->bpw ? j->bpw[k] : 0.0f;
        for (int64_t i = 0; i < tw; i++) acc[i] = b;
        const float *wk = j->wpw + k * j->c;
        for (int64_t c = 0; c < j->c; c++) {
            float wv = wk[c];
            const float *restrict s = strip + c * tw;
#pragma omp simd
            for (int64_t i = 0; i < tw; i++) acc[i] += wv * s[i];
        }
        int64_t at = ((img * j->k + k) * j->oh + oh) * j->ow + ow0;
        if (j->z)
            for (int64_t i = 0; i < tw; i++) acc[i] += j->z[at + i];
        act_apply(j->pw_act, acc, tw);
        memcpy(j->y + at, acc, sizeof(float) * (size_t)tw);
    }
}

wpk_status op_fused_dwpw_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             ir_tensor *const *out) {
    dwpw d;
    ir_tensor y = *out[0];
    ir_tensor *ys[1] = {&y};
    wpk_status st = setup(ctx, n, in, ys, &d);
    if (st) return st;
    const ir_tensor *bdw = opt_in(n, in, IN_BDW), *bpw = opt_in(n, in, IN_BPW);
    const ir_tensor *z = opt_in(n, in, IN_Z);
    dwpw_job j = {.x = in[IN_X]->data, .wdw = in[IN_WDW]->data, .bdw = bdw ? bdw->data : NULL,
                  .wpw = in[IN_WPW]->data, .bpw = bpw ? bpw->data : NULL,
                  .z = z ? z->data : NULL, .y = out[0]->data,
                  .c = in[IN_X]->dims[1], .h = in[IN_X]->dims[2], .w = in[IN_X]->dims[3],
                  .k = y.dims[1], .oh = y.dims[2], .ow = y.dims[3], .g = &d.g,
                  .dw_act = &d.dw_act, .pw_act = &d.pw_act};
    int64_t fit = STRIP / (j.c > 0 ? j.c : 1);
    j.tile = j.ow < MAX_TILE ? j.ow : MAX_TILE;
    if (j.tile > fit) j.tile = fit;
    if (j.tile < 1 || j.oh < 1) return WPK_OK;
    j.tiles = (j.ow + j.tile - 1) / j.tile;
    int64_t tasks = y.dims[0] * j.oh * j.tiles;
    if (op_parallel(tasks * j.c * j.k, 1 << 16)) {
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < tasks; t++) dwpw_task(&j, t);
    } else {
        for (int64_t t = 0; t < tasks; t++) dwpw_task(&j, t);
    }
    return WPK_OK;
}
