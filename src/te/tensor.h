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
/* True when t's value is known at compile time: a `constant` placeholder, or a compute whose
 * inputs are all constant (weight pre-packing: the backend runs such computes once). */
bool te_tensor_is_constant(const te_tensor *t);

/* Deterministic text. Iterators print as their name, with `_id` appended only where two
 * different iterators of the printed unit (an expression, a tensor, a schedule stage) share a
 * name. Compute: "float32[1, 8, 6, 6] conv[n, oc, oh, ow] = sum(rc<3, ry<3, rx<3: pad[...] *
 * w[...])" (a reduction axis with a non-zero min prints as "1<=k<4"); placeholder:
 * "float32[1, 3, 8, 8] x = placeholder" (or "= constant"). Integer division and modulo print as
 * `/` and `%` but are floor operations (expr.h). No trailing newline. */
void te_print_expr(const te_expr *e, strbuf *b);
void te_print_tensor(const te_tensor *t, strbuf *b);
/* Every tensor the outputs depend on, producers first (placeholders included), one line each. */
void te_print_graph(te_tensor *const *outputs, int noutputs, strbuf *b);

/* For printers of the loop IR: te_print_expr with every iterator as name_id (names unique in a
 * whole kernel) and TE_BUF_LOAD's buffer named by `buffer_name` (NULL: "buffer"). */
typedef struct te_print_opts {
    bool ids;
    void (*buffer_name)(const loop_buffer *buf, strbuf *b);
} te_print_opts;
void te_print_expr_opts(const te_expr *e, const te_print_opts *opts, strbuf *b);
/* The name of `it` as the printers write it within a unit whose iterators are scope[0..n):
 * name, or name_id when another iterator in scope has the same name. */
void te_print_iter(const te_iter *it, const te_iter *const *scope, int n, strbuf *b);

#endif
