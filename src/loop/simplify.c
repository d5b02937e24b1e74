/* simplify.c -- arithmetic simplification of loop-IR expressions and statements: constant
 * folding, integer index arithmetic in a canonical linear form (sum of coefficient * atom,
 * biggest coefficients first, then the constant), division and modulo of sums by constants
 * when bounds prove the remainder's range, min/max/comparisons decided by bounds, ramp and
 * broadcast algebra, and statement cleanups (trivial lets, loops of extent 0 or 1, decided
 * ifs, empty bodies). */
#include "loop/bounds.h"
#include "loop/subst.h"

#include <stdlib.h>
#include <string.h>

#define LIN_MAX 32

typedef struct term {
    const te_expr *atom;
    int64_t coef;
} term;

/* sum(t[i].coef * t[i].atom) + k, all of type `type` (a scalar integer) */
typedef struct lin {
    te_type type;
    int64_t k;
    int n;
    term t[LIN_MAX];
    bool ok;    /* false: too many terms or a coefficient overflowed */
} lin;

typedef struct simp {
    te_ctx *c;
    const loop_range_env *env;
} simp;

static const te_expr *sx(const simp *S, const te_expr *e);

static bool is_int_scalar(te_type t) {
    return t.lanes == 1 && (t.scalar == TE_I64 || t.scalar == TE_I32);
}

