/* test_codegen_c.c -- the C target: loop IR built by hand is emitted, compiled with the system
 * compiler, run, and compared with plain C; the compile cache; compiler errors; a golden of
 * the emitted text; must-fail IR. */
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS, for the guard-page test */

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/context.h"
#include "codegen/c/cg_c.h"
#include "check.h"
#include "loop/interp.h"
#include "loop/lower.h"
#include "te/algo/conv2d.h"
#include "te/algo/dense.h"
#include "te/schedule.h"

/* ---- building loop IR ---- */

static te_ctx C;

static const te_expr *I(int64_t v) { return te_int(&C, v); }
static const te_expr *F(double v) { return te_float(&C, v); }
static const te_expr *V(const te_iter *it) { return te_var(&C, it); }
static const te_expr *ramp(const te_expr *base, int64_t stride, int lanes) {
    return te_ramp(&C, base, I(stride), lanes);
}
static const te_expr *bc(const te_expr *a, int lanes) { return te_broadcast(&C, a, lanes); }
static const te_expr *ld(const loop_buffer *b, const te_expr *idx) { return loop_load(&C, b, idx); }
static te_iter *iter(const char *name, int64_t extent) {
    return te_iter_new(&C, name, TE_ITER_LOOP, 0, extent);
}
static const loop_stmt *loop(te_iter *it, int64_t min, int64_t extent, loop_for_kind k,
                             const loop_stmt *body) {
    return loop_for(&C, it, I(min), I(extent), k, body);
}
static const loop_stmt *seq2(const loop_stmt *a, const loop_stmt *b) {
    const loop_stmt *s[2] = {a, b};
    return loop_seq(&C, 2, s);
}
static loop_buffer *buf(const char *name, te_scalar t, int64_t n, loop_scope scope) {
    return loop_buffer_new(&C, name, t, 1, &n, scope);
}

/* ---- emit + compile + run ---- */

static char *emit_text(wpk_context *ctx, const loop_func *f, wpk_status *st) {
    strbuf sb = {0};
    cg_c_options o = cg_c_default_options();
    *st = cg_c_emit(ctx, f, &o, &sb);
    return sb_take(&sb);
}

/* Emit, compile and run f on args; returns the emitted source (caller frees) or NULL. */
static char *run_kernel(wpk_context *ctx, const loop_func *f, void *const *args) {
    wpk_status st;
    char *src = emit_text(ctx, f, &st);
    if (st != WPK_OK) {
        fprintf(stderr, "emit %s: %s\n", f->name, wpk_context_error(ctx));
        CHECK(st == WPK_OK);
        wpk_free(src);
        return NULL;
    }
    cg_module *m = NULL;
    st = cg_c_compile(ctx, src, &m);
    if (st != WPK_OK) {
        fprintf(stderr, "compile %s: %s\n--- source ---\n%s\n", f->name, wpk_context_error(ctx),
                src);
        CHECK(st == WPK_OK);
        wpk_free(src);
        return NULL;
    }
    cg_kernel_fn fn = cg_module_fn(m, f->name);
    CHECK(fn != NULL);
    CHECK(cg_module_fn(m, "no_such_symbol") == NULL);
    if (fn) fn(args);
    cg_module_free(m);
    return src;
}

static void *aligned(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64); }

