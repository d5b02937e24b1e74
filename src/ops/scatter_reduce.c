/* scatter_reduce.c -- the reduction of ScatterElements and ScatterND. */
#include "ops/scatter_reduce.h"

#include <string.h>

#include "ops/op_util.h"

static const char *const NAMES[] = {"none", "add", "mul", "max", "min"};

static bool arithmetic(wpk_dtype t) {
    return t == WPK_DTYPE_FLOAT32 || t == WPK_DTYPE_FLOAT64 || t == WPK_DTYPE_INT32 ||
           t == WPK_DTYPE_INT64 || t == WPK_DTYPE_INT8 || t == WPK_DTYPE_UINT8;
}

wpk_status scatter_reduction_read(wpk_context *ctx, const ir_node *n, wpk_dtype dtype,
                                  scatter_reduction *out) {
    const char *s = ir_attr_str(n, "reduction", "none");
    for (int i = 0; i < 5; i++) {
        if (strcmp(s, NAMES[i]) != 0) continue;
        if (i != SCATTER_NONE && !arithmetic(dtype))
            return op_unsupported(ctx, n, "reduction '%s' on dtype %s is not supported", s,
                                  wpk_dtype_name(dtype));
        *out = (scatter_reduction)i;
        return WPK_OK;
    }
    return op_fail(ctx, n, "attribute 'reduction' is '%s'; it must be none, add, mul, max or min",
                   s);
}

#define COMBINE(T)                                                                     \
    do {                                                                               \
        T *d = dst;                                                                    \
        const T *s = src;                                                              \
        switch (r) {                                                                   \
        case SCATTER_ADD: for (int64_t i = 0; i < count; i++) d[i] += s[i]; break;     \
        case SCATTER_MUL: for (int64_t i = 0; i < count; i++) d[i] *= s[i]; break;     \
        case SCATTER_MAX:                                                              \
            for (int64_t i = 0; i < count; i++) d[i] = s[i] > d[i] ? s[i] : d[i];      \
            break;                                                                     \
        case SCATTER_MIN:                                                              \
            for (int64_t i = 0; i < count; i++) d[i] = s[i] < d[i] ? s[i] : d[i];      \
            break;                                                                     \
        default: break;                                                                \
        }                                                                              \
    } while (0)

void scatter_combine(scatter_reduction r, wpk_dtype dtype, void *dst, const void *src,
                     int64_t count) {
    if (r == SCATTER_NONE) {
        memcpy(dst, src, (size_t)count * wpk_dtype_size(dtype));
        return;
    }
    switch (dtype) {
    case WPK_DTYPE_FLOAT32: COMBINE(float); break;
    case WPK_DTYPE_FLOAT64: COMBINE(double); break;
    case WPK_DTYPE_INT32: COMBINE(int32_t); break;
    case WPK_DTYPE_INT64: COMBINE(int64_t); break;
    case WPK_DTYPE_INT8: COMBINE(int8_t); break;
    case WPK_DTYPE_UINT8: COMBINE(uint8_t); break;
    default: break; /* refused by scatter_reduction_read */
    }
}
