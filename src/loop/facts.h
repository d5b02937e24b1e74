/* facts.h -- what can be proven about loop IR before a code generator writes a construct that
 * relies on it: signs and divisors of index expressions, independent iterations, and
 * allocations that can live as vector variables. */
#ifndef WPK_LOOP_FACTS_H
#define WPK_LOOP_FACTS_H

#include "loop/loop.h"

/* What is known of one variable in scope. */
typedef struct loop_var_fact {
    bool nonneg;   /* provably >= 0 */
    int64_t mult;  /* provably a multiple of this (0: the value 0) */
} loop_var_fact;

/* The variables in scope, as the caller keeps them: lookup returns var's facts (borrowed from
 * self, valid until the scope changes) or NULL when nothing is known. */
typedef struct loop_fact_scope {
    const loop_var_fact *(*lookup)(const void *self, const te_iter *var);
    const void *self;
} loop_fact_scope;

/* Is integer expression e provably >= 0? */
bool loop_nonneg(const loop_fact_scope *sc, const te_expr *e);
/* A number e is provably a multiple of (0 when e is the constant 0: a multiple of anything). */
int64_t loop_multiple(const loop_fact_scope *sc, const te_expr *e);
/* The greatest common divisor of |a| and |b| (gcd(0, b) = |b|). */
int64_t loop_gcd(int64_t a, int64_t b);

/* Are the iterations of `loop` (a LOOP_FOR) evidently independent, so that `omp simd` may
 * promise it? Straight-line stores at index var + invariant, one per buffer, and every load of a
 * stored buffer reading exactly the element this iteration stores. */
bool loop_simd_safe(const loop_stmt *loop);

/* The lanes of the vector variables that can stand for allocation `alloc` (LOOP_ALLOC): every
 * read and write of its buffer in its body is a whole vector of those lanes (a power of two) at
 * a constant offset that is a multiple of them -- a register tile with its loops unrolled --
 * and the buffer is at most max_vectors of them. 0 otherwise. */
int loop_vector_slots(const loop_stmt *alloc, int max_vectors);

#endif
