/* qstem.c -- the few-channel int8 convolution of qstem.h: a slice of output positions (whole
 * 16-column blocks) gathered (im2col rows of the slice), packed into the GEMM's 4-deep groups
 * and multiplied, all within one thread's scratch. */
#include "kernels/vendor/qstem.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define QSTEM_X86 1
#include <immintrin.h>
#endif

/* Output positions a slice: 12 blocks (four tiles of 3). Its rows (k x 192 bytes) and packed
 * blocks stay in L2 (under 112 KB at the largest k) while each tile's blocks are reused from
 * L1 across the row tiles; slices of 96 positions measured 10-25% slower on 7x7 and 3x3 stems
 * (per-slice costs), 384 no faster; 224x224 stems still give each of 2 threads 30 slices. */
#define SLICE_BLOCKS 12
#define SLICE (SLICE_BLOCKS * QGEMM_LANES)

bool qstem_takes(const sp_geom *g, int64_t c) {
    int64_t taps = g->kernel[0] * g->kernel[1];
    return g->nsp == 2 && taps > 1 && c * taps <= QSTEM_MAX_K;
}

size_t qstem_scratch_bytes(int64_t k) {
    int64_t k4 = (k + 3) / 4;
    return (size_t)(k * SLICE + SLICE_BLOCKS * k4 * 64 + 64);
}

/* d[i] = s[2 * i] for i in [0, n): stride-2 gathers, the commonest in stems. */
static void gather2_portable(uint8_t *d, const uint8_t *s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = s[2 * i];
}

#ifdef QSTEM_X86
#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))
/* 32 outputs a step: the even bytes are the low bytes of the 16-bit words (vpmovwb). */
AVX512_TARGET static void gather2_avx512(uint8_t *d, const uint8_t *s, int64_t n) {
    for (int64_t i = 0; i < n; i += 32) {
        int64_t left = n - i, bytes = left > 32 ? 64 : 2 * left - 1;
        __mmask64 in = bytes >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << bytes) - 1);
        __mmask32 out = left >= 32 ? 0xffffffffu : (__mmask32)((1u << left) - 1);
        __m512i v = _mm512_maskz_loadu_epi8(in, (const void *)(s + 2 * i));
        _mm256_mask_storeu_epi8((void *)(d + i), out, _mm512_cvtepi16_epi8(v));
    }
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
#endif

static void (*gather2)(uint8_t *d, const uint8_t *s, int64_t n);
static pthread_once_t gather_once = PTHREAD_ONCE_INIT;

static void choose(void) {
    gather2 = gather2_portable;
#ifdef QSTEM_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && !flag_hidden("avx512vl") &&
        !flag_hidden("avx512f") && !flag_hidden("avx512bw"))
        gather2 = gather2_avx512;
#endif
}

/* One im2col row (tap c, i, j): where its pixels come from, computed once an image. */
typedef struct tap_row {
    int64_t plane;  /* offset of channel c's plane in x */
    int64_t ioff;   /* input row = output row * stride + ioff */
    int64_t off;    /* input column = output column * stride + off */
    int64_t w0, w1; /* the output columns whose input column is in bounds */
} tap_row;

/* A run of one output row's positions inside a slice. */
typedef struct segment {
    int64_t oh, ow, len, at; /* at: its first position's index in the slice */
} segment;

/* The im2col row of tap t for the slice's segments into dst: the input pixel under the tap,
 * xpad where it falls in the padding. */
static void slice_row(const sp_geom *g, const uint8_t *x, uint8_t xpad, const tap_row *t,
                      const segment *seg, int nseg, uint8_t *dst) {
    int64_t sw = g->stride[1];
    for (int e = 0; e < nseg; e++) {
        int64_t ow = seg[e].ow, len = seg[e].len;
        uint8_t *d = dst + seg[e].at;
        int64_t ih = seg[e].oh * g->stride[0] + t->ioff;
        /* the in-bounds part of [ow, ow + len) */
        int64_t a = t->w0 > ow ? t->w0 : ow, b = t->w1 < ow + len ? t->w1 : ow + len;
        if (ih < 0 || ih >= g->in[0] || b <= a) {
            memset(d, xpad, (size_t)len);
            continue;
        }
        const uint8_t *src = x + t->plane + ih * g->in[1];
        if (a > ow) memset(d, xpad, (size_t)(a - ow));
        if (sw == 1)
            memcpy(d + (a - ow), src + a + t->off, (size_t)(b - a));
        else if (sw == 2)
            gather2(d + (a - ow), src + 2 * a + t->off, b - a);
        else
            for (int64_t q = a; q < b; q++) d[q - ow] = src[q * sw + t->off];
        if (b < ow + len) memset(d + (b - ow), xpad, (size_t)(ow + len - b));
    }
}

