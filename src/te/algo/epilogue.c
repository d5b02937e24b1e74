/* epilogue.c -- bias, residual and activation as expressions over a producer's element (the
 * design is in epilogue.h). */
#include "te/algo/epilogue.h"

#include <float.h>

te_act te_act_default(te_act_kind kind) {
    te_act a = {kind, 0.0f, 0.0f, -FLT_MAX, FLT_MAX};
    if (kind == TE_ACT_LEAKY_RELU) a.alpha = 0.01f;
    if (kind == TE_ACT_HARD_SIGMOID) {
        a.alpha = 0.2f;
        a.beta = 0.5f;
    }
    return a;
}

bool te_epilogue_empty(const te_epilogue *ep) {
    return !ep || (!ep->bias && !ep->residual && ep->act.kind == TE_ACT_NONE);
}

static const te_expr *f(te_ctx *c, double v) { return te_float(c, v); }

/* max(v, 0). Float max/min keep NaN from their first operand (the code generators emit
 * max(a, b) as a < b ? b : a), so NaN passes through as ops/activation.h does; and unlike a
 * select over the loaded value, min/max vectorize. */
static const te_expr *relu(te_ctx *c, const te_expr *v) { return te_max(c, v, f(c, 0.0)); }

/* Clamp to [lo, hi], NaN kept; hi wins when lo > hi, as ONNX's Min(hi, Max(v, lo)). */
static const te_expr *clamp(te_ctx *c, const te_expr *v, double lo, double hi) {
    return te_min(c, te_max(c, v, f(c, lo)), f(c, hi));
}

static const te_expr *unit_clamp(te_ctx *c, const te_expr *t) { return clamp(c, t, 0.0, 1.0); }

static const te_expr *sigmoid(te_ctx *c, const te_expr *v) {
    /* exp(-v) overflows to inf for very negative v, and 1 / inf is the right limit, 0 */
    return te_div(c, f(c, 1.0), te_add(c, f(c, 1.0), te_call(c, TE_FN_EXP, te_sub(c, f(c, 0.0), v),
                                                             NULL)));
}

const te_expr *te_activation(te_ctx *c, const te_act *a, const te_expr *v) {
    switch (a->kind) {
    case TE_ACT_NONE: return v;
    case TE_ACT_RELU: return relu(c, v);
    case TE_ACT_LEAKY_RELU:
        return te_select(c, te_cmp(c, TE_LT, v, f(c, 0.0)), te_mul(c, v, f(c, a->alpha)), v);
    case TE_ACT_CLIP: return clamp(c, v, a->lo, a->hi);
    case TE_ACT_HARD_SIGMOID:
        return unit_clamp(c, te_add(c, te_mul(c, v, f(c, a->alpha)), f(c, a->beta)));
    case TE_ACT_HARD_SWISH:
        return te_mul(c, v, unit_clamp(c, te_add(c, te_mul(c, v, f(c, 1.0 / 6.0)), f(c, 0.5))));
    case TE_ACT_SIGMOID: return sigmoid(c, v);
    case TE_ACT_SILU: return te_mul(c, v, sigmoid(c, v));
    case TE_ACT_GELU:
        return te_mul(c, te_mul(c, v, f(c, 0.5)),
                      te_add(c, f(c, 1.0), te_call(c, TE_FN_ERF,
                                                   te_mul(c, v, f(c, 0.70710678118654752440)),
                                                   NULL)));
    case TE_ACT_TANH: return te_call(c, TE_FN_TANH, v, NULL);
    }
    return v;
}

const te_expr *te_epilogue_apply(te_ctx *c, const char *name, const te_epilogue *ep,
                                 const te_expr *value, int ndim, te_iter *const *axes,
                                 const te_expr *channel, int64_t channels, const te_expr *valid) {
    if (!value) return NULL;
    if (te_epilogue_empty(ep)) return value;
    const te_expr *v = value;
    if (ep->bias) {
        const te_tensor *b = ep->bias;
        if (b->dtype != TE_F32 || b->ndim != 1 || b->shape[0] != channels) {
            te_algo_fail(c, "epilogue of '%s': bias '%s' must be 1-D float32 with %lld values "
                         "(one per output channel)", name, b->name, (long long)channels);
            return NULL;
        }
        v = te_add(c, v, te_load(c, b, 1, &channel));
    }
    if (ep->residual) {
        const te_tensor *z = ep->residual;
        bool ok = z->dtype == TE_F32 && z->ndim == ndim;
        for (int i = 0; ok && i < ndim; i++) ok = z->shape[i] == axes[i]->extent;
        if (!ok) {
            te_algo_fail(c, "epilogue of '%s': residual '%s' must be float32 with the output's "
                         "shape", name, z->name);
            return NULL;
        }
        const te_expr *idx[TE_MAX_DIMS];
        for (int i = 0; i < ndim; i++) idx[i] = te_var(c, axes[i]);
        v = te_add(c, v, te_load(c, z, ndim, idx));
    }
    v = te_activation(c, &ep->act, v);
    if (valid) v = te_select(c, valid, v, f(c, 0.0));
    return v;
}

te_tensor *te_epilogue_compute(te_ctx *c, const char *name, te_tensor *producer,
                               const te_epilogue *ep, int channel_axis) {
    return producer ? te_epilogue_compute_to(c, name, producer, producer->shape, ep, channel_axis)
                    : NULL;
}

te_tensor *te_epilogue_compute_to(te_ctx *c, const char *name, te_tensor *producer,
                                  const int64_t *shape, const te_epilogue *ep, int channel_axis) {
    if (!producer) return NULL;
    if (channel_axis < 0 || channel_axis >= producer->ndim)
        return te_algo_fail(c, "epilogue of '%s': channel axis %d of a %d-d tensor", name,
                            channel_axis, producer->ndim);
    for (int i = 0; i < producer->ndim; i++)
        if (shape[i] < 1 || shape[i] > producer->shape[i])
            return te_algo_fail(c, "epilogue of '%s': extent %lld of axis %d is outside '%s' "
                                "(%lld)", name, (long long)shape[i], i, producer->name,
                                (long long)producer->shape[i]);
    const char *names[TE_MAX_DIMS];
    for (int i = 0; i < producer->ndim; i++)
        names[i] = producer->kind == TE_COMPUTE ? producer->axes[i]->name : NULL;
    te_iter **axes = te_compute_axes(c, producer->ndim, shape, names);
    if (!axes) return NULL;
    const te_expr *idx[TE_MAX_DIMS];
    for (int i = 0; i < producer->ndim; i++) idx[i] = te_var(c, axes[i]);
    const te_expr *v = te_load(c, producer, producer->ndim, idx);
    v = te_epilogue_apply(c, name, ep, v, producer->ndim, axes, idx[channel_axis],
                          shape[channel_axis], NULL);
    return v ? te_compute(c, name, producer->ndim, shape, axes, v) : NULL;
}
