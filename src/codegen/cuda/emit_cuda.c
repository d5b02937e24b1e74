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

/* A loop's binding: its range when constant, its axis when bound. */
binding cg_cuda_loop_binding(em *m, const loop_stmt *s) {
    binding b = cg_loop_binding(&m->p, s);
    b.axis = s->for_kind == LOOP_BIND ? axis_of(s->bind_tag) : AX_NONE;
    return b;
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
    case LOOP_STORE: case LOOP_BARRIER: return;
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
        cg_fail(&m->p, WPK_ERR_NOMEM, "out of memory");
        return;
    }
    for (int i = 0; i < s->nstmts; i++) block_box(s->stmts[i], &boxes[i]);
    for (int i = 0; i < s->nstmts && m->p.st == WPK_OK; i++) {
        if (!any_block(&boxes[i])) continue;
        for (int j = i + 1; j < s->nstmts; j++) {
            if (!any_block(&boxes[j])) continue;
            bool disjoint = false;
            for (int a = AX_BX; a < AX_COUNT; a++)
                if (boxes[i].has[a] && boxes[j].has[a] &&
                    (boxes[i].hi[a] < boxes[j].lo[a] || boxes[j].hi[a] < boxes[i].lo[a]))
                    disjoint = true;
            if (!disjoint) {
                cg_fail(&m->p, WPK_ERR_UNSUPPORTED,
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
        cg_fail(&m->p, WPK_ERR_UNSUPPORTED,
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
        cg_fail(&m->p, WPK_ERR_INVALID_ARG, "loop '%s_%d' is bound to '%s', not a GPU axis", v, id,
             s->bind_tag ? s->bind_tag : "(null)");
        return;
    }
    if (!te_is_const_int(s->min, &a) || !te_is_const_int(s->extent, &n) || a < 0 || n < 1) {
        cg_fail(&m->p, WPK_ERR_UNSUPPORTED, "loop '%s_%d' bound to %s has no constant range", v, id,
             AXIS_NAME[ax]);
        return;
    }
    if (k.axes & (1u << ax)) {
        cg_fail(&m->p, WPK_ERR_UNSUPPORTED, "loop '%s_%d' is bound to %s inside another loop bound to it",
             v, id, AXIS_NAME[ax]);
        return;
    }
    if (!is_thread(ax) && (k.in_loop || (k.axes & 7u))) {
        cg_fail(&m->p, WPK_ERR_UNSUPPORTED,
             "loop '%s_%d' bound to %s is inside a %s loop: blockIdx loops must be outermost", v,
             id, AXIS_NAME[ax], k.in_loop ? "serial" : "thread-bound");
        return;
    }
    int64_t lim = is_thread(ax) ? 1024 : ax == AX_BX ? INT32_MAX : 65535;
    if (a + n > lim) {
        cg_fail(&m->p, WPK_ERR_UNSUPPORTED, "loop '%s_%d' bound to %s reaches %" PRId64
             " (the axis holds %" PRId64 ")", v, id, AXIS_NAME[ax], a + n, lim);
        return;
    }
    if (a + n > m->dim[ax]) m->dim[ax] = a + n;
    k.axes |= 1u << ax;
    if (!is_thread(ax)) k.block_depth++;
    scan_stmt(m, s->body, k, S);
}

static void scan_stmt(em *m, const loop_stmt *s, scan_ctx k, scan_state *S) {
    if (!s || m->p.st != WPK_OK) {
        if (!s) cg_fail(&m->p, WPK_ERR_INVALID_ARG, "missing statement");
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
            cg_fail(&m->p, WPK_ERR_INVALID_ARG, "an allocation has no buffer");
            return;
        }
        if (b->size <= 0) {
            cg_fail(&m->p, WPK_ERR_INVALID_ARG, "allocation of '%s' has %" PRId64 " elements", b->name,
                 b->size);
            return;
        }
        if (b->size > INT32_MAX) S->fits32 = false;
        if (b->dtype == TE_I64) S->fits32 = false;
        if (b->scope == LOOP_SCOPE_HEAP || b->scope == LOOP_SCOPE_ARG) {
            cg_fail(&m->p, WPK_ERR_UNSUPPORTED,
                 "intermediate '%s' would live in global memory allocated by the kernel (a root "
                 "stage that is not an output): inline it, or compute it at a loop in \"shared\" "
                 "or \"local\" scope", b->name);
            return;
        }
        if (b->scope == LOOP_SCOPE_SHARED) {
            if (k.axes & 7u) {
                cg_fail(&m->p, WPK_ERR_UNSUPPORTED,
                     "shared buffer '%s' is allocated inside a thread-bound loop: every thread "
                     "would use the same memory; compute it at a loop outside the thread loops",
                     b->name);
                return;
            }
            if (shared_index(m, b) < 0) {
                if (m->nshared == MAX_SHARED_BUFS) {
                    cg_fail(&m->p, WPK_ERR_UNSUPPORTED, "more than %d shared buffers", MAX_SHARED_BUFS);
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
    case LOOP_BARRIER: return; /* reads and writes nothing */
    }
    cg_fail(&m->p, WPK_ERR_INVALID_ARG, "statement kind %d", (int)s->kind);
}

/* ---- expressions ---- */

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
        cg_fail(&m->p, WPK_ERR_INTERNAL, "tile '%s': an access changed between analysis and emission",
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
        if (S.dim_of[i] < 0 || S.dim_of[i] >= nd || is_thread(cg_lookup(&m->p, L.var[i])->axis)) continue;
        int64_t c = S.dcoef[i] * cst[S.dim_of[i]];
        if (c == 0) continue;
        sb_puts(out, " + ");
        if (c != 1) {
            put_int(m, out, TE_I64, c);
            sb_puts(out, "*");
        }
        cg_put_var(out, L.var[i]);
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
    mult = cg_multiple(&m->p, idx->a);
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
    if (!cg_check_buffer(&m->p, b)) return;
    const priv_plan *p = plan_of(m, b);
    if (p && p->compact) {
        if (e->a->type.lanes != 1) {
            cg_fail(&m->p, WPK_ERR_UNSUPPORTED, "vector access of per-thread tile '%s'", b->name);
            return;
        }
        cg_put_buf(out, b);
        sb_puts(out, "[");
        emit_tile_index(m, p, e->a, out);
        sb_puts(out, "]");
        return;
    }
    if (lane >= 0 && !m->p.guarded && float4_ok(m, b, e->type, e->a)) {
        int chunk = lane / 4, t = -1;
        for (int i = 0; i < m->nmemos; i++)
            if (m->memos[i].chunk == chunk && (m->memos[i].e == e || te_expr_equal(m->memos[i].e, e)))
                t = m->memos[i].temp;
        if (t < 0 && m->nmemos < MEMO_MAX) {
            /* hoisted in front of the statement being printed: one 16-byte load */
            strbuf base = {0};
            cg_expr(&m->p, e->a->a, -1, &base);
            strbuf name = {0};
            cg_put_buf(&name, b);
            t = m->p.ntemps++;
            if (m->p.st == WPK_OK && !base.oom && !name.oom)
                cg_line(&m->p, "const float4 wpk_t%d = *(const float4 *)(%s + %s%s);", t, name.s,
                     base.s, chunk_offset(chunk));
            cg_release(&m->p, &base);
            cg_release(&m->p, &name);
            m->memos[m->nmemos++] = (memo){e, chunk, t};
        }
        if (t >= 0) {
            sb_printf(out, "wpk_t%d.%c", t, "xyzw"[lane % 4]);
            return;
        }
    }
    cg_put_buf(out, b);
    sb_puts(out, "[");
    cg_expr(&m->p, e->a, lane, out);
    sb_puts(out, "]");
}

/* ---- statements ---- */

/* Print the statement text `out`, the temporaries its emission hoisted printed before it. */
static void finish_stmt(em *m, strbuf *out) {
    if (m->p.st == WPK_OK && !out->oom) cg_line(&m->p, "%s", out->s ? out->s : "");
    cg_release(&m->p, out);
    m->nmemos = 0;
}

static void emit_store(em *m, const loop_stmt *s) {
    const loop_buffer *buf = s->buffer;
    int lanes = s->value->type.lanes;
    const priv_plan *p = plan_of(m, buf);
    strbuf out = {0};
    if (lanes == 1) {
        cg_put_buf(&out, buf);
        sb_puts(&out, "[");
        if (p && p->compact) emit_tile_index(m, p, s->index, &out);
        else cg_expr(&m->p, s->index, -1, &out);
        sb_puts(&out, "] = ");
        cg_expr(&m->p, s->value, -1, &out);
        sb_puts(&out, ";");
        finish_stmt(m, &out);
        return;
    }
    if (p && p->compact) {
        cg_fail(&m->p, WPK_ERR_UNSUPPORTED, "vector access of per-thread tile '%s'", buf->name);
        return;
    }
    /* every lane's value first (a lane may read what another lane stores), then the stores */
    int t = m->p.ntemps++;
    sb_printf(&out, "const %s wpk_t%d[%d] = {", ctype(m, buf->dtype), t, lanes);
    for (int l = 0; l < lanes; l++) {
        if (l) sb_puts(&out, ", ");
        cg_expr(&m->p, s->value, l, &out);
    }
    sb_puts(&out, "};");
    finish_stmt(m, &out);
    strbuf name = {0};
    cg_put_buf(&name, buf);
    if (float4_ok(m, buf, s->value->type, s->index)) {
        strbuf base = {0};
        cg_expr(&m->p, s->index->a, -1, &base);
        for (int q = 0; q < lanes / 4 && m->p.st == WPK_OK && !base.oom && !name.oom; q++)
            cg_line(&m->p, "*(float4 *)(%s + %s%s) = make_float4(wpk_t%d[%d], wpk_t%d[%d], "
                    "wpk_t%d[%d], wpk_t%d[%d]);",
                 name.s, base.s, chunk_offset(q), t, 4 * q, t, 4 * q + 1, t, 4 * q + 2, t, 4 * q + 3);
        cg_release(&m->p, &base);
    } else {
        /* lanes in order: equal indices keep the last lane, as in the C target */
        for (int l = 0; l < lanes && m->p.st == WPK_OK; l++) {
            strbuf one = {0};
            sb_printf(&one, "%s[", name.s ? name.s : "");
            cg_expr(&m->p, s->index, l, &one);
            sb_printf(&one, "] = wpk_t%d[%d];", t, l);
            finish_stmt(m, &one);
        }
    }
    cg_release(&m->p, &name);
}

static void emit_let(em *m, const loop_stmt *s) {
    te_type t = s->value->type;
    strbuf out = {0}, name = {0};
    cg_put_var(&name, s->var);
    cg_line(&m->p, "{");
    m->p.indent++;
    if (t.lanes == 1) {
        sb_printf(&out, "const %s %s = ", ctype(m, t.scalar), name.s ? name.s : "");
        cg_expr(&m->p, s->value, -1, &out);
        sb_puts(&out, ";");
    } else {
        sb_printf(&out, "const %s %s[%d] = {", ctype(m, t.scalar), name.s ? name.s : "", t.lanes);
        for (int l = 0; l < t.lanes; l++) {
            if (l) sb_puts(&out, ", ");
            cg_expr(&m->p, s->value, l, &out);
        }
        sb_puts(&out, "};");
    }
    finish_stmt(m, &out);
    cg_release(&m->p, &name);
}

static void emit_bound(em *m, const loop_stmt *s) {
    int ax = axis_of(s->bind_tag);
    int64_t a = 0, n = 1;
    te_is_const_int(s->min, &a);
    te_is_const_int(s->extent, &n);
    strbuf v = {0};
    cg_put_var(&v, s->var);
    const char *vn = v.s ? v.s : "";
    cg_line(&m->p, "{");
    m->p.indent++;
    cg_line(&m->p, "const %s %s = (%s)%s;", ctype(m, TE_I64), vn, ctype(m, TE_I64), AXIS_NAME[ax]);
    bool lo = a > 0, hi = a + n < m->dim[ax];
    if (lo && hi) cg_line(&m->p, "if (%s >= %" PRId64 " && %s < %" PRId64 ") {", vn, a, vn, a + n);
    else if (lo) cg_line(&m->p, "if (%s >= %" PRId64 ") {", vn, a);
    else if (hi) cg_line(&m->p, "if (%s < %" PRId64 ") {", vn, a + n);
    if (lo || hi) m->p.indent++;
    binding b = cg_cuda_loop_binding(m, s);
    if (cg_push_var(&m->p, b)) {
        if (is_thread(ax)) {
            m->thread_depth++;
            m->thread_axes |= 1u << ax;
        }
        cg_stmt(&m->p, s->body);
        if (is_thread(ax)) {
            m->thread_depth--;
            m->thread_axes &= ~(1u << ax);
        }
        m->p.nvars--;
    }
    if (lo || hi) {
        m->p.indent--;
        cg_line(&m->p, "}");
    }
    m->p.indent--;
    cg_line(&m->p, "}");
    cg_release(&m->p, &v);
}

static void emit_alloc(em *m, const loop_stmt *s) {
    const loop_buffer *b = s->buffer;
    strbuf name = {0};
    cg_put_buf(&name, b);
    const char *n = name.s ? name.s : "";
    const char *ct = ctype(m, b->dtype);
    cg_line(&m->p, "{");
    m->p.indent++;
    bool planned = false;
    if (b->scope == LOOP_SCOPE_SHARED) {
        int i = shared_index(m, b);
        cg_line(&m->p, "%s *%s = (%s *)(wpk_smem + %" PRId64 ");", ct, n, ct, i >= 0 ? m->shared_off[i] : 0);
    } else if (m->thread_depth == 0) {
        priv_plan p;
        if (cg_cuda_plan_tile(m, s, &p) &&
            cg_grow(&m->p, (void **)&m->plans, m->nplans, &m->cap_plans, sizeof *m->plans)) {
            m->plans[m->nplans++] = p;
            planned = true;
            cg_line(&m->p, "%s %s[%" PRId64 "];%s", ct, n, p.size,
                 p.compact ? "  /* this thread's part of the tile */" : "");
        }
    } else {
        cg_line(&m->p, "%s %s[%" PRId64 "];", ct, n, b->size);
    }
    cg_alloc_body(&m->p, s);
    if (planned) m->nplans--;
    m->p.indent--;
    cg_line(&m->p, "}");
    cg_release(&m->p, &name);
}

/* ---- the rest of the dialect ---- */

static const char *cuda_ctype(cg_printer *p, te_scalar s) { return ctype((em *)p, s); }

static const char *cuda_tag(cg_printer *p, te_scalar s) {
    return s == TE_F32 ? "f32" : wide((em *)p, s) ? "i64" : "i32";
}

static void cuda_put_int(cg_printer *p, strbuf *out, te_scalar s, int64_t v) {
    put_int((em *)p, out, s, v);
}

static bool cuda_use_helper(cg_printer *p, cg_helper h, te_scalar s) {
    /* per helper: the I32, I64, F32 bits */
    static const unsigned BITS[][3] = {
        [CG_FLOORDIV] = {H_FLOORDIV_I32, H_FLOORDIV_I64, 0},
        [CG_FLOORMOD] = {H_FLOORMOD_I32, H_FLOORMOD_I64, 0},
        [CG_MIN] = {H_MIN_I32, H_MIN_I64, H_MIN_F32},
        [CG_MAX] = {H_MAX_I32, H_MAX_I64, H_MAX_F32},
        [CG_ABS] = {H_ABS_I32, H_ABS_I64, 0},
    };
    em *m = (em *)p;
    if (s == TE_BOOL && (h == CG_MIN || h == CG_MAX)) {
        cg_fail(p, WPK_ERR_UNSUPPORTED, "min/max of booleans");
        return false;
    }
    m->helpers |= BITS[h][s == TE_F32 ? 2 : wide(m, s) ? 1 : 0];
    return true;
}

static void cuda_vector(cg_printer *p, const te_expr *e, strbuf *out) {
    (void)out;
    int lanes = e->type.lanes;
    if (e->kind == TE_VAR) lanes = cg_lookup(p, e->var)->t.lanes;
    cg_fail(p, WPK_ERR_INVALID_ARG, "a %d-lane vector where a scalar is expected", lanes);
}

static void cuda_load(cg_printer *p, const te_expr *e, int lane, strbuf *out) {
    emit_load((em *)p, e, lane, out);
}

/* lane l of base + l * stride */
static void cuda_ramp(cg_printer *p, const te_expr *e, int lane, strbuf *out) {
    int64_t st;
    sb_puts(out, "(");
    cg_expr(p, e->a, CG_NO_LANE, out);
    if (lane > 0) {
        if (te_is_const_int(e->b, &st)) {
            sb_puts(out, " + ");
            put_int((em *)p, out, e->type.scalar, st * lane);
        } else {
            sb_printf(out, " + %d * ", lane);
            cg_expr(p, e->b, CG_NO_LANE, out);
        }
    }
    sb_puts(out, ")");
}

static int cuda_loop_open(cg_printer *p, const loop_stmt *s) {
    if (s->for_kind == LOOP_UNROLLED) cg_line(p, "#pragma unroll");
    return 0;
}

static void cuda_loop_close(cg_printer *p, const loop_stmt *s, int token) {
    (void)p, (void)s, (void)token;
}

static void cuda_bound_loop(cg_printer *p, const loop_stmt *s) { emit_bound((em *)p, s); }
static void cuda_let_open(cg_printer *p, const loop_stmt *s) { emit_let((em *)p, s); }
static void cuda_store(cg_printer *p, const loop_stmt *s) { emit_store((em *)p, s); }
static void cuda_alloc(cg_printer *p, const loop_stmt *s) { emit_alloc((em *)p, s); }

static void cuda_barrier(cg_printer *p, const loop_stmt *s) {
    (void)s;
    cg_line(p, "__syncthreads();");
}

static const cg_dialect CUDA_DIALECT = {
    .name = "CUDA", .nan = "__int_as_float(0x7fffffff)", .inf = "__int_as_float(0x7f800000)",
    .neg_inf = "__int_as_float(0xff800000)", .incr_pre = "++", .incr_post = "",
    .bool_lanes_are_masks = false,
    .ctype = cuda_ctype, .tag = cuda_tag, .put_int = cuda_put_int, .use_helper = cuda_use_helper,
    .vector = cuda_vector, .load = cuda_load, .ramp = cuda_ramp, .loop_open = cuda_loop_open,
    .loop_close = cuda_loop_close, .bound_loop = cuda_bound_loop, .let_open = cuda_let_open,
    .store = cuda_store, .alloc = cuda_alloc, .barrier = cuda_barrier,
};

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
    const loop_func *f = m->p.f;
    for (int i = 0; i < f->nargs; i++) {
        const loop_buffer *b = f->args[i];
        const char *q = i < f->ninputs && !cg_is_stored(&m->p, b) ? "const " : "";
        sb_printf(o, "%s%s%s *__restrict__ ", i ? ",\n        " : "", q, ctype(m, b->dtype));
        cg_put_buf(o, b);
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
    if (!cg_valid_ident(f->name))
        return wpk_error(ctx, WPK_ERR_INVALID_ARG,
                         "CUDA codegen: kernel name '%s' is not a C identifier (it is the symbol "
                         "the module exports)", f->name ? f->name : "(null)");
    cg_cuda_options def = cg_cuda_default_options();
    em m = {.opt = opt ? opt : &def};
    cg_printer_init(&m.p, &CUDA_DIALECT, ctx, f);
    if (m.opt->index_bits != 0 && m.opt->index_bits != 32 && m.opt->index_bits != 64)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "CUDA codegen: index_bits %d (0, 32 or 64)",
                         m.opt->index_bits);
    if (f->nargs < 0 || f->ninputs < 0 || f->ninputs > f->nargs || (f->nargs && !f->args))
        cg_fail(&m.p, WPK_ERR_INVALID_ARG, "%d arguments with %d inputs", f->nargs, f->ninputs);
    for (int i = 0; i < f->nargs && m.p.st == WPK_OK; i++)
        if (!f->args[i]) cg_fail(&m.p, WPK_ERR_INVALID_ARG, "argument %d has no buffer", i);

    scan_state S = {.fits32 = true};
    if (m.p.st == WPK_OK) scan_stmt(&m, f->body, (scan_ctx){0}, &S);
    int64_t blocks = 1;
    for (int a = AX_BX; a < AX_COUNT; a++) blocks *= m.dim[a] ? m.dim[a] : 1;
    if (m.p.st == WPK_OK && S.global_store_outside && blocks > 1)
        cg_fail(&m.p, WPK_ERR_UNSUPPORTED,
             "a store into '%s' lies outside the loops bound to blockIdx: each of the %" PRId64
             " blocks would run it", S.outside_name, blocks);
    bool safe32 = S.fits32 && args_fit32(f);
    if (m.p.st == WPK_OK && m.opt->index_bits == 32 && !safe32)
        cg_fail(&m.p, WPK_ERR_UNSUPPORTED, "32-bit indices asked for, but a buffer, bound or constant "
             "needs 64 bits (or a buffer holds 64-bit data)");
    m.idx32 = m.opt->index_bits == 32 || (m.opt->index_bits == 0 && safe32);

    cg_collect_stored(&m.p);
    for (int i = 0; i < f->nargs && m.p.st == WPK_OK; i++) cg_push_buf(&m.p, f->args[i]);
    /* barriers are statements of their own: the printer prints them where the pass put them */
    te_ctx tc;
    te_ctx_init(&tc, ctx);
    const loop_stmt *body = NULL;
    if (m.p.st == WPK_OK) {
        wpk_status bst = loop_place_barriers(&tc, f->body, &body);
        if (bst != WPK_OK) cg_fail(&m.p, bst, "%s", ctx ? ctx->msg : "barrier placement failed");
    }
    m.p.indent = 1;
    if (m.p.st == WPK_OK) cg_stmt(&m.p, body);
    if (m.p.body.oom) cg_fail(&m.p, WPK_ERR_NOMEM, "out of memory");

    cg_cuda_launch L;
    int64_t threads = 1;
    for (int a = 0; a < 3; a++) {
        L.block[a] = m.dim[AX_TX + a] ? m.dim[AX_TX + a] : 1;
        L.grid[a] = m.dim[AX_BX + a] ? m.dim[AX_BX + a] : 1;
        threads *= L.block[a];
    }
    L.shared_bytes = m.shared_bytes;
    if (m.p.st == WPK_OK && threads > 1024)
        cg_fail(&m.p, WPK_ERR_UNSUPPORTED, "%" PRId64 " threads per block (%" PRId64 " x %" PRId64
             " x %" PRId64 "): at most 1024", threads, L.block[0], L.block[1], L.block[2]);

    strbuf src = {0};
    if (m.p.st == WPK_OK) {
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
        sb_puts(&src, m.p.body.s ? m.p.body.s : "");
        sb_puts(&src, "}\n");
        if (src.oom) cg_fail(&m.p, WPK_ERR_NOMEM, "out of memory");
    }
    wpk_status st = cg_printer_finish(&m.p, &src, out);
    if (st == WPK_OK && launch) *launch = L;
    sb_free(&src);
    cg_printer_free(&m.p);
    wpk_free(m.plans);
    te_ctx_free(&tc);
    return st;
}
