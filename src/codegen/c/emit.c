/* emit.c -- loop IR -> C source: one kernel function `void NAME(void *const *args)` and the
 * vector typedefs and static inline helpers (floor division, vector loads, stores, splats,
 * lane-wise math) that its body uses, each emitted once. */
#include "codegen/c/cg_c.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/target.h"
#include "codegen/printer.h"
#include "loop/facts.h"

/* Stack buffers larger than this go to the heap: OpenMP worker threads have small stacks
 * (OMP_STACKSIZE, often 2-8 MiB), and a local array is meant for accumulators anyway. */
#define STACK_LIMIT_BYTES (128 * 1024)
/* `#pragma GCC unroll` asks for at most this many copies of a leftover unrolled loop. */
#define UNROLL_PRAGMA_MAX 32
/* At most this many vector variables stand for one allocation. Why variables at all: gcc 12
 * keeps a register tile's array in registers too, but copies all of it between two register
 * sets on every trip of the reduction loop around the tile (16 FMAs and 32 moves for a
 * 16-accumulator tile), and spills tiles of more than 16. */
#define PROMOTE_MAX_VECTORS 64

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

/* A local buffer emitted as vector variables of `lanes` lanes: NAME_vJ holds elements
 * [J * lanes, (J + 1) * lanes). */
typedef struct promoted {
    const loop_buffer *b;
    int lanes;
} promoted;

/* The C dialect's state; the printer first, so that its hooks get back here. */
typedef struct em {
    cg_printer p;
    const cg_c_options *opt;
    bool in_parallel;
    vtype *types;
    int ntypes, cap_types;
    helper *helpers;
    int nhelpers, cap_helpers;
    promoted *regs;             /* visible allocations emitted as vector variables */
    int nregs, cap_regs;
} em;

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
    if (!cg_grow(&m->p, (void **)&m->types, m->ntypes, &m->cap_types, sizeof *m->types)) return;
    m->types[m->ntypes++] = (vtype){s, lanes};
}

static void use_helper(em *m, helper_kind k, te_scalar s, int lanes, te_fn fn) {
    for (int i = 0; i < m->nhelpers; i++) {
        helper *h = &m->helpers[i];
        if (h->kind == k && h->s == s && h->lanes == lanes && (k != H_VCALL || h->fn == fn)) return;
    }
    if (!cg_grow(&m->p, (void **)&m->helpers, m->nhelpers, &m->cap_helpers, sizeof *m->helpers)) return;
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


/* ---- facts for vector code ---- */

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
    cg_put_buf(out, b);
    sb_printf(out, "_v%" PRId64, base / lanes);
}

/* ---- expressions ---- */

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

/* A vector select whose branches must not run in lanes the condition rejects (loads past a
 * padded edge, division by zero): lane by lane into a temporary, each lane a lazy ?:. The
 * temporary is declared in front of the statement being emitted. */
static void emit_lazy_select(em *m, const te_expr *e, strbuf *out) {
    int lanes = e->type.lanes;
    te_scalar s = e->type.scalar;
    use_type(m, s, lanes);
    int t = m->p.ntemps++;
    strbuf v = {0};
    cg_expr(&m->p, e, CG_LANE_VAR, &v);
    strbuf decl = {0};
    put_vtype(&decl, s, lanes);
    cg_line(&m->p, "%s wpk_t%d = {0};", decl.s ? decl.s : "", t);
    cg_line(&m->p, "for (int wpk_l = 0; wpk_l < %d; wpk_l++) wpk_t%d[wpk_l] = %s%s;", lanes, t,
         s == TE_BOOL ? "-(int32_t)" : "", v.s ? v.s : "");
    cg_release(&m->p, &v);
    cg_release(&m->p, &decl);
    sb_printf(out, "wpk_t%d", t);
}