/* The slice of positions [p0, p0 + n) (blocks of 16): its im2col rows, then packed. */
static void build_slice(const sp_geom *g, const uint8_t *x, uint8_t xpad, uint8_t flip,
                        const tap_row *taps, int64_t k, int64_t k4, int64_t p0, int64_t n,
                        int64_t blocks, uint8_t *rows, uint8_t *packed) {
    static const uint8_t zeros[QGEMM_LANES];
    segment seg[SLICE + 1];
    int nseg = 0;
    for (int64_t p = p0; p < p0 + n; nseg++) {
        int64_t oh = p / g->out[1], ow = p % g->out[1];
        int64_t len = g->out[1] - ow < p0 + n - p ? g->out[1] - ow : p0 + n - p;
        seg[nseg] = (segment){.oh = oh, .ow = ow, .len = len, .at = p - p0};
        p += len;
    }
    for (int64_t r = 0; r < k; r++) slice_row(g, x, xpad, &taps[r], seg, nseg, rows + r * SLICE);
    /* columns past n in the last block: zeros (their sums are not stored) */
    if (n < blocks * QGEMM_LANES)
        for (int64_t r = 0; r < k; r++)
            memset(rows + r * SLICE + n, 0, (size_t)(blocks * QGEMM_LANES - n));
    for (int64_t b = 0; b < blocks; b++)
        for (int64_t kg = 0; kg < k4; kg++) {
            const uint8_t *r4[4];
            for (int q = 0; q < 4; q++) {
                int64_t r = kg * 4 + q;
                r4[q] = r < k ? rows + r * SLICE + b * QGEMM_LANES : zeros;
            }
            qgemm_pack_group(packed + (b * k4 + kg) * 64, r4, flip);
        }
}

void qstem_image(const sp_geom *g, int64_t c, const uint8_t *x, uint8_t xpad, uint8_t flip,
                 const qgemm_args *gemm, int64_t rows_pad, uint8_t *y, uint8_t *scratch, int t,
                 int nt) {
    pthread_once(&gather_once, choose);
    int64_t k = c * g->kernel[0] * g->kernel[1], k4 = gemm->k4;
    int64_t plane = g->out[0] * g->out[1];
    int64_t slices = (plane + SLICE - 1) / SLICE;
    uint8_t *rows = scratch, *packed = scratch + k * SLICE;
    tap_row taps[QSTEM_MAX_K];
    int64_t kh = g->kernel[0], kw = g->kernel[1];
    for (int64_t r = 0; r < k; r++) {
        int64_t i = r / kw % kh, j = r % kw;
        tap_row *tr = &taps[r];
        tr->plane = r / (kh * kw) * g->in[0] * g->in[1];
        tr->ioff = i * g->dil[0] - g->pad0[0];
        tr->off = j * g->dil[1] - g->pad0[1];
        sp_tap_range(g->out[1], g->stride[1], tr->off, g->in[1], &tr->w0, &tr->w1);
    }
    qgemm_args a = *gemm;
    a.a = packed;
    a.ldy = plane;
    /* Work items: slices, each split into row parts when there are too few slices to keep
     * every thread busy (small planes); a thread builds a slice once for its consecutive items
     * of it, and two threads sharing a slice both build it (cheap next to its GEMM). */
    int64_t tiles = rows_pad / QGEMM_MR;
    int64_t parts = slices >= 2 * nt ? 1 : (2 * nt + slices - 1) / slices;
    parts = parts < tiles ? parts : tiles;
    int64_t items = slices * parts, built = -1;
    for (int64_t it = items * t / nt; it < items * (t + 1) / nt; it++) {
        int64_t s = it / parts, part = it % parts;
        int64_t p0 = s * SLICE, n = plane - p0 < SLICE ? plane - p0 : SLICE;
        int64_t blocks = (n + QGEMM_LANES - 1) / QGEMM_LANES;
        if (s != built) {
            built = s;
            build_slice(g, x, xpad, flip, taps, k, k4, p0, n, blocks, rows, packed);
        }
        int64_t r0 = tiles * part / parts * QGEMM_MR, r1 = tiles * (part + 1) / parts * QGEMM_MR;
        a.p = plane - p0;
        a.y = y + p0;
        qgemm_run(&a, r0, r1, 0, blocks);
    }
}
