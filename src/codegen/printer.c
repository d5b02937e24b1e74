/* printer.c -- the statement and scalar expression printer the code generators share (see
 * printer.h); everything target-specific goes through the dialect. */
#include "codegen/printer.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

static const loop_var_fact *fact_of(const void *self, const te_iter *it) {
    cg_binding *b = cg_lookup((cg_printer *)self, it);
    return b ? &b->fact : NULL;
}

void cg_printer_init(cg_printer *p, const cg_dialect *d, wpk_context *ctx, const loop_func *f) {
    memset(p, 0, sizeof *p);
    p->d = d;
    p->ctx = ctx;
    p->f = f;
    p->facts = (loop_fact_scope){fact_of, p};
}

wpk_status cg_printer_finish(cg_printer *p, const strbuf *src, strbuf *out) {
    if (p->st == WPK_OK && src->oom) cg_fail(p, WPK_ERR_NOMEM, "out of memory");
    if (p->st == WPK_OK) {
        size_t before = out->len;
        sb_puts(out, src->s);
        if (out->len == before) cg_fail(p, WPK_ERR_NOMEM, "out of memory");
    }
    return p->st;
}

void cg_printer_free(cg_printer *p) {
    sb_free(&p->body);
    wpk_free(p->vars);
    wpk_free(p->bufs);
    wpk_free(p->stored);
}

void cg_fail(cg_printer *p, wpk_status st, const char *fmt, ...) {
    if (p->st != WPK_OK) return; /* the first error is the cause; later ones follow from it */
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->st = wpk_error(p->ctx, st, "%s codegen, kernel '%s': %s", p->d->name, p->f->name, msg);
}

bool cg_grow(cg_printer *p, void **arr, int n, int *cap, size_t sz) {
    if (n < *cap) return true;
    int ncap = *cap ? *cap * 2 : 16;
    void *q = wpk_realloc(*arr, sz * (size_t)ncap);
    if (!q) {
        cg_fail(p, WPK_ERR_NOMEM, "out of memory");
        return false;
    }
    *arr = q;
    *cap = ncap;
    return true;
}

void cg_release(cg_printer *p, strbuf *b) {
    if (b->oom) cg_fail(p, WPK_ERR_NOMEM, "out of memory");
    sb_free(b);
}

void cg_line(cg_printer *p, const char *fmt, ...) {
    for (int i = 0; i < p->indent; i++) sb_puts(&p->body, "    ");
    va_list ap;
    va_start(ap, fmt);
    char tmp[512];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof tmp) {
        sb_puts(&p->body, tmp);
    } else {
        va_start(ap, fmt);
        char *big = wpk_malloc((size_t)n + 1);
        if (big) {
            vsnprintf(big, (size_t)n + 1, fmt, ap);
            sb_puts(&p->body, big);
            wpk_free(big);
        } else {
            cg_fail(p, WPK_ERR_NOMEM, "out of memory");
        }
        va_end(ap);
    }
    sb_puts(&p->body, "\n");
}

/* ---- names ---- */

void cg_put_ident(strbuf *b, const char *name, int id) {
    char tmp[128];
    size_t n = 0;
    char c0 = name ? name[0] : '\0';
    bool letter = (c0 >= 'a' && c0 <= 'z') || (c0 >= 'A' && c0 <= 'Z');
    if (!letter) tmp[n++] = 'v'; /* leading digit or underscore: keep clear of reserved names */
    for (const char *q = name ? name : ""; *q && n < sizeof tmp - 1; q++) {
        char ch = *q;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_';
        tmp[n++] = ok ? ch : '_';
    }
    tmp[n] = '\0';
    /* the `_id` suffix keeps IR names apart from each other and from the `wpk_` helpers and
     * `wpk_tN` temporaries, which never end in `_digits` */
    sb_printf(b, "%s_%d", tmp, id);
}

void cg_put_var(strbuf *b, const te_iter *it) { cg_put_ident(b, it->name, it->id); }
void cg_put_buf(strbuf *b, const loop_buffer *buf) { cg_put_ident(b, buf->name, buf->id); }

bool cg_valid_ident(const char *s) {
    if (!s || !*s || (*s >= '0' && *s <= '9')) return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
}

