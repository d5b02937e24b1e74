/* qdepthwise.c -- the depthwise row loops of qdepthwise.h: portable C, and AVX-512 (16 lanes,
 * bytes widened to int32) compiled with a target attribute and picked by a CPU check. */
#include "kernels/vendor/qdepthwise.h"

#include <pthread.h>

#include "ops/quant.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define QDW_X86 1
#include <immintrin.h>
#endif

static void accumulate_portable(int32_t *acc, int64_t acc_row, const uint8_t *x, int64_t x_row,
                                int64_t rows, int64_t n, int64_t stride, bool is_signed,
                                int32_t xzp, int32_t w) {
    for (int64_t r = 0; r < rows; r++, acc += acc_row, x += x_row) {
        if (is_signed) {
            const int8_t *s = (const int8_t *)x;
            for (int64_t i = 0; i < n; i++) acc[i] += (s[i * stride] - xzp) * w;
        } else {
            for (int64_t i = 0; i < n; i++) acc[i] += (x[i * stride] - xzp) * w;
        }
    }
}

static void requantize_portable(uint8_t *dst, const int32_t *acc, int64_t n, int32_t bias,
                                float mult, int32_t yzp, int32_t lo, int32_t hi) {
    for (int64_t i = 0; i < n; i++)
        dst[i] = (uint8_t)quant_round_clamp((float)(acc[i] + bias) * mult, yzp, lo, hi);
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

AVX512_TARGET static void accumulate_avx512(int32_t *acc, int64_t acc_row, const uint8_t *x,
                                            int64_t x_row, int64_t rows, int64_t n,
                                            int64_t stride, bool is_signed, int32_t xzp,
                                            int32_t w) {
    if (stride > 2) {
        accumulate_portable(acc, acc_row, x, x_row, rows, n, stride, is_signed, xzp, w);
        return;
    }
    const __m512i zv = _mm512_set1_epi32(xzp), wv = _mm512_set1_epi32(w);
    for (int64_t r = 0; r < rows; r++, acc += acc_row, x += x_row)
        for (int64_t i = 0; i < n; i += 16) {
            int64_t count = n - i < 16 ? n - i : 16;
            __mmask16 m = count >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << count) - 1);
            __m512i v = _mm512_sub_epi32(load16(x + i * stride, stride, is_signed, count), zv);
            __m512i a = _mm512_maskz_loadu_epi32(m, (const void *)(acc + i));
            a = _mm512_add_epi32(a, _mm512_mullo_epi32(v, wv));
            _mm512_mask_storeu_epi32((void *)(acc + i), m, a);
        }
}

AVX512_TARGET static void requantize_avx512(uint8_t *dst, const int32_t *acc, int64_t n,
                                            int32_t bias, float mult, int32_t yzp, int32_t lo,
                                            int32_t hi) {
    const __m512i bv = _mm512_set1_epi32(bias), zv = _mm512_set1_epi32(yzp);
    const __m512i lov = _mm512_set1_epi32(lo), hiv = _mm512_set1_epi32(hi);
    const __m512 mv = _mm512_set1_ps(mult);
    const __m512 lim = _mm512_set1_ps(1024.0f), nlim = _mm512_set1_ps(-1024.0f);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i a = _mm512_add_epi32(_mm512_loadu_si512((const void *)(acc + i)), bv);
        __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(a), mv);
        v = _mm512_min_ps(_mm512_max_ps(v, nlim), lim);
        v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(v), zv);
        q = _mm512_min_epi32(_mm512_max_epi32(q, lov), hiv);
        _mm_storeu_si128((__m128i *)(void *)(dst + i), _mm512_cvtepi32_epi8(q));
    }
    requantize_portable(dst + i, acc + i, n - i, bias, mult, yzp, lo, hi);
}
#endif

typedef struct qdw_impl {
    void (*accumulate)(int32_t *, int64_t, const uint8_t *, int64_t, int64_t, int64_t, int64_t,
                       bool, int32_t, int32_t);
    void (*requantize)(uint8_t *, const int32_t *, int64_t, int32_t, float, int32_t, int32_t,
                       int32_t);
} qdw_impl;

static qdw_impl impl;
static pthread_once_t impl_once = PTHREAD_ONCE_INIT;

static void choose(void) {
    impl.accumulate = accumulate_portable;
    impl.requantize = requantize_portable;
#ifdef QDW_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl")) {
        impl.accumulate = accumulate_avx512;
        impl.requantize = requantize_avx512;
    }
#endif
}

void qdw_accumulate(int32_t *acc, int64_t acc_row, const uint8_t *x, int64_t x_row,
                    int64_t rows, int64_t n, int64_t stride, bool is_signed, int32_t xzp,
                    int32_t w) {
    pthread_once(&impl_once, choose);
    impl.accumulate(acc, acc_row, x, x_row, rows, n, stride, is_signed, xzp, w);
}

void qdw_requantize(uint8_t *dst, const int32_t *acc, int64_t n, int32_t bias, float mult,
                    int32_t yzp, int32_t lo, int32_t hi) {
    pthread_once(&impl_once, choose);
    impl.requantize(dst, acc, n, bias, mult, yzp, lo, hi);
}
