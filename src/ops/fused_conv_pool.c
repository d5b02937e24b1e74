/* fused_conv_pool.c -- wpk::FusedConvPool: a convolution (bias, activation) whose output only a
 * MaxPool or AveragePool reads, as one kernel: each task computes one output channel's conv
 * plane into a buffer on its stack and pools it from there, so the conv output never goes to
 * memory.
 *
 * Inputs: Conv's (X, W, B?). Attributes: the Conv's and its activation without a prefix; the
 * pool's under `pool_` (pool_kernel_shape, pool_strides, pool_pads, pool_ceil_mode,
 * pool_count_include_pad) and `pool_op` ("MaxPool" or "AveragePool"). 2-D images only; the
 * pool's dilations must be 1, and AveragePool's ceil_mode 0. */
#include <math.h>
#include <string.h>

#include "ops/activation.h"
#include "ops/fused_stage.h"
#include "ops/op_util.h"
#include "ops/spatial.h"

static const char *const no_prefix[] = {"pool_", NULL};

typedef struct conv_pool {
    fused_stage conv, pool;
    act_params act;
    bool is_max, include_pad;
    sp_geom cg, pg;         /* the conv's and the pool's windows, pads resolved */
    int64_t group;
    ir_tensor mid;          /* the conv output's shape */
} conv_pool;

static wpk_status geometry(wpk_context *ctx, const ir_node *n, const ir_node *view,
                           const ir_tensor *x, const int64_t *kernel, bool ceil_mode,
                           sp_geom *g) {
    sp_pad_mode mode;
    g->nsp = 2;
    wpk_status st = sp_read_attrs(ctx, view, g, &mode);
    for (int i = 0; st == WPK_OK && i < 2; i++) {
        g->in[i] = x->dims[2 + i];
        g->kernel[i] = kernel[i];
        if (g->in[i] >= 0 && !sp_resolve(g, i, mode, ceil_mode))
            st = op_fail(ctx, n, "a window does not fit its padded input");
    }
    return st;
}

static wpk_status setup(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out, conv_pool *d) {
    wpk_status st;
    if (n->nin < 2 || n->nin > 3)
        return op_fail(ctx, n, "has %d inputs; expected X, W, B?", n->nin);
    if ((st = op_need_input(ctx, n, in, 0, "X")) || (st = op_need_input(ctx, n, in, 1, "W")))
        return st;
    if (in[0]->ndim != 4) return op_unsupported(ctx, n, "supports 2-D images (4-D X) only");
    const char *pool_op = ir_attr_str(n, "pool_op", "");
    d->is_max = strcmp(pool_op, "MaxPool") == 0;
    if (!d->is_max && strcmp(pool_op, "AveragePool") != 0)
        return op_fail(ctx, n, "attribute 'pool_op' is '%s'; expected MaxPool or AveragePool",
                       pool_op);
    if ((st = fused_stage_view(ctx, n, IR_OP_CONV, n->nin, NULL, no_prefix, &d->conv)) ||
        (st = fused_stage_view(ctx, n, d->is_max ? IR_OP_MAX_POOL : IR_OP_AVERAGE_POOL, 1,
                               "pool_", NULL, &d->pool)) ||
        (st = act_read(ctx, &d->conv.node, &d->act)))
        return st;
    memset(&d->mid, 0, sizeof d->mid);
    ir_tensor *mid_out[1] = {&d->mid};
    if ((st = op_conv_shape(ctx, &d->conv.node, in, mid_out))) return st;
    ir_tensor *pool_in[1] = {&d->mid};
    if ((st = op_pool_shape(ctx, &d->pool.node, pool_in, out))) return st;
    int64_t pdil[2];
    bool ceil_mode = false;
    if ((st = sp_attr_ints(ctx, &d->pool.node, "dilations", 2, 1, 1, pdil)) ||
        (st = op_attr_flag(ctx, &d->pool.node, "ceil_mode", &ceil_mode)) ||
        (st = op_attr_flag(ctx, &d->pool.node, "count_include_pad", &d->include_pad)))
        return st;
    if (pdil[0] != 1 || pdil[1] != 1)
        return op_unsupported(ctx, n, "a pool with dilations is not fused");
    if (!d->is_max && ceil_mode)
        return op_unsupported(ctx, n, "an AveragePool with ceil_mode is not fused");
    if (d->mid.dims[2] >= 0 && d->mid.dims[2] * d->mid.dims[3] > FUSED_CONV_POOL_MAX_PLANE)
        return op_unsupported(ctx, n, "its conv plane (%lld x %lld) is larger than its kernel's "
                              "buffer (%d elements)", (long long)d->mid.dims[2],
                              (long long)d->mid.dims[3], FUSED_CONV_POOL_MAX_PLANE);
    d->group = ir_attr_int(&d->conv.node, "group", 1);
    int64_t pk[2];
    if ((st = sp_attr_ints(ctx, &d->pool.node, "kernel_shape", 2, 1, 1, pk)) ||
        (st = geometry(ctx, n, &d->conv.node, in[0], &in[1]->dims[2], false, &d->cg)) ||
        (st = geometry(ctx, n, &d->pool.node, &d->mid, pk, ceil_mode, &d->pg)))
        return st;
    return WPK_OK;
}