static float frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static bool close_to(float got, float want, float rtol) {
    if (isnan(want)) return isnan(got);
    return fabsf(got - want) <= rtol * (1.0f + fabsf(want));
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* C[i] = A[i] + 2 * B[i] + bias[0], 100 elements: 6 vectors of 16 and a 4-element tail left
 * as a LOOP_VECTORIZED scalar loop (gets `omp simd`: its iterations are independent). */
static void test_vector_add(wpk_context *ctx) {
    enum { N = 100 };
    loop_buffer *A = buf("A", TE_F32, N, LOOP_SCOPE_ARG), *B = buf("B", TE_F32, N, LOOP_SCOPE_ARG);
    loop_buffer *bias = buf("bias", TE_F32, 1, LOOP_SCOPE_ARG),
                *Cb = buf("C", TE_F32, N, LOOP_SCOPE_ARG);
    te_iter *io = iter("io", 6), *t = iter("t", 4);
    const te_expr *r = ramp(te_mul(&C, V(io), I(16)), 1, 16);
    const te_expr *vec =
        te_add(&C, te_add(&C, ld(A, r), te_mul(&C, ld(B, r), F(2.0))), ld(bias, bc(I(0), 16)));
    const te_expr *ti = V(t);
    const te_expr *sca =
        te_add(&C, te_add(&C, ld(A, ti), te_mul(&C, ld(B, ti), F(2.0))), ld(bias, I(0)));
    const loop_stmt *body = seq2(loop(io, 0, 6, LOOP_SERIAL, loop_store(&C, Cb, r, vec)),
                                 loop(t, 96, 4, LOOP_VECTORIZED, loop_store(&C, Cb, ti, sca)));
    loop_buffer *args[] = {A, B, bias, Cb};
    loop_func f = {"vec_add", args, 4, 3, body};
    float *a = aligned(N * 4), *b = aligned(N * 4), *c = aligned(N * 4), *bs = aligned(4);
    *bs = 0.25f; /* arguments are 64-byte aligned, as the kernel is told */
    unsigned seed = 1;
    for (int i = 0; i < N; i++) {
        a[i] = frand(&seed);
        b[i] = frand(&seed);
        c[i] = NAN;
    }
    void *argv[] = {a, b, bs, c};
    char *src = run_kernel(ctx, &f, argv);
    for (int i = 0; i < N; i++) CHECK(close_to(c[i], a[i] + 2 * b[i] + *bs, 1e-6f));
    if (src) {
        CHECK(strstr(src, "wpk_loada_f32x16(A_") != NULL); /* io*16 and align 64: aligned */
        CHECK(strstr(src, "wpk_storea_f32x16(C_") != NULL);
        CHECK(strstr(src, "wpk_splat_f32x16(bias_") != NULL); /* broadcast index: one load */
        CHECK(strstr(src, "#pragma omp simd") != NULL);
        CHECK(strstr(src, "const float *restrict A_") != NULL);
        CHECK(strstr(src, "float *restrict C_") != NULL);
    }
    wpk_free(src);
    free(a);
    free(b);
    free(c);
    free(bs);
}

/* C[M,N] = A[M,K] x B[K,N] with a 32-float stack accumulator per row, rows parallel. */
static void test_matmul(wpk_context *ctx) {
    enum { M = 5, N = 32, K = 7 };
    int64_t shape[2] = {M, K};
    loop_buffer *A = loop_buffer_new(&C, "A", TE_F32, 2, shape, LOOP_SCOPE_ARG);
    loop_buffer *B = buf("B", TE_F32, K * N, LOOP_SCOPE_ARG),
                *Cb = buf("C", TE_F32, M * N, LOOP_SCOPE_ARG);
    loop_buffer *acc = buf("C.local", TE_F32, N, LOOP_SCOPE_STACK);
    te_iter *i = iter("i", M), *j0 = iter("jo", 2), *j1 = iter("jo", 2), *j2 = iter("jo", 2),
            *k = iter("k", K);
    const te_expr *r0 = ramp(te_mul(&C, V(j0), I(16)), 1, 16);
    const te_expr *r1 = ramp(te_mul(&C, V(j1), I(16)), 1, 16);
    const te_expr *r2 = ramp(te_mul(&C, V(j2), I(16)), 1, 16);
    const loop_stmt *init = loop(j0, 0, 2, LOOP_UNROLLED, loop_store(&C, acc, r0, bc(F(0), 16)));
    const te_expr *a = bc(ld(A, te_add(&C, te_mul(&C, V(i), I(K)), V(k))), 16);
    const te_expr *bv =
        ld(B, ramp(te_add(&C, te_mul(&C, V(k), I(N)), te_mul(&C, V(j1), I(16))), 1, 16));
    const loop_stmt *upd =
        loop(k, 0, K, LOOP_SERIAL,
             loop(j1, 0, 2, LOOP_UNROLLED,
                  loop_store(&C, acc, r1, te_add(&C, ld(acc, r1), te_mul(&C, a, bv)))));
    const te_expr *out_idx =
        ramp(te_add(&C, te_mul(&C, V(i), I(N)), te_mul(&C, V(j2), I(16))), 1, 16);
    const loop_stmt *wb = loop(j2, 0, 2, LOOP_SERIAL, loop_store(&C, Cb, out_idx, ld(acc, r2)));
    const loop_stmt *row[3] = {init, upd, wb};
    const loop_stmt *body = loop(i, 0, M, LOOP_PARALLEL, loop_alloc(&C, acc, loop_seq(&C, 3, row)));
    loop_buffer *args[] = {A, B, Cb};
    loop_func f = {"matmul", args, 3, 2, body};
    float *av = aligned(M * K * 4), *bvv = aligned(K * N * 4), *cv = aligned(M * N * 4);
    unsigned seed = 7;
    for (int x = 0; x < M * K; x++) av[x] = frand(&seed);
    for (int x = 0; x < K * N; x++) bvv[x] = frand(&seed);
    void *argv[] = {av, bvv, cv};
    char *src = run_kernel(ctx, &f, argv);
    for (int y = 0; y < M; y++)
        for (int x = 0; x < N; x++) {
            float s = 0;
            for (int z = 0; z < K; z++) s += av[y * K + z] * bvv[z * N + x];
            CHECK(close_to(cv[y * N + x], s, 1e-5f));
        }
    if (src) {
        CHECK(count(src, "#pragma omp parallel for") == 1);
        CHECK(strstr(src, "_Alignas(64) float C_local_") != NULL); /* '.' made valid */
        CHECK(strstr(src, "#pragma GCC unroll 2") != NULL);
    }
    wpk_free(src);
    free(av);
    free(bvv);
    free(cv);
}

/* A register tile as lowering leaves it once its loops are unrolled: a 2-row x 2-vector
 * accumulator read and written only as whole vectors at constant offsets is emitted as four
 * vector variables, not an array (cg_c_vector_slots). With `scalar_peek`, one scalar
 * read of the tile (a use the variables cannot name as written) keeps it an array. Both
 * compute C = A x B (2 x 7 times 7 x 32). */
static void register_tile(wpk_context *ctx, bool scalar_peek) {
    enum { M = 2, N = 32, K = 7 };
    loop_buffer *A = buf("A", TE_F32, M * K, LOOP_SCOPE_ARG),
                *B = buf("B", TE_F32, K * N, LOOP_SCOPE_ARG),
                *Cb = buf("C", TE_F32, M * N + 1, LOOP_SCOPE_ARG);
    loop_buffer *acc = buf("tile", TE_F32, M * N, LOOP_SCOPE_STACK);
    te_iter *k = iter("k", K);
    const loop_stmt *init[M * 2], *upd[M * 2], *out[M * 2 + 1];
    for (int r = 0; r < M; r++)
        for (int v = 0; v < 2; v++) {
            const int slot = r * 2 + v;
            const te_expr *at = ramp(I(slot * 16), 1, 16);
            init[slot] = loop_store(&C, acc, at, bc(F(0), 16));
            const te_expr *a = bc(ld(A, te_add(&C, I(r * K), V(k))), 16);
            const te_expr *b = ld(B, ramp(te_add(&C, te_mul(&C, V(k), I(N)), I(v * 16)), 1, 16));
            upd[slot] = loop_store(&C, acc, at, te_add(&C, ld(acc, at), te_mul(&C, a, b)));
            out[slot] = loop_store(&C, Cb, ramp(I(slot * 16), 1, 16), ld(acc, at));
        }
    /* C[M*N] = the tile's element 17, or 0 */
    out[M * 2] = loop_store(&C, Cb, I(M * N), scalar_peek ? ld(acc, I(17)) : F(0));
    const loop_stmt *parts[3] = {loop_seq(&C, M * 2, init),
                                 loop(k, 0, K, LOOP_SERIAL, loop_seq(&C, M * 2, upd)),
                                 loop_seq(&C, M * 2 + 1, out)};
    loop_buffer *args[] = {A, B, Cb};
    loop_func f = {scalar_peek ? "tile_array" : "tile_regs", args, 3, 2,
                   loop_alloc(&C, acc, loop_seq(&C, 3, parts))};
    float *av = aligned(M * K * 4), *bv = aligned(K * N * 4), *cv = aligned((M * N + 1) * 4);
    unsigned seed = 11;
    for (int x = 0; x < M * K; x++) av[x] = frand(&seed);
    for (int x = 0; x < K * N; x++) bv[x] = frand(&seed);
    void *argv[] = {av, bv, cv};
    char *src = run_kernel(ctx, &f, argv);
    for (int y = 0; y < M; y++)
        for (int x = 0; x < N; x++) {
            float sum = 0;
            for (int z = 0; z < K; z++) sum += av[y * K + z] * bv[z * N + x];
            CHECK(close_to(cv[y * N + x], sum, 1e-5f));
        }
    CHECK(cv[M * N] == (scalar_peek ? cv[17] : 0.0f));
    if (src) {
        const bool regs = strstr(src, "wpk_f32x16 tile_") && strstr(src, "_v3;");
        CHECK(regs == !scalar_peek);
        CHECK((strstr(src, "_Alignas(64) float tile_") != NULL) == scalar_peek);
    }
    wpk_free(src);
    free(av);
    free(bv);
    free(cv);
}

static void test_register_tile(wpk_context *ctx) {
    register_tile(ctx, false);
    register_tile(ctx, true);
}

/* A parallel loop inside a parallel loop: only the outer one becomes an OpenMP region; every
 * element is written exactly once (out[i*W+j] += 1 from 0). A heap intermediate in between. */
static void test_parallel(wpk_context *ctx) {
    enum { H = 37, W = 19 };
    loop_buffer *in = buf("in", TE_F32, H * W, LOOP_SCOPE_ARG),
                *out = buf("out", TE_F32, H * W, LOOP_SCOPE_ARG);
    loop_buffer *tmp = buf("tmp", TE_F32, H * W, LOOP_SCOPE_HEAP);
    te_iter *y0 = iter("y", H), *x0 = iter("x", W), *y1 = iter("y", H), *x1 = iter("x", W);
    const te_expr *i0 = te_add(&C, te_mul(&C, V(y0), I(W)), V(x0));
    const te_expr *i1 = te_add(&C, te_mul(&C, V(y1), I(W)), V(x1));
    const loop_stmt *fill = loop(
        y0, 0, H, LOOP_PARALLEL,
        loop(x0, 0, W, LOOP_PARALLEL, loop_store(&C, tmp, i0, te_mul(&C, ld(in, i0), F(3.0)))));
    const loop_stmt *use = loop(
        y1, 0, H, LOOP_PARALLEL,
        loop(x1, 0, W, LOOP_SERIAL, loop_store(&C, out, i1, te_add(&C, ld(out, i1), ld(tmp, i1)))));
    loop_buffer *args[] = {in, out};
    loop_func f = {"par", args, 2, 1, loop_alloc(&C, tmp, seq2(fill, use))};
    float *a = aligned(H * W * 4), *o = aligned(H * W * 4);
    for (int i = 0; i < H * W; i++) {
        a[i] = (float)i;
        o[i] = 1;
    }
    void *argv[] = {a, o};
    char *src = run_kernel(ctx, &f, argv);
    for (int i = 0; i < H * W; i++) CHECK(o[i] == 1 + 3.0f * (float)i);
    if (src) {
        CHECK(count(src, "#pragma omp parallel for") == 2); /* fill's outer and use's */
        CHECK(strstr(src, "aligned_alloc(64, ") != NULL && strstr(src, "free(tmp_") != NULL);
    }
    wpk_free(src);
    free(a);
    free(o);
}

static int64_t fdiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static int64_t fmod64(int64_t a, int64_t b) { return a - fdiv(a, b) * b; }

/* Integer floor division and modulo: by a variable divisor of either sign, by a constant of an
 * index that goes negative, of a non-negative index (plain C), and of a vector. */
static void test_floor_divmod(wpk_context *ctx) {
    enum { N = 16 };
    loop_buffer *x = buf("x", TE_I64, N, LOOP_SCOPE_ARG), *d = buf("d", TE_I64, N, LOOP_SCOPE_ARG);
    loop_buffer *q = buf("q", TE_I64, N, LOOP_SCOPE_ARG), *r = buf("r", TE_I64, N, LOOP_SCOPE_ARG);
    loop_buffer *qc = buf("qc", TE_I64, N, LOOP_SCOPE_ARG),
                *rc = buf("rc", TE_I64, N, LOOP_SCOPE_ARG);
    loop_buffer *qp = buf("qp", TE_I64, N, LOOP_SCOPE_ARG),
                *qv = buf("qv", TE_I64, N, LOOP_SCOPE_ARG);
    loop_buffer *rv = buf("rv", TE_I64, N, LOOP_SCOPE_ARG);
    te_iter *i = iter("i", N), *v = iter("v", 2);
    const te_expr *vi = V(i), *shifted = te_sub(&C, vi, I(7));
    const loop_stmt *s[5] = {
        loop_store(&C, q, vi, te_div(&C, ld(x, vi), ld(d, vi))),
        loop_store(&C, r, vi, te_mod(&C, ld(x, vi), ld(d, vi))),
        loop_store(&C, qc, vi, te_div(&C, shifted, I(3))),
        loop_store(&C, rc, vi, te_mod(&C, shifted, I(3))),
        loop_store(&C, qp, vi, te_div(&C, vi, I(4))),
    };
    const te_expr *lanes = ramp(te_sub(&C, te_mul(&C, V(v), I(8)), I(9)), 1, 8);
    const te_expr *out = ramp(te_mul(&C, V(v), I(8)), 1, 8);
    const loop_stmt *vs = loop(v, 0, 2, LOOP_SERIAL,
                               seq2(loop_store(&C, qv, out, te_div(&C, lanes, bc(I(4), 8))),
                                    loop_store(&C, rv, out, te_mod(&C, lanes, bc(I(4), 8)))));
    loop_buffer *args[] = {x, d, q, r, qc, rc, qp, qv, rv};
    loop_func f = {"floors", args, 9, 2, seq2(loop(i, 0, N, LOOP_SERIAL, loop_seq(&C, 5, s)), vs)};
    int64_t *xa = aligned(N * 8), *da = aligned(N * 8), *outs[7];
    for (int k = 0; k < 7; k++) outs[k] = aligned(N * 8);
    for (int k = 0; k < N; k++) {
        xa[k] = (k * 37) % 23 - 11;
        da[k] = (k % 2 ? 1 : -1) * (k % 5 + 1);
    }
    void *argv[9] = {xa, da};
    for (int k = 0; k < 7; k++) argv[2 + k] = outs[k];
    char *src = run_kernel(ctx, &f, argv);
    for (int k = 0; k < N; k++) {
        CHECK(outs[0][k] == fdiv(xa[k], da[k]));
        CHECK(outs[1][k] == fmod64(xa[k], da[k]));
        CHECK(outs[2][k] == fdiv(k - 7, 3));
        CHECK(outs[3][k] == fmod64(k - 7, 3));
        CHECK(outs[4][k] == k / 4);
        CHECK(outs[5][k] == fdiv(k - 9, 4));
        CHECK(outs[6][k] == fmod64(k - 9, 4));
    }
    CHECK(outs[2][0] == -3 && outs[3][0] == 2); /* the semantics themselves: -7 = 3 * -3 + 2 */
    if (src) {
        CHECK(strstr(src, "wpk_floordiv_i64(") != NULL);
        CHECK(strstr(src, "wpk_floordiv_i64x8(") != NULL);
        CHECK(strstr(src, "(i_") != NULL && strstr(src, " / 4)") != NULL); /* i >= 0: plain C */
    }
    wpk_free(src);
    free(xa);
    free(da);
    for (int k = 0; k < 7; k++) free(outs[k]);
}

/* Vector selects: leaky relu (the condition's own load in the branches: a blend), a mask from
 * 64-bit indices, a bool vector cast to float, and a shift whose branch would read before the
 * array where the condition is false: that one must go lane by lane, and the array starts
 * right after an inaccessible page to prove it. */
static void test_select(wpk_context *ctx) {
    enum { N = 32 };
    long page = sysconf(_SC_PAGESIZE);
    char *guard =
        mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(guard != MAP_FAILED);
    if (guard == MAP_FAILED) return;
    CHECK(mprotect(guard, (size_t)page, PROT_NONE) == 0);
    float *a = (float *)(guard + page);
    loop_buffer *A = buf("A", TE_F32, N, LOOP_SCOPE_ARG);
    loop_buffer *o1 = buf("leaky", TE_F32, N, LOOP_SCOPE_ARG),
                *o2 = buf("first5", TE_F32, N, LOOP_SCOPE_ARG);
    loop_buffer *o3 = buf("pos", TE_F32, N, LOOP_SCOPE_ARG),
                *o4 = buf("shift", TE_F32, N, LOOP_SCOPE_ARG);
    loop_buffer *o5 = buf("both", TE_F32, N, LOOP_SCOPE_ARG),
                *o6 = buf("early", TE_F32, N, LOOP_SCOPE_ARG);
    te_iter *v = iter("v", N / 8);
    const te_expr *base = te_mul(&C, V(v), I(8));
    const te_expr *r = ramp(base, 1, 8), *x = ld(A, r);
    const te_expr *leaky = te_select(&C, te_cmp(&C, TE_LT, x, F(0)), te_mul(&C, x, F(0.125)), x);
    const te_expr *first5 =
        te_select(&C, te_cmp(&C, TE_LT, r, bc(I(5), 8)), bc(F(1), 8), bc(F(-1), 8));
    const te_expr *pos = te_cast(&C, (te_type){TE_F32, 8}, te_cmp(&C, TE_LT, bc(F(0), 8), x));
    const te_expr *shift = te_select(&C, te_cmp(&C, TE_LE, bc(I(3), 8), r),
                                     ld(A, ramp(te_sub(&C, base, I(3)), 1, 8)), bc(F(0), 8));
    /* a mask and-ed with a mask; a scalar condition choosing between vectors */
    const te_expr *both = te_select(&C, te_and(&C, te_cmp(&C, TE_LT, r, bc(I(5), 8)),
                                               te_cmp(&C, TE_LT, bc(F(0), 8), x)),
                                    bc(F(2), 8), bc(F(-2), 8));
    const te_expr *early = te_select(&C, te_cmp(&C, TE_LT, V(v), I(2)), bc(F(3), 8), bc(F(4), 8));
    const loop_stmt *s[6] = {loop_store(&C, o1, r, leaky), loop_store(&C, o2, r, first5),
                             loop_store(&C, o3, r, pos),   loop_store(&C, o4, r, shift),
                             loop_store(&C, o5, r, both),  loop_store(&C, o6, r, early)};
    loop_buffer *args[] = {A, o1, o2, o3, o4, o5, o6};
    loop_func f = {"selects", args, 7, 1, loop(v, 0, N / 8, LOOP_SERIAL, loop_seq(&C, 6, s))};
    float *outs[6];
    for (int k = 0; k < 6; k++) outs[k] = aligned(N * 4);
    unsigned seed = 3;
    for (int k = 0; k < N; k++) a[k] = frand(&seed);
    a[6] = NAN;
    void *argv[] = {a, outs[0], outs[1], outs[2], outs[3], outs[4], outs[5]};
    char *src = run_kernel(ctx, &f, argv);
    for (int k = 0; k < N; k++) {
        CHECK(close_to(outs[0][k], a[k] < 0 ? a[k] * 0.125f : a[k], 0));
        CHECK(outs[1][k] == (k < 5 ? 1.0f : -1.0f));
        CHECK(outs[2][k] == (0 < a[k] ? 1.0f : 0.0f));
        CHECK(outs[3][k] == (k >= 3 ? a[k - 3] : 0.0f) || (k - 3 == 6 && isnan(outs[3][k])));
        CHECK(outs[4][k] == (k < 5 && 0 < a[k] ? 2.0f : -2.0f));
        CHECK(outs[5][k] == (k < 16 ? 3.0f : 4.0f));
    }
    if (src) {
        CHECK(strstr(src, "wpk_select_f32x8(") != NULL);     /* blends, no lane loop */
        CHECK(count(src, "wpk_l < 8; wpk_l++) wpk_t") == 1); /* only the shift, lane by lane */
    }
    wpk_free(src);
    munmap(guard, (size_t)page * 2);
    for (int k = 0; k < 6; k++) free(outs[k]);
}

/* Strided and general gathers: every second element (stride 2), a repeat (index / 2), a
 * strided store, and a 7-lane vector (stored in 8 lanes) that must not touch element 7. */
static void test_gather(wpk_context *ctx) {
    enum { N = 32 };
    loop_buffer *A = buf("A", TE_F32, 2 * N, LOOP_SCOPE_ARG);
    loop_buffer *even = buf("even", TE_F32, N, LOOP_SCOPE_ARG),
                *rep = buf("rep", TE_F32, 2 * N, LOOP_SCOPE_ARG);
    loop_buffer *st = buf("st", TE_F32, 2 * N, LOOP_SCOPE_ARG),
                *seven = buf("seven", TE_F32, 8, LOOP_SCOPE_ARG);
    te_iter *v = iter("v", N / 8), *w = iter("w", 2 * N / 8);
    const te_expr *b = te_mul(&C, V(v), I(8)), *bw = te_mul(&C, V(w), I(8));
    const loop_stmt *s1 =
        loop(v, 0, N / 8, LOOP_SERIAL,
             seq2(loop_store(&C, even, ramp(b, 1, 8), ld(A, ramp(te_mul(&C, b, I(2)), 2, 8))),
                  loop_store(&C, st, ramp(te_mul(&C, b, I(2)), 2, 8), ld(A, ramp(b, 1, 8)))));
    const te_expr *half = te_div(&C, ramp(bw, 1, 8), bc(I(2), 8));
    const loop_stmt *s2 =
        loop(w, 0, 2 * N / 8, LOOP_SERIAL, loop_store(&C, rep, ramp(bw, 1, 8), ld(A, half)));
    const loop_stmt *s3 =
        loop_store(&C, seven, ramp(I(0), 1, 7), te_add(&C, ld(A, ramp(I(1), 1, 7)), F(1)));
    const loop_stmt *s[3] = {s1, s2, s3};
    loop_buffer *args[] = {A, even, rep, st, seven};
    loop_func f = {"gathers", args, 5, 1, loop_seq(&C, 3, s)};
    float *a = aligned(2 * N * 4), *e = aligned(N * 4), *rp = aligned(2 * N * 4),
          *sv = aligned(2 * N * 4), *sev = aligned(8 * 4);
    for (int k = 0; k < 2 * N; k++) {
        a[k] = (float)k;
        sv[k] = -1;
    }
    sev[7] = 42;
    void *argv[] = {a, e, rp, sv, sev};
    char *src = run_kernel(ctx, &f, argv);
    for (int k = 0; k < N; k++) CHECK(e[k] == (float)(2 * k));
    for (int k = 0; k < 2 * N; k++) CHECK(rp[k] == (float)(k / 2));
    for (int k = 0; k < 2 * N; k++) CHECK(sv[k] == (k % 2 ? -1.0f : (float)(k / 2)));
    for (int k = 0; k < 7; k++) CHECK(sev[k] == (float)(k + 2));
    CHECK(sev[7] == 42);
    if (src) {
        CHECK(strstr(src, "wpk_loads_f32x8(A_") != NULL);
        CHECK(strstr(src, "wpk_stores_f32x8(st_") != NULL);
        CHECK(strstr(src, "wpk_gather_f32x8(A_") != NULL);
        CHECK(strstr(src, "typedef float wpk_f32x7 __attribute__((vector_size(32)))") != NULL);
    }
    wpk_free(src);
    free(a);
    free(e);
    free(rp);
    free(sv);
    free(sev);
}

/* Math calls, scalar and 16-lane vector, against libm; min/max keep a NaN first operand. */
static void test_math(wpk_context *ctx) {
    enum { N = 16, NF = 9 };
    static const te_fn fns[] = {TE_FN_EXP,  TE_FN_LOG, TE_FN_TANH,  TE_FN_ERF,
                                TE_FN_SQRT, TE_FN_ABS, TE_FN_FLOOR, TE_FN_POW};
    loop_buffer *A = buf("A", TE_F32, N, LOOP_SCOPE_ARG);
    loop_buffer *outv[NF], *outs[NF];
    const loop_stmt *st[2 * NF];
    const te_expr *r = ramp(I(0), 1, N), *xv = ld(A, r);
    for (int k = 0; k < NF; k++) {
        char name[16];
        snprintf(name, sizeof name, "v%d", k);
        outv[k] = buf(name, TE_F32, N, LOOP_SCOPE_ARG);
        snprintf(name, sizeof name, "s%d", k);
        outs[k] = buf(name, TE_F32, N, LOOP_SCOPE_ARG);
        te_iter *i = iter("i", N); /* each scalar loop its own variable */
        const te_expr *xs = ld(A, V(i)), *ev, *es;
        if (k < 8) {
            bool pw = fns[k] == TE_FN_POW;
            ev = te_call(&C, fns[k], xv, pw ? bc(F(1.5), N) : NULL);
            es = te_call(&C, fns[k], xs, pw ? F(1.5) : NULL);
        } else {
            ev = te_max(&C, te_min(&C, xv, F(2.0)), F(0.5));
            es = te_max(&C, te_min(&C, xs, F(2.0)), F(0.5));
        }
        st[2 * k] = loop_store(&C, outv[k], r, ev);
        st[2 * k + 1] = loop(i, 0, N, LOOP_SERIAL, loop_store(&C, outs[k], V(i), es));
    }
    loop_buffer *args[1 + 2 * NF];
    args[0] = A;
    for (int k = 0; k < NF; k++) {
        args[1 + k] = outv[k];
        args[1 + NF + k] = outs[k];
    }
    loop_func f = {"maths", args, 1 + 2 * NF, 1, loop_seq(&C, 2 * NF, st)};
    float *a = aligned(N * 4), *ov[NF], *os[NF];
    void *argv[1 + 2 * NF];
    argv[0] = a;
    for (int k = 0; k < NF; k++) {
        argv[1 + k] = ov[k] = aligned(N * 4);
        argv[1 + NF + k] = os[k] = aligned(N * 4);
    }
    unsigned seed = 11;
    for (int k = 0; k < N; k++) a[k] = 3 * frand(&seed);
    a[3] = NAN;
    a[4] = 0.25f;
    char *src = run_kernel(ctx, &f, argv);
    for (int k = 0; k < N; k++) {
        float x = a[k], want[NF] = {expf(x),  logf(x),   tanhf(x),      erff(x), sqrtf(x),
                                    fabsf(x), floorf(x), powf(x, 1.5f), 0};
        want[8] = x < 2.0f ? x : 2.0f;
        want[8] = want[8] < 0.5f ? 0.5f : want[8];
        if (isnan(x)) want[8] = NAN;
        for (int j = 0; j < NF; j++) {
            if (!close_to(ov[j][k], want[j], 1e-6f) || !close_to(os[j][k], want[j], 1e-6f)) {
                fprintf(stderr, "fn %d x=%g: vector %g scalar %g want %g\n", j, x, ov[j][k],
                        os[j][k], want[j]);
                check_failures++;
            }
        }
    }
    if (src) CHECK(strstr(src, "wpk_erff_f32x16(") && strstr(src, "wpk_powf_f32x16("));
    wpk_free(src);
    free(a);
    for (int k = 0; k < NF; k++) {
        free(ov[k]);
        free(os[k]);
    }
}

/* Scalar control flow: let, if/else, and a variable-extent loop. */
static void test_scalar_flow(wpk_context *ctx) {
    enum { N = 12 };
    loop_buffer *A = buf("A", TE_F32, 2 * N, LOOP_SCOPE_ARG),
                *O = buf("O", TE_F32, N, LOOP_SCOPE_ARG);
    te_iter *i = iter("i", N), *t = te_iter_new(&C, "t", TE_ITER_LET, 0, -1), *j = iter("j", -1);
    const te_expr *tv = V(t);
    const loop_stmt *inner = loop_for(&C, j, I(0), te_mod(&C, V(i), I(3)), LOOP_SERIAL,
                                      loop_store(&C, O, V(i), te_add(&C, ld(O, V(i)), F(100))));
    const loop_stmt *branch =
        loop_if(&C, te_cmp(&C, TE_LT, tv, I(10)), loop_store(&C, O, V(i), ld(A, tv)),
                loop_store(&C, O, V(i), F(-1)));
    const loop_stmt *body =
        loop(i, 0, N, LOOP_SERIAL, loop_let(&C, t, te_mul(&C, V(i), I(2)), seq2(branch, inner)));
    loop_buffer *args[] = {A, O};
    loop_func f = {"flow", args, 2, 1, body};
    float *a = aligned(2 * N * 4), *o = aligned(N * 4);
    for (int k = 0; k < 2 * N; k++) a[k] = (float)k * 0.5f;
    void *argv[] = {a, o};
    wpk_free(run_kernel(ctx, &f, argv));
    for (int k = 0; k < N; k++)
        CHECK(o[k] == (2 * k < 10 ? a[2 * k] : -1.0f) + 100.0f * (float)(k % 3));
    free(a);
    free(o);
}

/* Replace the cached object of `src` (found through the source kept next to it) by garbage. */
static bool damage_entry(const char *src) {
    const char *dir = getenv("WPK_CACHE_DIR");
    DIR *d = dir ? opendir(dir) : NULL;
    if (!d) return false;
    bool done = false;
    for (struct dirent *e; !done && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        bool source = n > 2 && strcmp(e->d_name + n - 2, ".c") == 0;
        if (!source || strstr(e->d_name, ".failed.")) continue;
        char path[4096], text[4096] = {0};
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
        if (f) fclose(f);
        if (got != strlen(src) || memcmp(text, src, got) != 0) continue;
        char so[4096], tmp[4200];
        snprintf(so, sizeof so, "%.*s.so", (int)(strlen(path) - 2), path);
        snprintf(tmp, sizeof tmp, "%s.garbage", so);
        f = fopen(tmp, "w");
        if (!f) break;
        fputs("not an ELF object", f);
        fclose(f);
        done = rename(tmp, so) == 0; /* a new file: never scribble on a mapped one */
    }
    closedir(d);
    return done;
}

/* The cache: the same source compiles once; a different one compiles again; a broken one is
 * WPK_ERR_INTERNAL carrying the compiler's words. */
static void test_cache(wpk_context *ctx) {
    const char *src = "void cache_probe(void *const *args);\n"
                      "void cache_probe(void *const *args) { *(int *)args[0] = 41 + 1; }\n";
    int before = cg_c_compile_count();
    cg_module *m1 = NULL, *m2 = NULL, *m3 = NULL;
    CHECK(cg_c_compile(ctx, src, &m1) == WPK_OK);
    CHECK(cg_c_compile_count() == before + 1);
    CHECK(cg_c_compile(ctx, src, &m2) == WPK_OK); /* a hit: no compiler run */
    CHECK(cg_c_compile_count() == before + 1);
    int v = 0;
    void *argv[] = {&v};
    cg_kernel_fn fn = m2 ? cg_module_fn(m2, "cache_probe") : NULL;
    CHECK(fn != NULL);
    if (fn) fn(argv);
    CHECK(v == 42);
    const char *src2 = "void cache_probe(void *const *args);\n"
                       "void cache_probe(void *const *args) { *(int *)args[0] = 43; }\n";
    CHECK(cg_c_compile(ctx, src2, &m3) == WPK_OK); /* a miss */
    CHECK(cg_c_compile_count() == before + 2);
    fn = m3 ? cg_module_fn(m3, "cache_probe") : NULL;
    if (fn) fn(argv);
    CHECK(v == 43);
    cg_module_free(m1);
    cg_module_free(m2);
    cg_module_free(m3);

    /* a damaged entry (a crash mid-write on a file system without atomic rename, a copy from
     * another machine) is rebuilt, not loaded and not an error */
    CHECK(damage_entry(src));
    cg_module *m4 = NULL;
    CHECK(cg_c_compile(ctx, src, &m4) == WPK_OK);
    CHECK(cg_c_compile_count() == before + 3);
    fn = m4 ? cg_module_fn(m4, "cache_probe") : NULL;
    if (fn) fn(argv);
    CHECK(v == 42);
    cg_module_free(m4);

    cg_module *bad = NULL;
    wpk_status st = cg_c_compile(ctx, "void broken(void *const *args) { this is not C; }\n", &bad);
    CHECK_ERR(ctx, st, WPK_ERR_INTERNAL, "error");
    CHECK(strstr(wpk_context_error(ctx), "failed") != NULL);
    CHECK(strstr(wpk_context_error(ctx), ".failed.c") != NULL);
    CHECK(bad == NULL);
    int after_bad = cg_c_compile_count();
    /* a failure is not cached as a success: trying again runs the compiler again */
    st = cg_c_compile(ctx, "void broken(void *const *args) { this is not C; }\n", &bad);
    CHECK(st == WPK_ERR_INTERNAL && cg_c_compile_count() == after_bad + 1);
}

/* Threads compiling at once, two of them the same source: all succeed, each kernel is the
 * right one, and the shared key is compiled at most twice (each thread may miss before the
 * other's rename lands) -- never a torn object. */
typedef struct compile_job {
    const char *src;
    int want;
    wpk_status st;
    int got;
} compile_job;

static void *compile_thread(void *p) {
    compile_job *j = p;
    wpk_context *ctx = wpk_context_create();
    cg_module *m = NULL;
    j->st = cg_c_compile(ctx, j->src, &m);
    cg_kernel_fn fn = m ? cg_module_fn(m, "conc") : NULL;
    void *argv[] = {&j->got};
    if (fn) fn(argv);
    cg_module_free(m);
    wpk_context_free(ctx);
    return NULL;
}

static void test_concurrent(void) {
    static const char *srcs[] = {
        "void conc(void *const *args);\nvoid conc(void *const *args) { *(int *)args[0] = 1; }\n",
        "void conc(void *const *args);\nvoid conc(void *const *args) { *(int *)args[0] = 2; }\n",
        "void conc(void *const *args);\nvoid conc(void *const *args) { *(int *)args[0] = 3; }\n",
    };
    compile_job jobs[4] = {{srcs[0], 1, 0, 0}, {srcs[1], 2, 0, 0}, {srcs[2], 3, 0, 0},
                           {srcs[2], 3, 0, 0}};
    pthread_t th[4];
    int before = cg_c_compile_count();
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&th[i], NULL, compile_thread, &jobs[i]) == 0);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) CHECK(jobs[i].st == WPK_OK && jobs[i].got == jobs[i].want);
    int runs = cg_c_compile_count() - before;
    CHECK(runs >= 3 && runs <= 4);
}

