/* features.c -- a config's features read from its lowered loop IR, and the pruning predicate
 * (see features.h). The hot loop is the loop whose own body (the statements not inside a
 * deeper loop) does the most work, counted as iterations x stored lanes x operations; the
 * features describe it, its enclosing loops and the kernel around it. */
#include "tune/features.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/context.h"
#include "base/target.h"
#include "kernels/cpu_kernel.h"

#define LEVELS TUNE_FEATURE_LEVELS
#define MAX_DEPTH 64      /* statements on the path to the hot loop that are looked at */
#define MAX_ACCESS 512    /* accesses of the hot body described one by one (all are counted) */
#define MAX_EXPR_DEPTH 64 /* recursion into expressions (let chains included) */
#define UNKNOWN_EXTENT 16 /* a loop whose extent is not a constant */
#define LINE_BYTES 64

/* ---- names: one table, the order of the vector ---- */

#define KERNEL_FEATURES(X)                                                                      \
    X(hot_trips, "log2 of the times the hot loop's body runs (product of enclosing extents)")  \
    X(hot_share, "share of the kernel's work (stored lanes x (1 + ops)) in the hot body")      \
    X(total_work, "log2 of the kernel's work: stored lanes x (1 + float ops), summed")          \
    X(vec_lanes, "log2 of the widest vector (lanes) loaded or stored in the hot body")         \
    X(vec_fill, "that width over the machine's vector lanes (1: full registers)")              \
    X(vec_store_share, "share of the hot body's stores that are vectors")                      \
    X(unroll, "log2(1 + stores in the hot body): statements per iteration after unrolling")    \
    X(mem_loads, "log2(1 + loads from memory per hot iteration; a vector load counts once)")   \
    X(mem_stores, "log2(1 + stores to memory per hot iteration)")                              \
    X(reg_accesses, "log2(1 + loads and stores of stack buffers (registers) per hot iteration)") \
    X(fmas, "log2(1 + multiply-adds per hot iteration; a vector one counts once)")             \
    X(flops, "log2(1 + float operations per hot iteration, times their lanes)")                \
    X(intensity, "log2((1 + multiply-adds) / (1 + memory loads)): work per load")              \
    X(broadcasts, "log2(1 + scalars broadcast to vectors per hot iteration)")                  \
    X(guards, "log2(1 + conditions (if) in the hot body)")                                     \
    X(accumulators, "log2(1 + vector registers the accumulators of the hot loop take)")        \
    X(acc_regs, "accumulators / the ISA's vector registers (16 with AVX2, 32 with AVX-512)")   \
    X(acc_spill, "log2(1 + accumulators beyond the vector registers)")                         \
    X(reduce_levels, "loops around the hot body inside the accumulator tile (the reduction)") \
    X(working_set, "log2(1 + bytes the reduction nest around the accumulators touches)")       \
    X(ws_l1, "log2 of the working set over L1, clamped to [-8, 8]")                            \
    X(ws_l2, "log2 of the working set over L2, clamped to [-8, 8]")                            \
    X(par_extent, "log2 of the extent of the parallel loop around the hot loop (0: none)")     \
    X(par_balance, "that extent / (cores x rounds it takes): the share of cores kept busy")    \
    X(par_depth, "loops between the parallel loop and the hot loop")                          \
    X(par_loops, "log2(1 + parallel loops in the kernel)")                                     \
    X(nests, "log2(1 + loop nests at the top of the kernel: stages, pad copies)")              \
    X(heap_bytes, "log2(1 + bytes of buffers the kernel allocates on the heap)")               \
    X(depth, "loops enclosing the hot body (the hot loop included)")

#define LEVEL_FEATURES(X)                                                                       \
    X(extent, "log2 of the loop's extent (0 past the outermost loop)")                         \
    X(parallel, "1 for a parallel loop")                                                       \
    X(other_kind, "1 for a vectorized or unrolled loop left as a loop")                        \
    X(reuse, "share of the hot body's memory accesses that stay put along this loop")          \
    X(stride, "log2(1 + mean bytes a memory access moves per iteration of this loop)")        \
    X(contig, "share of memory accesses moving at most a cache line per iteration")            \
    X(footprint, "log2(1 + bytes the hot body touches over this loop and those inside it)")

enum {
#define ENUM(n, d) F_##n,
    KERNEL_FEATURES(ENUM) F_KERNEL_COUNT
};
#undef ENUM
#define LENUM(n, d) L_##n,
enum { LEVEL_FEATURES(LENUM) L_COUNT };
#undef LENUM