static int64_t gcd64(int64_t a, int64_t b) {
    if (a < 0) a = -a;
    if (b < 0) b = -b;
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* ---- a deterministic order on atoms ---- */

static int cmp_i64(int64_t a, int64_t b) { return a < b ? -1 : a > b; }

static int atom_cmp(const te_expr *a, const te_expr *b) {
    if (a == b) return 0;
    if (!a || !b) return a ? 1 : -1;
    if (a->kind != b->kind) return cmp_i64(a->kind, b->kind);
    if (a->type.scalar != b->type.scalar) return cmp_i64(a->type.scalar, b->type.scalar);
    if (a->type.lanes != b->type.lanes) return cmp_i64(a->type.lanes, b->type.lanes);
    int r;
    switch (a->kind) {
    case TE_INT: return cmp_i64(a->i, b->i);
    case TE_FLOAT: return a->f < b->f ? -1 : a->f > b->f;
    case TE_VAR: return cmp_i64(a->var->id, b->var->id);
    case TE_BUF_LOAD:
        if ((r = cmp_i64(a->buffer->id, b->buffer->id))) return r;
        break;
    case TE_CALL:
        if ((r = cmp_i64(a->fn, b->fn))) return r;
        break;
    case TE_LOAD:
        if ((r = strcmp(a->tensor->name, b->tensor->name))) return r;
        if ((r = cmp_i64(a->nindex, b->nindex))) return r;
        for (int i = 0; i < a->nindex; i++)
            if ((r = atom_cmp(a->index[i], b->index[i]))) return r;
        return 0;
    default: break;
    }
    if ((r = atom_cmp(a->a, b->a))) return r;
    if ((r = atom_cmp(a->b, b->b))) return r;
    return atom_cmp(a->c, b->c);
}

static int term_cmp(const void *pa, const void *pb) {
    const term *a = pa, *b = pb;
    int64_t ma = a->coef < 0 ? -a->coef : a->coef, mb = b->coef < 0 ? -b->coef : b->coef;
    if (ma != mb) return ma > mb ? -1 : 1;
    return atom_cmp(a->atom, b->atom);
}

/* ---- linear forms ---- */

static void lin_init(lin *l, te_type t) {
    l->type = t;
    l->k = 0;
    l->n = 0;
    l->ok = true;
}

static void lin_add_term(lin *l, const te_expr *atom, int64_t coef) {
    if (!l->ok || coef == 0) return;
    for (int i = 0; i < l->n; i++)
        if (te_expr_equal(l->t[i].atom, atom)) {
            if (__builtin_add_overflow(l->t[i].coef, coef, &l->t[i].coef)) l->ok = false;
            if (l->t[i].coef == 0) l->t[i] = l->t[--l->n];
            return;
        }
    if (l->n == LIN_MAX) {
        l->ok = false;
        return;
    }
    l->t[l->n++] = (term){atom, coef};
}

/* l += s * m */
static void lin_add_scaled(lin *l, const lin *m, int64_t s) {
    int64_t v;
    if (!m->ok || __builtin_mul_overflow(m->k, s, &v) || __builtin_add_overflow(l->k, v, &l->k)) {
        l->ok = false;
        return;
    }
    for (int i = 0; i < m->n && l->ok; i++) {
        if (__builtin_mul_overflow(m->t[i].coef, s, &v)) l->ok = false;
        else lin_add_term(l, m->t[i].atom, v);
    }
}

static void lin_of(const simp *S, const te_expr *e, bool simplified, lin *out);

/* Accumulate s * e into l, where e is already simplified (its atoms are final). */
static void lin_acc(const simp *S, lin *l, const te_expr *e, int64_t s, bool simplified) {
    lin m;
    lin_of(S, e, simplified, &m);
    lin_add_scaled(l, &m, s);
}

/* The linear form of integer scalar e. Non-linear nodes become atoms (simplified first unless
 * `simplified` says e already is; a simplified atom that turns out linear is expanded). */
static void lin_of(const simp *S, const te_expr *e, bool simplified, lin *out) {
    lin_init(out, e->type);
    int64_t k;
    switch (e->kind) {
    case TE_INT: out->k = e->i; return;
    case TE_ADD: case TE_SUB:
        lin_acc(S, out, e->a, 1, simplified);
        lin_acc(S, out, e->b, e->kind == TE_ADD ? 1 : -1, simplified);
        return;
    case TE_MUL:
        if (te_is_const_int(e->b, &k)) {
            lin_acc(S, out, e->a, k, simplified);
            return;
        }
        if (te_is_const_int(e->a, &k)) {
            lin_acc(S, out, e->b, k, simplified);
            return;
        }
        if (!simplified) {
            /* a product of two non-constants: an atom, unless simplifying a side folds it */
            const te_expr *a = sx(S, e->a), *b = sx(S, e->b);
            if (!a || !b) {
                out->ok = false;
                return;
            }
            if (te_is_const_int(a, &k)) {
                lin_acc(S, out, b, k, true);
                return;
            }
            if (te_is_const_int(b, &k)) {
                lin_acc(S, out, a, k, true);
                return;
            }
            if (atom_cmp(a, b) > 0) {
                const te_expr *t = a;
                a = b;
                b = t;
            }
            const te_expr *m = te_mul(S->c, a, b);
            if (!m) out->ok = false;
            else lin_add_term(out, m, 1);
            return;
        }
        break;
    default: break;
    }
    if (simplified) {
        lin_add_term(out, e, 1);
        return;
    }
    const te_expr *se = sx(S, e);
    if (!se) {
        out->ok = false;
        return;
    }
    lin_of(S, se, true, out);
}

static const te_expr *lin_expr(const simp *S, const lin *src) {
    te_ctx *c = S->c;
    lin m = *src, *l = &m;
    qsort(l->t, (size_t)l->n, sizeof l->t[0], term_cmp);
    const te_expr *acc = NULL;
    /* positive terms first, so a sum reads a + b - c rather than 0 - c + a + b */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < l->n; i++) {
            int64_t co = l->t[i].coef;
            if ((pass == 0) != (co > 0)) continue;
            int64_t mag = co < 0 ? -co : co;
            const te_expr *t = l->t[i].atom;
            if (mag != 1) t = te_mul(c, t, te_int_t(c, l->type, mag));
            if (!acc) {
                if (co > 0) acc = t;
                else if (l->k != 0) {
                    acc = te_sub(c, te_int_t(c, l->type, l->k), t);
                    l->k = 0;
                } else
                    acc = te_sub(c, te_int_t(c, l->type, 0), t);
            } else
                acc = co > 0 ? te_add(c, acc, t) : te_sub(c, acc, t);
        }
    if (!acc) return te_int_t(c, l->type, l->k);
    if (l->k > 0) acc = te_add(c, acc, te_int_t(c, l->type, l->k));
    else if (l->k < 0 && l->k != INT64_MIN) acc = te_sub(c, acc, te_int_t(c, l->type, -l->k));
    else if (l->k < 0) acc = te_add(c, acc, te_int_t(c, l->type, l->k));
    return acc;
}

