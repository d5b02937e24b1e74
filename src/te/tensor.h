/* tensor.h -- tensor expressions: placeholders (inputs) and compute definitions (the algorithm:
 * what each element is, not how loops run). Built in a te_ctx arena. */
#ifndef WPK_TE_TENSOR_H
#define WPK_TE_TENSOR_H

#include "base/strbuf.h"
#include "te/expr.h"

#define TE_MAX_DIMS 8

typedef enum te_tensor_kind { TE_PLACEHOLDER, TE_COMPUTE } te_tensor_kind;

struct te_tensor {
    const char *name;
    te_tensor_kind kind;
    te_scalar dtype;
    int ndim;
    int64_t shape[TE_MAX_DIMS];
    te_iter **axes;        /* COMPUTE: ndim TE_ITER_DATA iters with ranges [0, shape[i]) */
    const te_expr *body;   /* COMPUTE: the element at `axes`; a TE_REDUCE for reductions
                              (initial value: 0 for sum, -inf/+inf for max/min) */
    bool constant;         /* PLACEHOLDER: bound to data known at compile time (weights), so
                              computes reading only constants can run once (pre-packing) */
};

/* An input tensor. NULL when out of memory or a dim is not positive (message on c->err). */
te_tensor *te_placeholder(te_ctx *c, const char *name, te_scalar dtype, int ndim,
                          const int64_t *shape);
/* The data axes for a compute of this shape (names may be NULL: i0, i1, ...). */
te_iter **te_compute_axes(te_ctx *c, int ndim, const int64_t *shape, const char *const *names);
/* A compute tensor: element [axes] = body. axes must come from te_compute_axes with the same
 * shape; body may reference only those axes, reduction axes inside a TE_REDUCE, and loads of
 * other tensors. Returns NULL (message on c->err) when the body is malformed. */
te_tensor *te_compute(te_ctx *c, const char *name, int ndim, const int64_t *shape, te_iter **axes,
                      const te_expr *body);
/* A reduction axis over [min, min + extent). */
te_iter *te_reduce_axis(te_ctx *c, const char *name, int64_t min, int64_t extent);

/* The tensors t reads directly, in order of first appearance; returns the count (<= max). */
int te_tensor_inputs(const te_tensor *t, const te_tensor **out, int max);

/* Deterministic text: "conv[n, c, h, w] = sum(rc, ry, rx: pad[...] * w[...])". */
void te_print_expr(const te_expr *e, strbuf *b);
void te_print_tensor(const te_tensor *t, strbuf *b);

#endif