_Static_assert(F_KERNEL_COUNT + L_COUNT * LEVELS == TUNE_FEATURE_DIM,
               "TUNE_FEATURE_DIM matches the feature tables");

static const char *const kernel_names[] = {
#define NAME(n, d) #n,
    KERNEL_FEATURES(NAME)};
static const char *const level_names[] = {LEVEL_FEATURES(NAME)};
#undef NAME
static const char *const kernel_docs[] = {
#define DOC(n, d) d,
    KERNEL_FEATURES(DOC)};
static const char *const level_docs[] = {LEVEL_FEATURES(DOC)};
#undef DOC

static char level_name_buf[LEVELS][L_COUNT][32];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void make_names(void) {
    for (int l = 0; l < LEVELS; l++)
        for (int k = 0; k < L_COUNT; k++)
            snprintf(level_name_buf[l][k], sizeof level_name_buf[l][k], "l%d_%s", l,
                     level_names[k]);
}

const char *tune_feature_name(int i) {
    if (i < 0 || i >= TUNE_FEATURE_DIM) return NULL;
    if (i < F_KERNEL_COUNT) return kernel_names[i];
    pthread_once(&names_once, make_names);
    i -= F_KERNEL_COUNT;
    return level_name_buf[i / L_COUNT][i % L_COUNT];
}

const char *tune_feature_doc(int i) {
    if (i < 0 || i >= TUNE_FEATURE_DIM) return NULL;
    if (i < F_KERNEL_COUNT) return kernel_docs[i];
    return level_docs[(i - F_KERNEL_COUNT) % L_COUNT];
}

/* ---- the machine ---- */

static tune_machine host;
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

static void read_host(void) {
    host.vector_floats = target_vector_floats();
    host.vector_regs = host.vector_floats >= 16 ? 32 : 16;
    host.cores = target_cores();
    long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    host.l1_bytes = l1 > 0 ? l1 : target_cache_bytes(1);
    host.l2_bytes = l2 > 0 ? l2 : target_cache_bytes(2);
    if (host.l1_bytes <= 0) host.l1_bytes = 32 * 1024;
    if (host.l2_bytes <= 0) host.l2_bytes = 1024 * 1024;
}

tune_machine tune_machine_host(void) {
    pthread_once(&host_once, read_host);
    return host;
}

/* ---- pass 1: find the hot loop ---- */

static int64_t extent_of(const loop_stmt *s) {
    int64_t v;
    return te_is_const_int(s->extent, &v) && v > 0 ? v : UNKNOWN_EXTENT;
}

static int64_t elem_bytes(te_scalar s) { return s == TE_I64 ? 8 : s == TE_BOOL ? 1 : 4; }

static bool is_float_arith(const te_expr *e) {
    switch (e->kind) {
    case TE_ADD: case TE_SUB: case TE_MUL: case TE_DIV: case TE_MIN: case TE_MAX: case TE_CALL:
        return e->type.scalar == TE_F32;
    default:
        return false;
    }
}

/* Float operations of e (a vector operation counts once). */
static double expr_ops(const te_expr *e, int budget) {
    if (!e || budget <= 0) return 0;
    double n = is_float_arith(e) ? 1 : 0;
    if (e->kind == TE_BUF_LOAD) return n; /* its index is address arithmetic */
    return n + expr_ops(e->a, budget - 1) + expr_ops(e->b, budget - 1) +
           expr_ops(e->c, budget - 1);
}

static double store_work(const loop_stmt *s) {
    int lanes = s->value ? s->value->type.lanes : 1;
    return (double)(lanes > 0 ? lanes : 1) * (1.0 + expr_ops(s->value, MAX_EXPR_DEPTH));
}

/* Work of the statements of s not inside a deeper loop. */
static double direct_work(const loop_stmt *s) {
    if (!s) return 0;
    switch (s->kind) {
    case LOOP_FOR: case LOOP_BARRIER: return 0;
    case LOOP_STORE: return store_work(s);
    case LOOP_LET: case LOOP_ALLOC: return direct_work(s->body);
    case LOOP_IF: return direct_work(s->body) + direct_work(s->else_body);
    case LOOP_SEQ: {
        double w = 0;
        for (int i = 0; i < s->nstmts; i++) w += direct_work(s->stmts[i]);
        return w;
    }
    }
    return 0;
}

