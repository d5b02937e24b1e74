/* facts.c -- what can be proven about loop IR before code that relies on it is written (see
 * facts.h). */
#include "loop/facts.h"

#include <stdint.h>

/* ---- index expressions ---- */

static bool var_nonneg(const loop_fact_scope *sc, const te_iter *it) {
    const loop_var_fact *f = sc->lookup(sc->self, it);
    return f && f->nonneg;
}

bool loop_nonneg(const loop_fact_scope *sc, const te_expr *e) {
    int64_t v;
    switch (e->kind) {
    case TE_INT: return e->i >= 0;
    case TE_VAR: return var_nonneg(sc, e->var);
    case TE_ADD: case TE_MUL: case TE_MIN: return loop_nonneg(sc, e->a) && loop_nonneg(sc, e->b);
    case TE_MAX: return loop_nonneg(sc, e->a) || loop_nonneg(sc, e->b);
    case TE_DIV: return loop_nonneg(sc, e->a) && te_is_const_int(e->b, &v) && v > 0;
    case TE_MOD: return te_is_const_int(e->b, &v) && v > 0; /* floor mod takes the divisor's sign */
    case TE_SELECT: return loop_nonneg(sc, e->b) && loop_nonneg(sc, e->c);
    case TE_RAMP: return loop_nonneg(sc, e->a) && loop_nonneg(sc, e->b);
    case TE_BROADCAST: return loop_nonneg(sc, e->a);
    case TE_CAST: return e->a->type.scalar != TE_F32 && loop_nonneg(sc, e->a);
    default: return false;
    }
}

int64_t loop_gcd(int64_t a, int64_t b) {
    if (a < 0) a = -a;
    if (b < 0) b = -b;
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

int64_t loop_multiple(const loop_fact_scope *sc, const te_expr *e) {
    switch (e->kind) {
    case TE_INT: return e->i < 0 ? -e->i : e->i;
    case TE_VAR: {
        const loop_var_fact *f = sc->lookup(sc->self, e->var);
        return f ? f->mult : 1;
    }
    case TE_ADD: case TE_SUB: return loop_gcd(loop_multiple(sc, e->a), loop_multiple(sc, e->b));
    case TE_MUL: {
        int64_t x = loop_multiple(sc, e->a), y = loop_multiple(sc, e->b);
        if (x == 0 || y == 0) return 0;
        if (x > INT32_MAX || y > INT32_MAX) return 1; /* no overflow; small facts suffice */
        return x * y;
    }
    default: return 1;
    }
}

/* ---- omp simd: independent iterations ---- */

/* Does e mention var, directly or through a let bound inside the loop (listed in lets)? */
static bool mentions(const te_expr *e, const te_iter *var) {
    if (!e) return false;
    if (e->kind == TE_VAR) return e->var == var;
    return mentions(e->a, var) || mentions(e->b, var) || mentions(e->c, var);
}

/* e == coef * var + (terms free of var)? */
static bool linear_in(const te_expr *e, const te_iter *var, int64_t *coef) {
    int64_t k, ca, cb;
    switch (e->kind) {
    case TE_VAR: *coef = e->var == var; return true;
    case TE_ADD: case TE_SUB:
        if (!linear_in(e->a, var, &ca) || !linear_in(e->b, var, &cb)) return false;
        *coef = e->kind == TE_ADD ? ca + cb : ca - cb;
        return true;
    case TE_MUL:
        if (te_is_const_int(e->b, &k) && linear_in(e->a, var, &ca)) {
            *coef = ca * k;
            return true;
        }
        if (te_is_const_int(e->a, &k) && linear_in(e->b, var, &ca)) {
            *coef = ca * k;
            return true;
        }
        break;
    default: break;
    }
    *coef = 0;
    return !mentions(e, var);
}

typedef struct simd_scan {
    const te_iter *var;
    const loop_stmt *stores[16];
    int nstores;
    bool ok;
} simd_scan;

static void scan_loads(simd_scan *sc, const te_expr *e) {
    if (!e || !sc->ok) return;
    if (e->kind == TE_BUF_LOAD)
        for (int i = 0; i < sc->nstores; i++)
            if (sc->stores[i]->buffer == e->buffer && !te_expr_equal(sc->stores[i]->index, e->a))
                sc->ok = false;
    scan_loads(sc, e->a);
    scan_loads(sc, e->b);
    scan_loads(sc, e->c);
}

static void scan_stores(simd_scan *sc, const loop_stmt *s) {
    if (!s || !sc->ok) return;
    switch (s->kind) {
    case LOOP_STORE: {
        int64_t coef;
        if (s->index->type.lanes != 1 || !linear_in(s->index, sc->var, &coef) || coef != 1 ||
            sc->nstores == 16) {
            sc->ok = false;
            return;
        }
        for (int i = 0; i < sc->nstores; i++)
            if (sc->stores[i]->buffer == s->buffer) sc->ok = false;
        sc->stores[sc->nstores++] = s;
        return;
    }
    case LOOP_IF: scan_stores(sc, s->body); scan_stores(sc, s->else_body); return;
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++) scan_stores(sc, s->stmts[i]);
        return;
    default: sc->ok = false; return; /* inner loops, lets, allocations: not worth proving */
    }
}

