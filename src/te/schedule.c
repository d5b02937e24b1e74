/* schedule.c -- schedules as data: the stages of a tensor expression and the primitives that
 * rewrite a stage's loop nest (split, fuse, reorder, tile, annotations), its placement
 * (compute_at, compute_inline) and its storage (scopes, cache_write, cache_read). Every
 * primitive checks all of its arguments before it changes anything, so a failed call leaves
 * the schedule as it was. */
#include "te/schedule.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_INPUTS 64
#define NAME_MAX_LEN 256
#define MAX_READERS 64

/* ---- memory and errors ---- */

static void *alloc(te_ctx *c, size_t n) {
    if (c->oom) return NULL;
    void *p = arena_alloc(&c->mem, n);
    if (!p) {
        c->oom = true;
        wpk_error(c->err, WPK_ERR_NOMEM, "out of memory building a schedule");
    }
    return p;
}

static wpk_status nomem(te_ctx *c) {
    c->oom = true;
    return wpk_error(c->err, WPK_ERR_NOMEM, "out of memory building a schedule");
}

static wpk_status bad(const te_stage *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static wpk_status bad(const te_stage *st, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return wpk_error(st->schedule->c->err, WPK_ERR_INVALID_ARG, "%s", msg);
}

static const char *sname(const te_stage *st) { return st->tensor->name; }

/* ---- stages ---- */

/* The axes a stage starts from: data axes, then the top-level reduction's axes. */
static int root_iters(const te_tensor *t, te_iter **out, int max) {
    int n = 0;
    for (int i = 0; i < t->ndim && n < max; i++) out[n++] = t->axes[i];
    if (t->body && t->body->kind == TE_REDUCE)
        for (int i = 0; i < t->body->nraxes && n < max; i++) out[n++] = t->body->raxes[i];
    return n;
}

#define MAX_ROOTS (TE_MAX_DIMS * 2 + 8)

/* Room for `need` leaves (arena arrays do not grow in place: copy into bigger ones). */
static bool reserve_leaves(te_stage *st, int need) {
    if (need <= st->cap_leaves) return true;
    te_ctx *c = st->schedule->c;
    int cap = need < 16 ? 16 : 2 * need;
    te_iter **leaves = alloc(c, sizeof(te_iter *) * (size_t)cap);
    te_annot *annots = alloc(c, sizeof(te_annot) * (size_t)cap);
    const char **tags = alloc(c, sizeof(const char *) * (size_t)cap);
    if (!leaves || !annots || !tags) return false;
    if (st->nleaves) {
        memcpy(leaves, st->leaves, sizeof(te_iter *) * (size_t)st->nleaves);
        memcpy(annots, st->annots, sizeof(te_annot) * (size_t)st->nleaves);
        memcpy(tags, st->bind_tags, sizeof(const char *) * (size_t)st->nleaves);
    }
    st->leaves = leaves;
    st->annots = annots;
    st->bind_tags = tags;
    st->cap_leaves = cap;
    return true;
}

static bool reset_leaves(te_stage *st) {
    te_iter *roots[MAX_ROOTS];
    int n = root_iters(st->tensor, roots, MAX_ROOTS);
    st->nleaves = 0;
    if (!reserve_leaves(st, n)) return false;
    for (int i = 0; i < n; i++) {
        st->leaves[i] = roots[i];
        st->annots[i] = TE_ANNOT_NONE;
        st->bind_tags[i] = NULL;
    }
    st->nleaves = n;
    return true;
}

static te_stage *stage_new(te_schedule *s, te_tensor *t, const char *scope) {
    te_stage *st = alloc(s->c, sizeof *st);
    if (!st) return NULL;
    st->schedule = s;
    st->tensor = t;
    st->attach = TE_ATTACH_ROOT;
    st->scope = scope;
    return reset_leaves(st) ? st : NULL;
}

/* Put st at position `at` of the stage list. */
static bool insert_stage(te_schedule *s, te_stage *st, int at) {
    if (s->nstages == s->cap_stages) {
        int cap = s->cap_stages ? 2 * s->cap_stages : 16;
        te_stage **n = alloc(s->c, sizeof(te_stage *) * (size_t)cap);
        if (!n) return false;
        if (s->nstages) memcpy(n, s->stages, sizeof(te_stage *) * (size_t)s->nstages);
        s->stages = n;
        s->cap_stages = cap;
    }
    memmove(s->stages + at + 1, s->stages + at, sizeof(te_stage *) * (size_t)(s->nstages - at));
    s->stages[at] = st;
    s->nstages++;
    return true;
}

static int stage_index(const te_schedule *s, const te_stage *st) {
    for (int i = 0; i < s->nstages; i++)
        if (s->stages[i] == st) return i;
    return -1;
}

te_stage *te_stage_of(const te_schedule *s, const te_tensor *t) {
    if (!s || !t) return NULL;
    for (int i = 0; i < s->nstages; i++)
        if (s->stages[i]->tensor == t) return s->stages[i];
    return NULL;
}

/* Post-order walk: every compute after the computes it reads. */
static wpk_status add_stages(te_schedule *s, te_tensor *t, int depth) {
    if (t->kind != TE_COMPUTE || te_stage_of(s, t)) return WPK_OK;
    if (depth > 10000) return wpk_error(s->c->err, WPK_ERR_INVALID_ARG, "schedule: the tensor "
                                        "graph is too deep at '%s'", t->name);
    const te_tensor *in[MAX_INPUTS];
    int n = te_tensor_inputs(t, in, MAX_INPUTS);
    for (int i = 0; i < n; i++) {
        wpk_status st = add_stages(s, (te_tensor *)in[i], depth + 1);
        if (st) return st;
    }
    te_stage *st = stage_new(s, t, "global");
    if (!st || !insert_stage(s, st, s->nstages)) return nomem(s->c);
    return WPK_OK;
}

te_schedule *te_schedule_create(te_ctx *c, te_tensor *const *outputs, int noutputs) {
    if (c->oom) return NULL;
    if (noutputs < 1) {
        wpk_error(c->err, WPK_ERR_INVALID_ARG, "schedule: no outputs");
        return NULL;
    }
    te_schedule *s = alloc(c, sizeof *s);
    te_tensor **outs = alloc(c, sizeof(te_tensor *) * (size_t)noutputs);
    if (!s || !outs) return NULL;
    s->c = c;
    for (int i = 0; i < noutputs; i++) {
        if (!outputs[i] || outputs[i]->kind != TE_COMPUTE) {
            wpk_error(c->err, WPK_ERR_INVALID_ARG, "schedule: output %d%s%s%s is not a compute "
                      "(nothing to schedule)", i, outputs[i] ? " '" : "",
                      outputs[i] ? outputs[i]->name : "", outputs[i] ? "'" : "");
            return NULL;
        }
        outs[i] = outputs[i];
        if (add_stages(s, outputs[i], 0)) return NULL;
    }
    s->outputs = outs;
    s->noutputs = noutputs;
    for (int i = 0; i < noutputs; i++) te_stage_of(s, outs[i])->is_output = true;
    /* A loop variable shared by two stages would make their loop nests alias each other. */
    for (int i = 0; i < s->nstages; i++) {
        te_iter *a[MAX_ROOTS];
        int na = root_iters(s->stages[i]->tensor, a, MAX_ROOTS);
        for (int j = 0; j < i; j++) {
            te_iter *b[MAX_ROOTS];
            int nb = root_iters(s->stages[j]->tensor, b, MAX_ROOTS);
            for (int x = 0; x < na; x++)
                for (int y = 0; y < nb; y++)
                    if (a[x] == b[y]) {
                        wpk_error(c->err, WPK_ERR_INVALID_ARG, "schedule: axis '%s' belongs to "
                                  "both '%s' and '%s' (each compute needs its own axes)",
                                  a[x]->name, s->stages[j]->tensor->name,
                                  s->stages[i]->tensor->name);
                        return NULL;
                    }
        }
    }
    return s;
}

/* ---- queries ---- */

static int leaf_index(const te_stage *st, const te_iter *it) {
    for (int i = 0; i < st->nleaves; i++)
        if (st->leaves[i] == it) return i;
    return -1;
}

bool te_iter_is_reduce(const te_stage *st, const te_iter *it) {
    if (!it) return false;
    if (it->kind == TE_ITER_REDUCE) return true;
    if (it->kind == TE_ITER_DATA) return false;
    for (int i = 0; i < st->nrels; i++) {
        const te_relation *r = &st->rels[i];
        if (r->kind == TE_REL_SPLIT && (r->outer == it || r->inner == it))
            return te_iter_is_reduce(st, r->parent);
        if (r->kind == TE_REL_FUSE && r->parent == it) return te_iter_is_reduce(st, r->outer);
    }
    return false;
}

/* A stage computed at `it` of st, if any (such an iter must stay a leaf). */
static const te_stage *attached_at(const te_stage *st, const te_iter *it) {
    const te_schedule *s = st->schedule;
    for (int i = 0; i < s->nstages; i++) {
        const te_stage *o = s->stages[i];
        if (o->attach == TE_ATTACH_AT && o->attach_stage == st && (!it || o->attach_iter == it))
            return o;
    }
    return NULL;
}

static const char *annot_name(te_annot a) {
    switch (a) {
    case TE_ANNOT_NONE: return "plain";
    case TE_ANNOT_PARALLEL: return "parallel";
    case TE_ANNOT_VECTORIZE: return "vectorized";
    case TE_ANNOT_UNROLL: return "unrolled";
    case TE_ANNOT_BIND: return "bound";
    }
    return "?";
}

/* What split and fuse require of an axis they replace: a leaf, unannotated, no attachment. */
static wpk_status check_replaceable(const te_stage *st, const char *prim, const te_iter *it) {
    if (!it) return bad(st, "%s: no axis given for stage '%s'", prim, sname(st));
    int i = leaf_index(st, it);
    if (i < 0) return bad(st, "%s: axis '%s' is not a leaf of stage '%s'", prim, it->name,
                          sname(st));
    if (st->annots[i] != TE_ANNOT_NONE)
        return bad(st, "%s: axis '%s' of stage '%s' is already %s", prim, it->name, sname(st),
                   annot_name(st->annots[i]));
    const te_stage *o = attached_at(st, it);
    if (o) return bad(st, "%s: stage '%s' is computed at axis '%s' of stage '%s' (%s before "
                      "compute_at)", prim, sname(o), it->name, sname(st), prim);
    return WPK_OK;
}

static bool add_relation(te_stage *st, te_relation r) {
    if (st->nrels == st->cap_rels) {
        int cap = st->cap_rels ? 2 * st->cap_rels : 8;
        te_relation *n = alloc(st->schedule->c, sizeof(te_relation) * (size_t)cap);
        if (!n) return false;
        if (st->nrels) memcpy(n, st->rels, sizeof(te_relation) * (size_t)st->nrels);
        st->rels = n;
        st->cap_rels = cap;
    }
    st->rels[st->nrels++] = r;
    return true;
}

static te_iter *derived(te_ctx *c, const char *a, const char *sep, const char *b,
                        int64_t extent) {
    char name[NAME_MAX_LEN];
    snprintf(name, sizeof name, "%s%s%s", a, sep, b);
    return te_iter_new(c, name, TE_ITER_LOOP, 0, extent);
}

/* ---- split, fuse, reorder, tile ---- */

/* Leaves [from, from + n) with their annotations moved to start at `to`. */
static void move_leaves(te_stage *st, int to, int from, int n) {
    memmove(st->leaves + to, st->leaves + from, sizeof(te_iter *) * (size_t)n);
    memmove(st->annots + to, st->annots + from, sizeof(te_annot) * (size_t)n);
    memmove(st->bind_tags + to, st->bind_tags + from, sizeof(const char *) * (size_t)n);
}

/* The split itself, after the checks. */
static wpk_status do_split(te_stage *st, te_iter *parent, int64_t factor, te_iter **outer,
                           te_iter **inner) {
    te_ctx *c = st->schedule->c;
    int64_t ext = parent->extent;
    te_iter *o = derived(c, parent->name, "_", "o", ext < 0 ? -1 : (ext + factor - 1) / factor);
    te_iter *in = derived(c, parent->name, "_", "i", factor);
    if (!o || !in || !reserve_leaves(st, st->nleaves + 1) ||
        !add_relation(st, (te_relation){TE_REL_SPLIT, parent, o, in, factor}))
        return nomem(c);
    int i = leaf_index(st, parent);
    move_leaves(st, i + 2, i + 1, st->nleaves - i - 1);
    st->leaves[i] = o;
    st->leaves[i + 1] = in;
    st->annots[i] = st->annots[i + 1] = TE_ANNOT_NONE;
    st->bind_tags[i] = st->bind_tags[i + 1] = NULL;
    st->nleaves++;
    if (outer) *outer = o;
    if (inner) *inner = in;
    return WPK_OK;
}

static wpk_status check_split(const te_stage *st, const te_iter *parent, int64_t factor) {
    wpk_status s = check_replaceable(st, "split", parent);
    if (s) return s;
    if (factor < 1)
        return bad(st, "split: factor %lld for axis '%s' of stage '%s'", (long long)factor,
                   parent->name, sname(st));
    return WPK_OK;
}

wpk_status te_split(te_stage *st, te_iter *parent, int64_t factor, te_iter **outer,
                    te_iter **inner) {
    wpk_status s = check_split(st, parent, factor);
    return s ? s : do_split(st, parent, factor, outer, inner);
}

wpk_status te_fuse(te_stage *st, te_iter *outer, te_iter *inner, te_iter **fused) {
    wpk_status s = check_replaceable(st, "fuse", outer);
    if (!s) s = check_replaceable(st, "fuse", inner);
    if (s) return s;
    int i = leaf_index(st, outer);
    if (leaf_index(st, inner) != i + 1)
        return bad(st, "fuse: axes '%s' and '%s' of stage '%s' are not adjacent leaves (outer "
                   "then inner)", outer->name, inner->name, sname(st));
    bool ro = te_iter_is_reduce(st, outer), ri = te_iter_is_reduce(st, inner);
    if (ro != ri)
        return bad(st, "fuse: axis '%s' of stage '%s' is a %s axis and '%s' a %s axis", outer->name,
                   sname(st), ro ? "reduction" : "data", inner->name, ri ? "reduction" : "data");
    if (inner->extent < 0)
        return bad(st, "fuse: axis '%s' of stage '%s' extent is not constant", inner->name,
                   sname(st));
    te_ctx *c = st->schedule->c;
    te_iter *f = derived(c, outer->name, "_", inner->name,
                         outer->extent < 0 ? -1 : outer->extent * inner->extent);
    if (!f || !add_relation(st, (te_relation){TE_REL_FUSE, f, outer, inner, 0})) return nomem(c);
    st->leaves[i] = f;
    move_leaves(st, i + 1, i + 2, st->nleaves - i - 2);
    st->nleaves--;
    if (fused) *fused = f;
    return WPK_OK;
}

static wpk_status check_reorder(const te_stage *st, int n, te_iter *const *order) {
    if (n < 0 || (n > 0 && !order))
        return bad(st, "reorder: %d axes given for stage '%s'", n, sname(st));
    for (int i = 0; i < n; i++) {
        if (!order[i]) return bad(st, "reorder: axis %d for stage '%s' is missing", i, sname(st));
        if (leaf_index(st, order[i]) < 0)
            return bad(st, "reorder: axis '%s' is not a leaf of stage '%s'", order[i]->name,
                       sname(st));
        for (int j = 0; j < i; j++)
            if (order[j] == order[i])
                return bad(st, "reorder: axis '%s' of stage '%s' is listed twice", order[i]->name,
                           sname(st));
    }
    return WPK_OK;
}

/* After the checks: the positions the listed leaves occupy, in order, get them in the new order. */
static void do_reorder(te_stage *st, int n, te_iter *const *order) {
    int pos[MAX_ROOTS * 4];
    te_annot annots[MAX_ROOTS * 4];
    const char *tags[MAX_ROOTS * 4];
    int m = 0;
    for (int i = 0; i < st->nleaves && m < n; i++)
        for (int j = 0; j < n; j++)
            if (st->leaves[i] == order[j]) pos[m++] = i;
    for (int j = 0; j < n; j++) {
        int from = leaf_index(st, order[j]);
        annots[j] = st->annots[from];
        tags[j] = st->bind_tags[from];
    }
    for (int j = 0; j < n; j++) {
        st->leaves[pos[j]] = order[j];
        st->annots[pos[j]] = annots[j];
        st->bind_tags[pos[j]] = tags[j];
    }
}

wpk_status te_reorder(te_stage *st, int n, te_iter *const *order) {
    wpk_status s = check_reorder(st, n, order);
    if (s) return s;
    if (n > MAX_ROOTS * 4)
        return bad(st, "reorder: %d axes for stage '%s' (at most %d)", n, sname(st), MAX_ROOTS * 4);
    do_reorder(st, n, order);
    return WPK_OK;
}

wpk_status te_tile(te_stage *st, te_iter *x, te_iter *y, int64_t fx, int64_t fy, te_iter **xo,
                   te_iter **yo, te_iter **xi, te_iter **yi) {
    if (x && x == y)
        return bad(st, "tile: axis '%s' of stage '%s' given as both x and y", x->name, sname(st));
    wpk_status s = check_split(st, x, fx);
    if (!s) s = check_split(st, y, fy);
    if (s) {
        /* name the primitive the caller used */
        char msg[WPK_ERR_MSG_MAX];
        snprintf(msg, sizeof msg, "tile: %s", wpk_context_error(st->schedule->c->err));
        return bad(st, "%s", msg);
    }
    te_iter *a, *b, *c2, *d;
    if ((s = do_split(st, x, fx, &a, &c2)) || (s = do_split(st, y, fy, &b, &d))) return s;
    do_reorder(st, 4, (te_iter *const[]){a, b, c2, d});
    if (xo) *xo = a;
    if (yo) *yo = b;
    if (xi) *xi = c2;
    if (yi) *yi = d;
    return WPK_OK;
}

/* ---- annotations ---- */

static bool const_extent(const te_iter *it) { return it->extent >= 0; }

static wpk_status annotate(te_stage *st, te_iter *it, te_annot a, const char *tag,
                           const char *prim) {
    if (!it) return bad(st, "%s: no axis given for stage '%s'", prim, sname(st));
    int i = leaf_index(st, it);
    if (i < 0) return bad(st, "%s: axis '%s' is not a leaf of stage '%s'", prim, it->name,
                          sname(st));
    if (st->annots[i] != TE_ANNOT_NONE &&
        (st->annots[i] != a || (a == TE_ANNOT_BIND && strcmp(st->bind_tags[i], tag) != 0)))
        return bad(st, "%s: axis '%s' of stage '%s' is already %s%s%s", prim, it->name, sname(st),
                   annot_name(st->annots[i]), st->annots[i] == TE_ANNOT_BIND ? " to " : "",
                   st->annots[i] == TE_ANNOT_BIND ? st->bind_tags[i] : "");
    /* Lanes or threads running different iterations of one reduction would race on its
     * accumulator. */
    if (a != TE_ANNOT_UNROLL && te_iter_is_reduce(st, it))
        return bad(st, "%s: axis '%s' of stage '%s' is a reduction axis", prim, it->name,
                   sname(st));
    if ((a == TE_ANNOT_VECTORIZE || a == TE_ANNOT_UNROLL) && !const_extent(it))
        return bad(st, "%s: axis '%s' of stage '%s' extent is not constant", prim, it->name,
                   sname(st));
    if (a == TE_ANNOT_BIND)
        for (int j = 0; j < st->nleaves; j++)
            if (j != i && st->annots[j] == TE_ANNOT_BIND && strcmp(st->bind_tags[j], tag) == 0)
                return bad(st, "bind: '%s' is already bound to axis '%s' of stage '%s'", tag,
                           st->leaves[j]->name, sname(st));
    st->annots[i] = a;
    st->bind_tags[i] = tag;
    return WPK_OK;
}

wpk_status te_parallel(te_stage *st, te_iter *it) {
    return annotate(st, it, TE_ANNOT_PARALLEL, NULL, "parallel");
}

wpk_status te_vectorize(te_stage *st, te_iter *it) {
    return annotate(st, it, TE_ANNOT_VECTORIZE, NULL, "vectorize");
}

wpk_status te_unroll(te_stage *st, te_iter *it) {
    return annotate(st, it, TE_ANNOT_UNROLL, NULL, "unroll");
}

wpk_status te_bind(te_stage *st, te_iter *it, const char *tag) {
    static const char *const tags[] = {"blockIdx.x",  "blockIdx.y",  "blockIdx.z",
                                       "threadIdx.x", "threadIdx.y", "threadIdx.z"};
    for (size_t i = 0; tag && i < sizeof tags / sizeof tags[0]; i++)
        if (strcmp(tag, tags[i]) == 0) return annotate(st, it, TE_ANNOT_BIND, tags[i], "bind");
    return bad(st, "bind: tag '%s' for stage '%s' is not blockIdx.x/y/z or threadIdx.x/y/z",
               tag ? tag : "(null)", sname(st));
}

/* ---- placement ---- */

/* Whether t reads `target`, directly or through other computes. */
static bool depends_on(const te_tensor *t, const te_tensor *target, int depth) {
    if (t->kind != TE_COMPUTE || depth > 10000) return false;
    const te_tensor *in[MAX_INPUTS];
    int n = te_tensor_inputs(t, in, MAX_INPUTS);
    for (int i = 0; i < n; i++)
        if (in[i] == target || depends_on(in[i], target, depth + 1)) return true;
    return false;
}

wpk_status te_compute_at(te_stage *st, te_stage *parent, te_iter *at) {
    if (!parent || parent->schedule != st->schedule)
        return bad(st, "compute_at: the stage to compute '%s' inside is not in its schedule",
                   sname(st));
    if (parent == st) return bad(st, "compute_at: stage '%s' cannot be computed inside itself",
                                 sname(st));
    if (!at || leaf_index(parent, at) < 0)
        return bad(st, "compute_at: stage '%s' cannot be computed inside '%s' at '%s' (not a leaf "
                   "of that stage)", sname(st), sname(parent), at ? at->name : "(null)");
    if (st->is_output)
        return bad(st, "compute_at: stage '%s' is an output (outputs are computed at the root)",
                   sname(st));
    if (parent->attach == TE_ATTACH_INLINE)
        return bad(st, "compute_at: stage '%s' cannot be computed inside '%s' (it is inlined)",
                   sname(st), sname(parent));
    if (!depends_on(parent->tensor, st->tensor, 0))
        return bad(st, "compute_at: stage '%s' does not read '%s' (a producer is computed inside "
                   "a consumer)", sname(parent), sname(st));
    st->attach = TE_ATTACH_AT;
    st->attach_stage = parent;
    st->attach_iter = at;
    return WPK_OK;
}

wpk_status te_compute_inline(te_stage *st) {
    if (st->tensor->body->kind == TE_REDUCE)
        return bad(st, "compute_inline: stage '%s' is a reduction", sname(st));
    if (st->is_output)
        return bad(st, "compute_inline: stage '%s' is an output (it must be stored)", sname(st));
    const te_stage *o = attached_at(st, NULL);
    if (o)
        return bad(st, "compute_inline: stage '%s' is computed inside stage '%s'", sname(o),
                   sname(st));
    st->attach = TE_ATTACH_INLINE;
    st->attach_stage = NULL;
    st->attach_iter = NULL;
    return WPK_OK;
}

/* ---- storage ---- */

static const char *known_scope(const char *scope) {
    static const char *const scopes[] = {"global", "local", "packed", "shared"};
    for (size_t i = 0; scope && i < sizeof scopes / sizeof scopes[0]; i++)
        if (strcmp(scope, scopes[i]) == 0) return scopes[i];
    return NULL;
}

wpk_status te_set_scope(te_stage *st, const char *scope) {
    const char *k = known_scope(scope);
    if (!k) return bad(st, "set_scope: unknown scope '%s' for stage '%s' (global, local, packed, "
                       "shared)", scope ? scope : "(null)", sname(st));
    if (st->is_output && strcmp(k, "global") != 0)
        return bad(st, "set_scope: stage '%s' is an output (its scope is global)", sname(st));
    st->scope = k;
    return WPK_OK;
}

/* A stage untouched by primitives: its leaves are its root axes in order, unannotated. */
static bool unscheduled(const te_stage *st) {
    te_iter *roots[MAX_ROOTS];
    int n = root_iters(st->tensor, roots, MAX_ROOTS);
    if (st->nrels || st->nleaves != n) return false;
    for (int i = 0; i < n; i++)
        if (st->leaves[i] != roots[i] || st->annots[i] != TE_ANNOT_NONE) return false;
    return true;
}

/* "t.scope", made unique among the schedule's tensors ("t.scope.1", ...). */
static const char *cache_name(te_schedule *s, const te_tensor *t, const char *scope) {
    char name[NAME_MAX_LEN];
    for (int k = 0;; k++) {
        if (k) snprintf(name, sizeof name, "%s.%s.%d", t->name, scope, k);
        else snprintf(name, sizeof name, "%s.%s", t->name, scope);
        bool taken = false;
        for (int i = 0; i < s->nstages && !taken; i++)
            taken = strcmp(s->stages[i]->tensor->name, name) == 0;
        if (!taken) {
            char *n = arena_strdup(&s->c->mem, name);
            if (!n) nomem(s->c);
            return n;
        }
    }
}

/* Fresh data axes with t's shape and axis names (placeholders: i0, i1, ...). */
static te_iter **copy_axes(te_ctx *c, const te_tensor *t) {
    const char *names[TE_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) names[i] = t->kind == TE_COMPUTE ? t->axes[i]->name : NULL;
    return te_compute_axes(c, t->ndim, t->shape, names);
}

static const te_expr *load_at(te_ctx *c, const te_tensor *t, te_iter *const *axes) {
    const te_expr *idx[TE_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) idx[i] = te_var(c, axes[i]);
    return te_load(c, t, t->ndim, idx);
}

wpk_status te_cache_write(te_schedule *s, te_tensor *t, const char *scope, te_tensor **cache) {
    te_ctx *c = s->c;
    te_stage *st = te_stage_of(s, t);
    if (!st)
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, "cache_write: '%s' is not an output of a "
                         "stage of this schedule", t ? t->name : "(null)");
    const char *k = known_scope(scope);
    if (!k) return bad(st, "cache_write: unknown scope '%s' for '%s' (global, local, packed, "
                       "shared)", scope ? scope : "(null)", sname(st));
    if (!unscheduled(st))
        return bad(st, "cache_write: stage '%s' is already scheduled (cache_write comes before "
                   "split, fuse, reorder and annotations)", sname(st));
    if (st->attach != TE_ATTACH_ROOT)
        return bad(st, "cache_write: stage '%s' is %s", sname(st),
                   st->attach == TE_ATTACH_INLINE ? "inlined" : "computed inside another stage");
    const te_stage *o = attached_at(st, NULL);
    if (o) return bad(st, "cache_write: stage '%s' is computed inside stage '%s' (cache_write "
                      "comes before compute_at)", sname(o), sname(st));
    const char *name = cache_name(s, t, k);
    te_iter **axes = copy_axes(c, t);
    if (!name || !axes) return c->oom ? WPK_ERR_NOMEM : WPK_ERR_INVALID_ARG;
    const te_expr *body = t->body;
    for (int i = 0; i < t->ndim && body; i++)
        body = te_substitute(c, body, t->axes[i], te_var(c, axes[i]));
    te_tensor *ct = body ? te_compute(c, name, t->ndim, t->shape, axes, body) : NULL;
    const te_expr *copy = ct ? load_at(c, ct, t->axes) : NULL;
    te_stage *cst = copy ? stage_new(s, ct, k) : NULL;
    if (!cst || !insert_stage(s, cst, stage_index(s, st))) return nomem(c);
    t->body = copy;
    if (!reset_leaves(st)) return nomem(c);
    if (cache) *cache = ct;
    return WPK_OK;
}

