/* sync.c -- GPU barrier placement (see sync.h): one walk in print order that tracks which
 * shared buffers threads read and wrote since the last barrier. */
#include "loop/sync.h"

#include <string.h>

typedef struct sync_state {
    te_ctx *c;
    wpk_status st;
    const loop_buffer *shared[LOOP_SYNC_MAX_SHARED];
    int nshared;
    int thread_depth;        /* enclosing thread-bound loops */
    uint64_t pend_r, pend_w; /* shared buffers read / written since the last barrier */
} sync_state;

static bool is_thread_loop(const loop_stmt *s) {
    return s->kind == LOOP_FOR && s->for_kind == LOOP_BIND && s->bind_tag &&
           strncmp(s->bind_tag, "threadIdx.", 10) == 0;
}

static int shared_index(const sync_state *S, const loop_buffer *b) {
    for (int i = 0; i < S->nshared; i++)
        if (S->shared[i] == b) return i;
    return -1;
}

/* The shared buffers in allocation order: the order of the bits below. */
static void collect_shared(sync_state *S, const loop_stmt *s) {
    if (!s || S->st != WPK_OK) return;
    switch (s->kind) {
    case LOOP_ALLOC:
        if (s->buffer->scope == LOOP_SCOPE_SHARED && shared_index(S, s->buffer) < 0) {
            if (S->nshared == LOOP_SYNC_MAX_SHARED) {
                S->st = wpk_error(S->c->err, WPK_ERR_UNSUPPORTED, "more than %d shared buffers",
                                  LOOP_SYNC_MAX_SHARED);
                return;
            }
            S->shared[S->nshared++] = s->buffer;
        }
        collect_shared(S, s->body);
        return;
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++) collect_shared(S, s->stmts[i]);
        return;
    case LOOP_IF: collect_shared(S, s->else_body); /* fall through */
    default: collect_shared(S, s->body); return;
    }
}

/* ---- effects on shared memory ---- */

static void effects_expr(const sync_state *S, const te_expr *e, uint64_t *r) {
    if (!e) return;
    if (e->kind == TE_BUF_LOAD && e->buffer && e->buffer->scope == LOOP_SCOPE_SHARED) {
        int i = shared_index(S, e->buffer);
        if (i >= 0) *r |= (uint64_t)1 << i;
    }
    effects_expr(S, e->a, r);
    effects_expr(S, e->b, r);
    effects_expr(S, e->c, r);
}

static void effects(const sync_state *S, const loop_stmt *s, uint64_t *r, uint64_t *w) {
    if (!s) return;
    switch (s->kind) {
    case LOOP_FOR:
        effects_expr(S, s->min, r);
        effects_expr(S, s->extent, r);
        effects(S, s->body, r, w);
        return;
    case LOOP_LET: effects_expr(S, s->value, r); effects(S, s->body, r, w); return;
    case LOOP_IF:
        effects_expr(S, s->cond, r);
        effects(S, s->body, r, w);
        effects(S, s->else_body, r, w);
        return;
    case LOOP_STORE: {
        effects_expr(S, s->index, r);
        effects_expr(S, s->value, r);
        int i = s->buffer && s->buffer->scope == LOOP_SCOPE_SHARED ? shared_index(S, s->buffer) : -1;
        if (i >= 0) *w |= (uint64_t)1 << i;
        return;
    }
    case LOOP_ALLOC: effects(S, s->body, r, w); return;
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++) effects(S, s->stmts[i], r, w);
        return;
    case LOOP_BARRIER: return;
    }
}

/* ---- where barriers go; each returns how many go in front of the statement ---- */

static int barrier(sync_state *S) {
    S->pend_r = S->pend_w = 0;
    return 1;
}

/* An expression every thread evaluates at block level (a let's value, a condition, a bound):
 * a read of shared memory like a group's. */
static int block_read(sync_state *S, const te_expr *e) {
    if (S->thread_depth) return 0;
    uint64_t r = 0;
    effects_expr(S, e, &r);
    int n = (r & S->pend_w) ? barrier(S) : 0;
    S->pend_r |= r;
    return n;
}

/* A group of statements every thread runs at block level: a thread-bound nest or a store. */
static int group(sync_state *S, const loop_stmt *s) {
    uint64_t r = 0, w = 0;
    effects(S, s, &r, &w);
    int n = ((r & S->pend_w) || (w & S->pend_r)) ? barrier(S) : 0;
    if (w & r) {
        int i = 0;
        while (!((w & r) >> i & 1)) i++;
        S->st = wpk_error(S->c->err, WPK_ERR_UNSUPPORTED,
                          "shared buffer '%s' is both written and read inside one thread-bound "
                          "loop nest: its threads would need a barrier inside divergent code; "
                          "compute it at a loop outside the thread loops", S->shared[i]->name);
    }
    S->pend_r |= r;
    S->pend_w |= w;
    return n;
}

/* ---- rebuilding ---- */

static void oom(sync_state *S) {
    if (S->st == WPK_OK) S->st = wpk_error(S->c->err, WPK_ERR_NOMEM, "barriers: out of memory");
}

