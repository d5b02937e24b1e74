/* test_loop_passes.c -- the loop IR passes on hand-built nests: printer goldens, simplifier
 * rules, bounds, partitioning (the hot loop loses its branch), unrolling, vectorization (and
 * when it must decline), and the interpreter as the oracle that each pass keeps the result. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "check.h"
#include "loop/bounds.h"
#include "loop/interp.h"
#include "loop/lower.h"
#include "loop/verify.h"

static te_ctx C;
static wpk_context *ctx;

static const te_expr *I(int64_t v) { return te_int(&C, v); }
static const te_expr *V(const te_iter *it) { return te_var(&C, it); }
static const te_expr *add(const te_expr *a, const te_expr *b) { return te_add(&C, a, b); }
static const te_expr *sub(const te_expr *a, const te_expr *b) { return te_sub(&C, a, b); }
static const te_expr *mul(const te_expr *a, const te_expr *b) { return te_mul(&C, a, b); }
static te_iter *loopvar(const char *name, int64_t extent) {
    return te_iter_new(&C, name, TE_ITER_LOOP, 0, extent);
}
static const loop_stmt *for_(te_iter *v, int64_t ext, loop_for_kind k, const loop_stmt *body) {
    return loop_for(&C, v, I(0), I(ext), k, body);
}

static char *text_stmt(const loop_stmt *s) {
    strbuf b = {0};
    loop_print_stmt(s, 0, &b);
    return sb_take(&b);
}

static char *text_expr(const te_expr *e) {
    return text_stmt(loop_store(&C, loop_buffer_new(&C, "o", e->type.scalar, 1, (int64_t[]){1}, LOOP_SCOPE_ARG),
                                te_int(&C, 0), e));
}

/* The simplified expression prints as `want` (the store wrapper `o[0] = ` stripped). */
static void check_simp_env(const te_expr *e, const loop_range_env *env, const char *want, int line) {
    const te_expr *s = loop_simplify_expr_in(&C, e, env);
    if (!s) {
        fprintf(stderr, "line %d: simplify returned NULL\n", line);
        check_failures++;
        return;
    }
    strbuf b = {0};
    loop_print_expr(s, &b);
    char *got = sb_take(&b);
    const char *g = got ? got : "";
    size_t n = strlen(g);
    if (strlen(want) != n || strncmp(g, want, n) != 0) {
        fprintf(stderr, "line %d: simplify: want \"%s\", got \"%.*s\"\n", line, want, (int)n, g);
        check_failures++;
    }
    wpk_free(got);
}
#define CHECK_SIMP(e, env, want) check_simp_env((e), (env), (want), __LINE__)

static void check_text(const char *got, const char *want, int line) {
    if (!got || strcmp(got, want) != 0) {
        fprintf(stderr, "line %d: golden mismatch\n--- want\n%s--- got\n%s---\n", line, want, got ? got : "(null)");
        check_failures++;
    }
}
#define CHECK_TEXT(got, want) check_text((got), (want), __LINE__)

/* ---- printer ---- */

static void test_print(void) {
    te_iter *i = loopvar("i", 4), *j = loopvar("j", 8);
    loop_buffer *A = loop_buffer_new(&C, "A", TE_F32, 2, (int64_t[]){4, 8}, LOOP_SCOPE_ARG);
    loop_buffer *acc = loop_buffer_new(&C, "acc", TE_F32, 1, (int64_t[]){16}, LOOP_SCOPE_STACK);
    const te_expr *idx = add(mul(V(i), I(8)), V(j));
    const loop_stmt *st = loop_store(&C, A, idx, te_add(&C, loop_load(&C, A, idx), te_float(&C, 1.5)));
    const loop_stmt *guarded = loop_if(&C, te_cmp(&C, TE_LT, V(j), I(5)), st,
                                       loop_store(&C, A, idx, te_float(&C, 0)));
    const loop_stmt *vec = loop_store(&C, acc, te_ramp(&C, I(0), I(1), 16),
                                      te_broadcast(&C, te_call(&C, TE_FN_EXP, loop_load(&C, A, V(i)), NULL), 16));
    const loop_stmt *body[2] = {for_(j, 8, LOOP_VECTORIZED, guarded), vec};
    const loop_stmt *s = loop_alloc(&C, acc, for_(i, 4, LOOP_PARALLEL, loop_seq(&C, 2, body)));
    char *t = text_stmt(s);
    char want[1024];
    snprintf(want, sizeof want,
             "allocate acc[16] f32 stack {\n"
             "  for (i_%d, 0, 4) parallel {\n"
             "    for (j_%d, 0, 8) vectorized {\n"
             "      if (j_%d < 5) {\n"
             "        A[i_%d*8 + j_%d] = A[i_%d*8 + j_%d] + 1.5f\n"
             "      } else {\n"
             "        A[i_%d*8 + j_%d] = 0.0f\n"
             "      }\n"
             "    }\n"
             "    acc[ramp(0, 1, 16)] = x16(exp(A[i_%d]))\n"
             "  }\n"
             "}\n",
             i->id, j->id, j->id, i->id, j->id, i->id, j->id, i->id, j->id, i->id);
    CHECK_TEXT(t, want);
    wpk_free(t);

    /* parentheses only where the tree needs them */
    te_iter *n = loopvar("n", 2), *c = loopvar("c", 64), *h = loopvar("h", 56), *w = loopvar("w", 56);
    const te_expr *flat = add(mul(add(mul(add(mul(V(n), I(64)), V(c)), I(56)), V(h)), I(56)), V(w));
    t = text_expr(flat);
    snprintf(want, sizeof want, "o[0] = ((n_%d*64 + c_%d)*56 + h_%d)*56 + w_%d\n", n->id, c->id, h->id, w->id);
    CHECK_TEXT(t, want);
    wpk_free(t);
    t = text_expr(sub(V(n), sub(V(c), V(h))));
    snprintf(want, sizeof want, "o[0] = n_%d - (c_%d - h_%d)\n", n->id, c->id, h->id);
    CHECK_TEXT(t, want);
    wpk_free(t);

    /* a function */
    loop_buffer *B = loop_buffer_new(&C, "B", TE_F32, 2, (int64_t[]){4, 8}, LOOP_SCOPE_ARG);
    loop_buffer *args[2] = {A, B};
    loop_func f = {"copy", args, 2, 1, loop_store(&C, B, I(0), loop_load(&C, A, I(0)))};
    strbuf b = {0};
    loop_print_func(&f, &b);
    t = sb_take(&b);
    CHECK_TEXT(t, "func copy(in A: f32[4, 8], out B: f32[4, 8]) {\n  B[0] = A[0]\n}\n");
    wpk_free(t);
}

