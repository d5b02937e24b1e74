/* test_conv_defaults.c -- conv2d_nchwc's default configs on the conv shapes of real models
 * (MobileNetV2, ResNet-18/50 and SqueezeNet 1.1 at 224x224, batch 1: stems, depthwise and
 * pointwise convs at each image size, odd sizes), each as the layout pass's blocked ConvNCHWc
 * and as a plain NCHW Conv: the default is legal for the workload's space, builds and lowers,
 * and keeps to the rules the defaults were measured by (default_config in
 * src/kernels/conv2d_nchwc.c): a register tile of at most 16 accumulators (12 on
 * AVX2; 28 on blocked tensors over a reduction of 128 or more), two output rows but where an
 * odd row count would waste a row (one row of half the accumulators or fewer then spans two
 * channel blocks, or, a quarter or fewer, takes four rows and whole channel blocks per thread
 * where there are 8 or more), few pixels computed past the image's edge; on AVX-512, channel
 * pairs (2 rows x 7 columns x 2 channel blocks) where the output blocks pair up over a
 * blocked input and a reduction of 64 or more; the input read in place (no padded copy) but by
 * depthwise convs on NCHW input; a partial last output block (24, 1000 channels) in a tile of its
 * own, channel blocks alone in parallel. The tile's rows and columns were measured on AVX-512; with
 * fewer accumulators (AVX2, or WPK_VECTOR_FLOATS=8 or 4 here, as ctest also runs it) a 7-column row
 * no longer fits twice and the template trades waste for rows differently, so there the budget and
 * the other knobs are checked, not the tile's shape.
 * test_conv_templates runs defaults against the reference kernels on small odd shapes; this
 * one covers the sizes that untuned models run. */
#include <stdlib.h>

#include "base/target.h"
#include "check.h"
#include "ir/graph.h"
#include "loop/lower.h"
#include "ops/blocked.h"
#include "kernels/provider.h"
#include "kernels/conv.h"

typedef struct shape {
    const char *name;
    int64_t c, h, k, r, stride, pad, group;  /* square images and kernels */
} shape;

static const shape SHAPES[] = {
    /* MobileNetV2 */
    {"mbv2 stem", 3, 224, 32, 3, 2, 1, 1},
    {"mbv2 dw 112", 32, 112, 32, 3, 1, 1, 32},
    {"mbv2 pw 112 project", 32, 112, 16, 1, 1, 0, 1},
    {"mbv2 pw 112 expand", 16, 112, 96, 1, 1, 0, 1},
    {"mbv2 dw 112 s2", 96, 112, 96, 3, 2, 1, 96},
    {"mbv2 pw 56 project", 96, 56, 24, 1, 1, 0, 1},
    {"mbv2 pw 56 expand", 24, 56, 144, 1, 1, 0, 1},
    {"mbv2 pw 56 project 144", 144, 56, 24, 1, 1, 0, 1},
    {"mbv2 dw 56", 144, 56, 144, 3, 1, 1, 144},
    {"mbv2 dw 56 s2", 144, 56, 144, 3, 2, 1, 144},
    {"mbv2 pw 28 project", 144, 28, 32, 1, 1, 0, 1},
    {"mbv2 dw 28", 192, 28, 192, 3, 1, 1, 192},
    {"mbv2 dw 28 s2", 192, 28, 192, 3, 2, 1, 192},
    {"mbv2 pw 14 expand", 64, 14, 384, 1, 1, 0, 1},
    {"mbv2 dw 14", 576, 14, 576, 3, 1, 1, 576},
    {"mbv2 dw 14 s2", 576, 14, 576, 3, 2, 1, 576},
    {"mbv2 dw 7", 960, 7, 960, 3, 1, 1, 960},
    {"mbv2 pw 7 project", 960, 7, 320, 1, 1, 0, 1},
    {"mbv2 pw 7 head", 320, 7, 1280, 1, 1, 0, 1},
    /* ResNet-18/50 */
    {"resnet stem 7x7", 3, 224, 64, 7, 2, 3, 1},
    {"resnet 3x3 56", 64, 56, 64, 3, 1, 1, 1},
    {"resnet 3x3 56 s2", 64, 56, 128, 3, 2, 1, 1},
    {"resnet 1x1 56 s2", 64, 56, 128, 1, 2, 0, 1},
    {"resnet 3x3 28", 128, 28, 128, 3, 1, 1, 1},
    {"resnet 3x3 14", 256, 14, 256, 3, 1, 1, 1},
    {"resnet 3x3 7", 512, 7, 512, 3, 1, 1, 1},
    {"resnet50 1x1 56", 256, 56, 64, 1, 1, 0, 1},
    {"resnet50 1x1 7 expand", 512, 7, 2048, 1, 1, 0, 1},
    /* SqueezeNet 1.1: odd sizes, no padding on the stem */
    {"squeezenet stem", 3, 224, 64, 3, 2, 0, 1},
    {"squeezenet squeeze 55", 64, 55, 16, 1, 1, 0, 1},
    {"squeezenet expand 3x3 55", 16, 55, 64, 3, 1, 1, 1},
    {"squeezenet expand 3x3 27", 32, 27, 128, 3, 1, 1, 1},
    {"squeezenet expand 3x3 13", 64, 13, 256, 3, 1, 1, 1},
    {"squeezenet classifier 13", 512, 13, 1000, 1, 1, 0, 1},
};
#define NSHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

