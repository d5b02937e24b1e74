/* qdepthwise.h -- the int8 depthwise convolution of one channel (qconv.c): sums over the taps
 * and requantization to 8 bits. AVX-512 where the CPU has it (checked at run time), a portable
 * loop elsewhere; both give the same values. */
#ifndef WPK_KERNELS_VENDOR_QDEPTHWISE_H
#define WPK_KERNELS_VENDOR_QDEPTHWISE_H

#include <stdbool.h>
#include <stdint.h>

/* One depthwise output plane from a padded input plane (every tap in bounds: the padding holds
 * x's zero point), sums kept in registers across the taps and requantized at once. */
typedef struct qdw_plane {
    const uint8_t *x;       /* padded plane, row stride x_row; int8 when is_signed */
    int64_t x_row;
    int64_t oh, ow, kh, kw, sh, sw, dh, dw;
    const int8_t *w;        /* kh x kw taps */
    bool is_signed;
    int32_t xzp, bias, yzp, lo, hi;
    float mult;
    uint8_t *y;             /* oh x ow bytes */
} qdw_plane;

void qdw_run_plane(const qdw_plane *p);

#endif
