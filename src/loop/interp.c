/* interp.c -- the loop-IR interpreter (see interp.h): scalar and vector expressions, every
 * statement kind, bounds-checked buffer accesses. */
#include "loop/interp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"

#define MAX_LANES 64

typedef struct val {
    te_type t;
    int64_t i[MAX_LANES]; /* integer and bool lanes */
    float f[MAX_LANES];   /* float lanes */
} val;

typedef struct binding {
    const te_iter *var;
    val v;
} binding;

typedef struct buf_entry {
    const loop_buffer *buf;
    void *data;
} buf_entry;

typedef struct interp {
    wpk_context *ctx;
    binding *vars;
    int nvars, cap_vars;
    buf_entry *bufs;
    int nbufs, cap_bufs;
} interp;

static bool is_float(te_type t) { return t.scalar == TE_F32; }

static size_t elem_size(te_scalar s) {
    switch (s) {
    case TE_BOOL: return 1;
    case TE_I32: return 4;
    case TE_I64: return 8;
    case TE_F32: return 4;
    }
    return 1;
}

static wpk_status push_var(interp *I, const te_iter *v, const val *x) {
    if (I->nvars == I->cap_vars) {
        int cap = I->cap_vars ? I->cap_vars * 2 : 16;
        binding *n = wpk_realloc(I->vars, sizeof *n * (size_t)cap);
        if (!n) return wpk_error(I->ctx, WPK_ERR_NOMEM, "interp: out of memory");
        I->vars = n;
        I->cap_vars = cap;
    }
    I->vars[I->nvars].var = v;
    I->vars[I->nvars].v = *x;
    I->nvars++;
    return WPK_OK;
}

static wpk_status push_buf(interp *I, const loop_buffer *b, void *data) {
    if (I->nbufs == I->cap_bufs) {
        int cap = I->cap_bufs ? I->cap_bufs * 2 : 16;
        buf_entry *n = wpk_realloc(I->bufs, sizeof *n * (size_t)cap);
        if (!n) return wpk_error(I->ctx, WPK_ERR_NOMEM, "interp: out of memory");
        I->bufs = n;
        I->cap_bufs = cap;
    }
    I->bufs[I->nbufs].buf = b;
    I->bufs[I->nbufs].data = data;
    I->nbufs++;
    return WPK_OK;
}

static void *find_buf(const interp *I, const loop_buffer *b) {
    for (int i = I->nbufs - 1; i >= 0; i--)
        if (I->bufs[i].buf == b) return I->bufs[i].data;
    return NULL;
}

static int64_t fdiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t wrap(te_scalar s, int64_t v) {
    if (s == TE_I32) return (int32_t)(uint32_t)(uint64_t)v;
    if (s == TE_BOOL) return v != 0;
    return v;
}

static wpk_status eval(interp *I, const te_expr *e, val *out);

static wpk_status load(interp *I, const te_expr *e, val *out) {
    val idx;
    wpk_status st = eval(I, e->a, &idx);
    if (st) return st;
    const loop_buffer *b = e->buffer;
    const unsigned char *data = find_buf(I, b);
    if (!data) return wpk_error(I->ctx, WPK_ERR_INTERNAL, "interp: load from '%s' outside its allocation", b->name);
    out->t = e->type;
    for (int l = 0; l < idx.t.lanes; l++) {
        int64_t k = idx.i[l];
        if (k < 0 || k >= b->size)
            return wpk_error(I->ctx, WPK_ERR_INTERNAL, "interp: load %s[%lld] outside [0, %lld)", b->name,
                             (long long)k, (long long)b->size);
        switch (b->dtype) {
        case TE_F32: out->f[l] = ((const float *)data)[k]; break;
        case TE_I32: out->i[l] = ((const int32_t *)data)[k]; break;
        case TE_I64: out->i[l] = ((const int64_t *)data)[k]; break;
        case TE_BOOL: out->i[l] = data[k] != 0; break;
        }
    }
    return WPK_OK;
}

static float call1(te_fn fn, float x) {
    switch (fn) {
    case TE_FN_EXP: return expf(x);
    case TE_FN_LOG: return logf(x);
    case TE_FN_TANH: return tanhf(x);
    case TE_FN_ERF: return erff(x);
    case TE_FN_SQRT: return sqrtf(x);
    case TE_FN_ABS: return fabsf(x);
    case TE_FN_FLOOR: return floorf(x);
    case TE_FN_POW: return x;
    }
    return x;
}

