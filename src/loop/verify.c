/* verify.c -- the loop-IR verifier (verify.h): one walk over a kernel with the scope of bound
 * variables and live buffers. */
#include "loop/verify.h"

#include <stdarg.h>
#include <stdio.h>

#include "base/alloc.h"
#include "base/context.h"
#include "loop/bounds.h"

#define MAX_DEPTH 4096

typedef struct ver {
    wpk_context *ctx;
    int guarded;   /* inside an if or a select's branch: code that may never run there (a pass
                      may not have folded its condition yet) is not held to its bounds */
    const loop_buffer *bufs[MAX_DEPTH];
    int nbufs;
    wpk_status st;
} ver;

static bool bound(const loop_range_env *env, const te_iter *v) {
    for (; env; env = env->up)
        if (env->var == v) return true;
    return false;
}

static bool live(const ver *V, const loop_buffer *b) {
    for (int i = 0; i < V->nbufs; i++)
        if (V->bufs[i] == b) return true;
    return false;
}

static bool fail(ver *V, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(ver *V, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!V->st) V->st = wpk_error(V->ctx, WPK_ERR_INTERNAL, "loop verify: %s", msg);
    return false;
}

static bool is_int(te_type t) { return t.scalar == TE_I64 || t.scalar == TE_I32; }

/* The index of an access to b: integer, and not provably outside b. */
static bool access_ok(ver *V, const loop_buffer *b, const te_expr *idx, const loop_range_env *env,
                      const char *what) {
    int64_t lo, hi;
    if (!is_int(idx->type)) return fail(V, "%s '%s' at an index that is not an integer", what, b->name);
    if (!V->guarded && loop_bounds(idx, env, &lo, &hi) && (hi < 0 || lo >= b->size))
        return fail(V, "%s '%s' at [%lld, %lld], outside [0, %lld)", what, b->name, (long long)lo,
                    (long long)hi, (long long)b->size);
    return true;
}

static bool expr_ok(ver *V, const te_expr *e, const loop_range_env *env) {
    if (!e) return fail(V, "a missing expression");
    switch (e->kind) {
    case TE_INT: case TE_FLOAT: return true;
    case TE_VAR:
        if (!bound(env, e->var))
            return fail(V, "variable %s_%d used outside the loop or let that binds it", e->var->name,
                        e->var->id);
        return true;
    case TE_LOAD: case TE_REDUCE:
        return fail(V, "a tensor-level %s left in the loops", e->kind == TE_LOAD ? "load" : "reduction");
    case TE_BUF_LOAD:
        if (!live(V, e->buffer)) return fail(V, "load from '%s' outside its allocation", e->buffer->name);
        if (e->type.scalar != e->buffer->dtype || e->type.lanes != e->a->type.lanes)
            return fail(V, "load from '%s' of the wrong type", e->buffer->name);
        return expr_ok(V, e->a, env) && access_ok(V, e->buffer, e->a, env, "load from");
    case TE_SELECT: {
        if (!expr_ok(V, e->a, env)) return false;
        V->guarded++;
        bool ok = expr_ok(V, e->b, env) && expr_ok(V, e->c, env);
        V->guarded--;
        return ok;
    }
    default: break;
    }
    if (e->a && !expr_ok(V, e->a, env)) return false;
    if (e->b && !expr_ok(V, e->b, env)) return false;
    if (e->c && !expr_ok(V, e->c, env)) return false;
    return true;
}

static bool scalar_int(ver *V, const te_expr *e, const loop_range_env *env, const char *what) {
    if (!expr_ok(V, e, env)) return false;
    if (e->type.lanes != 1 || (!is_int(e->type) && e->type.scalar != TE_BOOL))
        return fail(V, "%s is not a scalar integer", what);
    return true;
}

static bool stmt_ok(ver *V, const loop_stmt *s, const loop_range_env *env, int depth) {
    if (!s) return fail(V, "a missing statement");
    if (depth > MAX_DEPTH) return fail(V, "statements nest deeper than %d", MAX_DEPTH);
    switch (s->kind) {
    case LOOP_FOR: {
        if (!scalar_int(V, s->min, env, "a loop's min") || !scalar_int(V, s->extent, env, "a loop's extent"))
            return false;
        if (bound(env, s->var))
            return fail(V, "variable %s_%d bound by a loop inside its own scope", s->var->name, s->var->id);
        loop_range_env in = loop_env_for(env, s);
        return stmt_ok(V, s->body, &in, depth + 1);
    }
    case LOOP_LET: {
        if (!expr_ok(V, s->value, env)) return false;
        if (bound(env, s->var))
            return fail(V, "variable %s_%d bound by a let inside its own scope", s->var->name, s->var->id);
        loop_range_env in = loop_env_let(env, s->var, s->value);
        return stmt_ok(V, s->body, &in, depth + 1);
    }
    case LOOP_IF: {
        if (!scalar_int(V, s->cond, env, "an if condition")) return false;
        V->guarded++;
        bool ok = stmt_ok(V, s->body, env, depth + 1) &&
                  (!s->else_body || stmt_ok(V, s->else_body, env, depth + 1));
        V->guarded--;
        return ok;
    }
    case LOOP_STORE:
        if (!live(V, s->buffer)) return fail(V, "store to '%s' outside its allocation", s->buffer->name);
        if (!expr_ok(V, s->index, env) || !expr_ok(V, s->value, env)) return false;
        if (s->value->type.scalar != s->buffer->dtype)
            return fail(V, "store to '%s' of a value of another type", s->buffer->name);
        if (s->index->type.lanes != s->value->type.lanes)
            return fail(V, "store to '%s' of %d lanes at %d indices", s->buffer->name,
                        s->value->type.lanes, s->index->type.lanes);
        return access_ok(V, s->buffer, s->index, env, "store to");
    case LOOP_ALLOC: {
        if (live(V, s->buffer)) return fail(V, "'%s' allocated inside its own allocation", s->buffer->name);
        if (V->nbufs == MAX_DEPTH) return fail(V, "allocations nest deeper than %d", MAX_DEPTH);
        V->bufs[V->nbufs++] = s->buffer;
        bool ok = stmt_ok(V, s->body, env, depth + 1);
        V->nbufs--;
        return ok;
    }
    case LOOP_BARRIER: return true;
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++)
            if (!stmt_ok(V, s->stmts[i], env, depth + 1)) return false;
        return true;
    }
    return fail(V, "a statement of unknown kind %d", (int)s->kind);
}

wpk_status loop_verify(wpk_context *ctx, const loop_func *f) {
    ver *V = wpk_calloc(1, sizeof *V);
    if (!V) return wpk_error(ctx, WPK_ERR_NOMEM, "loop verify: out of memory");
    V->ctx = ctx;
    if (f->nargs > MAX_DEPTH) {
        wpk_free(V);
        return wpk_error(ctx, WPK_ERR_INTERNAL, "loop verify: %d arguments", f->nargs);
    }
    for (int i = 0; i < f->nargs; i++) V->bufs[V->nbufs++] = f->args[i];
    stmt_ok(V, f->body, NULL, 0);
    wpk_status st = V->st;
    wpk_free(V);
    return st;
}