static void emit_vhelper(em *m, helper_kind k, te_scalar s, int lanes, te_fn fn, const char *name,
                         const te_expr *a, const te_expr *b, const te_expr *c, strbuf *out) {
    use_helper(m, k, s, lanes, fn);
    put_hname(out, name, s, lanes);
    sb_puts(out, "(");
    cg_expr(&m->p, a, CG_NO_LANE, out);
    if (b) {
        sb_puts(out, ", ");
        cg_expr(&m->p, b, CG_NO_LANE, out);
    }
    if (c) {
        sb_puts(out, ", ");
        cg_expr(&m->p, c, CG_NO_LANE, out);
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
    if (!cg_check_buffer(&m->p, buf)) return;
    if (promoted_lanes(m, buf)) {
        put_slot(out, buf, idx, lanes);
        return;
    }
    if (s == TE_BOOL) {
        cg_fail(&m->p, WPK_ERR_UNSUPPORTED, "vector load of boolean buffer '%s'", buf->name);
        return;
    }
    if (idx->kind == TE_BROADCAST) { /* every lane reads one element */
        strbuf one = {0};
        cg_put_buf(&one, buf);
        sb_puts(&one, "[");
        cg_expr(&m->p, idx->a, CG_NO_LANE, &one);
        sb_puts(&one, "]");
        emit_splat_text(m, s, lanes, one.s ? one.s : "", out);
        cg_release(&m->p, &one);
        return;
    }
    if (idx->kind == TE_RAMP && idx->a->type.lanes == 1) {
        int64_t stride;
        bool dense = te_is_const_int(idx->b, &stride) && stride == 1;
        helper_kind k = H_LOADS;
        const char *name = "loads";
        if (dense) {
            int64_t mult = cg_multiple(&m->p, idx->a);
            bool aligned = padded_lanes(lanes) == lanes &&
                           buf->align % (lanes * scalar_bytes(s)) == 0 &&
                           (mult == 0 || mult % lanes == 0);
            k = aligned ? H_LOADA : H_LOAD;
            name = aligned ? "loada" : "load";
        }
        use_helper(m, k, s, lanes, TE_FN_EXP);
        put_hname(out, name, s, lanes);
        sb_puts(out, "(");
        cg_put_buf(out, buf);
        sb_puts(out, " + ");
        cg_expr(&m->p, idx->a, CG_NO_LANE, out);
        if (!dense) {
            sb_puts(out, ", ");
            cg_expr(&m->p, idx->b, CG_NO_LANE, out);
        }
        sb_puts(out, ")");
        return;
    }
    /* any other vector index: a gather through an int64 index vector */
    use_helper(m, H_GATHER, s, lanes, TE_FN_EXP);
    put_hname(out, "gather", s, lanes);
    sb_puts(out, "(");
    cg_put_buf(out, buf);
    sb_puts(out, ", ");
    if (idx->type.scalar == TE_I64) {
        cg_expr(&m->p, idx, CG_NO_LANE, out);
    } else {
        sb_puts(out, "__builtin_convertvector(");
        cg_expr(&m->p, idx, CG_NO_LANE, out);
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
        cg_expr(&m->p, e->a, CG_NO_LANE, out);
        sb_puts(out, " != ");
        emit_splat_text(m, from, lanes, zero.s ? zero.s : "0", out);
        sb_puts(out, ")");
        if (from == TE_I64) {
            sb_puts(out, ", ");
            put_vtype(out, TE_I32, lanes);
            sb_puts(out, ")");
        }
        cg_release(&m->p, &zero);
        return;
    }
    if (from == TE_BOOL && to == TE_I32) { /* masks are -1/0, booleans convert to 1/0 */
        sb_puts(out, "(-");
        cg_expr(&m->p, e->a, CG_NO_LANE, out);
        sb_puts(out, ")");
        return;
    }
    sb_puts(out, from == TE_BOOL ? "__builtin_convertvector(-" : "__builtin_convertvector(");
    cg_expr(&m->p, e->a, CG_NO_LANE, out);
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
        if (e->kind == TE_INT) put_int(&k, s, e->i);
        else cg_put_float(&m->p, &k, e->f);
        emit_splat_text(m, s, lanes, k.s ? k.s : "0", out);
        cg_release(&m->p, &k);
        return;
    }
    case TE_VAR: {
        cg_binding *b = cg_lookup(&m->p, e->var);
        if (!b) {
            cg_fail(&m->p, WPK_ERR_INVALID_ARG, "variable '%s_%d' is used outside its loop or let",
                 e->var->name, e->var->id);
            return;
        }
        cg_put_var(out, e->var);
        return;
    }
    case TE_BROADCAST: {
        if (e->a->type.lanes != 1) {
            cg_fail(&m->p, WPK_ERR_UNSUPPORTED, "broadcast of a vector");
            return;
        }
        strbuf k = {0};
        cg_expr(&m->p, e->a, CG_NO_LANE, &k);
        emit_splat_text(m, s, lanes, k.s ? k.s : "0", out);
        cg_release(&m->p, &k);
        return;
    }
    case TE_RAMP:
        if (e->a->type.lanes != 1 || e->b->type.lanes != 1 || s == TE_F32 || s == TE_BOOL) {
            cg_fail(&m->p, WPK_ERR_UNSUPPORTED, "ramp of vectors or of non-integers");
            return;
        }
        emit_vhelper(m, H_RAMP, s, lanes, TE_FN_EXP, "ramp", e->a, e->b, NULL, out);
        return;
    case TE_BUF_LOAD: emit_vload(m, e, out); return;
    case TE_ADD: case TE_SUB: case TE_MUL:
        cg_binop(&m->p, e, cg_op_text(e->kind), CG_NO_LANE, out);
        return;
    case TE_DIV: case TE_MOD: {
        int64_t d;
        if (s == TE_F32) {
            if (e->kind == TE_MOD) {
                cg_fail(&m->p, WPK_ERR_UNSUPPORTED, "modulo of float values");
                return;
            }
            cg_binop(&m->p, e, "/", CG_NO_LANE, out);
        } else if (e->b->kind == TE_BROADCAST && te_is_const_int(e->b->a, &d) && d > 0 &&
                   cg_nonneg(&m->p, e->a)) {
            cg_binop(&m->p, e, cg_op_text(e->kind), CG_NO_LANE, out);
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
        cg_binop(&m->p, e, cg_op_text(e->kind), CG_NO_LANE, out);
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
            cg_fail(&m->p, WPK_ERR_UNSUPPORTED, "logical and/or/not of non-boolean vectors");
            return;
        }
        if (e->kind == TE_NOT) {
            sb_puts(out, "(~");
            cg_expr(&m->p, e->a, CG_NO_LANE, out);
            sb_puts(out, ")");
        } else {
            cg_binop(&m->p, e, e->kind == TE_AND ? "&" : "|", CG_NO_LANE, out);
        }
        return;
    case TE_SELECT:
        if (has_guarded_work(e->b, e->a) || has_guarded_work(e->c, e->a)) {
            emit_lazy_select(m, e, out);
        } else if (e->a->type.lanes == 1) {
            sb_puts(out, "(");
            cg_expr(&m->p, e->a, CG_NO_LANE, out);
            sb_puts(out, " ? ");
            cg_expr(&m->p, e->b, CG_NO_LANE, out);
            sb_puts(out, " : ");
            cg_expr(&m->p, e->c, CG_NO_LANE, out);
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
            put_hname(out, cg_fn_name(e->fn), s, lanes);
            sb_puts(out, "(");
            cg_expr(&m->p, e->a, CG_NO_LANE, out);
            if (e->fn == TE_FN_POW) {
                sb_puts(out, ", ");
                cg_expr(&m->p, e->b, CG_NO_LANE, out);
            }
            sb_puts(out, ")");
        } else if (e->fn == TE_FN_ABS && (s == TE_I32 || s == TE_I64)) {
            use_helper(m, H_ABS, s, 1, TE_FN_EXP);
            emit_vhelper(m, H_VCALL, s, lanes, TE_FN_ABS, "abs", e->a, NULL, NULL, out);
        } else {
            cg_fail(&m->p, WPK_ERR_UNSUPPORTED, "math function %s of a non-float vector", cg_fn_name(e->fn));
        }
        return;
    case TE_LOAD: case TE_REDUCE:
        cg_fail(&m->p, WPK_ERR_UNSUPPORTED, "a tensor-level %s reached code generation (lower it first)",
             e->kind == TE_LOAD ? "load" : "reduction");
        return;
    }
    cg_fail(&m->p, WPK_ERR_UNSUPPORTED, "vector expression kind %d", (int)e->kind);
}