/* e with every load of `from` reading `to` at the same indices. */
static const te_expr *retarget(te_ctx *c, const te_expr *e, const te_tensor *from,
                               const te_tensor *to) {
    if (!e || e->kind == TE_INT || e->kind == TE_FLOAT || e->kind == TE_VAR) return e;
    if (e->kind == TE_LOAD) {
        const te_expr *idx[TE_MAX_DIMS];
        bool same = e->tensor != from;
        for (int i = 0; i < e->nindex; i++) {
            idx[i] = retarget(c, e->index[i], from, to);
            if (!idx[i]) return NULL;
            same &= idx[i] == e->index[i];
        }
        return same ? e : te_load(c, e->tensor == from ? to : e->tensor, e->nindex, idx);
    }
    const te_expr *a = retarget(c, e->a, from, to), *b = retarget(c, e->b, from, to),
                  *cc = retarget(c, e->c, from, to);
    if ((e->a && !a) || (e->b && !b) || (e->c && !cc)) return NULL;
    if (a == e->a && b == e->b && cc == e->c) return e;
    switch (e->kind) {
    case TE_NOT: return te_not(c, a);
    case TE_SELECT: return te_select(c, a, b, cc);
    case TE_CAST: return te_cast(c, e->type, a);
    case TE_CALL: return te_call(c, e->fn, a, b);
    case TE_REDUCE: return te_reduce(c, e->rop, a, e->nraxes, e->raxes);
    default: return te_binary(c, e->kind, a, b);
    }
}

