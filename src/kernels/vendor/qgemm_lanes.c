/* qgemm_lanes.c -- the int8 GEMM of qgemm.h turned around for small planes: output channels in
 * the vector lanes and output positions broadcast, so that a plane of 49 or 196 positions is
 * not rounded up to 16-column blocks. A tile is 64 rows x QGEMM_LANES_NP positions of
 * _mm512_dpbusd_epi32 on AVX512-VNNI, a portable loop with the same bytes elsewhere. */
#include "kernels/vendor/qgemm.h"

#include "ops/quant.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define LANES_X86 1
#include <immintrin.h>
#endif

/* Column p of the activations (qgemm.h) that holds output position j. */
static inline int64_t column_of(const qgemm_args *g, int64_t j) {
    return g->row_w == g->out_w ? j : j / g->out_w * g->row_w + j % g->out_w;
}

static void tile_portable(const qgemm_args *g, int64_t mb, int64_t j0, int np) {
    int32_t acc[QGEMM_LANES_NP][QGEMM_LANES_MR];
    memset(acc, 0, sizeof acc);
    const int64_t k4 = g->taps * g->quads;
    const int8_t *w = g->w + mb * k4 * QGEMM_LANES_MR * 4;
    for (int64_t tap = 0; tap < g->taps; tap++)
        for (int64_t q = 0; q < g->quads; q++, w += QGEMM_LANES_MR * 4)
            for (int i = 0; i < np; i++) {
                const uint8_t *a = g->a + 4 * column_of(g, j0 + i) + g->tap_off[tap] +
                                   q * g->quad_stride;
                for (int l = 0; l < QGEMM_LANES_MR; l++)
                    acc[i][l] += a[0] * w[l * 4] + a[1] * w[l * 4 + 1] + a[2] * w[l * 4 + 2] +
                                 a[3] * w[l * 4 + 3];
            }
    for (int l = 0; l < QGEMM_LANES_MR; l++) {
        int64_t row = mb * QGEMM_LANES_MR + l;
        if (row >= g->m) break;
        uint8_t *y = (uint8_t *)g->y + row * g->ldy + j0;
        for (int i = 0; i < np; i++)
            y[i] = (uint8_t)quant_round_clamp((float)(acc[i][l] + g->bias[row]) * g->mult[row],
                                              g->yzp, g->lo, g->hi);
    }
}

#ifdef LANES_X86
#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))

/* The requantized bytes of 16 rows (from row) at position j, the rows in its bytes. */
VNNI_TARGET __attribute__((always_inline)) static inline __m128i
requant_rows(const qgemm_args *g, int64_t row, __m512i acc) {
    const __m512 lo = _mm512_set1_ps((float)g->lo), hi = _mm512_set1_ps((float)g->hi);
    __m512i a = _mm512_add_epi32(acc, _mm512_loadu_si512((const void *)(g->bias + row)));
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(a), _mm512_loadu_ps(g->mult + row));
    v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(v, _mm512_set1_ps((float)g->yzp)), lo), hi);
    return _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(v));
}

/* 16 rows (from row) of np positions (from j; b[i]: position i's bytes, one per row) turned
 * around by three rounds of unpacking into 8 bytes per row, then one masked store of np bytes
 * per row instead of a byte store per row and position. */
