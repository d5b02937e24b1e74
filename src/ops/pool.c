/* pool.c -- MaxPool (with its optional Indices output), AveragePool, GlobalAveragePool and
 * GlobalMaxPool over any number of spatial dims: attribute checking, output shapes (explicit
 * pads, ceil_mode, auto_pad) and reference kernels.
 *
 * The attribute readers mirror those in conv.c on purpose: the two files are separate
 * modules and the shared part is small. */
#include <math.h>
#include <string.h>

#include "ops/op_util.h"

#define MAX_SP (WPK_MAX_DIMS - 2)
/* Attribute values above this are rejected so that sizes computed from them cannot overflow. */
#define ATTR_MAX ((int64_t)1 << 30)

typedef enum pad_mode { PAD_NOTSET, PAD_SAME_UPPER, PAD_SAME_LOWER, PAD_VALID } pad_mode;

/* Spatial geometry of one pooling node; out is -1 where the input size is unknown during
 * static inference. pad0/pad1 are the begin/end pads actually in effect (auto_pad resolved);
 * ceil_mode's extra windows reach past pad1 and see neither input nor padding there. */
typedef struct pool_geom {
    int nsp;
    int64_t in[MAX_SP], out[MAX_SP], kernel[MAX_SP], stride[MAX_SP], dil[MAX_SP];
    int64_t pad0[MAX_SP], pad1[MAX_SP];
} pool_geom;

/* Ints attribute `name` with exactly `count` values, each in [lo, ATTR_MAX]; every value is
 * `def` when absent (an empty list counts as absent). */
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
            return op_fail(ctx, n,
                           "attribute '%s' value %lld at index %d is out of range [%lld, %lld]",
                           name, (long long)a->ints[i], i, (long long)lo, (long long)ATTR_MAX);
        out[i] = a->ints[i];
    }
    return WPK_OK;
}

/* A 0/1 flag attribute. */
static wpk_status attr_flag(wpk_context *ctx, const ir_node *n, const char *name, bool *out) {
    int64_t v = ir_attr_int(n, name, 0);
    if (v != 0 && v != 1)
        return op_fail(ctx, n, "attribute '%s' is %lld, expected 0 or 1", name, (long long)v);
    *out = v == 1;
    return WPK_OK;
}

static wpk_status read_auto_pad(wpk_context *ctx, const ir_node *n, pad_mode *mode) {
    const char *s = ir_attr_str(n, "auto_pad", "NOTSET");
    if (!strcmp(s, "NOTSET") || !s[0]) *mode = PAD_NOTSET;
    else if (!strcmp(s, "SAME_UPPER")) *mode = PAD_SAME_UPPER;
    else if (!strcmp(s, "SAME_LOWER")) *mode = PAD_SAME_LOWER;
    else if (!strcmp(s, "VALID")) *mode = PAD_VALID;
    else return op_fail(ctx, n, "attribute 'auto_pad' is '%s', expected NOTSET, SAME_UPPER, "
                        "SAME_LOWER or VALID", s);
    return WPK_OK;
}

/* Checks X and the attributes, and resolves the output size and pads of each spatial dim. */
static wpk_status pool_setup(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             pool_geom *g) {
    wpk_status st;
    if ((st = op_need_input(ctx, n, in, 0, "X")) || (st = op_need_f32(ctx, n, in, 0))) return st;
    const ir_tensor *x = in[0];
    if (x->ndim < 3)
        return op_fail(ctx, n, "input X has %d dims, expected at least 3 (N, C, spatial...)",
                       x->ndim);
    g->nsp = x->ndim - 2;
    const ir_attr *ks = ir_attr_find(n, "kernel_shape");
    if (!ks || ks->kind != IR_ATTR_INTS || ks->n == 0)
        return op_fail(ctx, n, "attribute 'kernel_shape' is required");
    pad_mode mode = PAD_NOTSET;
    int64_t pads[2 * MAX_SP];
    bool ceil_mode = false;
    if ((st = attr_ints(ctx, n, "kernel_shape", g->nsp, 1, 1, g->kernel)) ||
        (st = attr_ints(ctx, n, "strides", g->nsp, 1, 1, g->stride)) ||
        (st = attr_ints(ctx, n, "dilations", g->nsp, 1, 1, g->dil)) ||
        (st = attr_ints(ctx, n, "pads", 2 * g->nsp, 0, 0, pads)) ||
        (st = read_auto_pad(ctx, n, &mode)) || (st = attr_flag(ctx, n, "ceil_mode", &ceil_mode)))
        return st;
    for (int i = 0; i < g->nsp; i++) {
        int64_t s = g->stride[i], span = (g->kernel[i] - 1) * g->dil[i] + 1, len = x->dims[2 + i];
        g->in[i] = len;
        if (mode == PAD_NOTSET && (pads[i] >= span || pads[g->nsp + i] >= span))
            return op_fail(ctx, n,
                           "attribute 'pads' in spatial dim %d (%lld, %lld) must be smaller "
                           "than the window (%lld)",
                           i, (long long)pads[i], (long long)pads[g->nsp + i], (long long)span);
        if (len < 0) {
            g->out[i] = -1;
            g->pad0[i] = g->pad1[i] = 0;
            continue;
        }
        if (mode == PAD_SAME_UPPER || mode == PAD_SAME_LOWER) {
            g->out[i] = (len + s - 1) / s;
            int64_t total = (g->out[i] - 1) * s + span - len;
            if (total < 0) total = 0;
            /* SAME_UPPER puts the odd extra pad at the end, SAME_LOWER at the beginning. */
            g->pad0[i] = mode == PAD_SAME_UPPER ? total / 2 : total - total / 2;
            g->pad1[i] = total - g->pad0[i];
            continue;
        }
        g->pad0[i] = mode == PAD_VALID ? 0 : pads[i];
        g->pad1[i] = mode == PAD_VALID ? 0 : pads[g->nsp + i];
        int64_t room = len + g->pad0[i] + g->pad1[i] - span;
        if (room < 0)
            return op_fail(ctx, n,
                           "attribute 'kernel_shape': the window spans %lld in spatial dim %d "
                           "but the padded input is only %lld",
                           (long long)span, i, (long long)(len + g->pad0[i] + g->pad1[i]));
        if (ceil_mode && mode == PAD_NOTSET) {
            g->out[i] = (room + s - 1) / s + 1;
            /* A last window that would start inside the end padding is dropped (ONNX Runtime
             * and PyTorch agree): every window starts in the input or the begin padding. */
            if ((g->out[i] - 1) * s >= len + g->pad0[i]) g->out[i]--;
        } else {
            g->out[i] = room / s + 1;
        }
    }
    return WPK_OK;
}

