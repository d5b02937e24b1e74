/* qgemm.c -- the int8 GEMM of qgemm.h: a portable tile and, on x86-64 CPUs with AVX512-VNNI,
 * register tiles of 8 rows x 16, 32 or 48 columns of _mm512_dpbusd_epi32 (16 s32 lanes, each
 * the 4-deep dot of u8 activations with s8 weights), compiled with a target attribute and chosen
 * by a CPU check at run time, so one binary runs everywhere. Both read the activations where
 * the caller left them (a padded input, or a packed im2col matrix) through tap offsets. */
#include "kernels/vendor/qgemm.h"

#include "ops/quant.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define QGEMM_X86 1
#include <immintrin.h>
#endif

static inline int32_t load_i32(const void *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

#ifdef QGEMM_X86
/* SSE2 (every x86-64): two rounds of interleaving turn the 4 rows into 16 groups of 4. */
static inline void interleave4(uint8_t *out, __m128i r0, __m128i r1, __m128i r2, __m128i r3) {
    __m128i a = _mm_unpacklo_epi8(r0, r1), b = _mm_unpackhi_epi8(r0, r1);
    __m128i c = _mm_unpacklo_epi8(r2, r3), d = _mm_unpackhi_epi8(r2, r3);
    _mm_storeu_si128((__m128i *)(void *)out, _mm_unpacklo_epi16(a, c));
    _mm_storeu_si128((__m128i *)(void *)(out + 16), _mm_unpackhi_epi16(a, c));
    _mm_storeu_si128((__m128i *)(void *)(out + 32), _mm_unpacklo_epi16(b, d));
    _mm_storeu_si128((__m128i *)(void *)(out + 48), _mm_unpackhi_epi16(b, d));
}

void qgemm_pack_group(uint8_t *out, const uint8_t *const r[4], uint8_t flip) {
    const __m128i f = _mm_set1_epi8((char)flip);
    __m128i v[4];
    for (int t = 0; t < 4; t++)
        v[t] = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)r[t]), f);
    interleave4(out, v[0], v[1], v[2], v[3]);
}

/* The even bytes of each 16-bit pair by masking, the odd ones by shifting, both packed. */
void qgemm_pack_group_pairs(uint8_t *even, uint8_t *odd, const uint8_t *const r[4],
                            uint8_t flip) {
    const __m128i f = _mm_set1_epi8((char)flip), low = _mm_set1_epi16(0x00ff);
    __m128i e[4], o[4];
    for (int t = 0; t < 4; t++) {
        __m128i lo = _mm_loadu_si128((const __m128i *)(const void *)r[t]);
        __m128i hi = _mm_loadu_si128((const __m128i *)(const void *)(r[t] + 16));
        e[t] = _mm_xor_si128(_mm_packus_epi16(_mm_and_si128(lo, low), _mm_and_si128(hi, low)), f);
        o[t] = _mm_xor_si128(_mm_packus_epi16(_mm_srli_epi16(lo, 8), _mm_srli_epi16(hi, 8)), f);
    }
    interleave4(even, e[0], e[1], e[2], e[3]);
    interleave4(odd, o[0], o[1], o[2], o[3]);
}
#else
void qgemm_pack_group(uint8_t *out, const uint8_t *const r[4], uint8_t flip) {
    for (int l = 0; l < QGEMM_LANES; l++)
        for (int t = 0; t < 4; t++) out[l * 4 + t] = r[t][l] ^ flip;
}

void qgemm_pack_group_pairs(uint8_t *even, uint8_t *odd, const uint8_t *const r[4],
                            uint8_t flip) {
    for (int l = 0; l < QGEMM_LANES; l++)
        for (int t = 0; t < 4; t++) {
            even[l * 4 + t] = r[t][2 * l] ^ flip;
            odd[l * 4 + t] = r[t][2 * l + 1] ^ flip;
        }
}
#endif

/* The requantization of one sum: the same float operations, in the same order, as the
 * QLinearConv reference kernel (ops/qlinear_conv.c), so the bytes match it. */
static inline int32_t requant(int32_t acc, const qgemm_args *g, int64_t row) {
    return quant_round_clamp((float)(acc + g->bias[row]) * g->mult[row], g->yzp, g->lo, g->hi);
}

