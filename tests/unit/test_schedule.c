/* test_schedule.c -- schedules: the default schedule of a fused conv, every primitive (split,
 * tile, reorder, fuse, vectorize, parallel, unroll, bind, compute_at, compute_inline, set_scope,
 * cache_write, cache_read) checked through te_print_schedule goldens, and must-fail cases that
 * expect WPK_ERR_INVALID_ARG with a message naming the primitive, stage and axis -- and a
 * schedule left as it was. */
#include <stdlib.h>

#include "check.h"
#include "te/algo/conv2d.h"
#include "te/schedule.h"

static wpk_context *ctx;
static te_ctx C;

#define SHAPE(...) \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

static void fresh(void) {
    te_ctx_free(&C);
    te_ctx_init(&C, ctx);
    wpk_clear_error(ctx);
}

static char *text_of(const te_schedule *s) {
    strbuf b = {0};
    te_print_schedule(s, &b);
    return sb_take(&b);
}

static void sched_is(const char *file, int line, const te_schedule *s, const char *want) {
    char *got = text_of(s);
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "%s:%d: schedule differs\n--- got:\n%s--- want:\n%s", file, line, got,
                want);
        check_failures++;
    }
    free(got);
}
#define SCHED_IS(s, want) sched_is(__FILE__, __LINE__, s, want)

/* The primitive call fails with INVALID_ARG and `needle`, and the schedule's text is as before. */
#define CHECK_REJECT(s, call, needle)                                                           \
    do {                                                                                        \
        char *before_ = text_of(s);                                                             \
        wpk_clear_error(ctx);                                                                   \
        CHECK_ERR(ctx, (call), WPK_ERR_INVALID_ARG, needle);                                    \
        char *after_ = text_of(s);                                                              \
        if (strcmp(before_, after_) != 0) {                                                     \
            fprintf(stderr, "%s:%d: a failed primitive changed the schedule:\n%s", __FILE__,   \
                    __LINE__, after_);                                                          \
            check_failures++;                                                                   \
        }                                                                                       \
        free(before_);                                                                          \
        free(after_);                                                                           \
    } while (0)

/* A 3x3 conv, padding 1, with bias + Relu: stages conv.pad, conv.acc, conv. */
typedef struct conv_fixture {
    te_tensor *x, *w, *b, *out;
    te_algo_parts parts;
    te_schedule *s;
    te_stage *pad, *acc, *ep;
} conv_fixture;

static conv_fixture make_conv(bool epilogue) {
    conv_fixture f;
    fresh();
    f.x = te_placeholder(&C, "x", TE_F32, SHAPE(1, 4, 6, 6));
    f.w = te_placeholder(&C, "w", TE_F32, SHAPE(8, 4, 3, 3));
    f.b = te_placeholder(&C, "b", TE_F32, SHAPE(8));
    te_conv2d_params p = te_conv2d_default_params();
    p.pad[0] = p.pad[1] = p.pad[2] = p.pad[3] = 1;
    te_epilogue ep = {.bias = f.b, .act = {.kind = TE_ACT_RELU}};
    f.out = te_conv2d_nchw(&C, "conv", f.x, f.w, &p, epilogue ? &ep : NULL, &f.parts);
    f.s = te_schedule_create(&C, &f.out, 1);
    f.pad = te_stage_of(f.s, f.parts.pad);
    f.acc = te_stage_of(f.s, f.parts.main);
    f.ep = epilogue ? te_stage_of(f.s, f.out) : NULL;
    return f;
}

/* The iter of stage st's tensor axis i / reduction axis i. */
static te_iter *axis(const te_stage *st, int i) { return st->tensor->axes[i]; }
static te_iter *raxis(const te_stage *st, int i) { return st->tensor->body->raxes[i]; }

