/* sync.h -- GPU barrier placement: a loop pass that inserts explicit barriers (loop_barrier)
 * into a nest whose loops are bound to blockIdx/threadIdx, so that printers only print them. */
#ifndef WPK_LOOP_SYNC_H
#define WPK_LOOP_SYNC_H

#include "loop/loop.h"

#define LOOP_SYNC_MAX_SHARED 64 /* shared buffers one nest may allocate (a 64-bit mask each) */

/* Barriers go at block level (outside every loop bound to threadIdx.*) wherever a group of
 * threads may read a LOOP_SCOPE_SHARED buffer that another group wrote since the last barrier,
 * or overwrite what another may still have to read: so before and after a cooperative load
 * inside a reduction loop. A loop whose body conflicts with what is pending gets one barrier in
 * front of it, not one per iteration; a condition at block level is the same in every thread,
 * so barriers may go inside its branches. Two groups writing one buffer with no read between
 * need none (lowering writes each element of a stage once per region).
 * *out is s with the barriers in (s itself when none are needed); new statements live in c.
 * WPK_ERR_UNSUPPORTED naming the buffer when one thread-bound nest both writes and reads a
 * shared buffer (its threads would need a barrier inside divergent code), or for more than
 * LOOP_SYNC_MAX_SHARED shared buffers; WPK_ERR_NOMEM. */
wpk_status loop_place_barriers(te_ctx *c, const loop_stmt *s, const loop_stmt **out);

#endif