/* Lane-wise binary operation; operands of one lane are broadcast. */
static wpk_status binary(interp *I, te_expr_kind k, const val *a, const val *b, val *out, te_type rt) {
    int n = rt.lanes;
    out->t = rt;
    bool fl = is_float(a->t);
    for (int l = 0; l < n; l++) {
        int la = a->t.lanes == 1 ? 0 : l, lb = b->t.lanes == 1 ? 0 : l;
        if (fl) {
            float x = a->f[la], y = b->f[lb];
            switch (k) {
            case TE_ADD: out->f[l] = x + y; break;
            case TE_SUB: out->f[l] = x - y; break;
            case TE_MUL: out->f[l] = x * y; break;
            case TE_DIV: out->f[l] = x / y; break;
            case TE_MOD: out->f[l] = x - floorf(x / y) * y; break;
            case TE_MIN: out->f[l] = fminf(x, y); break;
            case TE_MAX: out->f[l] = fmaxf(x, y); break;
            case TE_LT: out->i[l] = x < y; break;
            case TE_LE: out->i[l] = x <= y; break;
            case TE_EQ: out->i[l] = x == y; break;
            case TE_NE: out->i[l] = x != y; break;
            default: return wpk_error(I->ctx, WPK_ERR_INTERNAL, "interp: bad float operator %d", (int)k);
            }
            continue;
        }
        int64_t x = a->i[la], y = b->i[lb], r;
        switch (k) {
        case TE_ADD: r = (int64_t)((uint64_t)x + (uint64_t)y); break;
        case TE_SUB: r = (int64_t)((uint64_t)x - (uint64_t)y); break;
        case TE_MUL: r = (int64_t)((uint64_t)x * (uint64_t)y); break;
        case TE_DIV: case TE_MOD:
            if (y == 0) return wpk_error(I->ctx, WPK_ERR_INTERNAL, "interp: integer division by zero");
            if (y == -1) r = k == TE_DIV ? (int64_t)(0 - (uint64_t)x) : 0;
            else r = k == TE_DIV ? fdiv(x, y) : x - fdiv(x, y) * y;
            break;
        case TE_MIN: r = x < y ? x : y; break;
        case TE_MAX: r = x > y ? x : y; break;
        case TE_LT: r = x < y; break;
        case TE_LE: r = x <= y; break;
        case TE_EQ: r = x == y; break;
        case TE_NE: r = x != y; break;
        case TE_AND: r = x && y; break;
        case TE_OR: r = x || y; break;
        default: return wpk_error(I->ctx, WPK_ERR_INTERNAL, "interp: bad integer operator %d", (int)k);
        }
        out->i[l] = wrap(rt.scalar, r);
    }
    return WPK_OK;
}