static void test_default(void) {
    conv_fixture f = make_conv(true);
    CHECK(f.s && f.s->nstages == 3 && f.pad && f.acc && f.ep);
    CHECK(f.s->stages[0] == f.pad && f.s->stages[1] == f.acc && f.s->stages[2] == f.ep);
    CHECK(f.ep->is_output && !f.acc->is_output);
    CHECK(te_stage_of(f.s, f.x) == NULL);
    SCHED_IS(f.s,
        "schedule outputs: conv\n"
        "stage conv.pad (global): root\n"
        "  float32[1, 4, 8, 8] conv.pad[n, c, h, w] = select(1 <= h && h < 7 && 1 <= w && w < "
        "7, x[n, c, min(max(h - 1, 0), 5), min(max(w - 1, 0), 5)], 0.0)\n"
        "  loops: n<1, c<4, h<8, w<8\n"
        "stage conv.acc (global): root\n"
        "  float32[1, 8, 6, 6] conv.acc[n, oc, oh, ow] = sum(rc<4, kh<3, kw<3: conv.pad[n, rc, "
        "oh + kh, ow + kw] * w[oc, rc, kh, kw])\n"
        "  loops: n<1, oc<8, oh<6, ow<6, rc<4 reduce, kh<3 reduce, kw<3 reduce\n"
        "stage conv (global, output): root\n"
        "  float32[1, 8, 6, 6] conv[n, oc, oh, ow] = max(conv.acc[n, oc, oh, ow] + b[oc], 0.0)\n"
        "  loops: n<1, oc<8, oh<6, ow<6\n");
}

