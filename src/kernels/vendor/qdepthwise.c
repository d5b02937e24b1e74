/* qdepthwise.c -- the depthwise channel of qdepthwise.h. The input plane is first copied into
 * a padded one (the padding holding x's zero point, int8 input shifted to uint8), so that every
 * tap is in bounds. The VNNI path then treats the plane as one long row: output q reads bytes
 * s*q + offset, so the taps j..j+3 of a kernel row are four neighbouring bytes, one 32-bit lane
 * of an unaligned load and one vpdpbusd with those four weights; no shuffles gather them. At
 * stride 1 the whole plane is one run (the columns past the output width are computed and
 * dropped, which wastes little even on 7x7 planes; AVX512-VBMI2 compresses the kept lanes in
 * a register); at stride 2 each output row is one, or with VBMI2 the whole plane when its
 * rows are at most 32 bytes (half the lanes dropped, fewer than a row at a time wastes). */
#include "kernels/vendor/qdepthwise.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ops/quant.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define QDW_X86 1
#include <immintrin.h>
#endif

/* Taps of one 4-deep dot: at most this many per kernel (a 7x7 kernel takes 14). */
#define MAX_GROUPS 64

#ifdef QDW_X86
static bool has_vbmi2; /* with the VNNI path: output lanes compressed in registers */
#endif

/* The padded plane: pw x ph bytes, then slack that the wide loads may read past the end. */
typedef struct padded {
    int64_t pw, ph;
    size_t plane, slack;
} padded;

static padded layout(const qdw_channel *c) {
    padded p;
    int64_t right = (c->ow - 1) * c->sw + (c->kw - 1) * c->dw + 1 - c->pad_left - c->iw;
    int64_t bottom = (c->oh - 1) * c->sh + (c->kh - 1) * c->dh + 1 - c->pad_top - c->ih;
    p.pw = c->pad_left + c->iw + (right > 0 ? right : 0);
    p.ph = c->pad_top + c->ih + (bottom > 0 ? bottom : 0);
    p.plane = (size_t)(p.pw * p.ph);
    p.slack = (size_t)(2 * p.pw + 256);
    return p;
}

size_t qdw_scratch_bytes(const qdw_channel *c) {
    padded p = layout(c);
    /* the padded plane, then the stride-1 run's output (oh rows of pw) */
    return p.plane + p.slack + (size_t)(c->oh * p.pw) + 64;
}

/* The padded plane of c in dst; x's zero point as uint8 (int8 input is xor-ed with 0x80). */
static int32_t pad_plane(const qdw_channel *c, const padded *p, uint8_t *dst) {
    uint8_t flip = c->is_signed ? 0x80 : 0;
    memset(dst, (uint8_t)c->xzp ^ flip, p->plane + p->slack);
    for (int64_t h = 0; h < c->ih; h++) {
        uint8_t *d = dst + (h + c->pad_top) * p->pw + c->pad_left;
        const uint8_t *s = c->x + h * c->iw;
        if (flip)
            for (int64_t i = 0; i < c->iw; i++) d[i] = s[i] ^ 0x80;
        else
            memcpy(d, s, (size_t)c->iw);
    }
    return c->is_signed ? c->xzp + 128 : c->xzp;
}

/* ---- portable ---- */

static void channel_portable(const qdw_channel *c, const uint8_t *x, int64_t pw, int32_t xzp) {
    for (int64_t oh = 0; oh < c->oh; oh++)
        for (int64_t ow = 0; ow < c->ow; ow++) {
            int32_t acc = 0;
            for (int64_t i = 0; i < c->kh; i++) {
                const uint8_t *row = x + (oh * c->sh + i * c->dh) * pw + ow * c->sw;
                for (int64_t j = 0; j < c->kw; j++)
                    acc += (row[j * c->dw] - xzp) * c->w[i * c->kw + j];
            }
            c->y[oh * c->ow + ow] = (uint8_t)quant_round_clamp((float)(acc + c->bias) * c->mult,
                                                               c->yzp, c->lo, c->hi);
        }
}

#ifdef QDW_X86

