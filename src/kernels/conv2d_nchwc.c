/* conv2d_nchwc.c -- the blocked-layout convolution template: Conv / FusedConv with constant
 * weights, and the layout pass's ConvNCHWc, as a direct conv over channel blocks of
 * oc_block lanes (te/algo/conv2d_nchwc.h) with a register-tiled schedule.
 *
 * The schedule (TVM's x86 conv schedule, as knobs): the output is tiled into oh_block x
 * ow_block pixels x one channel block; the tile's accumulator is a "local" stage computed at
 * the tile loop, its reduction (input blocks, taps, input lanes) outside and the tile inside,
 * pixels unrolled and the block's lanes vectorized, so every step broadcasts one input value
 * and multiplies it by one vector of packed weights into ow_block x oh_block register
 * accumulators. On blocked tensors, whose block size the layout pass fixed, the tile can span
 * oc_tile channel blocks: each broadcast then feeds oc_tile weight vectors (a 7-column output
 * row fills 14 accumulators without computing an eighth row). The epilogue (bias, residual,
 * activation) runs as the tile is copied out, in the same loop nest. Images x tiles of
 * channel blocks x tile rows run in parallel.
 *
 * For NCHW nodes the kernel reads X in NCHW and writes Y in NCHW: the input either goes
 * straight into the conv (ic_block 1: one broadcast per input channel, no transform) or
 * through a blocked padded copy (the transform and the padding in one pass); the output is
 * transposed from the blocked accumulator as it is copied out. Weights are packed at compile
 * time (tune_build.prepack). ConvNCHWc nodes come with blocked tensors and packed weights,
 * which fix both block sizes. */
#include <string.h>

#include "base/target.h"
#include "te/algo/conv2d_nchwc.h"
#include "kernels/common.h"
#include "kernels/conv.h"

#define NAME "conv2d_nchwc"

enum { ORDER_IC_OUTER, ORDER_TAPS_OUTER };
enum { PAR_ROWS, PAR_BLOCKS };

/* ow_block's values. */
static const int64_t OWS[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 20, 24, 28};
#define NOWS ((int)(sizeof OWS / sizeof OWS[0]))

/* Blocked kernels waste most of their lanes on fewer output channels than this. */
#define MIN_CHANNELS 8

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out) {
    (void)self;
    tune_conv g;
    if (!tune_conv_read(n, in, out, &g)) return false;
    if (g.op == IR_OP_CONV_NCHWC) return true;
    if (!g.wconst || g.cout < MIN_CHANNELS) return false;
    /* grouped convs need whole output blocks per group (depthwise: lane i reads channel i) */
    if (g.p.groups > 1 && !g.depthwise) return (g.cout / g.p.groups) % MIN_CHANNELS == 0;
    return true;
}

static void describe(const kernel_provider *self, tune_task *t) {
    (void)self;
    tune_conv g;
    if (tune_conv_read_task(t, &g)) tune_conv_describe(NAME, &g, t);
}

/* Values from `cand` that pass `ok` (at least `fallback` when none does). */
static void add_filtered(tune_space *s, const char *name, const int64_t *cand, int ncand,
                         const tune_conv *g, bool (*ok)(const tune_conv *, int64_t),
                         int64_t fallback) {
    int64_t v[TUNE_MAX_VALUES];
    int n = 0;
    for (int i = 0; i < ncand && n < TUNE_MAX_VALUES; i++)
        if (ok(g, cand[i])) v[n++] = cand[i];
    if (!n) v[n++] = fallback;
    tune_space_add(s, name, n, v);
}

static bool oc_ok(const tune_conv *g, int64_t b) {
    if (g->p.groups > 1 && !g->depthwise) return (g->cout / g->p.groups) % b == 0;
    return b <= (g->cout + 7) / 8 * 8;
}

/* Input blocks must not straddle groups; 1 reads X as NCHW without a transform. */
static bool ic_ok(const tune_conv *g, int64_t b) { return b == 1 || g->cg % b == 0; }
static bool ow_ok(const tune_conv *g, int64_t b) { return b <= g->ow; }
static bool oh_ok(const tune_conv *g, int64_t b) { return b <= g->oh; }