static void test_loop_primitives(void) {
    conv_fixture f = make_conv(false);
    te_stage *st = f.acc;
    te_iter *n = axis(st, 0), *oc = axis(st, 1), *oh = axis(st, 2), *ow = axis(st, 3);
    te_iter *rc = raxis(st, 0), *kh = raxis(st, 1), *kw = raxis(st, 2);
    te_iter *oco, *oci, *oho, *owo, *ohi, *owi, *fused;
    CHECK(te_split(st, oc, 3, &oco, &oci) == WPK_OK);
    CHECK(oco->extent == 3 && oci->extent == 3 && oco->kind == TE_ITER_LOOP);
    CHECK(te_tile(st, oh, ow, 4, 2, &oho, &owo, &ohi, &owi) == WPK_OK);
    CHECK(oho->extent == 2 && owo->extent == 3);
    CHECK(te_reorder(st, 9, (te_iter *const[]){oco, oho, owo, rc, kh, kw, ohi, owi, oci}) ==
          WPK_OK);
    CHECK(te_fuse(st, n, oco, &fused) == WPK_OK && fused->extent == 3);
    CHECK(te_parallel(st, fused) == WPK_OK);
    CHECK(te_vectorize(st, oci) == WPK_OK);
    CHECK(te_unroll(st, kw) == WPK_OK);
    CHECK(te_unroll(st, owi) == WPK_OK);
    CHECK(te_iter_is_reduce(st, kw) && !te_iter_is_reduce(st, fused));
    CHECK(!te_iter_is_reduce(st, oci));
    SCHED_IS(f.s,
        "schedule outputs: conv\n"
        "stage conv.pad (global): root\n"
        "  float32[1, 4, 8, 8] conv.pad[n, c, h, w] = select(1 <= h && h < 7 && 1 <= w && w < "
        "7, x[n, c, min(max(h - 1, 0), 5), min(max(w - 1, 0), 5)], 0.0)\n"
        "  loops: n<1, c<4, h<8, w<8\n"
        "stage conv (global, output): root\n"
        "  float32[1, 8, 6, 6] conv[n, oc, oh, ow] = sum(rc<4, kh<3, kw<3: conv.pad[n, rc, oh "
        "+ kh, ow + kw] * w[oc, rc, kh, kw])\n"
        "  split oc<8 by 3 -> oc_o<3, oc_i<3\n"
        "  split oh<6 by 4 -> oh_o<2, oh_i<4\n"
        "  split ow<6 by 2 -> ow_o<3, ow_i<2\n"
        "  fuse n<1, oc_o<3 -> n_oc_o<3\n"
        "  loops: n_oc_o<3 parallel, oh_o<2, ow_o<3, rc<4 reduce, kh<3 reduce, kw<3 reduce "
        "unroll, oh_i<4, ow_i<2 unroll, oc_i<3 vectorize\n");

    /* a split of a reduction axis stays a reduction; fusing two of them too */
    te_iter *rco, *rci, *rf;
    CHECK(te_split(st, rc, 2, &rco, &rci) == WPK_OK);
    CHECK(te_iter_is_reduce(st, rco) && te_iter_is_reduce(st, rci));
    CHECK(te_fuse(st, rci, kh, &rf) == WPK_OK && te_iter_is_reduce(st, rf) && rf->extent == 6);

    /* must-fail, each leaving the schedule as it was */
    CHECK_REJECT(f.s, te_split(st, ohi, 0, NULL, NULL),
                 "split: factor 0 for axis 'oh_i' of stage 'conv'");
    CHECK_REJECT(f.s, te_split(st, oc, 2, NULL, NULL),
                 "split: axis 'oc' is not a leaf of stage 'conv'");
    CHECK_REJECT(f.s, te_split(st, oci, 2, NULL, NULL),
                 "split: axis 'oc_i' of stage 'conv' is already vectorized");
    CHECK_REJECT(f.s, te_fuse(st, oho, ohi, NULL),
                 "fuse: axes 'oh_o' and 'oh_i' of stage 'conv' are not adjacent leaves");
    CHECK_REJECT(f.s, te_fuse(st, owo, rco, NULL),
                 "fuse: axis 'ow_o' of stage 'conv' is a data axis and 'rc_o' a reduction axis");
    CHECK_REJECT(f.s, te_fuse(st, fused, oho, NULL),
                 "fuse: axis 'n_oc_o' of stage 'conv' is already parallel");
    CHECK_REJECT(f.s, te_reorder(st, 2, (te_iter *const[]){ohi, oh}),
                 "reorder: axis 'oh' is not a leaf of stage 'conv'");
    CHECK_REJECT(f.s, te_reorder(st, 2, (te_iter *const[]){ohi, ohi}),
                 "reorder: axis 'oh_i' of stage 'conv' is listed twice");
    CHECK_REJECT(f.s, te_tile(st, ohi, ohi, 2, 2, NULL, NULL, NULL, NULL),
                 "tile: axis 'oh_i' of stage 'conv' given as both x and y");
    CHECK_REJECT(f.s, te_tile(st, ohi, owo, 2, -1, NULL, NULL, NULL, NULL),
                 "tile: split: factor -1 for axis 'ow_o' of stage 'conv'");
    CHECK_REJECT(f.s, te_parallel(st, rco), "parallel: axis 'rc_o' of stage 'conv' is a reduction "
                 "axis");
    CHECK_REJECT(f.s, te_vectorize(st, rf), "vectorize: axis 'rc_i_kh' of stage 'conv' is a "
                 "reduction axis");
    CHECK_REJECT(f.s, te_parallel(st, oci),
                 "parallel: axis 'oc_i' of stage 'conv' is already vectorized");
    CHECK_REJECT(f.s, te_unroll(st, ow), "unroll: axis 'ow' is not a leaf of stage 'conv'");
    CHECK_REJECT(f.s, te_vectorize(st, NULL), "vectorize: no axis given for stage 'conv'");
    /* an extent only known at run time cannot become vector lanes or unrolled copies */
    int64_t keep = ohi->extent;
    ohi->extent = -1;
    CHECK_REJECT(f.s, te_vectorize(st, ohi),
                 "vectorize: axis 'oh_i' of stage 'conv' extent is not constant");
    CHECK_REJECT(f.s, te_unroll(st, ohi), "unroll: axis 'oh_i' of stage 'conv' extent is not "
                 "constant");
    ohi->extent = keep;
    keep = owo->extent;
    owo->extent = -1;
    CHECK_REJECT(f.s, te_fuse(st, oho, owo, NULL),
                 "fuse: axis 'ow_o' of stage 'conv' extent is not constant");
    owo->extent = keep;
    /* the same annotation twice is fine */
    CHECK(te_parallel(st, fused) == WPK_OK);
}

