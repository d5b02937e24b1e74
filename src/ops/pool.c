/* pool.c -- MaxPool (with its optional Indices output), AveragePool, GlobalAveragePool and
 * GlobalMaxPool over any number of spatial dims: attribute checking, output shapes (explicit
 * pads, ceil_mode, auto_pad) and reference kernels.
 *
 * The attributes and the output size rules are ops/spatial.h's, shared with Conv. */
#include <math.h>

#include "ops/op_util.h"
#include "ops/spatial.h"

/* Checks X and the attributes, and resolves the output size and pads of each spatial dim.
 * ceil_mode's extra windows reach past pad1 and see neither input nor padding there. */
static wpk_status pool_setup(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             sp_geom *g) {
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
    sp_pad_mode mode = SP_PAD_NOTSET;
    bool ceil_mode = false;
    if ((st = sp_attr_ints(ctx, n, "kernel_shape", g->nsp, 1, 1, g->kernel)) ||
        (st = sp_read_attrs(ctx, n, g, &mode)) ||
        (st = op_attr_flag(ctx, n, "ceil_mode", &ceil_mode)))
        return st;
    for (int i = 0; i < g->nsp; i++) {
        int64_t span = sp_span(g, i);
        g->in[i] = x->dims[2 + i];
        if (mode == SP_PAD_NOTSET && (g->pad0[i] >= span || g->pad1[i] >= span))
            return op_fail(ctx, n,
                           "attribute 'pads' in spatial dim %d (%lld, %lld) must be smaller "
                           "than the window (%lld)",
                           i, (long long)g->pad0[i], (long long)g->pad1[i], (long long)span);
        if (!sp_resolve(g, i, mode, ceil_mode))
            return op_fail(ctx, n,
                           "attribute 'kernel_shape': the window spans %lld in spatial dim %d "
                           "but the padded input is only %lld",
                           (long long)span, i, (long long)(g->in[i] + g->pad0[i] + g->pad1[i]));
    }
    return WPK_OK;
}

wpk_status op_pool_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out) {
    sp_geom g;
    wpk_status st = pool_setup(ctx, n, in, &g);
    if (st) return st;
    bool flag;
    if (n->op == IR_OP_MAX_POOL) {
        if ((st = op_attr_flag(ctx, n, "storage_order", &flag))) return st;
    } else if ((st = op_attr_flag(ctx, n, "count_include_pad", &flag))) {
        return st;
    }
    if (n->op != IR_OP_MAX_POOL && n->nout > 1 && out[1])
        return op_fail(ctx, n, "AveragePool has one output, the node has %d", n->nout);
    int64_t dims[WPK_MAX_DIMS];
    int nd = sp_out_dims(&g, in[0]->dims[0], in[0]->dims[1], dims);
    op_set_shape(out[0], WPK_DTYPE_FLOAT32, nd, dims);
    if (n->nout > 1 && out[1]) op_set_shape(out[1], WPK_DTYPE_INT64, nd, dims);
    return WPK_OK;
}

typedef struct pool_job {
    const sp_geom *g;
    bool is_max, include_pad, col_major;
    int64_t xstride[SP_MAX]; /* row-major strides of one input plane */
    int64_t xsz, ysz;        /* elements of an input and an output plane */
    const float *x;
    float *y;
    int64_t *indices; /* MaxPool's Indices output, or NULL */
} pool_job;

/* One output element of plane x: the window's max (with the row-major offset of the first
 * max in *arg) or average. NaN propagates through max; an empty max window gives -inf. */
static float pool_one(const pool_job *job, const float *x, const int64_t *o, int64_t *arg) {
    const sp_geom *g = job->g;
    int ns = g->nsp, last = ns - 1;
    int64_t start[SP_MAX], j0[SP_MAX], j1[SP_MAX], j[SP_MAX], padded = 1, valid = 1;
    for (int d = 0; d < ns; d++) {
        start[d] = o[d] * g->stride[d] - g->pad0[d];
        sp_tap_range(g->kernel[d], g->dil[d], start[d], g->in[d], &j0[d], &j1[d]);
        valid *= j1[d] - j0[d];
        int64_t p0, p1;
        sp_tap_range(g->kernel[d], g->dil[d], start[d] + g->pad0[d],
                     g->in[d] + g->pad0[d] + g->pad1[d], &p0, &p1);
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
static int64_t to_col_major(const sp_geom *g, int64_t off) {
    int64_t r = 0, stride = 1, pos[SP_MAX];
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

/* Output plane p: every element's window. */
static void pool_plane(const pool_job *job, int64_t p) {
    const sp_geom *g = job->g;
    int64_t o[SP_MAX] = {0};
    for (int64_t i = 0; i < job->ysz; i++) {
        int64_t arg;
        job->y[p * job->ysz + i] = pool_one(job, job->x + p * job->xsz, o, &arg);
        if (job->indices) {
            /* Indices count from the start of X, across batch and channels too. */
            int64_t at = arg < 0 ? -1 : job->col_major ? to_col_major(g, arg) : arg;
            job->indices[p * job->ysz + i] = at < 0 ? -1 : p * job->xsz + at;
        }
        for (int d = g->nsp - 1; d >= 0; d--) {
            if (++o[d] < g->out[d]) break;
            o[d] = 0;
        }
    }
}

wpk_status op_pool_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                       ir_tensor *const *out) {
    sp_geom g;
    wpk_status st = pool_setup(ctx, n, in, &g);
    if (st) return st;
    const ir_tensor *x = in[0];
    pool_job job = {.g = &g, .is_max = n->op == IR_OP_MAX_POOL, .x = x->data, .y = out[0]->data};
    if ((st = op_attr_flag(ctx, n, "count_include_pad", &job.include_pad)) ||
        (st = op_attr_flag(ctx, n, "storage_order", &job.col_major)))
        return st;
    job.indices = job.is_max && n->nout > 1 && out[1] ? out[1]->data : NULL;
    job.xsz = job.ysz = 1;
    for (int d = g.nsp - 1; d >= 0; d--) {
        job.xstride[d] = job.xsz;
        job.xsz *= g.in[d];
        job.ysz *= g.out[d];
    }
    int64_t planes = x->dims[0] * x->dims[1];
    if (op_parallel(planes, 2)) {
#pragma omp parallel for schedule(static)
        for (int64_t p = 0; p < planes; p++) pool_plane(&job, p);
    } else {
        for (int64_t p = 0; p < planes; p++) pool_plane(&job, p);
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

/* The max (NaN wins) or mean of one plane of `size` elements. */
static float global_one(const float *xp, int64_t size, bool is_max) {
    if (is_max) {
        float best = -INFINITY;
        for (int64_t i = 0; i < size; i++)
            if (xp[i] > best || isnan(xp[i])) {
                best = xp[i];
                if (isnan(best)) break;
            }
        return best;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < size; i++) sum += xp[i];
    return (float)(sum / (double)size);
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
    if (op_parallel(planes, 2)) {
#pragma omp parallel for schedule(static)
        for (int64_t p = 0; p < planes; p++) yd[p] = global_one(xd + p * size, size, is_max);
    } else {
        for (int64_t p = 0; p < planes; p++) yd[p] = global_one(xd + p * size, size, is_max);
    }
    return WPK_OK;
}
