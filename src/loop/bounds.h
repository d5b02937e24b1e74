/* bounds.h -- integer ranges of loop-IR expressions: the scope of variable ranges the loop
 * passes carry down a nest, constant bounds (loop_bounds in lower.h) and symbolic bounds for
 * bounds inference of compute_at regions (internal to src/loop). */
#ifndef WPK_LOOP_BOUNDS_H
#define WPK_LOOP_BOUNDS_H

#include "loop/lower.h"

/* One variable's range on top of the enclosing scope. Frames live on the stack of the pass
 * that walks the nest; `up` must outlive the frame. Variables not in the scope fall back to the
 * range their te_iter declares (so a loop over an iter must stay inside that range, which
 * lowering and every pass keep). */
struct loop_range_env {
    const loop_range_env *up;
    const te_iter *var;
    bool bounded;               /* false: the variable is known to be in scope but unbounded */
    int64_t lo, hi;             /* inclusive */
};

loop_range_env loop_env_range(const loop_range_env *up, const te_iter *var, int64_t lo, int64_t hi);
/* The scope inside for loop f: f->var in [min, min + extent - 1] as far as the bounds of f's
 * min and extent (under up) tell. */
loop_range_env loop_env_for(const loop_range_env *up, const loop_stmt *f);
/* The scope inside `let var = value`: var has value's bounds. */
loop_range_env loop_env_let(const loop_range_env *up, const te_iter *var, const te_expr *value);

/* Symbolic bounds: *lo and *hi bound e over every value of the variables in `relax` (ranges
 * from its frames) with every other variable held fixed, as expressions in those fixed
 * variables. False when e is not an integer expression monotone enough to bound (a load whose
 * index varies, a product of two varying terms). */
bool loop_bounds_relaxed(te_ctx *c, const te_expr *e, const loop_range_env *relax,
                         const te_expr **lo, const te_expr **hi);

/* loop_simplify_expr / loop_simplify (simplify.c) under a scope of variable ranges, for passes
 * that simplify a piece of a nest. */
const te_expr *loop_simplify_expr_in(te_ctx *c, const te_expr *e, const loop_range_env *env);
const loop_stmt *loop_simplify_in(te_ctx *c, const loop_stmt *s, const loop_range_env *env);

/* Floor division and modulo (the IR's integer semantics). */
int64_t loop_floor_div(int64_t a, int64_t b);
int64_t loop_floor_mod(int64_t a, int64_t b);

#endif