/* ---- AVX-512 without VNNI: 16 outputs of a row a vector, bytes widened to int32 ---- */

/* Bits [0, n) for n in [0, 64]. */
static inline __mmask64 mask64(int64_t n) {
    return n >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1);
}

#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))

/* Lanes [0, count) of x[0], x[stride], ... (stride 1 or 2) widened to int32, 0 past count. */
AVX512_TARGET static inline __m512i load16(const uint8_t *x, int64_t stride, int64_t count) {
    if (stride == 1) {
        __mmask16 m = count >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << count) - 1);
        return _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, (const void *)x));
    }
    /* stride 2: 16 little-endian byte pairs; the low byte of each is the one */
    int64_t bytes = count >= 16 ? 32 : 2 * count - 1;
    __mmask32 m = bytes >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << bytes) - 1);
    __m512i p = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi8(m, (const void *)x));
    return _mm512_and_si512(p, _mm512_set1_epi32(0xff));
}

/* clamp(round(float(acc) * mult) + yzp, lo, hi) of 16 sums (bias included), as 16 bytes. */
#define REQUANT_DECL(c)                                                                      \
    const __m512 mv = _mm512_set1_ps((c)->mult);                                             \
    const __m512 lim = _mm512_set1_ps(1024.0f), nlim = _mm512_set1_ps(-1024.0f);             \
    const __m512i yzpv = _mm512_set1_epi32((c)->yzp);                                        \
    const __m512i lov = _mm512_set1_epi32((c)->lo), hiv = _mm512_set1_epi32((c)->hi)
#define REQUANT(acc)                                                                         \
    _mm512_cvtepi32_epi8(_mm512_min_epi32(_mm512_max_epi32(_mm512_add_epi32(                 \
        _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_min_ps(_mm512_max_ps(                 \
            _mm512_mul_ps(_mm512_cvtepi32_ps(acc), mv), nlim), lim),                         \
            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)), yzpv), lov), hiv))

AVX512_TARGET static void channel_avx512(const qdw_channel *c, const uint8_t *x, int64_t pw,
                                         int32_t xzp) {
    if (c->sw > 2 || c->kh * c->kw > 49) {
        channel_portable(c, x, pw, xzp);
        return;
    }
    REQUANT_DECL(c);
    const __m512i zv = _mm512_set1_epi32(xzp), bv = _mm512_set1_epi32(c->bias);
    __m512i wv[49];
    for (int64_t t = 0; t < c->kh * c->kw; t++) wv[t] = _mm512_set1_epi32(c->w[t]);
    for (int64_t oh = 0; oh < c->oh; oh++)
        for (int64_t ow = 0; ow < c->ow; ow += 16) {
            int64_t count = c->ow - ow < 16 ? c->ow - ow : 16;
            __m512i acc = bv;
            for (int64_t i = 0; i < c->kh; i++) {
                const uint8_t *row = x + (oh * c->sh + i * c->dh) * pw + ow * c->sw;
                for (int64_t j = 0; j < c->kw; j++) {
                    __m512i v = _mm512_sub_epi32(load16(row + j * c->dw, c->sw, count), zv);
                    acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(v, wv[i * c->kw + j]));
                }
            }
            __mmask16 m = count >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << count) - 1);
            _mm_mask_storeu_epi8((void *)(c->y + oh * c->ow + ow), m, REQUANT(acc));
        }
}

/* The padded plane written with whole 64-byte stores in address order (each row's zero point
 * bytes blended in from a masked load, a row's spill overwritten by the next): the runs read
 * it at once, and a load that a masked store has not yet committed waits for it. */
