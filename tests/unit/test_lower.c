/* test_lower.c -- lowering schedules to loops: printer goldens of lowered matmuls and
 * convolutions under typical schedules (tests/unit/golden/lower_*.txt; WPK_UPDATE_GOLDEN=1
 * rewrites them), numeric checks of the lowered kernels run by the loop interpreter against
 * plain C loops for default, hand-written and random legal schedules, and must-fail lowering
 * cases with their messages. The algorithms are written here, so this test depends on the
 * DSL and the lowering only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "check.h"
#include "loop/interp.h"
#include "loop/lower.h"
#include "te/schedule.h"

static wpk_context *ctx;
static te_ctx C;

/* A fresh arena per case, so iterator ids (and goldens) do not depend on the other cases. */
static void fresh(void) {
    te_ctx_free(&C);
    te_ctx_init(&C, ctx);
    wpk_clear_error(ctx);
}

static const te_expr *V(const te_iter *it) { return te_var(&C, it); }
static const te_expr *I(int64_t v) { return te_int(&C, v); }

/* ---- algorithms ---- */

typedef struct mm {
    te_tensor *A, *B, *C;
    int64_t M, N, K;
} mm;

/* C[i, j] = sum_k A[i, k] * B[k, j] */
static mm make_mm(int64_t M, int64_t N, int64_t K) {
    mm m = {.M = M, .N = N, .K = K};
    m.A = te_placeholder(&C, "A", TE_F32, 2, (int64_t[]){M, K});
    m.B = te_placeholder(&C, "B", TE_F32, 2, (int64_t[]){K, N});
    te_iter **ax = te_compute_axes(&C, 2, (int64_t[]){M, N}, (const char *[]){"i", "j"});
    te_iter *k = te_reduce_axis(&C, "k", 0, K);
    const te_expr *a = te_load(&C, m.A, 2, (const te_expr *[]){V(ax[0]), V(k)});
    const te_expr *b = te_load(&C, m.B, 2, (const te_expr *[]){V(k), V(ax[1])});
    m.C = te_compute(&C, "C", 2, (int64_t[]){M, N}, ax,
                     te_reduce(&C, TE_REDUCE_SUM, te_mul(&C, a, b), 1, &k));
    return m;
}

static void ref_mm(const mm *m, const float *A, const float *B, float *out) {
    for (int64_t i = 0; i < m->M; i++)
        for (int64_t j = 0; j < m->N; j++) {
            float s = 0;
            for (int64_t k = 0; k < m->K; k++) s += A[i * m->K + k] * B[k * m->N + j];
            out[i * m->N + j] = s;
        }
}

typedef struct conv {
    te_tensor *data, *w, *bias, *pad, *conv, *out;
    int64_t n, c, h, wd, oc, kh, kw, stride, padding, oh, ow;
} conv;

/* pad = zero-padded data; conv = sum(rc, ry, rx) pad * w; out = max(conv + bias, 0) */
static conv make_conv(int64_t n, int64_t c, int64_t h, int64_t wd, int64_t oc, int64_t k,
                      int64_t stride, int64_t padding) {
    conv v = {.n = n, .c = c, .h = h, .wd = wd, .oc = oc, .kh = k, .kw = k, .stride = stride,
              .padding = padding};
    v.oh = (h + 2 * padding - k) / stride + 1;
    v.ow = (wd + 2 * padding - k) / stride + 1;
    v.data = te_placeholder(&C, "data", TE_F32, 4, (int64_t[]){n, c, h, wd});
    v.w = te_placeholder(&C, "w", TE_F32, 4, (int64_t[]){oc, c, k, k});
    v.bias = te_placeholder(&C, "bias", TE_F32, 1, (int64_t[]){oc});
    int64_t ps[4] = {n, c, h + 2 * padding, wd + 2 * padding};
    te_iter **pa = te_compute_axes(&C, 4, ps, (const char *[]){"pn", "pc", "ph", "pw"});
    const te_expr *y = te_sub(&C, V(pa[2]), I(padding)), *x = te_sub(&C, V(pa[3]), I(padding));
    const te_expr *inside = te_and(&C, te_and(&C, te_cmp(&C, TE_LE, I(0), y), te_cmp(&C, TE_LT, y, I(h))),
                                   te_and(&C, te_cmp(&C, TE_LE, I(0), x), te_cmp(&C, TE_LT, x, I(wd))));
    const te_expr *ld = te_load(&C, v.data, 4, (const te_expr *[]){V(pa[0]), V(pa[1]), y, x});
    v.pad = te_compute(&C, "pad", 4, ps, pa, te_select(&C, inside, ld, te_float(&C, 0)));
    int64_t os[4] = {n, oc, v.oh, v.ow};
    te_iter **ca = te_compute_axes(&C, 4, os, (const char *[]){"n", "oc", "oh", "ow"});
    te_iter *rc = te_reduce_axis(&C, "rc", 0, c), *ry = te_reduce_axis(&C, "ry", 0, k),
            *rx = te_reduce_axis(&C, "rx", 0, k);
    const te_expr *pl = te_load(&C, v.pad, 4, (const te_expr *[]){
        V(ca[0]), V(rc), te_add(&C, te_mul(&C, V(ca[2]), I(stride)), V(ry)),
        te_add(&C, te_mul(&C, V(ca[3]), I(stride)), V(rx))});
    const te_expr *wl = te_load(&C, v.w, 4, (const te_expr *[]){V(ca[1]), V(rc), V(ry), V(rx)});
    v.conv = te_compute(&C, "conv", 4, os, ca,
                        te_reduce(&C, TE_REDUCE_SUM, te_mul(&C, pl, wl), 3, (te_iter *[]){rc, ry, rx}));
    te_iter **oa = te_compute_axes(&C, 4, os, (const char *[]){"n", "oc", "oh", "ow"});
    const te_expr *cv = te_load(&C, v.conv, 4, (const te_expr *[]){V(oa[0]), V(oa[1]), V(oa[2]), V(oa[3])});
    const te_expr *b = te_load(&C, v.bias, 1, (const te_expr *[]){V(oa[1])});
    v.out = te_compute(&C, "out", 4, os, oa, te_max(&C, te_add(&C, cv, b), te_float(&C, 0)));
    return v;
}