/* ---- statements ---- */

static void c_store(cg_printer *p, const loop_stmt *s) {
    em *m = (em *)p;
    const loop_buffer *buf = s->buffer;
    int lanes = s->value->type.lanes;
    strbuf out = {0};
    if (promoted_lanes(m, buf)) {
        put_slot(&out, buf, s->index, lanes);
        sb_puts(&out, " = ");
        cg_expr(&m->p, s->value, CG_NO_LANE, &out);
        sb_puts(&out, ";");
    } else if (lanes == 1) {
        cg_put_buf(&out, buf);
        sb_puts(&out, "[");
        cg_expr(&m->p, s->index, CG_NO_LANE, &out);
        sb_puts(&out, "] = ");
        cg_expr(&m->p, s->value, CG_NO_LANE, &out);
        sb_puts(&out, ";");
    } else if (buf->dtype == TE_BOOL) {
        cg_fail(&m->p, WPK_ERR_UNSUPPORTED, "vector store into boolean buffer '%s'", buf->name);
    } else {
        const te_expr *idx = s->index;
        te_scalar ts = buf->dtype;
        int64_t stride;
        if (idx->kind == TE_RAMP && idx->a->type.lanes == 1) {
            bool dense = te_is_const_int(idx->b, &stride) && stride == 1;
            const char *name = "stores";
            helper_kind k = H_STORES;
            if (dense) {
                int64_t mult = cg_multiple(&m->p, idx->a);
                bool aligned = padded_lanes(lanes) == lanes &&
                               buf->align % (lanes * scalar_bytes(ts)) == 0 &&
                               (mult == 0 || mult % lanes == 0);
                k = aligned ? H_STOREA : H_STORE;
                name = aligned ? "storea" : "store";
            }
            use_helper(m, k, ts, lanes, TE_FN_EXP);
            put_hname(&out, name, ts, lanes);
            sb_puts(&out, "(");
            cg_put_buf(&out, buf);
            sb_puts(&out, " + ");
            cg_expr(&m->p, idx->a, CG_NO_LANE, &out);
            if (!dense) {
                sb_puts(&out, ", ");
                cg_expr(&m->p, idx->b, CG_NO_LANE, &out);
            }
        } else {
            /* scatter: lanes are written in order, so equal indices keep the last lane */
            use_helper(m, H_SCATTER, ts, lanes, TE_FN_EXP);
            put_hname(&out, "scatter", ts, lanes);
            sb_puts(&out, "(");
            cg_put_buf(&out, buf);
            sb_puts(&out, ", ");
            if (idx->type.scalar == TE_I64) {
                cg_expr(&m->p, idx, CG_NO_LANE, &out);
            } else {
                sb_puts(&out, "__builtin_convertvector(");
                cg_expr(&m->p, idx, CG_NO_LANE, &out);
                sb_puts(&out, ", ");
                put_vtype(&out, TE_I64, lanes);
                sb_puts(&out, ")");
            }
        }
        sb_puts(&out, ", ");
        cg_expr(&m->p, s->value, CG_NO_LANE, &out);
        sb_puts(&out, ");");
    }
    if (m->p.st == WPK_OK) cg_line(&m->p, "%s", out.s);
    cg_release(&m->p, &out);
}