/* ---- division and modulo by a positive constant ---- */

/* Split l into q * k + r: q gets the terms (and constant part) divisible by k. */
static void lin_divmod(const lin *l, int64_t k, lin *q, lin *r) {
    lin_init(q, l->type);
    lin_init(r, l->type);
    q->k = loop_floor_div(l->k, k);
    r->k = loop_floor_mod(l->k, k);
    for (int i = 0; i < l->n; i++) {
        if (l->t[i].coef % k == 0) lin_add_term(q, l->t[i].atom, l->t[i].coef / k);
        else lin_add_term(r, l->t[i].atom, l->t[i].coef);
    }
}

static bool bounds_of(const simp *S, const te_expr *e, int64_t *lo, int64_t *hi) {
    return loop_bounds(e, S->env, lo, hi);
}

/* r = g * A + y with g | k, every coefficient of A's terms a multiple of g, and y proven in
 * [0, g): then r / k = A / (k / g) and r % k = (A % (k / g)) * g + y. Returns g, or 0. */
static int64_t gcd_split(const simp *S, const lin *r, int64_t k, lin *A, lin *y) {
    int64_t g = 0;
    for (int i = 0; i < r->n; i++) {
        int64_t gi = gcd64(k, r->t[i].coef);
        if (gi > 1) g = g ? gcd64(g, gi) : gi;
    }
    if (g <= 1) return 0;
    lin_init(A, r->type);
    lin_init(y, r->type);
    y->k = r->k;
    for (int i = 0; i < r->n; i++) {
        if (r->t[i].coef % g == 0) lin_add_term(A, r->t[i].atom, r->t[i].coef / g);
        else lin_add_term(y, r->t[i].atom, r->t[i].coef);
    }
    int64_t lo, hi;
    const te_expr *ye = lin_expr(S, y);
    if (!ye || !bounds_of(S, ye, &lo, &hi) || lo < 0 || hi >= g) return 0;
    return g;
}

static const te_expr *div_const(const simp *S, const te_expr *a, int64_t k);
static const te_expr *mod_const(const simp *S, const te_expr *a, int64_t k);

static const te_expr *div_const(const simp *S, const te_expr *a, int64_t k) {
    te_ctx *c = S->c;
    const te_expr *kk = te_int_t(c, a->type, k);
    int64_t d;
    /* (x / d) / k = x / (d * k) for positive d, k */
    if (a->kind == TE_DIV && te_is_const_int(a->b, &d) && d > 0 && !__builtin_mul_overflow(d, k, &d))
        return div_const(S, a->a, d);
    lin l, q, r, A, y;
    lin_of(S, a, true, &l);
    if (!l.ok) return te_div(c, a, kk);
    lin_divmod(&l, k, &q, &r);
    const te_expr *re = lin_expr(S, &r);
    int64_t lo, hi;
    if (re && bounds_of(S, re, &lo, &hi) && loop_floor_div(lo, k) == loop_floor_div(hi, k)) {
        q.k += loop_floor_div(lo, k);
        return lin_expr(S, &q);
    }
    const te_expr *rest;
    int64_t g = gcd_split(S, &r, k, &A, &y);
    if (g) rest = div_const(S, lin_expr(S, &A), k / g);
    else rest = te_div(c, re, kk);
    if (q.n == 0 && q.k == 0) return rest;
    lin_acc(S, &q, rest, 1, true);
    return q.ok ? lin_expr(S, &q) : te_add(c, lin_expr(S, &q), rest);
}