static void ref_conv(const conv *v, const float *data, const float *w, const float *bias, float *out) {
    for (int64_t n = 0; n < v->n; n++)
        for (int64_t o = 0; o < v->oc; o++)
            for (int64_t y = 0; y < v->oh; y++)
                for (int64_t x = 0; x < v->ow; x++) {
                    float s = 0;
                    for (int64_t c = 0; c < v->c; c++)
                        for (int64_t ry = 0; ry < v->kh; ry++)
                            for (int64_t rx = 0; rx < v->kw; rx++) {
                                int64_t iy = y * v->stride + ry - v->padding, ix = x * v->stride + rx - v->padding;
                                float d = iy >= 0 && iy < v->h && ix >= 0 && ix < v->wd
                                              ? data[((n * v->c + c) * v->h + iy) * v->wd + ix]
                                              : 0.0f;
                                s += d * w[((o * v->c + c) * v->kh + ry) * v->kw + rx];
                            }
                    s += bias[o];
                    out[((n * v->oc + o) * v->oh + y) * v->ow + x] = s > 0 ? s : 0;
                }
}

/* ---- helpers ---- */

static unsigned rng = 12345u;
static unsigned next_rand(void) {
    rng = rng * 1103515245u + 12345u;
    return (rng >> 8) & 0xffffff;
}
static int pick(int n) { return (int)(next_rand() % (unsigned)n); }

static float *random_data(int64_t n) {
    float *p = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) p[i] = (float)(next_rand() % 2001) / 1000.0f - 1.0f;
    return p;
}

