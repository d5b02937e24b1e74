/* emit_cuda.c -- loop IR -> CUDA C: one `extern "C" __global__` kernel, the device helpers its
 * body uses, and its launch description. The structure follows the C target (codegen/c/emit.c):
 * a checking pre-pass, then one walk that prints statements through an indenting string
 * builder; what is GPU-specific (bound loops, launch dims, shared memory, barriers, privatized
 * per-thread tiles) is described in cg_cuda.h. */
#include "codegen/cuda/emit_cuda.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

#define SMEM_ALIGN 16

cg_cuda_options cg_cuda_default_options(void) {
    return (cg_cuda_options){.index_bits = 0, .vector_access = true};
}

void cg_cuda_fail(em *m, wpk_status st, const char *fmt, ...) {
    if (m->st != WPK_OK) return; /* the first error is the cause */
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    m->st = wpk_error(m->ctx, st, "CUDA codegen, kernel '%s': %s", m->f->name, msg);
}

static bool grow(em *m, void **arr, int n, int *cap, size_t sz) {
    if (n < *cap) return true;
    int ncap = *cap ? *cap * 2 : 16;
    void *p = wpk_realloc(*arr, sz * (size_t)ncap);
    if (!p) {
        cg_cuda_fail(m, WPK_ERR_NOMEM, "out of memory");
        return false;
    }
    *arr = p;
    *cap = ncap;
    return true;
}

static void release(em *m, strbuf *b) {
    if (b->oom) cg_cuda_fail(m, WPK_ERR_NOMEM, "out of memory");
    sb_free(b);
}

static const char *ctype(const em *m, te_scalar s) {
    switch (s) {
    case TE_BOOL: return "bool";
    case TE_I32: return "int";
    case TE_I64: return m->idx32 ? "int" : "long long";
    case TE_F32: return "float";
    }
    return "?";
}

/* The helper suffix of the emitted type (I64 in 32-bit mode is an int). */
static bool wide(const em *m, te_scalar s) { return s == TE_I64 && !m->idx32; }

static int scalar_bytes(te_scalar s) { return s == TE_BOOL ? 1 : s == TE_I64 ? 8 : 4; }

static const char *const AXIS_NAME[AX_COUNT] = {"threadIdx.x", "threadIdx.y", "threadIdx.z",
                                                "blockIdx.x",  "blockIdx.y",  "blockIdx.z"};

static int axis_of(const char *tag) {
    for (int i = 0; tag && i < AX_COUNT; i++)
        if (!strcmp(tag, AXIS_NAME[i])) return i;
    return AX_NONE;
}

typedef enum helper_bit {
    H_FLOORDIV_I32 = 1 << 0, H_FLOORDIV_I64 = 1 << 1, H_FLOORMOD_I32 = 1 << 2,
    H_FLOORMOD_I64 = 1 << 3, H_MIN_F32 = 1 << 4, H_MIN_I32 = 1 << 5, H_MIN_I64 = 1 << 6,
    H_MAX_F32 = 1 << 7, H_MAX_I32 = 1 << 8, H_MAX_I64 = 1 << 9, H_ABS_I32 = 1 << 10,
    H_ABS_I64 = 1 << 11
} helper_bit;

/* ---- names ---- */

static void put_ident(strbuf *b, const char *name, int id) {
    char tmp[128];
    size_t n = 0;
    char c0 = name ? name[0] : '\0';
    bool letter = (c0 >= 'a' && c0 <= 'z') || (c0 >= 'A' && c0 <= 'Z');
    if (!letter) tmp[n++] = 'v';
    for (const char *p = name ? name : ""; *p && n < sizeof tmp - 1; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_';
        tmp[n++] = ok ? ch : '_';
    }
    tmp[n] = '\0';
    /* `_id` keeps IR names apart from each other and from the wpk_ helpers and temporaries */
    sb_printf(b, "%s_%d", tmp, id);
}

static void put_var(strbuf *b, const te_iter *it) { put_ident(b, it->name, it->id); }
static void put_buf(strbuf *b, const loop_buffer *buf) { put_ident(b, buf->name, buf->id); }

static bool valid_ident(const char *s) {
    if (!s || !*s || (*s >= '0' && *s <= '9')) return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
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
            cg_cuda_fail(m, WPK_ERR_NOMEM, "out of memory");
        }
        va_end(ap);
    }
    sb_puts(&m->body, "\n");
}

/* ---- bindings and facts about index expressions ---- */

binding *cg_cuda_lookup(em *m, const te_iter *it) {
    for (int i = m->nvars - 1; i >= 0; i--)
        if (m->vars[i].it == it) return &m->vars[i];
    return NULL;
}

bool cg_cuda_push_var(em *m, binding b) {
    if (!grow(m, (void **)&m->vars, m->nvars, &m->cap_vars, sizeof *m->vars)) return false;
    m->vars[m->nvars++] = b;
    return true;
}

static bool push_buf(em *m, const loop_buffer *b) {
    if (!grow(m, (void **)&m->bufs, m->nbufs, &m->cap_bufs, sizeof *m->bufs)) return false;
    m->bufs[m->nbufs++] = b;
    return true;
}

