/* print.c -- the deterministic text of tensor expressions: expressions with the fewest
 * parentheses that keep their meaning, tensors one line each, graphs producers first. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "te/tensor.h"

/* ---- iterator names ---- */

/* The distinct iterators of a printed unit, to tell when a bare name would be ambiguous. */
typedef struct scope {
    const te_iter **its;
    int n, cap;
    bool ids;   /* print name_id everywhere (asked for, or the scope could not be built) */
} scope;

static void scope_add(scope *s, const te_iter *it) {
    if (s->ids || !it) return;
    for (int i = 0; i < s->n; i++)
        if (s->its[i] == it) return;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        const te_iter **its = wpk_realloc(s->its, sizeof(te_iter *) * (size_t)cap);
        if (!its) {
            s->ids = true; /* out of memory: ids are unambiguous without the scope */
            return;
        }
        s->its = its;
        s->cap = cap;
    }
    s->its[s->n++] = it;
}

static void scope_expr(scope *s, const te_expr *e) {
    if (!e) return;
    if (e->kind == TE_VAR) scope_add(s, e->var);
    if (e->kind == TE_REDUCE)
        for (int i = 0; i < e->nraxes; i++) scope_add(s, e->raxes[i]);
    if (e->kind == TE_LOAD)
        for (int i = 0; i < e->nindex; i++) scope_expr(s, e->index[i]);
    scope_expr(s, e->a);
    scope_expr(s, e->b);
    scope_expr(s, e->c);
}

void te_print_iter(const te_iter *it, const te_iter *const *its, int n, strbuf *b) {
    bool clash = false;
    for (int i = 0; i < n && !clash; i++)
        clash = its[i] != it && strcmp(its[i]->name, it->name) == 0;
    if (clash) sb_printf(b, "%s_%d", it->name, it->id);
    else sb_puts(b, it->name);
}

static void put_iter(const scope *s, const te_iter *it, strbuf *b) {
    if (s->ids) sb_printf(b, "%s_%d", it->name, it->id);
    else te_print_iter(it, s->its, s->n, b);
}

/* "k<3", or "1<=k<4" when the range does not start at 0, "k<?" when unknown. */
static void put_range(const scope *s, const te_iter *it, strbuf *b) {
    if (it->min != 0) sb_printf(b, "%lld<=", (long long)it->min);
    put_iter(s, it, b);
    if (it->extent < 0) sb_puts(b, "<?");
    else sb_printf(b, "<%lld", (long long)(it->min + it->extent));
}

/* ---- expressions ---- */

typedef struct printer {
    scope sc;
    const te_print_opts *opts;
    strbuf *b;
} printer;

static const char *scalar_name(te_scalar s) {
    switch (s) {
    case TE_BOOL: return "bool";
    case TE_I32: return "int32";
    case TE_I64: return "int64";
    case TE_F32: return "float32";
    }
    return "?";
}

static void put_type(te_type t, strbuf *b) {
    sb_puts(b, scalar_name(t.scalar));
    if (t.lanes != 1) sb_printf(b, "x%d", t.lanes);
}

static const char *fn_name(te_fn fn) {
    switch (fn) {
    case TE_FN_EXP: return "exp";
    case TE_FN_LOG: return "log";
    case TE_FN_TANH: return "tanh";
    case TE_FN_ERF: return "erf";
    case TE_FN_SQRT: return "sqrt";
    case TE_FN_ABS: return "abs";
    case TE_FN_FLOOR: return "floor";
    case TE_FN_POW: return "pow";
    }
    return "?";
}

/* Binding strength of infix operators; 0 for everything printed as an atom or a call. */
static int prec(te_expr_kind k) {
    switch (k) {
    case TE_OR: return 1;
    case TE_AND: return 2;
    case TE_LT: case TE_LE: case TE_EQ: case TE_NE: return 3;
    case TE_ADD: case TE_SUB: return 4;
    case TE_MUL: case TE_DIV: case TE_MOD: return 5;
    case TE_NOT: return 6;
    default: return 0;
    }
}

