/* expr.c -- expression constructors: type checks and constant folding at construction. */
#include "te/expr.h"

#include <assert.h>
#include <math.h>
#include <string.h>

void te_ctx_init(te_ctx *c, wpk_context *err) {
    memset(c, 0, sizeof *c);
    c->err = err;
}

void te_ctx_free(te_ctx *c) { arena_free(&c->mem); }

static te_expr *node(te_ctx *c, te_expr_kind k, te_type t) {
    if (c->oom) return NULL;
    te_expr *e = arena_alloc(&c->mem, sizeof *e);
    if (!e) {
        c->oom = true;
        wpk_error(c->err, WPK_ERR_NOMEM, "out of memory building expressions");
        return NULL;
    }
    e->kind = k;
    e->type = t;
    return e;
}

static bool is_int_type(te_type t) { return t.scalar == TE_I32 || t.scalar == TE_I64; }
static bool same_type(te_type a, te_type b) { return a.scalar == b.scalar && a.lanes == b.lanes; }

const te_expr *te_int_t(te_ctx *c, te_type t, int64_t v) {
    te_expr *e = node(c, TE_INT, t);
    if (e) e->i = v;
    return e;
}

const te_expr *te_int(te_ctx *c, int64_t v) { return te_int_t(c, te_t(TE_I64), v); }

const te_expr *te_float(te_ctx *c, double v) {
    te_expr *e = node(c, TE_FLOAT, te_t(TE_F32));
    if (e) e->f = v;
    return e;
}

const te_expr *te_var(te_ctx *c, const te_iter *it) {
    te_expr *e = node(c, TE_VAR, te_t(TE_I64));
    if (e) e->var = it;
    return e;
}

bool te_is_const_int(const te_expr *e, int64_t *v) {
    if (!e || e->kind != TE_INT) return false;
    if (v) *v = e->i;
    return true;
}

static bool is_const_float(const te_expr *e, double *v) {
    if (!e || e->kind != TE_FLOAT) return false;
    *v = e->f;
    return true;
}

static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

/* Constants adapt to the other operand's type (so `x + 1` works for any integer x). */
static const te_expr *adapt(te_ctx *c, const te_expr *k, te_type want) {
    if (same_type(k->type, want)) return k;
    if (k->kind == TE_INT && want.lanes == 1) {
        if (is_int_type(want)) return te_int_t(c, want, k->i);
        if (want.scalar == TE_F32) return te_float(c, (double)k->i);
    }
    if (k->kind == TE_FLOAT && want.lanes == 1 && want.scalar == TE_F32) return k;
    if ((k->kind == TE_INT || k->kind == TE_FLOAT) && want.lanes > 1)
        return te_broadcast(c, adapt(c, k, (te_type){want.scalar, 1}), want.lanes);
    return k;
}

const te_expr *te_binary(te_ctx *c, te_expr_kind k, const te_expr *a, const te_expr *b) {
    if (!a || !b) return NULL;
    if (!same_type(a->type, b->type)) {
        if (a->kind == TE_INT || a->kind == TE_FLOAT) a = adapt(c, a, b->type);
        else if (b->kind == TE_INT || b->kind == TE_FLOAT) b = adapt(c, b, a->type);
        if (!a || !b) return NULL;
    }
    if (!same_type(a->type, b->type)) {
        assert(!"te_binary: operand types differ");
        wpk_error(c->err, WPK_ERR_INTERNAL, "expression operands have different types");
        return NULL;
    }
    bool cmp = k == TE_LT || k == TE_LE || k == TE_EQ || k == TE_NE;
    te_type rt = cmp ? (te_type){TE_BOOL, a->type.lanes} : a->type;
    int64_t x, y;
    double fx, fy;
    if (te_is_const_int(a, &x) && te_is_const_int(b, &y)) {
        switch (k) {
        case TE_ADD: return te_int_t(c, rt, x + y);
        case TE_SUB: return te_int_t(c, rt, x - y);
        case TE_MUL: return te_int_t(c, rt, x * y);
        case TE_DIV: if (y) return te_int_t(c, rt, floor_div(x, y)); break;
        case TE_MOD: if (y) return te_int_t(c, rt, floor_mod(x, y)); break;
        case TE_MIN: return te_int_t(c, rt, x < y ? x : y);
        case TE_MAX: return te_int_t(c, rt, x > y ? x : y);
        case TE_LT: return te_int_t(c, rt, x < y);
        case TE_LE: return te_int_t(c, rt, x <= y);
        case TE_EQ: return te_int_t(c, rt, x == y);
        case TE_NE: return te_int_t(c, rt, x != y);
        case TE_AND: return te_int_t(c, rt, x && y);
        case TE_OR: return te_int_t(c, rt, x || y);
        default: break;
        }
    }
    if (is_const_float(a, &fx) && is_const_float(b, &fy)) {
        switch (k) {
        case TE_ADD: return te_float(c, fx + fy);
        case TE_SUB: return te_float(c, fx - fy);
        case TE_MUL: return te_float(c, fx * fy);
        case TE_DIV: return te_float(c, fx / fy);
        case TE_MIN: return te_float(c, fmin(fx, fy));
        case TE_MAX: return te_float(c, fmax(fx, fy));
        default: break;
        }
    }
    /* identities that hold for integers (floats: x+0 and x*1 too, ignoring -0.0 sign) */
    if ((k == TE_ADD || k == TE_SUB) && te_is_const_int(b, &y) && y == 0) return a;
    if (k == TE_ADD && te_is_const_int(a, &x) && x == 0) return b;
    if ((k == TE_MUL || k == TE_DIV) && te_is_const_int(b, &y) && y == 1) return a;
    if (k == TE_MUL && te_is_const_int(a, &x) && x == 1) return b;
    if (k == TE_MUL && is_int_type(rt) && ((te_is_const_int(a, &x) && x == 0) ||
                                          (te_is_const_int(b, &y) && y == 0)))
        return te_int_t(c, rt, 0);
    if (k == TE_MOD && te_is_const_int(b, &y) && y == 1) return te_int_t(c, rt, 0);
    te_expr *e = node(c, k, rt);
    if (e) {
        e->a = a;
        e->b = b;
    }
    return e;
}