static int64_t numel(const te_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

static loop_func *lower_ok(te_schedule *s, const char *name, te_tensor *const *args, int nargs, int line) {
    loop_func *f = NULL;
    wpk_status st = s ? loop_lower(&C, s, name, args, nargs, &f) : WPK_ERR_INVALID_ARG;
    if (st) {
        fprintf(stderr, "line %d: lowering '%s' failed: %s\n", line, name, wpk_context_error(ctx));
        check_failures++;
        return NULL;
    }
    return f;
}

/* Run f in the interpreter on args (the last is the output, n floats) and compare with want. */
static bool run_matches(const loop_func *f, void **args, float *got, const float *want, int64_t n,
                        float tol, const char *what, int line) {
    for (int64_t i = 0; i < n; i++) got[i] = NAN;
    wpk_status st = loop_interp_run(ctx, f, args);
    if (st) {
        fprintf(stderr, "line %d: %s: interpreter: %s\n", line, what, wpk_context_error(ctx));
        check_failures++;
        return false;
    }
    for (int64_t i = 0; i < n; i++)
        if (!(fabsf(got[i] - want[i]) <= tol)) {
            fprintf(stderr, "line %d: %s: element %lld is %g, want %g\n", line, what, (long long)i,
                    (double)got[i], (double)want[i]);
            check_failures++;
            return false;
        }
    return true;
}

static char *func_text(const loop_func *f) {
    strbuf b = {0};
    loop_print_func(f, &b);
    return sb_take(&b);
}

/* The printed function equals tests/unit/golden/lower_<name>.txt. */
static void check_golden(const loop_func *f, const char *name, int line) {
    if (!f) return;
    char path[256];
    snprintf(path, sizeof path, "tests/unit/golden/lower_%s.txt", name);
    char *got = func_text(f);
    if (getenv("WPK_UPDATE_GOLDEN")) {
        FILE *fp = fopen(path, "w");
        if (fp) {
            fputs(got, fp);
            fclose(fp);
        }
    }
    FILE *fp = fopen(path, "r");
    char *want = NULL;
    if (fp) {
        fseek(fp, 0, SEEK_END);
        long n = ftell(fp);
        fseek(fp, 0, SEEK_SET);
        want = calloc((size_t)n + 1, 1);
        if (fread(want, 1, (size_t)n, fp) != (size_t)n) want[0] = 0;
        fclose(fp);
    }
    if (!want || strcmp(got, want) != 0) {
        fprintf(stderr, "line %d: %s differs from the lowering:\n%s", line, path, got);
        check_failures++;
    }
    free(want);
    wpk_free(got);
}

static const char *loop_text(const char *text, const char *header) {
    return text ? strstr(text, header) : NULL;
}

/* Whether [from, to) contains needle. */
static bool span_has(const char *from, const char *to, const char *needle) {
    size_t n = strlen(needle);
    for (const char *p = from; p + n <= to; p++)
        if (strncmp(p, needle, n) == 0) return true;
    return false;
}

/* ---- matmul ---- */

static void check_mm(const mm *m, const loop_func *f, const char *what, int line) {
    if (!f) return;
    float *A = random_data(m->M * m->K), *B = random_data(m->K * m->N);
    float *want = malloc(sizeof(float) * (size_t)(m->M * m->N)), *got = malloc(sizeof(float) * (size_t)(m->M * m->N));
    ref_mm(m, A, B, want);
    void *args[3] = {A, B, got};
    run_matches(f, args, got, want, m->M * m->N, 1e-5f * (float)m->K, what, line);
    free(A);
    free(B);
    free(want);
    free(got);
}

static void test_mm_default(void) {
    fresh();
    mm m = make_mm(4, 5, 3);
    te_schedule *s = te_schedule_create(&C, &m.C, 1);
    loop_func *f = lower_ok(s, "mm", (te_tensor *[]){m.A, m.B, m.C}, 3, __LINE__);
    check_golden(f, "mm_default", __LINE__);
    check_mm(&m, f, "mm default", __LINE__);
}

/* j split by 8 over 20: the guard is partitioned out of the main loop, which vectorizes */
static void test_mm_split_tail(void) {
    fresh();
    mm m = make_mm(3, 20, 4);
    te_schedule *s = te_schedule_create(&C, &m.C, 1);
    te_stage *st = te_stage_of(s, m.C);
    te_iter *jo, *ji;
    CHECK(te_split(st, m.C->axes[1], 8, &jo, &ji) == WPK_OK);
    CHECK(te_reorder(st, 2, (te_iter *[]){m.C->body->raxes[0], ji}) == WPK_OK);
    CHECK(te_vectorize(st, ji) == WPK_OK);
    loop_func *f = lower_ok(s, "mm_tail", (te_tensor *[]){m.A, m.B, m.C}, 3, __LINE__);
    check_golden(f, "mm_split_tail", __LINE__);
    check_mm(&m, f, "mm split tail", __LINE__);
    /* the main loop over j_o has no branch and stores whole vectors */
    char *t = f ? func_text(f) : NULL;
    const char *main_loop = loop_text(t, "for (j_o_");
    CHECK(main_loop && strstr(main_loop, ", 0, 2) {"));
    const char *tail = main_loop ? strstr(main_loop + 1, "\n    }\n") : NULL;
    CHECK(tail && !span_has(main_loop, tail, "if ("));
    CHECK(t && strstr(t, "C[ramp(i_"));
    wpk_free(t);
}

/* tile + reorder + vectorize + unroll */
static void test_mm_tile(void) {
    fresh();
    mm m = make_mm(8, 16, 6);
    te_schedule *s = te_schedule_create(&C, &m.C, 1);
    te_stage *st = te_stage_of(s, m.C);
    te_iter *io, *jo, *ii, *ji, *k = m.C->body->raxes[0];
    CHECK(te_tile(st, m.C->axes[0], m.C->axes[1], 2, 8, &io, &jo, &ii, &ji) == WPK_OK);
    CHECK(te_reorder(st, 4, (te_iter *[]){jo, k, ii, ji}) == WPK_OK);
    CHECK(te_unroll(st, ii) == WPK_OK);
    CHECK(te_vectorize(st, ji) == WPK_OK);
    CHECK(te_parallel(st, io) == WPK_OK);
    loop_func *f = lower_ok(s, "mm_tile", (te_tensor *[]){m.A, m.B, m.C}, 3, __LINE__);
    check_golden(f, "mm_tile", __LINE__);
    check_mm(&m, f, "mm tile", __LINE__);
}

/* cache_write: a stack accumulator per tile, computed at the tile loop, reduction outermost */
static void test_mm_cache_write(void) {
    fresh();
    mm m = make_mm(8, 20, 5);
    te_schedule *s = te_schedule_create(&C, &m.C, 1);
    te_tensor *acc;
    CHECK(te_cache_write(s, m.C, "local", &acc) == WPK_OK);
    te_stage *st = te_stage_of(s, m.C), *sa = te_stage_of(s, acc);
    te_iter *io, *jo, *ii, *ji;
    CHECK(te_tile(st, m.C->axes[0], m.C->axes[1], 4, 8, &io, &jo, &ii, &ji) == WPK_OK);
    CHECK(te_vectorize(st, ji) == WPK_OK);
    CHECK(te_compute_at(sa, st, jo) == WPK_OK);
    CHECK(te_reorder(sa, 3, (te_iter *[]){acc->body->raxes[0], acc->axes[0], acc->axes[1]}) == WPK_OK);
    CHECK(te_vectorize(sa, acc->axes[1]) == WPK_OK);
    loop_func *f = lower_ok(s, "mm_acc", (te_tensor *[]){m.A, m.B, m.C}, 3, __LINE__);
    check_golden(f, "mm_cache_write", __LINE__);
    check_mm(&m, f, "mm cache_write", __LINE__);
    char *t = f ? func_text(f) : NULL;
    CHECK(t && strstr(t, "allocate C.local[4, 8] f32 stack {"));
    wpk_free(t);
}

/* ---- convolution ---- */

static void check_conv(const conv *v, const loop_func *f, const char *what, int line) {
    if (!f) return;
    float *data = random_data(numel(v->data)), *w = random_data(numel(v->w)), *bias = random_data(v->oc);
    int64_t n = numel(v->out);
    float *want = malloc(sizeof(float) * (size_t)n), *got = malloc(sizeof(float) * (size_t)n);
    ref_conv(v, data, w, bias, want);
    void *args[4] = {data, w, bias, got};
    run_matches(f, args, got, want, n, 1e-5f * (float)(v->c * v->kh * v->kw), what, line);
    free(data);
    free(w);
    free(bias);
    free(want);
    free(got);
}

static te_tensor *const *conv_args(const conv *v) {
    static te_tensor *a[4];
    a[0] = v->data;
    a[1] = v->w;
    a[2] = v->bias;
    a[3] = v->out;
    return a;
}

/* pad inlined into the convolution, the convolution computed at the epilogue's row loop:
 * partitioning leaves the interior without selects */
static void test_conv_inline_pad(void) {
    fresh();
    conv v = make_conv(1, 2, 6, 6, 2, 3, 1, 1);
    te_schedule *s = te_schedule_create(&C, &v.out, 1);
    CHECK(te_compute_inline(te_stage_of(s, v.pad)) == WPK_OK);
    te_stage *so = te_stage_of(s, v.out), *sc = te_stage_of(s, v.conv);
    CHECK(te_compute_at(sc, so, v.out->axes[2]) == WPK_OK);
    loop_func *f = lower_ok(s, "conv_pad", conv_args(&v), 4, __LINE__);
    check_golden(f, "conv_inline_pad", __LINE__);
    check_conv(&v, f, "conv inline pad", __LINE__);
    char *t = f ? func_text(f) : NULL;
    /* the interior rows (oh in [1, 4]) and columns read data without a select */
    const char *mid = loop_text(t, "for (oh_");
    mid = mid ? strstr(mid, ", 1, 4) {") : NULL;
    CHECK(mid != NULL);
    const char *inner = mid ? strstr(mid, ", 1, 4) {") : NULL;
    inner = inner ? strstr(inner + 1, ", 1, 4) {") : NULL;
    const char *end = inner ? strstr(inner, "\n        }\n") : NULL;
    CHECK(inner && end && !span_has(inner, end, "select("));
    wpk_free(t);
}

/* pad in a buffer computed at the output row loop (the rows one output row needs), stride 2 */
static void test_conv_pad_at_row(void) {
    fresh();
    conv v = make_conv(1, 2, 7, 7, 3, 3, 2, 1);
    te_schedule *s = te_schedule_create(&C, &v.out, 1);
    te_stage *so = te_stage_of(s, v.out), *sc = te_stage_of(s, v.conv), *sp = te_stage_of(s, v.pad);
    CHECK(te_compute_at(sc, so, v.out->axes[3]) == WPK_OK);
    CHECK(te_compute_at(sp, sc, v.conv->body->raxes[0]) == WPK_OK);
    loop_func *f = lower_ok(s, "conv_rows", conv_args(&v), 4, __LINE__);
    check_golden(f, "conv_pad_at", __LINE__);
    check_conv(&v, f, "conv pad at", __LINE__);
}

/* pad computed at the output's row loop, which reads it only through conv, computed inside
 * it at the column loop: the region is what conv reads at the points out reads of it, its
 * reduction over its whole range (the rows one output row needs, all channels); then both at
 * the same loop (pad first, as the schedule orders them) */
static void test_conv_pad_through(void) {
    fresh();
    conv v = make_conv(1, 3, 9, 8, 2, 3, 1, 1);
    te_schedule *s = te_schedule_create(&C, &v.out, 1);
    te_stage *so = te_stage_of(s, v.out), *sc = te_stage_of(s, v.conv), *sp = te_stage_of(s, v.pad);
    CHECK(te_compute_at(sc, so, v.out->axes[3]) == WPK_OK);
    CHECK(te_compute_at(sp, so, v.out->axes[2]) == WPK_OK);
    loop_func *f = lower_ok(s, "conv_through", conv_args(&v), 4, __LINE__);
    check_conv(&v, f, "conv pad through", __LINE__);
    char *t = f ? func_text(f) : NULL;
    /* one output row of a 3x3 stride-1 conv reads 3 padded rows of every channel */
    CHECK(t && strstr(t, "allocate pad[1, 3, 3, 10] f32 heap {"));
    wpk_free(t);

    fresh();
    v = make_conv(1, 2, 6, 7, 3, 3, 1, 1);
    s = te_schedule_create(&C, &v.out, 1);
    so = te_stage_of(s, v.out), sc = te_stage_of(s, v.conv), sp = te_stage_of(s, v.pad);
    CHECK(te_compute_at(sc, so, v.out->axes[1]) == WPK_OK);
    CHECK(te_compute_at(sp, so, v.out->axes[1]) == WPK_OK);
    f = lower_ok(s, "conv_through_same", conv_args(&v), 4, __LINE__);
    check_conv(&v, f, "conv pad through, same loop", __LINE__);
}

static void test_conv_shapes(void) {
    static const int64_t shapes[][8] = {
        /* n, c, h, w, oc, k, stride, pad */
        {1, 3, 8, 8, 4, 3, 1, 1}, {2, 2, 7, 5, 3, 3, 2, 1}, {1, 4, 6, 6, 5, 1, 1, 0},
        {1, 1, 9, 9, 2, 5, 2, 2}, {1, 2, 5, 5, 2, 3, 1, 0},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t *p = shapes[i];
        fresh();
        conv v = make_conv(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]);
        te_schedule *s = te_schedule_create(&C, &v.out, 1);
        loop_func *f = lower_ok(s, "conv", conv_args(&v), 4, __LINE__);
        check_conv(&v, f, "conv default", __LINE__);
        /* and with pad inlined, conv cached per output channel, split and vectorized */
        fresh();
        v = make_conv(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]);
        s = te_schedule_create(&C, &v.out, 1);
        te_stage *so = te_stage_of(s, v.out), *sc = te_stage_of(s, v.conv);
        CHECK(te_compute_inline(te_stage_of(s, v.pad)) == WPK_OK);
        te_iter *wo, *wi;
        CHECK(te_split(so, v.out->axes[3], 4, &wo, &wi) == WPK_OK);
        CHECK(te_vectorize(so, wi) == WPK_OK);
        CHECK(te_compute_at(sc, so, wo) == WPK_OK);
        te_iter *cwo, *cwi;
        CHECK(te_split(sc, v.conv->axes[3], 4, &cwo, &cwi) == WPK_OK);
        CHECK(te_vectorize(sc, cwi) == WPK_OK);
        f = lower_ok(s, "conv_sched", conv_args(&v), 4, __LINE__);
        check_conv(&v, f, "conv scheduled", __LINE__);
    }
}

