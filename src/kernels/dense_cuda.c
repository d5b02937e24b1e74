/* dense_cuda.c -- the CUDA template of matrix products: Gemm (transposes, alpha, beta, C
 * broadcast to the output), wpk::FusedGemm (C, a residual Z, an activation), and MatMul /
 * wpk::FusedMatMul of 2-D operands (a bias per column, Z, activation): a tiled GEMM.
 *
 * The algorithm is written for the schedule, as conv2d_cuda's: the product `acc` covers the
 * output rounded up to whole blocks and the reduction rounded up to whole steps, reading A and
 * B through inline views that are zero past the real matrices (clamped indices, a select), so
 * every block accumulates a whole tile and each thread's part stays its own (registers). The
 * views keep A's and B's storage order, so a cooperative copy into shared memory reads
 * consecutive addresses with consecutive threads whatever the transposes. y applies the
 * epilogue over the real [M, N].
 *
 * The schedule: a block computes (thread_y * tile_m) x (thread_x * tile_n) outputs, each
 * thread a tile_m x tile_n register tile (unrolled); the reduction advances tile_k at a time
 * and, with `shared`, each step first stages the block's A and B panels in shared memory
 * (all threads copy, barriers around). Knobs:
 *   thread_x, thread_y   threads along columns (N) and rows (M); at most 1024 in all
 *   tile_n, tile_m       outputs per thread along each; at most 64 accumulators
 *   tile_k               reduction step
 *   shared               stage A and B panels in shared memory (at most 48 KiB) */
#include <stdio.h>
#include <string.h>

#include "kernels/common.h"
#include "kernels/conv.h"
#include "kernels/templates_cuda.h"

#define NAME "dense_cuda"
#define Z_INPUT 3

typedef struct mm {
    ir_op op;
    int64_t m, n, k;
    bool ta, tb;
    float alpha, beta;
    const ir_tensor *a, *b, *c, *z; /* c: Gemm's C or FusedMatMul's bias; NULL when absent */
    te_act act;
} mm;

static bool is_gemm(ir_op op) { return op == IR_OP_GEMM || op == IR_OP_FUSED_GEMM; }

/* Gemm's C broadcasts to [M, N] (right-aligned, each dim equal or 1). */
static bool c_fits(const ir_tensor *c, int64_t m, int64_t n) {
    if (c->ndim > 2) return false;
    const int64_t want[2] = {m, n};
    for (int i = 0; i < c->ndim; i++) {
        int64_t d = c->dims[i], w = want[2 - c->ndim + i];
        if (d != 1 && d != w) return false;
    }
    return true;
}

static bool read_mm(const ir_node *n, const ir_tensor *const *in, const ir_tensor *const *out,
                    mm *g) {
    memset(g, 0, sizeof *g);
    if (!n || n->nout != 1 || !out[0] || !tune_static_f32(out[0]) || n->nin < 2) return false;
    g->op = n->op;
    switch (n->op) {
    case IR_OP_GEMM: if (n->nin > 3) return false; break;
    case IR_OP_MATMUL: if (n->nin > 2) return false; break;
    case IR_OP_FUSED_GEMM: case IR_OP_FUSED_MATMUL: if (n->nin > Z_INPUT + 1) return false; break;
    default: return false;
    }
    g->a = in[0], g->b = in[1];
    g->c = n->nin > 2 ? in[2] : NULL;
    g->z = n->nin > Z_INPUT ? in[Z_INPUT] : NULL;
    if (!g->a || !g->b || !tune_static_f32(g->a) || !tune_static_f32(g->b)) return false;
    if ((g->c && !tune_static_f32(g->c)) || (g->z && !tune_static_f32(g->z))) return false;
    /* 2-D operands only: batched products are not this template's */
    if (g->a->ndim != 2 || g->b->ndim != 2 || out[0]->ndim != 2) return false;
    g->alpha = g->beta = 1.0f;
    if (is_gemm(n->op)) {
        g->ta = ir_attr_int(n, "transA", 0) != 0;
        g->tb = ir_attr_int(n, "transB", 0) != 0;
        if (n->op == IR_OP_GEMM) {
            g->alpha = ir_attr_float(n, "alpha", 1.0f);
            g->beta = ir_attr_float(n, "beta", 1.0f);
        }
    }
    g->m = g->a->dims[g->ta ? 1 : 0];
    g->k = g->a->dims[g->ta ? 0 : 1];
    g->n = g->b->dims[g->tb ? 0 : 1];
    if (g->b->dims[g->tb ? 1 : 0] != g->k) return false;
    if (out[0]->dims[0] != g->m || out[0]->dims[1] != g->n) return false;
    if (g->c) {
        if (is_gemm(n->op) ? !c_fits(g->c, g->m, g->n) : g->c->ndim != 1 || g->c->dims[0] != g->n)
            return false;
    }
    if (g->z && !ir_same_shape(g->z, out[0])) return false;
    if (n->op == IR_OP_FUSED_GEMM || n->op == IR_OP_FUSED_MATMUL) return tune_read_act(n, &g->act);
    g->act = te_act_default(TE_ACT_NONE);
    return true;
}