/* ---- simplifier and bounds ---- */

static void test_simplify(void) {
    te_iter *x = loopvar("x", 10), *y = loopvar("y", 16), *fo = loopvar("fo", 6), *fi = loopvar("fi", 4);
    char want[256];
    loop_range_env ex = loop_env_range(NULL, x, 0, 9);
    loop_range_env ey = loop_env_range(&ex, y, 0, 15);
    loop_range_env efo = loop_env_range(&ey, fo, 0, 5);
    loop_range_env env = loop_env_range(&efo, fi, 0, 3);

    te_iter *n = loopvar("n", 2), *c = loopvar("c", 64), *h = loopvar("h", 56), *w = loopvar("w", 56);
    const te_expr *flat = add(mul(add(mul(add(mul(V(n), I(64)), V(c)), I(56)), V(h)), I(56)), V(w));
    snprintf(want, sizeof want, "n_%d*200704 + c_%d*3136 + h_%d*56 + w_%d", n->id, c->id, h->id, w->id);
    CHECK_SIMP(flat, NULL, want);
    snprintf(want, sizeof want, "y_%d", y->id);
    CHECK_SIMP(sub(add(V(x), V(y)), V(x)), NULL, want);
    CHECK_SIMP(sub(mul(add(V(x), I(3)), I(2)), mul(V(x), I(2))), NULL, "6");
    /* products of variables are atoms, ordered: x*y + y*x = x*y*2 */
    snprintf(want, sizeof want, "x_%d*y_%d*2", x->id, y->id);
    CHECK_SIMP(add(mul(V(x), V(y)), mul(V(y), V(x))), NULL, want);
    snprintf(want, sizeof want, "x_%d*y_%d", x->id, y->id);
    CHECK_SIMP(mul(V(y), add(V(x), sub(V(y), V(y)))), NULL, want);

    /* (x*16 + y) / 16 and % 16 with y in [0, 16) */
    const te_expr *xy = add(mul(V(x), I(16)), V(y));
    snprintf(want, sizeof want, "x_%d", x->id);
    CHECK_SIMP(te_div(&C, xy, I(16)), &env, want);
    snprintf(want, sizeof want, "y_%d", y->id);
    CHECK_SIMP(te_mod(&C, xy, I(16)), &env, want);
    /* without bounds on y the multiple of 16 still comes out of the division */
    te_iter *u = te_iter_new(&C, "u", TE_ITER_LET, 0, -1);
    const te_expr *xu = add(mul(V(x), I(16)), V(u));
    snprintf(want, sizeof want, "x_%d + u_%d/16", x->id, u->id);
    CHECK_SIMP(te_div(&C, xu, I(16)), NULL, want);
    snprintf(want, sizeof want, "u_%d%%16", u->id);
    CHECK_SIMP(te_mod(&C, xu, I(16)), NULL, want);
    /* a fused index split again: (fo*4 + fi) / 8 = fo / 2, % 8 = (fo % 2)*4 + fi */
    const te_expr *f = add(mul(V(fo), I(4)), V(fi));
    snprintf(want, sizeof want, "fo_%d/2", fo->id);
    CHECK_SIMP(te_div(&C, f, I(8)), &env, want);
    snprintf(want, sizeof want, "(fo_%d%%2)*4 + fi_%d", fo->id, fi->id);
    CHECK_SIMP(te_mod(&C, f, I(8)), &env, want);
    /* a fused index put back together: (x / 7)*56 + (x % 7)*8 = x*8 */
    snprintf(want, sizeof want, "x_%d*8 + 3", x->id);
    CHECK_SIMP(add(add(mul(te_div(&C, V(x), I(7)), I(56)), mul(te_mod(&C, V(x), I(7)), I(8))), I(3)), NULL, want);
    snprintf(want, sizeof want, "(u_%d/7)*57 + (u_%d%%7)*8", u->id, u->id);
    CHECK_SIMP(add(mul(te_div(&C, V(u), I(7)), I(57)), mul(te_mod(&C, V(u), I(7)), I(8))), NULL, want);
    /* (x / 4) / 2 = x / 8 ; (x % 8) % 4 = x % 4 */
    snprintf(want, sizeof want, "x_%d/8", x->id);
    CHECK_SIMP(te_div(&C, te_div(&C, V(x), I(4)), I(2)), NULL, want);
    snprintf(want, sizeof want, "x_%d%%4", x->id);
    CHECK_SIMP(te_mod(&C, te_mod(&C, V(x), I(8)), I(4)), NULL, want);
    /* bounds decide: x in [0, 9] */
    snprintf(want, sizeof want, "x_%d", x->id);
    CHECK_SIMP(te_min(&C, V(x), I(100)), &env, want);
    CHECK_SIMP(te_max(&C, V(x), I(-1)), &env, want);
    CHECK_SIMP(te_cmp(&C, TE_LT, V(x), I(10)), &env, "true");
    CHECK_SIMP(te_cmp(&C, TE_LE, I(10), V(x)), &env, "false");
    CHECK_SIMP(te_cmp(&C, TE_LT, add(mul(V(fo), I(4)), V(fi)), I(24)), &env, "true");
    snprintf(want, sizeof want, "fo_%d*4 + fi_%d < 23", fo->id, fi->id);
    CHECK_SIMP(te_cmp(&C, TE_LT, add(mul(V(fo), I(4)), V(fi)), I(23)), &env, want);
    CHECK_SIMP(te_div(&C, V(y), I(16)), &env, "0");
    snprintf(want, sizeof want, "x_%d", x->id);
    CHECK_SIMP(te_and(&C, te_cmp(&C, TE_LT, V(x), I(10)), te_cmp(&C, TE_EQ, V(x), V(x))), &env, "true");
    /* casting an index to i32 and back is the index when it fits */
    snprintf(want, sizeof want, "x_%d", x->id);
    CHECK_SIMP(te_cast(&C, te_t(TE_I64), te_cast(&C, te_t(TE_I32), V(x))), &env, want);
    snprintf(want, sizeof want, "i64(i32(u_%d))", u->id);
    CHECK_SIMP(te_cast(&C, te_t(TE_I64), te_cast(&C, te_t(TE_I32), V(u))), &env, want);
    /* ramps: ramp(x*16, 1, 16) / 16 = x16(x) and % 16 = ramp(0, 1, 16) */
    const te_expr *r = te_ramp(&C, mul(V(x), I(16)), I(1), 16);
    snprintf(want, sizeof want, "x16(x_%d)", x->id);
    CHECK_SIMP(te_div(&C, r, te_broadcast(&C, I(16), 16)), &env, want);
    CHECK_SIMP(te_mod(&C, r, te_broadcast(&C, I(16), 16)), &env, "ramp(0, 1, 16)");
    snprintf(want, sizeof want, "ramp(x_%d*16 + 3, 2, 8)", x->id);
    CHECK_SIMP(te_add(&C, te_ramp(&C, mul(V(x), I(16)), I(2), 8), te_broadcast(&C, I(3), 8)), NULL, want);
    /* floats: x*1 goes, x + 0 too (constructor), nothing else is reassociated */
    loop_buffer *A = loop_buffer_new(&C, "A", TE_F32, 1, (int64_t[]){10}, LOOP_SCOPE_ARG);
    const te_expr *a = loop_load(&C, A, V(x));
    snprintf(want, sizeof want, "A[x_%d]", x->id);
    CHECK_SIMP(te_mul(&C, a, te_float(&C, 1.0)), NULL, want);
    CHECK_SIMP(te_add(&C, a, te_float(&C, 0.0)), NULL, want);
    snprintf(want, sizeof want, "0.0f*A[x_%d]", x->id);
    CHECK_SIMP(te_mul(&C, te_float(&C, 0.0), a), NULL, want); /* 0 * inf is NaN: kept */
    /* ... but a sum drops a term times zero (a conv tap on the padding), scalar or vector */
    snprintf(want, sizeof want, "A[x_%d]", x->id);
    CHECK_SIMP(te_add(&C, a, te_mul(&C, te_float(&C, 0.0), a)), NULL, want);
    CHECK_SIMP(te_add(&C, te_mul(&C, a, te_float(&C, 0.0)), a), NULL, want);
    const te_expr *va = loop_load(&C, A, te_ramp(&C, I(0), I(1), 4));
    CHECK_SIMP(te_add(&C, va, te_mul(&C, te_broadcast(&C, te_float(&C, 0.0), 4), va)), NULL,
               "A[ramp(0, 1, 4)]");
    snprintf(want, sizeof want, "A[x_%d] - 0.0f*A[x_%d]", x->id, x->id);
    CHECK_SIMP(te_sub(&C, a, te_mul(&C, te_float(&C, 0.0), a)), NULL, want);
    snprintf(want, sizeof want, "select(x_%d < 5, A[x_%d], 0.0f)", x->id, x->id);
    CHECK_SIMP(te_select(&C, te_cmp(&C, TE_LT, V(x), I(5)), a, te_float(&C, 0)), &env, want);
    CHECK_SIMP(te_select(&C, te_cmp(&C, TE_LT, V(x), I(50)), te_float(&C, 2), a), &env, "2.0f");

    /* constant bounds */
    int64_t lo, hi;
    CHECK(loop_bounds(te_mod(&C, V(x), I(4)), &env, &lo, &hi) && lo == 0 && hi == 3);
    CHECK(loop_bounds(te_div(&C, sub(V(x), I(20)), I(4)), &env, &lo, &hi) && lo == -5 && hi == -3);
    CHECK(loop_bounds(te_ramp(&C, V(x), I(-2), 4), &env, &lo, &hi) && lo == -6 && hi == 9);
    te_iter *free_var = te_iter_new(&C, "t", TE_ITER_LET, 0, -1);
    CHECK(!loop_bounds(add(V(free_var), I(1)), &env, &lo, &hi));
    CHECK(!loop_bounds(te_float(&C, 1), &env, &lo, &hi));

    /* symbolic bounds: y relaxed over [0, 15], x fixed */
    const te_expr *slo, *shi;
    loop_range_env relax = loop_env_range(NULL, y, 0, 15);
    CHECK(loop_bounds_relaxed(&C, add(mul(V(x), I(16)), sub(I(3), V(y))), &relax, &slo, &shi));
    snprintf(want, sizeof want, "x_%d*16 - 12", x->id);
    CHECK_SIMP(slo, NULL, want);
    snprintf(want, sizeof want, "x_%d*16 + 3", x->id);
    CHECK_SIMP(shi, NULL, want);
    CHECK(!loop_bounds_relaxed(&C, mul(V(y), V(y)), &relax, &slo, &shi));
}