/* Where the columns of one block (from c0) go in a row of y: runs of lanes (a mask of lanes)
 * that land on one output row, each with the offset from the row's start of lane 0. */
typedef struct col_map {
    int runs;
    uint32_t mask[QGEMM_LANES];
    int64_t off[QGEMM_LANES];
} col_map;

static void map_block(const qgemm_args *g, int64_t c0, col_map *cm) {
    int64_t n = g->cols - c0 < QGEMM_LANES ? g->cols - c0 : QGEMM_LANES;
    cm->runs = 0;
    for (int64_t l = 0; l < n;) {
        int64_t p = c0 + l, oh = p / g->row_w, ow = p - oh * g->row_w;
        int64_t run = g->row_w - ow < n - l ? g->row_w - ow : n - l;
        if (ow < g->out_w) {
            int64_t len = run < g->out_w - ow ? run : g->out_w - ow;
            cm->mask[cm->runs] = ((1u << len) - 1) << l;
            cm->off[cm->runs++] = oh * g->out_w + ow - l;
        }
        l += run;
    }
}

/* NULL when the block from c0 is 16 columns of one output row, else cm filled in. */
static const col_map *block_map(const qgemm_args *g, int64_t c0, col_map *cm) {
    if (g->row_w == g->out_w && c0 + QGEMM_LANES <= g->cols) return NULL;
    map_block(g, c0, cm);
    return cm;
}

/* The finished bytes of row r's block from column c0 to where qgemm.h says they go. */
static void store_cols(const qgemm_args *g, int64_t r, int64_t c0, const uint8_t *v) {
    uint8_t *y = (uint8_t *)g->y + r * g->ldy;
    col_map cm;
    map_block(g, c0, &cm);
    for (int i = 0; i < cm.runs; i++)
        for (int l = 0; l < QGEMM_LANES; l++)
            if (cm.mask[i] >> l & 1) y[cm.off[i] + l] = v[l];
}

/* A tile of QGEMM_MR rows and nb (1 to QGEMM_NB) column blocks. */
static void tile_portable(const qgemm_args *g, int64_t r, int64_t b, int nb) {
    int32_t acc[QGEMM_MR][QGEMM_NB * QGEMM_LANES];
    memset(acc, 0, sizeof acc);
    const int64_t ldw = g->taps * g->quads * 4;
    for (int64_t tap = 0; tap < g->taps; tap++)
        for (int64_t q = 0; q < g->quads; q++) {
            const uint8_t *a0 = g->a + b * QGEMM_LANES * 4 + g->tap_off[tap] + q * g->quad_stride;
            for (int i = 0; i < QGEMM_MR; i++) {
                const int8_t *w = g->w + (r + i) * ldw + (tap * g->quads + q) * 4;
                for (int j = 0; j < nb; j++) {
                    const uint8_t *a = a0 + j * QGEMM_LANES * 4;
                    int32_t *c = acc[i] + j * QGEMM_LANES;
                    for (int l = 0; l < QGEMM_LANES; l++)
                        c[l] += a[l * 4] * w[0] + a[l * 4 + 1] * w[1] + a[l * 4 + 2] * w[2] +
                                a[l * 4 + 3] * w[3];
                }
            }
        }
    for (int i = 0; i < QGEMM_MR && r + i < g->m; i++)
        for (int j = 0; j < nb; j++) {
            uint8_t v[QGEMM_LANES];
            for (int l = 0; l < QGEMM_LANES; l++)
                v[l] = (uint8_t)requant(acc[i][j * QGEMM_LANES + l], g, r + i);
            store_cols(g, r + i, (b + j) * QGEMM_LANES, v);
        }
}

#ifdef QGEMM_X86
#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))

/* 16 sums of row r (the bias already in them, as the tile starts from it) requantized as
 * the reference does, less the zero point: round(clamp(sum * mult, lo - yzp, hi - yzp)).
 * Clamping before rounding to integer bounds gives what rounding and then clamping does, and
 * the rounding is the conversion's own, to nearest even whatever MXCSR says. */
