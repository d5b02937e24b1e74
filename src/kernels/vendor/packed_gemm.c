/* packed_gemm.c -- wpk's own AVX-512 GEMM as a library provider (lib.h), "packed": Gemm /
 * wpk::FusedGemm / MatMul / wpk::FusedMatMul whose B is a constant matrix. B is packed once at
 * create into column panels of NR floats (zero padded), so a run reads it as one contiguous
 * stream; an 8 x 48 register tile of Y accumulates over K blocks sized so that a panel's block
 * and A's block stay in L2, and the epilogue (alpha, bias or Gemm's C row, residual Z,
 * activation, in ops/fused.c's order) is applied to the tile in registers as it is stored. The
 * next block of B is prefetched while the current one is used (weights come from memory). The
 * batch of a MatMul whose A has all of Y's batch dims is folded into M: every batch matrix
 * multiplies the same B.
 *
 * Threads: a parallel loop over the panels on the kernel's thread count (set around the run and
 * put back), entered only with more than one thread (op_parallel). Memory: B packed, Gemm's C as
 * a row and any other constant input copied at create; a run allocates nothing. */
#include <immintrin.h>
#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/target.h"
#include "kernels/vendor/lib.h"
#include "kernels/vendor/lib_node.h"
#include "ops/op_util.h"
#include "ops/vec_math.h"

#define MAX_IN 4
#define MR 8               /* rows of the register tile */
#define NR 48              /* columns of the register tile: three 16-lane vectors */
#define KC_MIN 256         /* shortest K block: below it the tile's loads and stores dominate */
#define L2_DEFAULT (512 * 1024) /* when /sys does not say */
#define PARALLEL_MIN_MACS ((int64_t)1 << 18)

struct lib_kernel {
    char name[64];          /* the node's, for messages */
    lib_gemm g;
    int nin, threads;
    int64_t rows;           /* M with the batch folded in */
    int64_t panels;         /* ceil(N / NR) */
    int64_t kc;             /* K block, from the L2 size (k_block) */
    int64_t ynumel;
    float *konst[MAX_IN];   /* B packed; Gemm's C as beta * C over N; other constant copies */
    size_t konst_bytes[MAX_IN];
};

static bool cpu_has_avx512(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

static const char *version(const kernel_provider *self) {
    (void)self;
    return "wpk packed GEMM (AVX-512, 8x48 tiles)";
}

/* ---- what it takes ---- */

static wpk_status check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out, lib_gemm *g, int64_t *rows) {
    if (n->nin > MAX_IN) return op_unsupported(ctx, n, "has %d inputs", n->nin);
    if (!lib_is_gemm(n))
        return op_unsupported(ctx, n, "the packed provider takes matrix products, not %s",
                              n->op_type);
    wpk_status st = lib_gemm_read(ctx, n, in, out, g);
    if (st) return st;
    if (!cpu_has_avx512())
        return op_unsupported(ctx, n, "the packed GEMM needs AVX-512 (avx512f), which this "
                              "CPU does not have");
    if (!in[1]->data)
        return op_unsupported(ctx, n, "B is computed at run time; the packed GEMM packs a "
                              "constant B when it is created");
    if (g->ta) return op_unsupported(ctx, n, "transA = 1; the packed GEMM reads A by rows");
    *rows = g->m;
    for (int i = 0; i < g->nb; i++) {
        if (g->bbatch[i] != 1 || g->abatch[i] != g->batch[i])
            return op_unsupported(ctx, n, "batch dim %d is B's or broadcast; the packed GEMM "
                                  "takes one B for every matrix of A", i);
        *rows *= g->batch[i];
    }
    if (g->has_c && g->cm > 1)
        return op_unsupported(ctx, n, "C has %lld rows; the packed GEMM adds C as one row",
                              (long long)g->cm);
    if (g->has_c && !in[LIB_IN_BIAS]->data)
        return op_unsupported(ctx, n, "C is computed at run time; the packed GEMM folds a "
                              "constant C when it is created");
    if (*rows > INT_MAX || g->n > INT_MAX || g->k > INT_MAX)
        return op_unsupported(ctx, n, "matrices past 2^31 rows or columns");
    return WPK_OK;
}

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out) {
    (void)self;
    lib_gemm g;
    int64_t rows;
    return check(NULL, n, in, out, &g, &rows) == WPK_OK;
}

