/* qgemm.h -- the int8 GEMM with fused requantization under the int8 convolution provider
 * (qconv.c): u8 activations x s8 weights -> s32 sums, plus a per-row bias, scaled per row,
 * rounded, offset by the output zero point, clamped and stored as u8 or s8. On AVX512-VNNI
 * (read from the CPU at run time) a register tile of `vpdpbusd`; elsewhere a portable loop
 * with the same arithmetic, so both give the same bytes. */
#ifndef WPK_KERNELS_VENDOR_QGEMM_H
#define WPK_KERNELS_VENDOR_QGEMM_H

#include <stdbool.h>
#include <stdint.h>

/* Rows (output channels) and, at most, 16-column blocks (output positions) of one register
 * tile (the AVX512-VNNI tile in qgemm.c is written out for these values; a tile at the end of
 * the blocks takes 1 or 2 of them, so a plane is padded only to 16 columns). */
#define QGEMM_MR 8
#define QGEMM_NB 3
#define QGEMM_LANES 16

/* Y[m][p] = clamp(round(float(sum_k W[m][k] * A[k][p] + bias[m]) * mult[m]) + yzp, lo, hi).
 * K is walked as taps x quads groups of 4 k's (k4 = taps * quads), tap-major.
 * w: rows_pad x (4 * k4) s8, row-major, rows_pad a multiple of QGEMM_MR (zero rows past m).
 * a: column p's 4 bytes of group (tap t, quad q) at a + 4 * p + tap_off[t] + q * quad_stride,
 * readable for every p of the column blocks run (a multiple of 16 columns). An implicit GEMM
 * over a padded input gives each kernel tap an offset; a packed im2col matrix has one tap.
 * Column p is output (p / row_w, p % row_w), stored when p < cols and p % row_w < out_w at
 * y + m * ldy + (p / row_w) * out_w + p % row_w (row_w == out_w: column p at y[m][p]).
 * bias, mult: rows_pad values. */
typedef struct qgemm_args {
    const int8_t *w;
    const uint8_t *a;
    const int64_t *tap_off;
    int64_t taps, quads, quad_stride;
    int64_t m, cols, row_w, out_w, ldy;
    const int32_t *bias;
    const float *mult;
    int32_t yzp, lo, hi;
    bool y_signed;
    void *y;
} qgemm_args;

/* The tiles of rows [r0, r1) (multiples of QGEMM_MR) and column blocks [b0, b1): QGEMM_NB
 * blocks a tile from b0, the last tile taking what is left. Thread safe: tiles write disjoint
 * parts of y. */
void qgemm_run(const qgemm_args *g, int64_t r0, int64_t r1, int64_t b0, int64_t b1);

/* Rows and positions of one tile of the GEMM turned around (qgemm_lanes.c): output channels
 * in the lanes of 4 vectors, positions broadcast, for planes too small for 16-column blocks. */
#define QGEMM_LANES_MR 64
#define QGEMM_LANES_NP 6

/* The same GEMM as qgemm_run, for rows [64 mb, 64 mb + 64) and output positions [j0, j1)
 * (position j = output (j / out_w, j % out_w), read at column (j / out_w) * row_w + j % out_w
 * and stored at y + m * ldy + j; cols is not used). Its weights are laid out for it: row
 * 64 mb + l, k-group kg, k t at w[((mb * k4 + kg) * 64 + l) * 4 + t]; bias and mult hold
 * a multiple of 64 values. Thread safe like qgemm_run. */
void qgemm_lanes_run(const qgemm_args *g, int64_t mb, int64_t j0, int64_t j1);

/* Whether qgemm_run uses AVX512-VNNI on this CPU ("vnni") or the portable loop ("portable",
 * also when $WPK_CPU_FLAGS_OFF names avx512f, avx512bw or avx512_vnni). */
const char *qgemm_isa(void);

/* Pack 4 rows of 16 bytes (r[t][l]) into one group of a block (out[l * 4 + t]), xor-ing every
 * byte with flip (0x80 turns s8 into u8 offset by 128). */
void qgemm_pack_group(uint8_t *out, const uint8_t *const r[4], uint8_t flip);

/* n pixels of 4 rows interleaved: out[4 p + t] = r[t][p] ^ flip for p < n, nothing else
 * written and nothing past r[t][n - 1] read (AVX-512 where qgemm_run uses VNNI). */
void qgemm_interleave(uint8_t *out, const uint8_t *const r[4], int64_t n, uint8_t flip);

/* qgemm_pack_group for the two column phases of a stride-2 convolution: 4 rows of 32 bytes, their
 * even bytes (r[t][2 l]) packed into even and their odd ones (r[t][2 l + 1]) into odd. */
void qgemm_pack_group_pairs(uint8_t *even, uint8_t *odd, const uint8_t *const r[4],
                            uint8_t flip);

/* qgemm_interleave for the two column phases of a stride-2 convolution: n pixels of 4 rows,
 * the even ones (r[t][2 i]) interleaved at even[4 i + t] and the odd ones at odd[4 i + t]
 * (not written when odd is null), flipped; nothing past r[t][n - 1] read (AVX-512 where
 * qgemm_run uses VNNI). */
void qgemm_interleave_pairs(uint8_t *even, uint8_t *odd, const uint8_t *const r[4], int64_t n,
                            uint8_t flip);

#endif
