/* verify.h -- the loop-IR verifier: the invariants every pass keeps and code generators rely
 * on, checked on a whole kernel. */
#ifndef WPK_LOOP_VERIFY_H
#define WPK_LOOP_VERIFY_H

#include "loop/loop.h"

/* WPK_ERR_INTERNAL (message on ctx naming the statement's buffer or variable) when f breaks an
 * invariant: a variable used outside the loop or let that binds it, or bound twice in one
 * nest; a buffer accessed outside its allocation (not an argument, not allocated around the
 * access); a tensor-level expression (TE_LOAD, TE_REDUCE) left in the loops; loop bounds or
 * conditions that are not scalar integers; a store whose value's type is not the buffer's or
 * whose index has other lanes than its value; an access whose index is provably outside the
 * buffer (outside any if or select branch: guarded code may be dead where a pass has not folded
 * its condition yet). WPK_OK otherwise. Reads f only. */
wpk_status loop_verify(wpk_context *ctx, const loop_func *f);

#endif