AVX512_TARGET static int32_t pad_plane_avx512(const qdw_channel *c, const padded *p,
                                              uint8_t *dst) {
    uint8_t flip = c->is_signed ? 0x80 : 0;
    const __m512i padv = _mm512_set1_epi8((char)((uint8_t)c->xzp ^ flip));
    const __m512i fv = _mm512_set1_epi8((char)flip);
    if (p->pw <= 64) { /* one store a row, the row's lanes the same in every row */
        const int64_t top = c->pad_top, ih = c->ih, iw = c->iw, ph = p->ph, pw = p->pw;
        const uint8_t *x = c->x - c->pad_left;
        __mmask64 m = mask64(c->pad_left + iw) & ~mask64(c->pad_left);
        const __m512i fm = _mm512_maskz_mov_epi8(m, fv);
        for (int64_t r = 0; r < ph; r++) {
            int64_t h = r - top;
            __m512i v = padv;
            if (h >= 0 && h < ih)
                v = _mm512_xor_si512(_mm512_mask_loadu_epi8(padv, m, x + h * iw), fm);
            _mm512_storeu_si512((void *)(dst + r * pw), v);
        }
    }
    for (int64_t r = 0; p->pw > 64 && r < p->ph; r++) {
        int64_t h = r - c->pad_top;
        uint8_t *d = dst + r * p->pw;
        for (int64_t i = 0; i < p->pw; i += 64) {
            __m512i v = padv;
            int64_t a = c->pad_left - i, b = a + c->iw; /* the row's lanes: [a, b) */
            if (h >= 0 && h < c->ih && b > 0 && a < 64) {
                __mmask64 m = ~(__mmask64)0;
                if (a > 0) m &= ~(((__mmask64)1 << a) - 1);
                if (b < 64) m &= ((__mmask64)1 << b) - 1;
                const uint8_t *s = c->x + h * c->iw - a;
                v = _mm512_xor_si512(_mm512_mask_loadu_epi8(padv, m, s),
                                     _mm512_maskz_mov_epi8(m, fv));
            }
            _mm512_storeu_si512((void *)(d + i), v);
        }
    }
    for (size_t i = 0; i < p->slack; i += 64)
        _mm512_storeu_si512((void *)(dst + p->plane + i), padv);
    return c->is_signed ? c->xzp + 128 : c->xzp;
}

/* ---- AVX512-VNNI: 4 neighbouring taps a lane, one vpdpbusd ---- */

#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

/* A kernel as groups of up to 4 taps that are neighbouring bytes of the padded plane. */
typedef struct tap_groups {
    int n;
    int64_t off[MAX_GROUPS];
    int32_t w4[MAX_GROUPS]; /* the group's 4 weights, little endian, 0 past its taps */
    int32_t bias;           /* c->bias - xzp * (sum of the weights) */
} tap_groups;

static bool group_taps(const qdw_channel *c, int64_t pw, int32_t xzp, tap_groups *g) {
    int64_t step = c->dw == 1 ? 4 : 1;
    int64_t per_row = (c->kw + step - 1) / step;
    if (c->kh * per_row > MAX_GROUPS) return false;
    int64_t wsum = 0;
    g->n = 0;
    if (c->kw == 3 && c->dw == 1) { /* the common kernel, its loops unrolled */
        for (int64_t i = 0; i < c->kh; i++) {
            const int8_t *w = c->w + 3 * i;
            wsum += w[0] + w[1] + w[2];
            g->w4[i] = (int32_t)((uint32_t)(uint8_t)w[0] | (uint32_t)(uint8_t)w[1] << 8 |
                                 (uint32_t)(uint8_t)w[2] << 16);
            g->off[i] = i * c->dh * pw;
        }
        g->n = (int)c->kh;
        g->bias = (int32_t)(c->bias - xzp * wsum);
        return true;
    }
    for (int64_t i = 0; i < c->kh; i++)
        for (int64_t j = 0; j < c->kw; j += step) {
            uint32_t packed = 0;
            for (int64_t t = 0; t < step && j + t < c->kw; t++) {
                int8_t w = c->w[i * c->kw + j + t];
                wsum += w;
                packed |= (uint32_t)(uint8_t)w << (8 * t);
            }
            g->off[g->n] = i * c->dh * pw + j * c->dw;
            g->w4[g->n] = (int32_t)packed;
            g->n++;
        }
    g->bias = (int32_t)(c->bias - xzp * wsum);
    return true;
}