void cg_put_float(cg_printer *p, strbuf *out, double v) {
    float f = (float)v;
    if (f != f) {
        sb_puts(out, p->d->nan);
        return;
    }
    if (f == INFINITY || f == -INFINITY) {
        sb_puts(out, f > 0 ? p->d->inf : p->d->neg_inf);
        return;
    }
    char tmp[64];
    /* 9 significant digits round-trip every float exactly */
    snprintf(tmp, sizeof tmp, "%.9g", (double)f);
    bool plain = !strpbrk(tmp, ".e");
    sb_printf(out, f < 0 || (f == 0 && 1 / f < 0) ? "(%s%sf)" : "%s%sf", tmp, plain ? ".0" : "");
}

const char *cg_fn_name(te_fn fn) {
    switch (fn) {
    case TE_FN_EXP: return "expf";
    case TE_FN_LOG: return "logf";
    case TE_FN_TANH: return "tanhf";
    case TE_FN_ERF: return "erff";
    case TE_FN_SQRT: return "sqrtf";
    case TE_FN_ABS: return "fabsf";
    case TE_FN_FLOOR: return "floorf";
    case TE_FN_POW: return "powf";
    }
    return "?";
}

const char *cg_op_text(te_expr_kind k) {
    switch (k) {
    case TE_ADD: return "+";
    case TE_SUB: return "-";
    case TE_MUL: return "*";
    case TE_DIV: return "/";
    case TE_MOD: return "%";
    case TE_LT: return "<";
    case TE_LE: return "<=";
    case TE_EQ: return "==";
    case TE_NE: return "!=";
    default: return "?";
    }
}

/* ---- scope ---- */

cg_binding *cg_lookup(cg_printer *p, const te_iter *it) {
    for (int i = p->nvars - 1; i >= 0; i--)
        if (p->vars[i].it == it) return &p->vars[i];
    return NULL;
}

bool cg_push_var(cg_printer *p, cg_binding b) {
    if (!cg_grow(p, (void **)&p->vars, p->nvars, &p->cap_vars, sizeof *p->vars)) return false;
    p->vars[p->nvars++] = b;
    return true;
}

bool cg_push_buf(cg_printer *p, const loop_buffer *b) {
    if (!cg_grow(p, (void **)&p->bufs, p->nbufs, &p->cap_bufs, sizeof *p->bufs)) return false;
    p->bufs[p->nbufs++] = b;
    return true;
}

bool cg_nonneg(cg_printer *p, const te_expr *e) { return loop_nonneg(&p->facts, e); }
int64_t cg_multiple(cg_printer *p, const te_expr *e) { return loop_multiple(&p->facts, e); }

cg_binding cg_loop_binding(cg_printer *p, const loop_stmt *s) {
    cg_binding b = {.fact = {cg_nonneg(p, s->min), 1}, .it = s->var, .t = te_t(TE_I64),
                    .axis = -1};
    int64_t a, n;
    if (te_is_const_int(s->min, &a) && te_is_const_int(s->extent, &n) && n >= 1) {
        b.ranged = true;
        b.lo = a;
        b.hi = a + n - 1;
    }
    return b;
}

cg_binding cg_let_binding(cg_printer *p, const loop_stmt *s) {
    te_type t = s->value->type;
    bool scalar = t.lanes == 1;
    return (cg_binding){.fact = {scalar && cg_nonneg(p, s->value),
                                 scalar ? cg_multiple(p, s->value) : 1},
                        .it = s->var, .t = t, .axis = -1,
                        .value = scalar && t.scalar != TE_F32 ? s->value : NULL};
}

bool cg_check_buffer(cg_printer *p, const loop_buffer *b) {
    if (!b) {
        cg_fail(p, WPK_ERR_INVALID_ARG, "a load or store has no buffer");
        return false;
    }
    for (int i = 0; i < p->nbufs; i++)
        if (p->bufs[i] == b) return true;
    cg_fail(p, WPK_ERR_INVALID_ARG,
            "buffer '%s' is used but is neither an argument nor allocated around the use", b->name);
    return false;
}

static void collect(cg_printer *p, const loop_stmt *s) {
    if (!s || p->st != WPK_OK) return;
    switch (s->kind) {
    case LOOP_STORE:
        if (cg_is_stored(p, s->buffer)) return;
        if (cg_grow(p, (void **)&p->stored, p->nstored, &p->cap_stored, sizeof *p->stored))
            p->stored[p->nstored++] = s->buffer;
        return;
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++) collect(p, s->stmts[i]);
        return;
    case LOOP_IF: collect(p, s->else_body); /* fall through */
    default: collect(p, s->body); return;
    }
}

