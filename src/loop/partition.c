/* partition.c -- loop partitioning: a loop whose body tests conditions linear in the loop's
 * variable (the guards of splits that do not divide, the bounds tests of padding) is cut into
 * a prologue, a main part where every such condition provably holds, and an epilogue. The
 * simplifier then removes the conditions from the main part, so the hot loop has no branch.
 * Only the main part is partitioned further (tails stay compact, not multiplied per level). */
#include "loop/bounds.h"
#include "loop/subst.h"

typedef struct cut {
    const te_iter *var;
    int64_t lo, hi;      /* the main range so far: conditions seen hold for var in [lo, hi] */
    bool any;            /* some condition narrowed the range */
    te_ctx *c;
} cut;

/* For `d < 0` with d = coef * var + rest, rest in [rlo, rhi] wherever the test runs: the
 * values of var for which it holds however rest varies. */
static void narrow(cut *K, int64_t coef, int64_t rhi) {
    int64_t lo = K->lo, hi = K->hi;
    if (coef > 0) {
        /* coef * x + rhi < 0  <=>  x <= floor((-rhi - 1) / coef) */
        int64_t t;
        if (__builtin_sub_overflow(-1, rhi, &t)) return;
        int64_t h = loop_floor_div(t, coef);
        if (h < hi) hi = h;
    } else {
        /* -c * x + rhi < 0  <=>  x >= floor(rhi / c) + 1 */
        int64_t l = loop_floor_div(rhi, -coef) + 1;
        if (l > lo) lo = l;
    }
    /* a condition false everywhere in the range is no help in finding the branch-free part */
    if (lo > hi) return;
    K->any |= lo != K->lo || hi != K->hi;
    K->lo = lo;
    K->hi = hi;
}

static void atom(cut *K, const te_expr *e, const loop_range_env *env) {
    te_ctx *c = K->c;
    if (e->kind == TE_AND) {
        atom(K, e->a, env);
        atom(K, e->b, env);
        return;
    }
    if ((e->kind != TE_LT && e->kind != TE_LE) || e->a->type.lanes != 1 ||
        (e->a->type.scalar != TE_I64 && e->a->type.scalar != TE_I32))
        return;
    if (!loop_expr_uses(e, K->var)) return;
    /* d = a - b (+1 for <=, so the test is d < 0), split into coef * var + rest */
    const te_expr *d = te_sub(c, e->a, e->b);
    if (e->kind == TE_LE) d = te_sub(c, d, te_int_t(c, d ? d->type : te_t(TE_I64), 1));
    d = loop_simplify_expr_in(c, d, NULL);
    if (!d) return;
    const te_expr *zero = te_int_t(c, d->type, 0), *one = te_int_t(c, d->type, 1);
    const te_expr *d0 = loop_simplify_expr_in(c, loop_subst_expr(c, d, 1, &K->var, &zero), NULL);
    const te_expr *d1 = loop_simplify_expr_in(c, loop_subst_expr(c, d, 1, &K->var, &one), NULL);
    int64_t coef, rlo, rhi;
    if (!d0 || !d1 || !te_is_const_int(loop_simplify_expr_in(c, te_sub(c, d1, d0), NULL), &coef) ||
        coef == 0)
        return;
    /* linear in var: d - coef * var must not mention var any more */
    const te_expr *rest = loop_simplify_expr_in(
        c, te_sub(c, d, te_mul(c, te_var(c, K->var), te_int_t(c, d->type, coef))), NULL);
    if (!rest || loop_expr_uses(rest, K->var) || !loop_bounds(rest, env, &rlo, &rhi)) return;
    narrow(K, coef, rhi);
}

static void scan_expr(cut *K, const te_expr *e, const loop_range_env *env) {
    if (!e) return;
    if (e->kind == TE_SELECT) atom(K, e->a, env);
    scan_expr(K, e->a, env);
    scan_expr(K, e->b, env);
    scan_expr(K, e->c, env);
}

static void scan(cut *K, const loop_stmt *s, const loop_range_env *env) {
    if (!s) return;
    switch (s->kind) {
    case LOOP_FOR: {
        loop_range_env in = loop_env_for(env, s);
        scan(K, s->body, &in);
        return;
    }
    case LOOP_LET: {
        scan_expr(K, s->value, env);
        loop_range_env in = loop_env_let(env, s->var, s->value);
        scan(K, s->body, &in);
        return;
    }
    case LOOP_IF:
        atom(K, s->cond, env);
        scan_expr(K, s->cond, env);
        scan(K, s->body, env);
        scan(K, s->else_body, env);
        return;
    case LOOP_STORE:
        scan_expr(K, s->index, env);
        scan_expr(K, s->value, env);
        return;
    case LOOP_ALLOC: scan(K, s->body, env); return;
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++) scan(K, s->stmts[i], env);
        return;
    case LOOP_BARRIER: return;
    }
}

static const loop_stmt *part(te_ctx *c, const loop_stmt *s, const loop_range_env *env);

/* The loop f over [lo, hi], simplified there. A single iteration is no loop any more: its
 * body is partitioned too (the last tile of a split that does not divide), which costs no
 * copies; longer edge pieces keep their tests. */