/* Outputs q .. q + 63 at stride 1 into v: lane k of register r is output 4k + r (the load at
 * byte r puts bytes 4k + r .. 4k + r + 3 in lane k); a 4 x 16 byte transpose restores the
 * order. Needs the names that S1_SETUP declares. */
#define S1_SETUP(c, g)                                                                       \
    REQUANT_DECL(c);                                                                         \
    __m512i wv[MAX_GROUPS];                                                                  \
    for (int t = 0; t < (g)->n; t++) wv[t] = _mm512_set1_epi32((g)->w4[t]);                 \
    const __m512i bv = _mm512_set1_epi32((g)->bias)
#define S1_CHUNK(g, x, q, v)                                                                 \
    do {                                                                                     \
        __m512i a0 = bv, a1 = bv, a2 = bv, a3 = bv;                                          \
        for (int t = 0; t < (g)->n; t++) {                                                   \
            const uint8_t *p = (x) + (q) + (g)->off[t];                                      \
            a0 = _mm512_dpbusd_epi32(a0, _mm512_loadu_si512((const void *)p), wv[t]);        \
            a1 = _mm512_dpbusd_epi32(a1, _mm512_loadu_si512((const void *)(p + 1)), wv[t]);  \
            a2 = _mm512_dpbusd_epi32(a2, _mm512_loadu_si512((const void *)(p + 2)), wv[t]);  \
            a3 = _mm512_dpbusd_epi32(a3, _mm512_loadu_si512((const void *)(p + 3)), wv[t]);  \
        }                                                                                    \
        __m128i b0 = REQUANT(a0), b1 = REQUANT(a1), b2 = REQUANT(a2), b3 = REQUANT(a3);      \
        __m128i lo01 = _mm_unpacklo_epi8(b0, b1), hi01 = _mm_unpackhi_epi8(b0, b1);          \
        __m128i lo23 = _mm_unpacklo_epi8(b2, b3), hi23 = _mm_unpackhi_epi8(b2, b3);          \
        v = _mm512_castsi128_si512(_mm_unpacklo_epi16(lo01, lo23));                          \
        v = _mm512_inserti32x4(v, _mm_unpackhi_epi16(lo01, lo23), 1);                        \
        v = _mm512_inserti32x4(v, _mm_unpacklo_epi16(hi01, hi23), 2);                        \
        v = _mm512_inserti32x4(v, _mm_unpackhi_epi16(hi01, hi23), 3);                        \
    } while (0)

/* Outputs [0, count) at stride 1 into out (64 bytes of slack past count). */
VNNI_TARGET static void run_s1(const qdw_channel *c, const tap_groups *g, const uint8_t *x,
                               int64_t count, uint8_t *out) {
    S1_SETUP(c, g);
    for (int64_t q = 0; q < count; q += 64) {
        __m512i v;
        S1_CHUNK(g, x, q, v);
        _mm512_storeu_si512((void *)(out + q), v);
    }
}

#define VBMI2_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi2")))

/* The whole stride-1 plane, rows of pw outputs of which the first ow are kept: each 64-byte
 * step's kept bytes compressed in a register and stored at once (no copy through memory). */
