/* lower.h -- from a tensor expression and its schedule to a loop nest, and the passes that
 * clean the nest up before code generation. */
#ifndef WPK_LOOP_LOWER_H
#define WPK_LOOP_LOWER_H

#include "loop/loop.h"
#include "te/schedule.h"

/* Lower schedule s into a kernel named `name` whose arguments are args[0..nargs) (placeholders
 * first, then the schedule's outputs), in that order. Per stage, outermost first: the loops of
 * its leaves (relations resolved to original-axis indices; guards where a split does not
 * divide), reductions initialised then accumulated, inline stages substituted, root
 * intermediates in heap buffers, compute_at stages placed inside their attach loop over the
 * region it needs (bounds inference, also through stages computed inside the same consumer),
 * "local" stages in stack buffers. Then runs
 * loop_optimize. WPK_ERR_INVALID_ARG naming the primitive for schedules that cannot lower
 * (vectorize/unroll of a non-constant extent, compute_at of an iter not in the parent, ...). */
wpk_status loop_lower(te_ctx *c, const te_schedule *s, const char *name, te_tensor *const *args,
                      int nargs, loop_func **out);

/* The cleanup pipeline lowering ends with: simplify, partition (tails and padding guards moved
 * out of the hot loop), unroll, vectorize, simplify. */
wpk_status loop_optimize(te_ctx *c, loop_func *f);

/* Arithmetic simplification: constant folding, x*1, x+0, (a+c1)+c2, min/max and comparisons
 * decided by bounds, div/mod of ramps and of sums with multiples of the divisor. */
const te_expr *loop_simplify_expr(te_ctx *c, const te_expr *e);
const loop_stmt *loop_simplify(te_ctx *c, const loop_stmt *s);

/* Bounds of e as [*lo, *hi] given the ranges of the enclosing loop variables (bounds.c);
 * false when unbounded or not integer. */
typedef struct loop_range_env loop_range_env;
bool loop_bounds(const te_expr *e, const loop_range_env *env, int64_t *lo, int64_t *hi);

/* Loop partitioning: a loop whose body is guarded by a condition linear in its variable splits
 * into prologue / guard-free main part / epilogue. */
const loop_stmt *loop_partition(te_ctx *c, const loop_stmt *s);
/* LOOP_UNROLLED loops with constant extent become copies of their body. */
const loop_stmt *loop_unroll(te_ctx *c, const loop_stmt *s);
/* LOOP_VECTORIZED loops with constant extent become vector expressions (ramps, broadcasts,
 * vector loads/stores); bodies that cannot vectorize stay scalar loops (never wrong code). */
const loop_stmt *loop_vectorize(te_ctx *c, const loop_stmt *s);

#endif