/* A let's block and declaration; the value first, so that what it hoists (a lazy select's
 * temporary) stands in front of the block. */
static void c_let_open(cg_printer *p, const loop_stmt *s) {
    em *m = (em *)p;
    te_type t = s->value->type;
    strbuf v = {0}, ty = {0};
    cg_expr(p, s->value, CG_NO_LANE, &v);
    if (t.lanes > 1)
        put_vtype(&ty, t.scalar, t.lanes);
    else
        sb_puts(&ty, scalar_ctype(t.scalar));
    cg_line(p, "{");
    m->p.indent++;
    if (m->p.st == WPK_OK && !v.oom && !ty.oom) {
        strbuf name = {0};
        cg_put_var(&name, s->var);
        cg_line(p, "const %s %s = %s;", ty.s, name.s ? name.s : "", v.s);
        cg_release(p, &name);
    }
    cg_release(p, &v);
    cg_release(p, &ty);
}

static void c_alloc(cg_printer *p, const loop_stmt *s) {
    em *m = (em *)p;
    const loop_buffer *b = s->buffer;
    if (b->size <= 0) {
        cg_fail(&m->p, WPK_ERR_INVALID_ARG, "allocation of '%s' has %" PRId64 " elements", b->name,
             b->size);
        return;
    }
    if (b->scope == LOOP_SCOPE_SHARED || b->scope == LOOP_SCOPE_ARG) {
        cg_fail(&m->p, WPK_ERR_UNSUPPORTED, "allocation of '%s' in %s scope", b->name,
             b->scope == LOOP_SCOPE_SHARED ? "GPU shared" : "argument");
        return;
    }
    int64_t bytes = b->size * scalar_bytes(b->dtype);
    strbuf name = {0};
    cg_put_buf(&name, b);
    const char *n = name.s ? name.s : "";
    const char *ct = scalar_ctype(b->dtype);
    bool heap = b->scope == LOOP_SCOPE_HEAP || bytes > STACK_LIMIT_BYTES;
    /* at least a cache line, and at least what the buffer claims (aligned loads rely on it) */
    int align = b->align > 64 && (b->align & (b->align - 1)) == 0 ? b->align : 64;
    const int lanes = heap ? 0 : loop_vector_slots(s, PROMOTE_MAX_VECTORS);
    bool regs = lanes > 0;
    cg_line(&m->p, "{");
    m->p.indent++;
    if (regs) {
        use_type(m, b->dtype, lanes);
        strbuf decl = {0};
        put_vtype(&decl, b->dtype, lanes);
        for (int64_t j = 0; j < b->size / lanes; j++)
            sb_printf(&decl, "%s %s_v%" PRId64, j ? "," : "", n, j);
        sb_puts(&decl, ";");
        if (decl.oom) cg_fail(&m->p, WPK_ERR_NOMEM, "out of memory");
        else cg_line(&m->p, "%s", decl.s);
        sb_free(&decl);
        if (!cg_grow(&m->p, (void **)&m->regs, m->nregs, &m->cap_regs, sizeof *m->regs)) regs = false;
        else m->regs[m->nregs++] = (promoted){b, lanes};
    } else if (heap) {
        /* aligned_alloc wants a multiple of the alignment */
        int64_t rounded = (bytes + align - 1) / align * align;
        cg_line(&m->p, "%s *restrict %s = (%s *)aligned_alloc(%d, %" PRId64 ");", ct, n, ct, align,
             rounded);
        /* the kernel ABI has no status to return: failing loudly beats computing garbage */
        cg_line(&m->p, "if (!%s) abort();", n);
    } else {
        cg_line(&m->p, "_Alignas(%d) %s %s[%" PRId64 "];", align, ct, n, b->size);
    }
    cg_alloc_body(p, s);
    if (regs) m->nregs--;
    if (heap) cg_line(&m->p, "free(%s);", n);
    m->p.indent--;
    cg_line(&m->p, "}");
    cg_release(&m->p, &name);
}