VBMI2_TARGET static void run_s1_compress(const qdw_channel *c, const tap_groups *g,
                                         const uint8_t *x, int64_t pw) {
    S1_SETUP(c, g);
    int64_t count = (c->oh - 1) * pw + c->ow, done = 0;
    /* rows under 128 bytes: each lane's column (q + lane) % pw kept in a byte vector */
    const bool narrow = pw < 128;
    const __m512i pwv = _mm512_set1_epi8((char)pw), owv = _mm512_set1_epi8((char)c->ow);
    const __m512i step = _mm512_set1_epi8((char)(narrow ? 64 % pw : 0));
    __m512i col = _mm512_set_epi64(0x3f3e3d3c3b3a3938, 0x3736353433323130, 0x2f2e2d2c2b2a2928,
                                   0x2726252423222120, 0x1f1e1d1c1b1a1918, 0x1716151413121110,
                                   0x0f0e0d0c0b0a0908, 0x0706050403020100);
    for (int64_t k = 32; narrow && k >= 1; k /= 2) { /* lane % pw by halving multiples */
        if (k * pw > 63) continue;
        const __m512i kp = _mm512_set1_epi8((char)(k * pw));
        col = _mm512_mask_sub_epi8(col, _mm512_cmpge_epu8_mask(col, kp), col, kp);
    }
    for (int64_t q = 0; q < count; q += 64) {
        __m512i v;
        S1_CHUNK(g, x, q, v);
        /* the lanes of [q, q + 64) whose column is under ow */
        __mmask64 keep = 0;
        if (narrow) {
            keep = _mm512_cmplt_epu8_mask(col, owv);
            col = _mm512_add_epi8(col, step);
            col = _mm512_mask_sub_epi8(col, _mm512_cmpge_epu8_mask(col, pwv), col, pwv);
        } else {
            for (int64_t row = q / pw * pw; row < q + 64; row += pw) {
                int64_t lo = row - q, hi = row + c->ow - q;
                lo = lo < 0 ? 0 : lo;
                hi = hi > 64 ? 64 : hi;
                if (hi > lo) keep |= mask64(hi - lo) << lo;
            }
        }
        if (q + 64 > count) keep &= mask64(count - q);
        int64_t n = __builtin_popcountll(keep);
        _mm512_mask_storeu_epi8((void *)(c->y + done), mask64(n),
                                _mm512_maskz_compress_epi8(keep, v));
        done += n;
    }
}

/* 32 outputs from q at stride 2 into v: lane k of register r is output q + 2k + r. */
#define S2_CHUNK(g, x, q, v)                                                                 \
    do {                                                                                     \
        __m512i a0 = bv, a1 = bv;                                                            \
        for (int t = 0; t < (g)->n; t++) {                                                   \
            const uint8_t *p = (x) + 2 * (q) + (g)->off[t];                                  \
            a0 = _mm512_dpbusd_epi32(a0, _mm512_loadu_si512((const void *)p), wv[t]);        \
            a1 = _mm512_dpbusd_epi32(a1, _mm512_loadu_si512((const void *)(p + 2)), wv[t]);  \
        }                                                                                    \
        __m128i b0 = REQUANT(a0), b1 = REQUANT(a1);                                          \
        v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi8(b0, b1)),       \
                                    _mm_unpackhi_epi8(b0, b1), 1);                           \
    } while (0)

/* The stride-2 plane a row at a time: ow outputs of row oh from input row 2 oh. */
VNNI_TARGET static void run_s2(const qdw_channel *c, const tap_groups *g, const uint8_t *x,
                               int64_t pw) {
    S1_SETUP(c, g);
    for (int64_t oh = 0; oh < c->oh; oh++)
        for (int64_t q = 0; q < c->ow; q += 32) {
            __m256i v;
            S2_CHUNK(g, x + oh * 2 * pw, q, v);
            int64_t n = c->ow - q;
            __mmask32 m = n >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << n) - 1);
            _mm256_mask_storeu_epi8((void *)(c->y + oh * c->ow + q), m, v);
        }
}

/* The stride-2 plane as one run when its rows are at most 32 bytes (pw): output q = oh pw + ow
 * reads byte 2 q + offset, so a step covers 32 / pw rows instead of one; the lanes of columns
 * under ow are compressed in a register and stored. */