typedef struct search {
    const loop_stmt *path[MAX_DEPTH];
    int depth, for_depth;
    const loop_stmt *best[MAX_DEPTH]; /* the path to the hot loop, the hot loop last */
    int best_depth;
    double best_work, best_trips;
    double total_work;
    int par_loops, nests;
    double heap_bytes;
} search;

static void find_hot(search *S, const loop_stmt *s, double trips) {
    if (!s) return;
    bool pushed = S->depth < MAX_DEPTH;
    if (pushed) S->path[S->depth] = s;
    S->depth++;
    switch (s->kind) {
    case LOOP_FOR: {
        double t = trips * (double)extent_of(s);
        if (s->for_kind == LOOP_PARALLEL) S->par_loops++;
        if (S->for_depth == 0) S->nests++;
        double w = t * direct_work(s->body);
        if (pushed && w > S->best_work) {
            S->best_work = w;
            S->best_trips = t;
            S->best_depth = S->depth;
            memcpy(S->best, S->path, sizeof S->best[0] * (size_t)S->depth);
        }
        S->for_depth++;
        find_hot(S, s->body, t);
        S->for_depth--;
        break;
    }
    case LOOP_STORE: S->total_work += trips * store_work(s); break;
    case LOOP_BARRIER: break;
    case LOOP_LET: find_hot(S, s->body, trips); break;
    case LOOP_ALLOC:
        if (s->buffer && s->buffer->scope == LOOP_SCOPE_HEAP)
            S->heap_bytes += (double)s->buffer->size * (double)elem_bytes(s->buffer->dtype);
        find_hot(S, s->body, trips);
        break;
    case LOOP_IF:
        find_hot(S, s->body, trips);
        find_hot(S, s->else_body, trips);
        break;
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++) find_hot(S, s->stmts[i], trips);
        break;
    }
    S->depth--;
}

/* ---- pass 2: the hot body ---- */

typedef struct level {
    const te_iter *var;
    int64_t extent;
    loop_for_kind kind;
    int pos;                  /* on the path */
} level;

typedef struct mem_access {
    const loop_buffer *buf;
    const te_expr *index;
    int lanes;
    double lane_stride;
    double coef[LEVELS];      /* elements moved per iteration of each level */
    double c0;                /* the index with every loop variable 0 */
    bool store;
} mem_access;

typedef struct scan {
    level lv[LEVELS];
    int nlv;
    const te_iter *env_var[2 * MAX_DEPTH]; /* let bindings in scope, innermost last */
    const te_expr *env_val[2 * MAX_DEPTH];
    int nenv;
    mem_access acc[MAX_ACCESS];
    int nacc;
    int64_t stores, vec_stores, mem_loads, mem_stores, reg_accesses, ifs, bcasts, lanes;
    double fmas, flops;
} scan;

static const te_expr *env_find(const scan *B, const te_iter *v) {
    for (int i = B->nenv - 1; i >= 0; i--)
        if (B->env_var[i] == v) return B->env_val[i];
    return NULL;
}

/* d index / d v: elements the index moves when v steps by one (nonlinear parts estimated:
 * x/k moves coef(x)/k, x%k like x, a product of two variables as 1). */
static double coef(const scan *B, const te_expr *e, const te_iter *v, int budget) {
    if (!e || budget <= 0) return 0;
    double a, b;
    int64_t k;
    switch (e->kind) {
    case TE_VAR: {
        if (e->var == v) return 1;
        const te_expr *val = env_find(B, e->var);
        return val ? coef(B, val, v, budget - 1) : 0;
    }
    case TE_ADD: return coef(B, e->a, v, budget - 1) + coef(B, e->b, v, budget - 1);
    case TE_SUB: return coef(B, e->a, v, budget - 1) - coef(B, e->b, v, budget - 1);
    case TE_MUL:
        if (te_is_const_int(e->b, &k)) return coef(B, e->a, v, budget - 1) * (double)k;
        if (te_is_const_int(e->a, &k)) return coef(B, e->b, v, budget - 1) * (double)k;
        a = coef(B, e->a, v, budget - 1), b = coef(B, e->b, v, budget - 1);
        return a != 0 || b != 0 ? 1 : 0;
    case TE_DIV:
        a = coef(B, e->a, v, budget - 1);
        return te_is_const_int(e->b, &k) && k != 0 ? a / (double)k : a != 0 ? 1 : 0;
    case TE_MOD: case TE_CAST: case TE_RAMP: case TE_BROADCAST:
        return coef(B, e->a, v, budget - 1);
    case TE_MIN: case TE_MAX:
        a = coef(B, e->a, v, budget - 1), b = coef(B, e->b, v, budget - 1);
        return fabs(a) >= fabs(b) ? a : b;
    case TE_SELECT:
        a = coef(B, e->b, v, budget - 1), b = coef(B, e->c, v, budget - 1);
        return fabs(a) >= fabs(b) ? a : b;
    default:
        return 0;
    }
}

