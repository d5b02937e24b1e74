/* tensor.h -- a tensor as kernels and shape functions see it: dtype, concrete shape, data. */
#ifndef WPK_IR_TENSOR_H
#define WPK_IR_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wpk.h"

typedef struct ir_tensor {
    wpk_dtype dtype;
    int ndim;
    int64_t dims[WPK_MAX_DIMS];
    void *data; /* NULL when the values are not known (static inference); otherwise borrowed
                   from whoever owns the buffer (the graph's arena, a session) */
} ir_tensor;

static inline int64_t ir_numel(const ir_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->dims[i];
    return n;
}

static inline size_t ir_nbytes(const ir_tensor *t) {
    return (size_t)ir_numel(t) * wpk_dtype_size(t->dtype);
}

static inline bool ir_same_shape(const ir_tensor *a, const ir_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

#endif
