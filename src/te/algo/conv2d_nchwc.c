/* conv2d_nchwc.c -- blocked-layout convolution, weight packing and layout transforms (see
 * conv2d_nchwc.h). */
#include "te/algo/conv2d_nchwc.h"

#include <string.h>

#include "te/algo/pad.h"

#define OP "conv2d_nchwc"

/* The checks of ops/blocked.c's nchwc_setup, on tensor shapes. */
static bool check_shapes(te_ctx *c, const char *name, const te_tensor *x, const te_tensor *w,
                         int64_t channels, int64_t g, bool *depthwise) {
    const int64_t cxb = x->shape[1], bi = x->ndim == 5 ? x->shape[4] : 1;
    const int64_t cob = w->shape[0], ckb = w->shape[1], wbi = w->shape[4], bo = w->shape[5];
    if (g < 1) return te_algo_reject(c, OP " '%s': %lld groups", name, (long long)g);
    if (channels > cob * bo || channels <= (cob - 1) * bo)
        return te_algo_reject(c, OP " '%s': %lld output channels but weight '%s' has %lld "
                              "blocks of %lld lanes", name, (long long)channels, w->name,
                              (long long)cob, (long long)bo);
    *depthwise = g > 1 && wbi == 1 && bi > 1;
    if (*depthwise) {
        if (ckb != 1 || bo != bi)
            return te_algo_reject(c, OP " '%s': a depthwise weight must be [C/x, 1, KH, KW, 1, "
                                  "x] with the input's block %lld as x", name, (long long)bi);
        if (cxb != cob)
            return te_algo_reject(c, OP " '%s': input '%s' has %lld channel blocks but the "
                                  "depthwise weight has %lld", name, x->name, (long long)cxb,
                                  (long long)cob);
        if (g != channels)
            return te_algo_reject(c, OP " '%s': a depthwise weight needs groups (%lld) equal to "
                                  "the channels (%lld)", name, (long long)g,
                                  (long long)channels);
        return true;
    }
    if (wbi != bi)
        return te_algo_reject(c, OP " '%s': weight '%s' is packed for input blocks of %lld "
                              "lanes but input '%s' has %lld", name, w->name, (long long)wbi,
                              x->name, (long long)bi);
    if (cob % g || (g > 1 && channels != cob * bo))
        return te_algo_reject(c, OP " '%s': %lld groups must split the %lld output channels "
                              "into whole blocks of %lld", name, (long long)g,
                              (long long)channels, (long long)bo);
    if (cxb != ckb * g)
        return te_algo_reject(c, OP " '%s': input '%s' has %lld channel blocks but the weight "
                              "expects %lld per group x %lld groups", name, x->name,
                              (long long)cxb, (long long)ckb, (long long)g);
    return true;
}

