/* bounds.c -- interval arithmetic over loop-IR expressions: constant bounds under a scope of
 * variable ranges, and symbolic bounds (some variables relaxed over their ranges, the others
 * fixed) for sizing compute_at regions. */
#include "loop/bounds.h"

#include <assert.h>

#include "loop/subst.h"

int64_t loop_floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t loop_floor_mod(int64_t a, int64_t b) { return a - loop_floor_div(a, b) * b; }

loop_range_env loop_env_range(const loop_range_env *up, const te_iter *var, int64_t lo, int64_t hi) {
    return (loop_range_env){up, var, true, lo, hi};
}

loop_range_env loop_env_for(const loop_range_env *up, const loop_stmt *f) {
    int64_t mlo, mhi, elo, ehi;
    loop_range_env r = {up, f->var, false, 0, 0};
    if (loop_bounds(f->min, up, &mlo, &mhi) && loop_bounds(f->extent, up, &elo, &ehi) &&
        !__builtin_add_overflow(mhi, ehi - 1, &r.hi)) {
        r.lo = mlo;
        r.bounded = ehi >= 1;
        /* an empty loop never runs its body: any range is right, keep [lo, lo] */
        if (!r.bounded) r.hi = mlo, r.bounded = true;
    }
    return r;
}

loop_range_env loop_env_let(const loop_range_env *up, const te_iter *var, const te_expr *value) {
    loop_range_env r = {up, var, false, 0, 0};
    r.bounded = loop_bounds(value, up, &r.lo, &r.hi);
    return r;
}

static bool lookup(const loop_range_env *env, const te_iter *v, int64_t *lo, int64_t *hi) {
    for (; env; env = env->up) {
        if (env->var != v) continue;
        *lo = env->lo;
        *hi = env->hi;
        return env->bounded;
    }
    if (v->kind == TE_ITER_LET || v->extent <= 0) return false;
    *lo = v->min;
    return !__builtin_add_overflow(v->min, v->extent - 1, hi);
}

static bool is_int(te_type t) { return t.scalar == TE_I32 || t.scalar == TE_I64 || t.scalar == TE_BOOL; }

