/* pad.c -- constant padding as a compute (see pad.h). */
#include "te/algo/pad.h"

te_tensor *te_pad(te_ctx *c, const char *name, te_tensor *x, const int64_t *before,
                  const int64_t *after, double value, const char *const *axis_names) {
    if (!x) return NULL;
    bool any = false;
    int64_t shape[TE_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        if (before[d] < 0 || after[d] < 0)
            return te_algo_fail(c, "pad '%s': dim %d has pads %lld, %lld (they must not be "
                                "negative)", name, d, (long long)before[d], (long long)after[d]);
        any |= before[d] || after[d];
        shape[d] = x->shape[d] + before[d] + after[d];
    }
    if (!any) return x;
    if (x->dtype != TE_F32) return te_algo_fail(c, "pad '%s': input '%s' is not float32", name,
                                                x->name);
    te_iter **axes = te_compute_axes(c, x->ndim, shape, axis_names);
    if (!axes) return NULL;
    const te_expr *idx[TE_MAX_DIMS], *inside = NULL;
    for (int d = 0; d < x->ndim; d++) {
        const te_expr *i = te_var(c, axes[d]);
        if (!before[d] && !after[d]) {
            idx[d] = i;
            continue;
        }
        /* only the sides that are padded need a test and a clamp */
        const te_expr *src = te_sub(c, i, te_int(c, before[d])), *test[2] = {NULL, NULL};
        if (before[d]) test[0] = te_cmp(c, TE_LE, te_int(c, before[d]), i);
        if (after[d]) test[1] = te_cmp(c, TE_LT, i, te_int(c, before[d] + x->shape[d]));
        for (int k = 0; k < 2; k++)
            if (test[k]) inside = inside ? te_and(c, inside, test[k]) : test[k];
        idx[d] = te_algo_clamp(c, src, before[d] ? 0 : INT64_MIN,
                               after[d] ? x->shape[d] - 1 : INT64_MAX);
    }
    const te_expr *body = te_select(c, inside, te_load(c, x, x->ndim, idx), te_float(c, value));
    return te_compute(c, name, x->ndim, shape, axes, body);
}
