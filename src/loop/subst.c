/* subst.c -- rebuilding expressions and statements with variables replaced (simultaneously),
 * and the small structural queries the loop passes share. */
#include "loop/subst.h"

#include <assert.h>

const te_expr *loop_expr_rebuild(te_ctx *c, const te_expr *e, const te_expr *a, const te_expr *b,
                                 const te_expr *cc) {
    if ((e->a && !a) || (e->b && !b) || (e->c && !cc)) return NULL;
    if (a == e->a && b == e->b && cc == e->c) return e;
    switch (e->kind) {
    case TE_INT: case TE_FLOAT: case TE_VAR: return e;
    case TE_NOT: return te_not(c, a);
    case TE_SELECT: return te_select(c, a, b, cc);
    case TE_CAST: return te_cast(c, (te_type){e->type.scalar, a->type.lanes}, a);
    case TE_CALL: return te_call(c, e->fn, a, b);
    case TE_BUF_LOAD: return te_buf_load(c, e->buffer, (te_type){e->type.scalar, a->type.lanes}, a);
    case TE_RAMP: return te_ramp(c, a, b, e->type.lanes);
    case TE_BROADCAST: return te_broadcast(c, a, e->type.lanes);
    case TE_LOAD: case TE_REDUCE:
        assert(!"loop_expr_rebuild: list-operand node");
        return NULL;
    default: return te_binary(c, e->kind, a, b);
    }
}

static const te_expr *lookup(const te_iter *v, int n, const te_iter *const *vars,
                             const te_expr *const *values) {
    for (int i = 0; i < n; i++)
        if (vars[i] == v) return values[i];
    return NULL;
}

const te_expr *loop_subst_expr(te_ctx *c, const te_expr *e, int n, const te_iter *const *vars,
                               const te_expr *const *values) {
    if (!e || n == 0) return e;
    switch (e->kind) {
    case TE_INT: case TE_FLOAT: return e;
    case TE_VAR: {
        const te_expr *v = lookup(e->var, n, vars, values);
        return v ? v : e;
    }
    case TE_LOAD: {
        const te_expr **idx = arena_alloc(&c->mem, sizeof *idx * (size_t)(e->nindex + 1));
        if (!idx) {
            c->oom = true;
            return NULL;
        }
        bool same = true;
        for (int i = 0; i < e->nindex; i++) {
            idx[i] = loop_subst_expr(c, e->index[i], n, vars, values);
            if (!idx[i]) return NULL;
            same &= idx[i] == e->index[i];
        }
        return same ? e : te_load(c, e->tensor, e->nindex, idx);
    }
    case TE_REDUCE: {
        const te_expr *body = loop_subst_expr(c, e->a, n, vars, values);
        if (!body) return NULL;
        return body == e->a ? e : te_reduce(c, e->rop, body, e->nraxes, e->raxes);
    }
    default: break;
    }
    const te_expr *a = loop_subst_expr(c, e->a, n, vars, values);
    const te_expr *b = loop_subst_expr(c, e->b, n, vars, values);
    const te_expr *cc = loop_subst_expr(c, e->c, n, vars, values);
    return loop_expr_rebuild(c, e, a, b, cc);
}

const loop_stmt *loop_subst_stmt(te_ctx *c, const loop_stmt *s, int n, const te_iter *const *vars,
                                 const te_expr *const *values) {
    if (!s || n == 0) return s;
    switch (s->kind) {
    case LOOP_FOR:
        return loop_for_like(c, s, loop_subst_expr(c, s->min, n, vars, values),
                             loop_subst_expr(c, s->extent, n, vars, values),
                             loop_subst_stmt(c, s->body, n, vars, values));
    case LOOP_LET:
        return loop_let(c, s->var, loop_subst_expr(c, s->value, n, vars, values),
                        loop_subst_stmt(c, s->body, n, vars, values));
    case LOOP_IF: {
        const loop_stmt *e = NULL;
        if (s->else_body && !(e = loop_subst_stmt(c, s->else_body, n, vars, values))) return NULL;
        return loop_if(c, loop_subst_expr(c, s->cond, n, vars, values),
                       loop_subst_stmt(c, s->body, n, vars, values), e);
    }
    case LOOP_STORE:
        return loop_store(c, s->buffer, loop_subst_expr(c, s->index, n, vars, values),
                          loop_subst_expr(c, s->value, n, vars, values));
    case LOOP_ALLOC: return loop_alloc(c, s->buffer, loop_subst_stmt(c, s->body, n, vars, values));
    case LOOP_SEQ: {
        if (s->nstmts == 0) return s;
        const loop_stmt **v = arena_alloc(&c->mem, sizeof *v * (size_t)s->nstmts);
        if (!v) {
            c->oom = true;
            return NULL;
        }
        for (int i = 0; i < s->nstmts; i++) v[i] = loop_subst_stmt(c, s->stmts[i], n, vars, values);
        return loop_seq(c, s->nstmts, v);
    }
    case LOOP_BARRIER: return s;
    }
    return NULL;
}

bool loop_expr_uses(const te_expr *e, const te_iter *var) {
    if (!e) return false;
    if (e->kind == TE_VAR) return e->var == var;
    if (e->kind == TE_LOAD)
        for (int i = 0; i < e->nindex; i++)
            if (loop_expr_uses(e->index[i], var)) return true;
    return loop_expr_uses(e->a, var) || loop_expr_uses(e->b, var) || loop_expr_uses(e->c, var);
}

bool loop_stmt_uses(const loop_stmt *s, const te_iter *var) {
    if (!s) return false;
    switch (s->kind) {
    case LOOP_FOR:
        return loop_expr_uses(s->min, var) || loop_expr_uses(s->extent, var) ||
               loop_stmt_uses(s->body, var);
    case LOOP_LET: return loop_expr_uses(s->value, var) || loop_stmt_uses(s->body, var);
    case LOOP_IF:
        return loop_expr_uses(s->cond, var) || loop_stmt_uses(s->body, var) ||
               loop_stmt_uses(s->else_body, var);
    case LOOP_STORE: return loop_expr_uses(s->index, var) || loop_expr_uses(s->value, var);
    case LOOP_ALLOC: return loop_stmt_uses(s->body, var);
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++)
            if (loop_stmt_uses(s->stmts[i], var)) return true;
        return false;
    case LOOP_BARRIER: return false;
    }
    return false;
}

const loop_stmt *loop_for_like(te_ctx *c, const loop_stmt *f, const te_expr *min,
                               const te_expr *extent, const loop_stmt *body) {
    if (min == f->min && extent == f->extent && body == f->body) return f;
    const loop_stmt *n = loop_for(c, f->var, min, extent, f->for_kind, body);
    /* the constructor has no tag parameter; the new node is ours until returned */
    if (n) ((loop_stmt *)n)->bind_tag = f->bind_tag;
    return n;
}

const loop_stmt *loop_nop(te_ctx *c) { return loop_seq(c, 0, NULL); }

bool loop_is_nop(const loop_stmt *s) { return s && s->kind == LOOP_SEQ && s->nstmts == 0; }
