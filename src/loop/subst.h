/* subst.h -- rebuilding loop-IR expressions and statements with some variables replaced by
 * expressions, several at once (internal to src/loop). */
#ifndef WPK_LOOP_SUBST_H
#define WPK_LOOP_SUBST_H

#include "loop/loop.h"

/* A node like e with operands a, b, cc (e's own operands where unchanged), rebuilt through the
 * folding constructors. Not for TE_LOAD / TE_REDUCE (their operands are lists). */
const te_expr *loop_expr_rebuild(te_ctx *c, const te_expr *e, const te_expr *a, const te_expr *b,
                                 const te_expr *cc);

/* e with every TE_VAR of vars[i] replaced by values[i], simultaneously (a value mentioning
 * vars[j] is not substituted again). Handles TE_LOAD index lists. NULL when out of memory. */
const te_expr *loop_subst_expr(te_ctx *c, const te_expr *e, int n, const te_iter *const *vars,
                               const te_expr *const *values);
/* The same over a statement tree (loop bounds, conditions, indices, values). */
const loop_stmt *loop_subst_stmt(te_ctx *c, const loop_stmt *s, int n, const te_iter *const *vars,
                                 const te_expr *const *values);

/* True when e mentions var. */
bool loop_expr_uses(const te_expr *e, const te_iter *var);
/* True when s mentions var anywhere (bounds, conditions, indices, values). */
bool loop_stmt_uses(const loop_stmt *s, const te_iter *var);

/* A for loop like f (same var, kind and bind tag) with new bounds and body. */
const loop_stmt *loop_for_like(te_ctx *c, const loop_stmt *f, const te_expr *min,
                               const te_expr *extent, const loop_stmt *body);

/* The empty statement (a sequence of none). */
const loop_stmt *loop_nop(te_ctx *c);
bool loop_is_nop(const loop_stmt *s);

#endif