static wpk_status eval(interp *I, const te_expr *e, val *out) {
    wpk_status st;
    if (!e) return wpk_error(I->ctx, WPK_ERR_INTERNAL, "interp: missing expression");
    if (e->type.lanes < 1 || e->type.lanes > MAX_LANES)
        return wpk_error(I->ctx, WPK_ERR_INTERNAL, "interp: %d lanes (at most %d)", e->type.lanes, MAX_LANES);
    out->t = e->type;
    int n = e->type.lanes;
    switch (e->kind) {
    case TE_INT:
        for (int l = 0; l < n; l++) out->i[l] = e->i;
        if (is_float(e->type))
            for (int l = 0; l < n; l++) out->f[l] = (float)e->i;
        return WPK_OK;
    case TE_FLOAT:
        for (int l = 0; l < n; l++) out->f[l] = (float)e->f;
        return WPK_OK;
    case TE_VAR:
        for (int i = I->nvars - 1; i >= 0; i--)
            if (I->vars[i].var == e->var) {
                *out = I->vars[i].v;
                return WPK_OK;
            }
        return wpk_error(I->ctx, WPK_ERR_INTERNAL, "interp: variable %s_%d is not bound", e->var->name,
                         e->var->id);
    case TE_NOT:
        if ((st = eval(I, e->a, out))) return st;
        out->t = e->type;
        for (int l = 0; l < n; l++) out->i[l] = !out->i[l];
        return WPK_OK;
    case TE_SELECT: {
        val c, t, f;
        if ((st = eval(I, e->a, &c))) return st;
        /* a scalar condition evaluates only the branch it picks, as C's ?: does (padding reads
         * out of bounds in the branch not taken); a vector select evaluates both, so each of
         * its lanes must be in bounds */
        if (c.t.lanes == 1) return eval(I, c.i[0] ? e->b : e->c, out);
        if ((st = eval(I, e->b, &t)) || (st = eval(I, e->c, &f))) return st;
        for (int l = 0; l < n; l++) {
            bool pick = c.i[c.t.lanes == 1 ? 0 : l] != 0;
            out->i[l] = pick ? t.i[l] : f.i[l];
            out->f[l] = pick ? t.f[l] : f.f[l];
        }
        return WPK_OK;
    }
    case TE_CAST: {
        val a;
        if ((st = eval(I, e->a, &a))) return st;
        for (int l = 0; l < n; l++) {
            int la = a.t.lanes == 1 ? 0 : l;
            if (is_float(e->type)) {
                out->f[l] = is_float(a.t) ? a.f[la] : (float)a.i[la];
            } else if (is_float(a.t)) {
                float x = a.f[la];
                if (e->type.scalar == TE_BOOL) out->i[l] = x != 0;
                else if (!(x > -9.2e18f && x < 9.2e18f))
                    return wpk_error(I->ctx, WPK_ERR_INTERNAL, "interp: cast of %g to an integer", (double)x);
                else out->i[l] = wrap(e->type.scalar, (int64_t)x);
            } else {
                out->i[l] = wrap(e->type.scalar, a.i[la]);
            }
        }
        return WPK_OK;
    }
    case TE_CALL: {
        val a, b;
        if ((st = eval(I, e->a, &a))) return st;
        if (e->b && (st = eval(I, e->b, &b))) return st;
        for (int l = 0; l < n; l++) {
            if (!is_float(e->type)) {
                if (e->fn != TE_FN_ABS)
                    return wpk_error(I->ctx, WPK_ERR_INTERNAL, "interp: integer call of a float intrinsic");
                out->i[l] = a.i[l] < 0 ? -a.i[l] : a.i[l];
            } else if (e->fn == TE_FN_POW) {
                if (!e->b) return wpk_error(I->ctx, WPK_ERR_INTERNAL, "interp: pow needs two operands");
                out->f[l] = powf(a.f[l], b.f[b.t.lanes == 1 ? 0 : l]);
            } else {
                out->f[l] = call1(e->fn, a.f[l]);
            }
        }
        return WPK_OK;
    }
    case TE_BUF_LOAD: return load(I, e, out);
    case TE_RAMP: {
        val base, stride;
        if ((st = eval(I, e->a, &base)) || (st = eval(I, e->b, &stride))) return st;
        for (int l = 0; l < n; l++) out->i[l] = base.i[0] + stride.i[0] * l;
        return WPK_OK;
    }
    case TE_BROADCAST: {
        val a;
        if ((st = eval(I, e->a, &a))) return st;
        for (int l = 0; l < n; l++) {
            out->i[l] = a.i[0];
            out->f[l] = a.f[0];
        }
        return WPK_OK;
    }
    case TE_LOAD: case TE_REDUCE:
        return wpk_error(I->ctx, WPK_ERR_INTERNAL, "interp: tensor-level expression in the loop IR");
    default: {
        val a, b;
        if ((st = eval(I, e->a, &a)) || (st = eval(I, e->b, &b))) return st;
        return binary(I, e->kind, &a, &b, out, e->type);
    }
    }
}

static wpk_status scalar_int(interp *I, const te_expr *e, const char *what, int64_t *v) {
    val x;
    wpk_status st = eval(I, e, &x);
    if (st) return st;
    if (x.t.lanes != 1 || is_float(x.t))
        return wpk_error(I->ctx, WPK_ERR_INTERNAL, "interp: %s is not a scalar integer", what);
    *v = x.i[0];
    return WPK_OK;
}

static wpk_status exec(interp *I, const loop_stmt *s);

