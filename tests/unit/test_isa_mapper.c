/* test_isa_mapper.c -- the ISA mapper on its own: instruction descriptions print from the tensor
 * IR; a matmul nest maps onto the AVX-512 FMA tile and the BF16 dot product (with the packing
 * each needs); a nest that is no sum of products, and one whose extents do not fit, do not map;
 * a depthwise-separable convolution shows both its depthwise accumulation (lanes over channels)
 * and the GEMM hidden in its pointwise part; a grouped conv keeps its group loop shared. */
#include <stdlib.h>
#include <string.h>

#include "base/context.h"
#include "check.h"
#include "isa/mapper.h"
#include "loop/lower.h"
#include "te/schedule.h"

static wpk_context *ctx;
static te_ctx C;

static void fresh(void) {
    te_ctx_free(&C);
    te_ctx_init(&C, ctx);
    wpk_clear_error(ctx);
}

static const te_expr *V(const te_iter *it) { return te_var(&C, it); }

static const te_expr *load(te_tensor *t, int n, const te_expr *const *idx) {
    return te_load(&C, t, n, idx);
}

/* the lowered nest of outputs (default schedule: every stage at the root) */
static const loop_stmt *lower(te_tensor *const *args, int nargs, te_tensor *const *outs,
                              int nouts) {
    te_schedule *s = te_schedule_create(&C, outs, nouts);
    loop_func *f = NULL;
    CHECK(s && loop_lower(&C, s, "k", args, nargs, &f) == WPK_OK);
    return f ? f->body : NULL;
}

/* every mapping of nest onto intrinsic `name`, one line each */
static void mappings(const isa_nest *nest, const char *name, strbuf *b) {
    isa_mapping m[32];
    int n = isa_map(&C, nest, isa_intrin_find(name), m, 32);
    for (int i = 0; i < n && i < 32; i++) {
        isa_mapping_print(nest, &m[i], b);
        sb_puts(b, "\n");
    }
}

static const char *text(const strbuf *b) { return b->s ? b->s : ""; }

static bool has_line(const strbuf *b, const char *line) {
    const char *s = text(b);
    size_t n = strlen(line);
    for (const char *p = strstr(s, line); p; p = strstr(p + 1, line))
        if ((p == s || p[-1] == '\n') && p[n] == '\n') return true;
    return false;
}

#define CHECK_LINE(b, line)                                                               \
    do {                                                                                  \
        if (!has_line(b, line)) {                                                         \
            fprintf(stderr, "%s:%d: no line \"%s\" in:\n%s", __FILE__, __LINE__, line,     \
                    text(b));                                                          \
            check_failures++;                                                             \
        }                                                                                 \
    } while (0)

static void test_descriptions(void) {
    fresh();
    int n;
    const isa_intrin *all = isa_intrins(&n);
    CHECK(n == 7);
    strbuf b = {0};
    for (int i = 0; i < n; i++) {
        isa_desc d;
        CHECK(isa_intrin_describe(&C, &all[i], &d) == WPK_OK);
        isa_intrin_print(&d, &b);
        sb_puts(&b, "\n");
    }
    CHECK_LINE(&b, "avx512_bf16_dot (_mm512_dpbf16_ps, avx512_bf16): float32[1, 16] C[m, n] = "
                   "sum(k<2: A[m, k] * B[k, n]); A bf16 broadcast, B bf16 lanes, C f32 lanes, "
                   "k groups of 2");
    CHECK_LINE(&b, "avx512_vnni_dot (_mm512_dpbusd_epi32, avx512_vnni): int32[1, 16] C[m, n] = "
                   "sum(k<4: A[m, k] * B[k, n]); A u8 broadcast, B s8 lanes, C s32 lanes, "
                   "k groups of 4");
    CHECK_LINE(&b, "mma_m16n8k8_tf32 (mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32, "
                   "sm_80+): float32[16, 8] C[m, n] = sum(k<8: A[m, k] * B[k, n]); A tf32 row, "
                   "B tf32 col, C f32 row");
    sb_free(&b);
    CHECK(isa_intrin_find("no_such") == NULL);
}

