/* dense_cuda.c -- the CUDA template of matrix products: Gemm, FusedGemm, and MatMul /
 * FusedMatMul of 2-D operands (the reader, key and epilogue are matmul.h's, shared with the CPU
 * template dense.c): a tiled GEMM. This file is the GPU schedule.
 *
 * MatMuls with batch dims come in two forms. Where B has none (all 1: a linear layer applied
 * to a [.., tokens, features] activation, ConvNeXt's and every transformer's MLP) the batch
 * folds into A's rows: one 2-D GEMM of prod(batch) * M rows, the output and Z read as
 * [rows, N] (the same bytes), so the tiles see the whole problem. Otherwise (attention's
 * Q K^T and P V) the output's batch dims, fused, run over blockIdx.z, each block a tile of one
 * batch's matrix; A's and B's batch dims broadcast as te_matmul's do.
 *
 * The algorithm is te_matmul over the output rounded up to whole blocks and the reduction
 * rounded up to whole steps, reading A and B through te_pad_to views that are zero past the
 * real matrices, so every block accumulates a whole tile and each thread's part stays its own
 * (registers). The views keep A's and B's storage order, so a cooperative copy into shared
 * memory reads consecutive addresses with consecutive threads whatever the transposes. y is
 * te_gemm_epilogue_compute over the real [M, N].
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

#include "te/algo/pad.h"
#include "kernels/common.h"
#include "kernels/conv.h"
#include "kernels/matmul.h"
#include "kernels/templates_cuda.h"

#define NAME "dense_cuda"

/* A product as this template computes it: g's a, b and z may point at the views here. */
typedef struct mm_view {
    tune_mm g;
    ir_tensor a2, b2, z2; /* A, B and Z as 2-D matrices when the batch folds into the rows */
} mm_view;

/* The product read (tune_mm_read's g) in the form this template takes: 2-D as it is, a batch
 * folded into A's rows, or batched over the grid. False for 1-D operands and outputs of
 * another shape. */
static bool shape_mm(mm_view *v, int nout, const ir_tensor *y) {
    tune_mm *g = &v->g;
    if (tune_mm_is_2d(g, nout, y)) return true;
    if (nout != 1 || tune_mm_is_gemm(g) || g->a->ndim < 2 || g->b->ndim < 2 ||
        y->ndim != g->nb + 2 || (g->z && !ir_same_shape(g->z, y)))
        return false;
    for (int d = 0; d < g->nb; d++)
        if (y->dims[d] != g->batch[d]) return false;
    if (y->dims[g->nb] != g->m || y->dims[g->nb + 1] != g->n) return false;
    if (ir_numel(g->b) != g->k * g->n) return true; /* B has a batch: over the grid */
    const int64_t rows = ir_numel(g->a) / g->k;
    if (rows * g->n != ir_numel(y)) return true;  /* A broadcasts too: over the grid */
    v->a2 = *g->a, v->b2 = *g->b;
    v->a2.ndim = v->b2.ndim = 2;
    v->a2.dims[0] = rows, v->a2.dims[1] = g->k;
    v->b2.dims[0] = g->k, v->b2.dims[1] = g->n;
    g->a = &v->a2, g->b = &v->b2;
    if (g->z) {
        v->z2 = *g->z;
        v->z2.ndim = 2;
        v->z2.dims[0] = rows, v->z2.dims[1] = g->n;
        g->z = &v->z2;
    }
    g->m = rows;
    g->nb = 0;
    return true;
}

static bool read_task(const tune_task *t, mm_view *v) {
    return tune_mm_read_task(t, &v->g) && shape_mm(v, t->nout, &t->out[0]);
}

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out) {
    (void)self;
    mm_view v;
    return n && n->nout == 1 && tune_mm_read(n, in, out, &v.g) && shape_mm(&v, 1, out[0]);
}

static void describe(const kernel_provider *self, tune_task *t) {
    (void)self;
    mm_view v;
    if (read_task(t, &v)) tune_mm_describe(NAME, &v.g, t);
}