/* The index with every loop variable at 0 (lets substituted): the access's constant offset. */
static double eval0(const scan *B, const te_expr *e, int budget) {
    if (!e || budget <= 0) return 0;
    double a, b;
    switch (e->kind) {
    case TE_INT: return (double)e->i;
    case TE_VAR: {
        const te_expr *val = env_find(B, e->var);
        return val ? eval0(B, val, budget - 1) : 0;
    }
    case TE_ADD: return eval0(B, e->a, budget - 1) + eval0(B, e->b, budget - 1);
    case TE_SUB: return eval0(B, e->a, budget - 1) - eval0(B, e->b, budget - 1);
    case TE_MUL: return eval0(B, e->a, budget - 1) * eval0(B, e->b, budget - 1);
    case TE_DIV:
        a = eval0(B, e->a, budget - 1), b = eval0(B, e->b, budget - 1);
        return b != 0 ? floor(a / b) : 0;
    case TE_MOD:
        a = eval0(B, e->a, budget - 1), b = eval0(B, e->b, budget - 1);
        return b != 0 ? a - b * floor(a / b) : 0;
    case TE_MIN: return fmin(eval0(B, e->a, budget - 1), eval0(B, e->b, budget - 1));
    case TE_MAX: return fmax(eval0(B, e->a, budget - 1), eval0(B, e->b, budget - 1));
    case TE_CAST: case TE_RAMP: case TE_BROADCAST: return eval0(B, e->a, budget - 1);
    default: return 0;
    }
}

static bool on_stack(const loop_buffer *b) { return b && b->scope == LOOP_SCOPE_STACK; }

static void add_access(scan *B, const loop_buffer *buf, const te_expr *index, int lanes,
                       bool store) {
    if (!buf || B->nacc == MAX_ACCESS) return;
    mem_access *a = &B->acc[B->nacc++];
    memset(a, 0, sizeof *a);
    a->buf = buf;
    a->index = index;
    a->lanes = lanes > 0 ? lanes : 1;
    a->store = store;
    int64_t k;
    if (index && index->kind == TE_RAMP && te_is_const_int(index->b, &k)) a->lane_stride = (double)k;
    else if (a->lanes > 1) a->lane_stride = 1;
    for (int l = 0; l < B->nlv; l++) a->coef[l] = coef(B, index, B->lv[l].var, MAX_EXPR_DEPTH);
    a->c0 = eval0(B, index, MAX_EXPR_DEPTH);
}

static void scan_expr(scan *B, const te_expr *e, int budget) {
    if (!e || budget <= 0) return;
    int lanes = e->type.lanes > 0 ? e->type.lanes : 1;
    if (e->kind == TE_BUF_LOAD) {
        if (on_stack(e->buffer)) B->reg_accesses++;
        else B->mem_loads++;
        if (lanes > B->lanes) B->lanes = lanes;
        add_access(B, e->buffer, e->a, lanes, false);
        return;
    }
    if (e->kind == TE_BROADCAST) B->bcasts++;
    if (is_float_arith(e)) {
        B->flops += lanes;
        if ((e->kind == TE_ADD || e->kind == TE_SUB) &&
            ((e->a && e->a->kind == TE_MUL) || (e->b && e->b->kind == TE_MUL)))
            B->fmas++;
    }
    scan_expr(B, e->a, budget - 1);
    scan_expr(B, e->b, budget - 1);
    scan_expr(B, e->c, budget - 1);
}

