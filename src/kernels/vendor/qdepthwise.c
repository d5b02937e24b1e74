/* qdepthwise.c -- the depthwise plane of qdepthwise.h: portable C, and AVX-512 (16 output
 * positions a vector, bytes widened to int32, sums kept in a register across the taps)
 * compiled with a target attribute and picked by a CPU check. */
#include "kernels/vendor/qdepthwise.h"

#include <pthread.h>

#include "ops/quant.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define QDW_X86 1
#include <immintrin.h>
#endif

static void plane_portable(const qdw_plane *p) {
    for (int64_t oh = 0; oh < p->oh; oh++)
        for (int64_t ow = 0; ow < p->ow; ow++) {
            int32_t acc = 0;
            for (int64_t i = 0; i < p->kh; i++) {
                const uint8_t *row = p->x + (oh * p->sh + i * p->dh) * p->x_row + ow * p->sw;
                for (int64_t j = 0; j < p->kw; j++) {
                    int32_t v = p->is_signed ? (int8_t)row[j * p->dw] : row[j * p->dw];
                    acc += (v - p->xzp) * p->w[i * p->kw + j];
                }
            }
            p->y[oh * p->ow + ow] = (uint8_t)quant_round_clamp((float)(acc + p->bias) * p->mult,
                                                               p->yzp, p->lo, p->hi);
        }
}

#ifdef QDW_X86
#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))

/* Lanes [0, count) of x[0], x[stride], ... (stride 1 or 2) widened to int32, 0 past count:
 * masked loads never touch bytes past the row. */
AVX512_TARGET static inline __m512i load16(const uint8_t *x, int64_t stride, bool is_signed,
                                           int64_t count) {
    if (stride == 1) {
        __mmask16 m = count >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << count) - 1);
        __m128i b = _mm_maskz_loadu_epi8(m, (const void *)x);
        return is_signed ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);
    }
    /* stride 2: 16 little-endian byte pairs; the low byte of each is the one */
    int64_t bytes = count >= 16 ? 32 : 2 * count - 1;
    __mmask32 m = bytes >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << bytes) - 1);
    __m512i p = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi8(m, (const void *)x));
    return is_signed ? _mm512_srai_epi32(_mm512_slli_epi32(p, 24), 24)
                     : _mm512_and_si512(p, _mm512_set1_epi32(0xff));
}

/* The requantization of 16 sums and their store (count of them). */
AVX512_TARGET static inline void finish16(const qdw_plane *p, uint8_t *y, __m512i acc,
                                          int64_t count) {
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), _mm512_set1_ps(p->mult));
    f = _mm512_min_ps(_mm512_max_ps(f, _mm512_set1_ps(-1024.0f)), _mm512_set1_ps(1024.0f));
    f = _mm512_roundscale_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(f), _mm512_set1_epi32(p->yzp));
    q = _mm512_min_epi32(_mm512_max_epi32(q, _mm512_set1_epi32(p->lo)),
                         _mm512_set1_epi32(p->hi));
    __mmask16 m = count >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << count) - 1);
    _mm_mask_storeu_epi8((void *)y, m, _mm512_cvtepi32_epi8(q));
}

/* 3x3, dilation 1, stride 1 or 2 (mobilenet's and most depthwise layers): the nine taps
 * written out, the constants (stride, signedness) folded in by the four callers below. */
