/* tile_cuda.c -- per-thread tiles: whether a local (stack) buffer allocated outside the
 * thread-bound loops -- a block tile's accumulator -- can live privately in each thread, and the
 * compact layout it then has there. Indices are split into a thread part (one bound axis per
 * dimension) and a local part; the thread keeps the local parts only, so a fully unrolled tile
 * is indexed by constants and stays in registers. */
#include <stdlib.h>
#include <string.h>

#include "codegen/cuda/emit_cuda.h"

/* ---- linear index forms: k + sum coef * var over loop variables (lets seen through) ---- */

static bool lin_add_term(linform *L, const te_iter *v, int64_t c) {
    for (int i = 0; i < L->n; i++)
        if (L->var[i] == v) return !__builtin_add_overflow(L->coef[i], c, &L->coef[i]);
    if (L->n == LIN_MAX) return false;
    L->var[L->n] = v;
    L->coef[L->n++] = c;
    return true;
}

bool cg_cuda_linearize(em *m, const te_expr *e, int64_t scale, linform *L, int depth) {
    int64_t v, t;
    if (!e || depth > 64 || e->type.lanes != 1) return false;
    switch (e->kind) {
    case TE_INT:
        return !__builtin_mul_overflow(e->i, scale, &t) && !__builtin_add_overflow(L->k, t, &L->k);
    case TE_VAR: {
        binding *b = cg_lookup(&m->p, e->var);
        if (!b) return false;
        if (b->value) return cg_cuda_linearize(m, b->value, scale, L, depth + 1);
        return lin_add_term(L, e->var, scale);
    }
    case TE_ADD: return cg_cuda_linearize(m, e->a, scale, L, depth + 1) && cg_cuda_linearize(m, e->b, scale, L, depth + 1);
    case TE_SUB:
        return cg_cuda_linearize(m, e->a, scale, L, depth + 1) && cg_cuda_linearize(m, e->b, -scale, L, depth + 1);
    case TE_MUL:
        if (te_is_const_int(e->b, &v))
            return !__builtin_mul_overflow(scale, v, &t) && cg_cuda_linearize(m, e->a, t, L, depth + 1);
        if (te_is_const_int(e->a, &v))
            return !__builtin_mul_overflow(scale, v, &t) && cg_cuda_linearize(m, e->b, t, L, depth + 1);
        return false;
    case TE_CAST:
        return e->a->type.scalar != TE_F32 && e->a->type.scalar != TE_BOOL &&
               cg_cuda_linearize(m, e->a, scale, L, depth + 1);
    default: return false;
    }
}

/* The row-major strides and shape of b (a 0-d buffer as one dimension). */
static int dims_of(const loop_buffer *b, int64_t *shape, int64_t *stride) {
    int nd = b->ndim > 0 ? b->ndim : 1;
    for (int d = 0; d < nd; d++) shape[d] = b->ndim > 0 ? b->shape[d] : b->size;
    stride[nd - 1] = 1;
    for (int d = nd - 2; d >= 0; d--) stride[d] = stride[d + 1] * shape[d + 1];
    return nd;
}

/* The dimension a term of coefficient c that takes more than one value must lie in: the
 * outermost one whose stride divides c (in any other it would overflow into that one); -1. */
static int home_of(int64_t c, int nd, const int64_t *shape, const int64_t *stride) {
    for (int d = 0; d < nd; d++)
        if (shape[d] > 1 && c % stride[d] == 0) return d;
    return -1;
}

/* Split flat index L of b into per-dimension parts; false (with *why) when the split is not
 * exact: a term no dimension's stride divides, a part that may leave its dimension, two
 * thread axes in one dimension, a variable of unknown range. A variable of one value is a
 * constant, except a thread axis's (tails of partitioned loops), which goes where the axis
 * lives (H), or, when it is 0 and the axis varies nowhere, is left out. */
