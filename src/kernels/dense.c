/* dense.c -- the CPU template of matrix products (Gemm, MatMul and their fused forms; the
 * reader, key and epilogue are matmul.h's, shared with dense_cuda.c): te_matmul with the
 * epilogue as one elementwise compute, and this file's CPU schedule.
 *
 * The schedule (a register-tiled GEMM, TVM's dense_pack on x86): the output is tiled into
 * tile_m rows x tile_n columns; the tile's accumulator is a "local" stage computed at the tile
 * loop with the reduction (k, unroll_k at a time) outside and the tile inside, rows unrolled
 * and columns vectorized: per k, tile_m broadcasts of A times vectors of B's row. The epilogue
 * runs as the tile is written out. With `pack` (a constant 2-D B), B is re-laid out at compile
 * time into panels [N/tile_n, K, tile_n], so a tile's B row is contiguous whatever B's
 * transpose. `order` puts the row tiles (0) or the column tiles (1) outermost: a B panel then
 * stays in cache for all row tiles; `parallel` runs batch x outer tiles (0) or batch x both
 * tile loops (1) in parallel. */
#include <string.h>

#include "kernels/common.h"
#include "kernels/conv.h"
#include "kernels/matmul.h"

#define NAME "dense"

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out) {
    (void)self;
    tune_mm g;
    return tune_mm_read(n, in, out, &g);
}

static void describe(const kernel_provider *self, tune_task *t) {
    (void)self;
    tune_mm g;
    if (tune_mm_read_task(t, &g)) tune_mm_describe(NAME, &g, t);
}

/* Values of cand up to the first that covers `limit` (at least one). */
static void add_covering(tune_space *s, const char *name, const int64_t *cand, int n,
                         int64_t limit) {
    int k = 1;
    while (k < n && cand[k - 1] < limit) k++;
    tune_space_add(s, name, k, cand);
}

static void space(const kernel_provider *self, const tune_task *t, tune_space *s) {
    (void)self;
    memset(s, 0, sizeof *s);
    tune_mm g;
    if (!tune_mm_read_task(t, &g)) return;
    static const int64_t ms[] = {1, 2, 4, 6, 8}, ns[] = {8, 16, 24, 32, 48, 64};
    static const int64_t us[] = {1, 2, 4}, flag[] = {0, 1};
    int km = 1;
    while (km < 5 && ms[km] <= g.m) km++;
    tune_space_add(s, "tile_m", km, ms);
    add_covering(s, "tile_n", ns, 6, g.n);
    tune_space_add(s, "unroll_k", g.k >= 4 ? 3 : 1, us);
    tune_space_add(s, "order", g.m > 1 && g.n > 8 ? 2 : 1, flag);
    tune_space_add(s, "parallel", 2, flag);
    tune_space_add(s, "pack", g.packable ? 2 : 1, flag);
}

static void default_config(const kernel_provider *self, const tune_task *t, const tune_space *s,
                           tune_config *cfg) {
    (void)self;
    memset(cfg, 0, sizeof *cfg);
    tune_mm g;
    if (!tune_mm_read_task(t, &g)) return;
    const int64_t vec = tune_vector_floats();
    /* two vectors of columns, rows to fill about half the vector registers with accumulators */
    tune_config_set(s, cfg, "tile_n", g.n >= 2 * vec ? 2 * vec : g.n);
    /* One row (a classifier head at batch 1): three vectors of columns. Two were 2.5 to 4
     * times slower on the heads of torchvision's CNNs (AVX-512, 1 and 2 threads: 1280 x 1000
     * 0.32 -> 0.08-0.10 ms, 2048 x 1000 0.51 -> 0.15, 512 x 1000 0.13 -> 0.04 on two); four
     * were slower still. */
    if (g.m == 1 && g.n >= 3 * vec) tune_config_set(s, cfg, "tile_n", 3 * vec);
    int64_t tn = tune_value(s, cfg, "tile_n"), vecs = (tn + vec - 1) / vec;
    int64_t rows = (vec >= 16 ? 16 : 8) / vecs;
    tune_config_set(s, cfg, "tile_m", rows < g.m ? rows : g.m);
    tune_config_set(s, cfg, "unroll_k", 1);
    tune_config_set(s, cfg, "order", g.m > tune_value(s, cfg, "tile_m"));
    tune_config_set(s, cfg, "parallel", 1);
    tune_config_set(s, cfg, "pack", 1);
}

