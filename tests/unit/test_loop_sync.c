/* test_loop_sync.c -- GPU barrier placement (loop/sync.c) on hand-built nests: goldens of where
 * barriers go around a cooperative load in a reduction loop, none where nothing is shared, the
 * refusal of a nest that would need one in divergent code; and the index facts (loop/facts.c). */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "check.h"
#include "loop/facts.h"
#include "loop/interp.h"
#include "loop/sync.h"
#include "loop/verify.h"

static te_ctx C;
static wpk_context *ctx;

static const te_expr *I(int64_t v) { return te_int(&C, v); }
static const te_expr *V(const te_iter *it) { return te_var(&C, it); }
static te_iter *var(const char *name, int64_t extent) {
    return te_iter_new(&C, name, TE_ITER_LOOP, 0, extent);
}
static const loop_stmt *bind(te_iter *v, int64_t ext, const char *tag, const loop_stmt *body) {
    const loop_stmt *s = loop_for(&C, v, I(0), I(ext), LOOP_BIND, body);
    if (s) ((loop_stmt *)s)->bind_tag = tag;
    return s;
}
static loop_buffer *buf(const char *name, int64_t n, loop_scope scope) {
    return loop_buffer_new(&C, name, TE_F32, 1, (int64_t[]){n}, scope);
}

static void check_text(const loop_stmt *s, const char *want, int line) {
    strbuf b = {0};
    loop_print_stmt(s, 0, &b);
    if (!b.s || strcmp(b.s, want) != 0) {
        fprintf(stderr, "line %d: want\n%s\ngot\n%s\n", line, want, b.s ? b.s : "(null)");
        check_failures++;
    }
    sb_free(&b);
}

/* for k: every thread copies one element into shared memory, then reads all of them: a barrier
 * before the copy (the previous iteration's readers) and one between copy and read. */
static void test_reduction_tiles(void) {
    loop_buffer *in = buf("in", 64, LOOP_SCOPE_ARG), *out = buf("out", 8, LOOP_SCOPE_ARG);
    loop_buffer *sh = buf("sh", 8, LOOP_SCOPE_SHARED);
    te_iter *k = var("k", 8), *t = var("t", 8), *u = var("u", 8), *j = var("j", 8);
    const loop_stmt *copy = bind(t, 8, "threadIdx.x",
        loop_store(&C, sh, V(t), loop_load(&C, in, te_add(&C, te_mul(&C, V(k), I(8)), V(t)))));
    const loop_stmt *use = bind(u, 8, "threadIdx.x",
        loop_for(&C, j, I(0), I(8), LOOP_SERIAL,
                 loop_store(&C, out, V(u), te_add(&C, loop_load(&C, out, V(u)),
                                                  loop_load(&C, sh, V(j))))));
    const loop_stmt *body = loop_seq(&C, 2, (const loop_stmt *[]){copy, use});
    const loop_stmt *nest = loop_alloc(&C, sh, loop_for(&C, k, I(0), I(8), LOOP_SERIAL, body));
    const loop_stmt *got = NULL;
    CHECK(loop_place_barriers(&C, nest, &got) == WPK_OK);
    check_text(got,
               "allocate sh[8] f32 shared {\n"
               "  for (k_3, 0, 8) {\n"
               "    barrier\n"
               "    for (t_4, 0, 8) bind(threadIdx.x) {\n"
               "      sh[t_4] = in[k_3*8 + t_4]\n"
               "    }\n"
               "    barrier\n"
               "    for (u_5, 0, 8) bind(threadIdx.x) {\n"
               "      for (j_6, 0, 8) {\n"
               "        out[u_5] = out[u_5] + sh[j_6]\n"
               "      }\n"
               "    }\n"
               "  }\n"
               "}\n",
               __LINE__);
    /* the result verifies and runs like the original: barriers are nothing to one thread */
    loop_buffer *args[] = {in, out};
    loop_func f = {.name = "k", .args = args, .nargs = 2, .ninputs = 1, .body = got};
    CHECK(loop_verify(ctx, &f) == WPK_OK);
    float x[64], y[8] = {0};
    for (int i = 0; i < 64; i++) x[i] = (float)i;
    CHECK(loop_interp_run(ctx, &f, (void *[]){x, y}) == WPK_OK);
    for (int i = 0; i < 8; i++) CHECK(y[i] == 2016.0f); /* every thread sums in[0..63] */
}

/* Nothing shared: the nest comes back as it was. */
static void test_no_shared(void) {
    loop_buffer *in = buf("in", 8, LOOP_SCOPE_ARG), *out = buf("out", 8, LOOP_SCOPE_ARG);
    te_iter *t = var("t", 8);
    const loop_stmt *s = bind(t, 8, "threadIdx.x", loop_store(&C, out, V(t), loop_load(&C, in, V(t))));
    const loop_stmt *got = NULL;
    CHECK(loop_place_barriers(&C, s, &got) == WPK_OK);
    CHECK(got == s);
}

/* One thread nest writes and reads a shared buffer: no place for a barrier. */
static void test_divergent(void) {
    loop_buffer *out = buf("out", 8, LOOP_SCOPE_ARG), *sh = buf("tile", 8, LOOP_SCOPE_SHARED);
    te_iter *t = var("t", 8);
    const loop_stmt *both = loop_seq(&C, 2, (const loop_stmt *[]){
        loop_store(&C, sh, V(t), te_float(&C, 1.0)),
        loop_store(&C, out, V(t), loop_load(&C, sh, te_sub(&C, I(7), V(t))))});
    const loop_stmt *got = NULL;
    CHECK_ERR(ctx, loop_place_barriers(&C, loop_alloc(&C, sh, bind(t, 8, "threadIdx.x", both)), &got),
              WPK_ERR_UNSUPPORTED, "'tile' is both written and read");
    CHECK(got == NULL);
}

/* ---- facts ---- */

static const loop_var_fact *lookup(const void *self, const te_iter *it) {
    const te_iter *const *known = self;
    static const loop_var_fact k8 = {true, 8};
    return it == known[0] ? &k8 : NULL;
}

static void test_facts(void) {
    te_iter *a = var("a", 4), *b = var("b", 4);
    const te_iter *known[] = {a};
    loop_fact_scope sc = {lookup, known};
    CHECK(loop_nonneg(&sc, te_add(&C, V(a), I(3))));
    CHECK(!loop_nonneg(&sc, te_add(&C, V(b), I(3))));
    CHECK(loop_nonneg(&sc, te_mod(&C, V(b), I(3))));
    CHECK(loop_multiple(&sc, te_add(&C, V(a), I(12))) == 4);
    CHECK(loop_multiple(&sc, te_mul(&C, V(a), I(3))) == 24);
    CHECK(loop_multiple(&sc, te_add(&C, V(b), I(12))) == 1);
    CHECK(loop_multiple(&sc, I(0)) == 0);
    CHECK(loop_gcd(-12, 18) == 6 && loop_gcd(0, 5) == 5);
}

int main(void) {
    ctx = wpk_context_create();
    te_ctx_init(&C, ctx);
    test_reduction_tiles();
    test_no_shared();
    test_divergent();
    test_facts();
    te_ctx_free(&C);
    wpk_context_free(ctx);
    CHECK_DONE();
}
