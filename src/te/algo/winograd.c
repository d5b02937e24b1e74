/* winograd.c -- Winograd F(m x m, 3 x 3) convolution and its weight transform as tensor
 * expressions (see winograd.h). */
#include "te/algo/winograd.h"

#include <string.h>

#include "te/algo/conv2d_nchwc.h"
#include "te/algo/pad.h"

#define OP "conv2d_winograd"
#define MAX_ALPHA 8

/* B^T (alpha x alpha), G (alpha x 3), A^T (m x alpha) of F(m, 3). */
typedef struct mats {
    int m, alpha;
    double bt[MAX_ALPHA][MAX_ALPHA];
    double g[MAX_ALPHA][3];
    double at[MAX_ALPHA - 2][MAX_ALPHA];
} mats;

/* Points 0, 1, -1, infinity. */
static const mats F2 = {
    2, 4,
    {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
    {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
    {{1, 1, 1, 0}, {0, 1, -1, -1}},
};

/* Points 0, 1, -1, 2, -2, infinity. */
static const mats F4 = {
    4, 6,
    {{4, 0, -5, 0, 1, 0},
     {0, -4, -4, 1, 1, 0},
     {0, 4, -4, -1, 1, 0},
     {0, -2, -1, 2, 1, 0},
     {0, 2, -1, -2, 1, 0},
     {0, 4, 0, -5, 0, 1}},
    {{1.0 / 4, 0, 0},
     {-1.0 / 6, -1.0 / 6, -1.0 / 6},
     {-1.0 / 6, 1.0 / 6, -1.0 / 6},
     {1.0 / 24, 1.0 / 12, 1.0 / 6},
     {1.0 / 24, -1.0 / 12, 1.0 / 6},
     {0, 0, 1}},
    {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}},
};

/* Points 0, 1, -1, 2, -2, 1/2, -1/2, infinity: the fewest multiplies per output (64 per 36
 * outputs against F4's 36 per 16), at a larger rounding error (about 1e-5 relative in
 * float). */
static const mats F6 = {
    6, 8,
    {{1, 0, -21.0 / 4, 0, 21.0 / 4, 0, -1, 0},
     {0, 1, 1, -17.0 / 4, -17.0 / 4, 1, 1, 0},
     {0, -1, 1, 17.0 / 4, -17.0 / 4, -1, 1, 0},
     {0, 1.0 / 2, 1.0 / 4, -5.0 / 2, -5.0 / 4, 2, 1, 0},
     {0, -1.0 / 2, 1.0 / 4, 5.0 / 2, -5.0 / 4, -2, 1, 0},
     {0, 2, 4, -5.0 / 2, -5, 1.0 / 2, 1, 0},
     {0, -2, 4, 5.0 / 2, -5, -1.0 / 2, 1, 0},
     {0, -1, 0, 21.0 / 4, 0, -21.0 / 4, 0, 1}},
    {{1, 0, 0},
     {-2.0 / 9, -2.0 / 9, -2.0 / 9},
     {-2.0 / 9, 2.0 / 9, -2.0 / 9},
     {1.0 / 90, 1.0 / 45, 2.0 / 45},
     {1.0 / 90, -1.0 / 45, 2.0 / 45},
     {32.0 / 45, 16.0 / 45, 8.0 / 45},
     {32.0 / 45, -16.0 / 45, 8.0 / 45},
     {0, 0, 1}},
    {{1, 1, 1, 1, 1, 1, 1, 0},
     {0, 1, -1, 2, -2, 1.0 / 2, -1.0 / 2, 0},
     {0, 1, 1, 4, 4, 1.0 / 4, 1.0 / 4, 0},
     {0, 1, -1, 8, -8, 1.0 / 8, -1.0 / 8, 0},
     {0, 1, 1, 16, 16, 1.0 / 16, 1.0 / 16, 0},
     {0, 1, -1, 32, -32, 1.0 / 32, -1.0 / 32, 1}},
};

static const mats *mats_of(int m) {
    return m == 2 ? &F2 : m == 4 ? &F4 : m == 6 ? &F6 : NULL;
}

int te_winograd_alpha(int m) { return mats_of(m) ? m + 2 : 0; }

/* sum(coef[i] * terms[i]) over the non-zero coefficients, +-1 as a plain add or subtract. */
static const te_expr *lincomb(te_ctx *c, const double *coef, int n, const te_expr *const *terms) {
    const te_expr *s = NULL;
    for (int i = 0; i < n; i++) {
        if (coef[i] == 0.0) continue;
        const te_expr *t = terms[i];
        if (!s) s = coef[i] == 1.0 ? t : te_mul(c, t, te_float(c, coef[i]));
        else if (coef[i] == 1.0) s = te_add(c, s, t);
        else if (coef[i] == -1.0) s = te_sub(c, s, t);
        else s = te_add(c, s, te_mul(c, t, te_float(c, coef[i])));
    }
    return s ? s : te_float(c, 0.0);
}

/* vals[row] as a select chain on `row` (in [0, n)): one constant branch once row is. */
static const te_expr *by_row(te_ctx *c, const te_expr *row, int n, const te_expr *const *vals) {
    if (n < 1) return NULL;
    const te_expr *e = vals[n - 1];
    for (int r = n - 2; r >= 0; r--)
        e = te_select(c, te_cmp(c, TE_EQ, row, te_int(c, r)), vals[r], e);
    return e;
}

/* terms[0..ncols) transformed by the row of matrix `mat` (nrows rows, `stride` doubles
 * apart) that `row` selects. */
static const te_expr *transform(te_ctx *c, const te_expr *row, int nrows, const double *mat,
                                int stride, int ncols, const te_expr *const *terms) {
    const te_expr *vals[MAX_ALPHA] = {0};
    for (int r = 0; r < nrows && r < MAX_ALPHA; r++)
        vals[r] = lincomb(c, mat + r * stride, ncols, terms);
    return by_row(c, row, nrows, vals);
}

static te_iter **axes(te_ctx *c, int n, const int64_t *shape, const char *const *names) {
    return te_compute_axes(c, n, shape, names);
}

te_tensor *te_winograd_weight(te_ctx *c, const char *name, te_tensor *w, int m) {
    const mats *M = mats_of(m);
    if (!M)
        return te_algo_fail(c, OP " weight '%s': tile size %d (F(2x2,3x3), F(4x4,3x3) and "
                            "F(6x6,3x3) only)", name, m);
    if (!te_algo_check_input(c, OP " weight", name, w, 6)) return NULL;
    if (w->shape[2] != 3 || w->shape[3] != 3)
        return te_algo_fail(c, OP " weight '%s': weight '%s' has %lldx%lld taps, not 3x3", name,
                            w->name, (long long)w->shape[2], (long long)w->shape[3]);
    const int64_t kb = w->shape[0], cb = w->shape[1], bi = w->shape[4], bo = w->shape[5];
    const int al = M->alpha;

    /* G g: the columns of every 3x3 kernel transformed, gw[e1, kw, kb, c, k] */
    const int64_t gs[5] = {al, 3, kb, cb * bi, bo};
    te_iter **ga = axes(c, 5, gs, (const char *const[]){"e1", "kw", "kb", "c", "k"});
    if (!ga) return NULL;
    const te_expr *vc = te_var(c, ga[3]);
    const te_expr *icb = bi > 1 ? te_div(c, vc, te_int(c, bi)) : vc;
    const te_expr *ici = bi > 1 ? te_mod(c, vc, te_int(c, bi)) : te_int(c, 0);
    const te_expr *terms[MAX_ALPHA];
    for (int kh = 0; kh < 3; kh++) {
        const te_expr *wi[6] = {te_var(c, ga[2]), icb, te_int(c, kh), te_var(c, ga[1]), ici,
                                te_var(c, ga[4])};
        terms[kh] = te_load(c, w, 6, wi);
    }
    const te_expr *body = transform(c, te_var(c, ga[0]), al, &M->g[0][0], 3, 3, terms);
    te_tensor *gw = body ? te_compute(c, te_algo_name(c, name, "g"), 5, gs, ga, body) : NULL;
    if (!gw) return NULL;

    /* (G g) G^T: then its rows, u[e1, e2, kb, c, k] */
    const int64_t us[5] = {al, al, kb, cb * bi, bo};
    te_iter **ua = axes(c, 5, us, (const char *const[]){"e1", "e2", "kb", "c", "k"});
    if (!ua) return NULL;
    for (int kw = 0; kw < 3; kw++) {
        const te_expr *gi[5] = {te_var(c, ua[0]), te_int(c, kw), te_var(c, ua[2]),
                                te_var(c, ua[3]), te_var(c, ua[4])};
        terms[kw] = te_load(c, gw, 5, gi);
    }
    body = transform(c, te_var(c, ua[1]), al, &M->g[0][0], 3, 3, terms);
    return body ? te_compute(c, name, 5, us, ua, body) : NULL;
}

/* Shape checks: the parameters Winograd takes and x, u and the channels agreeing. */
static bool check(te_ctx *c, const char *name, const te_tensor *x, const te_tensor *u,
                  const te_winograd_params *p, int64_t *bi) {
    const te_conv2d_params *q = &p->conv;
    if (!mats_of(p->m))
        return te_algo_reject(c, OP " '%s': tile size %d (F(2x2,3x3), F(4x4,3x3) and "
                              "F(6x6,3x3) only)", name, p->m);
    if (q->stride[0] != 1 || q->stride[1] != 1 || q->dilation[0] != 1 || q->dilation[1] != 1 ||
        q->groups != 1)
        return te_algo_reject(c, OP " '%s': strides %lldx%lld, dilations %lldx%lld, %lld "
                              "groups (Winograd takes stride 1, dilation 1, one group)", name,
                              (long long)q->stride[0], (long long)q->stride[1],
                              (long long)q->dilation[0], (long long)q->dilation[1],
                              (long long)q->groups);
    for (int i = 0; i < 4; i++)
        if (q->pad[i] < 0)
            return te_algo_reject(c, OP " '%s': negative padding", name);
    if (!te_algo_check_input(c, OP, name, x, x && x->ndim == 4 ? 4 : 5) ||
        !te_algo_check_input(c, OP, name, u, 5))
        return false;
    const int al = te_winograd_alpha(p->m);
    if (u->shape[0] != al || u->shape[1] != al)
        return te_algo_reject(c, OP " '%s': weight '%s' is transformed for tiles of %lldx%lld, "
                              "F(%dx%d,3x3) needs %dx%d", name, u->name, (long long)u->shape[0],
                              (long long)u->shape[1], p->m, p->m, al, al);
    const int64_t ct = u->shape[3], kb = u->shape[2], bo = u->shape[4];
    if (x->ndim == 5) *bi = x->shape[4];
    else if (p->in_block < 1)
        return te_algo_reject(c, OP " '%s': an NCHW input needs a block of at least 1 lane",
                              name);
    else *bi = p->in_block;
    const int64_t cx = x->ndim == 5 ? x->shape[1] * *bi : te_ceil_div(x->shape[1], *bi) * *bi;
    if (cx != ct)
        return te_algo_reject(c, OP " '%s': input '%s' holds %lld channels in blocks of %lld "
                              "lanes but weight '%s' has %lld", name, x->name, (long long)cx,
                              (long long)*bi, u->name, (long long)ct);
    if (p->channels > kb * bo || p->channels <= (kb - 1) * bo)
        return te_algo_reject(c, OP " '%s': %lld output channels but weight '%s' has %lld "
                              "blocks of %lld lanes", name, (long long)p->channels, u->name,
                              (long long)kb, (long long)bo);
    return true;
}

te_tensor *te_conv2d_winograd(te_ctx *c, const char *name, te_tensor *x, te_tensor *u,
                              const te_winograd_params *p, const te_epilogue *ep,
                              te_winograd_parts *parts) {
    te_winograd_parts pt;
    memset(&pt, 0, sizeof pt);
    if (parts) memset(parts, 0, sizeof *parts);
    int64_t bi = 1;
    if (!check(c, name, x, u, p, &bi)) return NULL;
    const mats *M = mats_of(p->m);
    const int m = p->m, al = M->alpha;
    const int64_t n = x->shape[0], h = x->shape[2], w = x->shape[3];
    const int64_t kb = u->shape[2], ct = u->shape[3], bo = u->shape[4];
    int64_t oh, ow;
    if (!te_conv2d_out_size(c, OP, name, h, w, 3, 3, &p->conv, &oh, &ow)) return NULL;
    const int64_t th = te_ceil_div(oh, m), tw = te_ceil_div(ow, m), np = n * th * tw;

    /* the padded copy covers whole tiles: rows and columns past the output's last read 0 */
    te_tensor *src = x;
    if (x->ndim == 4) {
        src = pt.layout = te_layout_to_nchwc(c, te_algo_name(c, name, "blocked"), x, bi);
        if (!src) return NULL;
    }
    const int64_t *pd = p->conv.pad;
    const int64_t before[5] = {0, 0, pd[0], pd[1], 0};
    const int64_t after[5] = {0, 0, th * m + 2 - pd[0] - h, tw * m + 2 - pd[1] - w, 0};
    te_tensor *xp = te_pad(c, te_algo_name(c, name, "pad"), src, before, after, 0.0,
                           (const char *const[]){"n", "cb", "h", "w", "ci"});
    if (!xp) return NULL;
    if (xp != src) pt.pad = xp;

    /* tin[e1, b, p, c]: the rows of tile p's input transformed */
    const int64_t ts[4] = {al, al, np, ct};
    te_iter **ta = axes(c, 4, ts, (const char *const[]){"e1", "b", "p", "c"});
    if (!ta) return NULL;
    const te_expr *vp = te_var(c, ta[2]), *vc = te_var(c, ta[3]);
    const te_expr *tn = n > 1 ? te_div(c, vp, te_int(c, th * tw)) : te_int(c, 0);
    const te_expr *tr = te_mod(c, te_div(c, vp, te_int(c, tw)), te_int(c, th));
    const te_expr *tc = te_mod(c, vp, te_int(c, tw));
    const te_expr *icb = bi > 1 ? te_div(c, vc, te_int(c, bi)) : vc;
    const te_expr *ici = bi > 1 ? te_mod(c, vc, te_int(c, bi)) : te_int(c, 0);
    const te_expr *col = te_algo_affine(c, tc, m, te_var(c, ta[1]));
    const te_expr *terms[MAX_ALPHA];
    for (int a = 0; a < al; a++) {
        const te_expr *xi[5] = {tn, icb, te_algo_affine(c, tr, m, te_int(c, a)), col, ici};
        terms[a] = te_load(c, xp, 5, xi);
    }
    const te_expr *body = transform(c, te_var(c, ta[0]), al, &M->bt[0][0], MAX_ALPHA, al, terms);
    pt.tin = body ? te_compute(c, te_algo_name(c, name, "tin"), 4, ts, ta, body) : NULL;
    if (!pt.tin) return NULL;

    /* v[e1, e2, p, c]: and its columns */
    te_iter **va = axes(c, 4, ts, (const char *const[]){"e1", "e2", "p", "c"});
    if (!va) return NULL;
    for (int b = 0; b < al; b++) {
        const te_expr *ti[4] = {te_var(c, va[0]), te_int(c, b), te_var(c, va[2]),
                                te_var(c, va[3])};
        terms[b] = te_load(c, pt.tin, 4, ti);
    }
    body = transform(c, te_var(c, va[1]), al, &M->bt[0][0], MAX_ALPHA, al, terms);
    pt.v = body ? te_compute(c, te_algo_name(c, name, "v"), 4, ts, va, body) : NULL;
    if (!pt.v) return NULL;

    /* m[e1, e2, p, kb, k] = sum_c v[e1, e2, p, c] * u[e1, e2, kb, c, k]: one GEMM per position */
    const int64_t ms[5] = {al, al, np, kb, bo};
    te_iter **ma = axes(c, 5, ms, (const char *const[]){"e1", "e2", "p", "kb", "k"});
    te_iter *rc = te_reduce_axis(c, "c", 0, ct);
    if (!ma || !rc) return NULL;
    const te_expr *rv = te_var(c, rc);
    const te_expr *vi[4] = {te_var(c, ma[0]), te_var(c, ma[1]), te_var(c, ma[2]), rv};
    const te_expr *ui[5] = {te_var(c, ma[0]), te_var(c, ma[1]), te_var(c, ma[3]), rv,
                            te_var(c, ma[4])};
    body = te_reduce(c, TE_REDUCE_SUM, te_mul(c, te_load(c, pt.v, 4, vi), te_load(c, u, 5, ui)),
                     1, &rc);
    pt.mm = body ? te_compute(c, te_algo_name(c, name, "m"), 5, ms, ma, body) : NULL;
    if (!pt.mm) return NULL;

    /* tout[i, e2, p, kb, k] = sum_e1 AT[i, e1] m[e1, e2, p, kb, k] */
    const int64_t os[5] = {m, al, np, kb, bo};
    te_iter **oa = axes(c, 5, os, (const char *const[]){"i", "e2", "p", "kb", "k"});
    if (!oa) return NULL;
    for (int e = 0; e < al; e++) {
        const te_expr *mi[5] = {te_int(c, e), te_var(c, oa[1]), te_var(c, oa[2]),
                                te_var(c, oa[3]), te_var(c, oa[4])};
        terms[e] = te_load(c, pt.mm, 5, mi);
    }
    body = transform(c, te_var(c, oa[0]), m, &M->at[0][0], MAX_ALPHA, al, terms);
    pt.tout = body ? te_compute(c, te_algo_name(c, name, "tout"), 5, os, oa, body) : NULL;
    if (!pt.tout) return NULL;

    /* the output: sum_e2 AT[ow % m, e2] tout[oh % m, e2, tile, ...], cropped to OH x OW */
    const bool blocked = !p->nchw_out;
    const int64_t ys[5] = {n, blocked ? kb : p->channels, oh, ow, bo};
    te_iter **ya = blocked ? axes(c, 5, ys, (const char *const[]){"n", "kb", "oh", "ow", "k"})
                           : axes(c, 4, ys, (const char *const[]){"n", "k", "oh", "ow"});
    if (!ya) return NULL;
    const te_expr *voh = te_var(c, ya[2]), *vow = te_var(c, ya[3]), *vk = te_var(c, ya[1]);
    const te_expr *tile = te_algo_affine(
        c, te_algo_affine(c, te_var(c, ya[0]), th, te_div(c, voh, te_int(c, m))), tw,
        te_div(c, vow, te_int(c, m)));
    const te_expr *okb = blocked ? vk : te_div(c, vk, te_int(c, bo));
    const te_expr *ok = blocked ? te_var(c, ya[4]) : te_mod(c, vk, te_int(c, bo));
    for (int e = 0; e < al; e++) {
        const te_expr *ti[5] = {te_mod(c, voh, te_int(c, m)), te_int(c, e), tile, okb, ok};
        terms[e] = te_load(c, pt.tout, 5, ti);
    }
    const te_expr *val = transform(c, te_mod(c, vow, te_int(c, m)), m, &M->at[0][0], MAX_ALPHA, al,
                                   terms);
    /* the blocked layout's padding lanes stay 0; the bias index stays inside the bias there */
    const te_expr *ch = blocked ? te_algo_affine(c, okb, bo, ok) : vk, *valid = NULL;
    if (blocked && p->channels < kb * bo) {
        valid = te_cmp(c, TE_LT, ch, te_int(c, p->channels));
        ch = te_min(c, ch, te_int(c, p->channels - 1));
    }
    val = te_epilogue_apply(c, name, ep, val, blocked ? 5 : 4, ya, ch, p->channels, valid);
    pt.out = val ? te_compute(c, name, blocked ? 5 : 4, ys, ya, val) : NULL;
    if (!pt.out) return NULL;
    if (parts) *parts = pt;
    return pt.out;
}