static const char *infix(te_expr_kind k) {
    switch (k) {
    case TE_OR: return " || ";
    case TE_AND: return " && ";
    case TE_LT: return " < ";
    case TE_LE: return " <= ";
    case TE_EQ: return " == ";
    case TE_NE: return " != ";
    case TE_ADD: return " + ";
    case TE_SUB: return " - ";
    case TE_MUL: return " * ";
    case TE_DIV: return " / ";
    case TE_MOD: return " % ";
    default: return " ? ";
    }
}

static void put_float(double f, strbuf *b) {
    if (isnan(f)) {
        sb_puts(b, "nan");
        return;
    }
    if (isinf(f)) {
        sb_puts(b, f < 0 ? "-inf" : "inf");
        return;
    }
    char s[64];
    snprintf(s, sizeof s, "%.9g", f);
    sb_puts(b, s);
    /* always visibly a float, so 1.0 and the integer 1 read differently */
    if (!strpbrk(s, ".e")) sb_puts(b, ".0");
}

static void put(printer *p, const te_expr *e, int outer, bool right);

static void put_args(printer *p, const te_expr *const *args, int n) {
    for (int i = 0; i < n; i++) {
        if (i) sb_puts(p->b, ", ");
        put(p, args[i], 0, false);
    }
}

/* e inside an operator of strength `outer`; `right`: e is its right operand, where equal
 * strength needs parentheses too (operators associate to the left). */
static void put(printer *p, const te_expr *e, int outer, bool right) {
    strbuf *b = p->b;
    if (!e) {
        sb_puts(b, "<null>");
        return;
    }
    int mine = prec(e->kind);
    bool paren = mine && (mine < outer || (right && mine == outer));
    if (paren) sb_puts(b, "(");
    switch (e->kind) {
    case TE_INT:
        if (e->type.scalar == TE_BOOL) sb_puts(b, e->i ? "true" : "false");
        else sb_printf(b, "%lld", (long long)e->i);
        break;
    case TE_FLOAT: put_float(e->f, b); break;
    case TE_VAR: put_iter(&p->sc, e->var, b); break;
    case TE_NOT:
        sb_puts(b, "!");
        put(p, e->a, mine, false);
        break;
    case TE_MIN: case TE_MAX:
        sb_puts(b, e->kind == TE_MIN ? "min(" : "max(");
        put_args(p, (const te_expr *[]){e->a, e->b}, 2);
        sb_puts(b, ")");
        break;
    case TE_SELECT:
        sb_puts(b, "select(");
        put_args(p, (const te_expr *[]){e->a, e->b, e->c}, 3);
        sb_puts(b, ")");
        break;
    case TE_CAST:
        put_type(e->type, b);
        sb_puts(b, "(");
        put(p, e->a, 0, false);
        sb_puts(b, ")");
        break;
    case TE_CALL:
        sb_printf(b, "%s(", fn_name(e->fn));
        put_args(p, (const te_expr *[]){e->a, e->b}, e->b ? 2 : 1);
        sb_puts(b, ")");
        break;
    case TE_LOAD:
        sb_printf(b, "%s[", e->tensor->name);
        put_args(p, e->index, e->nindex);
        sb_puts(b, "]");
        break;
    case TE_REDUCE:
        sb_puts(b, e->rop == TE_REDUCE_SUM ? "sum(" : e->rop == TE_REDUCE_MAX ? "max(" : "min(");
        for (int i = 0; i < e->nraxes; i++) {
            if (i) sb_puts(b, ", ");
            put_range(&p->sc, e->raxes[i], b);
        }
        sb_puts(b, ": ");
        put(p, e->a, 0, false);
        sb_puts(b, ")");
        break;
    case TE_BUF_LOAD:
        if (p->opts && p->opts->buffer_name) p->opts->buffer_name(e->buffer, b);
        else sb_puts(b, "buffer");
        sb_puts(b, "[");
        put(p, e->a, 0, false);
        sb_puts(b, "]");
        break;
    case TE_RAMP:
        sb_puts(b, "ramp(");
        put_args(p, (const te_expr *[]){e->a, e->b}, 2);
        sb_printf(b, ", %d)", e->type.lanes);
        break;
    case TE_BROADCAST:
        sb_printf(b, "x%d(", e->type.lanes);
        put(p, e->a, 0, false);
        sb_puts(b, ")");
        break;
    default: /* the infix operators */
        put(p, e->a, mine, false);
        sb_puts(b, infix(e->kind));
        put(p, e->b, mine, true);
        break;
    }
    if (paren) sb_puts(b, ")");
}

