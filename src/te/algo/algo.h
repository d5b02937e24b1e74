/* algo.h -- what the op algorithms (src/te/algo/) share: the computes an algorithm hands to a
 * schedule template, and the small builders of index expressions they all use. An algorithm
 * takes plain shapes and attribute structs (never graph IR nodes: te does not depend on ir),
 * returns its output tensor, and returns NULL with a message naming the op and the cause on
 * the te_ctx's context when the shapes or attributes do not fit. */
#ifndef WPK_TE_ALGO_ALGO_H
#define WPK_TE_ALGO_ALGO_H

#include "te/tensor.h"

/* The computes an algorithm built, for schedule templates; the ones it did not build are NULL. */
typedef struct te_algo_parts {
    te_tensor *out;      /* the result (main, or the epilogue stage when there is one) */
    te_tensor *main;     /* the op's main compute: the conv/matmul/pool reduction, the softmax
                            divide, the layer norm normalize, the layout copy */
    te_tensor *pad;      /* the padded input (only when the op pads) */
    te_tensor *epilogue; /* the elementwise stage after a reduction (bias/residual/activation, the
                            average pool's divide); == out when present */
    te_tensor *stats[3]; /* softmax: max, exp-sum (and the sum's own max: te_softmax_split_max);
                            layer norm: mean, variance */
} te_algo_parts;

/* ---- helpers for the algorithm files (not for templates) ---- */

/* "base.suffix" in c's arena (NULL when out of memory). */
const char *te_algo_name(te_ctx *c, const char *base, const char *suffix);
/* Record an invalid-argument message on c (printf-style) and return NULL, so an algorithm can
 * write `return te_algo_fail(c, "conv2d '%s': ...", name, ...)`. */
te_tensor *te_algo_fail(te_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same for checks that answer true/false: records the message, returns false. */
bool te_algo_reject(te_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* min(max(i, lo), hi), leaving out the side that cannot bind (lo == INT64_MIN, hi ==
 * INT64_MAX): keeps a load's index inside its tensor where a select discards the value. */
const te_expr *te_algo_clamp(te_ctx *c, const te_expr *i, int64_t lo, int64_t hi);
/* a * k + b for an index (k == 1 and b == 0 fold away). */
const te_expr *te_algo_affine(te_ctx *c, const te_expr *a, int64_t k, const te_expr *b);
/* True when x is a float32 tensor of `ndim` dims; otherwise false with a message naming the op,
 * the output and the input ("conv2d 'c1': input 'x' has 3 dims, expected 4"). */
bool te_algo_check_input(te_ctx *c, const char *op, const char *name, const te_tensor *x,
                         int ndim);
/* ceil(a / b) for a >= 0, b > 0. */
static inline int64_t te_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

#endif