VBMI2_TARGET static void run_s2_compress(const qdw_channel *c, const tap_groups *g,
                                         const uint8_t *x, int64_t pw) {
    S1_SETUP(c, g);
    int64_t count = (c->oh - 1) * pw + c->ow, done = 0;
    const __m256i pwv = _mm256_set1_epi8((char)pw), owv = _mm256_set1_epi8((char)c->ow);
    const __m256i step = _mm256_set1_epi8((char)(32 % pw));
    __m256i col = _mm256_set_epi64x(0x1f1e1d1c1b1a1918, 0x1716151413121110, 0x0f0e0d0c0b0a0908,
                                    0x0706050403020100);
    for (int64_t k = 16; k >= 1; k /= 2) { /* lane % pw by halving multiples */
        if (k * pw > 31) continue;
        const __m256i kp = _mm256_set1_epi8((char)(k * pw));
        col = _mm256_mask_sub_epi8(col, _mm256_cmpge_epu8_mask(col, kp), col, kp);
    }
    for (int64_t q = 0; q < count; q += 32) {
        __m256i v;
        S2_CHUNK(g, x, q, v);
        __mmask32 keep = _mm256_cmplt_epu8_mask(col, owv);
        col = _mm256_add_epi8(col, step);
        col = _mm256_mask_sub_epi8(col, _mm256_cmpge_epu8_mask(col, pwv), col, pwv);
        if (q + 32 > count) keep &= (__mmask32)((1u << (count - q)) - 1);
        int n = __builtin_popcount(keep);
        __mmask32 m = n >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << n) - 1);
        _mm256_mask_storeu_epi8((void *)(c->y + done), m, _mm256_maskz_compress_epi8(keep, v));
        done += n;
    }
}

/* The VNNI runs where they apply (equal strides of 1 or 2, at most MAX_GROUPS tap groups),
 * the widening loop elsewhere. */
VNNI_TARGET static void channel_vnni(const qdw_channel *c, const uint8_t *x, int64_t pw,
                                     int32_t xzp, uint8_t *flat) {
    tap_groups g;
    if (c->sh != c->sw || c->sw > 2 || !group_taps(c, pw, xzp, &g)) {
        channel_avx512(c, x, pw, xzp);
        return;
    }
    if (c->sw == 2) {
        if (has_vbmi2 && pw <= 32)
            run_s2_compress(c, &g, x, pw);
        else
            run_s2(c, &g, x, pw);
        return;
    }
    if (has_vbmi2) {
        run_s1_compress(c, &g, x, pw);
        return;
    }
    /* rows of pw outputs, of which the first ow are the plane's; copied out with whole stores
     * in address order but for those that would pass the plane's end */
    run_s1(c, &g, x, (c->oh - 1) * pw + c->ow, flat);
    int64_t plane = c->oh * c->ow;
    for (int64_t oh = 0; oh < c->oh; oh++)
        for (int64_t i = 0; i < c->ow; i += 64) {
            int64_t at = oh * c->ow + i, n = c->ow - i;
            __m512i v = _mm512_loadu_si512((const void *)(flat + oh * pw + i));
            if (at + 64 <= plane)
                _mm512_storeu_si512((void *)(c->y + at), v);
            else
                _mm512_mask_storeu_epi8((void *)(c->y + at), mask64(n), v);
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

enum { PATH_PORTABLE, PATH_AVX512, PATH_VNNI };
static int path;
static pthread_once_t path_once = PTHREAD_ONCE_INIT;

static void choose(void) {
    path = PATH_PORTABLE;
#ifdef QDW_X86
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl") || flag_hidden("avx512f") ||
        flag_hidden("avx512bw") || flag_hidden("avx512vl"))
        return;
    path = PATH_AVX512;
    if (__builtin_cpu_supports("avx512vnni") && !flag_hidden("avx512_vnni")) path = PATH_VNNI;
    has_vbmi2 = __builtin_cpu_supports("avx512vbmi2") && !flag_hidden("avx512_vbmi2");
#endif
}

const char *qdw_isa(void) {
    pthread_once(&path_once, choose);
    return path == PATH_VNNI ? "vnni" : path == PATH_AVX512 ? "avx512" : "portable";
}

void qdw_run_channel(const qdw_channel *c, uint8_t *scratch) {
    pthread_once(&path_once, choose);
    padded p = layout(c);
#ifdef QDW_X86
    if (path != PATH_PORTABLE) {
        int32_t xzp = pad_plane_avx512(c, &p, scratch);
        if (path == PATH_VNNI)
            channel_vnni(c, scratch, p.pw, xzp, scratch + p.plane + p.slack);
        else
            channel_avx512(c, scratch, p.pw, xzp);
        return;
    }
#endif
    channel_portable(c, scratch, p.pw, pad_plane(c, &p, scratch));
}