VNNI_TARGET __attribute__((always_inline)) static inline __m512i
requant16(const qgemm_args *g, int64_t r, __m512i acc) {
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), _mm512_set1_ps(g->mult[r]));
    v = _mm512_max_ps(v, _mm512_set1_ps((float)(g->lo - g->yzp)));
    v = _mm512_min_ps(v, _mm512_set1_ps((float)(g->hi - g->yzp)));
    return _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* One block's 16 sums of row r, stored by the runs of cm (masked stores touch no byte outside
 * their mask, so the address of a lane that is not stored does not matter). */
VNNI_TARGET __attribute__((always_inline)) static inline void
finish_runs(const qgemm_args *g, int64_t r, __m512i acc, const col_map *cm) {
    __m512i q = _mm512_add_epi32(requant16(g, r, acc), _mm512_set1_epi32(g->yzp));
    __m128i b = _mm512_cvtepi32_epi8(q);
    uintptr_t y = (uintptr_t)g->y + (uintptr_t)(r * g->ldy);
    for (int i = 0; i < cm->runs; i++)
        _mm512_mask_storeu_epi8((void *)(y + (uintptr_t)cm->off[i]), (__mmask64)cm->mask[i],
                                _mm512_castsi128_si512(b));
}

/* Row r of a tile of nb blocks from column c0: where every block is 16 columns of one output
 * row (cm null), the nb x 16 bytes are packed together (two saturating packs, in range by
 * then, and a permutation back into column order) and stored at once; else block by block. */
VNNI_TARGET __attribute__((always_inline)) static inline void
finish_row(const qgemm_args *g, int64_t r, int64_t c0, int nb, __m512i a0, __m512i a1, __m512i a2,
           const col_map *const cm[QGEMM_NB]) {
    if (r >= g->m || g->cols <= c0) return;
    bool whole = !cm[0] && (nb < 2 || !cm[1]) && (nb < 3 || !cm[2]);
    if (!whole) {
        const __m512i acc[QGEMM_NB] = {a0, a1, a2};
        for (int j = 0; j < nb && c0 + j * QGEMM_LANES < g->cols; j++) {
            col_map own;
            const col_map *m = cm[j] ? cm[j] : (map_block(g, c0 + j * QGEMM_LANES, &own), &own);
            finish_runs(g, r, acc[j], m);
        }
        return;
    }
    __m512i q0 = requant16(g, r, a0);
    __m512i q1 = nb > 1 ? requant16(g, r, a1) : q0;
    __m512i q2 = nb > 2 ? requant16(g, r, a2) : q1;
    const __m512i zp = _mm512_set1_epi16((short)g->yzp);
    __m512i w01 = _mm512_add_epi16(_mm512_packs_epi32(q0, q1), zp);
    __m512i w22 = _mm512_add_epi16(_mm512_packs_epi32(q2, q2), zp);
    __m512i b = g->y_signed ? _mm512_packs_epi16(w01, w22) : _mm512_packus_epi16(w01, w22);
    /* each 128-bit lane k holds the bytes of columns 4k..4k+3 of blocks 0, 1, 2, 2 */
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    b = _mm512_permutexvar_epi32(order, b);
    __mmask64 keep = nb == 3 ? 0xffffffffffffull : nb == 2 ? 0xffffffffull : 0xffffull;
    _mm512_mask_storeu_epi8((void *)((uint8_t *)g->y + r * g->ldy + c0), keep, b);
}

/* The 8-row tile written out so that its 8 x nb sums stay in registers; nb is a constant at
 * every call (tile_vnni_1/2/3), so the blocks past it are compiled away. */
#define ROW_DECL(i)                                                                          \
    __m512i c##i##0 = _mm512_set1_epi32(g->bias[r + (i)]), c##i##1 = c##i##0, c##i##2 = c##i##0
#define ROW_STEP(i)                                                                          \
    do {                                                                                     \
        __m512i wv = _mm512_set1_epi32(load_i32(w + (i) * ldw));                             \
        c##i##0 = _mm512_dpbusd_epi32(c##i##0, a0, wv);                                      \
        if (nb > 1) c##i##1 = _mm512_dpbusd_epi32(c##i##1, a1, wv);                          \
        if (nb > 2) c##i##2 = _mm512_dpbusd_epi32(c##i##2, a2, wv);                          \
    } while (0)