static const te_expr *mod_const(const simp *S, const te_expr *a, int64_t k) {
    te_ctx *c = S->c;
    const te_expr *kk = te_int_t(c, a->type, k);
    int64_t d;
    /* (x % d) % k = x % k when k divides d */
    if (a->kind == TE_MOD && te_is_const_int(a->b, &d) && d > 0 && d % k == 0)
        return mod_const(S, a->a, k);
    lin l, q, r, A, y;
    lin_of(S, a, true, &l);
    if (!l.ok) return te_mod(c, a, kk);
    lin_divmod(&l, k, &q, &r);
    const te_expr *re = lin_expr(S, &r);
    int64_t lo, hi;
    if (re && bounds_of(S, re, &lo, &hi) && loop_floor_div(lo, k) == loop_floor_div(hi, k)) {
        r.k -= loop_floor_div(lo, k) * k;
        return lin_expr(S, &r);
    }
    int64_t g = gcd_split(S, &r, k, &A, &y);
    if (g) {
        const te_expr *m = mod_const(S, lin_expr(S, &A), k / g);
        lin_acc(S, &y, m, g, true);
        if (y.ok) return lin_expr(S, &y);
    }
    return te_mod(c, re, kk);
}

/* ---- vectors ---- */

static const te_expr *vec_binary(const simp *S, te_expr_kind k, const te_expr *a,
                                 const te_expr *b) {
    te_ctx *c = S->c;
    int lanes = a->type.lanes;
    bool ia = a->type.scalar == TE_I64 || a->type.scalar == TE_I32;
    if (a->kind == TE_BROADCAST && b->kind == TE_BROADCAST)
        return te_broadcast(c, sx(S, te_binary(c, k, a->a, b->a)), lanes);
    if (ia && (k == TE_ADD || k == TE_SUB)) {
        if (a->kind == TE_RAMP && b->kind == TE_BROADCAST)
            return te_ramp(c, sx(S, te_binary(c, k, a->a, b->a)), a->b, lanes);
        if (k == TE_ADD && a->kind == TE_BROADCAST && b->kind == TE_RAMP)
            return te_ramp(c, sx(S, te_add(c, a->a, b->a)), b->b, lanes);
        if (a->kind == TE_RAMP && b->kind == TE_RAMP)
            return te_ramp(c, sx(S, te_binary(c, k, a->a, b->a)), sx(S, te_binary(c, k, a->b, b->b)),
                           lanes);
    }
    if (ia && k == TE_MUL) {
        if (a->kind == TE_BROADCAST && b->kind == TE_RAMP) {
            const te_expr *t = a;
            a = b;
            b = t;
        }
        if (a->kind == TE_RAMP && b->kind == TE_BROADCAST)
            return te_ramp(c, sx(S, te_mul(c, a->a, b->a)), sx(S, te_mul(c, a->b, b->a)), lanes);
    }
    int64_t kv, lo, hi;
    if (ia && (k == TE_DIV || k == TE_MOD) && a->kind == TE_RAMP && b->kind == TE_BROADCAST &&
        te_is_const_int(b->a, &kv) && kv > 0 && is_int_scalar(a->a->type)) {
        /* ramp(q*k + r, s, n) / k = broadcast(q + m) when every lane's r + i*s is in block m */
        lin l, q, r;
        lin_of(S, a->a, true, &l);
        if (l.ok) {
            lin_divmod(&l, kv, &q, &r);
            const te_expr *rr = te_ramp(c, lin_expr(S, &r), a->b, lanes);
            if (rr && bounds_of(S, rr, &lo, &hi) && loop_floor_div(lo, kv) == loop_floor_div(hi, kv)) {
                int64_t m = loop_floor_div(lo, kv);
                if (k == TE_DIV) {
                    q.k += m;
                    return te_broadcast(c, lin_expr(S, &q), lanes);
                }
                r.k -= m * kv;
                return te_ramp(c, lin_expr(S, &r), a->b, lanes);
            }
        }
    }
    const te_expr *e = te_binary(c, k, a, b);
    /* comparisons that bounds decide for every lane */
    if (e && e->type.scalar == TE_BOOL && e->kind != TE_INT && bounds_of(S, e, &lo, &hi) && lo == hi)
        return te_broadcast(c, te_int_t(c, te_t(TE_BOOL), lo), lanes);
    return e;
}

