/* recurrent_math.h -- the vector pieces the recurrent cells share: 16-float vectors (GCC vector
 * extensions, so one source serves AVX-512, AVX2 and SSE clones), the packed-panel GEMM tile
 * and the gate activations (sigmoid and tanh from a polynomial exp, accurate to a few ulps),
 * inlined into each cell's step. */
#ifndef WPK_OPS_RECURRENT_MATH_H
#define WPK_OPS_RECURRENT_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Hidden units per panel: a panel of a packed weight holds, per k, RNN_NB units of each gate. */
#define RNN_NB 16

/* Vectors pass between always-inlined helpers only, never across a call, so the ABI note GCC
 * gives for 64-byte vector arguments does not apply. */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float rnn_v16 __attribute__((vector_size(64)));
typedef int32_t rnn_v16i __attribute__((vector_size(64)));

#define RNN_INLINE static inline __attribute__((always_inline))

/* The cells and the GEMM are compiled for AVX-512, AVX2 and baseline, picked at load; products
 * contract into FMAs (the build's -std=c11 turns contraction off everywhere else). GCC only:
 * clang refuses a 64-byte vector passed between an AVX-512 clone and a helper without the
 * feature (it does not inline first), and it knows no optimize attribute. */
#if defined(__x86_64__) && defined(__has_attribute) && !defined(__clang__)
#if __has_attribute(target_clones)
#define RNN_MULTI_ISA                                                                     \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"),         \
                   optimize("fp-contract=fast")))
#endif
#endif
#ifndef RNN_MULTI_ISA
#ifdef __clang__
#define RNN_MULTI_ISA
#else
#define RNN_MULTI_ISA __attribute__((optimize("fp-contract=fast")))
#endif
#endif

RNN_INLINE rnn_v16 rnn_ld(const float *p) {
    rnn_v16 v;
    memcpy(&v, p, sizeof v);
    return v;
}
#define rnn_st(p, v)                          \
    do {                                      \
        rnn_v16 rnn_st_v_ = (v);              \
        memcpy((p), &rnn_st_v_, sizeof(rnn_v16)); \
    } while (0)
RNN_INLINE rnn_v16 rnn_splat(float x) { return (rnn_v16){0} + x; }

/* Lanes of a where m is set, else b. */
RNN_INLINE rnn_v16 rnn_select(rnn_v16i m, rnn_v16 a, rnn_v16 b) {
    return (rnn_v16)(((rnn_v16i)a & m) | ((rnn_v16i)b & ~m));
}
RNN_INLINE rnn_v16 rnn_min(rnn_v16 a, rnn_v16 b) { return rnn_select(a < b, a, b); }
RNN_INLINE rnn_v16 rnn_max(rnn_v16 a, rnn_v16 b) { return rnn_select(a > b, a, b); }

/* e^x: x = n ln2 + r with |r| <= ln2/2, e^r by its degree-6 Taylor polynomial (error below
 * 2e-7 relative), 2^n built in the exponent bits. Inputs clamped to the float range. */
RNN_INLINE rnn_v16 rnn_exp(rnn_v16 x) {
    x = rnn_min(rnn_max(x, rnn_splat(-87.0f)), rnn_splat(88.0f));
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    rnn_v16 t = x * 1.44269504f + magic;
    rnn_v16 n = t - magic;
    rnn_v16i ni = (rnn_v16i)t - (rnn_v16i)rnn_splat(magic);
    rnn_v16 r = x - n * 0.693145752f;
    r = r - n * 1.42860677e-6f;
    rnn_v16 p = rnn_splat(1.0f / 720.0f);
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    rnn_v16 scale = (rnn_v16)((ni + 127) << 23);
    return p * scale;
}

RNN_INLINE rnn_v16 rnn_sigmoid(rnn_v16 x) { return 1.0f / (1.0f + rnn_exp(-x)); }

/* tanh(x) = sign(x) (1 - e^-2|x|) / (1 + e^-2|x|); near 0, x - x^3/3 + 2x^5/15 keeps the
 * relative error small where the quotient would cancel. */