/* Indices of another integer type (I32 from a cast) index buffers like any other; a stage
 * computed at a split loop of its reader gets a window of the reader's tile. */
static void test_i32_index(void) {
    fresh();
    te_tensor *X = te_placeholder(&C, "X", TE_F32, 1, (int64_t[]){10});
    te_iter **ya = te_compute_axes(&C, 1, (int64_t[]){10}, (const char *[]){"y"});
    const te_expr *yi = te_cast(&C, te_t(TE_I32), V(ya[0]));
    te_tensor *Y = te_compute(&C, "Y", 1, (int64_t[]){10}, ya,
                              te_mul(&C, te_load(&C, X, 1, &yi), te_float(&C, 2)));
    te_iter **za = te_compute_axes(&C, 1, (int64_t[]){10}, (const char *[]){"z"});
    const te_expr *zi = te_cast(&C, te_t(TE_I32), V(za[0]));
    te_tensor *Z = te_compute(&C, "Z", 1, (int64_t[]){10}, za,
                              te_add(&C, te_load(&C, Y, 1, &zi), te_float(&C, 1)));
    te_schedule *s = te_schedule_create(&C, &Z, 1);
    te_iter *zo, *zin;
    CHECK(s && te_split(te_stage_of(s, Z), Z->axes[0], 4, &zo, &zin) == WPK_OK);
    CHECK(s && te_compute_at(te_stage_of(s, Y), te_stage_of(s, Z), zo) == WPK_OK);
    loop_func *f = lower_ok(s, "i32", (te_tensor *[]){X, Z}, 2, __LINE__);
    float x[10], z[10], want[10];
    for (int i = 0; i < 10; i++) x[i] = (float)i - 3.5f, want[i] = 2 * x[i] + 1;
    void *args[2] = {x, z};
    if (f) run_matches(f, args, z, want, 10, 0, "i32 index", __LINE__);
    char *t = f ? func_text(f) : NULL;
    CHECK(t && strstr(t, "allocate Y[4] f32 heap {"));
    wpk_free(t);
}