static void test_bind(void) {
    conv_fixture f = make_conv(false);
    te_stage *st = f.acc;
    te_iter *oc = axis(st, 1), *oh = axis(st, 2), *ow = axis(st, 3), *oco, *oci;
    CHECK(te_split(st, oc, 4, &oco, &oci) == WPK_OK);
    CHECK(te_bind(st, oco, "blockIdx.x") == WPK_OK);
    CHECK(te_bind(st, oh, "blockIdx.y") == WPK_OK);
    CHECK(te_bind(st, oci, "threadIdx.x") == WPK_OK);
    SCHED_IS(f.s,
        "schedule outputs: conv\n"
        "stage conv.pad (global): root\n"
        "  float32[1, 4, 8, 8] conv.pad[n, c, h, w] = select(1 <= h && h < 7 && 1 <= w && w < "
        "7, x[n, c, min(max(h - 1, 0), 5), min(max(w - 1, 0), 5)], 0.0)\n"
        "  loops: n<1, c<4, h<8, w<8\n"
        "stage conv (global, output): root\n"
        "  float32[1, 8, 6, 6] conv[n, oc, oh, ow] = sum(rc<4, kh<3, kw<3: conv.pad[n, rc, oh "
        "+ kh, ow + kw] * w[oc, rc, kh, kw])\n"
        "  split oc<8 by 4 -> oc_o<2, oc_i<4\n"
        "  loops: n<1, oc_o<2 bind(blockIdx.x), oc_i<4 bind(threadIdx.x), oh<6 "
        "bind(blockIdx.y), ow<6, rc<4 reduce, kh<3 reduce, kw<3 reduce\n");
    CHECK_REJECT(f.s, te_bind(st, ow, "threadIdx.x"),
                 "bind: 'threadIdx.x' is already bound to axis 'oc_i' of stage 'conv'");
    CHECK_REJECT(f.s, te_bind(st, ow, "warp.x"),
                 "bind: tag 'warp.x' for stage 'conv' is not blockIdx.x/y/z or threadIdx.x/y/z");
    CHECK_REJECT(f.s, te_bind(st, oh, "blockIdx.z"),
                 "bind: axis 'oh' of stage 'conv' is already bound to blockIdx.y");
    CHECK_REJECT(f.s, te_bind(st, raxis(st, 0), "threadIdx.y"),
                 "bind: axis 'rc' of stage 'conv' is a reduction axis");
    CHECK_REJECT(f.s, te_split(st, oh, 2, NULL, NULL),
                 "split: axis 'oh' of stage 'conv' is already bound");
}