RNN_INLINE rnn_v16 rnn_tanh(rnn_v16 x) {
    const rnn_v16i sign_bit = (rnn_v16i){0} + INT32_MIN;
    rnn_v16i sign = (rnn_v16i)x & sign_bit;
    rnn_v16 ax = (rnn_v16)((rnn_v16i)x & ~sign_bit);
    rnn_v16 e = rnn_exp(-2.0f * ax);
    rnn_v16 big = (1.0f - e) / (1.0f + e);
    rnn_v16 x2 = ax * ax;
    rnn_v16 small = ax * (1.0f + x2 * (-1.0f / 3.0f + x2 * (2.0f / 15.0f - x2 * (17.0f / 315.0f))));
    rnn_v16 y = rnn_select(ax < 0.0625f, small, big);
    return (rnn_v16)((rnn_v16i)y | sign);
}

/* The activation functions the recurrent ops name (ONNX's list; defaults for alpha and beta
 * are those of the ONNX op of the same name). */
typedef enum rnn_act_kind {
    RNN_ACT_SIGMOID,
    RNN_ACT_TANH,
    RNN_ACT_RELU,
    RNN_ACT_AFFINE,
    RNN_ACT_LEAKY_RELU,
    RNN_ACT_THRESHOLDED_RELU,
    RNN_ACT_SCALED_TANH,
    RNN_ACT_HARD_SIGMOID,
    RNN_ACT_ELU,
    RNN_ACT_SOFTSIGN,
    RNN_ACT_SOFTPLUS
} rnn_act_kind;

typedef struct rnn_act {
    rnn_act_kind kind;
    float alpha, beta;
} rnn_act;

/* A lane at a time through libm, for the activations that need log or a branch per lane. */
float rnn_act_scalar(const rnn_act *a, float x);

RNN_INLINE rnn_v16 rnn_act_apply(const rnn_act *a, rnn_v16 x) {
    switch (a->kind) {
    case RNN_ACT_SIGMOID: return rnn_sigmoid(x);
    case RNN_ACT_TANH: return rnn_tanh(x);
    case RNN_ACT_RELU: return rnn_max(x, rnn_splat(0.0f));
    case RNN_ACT_AFFINE: return x * a->alpha + a->beta;
    case RNN_ACT_LEAKY_RELU: return rnn_select(x < 0.0f, x * a->alpha, x);
    case RNN_ACT_SCALED_TANH: return a->alpha * rnn_tanh(x * a->beta);
    case RNN_ACT_HARD_SIGMOID:
        return rnn_min(rnn_max(x * a->alpha + a->beta, rnn_splat(0.0f)), rnn_splat(1.0f));
    default: {
        float lanes[RNN_NB];
        rnn_st(lanes, x);
        for (int i = 0; i < RNN_NB; i++) lanes[i] = rnn_act_scalar(a, lanes[i]);
        return rnn_ld(lanes);
    }
    }
}

/* Gate pre-activations bounded to [-clip, clip] (clip = INFINITY: unbounded). */
#define rnn_clip(x, clip) rnn_min(rnn_max((x), rnn_splat(-(clip))), rnn_splat(clip))

/* Rows of the register-blocked tile: accumulators are rows x nv vectors. */
static inline int rnn_tile_rows(int nv) { return nv >= 4 ? 3 : 4; }

/* c[r][0 .. 16 nv) = bias + sum over q < k of a[r * lda + q] * panel[q * 16 nv ..], for
 * r < rows (1 ..rnn_tile_rows(nv)), nv in 1..4; bias (16 nv floats) may be NULL. */
void rnn_gemm_tile(int rows, int nv, int64_t k, const float *a, int64_t lda,
                   const float *panel, const float *bias, float *c, int64_t ldc);

/* Packs gates [g0, g0 + gc) of a [G H, k] row-major weight (ONNX's W or R of one direction)
 * into panels of RNN_NB hidden units: out[p][q][g][j] = w[(g0 + g) H + p NB + j][q], zero past
 * H. Panels [p0, p1) only, so threads can split the work. */
void rnn_pack(const float *w, int64_t hidden, int64_t k, int g0, int gc, int64_t p0, int64_t p1,
              float *out);

#endif