/* The emitted text of one small kernel, character for character. */
static const char *GOLDEN =
    "/* generated by wpk cg_c: kernel golden, vector_bits 512, openmp */\n"
    "#include <math.h>\n"
    "#include <stdbool.h>\n"
    "#include <stdint.h>\n"
    "#include <stdlib.h>\n"
    "#include <string.h>\n"
    "\n"
    "typedef float wpk_f32x16 __attribute__((vector_size(64)));\n"
    "\n"
    "static inline int64_t wpk_floormod_i64(int64_t a, int64_t b) {\n"
    "    int64_t r = a % b;\n"
    "    return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;\n"
    "}\n"
    "static inline wpk_f32x16 wpk_splat_f32x16(float x) {\n"
    "    return (wpk_f32x16){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x};\n"
    "}\n"
    "static inline wpk_f32x16 wpk_loada_f32x16(const float *p) {\n"
    "    wpk_f32x16 v;\n"
    "    memcpy(&v, __builtin_assume_aligned(p, 64), 64);\n"
    "    return v;\n"
    "}\n"
    "static inline void wpk_storea_f32x16(float *p, wpk_f32x16 v) {\n"
    "    memcpy(__builtin_assume_aligned(p, 64), &v, 64);\n"
    "}\n"
    "static inline wpk_f32x16 wpk_max_f32x16(wpk_f32x16 a, wpk_f32x16 b) {\n"
    "    __typeof__(a < b) m = a < b;\n"
    "    return (wpk_f32x16)((m & (__typeof__(m))b) | (~m & (__typeof__(m))a));\n"
    "}\n"
    "\n"
    "void golden(void *const *args);\n"
    "void golden(void *const *args) {\n"
    "    const float *restrict A_0 = (const float"
    " *)__builtin_assume_aligned(args[0], 64);\n"
    "    float *restrict out_0_1 = (float *)__builtin_assume_aligned(args[1], 64);\n"
    "    #pragma omp parallel for schedule(guided)\n"
    "    for (int64_t v_2 = 0; v_2 < 2; v_2++) {\n"
    "        wpk_storea_f32x16(out_0_1 + (v_2 * 16),"
    " wpk_max_f32x16((wpk_loada_f32x16(A_0 + (v_2 * 16)) * wpk_splat_f32x16(0.5f)),"
    " wpk_splat_f32x16(0.0f)));\n"
    "    }\n"
    "    for (int64_t i_3 = 0; i_3 < 3; i_3++) {\n"
    "        out_0_1[i_3] = (A_0[wpk_floormod_i64((i_3 - 1), 32)] / 3.0f);\n"
    "    }\n"
    "}\n";