/* ---- expressions ---- */

static const te_expr *bool_const(const simp *S, te_type t, bool v) {
    const te_expr *k = te_int_t(S->c, te_t(TE_BOOL), v);
    return te_broadcast(S->c, k, t.lanes);
}

static bool const_bool(const te_expr *e, bool *v) {
    int64_t k;
    if (e->kind == TE_BROADCAST) e = e->a;
    if (!te_is_const_int(e, &k)) return false;
    *v = k != 0;
    return true;
}

static const te_expr *logic(const simp *S, const te_expr *e) {
    const te_expr *a = sx(S, e->a);
    if (!a) return NULL;
    bool va, vb;
    if (e->kind == TE_NOT) {
        if (const_bool(a, &va)) return bool_const(S, e->type, !va);
        if (a->kind == TE_NOT) return a->a;
        return te_not(S->c, a);
    }
    const te_expr *b = sx(S, e->b);
    if (!b) return NULL;
    bool and = e->kind == TE_AND;
    if (const_bool(a, &va)) return va == and ? b : a;
    if (const_bool(b, &vb)) return vb == and ? a : b;
    if (te_expr_equal(a, b)) return a;
    return te_binary(S->c, e->kind, a, b);
}

/* b*k*(x/k) + b*(x%k) = b*x: a fused loop's index put back together (flat index of the
 * fused dims). */
static void fold_divmod(const simp *S, lin *l) {
    for (bool again = true; again && l->ok;) {
        again = false;
        for (int i = 0; i < l->n && !again; i++) {
            const te_expr *d = l->t[i].atom;
            int64_t k;
            if (d->kind != TE_DIV || !te_is_const_int(d->b, &k) || k <= 0) continue;
            for (int j = 0; j < l->n; j++) {
                const te_expr *m = l->t[j].atom;
                int64_t k2, b = l->t[j].coef, bk;
                if (m->kind != TE_MOD || !te_is_const_int(m->b, &k2) || k2 != k ||
                    !te_expr_equal(m->a, d->a) || __builtin_mul_overflow(b, k, &bk) ||
                    bk != l->t[i].coef)
                    continue;
                const te_expr *x = d->a;
                /* remove the higher index first so the lower stays valid */
                int hi = i > j ? i : j, lo = i > j ? j : i;
                l->t[hi] = l->t[--l->n];
                l->t[lo] = l->t[--l->n];
                lin_acc(S, l, x, b, true);
                again = true;
                break;
            }
        }
    }
}

static const te_expr *int_scalar(const simp *S, const te_expr *e) {
    te_ctx *c = S->c;
    int64_t k, lo, hi;
    switch (e->kind) {
    case TE_ADD: case TE_SUB: case TE_MUL: {
        lin l;
        lin_of(S, e, false, &l);
        fold_divmod(S, &l);
        if (l.ok) return lin_expr(S, &l);
        break;
    }
    default: break;
    }
    const te_expr *a = sx(S, e->a), *b = sx(S, e->b);
    if (!a || !b) return NULL;
    switch (e->kind) {
    case TE_MUL: {
        if (atom_cmp(a, b) > 0) {
            const te_expr *t = a;
            a = b;
            b = t;
        }
        return te_mul(c, a, b);
    }
    case TE_DIV:
        if (te_is_const_int(b, &k) && k > 0) return div_const(S, a, k);
        return te_div(c, a, b);
    case TE_MOD:
        if (te_is_const_int(b, &k) && k > 0) return mod_const(S, a, k);
        return te_mod(c, a, b);
    case TE_MIN: case TE_MAX: {
        lin d;
        lin_init(&d, a->type);
        lin_acc(S, &d, a, 1, true);
        lin_acc(S, &d, b, -1, true);
        const te_expr *de = d.ok ? lin_expr(S, &d) : te_sub(c, a, b);
        if (de && bounds_of(S, de, &lo, &hi)) {
            bool a_le_b = hi <= 0, a_ge_b = lo >= 0;
            if (e->kind == TE_MIN && a_le_b) return a;
            if (e->kind == TE_MIN && a_ge_b) return b;
            if (e->kind == TE_MAX && a_ge_b) return a;
            if (e->kind == TE_MAX && a_le_b) return b;
        }
        return te_binary(c, e->kind, a, b);
    }
    default: return te_binary(c, e->kind, a, b);
    }
}

