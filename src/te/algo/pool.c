/* pool.c -- max/average pooling and global pooling (see pool.h). */
#include "te/algo/pool.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "te/algo/pad.h"

#define OP "pool2d"

te_pool2d_params te_pool2d_default_params(te_pool_kind kind, int64_t kh, int64_t kw) {
    return (te_pool2d_params){kind, {kh, kw}, {1, 1}, {0, 0, 0, 0}, {1, 1}, false, false};
}

/* How many of `k` taps (spacing d) of the window at output position o lie in [from, to):
 * ops/pool.c's tap_range, as arithmetic on o. */
static int64_t taps_in(int64_t o, int64_t s, int64_t p0, int64_t k, int64_t d, int64_t from,
                       int64_t to) {
    int64_t off = o * s - p0 - from, bound = to - from;
    int64_t lo = off >= 0 ? 0 : (-off + d - 1) / d, last = bound - 1 - off;
    int64_t hi = last < 0 ? 0 : last / d + 1;
    if (hi > k) hi = k;
    return hi > lo ? hi - lo : 0;
}

/* The same count as an expression of the output position variable o: with q = p0 + from,
 * lo = max(0, (d - 1 + q - o*s) / d) and hi = min(k, (to - from - 1 + q - o*s) / d + 1). */
static const te_expr *taps_expr(te_ctx *c, const te_expr *o, int64_t s, int64_t p0, int64_t k,
                                int64_t d, int64_t from, int64_t to) {
    const int64_t q = p0 + from;
    const te_expr *os = te_mul(c, o, te_int(c, s));
    const te_expr *lo, *hi;
    if (d == 1) {
        lo = te_sub(c, te_int(c, q), os);
        hi = te_sub(c, te_int(c, to - from + q), os);
    } else {
        lo = te_div(c, te_sub(c, te_int(c, d - 1 + q), os), te_int(c, d));
        hi = te_add(c, te_div(c, te_sub(c, te_int(c, to - from - 1 + q), os), te_int(c, d)),
                    te_int(c, 1));
    }
    lo = te_max(c, te_int(c, 0), lo);
    hi = te_min(c, te_int(c, k), hi);
    return te_max(c, te_sub(c, hi, lo), te_int(c, 0));
}

te_tensor *te_pool2d(te_ctx *c, const char *name, te_tensor *x, const te_pool2d_params *p,
                     te_algo_parts *parts) {
    if (parts) memset(parts, 0, sizeof *parts);
    if (!te_algo_check_input(c, OP, name, x, 4)) return NULL;
    int64_t out[2], after[2];
    for (int i = 0; i < 2; i++) {
        const int64_t k = p->kernel[i], s = p->stride[i], d = p->dilation[i], in = x->shape[2 + i];
        const int64_t p0 = p->pad[i], p1 = p->pad[i + 2];
        if (k < 1 || s < 1 || d < 1)
            return te_algo_fail(c, OP " '%s': kernel %lld, stride %lld, dilation %lld in spatial "
                                "dim %d (each must be at least 1)", name, (long long)k,
                                (long long)s, (long long)d, i);
        const int64_t span = (k - 1) * d + 1;
        if (p0 < 0 || p1 < 0 || p0 >= span || p1 >= span)
            return te_algo_fail(c, OP " '%s': pads in spatial dim %d (%lld, %lld) must be in [0, "
                                "%lld), smaller than the window", name, i, (long long)p0,
                                (long long)p1, (long long)span);
        const int64_t room = in + p0 + p1 - span;
        if (room < 0)
            return te_algo_fail(c, OP " '%s': the window spans %lld in spatial dim %d but the "
                                "padded input is only %lld", name, (long long)span, i,
                                (long long)(in + p0 + p1));
        if (p->ceil_mode) {
            out[i] = (room + s - 1) / s + 1;
            if ((out[i] - 1) * s >= in + p0) out[i]--;
        } else {
            out[i] = room / s + 1;
        }
        /* the padded tensor covers every window, ceil_mode's overhang included */
        int64_t end = (out[i] - 1) * s + span - p0 - in;
        after[i] = end > 0 ? end : 0;
    }
    const bool is_max = p->kind == TE_POOL_MAX;
    const int64_t before4[4] = {0, 0, p->pad[0], p->pad[1]}, after4[4] = {0, 0, after[0], after[1]};
    te_tensor *src = te_pad(c, te_algo_name(c, name, "pad"), x, before4, after4,
                            is_max ? -INFINITY : 0.0, (const char *const[]){"n", "c", "h", "w"});
    if (!src) return NULL;

    const int64_t shape[4] = {x->shape[0], x->shape[1], out[0], out[1]};
    te_iter **ax = te_compute_axes(c, 4, shape, (const char *const[]){"n", "c", "oh", "ow"});
    if (!ax) return NULL;
    te_iter *r[2];
    int nr = 0;
    const te_expr *tap[2];
    for (int i = 0; i < 2; i++) {
        te_iter *k = p->kernel[i] > 1 ? te_reduce_axis(c, i ? "kw" : "kh", 0, p->kernel[i]) : NULL;
        if (k) r[nr++] = k;
        tap[i] = te_algo_affine(c, te_var(c, ax[2 + i]), p->stride[i],
                                te_mul(c, k ? te_var(c, k) : te_int(c, 0),
                                       te_int(c, p->dilation[i])));
    }
    const te_expr *xi[4] = {te_var(c, ax[0]), te_var(c, ax[1]), tap[0], tap[1]};
    const te_expr *v = te_load(c, src, 4, xi);
    if (!v) return NULL;

    /* the divisor of an average: constant when every window counts as many elements */
    const te_expr *count = NULL;
    if (!is_max) {
        int64_t k0 = -1;
        bool same = true;
        const te_expr *dim_count[2];
        for (int i = 0; i < 2; i++) {
            const int64_t in = x->shape[2 + i], p0 = p->pad[i], p1 = p->pad[i + 2];
            const int64_t from = p->count_include_pad ? -p0 : 0;
            const int64_t to = p->count_include_pad ? in + p1 : in;
            int64_t first = taps_in(0, p->stride[i], p0, p->kernel[i], p->dilation[i], from, to);
            bool dim_same = true;
            for (int64_t o = 1; o < out[i] && dim_same; o++)
                dim_same = taps_in(o, p->stride[i], p0, p->kernel[i], p->dilation[i], from, to) ==
                           first;
            dim_count[i] = dim_same ? te_int(c, first)
                                    : taps_expr(c, te_var(c, ax[2 + i]), p->stride[i], p0,
                                                p->kernel[i], p->dilation[i], from, to);
            same &= dim_same;
            k0 = i ? k0 * first : first;
        }
        /* a float product of the two exact per-dim counts: no integer product of two clamped
         * terms for the loop simplifier to untangle */
        count = same ? te_float(c, (double)k0)
                     : te_mul(c, te_cast(c, te_t(TE_F32), dim_count[0]),
                              te_cast(c, te_t(TE_F32), dim_count[1]));
    }

    te_tensor *main, *outt;
    if (nr == 0) {
        main = outt = te_compute(c, name, 4, shape, ax, is_max ? v : te_div(c, v, count));
    } else {
        main = te_compute(c, is_max ? name : te_algo_name(c, name, "sum"), 4, shape, ax,
                          te_reduce(c, is_max ? TE_REDUCE_MAX : TE_REDUCE_SUM, v, nr, r));
        outt = main;
        if (!is_max && main) {
            te_iter **ex = te_compute_axes(c, 4, shape,
                                           (const char *const[]){"n", "c", "oh", "ow"});
            if (!ex) return NULL;
            const te_expr *idx[4];
            for (int i = 0; i < 4; i++) idx[i] = te_var(c, ex[i]);
            /* the count expression is over ax; rewrite it onto this compute's axes */
            const te_expr *cnt = count;
            for (int i = 2; i < 4; i++) cnt = te_substitute(c, cnt, ax[i], idx[i]);
            outt = te_compute(c, name, 4, shape, ex, te_div(c, te_load(c, main, 4, idx), cnt));
        }
    }
    if (!outt) return NULL;
    if (parts) {
        parts->out = outt;
        parts->main = main;
        parts->pad = src != x ? src : NULL;
        parts->epilogue = outt != main ? outt : NULL;
    }
    return outt;
}