static void test_golden(wpk_context *ctx) {
    te_ctx saved = C;
    te_ctx_init(&C, ctx); /* ids from 0: the names below do not depend on the tests before */
    int64_t n = 32;
    loop_buffer *A = loop_buffer_new(&C, "A", TE_F32, 1, &n, LOOP_SCOPE_ARG);
    loop_buffer *O = loop_buffer_new(&C, "out.0", TE_F32, 1, &n, LOOP_SCOPE_ARG);
    te_iter *v = iter("v", 2), *i = iter("i", 3);
    const te_expr *r = ramp(te_mul(&C, V(v), I(16)), 1, 16);
    const te_expr *x = ld(A, r);
    const loop_stmt *vec =
        loop(v, 0, 2, LOOP_PARALLEL, loop_store(&C, O, r, te_max(&C, te_mul(&C, x, F(0.5)), F(0))));
    const loop_stmt *tail =
        loop(i, 0, 3, LOOP_SERIAL,
             loop_store(&C, O, V(i),
                        te_div(&C, ld(A, te_mod(&C, te_sub(&C, V(i), I(1)), I(32))), F(3))));
    loop_buffer *args[] = {A, O};
    loop_func f = {"golden", args, 2, 1, seq2(vec, tail)};
    cg_c_options o = {512, true};
    strbuf a = {0}, b = {0};
    CHECK(cg_c_emit(ctx, &f, &o, &a) == WPK_OK);
    CHECK(cg_c_emit(ctx, &f, &o, &b) == WPK_OK);
    CHECK(a.s && b.s && strcmp(a.s, b.s) == 0);
    if (a.s && strcmp(a.s, GOLDEN) != 0) {
        fprintf(stderr, "golden mismatch; emitted:\n%s\n", a.s);
        check_failures++;
    }
    sb_free(&a);
    sb_free(&b);
    te_ctx_free(&C);
    C = saved;
}

