/* scatter_reduce.h -- how ScatterElements and ScatterND combine an update with the value it
 * lands on: the `reduction` attribute (none, add, mul, max, min) and the per-dtype combining. */
#ifndef WPK_OPS_SCATTER_REDUCE_H
#define WPK_OPS_SCATTER_REDUCE_H

#include <stddef.h>

#include "ir/graph.h"

typedef enum scatter_reduction {
    SCATTER_NONE,
    SCATTER_ADD,
    SCATTER_MUL,
    SCATTER_MAX,
    SCATTER_MIN
} scatter_reduction;

/* Attribute 'reduction' (absent: none) into *out, checked against the data's dtype: none on
 * every dtype, the others on float32, float64, int32, int64, int8 and uint8. WPK_ERR_MODEL for
 * an unknown name, WPK_ERR_UNSUPPORTED for a reduction on another dtype. */
wpk_status scatter_reduction_read(wpk_context *ctx, const ir_node *n, wpk_dtype dtype,
                                  scatter_reduction *out);

/* dst[i] = reduce(dst[i], src[i]) for count elements of dtype (none: a copy). */
void scatter_combine(scatter_reduction r, wpk_dtype dtype, void *dst, const void *src,
                     int64_t count);

#endif
