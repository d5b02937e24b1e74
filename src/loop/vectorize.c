/* vectorize.c -- a LOOP_VECTORIZED loop of constant extent L becomes its body run once on
 * L-lane vectors: the variable becomes ramp(min, 1, L), subexpressions that do not depend on it
 * stay scalar (broadcast where they meet vectors), loads and stores at vector indices become
 * vector accesses (dense when the index is ramp(base, 1, L), strided or gathered otherwise).
 * A body that cannot be vectorized without changing its meaning stays a serial loop: an inner
 * loop, an if or an allocation inside, a store at an index that does not move with the
 * variable, or an access pattern whose order matters (a buffer read at another index than the
 * one it is written at). Lane counts are powers of two up to 64 (what vector units have). */
#include "loop/lower.h"
#include "loop/subst.h"

#define MAX_LANES 64

typedef struct vz {
    te_ctx *c;
    const te_iter *var;
    const te_expr *ramp;
    int lanes;
    bool fail;
} vz;

static const te_expr *bcast(vz *V, const te_expr *e) {
    return e && e->type.lanes == 1 ? te_broadcast(V->c, e, V->lanes) : e;
}

static const te_expr *widen(vz *V, const te_expr *e);

static bool has_load(const te_expr *e) {
    if (!e) return false;
    if (e->kind == TE_BUF_LOAD || e->kind == TE_LOAD) return true;
    return has_load(e->a) || has_load(e->b) || has_load(e->c);
}

static const te_expr *widen_binary(vz *V, const te_expr *e) {
    te_ctx *c = V->c;
    const te_expr *a = widen(V, e->a), *b = widen(V, e->b);
    if (!a || !b) return NULL;
    if (a->type.lanes == 1 && b->type.lanes == 1) return loop_expr_rebuild(c, e, a, b, NULL);
    bool ints = e->a->type.scalar == TE_I64 || e->a->type.scalar == TE_I32;
    /* keep index arithmetic in ramp form: ramp(b, s) + x = ramp(b + x, s), ramp * k = ramp(b*k, s*k) */
    if (ints && (e->kind == TE_ADD || e->kind == TE_SUB)) {
        if (a->kind == TE_RAMP && b->type.lanes == 1)
            return te_ramp(c, te_binary(c, e->kind, a->a, b), a->b, V->lanes);
        if (e->kind == TE_ADD && b->kind == TE_RAMP && a->type.lanes == 1)
            return te_ramp(c, te_add(c, a, b->a), b->b, V->lanes);
        if (a->kind == TE_RAMP && b->kind == TE_RAMP)
            return te_ramp(c, te_binary(c, e->kind, a->a, b->a), te_binary(c, e->kind, a->b, b->b),
                           V->lanes);
    }
    if (ints && e->kind == TE_MUL) {
        if (a->kind == TE_RAMP && b->type.lanes == 1) return te_ramp(c, te_mul(c, a->a, b), te_mul(c, a->b, b), V->lanes);
        if (b->kind == TE_RAMP && a->type.lanes == 1) return te_ramp(c, te_mul(c, a, b->a), te_mul(c, a, b->b), V->lanes);
    }
    return te_binary(c, e->kind, bcast(V, a), bcast(V, b));
}

static const te_expr *widen(vz *V, const te_expr *e) {
    te_ctx *c = V->c;
    if (!e || V->fail) return NULL;
    if (e->type.lanes != 1) {
        V->fail = true; /* already a vector: a vectorized loop nested in another */
        return NULL;
    }
    if (!loop_expr_uses(e, V->var)) return e;
    switch (e->kind) {
    case TE_VAR: return V->ramp;
    case TE_NOT: return te_not(c, widen(V, e->a));
    case TE_SELECT: {
        const te_expr *cond = widen(V, e->a), *t = widen(V, e->b), *f = widen(V, e->c);
        if (!cond || !t || !f) return NULL;
        /* a per-lane condition evaluates both branches for every lane: a load the condition
         * guards (padding) would read out of bounds */
        if (cond->type.lanes > 1 && (has_load(e->b) || has_load(e->c))) {
            V->fail = true;
            return NULL;
        }
        /* a condition the same for every lane stays scalar: it picks one vector branch */
        return te_select(c, cond, bcast(V, t), bcast(V, f));
    }
    case TE_CAST: {
        const te_expr *a = widen(V, e->a);
        return a ? te_cast(c, (te_type){e->type.scalar, a->type.lanes}, a) : NULL;
    }
    case TE_CALL: {
        const te_expr *a = widen(V, e->a), *b = e->b ? widen(V, e->b) : NULL;
        if (!a || (e->b && !b)) return NULL;
        return te_call(c, e->fn, bcast(V, a), b ? bcast(V, b) : NULL);
    }
    case TE_BUF_LOAD: {
        const te_expr *idx = widen(V, e->a);
        return idx ? te_buf_load(c, e->buffer, (te_type){e->type.scalar, idx->type.lanes}, idx) : NULL;
    }
    case TE_LOAD: case TE_REDUCE: case TE_RAMP: case TE_BROADCAST:
        V->fail = true;
        return NULL;
    default: return widen_binary(V, e);
    }
}