/* Channel blocks per register tile: whole tiles only (ConvNCHWc; on NCHW tensors oc_block 32
 * is the same tile). */
static int64_t channel_blocks(const tune_conv *g) { return (g->cout + g->bo - 1) / g->bo; }
static bool oct_ok(const tune_conv *g, int64_t b) {
    return b == 1 || (g->op == IR_OP_CONV_NCHWC && !g->depthwise && channel_blocks(g) % b == 0);
}

static void space(const kernel_provider *self, const tune_task *t, tune_space *s) {
    (void)self;
    memset(s, 0, sizeof *s);
    tune_conv g;
    if (!tune_conv_read_task(t, &g)) return;
    static const int64_t blocks[] = {8, 16, 32}, iblocks[] = {1, 4, 8, 16, 32};
    static const int64_t ohs[] = {1, 2, 4}, octs[] = {1, 2}, flag[] = {0, 1}, one[] = {1};
    if (g.op == IR_OP_CONV_NCHWC) {
        tune_space_add(s, "ic_block", 1, &g.bi);
        tune_space_add(s, "oc_block", 1, &g.bo);
    } else {
        /* depthwise: ic_block follows oc_block (lane i of a block reads lane i) */
        if (g.depthwise) tune_space_add(s, "ic_block", 1, (const int64_t[]){0});
        else add_filtered(s, "ic_block", iblocks, 5, &g, ic_ok, 1);
        add_filtered(s, "oc_block", blocks, 3, &g, oc_ok, 8);
    }
    add_filtered(s, "ow_block", OWS, NOWS, &g, ow_ok, 1);
    add_filtered(s, "oh_block", ohs, 3, &g, oh_ok, 1);
    add_filtered(s, "oc_tile", octs, 2, &g, oct_ok, 1);
    tune_space_add(s, "unroll_kw", g.kw > 1 ? 2 : 1, flag);
    /* with no input-channel reduction (depthwise) the order is the taps' alone */
    tune_space_add(s, "order", !g.depthwise && g.kh * g.kw > 1 ? 2 : 1, flag);
    tune_space_add(s, "parallel", 2, flag);
    bool padded = g.p.pad[0] || g.p.pad[1] || g.p.pad[2] || g.p.pad[3];
    tune_space_add(s, "pad_copy", padded ? 2 : 1, padded ? flag : (const int64_t[]){0});
    tune_space_add(s, "pack", 1, one);
}

/* The tile width (one of ow_block's values) with the fewest wasted columns among those that
 * fit `regs` accumulators, preferring wide tiles: most columns per weight load. */
static int64_t pick_ow(int64_t ow, int64_t regs) {
    int64_t best = 1;
    double best_cost = 1e30;
    for (int i = 0; i < NOWS && OWS[i] <= regs && OWS[i] <= ow; i++) {
        const int64_t b = OWS[i];
        int64_t tiles = (ow + b - 1) / b;
        /* cost per output column: weight loads amortized over b, plus the columns wasted in
         * a partial last tile */
        double cost = (double)(tiles * b) / (double)ow * (1.0 + 4.0 / (double)b);
        if (cost < best_cost - 1e-9) best = b, best_cost = cost;
    }
    return best;
}

/* Output pixels computed by tiles of ohb x owb, as a multiple of the oh x ow there are. */
static double computed(int64_t oh, int64_t ohb, int64_t ow, int64_t owb) {
    return (double)((oh + ohb - 1) / ohb * ohb * ((ow + owb - 1) / owb * owb)) /
           (double)(oh * ow);
}

/* A 5x5 or larger stem (few input channels, read plane by plane) on AVX2: its default is its
 * own (default_config). */
static bool stem_avx2(const tune_conv *g, int64_t vec, int64_t ic_block) {
    return vec < 16 && !g->depthwise && ic_block == 1 && g->kh >= 5 && g->kw >= 5 && g->oh >= 4;
}

