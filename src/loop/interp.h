/* interp.h -- a loop-IR interpreter: runs a kernel by walking its statements, slowly and
 * exactly (float32 arithmetic, floor division, every access bounds-checked). It is the oracle
 * for lowering and the loop passes, independent of any C compiler. */
#ifndef WPK_LOOP_INTERP_H
#define WPK_LOOP_INTERP_H

#include "loop/loop.h"

/* Run f with args[i] pointing at the data of f->args[i] (row-major, dtype of the buffer;
 * borrowed). Parallel and bound loops run serially in order. Buffers the kernel allocates are
 * filled with NaN (floats) / -1 (integers) so reading before writing shows in the result.
 * Returns WPK_ERR_INTERNAL naming the buffer and index for an out-of-bounds load or store, an
 * unbound variable, a division by zero or a TE-level expression left in the IR; WPK_ERR_NOMEM
 * when a buffer cannot be allocated. Not thread-safe for the same ctx. */
wpk_status loop_interp_run(wpk_context *ctx, const loop_func *f, void *const *args);

#endif
