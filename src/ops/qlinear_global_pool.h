/* qlinear_global_pool.h -- the requantization wpk::QLinearGlobalAveragePool's reference kernel
 * and the int8 provider share, so both give the same bytes. */
#ifndef WPK_OPS_QLINEAR_GLOBAL_POOL_H
#define WPK_OPS_QLINEAR_GLOBAL_POOL_H

#include <stdint.h>

#include "ir/graph.h"

/* The output byte of a plane of `count` values whose (x - x_zero_point) sum to `sum`: the mean
 * (float)sum * xs / count quantized with scale ys and zero point yz to dtype yt. */
int32_t qgap_quantize(int64_t sum, int64_t count, float xs, float ys, int32_t yz,
                      wpk_dtype yt);

#endif