static int configs(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                   ir_tensor *const *out, char (*names)[LIB_CONFIG_MAX]) {
    if (!supports(self, n, in, out)) return 0;
    snprintf(names[0], LIB_CONFIG_MAX, "avx512_%dx%d", MR, NR);
    return 1;
}

/* ---- create / destroy ---- */

static void destroy(const kernel_provider *self, lib_kernel *k) {
    (void)self;
    if (!k) return;
    for (int i = 0; i < MAX_IN; i++) wpk_free(k->konst[i]);
    wpk_free(k);
}

static int constants(const kernel_provider *self, const lib_kernel *k, const void **start,
                     size_t *bytes, int max) {
    (void)self;
    int n = 0;
    for (int i = 0; i < MAX_IN && n < max; i++)
        if (k->konst[i]) {
            start[n] = k->konst[i];
            bytes[n++] = k->konst_bytes[i];
        }
    return n;
}

/* B (K x N, or N x K with transB) into panels: panel p holds columns [p * NR, p * NR + NR) as
 * K rows of NR floats, zero past N. */
static void pack_b(const lib_gemm *g, const float *b, float *dst, int64_t panels) {
    const int64_t kk = g->k, n = g->n;
    for (int64_t p = 0; p < panels; p++)
        for (int64_t r = 0; r < kk; r++) {
            float *row = dst + (p * kk + r) * NR;
            for (int64_t j = 0; j < NR; j++) {
                int64_t col = p * NR + j;
                row[j] = col >= n ? 0.0f : g->tb ? b[col * kk + r] : b[r * n + col];
            }
        }
}

/* The K block: A's block (every row) and one panel's block are reused from L2 across panels and
 * row tiles, so they share three quarters of it; K splits into equal blocks of at most that. One
 * block where it fits matters most: each further block stores Y's partial sums and reads them
 * back, a round trip through L3 once Y outgrows L2. */
static int64_t k_block(int64_t rows, int64_t k) {
    int64_t l2 = target_cache_bytes(2);
    if (l2 <= 0) l2 = L2_DEFAULT;
    int64_t fit = l2 * 3 / 4 / ((int64_t)sizeof(float) * (rows + NR));
    if (fit < KC_MIN) fit = KC_MIN;
    if (fit >= k) return k;
    int64_t blocks = (k + fit - 1) / fit;
    return (k + blocks - 1) / blocks;
}

/* Gemm's C, one value or one per column, as beta * C over the N columns. */
static void c_row(const lib_gemm *g, const float *c, float *dst) {
    for (int64_t j = 0; j < g->n; j++) dst[j] = g->beta * c[g->cn > 1 ? j : 0];
}

static wpk_status create(const kernel_provider *self, wpk_context *ctx, const ir_node *n,
                         ir_tensor *const *in, ir_tensor *const *out, int config,
                         const kernel_device *dev, lib_kernel **out_k) {
    *out_k = NULL;
    if (dev->cuda) return lib_host_only(ctx, self, n);
    lib_kernel *k = wpk_calloc(1, sizeof *k);
    if (!k) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory creating a packed GEMM kernel");
    wpk_status st = check(ctx, n, in, out, &k->g, &k->rows);
    if (!st && config != 0)
        st = op_unsupported(ctx, n, "the packed GEMM has one config (0), not %d", config);
    if (st) {
        destroy(self, k);
        return st;
    }
    snprintf(k->name, sizeof k->name, "%s", n->name);
    k->nin = n->nin;
    k->threads = dev->threads;
    k->ynumel = ir_numel(out[0]);
    k->panels = (k->g.n + NR - 1) / NR;
    k->kc = k_block(k->rows, k->g.k);
    bool nomem = false;
    for (int i = 0; i < n->nin && !nomem; i++) {
        if (!in[i] || !in[i]->data) continue;
        size_t bytes = i == 1 ? sizeof(float) * (size_t)(k->panels * NR * k->g.k)
                       : i == LIB_IN_BIAS && k->g.has_c ? sizeof(float) * (size_t)k->g.n
                                                        : ir_nbytes(in[i]);
        if (!(k->konst[i] = wpk_malloc(bytes ? bytes : 1))) {
            nomem = true;
            break;
        }
        k->konst_bytes[i] = bytes;
        if (i == 1) pack_b(&k->g, in[1]->data, k->konst[1], k->panels);
        else if (i == LIB_IN_BIAS && k->g.has_c) c_row(&k->g, in[i]->data, k->konst[i]);
        else memcpy(k->konst[i], in[i]->data, bytes);
    }
    if (nomem) {
        destroy(self, k);
        return wpk_error(ctx, WPK_ERR_NOMEM, "node '%s' (%s): out of memory creating a packed "
                         "GEMM kernel", n->name, n->op_type);
    }
    *out_k = k;
    return WPK_OK;
}