static bool read_task(const tune_task *t, mm *g) {
    const ir_tensor *in[TUNE_MAX_ARGS] = {0}, *out[1] = {&t->out[0]};
    for (int i = 0; i < t->nin; i++) in[i] = tune_task_in(t, i);
    return t->nout == 1 && read_mm(t->node, in, out, g);
}

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)self;
    mm g;
    if (!n || !in || !out || n->nin > TUNE_MAX_ARGS || n->nout != 1) return false;
    const ir_tensor *ci[TUNE_MAX_ARGS] = {0}, *co[1] = {out[0]};
    for (int i = 0; i < n->nin; i++) ci[i] = in[i];
    return read_mm(n, ci, co, &g);
}

static void describe(const kernel_provider *self, tune_task *t) {
    (void)self;
    mm g;
    if (!read_task(t, &g)) return;
    tune_key_add(t, NAME ":%s,a=", t->node->op_type);
    tune_key_dims(t, g.a);
    tune_key_add(t, ",b=");
    tune_key_dims(t, g.b);
    if (g.ta) tune_key_add(t, ",ta");
    if (g.tb) tune_key_add(t, ",tb");
    if (g.alpha != 1.0f) tune_key_add(t, ",alpha=%g", (double)g.alpha);
    if (g.c) {
        tune_key_add(t, is_gemm(g.op) ? ",c=" : ",bias=");
        tune_key_dims(t, g.c);
        if (g.beta != 1.0f) tune_key_add(t, ",beta=%g", (double)g.beta);
    }
    if (g.z) tune_key_add(t, ",res");
    tune_key_act(t, &g.act);
    t->flops = 2 * g.m * g.n * g.k;
}

static int64_t pow2_at_least(int64_t v) {
    int64_t p = 1;
    while (p < v) p *= 2;
    return p;
}

/* The values of cand that are at most limit (the first one always). */
static void add_upto(tune_space *s, const char *name, const int64_t *cand, int n, int64_t limit) {
    int64_t v[TUNE_MAX_VALUES];
    int k = 0;
    for (int i = 0; i < n && k < TUNE_MAX_VALUES; i++)
        if (i == 0 || cand[i] <= limit) v[k++] = cand[i];
    tune_space_add(s, name, k, v);
}

static void space(const kernel_provider *self, const tune_task *t, tune_space *s) {
    (void)self;
    memset(s, 0, sizeof *s);
    mm g;
    if (!read_task(t, &g)) return;
    static const int64_t tx[] = {1, 2, 4, 8, 16, 32, 64, 128, 256}, ty[] = {1, 2, 4, 8, 16, 32};
    static const int64_t tiles[] = {1, 2, 4, 8}, tk[] = {1, 2, 4, 8, 16, 32}, flag[] = {0, 1};
    add_upto(s, "thread_x", tx, 9, pow2_at_least(g.n));
    add_upto(s, "thread_y", ty, 6, pow2_at_least(g.m));
    add_upto(s, "tile_n", tiles, 4, g.n);
    add_upto(s, "tile_m", tiles, 4, g.m);
    add_upto(s, "tile_k", tk, 6, pow2_at_least(g.k));
    tune_space_add(s, "shared", 2, flag);
}

typedef struct knobs {
    int64_t thx, thy, tn, tm, tk;
    bool shared;
} knobs;

static knobs read_knobs(const tune_space *s, const tune_config *cfg) {
    knobs k;
    k.thx = tune_value(s, cfg, "thread_x"), k.thy = tune_value(s, cfg, "thread_y");
    k.tn = tune_value(s, cfg, "tile_n"), k.tm = tune_value(s, cfg, "tile_m");
    k.tk = tune_value(s, cfg, "tile_k");
    k.shared = tune_value(s, cfg, "shared") != 0;
    return k;
}

