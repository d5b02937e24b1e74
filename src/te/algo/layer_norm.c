/* layer_norm.c -- layer normalization as mean, variance and normalize computes (see
 * layer_norm.h). */
#include "te/algo/layer_norm.h"

#include <stdio.h>
#include <string.h>

/* Data axes d0, d1, ... of x's shape, the dims from `axis` on set to 1 when `stats`. */
static te_iter **axes_of(te_ctx *c, const te_tensor *x, int axis, bool stats, int64_t *shape) {
    char bufs[TE_MAX_DIMS][16];
    const char *names[TE_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) {
        shape[i] = stats && i >= axis ? 1 : x->shape[i];
        snprintf(bufs[i], sizeof bufs[i], "d%d", i);
        names[i] = bufs[i];
    }
    return te_compute_axes(c, x->ndim, shape, names);
}

/* One reduction axis per normalized dim (r0, r1, ...). */
static bool reduce_axes(te_ctx *c, const te_tensor *x, int axis, te_iter **r) {
    for (int i = axis; i < x->ndim; i++) {
        char name[16];
        snprintf(name, sizeof name, "r%d", i - axis);
        if (!(r[i - axis] = te_reduce_axis(c, name, 0, x->shape[i]))) return false;
    }
    return true;
}

/* x's element with the dims before `axis` from `lead` and the rest from `tail`. */
static const te_expr *load_x(te_ctx *c, const te_tensor *x, int axis, te_iter *const *lead,
                             const te_expr *const *tail) {
    const te_expr *idx[TE_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) idx[i] = i < axis ? te_var(c, lead[i]) : tail[i - axis];
    return te_load(c, x, x->ndim, idx);
}

/* A statistic (shape: dims from axis are 1) at the leading axes. */
static const te_expr *load_stat(te_ctx *c, const te_tensor *s, int axis, te_iter *const *lead) {
    const te_expr *idx[TE_MAX_DIMS];
    for (int i = 0; i < s->ndim; i++) idx[i] = i < axis ? te_var(c, lead[i]) : te_int(c, 0);
    return te_load(c, s, s->ndim, idx);
}

static bool broadcasts(const te_tensor *p, const te_tensor *x, int axis) {
    int nd = x->ndim - axis;
    if (p->dtype != TE_F32 || p->ndim > nd) return false;
    for (int i = 0; i < p->ndim; i++) {
        int64_t want = x->shape[axis + nd - p->ndim + i];
        if (p->shape[i] != 1 && p->shape[i] != want) return false;
    }
    return true;
}

/* p broadcast to the normalized dims at the output's axes. */
static const te_expr *load_param(te_ctx *c, const te_tensor *p, const te_tensor *x,
                                 te_iter *const *ax) {
    const te_expr *idx[TE_MAX_DIMS];
    int off = x->ndim - p->ndim;
    for (int i = 0; i < p->ndim; i++)
        idx[i] = p->shape[i] == 1 ? te_int(c, 0) : te_var(c, ax[off + i]);
    return te_load(c, p, p->ndim, idx);
}

/* The mean of x's rows: "<name>.<what>". */
static te_tensor *row_mean(te_ctx *c, const char *name, const char *what, te_tensor *x, int axis,
                           const te_expr *inv_d) {
    const int nd = x->ndim - axis;
    int64_t sshape[TE_MAX_DIMS];
    te_iter **ma = axes_of(c, x, axis, true, sshape), *r1[TE_MAX_DIMS];
    if (!ma || !reduce_axes(c, x, axis, r1)) return NULL;
    const te_expr *t1[TE_MAX_DIMS];
    for (int i = 0; i < nd; i++) t1[i] = te_var(c, r1[i]);
    return te_compute(c, te_algo_name(c, name, what), x->ndim, sshape, ma,
                      te_reduce(c, TE_REDUCE_SUM, te_mul(c, load_x(c, x, axis, ma, t1), inv_d),
                                nd, r1));
}

