/* softmax.c -- softmax as max, exp-sum and divide computes (see softmax.h). */
#include "te/algo/softmax.h"

#include <stdio.h>
#include <string.h>

/* Data axes named d0, d1, ... for x's shape with dim `axis` replaced by `dim`. */
static te_iter **axes_like(te_ctx *c, const te_tensor *x, int axis, int64_t dim,
                           int64_t *shape) {
    char bufs[TE_MAX_DIMS][16];
    const char *names[TE_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) {
        shape[i] = i == axis ? dim : x->shape[i];
        snprintf(bufs[i], sizeof bufs[i], "d%d", i);
        names[i] = bufs[i];
    }
    return te_compute_axes(c, x->ndim, shape, names);
}

/* t[axes] with the axis' index replaced by `at`. */
static const te_expr *load_with(te_ctx *c, const te_tensor *t, te_iter *const *axes, int axis,
                                const te_expr *at) {
    const te_expr *idx[TE_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) idx[i] = i == axis ? at : te_var(c, axes[i]);
    return te_load(c, t, t->ndim, idx);
}

/* max(k: x[..., k, ...]) keeping the axis as dim 1. */
static te_tensor *row_max(te_ctx *c, const char *name, te_tensor *x, int axis, int64_t *sshape) {
    te_iter **ma = axes_like(c, x, axis, 1, sshape);
    te_iter *k = te_reduce_axis(c, "k", 0, x->shape[axis]);
    if (!ma || !k) return NULL;
    return te_compute(c, name, x->ndim, sshape, ma,
                      te_reduce(c, TE_REDUCE_MAX, load_with(c, x, ma, axis, te_var(c, k)), 1, &k));
}

static te_tensor *softmax(te_ctx *c, const char *name, te_tensor *x, int axis, bool split,
                          te_algo_parts *parts) {
    if (parts) memset(parts, 0, sizeof *parts);
    if (!x || x->dtype != TE_F32)
        return te_algo_fail(c, "softmax '%s': input '%s' must be float32", name,
                            x ? x->name : "(null)");
    if (axis < -x->ndim || axis >= x->ndim)
        return te_algo_fail(c, "softmax '%s': axis %d is out of range for %d dims", name, axis,
                            x->ndim);
    if (axis < 0) axis += x->ndim;
    const int64_t len = x->shape[axis];
    int64_t sshape[TE_MAX_DIMS], oshape[TE_MAX_DIMS];
    const te_expr *zero = te_int(c, 0);

    te_tensor *mx = row_max(c, te_algo_name(c, name, "max"), x, axis, sshape);
    te_tensor *smx = split ? row_max(c, te_algo_name(c, name, "sum_max"), x, axis, sshape) : mx;
    if (!mx || !smx) return NULL;

    te_iter **sa = axes_like(c, x, axis, 1, sshape);
    te_iter *k2 = te_reduce_axis(c, "k", 0, len);
    if (!sa || !k2) return NULL;
    const te_expr *e = te_call(c, TE_FN_EXP, te_sub(c, load_with(c, x, sa, axis, te_var(c, k2)),
                                                    load_with(c, smx, sa, axis, zero)), NULL);
    te_tensor *sum = te_compute(c, te_algo_name(c, name, "sum"), x->ndim, sshape, sa,
                                te_reduce(c, TE_REDUCE_SUM, e, 1, &k2));
    if (!sum) return NULL;

    te_iter **oa = axes_like(c, x, axis, len, oshape);
    if (!oa) return NULL;
    const te_expr *num = te_call(c, TE_FN_EXP, te_sub(c, load_with(c, x, oa, axis,
                                                                   te_var(c, oa[axis])),
                                                      load_with(c, mx, oa, axis, zero)), NULL);
    te_tensor *out = te_compute(c, name, x->ndim, oshape, oa,
                                te_div(c, num, load_with(c, sum, oa, axis, zero)));
    if (!out) return NULL;
    if (parts) {
        parts->out = parts->main = out;
        parts->stats[0] = mx;
        parts->stats[1] = sum;
        parts->stats[2] = split ? smx : NULL;
    }
    return out;
}

te_tensor *te_softmax(te_ctx *c, const char *name, te_tensor *x, int axis, te_algo_parts *parts) {
    return softmax(c, name, x, axis, false, parts);
}

te_tensor *te_softmax_split_max(te_ctx *c, const char *name, te_tensor *x, int axis,
                                te_algo_parts *parts) {
    return softmax(c, name, x, axis, true, parts);
}