void cg_collect_stored(cg_printer *p) { collect(p, p->f->body); }

bool cg_is_stored(const cg_printer *p, const loop_buffer *b) {
    for (int i = 0; i < p->nstored; i++)
        if (p->stored[i] == b) return true;
    return false;
}

/* ---- expressions ---- */

void cg_put_lane(strbuf *out, int lane) {
    if (lane == CG_LANE_VAR) sb_puts(out, "wpk_l");
    else sb_printf(out, "%d", lane);
}

void cg_binop(cg_printer *p, const te_expr *e, const char *op, int lane, strbuf *out) {
    sb_puts(out, "(");
    cg_expr(p, e->a, lane, out);
    sb_printf(out, " %s ", op);
    cg_expr(p, e->b, lane, out);
    sb_puts(out, ")");
}

void cg_call(cg_printer *p, const char *name, const te_expr *a, const te_expr *b, int lane,
             strbuf *out) {
    sb_printf(out, "%s(", name);
    cg_expr(p, a, lane, out);
    if (b) {
        sb_puts(out, ", ");
        cg_expr(p, b, lane, out);
    }
    sb_puts(out, ")");
}

/* A call of the dialect's helper h for s: wpk_floordiv_i32(a, b). */
static void helper_call(cg_printer *p, cg_helper h, te_scalar s, const te_expr *a,
                        const te_expr *b, int lane, strbuf *out) {
    static const char *const NAME[] = {"floordiv", "floormod", "min", "max", "abs"};
    if (!p->d->use_helper(p, h, s)) return;
    char name[64];
    snprintf(name, sizeof name, "wpk_%s_%s", NAME[h], p->d->tag(p, s));
    cg_call(p, name, a, b, lane, out);
}

/* Floor division and modulo of integers: plain `/` and `%` when the dividend is provably
 * non-negative and the divisor a positive constant, the floor helper otherwise. */
static void divmod(cg_printer *p, const te_expr *e, int lane, strbuf *out) {
    if (e->type.scalar == TE_F32) {
        if (e->kind == TE_MOD) {
            cg_fail(p, WPK_ERR_UNSUPPORTED, "modulo of float values");
            return;
        }
        cg_binop(p, e, "/", lane, out);
        return;
    }
    int64_t d;
    const te_expr *div = e->b->kind == TE_BROADCAST ? e->b->a : e->b;
    if (te_is_const_int(div, &d) && d > 0 && cg_nonneg(p, e->a)) {
        cg_binop(p, e, cg_op_text(e->kind), lane, out);
        return;
    }
    helper_call(p, e->kind == TE_DIV ? CG_FLOORDIV : CG_FLOORMOD, e->type.scalar, e->a, e->b,
                lane, out);
}