#define ROW_FINISH(i) finish_row(g, r + (i), col, nb, c##i##0, c##i##1, c##i##2, cms)

VNNI_TARGET __attribute__((always_inline)) static inline void
tile_vnni_nb(const qgemm_args *g, int64_t r, int64_t b, const int nb) {
    ROW_DECL(0);
    ROW_DECL(1);
    ROW_DECL(2);
    ROW_DECL(3);
    ROW_DECL(4);
    ROW_DECL(5);
    ROW_DECL(6);
    ROW_DECL(7);
    const int64_t ldw = g->taps * g->quads * 4, qs = g->quad_stride;
    const int8_t *w = g->w + r * ldw;
    __m512i a1 = _mm512_setzero_si512(), a2 = a1;
    for (int64_t tap = 0; tap < g->taps; tap++) {
        const uint8_t *a = g->a + b * QGEMM_LANES * 4 + g->tap_off[tap];
        for (int64_t q = 0; q < g->quads; q++, a += qs, w += 4) {
            __m512i a0 = _mm512_loadu_si512((const void *)a);
            if (nb > 1) a1 = _mm512_loadu_si512((const void *)(a + 64));
            if (nb > 2) a2 = _mm512_loadu_si512((const void *)(a + 128));
            ROW_STEP(0);
            ROW_STEP(1);
            ROW_STEP(2);
            ROW_STEP(3);
            ROW_STEP(4);
            ROW_STEP(5);
            ROW_STEP(6);
            ROW_STEP(7);
        }
    }
    int64_t col = b * QGEMM_LANES;
    col_map maps[QGEMM_NB];
    const col_map *cms[QGEMM_NB] = {NULL, NULL, NULL};
    for (int j = 0; j < nb; j++) cms[j] = block_map(g, col + j * QGEMM_LANES, &maps[j]);
    ROW_FINISH(0);
    ROW_FINISH(1);
    ROW_FINISH(2);
    ROW_FINISH(3);
    ROW_FINISH(4);
    ROW_FINISH(5);
    ROW_FINISH(6);
    ROW_FINISH(7);
}

VNNI_TARGET static void tile_vnni_1(const qgemm_args *g, int64_t r, int64_t b) {
    tile_vnni_nb(g, r, b, 1);
}
VNNI_TARGET static void tile_vnni_2(const qgemm_args *g, int64_t r, int64_t b) {
    tile_vnni_nb(g, r, b, 2);
}
VNNI_TARGET static void tile_vnni_3(const qgemm_args *g, int64_t r, int64_t b) {
    tile_vnni_nb(g, r, b, 3);
}

/* Whether $WPK_CPU_FLAGS_OFF (a comma-separated list of /proc/cpuinfo flags) names flag. */
static bool flag_hidden(const char *flag) {
    size_t want = strlen(flag);
    for (const char *p = getenv("WPK_CPU_FLAGS_OFF"); p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == want && !strncmp(p, flag, len)) return true;
        p = end ? end + 1 : NULL;
    }
    return false;
}

/* AVX-512 F and BW with VNNI, unless $WPK_CPU_FLAGS_OFF hides one of them: how the portable
 * loop is run and tested on a machine that has VNNI. */
static bool have_vnni(void) {
    if (flag_hidden("avx512f") || flag_hidden("avx512bw") || flag_hidden("avx512_vnni"))
        return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vnni");
}

/* The mask of the first n bytes of a vector (all of them from 64 on). */
static inline __mmask64 first_bytes(int64_t n) {
    return n >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1);
}

/* 64 pixels of 4 rows (v[t], flipped already) interleaved into out: two rounds of unpacking
 * interleave within each 128-bit lane (o_j's lane L holds pixels 16 L + 4 j ... + 3), and a
 * 4x4 transpose of the lanes puts pixels 16 L ... 16 L + 15 in output vector L. Only the first
 * `rest` pixels are stored (a masked-off byte is not written). */
