/* algo.c -- the helpers every op algorithm uses: names of the computes it adds, errors, and
 * index arithmetic. */
#include "te/algo/algo.h"

#include <stdarg.h>
#include <stdio.h>

const char *te_algo_name(te_ctx *c, const char *base, const char *suffix) {
    if (c->oom) return NULL;
    char name[512];
    snprintf(name, sizeof name, "%s.%s", base, suffix);
    char *s = arena_strdup(&c->mem, name);
    if (!s) {
        c->oom = true;
        wpk_error(c->err, WPK_ERR_NOMEM, "out of memory building tensor expressions");
    }
    return s;
}

static void vfail(te_ctx *c, const char *fmt, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    wpk_error(c->err, WPK_ERR_INVALID_ARG, "%s", msg);
}

te_tensor *te_algo_fail(te_ctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(c, fmt, ap);
    va_end(ap);
    return NULL;
}

bool te_algo_reject(te_ctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(c, fmt, ap);
    va_end(ap);
    return false;
}

const te_expr *te_algo_clamp(te_ctx *c, const te_expr *i, int64_t lo, int64_t hi) {
    if (lo != INT64_MIN) i = te_max(c, i, te_int(c, lo));
    if (hi != INT64_MAX) i = te_min(c, i, te_int(c, hi));
    return i;
}

const te_expr *te_algo_affine(te_ctx *c, const te_expr *a, int64_t k, const te_expr *b) {
    return te_add(c, te_mul(c, a, te_int(c, k)), b);
}

bool te_algo_check_input(te_ctx *c, const char *op, const char *name, const te_tensor *x,
                         int ndim) {
    if (!x) return te_algo_reject(c, "%s '%s': an input is missing", op, name);
    if (x->dtype != TE_F32)
        return te_algo_reject(c, "%s '%s': input '%s' is not float32", op, name, x->name);
    if (x->ndim != ndim)
        return te_algo_reject(c, "%s '%s': input '%s' has %d dims, expected %d", op, name,
                              x->name, x->ndim, ndim);
    return true;
}
