/* lower.c -- from a tensor expression and its schedule to a loop nest (loop_lower in lower.h).
 * Per root stage, outermost leaf first: a loop per leaf, every original axis derived from the
 * leaves through the stage's relations (split: parent = min + outer * factor + inner; fuse:
 * outer = fused / extent(inner), inner = fused % extent(inner)), a guard where a split does not
 * divide, reductions initialised at their outermost reduction loop and accumulated innermost.
 * Inline stages are substituted into their readers; compute_at stages are lowered inside their
 * attach loop over the region one iteration of it reads (bounds inference: directly, or
 * through the stages computed deeper inside the same stage, e.g. a GEMM's accumulator), in a
 * buffer of that region's size whose origin moves with the enclosing loops. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "loop/bounds.h"
#include "loop/subst.h"

/* "local" buffers bigger than this go to the heap: a stack frame is not the place for them */
#define STACK_MAX_BYTES (64 * 1024)

static int64_t bytes_of(te_scalar s, int64_t n) {
    switch (s) {
    case TE_BOOL: return n;
    case TE_I32: case TE_F32: return 4 * n;
    case TE_I64: return 8 * n;
    }
    return 8 * n;
}

typedef struct tinfo {
    const te_tensor *t;
    const loop_buffer *buf;            /* NULL until known (a compute_at stage: once placed) */
    const te_expr *mins[TE_MAX_DIMS];  /* the buffer's origin in t's coordinates */
} tinfo;

typedef struct lower {
    te_ctx *c;
    const te_schedule *s;
    tinfo *info;
    int ninfo, cap;
} lower;

static wpk_status nomem(lower *L) {
    L->c->oom = true;
    return wpk_error(L->c->err, WPK_ERR_NOMEM, "out of memory lowering");
}

