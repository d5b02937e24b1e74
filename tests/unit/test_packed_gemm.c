/* test_packed_gemm.c -- the packed AVX-512 GEMM provider (src/kernels/vendor/packed_gemm.c)
 * against a double-precision product computed here: tile remainders in M (every count of rows
 * past the full tiles) and N, K in one block and over several (sized from L2), MatMul batches
 * folded into M, Gemm's transB / alpha / beta / C row, FusedMatMul's bias, the residual Z and
 * the activations (GELU and ReLU in vector form), on one and two threads; a run allocates
 * nothing; what it refuses, it refuses by name; create survives every allocation failing in
 * turn. Skipped (77) on a CPU without AVX-512, where the provider takes nothing. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "check.h"
#include "ir/graph.h"
#include "kernels/vendor/lib.h"
#include "ops/activation.h"

#if defined(__SANITIZE_ADDRESS__)
#define COUNTING 0 /* the sanitizer owns malloc */
#else
#define COUNTING 1
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
static atomic_bool counting;
static atomic_long allocs;
static void *counted(void *p) {
    if (atomic_load(&counting)) atomic_fetch_add(&allocs, 1);
    return p;
}
void *malloc(size_t n);
void *calloc(size_t count, size_t size);
void *realloc(void *p, size_t n);
void *malloc(size_t n) { return counted(__libc_malloc(n)); }
void *calloc(size_t count, size_t size) { return counted(__libc_calloc(count, size)); }
void *realloc(void *p, size_t n) { return counted(__libc_realloc(p, n)); }
#endif

typedef struct gcase {
    const char *name, *op;   /* MatMul, FusedMatMul, Gemm, FusedGemm */
    int an;
    int64_t adims[3];        /* A: [batch..., M, K] */
    int64_t n;               /* columns of Y */
    bool tb;                 /* B stored N x K (Gemm's transB) */
    int cn;                  /* C / bias: -1 none, 0 a scalar [1], else [N] */
    bool residual;
    float alpha, beta;       /* Gemm's */
    const char *act;
} gcase;

