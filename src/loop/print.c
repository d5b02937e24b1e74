/* print.c -- the deterministic text form of the loop IR, for goldens, `wpk lower` and
 * WPK_DUMP=lower. Expressions print with the fewest parentheses that keep the tree's shape:
 * `((n*64 + c)*56 + h)*56 + w`, `ramp(x_3, 1, 16)`, `x16(b[k_4])`. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "loop/loop.h"
#include "te/tensor.h"

static const char *scalar_name(te_scalar s) {
    switch (s) {
    case TE_BOOL: return "bool";
    case TE_I32: return "i32";
    case TE_I64: return "i64";
    case TE_F32: return "f32";
    }
    return "?";
}

static const char *fn_name(te_fn f) {
    switch (f) {
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

static const char *reduce_name(te_reduce_op op) {
    switch (op) {
    case TE_REDUCE_SUM: return "sum";
    case TE_REDUCE_MAX: return "max";
    case TE_REDUCE_MIN: return "min";
    }
    return "?";
}

/* Binding strength of infix operators; 9 for everything printed as an atom or a call. */
static int prec(const te_expr *e) {
    switch (e->kind) {
    case TE_OR: return 1;
    case TE_AND: return 2;
    case TE_LT: case TE_LE: case TE_EQ: case TE_NE: return 3;
    case TE_ADD: case TE_SUB: return 4;
    case TE_MUL: case TE_DIV: case TE_MOD: return 5;
    case TE_INT: return e->i < 0 ? 6 : 9;
    case TE_FLOAT: return e->f < 0 || signbit(e->f) ? 6 : 9;
    default: return 9;
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
    case TE_MUL: return "*";
    case TE_DIV: return "/";
    case TE_MOD: return "%";
    default: return NULL;
    }
}

static void pexpr(const te_expr *e, strbuf *b);

static void operand(const te_expr *e, int min_prec, strbuf *b) {
    if (prec(e) < min_prec) {
        sb_puts(b, "(");
        pexpr(e, b);
        sb_puts(b, ")");
    } else {
        pexpr(e, b);
    }
}

static void pfloat(double f, strbuf *b) {
    if (isnan(f)) {
        sb_puts(b, "nan");
        return;
    }
    if (isinf(f)) {
        sb_puts(b, f < 0 ? "-inf" : "inf");
        return;
    }
    char tmp[40];
    snprintf(tmp, sizeof tmp, "%.9g", f);
    sb_puts(b, tmp);
    if (!strpbrk(tmp, ".e")) sb_puts(b, ".0");
    sb_puts(b, "f");
}

static void pexpr(const te_expr *e, strbuf *b) {
    if (!e) {
        sb_puts(b, "<null>");
        return;
    }
    const char *op = infix(e->kind);
    if (op) {
        int p = prec(e);
        /* (x%2)*4 and (x*4)/3 rather than x%2*4 and x*4/3: same tree, easier to read */
        bool mixed = p == 5 && prec(e->a) == 5 && e->a->kind != e->kind;
        operand(e->a, mixed ? p + 1 : p, b);
        sb_puts(b, op);
        operand(e->b, p + 1, b);
        return;
    }
    switch (e->kind) {
    case TE_INT:
        if (e->type.scalar == TE_BOOL) sb_puts(b, e->i ? "true" : "false");
        else sb_printf(b, "%lld", (long long)e->i);
        break;
    case TE_FLOAT: pfloat(e->f, b); break;
    case TE_VAR: sb_printf(b, "%s_%d", e->var->name, e->var->id); break;
    case TE_MIN: case TE_MAX:
        sb_puts(b, e->kind == TE_MIN ? "min(" : "max(");
        pexpr(e->a, b);
        sb_puts(b, ", ");
        pexpr(e->b, b);
        sb_puts(b, ")");
        break;
    case TE_NOT:
        sb_puts(b, "!");
        operand(e->a, 9, b);
        break;
    case TE_SELECT:
        sb_puts(b, "select(");
        pexpr(e->a, b);
        sb_puts(b, ", ");
        pexpr(e->b, b);
        sb_puts(b, ", ");
        pexpr(e->c, b);
        sb_puts(b, ")");
        break;
    case TE_CAST:
        sb_puts(b, scalar_name(e->type.scalar));
        if (e->type.lanes > 1) sb_printf(b, "x%d", e->type.lanes);
        sb_puts(b, "(");
        pexpr(e->a, b);
        sb_puts(b, ")");
        break;
    case TE_CALL:
        sb_printf(b, "%s(", fn_name(e->fn));
        pexpr(e->a, b);
        if (e->b) {
            sb_puts(b, ", ");
            pexpr(e->b, b);
        }
        sb_puts(b, ")");
        break;
    case TE_LOAD:
        sb_printf(b, "%s[", e->tensor->name);
        for (int i = 0; i < e->nindex; i++) {
            if (i) sb_puts(b, ", ");
            pexpr(e->index[i], b);
        }
        sb_puts(b, "]");
        break;
    case TE_REDUCE:
        sb_printf(b, "%s(", reduce_name(e->rop));
        for (int i = 0; i < e->nraxes; i++)
            sb_printf(b, "%s%s_%d", i ? ", " : "", e->raxes[i]->name, e->raxes[i]->id);
        sb_puts(b, ": ");
        pexpr(e->a, b);
        sb_puts(b, ")");
        break;
    case TE_BUF_LOAD:
        sb_printf(b, "%s[", e->buffer->name);
        pexpr(e->a, b);
        sb_puts(b, "]");
        break;
    case TE_RAMP:
        sb_puts(b, "ramp(");
        pexpr(e->a, b);
        sb_puts(b, ", ");
        pexpr(e->b, b);
        sb_printf(b, ", %d)", e->type.lanes);
        break;
    case TE_BROADCAST:
        sb_printf(b, "x%d(", e->type.lanes);
        pexpr(e->a, b);
        sb_puts(b, ")");
        break;
    default: sb_puts(b, "<?>"); break;
    }
}

