/* recurrent_gemm.c -- the matrix products of the recurrent ops: weights packed into panels of
 * RNN_NB hidden units (every gate of those units side by side, k-major), and a register-blocked
 * tile that multiplies a few rows of activations by one panel. The input projection of every
 * timestep and each step's recurrent product both run through it. */
#include "ops/recurrent_math.h"

/* Shuffle masks of a 16 x 16 transpose in four stages: stage s exchanges bit s of the row and
 * lane indices between rows i and i + s (lanes 0..15 pick from row i, 16..31 from row i + s). */
typedef struct transpose_masks {
    int32_t lo[4][RNN_NB], hi[4][RNN_NB];
} transpose_masks;

static transpose_masks make_masks(void) {
    transpose_masks m;
    for (int stage = 0; stage < 4; stage++) {
        int s = 8 >> stage;
        for (int l = 0; l < RNN_NB; l++) {
            m.lo[stage][l] = l & s ? RNN_NB + (l & ~s) : l;
            m.hi[stage][l] = l & s ? RNN_NB + l : (l | s);
        }
    }
    return m;
}

/* Lanes of a and b (b's numbered 16-31) picked by mask: GCC's __builtin_shuffle; clang's
 * shuffle builtin takes constant lanes only, so there a loop over the lanes. */
RNN_INLINE rnn_v16 shuffle2(rnn_v16 a, rnn_v16 b, rnn_v16i mask) {
#ifdef __clang__
    rnn_v16 r;
    for (int l = 0; l < RNN_NB; l++) r[l] = mask[l] < RNN_NB ? a[mask[l]] : b[mask[l] - RNN_NB];
    return r;
#else
    return __builtin_shuffle(a, b, mask);
#endif
}

/* dst[q * width + j] = rows[j][q] for q, j < 16. */
RNN_INLINE void transpose16(const float *const *rows, int64_t q0, const transpose_masks *tm,
                            float *dst, int64_t width) {
    rnn_v16 m[RNN_NB];
#pragma GCC unroll 16
    for (int j = 0; j < RNN_NB; j++) m[j] = rnn_ld(rows[j] + q0);
#pragma GCC unroll 4
    for (int stage = 0; stage < 4; stage++) {
        const int s = 8 >> stage;
        rnn_v16i lo, hi;
        memcpy(&lo, tm->lo[stage], sizeof lo);
        memcpy(&hi, tm->hi[stage], sizeof hi);
#pragma GCC unroll 16
        for (int i = 0; i < RNN_NB; i++) {
            if (i & s) continue;
            rnn_v16 a = shuffle2(m[i], m[i + s], lo);
            rnn_v16 b = shuffle2(m[i], m[i + s], hi);
            m[i] = a;
            m[i + s] = b;
        }
    }
#pragma GCC unroll 16
    for (int q = 0; q < RNN_NB; q++) rnn_st(dst + q * width, m[q]);
}

RNN_MULTI_ISA void rnn_pack(const float *w, int64_t hidden, int64_t k, int g0, int gc, int64_t p0,
                            int64_t p1, float *out) {
    const transpose_masks tm = make_masks();
    const int64_t width = (int64_t)gc * RNN_NB;
    for (int64_t p = p0; p < p1; p++) {
        float *dst = out + p * k * width;
        for (int g = 0; g < gc; g++) {
            /* the panel's 16 rows of this gate read side by side, so every write is in order */
            const float *rows[RNN_NB];
            int valid = 0;
            for (int jj = 0; jj < RNN_NB && p * RNN_NB + jj < hidden; jj++, valid++)
                rows[jj] = w + ((g0 + g) * hidden + p * RNN_NB + jj) * k;
            int64_t q = 0;
            if (valid == RNN_NB)
                for (; q + RNN_NB <= k; q += RNN_NB)
                    transpose16(rows, q, &tm, dst + q * width + g * RNN_NB, width);
            for (; q < k; q++) {
                float *col = dst + q * width + g * RNN_NB;
                for (int jj = 0; jj < valid; jj++) col[jj] = rows[jj][q];
                for (int jj = valid; jj < RNN_NB; jj++) col[jj] = 0.0f;
            }
        }
    }
}

/* The tile for compile-time ROWS and NV, so the accumulators live in registers (the loops
 * over them unrolled: -O2 alone leaves the accumulators on the stack). */
RNN_INLINE void tile(const int ROWS, const int NV, int64_t k, const float *a, int64_t lda,
                     const float *panel, const float *bias, float *c, int64_t ldc) {
    rnn_v16 acc[4][4];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) {
        rnn_v16 b0 = bias ? rnn_ld(bias + v * RNN_NB) : rnn_splat(0.0f);
#pragma GCC unroll 4
        for (int r = 0; r < ROWS; r++) acc[r][v] = b0;
    }
    for (int64_t q = 0; q < k; q++) {
        const float *bq = panel + q * NV * RNN_NB;
        rnn_v16 b[4];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) b[v] = rnn_ld(bq + v * RNN_NB);
#pragma GCC unroll 4
        for (int r = 0; r < ROWS; r++) {
            float av = a[r * lda + q];
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) acc[r][v] += av * b[v];
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < ROWS; r++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) rnn_st(c + r * ldc + v * RNN_NB, acc[r][v]);
}

#define TILE_CASE(R, V)                                \
    case (R) * 8 + (V):                                \
        tile(R, V, k, a, lda, panel, bias, c, ldc);    \
        return;

RNN_MULTI_ISA void rnn_gemm_tile(int rows, int nv, int64_t k, const float *a, int64_t lda,
                                 const float *panel, const float *bias, float *c, int64_t ldc) {
    switch (rows * 8 + nv) {
        TILE_CASE(1, 1) TILE_CASE(2, 1) TILE_CASE(3, 1) TILE_CASE(4, 1)
        TILE_CASE(1, 2) TILE_CASE(2, 2) TILE_CASE(3, 2) TILE_CASE(4, 2)
        TILE_CASE(1, 3) TILE_CASE(2, 3) TILE_CASE(3, 3) TILE_CASE(4, 3)
        TILE_CASE(1, 4) TILE_CASE(2, 4) TILE_CASE(3, 4)
    default:
        /* rnn_tile_rows bounds rows; anything else is a caller bug */
        __builtin_trap();
    }
}

float rnn_act_scalar(const rnn_act *a, float x) {
    switch (a->kind) {
    case RNN_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case RNN_ACT_TANH: return tanhf(x);
    case RNN_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case RNN_ACT_AFFINE: return a->alpha * x + a->beta;
    case RNN_ACT_LEAKY_RELU: return x < 0.0f ? a->alpha * x : x;
    case RNN_ACT_THRESHOLDED_RELU: return x > a->alpha ? x : 0.0f;
    case RNN_ACT_SCALED_TANH: return a->alpha * tanhf(a->beta * x);
    case RNN_ACT_HARD_SIGMOID: return fminf(fmaxf(a->alpha * x + a->beta, 0.0f), 1.0f);
    case RNN_ACT_ELU: return x < 0.0f ? a->alpha * (expf(x) - 1.0f) : x;
    case RNN_ACT_SOFTSIGN: return x / (1.0f + fabsf(x));
    case RNN_ACT_SOFTPLUS: return x > 20.0f ? x : log1pf(expf(x));
    }
    return x;
}