__attribute__((target("avx512f,avx512bw"))) static inline void
interleave_store(uint8_t *out, const __m512i v[4], int64_t rest) {
    __m512i a = _mm512_unpacklo_epi8(v[0], v[1]), b = _mm512_unpackhi_epi8(v[0], v[1]);
    __m512i c = _mm512_unpacklo_epi8(v[2], v[3]), d = _mm512_unpackhi_epi8(v[2], v[3]);
    __m512i o0 = _mm512_unpacklo_epi16(a, c), o1 = _mm512_unpackhi_epi16(a, c);
    __m512i o2 = _mm512_unpacklo_epi16(b, d), o3 = _mm512_unpackhi_epi16(b, d);
    __m512i t0 = _mm512_shuffle_i32x4(o0, o1, 0x44), t1 = _mm512_shuffle_i32x4(o0, o1, 0xee);
    __m512i t2 = _mm512_shuffle_i32x4(o2, o3, 0x44), t3 = _mm512_shuffle_i32x4(o2, o3, 0xee);
    __m512i w[4] = {_mm512_shuffle_i32x4(t0, t2, 0x88), _mm512_shuffle_i32x4(t0, t2, 0xdd),
                    _mm512_shuffle_i32x4(t1, t3, 0x88), _mm512_shuffle_i32x4(t1, t3, 0xdd)};
    if (rest >= 64) {
        for (int j = 0; j < 4; j++) _mm512_storeu_si512((void *)(out + 64 * j), w[j]);
        return;
    }
    for (int64_t j = 0; j < 4 && 16 * j < rest; j++) {
        _mm512_mask_storeu_epi8((void *)(out + 64 * j), first_bytes(4 * (rest - 16 * j)), w[j]);
    }
}

/* 64 pixels of 4 rows per step; the last ones by masked loads (nothing past r[t][n - 1] read). */
__attribute__((target("avx512f,avx512bw"))) static void
interleave_avx512(uint8_t *out, const uint8_t *const r[4], int64_t n, uint8_t flip) {
    const __m512i f = _mm512_set1_epi8((char)flip);
    for (int64_t p = 0; p < n; p += 64) {
        __mmask64 in_mask = first_bytes(n - p);
        __m512i v[4];
        for (int t = 0; t < 4; t++)
            v[t] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(in_mask, r[t] + p), f);
        interleave_store(out + 4 * p, v, n - p);
    }
}

/* The even and odd pixels of 4 rows of n pixels, each kind interleaved (qgemm.h), 64 pairs a
 * step: the bytes of each 16-bit pair split by masking and shifting, packed with unsigned
 * saturation (exact: they are below 256), and the packs' lane order put right. */
__attribute__((target("avx512f,avx512bw"))) static void
interleave_pairs_avx512(uint8_t *even, uint8_t *odd, const uint8_t *const r[4], int64_t n,
                        uint8_t flip) {
    const __m512i f = _mm512_set1_epi8((char)flip), low = _mm512_set1_epi16(0x00ff);
    const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
    for (int64_t p = 0; p < n; p += 128) {
        __mmask64 m0 = first_bytes(n - p), m1 = n - p > 64 ? first_bytes(n - p - 64) : 0;
        __m512i e[4], o[4];
        for (int t = 0; t < 4; t++) {
            __m512i lo = _mm512_maskz_loadu_epi8(m0, r[t] + p);
            __m512i hi = _mm512_maskz_loadu_epi8(m1, r[t] + p + 64);
            __m512i ev = _mm512_packus_epi16(_mm512_and_si512(lo, low), _mm512_and_si512(hi, low));
            __m512i od = _mm512_packus_epi16(_mm512_srli_epi16(lo, 8), _mm512_srli_epi16(hi, 8));
            e[t] = _mm512_xor_si512(_mm512_permutexvar_epi64(order, ev), f);
            o[t] = _mm512_xor_si512(_mm512_permutexvar_epi64(order, od), f);
        }
        interleave_store(even + 2 * p, e, (n - p + 1) / 2);
        if (odd) interleave_store(odd + 2 * p, o, (n - p) / 2);
    }
}
#else
static bool have_vnni(void) { return false; }
#endif