/* C[i, j] = sum_k A[i, k] * B[k, j] */
static void test_matmul_maps(void) {
    fresh();
    te_tensor *A = te_placeholder(&C, "A", TE_F32, 2, (int64_t[]){8, 64});
    te_tensor *B = te_placeholder(&C, "B", TE_F32, 2, (int64_t[]){64, 32});
    te_iter **ax = te_compute_axes(&C, 2, (int64_t[]){8, 32}, (const char *[]){"i", "j"});
    te_iter *k = te_reduce_axis(&C, "k", 0, 64);
    const te_expr *prod = te_mul(&C, load(A, 2, (const te_expr *[]){V(ax[0]), V(k)}),
                                 load(B, 2, (const te_expr *[]){V(k), V(ax[1])}));
    te_tensor *out = te_compute(&C, "Cm", 2, (int64_t[]){8, 32}, ax,
                                te_reduce(&C, TE_REDUCE_SUM, prod, 1, &k));
    const loop_stmt *body = lower((te_tensor *[]){A, B, out}, 3, &out, 1);
    isa_nest nests[4];
    int nn;
    isa_find_nests(body, nests, 4, &nn);
    CHECK(nn == 1);
    if (nn != 1) return;
    CHECK(nests[0].nloops == 3);
    CHECK(nests[0].loops[0].role == ISA_ROLE_M && nests[0].loops[1].role == ISA_ROLE_N &&
          nests[0].loops[2].role == ISA_ROLE_K);
    strbuf b = {0};
    mappings(&nests[0], "avx512_fma", &b);
    CHECK_LINE(&b, "avx512_fma: m=i<8 n=j<32 k=k<64 (A=A B=B)");
    mappings(&nests[0], "avx512_bf16_dot", &b);
    CHECK_LINE(&b, "avx512_bf16_dot: m=i<8 n=j<32 k=k<64 (A=A B=B); convert A f32->bf16, "
                   "convert B f32->bf16, pack B in k groups of 2 over k");
    /* swapped: lanes over i need 16 of them; there are 8 */
    CHECK(!strstr(text(&b), "m=j<32"));
    mappings(&nests[0], "mma_m16n8k8_tf32", &b);
    CHECK(!strstr(text(&b), "mma_m16n8k8_tf32: m=i")); /* 8 rows: not a whole m16 */
    CHECK_LINE(&b, "mma_m16n8k8_tf32: m=j<32 n=i<8 k=k<64 (A=B B=A); convert A f32->tf32, "
                   "convert B f32->tf32, C with i innermost, A with k innermost");
    /* integer instructions do not take float nests */
    isa_mapping m[4];
    CHECK(isa_map(&C, &nests[0], isa_intrin_find("avx512_vnni_dot"), m, 4) == 0);
    CHECK(isa_map(&C, &nests[0], isa_intrin_find("mma_m16n8k32_s8"), m, 4) == 0);
    sb_free(&b);
}

/* what does not map: a max reduction, an elementwise product, odd extents */
static void test_no_match(void) {
    fresh();
    te_tensor *X = te_placeholder(&C, "X", TE_F32, 2, (int64_t[]){16, 32});
    te_iter **ax = te_compute_axes(&C, 1, (int64_t[]){16}, (const char *[]){"i"});
    te_iter *r = te_reduce_axis(&C, "r", 0, 32);
    te_tensor *mx = te_compute(&C, "mx", 1, (int64_t[]){16}, ax,
                               te_reduce(&C, TE_REDUCE_MAX,
                                         load(X, 2, (const te_expr *[]){V(ax[0]), V(r)}), 1, &r));
    te_iter **ax2 = te_compute_axes(&C, 2, (int64_t[]){16, 32}, (const char *[]){"i", "j"});
    const te_expr *xv = load(X, 2, (const te_expr *[]){V(ax2[0]), V(ax2[1])});
    te_tensor *sq = te_compute(&C, "sq", 2, (int64_t[]){16, 32}, ax2, te_mul(&C, xv, xv));
    isa_nest nests[4];
    int nn;
    isa_find_nests(lower((te_tensor *[]){X, mx}, 2, &mx, 1), nests, 4, &nn);
    CHECK(nn == 0);
    isa_find_nests(lower((te_tensor *[]){X, sq}, 2, &sq, 1), nests, 4, &nn);
    CHECK(nn == 0);

    /* a sum of products with 15 columns and an odd k: FMA lanes need 16, BF16 pairs need 2 */
    fresh();
    te_tensor *A = te_placeholder(&C, "A", TE_F32, 2, (int64_t[]){4, 3});
    te_tensor *B = te_placeholder(&C, "B", TE_F32, 2, (int64_t[]){3, 15});
    te_iter **ax3 = te_compute_axes(&C, 2, (int64_t[]){4, 15}, (const char *[]){"i", "j"});
    te_iter *k = te_reduce_axis(&C, "k", 0, 3);
    const te_expr *prod = te_mul(&C, load(A, 2, (const te_expr *[]){V(ax3[0]), V(k)}),
                                 load(B, 2, (const te_expr *[]){V(k), V(ax3[1])}));
    te_tensor *out = te_compute(&C, "Co", 2, (int64_t[]){4, 15}, ax3,
                                te_reduce(&C, TE_REDUCE_SUM, prod, 1, &k));
    isa_find_nests(lower((te_tensor *[]){A, B, out}, 3, &out, 1), nests, 4, &nn);
    CHECK(nn == 1);
    isa_mapping m[8];
    int nint;
    const isa_intrin *all = isa_intrins(&nint);
    for (int i = 0; nn == 1 && i < nint; i++) CHECK(isa_map(&C, &nests[0], &all[i], m, 8) == 0);
}