static void scan_stmt(scan *B, const loop_stmt *s) {
    if (!s) return;
    switch (s->kind) {
    case LOOP_FOR: return; /* a deeper loop: not part of this body */
    case LOOP_LET:
        if (B->nenv < 2 * MAX_DEPTH) {
            B->env_var[B->nenv] = s->var;
            B->env_val[B->nenv++] = s->value;
            scan_stmt(B, s->body);
            B->nenv--;
        } else {
            scan_stmt(B, s->body);
        }
        return;
    case LOOP_IF:
        B->ifs++;
        scan_stmt(B, s->body);
        scan_stmt(B, s->else_body);
        return;
    case LOOP_STORE: {
        int lanes = s->value && s->value->type.lanes > 0 ? s->value->type.lanes : 1;
        B->stores++;
        if (lanes > 1) B->vec_stores++;
        if (lanes > B->lanes) B->lanes = lanes;
        if (on_stack(s->buffer)) B->reg_accesses++;
        else B->mem_stores++;
        add_access(B, s->buffer, s->index, lanes, true);
        scan_expr(B, s->value, MAX_EXPR_DEPTH);
        return;
    }
    case LOOP_ALLOC: scan_stmt(B, s->body); return;
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++) scan_stmt(B, s->stmts[i]);
        return;
    case LOOP_BARRIER: return;
    }
}

/* Access a over levels 0..L (L = -1: one iteration of the hot body): the elements between
 * the first and the last it touches (*span), and the bytes of the distinct ones counting a
 * cache line (or the stride, if less) for each (*sparse). */
static void touched(const scan *B, const mem_access *a, int L, double *span, double *sparse) {
    const double eb = (double)elem_bytes(a->buf->dtype);
    double sp = 1 + (a->lanes - 1) * fabs(a->lane_stride), distinct = a->lanes;
    double minstride = a->lanes > 1 && a->lane_stride != 0 ? fabs(a->lane_stride) : INFINITY;
    for (int l = 0; l <= L && l < B->nlv; l++) {
        double c = fabs(a->coef[l]);
        if (c == 0) continue;
        sp += c * (double)(B->lv[l].extent - 1);
        distinct *= (double)B->lv[l].extent;
        if (c < minstride) minstride = c;
    }
    double line = isfinite(minstride) ? minstride * eb : eb;
    line = line < eb ? eb : line > LINE_BYTES ? LINE_BYTES : line;
    *span = sp;
    *sparse = distinct * line;
}

/* Bytes of memory (not stack buffers) the hot body touches over levels 0..L: per buffer, the
 * range its accesses cover or the sum of their distinct lines, whichever is less, at most the
 * buffer. */
static double footprint(const scan *B, int L) {
    double total = 0;
    for (int i = 0; i < B->nacc; i++) {
        const mem_access *a = &B->acc[i];
        if (on_stack(a->buf)) continue;
        bool first = true;
        for (int j = 0; j < i && first; j++) first = B->acc[j].buf != a->buf;
        if (!first) continue;
        double lo = INFINITY, hi = -INFINITY, sparse = 0;
        for (int j = i; j < B->nacc; j++) {
            if (B->acc[j].buf != a->buf) continue;
            double sp, bytes;
            touched(B, &B->acc[j], L, &sp, &bytes);
            lo = fmin(lo, B->acc[j].c0);
            hi = fmax(hi, B->acc[j].c0 + sp);
            sparse += bytes;
        }
        const double eb = (double)elem_bytes(a->buf->dtype);
        double bytes = fmin((hi - lo) * eb, sparse), size = (double)a->buf->size * eb;
        total += size > 0 && bytes > size ? size : bytes;
    }
    return total;
}

static float lg(double x) { return (float)log2(x > 1e-30 ? x : 1e-30); }
static float lg1(double x) { return (float)log2(1.0 + (x > 0 ? x : 0)); }
static float clampf(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }

void tune_features_of_func(const loop_func *f, const tune_machine *m, float *out,
                           tune_loop_stats *stats) {
    static search S; /* large: not on the stack of a strategy's call */
    static scan B;
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    memset(&S, 0, sizeof S);
    memset(&B, 0, sizeof B);
    find_hot(&S, f ? f->body : NULL, 1);
    /* the hot loop and its enclosing loops, innermost first; lets on the path in scope */
    int nfor = 0, par_pos = -1, hot_pos = S.best_depth - 1;
    int64_t par_extent = 1;
    for (int i = S.best_depth - 1; i >= 0; i--) {
        const loop_stmt *s = S.best[i];
        if (s->kind != LOOP_FOR) continue;
        nfor++;
        if (B.nlv < LEVELS)
            B.lv[B.nlv++] = (level){s->var, extent_of(s), s->for_kind, i};
        if (s->for_kind == LOOP_PARALLEL) par_pos = i, par_extent = extent_of(s);
    }
    for (int i = 0; i < S.best_depth; i++)
        if (S.best[i]->kind == LOOP_LET && B.nenv < 2 * MAX_DEPTH) {
            B.env_var[B.nenv] = S.best[i]->var;
            B.env_val[B.nenv++] = S.best[i]->value;
        }
    const loop_stmt *hot = S.best_depth > 0 ? S.best[S.best_depth - 1] : NULL;
    if (hot) scan_stmt(&B, hot->body);
    else if (f) scan_stmt(&B, f->body);
    const int vec = m->vector_floats > 0 ? m->vector_floats : 1;

    /* accumulators: distinct stores that stay put along the hot loop */
    int64_t accs = 0;
    int alloc_pos = -1;
    bool stack_only = true;
    for (int i = 0; i < B.nacc && B.nlv > 0; i++) {
        const mem_access *a = &B.acc[i];
        if (!a->store || a->coef[0] != 0) continue;
        bool dup = false;
        for (int j = 0; j < i && !dup; j++)
            dup = B.acc[j].store && B.acc[j].coef[0] == 0 && B.acc[j].buf == a->buf &&
                  te_expr_equal(B.acc[j].index, a->index);
        if (dup) continue;
        accs += (a->lanes + vec - 1) / vec;
        if (!on_stack(a->buf)) {
            stack_only = false;
            continue;
        }
        for (int p = 0; p < S.best_depth; p++)
            if (S.best[p]->kind == LOOP_ALLOC && S.best[p]->buffer == a->buf && p > alloc_pos)
                alloc_pos = p;
    }
    /* the reduction nest: loops inside the accumulators' allocation, or (accumulating in
       memory) the loops from the hot one outwards that every accumulator ignores */
    int R = 0;
    if (accs > 0 && stack_only && alloc_pos >= 0) {
        for (int l = 0; l < B.nlv; l++) R += B.lv[l].pos > alloc_pos;
    } else if (accs > 0) {
        for (bool still = true; R < B.nlv && still; R += still) {
            for (int i = 0; i < B.nacc && still; i++)
                if (B.acc[i].store && B.acc[i].coef[0] == 0 && B.acc[i].coef[R] != 0)
                    still = false;
        }
    }
    double ws = R > 0 ? footprint(&B, R - 1) : 0;

    /* memory accesses per level */
    int nmem = 0;
    for (int i = 0; i < B.nacc; i++) nmem += !on_stack(B.acc[i].buf);
    float *o = out;
    memset(o, 0, sizeof *o * TUNE_FEATURE_DIM);
    const int cores = m->cores > 0 ? m->cores : 1;
    double hot_work = S.best_work > 0 ? S.best_work : 0;
    o[F_hot_trips] = lg(S.best_trips > 1 ? S.best_trips : 1);
    o[F_hot_share] = S.total_work > 0 ? (float)(hot_work / S.total_work) : 0;
    o[F_total_work] = lg1(S.total_work);
    int64_t lanes = B.lanes > 0 ? B.lanes : 1;
    o[F_vec_lanes] = lg((double)lanes);
    o[F_vec_fill] = (float)lanes / (float)vec;
    o[F_vec_store_share] = B.stores ? (float)B.vec_stores / (float)B.stores : 0;
    o[F_unroll] = lg1((double)B.stores);
    o[F_mem_loads] = lg1((double)B.mem_loads);
    o[F_mem_stores] = lg1((double)B.mem_stores);
    o[F_reg_accesses] = lg1((double)B.reg_accesses);
    o[F_fmas] = lg1(B.fmas);
    o[F_flops] = lg1(B.flops);
    o[F_intensity] = lg((1 + B.fmas) / (1 + (double)B.mem_loads));
    o[F_broadcasts] = lg1((double)B.bcasts);
    o[F_guards] = lg1((double)B.ifs);
    const int regs = m->vector_regs > 0 ? m->vector_regs : 16;
    o[F_accumulators] = lg1((double)accs);
    o[F_acc_regs] = (float)accs / (float)regs;
    o[F_acc_spill] = lg1((double)(accs - regs));
    o[F_reduce_levels] = (float)R;
    o[F_working_set] = lg1(ws);
    o[F_ws_l1] = clampf(lg((ws + 1) / (double)(m->l1_bytes > 0 ? m->l1_bytes : 32768)), -8, 8);
    o[F_ws_l2] = clampf(lg((ws + 1) / (double)(m->l2_bytes > 0 ? m->l2_bytes : 1 << 20)), -8, 8);
    o[F_par_extent] = lg((double)par_extent);
    int64_t rounds = (par_extent + cores - 1) / cores;
    o[F_par_balance] = (float)((double)par_extent / (double)(rounds * cores));
    int par_depth = 0;
    for (int i = par_pos + 1; par_pos >= 0 && i < hot_pos; i++)
        par_depth += S.best[i]->kind == LOOP_FOR;
    o[F_par_depth] = (float)par_depth;
    o[F_par_loops] = lg1(S.par_loops);
    o[F_nests] = lg1(S.nests);
    o[F_heap_bytes] = lg1(S.heap_bytes);
    o[F_depth] = (float)nfor;
    double fp_prev = footprint(&B, -1);
    for (int l = 0; l < LEVELS; l++) {
        float *v = o + F_KERNEL_COUNT + l * L_COUNT;
        if (l >= B.nlv) {
            v[L_reuse] = 1;
            v[L_footprint] = lg1(fp_prev);
            continue;
        }
        v[L_extent] = lg((double)B.lv[l].extent);
        v[L_parallel] = B.lv[l].kind == LOOP_PARALLEL;
        v[L_other_kind] = B.lv[l].kind == LOOP_VECTORIZED || B.lv[l].kind == LOOP_UNROLLED;
        int still = 0, contig = 0;
        double moved = 0;
        for (int i = 0; i < B.nacc; i++) {
            const mem_access *a = &B.acc[i];
            if (on_stack(a->buf)) continue;
            double bytes = fabs(a->coef[l]) * (double)elem_bytes(a->buf->dtype);
            still += bytes == 0;
            contig += bytes > 0 && bytes <= LINE_BYTES;
            moved += bytes;
        }
        v[L_reuse] = nmem ? (float)still / (float)nmem : 1;
        v[L_stride] = lg1(nmem ? moved / nmem : 0);
        v[L_contig] = nmem ? (float)contig / (float)nmem : 0;
        fp_prev = footprint(&B, l);
        v[L_footprint] = lg1(fp_prev);
    }
    if (stats) {
        stats->accumulators = accs;
        stats->working_set = (int64_t)ws;
        stats->par_extent = par_extent;
        stats->lanes = lanes;
        stats->hot_stores = B.stores;
        stats->hot_trips = S.best_trips > 1 ? S.best_trips : 1;
    }
    pthread_mutex_unlock(&lock);
}

