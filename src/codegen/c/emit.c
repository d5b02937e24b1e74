/* emit.c -- loop IR -> C source: one kernel function `void NAME(void *const *args)` and the
 * vector typedefs and static inline helpers (floor division, vector loads, stores, splats,
 * lane-wise math) that its body uses, each emitted once. */
#include "codegen/c/cg_c.h"
#include "codegen/c/loop_facts.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/target.h"

/* Stack buffers larger than this go to the heap: OpenMP worker threads have small stacks
 * (OMP_STACKSIZE, often 2-8 MiB), and a local array is meant for accumulators anyway. */
#define STACK_LIMIT_BYTES (128 * 1024)
/* `#pragma GCC unroll` asks for at most this many copies of a leftover unrolled loop. */
#define UNROLL_PRAGMA_MAX 32

cg_c_options cg_c_default_options(void) {
    int floats = target_vector_floats();
    cg_c_options o;
    o.vector_bits = floats >= 16 ? 512 : floats >= 8 ? 256 : 0;
    o.openmp = true;
    return o;
}

/* ---- what the body uses: vector types and helpers, emitted before the function ---- */

typedef enum helper_kind {
    /* scalar helpers first: vector helpers call them */
    H_FLOORDIV, H_FLOORMOD, H_MIN, H_MAX, H_ABS,
    /* vector helpers */
    H_SPLAT, H_RAMP, H_LOAD, H_LOADA, H_LOADS, H_GATHER, H_STORE, H_STOREA, H_STORES, H_SCATTER,
    H_VMIN, H_VMAX, H_VFLOORDIV, H_VFLOORMOD, H_VSELECT, H_VCALL
} helper_kind;

typedef struct helper {
    helper_kind kind;
    te_scalar s;
    int lanes; /* 1 for scalar helpers */
    te_fn fn;  /* H_VCALL */
} helper;

typedef struct vtype {
    te_scalar s; /* TE_BOOL vectors are masks of TE_I32 */
    int lanes;
} vtype;

typedef struct binding {
    const te_iter *it;
    te_type t;     /* a let of a vector value binds a vector */
    bool nonneg;   /* provably >= 0 */
    int64_t mult;  /* provably a multiple of this (0: the value 0) */
} binding;

/* A local buffer emitted as vector variables of `lanes` lanes: NAME_vJ holds elements
 * [J * lanes, (J + 1) * lanes). */
typedef struct promoted {
    const loop_buffer *b;
    int lanes;
} promoted;

typedef struct em {
    wpk_context *ctx;
    const loop_func *f;
    const cg_c_options *opt;
    wpk_status st;
    strbuf body;
    int indent;
    int ntemps;
    bool in_parallel;
    vtype *types;
    int ntypes, cap_types;
    helper *helpers;
    int nhelpers, cap_helpers;
    binding *vars;
    int nvars, cap_vars;
    const loop_buffer **bufs;   /* visible: arguments, then enclosing allocations */
    int nbufs, cap_bufs;
    const loop_buffer **stored; /* buffers some store writes (inputs among them are not const) */
    int nstored, cap_stored;
    promoted *regs;             /* visible allocations emitted as vector variables */
    int nregs, cap_regs;
} em;

