/* qstem.h -- the int8 convolution of few input channels (a network's stem: 3 channels under a
 * 3x3 or 7x7 kernel) for the int8 provider (qconv.c). Its im2col matrix has few rows, so it
 * is built a slice of output positions at a time, packed into the GEMM's blocks while they are
 * in cache and multiplied at once (qgemm.h), instead of gathered for the whole plane first; the
 * stride-2 gathers are vector loads on AVX-512. Threads take slices. */
#ifndef WPK_KERNELS_VENDOR_QSTEM_H
#define WPK_KERNELS_VENDOR_QSTEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/vendor/qgemm.h"
#include "ops/spatial.h"

/* Whether a convolution of c input channels and geometry g goes this way (the caller checks
 * one group): a kernel larger than 1x1 and c * kh * kw at most QSTEM_MAX_K (a slice's rows and
 * blocks then stay in L2; larger k is the whole-plane im2col's). */
#define QSTEM_MAX_K 256
bool qstem_takes(const sp_geom *g, int64_t c);

/* Bytes of scratch per thread for a convolution with k = c * kh * kw. */
size_t qstem_scratch_bytes(int64_t k);

/* One image: x (c planes of g->in, u8 or s8 as flip is 0 or 0x80) into y through gemm, whose w,
 * k4, m, bias, mult, yzp, lo, hi, y_signed are set (a, p, ldy and y are filled in here).
 * xpad: the byte of x's zero point (before flip). Thread t of nt, scratch its own
 * (qstem_scratch_bytes); calls of distinct threads write disjoint parts of y. */
void qstem_image(const sp_geom *g, int64_t c, const uint8_t *x, uint8_t xpad, uint8_t flip,
                 const qgemm_args *gemm, int64_t rows_pad, uint8_t *y, uint8_t *scratch, int t,
                 int nt);

#endif