static const loop_stmt *widen_stmt(vz *V, const loop_stmt *s) {
    te_ctx *c = V->c;
    if (!s || V->fail) return NULL;
    switch (s->kind) {
    case LOOP_STORE: {
        if (!loop_stmt_uses(s, V->var)) return s;
        const te_expr *idx = widen(V, s->index), *val = widen(V, s->value);
        int64_t stride;
        if (!idx || !val) return NULL;
        /* every lane must write its own element, in a pattern whose order does not matter */
        if (idx->kind != TE_RAMP || !te_is_const_int(idx->b, &stride) || stride == 0) {
            V->fail = true;
            return NULL;
        }
        return loop_store(c, s->buffer, idx, bcast(V, val));
    }
    case LOOP_LET: {
        if (loop_expr_uses(s->value, V->var)) {
            /* a per-lane value: fold it into its uses rather than make a vector variable */
            const te_iter *v = s->var;
            return widen_stmt(V, loop_subst_stmt(c, s->body, 1, &v, &s->value));
        }
        const loop_stmt *body = widen_stmt(V, s->body);
        return body ? loop_let(c, s->var, s->value, body) : NULL;
    }
    case LOOP_SEQ: {
        const loop_stmt **v = arena_alloc(&c->mem, sizeof *v * (size_t)(s->nstmts + 1));
        if (!v) {
            c->oom = true;
            return NULL;
        }
        for (int i = 0; i < s->nstmts; i++)
            if (!(v[i] = widen_stmt(V, s->stmts[i]))) return NULL;
        return loop_seq(c, s->nstmts, v);
    }
    default:
        V->fail = true;
        return NULL;
    }
}

/* ---- order safety: running lane by lane and statement by statement must agree ---- */

typedef struct access {
    const loop_buffer *buf;
    const te_expr *index;
} access;

typedef struct accesses {
    access v[64];
    int n;
    bool overflow;
} accesses;

static void collect_stores(const loop_stmt *s, accesses *st) {
    if (!s) return;
    if (s->kind == LOOP_STORE) {
        if (st->n == 64) st->overflow = true;
        else st->v[st->n++] = (access){s->buffer, s->index};
    } else if (s->kind == LOOP_LET) {
        collect_stores(s->body, st);
    } else if (s->kind == LOOP_SEQ) {
        for (int i = 0; i < s->nstmts; i++) collect_stores(s->stmts[i], st);
    }
}

/* A load of a buffer the body stores to must read exactly the elements this lane writes. */
static bool loads_ok(const te_expr *e, const accesses *st) {
    if (!e) return true;
    if (e->kind == TE_BUF_LOAD)
        for (int i = 0; i < st->n; i++)
            if (st->v[i].buf == e->buffer && !te_expr_equal(st->v[i].index, e->a)) return false;
    return loads_ok(e->a, st) && loads_ok(e->b, st) && loads_ok(e->c, st);
}

static bool stmt_loads_ok(const loop_stmt *s, const accesses *st) {
    switch (s->kind) {
    case LOOP_STORE: return loads_ok(s->index, st) && loads_ok(s->value, st);
    case LOOP_LET: return loads_ok(s->value, st) && stmt_loads_ok(s->body, st);
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++)
            if (!stmt_loads_ok(s->stmts[i], st)) return false;
        return true;
    default: return false;
    }
}

static bool order_safe(const loop_stmt *s) {
    accesses st = {.n = 0};
    collect_stores(s, &st);
    if (st.overflow) return false;
    for (int i = 0; i < st.n; i++)
        for (int j = 0; j < i; j++)
            if (st.v[i].buf == st.v[j].buf && !te_expr_equal(st.v[i].index, st.v[j].index)) return false;
    return stmt_loads_ok(s, &st);
}

static bool pow2_lanes(int64_t n) { return n >= 2 && n <= MAX_LANES && (n & (n - 1)) == 0; }

static const loop_stmt *vec(te_ctx *c, const loop_stmt *s) {
    if (!s) return NULL;
    switch (s->kind) {
    case LOOP_FOR: {
        const loop_stmt *body = vec(c, s->body);
        int64_t ext;
        if (!body) return NULL;
        if (s->for_kind != LOOP_VECTORIZED) return loop_for_like(c, s, s->min, s->extent, body);
        if (te_is_const_int(s->extent, &ext) && pow2_lanes(ext) && s->min->type.lanes == 1) {
            vz V = {c, s->var, te_ramp(c, s->min, te_int_t(c, s->min->type, 1), (int)ext), (int)ext, false};
            const loop_stmt *w = V.ramp ? widen_stmt(&V, body) : NULL;
            if (w && order_safe(w)) return w;
            if (c->oom) return NULL;
        }
        /* not vectorizable: a plain loop (never wrong code) */
        return loop_for(c, s->var, s->min, s->extent, LOOP_SERIAL, body);
    }
    case LOOP_LET: {
        const loop_stmt *body = vec(c, s->body);
        return body == s->body ? s : loop_let(c, s->var, s->value, body);
    }
    case LOOP_IF: {
        const loop_stmt *t = vec(c, s->body);
        const loop_stmt *f = s->else_body ? vec(c, s->else_body) : NULL;
        if (!t || (s->else_body && !f)) return NULL;
        return t == s->body && f == s->else_body ? s : loop_if(c, s->cond, t, f);
    }
    case LOOP_ALLOC: {
        const loop_stmt *body = vec(c, s->body);
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
            if (!(v[i] = vec(c, s->stmts[i]))) return NULL;
            same &= v[i] == s->stmts[i];
        }
        return same ? s : loop_seq(c, s->nstmts, v);
    }
    case LOOP_STORE: case LOOP_BARRIER: return s;
    }
    return s;
}

const loop_stmt *loop_vectorize(te_ctx *c, const loop_stmt *s) { return vec(c, s); }