static bool nonneg(em *m, const te_expr *e) {
    int64_t v;
    switch (e->kind) {
    case TE_INT: return e->i >= 0;
    case TE_VAR: {
        binding *b = cg_cuda_lookup(m, e->var);
        return b && b->nonneg;
    }
    case TE_ADD: case TE_MUL: case TE_MIN: return nonneg(m, e->a) && nonneg(m, e->b);
    case TE_MAX: return nonneg(m, e->a) || nonneg(m, e->b);
    case TE_DIV: return nonneg(m, e->a) && te_is_const_int(e->b, &v) && v > 0;
    case TE_MOD: return te_is_const_int(e->b, &v) && v > 0;
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

static int64_t multiple(em *m, const te_expr *e) {
    switch (e->kind) {
    case TE_INT: return e->i < 0 ? -e->i : e->i;
    case TE_VAR: {
        binding *b = cg_cuda_lookup(m, e->var);
        return b ? b->mult : 1;
    }
    case TE_ADD: case TE_SUB: return gcd64(multiple(m, e->a), multiple(m, e->b));
    case TE_MUL: {
        int64_t x = multiple(m, e->a), y = multiple(m, e->b);
        if (x == 0 || y == 0) return 0;
        if (x > INT32_MAX || y > INT32_MAX) return 1;
        return x * y;
    }
    default: return 1;
    }
}

/* A loop's binding: its range when constant, its axis when bound. */
binding cg_cuda_loop_binding(em *m, const loop_stmt *s) {
    binding b = {.it = s->var, .t = te_t(TE_I64), .nonneg = nonneg(m, s->min), .mult = 1,
                 .axis = s->for_kind == LOOP_BIND ? axis_of(s->bind_tag) : AX_NONE};
    int64_t a, n;
    if (te_is_const_int(s->min, &a) && te_is_const_int(s->extent, &n) && n >= 1) {
        b.ranged = true;
        b.lo = a;
        b.hi = a + n - 1;
    }
    return b;
}

binding cg_cuda_let_binding(em *m, const loop_stmt *s) {
    te_type t = s->value->type;
    bool scalar = t.lanes == 1;
    return (binding){.it = s->var, .t = t, .nonneg = scalar && nonneg(m, s->value),
                     .mult = scalar ? multiple(m, s->value) : 1, .axis = AX_NONE,
                     .value = scalar && t.scalar != TE_F32 ? s->value : NULL};
}

/* ---- the pre-pass: launch dims, shared buffers, what the kernel may not do ---- */

typedef struct box {
    bool has[AX_COUNT];
    int64_t lo[AX_COUNT], hi[AX_COUNT];
} box;

typedef struct scan_ctx {
    bool in_loop;        /* inside a non-bound loop */
    unsigned axes;       /* bound axes enclosing, as bits */
    int block_depth;
} scan_ctx;

typedef struct scan_state {
    bool global_store_outside;  /* a store into an argument outside every blockIdx loop */
    const char *outside_name;
    bool fits32;                /* every constant and loop bound fits 32 bits */
} scan_state;

static int shared_index(const em *m, const loop_buffer *b) {
    for (int i = 0; i < m->nshared; i++)
        if (m->shared[i] == b) return i;
    return -1;
}

static void scan_expr(em *m, const te_expr *e, scan_state *S) {
    if (!e) return;
    if (e->kind == TE_INT && (e->i > INT32_MAX || e->i < -INT32_MAX)) S->fits32 = false;
    scan_expr(m, e->a, S);
    scan_expr(m, e->b, S);
    scan_expr(m, e->c, S);
}

/* The ranges of the outermost blockIdx loops in s. */
static void block_box(const loop_stmt *s, box *B) {
    if (!s) return;
    switch (s->kind) {
    case LOOP_FOR: {
        int ax = s->for_kind == LOOP_BIND ? axis_of(s->bind_tag) : AX_NONE;
        int64_t a, n;
        if (ax >= AX_BX && te_is_const_int(s->min, &a) && te_is_const_int(s->extent, &n)) {
            if (!B->has[ax] || a < B->lo[ax]) B->lo[ax] = a;
            if (!B->has[ax] || a + n - 1 > B->hi[ax]) B->hi[ax] = a + n - 1;
            B->has[ax] = true;
            return;
        }
        if (ax == AX_NONE || is_thread(ax)) return; /* nothing bound to blocks in there may be */
        block_box(s->body, B);
        return;
    }
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++) block_box(s->stmts[i], B);
        return;
    case LOOP_IF: block_box(s->body, B); block_box(s->else_body, B); return;
    case LOOP_LET: case LOOP_ALLOC: block_box(s->body, B); return;
    case LOOP_STORE: return;
    }
}

static bool any_block(const box *B) {
    for (int a = AX_BX; a < AX_COUNT; a++)
        if (B->has[a]) return true;
    return false;
}

static void scan_stmt(em *m, const loop_stmt *s, scan_ctx k, scan_state *S);

static void scan_seq(em *m, const loop_stmt *s, scan_ctx k, scan_state *S) {
    /* nests over blocks in sequence must cover different blocks: a kernel cannot wait for other
     * blocks between them (loop partitioning makes such pieces, over disjoint ranges) */
    box *boxes = wpk_calloc((size_t)(s->nstmts ? s->nstmts : 1), sizeof *boxes);
    if (!boxes) {
        cg_cuda_fail(m, WPK_ERR_NOMEM, "out of memory");
        return;
    }
    for (int i = 0; i < s->nstmts; i++) block_box(s->stmts[i], &boxes[i]);
    for (int i = 0; i < s->nstmts && m->st == WPK_OK; i++) {
        if (!any_block(&boxes[i])) continue;
        for (int j = i + 1; j < s->nstmts; j++) {
            if (!any_block(&boxes[j])) continue;
            bool disjoint = false;
            for (int a = AX_BX; a < AX_COUNT; a++)
                if (boxes[i].has[a] && boxes[j].has[a] &&
                    (boxes[i].hi[a] < boxes[j].lo[a] || boxes[j].hi[a] < boxes[i].lo[a]))
                    disjoint = true;
            if (!disjoint) {
                cg_cuda_fail(m, WPK_ERR_UNSUPPORTED,
                     "two loop nests bound to blockIdx run one after the other over the same "
                     "blocks (statements %d and %d of a sequence): a kernel cannot wait for other "
                     "blocks; make them separate kernels", i, j);
                break;
            }
        }
    }
    wpk_free(boxes);
    for (int i = 0; i < s->nstmts; i++) scan_stmt(m, s->stmts[i], k, S);
}

static void scan_for(em *m, const loop_stmt *s, scan_ctx k, scan_state *S) {
    int64_t a, n;
    const char *v = s->var->name;
    int id = s->var->id;
    scan_expr(m, s->min, S);
    scan_expr(m, s->extent, S);
    if (s->for_kind == LOOP_PARALLEL) {
        cg_cuda_fail(m, WPK_ERR_UNSUPPORTED,
             "loop '%s_%d' is parallel, a CPU annotation: bind it to blockIdx/threadIdx for the "
             "GPU", v, id);
        return;
    }
    if (s->for_kind != LOOP_BIND) {
        k.in_loop = true;
        scan_stmt(m, s->body, k, S);
        return;
    }
    int ax = axis_of(s->bind_tag);
    if (ax == AX_NONE) {
        cg_cuda_fail(m, WPK_ERR_INVALID_ARG, "loop '%s_%d' is bound to '%s', not a GPU axis", v, id,
             s->bind_tag ? s->bind_tag : "(null)");
        return;
    }
    if (!te_is_const_int(s->min, &a) || !te_is_const_int(s->extent, &n) || a < 0 || n < 1) {
        cg_cuda_fail(m, WPK_ERR_UNSUPPORTED, "loop '%s_%d' bound to %s has no constant range", v, id,
             AXIS_NAME[ax]);
        return;
    }
    if (k.axes & (1u << ax)) {
        cg_cuda_fail(m, WPK_ERR_UNSUPPORTED, "loop '%s_%d' is bound to %s inside another loop bound to it",
             v, id, AXIS_NAME[ax]);
        return;
    }
    if (!is_thread(ax) && (k.in_loop || (k.axes & 7u))) {
        cg_cuda_fail(m, WPK_ERR_UNSUPPORTED,
             "loop '%s_%d' bound to %s is inside a %s loop: blockIdx loops must be outermost", v,
             id, AXIS_NAME[ax], k.in_loop ? "serial" : "thread-bound");
        return;
    }
    int64_t lim = is_thread(ax) ? 1024 : ax == AX_BX ? INT32_MAX : 65535;
    if (a + n > lim) {
        cg_cuda_fail(m, WPK_ERR_UNSUPPORTED, "loop '%s_%d' bound to %s reaches %" PRId64
             " (the axis holds %" PRId64 ")", v, id, AXIS_NAME[ax], a + n, lim);
        return;
    }
    if (a + n > m->dim[ax]) m->dim[ax] = a + n;
    k.axes |= 1u << ax;
    if (!is_thread(ax)) k.block_depth++;
    scan_stmt(m, s->body, k, S);
}

static void scan_stmt(em *m, const loop_stmt *s, scan_ctx k, scan_state *S) {
    if (!s || m->st != WPK_OK) {
        if (!s) cg_cuda_fail(m, WPK_ERR_INVALID_ARG, "missing statement");
        return;
    }
    switch (s->kind) {
    case LOOP_FOR: scan_for(m, s, k, S); return;
    case LOOP_LET:
        scan_expr(m, s->value, S);
        scan_stmt(m, s->body, k, S);
        return;
    case LOOP_IF:
        scan_expr(m, s->cond, S);
        scan_stmt(m, s->body, k, S);
        if (s->else_body) scan_stmt(m, s->else_body, k, S);
        return;
    case LOOP_STORE:
        scan_expr(m, s->index, S);
        scan_expr(m, s->value, S);
        if (s->buffer && s->buffer->scope == LOOP_SCOPE_ARG && k.block_depth == 0 &&
            !S->global_store_outside) {
            S->global_store_outside = true;
            S->outside_name = s->buffer->name;
        }
        return;
    case LOOP_ALLOC: {
        const loop_buffer *b = s->buffer;
        if (!b) {
            cg_cuda_fail(m, WPK_ERR_INVALID_ARG, "an allocation has no buffer");
            return;
        }
        if (b->size <= 0) {
            cg_cuda_fail(m, WPK_ERR_INVALID_ARG, "allocation of '%s' has %" PRId64 " elements", b->name,
                 b->size);
            return;
        }
        if (b->size > INT32_MAX) S->fits32 = false;
        if (b->dtype == TE_I64) S->fits32 = false;
        if (b->scope == LOOP_SCOPE_HEAP || b->scope == LOOP_SCOPE_ARG) {
            cg_cuda_fail(m, WPK_ERR_UNSUPPORTED,
                 "intermediate '%s' would live in global memory allocated by the kernel (a root "
                 "stage that is not an output): inline it, or compute it at a loop in \"shared\" "
                 "or \"local\" scope", b->name);
            return;
        }
        if (b->scope == LOOP_SCOPE_SHARED) {
            if (k.axes & 7u) {
                cg_cuda_fail(m, WPK_ERR_UNSUPPORTED,
                     "shared buffer '%s' is allocated inside a thread-bound loop: every thread "
                     "would use the same memory; compute it at a loop outside the thread loops",
                     b->name);
                return;
            }
            if (shared_index(m, b) < 0) {
                if (m->nshared == MAX_SHARED_BUFS) {
                    cg_cuda_fail(m, WPK_ERR_UNSUPPORTED, "more than %d shared buffers", MAX_SHARED_BUFS);
                    return;
                }
                int64_t bytes = b->size * scalar_bytes(b->dtype);
                m->shared[m->nshared] = b;
                m->shared_off[m->nshared++] = m->shared_bytes;
                m->shared_bytes += (bytes + SMEM_ALIGN - 1) / SMEM_ALIGN * SMEM_ALIGN;
            }
        }
        scan_stmt(m, s->body, k, S);
        return;
    }
    case LOOP_SEQ: scan_seq(m, s, k, S); return;
    }
    cg_cuda_fail(m, WPK_ERR_INVALID_ARG, "statement kind %d", (int)s->kind);
}

/* ---- effects on shared memory, for barriers ---- */

static void effects_expr(const em *m, const te_expr *e, uint64_t *r) {
    if (!e) return;
    if (e->kind == TE_BUF_LOAD && e->buffer && e->buffer->scope == LOOP_SCOPE_SHARED) {
        int i = shared_index(m, e->buffer);
        if (i >= 0) *r |= (uint64_t)1 << i;
    }
    effects_expr(m, e->a, r);
    effects_expr(m, e->b, r);
    effects_expr(m, e->c, r);
}

static void effects(const em *m, const loop_stmt *s, uint64_t *r, uint64_t *w) {
    if (!s) return;
    switch (s->kind) {
    case LOOP_FOR:
        effects_expr(m, s->min, r);
        effects_expr(m, s->extent, r);
        effects(m, s->body, r, w);
        return;
    case LOOP_LET: effects_expr(m, s->value, r); effects(m, s->body, r, w); return;
    case LOOP_IF:
        effects_expr(m, s->cond, r);
        effects(m, s->body, r, w);
        effects(m, s->else_body, r, w);
        return;
    case LOOP_STORE: {
        effects_expr(m, s->index, r);
        effects_expr(m, s->value, r);
        int i = s->buffer && s->buffer->scope == LOOP_SCOPE_SHARED ? shared_index(m, s->buffer) : -1;
        if (i >= 0) *w |= (uint64_t)1 << i;
        return;
    }
    case LOOP_ALLOC: effects(m, s->body, r, w); return;
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++) effects(m, s->stmts[i], r, w);
        return;
    }
}

