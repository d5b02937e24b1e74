/* optimize.c -- the cleanup pipeline lowering ends with (loop_optimize in lower.h): simplify,
 * partition, unroll, vectorize, simplify. Straight-line, in the order each pass needs: the
 * partitioner reads simplified conditions, unrolling exposes the bodies the vectorizer can
 * widen (an inner loop stops it), and the last simplification folds unrolled copies and
 * ramp arithmetic. */
#include "loop/lower.h"

wpk_status loop_optimize(te_ctx *c, loop_func *f) {
    const loop_stmt *s = f->body;
    s = s ? loop_simplify(c, s) : NULL;
    s = s ? loop_partition(c, s) : NULL;
    s = s ? loop_unroll(c, s) : NULL;
    s = s ? loop_vectorize(c, s) : NULL;
    s = s ? loop_simplify(c, s) : NULL;
    if (!s) {
        if (c->oom) return WPK_ERR_NOMEM;
        return wpk_error(c->err, WPK_ERR_INTERNAL, "loop_optimize: a pass of function '%s' failed",
                         f->name);
    }
    f->body = s;
    return WPK_OK;
}