/* The A and B panels of one reduction step: (block rows + block columns) x tile_k floats. */
static int64_t shared_bytes(const knobs *k) {
    if (!k->shared) return 0;
    const int64_t a = k->thy * k->tm * k->tk, b = k->thx * k->tn * k->tk;
    return ((a * 4 + 15) / 16 + (b * 4 + 15) / 16) * 16;
}

/* Why a config breaks a limit, or NULL. */
static const char *over_limit(const knobs *k, char *why, size_t cap) {
    const int64_t threads = k->thx * k->thy, accum = k->tm * k->tn, smem = shared_bytes(k);
    if (threads > CUDA_MAX_THREADS)
        snprintf(why, cap, "%lld threads per block (thread_x * thread_y) is more than %d",
                 (long long)threads, CUDA_MAX_THREADS);
    else if (accum > CUDA_MAX_ACCUM)
        snprintf(why, cap, "%lld accumulators per thread (tile_m * tile_n) is more than %d",
                 (long long)accum, CUDA_MAX_ACCUM);
    else if (smem > CUDA_MAX_SHARED)
        snprintf(why, cap, "the shared panels need %lld bytes of shared memory (more than %d)",
                 (long long)smem, CUDA_MAX_SHARED);
    else
        return NULL;
    return why;
}

bool tune_dense_cuda_legal(const tune_task *t, const tune_space *s, const tune_config *cfg) {
    mm g;
    if (!read_task(t, &g)) return false;
    for (int k = 0; k < s->nknobs; k++)
        if (cfg->choice[k] < 0 || cfg->choice[k] >= s->knobs[k].nvalues) return false;
    knobs k = read_knobs(s, cfg);
    char why[160];
    return over_limit(&k, why, sizeof why) == NULL;
}

/* About 128-256 threads per block, 4x4 register tiles where the matrix is big enough; a
 * matrix-vector product (M = 1) gets one row of threads over the columns. */
static void default_config(const kernel_provider *self, const tune_task *t, const tune_space *s, tune_config *cfg) {
    (void)self;
    memset(cfg, 0, sizeof *cfg);
    mm g;
    if (!read_task(t, &g)) return;
    tune_config_set(s, cfg, "tile_m", g.m >= 64 ? 4 : g.m >= 16 ? 2 : 1);
    tune_config_set(s, cfg, "tile_n", g.n >= 64 ? 4 : g.n >= 16 ? 2 : 1);
    const int64_t tm = tune_value(s, cfg, "tile_m"), tn = tune_value(s, cfg, "tile_n");
    int64_t thy = pow2_at_least((g.m + tm - 1) / tm);
    if (thy > 16) thy = 16;
    int64_t thx = 256 / thy, need = pow2_at_least((g.n + tn - 1) / tn);
    if (thx > need) thx = need;
    tune_config_set(s, cfg, "thread_y", thy);
    tune_config_set(s, cfg, "thread_x", thx);
    tune_config_set(s, cfg, "tile_k", 8);
    tune_config_set(s, cfg, "shared", 1);
    knobs k = read_knobs(s, cfg);
    char why[160];
    if (over_limit(&k, why, sizeof why)) tune_config_set(s, cfg, "shared", 0);
}

#define TRY(x)                                                                             \
    do {                                                                                   \
        wpk_status st_ = (x);                                                              \
        if (st_) return st_;                                                               \
    } while (0)

static wpk_status failed(te_ctx *c) { return tune_failed(c, NAME); }

/* src (a [rows, cols] placeholder) as an inline view over [prows, pcols]: zero past the real
 * matrix, read at clamped indices there. */
static te_tensor *padded(te_ctx *c, te_tensor *src, const char *name, int64_t prows,
                         int64_t pcols) {
    const int64_t rows = src->shape[0], cols = src->shape[1], shape[2] = {prows, pcols};
    te_iter **ax = te_compute_axes(c, 2, shape, (const char *const[]){"r", "c"});
    if (!ax) return NULL;
    const te_expr *r = te_var(c, ax[0]), *cc = te_var(c, ax[1]), *cond = NULL;
    if (prows > rows) cond = te_cmp(c, TE_LT, r, te_int(c, rows));
    if (pcols > cols) {
        const te_expr *k = te_cmp(c, TE_LT, cc, te_int(c, cols));
        cond = cond ? te_and(c, cond, k) : k;
    }
    const te_expr *idx[2] = {prows > rows ? te_algo_clamp(c, r, 0, rows - 1) : r,
                             pcols > cols ? te_algo_clamp(c, cc, 0, cols - 1) : cc};
    const te_expr *v = te_load(c, src, 2, idx);
    if (cond) v = te_select(c, cond, v, te_float(c, 0.0));
    return v ? te_compute(c, name, 2, shape, ax, v) : NULL;
}