/* ---- run ---- */

/* What one run reads: A (rows x K), the packed B, the row added to every row of Y (FusedMatMul's
 * bias or Gemm's beta * C; NULL: none), the residual Z (NULL: none) and Y. */
typedef struct gemm_args {
    const lib_kernel *k;
    const float *a, *b, *row, *z;
    float *y;
} gemm_args;

#define INLINE VEC_TARGET static inline __attribute__((always_inline))

/* One vector of Y's row (offset `at` into Y and Z, column `col`, lanes `mask`): at the last K
 * block with the epilogue (alpha, the row, Z, then GELU or ReLU in registers), else the partial
 * sums as they are. Inlined into the tile so that the sums never leave the registers. */
INLINE void store_vec(const gemm_args *t, int64_t at, int64_t col, __mmask16 mask, __m512 s,
                      bool last) {
    const lib_gemm *g = &t->k->g;
    if (last) {
        if (g->alpha != 1.0f) s = _mm512_mul_ps(s, _mm512_set1_ps(g->alpha));
        if (t->row) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(mask, t->row + col));
        if (t->z) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(mask, t->z + at));
        if (g->act.kind == ACT_GELU) s = vec_gelu(s);
        else if (g->act.kind == ACT_RELU) s = _mm512_max_ps(s, _mm512_setzero_ps());
    }
    _mm512_mask_storeu_ps(t->y + at, mask, s);
}

/* Row `row` of a tile (columns j0.., masks mask[0..2]) into Y; activations other than GELU
 * and ReLU run over the stored row. */
INLINE void store_row(const gemm_args *t, int64_t row, int64_t j0, const __mmask16 *mask,
                      __m512 s0, __m512 s1, __m512 s2, bool last) {
    const lib_gemm *g = &t->k->g;
    const int64_t n = g->n, at = row * n + j0;
    store_vec(t, at, j0, mask[0], s0, last);
    store_vec(t, at + 16, j0 + 16, mask[1], s1, last);
    store_vec(t, at + 32, j0 + 32, mask[2], s2, last);
    if (last && g->act.kind != ACT_NONE && g->act.kind != ACT_GELU && g->act.kind != ACT_RELU)
        act_apply(&g->act, t->y + at, n - j0 < NR ? n - j0 : NR);
}

/* Where one tile works: rows [i0, i0 + mr) (mr <= MR), panel p, K block [k0, k0 + kc); the
 * sums so far come from Y unless `first`; at the `last` block the epilogue runs on them. While
 * it runs it prefetches `pf_lines` cache lines from `pf` into L2: its share of the next block
 * of B (see run_panels). */
typedef struct tile_work {
    int64_t i0, p, k0, kc;
    bool first, last;
    const float *pf;
    int64_t pf_lines;
} tile_work;

#define LINE_FLOATS 16 /* floats in a 64-byte cache line */

/* The tile's body, inlined with mr a constant so that a short tile (the M tail) computes only
 * its rows; the 24 accumulators are named variables so that they stay in registers. */