/* A placeholder of t's data in the te shape `dims` (same elements, same order). */
static te_tensor *ph(te_ctx *c, const char *name, const ir_tensor *t, int ndim,
                     const int64_t *dims) {
    te_tensor *p = te_placeholder(c, name, TE_F32, ndim, dims);
    if (p) p->constant = t->data != NULL;
    return p;
}

/* packed[no, k, ni] = B'(k, no*tn + ni), 0 past N; B' = b [K, N] or (tb) b [N, K]. */
static te_tensor *pack_b(te_ctx *c, te_tensor *b, bool tb, int64_t k, int64_t n, int64_t tn) {
    const int64_t shape[3] = {te_ceil_div(n, tn), k, tn};
    te_iter **ax = te_compute_axes(c, 3, shape, (const char *const[]){"no", "k", "ni"});
    if (!ax) return NULL;
    const te_expr *col = te_algo_affine(c, te_var(c, ax[0]), tn, te_var(c, ax[2]));
    const te_expr *safe = te_algo_clamp(c, col, INT64_MIN, n - 1), *kk = te_var(c, ax[1]);
    const te_expr *idx[2] = {tb ? safe : kk, tb ? kk : safe};
    const te_expr *v = te_load(c, b, 2, idx);
    if (n % tn) v = te_select(c, te_cmp(c, TE_LT, col, te_int(c, n)), v, te_float(c, 0.0));
    return v ? te_compute(c, "b.packed", 3, shape, ax, v) : NULL;
}