wpk_status op_fused_conv_pool_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                    ir_tensor *const *out) {
    conv_pool d;
    return setup(ctx, n, in, out, &d);
}

typedef struct conv_pool_job {
    const conv_pool *d;
    const float *x, *w, *b;
    float *y;
    int64_t c, h, wd, k, ch, cw, ph, pw;  /* input, conv plane and pool plane sizes */
    int64_t kb;                           /* output channels per task */
} conv_pool_job;

/* Output channels a task computes at once (each input row loaded is used this many times),
 * and the floats their planes may take on the task's stack. */
#define MAX_KB 8
#define TASK_FLOATS (2 * FUSED_CONV_POOL_MAX_PLANE)

/* The conv planes of output channels [k0, k0 + kb) of image img into planes (plane after
 * plane), activation applied. The channels are in one group (the caller's blocks are). */
static inline void conv_planes(const conv_pool_job *j, int64_t img, int64_t k0, int64_t kb,
                               float *planes) {
    const sp_geom *g = &j->d->cg;
    int64_t cg = j->c / j->d->group, c0 = (k0 / (j->k / j->d->group)) * cg;
    int64_t size = j->ch * j->cw, taps = g->kernel[0] * g->kernel[1];
    for (int64_t b = 0; b < kb; b++) {
        float bias = j->b ? j->b[k0 + b] : 0.0f;
        for (int64_t i = 0; i < size; i++) planes[b * size + i] = bias;
    }
    for (int64_t c = 0; c < cg; c++) {
        const float *xc = j->x + (img * j->c + c0 + c) * j->h * j->wd;
        for (int64_t r = 0; r < g->kernel[0]; r++)
            for (int64_t q = 0; q < g->kernel[1]; q++) {
                float wv[MAX_KB];
                for (int64_t b = 0; b < kb; b++)
                    wv[b] = j->w[((k0 + b) * cg + c) * taps + r * g->kernel[1] + q];
                int64_t off = q * g->dil[1] - g->pad0[1], lo, hi;
                sp_tap_range(j->cw, g->stride[1], off, j->wd, &lo, &hi);
                for (int64_t oh = 0; oh < j->ch; oh++) {
                    int64_t ih = oh * g->stride[0] - g->pad0[0] + r * g->dil[0];
                    if (ih < 0 || ih >= j->h) continue;
                    const float *xr = xc + ih * j->wd + off;
                    for (int64_t b = 0; b < kb; b++) {
                        float *restrict pr = planes + b * size + oh * j->cw;
                        float w = wv[b];
                        if (g->stride[1] == 1) {
#pragma omp simd
                            for (int64_t o = lo; o < hi; o++) pr[o] += w * xr[o];
                        } else {
                            for (int64_t o = lo; o < hi; o++) pr[o] += w * xr[o * g->stride[1]];
                        }
                    }
                }
            }
    }
    act_apply(&j->d->act, planes, kb * size);
}

/* The pool of plane into y's plane. Windows see only the plane (padding is never the max;
 * AveragePool divides by the whole window with count_include_pad). */