wpk_status op_pool_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out) {
    pool_geom g;
    wpk_status st = pool_setup(ctx, n, in, &g);
    if (st) return st;
    bool flag;
    if (n->op == IR_OP_MAX_POOL) {
        if ((st = attr_flag(ctx, n, "storage_order", &flag))) return st;
    } else if ((st = attr_flag(ctx, n, "count_include_pad", &flag))) {
        return st;
    }
    if (n->op != IR_OP_MAX_POOL && n->nout > 1 && out[1])
        return op_fail(ctx, n, "AveragePool has one output, the node has %d", n->nout);
    int64_t dims[WPK_MAX_DIMS];
    dims[0] = in[0]->dims[0];
    dims[1] = in[0]->dims[1];
    memcpy(dims + 2, g.out, sizeof(int64_t) * (size_t)g.nsp);
    op_set_shape(out[0], WPK_DTYPE_FLOAT32, g.nsp + 2, dims);
    if (n->nout > 1 && out[1]) op_set_shape(out[1], WPK_DTYPE_INT64, g.nsp + 2, dims);
    return WPK_OK;
}

/* [*lo, *hi): the taps j in [0, count) whose position start + j*d lies in [from, to). */
static void tap_range(int64_t count, int64_t start, int64_t d, int64_t from, int64_t to,
                      int64_t *lo, int64_t *hi) {
    int64_t off = start - from, bound = to - from;
    int64_t l = off >= 0 ? 0 : (-off + d - 1) / d;
    int64_t last = bound - 1 - off;
    int64_t h = last < 0 ? 0 : last / d + 1;
    if (h > count) h = count;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

typedef struct pool_job {
    const pool_geom *g;
    bool is_max, include_pad, col_major;
    int64_t xstride[MAX_SP]; /* row-major strides of one input plane */
} pool_job;

/* One output element of plane x: the window's max (with the row-major offset of the first
 * max in *arg) or average. NaN propagates through max; an empty max window gives -inf. */
static float pool_one(const pool_job *job, const float *x, const int64_t *o, int64_t *arg) {
    const pool_geom *g = job->g;
    int ns = g->nsp, last = ns - 1;
    int64_t start[MAX_SP], j0[MAX_SP], j1[MAX_SP], j[MAX_SP], padded = 1, valid = 1;
    for (int d = 0; d < ns; d++) {
        start[d] = o[d] * g->stride[d] - g->pad0[d];
        tap_range(g->kernel[d], start[d], g->dil[d], 0, g->in[d], &j0[d], &j1[d]);
        valid *= j1[d] - j0[d];
        int64_t p0, p1;
        tap_range(g->kernel[d], start[d], g->dil[d], -g->pad0[d], g->in[d] + g->pad1[d], &p0, &p1);
        padded *= p1 - p0;
        j[d] = j0[d];
    }
    *arg = -1;
    if (valid == 0) return job->is_max ? -INFINITY : job->include_pad && padded ? 0.0f : NAN;
    double sum = 0.0;
    float best = -INFINITY;
    for (;;) {
        int64_t base = 0;
        for (int d = 0; d < last; d++) base += (start[d] + j[d] * g->dil[d]) * job->xstride[d];
        const int64_t dl = g->dil[last];
        base += start[last];
        if (job->is_max) {
            for (int64_t k = j0[last]; k < j1[last]; k++) {
                float v = x[base + k * dl];
                if (v > best || (isnan(v) && !isnan(best)) || *arg < 0) {
                    best = v;
                    *arg = base + k * dl;
                }
            }
        } else {
            for (int64_t k = j0[last]; k < j1[last]; k++) sum += x[base + k * dl];
        }
        int d = last - 1;
        for (; d >= 0; d--) {
            if (++j[d] < j1[d]) break;
            j[d] = j0[d];
        }
        if (d < 0) break;
    }
    if (job->is_max) return best;
    return (float)(sum / (double)(job->include_pad ? padded : valid));
}

/* A row-major offset within one plane as a column-major one (storage_order = 1). */
static int64_t to_col_major(const pool_geom *g, int64_t off) {
    int64_t r = 0, stride = 1, pos[MAX_SP];
    for (int d = g->nsp - 1; d >= 0; d--) {
        pos[d] = off % g->in[d];
        off /= g->in[d];
    }
    for (int d = 0; d < g->nsp; d++) {
        r += pos[d] * stride;
        stride *= g->in[d];
    }
    return r;
}

wpk_status op_pool_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                       ir_tensor *const *out) {
    pool_geom g;
    wpk_status st = pool_setup(ctx, n, in, &g);
    if (st) return st;
    pool_job job = {.g = &g, .is_max = n->op == IR_OP_MAX_POOL};
    if ((st = attr_flag(ctx, n, "count_include_pad", &job.include_pad)) ||
        (st = attr_flag(ctx, n, "storage_order", &job.col_major)))
        return st;
    int64_t xsz = 1, ysz = 1;
    for (int d = g.nsp - 1; d >= 0; d--) {
        job.xstride[d] = xsz;
        xsz *= g.in[d];
        ysz *= g.out[d];
    }
    const ir_tensor *x = in[0];
    int64_t planes = x->dims[0] * x->dims[1];
    const float *xd = x->data;
    float *yd = out[0]->data;
    int64_t *id = job.is_max && n->nout > 1 && out[1] ? out[1]->data : NULL;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        int64_t o[MAX_SP] = {0};
        for (int64_t i = 0; i < ysz; i++) {
            int64_t arg;
            yd[p * ysz + i] = pool_one(&job, xd + p * xsz, o, &arg);
            if (id) {
                /* Indices count from the start of X, across batch and channels too. */
                int64_t at = arg < 0 ? -1 : job.col_major ? to_col_major(&g, arg) : arg;
                id[p * ysz + i] = at < 0 ? -1 : p * xsz + at;
            }
            for (int d = g.nsp - 1; d >= 0; d--) {
                if (++o[d] < g.out[d]) break;
                o[d] = 0;
            }
        }
    }
    return WPK_OK;
}