/* ---- the rest of the dialect ---- */

static const char *c_ctype(cg_printer *p, te_scalar s) {
    (void)p;
    return scalar_ctype(s);
}

static const char *c_tag(cg_printer *p, te_scalar s) {
    (void)p;
    return scalar_tag(s);
}

static void c_put_int(cg_printer *p, strbuf *out, te_scalar s, int64_t v) {
    (void)p;
    put_int(out, s, v);
}

static bool c_use_helper(cg_printer *p, cg_helper h, te_scalar s) {
    static const helper_kind KIND[] = {H_FLOORDIV, H_FLOORMOD, H_MIN, H_MAX, H_ABS};
    use_helper((em *)p, KIND[h], s, 1, TE_FN_EXP);
    return true;
}

static void c_vector(cg_printer *p, const te_expr *e, strbuf *out) { emit_vector((em *)p, e, out); }

/* A scalar load, or a lane of a vector load emitted lane by lane. */
static void c_load(cg_printer *p, const te_expr *e, int lane, strbuf *out) {
    if (!cg_check_buffer(p, e->buffer)) return;
    if (promoted_lanes((em *)p, e->buffer)) {
        /* a lane of a vector variable */
        if (lane == CG_NO_LANE) {
            cg_fail(p, WPK_ERR_INVALID_ARG, "scalar read of vector buffer '%s'", e->buffer->name);
            return;
        }
        put_slot(out, e->buffer, e->a, e->type.lanes);
        sb_puts(out, "[");
        cg_put_lane(out, lane);
        sb_puts(out, "]");
        return;
    }
    cg_put_buf(out, e->buffer);
    sb_puts(out, "[");
    cg_expr(p, e->a, lane, out);
    sb_puts(out, "]");
}