_Static_assert(QGEMM_LANES_NP <= 8, "store_rows turns at most 8 positions around");
VNNI_TARGET __attribute__((always_inline)) static inline void
store_rows(const qgemm_args *g, int64_t row, int64_t j, int np, const __m128i b[8]) {
    __m128i p[8], q[8], r[8];
    for (int i = 0; i < 4; i++) { /* p[2i], p[2i+1]: rows 0-7 and 8-15 of positions 2i, 2i+1 */
        p[2 * i] = _mm_unpacklo_epi8(b[2 * i], b[2 * i + 1]);
        p[2 * i + 1] = _mm_unpackhi_epi8(b[2 * i], b[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) { /* q[4h + k]: rows 4k..4k+3 of positions 4h..4h+3 */
        q[4 * h] = _mm_unpacklo_epi16(p[4 * h], p[4 * h + 2]);
        q[4 * h + 1] = _mm_unpackhi_epi16(p[4 * h], p[4 * h + 2]);
        q[4 * h + 2] = _mm_unpacklo_epi16(p[4 * h + 1], p[4 * h + 3]);
        q[4 * h + 3] = _mm_unpackhi_epi16(p[4 * h + 1], p[4 * h + 3]);
    }
    for (int k = 0; k < 4; k++) { /* r[2k], r[2k+1]: rows 4k..4k+1 and 4k+2..4k+3, 8 bytes each */
        r[2 * k] = _mm_unpacklo_epi32(q[k], q[4 + k]);
        r[2 * k + 1] = _mm_unpackhi_epi32(q[k], q[4 + k]);
    }
    const __mmask64 keep = ((__mmask64)1 << np) - 1;
    uint8_t *y = (uint8_t *)g->y + row * g->ldy + j;
    int64_t n = g->m - row < QGEMM_LANES ? g->m - row : QGEMM_LANES;
    for (int64_t l = 0; l < n; l++) {
        __m128i v = l & 1 ? _mm_bsrli_si128(r[l / 2], 8) : r[l / 2];
        _mm512_mask_storeu_epi8((void *)(y + l * g->ldy), keep, _mm512_castsi128_si512(v));
    }
}

/* Position i of the tile: 4 sums of 16 rows, kept in registers (np is a constant at every
 * call, so the positions past it are compiled away). */
#define POS_DECL(i)                                                                          \
    __m512i c##i##0 = _mm512_setzero_si512(), c##i##1 = c##i##0, c##i##2 = c##i##0,           \
            c##i##3 = c##i##0;                                                               \
    const int64_t off##i = (i) < np ? 4 * column_of(g, j0 + (i)) : 0
#define POS_STEP(i)                                                                          \
    do {                                                                                     \
        if ((i) < np) {                                                                      \
            int32_t four;                                                                    \
            memcpy(&four, a + off##i, sizeof four);                                          \
            __m512i av = _mm512_set1_epi32(four);                                            \
            c##i##0 = _mm512_dpbusd_epi32(c##i##0, av, w0);                                  \
            c##i##1 = _mm512_dpbusd_epi32(c##i##1, av, w1);                                  \
            c##i##2 = _mm512_dpbusd_epi32(c##i##2, av, w2);                                  \
            c##i##3 = _mm512_dpbusd_epi32(c##i##3, av, w3);                                  \
        }                                                                                    \
    } while (0)
/* Rows 16 k .. 16 k + 15 of the tile's positions, requantized and stored. */
#define ROWS_FINISH(k)                                                                       \
    do {                                                                                     \
        int64_t row = mb * QGEMM_LANES_MR + 16 * (k);                                        \
        if (row < g->m) {                                                                    \
            __m128i b[8] = {_mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128(),   \
                            _mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128(),   \
                            _mm_setzero_si128(), _mm_setzero_si128()};                       \
            b[0] = requant_rows(g, row, c0##k);                                              \
            if (np > 1) b[1] = requant_rows(g, row, c1##k);                                  \
            if (np > 2) b[2] = requant_rows(g, row, c2##k);                                  \
            if (np > 3) b[3] = requant_rows(g, row, c3##k);                                  \
            if (np > 4) b[4] = requant_rows(g, row, c4##k);                                  \
            if (np > 5) b[5] = requant_rows(g, row, c5##k);                                  \
            store_rows(g, row, j0, np, b);                                                   \
        }                                                                                    \
    } while (0)

VNNI_TARGET __attribute__((always_inline)) static inline void
tile_vnni_np(const qgemm_args *g, int64_t mb, int64_t j0, const int np) {
    POS_DECL(0);
    POS_DECL(1);
    POS_DECL(2);
    POS_DECL(3);
    POS_DECL(4);
    POS_DECL(5);
    const int64_t k4 = g->taps * g->quads, qs = g->quad_stride;
    const int8_t *w = g->w + mb * k4 * QGEMM_LANES_MR * 4;
    for (int64_t tap = 0; tap < g->taps; tap++) {
        const uint8_t *a = g->a + g->tap_off[tap];
        for (int64_t q = 0; q < g->quads; q++, a += qs, w += QGEMM_LANES_MR * 4) {
            __m512i w0 = _mm512_loadu_si512((const void *)w);
            __m512i w1 = _mm512_loadu_si512((const void *)(w + 64));
            __m512i w2 = _mm512_loadu_si512((const void *)(w + 128));
            __m512i w3 = _mm512_loadu_si512((const void *)(w + 192));
            POS_STEP(0);
            POS_STEP(1);
            POS_STEP(2);
            POS_STEP(3);
            POS_STEP(4);
            POS_STEP(5);
        }
    }
    ROWS_FINISH(0);
    ROWS_FINISH(1);
    ROWS_FINISH(2);
    ROWS_FINISH(3);
}

#define TILE_NP(n)                                                                           \
    VNNI_TARGET static void tile_vnni_##n(const qgemm_args *g, int64_t mb, int64_t j0) {      \
        tile_vnni_np(g, mb, j0, n);                                                          \
    }
TILE_NP(1)
TILE_NP(2)
TILE_NP(3)
TILE_NP(4)
TILE_NP(5)
TILE_NP(6)
#endif

typedef void (*tile_fn)(const qgemm_args *g, int64_t mb, int64_t j0);

/* The VNNI tile of 1 to QGEMM_LANES_NP positions (index = positions); null when portable. */
static tile_fn vnni_tiles[QGEMM_LANES_NP + 1];
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

static void choose(void) {
#ifdef LANES_X86
    if (!strcmp(qgemm_isa(), "vnni")) {
        vnni_tiles[1] = tile_vnni_1;
        vnni_tiles[2] = tile_vnni_2;
        vnni_tiles[3] = tile_vnni_3;
        vnni_tiles[4] = tile_vnni_4;
        vnni_tiles[5] = tile_vnni_5;
        vnni_tiles[6] = tile_vnni_6;
    }
#endif
}

void qgemm_lanes_run(const qgemm_args *g, int64_t mb, int64_t j0, int64_t j1) {
    pthread_once(&chosen_once, choose);
    for (int64_t j = j0; j < j1; j += QGEMM_LANES_NP) {
        int np = j1 - j < QGEMM_LANES_NP ? (int)(j1 - j) : QGEMM_LANES_NP;
        if (vnni_tiles[np])
            vnni_tiles[np](g, mb, j);
        else
            tile_portable(g, mb, j, np);
    }
}