/* Fail each allocation of an emission in turn: every failure is WPK_ERR_NOMEM with nothing
 * appended, and once none fails the text is the one an unfailing run produces. The same for
 * loading a cached object. */
static void test_faults(wpk_context *ctx) {
    enum { N = 64 };
    loop_buffer *A = buf("A", TE_F32, N, LOOP_SCOPE_ARG), *O = buf("O", TE_F32, N, LOOP_SCOPE_ARG);
    loop_buffer *tmp = buf("tmp", TE_F32, N, LOOP_SCOPE_STACK);
    te_iter *v = iter("v", N / 16), *w = iter("w", N), *i = iter("i", N);
    const te_expr *r = ramp(te_mul(&C, V(v), I(16)), 1, 16), *x = ld(A, r);
    const te_expr *sel = te_select(&C, te_cmp(&C, TE_LT, x, F(0)), te_call(&C, TE_FN_EXP, x, NULL),
                                   ld(A, ramp(te_div(&C, V(v), I(2)), 2, 16)));
    const loop_stmt *s1 = loop(v, 0, N / 16, LOOP_PARALLEL, loop_store(&C, tmp, r, sel));
    const loop_stmt *s2 = loop(w, 0, N, LOOP_SERIAL,
                               loop_store(&C, O, V(w), te_max(&C, ld(tmp, V(w)), F(0.5))));
    const te_expr *k = te_cast(&C, te_t(TE_F32), te_mod(&C, te_sub(&C, V(i), I(3)), I(7)));
    const loop_stmt *s3 =
        loop(i, 0, N, LOOP_UNROLLED, loop_store(&C, O, V(i), te_add(&C, ld(O, V(i)), k)));
    const loop_stmt *s[3] = {s1, s2, s3};
    loop_buffer *args[] = {A, O};
    loop_func f = {"faults", args, 2, 1, loop_alloc(&C, tmp, loop_seq(&C, 3, s))};
    cg_c_options o = cg_c_default_options();
    strbuf want = {0};
    CHECK(cg_c_emit(ctx, &f, &o, &want) == WPK_OK);
    bool done = false;
    for (long n = 1; n < 10000 && !done; n++) {
        strbuf got = {0};
        wpk_alloc_fail_at(n);
        wpk_status st = cg_c_emit(ctx, &f, &o, &got);
        done = wpk_alloc_count() < n;
        wpk_alloc_fail_at(0);
        if (st == WPK_OK) {
            CHECK(got.s && want.s && strcmp(got.s, want.s) == 0);
        } else {
            CHECK_ERR(ctx, st, WPK_ERR_NOMEM, "out of memory");
            CHECK(got.len == 0);
        }
        sb_free(&got);
    }
    CHECK(done);

    cg_module *m = NULL;
    CHECK(cg_c_compile(ctx, want.s, &m) == WPK_OK); /* now cached */
    cg_module_free(m);
    done = false;
    for (long n = 1; n < 1000 && !done; n++) {
        m = NULL;
        wpk_alloc_fail_at(n);
        wpk_status st = cg_c_compile(ctx, want.s, &m);
        done = wpk_alloc_count() < n;
        wpk_alloc_fail_at(0);
        CHECK(st == WPK_OK ? m != NULL : st == WPK_ERR_NOMEM && m == NULL);
        cg_module_free(m);
    }
    CHECK(done);
    sb_free(&want);
}