tune_prune tune_prune_of(const tune_loop_stats *st, const tune_machine *m) {
    if ((double)st->accumulators > TUNE_PRUNE_MAX_ACC_OVER_REGS * m->vector_regs)
        return TUNE_PRUNE_REGISTERS;
    if (m->l2_bytes > 0 && (double)st->working_set > TUNE_PRUNE_MAX_WS_OVER_L2 * (double)m->l2_bytes)
        return TUNE_PRUNE_CACHE;
    return TUNE_PRUNE_NONE;
}

/* ---- the featurizer: lowering per config, cached ---- */

#define MAX_CACHED (1 << 14)

typedef struct entry {
    int choice[TUNE_MAX_KNOBS];
    bool used, lowered;
    tune_loop_stats stats;
    float x[TUNE_FEATURE_DIM];
} entry;

struct tune_featurizer {
    const tune_task *task;   /* borrowed */
    tune_space space;
    tune_machine m;
    entry *tab;
    size_t cap, count;       /* cap: 0 or a power of two, count <= cap / 2 */
    int64_t lowered;
    double seconds;
};

tune_featurizer *tune_featurizer_create(wpk_context *ctx, const tune_task *task,
                                        const tune_machine *m) {
    if (!task || !task->tmpl || !task->tmpl->build) {
        wpk_error(ctx, WPK_ERR_INVALID_ARG, "features: template %s has no loops to read (a "
                  "library)", task && task->tmpl ? task->tmpl->name : "(none)");
        return NULL;
    }
    tune_featurizer *f = wpk_calloc(1, sizeof *f);
    if (!f) {
        wpk_error(ctx, WPK_ERR_NOMEM, "features: out of memory");
        return NULL;
    }
    f->task = task;
    task->tmpl->space(task->tmpl, task, &f->space);
    f->m = m ? *m : tune_machine_host();
    return f;
}

void tune_featurizer_free(tune_featurizer *f) {
    if (!f) return;
    wpk_free(f->tab);
    wpk_free(f);
}

const tune_space *tune_featurizer_space(const tune_featurizer *f) { return &f->space; }

void tune_featurizer_cost(const tune_featurizer *f, int64_t *lowered, double *seconds) {
    if (lowered) *lowered = f->lowered;
    if (seconds) *seconds = f->seconds;
}

