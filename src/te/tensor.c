/* tensor.c -- placeholders, compute definitions and loads: the constructors that keep a tensor
 * expression well formed (a body uses only its own axes, reductions sit at the top, loads have
 * one integer index per dimension), so schedules and lowering can rely on it. */
#include "te/tensor.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void *alloc(te_ctx *c, size_t n) {
    if (c->oom) return NULL;
    void *p = arena_alloc(&c->mem, n);
    if (!p) {
        c->oom = true;
        wpk_error(c->err, WPK_ERR_NOMEM, "out of memory building tensor expressions");
    }
    return p;
}

static const char *dup_name(te_ctx *c, const char *name) {
    if (c->oom) return NULL;
    char *s = arena_strdup(&c->mem, name);
    if (!s) {
        c->oom = true;
        wpk_error(c->err, WPK_ERR_NOMEM, "out of memory building tensor expressions");
    }
    return s;
}

static bool is_int(te_type t) { return t.lanes == 1 && (t.scalar == TE_I32 || t.scalar == TE_I64); }

/* Shared by placeholders and computes: what makes a shape valid. */
static bool check_shape(te_ctx *c, const char *what, const char *name, int ndim,
                        const int64_t *shape) {
    if (ndim < 1 || ndim > TE_MAX_DIMS) {
        wpk_error(c->err, WPK_ERR_INVALID_ARG, "%s '%s': %d dims (1 to %d are allowed)", what,
                  name, ndim, TE_MAX_DIMS);
        return false;
    }
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 1) {
            wpk_error(c->err, WPK_ERR_INVALID_ARG, "%s '%s': dim %d is %lld (dims must be "
                      "positive)", what, name, i, (long long)shape[i]);
            return false;
        }
    return true;
}

te_tensor *te_placeholder(te_ctx *c, const char *name, te_scalar dtype, int ndim,
                          const int64_t *shape) {
    if (c->oom) return NULL;
    if (!name) name = "placeholder";
    if (!check_shape(c, "placeholder", name, ndim, shape)) return NULL;
    te_tensor *t = alloc(c, sizeof *t);
    if (!t || !(t->name = dup_name(c, name))) return NULL;
    t->kind = TE_PLACEHOLDER;
    t->dtype = dtype;
    t->ndim = ndim;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    return t;
}

te_iter **te_compute_axes(te_ctx *c, int ndim, const int64_t *shape, const char *const *names) {
    if (c->oom) return NULL;
    if (!check_shape(c, "compute", "axes", ndim, shape)) return NULL;
    te_iter **axes = alloc(c, sizeof(te_iter *) * (size_t)ndim);
    if (!axes) return NULL;
    for (int i = 0; i < ndim; i++) {
        char fallback[16];
        snprintf(fallback, sizeof fallback, "i%d", i);
        axes[i] = te_iter_new(c, names && names[i] ? names[i] : fallback, TE_ITER_DATA, 0,
                              shape[i]);
        if (!axes[i]) return NULL;
    }
    return axes;
}

te_iter *te_reduce_axis(te_ctx *c, const char *name, int64_t min, int64_t extent) {
    if (c->oom) return NULL;
    if (extent < 1) {
        wpk_error(c->err, WPK_ERR_INVALID_ARG, "reduce axis '%s': extent %lld (must be "
                  "positive)", name ? name : "k", (long long)extent);
        return NULL;
    }
    return te_iter_new(c, name ? name : "k", TE_ITER_REDUCE, min, extent);
}

const te_expr *te_load(te_ctx *c, const te_tensor *t, int n, const te_expr *const *idx) {
    if (c->oom || !t) return NULL;
    if (n != t->ndim) {
        wpk_error(c->err, WPK_ERR_INVALID_ARG, "load of '%s': %d indices for a %d-d tensor",
                  t->name, n, t->ndim);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!idx[i]) return NULL; /* an operand already failed and said why */
        if (!is_int(idx[i]->type)) {
            wpk_error(c->err, WPK_ERR_INVALID_ARG, "load of '%s': index %d is not an integer "
                      "expression", t->name, i);
            return NULL;
        }
    }
    te_expr *e = alloc(c, sizeof *e);
    const te_expr **index = alloc(c, sizeof(te_expr *) * (size_t)(n ? n : 1));
    if (!e || !index) return NULL;
    memcpy(index, idx, sizeof(te_expr *) * (size_t)n);
    e->kind = TE_LOAD;
    e->type = te_t(t->dtype);
    e->tensor = t;
    e->index = index;
    e->nindex = n;
    return e;
}

/* ---- compute ---- */

typedef struct body_check {
    te_ctx *c;
    const char *name;
    te_iter *const *axes;
    int ndim;
    te_iter *const *raxes; /* the top-level reduction's axes, or none */
    int nraxes;
} body_check;