static int64_t min2(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max2(int64_t a, int64_t b) { return a > b ? a : b; }

/* The four products of two intervals' ends; false on overflow. */
static bool mul_iv(int64_t alo, int64_t ahi, int64_t blo, int64_t bhi, int64_t *lo, int64_t *hi) {
    int64_t p[4];
    if (__builtin_mul_overflow(alo, blo, &p[0]) || __builtin_mul_overflow(alo, bhi, &p[1]) ||
        __builtin_mul_overflow(ahi, blo, &p[2]) || __builtin_mul_overflow(ahi, bhi, &p[3]))
        return false;
    *lo = min2(min2(p[0], p[1]), min2(p[2], p[3]));
    *hi = max2(max2(p[0], p[1]), max2(p[2], p[3]));
    return true;
}

static bool bounds(const te_expr *e, const loop_range_env *env, int64_t *lo, int64_t *hi);

/* Comparisons, logic: [0, 1] unless the operands' bounds decide them. */
static bool bool_bounds(const te_expr *e, const loop_range_env *env, int64_t *lo, int64_t *hi) {
    int64_t alo, ahi, blo, bhi;
    *lo = 0;
    *hi = 1;
    switch (e->kind) {
    case TE_LT: case TE_LE: case TE_EQ: case TE_NE:
        if (!is_int(e->a->type) || !bounds(e->a, env, &alo, &ahi) || !bounds(e->b, env, &blo, &bhi))
            return true;
        if (e->kind == TE_LT) {
            if (ahi < blo) *lo = 1;
            else if (alo >= bhi) *hi = 0;
        } else if (e->kind == TE_LE) {
            if (ahi <= blo) *lo = 1;
            else if (alo > bhi) *hi = 0;
        } else {
            bool eq_always = alo == ahi && blo == bhi && alo == blo;
            bool never = ahi < blo || bhi < alo;
            if (e->kind == TE_EQ) {
                if (eq_always) *lo = 1;
                else if (never) *hi = 0;
            } else {
                if (never) *lo = 1;
                else if (eq_always) *hi = 0;
            }
        }
        return true;
    case TE_AND: case TE_OR:
        if (!bounds(e->a, env, &alo, &ahi) || !bounds(e->b, env, &blo, &bhi)) return true;
        alo = alo != 0, ahi = ahi != 0, blo = blo != 0, bhi = bhi != 0;
        if (e->kind == TE_AND) *lo = alo && blo, *hi = ahi && bhi;
        else *lo = alo || blo, *hi = ahi || bhi;
        return true;
    case TE_NOT:
        if (!bounds(e->a, env, &alo, &ahi)) return true;
        *lo = ahi == 0;
        *hi = alo == 0;
        return true;
    default: return true;
    }
}

static bool bounds(const te_expr *e, const loop_range_env *env, int64_t *lo, int64_t *hi) {
    int64_t alo, ahi, blo, bhi;
    if (!e) return false;
    switch (e->kind) {
    case TE_INT:
        *lo = *hi = e->i;
        return true;
    case TE_VAR: return lookup(env, e->var, lo, hi);
    case TE_LT: case TE_LE: case TE_EQ: case TE_NE: case TE_AND: case TE_OR: case TE_NOT:
        return bool_bounds(e, env, lo, hi);
    default: break;
    }
    if (!is_int(e->type)) return false;
    switch (e->kind) {
    case TE_ADD:
        return bounds(e->a, env, &alo, &ahi) && bounds(e->b, env, &blo, &bhi) &&
               !__builtin_add_overflow(alo, blo, lo) && !__builtin_add_overflow(ahi, bhi, hi);
    case TE_SUB:
        return bounds(e->a, env, &alo, &ahi) && bounds(e->b, env, &blo, &bhi) &&
               !__builtin_sub_overflow(alo, bhi, lo) && !__builtin_sub_overflow(ahi, blo, hi);
    case TE_MUL:
        return bounds(e->a, env, &alo, &ahi) && bounds(e->b, env, &blo, &bhi) &&
               mul_iv(alo, ahi, blo, bhi, lo, hi);
    case TE_DIV:
        if (!bounds(e->a, env, &alo, &ahi) || !bounds(e->b, env, &blo, &bhi)) return false;
        if (blo <= 0 && bhi >= 0) return false;
        if ((blo == -1 || bhi == -1) && (alo == INT64_MIN)) return false;
        {
            /* floor(a / d) is monotone in a, and in d on either side of zero: corners */
            int64_t q[4] = {loop_floor_div(alo, blo), loop_floor_div(alo, bhi),
                            loop_floor_div(ahi, blo), loop_floor_div(ahi, bhi)};
            *lo = min2(min2(q[0], q[1]), min2(q[2], q[3]));
            *hi = max2(max2(q[0], q[1]), max2(q[2], q[3]));
        }
        return true;
    case TE_MOD:
        if (!bounds(e->b, env, &blo, &bhi) || blo <= 0) {
            /* negative divisors: the result takes the divisor's sign */
            if (!bounds(e->b, env, &blo, &bhi) || bhi >= 0) return false;
            *lo = blo + 1;
            *hi = 0;
            return true;
        }
        if (bounds(e->a, env, &alo, &ahi) && blo == bhi &&
            loop_floor_div(alo, blo) == loop_floor_div(ahi, blo)) {
            *lo = loop_floor_mod(alo, blo);
            *hi = loop_floor_mod(ahi, blo);
            return true;
        }
        *lo = 0;
        *hi = bhi - 1;
        if (bounds(e->a, env, &alo, &ahi) && alo >= 0 && ahi < *hi) *hi = ahi;
        return true;
    case TE_MIN: case TE_MAX:
        if (!bounds(e->a, env, &alo, &ahi) || !bounds(e->b, env, &blo, &bhi)) {
            /* min(x, k) is still bounded above by k, max(x, k) below; one side is not enough */
            return false;
        }
        *lo = e->kind == TE_MIN ? min2(alo, blo) : max2(alo, blo);
        *hi = e->kind == TE_MIN ? min2(ahi, bhi) : max2(ahi, bhi);
        return true;
    case TE_SELECT: {
        int64_t clo, chi;
        bool cb = bounds(e->a, env, &clo, &chi);
        if (cb && clo == chi) return bounds(clo ? e->b : e->c, env, lo, hi);
        if (!bounds(e->b, env, &alo, &ahi) || !bounds(e->c, env, &blo, &bhi)) return false;
        *lo = min2(alo, blo);
        *hi = max2(ahi, bhi);
        return true;
    }
    case TE_CAST:
        if (e->type.scalar == TE_BOOL) {
            *lo = 0;
            *hi = 1;
            return true;
        }
        if (!is_int(e->a->type) || !bounds(e->a, env, lo, hi)) return false;
        /* a narrowing cast of a value out of I32 range wraps: refuse */
        return e->type.scalar != TE_I32 || (*lo >= INT32_MIN && *hi <= INT32_MAX);
    case TE_RAMP: {
        int64_t span_lo, span_hi, l = e->type.lanes - 1;
        if (!bounds(e->a, env, &alo, &ahi) || !bounds(e->b, env, &blo, &bhi) ||
            !mul_iv(blo, bhi, 0, l, &span_lo, &span_hi))
            return false;
        return !__builtin_add_overflow(alo, span_lo, lo) && !__builtin_add_overflow(ahi, span_hi, hi);
    }
    case TE_BROADCAST: return bounds(e->a, env, lo, hi);
    default:
        if (e->type.scalar == TE_BOOL) {
            *lo = 0;
            *hi = 1;
            return true;
        }
        return false;
    }
}

bool loop_bounds(const te_expr *e, const loop_range_env *env, int64_t *lo, int64_t *hi) {
    int64_t l, h;
    if (!bounds(e, env, &l, &h)) return false;
    assert(l <= h);
    *lo = l;
    *hi = h;
    return true;
}

/* ---- symbolic bounds ---- */

static bool relaxed(const loop_range_env *relax, const te_iter *v, int64_t *lo, int64_t *hi) {
    for (; relax; relax = relax->up)
        if (relax->var == v) {
            /* an unbounded frame: the variable varies over an unknown range (lo > hi says so) */
            *lo = relax->bounded ? relax->lo : 1;
            *hi = relax->bounded ? relax->hi : 0;
            return true;
        }
    return false;
}

static bool varies(const te_expr *e, const loop_range_env *relax) {
    int64_t lo, hi;
    if (!e) return false;
    if (e->kind == TE_VAR) return relaxed(relax, e->var, &lo, &hi);
    if (e->kind == TE_LOAD)
        for (int i = 0; i < e->nindex; i++)
            if (varies(e->index[i], relax)) return true;
    return varies(e->a, relax) || varies(e->b, relax) || varies(e->c, relax);
}

static bool sym(te_ctx *c, const te_expr *e, const loop_range_env *relax, const te_expr **lo,
                const te_expr **hi) {
    int64_t k, vlo = 0, vhi = -1;
    const te_expr *alo, *ahi, *blo, *bhi;
    if (!varies(e, relax)) {
        *lo = *hi = e;
        return true;
    }
    if (e->type.lanes != 1 || (e->type.scalar != TE_I64 && e->type.scalar != TE_I32)) return false;
    switch (e->kind) {
    case TE_VAR:
        relaxed(relax, e->var, &vlo, &vhi);
        if (vlo > vhi) return false; /* a frame whose range is unknown */
        *lo = te_int_t(c, e->type, vlo);
        *hi = te_int_t(c, e->type, vhi);
        return *lo && *hi;
    case TE_ADD:
        if (!sym(c, e->a, relax, &alo, &ahi) || !sym(c, e->b, relax, &blo, &bhi)) return false;
        *lo = te_add(c, alo, blo);
        *hi = te_add(c, ahi, bhi);
        return *lo && *hi;
    case TE_SUB:
        if (!sym(c, e->a, relax, &alo, &ahi) || !sym(c, e->b, relax, &blo, &bhi)) return false;
        *lo = te_sub(c, alo, bhi);
        *hi = te_sub(c, ahi, blo);
        return *lo && *hi;
    case TE_MUL: {
        const te_expr *x = e->a;
        if (te_is_const_int(e->a, &k)) x = e->b;
        else if (!te_is_const_int(e->b, &k)) return false;
        if (!sym(c, x, relax, &alo, &ahi)) return false;
        const te_expr *kk = te_int_t(c, e->type, k);
        *lo = te_mul(c, k >= 0 ? alo : ahi, kk);
        *hi = te_mul(c, k >= 0 ? ahi : alo, kk);
        return *lo && *hi;
    }
    case TE_DIV:
        if (!te_is_const_int(e->b, &k) || k == 0 || !sym(c, e->a, relax, &alo, &ahi)) return false;
        *lo = te_div(c, k > 0 ? alo : ahi, e->b);
        *hi = te_div(c, k > 0 ? ahi : alo, e->b);
        return *lo && *hi;
    case TE_MOD:
        if (!te_is_const_int(e->b, &k) || k <= 0) return false;
        *lo = te_int_t(c, e->type, 0);
        *hi = te_int_t(c, e->type, k - 1);
        return *lo && *hi;
    case TE_MIN: case TE_MAX: {
        if (!sym(c, e->a, relax, &alo, &ahi) || !sym(c, e->b, relax, &blo, &bhi)) return false;
        te_expr_kind k2 = e->kind;
        *lo = te_binary(c, k2, alo, blo);
        *hi = te_binary(c, k2, ahi, bhi);
        return *lo && *hi;
    }
    case TE_SELECT:
        if (!sym(c, e->b, relax, &alo, &ahi) || !sym(c, e->c, relax, &blo, &bhi)) return false;
        *lo = te_min(c, alo, blo);
        *hi = te_max(c, ahi, bhi);
        return *lo && *hi;
    case TE_CAST:
        if (e->a->type.scalar != TE_I64 && e->a->type.scalar != TE_I32) return false;
        if (!sym(c, e->a, relax, &alo, &ahi)) return false;
        *lo = te_cast(c, e->type, alo);
        *hi = te_cast(c, e->type, ahi);
        return *lo && *hi;
    default: return false;
    }
}

bool loop_bounds_relaxed(te_ctx *c, const te_expr *e, const loop_range_env *relax,
                         const te_expr **lo, const te_expr **hi) {
    if (!e) return false;
    return sym(c, e, relax, lo, hi);
}