void loop_print_expr(const te_expr *e, strbuf *b) { pexpr(e, b); }

static const char *scope_name(loop_scope s) {
    switch (s) {
    case LOOP_SCOPE_ARG: return "arg";
    case LOOP_SCOPE_HEAP: return "heap";
    case LOOP_SCOPE_STACK: return "stack";
    case LOOP_SCOPE_SHARED: return "shared";
    }
    return "?";
}

static void pbuffer_type(const loop_buffer *buf, strbuf *b) {
    sb_printf(b, "%s[", scalar_name(buf->dtype));
    for (int i = 0; i < buf->ndim; i++) sb_printf(b, "%s%lld", i ? ", " : "", (long long)buf->shape[i]);
    sb_puts(b, "]");
}

static void pad(int indent, strbuf *b) {
    for (int i = 0; i < indent; i++) sb_puts(b, "  ");
}

void loop_print_stmt(const loop_stmt *s, int indent, strbuf *b) {
    if (!s) {
        pad(indent, b);
        sb_puts(b, "<null>\n");
        return;
    }
    switch (s->kind) {
    case LOOP_FOR:
        pad(indent, b);
        sb_printf(b, "for (%s_%d, ", s->var->name, s->var->id);
        pexpr(s->min, b);
        sb_puts(b, ", ");
        pexpr(s->extent, b);
        sb_puts(b, ")");
        switch (s->for_kind) {
        case LOOP_SERIAL: break;
        case LOOP_PARALLEL: sb_puts(b, " parallel"); break;
        case LOOP_VECTORIZED: sb_puts(b, " vectorized"); break;
        case LOOP_UNROLLED: sb_puts(b, " unrolled"); break;
        case LOOP_BIND: sb_printf(b, " bind(%s)", s->bind_tag ? s->bind_tag : "?"); break;
        }
        sb_puts(b, " {\n");
        loop_print_stmt(s->body, indent + 1, b);
        pad(indent, b);
        sb_puts(b, "}\n");
        break;
    case LOOP_LET:
        pad(indent, b);
        sb_printf(b, "let %s_%d = ", s->var->name, s->var->id);
        pexpr(s->value, b);
        sb_puts(b, "\n");
        loop_print_stmt(s->body, indent, b);
        break;
    case LOOP_IF:
        pad(indent, b);
        sb_puts(b, "if (");
        pexpr(s->cond, b);
        sb_puts(b, ") {\n");
        loop_print_stmt(s->body, indent + 1, b);
        if (s->else_body) {
            pad(indent, b);
            sb_puts(b, "} else {\n");
            loop_print_stmt(s->else_body, indent + 1, b);
        }
        pad(indent, b);
        sb_puts(b, "}\n");
        break;
    case LOOP_STORE:
        pad(indent, b);
        sb_printf(b, "%s[", s->buffer->name);
        pexpr(s->index, b);
        sb_puts(b, "] = ");
        pexpr(s->value, b);
        sb_puts(b, "\n");
        break;
    case LOOP_ALLOC:
        pad(indent, b);
        sb_printf(b, "allocate %s", s->buffer->name);
        sb_puts(b, "[");
        for (int i = 0; i < s->buffer->ndim; i++)
            sb_printf(b, "%s%lld", i ? ", " : "", (long long)s->buffer->shape[i]);
        sb_printf(b, "] %s %s {\n", scalar_name(s->buffer->dtype), scope_name(s->buffer->scope));
        loop_print_stmt(s->body, indent + 1, b);
        pad(indent, b);
        sb_puts(b, "}\n");
        break;
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++) loop_print_stmt(s->stmts[i], indent, b);
        break;
    case LOOP_BARRIER:
        pad(indent, b);
        sb_puts(b, "barrier\n");
        break;
    }
}

void loop_print_func(const loop_func *f, strbuf *b) {
    sb_printf(b, "func %s(", f->name);
    for (int i = 0; i < f->nargs; i++) {
        sb_printf(b, "%s%s %s: ", i ? ", " : "", i < f->ninputs ? "in" : "out", f->args[i]->name);
        pbuffer_type(f->args[i], b);
    }
    sb_puts(b, ") {\n");
    loop_print_stmt(f->body, 1, b);
    sb_puts(b, "}\n");
}