/* ---- random legal schedules ---- */

static const int64_t factors[] = {1, 2, 3, 4, 5, 7, 8, 16};

/* Random split / reorder / annotations of stage st (primitives te refuses are skipped: the
 * schedule stays as it was). */
static void randomize_stage(te_stage *st) {
    int nsplit = pick(3);
    for (int i = 0; i < nsplit; i++) {
        te_iter *it = st->leaves[pick(st->nleaves)];
        te_split(st, it, factors[pick(8)], NULL, NULL);
    }
    if (pick(3) == 0 && st->nleaves >= 2) {
        int p = pick(st->nleaves - 1);
        te_fuse(st, st->leaves[p], st->leaves[p + 1], NULL);
    }
    /* a random permutation */
    te_iter *order[64];
    int n = st->nleaves;
    for (int i = 0; i < n; i++) order[i] = st->leaves[i];
    for (int i = n - 1; i > 0; i--) {
        int j = pick(i + 1);
        te_iter *t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    te_reorder(st, n, order);
    if (pick(2)) te_vectorize(st, st->leaves[n - 1]);
    if (pick(3) == 0) te_unroll(st, st->leaves[pick(n)]);
    if (pick(3) == 0) te_parallel(st, st->leaves[0]);
    if (pick(8) == 0) te_bind(st, st->leaves[pick(n)], "threadIdx.x");
    wpk_clear_error(ctx);
}

static void test_mm_random(void) {
    for (int trial = 0; trial < 200; trial++) {
        fresh();
        mm m = make_mm(1 + pick(9), 1 + pick(20), 1 + pick(7));
        te_schedule *s = te_schedule_create(&C, &m.C, 1);
        te_tensor *acc = NULL;
        if (pick(2)) te_cache_write(s, m.C, pick(2) ? "local" : "global", &acc);
        te_stage *st = te_stage_of(s, m.C);
        randomize_stage(st);
        if (acc) {
            te_stage *sa = te_stage_of(s, acc);
            if (pick(4)) te_compute_at(sa, st, st->leaves[pick(st->nleaves)]);
            randomize_stage(sa);
        }
        wpk_clear_error(ctx);
        char what[64];
        snprintf(what, sizeof what, "mm random schedule %d", trial);
        int before = check_failures;
        loop_func *f = lower_ok(s, "mm_rand", (te_tensor *[]){m.A, m.B, m.C}, 3, __LINE__);
        check_mm(&m, f, what, __LINE__);
        if (check_failures != before) {
            strbuf b = {0};
            te_print_schedule(s, &b);
            fprintf(stderr, "%s\n", b.s ? b.s : "");
            sb_free(&b);
            return;
        }
    }
}

static void test_conv_random(void) {
    for (int trial = 0; trial < 80; trial++) {
        fresh();
        conv v = make_conv(1 + pick(2), 1 + pick(3), 4 + pick(5), 4 + pick(5), 1 + pick(4), 1 + 2 * pick(2),
                           1 + pick(2), pick(2));
        te_schedule *s = te_schedule_create(&C, &v.out, 1);
        te_tensor *acc = NULL;
        if (pick(3) == 0) te_cache_write(s, v.conv, "local", &acc);
        te_stage *so = te_stage_of(s, v.out), *sc = te_stage_of(s, v.conv), *sp = te_stage_of(s, v.pad);
        randomize_stage(so);
        if (pick(2)) te_compute_at(sc, so, so->leaves[pick(so->nleaves)]);
        randomize_stage(sc);
        if (acc) {
            te_stage *sa = te_stage_of(s, acc);
            te_compute_at(sa, sc, sc->leaves[pick(sc->nleaves)]);
            randomize_stage(sa);
            /* the padded input is read by the accumulator now */
            sc = sa;
        }
        switch (pick(3)) {
        case 0: te_compute_inline(sp); break;
        case 1: te_compute_at(sp, sc, sc->leaves[pick(sc->nleaves)]); break;
        default: randomize_stage(sp); break;
        }
        wpk_clear_error(ctx);
        char what[64];
        snprintf(what, sizeof what, "conv random schedule %d", trial);
        int before = check_failures;
        loop_func *f = lower_ok(s, "conv_rand", conv_args(&v), 4, __LINE__);
        check_conv(&v, f, what, __LINE__);
        if (check_failures != before) {
            strbuf b = {0};
            te_print_schedule(s, &b);
            fprintf(stderr, "%s\n", b.s ? b.s : "");
            sb_free(&b);
            return;
        }
    }
}

/* ---- must-fail ---- */

static void test_must_fail(void) {
    loop_func *f;
    fresh();
    mm m = make_mm(4, 4, 4);
    te_schedule *s = te_schedule_create(&C, &m.C, 1);
    CHECK_ERR(ctx, loop_lower(&C, s, "f", (te_tensor *[]){m.A, m.C}, 2, &f), WPK_ERR_INVALID_ARG,
              "placeholder 'B' read by stage 'C' is not an argument");
    CHECK_ERR(ctx, loop_lower(&C, s, "f", (te_tensor *[]){m.A, m.B}, 2, &f), WPK_ERR_INVALID_ARG,
              "output 'C' is not an argument");
    CHECK_ERR(ctx, loop_lower(&C, s, "f", (te_tensor *[]){m.A, m.C, m.B}, 3, &f), WPK_ERR_INVALID_ARG,
              "placeholder 'B' comes after an output");
    CHECK_ERR(ctx, loop_lower(&C, s, "f", (te_tensor *[]){m.A, m.A, m.C}, 3, &f), WPK_ERR_INVALID_ARG,
              "'A' is argument 1 of 'f' twice");

    /* a compute_at stage that another stage reads outside its attach loop */
    fresh();
    conv v = make_conv(1, 1, 4, 4, 1, 3, 1, 1);
    s = te_schedule_create(&C, &v.out, 1);
    te_stage *so = te_stage_of(s, v.out), *sc = te_stage_of(s, v.conv), *sp = te_stage_of(s, v.pad);
    CHECK(te_compute_at(sp, so, v.out->axes[2]) == WPK_OK);
    CHECK_ERR(ctx, loop_lower(&C, s, "f", conv_args(&v), 4, &f), WPK_ERR_INVALID_ARG,
              "compute_at: stage 'out' reads 'pad' neither itself nor through the stages "
              "computed inside it");
    /* ... nor when its reader runs inside the stage but outside the loop it is computed at */
    fresh();
    v = make_conv(1, 1, 4, 4, 1, 3, 1, 1);
    s = te_schedule_create(&C, &v.out, 1);
    so = te_stage_of(s, v.out), sc = te_stage_of(s, v.conv), sp = te_stage_of(s, v.pad);
    CHECK(te_compute_at(sc, so, v.out->axes[2]) == WPK_OK);
    CHECK(te_compute_at(sp, so, v.out->axes[3]) == WPK_OK);
    CHECK_ERR(ctx, loop_lower(&C, s, "f", conv_args(&v), 4, &f), WPK_ERR_INVALID_ARG,
              "compute_at: stage 'pad' is computed inside 'out' but also read by 'conv'");
    /* an intermediate as a kernel argument while it is inlined */
    fresh();
    v = make_conv(1, 1, 4, 4, 1, 3, 1, 1);
    s = te_schedule_create(&C, &v.out, 1);
    CHECK(te_compute_inline(te_stage_of(s, v.pad)) == WPK_OK);
    CHECK_ERR(ctx, loop_lower(&C, s, "f", (te_tensor *[]){v.data, v.w, v.bias, v.pad, v.out}, 5, &f),
              WPK_ERR_INVALID_ARG, "compute_inline: stage 'pad' is an argument");
    /* a compute_at stage as an argument */
    fresh();
    v = make_conv(1, 1, 4, 4, 1, 3, 1, 1);
    s = te_schedule_create(&C, &v.out, 1);
    CHECK(te_compute_at(te_stage_of(s, v.conv), te_stage_of(s, v.out), v.out->axes[1]) == WPK_OK);
    CHECK_ERR(ctx, loop_lower(&C, s, "f", (te_tensor *[]){v.data, v.w, v.bias, v.conv, v.out}, 5, &f),
              WPK_ERR_INVALID_ARG, "compute_at: stage 'conv' is an argument");
    /* a stage read through a data-dependent index cannot be bounded */
    fresh();
    te_tensor *X = te_placeholder(&C, "X", TE_F32, 1, (int64_t[]){8});
    te_tensor *Ix = te_placeholder(&C, "idx", TE_I64, 1, (int64_t[]){8});
    te_iter **ya = te_compute_axes(&C, 1, (int64_t[]){8}, (const char *[]){"y"});
    te_tensor *Y = te_compute(&C, "Y", 1, (int64_t[]){8}, ya,
                              te_mul(&C, te_load(&C, X, 1, (const te_expr *[]){V(ya[0])}), te_float(&C, 2)));
    te_iter **za = te_compute_axes(&C, 1, (int64_t[]){8}, (const char *[]){"z"});
    const te_expr *gi = te_load(&C, Ix, 1, (const te_expr *[]){V(za[0])});
    te_tensor *Z = te_compute(&C, "Z", 1, (int64_t[]){8}, za, te_load(&C, Y, 1, &gi));
    s = te_schedule_create(&C, &Z, 1);
    CHECK(s != NULL);
    if (s) {
        te_iter *zo, *zi;
        CHECK(te_split(te_stage_of(s, Z), Z->axes[0], 4, &zo, &zi) == WPK_OK);
        CHECK(te_compute_at(te_stage_of(s, Y), te_stage_of(s, Z), zo) == WPK_OK);
        CHECK_ERR(ctx, loop_lower(&C, s, "f", (te_tensor *[]){X, Ix, Z}, 3, &f), WPK_ERR_INVALID_ARG,
                  "compute_at: cannot bound the region of 'Y'");
    }
}

/* ---- running out of memory ---- */

/* Fail each allocation of a lowering in turn (a tiled conv with an accumulator, a pad stage
 * computed at a reduction loop, partitioning and vectorization): a status, never a crash. */
static void test_alloc_faults(void) {
    long total = 0;
    int nomem = 0, runs = 0;
    for (long n = 0;; n++) {
        fresh();
        conv v = make_conv(1, 2, 7, 7, 4, 3, 1, 1);
        te_schedule *s = te_schedule_create(&C, &v.out, 1);
        te_tensor *acc;
        CHECK(te_cache_write(s, v.conv, "local", &acc) == WPK_OK);
        te_stage *so = te_stage_of(s, v.out), *sa = te_stage_of(s, acc);
        te_iter *wo, *wi;
        CHECK(te_split(so, v.out->axes[3], 4, &wo, &wi) == WPK_OK);
        CHECK(te_vectorize(so, wi) == WPK_OK);
        CHECK(te_compute_at(te_stage_of(s, v.conv), so, wo) == WPK_OK);
        CHECK(te_compute_at(sa, te_stage_of(s, v.conv), te_stage_of(s, v.conv)->leaves[3]) == WPK_OK);
        CHECK(te_compute_at(te_stage_of(s, v.pad), sa, acc->body->raxes[0]) == WPK_OK);
        loop_func *f = NULL;
        wpk_alloc_fail_at(n);
        wpk_status st = loop_lower(&C, s, "conv", conv_args(&v), 4, &f);
        long used = wpk_alloc_count();
        wpk_alloc_fail_at(0);
        if (n == 0) {
            CHECK(st == WPK_OK);
            check_conv(&v, f, "conv before faults", __LINE__);
            total = used;
            continue;
        }
        runs++;
        if (st != WPK_OK) {
            CHECK(st == WPK_ERR_NOMEM);
            CHECK(wpk_context_error(ctx)[0] != 0);
            nomem++;
        }
        if (n >= total) break;
    }
    CHECK(total >= 2 && nomem > 0 && runs == total);
    if (getenv("DBG")) fprintf(stderr, "alloc faults: %ld allocations, %d failed with NOMEM\n", total, nomem);
}

int main(void) {
    /* WPK_TEST_SEED=n runs the random schedules from another seed (stress runs) */
    if (getenv("WPK_TEST_SEED")) rng = (unsigned)strtoul(getenv("WPK_TEST_SEED"), NULL, 10);
    ctx = wpk_context_create();
    te_ctx_init(&C, ctx);
    test_mm_default();
    test_mm_split_tail();
    test_mm_tile();
    test_mm_cache_write();
    test_conv_inline_pad();
    test_conv_pad_at_row();
    test_conv_pad_through();
    test_conv_shapes();
    test_i32_index();
    test_must_fail();
    test_alloc_faults();
    test_mm_random();
    test_conv_random();
    te_ctx_free(&C);
    wpk_context_free(ctx);
    CHECK_DONE();
}