te_tensor *te_global_pool(te_ctx *c, const char *name, te_tensor *x, te_pool_kind kind,
                          te_algo_parts *parts) {
    if (parts) memset(parts, 0, sizeof *parts);
    if (!x || x->dtype != TE_F32 || x->ndim < 3)
        return te_algo_fail(c, "global_pool '%s': input '%s' must be float32 [N, C, spatial...]",
                            name, x ? x->name : "(null)");
    const bool is_max = kind == TE_POOL_MAX;
    const int nsp = x->ndim - 2;
    int64_t shape[TE_MAX_DIMS], size = 1;
    const char *names[TE_MAX_DIMS] = {"n", "c"};
    char bufs[TE_MAX_DIMS][16];
    shape[0] = x->shape[0];
    shape[1] = x->shape[1];
    te_iter *r[TE_MAX_DIMS];
    for (int i = 0; i < nsp; i++) {
        shape[2 + i] = 1;
        char rname[16];
        if (nsp == 2) {
            names[2 + i] = i ? "w" : "h";
            snprintf(rname, sizeof rname, "%s", i ? "rw" : "rh");
        } else {
            snprintf(bufs[i], sizeof bufs[i], "s%d", i);
            names[2 + i] = bufs[i];
            snprintf(rname, sizeof rname, "r%d", i);
        }
        r[i] = te_reduce_axis(c, rname, 0, x->shape[2 + i]);
        size *= x->shape[2 + i];
    }
    te_iter **ax = te_compute_axes(c, x->ndim, shape, names);
    if (!ax) return NULL;
    const te_expr *idx[TE_MAX_DIMS];
    idx[0] = te_var(c, ax[0]);
    idx[1] = te_var(c, ax[1]);
    for (int i = 0; i < nsp; i++) idx[2 + i] = te_var(c, r[i]);
    const te_expr *body = te_reduce(c, is_max ? TE_REDUCE_MAX : TE_REDUCE_SUM,
                                    te_load(c, x, x->ndim, idx), nsp, r);
    te_tensor *main = te_compute(c, is_max ? name : te_algo_name(c, name, "sum"), x->ndim, shape,
                                 ax, body);
    te_tensor *out = main;
    if (!is_max && main) {
        te_iter **ex = te_compute_axes(c, x->ndim, shape, names);
        if (!ex) return NULL;
        for (int i = 0; i < x->ndim; i++) idx[i] = te_var(c, ex[i]);
        out = te_compute(c, name, x->ndim, shape, ex,
                         te_div(c, te_load(c, main, x->ndim, idx), te_float(c, (double)size)));
    }
    if (!out) return NULL;
    if (parts) {
        parts->out = out;
        parts->main = main;
        parts->epilogue = out != main ? out : NULL;
    }
    return out;
}