static void c_ramp(cg_printer *p, const te_expr *e, int lane, strbuf *out) {
    if (lane == CG_NO_LANE || e->type.lanes == 1) {
        cg_expr(p, e->a, lane, out);
        return;
    }
    sb_puts(out, "(");
    cg_expr(p, e->a, CG_NO_LANE, out);
    sb_printf(out, " + (%s)", scalar_ctype(e->type.scalar));
    cg_put_lane(out, lane);
    sb_puts(out, " * ");
    cg_expr(p, e->b, CG_NO_LANE, out);
    sb_puts(out, ")");
}

static int c_loop_open(cg_printer *p, const loop_stmt *s) {
    em *m = (em *)p;
    int was = m->in_parallel;
    int64_t n;
    if (s->for_kind == LOOP_PARALLEL && m->opt->openmp && !m->in_parallel) {
        /* guided: large first chunks keep static's locality and low overhead, the small last
         * ones let a thread finish the share of one that another process delayed (a static
         * split waits for it). */
        cg_line(p, "#pragma omp parallel for schedule(guided)");
        m->in_parallel = true;
    } else if (s->for_kind == LOOP_VECTORIZED && loop_simd_safe(s)) {
        cg_line(p, "#pragma omp simd");
    } else if (s->for_kind == LOOP_UNROLLED && te_is_const_int(s->extent, &n) && n > 1) {
        cg_line(p, "#pragma GCC unroll %d", (int)(n < UNROLL_PRAGMA_MAX ? n : UNROLL_PRAGMA_MAX));
    }
    return was;
}

static void c_loop_close(cg_printer *p, const loop_stmt *s, int token) {
    (void)s;
    ((em *)p)->in_parallel = token;
}

static void c_bound_loop(cg_printer *p, const loop_stmt *s) {
    cg_fail(p, WPK_ERR_UNSUPPORTED,
            "loop '%s_%d' is bound to GPU axis '%s'; the C target has no GPU axes", s->var->name,
            s->var->id, s->bind_tag ? s->bind_tag : "?");
}