INLINE void tile_rows(const gemm_args *t, const tile_work *w, const int mr) {
    const lib_gemm *g = &t->k->g;
    const int64_t lda = g->k, n = g->n, j0 = w->p * NR, left = n - j0, kc = w->kc;
    const float *ar[MR];
    for (int r = 0; r < MR; r++) ar[r] = t->a + (w->i0 + (r < mr ? r : mr - 1)) * lda + w->k0;
    const float *bp = t->b + (w->p * g->k + w->k0) * NR;
    __mmask16 mask[3];
    for (int v = 0; v < 3; v++) {
        int64_t in = left - 16 * v;
        mask[v] = in >= 16 ? 0xffff : in <= 0 ? 0 : (__mmask16)((1u << in) - 1);
    }
    const bool first = w->first;
#define ACC_INIT(r)                                                                        \
    __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = c##r##0, c##r##2 = c##r##0;             \
    if (!first && r < mr) {                                                                \
        const float *yr = t->y + (w->i0 + r) * n + j0;                                     \
        c##r##0 = _mm512_maskz_loadu_ps(mask[0], yr);                                      \
        c##r##1 = _mm512_maskz_loadu_ps(mask[1], yr + 16);                                 \
        c##r##2 = _mm512_maskz_loadu_ps(mask[2], yr + 32);                                 \
    }
    ACC_INIT(0) ACC_INIT(1) ACC_INIT(2) ACC_INIT(3)
    ACC_INIT(4) ACC_INIT(5) ACC_INIT(6) ACC_INIT(7)
#undef ACC_INIT
    /* Y's lines are fetched for writing while the K loop runs, not when the stores miss (a
     * middle K block has just loaded them) */
    if (first || w->last)
        for (int r = 0; r < mr; r++)
            for (int v = 0; v < 3 && 16 * v < left; v++)
                __builtin_prefetch(t->y + (w->i0 + r) * n + j0 + 16 * v, 1, 3);
    const float *a0 = ar[0], *a1 = ar[1], *a2 = ar[2], *a3 = ar[3], *a4 = ar[4], *a5 = ar[5],
                *a6 = ar[6], *a7 = ar[7];
#define ACC_ROW(r)                                                                         \
    if (r < mr) {                                                                          \
        const __m512 av = _mm512_set1_ps(a##r[kk]);                                        \
        c##r##0 = _mm512_fmadd_ps(av, b0, c##r##0);                                        \
        c##r##1 = _mm512_fmadd_ps(av, b1, c##r##1);                                        \
        c##r##2 = _mm512_fmadd_ps(av, b2, c##r##2);                                        \
    }
#define K_STEP                                                                             \
    {                                                                                      \
        const __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16),             \
                     b2 = _mm512_loadu_ps(bp + 32);                                        \
        ACC_ROW(0) ACC_ROW(1) ACC_ROW(2) ACC_ROW(3)                                         \
        ACC_ROW(4) ACC_ROW(5) ACC_ROW(6) ACC_ROW(7)                                         \
    }
    /* a prefetch per K step while the share lasts, then the bare loop */
    const int64_t with_pf = w->pf_lines < kc ? w->pf_lines : kc;
    const char *pf = (const char *)w->pf;
    int64_t kk = 0;
    for (; kk < with_pf; kk++, bp += NR, pf += 64) {
        _mm_prefetch(pf, _MM_HINT_T1);
        K_STEP
    }
    for (; kk < kc; kk++, bp += NR) K_STEP
#undef K_STEP
#undef ACC_ROW
#define ACC_STORE(r)                                                                       \
    if (r < mr) store_row(t, w->i0 + r, j0, mask, c##r##0, c##r##1, c##r##2, w->last);
    ACC_STORE(0) ACC_STORE(1) ACC_STORE(2) ACC_STORE(3)
    ACC_STORE(4) ACC_STORE(5) ACC_STORE(6) ACC_STORE(7)
#undef ACC_STORE
}

VEC_TARGET static void tile(const gemm_args *t, const tile_work *w, int mr) {
    switch (mr) {
    case 1: tile_rows(t, w, 1); break;
    case 2: tile_rows(t, w, 2); break;
    case 3: tile_rows(t, w, 3); break;
    case 4: tile_rows(t, w, 4); break;
    case 5: tile_rows(t, w, 5); break;
    case 6: tile_rows(t, w, 6); break;
    case 7: tile_rows(t, w, 7); break;
    default: tile_rows(t, w, MR); break;
    }
}

/* Panels [p0, p1) of Y, every row, K block by K block. Big models' weights do not fit in the
 * last-level cache, so each block of B comes from memory: the row tiles of one block prefetch
 * the next block in equal shares, spreading its fetch over the whole block's compute instead
 * of stalling the next block's first tile on it. */
static void run_panels(const gemm_args *t, int64_t p0, int64_t p1) {
    const int64_t rows = t->k->rows, kk = t->k->g.k, block = t->k->kc;
    const int64_t tiles = (rows + MR - 1) / MR;
    for (int64_t k0 = 0; k0 < kk; k0 += block) {
        const int64_t kc = kk - k0 < block ? kk - k0 : block;
        for (int64_t p = p0; p < p1; p++) {
            /* the next block in this loop's order: the next panel, else the next K block */
            const int64_t np = p + 1 < p1 ? p + 1 : p0, nk0 = p + 1 < p1 ? k0 : k0 + kc;
            const int64_t nkc = kk - nk0 < block ? kk - nk0 : block;
            const int64_t lines = nk0 < kk ? nkc * NR / LINE_FLOATS : 0;
            const int64_t share = (lines + tiles - 1) / tiles;
            tile_work w = {0, p, k0, kc, k0 == 0, k0 + kc >= kk, NULL, 0};
            for (int64_t ti = 0; ti < tiles; ti++) {
                w.i0 = ti * MR;
                w.pf_lines = lines - ti * share < share ? lines - ti * share : share;
                if (w.pf_lines < 0) w.pf_lines = 0;
                w.pf = w.pf_lines ? t->b + (np * kk + nk0) * NR + ti * share * LINE_FLOATS
                                  : NULL;
                tile(t, &w, rows - w.i0 < MR ? (int)(rows - w.i0) : MR);
            }
        }
    }
}

static void run_gemm(const gemm_args *t) {
    const lib_kernel *k = t->k;
    const int64_t panels = k->panels;
    if (!op_parallel(k->rows * k->g.n * k->g.k, PARALLEL_MIN_MACS) || panels < 2) {
        run_panels(t, 0, panels);
        return;
    }
#pragma omp parallel
    {
        const int64_t nt = omp_get_num_threads(), id = omp_get_thread_num();
        run_panels(t, panels * id / nt, panels * (id + 1) / nt);
    }
}

/* Input i's data for this run: the copy made at create, else the caller's. */
static const float *data_of(const lib_kernel *k, ir_tensor *const *in, int i) {
    if (i >= k->nin) return NULL;
    if (k->konst[i]) return k->konst[i];
    return in[i] ? in[i]->data : NULL;
}

static wpk_status run(const kernel_provider *self, wpk_context *ctx, lib_kernel *k,
                      ir_tensor *const *in, ir_tensor *const *out) {
    (void)self;
    if (!out || !out[0] || !out[0]->data || ir_numel(out[0]) != k->ynumel)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "node '%s' (packed): the output is not the "
                         "one the kernel was created for", k->name);
    for (int i = 0; i < k->nin; i++)
        if (!k->konst[i] && in[i] && !in[i]->data)
            return wpk_error(ctx, WPK_ERR_INVALID_ARG, "node '%s' (packed): input %d has no "
                             "data", k->name, i);
    if (!data_of(k, in, 0))
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "node '%s' (packed): input A is required",
                         k->name);
    const lib_gemm *g = &k->g;
    gemm_args t = {k, data_of(k, in, 0), k->konst[1],
                   g->has_c || g->has_bias ? data_of(k, in, LIB_IN_BIAS) : NULL,
                   g->has_z ? data_of(k, in, LIB_IN_Z) : NULL, out[0]->data};
    int saved = -1;
    if (k->threads > 0) {
        saved = omp_get_max_threads();
        omp_set_num_threads(k->threads);
    }
    run_gemm(&t);
    if (saved > 0) omp_set_num_threads(saved);
    return WPK_OK;
}

const kernel_provider lib_packed_gemm = {
    .name = "packed",
    .family = "packed",
    .describe = lib_describe,
    .space = lib_space,
    .default_config = lib_default_config,
    .legal = kernel_legal_in_space,
    .supports = supports,
    .configs = configs,
    .create = create,
    .run = run,
    .destroy = destroy,
    .constants = constants,
    .version = version,
};