/* depthwise 3x3 then pointwise 1x1, NCHW, on a pre-padded input:
 * dw[c, h, w] = sum(r, s: X[c, h + r, w + s] * Wd[c, r, s]); pw[o, h, w] = sum(c: Wp[o, c] *
 * dw[c, h, w]) */
static void test_depthwise_separable(void) {
    fresh();
    const int64_t Cc = 32, O = 64, H = 8, W = 16;
    te_tensor *X = te_placeholder(&C, "X", TE_F32, 3, (int64_t[]){Cc, H + 2, W + 2});
    te_tensor *Wd = te_placeholder(&C, "Wd", TE_F32, 3, (int64_t[]){Cc, 3, 3});
    te_tensor *Wp = te_placeholder(&C, "Wp", TE_F32, 2, (int64_t[]){O, Cc});
    te_iter **a = te_compute_axes(&C, 3, (int64_t[]){Cc, H, W}, (const char *[]){"c", "h", "w"});
    te_iter *r = te_reduce_axis(&C, "r", 0, 3), *s = te_reduce_axis(&C, "s", 0, 3);
    const te_expr *xv = load(X, 3, (const te_expr *[]){V(a[0]), te_add(&C, V(a[1]), V(r)),
                                                      te_add(&C, V(a[2]), V(s))});
    const te_expr *wv = load(Wd, 3, (const te_expr *[]){V(a[0]), V(r), V(s)});
    te_tensor *dw = te_compute(&C, "dw", 3, (int64_t[]){Cc, H, W}, a,
                               te_reduce(&C, TE_REDUCE_SUM, te_mul(&C, xv, wv), 2,
                                         (te_iter *[]){r, s}));
    te_iter **p = te_compute_axes(&C, 3, (int64_t[]){O, H, W}, (const char *[]){"o", "h", "w"});
    te_iter *ci = te_reduce_axis(&C, "ci", 0, Cc);
    const te_expr *pv = te_mul(&C, load(Wp, 2, (const te_expr *[]){V(p[0]), V(ci)}),
                               load(dw, 3, (const te_expr *[]){V(ci), V(p[1]), V(p[2])}));
    te_tensor *pw = te_compute(&C, "pw", 3, (int64_t[]){O, H, W}, p,
                               te_reduce(&C, TE_REDUCE_SUM, pv, 1, &ci));
    isa_nest nests[4];
    int nn;
    isa_find_nests(lower((te_tensor *[]){X, Wd, Wp, pw}, 4, &pw, 1), nests, 4, &nn);
    CHECK(nn == 2);
    if (nn != 2) return;
    /* the depthwise nest: c shared by all three, h and w M, r and s K */
    const isa_nest *d = &nests[0];
    CHECK(d->nloops == 5 && d->loops[0].role == ISA_ROLE_SHARED &&
          d->loops[1].role == ISA_ROLE_M && d->loops[3].role == ISA_ROLE_K);
    strbuf b = {0};
    mappings(d, "avx512_fma", &b);
    CHECK_LINE(&b, "avx512_fma: m=w<16 n=c<32 k=r<3 (A=X B=Wd); C with c innermost, "
                   "A with c innermost, B with c innermost");
    /* a dot product needs a k that both operands share across lanes: none here */
    isa_mapping m[4];
    CHECK(isa_map(&C, d, isa_intrin_find("avx512_bf16_dot"), m, 4) == 0);
    /* the pointwise nest is a GEMM: with the operands swapped, w runs across the lanes of the
     * NCHW output and the weight is broadcast, no re-layout needed */
    const isa_nest *pn = &nests[1];
    sb_free(&b);
    mappings(pn, "avx512_fma", &b);
    CHECK_LINE(&b, "avx512_fma: m=o<64 n=w<16 k=ci<32 (A=Wp B=dw)");
    CHECK_LINE(&b, "avx512_fma: m=h<8 n=o<64 k=ci<32 (A=dw B=Wp); C with o innermost, "
                   "B with o innermost");
    sb_free(&b);
    mappings(pn, "avx512_bf16_dot", &b);
    CHECK_LINE(&b, "avx512_bf16_dot: m=o<64 n=w<16 k=ci<32 (A=Wp B=dw); convert A f32->bf16, "
                   "convert B f32->bf16, pack B in k groups of 2 over ci");
    sb_free(&b);
    mappings(pn, "mma_m16n8k8_tf32", &b);
    CHECK_LINE(&b, "mma_m16n8k8_tf32: m=o<64 n=w<16 k=ci<32 (A=Wp B=dw); convert A f32->tf32, "
                   "convert B f32->tf32, B with ci innermost");
    sb_free(&b);
}