AVX512_TARGET static inline __attribute__((always_inline)) void
plane3x3(const qdw_plane *p, int64_t s, bool is_signed) {
    const __m512i zv = _mm512_set1_epi32(p->xzp), bv = _mm512_set1_epi32(p->bias);
    __m512i wv[9];
    for (int t = 0; t < 9; t++) wv[t] = _mm512_set1_epi32(p->w[t]);
#define TAP(row, j, t) \
    acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(_mm512_sub_epi32( \
              load16((row) + (j), s, is_signed, count), zv), wv[t]))
    for (int64_t oh = 0; oh < p->oh; oh++) {
        const uint8_t *r0 = p->x + oh * s * p->x_row, *r1 = r0 + p->x_row, *r2 = r1 + p->x_row;
        for (int64_t ow = 0; ow < p->ow; ow += 16) {
            int64_t count = p->ow - ow < 16 ? p->ow - ow : 16, o = ow * s;
            __m512i acc = bv;
            TAP(r0 + o, 0, 0); TAP(r0 + o, 1, 1); TAP(r0 + o, 2, 2);
            TAP(r1 + o, 0, 3); TAP(r1 + o, 1, 4); TAP(r1 + o, 2, 5);
            TAP(r2 + o, 0, 6); TAP(r2 + o, 1, 7); TAP(r2 + o, 2, 8);
            finish16(p, p->y + oh * p->ow + ow, acc, count);
        }
    }
#undef TAP
}

AVX512_TARGET static void plane3x3_s1u(const qdw_plane *p) { plane3x3(p, 1, false); }
AVX512_TARGET static void plane3x3_s1s(const qdw_plane *p) { plane3x3(p, 1, true); }
AVX512_TARGET static void plane3x3_s2u(const qdw_plane *p) { plane3x3(p, 2, false); }
AVX512_TARGET static void plane3x3_s2s(const qdw_plane *p) { plane3x3(p, 2, true); }

AVX512_TARGET static void plane_avx512(const qdw_plane *p) {
    if (p->kh == 3 && p->kw == 3 && p->dh == 1 && p->dw == 1 && p->sh == p->sw &&
        p->sw <= 2) {
        if (p->sw == 1)
            (p->is_signed ? plane3x3_s1s : plane3x3_s1u)(p);
        else
            (p->is_signed ? plane3x3_s2s : plane3x3_s2u)(p);
        return;
    }
    if (p->sw > 2 || p->kh * p->kw > 49) {
        plane_portable(p);
        return;
    }
    const __m512i zv = _mm512_set1_epi32(p->xzp), bv = _mm512_set1_epi32(p->bias);
    const __m512i yzp = _mm512_set1_epi32(p->yzp);
    const __m512i lov = _mm512_set1_epi32(p->lo), hiv = _mm512_set1_epi32(p->hi);
    const __m512 mv = _mm512_set1_ps(p->mult);
    const __m512 lim = _mm512_set1_ps(1024.0f), nlim = _mm512_set1_ps(-1024.0f);
    __m512i wv[49];
    for (int64_t t = 0; t < p->kh * p->kw; t++) wv[t] = _mm512_set1_epi32(p->w[t]);
    for (int64_t oh = 0; oh < p->oh; oh++)
        for (int64_t ow = 0; ow < p->ow; ow += 16) {
            int64_t count = p->ow - ow < 16 ? p->ow - ow : 16;
            __m512i acc = bv;
            for (int64_t i = 0; i < p->kh; i++) {
                const uint8_t *row = p->x + (oh * p->sh + i * p->dh) * p->x_row + ow * p->sw;
                for (int64_t j = 0; j < p->kw; j++) {
                    __m512i v = _mm512_sub_epi32(load16(row + j * p->dw, p->sw, p->is_signed,
                                                        count), zv);
                    acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(v, wv[i * p->kw + j]));
                }
            }
            __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), mv);
            f = _mm512_min_ps(_mm512_max_ps(f, nlim), lim);
            f = _mm512_roundscale_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(f), yzp);
            q = _mm512_min_epi32(_mm512_max_epi32(q, lov), hiv);
            __mmask16 m = count >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << count) - 1);
            _mm_mask_storeu_epi8((void *)(p->y + oh * p->ow + ow), m, _mm512_cvtepi32_epi8(q));
        }
}

#endif

static void (*plane_impl)(const qdw_plane *);
static pthread_once_t impl_once = PTHREAD_ONCE_INIT;

static void choose(void) {
    plane_impl = plane_portable;
#ifdef QDW_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl")) {
        plane_impl = plane_avx512;
    }
#endif
}

void qdw_run_plane(const qdw_plane *p) {
    pthread_once(&impl_once, choose);
    plane_impl(p);
}