static void test_simplify_stmts(void) {
    te_iter *i = loopvar("i", 4), *j = loopvar("j", 1);
    te_iter *t = te_iter_new(&C, "t", TE_ITER_LET, 0, -1);
    loop_buffer *A = loop_buffer_new(&C, "A", TE_I64, 1, (int64_t[]){8}, LOOP_SCOPE_ARG);
    /* for (j, 0, 1) { let t = i + 1; if (i < 4) A[i + j] = t } -> A[i] = i + 1 */
    const loop_stmt *st = loop_store(&C, A, add(V(i), V(j)), V(t));
    const loop_stmt *s = for_(i, 4, LOOP_SERIAL,
                              for_(j, 1, LOOP_SERIAL,
                                   loop_let(&C, t, add(V(i), I(1)),
                                            loop_if(&C, te_cmp(&C, TE_LT, V(i), I(4)), st, NULL))));
    char *txt = text_stmt(loop_simplify(&C, s));
    char want[256];
    snprintf(want, sizeof want, "for (i_%d, 0, 4) {\n  let t_%d = i_%d + 1\n  A[i_%d] = t_%d\n}\n", i->id,
             t->id, i->id, i->id, t->id);
    CHECK_TEXT(txt, want);
    wpk_free(txt);
    /* a let bound to a variable is substituted; an if(false) without else vanishes, loops too */
    s = for_(i, 4, LOOP_SERIAL,
             loop_let(&C, t, V(i), loop_if(&C, te_cmp(&C, TE_LT, V(t), I(0)), loop_store(&C, A, V(t), I(1)), NULL)));
    txt = text_stmt(loop_simplify(&C, s));
    CHECK_TEXT(txt, "");
    wpk_free(txt);
    /* a store of what the element already holds (padding: acc = acc + 0) vanishes */
    loop_buffer *F = loop_buffer_new(&C, "F", TE_F32, 1, (int64_t[]){8}, LOOP_SCOPE_ARG);
    s = for_(i, 4, LOOP_SERIAL, loop_store(&C, F, V(i), te_add(&C, loop_load(&C, F, V(i)), te_float(&C, 0))));
    txt = text_stmt(loop_simplify(&C, s));
    CHECK_TEXT(txt, "");
    wpk_free(txt);
    /* and so does acc = acc + 0 * w, a tap on the padding */
    s = for_(i, 4, LOOP_SERIAL,
             loop_store(&C, F, V(i), te_add(&C, loop_load(&C, F, V(i)),
                                            te_mul(&C, te_float(&C, 0), loop_load(&C, F, I(7))))));
    txt = text_stmt(loop_simplify(&C, s));
    CHECK_TEXT(txt, "");
    wpk_free(txt);
}