static const te_expr *compare(const simp *S, const te_expr *e) {
    te_ctx *c = S->c;
    const te_expr *a = sx(S, e->a), *b = sx(S, e->b);
    if (!a || !b) return NULL;
    if (a->type.lanes > 1) return vec_binary(S, e->kind, a, b);
    if (is_int_scalar(a->type)) {
        lin d;
        int64_t lo, hi;
        lin_init(&d, a->type);
        lin_acc(S, &d, a, 1, true);
        lin_acc(S, &d, b, -1, true);
        const te_expr *de = d.ok ? lin_expr(S, &d) : NULL;
        if (de && bounds_of(S, de, &lo, &hi)) {
            int v = -1;
            switch (e->kind) {
            case TE_LT: v = hi < 0 ? 1 : lo >= 0 ? 0 : -1; break;
            case TE_LE: v = hi <= 0 ? 1 : lo > 0 ? 0 : -1; break;
            case TE_EQ: v = lo == 0 && hi == 0 ? 1 : (lo > 0 || hi < 0) ? 0 : -1; break;
            case TE_NE: v = lo == 0 && hi == 0 ? 0 : (lo > 0 || hi < 0) ? 1 : -1; break;
            default: break;
            }
            if (v >= 0) return te_int_t(c, te_t(TE_BOOL), v);
        }
    }
    return te_binary(c, e->kind, a, b);
}

/* A float zero, scalar or broadcast. */
static bool is_float_zero(const te_expr *e) {
    if (e->kind == TE_BROADCAST) e = e->a;
    return e->kind == TE_FLOAT && e->f == 0.0;
}

/* zero * y or y * zero */
static bool is_product_with_zero(const te_expr *e) {
    return e->kind == TE_MUL && (is_float_zero(e->a) || is_float_zero(e->b));
}

static const te_expr *float_arith(const simp *S, const te_expr *e) {
    const te_expr *a = sx(S, e->a), *b = sx(S, e->b);
    if (!a || !b) return NULL;
    /* A sum drops a term multiplied by zero: where loop partitioning decided that a conv's
     * tap reads the zero padding, `acc + 0 * w` keeps acc, as oneDNN's kernels skip padded
     * taps. Exact for every finite w (and acc never becomes -0 when the sum starts at +0);
     * an infinite or NaN weight meeting the padding leaves no NaN. */
    if (e->kind == TE_ADD && is_product_with_zero(b)) return a;
    if (e->kind == TE_ADD && is_product_with_zero(a)) return b;
    if (a->type.lanes > 1) return vec_binary(S, e->kind, a, b);
    /* x + 0 is x except that -0 + 0 is +0: a sign of zero, and none at all for sums started
     * from +0 (they never become -0), which is where padding leaves `+ 0.0f` */
    if ((e->kind == TE_ADD || e->kind == TE_SUB) && b->kind == TE_FLOAT && b->f == 0.0) return a;
    if (e->kind == TE_ADD && a->kind == TE_FLOAT && a->f == 0.0) return b;
    /* x * 1 is exact for every float, signed zeros and NaNs included */
    if (e->kind == TE_MUL && b->kind == TE_FLOAT && b->f == 1.0) return a;
    if (e->kind == TE_MUL && a->kind == TE_FLOAT && a->f == 1.0) return b;
    if (e->kind == TE_DIV && b->kind == TE_FLOAT && b->f == 1.0) return a;
    return te_binary(S->c, e->kind, a, b);
}