typedef void (*tile_fn)(const qgemm_args *g, int64_t r, int64_t b);

/* The VNNI tile of 1, 2 and 3 column blocks (index = blocks); all null on the portable path. */
static tile_fn vnni_tiles[QGEMM_NB + 1];
typedef void (*interleave_fn)(uint8_t *out, const uint8_t *const r[4], int64_t n, uint8_t flip);
static interleave_fn interleave_wide; /* null on the portable path */
typedef void (*pairs_fn)(uint8_t *even, uint8_t *odd, const uint8_t *const r[4], int64_t n,
                         uint8_t flip);
static pairs_fn pairs_wide; /* null on the portable path */
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

static void choose(void) {
#ifdef QGEMM_X86
    if (have_vnni()) {
        vnni_tiles[1] = tile_vnni_1;
        vnni_tiles[2] = tile_vnni_2;
        vnni_tiles[3] = tile_vnni_3;
        interleave_wide = interleave_avx512;
        pairs_wide = interleave_pairs_avx512;
    }
#endif
}

static const tile_fn *pick(void) {
    pthread_once(&chosen_once, choose);
    return vnni_tiles;
}

const char *qgemm_isa(void) { return pick()[1] ? "vnni" : "portable"; }

/* Tiles of QGEMM_NB blocks, the last one of a row of tiles narrower when the blocks run out. */
void qgemm_run(const qgemm_args *g, int64_t r0, int64_t r1, int64_t b0, int64_t b1) {
    const tile_fn *tiles = pick();
    for (int64_t b = b0; b < b1; b += QGEMM_NB) {
        int nb = b1 - b < QGEMM_NB ? (int)(b1 - b) : QGEMM_NB;
        for (int64_t r = r0; r < r1; r += QGEMM_MR) {
            if (tiles[nb])
                tiles[nb](g, r, b);
            else
                tile_portable(g, r, b, nb);
        }
    }
}

void qgemm_interleave(uint8_t *out, const uint8_t *const r[4], int64_t n, uint8_t flip) {
    pick();
    if (interleave_wide) {
        interleave_wide(out, r, n, flip);
        return;
    }
    int64_t p = 0;
    for (; p + QGEMM_LANES <= n; p += QGEMM_LANES) {
        const uint8_t *part[4] = {r[0] + p, r[1] + p, r[2] + p, r[3] + p};
        qgemm_pack_group(out + p * 4, part, flip);
    }
    if (p == n) return;
    uint8_t tail[4][QGEMM_LANES] = {{0}}, last[QGEMM_LANES * 4];
    const uint8_t *part[4] = {tail[0], tail[1], tail[2], tail[3]};
    for (int t = 0; t < 4; t++) memcpy(tail[t], r[t] + p, (size_t)(n - p));
    qgemm_pack_group(last, part, flip);
    memcpy(out + p * 4, last, (size_t)(n - p) * 4);
}

void qgemm_interleave_pairs(uint8_t *even, uint8_t *odd, const uint8_t *const r[4], int64_t n,
                            uint8_t flip) {
    pick();
    if (pairs_wide) {
        pairs_wide(even, odd, r, n, flip);
        return;
    }
    int64_t p = 0;
    uint8_t e[QGEMM_LANES * 4], o[QGEMM_LANES * 4];
    for (; p + 2 * QGEMM_LANES <= n; p += 2 * QGEMM_LANES) {
        const uint8_t *part[4] = {r[0] + p, r[1] + p, r[2] + p, r[3] + p};
        qgemm_pack_group_pairs(even + p * 2, odd ? odd + p * 2 : o, part, flip);
    }
    if (p == n) return;
    uint8_t tail[4][2 * QGEMM_LANES] = {{0}};
    const uint8_t *part[4] = {tail[0], tail[1], tail[2], tail[3]};
    for (int t = 0; t < 4; t++) memcpy(tail[t], r[t] + p, (size_t)(n - p));
    qgemm_pack_group_pairs(e, o, part, flip);
    memcpy(even + p * 2, e, (size_t)((n - p + 1) / 2 * 4));
    if (odd) memcpy(odd + p * 2, o, (size_t)((n - p) / 2 * 4));
}