bool cg_cuda_split_index(em *m, const loop_buffer *b, const linform *L, const homes *H, split *S,
                        const char **why) {
    int64_t shape[LOOP_MAX_DIMS], stride[LOOP_MAX_DIMS];
    int nd = dims_of(b, shape, stride);
    const binding *bd[LIN_MAX];
    int64_t k = L->k;
    for (int i = 0; i < L->n; i++) {
        bd[i] = cg_lookup(&m->p, L->var[i]);
        S->dim_of[i] = -1;
        if (L->coef[i] == 0) continue;
        if (!bd[i] || !bd[i]->ranged) {
            *why = "an index uses a variable of unknown range";
            return false;
        }
        if (bd[i]->lo == bd[i]->hi && !is_thread(bd[i]->axis)) k += L->coef[i] * bd[i]->lo;
    }
    if (k < 0 || k >= b->size) {
        *why = "an index's constant part lies outside the buffer";
        return false;
    }
    int64_t tlo[LOOP_MAX_DIMS], thi[LOOP_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        S->digit[d] = (k / stride[d]) % shape[d];
        S->llo[d] = S->lhi[d] = S->digit[d];
        S->axis[d] = AX_NONE;
        S->coef[d] = 0;
        tlo[d] = thi[d] = 0;
    }
    for (int i = 0; i < L->n; i++) {
        int64_t c = L->coef[i];
        if (c == 0) continue;
        bool single = bd[i]->lo == bd[i]->hi, thread = is_thread(bd[i]->axis);
        if (single && !thread) continue;
        int d = home_of(c, nd, shape, stride);
        if (single) {
            int h = H ? H->dim[bd[i]->axis] : -1;
            if (h >= 0 && c == H->a[bd[i]->axis] * stride[h]) {
                d = h;
            } else if (bd[i]->lo == 0) {
                S->dim_of[i] = nd; /* adds 0, and its axis is nowhere else */
                continue;
            } else {
                *why = "a thread axis of one value has no place of its own";
                return false;
            }
        }
        if (d < 0) {
            *why = "an index term fits no dimension";
            return false;
        }
        int64_t a = c / stride[d];
        S->dim_of[i] = d;
        S->dcoef[i] = a;
        int64_t x = a * bd[i]->lo, y = a * bd[i]->hi;
        int64_t lo = x < y ? x : y, hi = x < y ? y : x;
        if (thread) {
            if (S->axis[d] != AX_NONE) {
                *why = "two thread axes index one dimension";
                return false;
            }
            S->axis[d] = bd[i]->axis;
            S->coef[d] = a;
            tlo[d] = lo, thi[d] = hi;
        } else {
            S->llo[d] += lo;
            S->lhi[d] += hi;
        }
    }
    for (int d = 0; d < nd; d++)
        if (S->llo[d] + tlo[d] < 0 || S->lhi[d] + thi[d] >= shape[d]) {
            *why = "an index part may leave its dimension";
            return false;
        }
    return true;
}

/* ---- per-thread tiles: the analysis of a stack buffer allocated at block level ---- */

typedef struct tile_scan {
    const loop_buffer *buf;
    int phase;                       /* 0: where the thread axes live; 1: every access split */
    homes H;
    bool ok;
    const char *why;
    bool any;                        /* some access seen */
    bool any_thread;                 /* some access has a thread part */
    int axis[LOOP_MAX_DIMS];
    int64_t coef[LOOP_MAX_DIMS];
    int64_t lmin[LOOP_MAX_DIMS], lmax[LOOP_MAX_DIMS];
    unsigned write_axes;             /* thread axes enclosing some write */
} tile_scan;

static void tile_access(em *m, tile_scan *T, const te_expr *index, bool write) {
    if (!T->ok) return;
    if (index->type.lanes != 1) {
        T->ok = false, T->why = "it is accessed with vectors";
        return;
    }
    linform L = {0};
    split S;
    if (!cg_cuda_linearize(m, index, 1, &L, 0)) {
        T->ok = false, T->why = "an index is not linear in the loop variables";
        return;
    }
    if (T->phase == 0) {
        int64_t shape[LOOP_MAX_DIMS], stride[LOOP_MAX_DIMS];
        int nd = dims_of(T->buf, shape, stride);
        for (int i = 0; i < L.n; i++) {
            const binding *bd = cg_lookup(&m->p, L.var[i]);
            if (L.coef[i] == 0 || !bd || !is_thread(bd->axis) || !bd->ranged || bd->lo == bd->hi)
                continue;
            int d = home_of(L.coef[i], nd, shape, stride);
            if (d < 0) continue; /* phase 1 says why */
            int64_t a = L.coef[i] / stride[d];
            if (T->H.dim[bd->axis] >= 0 && (T->H.dim[bd->axis] != d || T->H.a[bd->axis] != a)) {
                T->ok = false, T->why = "threads index it differently in different places";
                return;
            }
            T->H.dim[bd->axis] = d;
            T->H.a[bd->axis] = a;
        }
        return;
    }
    if (!cg_cuda_split_index(m, T->buf, &L, &T->H, &S, &T->why)) {
        T->ok = false;
        return;
    }
    int nd = T->buf->ndim > 0 ? T->buf->ndim : 1;
    bool thread = false;
    for (int d = 0; d < nd; d++) thread |= S.axis[d] != AX_NONE;
    if (!T->any) {
        for (int d = 0; d < nd; d++) {
            T->axis[d] = S.axis[d];
            T->coef[d] = S.coef[d];
            T->lmin[d] = S.llo[d];
            T->lmax[d] = S.lhi[d];
        }
        T->any = true;
    } else {
        for (int d = 0; d < nd; d++) {
            if (T->axis[d] != S.axis[d] || T->coef[d] != S.coef[d]) {
                T->ok = false, T->why = "threads index it differently in different places";
                return;
            }
            if (S.llo[d] < T->lmin[d]) T->lmin[d] = S.llo[d];
            if (S.lhi[d] > T->lmax[d]) T->lmax[d] = S.lhi[d];
        }
    }
    T->any_thread |= thread;
    if (write) T->write_axes |= m->thread_axes;
}