void te_print_expr_opts(const te_expr *e, const te_print_opts *opts, strbuf *b) {
    printer p = {.sc = {.ids = opts && opts->ids}, .opts = opts, .b = b};
    scope_expr(&p.sc, e);
    put(&p, e, 0, false);
    wpk_free(p.sc.its);
}

void te_print_expr(const te_expr *e, strbuf *b) { te_print_expr_opts(e, NULL, b); }

/* ---- tensors ---- */

static void put_shape(const te_tensor *t, strbuf *b) {
    sb_printf(b, "%s[", scalar_name(t->dtype));
    for (int i = 0; i < t->ndim; i++) sb_printf(b, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    sb_puts(b, "]");
}

void te_print_tensor(const te_tensor *t, strbuf *b) {
    if (!t) {
        sb_puts(b, "<null>");
        return;
    }
    put_shape(t, b);
    if (t->kind == TE_PLACEHOLDER) {
        sb_printf(b, " %s = %s", t->name, t->constant ? "constant" : "placeholder");
        return;
    }
    printer p = {.b = b};
    for (int i = 0; i < t->ndim; i++) scope_add(&p.sc, t->axes[i]);
    scope_expr(&p.sc, t->body);
    sb_printf(b, " %s[", t->name);
    for (int i = 0; i < t->ndim; i++) {
        if (i) sb_puts(b, ", ");
        put_iter(&p.sc, t->axes[i], b);
    }
    sb_puts(b, "] = ");
    put(&p, t->body, 0, false);
    wpk_free(p.sc.its);
}

/* ---- graphs ---- */

#define MAX_INPUTS 64

typedef struct visited {
    const te_tensor **t;
    int n, cap;
    bool oom;
} visited;

static bool seen(visited *v, const te_tensor *t) {
    for (int i = 0; i < v->n; i++)
        if (v->t[i] == t) return true;
    return false;
}

/* Post-order: a tensor prints after everything it reads. */
static void print_rec(visited *v, const te_tensor *t, strbuf *b) {
    if (!t || seen(v, t) || v->oom) return;
    if (v->n == v->cap) {
        int cap = v->cap ? 2 * v->cap : 16;
        const te_tensor **n = wpk_realloc(v->t, sizeof(te_tensor *) * (size_t)cap);
        if (!n) {
            v->oom = true;
            b->oom = true; /* the text would be incomplete: say so through the buffer */
            return;
        }
        v->t = n;
        v->cap = cap;
    }
    v->t[v->n++] = t;
    const te_tensor *in[MAX_INPUTS];
    int n = te_tensor_inputs(t, in, MAX_INPUTS);
    for (int i = 0; i < n; i++) print_rec(v, in[i], b);
    te_print_tensor(t, b);
    sb_puts(b, "\n");
}

void te_print_graph(te_tensor *const *outputs, int noutputs, strbuf *b) {
    visited v = {0};
    for (int i = 0; i < noutputs; i++) print_rec(&v, outputs[i], b);
    wpk_free(v.t);
}