static bool fail(const body_check *k, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static bool fail(const body_check *k, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    wpk_error(k->c->err, WPK_ERR_INVALID_ARG, "compute '%s': %s", k->name, what);
    return false;
}

static bool among(const te_iter *it, te_iter *const *set, int n) {
    for (int i = 0; i < n; i++)
        if (set[i] == it) return true;
    return false;
}

/* The body below the top-level reduction (if any): only own axes, no nested reduction, no
 * loop-level nodes, integer load indices. */
static bool check_expr(const body_check *k, const te_expr *e) {
    if (!e) return true;
    if (e->type.lanes != 1) return fail(k, "vector expressions belong to the loop IR");
    switch (e->kind) {
    case TE_VAR:
        if (e->var->kind == TE_ITER_REDUCE) {
            if (!among(e->var, k->raxes, k->nraxes))
                return fail(k, "reduction axis '%s' is used outside %s", e->var->name,
                            k->nraxes ? "its reduction" : "a reduction");
        } else if (!among(e->var, k->axes, k->ndim)) {
            return fail(k, "body uses '%s', which is not one of its axes", e->var->name);
        }
        return true;
    case TE_REDUCE:
        return fail(k, "a reduction inside an expression (a reduction must be the whole body)");
    case TE_BUF_LOAD: case TE_RAMP: case TE_BROADCAST:
        return fail(k, "buffer loads, ramps and broadcasts belong to the loop IR");
    case TE_LOAD:
        if (e->nindex != e->tensor->ndim)
            return fail(k, "load of '%s' has the wrong number of indices", e->tensor->name);
        for (int i = 0; i < e->nindex; i++) {
            if (!is_int(e->index[i]->type))
                return fail(k, "an index of the load of '%s' is not an integer", e->tensor->name);
            if (!check_expr(k, e->index[i])) return false;
        }
        return true;
    default:
        return check_expr(k, e->a) && check_expr(k, e->b) && check_expr(k, e->c);
    }
}

/* The whole body: a top-level reduction's axes are checked, then what lies below it. */
static bool check_body(body_check *k, const te_expr *body) {
    if (body->type.lanes != 1) return fail(k, "the element type is a vector");
    if (body->kind != TE_REDUCE) return check_expr(k, body);
    if (body->nraxes < 1) return fail(k, "a reduction needs at least one axis");
    for (int i = 0; i < body->nraxes; i++) {
        const te_iter *r = body->raxes[i];
        if (!r || r->kind != TE_ITER_REDUCE)
            return fail(k, "reduction over '%s', which is not a reduction axis",
                        r ? r->name : "(null)");
        if (r->extent < 1) return fail(k, "reduction axis '%s' has no constant extent", r->name);
        for (int j = 0; j < i; j++)
            if (body->raxes[j] == r) return fail(k, "reduction axis '%s' is given twice", r->name);
    }
    if (body->type.scalar == TE_BOOL) return fail(k, "a reduction of booleans");
    k->raxes = body->raxes;
    k->nraxes = body->nraxes;
    return check_expr(k, body->a);
}

te_tensor *te_compute(te_ctx *c, const char *name, int ndim, const int64_t *shape, te_iter **axes,
                      const te_expr *body) {
    if (c->oom) return NULL;
    if (!name) name = "compute";
    if (!check_shape(c, "compute", name, ndim, shape)) return NULL;
    if (!axes || !body) {
        /* a constructor of the body or axes already failed; keep its message */
        if (c->err && c->err->status == WPK_OK)
            wpk_error(c->err, WPK_ERR_INVALID_ARG, "compute '%s': no %s", name,
                      axes ? "body" : "axes");
        return NULL;
    }
    for (int i = 0; i < ndim; i++) {
        const te_iter *a = axes[i];
        if (!a || a->kind != TE_ITER_DATA || a->min != 0 || a->extent != shape[i]) {
            wpk_error(c->err, WPK_ERR_INVALID_ARG, "compute '%s': axis %d does not match dim %d "
                      "of its shape (%lld); use te_compute_axes", name, i, i,
                      (long long)shape[i]);
            return NULL;
        }
        for (int j = 0; j < i; j++)
            if (axes[j] == a) {
                wpk_error(c->err, WPK_ERR_INVALID_ARG, "compute '%s': axis '%s' is given twice",
                          name, a->name);
                return NULL;
            }
    }
    body_check k = {c, name, axes, ndim, NULL, 0};
    if (!check_body(&k, body)) return NULL;

    te_tensor *t = alloc(c, sizeof *t);
    te_iter **own = alloc(c, sizeof(te_iter *) * (size_t)ndim);
    if (!t || !own || !(t->name = dup_name(c, name))) return NULL;
    memcpy(own, axes, sizeof(te_iter *) * (size_t)ndim);
    t->kind = TE_COMPUTE;
    t->dtype = body->type.scalar;
    t->ndim = ndim;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    t->axes = own;
    t->body = body;
    return t;
}

/* ---- inputs ---- */

static void collect(const te_expr *e, const te_tensor **out, int max, int *n) {
    if (!e) return;
    if (e->kind == TE_LOAD) {
        bool seen = false;
        for (int i = 0; i < *n && i < max; i++) seen |= out[i] == e->tensor;
        if (!seen) {
            if (*n < max) out[*n] = e->tensor;
            (*n)++;
        }
        for (int i = 0; i < e->nindex; i++) collect(e->index[i], out, max, n);
        return;
    }
    collect(e->a, out, max, n);
    collect(e->b, out, max, n);
    collect(e->c, out, max, n);
}

int te_tensor_inputs(const te_tensor *t, const te_tensor **out, int max) {
    int n = 0;
    if (t && t->kind == TE_COMPUTE) collect(t->body, out, max, &n);
    /* past `max` the dedup above cannot see the dropped tensors: count only what was kept */
    return n < max ? n : max;
}

#define MAX_INPUTS 64

bool te_tensor_is_constant(const te_tensor *t) {
    if (!t) return false;
    if (t->kind == TE_PLACEHOLDER) return t->constant;
    const te_tensor *in[MAX_INPUTS];
    int n = 0;
    collect(t->body, in, MAX_INPUTS, &n);
    if (n > MAX_INPUTS) return false; /* too many to check: say no, which is always safe */
    for (int i = 0; i < n; i++)
        if (!te_tensor_is_constant(in[i])) return false;
    return true;
}