/* The defaults, from measured tunings (MobileNetV2 and ResNet-18/50 at -O3, batch 1, 2
 * threads, AVX-512; GFLOP/s old default -> this one):
 * - The register tile is oh_block = 2 rows x ow_block columns of about 16 accumulators
 *   (7 or 8 columns); 28 (14 columns) on blocked tensors over a reduction of 128 or more,
 *   and there four rows of a 7-column image (below). One row of 14-16 columns, the old
 *   default, leaves the tile's copy-out
 *   (bias, residual, activation) as straight-line code in which the C compiler does the
 *   activation's min/max lane by lane; a loop over two rows keeps it in vector instructions.
 *   That copy-out is what short reductions spend their time in: depthwise 3x3 (9 taps per
 *   tile) 21 -> 60-95, 1x1 convs with 16-96 input channels 43-153 -> 170-210. Tiles of 28-32
 *   accumulators (14-16 x 2) spilled while the accumulator was emitted as an array (1x1
 *   convs 190 -> 65); as register variables they do not, but are no faster over the slides'
 *   1x1 conv's reduction of 64 (one thread: 8 x 2 162.9 GFLOP/s, 14 x 2 162.1, 28 x 1 159.1,
 *   7 x 2 x oc_tile 2 158.8). Small odd images with long reductions take one row (see below).
 * - Padded convs read the input in place (pad_copy 0): loop partitioning takes the padding
 *   tests out of the interior tiles, and the taps on the padding are dropped where it cannot
 *   (608981e), while the copy is a pass over the whole input. In the records of ResNet-18/50
 *   and MobileNetV2 tuned at -O3 (5136 trials on 30 padded workloads, dense and depthwise,
 *   stride 1 and 2, the stems' NCHW input included), every workload's best config reads in
 *   place, and the in-place trials average 0.74 ms against the copies' 0.90. Blocked depthwise
 *   stride 2 first showed it: 30 -> 75-118 GFLOP/s. Depthwise convs on NCHW input (-O2)
 *   keep the copy (below).
 * - Images x channel blocks x tile rows run in parallel (PAR_ROWS): at batch 1 a layer has as
 *   few as one or two channel blocks, too few to share among threads on their own. The
 *   four-row tiles of a 7x7 image share channel blocks only (PAR_BLOCKS): 8 or more.
 * - On AVX2, a stem of 5x5 taps or more takes a small tile over a padded copy (below). */