static void test_placement(void) {
    conv_fixture f = make_conv(true);
    /* pad inlined into the reduction; the reduction inside the epilogue's row loop, on the stack */
    te_iter *oh = axis(f.ep, 2), *ow = axis(f.ep, 3), *owo, *owi;
    CHECK(te_split(f.ep, ow, 3, &owo, &owi) == WPK_OK);
    CHECK(te_compute_inline(f.pad) == WPK_OK);
    CHECK(te_compute_at(f.acc, f.ep, owo) == WPK_OK);
    CHECK(te_set_scope(f.acc, "local") == WPK_OK);
    SCHED_IS(f.s,
        "schedule outputs: conv\n"
        "stage conv.pad (global): inline\n"
        "  float32[1, 4, 8, 8] conv.pad[n, c, h, w] = select(1 <= h && h < 7 && 1 <= w && w < "
        "7, x[n, c, min(max(h - 1, 0), 5), min(max(w - 1, 0), 5)], 0.0)\n"
        "  loops: n<1, c<4, h<8, w<8\n"
        "stage conv.acc (local): compute_at conv, ow_o\n"
        "  float32[1, 8, 6, 6] conv.acc[n, oc, oh, ow] = sum(rc<4, kh<3, kw<3: conv.pad[n, rc, "
        "oh + kh, ow + kw] * w[oc, rc, kh, kw])\n"
        "  loops: n<1, oc<8, oh<6, ow<6, rc<4 reduce, kh<3 reduce, kw<3 reduce\n"
        "stage conv (global, output): root\n"
        "  float32[1, 8, 6, 6] conv[n, oc, oh, ow] = max(conv.acc[n, oc, oh, ow] + b[oc], 0.0)\n"
        "  split ow<6 by 3 -> ow_o<2, ow_i<3\n"
        "  loops: n<1, oc<8, oh<6, ow_o<2, ow_i<3\n");

    CHECK_REJECT(f.s, te_compute_at(f.acc, f.ep, axis(f.acc, 2)),
                 "compute_at: stage 'conv.acc' cannot be computed inside 'conv' at 'oh' (not a "
                 "leaf of that stage)");
    CHECK_REJECT(f.s, te_compute_at(f.acc, f.acc, axis(f.acc, 2)),
                 "compute_at: stage 'conv.acc' cannot be computed inside itself");
    CHECK_REJECT(f.s, te_compute_at(f.ep, f.acc, raxis(f.acc, 0)),
                 "compute_at: stage 'conv' is an output");
    CHECK_REJECT(f.s, te_compute_inline(f.acc), "compute_inline: stage 'conv.acc' is a reduction");
    CHECK_REJECT(f.s, te_compute_inline(f.ep), "compute_inline: stage 'conv' is an output");
    CHECK_REJECT(f.s, te_set_scope(f.ep, "local"),
                 "set_scope: stage 'conv' is an output (its scope is global)");
    CHECK_REJECT(f.s, te_set_scope(f.acc, "texture"),
                 "set_scope: unknown scope 'texture' for stage 'conv.acc'");
    /* the attach point is pinned: it cannot be split or fused away */
    CHECK_REJECT(f.s, te_split(f.ep, owo, 2, NULL, NULL),
                 "split: stage 'conv.acc' is computed at axis 'ow_o' of stage 'conv'");
    CHECK_REJECT(f.s, te_fuse(f.ep, oh, owo, NULL),
                 "fuse: stage 'conv.acc' is computed at axis 'ow_o' of stage 'conv'");

    /* a consumer must read the stage, directly or through others */
    conv_fixture g = make_conv(true);
    CHECK(te_compute_at(g.pad, g.acc, raxis(g.acc, 0)) == WPK_OK);
    CHECK_REJECT(g.s, te_compute_at(g.acc, g.pad, axis(g.pad, 2)),
                 "compute_at: stage 'conv.pad' does not read 'conv.acc'");
    CHECK(te_compute_at(g.pad, g.ep, axis(g.ep, 1)) == WPK_OK); /* reads it through conv.acc */
    CHECK(g.pad->attach_stage == g.ep && g.pad->attach_iter == axis(g.ep, 1));
}

/* x -> a -> b -> out, all elementwise: a computed inside b pins b. */
static void test_inline_chain(void) {
    fresh();
    te_tensor *x = te_placeholder(&C, "x", TE_F32, SHAPE(16));
    te_tensor *t = x, *chain[3];
    static const char *const names[3] = {"a", "b", "out"};
    for (int i = 0; i < 3; i++) {
        te_iter **ax = te_compute_axes(&C, SHAPE(16), NULL);
        const te_expr *v = te_load(&C, t, 1, (const te_expr *[]){te_var(&C, ax[0])});
        t = chain[i] = te_compute(&C, names[i], SHAPE(16), ax, te_add(&C, v, te_float(&C, 1.0)));
    }
    te_schedule *s = te_schedule_create(&C, &chain[2], 1);
    te_stage *a = te_stage_of(s, chain[0]), *b = te_stage_of(s, chain[1]);
    te_stage *out = te_stage_of(s, chain[2]);
    te_iter *o, *i;
    CHECK(te_split(out, chain[2]->axes[0], 8, &o, &i) == WPK_OK);
    CHECK(te_compute_at(a, b, chain[1]->axes[0]) == WPK_OK);
    CHECK_REJECT(s, te_compute_inline(b),
                 "compute_inline: stage 'a' is computed inside stage 'b'");
    CHECK(te_compute_inline(a) == WPK_OK && te_compute_inline(b) == WPK_OK);
    CHECK_REJECT(s, te_compute_at(a, b, chain[1]->axes[0]),
                 "compute_at: stage 'a' cannot be computed inside 'b' (it is inlined)");
    CHECK(te_vectorize(out, i) == WPK_OK);
    SCHED_IS(s,
        "schedule outputs: out\n"
        "stage a (global): inline\n"
        "  float32[16] a[i0] = x[i0] + 1.0\n"
        "  loops: i0<16\n"
        "stage b (global): inline\n"
        "  float32[16] b[i0] = a[i0] + 1.0\n"
        "  loops: i0<16\n"
        "stage out (global, output): root\n"
        "  float32[16] out[i0] = b[i0] + 1.0\n"
        "  split i0<16 by 8 -> i0_o<2, i0_i<8\n"
        "  loops: i0_o<2, i0_i<8 vectorize\n");
}