/* ---- end to end: TE algorithm + schedule -> loop_lower -> C -> run ---- */

static int64_t numel(const te_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

/* Lower s, then run the kernel twice: compiled (C target) and in the loop interpreter; both
 * must match `want` (plain C), the compiled one within tol (FMA contraction rounds
 * differently). args: placeholders' data first, the output (n floats) last. */
static void lower_and_compare(wpk_context *ctx, te_schedule *s, const char *name,
                              te_tensor *const *targs, int nargs, void **args, const float *want,
                              float tol, const char *what) {
    loop_func *f = NULL;
    wpk_status st = loop_lower(&C, s, name, targs, nargs, &f);
    if (st != WPK_OK) {
        fprintf(stderr, "%s: lowering: %s\n", what, wpk_context_error(ctx));
        check_failures++;
        return;
    }
    int64_t n = numel(targs[nargs - 1]);
    float *out = args[nargs - 1];
    for (int64_t i = 0; i < n; i++) out[i] = NAN;
    wpk_free(run_kernel(ctx, f, args));
    int bad = 0;
    for (int64_t i = 0; i < n && bad < 5; i++)
        if (!close_to(out[i], want[i], tol)) {
            fprintf(stderr, "%s: compiled [%lld] = %g, want %g\n", what, (long long)i, out[i],
                    want[i]);
            bad++;
        }
    for (int64_t i = 0; i < n; i++) out[i] = NAN;
    st = loop_interp_run(ctx, f, args);
    CHECK(st == WPK_OK);
    for (int64_t i = 0; i < n && bad < 5 && st == WPK_OK; i++)
        if (!close_to(out[i], want[i], tol)) {
            fprintf(stderr, "%s: interpreted [%lld] = %g, want %g\n", what, (long long)i, out[i],
                    want[i]);
            bad++;
        }
    check_failures += bad;
}

typedef struct mm_case {
    te_tensor *A, *B, *C;
    int64_t M, N, K;
    float *a, *b, *c, *want;
} mm_case;

static mm_case mm_new(int64_t M, int64_t N, int64_t K, unsigned seed) {
    mm_case m = {.M = M, .N = N, .K = K};
    m.A = te_placeholder(&C, "A", TE_F32, 2, (int64_t[]){M, K});
    m.B = te_placeholder(&C, "B", TE_F32, 2, (int64_t[]){K, N});
    te_matmul_params p = {false, false};
    m.C = te_matmul(&C, "mm", m.A, m.B, &p, NULL, NULL);
    m.a = aligned(sizeof(float) * (size_t)(M * K));
    m.b = aligned(sizeof(float) * (size_t)(K * N));
    m.c = aligned(sizeof(float) * (size_t)(M * N));
    m.want = malloc(sizeof(float) * (size_t)(M * N));
    for (int64_t i = 0; i < M * K; i++) m.a[i] = frand(&seed);
    for (int64_t i = 0; i < K * N; i++) m.b[i] = frand(&seed);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float acc = 0;
            for (int64_t k = 0; k < K; k++) acc += m.a[i * K + k] * m.b[k * N + j];
            m.want[i * N + j] = acc;
        }
    return m;
}

