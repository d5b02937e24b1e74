/* vec_math.h -- AVX-512 forms of scalar functions that hand-written kernels (ops, kernels)
 * apply to whole vectors: exp, erf and GELU (erf form). exp: a Taylor series of degree 7 after
 * range reduction, a few float ulps; erf: Abramowitz and Stegun 7.1.26, absolute error under
 * 1.5e-7. Callers compile them into functions that carry the same target attribute. */
#ifndef WPK_OPS_VEC_MATH_H
#define WPK_OPS_VEC_MATH_H

#include <immintrin.h>

#define VEC_TARGET __attribute__((target("avx512f,avx512dq,fma")))

/* e^x; 0 below -103 (past float's subnormals), +inf above 88.8. */
VEC_TARGET static inline __m512 vec_exp(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-103.0f));
    x = _mm512_min_ps(x, _mm512_set1_ps(88.8f));
    /* x = n ln2 + r, |r| <= ln2 / 2; ln2 in two parts so r keeps its low bits */
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n); /* p * 2^n, with the exponent's overflow and underflow */
}

/* erf(x), odd: 1 - t (a1 + t (a2 + ...)) e^(-x^2) with t = 1 / (1 + p |x|), the sign put back. */
VEC_TARGET static inline __m512 vec_erf(__m512 x) {
    const __m512 ax = _mm512_abs_ps(x);
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(ax, _mm512_set1_ps(0.3275911f), one));
    __m512 q = _mm512_set1_ps(1.061405429f);
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(-1.453152027f));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(1.421413741f));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(-0.284496736f));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(0.254829592f));
    q = _mm512_mul_ps(q, t);
    const __m512 e = vec_exp(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(ax, ax)));
    const __m512 y = _mm512_fnmadd_ps(q, e, one);
    /* the sign of x onto y (y >= 0) */
    const __m512i sign = _mm512_and_si512(_mm512_castps_si512(x),
                                          _mm512_set1_epi32((int)0x80000000u));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(y), sign));
}

/* GELU, erf form: x / 2 (1 + erf(x / sqrt 2)) (ops/activation.h's act_gelu). */
VEC_TARGET static inline __m512 vec_gelu(__m512 x) {
    const __m512 e = vec_erf(_mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f)));
    return _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(0.5f)),
                         _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

#endif
