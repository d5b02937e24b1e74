/* pad.c -- constant padding as a compute (see pad.h). */
#include "te/algo/pad.h"

te_tensor *te_pad(te_ctx *c, const char *name, te_tensor *x, const int64_t *before,
                  const int64_t *after, double value, const char *const *axis_names) {
    if (!x) return NULL;
    int64_t shape[TE_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        if (before[d] < 0 || after[d] < 0)
            return te_algo_fail(c, "pad '%s': dim %d has pads %lld, %lld (they must not be "
                                "negative)", name, d, (long long)before[d], (long long)after[d]);
        shape[d] = x->shape[d] + before[d] + after[d];
    }
    return te_pad_to(c, name, x, before, shape, value, axis_names);
}

te_tensor *te_pad_to(te_ctx *c, const char *name, te_tensor *x, const int64_t *before,
                     const int64_t *shape, double value, const char *const *axis_names) {
    if (!x) return NULL;
    bool any = false;
    for (int d = 0; d < x->ndim; d++) {
        if (before[d] < 0 || shape[d] < 1)
            return te_algo_fail(c, "pad '%s': dim %d has pad %lld before and extent %lld (the "
                                "pad must not be negative, the extent at least 1)", name, d,
                                (long long)before[d], (long long)shape[d]);
        any |= before[d] || shape[d] != x->shape[d];
    }
    if (!any) return x;
    if (x->dtype != TE_F32) return te_algo_fail(c, "pad '%s': input '%s' is not float32", name,
                                                x->name);
    te_iter **axes = te_compute_axes(c, x->ndim, shape, axis_names);
    if (!axes) return NULL;
    const te_expr *idx[TE_MAX_DIMS], *inside = NULL;
    for (int d = 0; d < x->ndim; d++) {
        const te_expr *i = te_var(c, axes[d]);
        const bool after = before[d] + x->shape[d] < shape[d];
        if (!before[d] && !after) {
            idx[d] = i;
            continue;
        }
        /* only the sides that are padded need a test and a clamp */
        const te_expr *src = te_sub(c, i, te_int(c, before[d])), *test[2] = {NULL, NULL};
        if (before[d]) test[0] = te_cmp(c, TE_LE, te_int(c, before[d]), i);
        if (after) test[1] = te_cmp(c, TE_LT, i, te_int(c, before[d] + x->shape[d]));
        for (int k = 0; k < 2; k++)
            if (test[k]) inside = inside ? te_and(c, inside, test[k]) : test[k];
        idx[d] = te_algo_clamp(c, src, before[d] ? 0 : INT64_MIN,
                               after ? x->shape[d] - 1 : INT64_MAX);
    }
    const te_expr *load = te_load(c, x, x->ndim, idx);
    const te_expr *body = inside ? te_select(c, inside, load, te_float(c, value)) : load;
    return te_compute(c, name, x->ndim, shape, axes, body);
}