static const gcase CASES[] = {
    {"matmul batch folded, tile remainders", "MatMul", 3, {3, 37, 50}, 101, false, -1, false, 1,
     1, NULL},
    {"one-row matrices (attention projection)", "FusedMatMul", 3, {197, 1, 64}, 96, false, 1,
     false, 1, 1, NULL},
    {"K of 800, bias, residual, gelu", "FusedMatMul", 3, {1, 64, 800}, 200, false, 1,
     true, 1, 1, "Gelu"},
    {"gemm transB, alpha, beta, C row", "Gemm", 2, {29, 70}, 50, true, 1, false, 0.5f, 2.0f,
     NULL},
    {"gemm scalar C", "Gemm", 2, {9, 17}, 33, false, 0, false, 1.5f, -1.0f, NULL},
    {"fused gemm transB, bias, residual, relu", "FusedGemm", 2, {40, 96}, 64, true, 1, true, 1,
     1, "Relu"},
    {"fused matmul sigmoid, one column", "FusedMatMul", 2, {8, 5}, 1, false, 1, false, 1, 1,
     "Sigmoid"},
    /* the M tails not above (a tile's rows are specialized by count): 2, 3, 4 and 6 */
    {"M tail of 2 rows, relu, four panels", "FusedMatMul", 2, {10, 33}, 150, false, 1, false,
     1, 1, "Relu"},
    {"M tail of 3 rows", "MatMul", 3, {1, 3, 20}, 49, false, -1, false, 1, 1, NULL},
    {"M tail of 4 rows, gemm transB", "Gemm", 2, {12, 40}, 97, true, 1, false, 1, 1, NULL},
    {"M tail of 6 rows, batch, residual, relu", "FusedMatMul", 3, {2, 15, 64}, 96, false, 1,
     true, 1, 1, "Relu"},
    /* A's block over every row and a panel's block share L2: 600 rows split K = 3000 into
     * several blocks on any L2 under 10 MiB */
    {"K over L2-sized blocks, bias, residual, gelu", "FusedMatMul", 3, {1, 600, 3000}, 100,
     false, 1, true, 1, 1, "Gelu"},
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

static float *random_buf(int64_t n, unsigned *seed) {
    float *p = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        p[i] = (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    return p;
}

typedef struct prob {
    ir_graph *g;
    ir_node *node;
    ir_tensor t[5];     /* A, B, C / bias, Z, Y, with their data */
    ir_tensor seen[4];  /* as create sees them: A and Z without data (run-time inputs) */
    ir_tensor *in[4], *run_in[4], *out[1];
    double *want;
    int64_t rows, ny;
} prob;

static void prob_free(prob *p) {
    for (int i = 0; i < 5; i++) free(p->t[i].data);
    free(p->want);
    ir_graph_free(p->g);
}

static float act_ref(const char *act, float v) {
    if (!act) return v;
    if (!strcmp(act, "Relu")) return act_relu(v);
    if (!strcmp(act, "Gelu")) return act_gelu(v);
    return act_sigmoid(v);
}

static void make(const gcase *c, prob *p) {
    memset(p, 0, sizeof *p);
    unsigned seed = 7;
    bool gemm = !strcmp(c->op, "Gemm") || !strcmp(c->op, "FusedGemm");
    bool onnx = !strcmp(c->op, "Gemm") || !strcmp(c->op, "MatMul");
    int nin = c->residual ? 4 : c->cn >= 0 ? 3 : 2;
    p->g = ir_graph_create();
    int k = ir_graph_add_node(p->g, c->name, c->op, onnx ? "" : "wpk", onnx ? 17 : 1, nin, 1);
    p->node = &p->g->nodes[k];
    if (gemm) ir_node_set_int(p->g, p->node, "transB", c->tb);
    if (!strcmp(c->op, "Gemm")) {
        ir_node_set_float(p->g, p->node, "alpha", c->alpha);
        ir_node_set_float(p->g, p->node, "beta", c->beta);
    }
    if (c->act) ir_node_set_str(p->g, p->node, "activation", c->act);
    const int64_t kk = c->adims[c->an - 1], m = c->adims[c->an - 2], n = c->n;
    p->rows = c->an == 3 ? c->adims[0] * m : m;
    p->ny = p->rows * n;
    p->t[0] = (ir_tensor){WPK_DTYPE_FLOAT32, c->an, {c->adims[0], c->adims[1], c->adims[2]},
                          NULL};
    p->t[0].data = random_buf(p->rows * kk, &seed);
    p->t[1] = (ir_tensor){WPK_DTYPE_FLOAT32, 2, {c->tb ? n : kk, c->tb ? kk : n}, NULL};
    p->t[1].data = random_buf(kk * n, &seed);
    p->in[0] = &p->t[0], p->in[1] = &p->t[1];
    if (c->cn >= 0) {
        p->t[2] = (ir_tensor){WPK_DTYPE_FLOAT32, 1, {c->cn ? n : 1}, NULL};
        p->t[2].data = random_buf(c->cn ? n : 1, &seed);
        p->in[2] = &p->t[2];
    }
    ir_tensor *y = &p->t[4];
    *y = (ir_tensor){WPK_DTYPE_FLOAT32, c->an, {0}, NULL};
    for (int d = 0; d < c->an - 1; d++) y->dims[d] = c->adims[d];
    y->dims[c->an - 1] = n;
    if (c->residual) {
        p->t[3] = *y;
        p->t[3].data = random_buf(p->ny, &seed);
        p->in[3] = &p->t[3];
    }
    y->data = malloc(sizeof(float) * (size_t)p->ny);
    p->out[0] = y;
    for (int i = 0; i < 4; i++) {
        p->run_in[i] = p->in[i];
        if (!p->in[i]) continue;
        p->seen[i] = *p->in[i];
        if (i == 0 || i == 3) p->seen[i].data = NULL;
        p->in[i] = &p->seen[i];
    }
    const float *a = p->t[0].data, *b = p->t[1].data, *cv = p->t[2].data, *z = p->t[3].data;
    p->want = malloc(sizeof(double) * (size_t)p->ny);
    for (int64_t i = 0; i < p->rows; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t r = 0; r < kk; r++)
                s += (double)a[i * kk + r] * (c->tb ? b[j * kk + r] : b[r * n + j]);
            s *= c->alpha;
            if (cv) s += (double)(gemm ? c->beta : 1.0f) * cv[c->cn ? j : 0];
            if (z) s += z[i * n + j];
            p->want[i * n + j] = act_ref(c->act, (float)s);
        }
}

static bool close_enough(const prob *p, const char *what) {
    const float *got = p->out[0]->data;
    for (int64_t i = 0; i < p->ny; i++) {
        double d = fabs(got[i] - p->want[i]);
        if (!(d <= 1e-4 * (1.0 + fabs(p->want[i])))) {
            fprintf(stderr, "%s: [%lld] = %.7g, want %.7g\n", what, (long long)i, got[i],
                    p->want[i]);
            return false;
        }
    }
    return true;
}

static void run_case(wpk_context *ctx, const kernel_provider *lp, const gcase *c, int threads) {
    prob p;
    make(c, &p);
    char what[160];
    snprintf(what, sizeof what, "%s [%d thread%s]", c->name, threads, threads > 1 ? "s" : "");
    CHECK(lp->supports(lp, p.node, p.in, p.out));
    lib_kernel *k = NULL;
    wpk_status st = lp->create(lp, ctx, p.node, p.in, p.out, 0, &(kernel_device){threads, NULL},
                               &k);
    if (st) fprintf(stderr, "%s: create: %s\n", what, wpk_context_error(ctx));
    CHECK(st == WPK_OK && k);
    if (!k) {
        prob_free(&p);
        return;
    }
    /* the constants were copied (B packed) at create: scribbling on them changes nothing */
    for (int i = 1; i < 3; i++)
        if (p.in[i])
            for (int64_t e = 0; e < ir_numel(p.in[i]); e++) ((float *)p.t[i].data)[e] = 1e6f;
    for (int round = 0; round < 2; round++) {
        for (int64_t i = 0; i < p.ny; i++) ((float *)p.out[0]->data)[i] = NAN;
#if COUNTING
        atomic_store(&allocs, 0);
        atomic_store(&counting, round == 1);
#endif
        st = lp->run(lp, ctx, k, p.run_in, p.out);
#if COUNTING
        atomic_store(&counting, false);
        if (round == 1 && atomic_load(&allocs))
            fprintf(stderr, "%s: %ld allocations in a run\n", what, atomic_load(&allocs));
        CHECK(round == 0 || atomic_load(&allocs) == 0);
#endif
        CHECK(st == WPK_OK);
        CHECK(close_enough(&p, what));
    }
    lp->destroy(lp, k);
    printf("  %-58s ok\n", what);
    prob_free(&p);
}

/* Refused by supports() and by create, whose message names the cause. */
static void refused(wpk_context *ctx, const kernel_provider *lp, prob *p, const char *needle) {
    CHECK(!lp->supports(lp, p->node, p->in, p->out));
    lib_kernel *k = NULL;
    CHECK_ERR(ctx, lp->create(lp, ctx, p->node, p->in, p->out, 0, &(kernel_device){1, NULL}, &k),
              WPK_ERR_UNSUPPORTED, needle);
    CHECK(k == NULL);
}

static void test_must_fail(wpk_context *ctx, const kernel_provider *lp) {
    prob p;
    make(&CASES[0], &p);
    /* B computed at run time */
    p.seen[1].data = NULL;
    refused(ctx, lp, &p, "constant B");
    p.seen[1].data = p.t[1].data;
    /* a batched B: each matrix of A has its own */
    ir_tensor b3 = {WPK_DTYPE_FLOAT32, 3, {3, 50, 101}, malloc(sizeof(float) * 3 * 50 * 101)};
    memset(b3.data, 0, sizeof(float) * 3 * 50 * 101);
    p.in[1] = &b3;
    refused(ctx, lp, &p, "batch dim 0");
    p.in[1] = &p.seen[1];
    free(b3.data);
    /* config 1, an output of another size, every allocation of create failing */
    lib_kernel *k = NULL;
    CHECK_ERR(ctx, lp->create(lp, ctx, p.node, p.in, p.out, 1, &(kernel_device){1, NULL}, &k),
              WPK_ERR_UNSUPPORTED, "not 1");
    CHECK(lp->create(lp, ctx, p.node, p.in, p.out, 0, &(kernel_device){1, NULL}, &k) == WPK_OK);
    if (k) {
        ir_tensor small = p.t[4];
        small.dims[1] = 2;
        ir_tensor *o[1] = {&small};
        CHECK_ERR(ctx, lp->run(lp, ctx, k, p.run_in, o), WPK_ERR_INVALID_ARG, "output");
        lp->destroy(lp, k);
    }
    for (long at = 1; at <= 6; at++) {
        wpk_alloc_fail_at(at);
        k = NULL;
        wpk_status st = lp->create(lp, ctx, p.node, p.in, p.out, 0, &(kernel_device){1, NULL},
                                   &k);
        wpk_alloc_fail_at(0);
        CHECK(st == WPK_OK || st == WPK_ERR_NOMEM);
        CHECK((st == WPK_OK) == (k != NULL));
        if (k) lp->destroy(lp, k);
    }
    prob_free(&p);
    /* transA, and a C of M rows */
    prob q;
    make(&CASES[3], &q);
    ir_node_set_int(q.g, q.node, "transA", 1);
    int64_t m = q.seen[0].dims[0];
    q.seen[0].dims[0] = q.seen[0].dims[1], q.seen[0].dims[1] = m; /* A stored K x M */
    refused(ctx, lp, &q, "transA");
    ir_node_set_int(q.g, q.node, "transA", 0);
    q.seen[0].dims[1] = q.seen[0].dims[0], q.seen[0].dims[0] = m;
    ir_tensor c2 = {WPK_DTYPE_FLOAT32, 2, {m, 50}, calloc((size_t)(m * 50), sizeof(float))};
    q.in[2] = &c2;
    refused(ctx, lp, &q, "C has 29 rows");
    free(c2.data);
    q.in[2] = &q.seen[2];
    prob_free(&q);
}

int main(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f")) {
        printf("test_packed_gemm: skipped: this CPU has no AVX-512, the packed GEMM's ISA\n");
        return 77;
    }
    const kernel_provider *lp = lib_provider_find("packed");
    CHECK(lp != NULL);
    if (!lp) CHECK_DONE();
    printf("packed: %s\n", lp->version(lp));
    wpk_context *ctx = wpk_context_create();
    for (int i = 0; i < NCASES; i++)
        for (int threads = 1; threads <= 2; threads++) run_case(ctx, lp, &CASES[i], threads);
    test_must_fail(ctx, lp);
    wpk_context_free(ctx);
    CHECK_DONE();
}