/* Fuse a shared stage's axes and spread them over the block's threads, x fastest. */
static wpk_status cooperative(te_stage *st, const knobs *k) {
    te_tensor *t = st->tensor;
    te_iter *f = t->axes[0], *f1, *f2, *x, *y;
    for (int d = 1; d < t->ndim; d++) TRY(te_fuse(st, f, t->axes[d], &f));
    TRY(te_split(st, f, k->thx, &f1, &x));
    TRY(te_split(st, f1, k->thy, &f2, &y));
    TRY(te_reorder(st, 3, (te_iter *[]){f2, y, x}));
    TRY(te_bind(st, y, "threadIdx.y"));
    TRY(te_bind(st, x, "threadIdx.x"));
    return WPK_OK;
}

/* y[m, n] = act(alpha * acc + beta * C + bias + Z) over the real [M, N]. */
static te_tensor *epilogue(te_ctx *c, const mm *g, te_tensor *acc, te_tensor *cin,
                           te_tensor *z) {
    const int64_t shape[2] = {g->m, g->n};
    te_iter **ax = te_compute_axes(c, 2, shape, (const char *const[]){"m", "n"});
    if (!ax) return NULL;
    const te_expr *idx[2] = {te_var(c, ax[0]), te_var(c, ax[1])};
    const te_expr *v = te_load(c, acc, 2, idx);
    if (g->alpha != 1.0f) v = te_mul(c, v, te_float(c, g->alpha));
    if (cin) {
        const te_expr *ci[2];
        for (int i = 0; i < cin->ndim; i++) {
            int od = 2 - cin->ndim + i;
            ci[i] = cin->shape[i] == 1 && shape[od] != 1 ? te_int(c, 0) : idx[od];
        }
        const te_expr *cv = te_load(c, cin, cin->ndim, ci);
        if (g->beta != 1.0f) cv = te_mul(c, cv, te_float(c, g->beta));
        v = te_add(c, v, cv);
    }
    if (z) v = te_add(c, v, te_load(c, z, 2, idx));
    v = te_activation(c, &g->act, v);
    return v ? te_compute(c, "y", 2, shape, ax, v) : NULL;
}