static void test_cache_write(void) {
    conv_fixture f = make_conv(false);
    te_tensor *local = NULL;
    CHECK(te_cache_write(f.s, f.out, "local", &local) == WPK_OK);
    CHECK(local && !strcmp(local->name, "conv.local") && f.s->nstages == 3);
    te_stage *ls = te_stage_of(f.s, local), *os = te_stage_of(f.s, f.out);
    CHECK(ls && os && f.s->stages[1] == ls && f.s->stages[2] == os && os->is_output);
    CHECK(os->nleaves == 4 && ls->nleaves == 7);
    CHECK(!strcmp(ls->scope, "local"));
    /* the copy-out tiled, the accumulator computed per tile */
    te_iter *oco, *oci;
    CHECK(te_split(os, axis(os, 1), 4, &oco, &oci) == WPK_OK);
    CHECK(te_reorder(os, 5, (te_iter *const[]){axis(os, 0), oco, axis(os, 2), axis(os, 3), oci}) ==
          WPK_OK);
    CHECK(te_compute_at(ls, os, axis(os, 3)) == WPK_OK);
    CHECK(te_vectorize(ls, axis(ls, 1)) == WPK_OK);
    SCHED_IS(f.s,
        "schedule outputs: conv\n"
        "stage conv.pad (global): root\n"
        "  float32[1, 4, 8, 8] conv.pad[n, c, h, w] = select(1 <= h && h < 7 && 1 <= w && w < "
        "7, x[n, c, min(max(h - 1, 0), 5), min(max(w - 1, 0), 5)], 0.0)\n"
        "  loops: n<1, c<4, h<8, w<8\n"
        "stage conv.local (local): compute_at conv, ow\n"
        "  float32[1, 8, 6, 6] conv.local[n, oc, oh, ow] = sum(rc<4, kh<3, kw<3: conv.pad[n, "
        "rc, oh + kh, ow + kw] * w[oc, rc, kh, kw])\n"
        "  loops: n<1, oc<8 vectorize, oh<6, ow<6, rc<4 reduce, kh<3 reduce, kw<3 reduce\n"
        "stage conv (global, output): root\n"
        "  float32[1, 8, 6, 6] conv[n, oc, oh, ow] = conv.local[n, oc, oh, ow]\n"
        "  split oc<8 by 4 -> oc_o<2, oc_i<4\n"
        "  loops: n<1, oc_o<2, oh<6, ow<6, oc_i<4\n");

    CHECK_REJECT(f.s, te_cache_write(f.s, f.x, "local", NULL),
                 "cache_write: 'x' is not an output of a stage");
    CHECK_REJECT(f.s, te_cache_write(f.s, f.out, "local", NULL),
                 "cache_write: stage 'conv' is already scheduled");
    conv_fixture g = make_conv(false);
    CHECK_REJECT(g.s, te_cache_write(g.s, g.out, "l1", NULL),
                 "cache_write: unknown scope 'l1' for 'conv'");
    CHECK(te_compute_at(g.pad, g.acc, raxis(g.acc, 0)) == WPK_OK);
    CHECK_REJECT(g.s, te_cache_write(g.s, g.out, "local", NULL),
                 "cache_write: stage 'conv.pad' is computed inside stage 'conv'");
}

