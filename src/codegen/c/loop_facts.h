/* loop_facts.h -- what the C emitter proves about the loop IR before it writes a construct
 * that relies on it. */
#ifndef WPK_CODEGEN_C_LOOP_FACTS_H
#define WPK_CODEGEN_C_LOOP_FACTS_H

#include "loop/loop.h"

/* `#pragma omp simd` promises the compiler that iterations do not depend on each other; a
 * loop the vectorizer left scalar may be a reduction, so the promise is made only when it is
 * evident: straight-line stores at index var + invariant, one per buffer, and every load of a
 * stored buffer reading exactly the element this iteration stores. */
bool cg_c_simd_safe(const loop_stmt *loop);

/* The lanes of the vector variables that can stand for allocation `alloc` (LOOP_ALLOC): every
 * read and write of its buffer in its body is a whole vector of those lanes (a power of two) at
 * a constant offset that is a multiple of them -- a register tile with its loops unrolled --
 * and the buffer is at most PROMOTE_MAX_VECTORS of them. 0 otherwise. */
int cg_c_vector_slots(const loop_stmt *alloc);

#endif