static wpk_status bad(lower *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static wpk_status bad(lower *L, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return wpk_error(L->c->err, WPK_ERR_INVALID_ARG, "%s", msg);
}

static tinfo *info_of(lower *L, const te_tensor *t) {
    for (int i = 0; i < L->ninfo; i++)
        if (L->info[i].t == t) return &L->info[i];
    return NULL;
}

static tinfo *info_add(lower *L, const te_tensor *t) {
    tinfo *ti = info_of(L, t);
    if (ti) return ti;
    if (L->ninfo == L->cap) {
        int cap = L->cap ? 2 * L->cap : 16;
        tinfo *n = arena_alloc(&L->c->mem, sizeof *n * (size_t)cap);
        if (!n) return NULL;
        if (L->ninfo) memcpy(n, L->info, sizeof *n * (size_t)L->ninfo);
        L->info = n;
        L->cap = cap;
    }
    ti = &L->info[L->ninfo++];
    memset(ti, 0, sizeof *ti);
    ti->t = t;
    return ti;
}

static bool is_inline(const lower *L, const te_tensor *t) {
    const te_stage *st = te_stage_of(L->s, t);
    return st && st->attach == TE_ATTACH_INLINE;
}

/* ---- who reads what (through inline stages) ---- */

/* Whether stage u is computed inside stage p's loops (directly or through other stages). */
static bool attached_inside(const te_stage *u, const te_stage *p) {
    for (int depth = 0; u && u->attach == TE_ATTACH_AT && depth < 1000; depth++) {
        if (u->attach_stage == p) return true;
        u = u->attach_stage;
    }
    return false;
}

/* Whether e reads t, through inline stages and through the stages computed inside `within`
 * (NULL: inline stages only): what `within` reads of those, it reads of what they read. */
static bool reads(const lower *L, const te_expr *e, const te_tensor *t, const te_stage *within,
                  int depth) {
    if (!e || depth > 1000) return false;
    if (e->kind == TE_LOAD) {
        if (e->tensor == t) return true;
        const te_stage *u = te_stage_of(L->s, e->tensor);
        bool through = is_inline(L, e->tensor) || (within && u && attached_inside(u, within));
        if (through && reads(L, e->tensor->body, t, within, depth + 1)) return true;
        for (int i = 0; i < e->nindex; i++)
            if (reads(L, e->index[i], t, within, depth)) return true;
        return false;
    }
    return reads(L, e->a, t, within, depth) || reads(L, e->b, t, within, depth) ||
           reads(L, e->c, t, within, depth);
}

/* The first placeholder e reads (through inline stages) that is not an argument. */
static const te_tensor *missing_input(lower *L, const te_expr *e, int depth) {
    if (!e || depth > 1000) return NULL;
    const te_tensor *m;
    if (e->kind == TE_LOAD) {
        if (e->tensor->kind == TE_PLACEHOLDER && !info_of(L, e->tensor)) return e->tensor;
        if (is_inline(L, e->tensor) && (m = missing_input(L, e->tensor->body, depth + 1))) return m;
        for (int i = 0; i < e->nindex; i++)
            if ((m = missing_input(L, e->index[i], depth))) return m;
        return NULL;
    }
    if ((m = missing_input(L, e->a, depth))) return m;
    if ((m = missing_input(L, e->b, depth))) return m;
    return missing_input(L, e->c, depth);
}

static int leaf_pos(const te_stage *st, const te_iter *it) {
    for (int i = 0; i < st->nleaves; i++)
        if (st->leaves[i] == it) return i;
    return -1;
}

/* Whether stage u, computed inside p, runs inside the loop of p that st is computed at: its
 * attach chain enters p at that leaf or a deeper one (at the same leaf, after st). */
static bool inner_to(const te_schedule *s, const te_stage *u, const te_stage *p,
                     const te_stage *st) {
    const te_stage *entry = u;
    while (entry->attach_stage != p) entry = entry->attach_stage;
    int pu = leaf_pos(p, entry->attach_iter), ps = leaf_pos(p, st->attach_iter);
    if (pu != ps) return pu > ps;
    for (int i = 0; i < s->nstages; i++) {
        if (s->stages[i] == st) return true;
        if (s->stages[i] == entry) return false;
    }
    return false;
}

/* Everything about the schedule that would make lowering wrong, checked before any loop. */
static wpk_status validate(lower *L) {
    const te_schedule *s = L->s;
    for (int i = 0; i < s->nstages; i++) {
        const te_stage *st = s->stages[i];
        const te_tensor *t = st->tensor;
        if (st->attach == TE_ATTACH_INLINE) {
            if (st->is_output || info_of(L, t))
                return bad(L, "compute_inline: stage '%s' is an argument of the kernel (it must be "
                           "stored)", t->name);
            if (t->body->kind == TE_REDUCE)
                return bad(L, "compute_inline: stage '%s' is a reduction", t->name);
            continue;
        }
        const te_tensor *m = missing_input(L, t->body, 0);
        if (m) return bad(L, "lower: placeholder '%s' read by stage '%s' is not an argument of the "
                          "kernel", m->name, t->name);
        if (st->is_output && !info_of(L, t))
            return bad(L, "lower: output '%s' is not an argument of the kernel", t->name);
        if (st->attach == TE_ATTACH_ROOT) continue;
        const te_stage *p = st->attach_stage;
        if (info_of(L, t))
            return bad(L, "compute_at: stage '%s' is an argument of the kernel (arguments are "
                       "computed at the root)", t->name);
        if (!p || p->attach == TE_ATTACH_INLINE)
            return bad(L, "compute_at: stage '%s' is computed inside '%s', which is inlined",
                       t->name, p ? p->tensor->name : "(null)");
        if (leaf_pos(p, st->attach_iter) < 0)
            return bad(L, "compute_at: axis '%s' is not a loop of stage '%s' (where '%s' is "
                       "computed)", st->attach_iter ? st->attach_iter->name : "(null)",
                       p->tensor->name, t->name);
        if (!reads(L, p->tensor->body, t, p, 0))
            return bad(L, "compute_at: stage '%s' reads '%s' neither itself nor through the "
                       "stages computed inside it (the region it needs cannot be inferred)",
                       p->tensor->name, t->name);
        for (int j = 0; j < s->nstages; j++) {
            const te_stage *u = s->stages[j];
            if (u == p || u == st || u->attach == TE_ATTACH_INLINE) continue;
            /* a reader computed inside p after t (deeper, or at the same loop later in the
             * schedule) sees t's buffer */
            if (attached_inside(u, p) && inner_to(s, u, p, st)) continue;
            if (reads(L, u->tensor->body, t, NULL, 0))
                return bad(L, "compute_at: stage '%s' is computed inside '%s' but also read by "
                           "'%s'", t->name, p->tensor->name, u->tensor->name);
        }
    }
    return WPK_OK;
}

/* ---- one stage's loop nest ---- */

typedef struct guard {
    const te_expr *cond;
    bool reduce;       /* involves reduction loops: not for the initialisation */
} guard;

typedef struct nest {
    lower *L;
    const te_stage *st;
    const te_tensor *t;
    const loop_buffer *buf;
    const te_expr *const *mins;   /* the buffer's origin per data axis */
    /* every iter of the stage (roots, then those relations create): extent and value */
    const te_iter **iters;
    int64_t *ext;
    const te_expr **val;
    int niters;
    guard *guards;
    int nguards;
    int first_reduce;            /* position of the outermost reduction leaf (nleaves: none) */
    const te_expr *body;         /* TE body with root axes replaced by values (TE_REDUCE removed) */
    bool reduction;
    te_reduce_op rop;
} nest;

static int iter_index(const nest *N, const te_iter *it) {
    for (int i = 0; i < N->niters; i++)
        if (N->iters[i] == it) return i;
    return -1;
}

static void add_iter(nest *N, const te_iter *it, int64_t ext) {
    int i = iter_index(N, it);
    if (i >= 0) {
        N->ext[i] = ext;
        return;
    }
    N->iters[N->niters] = it;
    N->ext[N->niters] = ext;
    N->val[N->niters] = NULL;
    N->niters++;
}

static wpk_status lower_stage(lower *L, const te_stage *st, const loop_buffer *buf,
                              const te_expr *const *mins, const int64_t *extents,
                              const loop_range_env *env, const loop_stmt **out);

/* The loop-level form of a TE expression whose axes are already replaced by values: inline
 * stages substituted, loads of stored tensors turned into buffer loads relative to their
 * buffer's origin. */
static const te_expr *translate(lower *L, const te_expr *e, int depth) {
    te_ctx *c = L->c;
    if (!e) return NULL;
    if (depth > 1000) {
        wpk_error(c->err, WPK_ERR_INVALID_ARG, "lower: inline stages nest too deep");
        return NULL;
    }
    switch (e->kind) {
    case TE_INT: case TE_FLOAT: case TE_VAR: return e;
    case TE_REDUCE:
        wpk_error(c->err, WPK_ERR_INVALID_ARG, "lower: a reduction inside an expression (only a "
                  "whole compute body may reduce)");
        return NULL;
    case TE_LOAD: {
        const te_tensor *t = e->tensor;
        const te_expr *idx[TE_MAX_DIMS];
        for (int i = 0; i < e->nindex; i++) {
            if (!(idx[i] = translate(L, e->index[i], depth))) return NULL;
            /* buffer indices are I64 whatever integer type the algorithm indexed with */
            if (idx[i]->type.scalar != TE_I64) idx[i] = te_cast(c, te_t(TE_I64), idx[i]);
        }
        if (is_inline(L, t)) {
            const te_iter *axes[TE_MAX_DIMS];
            for (int i = 0; i < t->ndim; i++) axes[i] = t->axes[i];
            return translate(L, loop_subst_expr(c, t->body, t->ndim, axes, idx), depth + 1);
        }
        tinfo *ti = info_of(L, t);
        if (!ti || !ti->buf) {
            wpk_error(c->err, WPK_ERR_INVALID_ARG, "lower: '%s' is read where it is not computed "
                      "(outside the loop it is computed at)", t->name);
            return NULL;
        }
        const loop_buffer *b = ti->buf;
        const te_expr *flat = te_int(c, 0);
        for (int i = 0; i < t->ndim; i++) {
            const te_expr *local = ti->mins[i] ? te_sub(c, idx[i], ti->mins[i]) : idx[i];
            flat = te_add(c, te_mul(c, flat, te_int(c, b->shape[i])), local);
        }
        return loop_load(c, b, loop_simplify_expr(c, flat));
    }
    default: break;
    }
    const te_expr *a = translate(L, e->a, depth), *b = translate(L, e->b, depth),
                  *cc = translate(L, e->c, depth);
    return loop_expr_rebuild(c, e, a, b, cc);
}

static loop_for_kind for_kind(te_annot a) {
    switch (a) {
    case TE_ANNOT_NONE: return LOOP_SERIAL;
    case TE_ANNOT_PARALLEL: return LOOP_PARALLEL;
    case TE_ANNOT_VECTORIZE: return LOOP_VECTORIZED;
    case TE_ANNOT_UNROLL: return LOOP_UNROLLED;
    case TE_ANNOT_BIND: return LOOP_BIND;
    }
    return LOOP_SERIAL;
}

static const loop_stmt *leaf_loop(const nest *N, int pos, const loop_stmt *body) {
    te_ctx *c = N->L->c;
    const te_iter *it = N->st->leaves[pos];
    int k = iter_index(N, it);
    const loop_stmt *f = loop_for(c, it, te_int(c, it->min), te_int(c, N->ext[k]),
                                  for_kind(N->st->annots[pos]), body);
    if (f && N->st->annots[pos] == TE_ANNOT_BIND) ((loop_stmt *)f)->bind_tag = N->st->bind_tags[pos];
    return f;
}

static const loop_stmt *guarded(const nest *N, bool with_reduce, const loop_stmt *s) {
    te_ctx *c = N->L->c;
    const te_expr *cond = NULL;
    for (int i = 0; i < N->nguards; i++) {
        if (N->guards[i].reduce && !with_reduce) continue;
        cond = cond ? te_and(c, cond, N->guards[i].cond) : N->guards[i].cond;
    }
    return cond ? loop_if(c, cond, s, NULL) : s;
}

static const te_expr *store_index(const nest *N) {
    te_ctx *c = N->L->c;
    const te_expr *flat = te_int(c, 0);
    for (int d = 0; d < N->t->ndim; d++) {
        int k = iter_index(N, N->t->axes[d]);
        /* the data axis's local value: its value minus the buffer origin */
        flat = te_add(c, te_mul(c, flat, te_int(c, N->buf->shape[d])), N->val[k]);
    }
    return loop_simplify_expr(c, flat);
}

static const te_expr *init_value(te_ctx *c, te_reduce_op op, te_scalar t) {
    if (t == TE_F32) {
        if (op == TE_REDUCE_SUM) return te_float(c, 0);
        return te_float(c, op == TE_REDUCE_MAX ? -INFINITY : INFINITY);
    }
    int64_t lo = t == TE_I32 ? INT32_MIN : INT64_MIN, hi = t == TE_I32 ? INT32_MAX : INT64_MAX;
    if (t == TE_BOOL) lo = 0, hi = 1;
    return te_int_t(c, te_t(t), op == TE_REDUCE_SUM ? 0 : op == TE_REDUCE_MAX ? lo : hi);
}

/* The initialisation at the outermost reduction loop: loops over the data leaves inside it. */
static const loop_stmt *init_nest(const nest *N) {
    te_ctx *c = N->L->c;
    const loop_stmt *s = loop_store(c, N->buf, store_index(N), init_value(c, N->rop, N->t->dtype));
    s = guarded(N, false, s);
    for (int pos = N->st->nleaves - 1; pos >= N->first_reduce && s; pos--)
        if (!te_iter_is_reduce(N->st, N->st->leaves[pos])) s = leaf_loop(N, pos, s);
    return s;
}

static const loop_stmt *innermost(nest *N) {
    te_ctx *c = N->L->c;
    const te_expr *v = translate(N->L, N->body, 0);
    if (!v) return NULL;
    const te_expr *idx = store_index(N);
    if (N->reduction) {
        const te_expr *old = loop_load(c, N->buf, idx);
        switch (N->rop) {
        case TE_REDUCE_SUM: v = te_add(c, old, v); break;
        case TE_REDUCE_MAX: v = te_max(c, old, v); break;
        case TE_REDUCE_MIN: v = te_min(c, old, v); break;
        }
    }
    return guarded(N, true, loop_store(c, N->buf, idx, v));
}

/* ---- compute_at: the region of t that one iteration of leaf `pos` of N reads ---- */

typedef struct region {
    const te_stage *consumer;  /* whose loop the region is of: stages inside it are seen through */
    const te_expr *lo[TE_MAX_DIMS], *hi[TE_MAX_DIMS];
    bool any;
    bool ok;
    int bad_dim;
} region;

static void collect_region(lower *L, const te_expr *e, const te_tensor *t,
                           const loop_range_env *relax, region *R, int depth) {
    te_ctx *c = L->c;
    if (!e || !R->ok || depth > 1000) return;
    if (e->kind == TE_LOAD) {
        for (int i = 0; i < e->nindex; i++) collect_region(L, e->index[i], t, relax, R, depth);
        const te_stage *su = te_stage_of(L->s, e->tensor);
        if (is_inline(L, e->tensor) ||
            (e->tensor != t && su && attached_inside(su, R->consumer))) {
            /* what an inline stage, or one computed inside the consumer, reads of t at the
             * points the consumer reads of it (its reduction over its whole range; nothing
             * when it does not read t) */
            const te_tensor *u = e->tensor;
            const te_iter *axes[TE_MAX_DIMS];
            for (int i = 0; i < u->ndim; i++) axes[i] = u->axes[i];
            const te_expr *body = u->body;
            const loop_range_env *r = relax;
            if (body->kind == TE_REDUCE) {
                loop_range_env *frames = arena_alloc(&c->mem, sizeof *frames *
                                                              (size_t)(body->nraxes + 1));
                if (!frames) {
                    c->oom = true;
                    R->ok = false;
                    return;
                }
                for (int i = 0; i < body->nraxes; i++) {
                    const te_iter *it = body->raxes[i];
                    if (it->extent < 1) {
                        R->ok = false;
                        return;
                    }
                    frames[i] = loop_env_range(r, it, it->min, it->min + it->extent - 1);
                    r = &frames[i];
                }
                body = body->a;
            }
            collect_region(L, loop_subst_expr(c, body, u->ndim, axes, e->index), t, r, R,
                           depth + 1);
            return;
        }
        if (e->tensor != t) return;
        for (int d = 0; d < t->ndim; d++) {
            const te_expr *lo, *hi;
            const te_expr *ix = e->index[d];
            if (ix->type.scalar != TE_I64) ix = te_cast(c, te_t(TE_I64), ix);
            if (!loop_bounds_relaxed(c, loop_simplify_expr(c, ix), relax, &lo, &hi)) {
                R->ok = false;
                R->bad_dim = d;
                return;
            }
            R->lo[d] = R->any ? te_min(c, R->lo[d], lo) : lo;
            R->hi[d] = R->any ? te_max(c, R->hi[d], hi) : hi;
        }
        R->any = true;
        return;
    }
    collect_region(L, e->a, t, relax, R, depth);
    collect_region(L, e->b, t, relax, R, depth);
    collect_region(L, e->c, t, relax, R, depth);
}

/* The buffer of stage `st` computed at leaf `pos` of N: the region one iteration of that leaf
 * reads, its origin as an expression of the enclosing loops (recorded for the readers). */
static wpk_status prepare_attached(nest *N, int pos, const te_stage *st, const loop_range_env *env) {
    lower *L = N->L;
    te_ctx *c = L->c;
    const te_tensor *t = st->tensor;
    /* the leaves inside the attach loop vary over their whole range; the rest is fixed */
    loop_range_env *frames = arena_alloc(&c->mem, sizeof *frames * (size_t)(N->st->nleaves + 1));
    if (!frames) return nomem(L);
    const loop_range_env *relax = NULL;
    for (int j = pos + 1; j < N->st->nleaves; j++) {
        const te_iter *it = N->st->leaves[j];
        int k = iter_index(N, it);
        frames[j] = loop_env_range(relax, it, it->min, it->min + N->ext[k] - 1);
        relax = &frames[j];
    }
    region R = {.ok = true, .consumer = N->st};
    collect_region(L, N->body, t, relax, &R, 0);
    if (c->oom) return nomem(L);
    if (!R.ok || !R.any)
        return bad(L, "compute_at: cannot bound the region of '%s' that stage '%s' reads at '%s' "
                   "(dimension %d: an index that is not an affine function of the loops)",
                   t->name, N->t->name, N->st->leaves[pos]->name, R.ok ? 0 : R.bad_dim);
    tinfo *ti = info_add(L, t);
    if (!ti) return nomem(L);
    int64_t ext[TE_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) {
        const te_expr *lo = loop_simplify_expr_in(c, R.lo[d], env);
        const te_expr *e = loop_simplify_expr_in(c, te_add(c, te_sub(c, R.hi[d], lo), te_int(c, 1)), env);
        int64_t elo, ehi, llo, lhi;
        if (!lo || !e) return c->oom ? nomem(L) : WPK_ERR_INTERNAL;
        if (!loop_bounds(e, env, &elo, &ehi) || !loop_bounds(lo, env, &llo, &lhi))
            return bad(L, "compute_at: cannot bound the region of '%s' that stage '%s' reads at "
                       "'%s' (dimension %d)", t->name, N->t->name, N->st->leaves[pos]->name, d);
        ext[d] = ehi < t->shape[d] ? ehi : t->shape[d];
        if (ext[d] < 1) ext[d] = 1;
        /* a window that may stick out of the tensor (the tail of a split that does not divide)
         * is shifted inside it: the points the consumer really reads are still covered */
        if (llo < 0 || lhi > t->shape[d] - ext[d])
            lo = loop_simplify_expr_in(
                c, te_min(c, te_max(c, lo, te_int(c, 0)), te_int(c, t->shape[d] - ext[d])), env);
        ti->mins[d] = lo;
    }
    loop_scope scope = LOOP_SCOPE_HEAP;
    if (strcmp(st->scope, "shared") == 0) scope = LOOP_SCOPE_SHARED;
    loop_buffer *b = loop_buffer_new(c, t->name, t->dtype, t->ndim, ext, scope);
    if (!b) return nomem(L);
    if (strcmp(st->scope, "local") == 0 && bytes_of(t->dtype, b->size) <= STACK_MAX_BYTES)
        b->scope = LOOP_SCOPE_STACK;
    ti->buf = b;
    return WPK_OK;
}

/* The prepared stage's loops, then `rest`, inside the allocation of its buffer. */
static wpk_status emit_attached(nest *N, const te_stage *st, const loop_range_env *env,
                                const loop_stmt *rest, const loop_stmt **out) {
    lower *L = N->L;
    te_ctx *c = L->c;
    const tinfo *ti = info_of(L, st->tensor);
    const loop_stmt *producer;
    wpk_status s = lower_stage(L, st, ti->buf, ti->mins, ti->buf->shape, env, &producer);
    if (s) return s;
    const loop_stmt *v[2] = {producer, rest};
    *out = loop_alloc(c, ti->buf, loop_seq(c, 2, v));
    return *out ? WPK_OK : nomem(L);
}

/* The statement for leaves[pos..]: the loop of leaf pos around what runs inside it. */
static wpk_status build(nest *N, int pos, const loop_range_env *env, const loop_stmt **out);

/* What runs inside the loop of leaf pos - 1 (or at the top for pos 0): the initialisation
 * when pos is the outermost reduction leaf, then the loop of leaf pos. */
static wpk_status inside(nest *N, int pos, const loop_range_env *env, const loop_stmt **out) {
    te_ctx *c = N->L->c;
    const loop_stmt *rest;
    wpk_status s;
    if (pos == N->st->nleaves) {
        rest = innermost(N);
        if (!rest) return c->oom ? nomem(N->L) : WPK_ERR_INVALID_ARG;
    } else if ((s = build(N, pos, env, &rest))) {
        return s;
    }
    if (N->reduction && pos == N->first_reduce) {
        const loop_stmt *v[2] = {init_nest(N), rest};
        rest = loop_seq(c, 2, v);
        if (!rest) return nomem(N->L);
    }
    *out = rest;
    return WPK_OK;
}

static wpk_status build(nest *N, int pos, const loop_range_env *env, const loop_stmt **out) {
    const te_iter *it = N->st->leaves[pos];
    int k = iter_index(N, it);
    loop_range_env in = loop_env_range(env, it, it->min, it->min + N->ext[k] - 1);
    const loop_stmt *body;
    wpk_status s;
    /* stages computed at this leaf: their buffers first (what runs inside reads them), their
     * loops at the start of each iteration, in schedule order (wrapping from the last one
     * outwards keeps that order) */
    const te_schedule *sch = N->L->s;
    for (int i = 0; i < sch->nstages; i++) {
        const te_stage *o = sch->stages[i];
        if (o->attach == TE_ATTACH_AT && o->attach_stage == N->st && o->attach_iter == it &&
            (s = prepare_attached(N, pos, o, &in)))
            return s;
    }
    if ((s = inside(N, pos + 1, &in, &body))) return s;
    for (int i = sch->nstages - 1; i >= 0; i--) {
        const te_stage *o = sch->stages[i];
        if (o->attach == TE_ATTACH_AT && o->attach_stage == N->st && o->attach_iter == it &&
            (s = emit_attached(N, o, &in, body, &body)))
            return s;
    }
    *out = leaf_loop(N, pos, body);
    return *out ? WPK_OK : nomem(N->L);
}

static wpk_status lower_stage(lower *L, const te_stage *st, const loop_buffer *buf,
                              const te_expr *const *mins, const int64_t *extents,
                              const loop_range_env *env, const loop_stmt **out) {
    te_ctx *c = L->c;
    const te_tensor *t = st->tensor;
    nest N = {.L = L, .st = st, .t = t, .buf = buf, .mins = mins};
    const te_expr *body = t->body;
    N.reduction = body->kind == TE_REDUCE;
    int nr = N.reduction ? body->nraxes : 0;
    int cap = t->ndim + nr + 2 * st->nrels + 1;
    N.iters = arena_alloc(&c->mem, sizeof *N.iters * (size_t)cap);
    N.ext = arena_alloc(&c->mem, sizeof *N.ext * (size_t)cap);
    N.val = arena_alloc(&c->mem, sizeof *N.val * (size_t)cap);
    N.guards = arena_alloc(&c->mem, sizeof *N.guards * (size_t)(st->nrels + 1));
    if (!N.iters || !N.ext || !N.val || !N.guards) return nomem(L);

    /* extents: data axes over the region, reduction axes over their range, then relations */
    for (int d = 0; d < t->ndim; d++) add_iter(&N, t->axes[d], extents[d]);
    for (int r = 0; r < nr; r++) add_iter(&N, body->raxes[r], body->raxes[r]->extent);
    for (int i = 0; i < st->nrels; i++) {
        const te_relation *r = &st->rels[i];
        if (r->kind == TE_REL_SPLIT) {
            int p = iter_index(&N, r->parent);
            if (p < 0) return wpk_error(c->err, WPK_ERR_INTERNAL, "lower: split of an unknown axis "
                                        "'%s' in stage '%s'", r->parent->name, t->name);
            int64_t e = N.ext[p], f = r->factor;
            /* a factor beyond the extent leaves one outer iteration and no tail */
            add_iter(&N, r->outer, (e + f - 1) / f);
            add_iter(&N, r->inner, f < e ? f : e);
            if (e > f && e % f != 0) {
                N.guards[N.nguards].reduce = te_iter_is_reduce(st, r->parent);
                N.guards[N.nguards].cond = NULL; /* filled once values are known */
                N.nguards++;
            }
        } else {
            int o = iter_index(&N, r->outer), in = iter_index(&N, r->inner);
            if (o < 0 || in < 0) return wpk_error(c->err, WPK_ERR_INTERNAL, "lower: fuse of an "
                                                  "unknown axis in stage '%s'", t->name);
            add_iter(&N, r->parent, N.ext[o] * N.ext[in]);
        }
    }
    for (int i = 0; i < st->nleaves; i++) {
        int k = iter_index(&N, st->leaves[i]);
        if (k < 0) return wpk_error(c->err, WPK_ERR_INTERNAL, "lower: leaf '%s' of stage '%s' "
                                    "comes from no axis", st->leaves[i]->name, t->name);
        if (N.ext[k] < 1 && (st->annots[i] == TE_ANNOT_VECTORIZE || st->annots[i] == TE_ANNOT_UNROLL))
            return bad(L, "%s: axis '%s' of stage '%s' has no constant extent",
                       st->annots[i] == TE_ANNOT_VECTORIZE ? "vectorize" : "unroll",
                       st->leaves[i]->name, t->name);
        N.val[k] = te_var(c, st->leaves[i]);
    }
    /* values: leaves are loop variables; relations, newest first, give their parents' */
    for (int i = st->nrels - 1, g = N.nguards - 1; i >= 0; i--) {
        const te_relation *r = &st->rels[i];
        if (r->kind == TE_REL_SPLIT) {
            int p = iter_index(&N, r->parent), o = iter_index(&N, r->outer), in = iter_index(&N, r->inner);
            if (!N.val[o] || !N.val[in]) return wpk_error(c->err, WPK_ERR_INTERNAL, "lower: split "
                                                          "of '%s' in stage '%s' has no leaves",
                                                          r->parent->name, t->name);
            const te_expr *rel = te_add(c, te_mul(c, N.val[o], te_int(c, r->factor)), N.val[in]);
            N.val[p] = te_add(c, te_int(c, r->parent->min), rel);
            int64_t e = N.ext[p];
            if (e > r->factor && e % r->factor != 0) N.guards[g--].cond = te_cmp(c, TE_LT, rel, te_int(c, e));
        } else {
            int p = iter_index(&N, r->parent), o = iter_index(&N, r->outer), in = iter_index(&N, r->inner);
            if (!N.val[p]) return wpk_error(c->err, WPK_ERR_INTERNAL, "lower: fused axis '%s' of "
                                            "stage '%s' is no leaf", r->parent->name, t->name);
            const te_expr *ei = te_int(c, N.ext[in]);
            N.val[o] = te_add(c, te_int(c, r->outer->min), te_div(c, N.val[p], ei));
            N.val[in] = te_add(c, te_int(c, r->inner->min), te_mod(c, N.val[p], ei));
        }
    }
    /* the body with original axes replaced: data axes at origin + local value */
    int nroot = t->ndim + nr;
    const te_iter **roots = arena_alloc(&c->mem, sizeof *roots * (size_t)(nroot + 1));
    const te_expr **values = arena_alloc(&c->mem, sizeof *values * (size_t)(nroot + 1));
    if (!roots || !values) return nomem(L);
    for (int i = 0; i < nroot; i++) {
        roots[i] = N.iters[i];
        if (!N.val[i]) return wpk_error(c->err, WPK_ERR_INTERNAL, "lower: axis '%s' of stage '%s' "
                                        "reaches no loop", roots[i]->name, t->name);
        values[i] = i < t->ndim && mins[i] ? te_add(c, mins[i], N.val[i]) : N.val[i];
    }
    N.body = loop_subst_expr(c, N.reduction ? body->a : body, nroot, roots, values);
    N.rop = N.reduction ? body->rop : TE_REDUCE_SUM;
    if (!N.body) return nomem(L);
    N.first_reduce = st->nleaves;
    for (int i = 0; i < st->nleaves; i++)
        if (te_iter_is_reduce(st, st->leaves[i])) {
            N.first_reduce = i;
            break;
        }
    return inside(&N, 0, env, out);
}

/* ---- the kernel ---- */

static loop_scope root_scope(const te_stage *st, const te_tensor *t) {
    if (strcmp(st->scope, "shared") == 0) return LOOP_SCOPE_SHARED;
    if (strcmp(st->scope, "local") == 0) {
        int64_t n = 1;
        for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
        if (bytes_of(t->dtype, n) <= STACK_MAX_BYTES) return LOOP_SCOPE_STACK;
    }
    return LOOP_SCOPE_HEAP;
}

static wpk_status lower_func(te_ctx *c, const te_schedule *s, const char *name,
                             te_tensor *const *args, int nargs, loop_func **out) {
    lower L = {.c = c, .s = s};
    *out = NULL;
    if (c->oom) return WPK_ERR_NOMEM;
    if (!s || !name || nargs < 1 || !args)
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, "lower: no schedule, name or arguments");
    loop_func *f = arena_alloc(&c->mem, sizeof *f);
    loop_buffer **bufs = arena_alloc(&c->mem, sizeof *bufs * (size_t)nargs);
    if (!f || !bufs) return nomem(&L);
    int ninputs = 0;
    for (int i = 0; i < nargs; i++) {
        const te_tensor *t = args[i];
        if (!t) return bad(&L, "lower: argument %d of '%s' is missing", i, name);
        if (info_of(&L, t)) return bad(&L, "lower: '%s' is argument %d of '%s' twice", t->name, i, name);
        if (t->kind == TE_PLACEHOLDER) {
            if (ninputs != i)
                return bad(&L, "lower: placeholder '%s' comes after an output in the arguments of "
                           "'%s' (inputs first)", t->name, name);
            ninputs++;
        } else if (!te_stage_of(s, t)) {
            return bad(&L, "lower: argument '%s' of '%s' is not computed by this schedule", t->name, name);
        }
        bufs[i] = loop_buffer_new(c, t->name, t->dtype, t->ndim, t->shape, LOOP_SCOPE_ARG);
        tinfo *ti = info_add(&L, t);
        if (!bufs[i] || !ti) return nomem(&L);
        ti->buf = bufs[i];
    }
    wpk_status st = validate(&L);
    if (st) return st;
    /* root intermediates live in buffers of their full shape for the whole kernel */
    loop_buffer **heap = arena_alloc(&c->mem, sizeof *heap * (size_t)(s->nstages + 1));
    const loop_stmt **nests = arena_alloc(&c->mem, sizeof *nests * (size_t)(s->nstages + 1));
    if (!heap || !nests) return nomem(&L);
    int nheap = 0, nnests = 0;
    for (int i = 0; i < s->nstages; i++) {
        const te_stage *sg = s->stages[i];
        if (sg->attach != TE_ATTACH_ROOT || info_of(&L, sg->tensor)) continue;
        const te_tensor *t = sg->tensor;
        loop_buffer *b = loop_buffer_new(c, t->name, t->dtype, t->ndim, t->shape, root_scope(sg, t));
        tinfo *ti = info_add(&L, t);
        if (!b || !ti) return nomem(&L);
        ti->buf = b;
        heap[nheap++] = b;
    }
    for (int i = 0; i < s->nstages; i++) {
        const te_stage *sg = s->stages[i];
        if (sg->attach != TE_ATTACH_ROOT) continue;
        tinfo *ti = info_of(&L, sg->tensor);
        const te_expr *mins[TE_MAX_DIMS] = {0};
        if ((st = lower_stage(&L, sg, ti->buf, mins, sg->tensor->shape, NULL, &nests[nnests++])))
            return st;
    }
    const loop_stmt *body = loop_seq(c, nnests, nests);
    for (int i = nheap - 1; i >= 0 && body; i--) body = loop_alloc(c, heap[i], body);
    if (!body) return nomem(&L);
    f->name = arena_strdup(&c->mem, name);
    f->args = bufs;
    f->nargs = nargs;
    f->ninputs = ninputs;
    f->body = body;
    if (!f->name) return nomem(&L);
    if ((st = loop_optimize(c, f))) return st;
    *out = f;
    return WPK_OK;
}

wpk_status loop_lower(te_ctx *c, const te_schedule *s, const char *name, te_tensor *const *args,
                      int nargs, loop_func **out) {
    wpk_status st = lower_func(c, s, name, args, nargs, out);
    /* running out of memory half way makes later steps fail in other ways: say what happened */
    if (st != WPK_OK && c->oom && st != WPK_ERR_NOMEM)
        st = wpk_error(c->err, WPK_ERR_NOMEM, "out of memory lowering '%s'", name ? name : "(null)");
    if (st != WPK_OK) *out = NULL;
    return st;
}