static const te_expr *sx(const simp *S, const te_expr *e) {
    te_ctx *c = S->c;
    if (!e) return NULL;
    switch (e->kind) {
    case TE_INT: case TE_FLOAT: case TE_VAR: return e;
    case TE_ADD: case TE_SUB: case TE_MUL: case TE_DIV: case TE_MOD: case TE_MIN: case TE_MAX:
        if (is_int_scalar(e->type)) return int_scalar(S, e);
        if (e->type.lanes > 1 && e->type.scalar != TE_F32) {
            const te_expr *a = sx(S, e->a), *b = sx(S, e->b);
            return a && b ? vec_binary(S, e->kind, a, b) : NULL;
        }
        return float_arith(S, e);
    case TE_LT: case TE_LE: case TE_EQ: case TE_NE: return compare(S, e);
    case TE_AND: case TE_OR: case TE_NOT: return logic(S, e);
    case TE_SELECT: {
        const te_expr *cond = sx(S, e->a);
        bool v;
        if (cond && const_bool(cond, &v)) return sx(S, v ? e->b : e->c);
        const te_expr *t = sx(S, e->b), *f = sx(S, e->c);
        if (!cond || !t || !f) return NULL;
        if (te_expr_equal(t, f)) return t;
        return te_select(c, cond, t, f);
    }
    case TE_RAMP: {
        const te_expr *base = sx(S, e->a), *stride = sx(S, e->b);
        int64_t s;
        if (!base || !stride) return NULL;
        if (te_is_const_int(stride, &s) && s == 0) return te_broadcast(c, base, e->type.lanes);
        return te_ramp(c, base, stride, e->type.lanes);
    }
    case TE_BROADCAST: return te_broadcast(c, sx(S, e->a), e->type.lanes);
    case TE_CAST: {
        const te_expr *a = sx(S, e->a);
        if (!a) return NULL;
        if (a->kind == TE_BROADCAST)
            return te_broadcast(c, te_cast(c, te_t(e->type.scalar), a->a), e->type.lanes);
        /* i64(i32(x)) for an i64 x is x when x fits in i32 (indices cast back and forth) */
        int64_t lo, hi;
        if (is_int_scalar(e->type) && a->kind == TE_CAST && is_int_scalar(a->type) &&
            a->a->type.scalar == e->type.scalar && a->a->type.lanes == 1 &&
            (a->type.scalar == TE_I64 ||
             (bounds_of(S, a->a, &lo, &hi) && lo >= INT32_MIN && hi <= INT32_MAX)))
            return a->a;
        return te_cast(c, e->type, a);
    }
    case TE_CALL: return loop_expr_rebuild(c, e, sx(S, e->a), sx(S, e->b), NULL);
    case TE_BUF_LOAD: return loop_expr_rebuild(c, e, sx(S, e->a), NULL, NULL);
    case TE_LOAD: case TE_REDUCE: return e; /* TE level: nothing to do here */
    }
    return e;
}

const te_expr *loop_simplify_expr(te_ctx *c, const te_expr *e) {
    simp S = {c, NULL};
    return sx(&S, e);
}

const te_expr *loop_simplify_expr_in(te_ctx *c, const te_expr *e, const loop_range_env *env) {
    simp S = {c, env};
    return sx(&S, e);
}

/* ---- statements ---- */

static const loop_stmt *ss(te_ctx *c, const loop_stmt *s, const loop_range_env *env);

static const loop_stmt *seq_flat(te_ctx *c, const loop_stmt *s, const loop_range_env *env) {
    const loop_stmt **v = arena_alloc(&c->mem, sizeof *v * (size_t)(s->nstmts + 1));
    if (!v) {
        c->oom = true;
        return NULL;
    }
    int total = 0;
    for (int i = 0; i < s->nstmts; i++) {
        if (!(v[i] = ss(c, s->stmts[i], env))) return NULL;
        total += v[i]->kind == LOOP_SEQ ? v[i]->nstmts : 1;
    }
    /* flatten nested sequences; empty statements vanish on the way */
    const loop_stmt **out = arena_alloc(&c->mem, sizeof *out * (size_t)(total + 1));
    if (!out) {
        c->oom = true;
        return NULL;
    }
    int n = 0;
    for (int i = 0; i < s->nstmts; i++) {
        if (v[i]->kind != LOOP_SEQ) out[n++] = v[i];
        else
            for (int j = 0; j < v[i]->nstmts; j++) out[n++] = v[i]->stmts[j];
    }
    return n == 0 ? loop_nop(c) : loop_seq(c, n, out);
}