static uint64_t hash_choice(const int *choice, int n) {
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < n; i++) h = (h ^ (uint64_t)(uint32_t)choice[i]) * 1099511628211ULL;
    return h ^ (h >> 29);
}

static entry *slot(const tune_featurizer *f, const tune_config *c) {
    size_t mask = f->cap - 1, i = hash_choice(c->choice, f->space.nknobs) & mask;
    for (;; i = (i + 1) & mask) {
        entry *e = &f->tab[i];
        if (!e->used ||
            !memcmp(e->choice, c->choice, sizeof c->choice[0] * (size_t)f->space.nknobs))
            return e;
    }
}

static bool grow(tune_featurizer *f) {
    size_t cap = f->cap ? 2 * f->cap : 1024;
    entry *old = f->tab;
    size_t oldcap = f->cap;
    entry *tab = wpk_calloc(cap, sizeof *tab);
    if (!tab) return false;
    f->tab = tab;
    f->cap = cap;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].used) {
            tune_config c;
            memcpy(c.choice, old[i].choice, sizeof c.choice);
            *slot(f, &c) = old[i];
        }
    wpk_free(old);
    return true;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Lower c into e. 1: lowered, 0: the config does not lower, -1: out of memory. */
static int compute(tune_featurizer *f, const tune_config *c, entry *e) {
    memset(e, 0, sizeof *e);
    memcpy(e->choice, c->choice, sizeof e->choice);
    for (int k = 0; k < f->space.nknobs; k++)
        if (c->choice[k] < 0 || c->choice[k] >= f->space.knobs[k].nvalues) return 0;
    strbuf text = {0};
    tune_config_print(&f->space, c, &text);
    if (text.oom) {
        sb_free(&text);
        return -1;
    }
    double t0 = now_s();
    wpk_context quiet = {0}; /* a config that does not lower is an answer, not an error */
    te_ctx tc;
    te_ctx_init(&tc, &quiet);
    loop_func *fn = NULL;
    wpk_status st = cpu_kernel_lower(&tc, f->task, text.s ? text.s : "", &fn);
    int r = st == WPK_OK && fn ? 1 : st == WPK_ERR_NOMEM || tc.oom ? -1 : 0;
    if (r == 1) {
        tune_features_of_func(fn, &f->m, e->x, &e->stats);
        e->lowered = true;
    }
    te_ctx_free(&tc);
    sb_free(&text);
    f->lowered++;
    f->seconds += now_s() - t0;
    return r;
}

/* The entry of c (cached or computed into *tmp): NULL when out of memory. */
static const entry *lookup(tune_featurizer *f, const tune_config *c, entry *tmp) {
    if (f->cap) {
        entry *e = slot(f, c);
        if (e->used) return e;
    }
    int r = compute(f, c, tmp);
    if (r < 0) return NULL;
    if (f->count < MAX_CACHED && (f->count + 1 <= f->cap / 2 || grow(f))) {
        entry *e = slot(f, c);
        *e = *tmp;
        e->used = true;
        f->count++;
        return e;
    }
    return tmp;
}

int tune_featurizer_get(tune_featurizer *f, const tune_config *c, float *out, int max,
                        tune_loop_stats *stats) {
    entry tmp;
    const entry *e = lookup(f, c, &tmp);
    if (!e || !e->lowered) return -1;
    int n = max < TUNE_FEATURE_DIM ? max : TUNE_FEATURE_DIM;
    if (n > 0) memcpy(out, e->x, sizeof *out * (size_t)n);
    if (stats) *stats = e->stats;
    return n > 0 ? n : 0;
}

int tune_featurizer_get_text(tune_featurizer *f, const char *config, float *out, int max) {
    wpk_context quiet = {0};
    tune_config c;
    if (!config || tune_config_parse(&quiet, &f->space, config, &c) != WPK_OK) return -1;
    return tune_featurizer_get(f, &c, out, max, NULL);
}

tune_prune tune_featurizer_check(tune_featurizer *f, const tune_config *c) {
    entry tmp;
    const entry *e = lookup(f, c, &tmp);
    if (!e) return TUNE_PRUNE_NONE;
    if (!e->lowered) return TUNE_PRUNE_LOWER;
    return tune_prune_of(&e->stats, &f->m);
}

int tune_featurize_config(void *user, const tune_config *c, float *out, int max) {
    return tune_featurizer_get(user, c, out, max, NULL);
}

bool tune_config_legal(void *user, const tune_config *c) {
    return tune_featurizer_check(user, c) == TUNE_PRUNE_NONE;
}