static void mm_free(mm_case *m) {
    free(m->a);
    free(m->b);
    free(m->c);
    free(m->want);
}

static void mm_run(wpk_context *ctx, mm_case *m, te_schedule *s, const char *what) {
    void *args[] = {m->a, m->b, m->c};
    lower_and_compare(ctx, s, "mm", (te_tensor *[]){m->A, m->B, m->C}, 3, args, m->want,
                      1e-5f * (float)m->K, what);
}

/* A TE matmul of odd sizes under the default schedule, a split-vectorize-parallel one, and the
 * register-tiled one (cache_write accumulator at the tile, unrolled rows, vector columns). */
static void test_e2e_matmul(wpk_context *ctx) {
    mm_case m = mm_new(13, 37, 19, 5);
    CHECK(m.C != NULL);
    if (!m.C) return;
    mm_run(ctx, &m, te_schedule_create(&C, &m.C, 1), "matmul default");

    te_schedule *s = te_schedule_create(&C, &m.C, 1);
    te_stage *st = te_stage_of(s, m.C);
    te_iter *jo, *ji, *k = m.C->body->raxes[0];
    CHECK(te_split(st, m.C->axes[1], 16, &jo, &ji) == WPK_OK);
    CHECK(te_reorder(st, 2, (te_iter *[]){k, ji}) == WPK_OK);
    CHECK(te_vectorize(st, ji) == WPK_OK);
    CHECK(te_parallel(st, m.C->axes[0]) == WPK_OK);
    mm_run(ctx, &m, s, "matmul split/vectorize/parallel");

    s = te_schedule_create(&C, &m.C, 1);
    te_tensor *acc;
    CHECK(te_cache_write(s, m.C, "local", &acc) == WPK_OK);
    st = te_stage_of(s, m.C);
    te_stage *sa = te_stage_of(s, acc);
    te_iter *io, *ii;
    CHECK(te_tile(st, m.C->axes[0], m.C->axes[1], 4, 16, &io, &jo, &ii, &ji) == WPK_OK);
    CHECK(te_vectorize(st, ji) == WPK_OK);
    CHECK(te_parallel(st, io) == WPK_OK);
    CHECK(te_compute_at(sa, st, jo) == WPK_OK);
    CHECK(te_reorder(sa, 3, (te_iter *[]){acc->body->raxes[0], acc->axes[0], acc->axes[1]}) ==
          WPK_OK);
    CHECK(te_unroll(sa, acc->axes[0]) == WPK_OK);
    CHECK(te_vectorize(sa, acc->axes[1]) == WPK_OK);
    mm_run(ctx, &m, s, "matmul register tile");
    mm_free(&m);
}

/* Random legal schedules of a matmul: the compiled kernel, the interpreter and plain C agree
 * (a differential test of the C target against the interpreter). Schedules the primitives or
 * the lowering refuse are skipped. */
static void test_e2e_random(wpk_context *ctx) {
    unsigned seed = 2024;
    static const int64_t factors[] = {2, 3, 4, 8, 16};
    for (int trial = 0; trial < 6; trial++) {
        mm_case m = mm_new(6 + trial, 20 + 3 * trial, 5 + trial, seed + (unsigned)trial);
        if (!m.C) {
            CHECK(m.C != NULL);
            return;
        }
        te_schedule *s = te_schedule_create(&C, &m.C, 1);
        te_stage *st = te_stage_of(s, m.C);
        te_tensor *acc = NULL;
        bool cached = (trial & 1) && te_cache_write(s, m.C, "local", &acc) == WPK_OK;
        st = te_stage_of(s, m.C);
        te_iter *xo, *xi, *yo, *yi;
        frand(&seed);
        int64_t fx = factors[(seed >> 9) % 5], fy = factors[(seed >> 13) % 5];
        if (te_tile(st, m.C->axes[0], m.C->axes[1], fx, fy, &xo, &yo, &xi, &yi) == WPK_OK) {
            if ((seed >> 17) & 1) te_vectorize(st, yi);
            if ((seed >> 18) & 1) te_parallel(st, xo);
            if ((seed >> 19) & 1) te_unroll(st, xi);
            if (cached) {
                te_stage *sa = te_stage_of(s, acc);
                te_compute_at(sa, st, ((seed >> 20) & 1) ? yo : xo);
                if ((seed >> 21) & 1) te_vectorize(sa, acc->axes[1]);
            }
        }
        char what[64];
        snprintf(what, sizeof what, "random matmul schedule %d", trial);
        loop_func *f = NULL;
        if (loop_lower(&C, s, "mm", (te_tensor *[]){m.A, m.B, m.C}, 3, &f) == WPK_OK)
            mm_run(ctx, &m, s, what);
        mm_free(&m);
    }
}

/* A padded, strided conv with bias + relu epilogue: the accumulator computed at the output's
 * column tile on the stack, the columns vectorized (their padding guards make lazy selects when
 * the pad stage is inlined), channels parallel. */