/* grouped 1x1 conv, 4 groups: Y[g, o, p] = sum(c: W[g, o, c] * X[g, c, p]) */
static void test_grouped(void) {
    fresh();
    te_tensor *X = te_placeholder(&C, "X", TE_F32, 3, (int64_t[]){4, 16, 32});
    te_tensor *Wt = te_placeholder(&C, "W", TE_F32, 3, (int64_t[]){4, 16, 16});
    te_iter **a = te_compute_axes(&C, 3, (int64_t[]){4, 16, 32}, (const char *[]){"g", "o", "p"});
    te_iter *ci = te_reduce_axis(&C, "ci", 0, 16);
    const te_expr *v = te_mul(&C, load(Wt, 3, (const te_expr *[]){V(a[0]), V(a[1]), V(ci)}),
                              load(X, 3, (const te_expr *[]){V(a[0]), V(ci), V(a[2])}));
    te_tensor *y = te_compute(&C, "Y", 3, (int64_t[]){4, 16, 32}, a,
                              te_reduce(&C, TE_REDUCE_SUM, v, 1, &ci));
    isa_nest nests[2];
    int nn;
    isa_find_nests(lower((te_tensor *[]){Wt, X, y}, 3, &y, 1), nests, 2, &nn);
    CHECK(nn == 1);
    if (nn != 1) return;
    CHECK(nests[0].loops[0].role == ISA_ROLE_SHARED);
    strbuf b = {0};
    mappings(&nests[0], "avx512_bf16_dot", &b);
    CHECK_LINE(&b, "avx512_bf16_dot: m=o<16 n=p<32 k=ci<16 (A=W B=X); convert A f32->bf16, "
                   "convert B f32->bf16, pack B in k groups of 2 over ci");
    sb_free(&b);
}

static void test_cpu_flags(void) {
    CHECK(!isa_cpu_flag("no_such_flag_xyz"));
    setenv("WPK_CPU_FLAGS_OFF", "sse2,avx512_bf16", 1);
    CHECK(!isa_cpu_flag("avx512_bf16"));
    CHECK(!isa_cpu_has(isa_intrin_find("avx512_bf16_dot")));
    unsetenv("WPK_CPU_FLAGS_OFF");
    CHECK(!isa_cpu_has(isa_intrin_find("mma_m16n8k8_tf32")));
}

int main(void) {
    ctx = wpk_context_create();
    te_ctx_init(&C, ctx);
    test_descriptions();
    test_matmul_maps();
    test_no_match();
    test_depthwise_separable();
    test_grouped();
    test_cpu_flags();
    te_ctx_free(&C);
    wpk_context_free(ctx);
    CHECK_DONE();
}