static void tile_expr(em *m, tile_scan *T, const te_expr *e) {
    if (!e || !T->ok) return;
    if (e->kind == TE_BUF_LOAD && e->buffer == T->buf) tile_access(m, T, e->a, false);
    tile_expr(m, T, e->a);
    tile_expr(m, T, e->b);
    tile_expr(m, T, e->c);
}

static void tile_stmt(em *m, tile_scan *T, const loop_stmt *s) {
    if (!s || !T->ok || m->p.st != WPK_OK) return;
    switch (s->kind) {
    case LOOP_FOR: {
        tile_expr(m, T, s->min);
        tile_expr(m, T, s->extent);
        binding b = cg_cuda_loop_binding(m, s);
        if (!cg_push_var(&m->p, b)) return;
        unsigned saved = m->thread_axes;
        if (is_thread(b.axis)) m->thread_axes |= 1u << b.axis;
        tile_stmt(m, T, s->body);
        m->thread_axes = saved;
        m->p.nvars--;
        return;
    }
    case LOOP_LET:
        tile_expr(m, T, s->value);
        if (!cg_push_var(&m->p, cg_let_binding(&m->p, s))) return;
        tile_stmt(m, T, s->body);
        m->p.nvars--;
        return;
    case LOOP_IF:
        tile_expr(m, T, s->cond);
        tile_stmt(m, T, s->body);
        tile_stmt(m, T, s->else_body);
        return;
    case LOOP_STORE:
        tile_expr(m, T, s->index);
        tile_expr(m, T, s->value);
        if (s->buffer == T->buf) tile_access(m, T, s->index, true);
        return;
    case LOOP_ALLOC: tile_stmt(m, T, s->body); return;
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++) tile_stmt(m, T, s->stmts[i]);
        return;
    case LOOP_BARRIER: return;
    }
}

/* Decide how a block-level stack buffer lives in each thread. */
bool cg_cuda_plan_tile(em *m, const loop_stmt *alloc, priv_plan *p) {
    const loop_buffer *b = alloc->buffer;
    tile_scan T = {.buf = b, .ok = true, .why = ""};
    for (int a = 0; a < AX_COUNT; a++) T.H.dim[a] = -1;
    int nvars = m->p.nvars;
    unsigned axes = m->thread_axes;
    for (T.phase = 0; T.phase < 2 && T.ok; T.phase++) {
        tile_stmt(m, &T, alloc->body);
        m->p.nvars = nvars;
        m->thread_axes = axes;
    }
    memset(p, 0, sizeof *p);
    for (int d = 0; d < LOOP_MAX_DIMS; d++) p->axis[d] = AX_NONE;
    p->buf = b;
    p->size = b->size;
    if (m->p.st != WPK_OK) return false;
    int nd = b->ndim > 0 ? b->ndim : 1;
    /* an axis of one thread (block dim 1) picks nothing: writes inside its loops are fine */
    for (int a = AX_TX; a <= AX_TZ; a++)
        if (m->dim[a] <= 1) T.write_axes &= ~(1u << a);
    if (T.ok && T.any_thread) {
        unsigned sig = 0;
        int64_t size = 1;
        for (int d = 0; d < nd && T.ok; d++) {
            if (T.lmin[d] < 0) T.ok = false, T.why = "a local index part may be negative";
            p->ext[d] = T.lmax[d] + 1;
            p->axis[d] = T.axis[d];
            p->coef[d] = T.coef[d];
            if (T.axis[d] != AX_NONE) {
                if (sig & (1u << T.axis[d])) T.ok = false, T.why = "one thread axis indexes two dimensions";
                sig |= 1u << T.axis[d];
                /* threads' parts must not overlap, or two threads would share an element */
                if (T.coef[d] < p->ext[d]) T.ok = false, T.why = "threads' parts of it overlap";
            }
            size *= p->ext[d];
        }
        if (T.ok && (T.write_axes & ~sig))
            T.ok = false, T.why = "a thread-bound loop writes it at indices its axis does not pick";
        if (T.ok) {
            p->compact = true;
            p->size = size;
            return true;
        }
    } else if (T.ok && !T.write_axes) {
        return true; /* every thread computes the same values: each keeps its own copy */
    } else if (T.ok) {
        T.why = "a thread-bound loop writes it at indices no thread axis picks";
    }
    cg_fail(&m->p, WPK_ERR_UNSUPPORTED,
         "local buffer '%s' is allocated outside the thread-bound loops and its elements cannot "
         "be kept per thread (%s): compute it at the innermost thread loop, or in shared scope",
         b->name, T.why);
    return false;
}