static void scan_body_loads(simd_scan *sc, const loop_stmt *s) {
    if (!s || !sc->ok) return;
    switch (s->kind) {
    case LOOP_STORE: scan_loads(sc, s->index); scan_loads(sc, s->value); return;
    case LOOP_IF:
        scan_loads(sc, s->cond);
        scan_body_loads(sc, s->body);
        scan_body_loads(sc, s->else_body);
        return;
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++) scan_body_loads(sc, s->stmts[i]);
        return;
    default: return;
    }
}

bool loop_simd_safe(const loop_stmt *loop) {
    simd_scan sc = {.var = loop->var, .ok = true};
    scan_stores(&sc, loop->body);
    scan_body_loads(&sc, loop->body);
    return sc.ok && sc.nstores > 0;
}

/* ---- register tiles: an allocation as vector variables ---- */

/* idx, an access of `lanes` lanes to b: a dense vector at a constant offset that is a multiple
 * of the lanes, the same lanes as b's other accesses (*want, 0 until the first)? */
static bool const_slot(const loop_buffer *b, const te_expr *idx, int lanes, int *want) {
    int64_t base, stride;
    if (lanes < 2 || (lanes & (lanes - 1)) != 0 || (*want && lanes != *want)) return false;
    if (!idx || idx->kind != TE_RAMP || idx->a->type.lanes != 1 ||
        !te_is_const_int(idx->b, &stride) || stride != 1 || !te_is_const_int(idx->a, &base))
        return false;
    if (base < 0 || base % lanes || base + lanes > b->size) return false;
    *want = lanes;
    return true;
}

static bool expr_promotable(const te_expr *e, const loop_buffer *b, int *lanes) {
    if (!e) return true;
    if (e->kind == TE_BUF_LOAD && e->buffer == b && !const_slot(b, e->a, e->type.lanes, lanes))
        return false;
    return expr_promotable(e->a, b, lanes) && expr_promotable(e->b, b, lanes) &&
           expr_promotable(e->c, b, lanes);
}

/* Is every access of b in s a whole vector at a constant offset? */
static bool promotable(const loop_stmt *s, const loop_buffer *b, int *lanes) {
    if (!s) return true;
    switch (s->kind) {
    case LOOP_STORE:
        if (s->buffer == b && !const_slot(b, s->index, s->value->type.lanes, lanes)) return false;
        return expr_promotable(s->index, b, lanes) && expr_promotable(s->value, b, lanes);
    case LOOP_FOR:
        return expr_promotable(s->min, b, lanes) && expr_promotable(s->extent, b, lanes) &&
               promotable(s->body, b, lanes);
    case LOOP_LET: return expr_promotable(s->value, b, lanes) && promotable(s->body, b, lanes);
    case LOOP_IF:
        return expr_promotable(s->cond, b, lanes) && promotable(s->body, b, lanes) &&
               promotable(s->else_body, b, lanes);
    case LOOP_ALLOC: return promotable(s->body, b, lanes);
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++)
            if (!promotable(s->stmts[i], b, lanes)) return false;
        return true;
    case LOOP_BARRIER: return true;
    }
    return false;
}

int loop_vector_slots(const loop_stmt *alloc, int max_vectors) {
    const loop_buffer *b = alloc->buffer;
    int lanes = 0;
    if (b->dtype == TE_BOOL || !promotable(alloc->body, b, &lanes) || !lanes) return 0;
    return b->size % lanes == 0 && b->size / lanes <= max_vectors ? lanes : 0;
}