static te_tensor *layer_norm(te_ctx *c, const char *name, te_tensor *x, te_tensor *scale,
                             te_tensor *bias, int axis, float epsilon, bool split_mean,
                             te_algo_parts *parts) {
    if (parts) memset(parts, 0, sizeof *parts);
    if (!x || x->dtype != TE_F32)
        return te_algo_fail(c, "layer_norm '%s': input '%s' must be float32", name,
                            x ? x->name : "(null)");
    if (axis < -x->ndim || axis >= x->ndim)
        return te_algo_fail(c, "layer_norm '%s': axis %d is out of range for %d dims", name,
                            axis, x->ndim);
    if (axis < 0) axis += x->ndim;
    if (!scale) return te_algo_fail(c, "layer_norm '%s': scale is missing", name);
    const te_tensor *bad = !broadcasts(scale, x, axis)        ? scale
                           : bias && !broadcasts(bias, x, axis) ? bias
                                                                : NULL;
    if (bad)
        return te_algo_fail(c, "layer_norm '%s': %s '%s' must be float32 and broadcast to the "
                            "normalized dims (x's dims from axis %d on)", name,
                            bad == scale ? "scale" : "bias", bad->name, axis);
    const int nd = x->ndim - axis;
    int64_t d = 1;
    for (int i = axis; i < x->ndim; i++) d *= x->shape[i];
    const te_expr *inv_d = te_float(c, 1.0 / (double)d);
    int64_t sshape[TE_MAX_DIMS], oshape[TE_MAX_DIMS];

    te_tensor *mean = row_mean(c, name, "mean", x, axis, inv_d);
    te_tensor *var_mean = split_mean ? row_mean(c, name, "var_mean", x, axis, inv_d) : mean;
    if (!mean || !var_mean) return NULL;

    te_iter **va = axes_of(c, x, axis, true, sshape), *r2[TE_MAX_DIMS];
    if (!va || !reduce_axes(c, x, axis, r2)) return NULL;
    const te_expr *t2[TE_MAX_DIMS];
    for (int i = 0; i < nd; i++) t2[i] = te_var(c, r2[i]);
    const te_expr *dev = te_sub(c, load_x(c, x, axis, va, t2), load_stat(c, var_mean, axis, va));
    te_tensor *var = te_compute(c, te_algo_name(c, name, "var"), x->ndim, sshape, va,
                                te_reduce(c, TE_REDUCE_SUM, te_mul(c, te_mul(c, dev, dev), inv_d),
                                          nd, r2));
    if (!var) return NULL;

    te_iter **oa = axes_of(c, x, axis, false, oshape);
    if (!oa) return NULL;
    const te_expr *t3[TE_MAX_DIMS];
    for (int i = 0; i < nd; i++) t3[i] = te_var(c, oa[axis + i]);
    const te_expr *inv_std = te_div(c, te_float(c, 1.0),
                                    te_call(c, TE_FN_SQRT, te_add(c, load_stat(c, var, axis, oa),
                                                                  te_float(c, epsilon)), NULL));
    const te_expr *v = te_mul(c, te_sub(c, load_x(c, x, axis, oa, t3),
                                        load_stat(c, mean, axis, oa)), inv_std);
    v = te_mul(c, v, load_param(c, scale, x, oa));
    if (bias) v = te_add(c, v, load_param(c, bias, x, oa));
    te_tensor *out = te_compute(c, name, x->ndim, oshape, oa, v);
    if (!out) return NULL;
    if (parts) {
        parts->out = parts->main = out;
        parts->stats[0] = mean;
        parts->stats[1] = var;
        if (split_mean) parts->stats[2] = var_mean;
    }
    return out;
}

te_tensor *te_layer_norm(te_ctx *c, const char *name, te_tensor *x, te_tensor *scale,
                         te_tensor *bias, int axis, float epsilon, te_algo_parts *parts) {
    return layer_norm(c, name, x, scale, bias, axis, epsilon, false, parts);
}

te_tensor *te_layer_norm_split_mean(te_ctx *c, const char *name, te_tensor *x, te_tensor *scale,
                                    te_tensor *bias, int axis, float epsilon,
                                    te_algo_parts *parts) {
    return layer_norm(c, name, x, scale, bias, axis, epsilon, true, parts);
}

/* [rows, 1, lanes] = sum over groups of f(x[row, g, lane]) (f: x, or (x - mean)^2). */
static te_tensor *lane_sums(te_ctx *c, const char *name, te_tensor *x, te_tensor *mean) {
    const int64_t shape[3] = {x->shape[0], 1, x->shape[2]};
    te_iter **ax = te_compute_axes(c, 3, shape, (const char *const[]){"d0", "d1", "l"});
    te_iter *g = te_reduce_axis(c, "g", 0, x->shape[1]);
    if (!ax || !g) return NULL;
    const te_expr *v = te_load(c, x, 3, (const te_expr *[]){te_var(c, ax[0]), te_var(c, g),
                                                            te_var(c, ax[2])});
    if (mean) {
        v = te_sub(c, v, te_load(c, mean, 3, (const te_expr *[]){te_var(c, ax[0]), te_int(c, 0),
                                                                 te_int(c, 0)}));
        v = te_mul(c, v, v);
    }
    return te_compute(c, name, 3, shape, ax, te_reduce(c, TE_REDUCE_SUM, v, 1, &g));
}