static const loop_stmt *piece(te_ctx *c, const loop_stmt *f, int64_t lo, int64_t hi,
                              const loop_range_env *env) {
    const te_type t = f->min->type;
    const loop_stmt *p = loop_for_like(c, f, te_int_t(c, t, lo), te_int_t(c, t, hi - lo + 1), f->body);
    p = p ? loop_simplify_in(c, p, env) : NULL;
    if (p && lo == hi) p = part(c, p, env);
    return p;
}

/* Piece p's body for the iterations it covers: p itself when simplification took out the loop
 * of a single iteration. */
static const loop_stmt *piece_body(const loop_stmt *p, const te_iter *var) {
    return p->kind == LOOP_FOR && p->var == var ? p->body : p;
}

/* A parallel loop's pieces as one parallel loop over all its iterations, each running its
 * piece's body (if var < lo: the prologue's, else if var <= hi: the main part's, else the
 * epilogue's): as a sequence of loops the edge pieces would run on one thread, outside the
 * parallel region, while the others wait (the first and last of 14 rows of a Winograd conv's
 * whole blocks: a seventh of the work on one thread). */
static const loop_stmt *dispatch(te_ctx *c, const loop_stmt *s, const loop_stmt *pre,
                                 const loop_stmt *main, const loop_stmt *post, int64_t lo,
                                 int64_t hi) {
    const te_type t = s->min->type;
    const te_expr *var = te_var(c, s->var);
    if (var && t.scalar != TE_I64) var = te_cast(c, t, var);
    const loop_stmt *body = piece_body(main, s->var);
    if (post) body = loop_if(c, te_cmp(c, TE_LE, var, te_int_t(c, t, hi)), body,
                             piece_body(post, s->var));
    if (pre && body)
        body = loop_if(c, te_cmp(c, TE_LT, var, te_int_t(c, t, lo)), piece_body(pre, s->var),
                       body);
    return body ? loop_for_like(c, s, s->min, s->extent, body) : NULL;
}

static const loop_stmt *part_for(te_ctx *c, const loop_stmt *s, const loop_range_env *env) {
    int64_t min, ext;
    if (te_is_const_int(s->min, &min) && te_is_const_int(s->extent, &ext) && ext > 1) {
        cut K = {s->var, min, min + ext - 1, false, c};
        loop_range_env in = loop_env_for(env, s);
        scan(&K, s->body, &in);
        if (K.any) {
            const loop_stmt *v[3], *pre = NULL, *post = NULL;
            int n = 0;
            if (K.lo > min && !(v[n++] = pre = piece(c, s, min, K.lo - 1, env))) return NULL;
            const loop_stmt *main = piece(c, s, K.lo, K.hi, env);
            if (!main) return NULL;
            /* the main part's own conditions are gone: partition inside it */
            if (K.lo == K.hi) {
                /* piece() partitioned it already */
            } else if (main->kind == LOOP_FOR && main->var == s->var) {
                loop_range_env mi = loop_env_for(env, main);
                const loop_stmt *body = part(c, main->body, &mi);
                main = body ? loop_for_like(c, main, main->min, main->extent, body) : NULL;
            } else {
                main = part(c, main, env);
            }
            if (!(v[n++] = main)) return NULL;
            if (K.hi < min + ext - 1 &&
                !(v[n++] = post = piece(c, s, K.hi + 1, min + ext - 1, env)))
                return NULL;
            if (s->for_kind == LOOP_PARALLEL && n > 1)
                return dispatch(c, s, pre, main, post, K.lo, K.hi);
            return loop_seq(c, n, v);
        }
    }
    loop_range_env in = loop_env_for(env, s);
    const loop_stmt *body = part(c, s->body, &in);
    return body ? loop_for_like(c, s, s->min, s->extent, body) : NULL;
}

static const loop_stmt *part(te_ctx *c, const loop_stmt *s, const loop_range_env *env) {
    if (!s) return NULL;
    switch (s->kind) {
    case LOOP_FOR: return part_for(c, s, env);
    case LOOP_LET: {
        loop_range_env in = loop_env_let(env, s->var, s->value);
        const loop_stmt *body = part(c, s->body, &in);
        return body == s->body ? s : loop_let(c, s->var, s->value, body);
    }
    case LOOP_IF: {
        const loop_stmt *t = part(c, s->body, env);
        const loop_stmt *f = s->else_body ? part(c, s->else_body, env) : NULL;
        if (!t || (s->else_body && !f)) return NULL;
        return t == s->body && f == s->else_body ? s : loop_if(c, s->cond, t, f);
    }
    case LOOP_ALLOC: {
        const loop_stmt *body = part(c, s->body, env);
        return body == s->body ? s : loop_alloc(c, s->buffer, body);
    }
    case LOOP_SEQ: {
        if (s->nstmts == 0) return s;
        const loop_stmt **v = arena_alloc(&c->mem, sizeof *v * (size_t)s->nstmts);
        if (!v) {
            c->oom = true;
            return NULL;
        }
        for (int i = 0; i < s->nstmts; i++)
            if (!(v[i] = part(c, s->stmts[i], env))) return NULL;
        return loop_seq(c, s->nstmts, v);
    }
    case LOOP_STORE: case LOOP_BARRIER: return s;
    }
    return s;
}

const loop_stmt *loop_partition(te_ctx *c, const loop_stmt *s) { return part(c, s, NULL); }
