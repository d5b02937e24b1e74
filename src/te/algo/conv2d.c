/* conv2d.c -- 2-D convolution, NCHW (see conv2d.h). */
#include "te/algo/conv2d.h"

#include <string.h>

#include "te/algo/pad.h"

te_conv2d_params te_conv2d_default_params(void) {
    return (te_conv2d_params){{1, 1}, {0, 0, 0, 0}, {1, 1}, 1};
}

bool te_conv2d_out_size(te_ctx *c, const char *op, const char *name, int64_t h, int64_t w,
                        int64_t kh, int64_t kw, const te_conv2d_params *p, int64_t *oh,
                        int64_t *ow) {
    for (int i = 0; i < 2; i++)
        if (p->stride[i] < 1 || p->dilation[i] < 1)
            return te_algo_reject(c, "%s '%s': stride %lld and dilation %lld in spatial dim %d "
                                  "(both must be at least 1)", op, name, (long long)p->stride[i],
                                  (long long)p->dilation[i], i);
    for (int i = 0; i < 4; i++)
        if (p->pad[i] < 0)
            return te_algo_reject(c, "%s '%s': pad %d is %lld (pads must not be negative)", op,
                                  name, i, (long long)p->pad[i]);
    const int64_t in[2] = {h, w}, k[2] = {kh, kw};
    int64_t out[2];
    for (int i = 0; i < 2; i++) {
        int64_t span = (k[i] - 1) * p->dilation[i] + 1, padded = in[i] + p->pad[i] + p->pad[i + 2];
        if (padded < span)
            return te_algo_reject(c, "%s '%s': spatial dim %d: the kernel spans %lld (with "
                                  "dilation) but the padded input is only %lld", op, name, i,
                                  (long long)span, (long long)padded);
        out[i] = (padded - span) / p->stride[i] + 1;
    }
    *oh = out[0];
    *ow = out[1];
    return true;
}

/* src[n, ic, oh*sh + kh*dh, ow*sw + kw*dw] * w[oc, rc, kh, kw] at the output axes ax, with
 * ic the group's first channel plus rc; the reduction axes it made (unit ones left out unless
 * keep_unit) in r[0..*nr). */
static const te_expr *product(te_ctx *c, te_tensor *src, te_tensor *w, const te_conv2d_params *p,
                              te_iter *const *ax, int64_t per_group, bool keep_unit, te_iter **r,
                              int *nr) {
    const int64_t cg = w->shape[1], kh = w->shape[2], kw = w->shape[3];
    te_iter *rc = keep_unit || cg > 1 ? te_reduce_axis(c, "rc", 0, cg) : NULL;
    te_iter *rh = keep_unit || kh > 1 ? te_reduce_axis(c, "kh", 0, kh) : NULL;
    te_iter *rw = keep_unit || kw > 1 ? te_reduce_axis(c, "kw", 0, kw) : NULL;
    *nr = 0;
    if (rc) r[(*nr)++] = rc;
    if (rh) r[(*nr)++] = rh;
    if (rw) r[(*nr)++] = rw;
    const te_expr *zero = te_int(c, 0);
    const te_expr *vrc = rc ? te_var(c, rc) : zero, *vkh = rh ? te_var(c, rh) : zero,
                  *vkw = rw ? te_var(c, rw) : zero, *voc = te_var(c, ax[1]);
    const te_expr *ic = vrc;
    if (p->groups > 1) ic = te_algo_affine(c, te_div(c, voc, te_int(c, per_group)), cg, vrc);
    const te_expr *ih = te_algo_affine(c, te_var(c, ax[2]), p->stride[0],
                                       te_mul(c, vkh, te_int(c, p->dilation[0])));
    const te_expr *iw = te_algo_affine(c, te_var(c, ax[3]), p->stride[1],
                                       te_mul(c, vkw, te_int(c, p->dilation[1])));
    const te_expr *xi[4] = {te_var(c, ax[0]), ic, ih, iw};
    const te_expr *wi[4] = {voc, vrc, vkh, vkw};
    return te_mul(c, te_load(c, src, 4, xi), te_load(c, w, 4, wi));
}