static void test_e2e_conv(wpk_context *ctx) {
    enum { N = 1, CI = 3, H = 11, W = 11, CO = 8, KS = 3 };
    te_conv2d_params p = te_conv2d_default_params();
    p.pad[0] = p.pad[1] = p.pad[2] = p.pad[3] = 1;
    int64_t oh = H, ow = W; /* stride 1, pad 1, 3x3 */
    unsigned seed = 99;
    float *x = aligned(sizeof(float) * N * CI * H * W);
    float *w = aligned(sizeof(float) * CO * CI * KS * KS);
    float *bias = aligned(sizeof(float) * CO), *out = aligned(sizeof(float) * N * CO * H * W);
    float *want = malloc(sizeof(float) * N * CO * H * W);
    for (int i = 0; i < N * CI * H * W; i++) x[i] = frand(&seed);
    for (int i = 0; i < CO * CI * KS * KS; i++) w[i] = frand(&seed);
    for (int i = 0; i < CO; i++) bias[i] = frand(&seed);
    for (int o = 0; o < CO; o++)
        for (int y = 0; y < oh; y++)
            for (int z = 0; z < ow; z++) {
                float acc = 0;
                for (int c = 0; c < CI; c++)
                    for (int ky = 0; ky < KS; ky++)
                        for (int kx = 0; kx < KS; kx++) {
                            int iy = y + ky - 1, ix = z + kx - 1;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                            acc += x[(c * H + iy) * W + ix] * w[((o * CI + c) * KS + ky) * KS + kx];
                        }
                acc += bias[o];
                want[(o * oh + y) * ow + z] = acc < 0 ? 0 : acc;
            }
    for (int inline_pad = 0; inline_pad < 2; inline_pad++) {
        te_tensor *X = te_placeholder(&C, "x", TE_F32, 4, (int64_t[]){N, CI, H, W});
        te_tensor *Wt = te_placeholder(&C, "w", TE_F32, 4, (int64_t[]){CO, CI, KS, KS});
        te_tensor *B = te_placeholder(&C, "bias", TE_F32, 1, (int64_t[]){CO});
        te_epilogue ep = {B, NULL, te_act_default(TE_ACT_RELU)};
        te_algo_parts parts = {0};
        te_tensor *Y = te_conv2d_nchw(&C, "conv", X, Wt, &p, &ep, &parts);
        CHECK(Y != NULL && parts.main && parts.pad);
        if (!Y || !parts.main || !parts.pad) break;
        te_schedule *s = te_schedule_create(&C, &Y, 1);
        te_stage *so = te_stage_of(s, Y), *sc = te_stage_of(s, parts.main);
        te_iter *wo, *wi;
        CHECK(te_split(so, Y->axes[3], 8, &wo, &wi) == WPK_OK);
        CHECK(te_vectorize(so, wi) == WPK_OK);
        CHECK(te_parallel(so, Y->axes[1]) == WPK_OK);
        CHECK(te_compute_at(sc, so, wo) == WPK_OK);
        CHECK(te_set_scope(sc, "local") == WPK_OK);
        CHECK(te_vectorize(sc, parts.main->axes[3]) == WPK_OK);
        if (inline_pad) CHECK(te_compute_inline(te_stage_of(s, parts.pad)) == WPK_OK);
        void *args[] = {x, w, bias, out};
        lower_and_compare(ctx, s, "conv", (te_tensor *[]){X, Wt, B, Y}, 4, args, want,
                          1e-5f * CI * KS * KS,
                          inline_pad ? "conv, pad inlined" : "conv, pad root");
    }
    free(x);
    free(w);
    free(bias);
    free(out);
    free(want);
}

/* IR the C target refuses, each with a status naming why. */
static void test_must_fail(wpk_context *ctx) {
    loop_buffer *A = buf("A", TE_F32, 16, LOOP_SCOPE_ARG),
                *O = buf("O", TE_F32, 16, LOOP_SCOPE_ARG);
    loop_buffer *args[] = {A, O};
    strbuf sb = {0};
    cg_c_options o = cg_c_default_options();

    te_iter *t = iter("tx", 16);
    loop_func bind = {"bound", args, 2, 1, loop_store(&C, O, V(t), ld(A, V(t)))};
    loop_stmt *b = (loop_stmt *)loop(t, 0, 16, LOOP_BIND, loop_store(&C, O, V(t), ld(A, V(t))));
    b->bind_tag = "threadIdx.x";
    bind.body = b;
    CHECK_ERR(ctx, cg_c_emit(ctx, &bind, &o, &sb), WPK_ERR_UNSUPPORTED, "no GPU axes");
    CHECK(strstr(wpk_context_error(ctx), "threadIdx.x") &&
          strstr(wpk_context_error(ctx), "'bound'"));
    CHECK(sb.len == 0); /* nothing appended on failure */

    te_iter *k = te_iter_new(&C, "k", TE_ITER_REDUCE, 0, 16);
    const te_expr *red = te_reduce(&C, TE_REDUCE_SUM, ld(A, V(k)), 1, &k);
    loop_func fr = {"reduce", args, 2, 1, loop_store(&C, O, I(0), red)};
    CHECK_ERR(ctx, cg_c_emit(ctx, &fr, &o, &sb), WPK_ERR_UNSUPPORTED, "reduction");

    te_expr *tl = arena_alloc(&C.mem, sizeof *tl);
    tl->kind = TE_LOAD;
    tl->type = te_t(TE_F32);
    loop_func fl = {"tload", args, 2, 1, loop_store(&C, O, I(0), tl)};
    CHECK_ERR(ctx, cg_c_emit(ctx, &fl, &o, &sb), WPK_ERR_UNSUPPORTED, "tensor-level load");

    loop_func fname = {"conv.local", args, 2, 1, loop_store(&C, O, I(0), F(1))};
    CHECK_ERR(ctx, cg_c_emit(ctx, &fname, &o, &sb), WPK_ERR_INVALID_ARG, "not a C identifier");

    te_iter *stray = iter("stray", 4);
    loop_func fv = {"unbound", args, 2, 1, loop_store(&C, O, V(stray), F(1))};
    CHECK_ERR(ctx, cg_c_emit(ctx, &fv, &o, &sb), WPK_ERR_INVALID_ARG, "'stray_");

    loop_buffer *nowhere = buf("nowhere", TE_F32, 4, LOOP_SCOPE_STACK);
    loop_func fb = {"unalloc", args, 2, 1, loop_store(&C, nowhere, I(0), F(1))};
    CHECK_ERR(ctx, cg_c_emit(ctx, &fb, &o, &sb), WPK_ERR_INVALID_ARG, "'nowhere'");

    loop_func fvc = {"vecif", args, 2, 1,
                     loop_if(&C, te_cmp(&C, TE_LT, ld(A, ramp(I(0), 1, 4)), F(0)),
                             loop_store(&C, O, I(0), F(1)), NULL)};
    CHECK_ERR(ctx, cg_c_emit(ctx, &fvc, &o, &sb), WPK_ERR_UNSUPPORTED, "vector condition");
    sb_free(&sb);
}

int main(void) {
    wpk_context *ctx = wpk_context_create();
    char dir[] = "/tmp/wpk_cg_test_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    setenv("WPK_CACHE_DIR", dir, 1); /* a fresh cache: first compiles miss */
    te_ctx_init(&C, ctx);
    test_vector_add(ctx);
    test_matmul(ctx);
    test_register_tile(ctx);
    test_parallel(ctx);
    test_floor_divmod(ctx);
    test_select(ctx);
    test_gather(ctx);
    test_math(ctx);
    test_scalar_flow(ctx);
    test_cache(ctx);
    test_concurrent();
    test_golden(ctx);
    test_faults(ctx);
    test_e2e_matmul(ctx);
    test_e2e_random(ctx);
    test_e2e_conv(ctx);
    test_must_fail(ctx);
    te_ctx_free(&C);
    /* the cache directory: objects, their sources, the kept failure */
    if (getenv("WPK_TEST_KEEP")) {
        fprintf(stderr, "kernels and their sources kept in %s\n", dir);
    } else {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
    wpk_context_free(ctx);
    CHECK_DONE();
}