const te_expr *te_add(te_ctx *c, const te_expr *a, const te_expr *b) { return te_binary(c, TE_ADD, a, b); }
const te_expr *te_sub(te_ctx *c, const te_expr *a, const te_expr *b) { return te_binary(c, TE_SUB, a, b); }
const te_expr *te_mul(te_ctx *c, const te_expr *a, const te_expr *b) { return te_binary(c, TE_MUL, a, b); }
const te_expr *te_div(te_ctx *c, const te_expr *a, const te_expr *b) { return te_binary(c, TE_DIV, a, b); }
const te_expr *te_mod(te_ctx *c, const te_expr *a, const te_expr *b) { return te_binary(c, TE_MOD, a, b); }
const te_expr *te_min(te_ctx *c, const te_expr *a, const te_expr *b) { return te_binary(c, TE_MIN, a, b); }
const te_expr *te_max(te_ctx *c, const te_expr *a, const te_expr *b) { return te_binary(c, TE_MAX, a, b); }
const te_expr *te_cmp(te_ctx *c, te_expr_kind k, const te_expr *a, const te_expr *b) { return te_binary(c, k, a, b); }
const te_expr *te_and(te_ctx *c, const te_expr *a, const te_expr *b) { return te_binary(c, TE_AND, a, b); }
const te_expr *te_or(te_ctx *c, const te_expr *a, const te_expr *b) { return te_binary(c, TE_OR, a, b); }

const te_expr *te_not(te_ctx *c, const te_expr *a) {
    if (!a) return NULL;
    int64_t v;
    if (te_is_const_int(a, &v)) return te_int_t(c, a->type, !v);
    te_expr *e = node(c, TE_NOT, a->type);
    if (e) e->a = a;
    return e;
}

const te_expr *te_select(te_ctx *c, const te_expr *cond, const te_expr *t, const te_expr *f) {
    if (!cond || !t || !f) return NULL;
    int64_t v;
    if (te_is_const_int(cond, &v)) return v ? t : f;
    if (!same_type(t->type, f->type)) {
        if (t->kind == TE_INT || t->kind == TE_FLOAT) t = adapt(c, t, f->type);
        else f = adapt(c, f, t->type);
    }
    if (!t || !f || !same_type(t->type, f->type)) {
        assert(!"te_select: branch types differ");
        wpk_error(c->err, WPK_ERR_INTERNAL, "select branches have different types");
        return NULL;
    }
    te_expr *e = node(c, TE_SELECT, t->type);
    if (e) {
        e->a = cond;
        e->b = t;
        e->c = f;
    }
    return e;
}

const te_expr *te_cast(te_ctx *c, te_type t, const te_expr *a) {
    if (!a) return NULL;
    if (same_type(a->type, t)) return a;
    if (a->kind == TE_INT && t.lanes == 1) {
        if (is_int_type(t)) return te_int_t(c, t, a->i);
        if (t.scalar == TE_F32) return te_float(c, (double)a->i);
    }
    te_expr *e = node(c, TE_CAST, t);
    if (e) e->a = a;
    return e;
}

const te_expr *te_call(te_ctx *c, te_fn fn, const te_expr *a, const te_expr *b) {
    if (!a) return NULL;
    te_expr *e = node(c, TE_CALL, a->type);
    if (e) {
        e->fn = fn;
        e->a = a;
        e->b = b;
    }
    return e;
}

const te_expr *te_reduce(te_ctx *c, te_reduce_op op, const te_expr *body, int nraxes,
                         te_iter *const *raxes) {
    if (!body) return NULL;
    te_expr *e = node(c, TE_REDUCE, body->type);
    if (!e) return NULL;
    e->rop = op;
    e->a = body;
    e->raxes = arena_memdup(&c->mem, raxes, sizeof(te_iter *) * (size_t)nraxes);
    e->nraxes = nraxes;
    if (nraxes && !e->raxes) c->oom = true;
    return c->oom ? NULL : e;
}