static bool trivial(const te_expr *e) {
    return e->kind == TE_INT || e->kind == TE_FLOAT || e->kind == TE_VAR;
}

static const loop_stmt *ss(te_ctx *c, const loop_stmt *s, const loop_range_env *env) {
    simp S = {c, env};
    if (!s) return NULL;
    switch (s->kind) {
    case LOOP_FOR: {
        const te_expr *min = sx(&S, s->min), *ext = sx(&S, s->extent);
        int64_t e;
        if (!min || !ext) return NULL;
        if (te_is_const_int(ext, &e) && e <= 0) return loop_nop(c);
        if (te_is_const_int(ext, &e) && e == 1 && s->for_kind != LOOP_BIND) {
            const te_iter *v = s->var;
            return ss(c, loop_subst_stmt(c, s->body, 1, &v, &min), env);
        }
        const loop_stmt *tmp = loop_for_like(c, s, min, ext, s->body);
        if (!tmp) return NULL;
        loop_range_env in = loop_env_for(env, tmp);
        const loop_stmt *body = ss(c, s->body, &in);
        if (!body) return NULL;
        if (loop_is_nop(body)) return body;
        return loop_for_like(c, s, min, ext, body);
    }
    case LOOP_LET: {
        const te_expr *v = sx(&S, s->value);
        if (!v) return NULL;
        if (!loop_stmt_uses(s->body, s->var)) return ss(c, s->body, env);
        if (trivial(v)) {
            const te_iter *var = s->var;
            return ss(c, loop_subst_stmt(c, s->body, 1, &var, &v), env);
        }
        loop_range_env in = loop_env_let(env, s->var, v);
        const loop_stmt *body = ss(c, s->body, &in);
        if (!body) return NULL;
        if (loop_is_nop(body)) return body;
        return loop_let(c, s->var, v, body);
    }
    case LOOP_IF: {
        const te_expr *cond = sx(&S, s->cond);
        bool v;
        if (!cond) return NULL;
        if (const_bool(cond, &v)) {
            if (v) return ss(c, s->body, env);
            return s->else_body ? ss(c, s->else_body, env) : loop_nop(c);
        }
        const loop_stmt *t = ss(c, s->body, env);
        const loop_stmt *f = s->else_body ? ss(c, s->else_body, env) : NULL;
        if (!t || (s->else_body && !f)) return NULL;
        if (f && loop_is_nop(f)) f = NULL;
        if (loop_is_nop(t)) {
            if (!f) return t;
            return loop_if(c, sx(&S, te_not(c, cond)), f, NULL);
        }
        return loop_if(c, cond, t, f);
    }
    case LOOP_STORE: {
        const te_expr *idx = sx(&S, s->index), *v = sx(&S, s->value);
        if (!idx || !v) return NULL;
        /* b[i] = b[i] stores what is there */
        if (v->kind == TE_BUF_LOAD && v->buffer == s->buffer && te_expr_equal(v->a, idx)) return loop_nop(c);
        return loop_store(c, s->buffer, idx, v);
    }
    case LOOP_ALLOC: {
        const loop_stmt *body = ss(c, s->body, env);
        if (!body) return NULL;
        if (loop_is_nop(body)) return body;
        return loop_alloc(c, s->buffer, body);
    }
    case LOOP_SEQ: return seq_flat(c, s, env);
    case LOOP_BARRIER: return s;
    }
    return s;
}

const loop_stmt *loop_simplify(te_ctx *c, const loop_stmt *s) { return ss(c, s, NULL); }

const loop_stmt *loop_simplify_in(te_ctx *c, const loop_stmt *s, const loop_range_env *env) {
    return ss(c, s, env);
}