static bool reads_directly(const te_tensor *reader, const te_tensor *t) {
    const te_tensor *in[MAX_INPUTS];
    int n = te_tensor_inputs(reader, in, MAX_INPUTS);
    for (int i = 0; i < n; i++)
        if (in[i] == t) return true;
    return false;
}

wpk_status te_cache_read(te_schedule *s, te_tensor *t, const char *scope, te_tensor *const *readers,
                         int nreaders, te_tensor **cache) {
    te_ctx *c = s->c;
    if (!t || (t->kind == TE_COMPUTE && !te_stage_of(s, t)))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, "cache_read: '%s' is not in this schedule",
                         t ? t->name : "(null)");
    const char *k = known_scope(scope);
    if (!k) return wpk_error(c->err, WPK_ERR_INVALID_ARG, "cache_read: unknown scope '%s' for "
                             "'%s' (global, local, packed, shared)", scope ? scope : "(null)",
                             t->name);
    if (nreaders < 1 || !readers)
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, "cache_read: no readers given for '%s'",
                         t->name);
    if (nreaders > MAX_READERS)
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, "cache_read: %d readers of '%s' (at most "
                         "%d)", nreaders, t->name, MAX_READERS);
    int first = s->nstages;
    for (int i = 0; i < nreaders; i++) {
        te_stage *rs = te_stage_of(s, readers[i]);
        if (!rs)
            return wpk_error(c->err, WPK_ERR_INVALID_ARG, "cache_read: reader '%s' of '%s' is "
                             "not a stage of this schedule", readers[i] ? readers[i]->name :
                             "(null)", t->name);
        if (!reads_directly(readers[i], t))
            return bad(rs, "cache_read: stage '%s' does not read '%s'", sname(rs), t->name);
        for (int j = 0; j < i; j++)
            if (readers[j] == readers[i])
                return bad(rs, "cache_read: reader '%s' of '%s' is listed twice", sname(rs),
                           t->name);
        int at = stage_index(s, rs);
        if (at < first) first = at;
    }
    const char *name = cache_name(s, t, k);
    te_iter **axes = copy_axes(c, t);
    const te_expr *body = axes ? load_at(c, t, axes) : NULL;
    te_tensor *ct = name && body ? te_compute(c, name, t->ndim, t->shape, axes, body) : NULL;
    if (!ct) return c->oom ? WPK_ERR_NOMEM : WPK_ERR_INTERNAL;
    /* all rewritten bodies first, so running out of memory changes no reader */
    const te_expr *bodies[MAX_READERS];
    for (int i = 0; i < nreaders; i++)
        if (!(bodies[i] = retarget(c, readers[i]->body, t, ct))) return nomem(c);
    te_stage *cst = stage_new(s, ct, k);
    if (!cst || !insert_stage(s, cst, first)) return nomem(c);
    for (int i = 0; i < nreaders; i++) readers[i]->body = bodies[i];
    if (cache) *cache = ct;
    return WPK_OK;
}