static wpk_status build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                        const tune_space *s, const tune_config *cfg, tune_build *out) {
    tune_mm g;
    TRY(tune_mm_build_start(self, c, t, s, cfg, false, &g, out));
    const int64_t tm = tune_value(s, cfg, "tile_m"), tn = tune_value(s, cfg, "tile_n");
    const int64_t uk = tune_value(s, cfg, "unroll_k");
    const bool cols_outer = tune_value(s, cfg, "order") != 0;
    const bool par_all = tune_value(s, cfg, "parallel") != 0;
    const bool pack = tune_value(s, cfg, "pack") != 0;

    /* operands in te shapes: 1-D ones promoted ([K] -> [1, K] for A, [K, 1] for B) */
    int64_t as[TE_MAX_DIMS], bs[TE_MAX_DIMS];
    int ar = g.a->ndim, br = g.b->ndim;
    memcpy(as, g.a->dims, sizeof(int64_t) * (size_t)ar);
    memcpy(bs, g.b->dims, sizeof(int64_t) * (size_t)br);
    if (ar == 1) as[0] = 1, as[1] = g.k, ar = 2;
    if (br == 1) bs[0] = g.k, bs[1] = 1, br = 2;
    te_tensor *a = ph(c, "a", g.a, ar, as);
    if (!a) return tune_failed(c, NAME);
    out->args[out->nargs++] = a;
    te_tensor *b;
    bool tb = g.tb;
    if (pack) {
        const int64_t pshape[3] = {te_ceil_div(g.n, tn), g.k, tn};
        const int64_t src2[2] = {tb ? g.n : g.k, tb ? g.k : g.n};
        te_tensor *bp = te_placeholder(c, "b", TE_F32, 3, pshape);
        te_tensor *src = te_placeholder(c, "b.src", TE_F32, 2, src2);
        if (!bp || !src) return tune_failed(c, NAME);
        bp->constant = src->constant = true;
        out->args[out->nargs++] = bp;
        out->prepack_src[1] = src;
        out->prepack[1] = pack_b(c, src, tb, g.k, g.n, tn);
        /* the product reads the panels through an inline view [K, N] */
        const int64_t vshape[2] = {g.k, g.n};
        te_iter **ax = te_compute_axes(c, 2, vshape, (const char *const[]){"k", "n"});
        if (!out->prepack[1] || !ax) return tune_failed(c, NAME);
        const te_expr *vn = te_var(c, ax[1]);
        const te_expr *idx[3] = {te_div(c, vn, te_int(c, tn)), te_var(c, ax[0]),
                                 te_mod(c, vn, te_int(c, tn))};
        const te_expr *v = te_load(c, bp, 3, idx);
        b = v ? te_compute(c, "b.view", 2, vshape, ax, v) : NULL;
        tb = false;
    } else {
        b = ph(c, "b", g.b, br, bs);
        if (b) out->args[out->nargs++] = b;
    }
    if (!b) return tune_failed(c, NAME);
    te_gemm_epilogue ep;
    if (tune_mm_epilogue_args(c, &g, out, &ep)) return tune_failed(c, NAME);
    out->ninputs = out->nargs;
    te_matmul_params mp = {g.ta, tb};
    te_algo_parts parts;
    te_tensor *acc = te_matmul(c, "acc", a, b, &mp, NULL, &parts);
    if (!acc) return tune_failed(c, NAME);
    const bool fused = !te_gemm_epilogue_empty(&ep);
    te_tensor *y = fused ? te_gemm_epilogue_compute(c, "y", acc, acc->shape, &ep) : acc;
    if (!y) return tune_failed(c, NAME);
    out->args[out->nargs++] = y;

    te_schedule *sc = te_schedule_create(c, &y, 1);
    if (!sc) return tune_failed(c, NAME);
    out->schedule = sc;
    if (pack) TRY(te_compute_inline(te_stage_of(sc, b)));
    if (!fused) TRY(te_cache_write(sc, y, "local", &acc));

    /* the output: batch, tiles, then the tile (rows, columns) */
    te_stage *so = te_stage_of(sc, y);
    const int nd = y->ndim, nb = nd - 2;
    te_iter *mo, *mi, *no, *ni;
    TRY(te_split(so, y->axes[nb], tm, &mo, &mi));
    TRY(te_split(so, y->axes[nb + 1], tn, &no, &ni));
    te_iter *first = cols_outer ? no : mo, *second = cols_outer ? mo : no;
    te_iter *order[TE_MAX_DIMS + 2];
    int k = 0;
    for (int i = 0; i < nb; i++) order[k++] = y->axes[i];
    order[k++] = first;
    order[k++] = second;
    order[k++] = mi;
    order[k++] = ni;
    TRY(te_reorder(so, k, order));
    te_iter *par = first;
    for (int i = nb - 1; i >= 0; i--) TRY(te_fuse(so, y->axes[i], par, &par));
    if (par_all) TRY(te_fuse(so, par, second, &par));
    TRY(te_parallel(so, par));
    TRY(te_vectorize(so, ni));
    te_iter *at = par_all ? par : second;

    /* the accumulator: k (unroll_k at a time) outside, the tile inside */
    te_stage *sa = te_stage_of(sc, acc);
    TRY(te_compute_at(sa, so, at));
    TRY(te_set_scope(sa, "local"));
    te_iter *rk = acc->body->raxes[0], *ko = rk, *ki = NULL;
    if (uk > 1) TRY(te_split(sa, rk, uk, &ko, &ki));
    te_iter *aorder[4] = {ko, ki, acc->axes[nb], acc->axes[nb + 1]};
    if (ki) TRY(te_reorder(sa, 4, aorder));
    else TRY(te_reorder(sa, 3, (te_iter *[]){ko, acc->axes[nb], acc->axes[nb + 1]}));
    if (ki) TRY(te_unroll(sa, ki));
    TRY(te_unroll(sa, acc->axes[nb]));
    TRY(te_vectorize(sa, acc->axes[nb + 1]));
    return WPK_OK;
}

const kernel_provider tune_dense = {
    .name = NAME,
    .family = "generated",
    .supports = supports,
    .describe = describe,
    .space = space,
    .default_config = default_config,
    .legal = kernel_legal_in_space,
    .build = build,
};
