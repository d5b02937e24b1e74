/* unroll.c -- loop unrolling: a LOOP_UNROLLED loop of constant min and extent becomes one copy
 * of its body per iteration with the variable replaced by its value (the simplifier that runs
 * after folds the copies). Loops too long to copy, or of unknown extent, stay loops. */
#include "loop/lower.h"
#include "loop/subst.h"

/* Copies beyond this would bloat the code more than unrolling can win back. */
#define UNROLL_MAX 512

static const loop_stmt *unroll(te_ctx *c, const loop_stmt *s) {
    if (!s) return NULL;
    switch (s->kind) {
    case LOOP_FOR: {
        const loop_stmt *body = unroll(c, s->body);
        int64_t min, ext;
        if (!body) return NULL;
        if (s->for_kind != LOOP_UNROLLED || !te_is_const_int(s->min, &min) ||
            !te_is_const_int(s->extent, &ext) || ext > UNROLL_MAX)
            return loop_for_like(c, s, s->min, s->extent, body);
        if (ext <= 0) return loop_nop(c);
        const loop_stmt **copies = arena_alloc(&c->mem, sizeof *copies * (size_t)ext);
        if (!copies) {
            c->oom = true;
            return NULL;
        }
        const te_iter *v = s->var;
        for (int64_t i = 0; i < ext; i++) {
            const te_expr *val = te_int_t(c, s->min->type, min + i);
            copies[i] = loop_subst_stmt(c, body, 1, &v, &val);
            if (!copies[i]) return NULL;
        }
        return loop_seq(c, (int)ext, copies);
    }
    case LOOP_LET: {
        const loop_stmt *body = unroll(c, s->body);
        return body == s->body ? s : loop_let(c, s->var, s->value, body);
    }
    case LOOP_IF: {
        const loop_stmt *t = unroll(c, s->body);
        const loop_stmt *f = s->else_body ? unroll(c, s->else_body) : NULL;
        if (!t || (s->else_body && !f)) return NULL;
        return t == s->body && f == s->else_body ? s : loop_if(c, s->cond, t, f);
    }
    case LOOP_ALLOC: {
        const loop_stmt *body = unroll(c, s->body);
        return body == s->body ? s : loop_alloc(c, s->buffer, body);
    }
    case LOOP_SEQ: {
        if (s->nstmts == 0) return s;
        const loop_stmt **v = arena_alloc(&c->mem, sizeof *v * (size_t)s->nstmts);
        if (!v) {
            c->oom = true;
            return NULL;
        }
        bool same = true;
        for (int i = 0; i < s->nstmts; i++) {
            if (!(v[i] = unroll(c, s->stmts[i]))) return NULL;
            same &= v[i] == s->stmts[i];
        }
        return same ? s : loop_seq(c, s->nstmts, v);
    }
    case LOOP_STORE: case LOOP_BARRIER: return s;
    }
    return s;
}

const loop_stmt *loop_unroll(te_ctx *c, const loop_stmt *s) { return unroll(c, s); }