/* [rows, 1, 1] = (sum over lanes of p[row, 0, lane]) / D. */
static te_tensor *lane_total(te_ctx *c, const char *name, te_tensor *p, const te_expr *inv_d) {
    const int64_t shape[3] = {p->shape[0], 1, 1};
    te_iter **ax = te_compute_axes(c, 3, shape, (const char *const[]){"d0", "d1", "d2"});
    te_iter *l = te_reduce_axis(c, "l", 0, p->shape[2]);
    if (!ax || !l) return NULL;
    const te_expr *v = te_load(c, p, 3, (const te_expr *[]){te_var(c, ax[0]), te_int(c, 0),
                                                            te_var(c, l)});
    return te_compute(c, name, 3, shape, ax, te_reduce(c, TE_REDUCE_SUM, te_mul(c, v, inv_d), 1,
                                                       &l));
}

te_tensor *te_layer_norm_lanes(te_ctx *c, const char *name, te_tensor *x, te_tensor *scale,
                               te_tensor *bias, float epsilon, te_algo_parts *parts,
                               te_tensor **lane_parts) {
    if (parts) memset(parts, 0, sizeof *parts);
    if (!x || x->dtype != TE_F32 || x->ndim != 3)
        return te_algo_fail(c, "layer_norm '%s': input '%s' must be float32 [rows, groups, "
                            "lanes]", name, x ? x->name : "(null)");
    if (!scale) return te_algo_fail(c, "layer_norm '%s': scale is missing", name);
    const te_tensor *params[2] = {scale, bias};
    for (int i = 0; i < 2; i++) {
        const te_tensor *p = params[i];
        if (p && (p->dtype != TE_F32 || p->ndim != 2 ||
                  !((p->shape[0] == x->shape[1] && p->shape[1] == x->shape[2]) ||
                    (p->shape[0] == 1 && p->shape[1] == 1))))
            return te_algo_fail(c, "layer_norm '%s': %s '%s' must be float32 [groups, lanes] "
                                "or [1, 1]", name, i ? "bias" : "scale", p->name);
    }
    const te_expr *inv_d = te_float(c, 1.0 / (double)(x->shape[1] * x->shape[2]));
    te_tensor *psum = lane_sums(c, te_algo_name(c, name, "lane_sum"), x, NULL);
    te_tensor *mean = psum ? lane_total(c, te_algo_name(c, name, "mean"), psum, inv_d) : NULL;
    te_tensor *pvar = mean ? lane_sums(c, te_algo_name(c, name, "lane_var"), x, mean) : NULL;
    te_tensor *var = pvar ? lane_total(c, te_algo_name(c, name, "var"), pvar, inv_d) : NULL;
    if (!var) return NULL;
    te_iter **oa = te_compute_axes(c, 3, x->shape, (const char *const[]){"d0", "d1", "d2"});
    if (!oa) return NULL;
    const te_expr *at[3] = {te_var(c, oa[0]), te_var(c, oa[1]), te_var(c, oa[2])};
    const te_expr *row[3] = {at[0], te_int(c, 0), te_int(c, 0)};
    const te_expr *inv_std = te_div(c, te_float(c, 1.0),
                                    te_call(c, TE_FN_SQRT, te_add(c, te_load(c, var, 3, row),
                                                                  te_float(c, epsilon)), NULL));
    const te_expr *v = te_mul(c, te_sub(c, te_load(c, x, 3, at), te_load(c, mean, 3, row)),
                              inv_std);
    for (int i = 0; i < 2; i++) {
        const te_tensor *p = params[i];
        if (!p) continue;
        const te_expr *pi[2] = {p->shape[0] == 1 ? te_int(c, 0) : at[1],
                                p->shape[1] == 1 ? te_int(c, 0) : at[2]};
        const te_expr *pv = te_load(c, p, 2, pi);
        v = i ? te_add(c, v, pv) : te_mul(c, v, pv);
    }
    te_tensor *out = te_compute(c, name, 3, x->shape, oa, v);
    if (!out) return NULL;
    if (parts) {
        parts->out = parts->main = out;
        parts->stats[0] = mean;
        parts->stats[1] = var;
    }
    if (lane_parts) {
        lane_parts[0] = psum;
        lane_parts[1] = pvar;
    }
    return out;
}
