/* loop.c -- loop IR constructors. The printer is in print.c. */
#include "loop/loop.h"

#include <assert.h>
#include <string.h>

static loop_stmt *stmt(te_ctx *c, loop_stmt_kind k) {
    if (c->oom) return NULL;
    loop_stmt *s = arena_alloc(&c->mem, sizeof *s);
    if (!s) {
        c->oom = true;
        wpk_error(c->err, WPK_ERR_NOMEM, "out of memory building loops");
        return NULL;
    }
    s->kind = k;
    return s;
}

loop_buffer *loop_buffer_new(te_ctx *c, const char *name, te_scalar dtype, int ndim,
                             const int64_t *shape, loop_scope scope) {
    if (c->oom) return NULL;
    assert(ndim >= 0 && ndim <= LOOP_MAX_DIMS);
    loop_buffer *b = arena_alloc(&c->mem, sizeof *b);
    const char *copy = arena_strdup(&c->mem, name);
    if (!b || !copy) {
        c->oom = true;
        wpk_error(c->err, WPK_ERR_NOMEM, "out of memory building loops");
        return NULL;
    }
    b->name = copy;
    b->dtype = dtype;
    b->ndim = ndim;
    b->size = 1;
    for (int i = 0; i < ndim; i++) {
        b->shape[i] = shape[i];
        b->size *= shape[i];
    }
    b->scope = scope;
    b->align = scope == LOOP_SCOPE_ARG ? 64 : 64;
    b->id = c->next_id++;
    return b;
}

const te_expr *loop_load(te_ctx *c, const loop_buffer *b, const te_expr *index) {
    if (!index) return NULL;
    return te_buf_load(c, b, (te_type){b->dtype, index->type.lanes}, index);
}

const loop_stmt *loop_for(te_ctx *c, const te_iter *var, const te_expr *min, const te_expr *extent,
                          loop_for_kind kind, const loop_stmt *body) {
    if (!var || !min || !extent || !body) return NULL;
    loop_stmt *s = stmt(c, LOOP_FOR);
    if (!s) return NULL;
    s->var = var;
    s->min = min;
    s->extent = extent;
    s->for_kind = kind;
    s->body = body;
    return s;
}

const loop_stmt *loop_let(te_ctx *c, const te_iter *var, const te_expr *value, const loop_stmt *body) {
    if (!var || !value || !body) return NULL;
    loop_stmt *s = stmt(c, LOOP_LET);
    if (!s) return NULL;
    s->var = var;
    s->value = value;
    s->body = body;
    return s;
}

const loop_stmt *loop_if(te_ctx *c, const te_expr *cond, const loop_stmt *then_s,
                         const loop_stmt *else_s) {
    if (!cond || !then_s) return NULL;
    loop_stmt *s = stmt(c, LOOP_IF);
    if (!s) return NULL;
    s->cond = cond;
    s->body = then_s;
    s->else_body = else_s;
    return s;
}

const loop_stmt *loop_store(te_ctx *c, const loop_buffer *b, const te_expr *index,
                            const te_expr *value) {
    if (!b || !index || !value) return NULL;
    assert(index->type.lanes == value->type.lanes);
    loop_stmt *s = stmt(c, LOOP_STORE);
    if (!s) return NULL;
    s->buffer = b;
    s->index = index;
    s->value = value;
    return s;
}

const loop_stmt *loop_alloc(te_ctx *c, const loop_buffer *b, const loop_stmt *body) {
    if (!b || !body) return NULL;
    loop_stmt *s = stmt(c, LOOP_ALLOC);
    if (!s) return NULL;
    s->buffer = b;
    s->body = body;
    return s;
}

const loop_stmt *loop_seq(te_ctx *c, int n, const loop_stmt *const *stmts) {
    for (int i = 0; i < n; i++)
        if (!stmts[i]) return NULL;
    if (n == 1) return stmts[0];
    loop_stmt *s = stmt(c, LOOP_SEQ);
    if (!s) return NULL;
    /* n == 0 is the empty statement: nothing to copy (stmts may be NULL) */
    s->stmts = n ? arena_memdup(&c->mem, stmts, sizeof(loop_stmt *) * (size_t)n)
                 : arena_alloc(&c->mem, sizeof(loop_stmt *));
    if (!s->stmts) {
        c->oom = true;
        return NULL;
    }
    s->nstmts = n;
    return s;
}

const loop_stmt *loop_barrier(te_ctx *c) { return stmt(c, LOOP_BARRIER); }

bool loop_is_barrier(const loop_stmt *s) { return s && s->kind == LOOP_BARRIER; }