static wpk_status store(interp *I, const loop_stmt *s) {
    val idx, v;
    wpk_status st;
    if ((st = eval(I, s->index, &idx)) || (st = eval(I, s->value, &v))) return st;
    const loop_buffer *b = s->buffer;
    unsigned char *data = find_buf(I, b);
    if (!data) return wpk_error(I->ctx, WPK_ERR_INTERNAL, "interp: store to '%s' outside its allocation", b->name);
    if (idx.t.lanes != v.t.lanes)
        return wpk_error(I->ctx, WPK_ERR_INTERNAL, "interp: store to '%s' of %d lanes at %d indices", b->name,
                         v.t.lanes, idx.t.lanes);
    if (is_float(v.t) != (b->dtype == TE_F32))
        return wpk_error(I->ctx, WPK_ERR_INTERNAL, "interp: store to '%s' of the wrong type", b->name);
    for (int l = 0; l < idx.t.lanes; l++) {
        int64_t k = idx.i[l];
        if (k < 0 || k >= b->size)
            return wpk_error(I->ctx, WPK_ERR_INTERNAL, "interp: store %s[%lld] outside [0, %lld)", b->name,
                             (long long)k, (long long)b->size);
        switch (b->dtype) {
        case TE_F32: ((float *)data)[k] = v.f[l]; break;
        case TE_I32: ((int32_t *)data)[k] = (int32_t)v.i[l]; break;
        case TE_I64: ((int64_t *)data)[k] = v.i[l]; break;
        case TE_BOOL: data[k] = v.i[l] != 0; break;
        }
    }
    return WPK_OK;
}

static wpk_status exec(interp *I, const loop_stmt *s) {
    wpk_status st;
    if (!s) return wpk_error(I->ctx, WPK_ERR_INTERNAL, "interp: missing statement");
    switch (s->kind) {
    case LOOP_FOR: {
        int64_t min, ext;
        if ((st = scalar_int(I, s->min, "a loop min", &min)) || (st = scalar_int(I, s->extent, "a loop extent", &ext)))
            return st;
        val x = {.t = te_t(TE_I64)};
        if ((st = push_var(I, s->var, &x))) return st;
        int slot = I->nvars - 1;
        for (int64_t i = 0; i < ext; i++) {
            I->vars[slot].v.i[0] = min + i;
            if ((st = exec(I, s->body))) return st;
        }
        I->nvars = slot;
        return WPK_OK;
    }
    case LOOP_LET: {
        val x;
        if ((st = eval(I, s->value, &x)) || (st = push_var(I, s->var, &x))) return st;
        int slot = I->nvars - 1;
        st = exec(I, s->body);
        I->nvars = slot;
        return st;
    }
    case LOOP_IF: {
        int64_t c;
        if ((st = scalar_int(I, s->cond, "an if condition", &c))) return st;
        if (c) return exec(I, s->body);
        return s->else_body ? exec(I, s->else_body) : WPK_OK;
    }
    case LOOP_STORE: return store(I, s);
    case LOOP_ALLOC: {
        const loop_buffer *b = s->buffer;
        size_t bytes = (size_t)b->size * elem_size(b->dtype);
        void *data = wpk_malloc(bytes ? bytes : 1);
        if (!data) return wpk_error(I->ctx, WPK_ERR_NOMEM, "interp: cannot allocate '%s' (%zu bytes)", b->name, bytes);
        if (b->dtype == TE_F32)
            for (int64_t i = 0; i < b->size; i++) ((float *)data)[i] = NAN;
        else
            memset(data, b->dtype == TE_BOOL ? 1 : 0xff, bytes);
        if ((st = push_buf(I, b, data))) {
            wpk_free(data);
            return st;
        }
        st = exec(I, s->body);
        I->nbufs--;
        wpk_free(data);
        return st;
    }
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++)
            if ((st = exec(I, s->stmts[i]))) return st;
        return WPK_OK;
    case LOOP_BARRIER: return WPK_OK; /* threads run one after another here */
    }
    return wpk_error(I->ctx, WPK_ERR_INTERNAL, "interp: bad statement kind %d", (int)s->kind);
}

wpk_status loop_interp_run(wpk_context *ctx, const loop_func *f, void *const *args) {
    interp I = {.ctx = ctx};
    wpk_status st = WPK_OK;
    for (int i = 0; i < f->nargs && !st; i++) st = push_buf(&I, f->args[i], args[i]);
    if (!st) st = exec(&I, f->body);
    wpk_free(I.vars);
    wpk_free(I.bufs);
    return st;
}
