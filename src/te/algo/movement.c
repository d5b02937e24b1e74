/* movement.c -- Concat, Transpose, affine Slice and ReduceMean (see movement.h). */
#include "te/algo/movement.h"

#include <stdio.h>
#include <string.h>

te_tensor *te_concat(te_ctx *c, const char *name, te_tensor *const *xs, int n, int axis) {
    if (n < 1 || !xs[0] || axis < 0 || axis >= xs[0]->ndim)
        return te_algo_fail(c, "concat '%s': %d inputs along axis %d", name, n, axis);
    const int nd = xs[0]->ndim;
    int64_t shape[TE_MAX_DIMS];
    memcpy(shape, xs[0]->shape, sizeof(int64_t) * (size_t)nd);
    shape[axis] = 0;
    for (int i = 0; i < n; i++) {
        if (!te_algo_check_input(c, "concat", name, xs[i], nd)) return NULL;
        for (int d = 0; d < nd; d++)
            if (d != axis && xs[i]->shape[d] != shape[d])
                return te_algo_fail(c, "concat '%s': input '%s' has %lld in dim %d, not %lld",
                                    name, xs[i]->name, (long long)xs[i]->shape[d], d,
                                    (long long)shape[d]);
        shape[axis] += xs[i]->shape[axis];
    }
    te_iter **ax = te_compute_axes(c, nd, shape, NULL);
    if (!ax) return NULL;
    const te_expr *pos = te_var(c, ax[axis]), *v = NULL;
    /* from the last input back: select(pos < end_i, x_i, later) */
    int64_t end = shape[axis];
    for (int i = n - 1; i >= 0; i--) {
        const int64_t len = xs[i]->shape[axis], off = end - len;
        const te_expr *idx[TE_MAX_DIMS];
        for (int d = 0; d < nd; d++)
            idx[d] = d == axis ? te_algo_clamp(c, te_sub(c, pos, te_int(c, off)), 0, len - 1)
                               : te_var(c, ax[d]);
        const te_expr *load = te_load(c, xs[i], nd, idx);
        v = !v ? load : te_select(c, te_cmp(c, TE_LT, pos, te_int(c, end)), load, v);
        end = off;
    }
    return v ? te_compute(c, name, nd, shape, ax, v) : NULL;
}

te_tensor *te_transpose(te_ctx *c, const char *name, te_tensor *x, const int *perm) {
    if (!x) return te_algo_fail(c, "transpose '%s': an input is missing", name);
    const int nd = x->ndim;
    int64_t shape[TE_MAX_DIMS] = {0};
    bool seen[TE_MAX_DIMS] = {0};
    for (int d = 0; d < nd; d++) {
        if (perm[d] < 0 || perm[d] >= nd || seen[perm[d]])
            return te_algo_fail(c, "transpose '%s': perm is not a permutation of %d axes", name,
                                nd);
        seen[perm[d]] = true;
        shape[d] = x->shape[perm[d]];
    }
    te_iter **ax = te_compute_axes(c, nd, shape, NULL);
    if (!ax) return NULL;
    const te_expr *idx[TE_MAX_DIMS];
    for (int d = 0; d < nd; d++) idx[perm[d]] = te_var(c, ax[d]);
    const te_expr *v = te_load(c, x, nd, idx);
    return v ? te_compute(c, name, nd, shape, ax, v) : NULL;
}

