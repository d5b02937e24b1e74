/* qdepthwise.h -- the row loops of the int8 depthwise convolution (qconv.c): one kernel tap
 * accumulated over a row of output positions, and a row of sums requantized to 8 bits. AVX-512
 * where the CPU has it (checked at run time), a portable loop elsewhere; both give the same
 * values. */
#ifndef WPK_KERNELS_VENDOR_QDEPTHWISE_H
#define WPK_KERNELS_VENDOR_QDEPTHWISE_H

#include <stdbool.h>
#include <stdint.h>

/* For r in [0, rows), i in [0, n): acc[r * acc_row + i] += (x[r * x_row + i * stride] - xzp)
 * * w; x is int8 when is_signed, else uint8. */
void qdw_accumulate(int32_t *acc, int64_t acc_row, const uint8_t *x, int64_t x_row,
                    int64_t rows, int64_t n, int64_t stride, bool is_signed, int32_t xzp,
                    int32_t w);

/* dst[i] = quant_round_clamp((acc[i] + bias) * mult, yzp, lo, hi) as a byte, i in [0, n). */
void qdw_requantize(uint8_t *dst, const int32_t *acc, int64_t n, int32_t bias, float mult,
                    int32_t yzp, int32_t lo, int32_t hi);

#endif