static void c_barrier(cg_printer *p, const loop_stmt *s) {
    (void)s;
    cg_fail(p, WPK_ERR_UNSUPPORTED, "a GPU barrier; the C target has no GPU blocks");
}

static const cg_dialect C_DIALECT = {
    .name = "C", .nan = "NAN", .inf = "INFINITY", .neg_inf = "(-INFINITY)",
    .incr_pre = "", .incr_post = "++", .bool_lanes_are_masks = true,
    .ctype = c_ctype, .tag = c_tag, .put_int = c_put_int, .use_helper = c_use_helper,
    .vector = c_vector, .load = c_load, .ramp = c_ramp, .loop_open = c_loop_open,
    .loop_close = c_loop_close, .bound_loop = c_bound_loop, .let_open = c_let_open,
    .store = c_store, .alloc = c_alloc, .barrier = c_barrier,
};

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
                      T, cg_fn_name(h->fn), T + 4, T, T, lanes_loop, cg_fn_name(h->fn));
        return;
    }
}

static void emit_args(em *m) {
    const loop_func *f = m->p.f;
    for (int i = 0; i < f->nargs; i++) {
        const loop_buffer *b = f->args[i];
        if (!b) {
            cg_fail(&m->p, WPK_ERR_INVALID_ARG, "argument %d has no buffer", i);
            return;
        }
        const char *q = i < f->ninputs && !cg_is_stored(&m->p, b) ? "const " : "";
        const char *ct = scalar_ctype(b->dtype);
        strbuf name = {0};
        cg_put_buf(&name, b);
        int esz = scalar_bytes(b->dtype);
        bool pow2 = b->align > 0 && (b->align & (b->align - 1)) == 0;
        if (pow2 && b->align >= esz)
            cg_line(&m->p, "%s%s *restrict %s = (%s%s *)__builtin_assume_aligned(args[%d], %d);", q, ct,
                 name.s ? name.s : "", q, ct, i, b->align);
        else
            cg_line(&m->p, "%s%s *restrict %s = (%s%s *)args[%d];", q, ct, name.s ? name.s : "", q, ct, i);
        cg_release(&m->p, &name);
        cg_push_buf(&m->p, b);
    }
    if (f->nargs == 0) cg_line(&m->p, "(void)args;");
}

wpk_status cg_c_emit(wpk_context *ctx, const loop_func *f, const cg_c_options *opt, strbuf *out) {
    if (!f || !out)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "C codegen: no kernel or no output buffer");
    if (!cg_valid_ident(f->name))
        return wpk_error(ctx, WPK_ERR_INVALID_ARG,
                         "C codegen: kernel name '%s' is not a C identifier (it is the symbol "
                         "looked up in the compiled object)",
                         f->name ? f->name : "(null)");
    cg_c_options def = cg_c_default_options();
    em m = {.opt = opt ? opt : &def};
    cg_printer_init(&m.p, &C_DIALECT, ctx, f);
    if (f->nargs < 0 || f->ninputs < 0 || f->ninputs > f->nargs || (f->nargs && !f->args))
        cg_fail(&m.p, WPK_ERR_INVALID_ARG, "%d arguments with %d inputs", f->nargs, f->ninputs);
    cg_collect_stored(&m.p);
    m.p.indent = 1;
    emit_args(&m);
    cg_stmt(&m.p, f->body);
    if (m.p.body.oom) cg_fail(&m.p, WPK_ERR_NOMEM, "out of memory");

    strbuf src = {0}; /* the whole text, appended to out in one piece */
    if (m.p.st == WPK_OK) {
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
        sb_puts(&src, m.p.body.s ? m.p.body.s : "");
        sb_puts(&src, "}\n");
    }
    wpk_status st = cg_printer_finish(&m.p, &src, out);
    sb_free(&src);
    cg_printer_free(&m.p);
    wpk_free(m.types);
    wpk_free(m.helpers);
    wpk_free(m.regs);
    return st;
}