static wpk_status build(const kernel_provider *self, te_ctx *c, const tune_task *t, const tune_space *s,
                        const tune_config *cfg, tune_build *out) {
    (void)self;
    memset(out, 0, sizeof *out);
    mm g;
    if (!read_task(t, &g))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, NAME ": node '%s' is not a 2-D product "
                         "this template takes", t->node ? t->node->name : "(null)");
    TRY(tune_check_legal(c, self, t, s, cfg));
    const knobs k = read_knobs(s, cfg);
    char why[160];
    if (over_limit(&k, why, sizeof why))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, NAME ": %s", why);

    te_tensor *a = tune_placeholder(c, "a", g.a), *b = tune_placeholder(c, "b", g.b);
    if (!a || !b) return failed(c);
    out->args[out->nargs++] = a;
    out->args[out->nargs++] = b;
    te_tensor *cin = NULL, *z = NULL;
    if (g.c) {
        cin = tune_placeholder(c, is_gemm(g.op) ? "c" : "bias", g.c);
        if (!cin) return failed(c);
        out->args[out->nargs++] = cin;
    }
    if (g.z) {
        z = tune_placeholder(c, "z", g.z);
        if (!z) return failed(c);
        out->args[out->nargs++] = z;
    }
    out->ninputs = out->nargs;

    /* the product over whole blocks and whole reduction steps */
    const int64_t bm = k.thy * k.tm, bn = k.thx * k.tn;
    const int64_t mp = te_ceil_div(g.m, bm) * bm, np = te_ceil_div(g.n, bn) * bn;
    const int64_t kp = te_ceil_div(g.k, k.tk) * k.tk;
    te_tensor *ap = g.ta ? padded(c, a, "a.pad", kp, mp) : padded(c, a, "a.pad", mp, kp);
    te_tensor *bp = g.tb ? padded(c, b, "b.pad", np, kp) : padded(c, b, "b.pad", kp, np);
    const int64_t ashape[2] = {mp, np};
    te_iter **aa = te_compute_axes(c, 2, ashape, (const char *const[]){"m", "n"});
    te_iter *rk = te_reduce_axis(c, "k", 0, kp);
    if (!ap || !bp || !aa || !rk) return failed(c);
    const te_expr *vm = te_var(c, aa[0]), *vn = te_var(c, aa[1]), *vk = te_var(c, rk);
    const te_expr *ai[2] = {g.ta ? vk : vm, g.ta ? vm : vk};
    const te_expr *bi[2] = {g.tb ? vn : vk, g.tb ? vk : vn};
    const te_expr *prod = te_mul(c, te_load(c, ap, 2, ai), te_load(c, bp, 2, bi));
    const te_expr *sum = prod ? te_reduce(c, TE_REDUCE_SUM, prod, 1, &rk) : NULL;
    te_tensor *acc = sum ? te_compute(c, "acc", 2, ashape, aa, sum) : NULL;
    te_tensor *y = acc ? epilogue(c, &g, acc, cin, z) : NULL;
    if (!y) return failed(c);
    out->args[out->nargs++] = y;

    te_schedule *sc = te_schedule_create(c, &y, 1);
    if (!sc) return failed(c);
    out->schedule = sc;
    te_tensor *as = NULL, *bs = NULL;
    if (k.shared) {
        TRY(te_cache_read(sc, ap, "shared", &acc, 1, &as));
        TRY(te_cache_read(sc, bp, "shared", &acc, 1, &bs));
    }
    TRY(te_compute_inline(te_stage_of(sc, ap)));
    TRY(te_compute_inline(te_stage_of(sc, bp)));

    /* y: blocks and threads over the output, the thread's tile innermost */
    te_stage *sy = te_stage_of(sc, y);
    te_iter *mo, *mi, *mb, *mt, *no, *ni, *nb, *nt;
    TRY(te_split(sy, y->axes[0], k.tm, &mo, &mi));
    TRY(te_split(sy, mo, k.thy, &mb, &mt));
    TRY(te_split(sy, y->axes[1], k.tn, &no, &ni));
    TRY(te_split(sy, no, k.thx, &nb, &nt));
    TRY(te_reorder(sy, 6, (te_iter *[]){mb, nb, mt, nt, mi, ni}));
    TRY(te_bind(sy, mb, "blockIdx.y"));
    TRY(te_bind(sy, nb, "blockIdx.x"));
    TRY(te_bind(sy, mt, "threadIdx.y"));
    TRY(te_bind(sy, nt, "threadIdx.x"));
    TRY(te_unroll(sy, mi));
    TRY(te_unroll(sy, ni));

    /* acc: the block's tile at the innermost block loop; reduction steps outside the threads */
    te_stage *sa = te_stage_of(sc, acc);
    TRY(te_compute_at(sa, sy, nb));
    TRY(te_set_scope(sa, "local"));
    te_iter *am, *ami, *an, *ani, *ko, *ki;
    TRY(te_split(sa, acc->axes[0], k.tm, &am, &ami));
    TRY(te_split(sa, acc->axes[1], k.tn, &an, &ani));
    TRY(te_split(sa, acc->body->raxes[0], k.tk, &ko, &ki));
    TRY(te_reorder(sa, 6, (te_iter *[]){ko, am, an, ki, ami, ani}));
    TRY(te_bind(sa, am, "threadIdx.y"));
    TRY(te_bind(sa, an, "threadIdx.x"));
    TRY(te_unroll(sa, ami));
    TRY(te_unroll(sa, ani));
    if (k.shared) {
        te_stage *sas = te_stage_of(sc, as), *sbs = te_stage_of(sc, bs);
        TRY(te_compute_at(sas, sa, ko));
        TRY(te_compute_at(sbs, sa, ko));
        TRY(cooperative(sas, &k));
        TRY(cooperative(sbs, &k));
    }
    return WPK_OK;
}

const kernel_provider tune_dense_cuda = {
    .name = NAME,
    .family = "generated",
    .supports = supports,
    .describe = describe,
    .space = space,
    .default_config = default_config,
    .build = build,
};