static void default_config(const kernel_provider *self, const tune_task *t, const tune_space *s,
                           tune_config *cfg) {
    (void)self;
    memset(cfg, 0, sizeof *cfg);
    tune_conv g;
    if (!tune_conv_read_task(t, &g)) return;
    const int64_t vec = tune_vector_floats();
    tune_config_set(s, cfg, "oc_block", vec);
    int64_t bo = tune_value(s, cfg, "oc_block");
    /* Blocked input when channels fill blocks: the padded copy is the transform. Few input
     * channels (the RGB stem) are read in place. */
    tune_config_set(s, cfg, "ic_block", g.cg >= vec ? vec : 1);
    /* Accumulators: AVX-512 has 32 vector registers, AVX2 16; the rest hold the weight
     * vectors, the broadcast input and (depthwise) the input vectors of the unrolled taps.
     * A blocked tile is emitted as register variables (cg_c), which hold 28 without spilling;
     * over a long reduction the larger tile amortizes each weight load over more pixels:
     * 3x3 convs of ResNet-18 at 28x28 and 14x14, 14 x 2 against 7 x 2, by CPU time against
     * oneDNN: 0.91-0.93 -> 1.01-1.08 (the NCHW form's tile stays an array: 16). */
    const int64_t reduction = g.cg * g.kh * g.kw;
    const bool blocked = g.op == IR_OP_CONV_NCHWC;
    const bool wide = vec >= 16 && blocked && !g.depthwise && reduction >= 128;
    int64_t regs = (vec >= 16 ? (wide ? 28 : 16) : 12) / (bo > vec ? bo / vec : 1);
    if (regs < 1) regs = 1;
    /* Two rows, except where one row wastes clearly less (7x7 and 13x13 outputs: 2-row tiles
     * of 7 columns compute 8x8 and 14x14; 1x1 and 3x3 convs measured 200 -> 170-180) and the
     * reduction is long enough to carry a one-row copy-out. */
    const int64_t ow2 = pick_ow(g.ow, regs / 2), ow1 = pick_ow(g.ow, regs);
    bool two_rows = g.oh >= 2 && regs >= 2 &&
                    (reduction < 128 || computed(g.oh, 2, g.ow, ow2) <=
                                            1.05 * computed(g.oh, 1, g.ow, ow1));
    /* A row of a quarter of the accumulators or fewer (7x7 outputs, the wide budget) takes
     * four rows, the whole image in two tiles, and whole channel blocks per thread (there
     * are 8 or more to share): 512->512 3x3 at 7x7 and 256->512 3x3 stride 2, against oneDNN
     * by CPU time, 0.89-0.96 -> 1.14-1.19 (four rows with tile rows in parallel: 0.96-1.02). */
    const bool four_rows = !two_rows && wide && 4 * ow1 <= regs && g.oh >= 4 &&
                           channel_blocks(&g) >= 8;
    /* Where the output channel blocks pair up, over a blocked input (not the stem's few
     * channels read in place) and a reduction of 64 or more: 2 rows x 7 columns x 2 channel
     * blocks, 28 accumulators, each broadcast input feeding two weight vectors (one load per
     * two FMAs; 14 x 2 of one block loads once per FMA). On a Cascade Lake Xeon (1 MB L2, 2
     * threads), against oneDNN by CPU time: 1x1 56x56 64->64 0.81 -> 0.93, 64->128 stride 2
     * 0.86 -> 0.95, 28x28 128->256 stride 2 0.89 -> 0.99; 3x3 56x56 64->64 0.91 -> 1.00,
     * 64->128 stride 2 0.85 -> 1.00, 14x14 256->256 0.86 -> 0.90. A 7x7 output has four tile
     * rows: channel pairs in parallel (1x1 256->512 stride 2: 0.85 -> 0.94-0.97, tile rows in
     * parallel 0.84-0.85); its 3x3 convs keep four rows (512->512: 1.07-1.08 against
     * 1.01-1.06). The short reductions of MobileNetV2's pointwise convs are not measured. */
    /* A partial last channel block (24 or 1000 channels in blocks of 16) makes every tile
     * that may hold it mask its lanes and clamp its bias index. With channel blocks alone
     * in the parallel loop and one block per tile, loop partitioning peels the last block
     * off and the full ones run without the test. On one thread (Zen 5, AVX-512), wall-clock
     * minimum of the node: 1x1 56x56 96->24 106 -> 81 us, 144->24 162 -> 121 us, 13x13
     * 512->1000 752 -> 711 us. Only where the blocks of all images give every core one. */
    const bool peel_partial = blocked && g.bo > 0 && g.cout % g.bo != 0 &&
                              g.n * channel_blocks(&g) >= target_cores();
    const bool pairs = vec >= 16 && bo == vec && blocked && !g.depthwise && g.cg >= vec &&
                       reduction >= 64 && channel_blocks(&g) % 2 == 0 && g.oh >= 2 &&
                       !(four_rows && g.kh * g.kw > 1) && !peel_partial;
    const bool pairs_in_parallel = pairs && g.n * ((g.oh + 1) / 2) <= 4 &&
                                   channel_blocks(&g) / 2 >= 8;
    tune_config_set(s, cfg, "oh_block", pairs ? 2 : four_rows ? 4 : two_rows ? 2 : 1);
    tune_config_set(s, cfg, "ow_block", pairs ? pick_ow(g.ow, 7) : two_rows ? ow2 : ow1);
    if (pairs) tune_config_set(s, cfg, "oc_tile", 2);
    /* Otherwise a row of half the accumulators or fewer leaves the FMAs waiting on each
     * other; a second channel block fills the tile (measured against oneDNN by CPU time:
     * 512->512 3x3 7x7 0.75-0.79 -> 0.89-0.91, 256->512 3x3 stride 2 0.83-0.85 -> 0.95,
     * 256->512 1x1 stride 2 0.99 -> 1.09). Blocked tensors only (see oct_ok). */
    if (!pairs && !two_rows && !four_rows && !peel_partial &&
        2 * tune_value(s, cfg, "ow_block") <= regs)
        tune_config_set(s, cfg, "oc_tile", 2);
    /* a row's taps unrolled: neighbouring taps share input loads (depthwise 3x3 stride 2:
     * 31 -> 98 GFLOP/s) */
    tune_config_set(s, cfg, "unroll_kw", 1);
    /* Few input blocks (the stem's 3 channels read in place): the taps outside them keep the
     * loop around the tile long (measured: 92 -> 115 GFLOP/s on ResNet's 7x7 stem). */
    int64_t bi = g.depthwise ? 1 : tune_value(s, cfg, "ic_block");
    tune_config_set(s, cfg, "order", (g.cg + bi - 1) / bi < 4 ? ORDER_TAPS_OUTER : ORDER_IC_OUTER);
    tune_config_set(s, cfg, "parallel",
                    (four_rows && !pairs) || pairs_in_parallel || peel_partial ? PAR_BLOCKS
                                                                               : PAR_ROWS);
    /* (except a depthwise conv on an NCHW input: its copy is also the transform to blocks,
     * which read in place would gather every lane from another channel plane: 12.6 -> 7.2) */
    bool gather = g.depthwise && g.op != IR_OP_CONV_NCHWC;
    tune_config_set(s, cfg, "pad_copy", gather ? 1 : 0);
    tune_config_set(s, cfg, "pack", 1);
    /* A large-kernel stem on AVX2 (few input channels read one plane at a time, 16 vector
     * registers): a tile of 2 columns x 4 rows over a padded copy, the input channels
     * outermost, the taps rolled. ResNet-18's 7x7 stride-2 stem on a Zen 3, against oneDNN
     * by CPU time: 0.43 -> 0.74 on one thread, 0.47-0.55 -> 0.72-0.76 on two (the tile above,
     * 6 x 2 with the taps unrolled, is the AVX-512 machines' best). The 3x3 stems are not
     * measured and keep it. */
    if (stem_avx2(&g, vec, tune_value(s, cfg, "ic_block"))) {
        tune_config_set(s, cfg, "ow_block", 2);
        tune_config_set(s, cfg, "oh_block", 4);
        tune_config_set(s, cfg, "oc_tile", 1);
        tune_config_set(s, cfg, "unroll_kw", 0);
        tune_config_set(s, cfg, "order", ORDER_IC_OUTER);
        tune_config_set(s, cfg, "pad_copy", 1);
    }
}

