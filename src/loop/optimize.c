/* optimize.c -- the cleanup pipeline lowering ends with (loop_optimize in lower.h): simplify,
 * partition, unroll, vectorize, simplify. Straight-line, in the order each pass needs: the
 * partitioner reads simplified conditions, unrolling exposes the bodies the vectorizer can
 * widen (an inner loop stops it), and the last simplification folds unrolled copies and
 * ramp arithmetic. Builds with assertions verify the IR before and after every pass. */
#include "loop/lower.h"
#include "loop/verify.h"

typedef const loop_stmt *(*loop_pass_fn)(te_ctx *c, const loop_stmt *s);

static wpk_status check(te_ctx *c, const loop_func *f, const loop_stmt *body, const char *after) {
#ifndef NDEBUG
    loop_func g = *f;
    g.body = body;
    wpk_status st = loop_verify(c->err, &g);
    if (st) wpk_error_prefix(c->err, "function '%s' after %s", f->name, after);
    return st;
#else
    (void)c, (void)f, (void)body, (void)after;
    return WPK_OK;
#endif
}

wpk_status loop_optimize(te_ctx *c, loop_func *f) {
    static const struct {
        const char *name;
        loop_pass_fn fn;
    } passes[] = {
        {"simplify", loop_simplify},   {"partition", loop_partition}, {"unroll", loop_unroll},
        {"vectorize", loop_vectorize}, {"simplify", loop_simplify},
    };
    const loop_stmt *s = f->body;
    wpk_status st = check(c, f, s, "lowering");
    for (size_t i = 0; i < sizeof passes / sizeof passes[0] && !st; i++) {
        s = passes[i].fn(c, s);
        if (!s) {
            if (c->oom) return WPK_ERR_NOMEM;
            return wpk_error(c->err, WPK_ERR_INTERNAL, "loop_optimize: %s of function '%s' failed",
                             passes[i].name, f->name);
        }
        st = check(c, f, s, passes[i].name);
    }
    if (st) return st;
    f->body = s;
    return WPK_OK;
}