/* s with new bodies (s itself when they are its own). */
static const loop_stmt *rebody(sync_state *S, const loop_stmt *s, const loop_stmt *body,
                               const loop_stmt *else_body) {
    if (!body || S->st != WPK_OK) return NULL;
    if (body == s->body && else_body == s->else_body) return s;
    loop_stmt *n = arena_memdup(&S->c->mem, s, sizeof *s);
    if (!n) {
        oom(S);
        return NULL;
    }
    n->body = body;
    n->else_body = else_body;
    return n;
}

/* nbar barriers, then s. */
static const loop_stmt *after_barriers(sync_state *S, int nbar, const loop_stmt *s) {
    if (!s || nbar == 0) return s;
    const loop_stmt *v[4];
    for (int i = 0; i < nbar; i++) v[i] = loop_barrier(S->c);
    v[nbar] = s;
    const loop_stmt *seq = loop_seq(S->c, nbar + 1, v);
    if (!seq) oom(S);
    return seq;
}

static const loop_stmt *walk(sync_state *S, const loop_stmt *s);

static const loop_stmt *walk_for(sync_state *S, const loop_stmt *s) {
    if (s->for_kind == LOOP_BIND) {
        bool thread = is_thread_loop(s);
        int nbar = thread && S->thread_depth == 0 ? group(S, s) : 0;
        if (S->st != WPK_OK) return NULL;
        S->thread_depth += thread;
        const loop_stmt *body = walk(S, s->body);
        S->thread_depth -= thread;
        return after_barriers(S, nbar, rebody(S, s, body, NULL));
    }
    int nbar = block_read(S, s->min);
    nbar += block_read(S, s->extent);
    uint64_t br = 0, bw = 0;
    if (S->thread_depth == 0) {
        /* a buffer the body both reads and writes is pending at the start of each iteration
         * (the previous one's accesses) */
        effects(S, s->body, &br, &bw);
        if ((br & S->pend_w) || (bw & S->pend_r)) nbar += barrier(S);
        S->pend_r |= br & bw;
        S->pend_w |= br & bw;
    }
    const loop_stmt *body = walk(S, s->body);
    S->pend_r |= br;
    S->pend_w |= bw;
    return after_barriers(S, nbar, rebody(S, s, body, NULL));
}

static const loop_stmt *walk_if(sync_state *S, const loop_stmt *s) {
    int nbar = block_read(S, s->cond);
    /* what either branch did is pending after it */
    uint64_t r0 = S->pend_r, w0 = S->pend_w;
    const loop_stmt *then_s = walk(S, s->body);
    uint64_t r1 = S->pend_r, w1 = S->pend_w;
    const loop_stmt *else_s = NULL;
    if (s->else_body) {
        S->pend_r = r0, S->pend_w = w0;
        else_s = walk(S, s->else_body);
        if (!else_s) return NULL;
    }
    S->pend_r |= r1 | r0;
    S->pend_w |= w1 | w0;
    return after_barriers(S, nbar, rebody(S, s, then_s, else_s));
}

static const loop_stmt *walk_seq(sync_state *S, const loop_stmt *s) {
    if (s->nstmts == 0) return s;
    const loop_stmt **v = arena_alloc(&S->c->mem, sizeof *v * (size_t)s->nstmts);
    if (!v) {
        oom(S);
        return NULL;
    }
    bool same = true;
    for (int i = 0; i < s->nstmts; i++) {
        v[i] = walk(S, s->stmts[i]);
        if (!v[i]) return NULL;
        same &= v[i] == s->stmts[i];
    }
    if (same) return s;
    loop_stmt *n = arena_memdup(&S->c->mem, s, sizeof *s);
    if (!n) {
        oom(S);
        return NULL;
    }
    n->stmts = v;
    return n;
}

static const loop_stmt *walk(sync_state *S, const loop_stmt *s) {
    if (!s || S->st != WPK_OK) return NULL;
    switch (s->kind) {
    case LOOP_FOR: return walk_for(S, s);
    case LOOP_LET: {
        int nbar = block_read(S, s->value);
        return after_barriers(S, nbar, rebody(S, s, walk(S, s->body), NULL));
    }
    case LOOP_IF: return walk_if(S, s);
    case LOOP_STORE: {
        int nbar = S->thread_depth == 0 ? group(S, s) : 0;
        return S->st == WPK_OK ? after_barriers(S, nbar, s) : NULL;
    }
    case LOOP_ALLOC: return rebody(S, s, walk(S, s->body), NULL);
    case LOOP_SEQ: return walk_seq(S, s);
    case LOOP_BARRIER: /* one placed before: what was pending is ordered by it */
        barrier(S);
        return s;
    }
    return s;
}

wpk_status loop_place_barriers(te_ctx *c, const loop_stmt *s, const loop_stmt **out) {
    sync_state S = {.c = c};
    *out = NULL;
    collect_shared(&S, s);
    if (S.st != WPK_OK) return S.st;
    const loop_stmt *r = walk(&S, s);
    if (S.st == WPK_OK && !r) S.st = wpk_error(c->err, WPK_ERR_NOMEM, "barriers: out of memory");
    if (S.st == WPK_OK) *out = r;
    return S.st;
}