/* ---- build ---- */

typedef struct knobs {
    int64_t bi, bo, owb, ohb, oct;
    bool unroll_kw, pad_copy;
    int order, par;
} knobs;

/* The accumulator stage's loops: n (one at the tile), the reduction in the chosen order, then
 * the tile: rows, columns and channel blocks (oc_tile of them) unrolled, lanes vectorized. */
static wpk_status schedule_acc(te_schedule *s, te_tensor *acc, const knobs *k) {
    te_stage *sa = te_stage_of(s, acc);
    TRY(te_set_scope(sa, "local"));
    te_iter *ocb = acc->axes[1], *oh = acc->axes[2], *ow = acc->axes[3], *oci = acc->axes[4];
    if (acc->body->kind == TE_REDUCE) {
        te_iter *icb = NULL, *kh = NULL, *kw = NULL, *ici = NULL;
        for (int i = 0; i < acc->body->nraxes; i++) {
            te_iter *r = acc->body->raxes[i];
            if (!strcmp(r->name, "icb")) icb = r;
            else if (!strcmp(r->name, "kh")) kh = r;
            else if (!strcmp(r->name, "kw")) kw = r;
            else ici = r;
        }
        te_iter *order[8];
        int n = 0;
        if (k->order == ORDER_TAPS_OUTER) {
            if (kh) order[n++] = kh;
            if (kw) order[n++] = kw;
            if (icb) order[n++] = icb;
        } else {
            if (icb) order[n++] = icb;
            if (kh) order[n++] = kh;
            if (kw) order[n++] = kw;
        }
        if (ici) order[n++] = ici;
        /* channel blocks inside the pixels: a broadcast's oc_tile uses are adjacent, so it
           is live for one pixel, not across the whole tile */
        order[n++] = oh;
        order[n++] = ow;
        order[n++] = ocb;
        order[n++] = oci;
        TRY(te_reorder(sa, n, order));
        if (kw && k->unroll_kw) TRY(te_unroll(sa, kw));
    }
    TRY(te_unroll(sa, oh));
    TRY(te_unroll(sa, ow));
    TRY(te_unroll(sa, ocb));
    return te_vectorize(sa, oci);
}