const te_expr *te_buf_load(te_ctx *c, const loop_buffer *b, te_type t, const te_expr *index) {
    if (!index) return NULL;
    te_expr *e = node(c, TE_BUF_LOAD, t);
    if (e) {
        e->buffer = b;
        e->a = index;
    }
    return e;
}

const te_expr *te_ramp(te_ctx *c, const te_expr *base, const te_expr *stride, int lanes) {
    if (!base || !stride) return NULL;
    te_expr *e = node(c, TE_RAMP, (te_type){base->type.scalar, lanes});
    if (e) {
        e->a = base;
        e->b = stride;
    }
    return e;
}

const te_expr *te_broadcast(te_ctx *c, const te_expr *a, int lanes) {
    if (!a) return NULL;
    if (lanes == 1) return a;
    te_expr *e = node(c, TE_BROADCAST, (te_type){a->type.scalar, lanes});
    if (e) e->a = a;
    return e;
}

te_iter *te_iter_new(te_ctx *c, const char *name, te_iter_kind kind, int64_t min, int64_t extent) {
    if (c->oom) return NULL;
    te_iter *it = arena_alloc(&c->mem, sizeof *it);
    const char *copy = arena_strdup(&c->mem, name ? name : "i");
    if (!it || !copy) {
        c->oom = true;
        wpk_error(c->err, WPK_ERR_NOMEM, "out of memory building expressions");
        return NULL;
    }
    it->name = copy;
    it->kind = kind;
    it->min = min;
    it->extent = extent;
    it->id = c->next_id++;
    return it;
}

bool te_expr_equal(const te_expr *a, const te_expr *b) {
    if (a == b) return true;
    if (!a || !b || a->kind != b->kind || !same_type(a->type, b->type)) return false;
    switch (a->kind) {
    case TE_INT: return a->i == b->i;
    case TE_FLOAT: return a->f == b->f;
    case TE_VAR: return a->var == b->var;
    case TE_LOAD:
        if (a->tensor != b->tensor || a->nindex != b->nindex) return false;
        for (int i = 0; i < a->nindex; i++)
            if (!te_expr_equal(a->index[i], b->index[i])) return false;
        return true;
    case TE_REDUCE:
        if (a->rop != b->rop || a->nraxes != b->nraxes) return false;
        for (int i = 0; i < a->nraxes; i++)
            if (a->raxes[i] != b->raxes[i]) return false;
        return te_expr_equal(a->a, b->a);
    case TE_BUF_LOAD:
        return a->buffer == b->buffer && te_expr_equal(a->a, b->a);
    case TE_CALL:
        if (a->fn != b->fn) return false;
        break;
    default: break;
    }
    return te_expr_equal(a->a, b->a) && te_expr_equal(a->b, b->b) && te_expr_equal(a->c, b->c);
}

const te_expr *te_substitute(te_ctx *c, const te_expr *e, const te_iter *var, const te_expr *value) {
    if (!e) return NULL;
    switch (e->kind) {
    case TE_INT: case TE_FLOAT: return e;
    case TE_VAR: return e->var == var ? value : e;
    default: break;
    }
    const te_expr *a = te_substitute(c, e->a, var, value);
    const te_expr *b = te_substitute(c, e->b, var, value);
    const te_expr *cc = te_substitute(c, e->c, var, value);
    bool same = a == e->a && b == e->b && cc == e->c;
    const te_expr **index = NULL;
    if (e->kind == TE_LOAD) {
        index = arena_alloc(&c->mem, sizeof(te_expr *) * (size_t)(e->nindex + 1));
        if (!index) return NULL;
        for (int i = 0; i < e->nindex; i++) {
            index[i] = te_substitute(c, e->index[i], var, value);
            same &= index[i] == e->index[i];
        }
    }
    if (same) return e;
    switch (e->kind) {
    case TE_NOT: return te_not(c, a);
    case TE_SELECT: return te_select(c, a, b, cc);
    case TE_CAST: return te_cast(c, e->type, a);
    case TE_CALL: return te_call(c, e->fn, a, b);
    case TE_LOAD: return te_load(c, e->tensor, e->nindex, index);
    case TE_REDUCE: return te_reduce(c, e->rop, a, e->nraxes, e->raxes);
    case TE_BUF_LOAD: {
        te_expr *n = node(c, TE_BUF_LOAD, e->type);
        if (n) {
            n->buffer = e->buffer;
            n->a = a;
        }
        return n;
    }
    case TE_RAMP: return te_ramp(c, a, b, e->type.lanes);
    case TE_BROADCAST: return te_broadcast(c, a, e->type.lanes);
    default: return te_binary(c, e->kind, a, b);
    }
}