te_tensor *te_conv2d_nchw(te_ctx *c, const char *name, te_tensor *x, te_tensor *w,
                          const te_conv2d_params *p, const te_epilogue *ep, te_algo_parts *parts) {
    if (parts) memset(parts, 0, sizeof *parts);
    if (!te_algo_check_input(c, "conv2d", name, x, 4) ||
        !te_algo_check_input(c, "conv2d", name, w, 4))
        return NULL;
    const int64_t n = x->shape[0], ch = x->shape[1], cout = w->shape[0], cg = w->shape[1];
    const int64_t kh = w->shape[2], kw = w->shape[3], g = p->groups;
    if (g < 1 || ch % g || cout % g)
        return te_algo_fail(c, "conv2d '%s': %lld groups do not divide %lld input and %lld "
                            "output channels", name, (long long)g, (long long)ch,
                            (long long)cout);
    if (cg != ch / g)
        return te_algo_fail(c, "conv2d '%s': weight '%s' has %lld input channels per group but "
                            "input '%s' has %lld channels in %lld groups", name, w->name,
                            (long long)cg, x->name, (long long)ch, (long long)g);
    int64_t oh, ow;
    if (!te_conv2d_out_size(c, "conv2d", name, x->shape[2], x->shape[3], kh, kw, p, &oh, &ow))
        return NULL;
    const bool fused = !te_epilogue_empty(ep);

    const int64_t before[4] = {0, 0, p->pad[0], p->pad[1]};
    const int64_t after[4] = {0, 0, p->pad[2], p->pad[3]};
    te_tensor *src = te_pad(c, te_algo_name(c, name, "pad"), x, before, after, 0.0,
                            (const char *const[]){"n", "c", "h", "w"});
    if (!src) return NULL;

    const int64_t shape[4] = {n, cout, oh, ow};
    te_iter **ax = te_compute_axes(c, 4, shape, (const char *const[]){"n", "oc", "oh", "ow"});
    if (!ax) return NULL;
    te_iter *r[3];
    int nr;
    const te_expr *prod = product(c, src, w, p, ax, cout / g, false, r, &nr);
    if (!prod) return NULL;

    te_tensor *acc, *out;
    if (nr == 0) {
        /* no reduction: the epilogue goes straight into the one compute */
        const te_expr *v = te_epilogue_apply(c, name, ep, prod, 4, ax, te_var(c, ax[1]), cout,
                                             NULL);
        if (!v) return NULL;
        acc = out = te_compute(c, name, 4, shape, ax, v);
    } else {
        const te_expr *body = te_reduce(c, TE_REDUCE_SUM, prod, nr, r);
        acc = te_compute(c, fused ? te_algo_name(c, name, "acc") : name, 4, shape, ax, body);
        out = fused ? te_epilogue_compute(c, name, acc, ep, 1) : acc;
    }
    if (!out) return NULL;
    if (parts) {
        parts->out = out;
        parts->main = acc;
        parts->pad = src != x ? src : NULL;
        parts->epilogue = out != acc ? out : NULL;
    }
    return out;
}

te_tensor *te_conv2d_nchw_reduce(te_ctx *c, const char *name, te_tensor *src, te_tensor *w,
                                 const te_conv2d_params *p, const int64_t *shape,
                                 int64_t per_group) {
    if (!te_algo_check_input(c, "conv2d", name, src, 4) ||
        !te_algo_check_input(c, "conv2d", name, w, 4))
        return NULL;
    if (per_group < 1 || w->shape[0] != shape[1])
        return te_algo_fail(c, "conv2d '%s': weight '%s' has %lld output channels for %lld "
                            "outputs (%lld per group)", name, w->name, (long long)w->shape[0],
                            (long long)shape[1], (long long)per_group);
    te_iter **ax = te_compute_axes(c, 4, shape, (const char *const[]){"n", "oc", "oh", "ow"});
    if (!ax) return NULL;
    te_iter *r[3];
    int nr;
    const te_expr *prod = product(c, src, w, p, ax, per_group, true, r, &nr);
    const te_expr *body = prod ? te_reduce(c, TE_REDUCE_SUM, prod, nr, r) : NULL;
    return body ? te_compute(c, name, 4, shape, ax, body) : NULL;
}