/* The node of one shape with its tensors (X, W, Y); W has data (zeros) so that the NCHW
 * template pre-packs it, as it does for a model's constant weights. */
typedef struct node_case {
    ir_graph *g;
    ir_node *node;
    ir_tensor t[3];
    ir_tensor *in[3], *out[1];
} node_case;

static bool make_node(wpk_context *ctx, const shape *s, bool blocked, node_case *nc) {
    memset(nc, 0, sizeof *nc);
    nc->g = ir_graph_create();
    if (!nc->g) return false;
    int k = ir_graph_add_node(nc->g, s->name, blocked ? "ConvNCHWc" : "Conv",
                              blocked ? "wpk" : "", blocked ? 1 : 17, 2, 1);
    ir_node *n = nc->node = &nc->g->nodes[k];
    ir_node_set_ints(nc->g, n, "strides", (const int64_t[]){s->stride, s->stride}, 2);
    ir_node_set_ints(nc->g, n, "pads", (const int64_t[]){s->pad, s->pad, s->pad, s->pad}, 4);
    ir_node_set_int(nc->g, n, "group", s->group);
    const int64_t cg = s->c / s->group;
    const bool dw = s->group > 1 && cg == 1 && s->group == s->k;
    ir_tensor *x = &nc->t[0], *w = &nc->t[1];
    if (blocked) {
        /* as the layout pass blocks them: a vector's lanes, the 3-channel stem read as NCHW */
        const int64_t lanes = tune_vector_floats();
        const int64_t bi = s->c < lanes ? 1 : lanes, bo = lanes;
        ir_node_set_int(nc->g, n, "channels", s->k);
        if (bi == 1) *x = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {1, s->c, s->h, s->h}, NULL};
        else
            *x = (ir_tensor){WPK_DTYPE_FLOAT32, 5, {1, (s->c + bi - 1) / bi, s->h, s->h, bi},
                             NULL};
        *w = (ir_tensor){WPK_DTYPE_FLOAT32, 6, {0}, NULL};
        blocked_weight_dims(s->k, cg, s->r, s->r, bi, bo, dw, w->dims);
    } else {
        *x = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {1, s->c, s->h, s->h}, NULL};
        *w = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {s->k, cg, s->r, s->r}, NULL};
    }
    w->data = calloc((size_t)ir_numel(w), sizeof(float));
    nc->in[0] = x, nc->in[1] = w, nc->out[0] = &nc->t[2];
    if (!w->data || ir_op_get(n->op)->shape(ctx, n, nc->in, nc->out)) {
        fprintf(stderr, "%s: shape: %s\n", s->name, wpk_context_error(ctx));
        return false;
    }
    return true;
}