static void space(const kernel_provider *self, const tune_task *t, tune_space *s) {
    (void)self;
    memset(s, 0, sizeof *s);
    mm_view v;
    if (!read_task(t, &v)) return;
    const tune_mm g = v.g;
    static const int64_t tx[] = {1, 2, 4, 8, 16, 32, 64, 128, 256}, ty[] = {1, 2, 4, 8, 16, 32};
    static const int64_t tiles[] = {1, 2, 4, 8}, tk[] = {1, 2, 4, 8, 16, 32}, flag[] = {0, 1};
    tune_cuda_add_upto(s, "thread_x", tx, 9, tune_cuda_pow2_at_least(g.n));
    tune_cuda_add_upto(s, "thread_y", ty, 6, tune_cuda_pow2_at_least(g.m));
    tune_cuda_add_upto(s, "tile_n", tiles, 4, g.n);
    tune_cuda_add_upto(s, "tile_m", tiles, 4, g.m);
    tune_cuda_add_upto(s, "tile_k", tk, 6, tune_cuda_pow2_at_least(g.k));
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

/* Why a config breaks a limit, or NULL. Several threads along a dim that holds one tile are
 * refused too: all but one would idle, and the generator cannot keep a tile per thread there. */
static const char *over_limit(const knobs *k, const tune_mm *g, char *why, size_t cap) {
    const int64_t threads = k->thx * k->thy, accum = k->tm * k->tn, smem = shared_bytes(k);
    if (k->thx > 1 && g->n <= k->tn)
        snprintf(why, cap, "thread_x %lld over the one tile (tile_n %lld) of %lld columns",
                 (long long)k->thx, (long long)k->tn, (long long)g->n);
    else if (k->thy > 1 && g->m <= k->tm)
        snprintf(why, cap, "thread_y %lld over the one tile (tile_m %lld) of %lld rows",
                 (long long)k->thy, (long long)k->tm, (long long)g->m);
    else if (threads > CUDA_MAX_THREADS)
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

/* The limits build checks (threads, accumulators, shared memory), without building. */
static bool legal(const kernel_provider *self, const tune_task *t, const tune_space *s,
                  const tune_config *cfg) {
    mm_view v;
    if (!read_task(t, &v)) return false;
    if (!kernel_legal_in_space(self, t, s, cfg)) return false;
    knobs k = read_knobs(s, cfg);
    char why[160];
    return over_limit(&k, &v.g, why, sizeof why) == NULL;
}

/* About 128-256 threads per block, 4x4 register tiles where the matrix is big enough; a
 * matrix-vector product (M = 1) gets one row of threads over the columns. */
static void default_config(const kernel_provider *self, const tune_task *t, const tune_space *s,
                           tune_config *cfg) {
    (void)self;
    mm_view v;
    memset(cfg, 0, sizeof *cfg);
    if (!read_task(t, &v)) return;
    const tune_mm g = v.g;
    tune_config_set(s, cfg, "tile_m", g.m >= 64 ? 4 : g.m >= 16 ? 2 : 1);
    tune_config_set(s, cfg, "tile_n", g.n >= 64 ? 4 : g.n >= 16 ? 2 : 1);
    const int64_t tm = tune_value(s, cfg, "tile_m"), tn = tune_value(s, cfg, "tile_n");
    int64_t thy = tune_cuda_pow2_at_least((g.m + tm - 1) / tm);
    if (thy > 16) thy = 16;
    int64_t thx = 256 / thy, need = tune_cuda_pow2_at_least((g.n + tn - 1) / tn);
    if (thx > need) thx = need;
    tune_config_set(s, cfg, "thread_y", thy);
    tune_config_set(s, cfg, "thread_x", thx);
    tune_config_set(s, cfg, "tile_k", 8);
    tune_config_set(s, cfg, "shared", 1);
    knobs k = read_knobs(s, cfg);
    char why[160];
    if (over_limit(&k, &g, why, sizeof why)) tune_config_set(s, cfg, "shared", 0);
}

static wpk_status failed(te_ctx *c) { return tune_failed(c, NAME); }

static wpk_status build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                        const tune_space *s, const tune_config *cfg, tune_build *out) {
    memset(out, 0, sizeof *out);
    mm_view v;
    if (!read_task(t, &v))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, NAME ": node '%s' is not a product this "
                         "template takes", t->node ? t->node->name : "(null)");
    TRY(tune_check_legal(c, self, t, s, cfg));
    const tune_mm g = v.g;
    const int nb = g.nb;
    const knobs k = read_knobs(s, cfg);
    char why[160];
    if (over_limit(&k, &g, why, sizeof why))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, NAME ": %s", why);

    te_tensor *a = tune_placeholder(c, "a", g.a), *b = tune_placeholder(c, "b", g.b);
    if (!a || !b) return failed(c);
    out->args[out->nargs++] = a;
    out->args[out->nargs++] = b;
    te_gemm_epilogue ep;
    if (tune_mm_epilogue_args(c, &g, out, &ep)) return failed(c);
    out->ninputs = out->nargs;

    /* the product over whole blocks and whole reduction steps */
    const int64_t bm = k.thy * k.tm, bn = k.thx * k.tn;
    const int64_t mp = te_ceil_div(g.m, bm) * bm, np = te_ceil_div(g.n, bn) * bn;
    const int64_t kp = te_ceil_div(g.k, k.tk) * k.tk;
    /* the matrices padded in their last two dims (batch dims as they are) */
    static const int64_t origin[TE_MAX_DIMS] = {0};
    int64_t ashape[TE_MAX_DIMS], bshape[TE_MAX_DIMS], yshape[TE_MAX_DIMS];
    memcpy(ashape, a->shape, sizeof(int64_t) * (size_t)a->ndim);
    memcpy(bshape, b->shape, sizeof(int64_t) * (size_t)b->ndim);
    ashape[a->ndim - 2] = g.ta ? kp : mp, ashape[a->ndim - 1] = g.ta ? mp : kp;
    bshape[b->ndim - 2] = g.tb ? np : kp, bshape[b->ndim - 1] = g.tb ? kp : np;
    memcpy(yshape, g.batch, sizeof(int64_t) * (size_t)nb);
    yshape[nb] = g.m, yshape[nb + 1] = g.n;
    static const char *const rc[2] = {"r", "c"};
    te_tensor *ap = te_pad_to(c, "a.pad", a, origin, ashape, 0.0, a->ndim == 2 ? rc : NULL);
    te_tensor *bp = te_pad_to(c, "b.pad", b, origin, bshape, 0.0, b->ndim == 2 ? rc : NULL);
    const te_matmul_params mmp = {g.ta, g.tb};
    te_tensor *acc = ap && bp ? te_matmul(c, "acc", ap, bp, &mmp, NULL, NULL) : NULL;
    te_tensor *y = te_gemm_epilogue_compute(c, "y", acc, yshape, &ep);
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
    if (ap != a) TRY(te_compute_inline(te_stage_of(sc, ap)));
    if (bp != b) TRY(te_compute_inline(te_stage_of(sc, bp)));

    /* y: blocks and threads over the output, the thread's tile innermost */
    te_stage *sy = te_stage_of(sc, y);
    te_iter *mo, *mi, *mb, *mt, *no, *ni, *nblk, *nt, *bz = NULL;
    TRY(te_split(sy, y->axes[nb], k.tm, &mo, &mi));
    TRY(te_split(sy, mo, k.thy, &mb, &mt));
    TRY(te_split(sy, y->axes[nb + 1], k.tn, &no, &ni));
    TRY(te_split(sy, no, k.thx, &nblk, &nt));
    if (nb) {
        bz = y->axes[0];
        for (int d = 1; d < nb; d++) TRY(te_fuse(sy, bz, y->axes[d], &bz));
        TRY(te_reorder(sy, 7, (te_iter *[]){bz, mb, nblk, mt, nt, mi, ni}));
        TRY(te_bind(sy, bz, "blockIdx.z"));
    } else {
        TRY(te_reorder(sy, 6, (te_iter *[]){mb, nblk, mt, nt, mi, ni}));
    }
    TRY(te_bind(sy, mb, "blockIdx.y"));
    TRY(te_bind(sy, nblk, "blockIdx.x"));
    TRY(te_bind(sy, mt, "threadIdx.y"));
    TRY(te_bind(sy, nt, "threadIdx.x"));
    TRY(te_unroll(sy, mi));
    TRY(te_unroll(sy, ni));

    /* acc: the block's tile at the innermost block loop; reduction steps outside the threads */
    te_stage *sa = te_stage_of(sc, acc);
    TRY(te_compute_at(sa, sy, nblk));
    TRY(te_set_scope(sa, "local"));
    te_iter *am, *ami, *an, *ani, *ko, *ki;
    TRY(te_split(sa, acc->axes[nb], k.tm, &am, &ami));
    TRY(te_split(sa, acc->axes[nb + 1], k.tn, &an, &ani));
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
        const int64_t threads[2] = {k.thx, k.thy};
        TRY(tune_cuda_cooperative(sas, 2, threads));
        TRY(tune_cuda_cooperative(sbs, 2, threads));
    }
    return WPK_OK;
}

TUNE_TEMPLATE(tune_dense_cuda, NAME, supports, describe, legal);