te_tensor *te_slice_affine(te_ctx *c, const char *name, te_tensor *x, const int64_t *shape,
                           const int64_t *start, const int64_t *step) {
    if (!x) return te_algo_fail(c, "slice '%s': an input is missing", name);
    const int nd = x->ndim;
    for (int d = 0; d < nd; d++) {
        const int64_t last = start[d] + step[d] * (shape[d] - 1);
        if (shape[d] < 1 || start[d] < 0 || start[d] >= x->shape[d] || last < 0 ||
            last >= x->shape[d])
            return te_algo_fail(c, "slice '%s': dim %d reads outside '%s'", name, d, x->name);
    }
    te_iter **ax = te_compute_axes(c, nd, shape, NULL);
    if (!ax) return NULL;
    const te_expr *idx[TE_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        idx[d] = te_add(c, te_mul(c, te_var(c, ax[d]), te_int(c, step[d])), te_int(c, start[d]));
    const te_expr *v = te_load(c, x, nd, idx);
    return v ? te_compute(c, name, nd, shape, ax, v) : NULL;
}

te_tensor *te_gather_affine(te_ctx *c, const char *name, te_tensor *x, int axis, int nidx,
                            const int64_t *idx_dims, int64_t start, int64_t step) {
    if (!x) return te_algo_fail(c, "gather '%s': an input is missing", name);
    const int nd = x->ndim - 1 + nidx;
    if (axis < 0 || axis >= x->ndim || nidx < 0 || nd > TE_MAX_DIMS)
        return te_algo_fail(c, "gather '%s': axis %d of %d dims with %d index dims", name, axis,
                            x->ndim, nidx);
    int64_t shape[TE_MAX_DIMS], count = 1;
    for (int d = 0; d < axis; d++) shape[d] = x->shape[d];
    for (int d = 0; d < nidx; d++) shape[axis + d] = idx_dims[d], count *= idx_dims[d];
    for (int d = axis + 1; d < x->ndim; d++) shape[d - 1 + nidx] = x->shape[d];
    const int64_t last = start + step * (count - 1);
    if (count < 1 || start < 0 || start >= x->shape[axis] || last < 0 || last >= x->shape[axis])
        return te_algo_fail(c, "gather '%s': the indices read outside dim %d of '%s'", name, axis,
                            x->name);
    const int on = nd ? nd : 1;
    if (!nd) shape[0] = 1;
    te_iter **ax = te_compute_axes(c, on, shape, NULL);
    if (!ax) return NULL;
    /* the flat number of the index the output's index dims name */
    const te_expr *j = te_int(c, 0);
    for (int d = 0; d < nidx; d++)
        j = te_add(c, te_mul(c, j, te_int(c, idx_dims[d])), te_var(c, ax[axis + d]));
    const te_expr *idx[TE_MAX_DIMS];
    for (int d = 0; d < axis; d++) idx[d] = te_var(c, ax[d]);
    idx[axis] = te_add(c, te_mul(c, j, te_int(c, step)), te_int(c, start));
    for (int d = axis + 1; d < x->ndim; d++) idx[d] = te_var(c, ax[d - 1 + nidx]);
    const te_expr *v = te_load(c, x, x->ndim, idx);
    return v ? te_compute(c, name, on, shape, ax, v) : NULL;
}

te_tensor *te_reduce_mean(te_ctx *c, const char *name, te_tensor *x, const bool *reduced,
                          bool keep, te_algo_parts *parts) {
    if (parts) memset(parts, 0, sizeof *parts);
    if (!x) return te_algo_fail(c, "reduce_mean '%s': an input is missing", name);
    int64_t shape[TE_MAX_DIMS], count = 1;
    int nd = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (reduced[d]) count *= x->shape[d];
        if (!reduced[d] || keep) shape[nd++] = reduced[d] ? 1 : x->shape[d];
    }
    if (nd == 0) shape[nd++] = 1; /* every axis averaged away: one element */
    te_iter **ax = te_compute_axes(c, nd, shape, NULL);
    if (!ax) return NULL;
    te_iter *raxes[TE_MAX_DIMS];
    int nr = 0;
    const te_expr *idx[TE_MAX_DIMS];
    for (int d = 0, k = 0; d < x->ndim; d++) {
        if (reduced[d]) {
            char rname[16];
            snprintf(rname, sizeof rname, "r%d", d);
            raxes[nr] = te_reduce_axis(c, rname, 0, x->shape[d]);
            if (!raxes[nr]) return NULL;
            idx[d] = te_var(c, raxes[nr++]);
            if (keep) k++;
        } else {
            idx[d] = te_var(c, ax[k++]);
        }
    }
    const te_expr *sum = te_reduce(c, TE_REDUCE_SUM, te_load(c, x, x->ndim, idx), nr, raxes);
    te_tensor *acc = sum ? te_compute(c, te_algo_name(c, name, "sum"), nd, shape, ax, sum) : NULL;
    te_iter **ya = te_compute_axes(c, nd, shape, NULL);
    if (!acc || !ya) return NULL;
    const te_expr *yi[TE_MAX_DIMS];
    for (int d = 0; d < nd; d++) yi[d] = te_var(c, ya[d]);
    const te_expr *v = te_div(c, te_load(c, acc, nd, yi), te_float(c, (double)count));
    te_tensor *out = v ? te_compute(c, name, nd, shape, ya, v) : NULL;
    if (out && parts) {
        parts->main = acc;
        parts->out = parts->epilogue = out;
    }
    return out;
}
