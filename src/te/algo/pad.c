/* pad.c -- padding as a compute: constant (a select around the input) and every mode of ONNX's
 * Pad (see pad.h). */
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

/* The input index (within the axis, before lo is added) that output index o reads. */
static const te_expr *mode_source(te_ctx *c, const te_pad_axis *a, te_pad_mode mode,
                                  const te_expr *o) {
    const te_expr *j = te_sub(c, o, te_int(c, a->before));
    const int64_t len = a->len;
    if (mode == TE_PAD_CONSTANT || mode == TE_PAD_EDGE) return te_algo_clamp(c, j, 0, len - 1);
    const te_expr *below = te_cmp(c, TE_LT, j, te_int(c, 0));
    const te_expr *above = te_cmp(c, TE_LE, te_int(c, len), j);
    const te_expr *lo_side, *hi_side;
    if (mode == TE_PAD_REFLECT) {
        lo_side = te_sub(c, te_int(c, 0), j);
        hi_side = te_sub(c, te_int(c, 2 * (len - 1)), j);
    } else {
        lo_side = te_add(c, j, te_int(c, len));
        hi_side = te_sub(c, j, te_int(c, len));
    }
    return te_select(c, below, lo_side, te_select(c, above, hi_side, j));
}

te_tensor *te_pad_any(te_ctx *c, const char *name, te_tensor *x, const te_pad_axis *ax,
                       te_pad_mode mode, double value) {
    if (!x) return NULL;
    if (x->dtype != TE_F32)
        return te_algo_fail(c, "pad '%s': input '%s' is not float32", name, x->name);
    int64_t shape[TE_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        const te_pad_axis *a = &ax[d];
        const int64_t after = a->out - a->before - a->len;
        const int64_t most = mode == TE_PAD_REFLECT ? a->len - 1 : mode == TE_PAD_WRAP ? a->len
                                                                                     : INT64_MAX;
        if (a->before < 0 || after < 0 || a->lo < 0 || a->len < 1 || a->lo + a->len > x->shape[d])
            return te_algo_fail(c, "pad '%s': dim %d reads [%lld, %lld) of %lld with %lld "
                                "before and %lld after", name, d, (long long)a->lo,
                                (long long)(a->lo + a->len), (long long)x->shape[d],
                                (long long)a->before, (long long)after);
        if (a->before > most || after > most)
            return te_algo_fail(c, "pad '%s': dim %d pads %lld and %lld around %lld elements "
                                "(at most %lld in this mode)", name, d, (long long)a->before,
                                (long long)after, (long long)a->len, (long long)most);
        shape[d] = a->out;
    }
    te_iter **axes = te_compute_axes(c, x->ndim, shape, NULL);
    if (!axes) return NULL;
    const te_expr *idx[TE_MAX_DIMS], *inside = NULL;
    for (int d = 0; d < x->ndim; d++) {
        const te_pad_axis *a = &ax[d];
        const te_expr *o = te_var(c, axes[d]);
        const bool padded = a->before || a->out != a->len;
        idx[d] = padded ? te_add(c, mode_source(c, a, mode, o), te_int(c, a->lo))
                        : te_add(c, o, te_int(c, a->lo));
        if (mode != TE_PAD_CONSTANT || !padded) continue;
        const te_expr *in = te_and(c, te_cmp(c, TE_LE, te_int(c, a->before), o),
                                   te_cmp(c, TE_LT, o, te_int(c, a->before + a->len)));
        inside = inside ? te_and(c, inside, in) : in;
    }
    const te_expr *load = te_load(c, x, x->ndim, idx);
    const te_expr *body = inside ? te_select(c, inside, load, te_float(c, value)) : load;
    return te_compute(c, name, x->ndim, shape, axes, body);
}