/* What is printed the same way in every lane and every dialect. */
static void scalar(cg_printer *p, const te_expr *e, int lane, strbuf *out) {
    te_scalar s = e->type.scalar;
    switch (e->kind) {
    case TE_INT: p->d->put_int(p, out, s, e->i); return;
    case TE_FLOAT: cg_put_float(p, out, e->f); return;
    case TE_VAR: {
        /* a lane of a vector let: as the dialect holds it */
        bool mask = lane != CG_NO_LANE && p->d->bool_lanes_are_masks &&
                    cg_lookup(p, e->var)->t.scalar == TE_BOOL;
        if (mask) sb_puts(out, "(");
        cg_put_var(out, e->var);
        if (lane != CG_NO_LANE) {
            sb_puts(out, "[");
            cg_put_lane(out, lane);
            sb_puts(out, mask ? "] != 0)" : "]");
        }
        return;
    }
    case TE_ADD: case TE_SUB: case TE_MUL: case TE_LT: case TE_LE: case TE_EQ: case TE_NE:
        cg_binop(p, e, cg_op_text(e->kind), lane, out);
        return;
    case TE_DIV: case TE_MOD: divmod(p, e, lane, out); return;
    case TE_MIN: case TE_MAX:
        helper_call(p, e->kind == TE_MIN ? CG_MIN : CG_MAX, s, e->a, e->b, lane, out);
        return;
    case TE_AND: case TE_OR:
        sb_puts(out, "(");
        cg_expr(p, e->a, lane, out);
        sb_puts(out, e->kind == TE_AND ? " && " : " || ");
        p->guarded++; /* evaluated only when the left side allows */
        cg_expr(p, e->b, lane, out);
        p->guarded--;
        sb_puts(out, ")");
        return;
    case TE_NOT:
        sb_puts(out, "(!");
        cg_expr(p, e->a, lane, out);
        sb_puts(out, ")");
        return;
    case TE_SELECT: /* ?: evaluates only the chosen branch, as guards need */
        sb_puts(out, "(");
        cg_expr(p, e->a, lane, out);
        sb_puts(out, " ? ");
        p->guarded++;
        cg_expr(p, e->b, lane, out);
        sb_puts(out, " : ");
        cg_expr(p, e->c, lane, out);
        p->guarded--;
        sb_puts(out, ")");
        return;
    case TE_CAST:
        if (s == TE_BOOL) {
            sb_puts(out, "(");
            cg_expr(p, e->a, lane, out);
            sb_puts(out, " != 0)");
        } else {
            sb_printf(out, "((%s)", p->d->ctype(p, s));
            cg_expr(p, e->a, lane, out);
            sb_puts(out, ")");
        }
        return;
    case TE_CALL:
        if (s == TE_F32)
            cg_call(p, cg_fn_name(e->fn), e->a, e->fn == TE_FN_POW ? e->b : NULL, lane, out);
        else if (e->fn == TE_FN_ABS && (s == TE_I32 || s == TE_I64))
            helper_call(p, CG_ABS, s, e->a, NULL, lane, out);
        else
            cg_fail(p, WPK_ERR_UNSUPPORTED, "math function %s of a non-float value",
                    cg_fn_name(e->fn));
        return;
    case TE_BUF_LOAD: p->d->load(p, e, lane, out); return;
    case TE_RAMP: p->d->ramp(p, e, lane, out); return;
    case TE_BROADCAST: cg_expr(p, e->a, CG_NO_LANE, out); return;
    case TE_LOAD: case TE_REDUCE:
        cg_fail(p, WPK_ERR_UNSUPPORTED,
                "a tensor-level %s reached code generation (lower it first)",
                e->kind == TE_LOAD ? "load" : "reduction");
        return;
    }
    cg_fail(p, WPK_ERR_UNSUPPORTED, "expression kind %d", (int)e->kind);
}

void cg_expr(cg_printer *p, const te_expr *e, int lane, strbuf *out) {
    if (p->st != WPK_OK) return;
    if (!e) {
        cg_fail(p, WPK_ERR_INVALID_ARG, "missing expression");
        return;
    }
    int lanes = e->type.lanes;
    if (e->kind == TE_VAR) {
        cg_binding *b = cg_lookup(p, e->var);
        if (!b) {
            cg_fail(p, WPK_ERR_INVALID_ARG, "variable '%s_%d' is used outside its loop or let",
                    e->var->name, e->var->id);
            return;
        }
        lanes = b->t.lanes;
    }
    if (lanes > 1 && lane == CG_NO_LANE) {
        p->d->vector(p, e, out);
        return;
    }
    scalar(p, e, lanes == 1 ? CG_NO_LANE : lane, out);
}

/* ---- statements ---- */