static void barrier(em *m) {
    line(m, "__syncthreads();");
    m->pend_r = m->pend_w = 0;
}

/* An expression every thread evaluates at block level (a let's value, a condition, a bound):
 * a read of shared memory like a group's. */
static void block_read(em *m, const te_expr *e) {
    if (m->thread_depth) return;
    uint64_t r = 0;
    effects_expr(m, e, &r);
    if (r & m->pend_w) barrier(m);
    m->pend_r |= r;
}

/* Before a group of statements every thread runs at block level: a barrier when it reads what
 * another group wrote, or overwrites what another group read, since the last one. Two groups
 * writing one buffer with no read between need none: lowering writes each element of a stage
 * once per region (a cooperative copy's pieces write disjoint elements). */
static void group(em *m, const loop_stmt *s) {
    uint64_t r = 0, w = 0;
    effects(m, s, &r, &w);
    if ((r & m->pend_w) || (w & m->pend_r)) barrier(m);
    if (w & r) {
        int i = 0;
        while (!((w & r) >> i & 1)) i++;
        cg_cuda_fail(m, WPK_ERR_UNSUPPORTED,
             "shared buffer '%s' is both written and read inside one thread-bound loop nest: "
             "its threads would need a barrier inside divergent code; compute it at a loop "
             "outside the thread loops", m->shared[i]->name);
    }
    m->pend_r |= r;
    m->pend_w |= w;
}

/* ---- expressions ---- */

static void emit(em *m, const te_expr *e, int lane, strbuf *out);