static void free_node(node_case *nc) {
    free(nc->t[1].data);
    ir_graph_free(nc->g);
}

/* The default of one node: legal, builds, lowers, and follows the rules. */
static void check_default(wpk_context *ctx, const shape *s, bool blocked) {
    node_case nc;
    bool made = make_node(ctx, s, blocked, &nc);
    CHECK(made);
    const kernel_provider *t = &tune_conv2d_nchwc;
    if (!made || !t->supports(t, nc.node, nc.in, nc.out)) {
        fprintf(stderr, "%s (%s): conv2d_nchwc does not take it\n", s->name,
                blocked ? "ConvNCHWc" : "Conv");
        CHECK(!"conv2d_nchwc takes every shape of the table");
        if (made) free_node(&nc);
        return;
    }
    tune_task task;
    tune_task_init(&task, t, nc.node, nc.in, nc.out);
    tune_space sp;
    t->space(t, &task, &sp);
    tune_config cfg;
    t->default_config(t, &task, &sp, &cfg);
    strbuf cs = {0};
    tune_config_print(&sp, &cfg, &cs);
    char what[640];
    snprintf(what, sizeof what, "%s (%s) [%s]", s->name, blocked ? "ConvNCHWc" : "Conv",
             cs.s ? cs.s : "");
    sb_free(&cs);

    /* legal (build checks every knob against the workload's space) and lowerable */
    te_ctx c;
    te_ctx_init(&c, ctx);
    tune_build b;
    wpk_status st = t->build(t, &c, &task, &sp, &cfg, &b);
    if (st) fprintf(stderr, "%s: build: %s\n", what, wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    loop_func *f = NULL;
    if (!st) {
        st = loop_lower(&c, b.schedule, "conv", b.args, b.nargs, &f);
        if (st) fprintf(stderr, "%s: lower: %s\n", what, wpk_context_error(ctx));
        CHECK(st == WPK_OK && f);
    }
    te_ctx_free(&c);

    /* the rules */
    tune_conv g;
    CHECK(tune_conv_read_task(&task, &g));
    const int64_t owb = tune_value(&sp, &cfg, "ow_block"), ohb = tune_value(&sp, &cfg, "oh_block");
    const int64_t oct = tune_value(&sp, &cfg, "oc_tile");
    const int64_t reduction = g.cg * g.kh * g.kw;
    const bool wide = tune_vector_floats() >= 16 && blocked && !g.depthwise && reduction >= 128;
    const int64_t budget = tune_vector_floats() >= 16 ? (wide ? 28 : 16) : 12;
    /* a stem of 5x5 taps or more on AVX2: 2 columns x 4 rows over a padded copy, the input
     * channels outermost, the taps rolled (measured there against the tile of the rules
     * below) */
    if (budget < 16 && !g.depthwise && tune_value(&sp, &cfg, "ic_block") == 1 && g.kh >= 5 &&
        g.kw >= 5) {
        bool stem = owb == 2 && ohb == 4 && oct == 1 &&
                    tune_value(&sp, &cfg, "unroll_kw") == 0 &&
                    tune_value(&sp, &cfg, "order") == 0 &&
                    tune_value(&sp, &cfg, "pad_copy") == (s->pad > 0) &&
                    tune_value(&sp, &cfg, "parallel") == 0;
        if (!stem) fprintf(stderr, "%s: breaks the rule of the AVX2 stems\n", what);
        CHECK(stem);
        free_node(&nc);
        return;
    }
    /* a partial last output block (24 or 1000 channels in blocks of 16): one block per tile
     * and channel blocks alone in the parallel loop, so that loop partitioning peels the
     * partial block off the full ones -- where the blocks of all images give every core one */
    const int64_t blocks = blocked ? (g.cout + g.bo - 1) / g.bo : 0;
    if (blocked && g.cout % g.bo != 0 && g.n * blocks >= target_cores()) {
        bool peel = oct == 1 && tune_value(&sp, &cfg, "parallel") == 1 &&
                    owb * ohb <= budget && owb <= g.ow &&
                    tune_value(&sp, &cfg, "pad_copy") == 0 &&
                    tune_value(&sp, &cfg, "unroll_kw") == (s->r > 1);
        if (!peel) fprintf(stderr, "%s: breaks the rule of partial channel blocks\n", what);
        CHECK(peel);
        free_node(&nc);
        return;
    }
    /* channel pairs: 2 rows x 7 columns (or the image's fewer) x 2 blocks where the blocks
     * pair up over a blocked input and a reduction of 64 or more, but for the four-row 3x3
     * convs of a narrow image; pairs in parallel where there are four tile rows or fewer */
    const bool four_rule = wide && g.ow <= 7 && g.oh >= 4 && g.oh % 2 == 1 && blocks >= 8;
    if (tune_vector_floats() >= 16 && blocked && g.bo == tune_vector_floats() && !g.depthwise &&
        g.cg >= 16 && reduction >= 64 && blocks % 2 == 0 && g.oh >= 2 &&
        !(four_rule && g.kh * g.kw > 1)) {
        const bool par_pairs = (g.oh + 1) / 2 <= 4 && blocks / 2 >= 8;
        bool pairs = oct == 2 && ohb == 2 && owb == (g.ow < 7 ? g.ow : 7) &&
                     tune_value(&sp, &cfg, "parallel") == (par_pairs ? 1 : 0) &&
                     tune_value(&sp, &cfg, "pad_copy") == 0 &&
                     tune_value(&sp, &cfg, "unroll_kw") == (s->r > 1);
        if (!pairs) fprintf(stderr, "%s: breaks the rule of channel pairs\n", what);
        CHECK(pairs);
        free_node(&nc);
        return;
    }
    bool ok = owb * ohb * oct <= budget, tile = true;
    /* a one-row tile of half the accumulators or fewer takes a second channel block, where
     * the blocks pair up (blocked tensors: on NCHW ones oc_block 32 is that tile) */
    ok &= oct == (blocked && !g.depthwise && blocks % 2 == 0 && ohb == 1 && 2 * owb <= budget
                      ? 2 : 1);
    /* two rows (the copy-out loops over them) on even row counts and wherever the
     * reduction is short; few pixels computed past the image's edge where it is long; four
     * rows of a narrow image with many channel blocks, those in parallel */
    const bool four = ohb == 4;
    ok &= !four || (wide && 4 * owb <= budget && blocks >= 8);
    const double computed = (double)((g.oh + ohb - 1) / ohb * ohb) *
                            (double)((g.ow + owb - 1) / owb * owb) / (double)(g.oh * g.ow);
    if (four) tile &= g.oh % 2 == 1 && computed <= 1.15;
    else if (g.oh % 2 == 0 || reduction < 128) tile &= ohb == 2;
    else tile &= computed <= 1.08;
    tile &= computed <= 1.2;
    ok &= owb <= g.ow && (budget < 16 || tile);
    bool padded = s->pad > 0, nchw_dw = g.depthwise && !blocked;
    ok &= tune_value(&sp, &cfg, "pad_copy") == (padded && nchw_dw ? 1 : 0);
    ok &= tune_value(&sp, &cfg, "parallel") == (four ? 1 : 0);
    ok &= tune_value(&sp, &cfg, "unroll_kw") == (s->r > 1);
    if (!ok) fprintf(stderr, "%s: breaks a rule of the defaults (oh %lld, ow %lld)\n", what,
                     (long long)g.oh, (long long)g.ow);
    CHECK(ok);
    free_node(&nc);
}

int main(void) {
    wpk_context *ctx = wpk_context_create();
    CHECK(ctx);
    if (!ctx) return 1;
    for (int i = 0; i < NSHAPES; i++) {
        check_default(ctx, &SHAPES[i], true);
        check_default(ctx, &SHAPES[i], false);
    }
    wpk_context_free(ctx);
    CHECK_DONE();
}