static void print_for(cg_printer *p, const loop_stmt *s) {
    if (s->min->type.lanes != 1 || s->extent->type.lanes != 1 || s->min->type.scalar == TE_F32 ||
        s->extent->type.scalar == TE_F32) {
        cg_fail(p, WPK_ERR_INVALID_ARG, "loop '%s_%d' has a non-integer or vector range",
                s->var->name, s->var->id);
        return;
    }
    if (s->for_kind == LOOP_BIND) {
        p->d->bound_loop(p, s);
        return;
    }
    strbuf v = {0}, lo = {0}, hi = {0};
    cg_put_var(&v, s->var);
    cg_expr(p, s->min, CG_NO_LANE, &lo);
    int64_t a, n;
    if (te_is_const_int(s->min, &a) && te_is_const_int(s->extent, &n)) {
        p->d->put_int(p, &hi, TE_I64, a + n);
    } else if (te_is_const_int(s->min, &a) && a == 0) {
        cg_expr(p, s->extent, CG_NO_LANE, &hi);
    } else {
        sb_puts(&hi, "(");
        cg_expr(p, s->min, CG_NO_LANE, &hi);
        sb_puts(&hi, " + ");
        cg_expr(p, s->extent, CG_NO_LANE, &hi);
        sb_puts(&hi, ")");
    }
    int token = p->d->loop_open(p, s);
    if (p->st == WPK_OK && !(v.oom || lo.oom || hi.oom))
        cg_line(p, "for (%s %s = %s; %s < %s; %s%s%s) {", p->d->ctype(p, TE_I64), v.s, lo.s, v.s,
                hi.s, p->d->incr_pre, v.s, p->d->incr_post);
    else if (p->st == WPK_OK)
        cg_fail(p, WPK_ERR_NOMEM, "out of memory");
    cg_release(p, &v);
    cg_release(p, &lo);
    cg_release(p, &hi);
    if (cg_push_var(p, cg_loop_binding(p, s))) {
        p->indent++;
        cg_stmt(p, s->body);
        p->indent--;
        p->nvars--;
    }
    p->d->loop_close(p, s, token);
    cg_line(p, "}");
}

static void print_let(cg_printer *p, const loop_stmt *s) {
    /* the dialect opens a block: unrolled copies of a body bind the same variable more than once */
    p->d->let_open(p, s);
    if (cg_push_var(p, cg_let_binding(p, s))) {
        cg_stmt(p, s->body);
        p->nvars--;
    }
    p->indent--;
    cg_line(p, "}");
}

static void print_if(cg_printer *p, const loop_stmt *s) {
    if (s->cond->type.lanes != 1) {
        cg_fail(p, WPK_ERR_UNSUPPORTED, "if on a vector condition (predicate the stores instead)");
        return;
    }
    strbuf c = {0};
    cg_expr(p, s->cond, CG_NO_LANE, &c);
    if (p->st == WPK_OK && !c.oom) cg_line(p, "if (%s) {", c.s);
    cg_release(p, &c);
    p->indent++;
    cg_stmt(p, s->body);
    p->indent--;
    if (s->else_body) {
        cg_line(p, "} else {");
        p->indent++;
        cg_stmt(p, s->else_body);
        p->indent--;
    }
    cg_line(p, "}");
}

/* What every store must be before the dialect writes it. */
static bool store_ok(cg_printer *p, const loop_stmt *s) {
    const loop_buffer *buf = s->buffer;
    if (!cg_check_buffer(p, buf)) return false;
    int lanes = s->value->type.lanes;
    if (s->index->type.lanes != lanes) {
        cg_fail(p, WPK_ERR_INVALID_ARG, "store to '%s' has %d index lanes for %d value lanes",
                buf->name, s->index->type.lanes, lanes);
        return false;
    }
    if (s->value->type.scalar != buf->dtype) {
        cg_fail(p, WPK_ERR_INVALID_ARG, "store to '%s' of a %s value into a %s buffer", buf->name,
                p->d->ctype(p, s->value->type.scalar), p->d->ctype(p, buf->dtype));
        return false;
    }
    return true;
}

void cg_alloc_body(cg_printer *p, const loop_stmt *s) {
    if (p->st == WPK_OK && cg_push_buf(p, s->buffer)) {
        cg_stmt(p, s->body);
        p->nbufs--;
    }
}

void cg_stmt(cg_printer *p, const loop_stmt *s) {
    if (p->st != WPK_OK) return;
    if (!s) {
        cg_fail(p, WPK_ERR_INVALID_ARG, "missing statement");
        return;
    }
    switch (s->kind) {
    case LOOP_FOR: print_for(p, s); return;
    case LOOP_LET: print_let(p, s); return;
    case LOOP_IF: print_if(p, s); return;
    case LOOP_STORE:
        if (store_ok(p, s)) p->d->store(p, s);
        return;
    case LOOP_ALLOC: p->d->alloc(p, s); return;
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++) cg_stmt(p, s->stmts[i]);
        return;
    case LOOP_BARRIER: p->d->barrier(p, s); return;
    }
    cg_fail(p, WPK_ERR_INVALID_ARG, "statement kind %d", (int)s->kind);
}