static inline void pool_plane(const conv_pool_job *j, const float *plane, float *y) {
    const sp_geom *g = &j->d->pg;
    for (int64_t oh = 0; oh < j->ph; oh++) {
        int64_t h0 = oh * g->stride[0] - g->pad0[0], h1 = h0 + g->kernel[0];
        int64_t hl = h0 < 0 ? 0 : h0, hh = h1 > j->ch ? j->ch : h1;
        for (int64_t ow = 0; ow < j->pw; ow++) {
            int64_t w0 = ow * g->stride[1] - g->pad0[1], w1 = w0 + g->kernel[1];
            int64_t wl = w0 < 0 ? 0 : w0, wh = w1 > j->cw ? j->cw : w1;
            float m = -INFINITY, sum = 0.0f;
            for (int64_t r = hl; r < hh; r++)
                for (int64_t q = wl; q < wh; q++) {
                    float v = plane[r * j->cw + q];
                    if (v > m || v != v) m = v;
                    sum += v;
                }
            if (j->d->is_max) {
                y[oh * j->pw + ow] = m;
                continue;
            }
            int64_t count = j->d->include_pad ? g->kernel[0] * g->kernel[1]
                                              : (hh - hl) * (wh - wl);
            y[oh * j->pw + ow] = count > 0 ? sum / (float)count : 0.0f;
        }
    }
}

/* Task t: image t / blocks, output channels [kb * (t % blocks), ...) of one group. */
FUSED_MULTI_ISA static void conv_pool_task(const conv_pool_job *j, int64_t t) {
    float planes[TASK_FLOATS];
    int64_t per_group = j->k / j->d->group;
    int64_t blocks_per_group = (per_group + j->kb - 1) / j->kb;
    int64_t blocks = j->d->group * blocks_per_group;
    int64_t img = t / blocks, blk = t % blocks;
    int64_t k0 = (blk / blocks_per_group) * per_group + (blk % blocks_per_group) * j->kb;
    int64_t end = (blk / blocks_per_group + 1) * per_group;
    int64_t kb = end - k0 < j->kb ? end - k0 : j->kb;
    conv_planes(j, img, k0, kb, planes);
    for (int64_t b = 0; b < kb; b++)
        pool_plane(j, planes + b * j->ch * j->cw, j->y + (img * j->k + k0 + b) * j->ph * j->pw);
}

wpk_status op_fused_conv_pool_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                  ir_tensor *const *out) {
    conv_pool d;
    ir_tensor y = *out[0];
    ir_tensor *ys[1] = {&y};
    wpk_status st = setup(ctx, n, in, ys, &d);
    if (st) return st;
    const ir_tensor *b = n->nin > 2 ? in[2] : NULL;
    conv_pool_job j = {.d = &d, .x = in[0]->data, .w = in[1]->data, .b = b ? b->data : NULL,
                       .y = out[0]->data, .c = in[0]->dims[1], .h = in[0]->dims[2],
                       .wd = in[0]->dims[3], .k = d.mid.dims[1], .ch = d.mid.dims[2],
                       .cw = d.mid.dims[3], .ph = y.dims[2], .pw = y.dims[3]};
    int64_t size = j.ch * j.cw > 0 ? j.ch * j.cw : 1, per_group = j.k / d.group;
    j.kb = TASK_FLOATS / size < MAX_KB ? TASK_FLOATS / size : MAX_KB;
    if (j.kb > per_group) j.kb = per_group;
    if (j.kb < 1 || y.dims[0] == 0) return WPK_OK;
    /* enough tasks for every thread: smaller blocks where the blocks are few */
    while (j.kb > 1 && y.dims[0] * d.group * ((per_group + j.kb - 1) / j.kb) < 4 * MAX_KB)
        j.kb /= 2;
    int64_t tasks = y.dims[0] * d.group * ((per_group + j.kb - 1) / j.kb);
    int64_t work = y.dims[0] * j.k * size * (j.c / d.group) * d.cg.kernel[0] * d.cg.kernel[1];
    if (op_parallel(work, 1 << 16)) {
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < tasks; t++) conv_pool_task(&j, t);
    } else {
        for (int64_t t = 0; t < tasks; t++) conv_pool_task(&j, t);
    }
    return WPK_OK;
}