static void fail(em *m, wpk_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void fail(em *m, wpk_status st, const char *fmt, ...) {
    if (m->st != WPK_OK) return; /* the first error is the cause; later ones follow from it */
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    m->st = wpk_error(m->ctx, st, "C codegen, kernel '%s': %s", m->f->name, msg);
}

/* Grow *arr (elements of size sz) to hold n+1; false (and an error) when out of memory. */
static bool grow(em *m, void **arr, int n, int *cap, size_t sz) {
    if (n < *cap) return true;
    int ncap = *cap ? *cap * 2 : 16;
    void *p = wpk_realloc(*arr, sz * (size_t)ncap);
    if (!p) {
        fail(m, WPK_ERR_NOMEM, "out of memory");
        return false;
    }
    *arr = p;
    *cap = ncap;
    return true;
}

static const char *scalar_ctype(te_scalar s) {
    switch (s) {
    case TE_BOOL: return "bool";
    case TE_I32: return "int32_t";
    case TE_I64: return "int64_t";
    case TE_F32: return "float";
    }
    return "?";
}

static const char *scalar_tag(te_scalar s) {
    switch (s) {
    case TE_BOOL: return "i32"; /* vector booleans are -1/0 masks of 32-bit lanes */
    case TE_I32: return "i32";
    case TE_I64: return "i64";
    case TE_F32: return "f32";
    }
    return "?";
}

static int scalar_bytes(te_scalar s) {
    return s == TE_BOOL ? (int)sizeof(bool) : s == TE_I64 ? 8 : 4;
}

/* GCC vector sizes must be powers of two: L lanes live in the first L of P >= L lanes. */
static int padded_lanes(int lanes) {
    int p = 1;
    while (p < lanes) p *= 2;
    return p;
}

static te_scalar vec_scalar(te_scalar s) { return s == TE_BOOL ? TE_I32 : s; }

static void use_type(em *m, te_scalar s, int lanes) {
    s = vec_scalar(s);
    for (int i = 0; i < m->ntypes; i++)
        if (m->types[i].s == s && m->types[i].lanes == lanes) return;
    if (!grow(m, (void **)&m->types, m->ntypes, &m->cap_types, sizeof *m->types)) return;
    m->types[m->ntypes++] = (vtype){s, lanes};
}

static void use_helper(em *m, helper_kind k, te_scalar s, int lanes, te_fn fn) {
    for (int i = 0; i < m->nhelpers; i++) {
        helper *h = &m->helpers[i];
        if (h->kind == k && h->s == s && h->lanes == lanes && (k != H_VCALL || h->fn == fn)) return;
    }
    if (!grow(m, (void **)&m->helpers, m->nhelpers, &m->cap_helpers, sizeof *m->helpers)) return;
    m->helpers[m->nhelpers++] = (helper){k, s, lanes, k == H_VCALL ? fn : TE_FN_EXP};
    /* what the helper's own text refers to */
    if (lanes > 1) {
        use_type(m, s, lanes);
        if (k == H_GATHER || k == H_SCATTER) use_type(m, TE_I64, lanes);
        if (k == H_VSELECT) use_type(m, TE_I32, lanes);
        if (k == H_VSELECT && s == TE_I64) use_type(m, TE_I64, lanes);
    }
    if (k == H_VFLOORDIV) use_helper(m, H_FLOORDIV, s, 1, fn);
    if (k == H_VFLOORMOD) use_helper(m, H_FLOORMOD, s, 1, fn);
}

static void put_vtype(strbuf *b, te_scalar s, int lanes) {
    sb_printf(b, "wpk_%sx%d", scalar_tag(s), lanes);
}

/* The name of a vector helper: wpk_load_f32x16. */
static void put_hname(strbuf *b, const char *what, te_scalar s, int lanes) {
    sb_printf(b, "wpk_%s_%sx%d", what, scalar_tag(s), lanes);
}

/* ---- names: identifiers stay valid C whatever the IR calls things ("conv.local") ---- */

static void put_ident(strbuf *b, const char *name, int id) {
    char tmp[128];
    size_t n = 0;
    char c0 = name ? name[0] : '\0';
    bool letter = (c0 >= 'a' && c0 <= 'z') || (c0 >= 'A' && c0 <= 'Z');
    if (!letter) tmp[n++] = 'v'; /* leading digit or underscore: keep clear of reserved names */
    for (const char *p = name ? name : ""; *p && n < sizeof tmp - 1; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_';
        tmp[n++] = ok ? ch : '_';
    }
    tmp[n] = '\0';
    /* the `_id` suffix keeps IR names apart from each other and from the `wpk_` helpers and
     * `wpk_tN` temporaries, which never end in `_digits` */
    sb_printf(b, "%s_%d", tmp, id);
}

static void put_var(strbuf *b, const te_iter *it) { put_ident(b, it->name, it->id); }
static void put_buf(strbuf *b, const loop_buffer *buf) { put_ident(b, buf->name, buf->id); }

static bool valid_c_ident(const char *s) {
    if (!s || !*s || (*s >= '0' && *s <= '9')) return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
}

/* Free a temporary text; one that ran out of memory makes the whole emission fail, so a
 * truncated expression can never reach the output. */
static void release(em *m, strbuf *b) {
    if (b->oom) fail(m, WPK_ERR_NOMEM, "out of memory");
    sb_free(b);
}

static void indent(em *m) {
    for (int i = 0; i < m->indent; i++) sb_puts(&m->body, "    ");
}

static void line(em *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void line(em *m, const char *fmt, ...) {
    indent(m);
    va_list ap;
    va_start(ap, fmt);
    char tmp[512];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof tmp) {
        sb_puts(&m->body, tmp);
    } else {
        va_start(ap, fmt);
        char *big = wpk_malloc((size_t)n + 1);
        if (big) {
            vsnprintf(big, (size_t)n + 1, fmt, ap);
            sb_puts(&m->body, big);
            wpk_free(big);
        } else {
            fail(m, WPK_ERR_NOMEM, "out of memory");
        }
        va_end(ap);
    }
    sb_puts(&m->body, "\n");
}

/* ---- facts about index expressions ---- */

static binding *lookup(em *m, const te_iter *it) {
    for (int i = m->nvars - 1; i >= 0; i--)
        if (m->vars[i].it == it) return &m->vars[i];
    return NULL;
}

static bool nonneg(em *m, const te_expr *e) {
    int64_t v;
    switch (e->kind) {
    case TE_INT: return e->i >= 0;
    case TE_VAR: {
        binding *b = lookup(m, e->var);
        return b && b->nonneg;
    }
    case TE_ADD: case TE_MUL: case TE_MIN: return nonneg(m, e->a) && nonneg(m, e->b);
    case TE_MAX: return nonneg(m, e->a) || nonneg(m, e->b);
    case TE_DIV: return nonneg(m, e->a) && te_is_const_int(e->b, &v) && v > 0;
    case TE_MOD: return te_is_const_int(e->b, &v) && v > 0; /* floor mod takes the divisor's sign */
    case TE_SELECT: return nonneg(m, e->b) && nonneg(m, e->c);
    case TE_RAMP: return nonneg(m, e->a) && nonneg(m, e->b);
    case TE_BROADCAST: return nonneg(m, e->a);
    case TE_CAST: return e->a->type.scalar != TE_F32 && nonneg(m, e->a);
    default: return false;
    }
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

/* A number e is provably a multiple of (0 when e is the constant 0: a multiple of anything). */
static int64_t multiple(em *m, const te_expr *e) {
    switch (e->kind) {
    case TE_INT: return e->i < 0 ? -e->i : e->i;
    case TE_VAR: {
        binding *b = lookup(m, e->var);
        return b ? b->mult : 1;
    }
    case TE_ADD: case TE_SUB: return gcd64(multiple(m, e->a), multiple(m, e->b));
    case TE_MUL: {
        int64_t x = multiple(m, e->a), y = multiple(m, e->b);
        if (x == 0 || y == 0) return 0;
        if (x > INT32_MAX || y > INT32_MAX) return 1; /* no overflow; small facts suffice */
        return x * y;
    }
    default: return 1;
    }
}

static bool contains(const te_expr *hay, const te_expr *needle) {
    if (!hay) return false;
    if (te_expr_equal(hay, needle)) return true;
    return contains(hay->a, needle) || contains(hay->b, needle) || contains(hay->c, needle);
}

/* Could evaluating branch e of a select on `cond` read memory or divide by zero where the
 * select would not? A load the condition itself makes (leaky relu: x < 0 ? a * x : x) and
 * division by a non-zero constant are safe to evaluate in every lane. */
static bool has_guarded_work(const te_expr *e, const te_expr *cond) {
    if (!e) return false;
    if (e->kind == TE_BUF_LOAD) return !contains(cond, e);
    if ((e->kind == TE_DIV || e->kind == TE_MOD) && e->type.scalar != TE_F32) {
        const te_expr *d = e->b->kind == TE_BROADCAST ? e->b->a : e->b;
        int64_t v;
        if (!te_is_const_int(d, &v) || v == 0) return true;
    }
    return has_guarded_work(e->a, cond) || has_guarded_work(e->b, cond) ||
           has_guarded_work(e->c, cond);
}

static bool is_visible(em *m, const loop_buffer *b) {
    for (int i = 0; i < m->nbufs; i++)
        if (m->bufs[i] == b) return true;
    return false;
}

static bool check_buffer(em *m, const loop_buffer *b) {
    if (!b) {
        fail(m, WPK_ERR_INVALID_ARG, "a load or store has no buffer");
        return false;
    }
    if (!is_visible(m, b)) {
        fail(m, WPK_ERR_INVALID_ARG,
             "buffer '%s' is used but is neither an argument nor allocated around the use",
             b->name);
        return false;
    }
    return true;
}

/* The lanes of b's vector variables, or 0 when b is an array. */
static int promoted_lanes(const em *m, const loop_buffer *b) {
    for (int i = m->nregs - 1; i >= 0; i--)
        if (m->regs[i].b == b) return m->regs[i].lanes;
    return 0;
}

/* The variable of promoted buffer b that holds the vector at idx (a constant-based ramp:
 * cg_c_vector_slots checked every access). */
static void put_slot(strbuf *out, const loop_buffer *b, const te_expr *idx, int lanes) {
    int64_t base = 0;
    te_is_const_int(idx->a, &base);
    put_buf(out, b);
    sb_printf(out, "_v%" PRId64, base / lanes);
}

/* ---- expressions ---- */

static void emit(em *m, const te_expr *e, const char *lane, strbuf *out);

static void put_float(strbuf *out, double v) {
    float f = (float)v;
    if (f != f) {
        sb_puts(out, "NAN");
        return;
    }
    if (f == INFINITY || f == -INFINITY) {
        sb_puts(out, f > 0 ? "INFINITY" : "(-INFINITY)");
        return;
    }
    char tmp[64];
    /* 9 significant digits round-trip every float exactly */
    snprintf(tmp, sizeof tmp, "%.9g", (double)f);
    bool plain = !strpbrk(tmp, ".e");
    sb_printf(out, f < 0 || (f == 0 && 1 / f < 0) ? "(%s%sf)" : "%s%sf", tmp, plain ? ".0" : "");
}

static void put_int(strbuf *out, te_scalar s, int64_t v) {
    if (s == TE_BOOL) {
        sb_puts(out, v ? "1" : "0");
    } else if (v == INT64_MIN) {
        sb_puts(out, "(-INT64_C(9223372036854775807) - 1)");
    } else if (s == TE_I64 && (v > INT32_MAX || v < -INT32_MAX)) {
        sb_printf(out, v < 0 ? "(INT64_C(%" PRId64 "))" : "INT64_C(%" PRId64 ")", v);
    } else {
        sb_printf(out, v < 0 ? "(%" PRId64 ")" : "%" PRId64, v);
    }
}

static const char *fn_name(te_fn fn) {
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

static const char *op_text(te_expr_kind k) {
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

static void emit_binop(em *m, const te_expr *e, const char *op, const char *lane, strbuf *out) {
    sb_puts(out, "(");
    emit(m, e->a, lane, out);
    sb_printf(out, " %s ", op);
    emit(m, e->b, lane, out);
    sb_puts(out, ")");
}

static void emit_call2(em *m, const char *name, const te_expr *a, const te_expr *b,
                       const char *lane, strbuf *out) {
    sb_printf(out, "%s(", name);
    emit(m, a, lane, out);
    if (b) {
        sb_puts(out, ", ");
        emit(m, b, lane, out);
    }
    sb_puts(out, ")");
}

/* Floor division and modulo of integers: plain C `/` and `%` when the dividend is provably
 * non-negative and the divisor a positive constant, the floor helper otherwise. */
static void emit_int_divmod(em *m, const te_expr *e, const char *lane, strbuf *out) {
    int64_t d;
    if (te_is_const_int(e->b, &d) && d > 0 && nonneg(m, e->a)) {
        emit_binop(m, e, op_text(e->kind), lane, out);
        return;
    }
    helper_kind k = e->kind == TE_DIV ? H_FLOORDIV : H_FLOORMOD;
    use_helper(m, k, e->type.scalar, 1, TE_FN_EXP);
    char name[64];
    snprintf(name, sizeof name, "wpk_%s_%s", k == H_FLOORDIV ? "floordiv" : "floormod",
             scalar_tag(e->type.scalar));
    emit_call2(m, name, e->a, e->b, lane, out);
}

/* A scalar expression, or lane `lane` (a C expression) of a vector expression. */
static void emit_scalar(em *m, const te_expr *e, const char *lane, strbuf *out) {
    te_scalar s = e->type.scalar;
    switch (e->kind) {
    case TE_INT: put_int(out, s, e->i); return;
    case TE_FLOAT: put_float(out, e->f); return;
    case TE_VAR: {
        binding *b = lookup(m, e->var);
        if (!b) {
            fail(m, WPK_ERR_INVALID_ARG, "variable '%s_%d' is used outside its loop or let",
                 e->var->name, e->var->id);
            return;
        }
        if (b->t.lanes > 1 && lane) {
            /* a lane of a vector let; boolean vectors hold -1/0 masks */
            sb_puts(out, b->t.scalar == TE_BOOL ? "(" : "");
            put_var(out, e->var);
            sb_printf(out, b->t.scalar == TE_BOOL ? "[%s] != 0)" : "[%s]", lane);
        } else {
            put_var(out, e->var);
        }
        return;
    }
    case TE_ADD: case TE_SUB: case TE_MUL: case TE_LT: case TE_LE: case TE_EQ: case TE_NE:
        emit_binop(m, e, op_text(e->kind), lane, out);
        return;
    case TE_DIV: case TE_MOD:
        if (s == TE_F32) {
            if (e->kind == TE_MOD) {
                fail(m, WPK_ERR_UNSUPPORTED, "modulo of float values");
                return;
            }
            emit_binop(m, e, "/", lane, out);
        } else {
            emit_int_divmod(m, e, lane, out);
        }
        return;
    case TE_MIN: case TE_MAX: {
        use_helper(m, e->kind == TE_MIN ? H_MIN : H_MAX, s, 1, TE_FN_EXP);
        char name[32];
        snprintf(name, sizeof name, "wpk_%s_%s", e->kind == TE_MIN ? "min" : "max", scalar_tag(s));
        emit_call2(m, name, e->a, e->b, lane, out);
        return;
    }
    case TE_AND: emit_binop(m, e, "&&", lane, out); return;
    case TE_OR: emit_binop(m, e, "||", lane, out); return;
    case TE_NOT:
        sb_puts(out, "(!");
        emit(m, e->a, lane, out);
        sb_puts(out, ")");
        return;
    case TE_SELECT: /* C's ?: evaluates only the chosen branch, as guards need */
        sb_puts(out, "(");
        emit(m, e->a, lane, out);
        sb_puts(out, " ? ");
        emit(m, e->b, lane, out);
        sb_puts(out, " : ");
        emit(m, e->c, lane, out);
        sb_puts(out, ")");
        return;
    case TE_CAST:
        if (s == TE_BOOL) {
            sb_puts(out, "(");
            emit(m, e->a, lane, out);
            sb_puts(out, " != 0)");
        } else {
            sb_printf(out, "((%s)", scalar_ctype(s));
            emit(m, e->a, lane, out);
            sb_puts(out, ")");
        }
        return;
    case TE_CALL:
        if (s == TE_F32) {
            emit_call2(m, fn_name(e->fn), e->a, e->fn == TE_FN_POW ? e->b : NULL, lane, out);
        } else if (e->fn == TE_FN_ABS && (s == TE_I32 || s == TE_I64)) {
            use_helper(m, H_ABS, s, 1, TE_FN_EXP);
            char name[32];
            snprintf(name, sizeof name, "wpk_abs_%s", scalar_tag(s));
            emit_call2(m, name, e->a, NULL, lane, out);
        } else {
            fail(m, WPK_ERR_UNSUPPORTED, "math function %s of a non-float value", fn_name(e->fn));
        }
        return;
    case TE_BUF_LOAD:
        if (!check_buffer(m, e->buffer)) return;
        if (promoted_lanes(m, e->buffer)) {
            /* a lane of a vector variable (a vector expression emitted lane by lane) */
            if (!lane) {
                fail(m, WPK_ERR_INVALID_ARG, "scalar read of vector buffer '%s'",
                     e->buffer->name);
                return;
            }
            put_slot(out, e->buffer, e->a, e->type.lanes);
            sb_printf(out, "[%s]", lane);
            return;
        }
        put_buf(out, e->buffer);
        sb_puts(out, "[");
        emit(m, e->a, lane, out);
        sb_puts(out, "]");
        return;
    case TE_RAMP:
        if (!lane || e->type.lanes == 1) {
            emit(m, e->a, lane, out);
            return;
        }
        sb_puts(out, "(");
        emit(m, e->a, NULL, out);
        sb_printf(out, " + (%s)%s * ", scalar_ctype(s), lane);
        emit(m, e->b, NULL, out);
        sb_puts(out, ")");
        return;
    case TE_BROADCAST: emit(m, e->a, NULL, out); return;
    case TE_LOAD: case TE_REDUCE:
        fail(m, WPK_ERR_UNSUPPORTED, "a tensor-level %s reached code generation (lower it first)",
             e->kind == TE_LOAD ? "load" : "reduction");
        return;
    }
    fail(m, WPK_ERR_UNSUPPORTED, "expression kind %d", (int)e->kind);
}

/* A vector select whose branches must not run in lanes the condition rejects (loads past a
 * padded edge, division by zero): lane by lane into a temporary, each lane a lazy ?:. The
 * temporary is declared in front of the statement being emitted. */
static void emit_lazy_select(em *m, const te_expr *e, strbuf *out) {
    int lanes = e->type.lanes;
    te_scalar s = e->type.scalar;
    use_type(m, s, lanes);
    int t = m->ntemps++;
    strbuf v = {0};
    emit_scalar(m, e, "wpk_l", &v);
    strbuf decl = {0};
    put_vtype(&decl, s, lanes);
    line(m, "%s wpk_t%d = {0};", decl.s ? decl.s : "", t);
    line(m, "for (int wpk_l = 0; wpk_l < %d; wpk_l++) wpk_t%d[wpk_l] = %s%s;", lanes, t,
         s == TE_BOOL ? "-(int32_t)" : "", v.s ? v.s : "");
    release(m, &v);
    release(m, &decl);
    sb_printf(out, "wpk_t%d", t);
}

static void emit_vhelper(em *m, helper_kind k, te_scalar s, int lanes, te_fn fn, const char *name,
                         const te_expr *a, const te_expr *b, const te_expr *c, strbuf *out) {
    use_helper(m, k, s, lanes, fn);
    put_hname(out, name, s, lanes);
    sb_puts(out, "(");
    emit(m, a, NULL, out);
    if (b) {
        sb_puts(out, ", ");
        emit(m, b, NULL, out);
    }
    if (c) {
        sb_puts(out, ", ");
        emit(m, c, NULL, out);
    }
    sb_puts(out, ")");
}

static void emit_splat_text(em *m, te_scalar s, int lanes, const char *text, strbuf *out) {
    use_helper(m, H_SPLAT, vec_scalar(s), lanes, TE_FN_EXP);
    put_hname(out, "splat", s, lanes);
    sb_printf(out, s == TE_BOOL ? "(-(int32_t)%s)" : "(%s)", text);
}

static void emit_vload(em *m, const te_expr *e, strbuf *out) {
    const loop_buffer *buf = e->buffer;
    const te_expr *idx = e->a;
    int lanes = e->type.lanes;
    te_scalar s = e->type.scalar;
    if (!check_buffer(m, buf)) return;
    if (promoted_lanes(m, buf)) {
        put_slot(out, buf, idx, lanes);
        return;
    }
    if (s == TE_BOOL) {
        fail(m, WPK_ERR_UNSUPPORTED, "vector load of boolean buffer '%s'", buf->name);
        return;
    }
    if (idx->kind == TE_BROADCAST) { /* every lane reads one element */
        strbuf one = {0};
        put_buf(&one, buf);
        sb_puts(&one, "[");
        emit(m, idx->a, NULL, &one);
        sb_puts(&one, "]");
        emit_splat_text(m, s, lanes, one.s ? one.s : "", out);
        release(m, &one);
        return;
    }
    if (idx->kind == TE_RAMP && idx->a->type.lanes == 1) {
        int64_t stride;
        bool dense = te_is_const_int(idx->b, &stride) && stride == 1;
        helper_kind k = H_LOADS;
        const char *name = "loads";
        if (dense) {
            int64_t mult = multiple(m, idx->a);
            bool aligned = padded_lanes(lanes) == lanes &&
                           buf->align % (lanes * scalar_bytes(s)) == 0 &&
                           (mult == 0 || mult % lanes == 0);
            k = aligned ? H_LOADA : H_LOAD;
            name = aligned ? "loada" : "load";
        }
        use_helper(m, k, s, lanes, TE_FN_EXP);
        put_hname(out, name, s, lanes);
        sb_puts(out, "(");
        put_buf(out, buf);
        sb_puts(out, " + ");
        emit(m, idx->a, NULL, out);
        if (!dense) {
            sb_puts(out, ", ");
            emit(m, idx->b, NULL, out);
        }
        sb_puts(out, ")");
        return;
    }
    /* any other vector index: a gather through an int64 index vector */
    use_helper(m, H_GATHER, s, lanes, TE_FN_EXP);
    put_hname(out, "gather", s, lanes);
    sb_puts(out, "(");
    put_buf(out, buf);
    sb_puts(out, ", ");
    if (idx->type.scalar == TE_I64) {
        emit(m, idx, NULL, out);
    } else {
        sb_puts(out, "__builtin_convertvector(");
        emit(m, idx, NULL, out);
        sb_puts(out, ", ");
        put_vtype(out, TE_I64, lanes);
        sb_puts(out, ")");
    }
    sb_puts(out, ")");
}

static void emit_vcast(em *m, const te_expr *e, strbuf *out) {
    te_scalar to = e->type.scalar, from = e->a->type.scalar;
    int lanes = e->type.lanes;
    use_type(m, to, lanes);
    if (to == TE_BOOL) { /* x != 0 as a 32-bit mask */
        strbuf zero = {0};
        put_int(&zero, from, 0);
        if (from == TE_F32) sb_puts(&zero, ".0f");
        if (from == TE_I64) sb_puts(out, "__builtin_convertvector(");
        sb_puts(out, "(");
        emit(m, e->a, NULL, out);
        sb_puts(out, " != ");
        emit_splat_text(m, from, lanes, zero.s ? zero.s : "0", out);
        sb_puts(out, ")");
        if (from == TE_I64) {
            sb_puts(out, ", ");
            put_vtype(out, TE_I32, lanes);
            sb_puts(out, ")");
        }
        release(m, &zero);
        return;
    }
    if (from == TE_BOOL && to == TE_I32) { /* masks are -1/0, booleans convert to 1/0 */
        sb_puts(out, "(-");
        emit(m, e->a, NULL, out);
        sb_puts(out, ")");
        return;
    }
    sb_puts(out, from == TE_BOOL ? "__builtin_convertvector(-" : "__builtin_convertvector(");
    emit(m, e->a, NULL, out);
    sb_puts(out, ", ");
    put_vtype(out, to, lanes);
    sb_puts(out, ")");
}

/* A vector expression as a C expression of its GCC vector type. */
static void emit_vector(em *m, const te_expr *e, strbuf *out) {
    te_scalar s = e->type.scalar;
    int lanes = e->type.lanes;
    use_type(m, s, lanes);
    switch (e->kind) {
    case TE_INT: case TE_FLOAT: {
        strbuf k = {0};
        emit_scalar(m, e, NULL, &k);
        emit_splat_text(m, s, lanes, k.s ? k.s : "0", out);
        release(m, &k);
        return;
    }
    case TE_VAR: {
        binding *b = lookup(m, e->var);
        if (!b) {
            fail(m, WPK_ERR_INVALID_ARG, "variable '%s_%d' is used outside its loop or let",
                 e->var->name, e->var->id);
            return;
        }
        put_var(out, e->var);
        return;
    }
    case TE_BROADCAST: {
        if (e->a->type.lanes != 1) {
            fail(m, WPK_ERR_UNSUPPORTED, "broadcast of a vector");
            return;
        }
        strbuf k = {0};
        emit(m, e->a, NULL, &k);
        emit_splat_text(m, s, lanes, k.s ? k.s : "0", out);
        release(m, &k);
        return;
    }
    case TE_RAMP:
        if (e->a->type.lanes != 1 || e->b->type.lanes != 1 || s == TE_F32 || s == TE_BOOL) {
            fail(m, WPK_ERR_UNSUPPORTED, "ramp of vectors or of non-integers");
            return;
        }
        emit_vhelper(m, H_RAMP, s, lanes, TE_FN_EXP, "ramp", e->a, e->b, NULL, out);
        return;
    case TE_BUF_LOAD: emit_vload(m, e, out); return;
    case TE_ADD: case TE_SUB: case TE_MUL:
        emit_binop(m, e, op_text(e->kind), NULL, out);
        return;
    case TE_DIV: case TE_MOD: {
        int64_t d;
        if (s == TE_F32) {
            if (e->kind == TE_MOD) {
                fail(m, WPK_ERR_UNSUPPORTED, "modulo of float values");
                return;
            }
            emit_binop(m, e, "/", NULL, out);
        } else if (e->b->kind == TE_BROADCAST && te_is_const_int(e->b->a, &d) && d > 0 &&
                   nonneg(m, e->a)) {
            emit_binop(m, e, op_text(e->kind), NULL, out);
        } else {
            bool div = e->kind == TE_DIV;
            emit_vhelper(m, div ? H_VFLOORDIV : H_VFLOORMOD, s, lanes, TE_FN_EXP,
                         div ? "floordiv" : "floormod", e->a, e->b, NULL, out);
        }
        return;
    }
    case TE_MIN: case TE_MAX: {
        bool mn = e->kind == TE_MIN;
        emit_vhelper(m, mn ? H_VMIN : H_VMAX, s, lanes, TE_FN_EXP, mn ? "min" : "max", e->a, e->b,
                     NULL, out);
        return;
    }
    case TE_LT: case TE_LE: case TE_EQ: case TE_NE: {
        /* comparing 32-bit lanes gives the 32-bit mask directly; 64-bit lanes narrow theirs */
        bool wide = e->a->type.scalar == TE_I64;
        use_type(m, TE_I32, lanes);
        if (wide) sb_puts(out, "__builtin_convertvector(");
        emit_binop(m, e, op_text(e->kind), NULL, out);
        if (wide) {
            sb_puts(out, ", ");
            put_vtype(out, TE_I32, lanes);
            sb_puts(out, ")");
        }
        return;
    }
    case TE_AND: case TE_OR: case TE_NOT:
        /* on -1/0 masks the bitwise operators are the logical ones; on other integers not */
        if (s != TE_BOOL) {
            fail(m, WPK_ERR_UNSUPPORTED, "logical and/or/not of non-boolean vectors");
            return;
        }
        if (e->kind == TE_NOT) {
            sb_puts(out, "(~");
            emit(m, e->a, NULL, out);
            sb_puts(out, ")");
        } else {
            emit_binop(m, e, e->kind == TE_AND ? "&" : "|", NULL, out);
        }
        return;
    case TE_SELECT:
        if (has_guarded_work(e->b, e->a) || has_guarded_work(e->c, e->a)) {
            emit_lazy_select(m, e, out);
        } else if (e->a->type.lanes == 1) {
            sb_puts(out, "(");
            emit(m, e->a, NULL, out);
            sb_puts(out, " ? ");
            emit(m, e->b, NULL, out);
            sb_puts(out, " : ");
            emit(m, e->c, NULL, out);
            sb_puts(out, ")");
        } else {
            emit_vhelper(m, H_VSELECT, vec_scalar(s), lanes, TE_FN_EXP, "select", e->a, e->b, e->c,
                         out);
        }
        return;
    case TE_CAST: emit_vcast(m, e, out); return;
    case TE_CALL:
        if (s == TE_F32) {
            use_helper(m, H_VCALL, s, lanes, e->fn);
            put_hname(out, fn_name(e->fn), s, lanes);
            sb_puts(out, "(");
            emit(m, e->a, NULL, out);
            if (e->fn == TE_FN_POW) {
                sb_puts(out, ", ");
                emit(m, e->b, NULL, out);
            }
            sb_puts(out, ")");
        } else if (e->fn == TE_FN_ABS && (s == TE_I32 || s == TE_I64)) {
            use_helper(m, H_ABS, s, 1, TE_FN_EXP);
            emit_vhelper(m, H_VCALL, s, lanes, TE_FN_ABS, "abs", e->a, NULL, NULL, out);
        } else {
            fail(m, WPK_ERR_UNSUPPORTED, "math function %s of a non-float vector", fn_name(e->fn));
        }
        return;
    case TE_LOAD: case TE_REDUCE:
        fail(m, WPK_ERR_UNSUPPORTED, "a tensor-level %s reached code generation (lower it first)",
             e->kind == TE_LOAD ? "load" : "reduction");
        return;
    }
    fail(m, WPK_ERR_UNSUPPORTED, "vector expression kind %d", (int)e->kind);
}

static void emit(em *m, const te_expr *e, const char *lane, strbuf *out) {
    if (m->st != WPK_OK) return;
    if (!e) {
        fail(m, WPK_ERR_INVALID_ARG, "missing expression");
        return;
    }
    int lanes = e->type.lanes;
    if (e->kind == TE_VAR) {
        binding *b = lookup(m, e->var);
        if (b) lanes = b->t.lanes;
    }
    if (lanes > 1 && !lane)
        emit_vector(m, e, out);
    else
        emit_scalar(m, e, lane, out);
}

/* ---- statements ---- */

static void emit_stmt(em *m, const loop_stmt *s);

static bool push_var(em *m, const te_iter *it, te_type t, bool nn, int64_t mult) {
    if (!grow(m, (void **)&m->vars, m->nvars, &m->cap_vars, sizeof *m->vars)) return false;
    m->vars[m->nvars++] = (binding){it, t, nn, mult};
    return true;
}

static bool push_buf(em *m, const loop_buffer *b) {
    if (!grow(m, (void **)&m->bufs, m->nbufs, &m->cap_bufs, sizeof *m->bufs)) return false;
    m->bufs[m->nbufs++] = b;
    return true;
}

static void emit_for(em *m, const loop_stmt *s) {
    if (s->for_kind == LOOP_BIND) {
        fail(m, WPK_ERR_UNSUPPORTED,
             "loop '%s_%d' is bound to GPU axis '%s'; the C target has no GPU axes", s->var->name,
             s->var->id, s->bind_tag ? s->bind_tag : "?");
        return;
    }
    if (s->min->type.lanes != 1 || s->extent->type.lanes != 1 || s->min->type.scalar == TE_F32 ||
        s->extent->type.scalar == TE_F32) {
        fail(m, WPK_ERR_INVALID_ARG, "loop '%s_%d' has a non-integer or vector range", s->var->name,
             s->var->id);
        return;
    }
    strbuf v = {0}, lo = {0}, hi = {0};
    put_var(&v, s->var);
    emit(m, s->min, NULL, &lo);
    int64_t a, n;
    if (te_is_const_int(s->min, &a) && te_is_const_int(s->extent, &n)) {
        put_int(&hi, TE_I64, a + n);
    } else if (te_is_const_int(s->min, &a) && a == 0) {
        emit(m, s->extent, NULL, &hi);
    } else {
        sb_puts(&hi, "(");
        emit(m, s->min, NULL, &hi);
        sb_puts(&hi, " + ");
        emit(m, s->extent, NULL, &hi);
        sb_puts(&hi, ")");
    }
    bool parallel = false;
    if (s->for_kind == LOOP_PARALLEL && m->opt->openmp && !m->in_parallel) {
        /* guided: large first chunks keep static's locality and low overhead, the small last
         * ones let a thread finish the share of one that another process delayed (a static
         * split waits for it). */
        line(m, "#pragma omp parallel for schedule(guided)");
        parallel = true;
    } else if (s->for_kind == LOOP_VECTORIZED && cg_c_simd_safe(s)) {
        line(m, "#pragma omp simd");
    } else if (s->for_kind == LOOP_UNROLLED && te_is_const_int(s->extent, &n) && n > 1) {
        line(m, "#pragma GCC unroll %d", (int)(n < UNROLL_PRAGMA_MAX ? n : UNROLL_PRAGMA_MAX));
    }
    if (m->st == WPK_OK && !(v.oom || lo.oom || hi.oom))
        line(m, "for (int64_t %s = %s; %s < %s; %s++) {", v.s, lo.s, v.s, hi.s, v.s);
    else if (m->st == WPK_OK)
        fail(m, WPK_ERR_NOMEM, "out of memory");
    release(m, &v);
    release(m, &lo);
    release(m, &hi);
    if (!push_var(m, s->var, te_t(TE_I64), nonneg(m, s->min), 1)) return;
    bool was = m->in_parallel;
    m->in_parallel |= parallel;
    m->indent++;
    emit_stmt(m, s->body);
    m->indent--;
    m->in_parallel = was;
    m->nvars--;
    line(m, "}");
}

static void emit_store(em *m, const loop_stmt *s) {
    const loop_buffer *buf = s->buffer;
    if (!check_buffer(m, buf)) return;
    int lanes = s->value->type.lanes;
    if (s->index->type.lanes != lanes) {
        fail(m, WPK_ERR_INVALID_ARG, "store to '%s' has %d index lanes for %d value lanes",
             buf->name, s->index->type.lanes, lanes);
        return;
    }
    if (s->value->type.scalar != buf->dtype) {
        fail(m, WPK_ERR_INVALID_ARG, "store to '%s' of a %s value into a %s buffer", buf->name,
             scalar_ctype(s->value->type.scalar), scalar_ctype(buf->dtype));
        return;
    }
    strbuf out = {0};
    if (promoted_lanes(m, buf)) {
        put_slot(&out, buf, s->index, lanes);
        sb_puts(&out, " = ");
        emit(m, s->value, NULL, &out);
        sb_puts(&out, ";");
    } else if (lanes == 1) {
        put_buf(&out, buf);
        sb_puts(&out, "[");
        emit(m, s->index, NULL, &out);
        sb_puts(&out, "] = ");
        emit(m, s->value, NULL, &out);
        sb_puts(&out, ";");
    } else if (buf->dtype == TE_BOOL) {
        fail(m, WPK_ERR_UNSUPPORTED, "vector store into boolean buffer '%s'", buf->name);
    } else {
        const te_expr *idx = s->index;
        te_scalar ts = buf->dtype;
        int64_t stride;
        if (idx->kind == TE_RAMP && idx->a->type.lanes == 1) {
            bool dense = te_is_const_int(idx->b, &stride) && stride == 1;
            const char *name = "stores";
            helper_kind k = H_STORES;
            if (dense) {
                int64_t mult = multiple(m, idx->a);
                bool aligned = padded_lanes(lanes) == lanes &&
                               buf->align % (lanes * scalar_bytes(ts)) == 0 &&
                               (mult == 0 || mult % lanes == 0);
                k = aligned ? H_STOREA : H_STORE;
                name = aligned ? "storea" : "store";
            }
            use_helper(m, k, ts, lanes, TE_FN_EXP);
            put_hname(&out, name, ts, lanes);
            sb_puts(&out, "(");
            put_buf(&out, buf);
            sb_puts(&out, " + ");
            emit(m, idx->a, NULL, &out);
            if (!dense) {
                sb_puts(&out, ", ");
                emit(m, idx->b, NULL, &out);
            }
        } else {
            /* scatter: lanes are written in order, so equal indices keep the last lane */
            use_helper(m, H_SCATTER, ts, lanes, TE_FN_EXP);
            put_hname(&out, "scatter", ts, lanes);
            sb_puts(&out, "(");
            put_buf(&out, buf);
            sb_puts(&out, ", ");
            if (idx->type.scalar == TE_I64) {
                emit(m, idx, NULL, &out);
            } else {
                sb_puts(&out, "__builtin_convertvector(");
                emit(m, idx, NULL, &out);
                sb_puts(&out, ", ");
                put_vtype(&out, TE_I64, lanes);
                sb_puts(&out, ")");
            }
        }
        sb_puts(&out, ", ");
        emit(m, s->value, NULL, &out);
        sb_puts(&out, ");");
    }
    if (m->st == WPK_OK) line(m, "%s", out.s);
    release(m, &out);
}

static void emit_let(em *m, const loop_stmt *s) {
    te_type t = s->value->type;
    strbuf v = {0}, ty = {0};
    emit(m, s->value, NULL, &v);
    if (t.lanes > 1)
        put_vtype(&ty, t.scalar, t.lanes);
    else
        sb_puts(&ty, scalar_ctype(t.scalar));
    /* braces: unrolled copies of a body bind the same let variable more than once */
    line(m, "{");
    m->indent++;
    if (m->st == WPK_OK && !v.oom && !ty.oom) {
        strbuf name = {0};
        put_var(&name, s->var);
        line(m, "const %s %s = %s;", ty.s, name.s ? name.s : "", v.s);
        release(m, &name);
    }
    release(m, &v);
    release(m, &ty);
    if (push_var(m, s->var, t, t.lanes == 1 && nonneg(m, s->value),
                 t.lanes == 1 ? multiple(m, s->value) : 1)) {
        emit_stmt(m, s->body);
        m->nvars--;
    }
    m->indent--;
    line(m, "}");
}

static void emit_if(em *m, const loop_stmt *s) {
    if (s->cond->type.lanes != 1) {
        fail(m, WPK_ERR_UNSUPPORTED, "if on a vector condition (predicate the stores instead)");
        return;
    }
    strbuf c = {0};
    emit(m, s->cond, NULL, &c);
    if (m->st == WPK_OK) line(m, "if (%s) {", c.oom ? "" : c.s);
    release(m, &c);
    m->indent++;
    emit_stmt(m, s->body);
    m->indent--;
    if (s->else_body) {
        line(m, "} else {");
        m->indent++;
        emit_stmt(m, s->else_body);
        m->indent--;
    }
    line(m, "}");
}

static void emit_alloc(em *m, const loop_stmt *s) {
    const loop_buffer *b = s->buffer;
    if (b->size <= 0) {
        fail(m, WPK_ERR_INVALID_ARG, "allocation of '%s' has %" PRId64 " elements", b->name,
             b->size);
        return;
    }
    if (b->scope == LOOP_SCOPE_SHARED || b->scope == LOOP_SCOPE_ARG) {
        fail(m, WPK_ERR_UNSUPPORTED, "allocation of '%s' in %s scope", b->name,
             b->scope == LOOP_SCOPE_SHARED ? "GPU shared" : "argument");
        return;
    }
    int64_t bytes = b->size * scalar_bytes(b->dtype);
    strbuf name = {0};
    put_buf(&name, b);
    const char *n = name.s ? name.s : "";
    const char *ct = scalar_ctype(b->dtype);
    bool heap = b->scope == LOOP_SCOPE_HEAP || bytes > STACK_LIMIT_BYTES;
    /* at least a cache line, and at least what the buffer claims (aligned loads rely on it) */
    int align = b->align > 64 && (b->align & (b->align - 1)) == 0 ? b->align : 64;
    const int lanes = heap ? 0 : cg_c_vector_slots(s);
    bool regs = lanes > 0;
    line(m, "{");
    m->indent++;
    if (regs) {
        use_type(m, b->dtype, lanes);
        strbuf decl = {0};
        put_vtype(&decl, b->dtype, lanes);
        for (int64_t j = 0; j < b->size / lanes; j++)
            sb_printf(&decl, "%s %s_v%" PRId64, j ? "," : "", n, j);
        sb_puts(&decl, ";");
        if (decl.oom) fail(m, WPK_ERR_NOMEM, "out of memory");
        else line(m, "%s", decl.s);
        sb_free(&decl);
        if (!grow(m, (void **)&m->regs, m->nregs, &m->cap_regs, sizeof *m->regs)) regs = false;
        else m->regs[m->nregs++] = (promoted){b, lanes};
    } else if (heap) {
        /* aligned_alloc wants a multiple of the alignment */
        int64_t rounded = (bytes + align - 1) / align * align;
        line(m, "%s *restrict %s = (%s *)aligned_alloc(%d, %" PRId64 ");", ct, n, ct, align,
             rounded);
        /* the kernel ABI has no status to return: failing loudly beats computing garbage */
        line(m, "if (!%s) abort();", n);
    } else {
        line(m, "_Alignas(%d) %s %s[%" PRId64 "];", align, ct, n, b->size);
    }
    if (m->st == WPK_OK && push_buf(m, b)) {
        emit_stmt(m, s->body);
        m->nbufs--;
    }
    if (regs) m->nregs--;
    if (heap) line(m, "free(%s);", n);
    m->indent--;
    line(m, "}");
    release(m, &name);
}

static void emit_stmt(em *m, const loop_stmt *s) {
    if (m->st != WPK_OK) return;
    if (!s) {
        fail(m, WPK_ERR_INVALID_ARG, "missing statement");
        return;
    }
    switch (s->kind) {
    case LOOP_FOR: emit_for(m, s); return;
    case LOOP_LET: emit_let(m, s); return;
    case LOOP_IF: emit_if(m, s); return;
    case LOOP_STORE: emit_store(m, s); return;
    case LOOP_ALLOC: emit_alloc(m, s); return;
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++) emit_stmt(m, s->stmts[i]);
        return;
    }
    fail(m, WPK_ERR_INVALID_ARG, "statement kind %d", (int)s->kind);
}

static void collect_stored(em *m, const loop_stmt *s) {
    if (!s || m->st != WPK_OK) return;
    switch (s->kind) {
    case LOOP_STORE:
        for (int i = 0; i < m->nstored; i++)
            if (m->stored[i] == s->buffer) return;
        if (grow(m, (void **)&m->stored, m->nstored, &m->cap_stored, sizeof *m->stored))
            m->stored[m->nstored++] = s->buffer;
        return;
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++) collect_stored(m, s->stmts[i]);
        return;
    case LOOP_IF: collect_stored(m, s->else_body); /* fall through */
    default: collect_stored(m, s->body); return;
    }
}

/* ---- the helpers' text ---- */

static int cmp_type(const void *x, const void *y) {
    const vtype *a = x, *b = y;
    if (a->s != b->s) return (int)a->s - (int)b->s;
    return a->lanes - b->lanes;
}

static int cmp_helper(const void *x, const void *y) {
    const helper *a = x, *b = y;
    if (a->kind != b->kind) return (int)a->kind - (int)b->kind;
    if (a->s != b->s) return (int)a->s - (int)b->s;
    if (a->lanes != b->lanes) return a->lanes - b->lanes;
    return (int)a->fn - (int)b->fn;
}

static void put_helper(strbuf *o, const helper *h) {
    const char *tag = scalar_tag(h->s), *ct = scalar_ctype(h->s);
    char T[32];
    snprintf(T, sizeof T, "wpk_%sx%d", tag, h->lanes);
    int L = h->lanes, P = padded_lanes(h->lanes);
    int bytes = L * scalar_bytes(h->s);
    /* a loop over the used lanes; `l` is the lane */
    char lanes_loop[64];
    snprintf(lanes_loop, sizeof lanes_loop, "for (int l = 0; l < %d; l++)", L);
    switch (h->kind) {
    case H_FLOORDIV:
        sb_printf(o, "static inline %s wpk_floordiv_%s(%s a, %s b) {\n"
                     "    %s q = a / b, r = a %% b;\n"
                     "    return (r != 0 && (r < 0) != (b < 0)) ? q - 1 : q;\n}\n",
                  ct, tag, ct, ct, ct);
        return;
    case H_FLOORMOD:
        sb_printf(o, "static inline %s wpk_floormod_%s(%s a, %s b) {\n"
                     "    %s r = a %% b;\n"
                     "    return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;\n}\n",
                  ct, tag, ct, ct, ct);
        return;
    case H_MIN: /* a NaN first operand propagates, as in the reference kernels (x < 0 ? 0 : x) */
        sb_printf(o, "static inline %s wpk_min_%s(%s a, %s b) { return b < a ? b : a; }\n", ct, tag,
                  ct, ct);
        return;
    case H_MAX:
        sb_printf(o, "static inline %s wpk_max_%s(%s a, %s b) { return a < b ? b : a; }\n", ct, tag,
                  ct, ct);
        return;
    case H_ABS:
        sb_printf(o, "static inline %s wpk_abs_%s(%s a) { return a < 0 ? -a : a; }\n", ct, tag, ct);
        return;
    case H_SPLAT:
        /* an initializer list, which compilers turn into one broadcast (a lane loop they
         * build lane by lane) */
        sb_printf(o, "static inline %s wpk_splat_%s(%s x) {\n    return (%s){", T, T + 4, ct, T);
        for (int l = 0; l < P; l++) sb_puts(o, l == 0 ? "x" : l % 16 ? ", x" : ",\n        x");
        sb_puts(o, "};\n}\n");
        return;
    case H_RAMP:
        sb_printf(o, "static inline %s wpk_ramp_%s(%s base, %s stride) {\n    %s v;\n"
                     "    for (int l = 0; l < %d; l++) v[l] = base + (%s)l * stride;\n"
                     "    return v;\n}\n",
                  T, T + 4, ct, ct, T, P, ct);
        return;
    case H_LOAD:
        /* memcpy: no alignment or aliasing assumption, one unaligned vector load */
        sb_printf(o, "static inline %s wpk_load_%s(const %s *p) {\n    %s v%s;\n"
                     "    memcpy(&v, p, %d);\n    return v;\n}\n",
                  T, T + 4, ct, T, L == P ? "" : " = {0}", bytes);
        return;
    case H_LOADA:
        sb_printf(o, "static inline %s wpk_loada_%s(const %s *p) {\n    %s v;\n"
                     "    memcpy(&v, __builtin_assume_aligned(p, %d), %d);\n    return v;\n}\n",
                  T, T + 4, ct, T, bytes, bytes);
        return;
    case H_LOADS:
        sb_printf(o, "static inline %s wpk_loads_%s(const %s *p, int64_t stride) {\n"
                     "    %s v = {0};\n    %s v[l] = p[l * stride];\n    return v;\n}\n",
                  T, T + 4, ct, T, lanes_loop);
        return;
    case H_GATHER:
        sb_printf(o, "static inline %s wpk_gather_%s(const %s *p, wpk_i64x%d i) {\n"
                     "    %s v = {0};\n    %s v[l] = p[i[l]];\n    return v;\n}\n",
                  T, T + 4, ct, L, T, lanes_loop);
        return;
    case H_STORE:
        sb_printf(o, "static inline void wpk_store_%s(%s *p, %s v) { memcpy(p, &v, %d); }\n", T + 4,
                  ct, T, bytes);
        return;
    case H_STOREA:
        sb_printf(o, "static inline void wpk_storea_%s(%s *p, %s v) {\n"
                     "    memcpy(__builtin_assume_aligned(p, %d), &v, %d);\n}\n",
                  T + 4, ct, T, bytes, bytes);
        return;
    case H_STORES:
        sb_printf(o, "static inline void wpk_stores_%s(%s *p, int64_t stride, %s v) {\n"
                     "    %s p[l * stride] = v[l];\n}\n",
                  T + 4, ct, T, lanes_loop);
        return;
    case H_SCATTER:
        sb_printf(o, "static inline void wpk_scatter_%s(%s *p, wpk_i64x%d i, %s v) {\n"
                     "    %s p[i[l]] = v[l];\n}\n",
                  T + 4, ct, L, T, lanes_loop);
        return;
    case H_VMIN: case H_VMAX: {
        bool mn = h->kind == H_VMIN;
        /* a whole-vector compare and a bitwise select: b where the compare holds, else a (a
           NaN in either keeps a, as the scalar ?: does). A per-lane ?: loop was often left lane
           by lane by gcc: a depthwise conv's clip ran 224 scalar compares per tile against 14
           vector ones, 23 -> 73 GFLOP/s. */
        sb_printf(o, "static inline %s wpk_%s_%s(%s a, %s b) {\n"
                     "    __typeof__(a < b) m = %s;\n"
                     "    return (%s)((m & (__typeof__(m))b) | (~m & (__typeof__(m))a));\n}\n",
                  T, mn ? "min" : "max", T + 4, T, T, mn ? "b < a" : "a < b", T);
        return;
    }
    case H_VFLOORDIV: case H_VFLOORMOD: {
        const char *nm = h->kind == H_VFLOORDIV ? "floordiv" : "floormod";
        /* only the used lanes: padding lanes may hold a zero divisor */
        sb_printf(o, "static inline %s wpk_%s_%s(%s a, %s b) {\n    %s r = a;\n"
                     "    %s r[l] = wpk_%s_%s(a[l], b[l]);\n    return r;\n}\n",
                  T, nm, T + 4, T, T, T, lanes_loop, nm, tag);
        return;
    }
    case H_VSELECT:
        if (h->s == TE_I64)
            sb_printf(o, "static inline %s wpk_select_%s(wpk_i32x%d m, %s a, %s b) {\n"
                         "    %s w = __builtin_convertvector(m, %s);\n"
                         "    return (w & a) | (~w & b);\n}\n",
                      T, T + 4, L, T, T, T, T);
        else if (h->s == TE_I32)
            sb_printf(o, "static inline %s wpk_select_%s(wpk_i32x%d m, %s a, %s b) {\n"
                         "    return (m & a) | (~m & b);\n}\n",
                      T, T + 4, L, T, T);
        else
            sb_printf(o, "static inline %s wpk_select_%s(wpk_i32x%d m, %s a, %s b) {\n"
                         "    return (%s)((m & (wpk_i32x%d)a) | (~m & (wpk_i32x%d)b));\n}\n",
                      T, T + 4, L, T, T, T, L, L);
        return;
    case H_VCALL:
        if (h->fn == TE_FN_POW)
            sb_printf(o, "static inline %s wpk_powf_%s(%s a, %s b) {\n    %s r = a;\n"
                         "    %s r[l] = powf(a[l], b[l]);\n    return r;\n}\n",
                      T, T + 4, T, T, T, lanes_loop);
        else if (h->s != TE_F32)
            sb_printf(o, "static inline %s wpk_abs_%s(%s a) {\n    %s r = a;\n"
                         "    %s r[l] = wpk_abs_%s(a[l]);\n    return r;\n}\n",
                      T, T + 4, T, T, lanes_loop, tag);
        else
            sb_printf(o, "static inline %s wpk_%s_%s(%s a) {\n    %s r = a;\n"
                         "    %s r[l] = %s(a[l]);\n    return r;\n}\n",
                      T, fn_name(h->fn), T + 4, T, T, lanes_loop, fn_name(h->fn));
        return;
    }
}

static void emit_args(em *m) {
    const loop_func *f = m->f;
    for (int i = 0; i < f->nargs; i++) {
        const loop_buffer *b = f->args[i];
        if (!b) {
            fail(m, WPK_ERR_INVALID_ARG, "argument %d has no buffer", i);
            return;
        }
        bool stored = false;
        for (int j = 0; j < m->nstored; j++) stored |= m->stored[j] == b;
        const char *q = i < f->ninputs && !stored ? "const " : "";
        const char *ct = scalar_ctype(b->dtype);
        strbuf name = {0};
        put_buf(&name, b);
        int esz = scalar_bytes(b->dtype);
        bool pow2 = b->align > 0 && (b->align & (b->align - 1)) == 0;
        if (pow2 && b->align >= esz)
            line(m, "%s%s *restrict %s = (%s%s *)__builtin_assume_aligned(args[%d], %d);", q, ct,
                 name.s ? name.s : "", q, ct, i, b->align);
        else
            line(m, "%s%s *restrict %s = (%s%s *)args[%d];", q, ct, name.s ? name.s : "", q, ct, i);
        release(m, &name);
        push_buf(m, b);
    }
    if (f->nargs == 0) line(m, "(void)args;");
}

wpk_status cg_c_emit(wpk_context *ctx, const loop_func *f, const cg_c_options *opt, strbuf *out) {
    if (!f || !out)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "C codegen: no kernel or no output buffer");
    if (!valid_c_ident(f->name))
        return wpk_error(ctx, WPK_ERR_INVALID_ARG,
                         "C codegen: kernel name '%s' is not a C identifier (it is the symbol "
                         "looked up in the compiled object)",
                         f->name ? f->name : "(null)");
    cg_c_options def = cg_c_default_options();
    em m = {.ctx = ctx, .f = f, .opt = opt ? opt : &def};
    if (f->nargs < 0 || f->ninputs < 0 || f->ninputs > f->nargs || (f->nargs && !f->args))
        fail(&m, WPK_ERR_INVALID_ARG, "%d arguments with %d inputs", f->nargs, f->ninputs);
    collect_stored(&m, f->body);
    m.indent = 1;
    emit_args(&m);
    emit_stmt(&m, f->body);
    if (m.body.oom) fail(&m, WPK_ERR_NOMEM, "out of memory");

    strbuf src = {0}; /* the whole text, appended to out in one piece */
    if (m.st == WPK_OK) {
        sb_printf(&src, "/* generated by wpk cg_c: kernel %s, vector_bits %d%s */\n", f->name,
                  m.opt->vector_bits, m.opt->openmp ? ", openmp" : "");
        sb_puts(&src, "#include <math.h>\n#include <stdbool.h>\n#include <stdint.h>\n"
                      "#include <stdlib.h>\n#include <string.h>\n");
        if (m.ntypes) {
            qsort(m.types, (size_t)m.ntypes, sizeof *m.types, cmp_type);
            sb_puts(&src, "\n");
            for (int i = 0; i < m.ntypes; i++) {
                const vtype *t = &m.types[i];
                sb_printf(&src, "typedef %s wpk_%sx%d __attribute__((vector_size(%d)));\n",
                          scalar_ctype(t->s), scalar_tag(t->s), t->lanes,
                          padded_lanes(t->lanes) * scalar_bytes(t->s));
            }
        }
        if (m.nhelpers) {
            qsort(m.helpers, (size_t)m.nhelpers, sizeof *m.helpers, cmp_helper);
            sb_puts(&src, "\n");
            for (int i = 0; i < m.nhelpers; i++) put_helper(&src, &m.helpers[i]);
        }
        sb_printf(&src, "\nvoid %s(void *const *args);\nvoid %s(void *const *args) {\n",
                  f->name, f->name);
        sb_puts(&src, m.body.s ? m.body.s : "");
        sb_puts(&src, "}\n");
        if (src.oom) fail(&m, WPK_ERR_NOMEM, "out of memory");
    }
    if (m.st == WPK_OK) {
        size_t before = out->len;
        sb_puts(out, src.s);
        if (out->len == before) fail(&m, WPK_ERR_NOMEM, "out of memory");
    }
    sb_free(&src);
    sb_free(&m.body);
    wpk_free(m.types);
    wpk_free(m.helpers);
    wpk_free(m.vars);
    wpk_free(m.bufs);
    wpk_free(m.stored);
    wpk_free(m.regs);
    return m.st;
}