/* ---- interpreter helpers ---- */

static void fill(float *p, int n, unsigned seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

/* Run f before and after a pass (pass(f->body)) on the same inputs; outputs must be equal. */
static void check_same(loop_func *f, const loop_stmt *after, int nout_floats, int line) {
    enum { MAXA = 4 };
    float *in[MAXA] = {0}, *out0 = NULL, *out1 = NULL;
    void *args[MAXA];
    for (int k = 0; k < f->nargs - 1; k++) {
        in[k] = malloc(sizeof(float) * (size_t)f->args[k]->size);
        fill(in[k], (int)f->args[k]->size, 7u + (unsigned)k);
        args[k] = in[k];
    }
    out0 = calloc((size_t)nout_floats, sizeof(float));
    out1 = calloc((size_t)nout_floats, sizeof(float));
    args[f->nargs - 1] = out0;
    wpk_status st0 = loop_interp_run(ctx, f, args);
    const loop_stmt *before = f->body;
    f->body = after;
    args[f->nargs - 1] = out1;
    wpk_status st1 = loop_interp_run(ctx, f, args);
    f->body = before;
    if (st0 || st1 || memcmp(out0, out1, sizeof(float) * (size_t)nout_floats) != 0) {
        fprintf(stderr, "line %d: results differ (status %d/%d: %s)\n", line, (int)st0, (int)st1,
                wpk_context_error(ctx));
        check_failures++;
    }
    for (int k = 0; k < MAXA; k++) free(in[k]);
    free(out0);
    free(out1);
}

/* ---- partitioning ---- */

static void test_partition_split_guard(void) {
    /* B[x] = A[x] * 2 over x < 100 split by 8: for xo in 13, xi in 8, guard xo*8 + xi < 100 */
    te_iter *xo = loopvar("xo", 13), *xi = loopvar("xi", 8);
    loop_buffer *A = loop_buffer_new(&C, "A", TE_F32, 1, (int64_t[]){100}, LOOP_SCOPE_ARG);
    loop_buffer *B = loop_buffer_new(&C, "B", TE_F32, 1, (int64_t[]){100}, LOOP_SCOPE_ARG);
    const te_expr *x = add(mul(V(xo), I(8)), V(xi));
    const loop_stmt *body = loop_if(&C, te_cmp(&C, TE_LT, x, I(100)),
                                    loop_store(&C, B, x, te_mul(&C, loop_load(&C, A, x), te_float(&C, 2))),
                                    NULL);
    const loop_stmt *s = for_(xo, 13, LOOP_SERIAL, for_(xi, 8, LOOP_VECTORIZED, body));
    loop_buffer *args[2] = {A, B};
    loop_func f = {"scale", args, 2, 1, s};
    const loop_stmt *p = loop_simplify(&C, loop_partition(&C, loop_simplify(&C, s)));
    char *txt = text_stmt(p);
    char want[1024];
    snprintf(want, sizeof want,
             "for (xo_%d, 0, 12) {\n"
             "  for (xi_%d, 0, 8) vectorized {\n"
             "    B[xo_%d*8 + xi_%d] = A[xo_%d*8 + xi_%d]*2.0f\n"
             "  }\n"
             "}\n"
             "for (xi_%d, 0, 4) vectorized {\n"
             "  B[xi_%d + 96] = A[xi_%d + 96]*2.0f\n"
             "}\n",
             xo->id, xi->id, xo->id, xi->id, xo->id, xi->id, xi->id, xi->id, xi->id);
    CHECK_TEXT(txt, want);
    wpk_free(txt);
    check_same(&f, p, 100, __LINE__);
    /* and the whole pipeline vectorizes both parts */
    loop_func g = f;
    CHECK(loop_optimize(&C, &g) == WPK_OK);
    txt = text_stmt(g.body);
    snprintf(want, sizeof want,
             "for (xo_%d, 0, 12) {\n"
             "  B[ramp(xo_%d*8, 1, 8)] = A[ramp(xo_%d*8, 1, 8)]*x8(2.0f)\n"
             "}\n"
             "B[ramp(96, 1, 4)] = A[ramp(96, 1, 4)]*x4(2.0f)\n",
             xo->id, xo->id, xo->id);
    CHECK_TEXT(txt, want);
    wpk_free(txt);
    check_same(&f, g.body, 100, __LINE__);
}

/* A 1-D 3-tap convolution over a padded input, h's loop of the given kind:
 * B[h] = sum_r select(0 <= h+r-1 < 10, A[h+r-1], 0). Keep it in place: f points at args. */
typedef struct conv1d {
    te_iter *h, *r;
    loop_buffer *args[2];
    loop_func f;
} conv1d;

static void conv1d_init(conv1d *k, loop_for_kind kind) {
    te_iter *h = k->h = loopvar("h", 10), *r = k->r = te_iter_new(&C, "r", TE_ITER_LOOP, 0, 3);
    loop_buffer *A = loop_buffer_new(&C, "A", TE_F32, 1, (int64_t[]){10}, LOOP_SCOPE_ARG);
    loop_buffer *B = loop_buffer_new(&C, "B", TE_F32, 1, (int64_t[]){10}, LOOP_SCOPE_ARG);
    const te_expr *ix = sub(add(V(h), V(r)), I(1));
    const te_expr *cond = te_and(&C, te_cmp(&C, TE_LE, I(0), ix), te_cmp(&C, TE_LT, ix, I(10)));
    const te_expr *val = te_select(&C, cond, loop_load(&C, A, ix), te_float(&C, 0));
    const loop_stmt *seq[2] = {
        loop_store(&C, B, V(h), te_float(&C, 0)),
        for_(r, 3, LOOP_SERIAL, loop_store(&C, B, V(h), te_add(&C, loop_load(&C, B, V(h)), val)))};
    k->args[0] = A;
    k->args[1] = B;
    k->f = (loop_func){"conv1d", k->args, 2, 1, for_(h, 10, kind, loop_seq(&C, 2, seq))};
}

static void test_partition_pad(void) {
    conv1d k;
    conv1d_init(&k, LOOP_SERIAL);
    const te_iter *h = k.h, *r = k.r;
    loop_func f = k.f;
    const loop_stmt *p = loop_simplify(&C, loop_partition(&C, loop_simplify(&C, f.body)));
    char *txt = text_stmt(p);
    /* the main loop over h in [1, 8] reads A without a select; the single-iteration edges are
     * partitioned too, down to the taps that fall inside (adding the padding's zero vanishes) */
    char want[1024];
    snprintf(want, sizeof want,
             "B[0] = 0.0f\n"
             "for (r_%d, 1, 2) {\n"
             "  B[0] = B[0] + A[r_%d - 1]\n"
             "}\n"
             "for (h_%d, 1, 8) {\n"
             "  B[h_%d] = 0.0f\n"
             "  for (r_%d, 0, 3) {\n"
             "    B[h_%d] = B[h_%d] + A[h_%d + r_%d - 1]\n"
             "  }\n"
             "}\n"
             "B[9] = 0.0f\n"
             "for (r_%d, 0, 2) {\n"
             "  B[9] = B[9] + A[r_%d + 8]\n"
             "}\n",
             r->id, r->id, h->id, h->id, r->id, h->id, h->id, h->id, r->id, r->id, r->id);
    CHECK_TEXT(txt, want);
    wpk_free(txt);
    check_same(&f, p, 10, __LINE__);
    loop_func g = f;
    CHECK(loop_optimize(&C, &g) == WPK_OK);
    check_same(&f, g.body, 10, __LINE__);
}

/* A parallel loop's pieces stay one parallel loop, each iteration branching to its piece's
 * body: as three loops, the edge rows would run on one thread outside the parallel region. */
static void test_partition_parallel(void) {
    conv1d k;
    conv1d_init(&k, LOOP_PARALLEL);
    const te_iter *h = k.h;
    loop_func f = k.f;
    const loop_stmt *p = loop_simplify(&C, loop_partition(&C, loop_simplify(&C, f.body)));
    CHECK(p && p->kind == LOOP_FOR && p->for_kind == LOOP_PARALLEL && p->var == h);
    CHECK(p && p->body && p->body->kind == LOOP_IF);
    char *txt = text_stmt(p);
    char head[64];
    snprintf(head, sizeof head, "for (h_%d, 0, 10) parallel {\n", h->id);
    CHECK(txt && strncmp(txt, head, strlen(head)) == 0);
    const char *first = txt ? strstr(txt, "parallel") : NULL;
    CHECK(first && strstr(first + 1, "parallel") == NULL); /* one parallel loop */
    /* the main piece reads A without a select */
    CHECK(txt && strstr(txt, "select") == NULL);
    wpk_free(txt);
    check_same(&f, p, 10, __LINE__);
    loop_func g = f;
    CHECK(loop_optimize(&C, &g) == WPK_OK);
    check_same(&f, g.body, 10, __LINE__);
}

/* ---- unrolling and vectorization ---- */

static void test_unroll(void) {
    te_iter *i = loopvar("i", 4);
    loop_buffer *A = loop_buffer_new(&C, "A", TE_I64, 1, (int64_t[]){8}, LOOP_SCOPE_ARG);
    const loop_stmt *s = for_(i, 4, LOOP_UNROLLED, loop_store(&C, A, mul(V(i), I(2)), add(V(i), I(10))));
    char *txt = text_stmt(loop_simplify(&C, loop_unroll(&C, s)));
    CHECK_TEXT(txt, "A[0] = 10\nA[2] = 11\nA[4] = 12\nA[6] = 13\n");
    wpk_free(txt);
    /* a non-constant extent stays a loop */
    te_iter *n = te_iter_new(&C, "n", TE_ITER_LET, 0, -1);
    s = loop_for(&C, i, I(0), V(n), LOOP_UNROLLED, loop_store(&C, A, V(i), I(1)));
    CHECK(loop_unroll(&C, s) == s);
}

static void test_vectorize(void) {
    te_iter *i = loopvar("i", 4), *j = loopvar("j", 16), *k = loopvar("k", 16);
    loop_buffer *A = loop_buffer_new(&C, "A", TE_F32, 2, (int64_t[]){4, 16}, LOOP_SCOPE_ARG);
    loop_buffer *Bv = loop_buffer_new(&C, "B", TE_F32, 1, (int64_t[]){16}, LOOP_SCOPE_ARG);
    loop_buffer *Cb = loop_buffer_new(&C, "C", TE_F32, 2, (int64_t[]){4, 16}, LOOP_SCOPE_ARG);
    const te_expr *ij = add(mul(V(i), I(16)), V(j));
    /* dense loads and store, a scalar broadcast, a strided (transposed) gather */
    const te_expr *val = te_add(&C, te_mul(&C, loop_load(&C, A, ij), loop_load(&C, Bv, V(i))),
                                loop_load(&C, A, add(mul(V(j), I(4)), V(i))));
    const loop_stmt *s = for_(i, 4, LOOP_SERIAL, for_(j, 16, LOOP_VECTORIZED, loop_store(&C, Cb, ij, val)));
    const loop_stmt *v = loop_simplify(&C, loop_vectorize(&C, s));
    char *txt = text_stmt(v);
    char want[512];
    snprintf(want, sizeof want,
             "for (i_%d, 0, 4) {\n"
             "  C[ramp(i_%d*16, 1, 16)] = A[ramp(i_%d*16, 1, 16)]*x16(B[i_%d]) + A[ramp(i_%d, 4, 16)]\n"
             "}\n",
             i->id, i->id, i->id, i->id, i->id);
    CHECK_TEXT(txt, want);
    wpk_free(txt);
    loop_buffer *args[3] = {A, Bv, Cb};
    loop_func f = {"vec", args, 3, 2, s};
    check_same(&f, v, 64, __LINE__);

    /* declines: a store whose index does not move with the variable (a reduction over j) */
    const loop_stmt *red = for_(j, 16, LOOP_VECTORIZED,
                                loop_store(&C, Bv, V(i), te_add(&C, loop_load(&C, Bv, V(i)), loop_load(&C, A, ij))));
    const loop_stmt *out = loop_vectorize(&C, red);
    CHECK(out && out->kind == LOOP_FOR && out->for_kind == LOOP_SERIAL);
    /* a loop-carried dependence: B[j + 1] = B[j] */
    const loop_stmt *dep = for_(j, 8, LOOP_VECTORIZED, loop_store(&C, Bv, add(V(j), I(1)), loop_load(&C, Bv, V(j))));
    out = loop_vectorize(&C, dep);
    CHECK(out && out->kind == LOOP_FOR && out->for_kind == LOOP_SERIAL);
    /* an inner loop, and an if */
    const loop_stmt *inner = for_(j, 16, LOOP_VECTORIZED, for_(k, 16, LOOP_SERIAL, loop_store(&C, Cb, ij, te_float(&C, 0))));
    out = loop_vectorize(&C, inner);
    CHECK(out && out->kind == LOOP_FOR && out->for_kind == LOOP_SERIAL);
    const loop_stmt *iff = for_(j, 16, LOOP_VECTORIZED,
                                loop_if(&C, te_cmp(&C, TE_LT, V(j), I(3)), loop_store(&C, Cb, ij, te_float(&C, 0)), NULL));
    out = loop_vectorize(&C, iff);
    CHECK(out && out->kind == LOOP_FOR && out->for_kind == LOOP_SERIAL);
    /* a select guarding a load would read every lane: declined */
    const loop_stmt *sel = for_(j, 16, LOOP_VECTORIZED,
                                loop_store(&C, Cb, ij, te_select(&C, te_cmp(&C, TE_LT, V(j), I(3)), loop_load(&C, A, ij), te_float(&C, 0))));
    out = loop_vectorize(&C, sel);
    CHECK(out && out->kind == LOOP_FOR && out->for_kind == LOOP_SERIAL);
    /* a condition the same for every lane stays scalar and keeps guarding its load */
    const loop_stmt *inv = for_(i, 4, LOOP_SERIAL,
                                for_(j, 16, LOOP_VECTORIZED,
                                     loop_store(&C, Cb, ij, te_select(&C, te_cmp(&C, TE_LT, V(i), I(2)), loop_load(&C, A, ij), te_float(&C, 0)))));
    out = loop_simplify(&C, loop_vectorize(&C, inv));
    txt = text_stmt(out);
    snprintf(want, sizeof want,
             "for (i_%d, 0, 4) {\n"
             "  C[ramp(i_%d*16, 1, 16)] = select(i_%d < 2, A[ramp(i_%d*16, 1, 16)], x16(0.0f))\n"
             "}\n",
             i->id, i->id, i->id, i->id);
    CHECK_TEXT(txt, want);
    wpk_free(txt);
    /* 3 lanes: no vector unit has them */
    const loop_stmt *odd = loop_for(&C, j, I(0), I(3), LOOP_VECTORIZED, loop_store(&C, Cb, V(j), te_float(&C, 0)));
    out = loop_vectorize(&C, odd);
    CHECK(out && out->kind == LOOP_FOR && out->for_kind == LOOP_SERIAL);
    /* an accumulation at the lane's own index is fine (vectorizing a data axis of a reduction) */
    const loop_stmt *acc = for_(k, 16, LOOP_SERIAL,
                                for_(j, 16, LOOP_VECTORIZED,
                                     loop_store(&C, Bv, V(j), te_add(&C, loop_load(&C, Bv, V(j)), loop_load(&C, A, add(mul(V(k), I(0)), V(j)))))));
    out = loop_vectorize(&C, acc);
    CHECK(out && out->kind == LOOP_FOR && out->body->kind == LOOP_STORE);
}

/* ---- interpreter ---- */

static void test_interp(void) {
    te_iter *i = loopvar("i", 4);
    loop_buffer *A = loop_buffer_new(&C, "A", TE_F32, 1, (int64_t[]){4}, LOOP_SCOPE_ARG);
    loop_buffer *T = loop_buffer_new(&C, "T", TE_F32, 1, (int64_t[]){4}, LOOP_SCOPE_HEAP);
    float a[4] = {0};
    void *args[1] = {a};
    loop_buffer *argv[1] = {A};
    /* out of bounds */
    loop_func f = {"oob", argv, 1, 0, for_(i, 5, LOOP_SERIAL, loop_store(&C, A, V(i), te_float(&C, 1)))};
    CHECK_ERR(ctx, loop_interp_run(ctx, &f, args), WPK_ERR_INTERNAL, "store A[4] outside [0, 4)");
    /* reading an allocation before writing it gives NaN */
    f.body = loop_alloc(&C, T, for_(i, 4, LOOP_SERIAL, loop_store(&C, A, V(i), loop_load(&C, T, V(i)))));
    CHECK(loop_interp_run(ctx, &f, args) == WPK_OK && isnan(a[2]));
    /* an unbound variable */
    te_iter *u = loopvar("u", 4);
    f.body = loop_store(&C, A, V(u), te_float(&C, 1));
    CHECK_ERR(ctx, loop_interp_run(ctx, &f, args), WPK_ERR_INTERNAL, "is not bound");
    /* integer semantics: floor division and modulo of negatives, float math */
    loop_buffer *Ib = loop_buffer_new(&C, "I", TE_I64, 1, (int64_t[]){4}, LOOP_SCOPE_ARG);
    int64_t iv[4];
    void *iargs[1] = {iv};
    loop_buffer *iargv[1] = {Ib};
    te_iter *m = te_iter_new(&C, "m", TE_ITER_LET, 0, -1);
    const loop_stmt *ss[4] = {loop_store(&C, Ib, I(0), te_div(&C, V(m), I(4))),
                              loop_store(&C, Ib, I(1), te_mod(&C, V(m), I(4))),
                              loop_store(&C, Ib, I(2), te_cast(&C, te_t(TE_I64), te_float(&C, -2.5))),
                              loop_store(&C, Ib, I(3), te_select(&C, te_cmp(&C, TE_LT, V(m), I(0)), I(7), I(8)))};
    loop_func g = {"ints", iargv, 1, 0, loop_let(&C, m, I(-7), loop_seq(&C, 4, ss))};
    CHECK(loop_interp_run(ctx, &g, iargs) == WPK_OK);
    CHECK(iv[0] == -2 && iv[1] == 1 && iv[2] == -2 && iv[3] == 7);
}

/* ---- verifier ---- */

static void test_verify(void) {
    te_iter *i = loopvar("i", 4), *u = loopvar("u", 4);
    loop_buffer *A = loop_buffer_new(&C, "A", TE_F32, 1, (int64_t[]){4}, LOOP_SCOPE_ARG);
    loop_buffer *T = loop_buffer_new(&C, "T", TE_F32, 1, (int64_t[]){4}, LOOP_SCOPE_HEAP);
    loop_buffer *argv[1] = {A};
    loop_func f = {"v", argv, 1, 0, NULL};
    f.body = loop_alloc(&C, T, for_(i, 4, LOOP_SERIAL, loop_store(&C, A, V(i), loop_load(&C, T, V(i)))));
    CHECK(loop_verify(ctx, &f) == WPK_OK);
    f.body = for_(i, 4, LOOP_SERIAL, loop_store(&C, A, V(u), te_float(&C, 1)));
    CHECK_ERR(ctx, loop_verify(ctx, &f), WPK_ERR_INTERNAL, "variable u_");
    f.body = for_(i, 4, LOOP_SERIAL, loop_store(&C, A, V(i), loop_load(&C, T, V(i))));
    CHECK_ERR(ctx, loop_verify(ctx, &f), WPK_ERR_INTERNAL, "load from 'T' outside its allocation");
    f.body = for_(i, 4, LOOP_SERIAL, for_(i, 2, LOOP_SERIAL, loop_store(&C, A, V(i), te_float(&C, 1))));
    CHECK_ERR(ctx, loop_verify(ctx, &f), WPK_ERR_INTERNAL, "bound by a loop inside its own scope");
    f.body = for_(i, 4, LOOP_SERIAL, loop_store(&C, A, te_add(&C, V(i), I(4)), te_float(&C, 1)));
    CHECK_ERR(ctx, loop_verify(ctx, &f), WPK_ERR_INTERNAL, "store to 'A' at [4, 7], outside [0, 4)");
    f.body = loop_store(&C, A, I(0), I(3));
    CHECK_ERR(ctx, loop_verify(ctx, &f), WPK_ERR_INTERNAL, "store to 'A' of a value of another type");
    f.body = loop_for(&C, i, I(0), te_float(&C, 2), LOOP_SERIAL, loop_store(&C, A, I(0), te_float(&C, 1)));
    CHECK_ERR(ctx, loop_verify(ctx, &f), WPK_ERR_INTERNAL, "a loop's extent is not a scalar integer");
}

int main(void) {
    ctx = wpk_context_create();
    te_ctx_init(&C, ctx);
    test_print();
    test_simplify();
    test_simplify_stmts();
    test_partition_split_guard();
    test_partition_pad();
    test_partition_parallel();
    test_unroll();
    test_vectorize();
    test_interp();
    test_verify();
    te_ctx_free(&C);
    wpk_context_free(ctx);
    CHECK_DONE();
}
