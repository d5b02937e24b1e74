/* dense.c -- batched matrix products (see dense.h). */
#include "te/algo/dense.h"

#include <stdio.h>
#include <string.h>

#define OP "matmul"

te_tensor *te_matmul(te_ctx *c, const char *name, te_tensor *a, te_tensor *b,
                     const te_matmul_params *p, const te_epilogue *ep, te_algo_parts *parts) {
    if (parts) memset(parts, 0, sizeof *parts);
    if (!a || !b || a->dtype != TE_F32 || b->dtype != TE_F32 || a->ndim < 2 || b->ndim < 2)
        return te_algo_fail(c, OP " '%s': operands must be float32 with at least 2 dims", name);
    const int ra = a->ndim, rb = b->ndim, nd = ra > rb ? ra : rb, nb = nd - 2;
    const int64_t m = a->shape[ra - (p->trans_a ? 1 : 2)], ka = a->shape[ra - (p->trans_a ? 2 : 1)];
    const int64_t kb = b->shape[rb - (p->trans_b ? 1 : 2)], n = b->shape[rb - (p->trans_b ? 2 : 1)];
    if (ka != kb)
        return te_algo_fail(c, OP " '%s': '%s' has %lld columns but '%s' has %lld rows", name,
                            a->name, (long long)ka, b->name, (long long)kb);
    int64_t shape[TE_MAX_DIMS];
    for (int d = 0; d < nb; d++) {
        /* right-aligned batch dims; a missing dim counts as 1 */
        int da = d - (nd - ra), db = d - (nd - rb);
        int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
        if (sa != sb && sa != 1 && sb != 1)
            return te_algo_fail(c, OP " '%s': batch dim %d is %lld in '%s' and %lld in '%s'",
                                name, d, (long long)sa, a->name, (long long)sb, b->name);
        shape[d] = sa > sb ? sa : sb;
    }
    shape[nb] = m;
    shape[nb + 1] = n;
    const char *names[TE_MAX_DIMS];
    char bnames[TE_MAX_DIMS][16];
    for (int d = 0; d < nb; d++) {
        snprintf(bnames[d], sizeof bnames[d], "b%d", d);
        names[d] = bnames[d];
    }
    names[nb] = "m";
    names[nb + 1] = "n";
    te_iter **ax = te_compute_axes(c, nd, shape, names);
    te_iter *k = te_reduce_axis(c, "k", 0, ka);
    if (!ax || !k) return NULL;
    const te_expr *vm = te_var(c, ax[nb]), *vn = te_var(c, ax[nb + 1]), *vk = te_var(c, k);
    const te_expr *ia[TE_MAX_DIMS], *ib[TE_MAX_DIMS];
    for (int d = 0; d < ra - 2; d++) {
        int od = d + (nd - ra);
        ia[d] = a->shape[d] == 1 ? te_int(c, 0) : te_var(c, ax[od]);
    }
    for (int d = 0; d < rb - 2; d++) {
        int od = d + (nd - rb);
        ib[d] = b->shape[d] == 1 ? te_int(c, 0) : te_var(c, ax[od]);
    }
    ia[ra - 2] = p->trans_a ? vk : vm;
    ia[ra - 1] = p->trans_a ? vm : vk;
    ib[rb - 2] = p->trans_b ? vn : vk;
    ib[rb - 1] = p->trans_b ? vk : vn;
    const te_expr *prod = te_mul(c, te_load(c, a, ra, ia), te_load(c, b, rb, ib));
    if (!prod) return NULL;
    const bool fused = !te_epilogue_empty(ep);
    te_tensor *acc = te_compute(c, fused ? te_algo_name(c, name, "acc") : name, nd, shape, ax,
                                te_reduce(c, TE_REDUCE_SUM, prod, 1, &k));
    te_tensor *out = fused ? te_epilogue_compute(c, name, acc, ep, nd - 1) : acc;
    if (!out) return NULL;
    if (parts) {
        parts->out = out;
        parts->main = acc;
        parts->epilogue = out != acc ? out : NULL;
    }
    return out;
}

bool te_gemm_epilogue_empty(const te_gemm_epilogue *ep) {
    return ep->alpha == 1.0f && !ep->c && !ep->residual && ep->act.kind == TE_ACT_NONE;
}

te_tensor *te_gemm_epilogue_compute(te_ctx *c, const char *name, te_tensor *acc,
                                    const int64_t *shape, const te_gemm_epilogue *ep) {
    if (!acc) return NULL;
    const int nd = acc->ndim;
    const te_tensor *cin = ep->c, *z = ep->residual;
    bool ok = nd >= 2 && (!cin || (cin->dtype == TE_F32 && cin->ndim <= 2));
    for (int i = 0; ok && cin && i < cin->ndim; i++) {
        int64_t d = cin->shape[i], want = shape[nd - cin->ndim + i];
        ok = d == 1 || d == want;
    }
    for (int i = 0; ok && i < nd; i++) ok = shape[i] >= 1 && shape[i] <= acc->shape[i];
    if (ok && z) ok = z->dtype == TE_F32 && z->ndim == nd;
    for (int i = 0; ok && z && i < nd; i++) ok = z->shape[i] == shape[i];
    if (!ok)
        return te_algo_fail(c, "gemm epilogue '%s': its C or residual does not fit the %d-d "
                            "output of '%s'", name, nd, acc->name);
    te_iter **ax = te_compute_axes(c, nd, shape, NULL);
    if (!ax) return NULL;
    const te_expr *idx[TE_MAX_DIMS];
    for (int i = 0; i < nd; i++) idx[i] = te_var(c, ax[i]);
    const te_expr *v = te_load(c, acc, nd, idx);
    if (ep->alpha != 1.0f) v = te_mul(c, v, te_float(c, ep->alpha));
    if (cin) {
        /* right-aligned against the output; a dim of 1 broadcasts */
        const te_expr *ci[2];
        for (int i = 0; i < cin->ndim; i++) {
            int od = nd - cin->ndim + i;
            ci[i] = cin->shape[i] == 1 && shape[od] != 1 ? te_int(c, 0) : idx[od];
        }
        const te_expr *cv = te_load(c, cin, cin->ndim, ci);
        if (ep->beta != 1.0f) cv = te_mul(c, cv, te_float(c, ep->beta));
        v = te_add(c, v, cv);
    }
    if (z) v = te_add(c, v, te_load(c, z, nd, idx));
    v = te_activation(c, &ep->act, v);
    return v ? te_compute(c, name, nd, shape, ax, v) : NULL;
}

te_tensor *te_dense(te_ctx *c, const char *name, te_tensor *x, te_tensor *w,
                    const te_epilogue *ep, te_algo_parts *parts) {
    if (!te_algo_check_input(c, "dense", name, x, 2) ||
        !te_algo_check_input(c, "dense", name, w, 2))
        return NULL;
    te_matmul_params p = {false, true};
    return te_matmul(c, name, x, w, &p, ep, parts);
}