/* ---- printing ---- */

#define PRINT_SCOPE 256

/* The iterators a stage's text mentions, so clashing names get their ids. */
static int stage_scope(const te_stage *st, const te_iter **out) {
    te_iter *roots[MAX_ROOTS];
    int n = 0, nr = root_iters(st->tensor, roots, MAX_ROOTS);
    for (int i = 0; i < nr && n < PRINT_SCOPE; i++) out[n++] = roots[i];
    for (int i = 0; i < st->nrels && n + 3 <= PRINT_SCOPE; i++) {
        out[n++] = st->rels[i].parent;
        out[n++] = st->rels[i].outer;
        out[n++] = st->rels[i].inner;
    }
    return n;
}

/* "x<8", "1<=k<4" for a range not starting at 0, "x<?" for an unknown extent. */
static void put_iter(const te_iter *it, const te_iter **scope, int n, strbuf *b) {
    if (it->min != 0) sb_printf(b, "%lld<=", (long long)it->min);
    te_print_iter(it, scope, n, b);
    if (it->extent < 0) sb_puts(b, "<?");
    else sb_printf(b, "<%lld", (long long)(it->min + it->extent));
}

static void print_stage(const te_stage *st, strbuf *b) {
    const te_iter *scope[PRINT_SCOPE];
    int n = stage_scope(st, scope);
    sb_printf(b, "stage %s (%s%s): ", sname(st), st->scope, st->is_output ? ", output" : "");
    if (st->attach == TE_ATTACH_ROOT) {
        sb_puts(b, "root\n");
    } else if (st->attach == TE_ATTACH_INLINE) {
        sb_puts(b, "inline\n");
    } else {
        const te_iter *pscope[PRINT_SCOPE];
        int pn = stage_scope(st->attach_stage, pscope);
        sb_printf(b, "compute_at %s, ", sname(st->attach_stage));
        te_print_iter(st->attach_iter, pscope, pn, b);
        sb_puts(b, "\n");
    }
    sb_puts(b, "  ");
    te_print_tensor(st->tensor, b);
    sb_puts(b, "\n");
    for (int i = 0; i < st->nrels; i++) {
        const te_relation *r = &st->rels[i];
        sb_puts(b, r->kind == TE_REL_SPLIT ? "  split " : "  fuse ");
        put_iter(r->kind == TE_REL_SPLIT ? r->parent : r->outer, scope, n, b);
        if (r->kind == TE_REL_SPLIT) {
            sb_printf(b, " by %lld -> ", (long long)r->factor);
            put_iter(r->outer, scope, n, b);
        } else {
            sb_puts(b, ", ");
            put_iter(r->inner, scope, n, b);
            sb_puts(b, " -> ");
            put_iter(r->parent, scope, n, b);
        }
        if (r->kind == TE_REL_SPLIT) {
            sb_puts(b, ", ");
            put_iter(r->inner, scope, n, b);
        }
        sb_puts(b, "\n");
    }
    sb_puts(b, "  loops:");
    for (int i = 0; i < st->nleaves; i++) {
        sb_puts(b, i ? ", " : " ");
        put_iter(st->leaves[i], scope, n, b);
        if (te_iter_is_reduce(st, st->leaves[i])) sb_puts(b, " reduce");
        switch (st->annots[i]) {
        case TE_ANNOT_NONE: break;
        case TE_ANNOT_PARALLEL: sb_puts(b, " parallel"); break;
        case TE_ANNOT_VECTORIZE: sb_puts(b, " vectorize"); break;
        case TE_ANNOT_UNROLL: sb_puts(b, " unroll"); break;
        case TE_ANNOT_BIND: sb_printf(b, " bind(%s)", st->bind_tags[i]); break;
        }
    }
    sb_puts(b, "\n");
}

void te_print_schedule(const te_schedule *s, strbuf *b) {
    sb_puts(b, "schedule outputs:");
    for (int i = 0; i < s->noutputs; i++) sb_printf(b, "%s%s", i ? ", " : " ", s->outputs[i]->name);
    sb_puts(b, "\n");
    for (int i = 0; i < s->nstages; i++) print_stage(s->stages[i], b);
}