te_tensor *te_conv2d_nchwc(te_ctx *c, const char *name, te_tensor *x, te_tensor *w,
                           int64_t channels, const te_conv2d_params *p, const te_epilogue *ep,
                           te_algo_parts *parts) {
    if (parts) memset(parts, 0, sizeof *parts);
    if (!te_algo_check_input(c, OP, name, x, x && x->ndim == 4 ? 4 : 5) ||
        !te_algo_check_input(c, OP, name, w, 6))
        return NULL;
    bool dw = false;
    if (!check_shapes(c, name, x, w, channels, p->groups, &dw)) return NULL;
    const bool blocked_in = x->ndim == 5;
    const int64_t n = x->shape[0], bi = blocked_in ? x->shape[4] : 1;
    const int64_t cob = w->shape[0], ckb = w->shape[1], kh = w->shape[2], kw = w->shape[3];
    const int64_t bo = w->shape[5], g = p->groups;
    int64_t oh, ow;
    if (!te_conv2d_out_size(c, OP, name, x->shape[2], x->shape[3], kh, kw, p, &oh, &ow))
        return NULL;

    const int64_t before[5] = {0, 0, p->pad[0], p->pad[1], 0};
    const int64_t after[5] = {0, 0, p->pad[2], p->pad[3], 0};
    static const char *const blocked_names[5] = {"n", "cb", "h", "w", "ci"};
    static const char *const plain_names[4] = {"n", "c", "h", "w"};
    te_tensor *src = te_pad(c, te_algo_name(c, name, "pad"), x, before, after, 0.0,
                            blocked_in ? blocked_names : plain_names);
    if (!src) return NULL;

    const int64_t shape[5] = {n, cob, oh, ow, bo};
    te_iter **ax = te_compute_axes(c, 5, shape,
                                   (const char *const[]){"n", "ocb", "oh", "ow", "oci"});
    if (!ax) return NULL;
    te_iter *ricb = !dw && ckb > 1 ? te_reduce_axis(c, "icb", 0, ckb) : NULL;
    te_iter *rkh = kh > 1 ? te_reduce_axis(c, "kh", 0, kh) : NULL;
    te_iter *rkw = kw > 1 ? te_reduce_axis(c, "kw", 0, kw) : NULL;
    te_iter *rici = !dw && bi > 1 ? te_reduce_axis(c, "ici", 0, bi) : NULL;
    te_iter *r[4];
    int nr = 0;
    if (ricb) r[nr++] = ricb;
    if (rkh) r[nr++] = rkh;
    if (rkw) r[nr++] = rkw;
    if (rici) r[nr++] = rici;
    const te_expr *zero = te_int(c, 0);
    const te_expr *vocb = te_var(c, ax[1]), *voci = te_var(c, ax[4]);
    const te_expr *vicb = ricb ? te_var(c, ricb) : zero, *vici = rici ? te_var(c, rici) : zero;
    const te_expr *vkh = rkh ? te_var(c, rkh) : zero, *vkw = rkw ? te_var(c, rkw) : zero;
    const te_expr *ih = te_algo_affine(c, te_var(c, ax[2]), p->stride[0],
                                       te_mul(c, vkh, te_int(c, p->dilation[0])));
    const te_expr *iw = te_algo_affine(c, te_var(c, ax[3]), p->stride[1],
                                       te_mul(c, vkw, te_int(c, p->dilation[1])));
    const te_expr *prod;
    if (dw) {
        const te_expr *xi[5] = {te_var(c, ax[0]), vocb, ih, iw, voci};
        const te_expr *wi[6] = {vocb, zero, vkh, vkw, zero, voci};
        prod = te_mul(c, te_load(c, src, 5, xi), te_load(c, w, 6, wi));
    } else {
        /* the group's first input block plus icb */
        const te_expr *icb = vicb;
        if (g > 1) icb = te_algo_affine(c, te_div(c, vocb, te_int(c, cob / g)), ckb, vicb);
        const te_expr *xi[5] = {te_var(c, ax[0]), icb, ih, iw, vici};
        const te_expr *wi[6] = {vocb, vicb, vkh, vkw, vici, voci};
        prod = te_mul(c, te_load(c, src, blocked_in ? 5 : 4, xi), te_load(c, w, 6, wi));
    }
    if (!prod) return NULL;

    /* The bias index stays inside the bias on padding lanes, whose result the mask zeroes. */
    const te_expr *ch = te_algo_affine(c, vocb, bo, voci), *valid = NULL;
    if (channels < cob * bo) {
        valid = te_cmp(c, TE_LT, ch, te_int(c, channels));
        ch = te_min(c, ch, te_int(c, channels - 1));
    }
    const bool fused = !te_epilogue_empty(ep);
    te_tensor *acc, *out;
    if (nr == 0) {
        const te_expr *v = te_epilogue_apply(c, name, ep, prod, 5, ax, ch, channels, valid);
        acc = out = v ? te_compute(c, name, 5, shape, ax, v) : NULL;
    } else {
        const te_expr *body = te_reduce(c, TE_REDUCE_SUM, prod, nr, r);
        acc = te_compute(c, fused ? te_algo_name(c, name, "acc") : name, 5, shape, ax, body);
        out = acc;
        if (acc && fused) {
            te_iter **ex = te_compute_axes(c, 5, shape,
                                           (const char *const[]){"n", "ocb", "oh", "ow", "oci"});
            if (!ex) return NULL;
            const te_expr *idx[5];
            for (int i = 0; i < 5; i++) idx[i] = te_var(c, ex[i]);
            const te_expr *ech = te_algo_affine(c, idx[1], bo, idx[4]), *evalid = NULL;
            if (channels < cob * bo) {
                evalid = te_cmp(c, TE_LT, ech, te_int(c, channels));
                ech = te_min(c, ech, te_int(c, channels - 1));
            }
            const te_expr *v = te_epilogue_apply(c, name, ep, te_load(c, acc, 5, idx), 5, ex, ech,
                                                 channels, evalid);
            out = v ? te_compute(c, name, 5, shape, ex, v) : NULL;
        }
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

te_tensor *te_conv2d_pack_weight(te_ctx *c, const char *name, te_tensor *w, int64_t bi,
                                 int64_t bo, bool depthwise) {
    if (!te_algo_check_input(c, "pack_weight", name, w, 4)) return NULL;
    const int64_t cout = w->shape[0], cg = w->shape[1], kh = w->shape[2], kw = w->shape[3];
    if (bi < 1 || bo < 1)
        return te_algo_fail(c, "pack_weight '%s': blocks of %lld and %lld lanes", name,
                            (long long)bi, (long long)bo);
    if (depthwise && cg != 1)
        return te_algo_fail(c, "pack_weight '%s': a depthwise weight has 1 input channel per "
                            "group, '%s' has %lld", name, w->name, (long long)cg);
    if (depthwise) bi = 1;
    const int64_t shape[6] = {te_ceil_div(cout, bo), depthwise ? 1 : te_ceil_div(cg, bi), kh, kw,
                              bi, bo};
    te_iter **ax = te_compute_axes(c, 6, shape,
                                   (const char *const[]){"ocb", "icb", "kh", "kw", "ici", "oci"});
    if (!ax) return NULL;
    const te_expr *oc = te_algo_affine(c, te_var(c, ax[0]), bo, te_var(c, ax[5]));
    const te_expr *ic = te_algo_affine(c, te_var(c, ax[1]), bi, te_var(c, ax[4]));
    const te_expr *valid = NULL;
    /* only a partial last block needs the test and the clamp */
    if (cout % bo) {
        valid = te_cmp(c, TE_LT, oc, te_int(c, cout));
        oc = te_min(c, oc, te_int(c, cout - 1));
    }
    if (cg % bi) {
        const te_expr *ok = te_cmp(c, TE_LT, ic, te_int(c, cg));
        valid = valid ? te_and(c, valid, ok) : ok;
        ic = te_min(c, ic, te_int(c, cg - 1));
    }
    const te_expr *wi[4] = {oc, ic, te_var(c, ax[2]), te_var(c, ax[3])};
    const te_expr *v = te_load(c, w, 4, wi);
    if (valid) v = te_select(c, valid, v, te_float(c, 0.0));
    return v ? te_compute(c, name, 6, shape, ax, v) : NULL;
}

/* Axis names of an [N, C, spatial...] tensor: h, w for 2-D images, s0, s1, ... otherwise. */
static const char *spatial_name(int nsp, int i) {
    static const char *const hw[] = {"h", "w"}, *const s[] = {"s0", "s1", "s2", "s3", "s4", "s5"};
    return nsp == 2 ? hw[i] : s[i];
}

te_tensor *te_layout_to_nchwc(te_ctx *c, const char *name, te_tensor *x, int64_t block) {
    if (!x || x->ndim < 3 || x->ndim >= TE_MAX_DIMS || x->dtype != TE_F32)
        return te_algo_fail(c, "layout_to_nchwc '%s': input '%s' must be float32 [N, C, "
                            "spatial...] with at most %d dims", name, x ? x->name : "(null)",
                            TE_MAX_DIMS - 1);
    if (block < 1)
        return te_algo_fail(c, "layout_to_nchwc '%s': block of %lld lanes", name,
                            (long long)block);
    const int nd = x->ndim + 1, nsp = x->ndim - 2;
    const int64_t ch = x->shape[1];
    int64_t shape[TE_MAX_DIMS];
    const char *names[TE_MAX_DIMS] = {"n", "cb"};
    shape[0] = x->shape[0];
    shape[1] = te_ceil_div(ch, block);
    for (int i = 0; i < nsp; i++) {
        shape[2 + i] = x->shape[2 + i];
        names[2 + i] = spatial_name(nsp, i);
    }
    shape[nd - 1] = block;
    names[nd - 1] = "ci";
    te_iter **ax = te_compute_axes(c, nd, shape, names);
    if (!ax) return NULL;
    const te_expr *cidx = te_algo_affine(c, te_var(c, ax[1]), block, te_var(c, ax[nd - 1]));
    const te_expr *valid = NULL;
    if (ch % block) {
        valid = te_cmp(c, TE_LT, cidx, te_int(c, ch));
        cidx = te_min(c, cidx, te_int(c, ch - 1));
    }
    const te_expr *idx[TE_MAX_DIMS];
    idx[0] = te_var(c, ax[0]);
    idx[1] = cidx;
    for (int i = 0; i < nsp; i++) idx[2 + i] = te_var(c, ax[2 + i]);
    const te_expr *v = te_load(c, x, x->ndim, idx);
    if (valid) v = te_select(c, valid, v, te_float(c, 0.0));
    return v ? te_compute(c, name, nd, shape, ax, v) : NULL;
}

te_tensor *te_layout_from_nchwc(te_ctx *c, const char *name, te_tensor *x, int64_t channels) {
    if (!x || x->ndim < 4 || x->dtype != TE_F32)
        return te_algo_fail(c, "layout_from_nchwc '%s': input '%s' must be float32 [N, C/x, "
                            "spatial..., x]", name, x ? x->name : "(null)");
    const int nd = x->ndim - 1, nsp = x->ndim - 3;
    const int64_t block = x->shape[x->ndim - 1], cb = x->shape[1];
    if (channels > cb * block || channels <= (cb - 1) * block)
        return te_algo_fail(c, "layout_from_nchwc '%s': %lld channels do not end in the last of "
                            "%lld blocks of %lld lanes", name, (long long)channels,
                            (long long)cb, (long long)block);
    int64_t shape[TE_MAX_DIMS];
    const char *names[TE_MAX_DIMS] = {"n", "c"};
    shape[0] = x->shape[0];
    shape[1] = channels;
    for (int i = 0; i < nsp; i++) {
        shape[2 + i] = x->shape[2 + i];
        names[2 + i] = spatial_name(nsp, i);
    }
    te_iter **ax = te_compute_axes(c, nd, shape, names);
    if (!ax) return NULL;
    const te_expr *idx[TE_MAX_DIMS], *vc = te_var(c, ax[1]);
    idx[0] = te_var(c, ax[0]);
    idx[1] = te_div(c, vc, te_int(c, block));
    for (int i = 0; i < nsp; i++) idx[2 + i] = te_var(c, ax[2 + i]);
    idx[x->ndim - 1] = te_mod(c, vc, te_int(c, block));
    const te_expr *v = te_load(c, x, x->ndim, idx);
    return v ? te_compute(c, name, nd, shape, ax, v) : NULL;
}