/* Images, channel blocks and (PAR_ROWS) tile rows fused into one parallel loop. */
static wpk_status parallel_outer(te_stage *st, te_iter *n, te_iter *cb, te_iter *rows, int par) {
    te_iter *f;
    TRY(te_fuse(st, n, cb, &f));
    if (par == PAR_ROWS) TRY(te_fuse(st, f, rows, &f));
    return te_parallel(st, f);
}

/* A root copy (the padded input, the blocked transform) in parallel over images x channel
 * blocks. Rows stay a loop of their own: loop partitioning then takes the padding rows' test
 * out of the interior rows, which a row index fused into the parallel loop would hide. */
static wpk_status schedule_copy(te_schedule *s, te_tensor *t) {
    te_stage *st = te_stage_of(s, t);
    te_iter *f;
    TRY(te_fuse(st, t->axes[0], t->axes[1], &f));
    TRY(te_parallel(st, f));
    /* blocked copies: the lanes are contiguous on both sides when the source is blocked */
    if (t->ndim == 5) TRY(te_vectorize(st, t->axes[4]));
    return WPK_OK;
}

static wpk_status build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                        const tune_space *s,
                        const tune_config *cfg, tune_build *out) {
    memset(out, 0, sizeof *out);
    tune_conv g;
    if (!tune_conv_read_task(t, &g))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, NAME ": node '%s' is not a conv this "
                         "template takes", t->node ? t->node->name : "(null)");
    TRY(tune_check_legal(c, self, t, s, cfg));
    knobs k = {
        .bi = tune_value(s, cfg, "ic_block"), .bo = tune_value(s, cfg, "oc_block"),
        .owb = tune_value(s, cfg, "ow_block"), .ohb = tune_value(s, cfg, "oh_block"),
        .oct = tune_value(s, cfg, "oc_tile"),
        .unroll_kw = tune_value(s, cfg, "unroll_kw") != 0,
        .pad_copy = tune_value(s, cfg, "pad_copy") != 0,
        .order = (int)tune_value(s, cfg, "order"), .par = (int)tune_value(s, cfg, "parallel"),
    };
    if (g.depthwise) k.bi = k.bo;
    const bool blocked = g.op == IR_OP_CONV_NCHWC;
    const int64_t cob = (g.cout + k.bo - 1) / k.bo;
    const ir_tensor *x0 = &t->in[0], *w0 = &t->in[1];

    /* the kernel's arguments */
    te_epilogue ep;
    if (blocked) {
        TRY(tune_conv_args(c, t, &g, x0->dims, x0->ndim, w0->dims, 6, t->out[0].dims, 5, out,
                           &ep));
    } else {
        const int64_t wp[6] = {cob, g.depthwise ? 1 : (g.cg + k.bi - 1) / k.bi, g.kh, g.kw,
                               g.depthwise ? 1 : k.bi, k.bo};
        TRY(tune_conv_args(c, t, &g, x0->dims, 4, wp, 6, t->out[0].dims, 4, out, &ep));
        te_tensor *src = te_placeholder(c, "w.src", TE_F32, 4, w0->dims);
        if (!src) return tune_failed(c, NAME);
        src->constant = true;
        out->prepack_src[1] = src;
        out->prepack[1] = te_conv2d_pack_weight(c, "w.packed", src, g.depthwise ? 1 : k.bi, k.bo,
                                                g.depthwise);
        if (!out->prepack[1]) return tune_failed(c, NAME);
    }
    te_tensor *x = out->args[0], *w = out->args[1];

    /* the algorithm */
    te_tensor *xin = x, *xb = NULL;
    if (!blocked && k.bi > 1) {
        xin = xb = te_layout_to_nchwc(c, "x.nchwc", x, k.bi);
        if (!xb) return tune_failed(c, NAME);
    }
    te_algo_parts parts;
    te_tensor *y;
    if (blocked) {
        y = te_conv2d_nchwc(c, "y", xin, w, g.cout, &g.p, &ep, &parts);
        if (!y) return tune_failed(c, NAME);
    } else {
        /* the blocked conv, then the copy-out to NCHW with the epilogue (Y's channels only) */
        te_tensor *acc = te_conv2d_nchwc(c, "conv", xin, w, g.cout, &g.p, NULL, &parts);
        const int64_t shape[4] = {g.n, g.cout, g.oh, g.ow};
        te_iter **ax = acc ? te_compute_axes(c, 4, shape,
                                             (const char *const[]){"n", "c", "oh", "ow"})
                           : NULL;
        if (!ax) return tune_failed(c, NAME);
        const te_expr *vc = te_var(c, ax[1]);
        const te_expr *idx[5] = {te_var(c, ax[0]), te_div(c, vc, te_int(c, k.bo)), te_var(c, ax[2]),
                                 te_var(c, ax[3]), te_mod(c, vc, te_int(c, k.bo))};
        const te_expr *v = te_epilogue_apply(c, "y", &ep, te_load(c, acc, 5, idx), 4, ax, vc,
                                             g.cout, NULL);
        y = v ? te_compute(c, "y", 4, shape, ax, v) : NULL;
        if (!y) return tune_failed(c, NAME);
        parts.out = y;
        parts.epilogue = y;
    }
    out->args[out->nargs++] = y;

    /* the schedule */
    te_schedule *s2 = te_schedule_create(c, &y, 1);
    if (!s2) return tune_failed(c, NAME);
    out->schedule = s2;
    te_tensor *acc = parts.main;
    if (!parts.epilogue && acc->body->kind == TE_REDUCE) TRY(te_cache_write(s2, y, "local", &acc));
    else if (!parts.epilogue) acc = NULL; /* no reduction (depthwise 1x1): nothing to tile */

    te_stage *so = te_stage_of(s2, y);
    te_iter *oho, *ohi, *owo, *owi;
    if (blocked) {
        te_iter *n = y->axes[0], *ocbo, *ocbi, *oci = y->axes[4];
        TRY(te_split(so, y->axes[1], k.oct, &ocbo, &ocbi));
        TRY(te_split(so, y->axes[2], k.ohb, &oho, &ohi));
        TRY(te_split(so, y->axes[3], k.owb, &owo, &owi));
        TRY(te_reorder(so, 8, (te_iter *[]){n, ocbo, oho, owo, ocbi, ohi, owi, oci}));
        TRY(parallel_outer(so, n, ocbo, oho, k.par));
        TRY(te_vectorize(so, oci));
        /* the whole tile unrolled: every access of the accumulator at a constant offset, so
           that it is emitted as register variables (cg_c_vector_slots) */
        TRY(te_unroll(so, ocbi));
        TRY(te_unroll(so, ohi));
        TRY(te_unroll(so, owi));
    } else {
        te_iter *n = y->axes[0], *co, *ci;
        TRY(te_split(so, y->axes[1], k.bo, &co, &ci));
        TRY(te_split(so, y->axes[2], k.ohb, &oho, &ohi));
        TRY(te_split(so, y->axes[3], k.owb, &owo, &owi));
        TRY(te_reorder(so, 7, (te_iter *[]){n, co, oho, owo, ohi, ci, owi}));
        TRY(parallel_outer(so, n, co, oho, k.par));
        TRY(te_vectorize(so, owi));
    }
    if (acc) {
        TRY(te_compute_at(te_stage_of(s2, acc), so, owo));
        TRY(schedule_acc(s2, acc, &k));
    }
    if (parts.pad) {
        if (k.pad_copy) TRY(schedule_copy(s2, parts.pad));
        else TRY(te_compute_inline(te_stage_of(s2, parts.pad)));
    }
    /* the transform to blocks: part of the padded copy, else inline when whole blocks make it
     * a plain index change, else a copy of its own */
    if (xb) {
        if (parts.pad || g.cin % k.bi == 0) TRY(te_compute_inline(te_stage_of(s2, xb)));
        else TRY(schedule_copy(s2, xb));
    }
    return WPK_OK;
}

const kernel_provider tune_conv2d_nchwc = {
    .name = NAME,
    .family = "generated",
    .supports = supports,
    .describe = describe,
    .space = space,
    .default_config = default_config,
    .legal = kernel_legal_in_space,
    .build = build,
    /* records stored before oc_tile tiled one channel block */
    .unnamed = "oc_tile=1",
};