/* ---- GlobalAveragePool, GlobalMaxPool ---- */

static wpk_status global_check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in) {
    wpk_status st;
    if ((st = op_need_input(ctx, n, in, 0, "X")) || (st = op_need_f32(ctx, n, in, 0))) return st;
    if (in[0]->ndim < 2)
        return op_fail(ctx, n, "input X has %d dims, expected at least 2 (N, C, spatial...)",
                       in[0]->ndim);
    return WPK_OK;
}

wpk_status op_global_pool_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                ir_tensor *const *out) {
    wpk_status st = global_check(ctx, n, in);
    if (st) return st;
    const ir_tensor *x = in[0];
    int64_t dims[WPK_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) dims[i] = i < 2 ? x->dims[i] : 1;
    op_set_shape(out[0], WPK_DTYPE_FLOAT32, x->ndim, dims);
    return WPK_OK;
}

wpk_status op_global_pool_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                              ir_tensor *const *out) {
    wpk_status st = global_check(ctx, n, in);
    if (st) return st;
    const ir_tensor *x = in[0];
    int64_t planes = x->dims[0] * x->dims[1], size = 1;
    for (int i = 2; i < x->ndim; i++) size *= x->dims[i];
    const float *xd = x->data;
    float *yd = out[0]->data;
    bool is_max = n->op == IR_OP_GLOBAL_MAX_POOL;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        const float *xp = xd + p * size;
        if (is_max) {
            float best = -INFINITY;
            for (int64_t i = 0; i < size; i++)
                if (xp[i] > best || isnan(xp[i])) {
                    best = xp[i];
                    if (isnan(best)) break;
                }
            yd[p] = best;
        } else {
            double sum = 0.0;
            for (int64_t i = 0; i < size; i++) sum += xp[i];
            yd[p] = (float)(sum / (double)size);
        }
    }
    return WPK_OK;
}
