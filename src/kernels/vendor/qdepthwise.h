/* qdepthwise.h -- the int8 depthwise convolution of one channel (qconv.c): padding, sums over
 * the taps and requantization to 8 bits. Three paths chosen by the CPU at run time, all giving
 * the reference kernel's bytes: AVX512-VNNI (taps of a kernel row as one 4-deep dot over
 * neighbouring bytes), AVX-512 (bytes widened to int32) and a portable loop. */
#ifndef WPK_KERNELS_VENDOR_QDEPTHWISE_H
#define WPK_KERNELS_VENDOR_QDEPTHWISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One channel: an unpadded input plane to one output plane. */
typedef struct qdw_channel {
    const uint8_t *x;       /* ih x iw bytes; int8 when is_signed (borrowed) */
    int64_t ih, iw, oh, ow; /* oh, ow: the output plane's size, which sets the padding after */
    int64_t kh, kw, sh, sw, dh, dw;
    int64_t pad_top, pad_left;
    const int8_t *w;        /* kh x kw taps (borrowed) */
    bool is_signed;
    int32_t xzp, bias, yzp, lo, hi;
    float mult;             /* y = clamp(round((sum + bias) * mult) + yzp, lo, hi) */
    uint8_t *y;             /* oh x ow bytes (borrowed) */
} qdw_channel;

/* Bytes of scratch qdw_run_channel needs for this geometry (the fields other than the data
 * pointers and the quantization parameters are read). */
size_t qdw_scratch_bytes(const qdw_channel *c);

/* Computes c's output plane in scratch (qdw_scratch_bytes(c) bytes, one per thread: calls with
 * distinct scratch and outputs may run at once). */
void qdw_run_channel(const qdw_channel *c, uint8_t *scratch);

/* The path qdw_run_channel takes on this CPU: "vnni", "avx512" or "portable" ($WPK_CPU_FLAGS_OFF
 * naming avx512_vnni, or avx512f / avx512bw / avx512vl, steps down a path). */
const char *qdw_isa(void);

#endif