static void test_cache_read(void) {
    conv_fixture f = make_conv(false);
    te_tensor *packed = NULL;
    CHECK(te_cache_read(f.s, f.w, "packed", &f.out, 1, &packed) == WPK_OK);
    CHECK(packed && !strcmp(packed->name, "w.packed") && f.s->nstages == 3);
    CHECK(f.s->stages[1] == te_stage_of(f.s, packed));
    /* a second copy of the same tensor gets a name of its own */
    te_tensor *again = NULL;
    CHECK(te_cache_read(f.s, f.x, "shared", (te_tensor *const[]){f.parts.pad}, 1, &again) ==
          WPK_OK);
    CHECK(again && !strcmp(again->name, "x.shared") && f.s->stages[0] == te_stage_of(f.s, again));
    SCHED_IS(f.s,
        "schedule outputs: conv\n"
        "stage x.shared (shared): root\n"
        "  float32[1, 4, 6, 6] x.shared[i0, i1, i2, i3] = x[i0, i1, i2, i3]\n"
        "  loops: i0<1, i1<4, i2<6, i3<6\n"
        "stage conv.pad (global): root\n"
        "  float32[1, 4, 8, 8] conv.pad[n, c, h, w] = select(1 <= h && h < 7 && 1 <= w && w < "
        "7, x.shared[n, c, min(max(h - 1, 0), 5), min(max(w - 1, 0), 5)], 0.0)\n"
        "  loops: n<1, c<4, h<8, w<8\n"
        "stage w.packed (packed): root\n"
        "  float32[8, 4, 3, 3] w.packed[i0, i1, i2, i3] = w[i0, i1, i2, i3]\n"
        "  loops: i0<8, i1<4, i2<3, i3<3\n"
        "stage conv (global, output): root\n"
        "  float32[1, 8, 6, 6] conv[n, oc, oh, ow] = sum(rc<4, kh<3, kw<3: conv.pad[n, rc, oh "
        "+ kh, ow + kw] * w.packed[oc, rc, kh, kw])\n"
        "  loops: n<1, oc<8, oh<6, ow<6, rc<4 reduce, kh<3 reduce, kw<3 reduce\n");

    CHECK_REJECT(f.s, te_cache_read(f.s, f.x, "packed", &f.out, 1, NULL),
                 "cache_read: stage 'conv' does not read 'x'");
    CHECK_REJECT(f.s, te_cache_read(f.s, f.w, "packed", NULL, 0, NULL),
                 "cache_read: no readers given for 'w'");
    CHECK_REJECT(f.s, te_cache_read(f.s, packed, "disk", &f.out, 1, NULL),
                 "cache_read: unknown scope 'disk' for 'w.packed'");
    CHECK_REJECT(f.s, te_cache_read(f.s, packed, "local", (te_tensor *const[]){f.out, f.out}, 2,
                                    NULL),
                 "cache_read: reader 'conv' of 'w.packed' is listed twice");
    CHECK_REJECT(f.s, te_cache_read(f.s, packed, "local", &f.w, 1, NULL),
                 "cache_read: reader 'w' of 'w.packed' is not a stage of this schedule");
}

static void test_create_fails(void) {
    fresh();
    te_tensor *x = te_placeholder(&C, "x", TE_F32, SHAPE(4));
    CHECK(te_schedule_create(&C, &x, 1) == NULL);
    CHECK_ERR(ctx, ctx->status, WPK_ERR_INVALID_ARG, "schedule: output 0 'x' is not a compute");
    /* two computes sharing an axis would share a loop variable */
    te_iter **ax = te_compute_axes(&C, SHAPE(4), NULL);
    const te_expr *xi = te_load(&C, x, 1, (const te_expr *[]){te_var(&C, ax[0])});
    te_tensor *a = te_compute(&C, "a", SHAPE(4), ax, xi);
    te_tensor *b = te_compute(&C, "b", SHAPE(4), ax,
                              te_load(&C, a, 1, (const te_expr *[]){te_var(&C, ax[0])}));
    wpk_clear_error(ctx);
    CHECK(a && b && te_schedule_create(&C, &b, 1) == NULL);
    CHECK_ERR(ctx, ctx->status, WPK_ERR_INVALID_ARG,
              "schedule: axis 'i0' belongs to both 'a' and 'b'");
}

int main(void) {
    ctx = wpk_context_create();
    te_ctx_init(&C, ctx);
    test_default();
    test_loop_primitives();
    test_bind();
    test_placement();
    test_inline_chain();
    test_cache_write();
    test_cache_read();
    test_create_fails();
    te_ctx_free(&C);
    wpk_context_free(ctx);
    CHECK_DONE();
}