static void put_float(strbuf *out, double v) {
    float f = (float)v;
    if (f != f) {
        sb_puts(out, "__int_as_float(0x7fffffff)");
        return;
    }
    if (f == INFINITY || f == -INFINITY) {
        sb_puts(out, f > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)");
        return;
    }
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.9g", (double)f);
    bool plain = !strpbrk(tmp, ".e");
    sb_printf(out, f < 0 || (f == 0 && 1 / f < 0) ? "(%s%sf)" : "%s%sf", tmp, plain ? ".0" : "");
}

static void put_int(em *m, strbuf *out, te_scalar s, int64_t v) {
    if (s == TE_BOOL) {
        sb_puts(out, v ? "true" : "false");
    } else if (v == INT64_MIN) {
        sb_puts(out, "(-9223372036854775807LL - 1)");
    } else if (wide(m, s) && (v > INT32_MAX || v < -INT32_MAX)) {
        sb_printf(out, v < 0 ? "(%" PRId64 "LL)" : "%" PRId64 "LL", v);
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

static void emit_binop(em *m, const te_expr *e, const char *op, int lane, strbuf *out) {
    sb_puts(out, "(");
    emit(m, e->a, lane, out);
    sb_printf(out, " %s ", op);
    emit(m, e->b, lane, out);
    sb_puts(out, ")");
}

static void emit_call(em *m, const char *name, const te_expr *a, const te_expr *b, int lane,
                      strbuf *out) {
    sb_printf(out, "%s(", name);
    emit(m, a, lane, out);
    if (b) {
        sb_puts(out, ", ");
        emit(m, b, lane, out);
    }
    sb_puts(out, ")");
}

static bool is_visible(em *m, const loop_buffer *b) {
    for (int i = 0; i < m->nbufs; i++)
        if (m->bufs[i] == b) return true;
    return false;
}

static bool check_buffer(em *m, const loop_buffer *b) {
    if (!b) {
        cg_cuda_fail(m, WPK_ERR_INVALID_ARG, "a load or store has no buffer");
        return false;
    }
    if (!is_visible(m, b)) {
        cg_cuda_fail(m, WPK_ERR_INVALID_ARG,
             "buffer '%s' is used but is neither an argument nor allocated around the use",
             b->name);
        return false;
    }
    return true;
}

static const priv_plan *plan_of(const em *m, const loop_buffer *b) {
    for (int i = m->nplans - 1; i >= 0; i--)
        if (m->plans[i].buf == b) return &m->plans[i];
    return NULL;
}

/* The index of a privatized tile's element in the thread's own compact array. */
static void emit_tile_index(em *m, const priv_plan *p, const te_expr *index, strbuf *out) {
    linform L = {0};
    split S;
    const char *why = "?";
    homes H;
    for (int a = 0; a < AX_COUNT; a++) H.dim[a] = -1;
    for (int d = 0; d < LOOP_MAX_DIMS; d++)
        if (p->axis[d] != AX_NONE) H.dim[p->axis[d]] = d, H.a[p->axis[d]] = p->coef[d];
    if (!cg_cuda_linearize(m, index, 1, &L, 0) || !cg_cuda_split_index(m, p->buf, &L, &H, &S, &why)) {
        cg_cuda_fail(m, WPK_ERR_INTERNAL, "tile '%s': an access changed between analysis and emission",
             p->buf->name);
        return;
    }
    int nd = p->buf->ndim > 0 ? p->buf->ndim : 1;
    int64_t cst[LOOP_MAX_DIMS];
    cst[nd - 1] = 1;
    for (int d = nd - 2; d >= 0; d--) cst[d] = cst[d + 1] * p->ext[d + 1];
    int64_t k = 0;
    for (int d = 0; d < nd; d++) k += S.digit[d] * cst[d];
    sb_puts(out, "(");
    put_int(m, out, TE_I64, k);
    for (int i = 0; i < L.n; i++) {
        if (S.dim_of[i] < 0 || S.dim_of[i] >= nd || is_thread(cg_cuda_lookup(m, L.var[i])->axis)) continue;
        int64_t c = S.dcoef[i] * cst[S.dim_of[i]];
        if (c == 0) continue;
        sb_puts(out, " + ");
        if (c != 1) {
            put_int(m, out, TE_I64, c);
            sb_puts(out, "*");
        }
        put_var(out, L.var[i]);
    }
    sb_puts(out, ")");
}

/* Whether lanes of this vector access may go through float4: F32, a multiple of 4 lanes at
 * stride 1 from a base provably a multiple of 4 elements, in global or shared memory aligned
 * to 16 bytes. */
static bool float4_ok(em *m, const loop_buffer *b, te_type t, const te_expr *idx) {
    int64_t stride, mult;
    if (!m->opt->vector_access || t.scalar != TE_F32 || t.lanes % 4 != 0 || idx->kind != TE_RAMP ||
        idx->a->type.lanes != 1 || !te_is_const_int(idx->b, &stride) || stride != 1)
        return false;
    if (b->scope != LOOP_SCOPE_ARG && b->scope != LOOP_SCOPE_SHARED) return false;
    int align = b->scope == LOOP_SCOPE_SHARED ? SMEM_ALIGN : b->align;
    if (align % 16 != 0) return false;
    mult = multiple(m, idx->a);
    return mult == 0 || mult % 4 == 0;
}

/* " + 4q" for the q-th float4 of a vector (nothing for the first). */
static const char *chunk_offset(int q) {
    static _Thread_local char buf[24];
    if (q == 0) return "";
    snprintf(buf, sizeof buf, " + %d", 4 * q);
    return buf;
}

static void emit_load(em *m, const te_expr *e, int lane, strbuf *out) {
    const loop_buffer *b = e->buffer;
    if (!check_buffer(m, b)) return;
    const priv_plan *p = plan_of(m, b);
    if (p && p->compact) {
        if (e->a->type.lanes != 1) {
            cg_cuda_fail(m, WPK_ERR_UNSUPPORTED, "vector access of per-thread tile '%s'", b->name);
            return;
        }
        put_buf(out, b);
        sb_puts(out, "[");
        emit_tile_index(m, p, e->a, out);
        sb_puts(out, "]");
        return;
    }
    if (lane >= 0 && !m->guarded && float4_ok(m, b, e->type, e->a)) {
        int chunk = lane / 4, t = -1;
        for (int i = 0; i < m->nmemos; i++)
            if (m->memos[i].chunk == chunk && (m->memos[i].e == e || te_expr_equal(m->memos[i].e, e)))
                t = m->memos[i].temp;
        if (t < 0 && m->nmemos < MEMO_MAX) {
            /* hoisted in front of the statement being printed: one 16-byte load */
            strbuf base = {0};
            emit(m, e->a->a, -1, &base);
            strbuf name = {0};
            put_buf(&name, b);
            t = m->ntemps++;
            if (m->st == WPK_OK && !base.oom && !name.oom)
                line(m, "const float4 wpk_t%d = *(const float4 *)(%s + %s%s);", t, name.s,
                     base.s, chunk_offset(chunk));
            release(m, &base);
            release(m, &name);
            m->memos[m->nmemos++] = (memo){e, chunk, t};
        }
        if (t >= 0) {
            sb_printf(out, "wpk_t%d.%c", t, "xyzw"[lane % 4]);
            return;
        }
    }
    put_buf(out, b);
    sb_puts(out, "[");
    emit(m, e->a, lane, out);
    sb_puts(out, "]");
}

static void emit_divmod(em *m, const te_expr *e, int lane, strbuf *out) {
    te_scalar s = e->type.scalar;
    if (s == TE_F32) {
        if (e->kind == TE_MOD) {
            cg_cuda_fail(m, WPK_ERR_UNSUPPORTED, "modulo of float values");
            return;
        }
        emit_binop(m, e, "/", lane, out);
        return;
    }
    int64_t d;
    const te_expr *div = e->b->kind == TE_BROADCAST ? e->b->a : e->b;
    if (te_is_const_int(div, &d) && d > 0 && nonneg(m, e->a)) {
        emit_binop(m, e, op_text(e->kind), lane, out);
        return;
    }
    bool w = wide(m, s);
    bool isdiv = e->kind == TE_DIV;
    m->helpers |= isdiv ? (w ? H_FLOORDIV_I64 : H_FLOORDIV_I32) : (w ? H_FLOORMOD_I64 : H_FLOORMOD_I32);
    emit_call(m, isdiv ? (w ? "wpk_floordiv_i64" : "wpk_floordiv_i32")
                       : (w ? "wpk_floormod_i64" : "wpk_floormod_i32"),
              e->a, e->b, lane, out);
}

static void emit(em *m, const te_expr *e, int lane, strbuf *out) {
    if (m->st != WPK_OK) return;
    if (!e) {
        cg_cuda_fail(m, WPK_ERR_INVALID_ARG, "missing expression");
        return;
    }
    te_scalar s = e->type.scalar;
    int lanes = e->type.lanes;
    if (e->kind == TE_VAR) {
        binding *b = cg_cuda_lookup(m, e->var);
        if (!b) {
            cg_cuda_fail(m, WPK_ERR_INVALID_ARG, "variable '%s_%d' is used outside its loop or let",
                 e->var->name, e->var->id);
            return;
        }
        lanes = b->t.lanes;
    }
    if (lanes == 1) lane = -1;
    else if (lane < 0) {
        cg_cuda_fail(m, WPK_ERR_INVALID_ARG, "a %d-lane vector where a scalar is expected", lanes);
        return;
    }
    switch (e->kind) {
    case TE_INT: put_int(m, out, s, e->i); return;
    case TE_FLOAT: put_float(out, e->f); return;
    case TE_VAR:
        put_var(out, e->var);
        if (lane >= 0) sb_printf(out, "[%d]", lane);
        return;
    case TE_ADD: case TE_SUB: case TE_MUL: case TE_LT: case TE_LE: case TE_EQ: case TE_NE:
        emit_binop(m, e, op_text(e->kind), lane, out);
        return;
    case TE_DIV: case TE_MOD: emit_divmod(m, e, lane, out); return;
    case TE_MIN: case TE_MAX: {
        bool mn = e->kind == TE_MIN;
        const char *name;
        if (s == TE_F32) {
            m->helpers |= mn ? H_MIN_F32 : H_MAX_F32;
            name = mn ? "wpk_min_f32" : "wpk_max_f32";
        } else if (wide(m, s)) {
            m->helpers |= mn ? H_MIN_I64 : H_MAX_I64;
            name = mn ? "wpk_min_i64" : "wpk_max_i64";
        } else if (s == TE_BOOL) {
            cg_cuda_fail(m, WPK_ERR_UNSUPPORTED, "min/max of booleans");
            return;
        } else {
            m->helpers |= mn ? H_MIN_I32 : H_MAX_I32;
            name = mn ? "wpk_min_i32" : "wpk_max_i32";
        }
        emit_call(m, name, e->a, e->b, lane, out);
        return;
    }
    case TE_AND: case TE_OR:
        sb_puts(out, "(");
        emit(m, e->a, lane, out);
        sb_puts(out, e->kind == TE_AND ? " && " : " || ");
        m->guarded++; /* evaluated only when the left side allows */
        emit(m, e->b, lane, out);
        m->guarded--;
        sb_puts(out, ")");
        return;
    case TE_NOT:
        sb_puts(out, "(!");
        emit(m, e->a, lane, out);
        sb_puts(out, ")");
        return;
    case TE_SELECT: /* ?: evaluates only the chosen branch, as guards need */
        sb_puts(out, "(");
        emit(m, e->a, lane, out);
        sb_puts(out, " ? ");
        m->guarded++;
        emit(m, e->b, lane, out);
        sb_puts(out, " : ");
        emit(m, e->c, lane, out);
        m->guarded--;
        sb_puts(out, ")");
        return;
    case TE_CAST:
        if (s == TE_BOOL) {
            sb_puts(out, "(");
            emit(m, e->a, lane, out);
            sb_puts(out, " != 0)");
        } else {
            sb_printf(out, "((%s)", ctype(m, s));
            emit(m, e->a, lane, out);
            sb_puts(out, ")");
        }
        return;
    case TE_CALL:
        if (s == TE_F32) {
            emit_call(m, fn_name(e->fn), e->a, e->fn == TE_FN_POW ? e->b : NULL, lane, out);
        } else if (e->fn == TE_FN_ABS && (s == TE_I32 || s == TE_I64)) {
            bool w = wide(m, s);
            m->helpers |= w ? H_ABS_I64 : H_ABS_I32;
            emit_call(m, w ? "wpk_abs_i64" : "wpk_abs_i32", e->a, NULL, lane, out);
        } else {
            cg_cuda_fail(m, WPK_ERR_UNSUPPORTED, "math function %s of a non-float value", fn_name(e->fn));
        }
        return;
    case TE_BUF_LOAD: emit_load(m, e, lane, out); return;
    case TE_RAMP: {
        /* lane l of base + l * stride */
        int64_t st;
        sb_puts(out, "(");
        emit(m, e->a, -1, out);
        if (lane > 0) {
            if (te_is_const_int(e->b, &st)) {
                sb_puts(out, " + ");
                put_int(m, out, s, st * lane);
            } else {
                sb_printf(out, " + %d * ", lane);
                emit(m, e->b, -1, out);
            }
        }
        sb_puts(out, ")");
        return;
    }
    case TE_BROADCAST: emit(m, e->a, -1, out); return;
    case TE_LOAD: case TE_REDUCE:
        cg_cuda_fail(m, WPK_ERR_UNSUPPORTED, "a tensor-level %s reached code generation (lower it first)",
             e->kind == TE_LOAD ? "load" : "reduction");
        return;
    }
    cg_cuda_fail(m, WPK_ERR_UNSUPPORTED, "expression kind %d", (int)e->kind);
}

/* ---- statements ---- */

static void emit_stmt(em *m, const loop_stmt *s);

/* Print the statement text `out`, the temporaries its emission hoisted printed before it. */
static void finish_stmt(em *m, strbuf *out) {
    if (m->st == WPK_OK && !out->oom) line(m, "%s", out->s ? out->s : "");
    release(m, out);
    m->nmemos = 0;
}

static void emit_store(em *m, const loop_stmt *s) {
    const loop_buffer *buf = s->buffer;
    if (!check_buffer(m, buf)) return;
    int lanes = s->value->type.lanes;
    if (s->index->type.lanes != lanes) {
        cg_cuda_fail(m, WPK_ERR_INVALID_ARG, "store to '%s' has %d index lanes for %d value lanes",
             buf->name, s->index->type.lanes, lanes);
        return;
    }
    if (s->value->type.scalar != buf->dtype) {
        cg_cuda_fail(m, WPK_ERR_INVALID_ARG, "store to '%s' of a %s value into a %s buffer", buf->name,
             ctype(m, s->value->type.scalar), ctype(m, buf->dtype));
        return;
    }
    const priv_plan *p = plan_of(m, buf);
    strbuf out = {0};
    if (lanes == 1) {
        put_buf(&out, buf);
        sb_puts(&out, "[");
        if (p && p->compact) emit_tile_index(m, p, s->index, &out);
        else emit(m, s->index, -1, &out);
        sb_puts(&out, "] = ");
        emit(m, s->value, -1, &out);
        sb_puts(&out, ";");
        finish_stmt(m, &out);
        return;
    }
    if (p && p->compact) {
        cg_cuda_fail(m, WPK_ERR_UNSUPPORTED, "vector access of per-thread tile '%s'", buf->name);
        return;
    }
    /* every lane's value first (a lane may read what another lane stores), then the stores */
    int t = m->ntemps++;
    sb_printf(&out, "const %s wpk_t%d[%d] = {", ctype(m, buf->dtype), t, lanes);
    for (int l = 0; l < lanes; l++) {
        if (l) sb_puts(&out, ", ");
        emit(m, s->value, l, &out);
    }
    sb_puts(&out, "};");
    finish_stmt(m, &out);
    strbuf name = {0};
    put_buf(&name, buf);
    if (float4_ok(m, buf, s->value->type, s->index)) {
        strbuf base = {0};
        emit(m, s->index->a, -1, &base);
        for (int q = 0; q < lanes / 4 && m->st == WPK_OK && !base.oom && !name.oom; q++)
            line(m, "*(float4 *)(%s + %s%s) = make_float4(wpk_t%d[%d], wpk_t%d[%d], "
                    "wpk_t%d[%d], wpk_t%d[%d]);",
                 name.s, base.s, chunk_offset(q), t, 4 * q, t, 4 * q + 1, t, 4 * q + 2, t, 4 * q + 3);
        release(m, &base);
    } else {
        /* lanes in order: equal indices keep the last lane, as in the C target */
        for (int l = 0; l < lanes && m->st == WPK_OK; l++) {
            strbuf one = {0};
            sb_printf(&one, "%s[", name.s ? name.s : "");
            emit(m, s->index, l, &one);
            sb_printf(&one, "] = wpk_t%d[%d];", t, l);
            finish_stmt(m, &one);
        }
    }
    release(m, &name);
}

static void emit_let(em *m, const loop_stmt *s) {
    te_type t = s->value->type;
    strbuf out = {0}, name = {0};
    put_var(&name, s->var);
    block_read(m, s->value);
    /* braces: unrolled copies of a body bind the same let variable more than once */
    line(m, "{");
    m->indent++;
    if (t.lanes == 1) {
        sb_printf(&out, "const %s %s = ", ctype(m, t.scalar), name.s ? name.s : "");
        emit(m, s->value, -1, &out);
        sb_puts(&out, ";");
    } else {
        sb_printf(&out, "const %s %s[%d] = {", ctype(m, t.scalar), name.s ? name.s : "", t.lanes);
        for (int l = 0; l < t.lanes; l++) {
            if (l) sb_puts(&out, ", ");
            emit(m, s->value, l, &out);
        }
        sb_puts(&out, "};");
    }
    finish_stmt(m, &out);
    release(m, &name);
    if (cg_cuda_push_var(m, cg_cuda_let_binding(m, s))) {
        emit_stmt(m, s->body);
        m->nvars--;
    }
    m->indent--;
    line(m, "}");
}

static void emit_if(em *m, const loop_stmt *s) {
    if (s->cond->type.lanes != 1) {
        cg_cuda_fail(m, WPK_ERR_UNSUPPORTED, "if on a vector condition (predicate the stores instead)");
        return;
    }
    block_read(m, s->cond);
    strbuf c = {0};
    sb_puts(&c, "if (");
    emit(m, s->cond, -1, &c);
    sb_puts(&c, ") {");
    finish_stmt(m, &c);
    /* at block level the condition is the same in every thread (no thread index is in scope),
     * so barriers may go inside; what either branch did is pending after it */
    uint64_t r0 = m->pend_r, w0 = m->pend_w;
    m->indent++;
    emit_stmt(m, s->body);
    m->indent--;
    uint64_t r1 = m->pend_r, w1 = m->pend_w;
    if (s->else_body) {
        m->pend_r = r0, m->pend_w = w0;
        line(m, "} else {");
        m->indent++;
        emit_stmt(m, s->else_body);
        m->indent--;
    }
    m->pend_r |= r1 | r0;
    m->pend_w |= w1 | w0;
    line(m, "}");
}

static void emit_bound(em *m, const loop_stmt *s) {
    int ax = axis_of(s->bind_tag);
    int64_t a = 0, n = 1;
    te_is_const_int(s->min, &a);
    te_is_const_int(s->extent, &n);
    strbuf v = {0};
    put_var(&v, s->var);
    const char *vn = v.s ? v.s : "";
    line(m, "{");
    m->indent++;
    line(m, "const %s %s = (%s)%s;", ctype(m, TE_I64), vn, ctype(m, TE_I64), AXIS_NAME[ax]);
    bool lo = a > 0, hi = a + n < m->dim[ax];
    if (lo && hi) line(m, "if (%s >= %" PRId64 " && %s < %" PRId64 ") {", vn, a, vn, a + n);
    else if (lo) line(m, "if (%s >= %" PRId64 ") {", vn, a);
    else if (hi) line(m, "if (%s < %" PRId64 ") {", vn, a + n);
    if (lo || hi) m->indent++;
    binding b = cg_cuda_loop_binding(m, s);
    if (cg_cuda_push_var(m, b)) {
        if (is_thread(ax)) {
            m->thread_depth++;
            m->thread_axes |= 1u << ax;
        }
        emit_stmt(m, s->body);
        if (is_thread(ax)) {
            m->thread_depth--;
            m->thread_axes &= ~(1u << ax);
        }
        m->nvars--;
    }
    if (lo || hi) {
        m->indent--;
        line(m, "}");
    }
    m->indent--;
    line(m, "}");
    release(m, &v);
}

static void emit_for(em *m, const loop_stmt *s) {
    if (s->min->type.lanes != 1 || s->extent->type.lanes != 1 || s->min->type.scalar == TE_F32 ||
        s->extent->type.scalar == TE_F32) {
        cg_cuda_fail(m, WPK_ERR_INVALID_ARG, "loop '%s_%d' has a non-integer or vector range", s->var->name,
             s->var->id);
        return;
    }
    if (s->for_kind == LOOP_BIND) {
        int ax = axis_of(s->bind_tag);
        if (is_thread(ax) && m->thread_depth == 0) {
            group(m, s);
            if (m->st != WPK_OK) return;
        }
        emit_bound(m, s);
        return;
    }
    block_read(m, s->min);
    block_read(m, s->extent);
    uint64_t br = 0, bw = 0;
    if (m->thread_depth == 0) {
        /* a loop at block level: a conflict of its body with what is pending gets one barrier
         * in front of the loop, not one per iteration; a buffer the body both reads and writes
         * is pending at the start of each iteration (the previous one's accesses) */
        effects(m, s->body, &br, &bw);
        if ((br & m->pend_w) || (bw & m->pend_r)) barrier(m);
        m->pend_r |= br & bw;
        m->pend_w |= br & bw;
    }
    strbuf v = {0}, lo = {0}, hi = {0};
    put_var(&v, s->var);
    emit(m, s->min, -1, &lo);
    int64_t a, n;
    if (te_is_const_int(s->min, &a) && te_is_const_int(s->extent, &n)) {
        put_int(m, &hi, TE_I64, a + n);
    } else if (te_is_const_int(s->min, &a) && a == 0) {
        emit(m, s->extent, -1, &hi);
    } else {
        sb_puts(&hi, "(");
        emit(m, s->min, -1, &hi);
        sb_puts(&hi, " + ");
        emit(m, s->extent, -1, &hi);
        sb_puts(&hi, ")");
    }
    m->nmemos = 0;
    if (s->for_kind == LOOP_UNROLLED) line(m, "#pragma unroll");
    if (m->st == WPK_OK && !(v.oom || lo.oom || hi.oom))
        line(m, "for (%s %s = %s; %s < %s; ++%s) {", ctype(m, TE_I64), v.s, lo.s, v.s, hi.s, v.s);
    else if (m->st == WPK_OK)
        cg_cuda_fail(m, WPK_ERR_NOMEM, "out of memory");
    release(m, &v);
    release(m, &lo);
    release(m, &hi);
    if (!cg_cuda_push_var(m, cg_cuda_loop_binding(m, s))) return;
    m->indent++;
    emit_stmt(m, s->body);
    m->indent--;
    m->nvars--;
    line(m, "}");
    m->pend_r |= br;
    m->pend_w |= bw;
}

static void emit_alloc(em *m, const loop_stmt *s) {
    const loop_buffer *b = s->buffer;
    strbuf name = {0};
    put_buf(&name, b);
    const char *n = name.s ? name.s : "";
    const char *ct = ctype(m, b->dtype);
    line(m, "{");
    m->indent++;
    bool planned = false;
    if (b->scope == LOOP_SCOPE_SHARED) {
        int i = shared_index(m, b);
        line(m, "%s *%s = (%s *)(wpk_smem + %" PRId64 ");", ct, n, ct, i >= 0 ? m->shared_off[i] : 0);
    } else if (m->thread_depth == 0) {
        priv_plan p;
        if (cg_cuda_plan_tile(m, s, &p) &&
            grow(m, (void **)&m->plans, m->nplans, &m->cap_plans, sizeof *m->plans)) {
            m->plans[m->nplans++] = p;
            planned = true;
            line(m, "%s %s[%" PRId64 "];%s", ct, n, p.size,
                 p.compact ? "  /* this thread's part of the tile */" : "");
        }
    } else {
        line(m, "%s %s[%" PRId64 "];", ct, n, b->size);
    }
    if (m->st == WPK_OK && push_buf(m, b)) {
        emit_stmt(m, s->body);
        m->nbufs--;
    }
    if (planned) m->nplans--;
    m->indent--;
    line(m, "}");
    release(m, &name);
}

static void emit_stmt(em *m, const loop_stmt *s) {
    if (m->st != WPK_OK) return;
    if (!s) {
        cg_cuda_fail(m, WPK_ERR_INVALID_ARG, "missing statement");
        return;
    }
    switch (s->kind) {
    case LOOP_FOR: emit_for(m, s); return;
    case LOOP_LET: emit_let(m, s); return;
    case LOOP_IF: emit_if(m, s); return;
    case LOOP_STORE:
        if (m->thread_depth == 0) group(m, s);
        emit_store(m, s);
        return;
    case LOOP_ALLOC: emit_alloc(m, s); return;
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++) emit_stmt(m, s->stmts[i]);
        return;
    }
    cg_cuda_fail(m, WPK_ERR_INVALID_ARG, "statement kind %d", (int)s->kind);
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

/* ---- the kernel's text ---- */

static void put_helpers(strbuf *o, unsigned h) {
    static const struct {
        unsigned bit;
        const char *text;
    } defs[] = {
        {H_FLOORDIV_I32, "__device__ __forceinline__ int wpk_floordiv_i32(int a, int b) {\n"
                         "    int q = a / b, r = a % b;\n"
                         "    return (r != 0 && (r < 0) != (b < 0)) ? q - 1 : q;\n}\n"},
        {H_FLOORDIV_I64, "__device__ __forceinline__ long long wpk_floordiv_i64(long long a, long long b) {\n"
                         "    long long q = a / b, r = a % b;\n"
                         "    return (r != 0 && (r < 0) != (b < 0)) ? q - 1 : q;\n}\n"},
        {H_FLOORMOD_I32, "__device__ __forceinline__ int wpk_floormod_i32(int a, int b) {\n"
                         "    int r = a % b;\n"
                         "    return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;\n}\n"},
        {H_FLOORMOD_I64, "__device__ __forceinline__ long long wpk_floormod_i64(long long a, long long b) {\n"
                         "    long long r = a % b;\n"
                         "    return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;\n}\n"},
        /* a NaN first operand propagates, as in the reference kernels (fminf would drop it) */
        {H_MIN_F32, "__device__ __forceinline__ float wpk_min_f32(float a, float b) { return b < a ? b : a; }\n"},
        {H_MIN_I32, "__device__ __forceinline__ int wpk_min_i32(int a, int b) { return b < a ? b : a; }\n"},
        {H_MIN_I64, "__device__ __forceinline__ long long wpk_min_i64(long long a, long long b) { return b < a ? b : a; }\n"},
        {H_MAX_F32, "__device__ __forceinline__ float wpk_max_f32(float a, float b) { return a < b ? b : a; }\n"},
        {H_MAX_I32, "__device__ __forceinline__ int wpk_max_i32(int a, int b) { return a < b ? b : a; }\n"},
        {H_MAX_I64, "__device__ __forceinline__ long long wpk_max_i64(long long a, long long b) { return a < b ? b : a; }\n"},
        {H_ABS_I32, "__device__ __forceinline__ int wpk_abs_i32(int a) { return a < 0 ? -a : a; }\n"},
        {H_ABS_I64, "__device__ __forceinline__ long long wpk_abs_i64(long long a) { return a < 0 ? -a : a; }\n"},
    };
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
        if (h & defs[i].bit) sb_puts(o, defs[i].text);
}

static void emit_params(em *m, strbuf *o) {
    const loop_func *f = m->f;
    for (int i = 0; i < f->nargs; i++) {
        const loop_buffer *b = f->args[i];
        bool stored = false;
        for (int j = 0; j < m->nstored; j++) stored |= m->stored[j] == b;
        const char *q = i < f->ninputs && !stored ? "const " : "";
        sb_printf(o, "%s%s%s *__restrict__ ", i ? ",\n        " : "", q, ctype(m, b->dtype));
        put_buf(o, b);
    }
}

static bool args_fit32(const loop_func *f) {
    for (int i = 0; i < f->nargs; i++)
        if (f->args[i]->size > INT32_MAX || f->args[i]->dtype == TE_I64) return false;
    return true;
}

wpk_status cg_cuda_emit(wpk_context *ctx, const loop_func *f, const cg_cuda_options *opt,
                        strbuf *out, cg_cuda_launch *launch) {
    if (!f || !out)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "CUDA codegen: no kernel or no output buffer");
    if (!valid_ident(f->name))
        return wpk_error(ctx, WPK_ERR_INVALID_ARG,
                         "CUDA codegen: kernel name '%s' is not a C identifier (it is the symbol "
                         "the module exports)", f->name ? f->name : "(null)");
    cg_cuda_options def = cg_cuda_default_options();
    em m = {.ctx = ctx, .f = f, .opt = opt ? opt : &def};
    if (m.opt->index_bits != 0 && m.opt->index_bits != 32 && m.opt->index_bits != 64)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "CUDA codegen: index_bits %d (0, 32 or 64)",
                         m.opt->index_bits);
    if (f->nargs < 0 || f->ninputs < 0 || f->ninputs > f->nargs || (f->nargs && !f->args))
        cg_cuda_fail(&m, WPK_ERR_INVALID_ARG, "%d arguments with %d inputs", f->nargs, f->ninputs);
    for (int i = 0; i < f->nargs && m.st == WPK_OK; i++)
        if (!f->args[i]) cg_cuda_fail(&m, WPK_ERR_INVALID_ARG, "argument %d has no buffer", i);

    scan_state S = {.fits32 = true};
    if (m.st == WPK_OK) scan_stmt(&m, f->body, (scan_ctx){0}, &S);
    int64_t blocks = 1;
    for (int a = AX_BX; a < AX_COUNT; a++) blocks *= m.dim[a] ? m.dim[a] : 1;
    if (m.st == WPK_OK && S.global_store_outside && blocks > 1)
        cg_cuda_fail(&m, WPK_ERR_UNSUPPORTED,
             "a store into '%s' lies outside the loops bound to blockIdx: each of the %" PRId64
             " blocks would run it", S.outside_name, blocks);
    bool safe32 = S.fits32 && args_fit32(f);
    if (m.st == WPK_OK && m.opt->index_bits == 32 && !safe32)
        cg_cuda_fail(&m, WPK_ERR_UNSUPPORTED, "32-bit indices asked for, but a buffer, bound or constant "
             "needs 64 bits (or a buffer holds 64-bit data)");
    m.idx32 = m.opt->index_bits == 32 || (m.opt->index_bits == 0 && safe32);

    collect_stored(&m, f->body);
    for (int i = 0; i < f->nargs && m.st == WPK_OK; i++) push_buf(&m, f->args[i]);
    m.indent = 1;
    if (m.st == WPK_OK) emit_stmt(&m, f->body);
    if (m.body.oom) cg_cuda_fail(&m, WPK_ERR_NOMEM, "out of memory");

    cg_cuda_launch L;
    int64_t threads = 1;
    for (int a = 0; a < 3; a++) {
        L.block[a] = m.dim[AX_TX + a] ? m.dim[AX_TX + a] : 1;
        L.grid[a] = m.dim[AX_BX + a] ? m.dim[AX_BX + a] : 1;
        threads *= L.block[a];
    }
    L.shared_bytes = m.shared_bytes;
    if (m.st == WPK_OK && threads > 1024)
        cg_cuda_fail(&m, WPK_ERR_UNSUPPORTED, "%" PRId64 " threads per block (%" PRId64 " x %" PRId64
             " x %" PRId64 "): at most 1024", threads, L.block[0], L.block[1], L.block[2]);

    strbuf src = {0};
    if (m.st == WPK_OK) {
        sb_printf(&src, "/* generated by wpk cg_cuda: kernel %s, grid %" PRId64 "x%" PRId64
                        "x%" PRId64 ", block %" PRId64 "x%" PRId64 "x%" PRId64 ", %" PRId64
                        " bytes shared, %d-bit indices */\n",
                  f->name, L.grid[0], L.grid[1], L.grid[2], L.block[0], L.block[1], L.block[2],
                  L.shared_bytes, m.idx32 ? 32 : 64);
        if (m.helpers) put_helpers(&src, m.helpers);
        sb_printf(&src, "extern \"C\" __global__ void __launch_bounds__(%" PRId64 ")\n%s(", threads,
                  f->name);
        emit_params(&m, &src);
        sb_puts(&src, ") {\n");
        if (m.nshared) sb_puts(&src, "    extern __shared__ __align__(16) unsigned char wpk_smem[];\n");
        sb_puts(&src, m.body.s ? m.body.s : "");
        sb_puts(&src, "}\n");
        if (src.oom) cg_cuda_fail(&m, WPK_ERR_NOMEM, "out of memory");
    }
    if (m.st == WPK_OK) {
        size_t before = out->len;
        sb_puts(out, src.s);
        if (out->len == before) cg_cuda_fail(&m, WPK_ERR_NOMEM, "out of memory");
        else if (launch) *launch = L;
    }
    sb_free(&src);
    sb_free(&m.body);
    wpk_free(m.vars);
    wpk_free(m.bufs);
    wpk_free(m.stored);
    wpk_free(m.plans);
    return m.st;
}
