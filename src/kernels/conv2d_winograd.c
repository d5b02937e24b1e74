/* conv2d_winograd.c -- the Winograd convolution template: 3x3 stride-1 convs (dilation 1,
 * one group, constant weights) as F(m x m, 3x3), m = 2, 4 or 6 (te/algo/winograd.h), one more
 * implementation of the nodes the direct conv templates take (never the first: the registry
 * lists it after them, so tuning or the records choose it where it is faster).
 *
 * The weight transform U = G g G^T is the pre-pack (tune_build.prepack: it runs once, on the
 * node's constant weight, packed first for NCHW nodes). Per run, four loop nests:
 *  - the padded copy of the input (and, for NCHW nodes, its blocked layout), whole tiles;
 *  - the input transform, per tile and block of input channels: the rows' transform B^T d in a
 *    "local" stage at that loop, then its columns, every alpha x alpha position unrolled (each
 *    copy keeps only its row's adds) and the block's lanes vectorized;
 *  - the batched GEMM, where the time goes: per position (e1, e2) the output tiles x output
 *    channels are register-tiled like a GEMM: tile_p tiles x tile_k channel blocks of
 *    accumulators in a "local" stage, the reduction over input channels outside them, so each
 *    step broadcasts one transformed input and multiplies it by tile_k vectors of U;
 *  - the output transform per m x m output tile: A^T M's rows in a "local" stage at the tile,
 *    then the columns, cropped at the border, with the fused epilogue as it is written.
 * Or (knob parallel) one parallel loop over blocks of the output, each running the GEMM and the
 * output transform of its block, M in a cache-sized buffer; in the "whole" forms also the
 * block's input transform, reading the input in place (loop partitioning takes the padding's
 * tests out of the interior tiles), V the block's too: one fork and join per call, not four.
 * ConvNCHWc nodes fix the blocks (their tensors' lanes); NCHW nodes choose them (oc_block,
 * ic_block) and write NCHW from the blocked GEMM result. */
#include <string.h>

#include "base/target.h"
#include "te/algo/winograd.h"
#include "kernels/common.h"
#include "kernels/conv.h"

#define NAME "conv2d_winograd"

enum { ORDER_K_OUTER, ORDER_P_OUTER };
/* parallel: the GEMM's positions, or its positions x tile blocks (four loop nests, each in
 * parallel, V and M whole in memory); or, after the padded copy and the input transform in
 * parallel over tiles, one parallel loop over blocks of output rows, of output channels or of
 * both (a row of tiles x half the channels) inside which the GEMM and the output transform of
 * the block run in turn, M the block's own buffer ("fused"); or one parallel loop over blocks
 * of rows or of rows x channel halves that runs the whole conv of its block, the input
 * transform of the block's tiles included ("whole": no padded copy, V the block's own buffer;
 * a block of channel halves transforms its tiles' input once per half); or the whole conv per
 * thread's share of the output channel blocks, every tile of an image in each ("whole
 * channels": each thread streams its share of U once, and each transforms the whole input),
 * or tile row by tile row inside the share (V and M a row's: for a share of U the L2 keeps). */
enum { PAR_POSITIONS, PAR_POSITIONS_TILES, PAR_FUSED_ROWS, PAR_FUSED_CHANNELS,
       PAR_FUSED_BOTH, PAR_WHOLE_ROWS, PAR_WHOLE_BOTH, PAR_WHOLE_CHANNELS,
       PAR_WHOLE_CHANNELS_ROWS };

/* F(m x m, 3 x 3) computes 3x3 stride-1 dilation-1 convs of one group; the weight transform
 * is a pre-pack, so the weights must be known at compile time. */
static bool takes(const tune_conv *g) {
    return g->kh == 3 && g->kw == 3 && g->p.stride[0] == 1 && g->p.stride[1] == 1 &&
           g->p.dilation[0] == 1 && g->p.dilation[1] == 1 && g->p.groups == 1 && g->wconst;
}

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out) {
    (void)self;
    tune_conv g;
    return tune_conv_read(n, in, out, &g) && takes(&g);
}

static void describe(const kernel_provider *self, tune_task *t) {
    (void)self;
    tune_conv g;
    if (tune_conv_read_task(t, &g)) tune_conv_describe(NAME, &g, t);
}

/* Output tiles per register tile (knob tile_p): the values the space offers. */
static const int64_t TILE_P[] = {1, 2, 3, 4, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28};
#define NTILE_P ((int)(sizeof TILE_P / sizeof TILE_P[0]))

static int64_t tiles(const tune_conv *g, int64_t m) {
    return g->n * ((g->oh + m - 1) / m) * ((g->ow + m - 1) / m);
}

/* The blocks of a node: ConvNCHWc's own, else the knobs' (0 when the config has none). */
static int64_t in_block(const tune_conv *g, const tune_space *s, const tune_config *cfg) {
    return g->op == IR_OP_CONV_NCHWC ? g->bi : tune_value(s, cfg, "ic_block");
}
static int64_t out_block(const tune_conv *g, const tune_space *s, const tune_config *cfg) {
    return g->op == IR_OP_CONV_NCHWC ? g->bo : tune_value(s, cfg, "oc_block");
}

static void space(const kernel_provider *self, const tune_task *t, tune_space *s) {
    (void)self;
    memset(s, 0, sizeof *s);
    tune_conv g;
    if (!tune_conv_read_task(t, &g)) return;
    const int64_t vec = tune_vector_floats();
    static const int64_t ms[] = {2, 4, 6}, flag[] = {0, 1};
    tune_space_add(s, "m", 3, ms);
    if (g.op == IR_OP_CONV_NCHWC) {
        tune_space_add(s, "ic_block", 1, &g.bi);
        tune_space_add(s, "oc_block", 1, &g.bo);
    } else {
        /* the transforms' and the GEMM's vectors: a whole register or half of one */
        const int64_t blocks[] = {vec, vec / 2};
        tune_space_add(s, "ic_block", 2, blocks);
        tune_space_add(s, "oc_block", 2, blocks);
    }
    /* tiles per register tile: up to the most tiles there are (m = 2) */
    int k = 1;
    while (k < NTILE_P && TILE_P[k] <= tiles(&g, 2)) k++;
    tune_space_add(s, "tile_p", k, TILE_P);
    /* output-channel blocks per register tile (the smallest output block fixes how many) */
    const int64_t bmin = g.op == IR_OP_CONV_NCHWC ? g.bo : vec / 2;
    const int64_t kb = (g.cout + bmin - 1) / bmin;
    static const int64_t tks[] = {1, 2, 4};
    tune_space_add(s, "tile_k", kb >= 4 ? 3 : kb >= 2 ? 2 : 1, tks);
    tune_space_add(s, "order", 2, flag);
    static const int64_t pars[] = {PAR_POSITIONS,  PAR_POSITIONS_TILES, PAR_FUSED_ROWS,
                                   PAR_FUSED_CHANNELS, PAR_FUSED_BOTH,  PAR_WHOLE_ROWS,
                                   PAR_WHOLE_BOTH, PAR_WHOLE_CHANNELS, PAR_WHOLE_CHANNELS_ROWS};
    tune_space_add(s, "parallel", (int)(sizeof pars / sizeof pars[0]), pars);
}

/* The register tile (of TILE_P) with the fewest tiles left over in the last one, preferring
 * wide tiles. */
static int64_t pick_tiles(int64_t p, int64_t regs) {
    int64_t best = 1;
    double best_cost = 1e30;
    for (int i = 0; i < NTILE_P && TILE_P[i] <= regs && TILE_P[i] <= p; i++) {
        const int64_t b = TILE_P[i];
        double cost = (double)((p + b - 1) / b * b) / (double)p * (1.0 + 4.0 / (double)b);
        if (cost < best_cost - 1e-9) best = b, best_cost = cost;
    }
    return best;
}

static void default_config(const kernel_provider *self, const tune_task *t, const tune_space *s,
                           tune_config *cfg) {
    (void)self;
    memset(cfg, 0, sizeof *cfg);
    tune_conv g;
    if (!tune_conv_read_task(t, &g)) return;
    const int64_t vec = tune_vector_floats();
    /* F(4x4,3x3): 2.25 multiplies per output against F(2x2,3x3)'s 4; measured as fast or
     * faster on ResNet-18's 3x3 convs down to 7x7 outputs */
    tune_config_set(s, cfg, "m", 4);
    tune_config_set(s, cfg, "ic_block", vec);
    tune_config_set(s, cfg, "oc_block", vec);
    const int64_t bo = out_block(&g, s, cfg), m = tune_value(s, cfg, "m");
    const int64_t kb = (g.cout + bo - 1) / bo, np = tiles(&g, m);
    /* Accumulators: 16 on AVX-512 (32 registers), 8 on AVX2 (16): the compiler keeps the
     * tile's broadcast inputs in registers too, and more accumulators spill (measured on
     * ResNet-18's 56x56 64->64 conv, m = 4, 1 thread: 2 x 7 accumulators 0.80 ms per call,
     * 2 x 14 1.95 ms). Two channel blocks share each broadcast input; four when there are
     * only a few tiles to share each U vector (7x7 512->512: 4 x 4 1.9 ms, 2 x 4 2.3 ms). */
    const int64_t regs = (vec >= 16 ? 16 : 8) / (bo > vec ? bo / vec : 1);
    const int64_t tk = kb >= 4 && np <= regs / 4 ? 4 : kb >= 2 ? 2 : 1;
    tune_config_set(s, cfg, "tile_k", tk);
    tune_config_set(s, cfg, "tile_p", pick_tiles(np, regs / tk > 1 ? regs / tk : 1));
    /* The loop over the larger operand outside, so the smaller one stays in cache: U's
     * K x C per position against V's P x C (56x56 64->64: P outer, 0.93 against 1.22 ms;
     * 7x7 512->512: output channels outer, 1.91 against 2.02 ms). */
    tune_config_set(s, cfg, "order", g.cout > np ? ORDER_K_OUTER : ORDER_P_OUTER);
    /* The whole conv per block of tile rows where every block can keep the transformed
     * weights and its own V and M (a row of tiles') in its core's L2 and there are rows
     * enough to share among the cores: one fork and join per call, no padded copy (56x56
     * 64->64, U 0.6 MB, 14 rows, 2 threads: 0.29 against 0.47 ms per call; with a 1 MB L2,
     * where U alone is over half of it, 0.42 against 0.45 ms for the channel shares, and the
     * -O2 form 0.556 against 0.575). Blocks of rows that each stream U from memory lose (14x14
     * 256->256, U 9.4 MB, 4 rows: 0.82 against 0.54 ms), so else each thread its share of the
     * output channels, every tile: U streamed once, one fork and join, but every thread
     * transforms the whole input, which output channels enough amortize (2 threads, against
     * the four loop nests in parallel over the positions: 28x28 128->128 0.32 against 0.38 ms,
     * 14x14 256->256 0.47 against 0.56 ms). Where the L2 keeps a thread's share of U, tile row
     * by tile row inside the share, V and M a row's (28x28 128->128, 1.2 MB a thread:
     * 0.30-0.31 against 0.32-0.34 ms). */
    const int al = te_winograd_alpha((int)m);
    const int64_t ubytes = (int64_t)al * al * g.cin * g.cout * 4, l2 = target_cache_bytes(2);
    const int64_t rows = g.n * ((g.oh + m - 1) / m), threads = target_default_threads();
    const int64_t row_vm = (int64_t)al * al * ((g.ow + m - 1) / m) * (g.cin + g.cout) * 4;
    const bool whole = l2 > 0 && ubytes + row_vm <= l2 && rows >= 4 * threads;
    const bool shares = kb >= threads && g.cout >= 32 * threads;
    const bool share_rows = shares && l2 > 0 && ubytes / threads <= l2 * 3 / 4;
    tune_config_set(s, cfg, "parallel", whole        ? PAR_WHOLE_ROWS
                                        : share_rows ? PAR_WHOLE_CHANNELS_ROWS
                                        : shares     ? PAR_WHOLE_CHANNELS
                                                     : PAR_POSITIONS);
}

/* ---- build ---- */

typedef struct knobs {
    int m;
    int64_t bi, bo, tp, tk, kb;
    int order, par;
    int64_t shares;   /* PAR_WHOLE_CHANNELS*: parts of the output channel blocks, one a thread */
} knobs;

/* One parallel loop over blocks of the output, the GEMM (and in the whole forms the input
 * transform) inside each block. */
static bool par_blocks(const knobs *k) { return k->par >= PAR_FUSED_ROWS; }
static bool par_whole(const knobs *k) { return k->par >= PAR_WHOLE_ROWS; }
static bool par_shares(const knobs *k) {
    return k->par == PAR_WHOLE_CHANNELS || k->par == PAR_WHOLE_CHANNELS_ROWS;
}

/* The padded copy (the blocked layout of an NCHW input inside it) in parallel over images x
 * channel blocks, lanes vectorized. */
static wpk_status schedule_copy(te_schedule *s, te_tensor *t) {
    te_stage *st = te_stage_of(s, t);
    te_iter *f;
    TRY(te_fuse(st, t->axes[0], t->axes[1], &f));
    TRY(te_parallel(st, f));
    if (t->ndim == 5 && t->shape[4] > 1) TRY(te_vectorize(st, t->axes[4]));
    return WPK_OK;
}

/* v[e1, e2, p, c]: per tile and block of channels, the rows' transform at that loop, every
 * position unrolled, the block's lanes vectorized, in parallel over tiles. */
static wpk_status schedule_input(te_schedule *s, const te_winograd_parts *wp, const knobs *k) {
    te_tensor *v = wp->v, *tin = wp->tin;
    te_stage *sv = te_stage_of(s, v), *st = te_stage_of(s, tin);
    te_iter *co, *ci;
    TRY(te_split(sv, v->axes[3], k->bi, &co, &ci));
    TRY(te_reorder(sv, 5, (te_iter *[]){v->axes[2], co, v->axes[0], v->axes[1], ci}));
    if (!par_whole(k)) TRY(te_parallel(sv, v->axes[2]));
    TRY(te_unroll(sv, v->axes[0]));
    TRY(te_unroll(sv, v->axes[1]));
    if (k->bi > 1) TRY(te_vectorize(sv, ci));
    TRY(te_compute_at(st, sv, co));
    TRY(te_set_scope(st, "local"));
    TRY(te_reorder(st, 4, (te_iter *[]){tin->axes[2], tin->axes[0], tin->axes[1], tin->axes[3]}));
    TRY(te_unroll(st, tin->axes[0]));
    TRY(te_unroll(st, tin->axes[1]));
    if (k->bi > 1) TRY(te_vectorize(st, tin->axes[3]));
    return WPK_OK;
}

/* m[e1, e2, p, kb, k]: per position, tile_p tiles x tile_k blocks of accumulators; the
 * positions (or positions x the outer blocks) in parallel unless it runs inside a fused
 * block. */
static wpk_status schedule_gemm(te_schedule *s, te_tensor *mm, const knobs *k, bool fused) {
    te_tensor *acc;
    TRY(te_cache_write(s, mm, "local", &acc));
    te_stage *sm = te_stage_of(s, mm), *sa = te_stage_of(s, acc);
    te_iter *po, *pi, *ko, *ki, *f;
    TRY(te_split(sm, mm->axes[2], k->tp, &po, &pi));
    TRY(te_split(sm, mm->axes[3], k->tk, &ko, &ki));
    te_iter *outer = k->order == ORDER_P_OUTER ? po : ko, *inner = outer == po ? ko : po;
    TRY(te_reorder(sm, 7, (te_iter *[]){mm->axes[0], mm->axes[1], outer, inner, ki, pi,
                                        mm->axes[4]}));
    if (!fused) {
        TRY(te_fuse(sm, mm->axes[0], mm->axes[1], &f));
        if (k->par == PAR_POSITIONS_TILES) TRY(te_fuse(sm, f, outer, &f));
        TRY(te_parallel(sm, f));
    }
    TRY(te_unroll(sm, ki));
    TRY(te_unroll(sm, pi));
    TRY(te_vectorize(sm, mm->axes[4]));
    /* the accumulators at the tile: the reduction outside, the tile inside */
    TRY(te_compute_at(sa, sm, inner));
    /* the reduction unrolled by 4 where the channels allow: the compiler keeps the
     * accumulators in registers but copies them between registers once per iteration of
     * the loop it is in (gcc 12: about one vector move per accumulator), which 4 steps per
     * iteration amortize (1-thread CPU time, c9 14x14 256->256 F(2x2): 1.5-1.7 -> 1.17 ms) */
    te_iter *rc = acc->body->raxes[0], *rco, *rci;
    TRY(te_split(sa, rc, rc->extent % 4 == 0 ? 4 : 1, &rco, &rci));
    TRY(te_reorder(sa, 5, (te_iter *[]){rco, rci, acc->axes[2], acc->axes[3], acc->axes[4]}));
    TRY(te_unroll(sa, rci));
    TRY(te_unroll(sa, acc->axes[2]));
    TRY(te_unroll(sa, acc->axes[3]));
    return te_vectorize(sa, acc->axes[4]);
}

/* The output per m x m tile: A^T M's rows at the tile, then the columns with the epilogue.
 * The parallel loop: images x channel blocks x tile rows; for a fused schedule images x tile
 * rows (channel blocks inside) or images x halves (or threads' shares) of the channel blocks
 * (tile rows inside), its block (or a tile row inside it) returned in *block for the input
 * transform and the GEMM to run at. */
static wpk_status schedule_output(te_schedule *s, const te_winograd_parts *wp, const knobs *k,
                                  bool nchw, te_iter **block) {
    te_tensor *y = wp->out, *tout = wp->tout;
    te_stage *sy = te_stage_of(s, y), *st = te_stage_of(s, tout);
    te_iter *tho, *ohi, *two, *owi, *f, *lanes, *kb;
    te_iter *at = NULL; /* the block's loop when it is not the parallel one */
    TRY(te_split(sy, y->axes[2], k->m, &tho, &ohi));
    TRY(te_split(sy, y->axes[3], k->m, &two, &owi));
    if (nchw) TRY(te_split(sy, y->axes[1], k->bo, &kb, &lanes));
    else kb = y->axes[1], lanes = y->axes[4];
    te_iter *n = y->axes[0];
    if (k->par == PAR_FUSED_ROWS || k->par == PAR_WHOLE_ROWS) {
        TRY(te_reorder(sy, 7, (te_iter *[]){n, tho, kb, two, ohi, owi, lanes}));
        TRY(te_fuse(sy, n, tho, &f));
    } else if (k->par != PAR_POSITIONS && k->par != PAR_POSITIONS_TILES) {
        /* blocks of output channels: a thread's share, or halves (one per thread on the
         * 2-core machines the older forms were made for; with the rows, twice as many blocks
         * as rows: an odd number of rows still splits evenly) */
        const int64_t parts = par_shares(k) ? k->shares : 2;
        te_iter *kbo, *kbi;
        TRY(te_split(sy, kb, (k->kb + parts - 1) / parts, &kbo, &kbi));
        if (k->par == PAR_FUSED_BOTH || k->par == PAR_WHOLE_BOTH) {
            TRY(te_reorder(sy, 8, (te_iter *[]){n, tho, kbo, kbi, two, ohi, owi, lanes}));
            TRY(te_fuse(sy, n, tho, &f));
            TRY(te_fuse(sy, f, kbo, &f));
        } else if (k->par == PAR_WHOLE_CHANNELS_ROWS) {
            TRY(te_reorder(sy, 8, (te_iter *[]){n, kbo, tho, kbi, two, ohi, owi, lanes}));
            TRY(te_fuse(sy, n, kbo, &f));
            at = tho;
        } else {
            TRY(te_reorder(sy, 8, (te_iter *[]){n, kbo, kbi, tho, two, ohi, owi, lanes}));
            TRY(te_fuse(sy, n, kbo, &f));
        }
    } else {
        TRY(te_reorder(sy, 7, (te_iter *[]){n, kb, tho, two, ohi, owi, lanes}));
        TRY(te_fuse(sy, n, kb, &f));
        TRY(te_fuse(sy, f, tho, &f));
    }
    TRY(te_parallel(sy, f));
    TRY(te_unroll(sy, ohi));
    TRY(te_unroll(sy, owi));
    TRY(te_vectorize(sy, lanes));
    te_iter *tp = tout->axes[2], *tk = tout->axes[3], *ti = tout->axes[0], *te = tout->axes[1];
    if (par_blocks(k)) {
        /* A^T M for the whole block at the block's loop, in a buffer of the block; the GEMM
         * at the outer loop of a split of its rows into one piece, i.e. for the whole block
         * too, before it */
        te_iter *one;
        TRY(te_compute_at(st, sy, at ? at : f));
        TRY(te_split(st, ti, k->m, &one, &ti));
        TRY(te_reorder(st, 6, (te_iter *[]){one, tp, tk, ti, te, tout->axes[4]}));
        *block = one;
    } else {
        TRY(te_compute_at(st, sy, two));
        TRY(te_set_scope(st, "local"));
        TRY(te_reorder(st, 5, (te_iter *[]){tp, tk, ti, te, tout->axes[4]}));
        *block = NULL;
    }
    TRY(te_unroll(st, ti));
    TRY(te_unroll(st, te));
    return te_vectorize(st, tout->axes[4]);
}

static wpk_status build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                        const tune_space *s,
                        const tune_config *cfg, tune_build *out) {
    memset(out, 0, sizeof *out);
    tune_conv g;
    if (!tune_conv_read_task(t, &g) || !takes(&g))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, NAME ": node '%s' is not a 3x3 stride-1 "
                         "conv with constant weights", t->node ? t->node->name : "(null)");
    TRY(tune_check_legal(c, self, t, s, cfg));
    knobs k = {
        .m = (int)tune_value(s, cfg, "m"), .bi = in_block(&g, s, cfg),
        .bo = out_block(&g, s, cfg), .tp = tune_value(s, cfg, "tile_p"),
        .tk = tune_value(s, cfg, "tile_k"), .order = (int)tune_value(s, cfg, "order"),
        .par = (int)tune_value(s, cfg, "parallel"),
    };
    k.kb = (g.cout + k.bo - 1) / k.bo;
    k.shares = target_default_threads() < k.kb ? target_default_threads() : k.kb;
    /* A whole block is a row of tiles (an image's tiles for whole channels), and V only its
     * tiles: a register tile that does not divide them would read past the block's buffer,
     * so the whole forms take the largest tile_p dividing the block's tiles. */
    if (par_whole(&k)) {
        const int64_t tw = (g.ow + k.m - 1) / k.m, th = (g.oh + k.m - 1) / k.m;
        for (const int64_t bt = k.par == PAR_WHOLE_CHANNELS ? th * tw : tw; bt % k.tp;) k.tp--;
    }
    const bool blocked = g.op == IR_OP_CONV_NCHWC;
    const ir_tensor *x0 = &t->in[0], *w0 = &t->in[1];
    const int al = te_winograd_alpha(k.m);
    const int64_t kb = k.kb;
    /* a ConvNCHWc on an NCHW input (the stem's form) has weights packed for 1-lane blocks */
    const int64_t bi = k.bi;
    const int64_t ct = (g.cin + bi - 1) / bi * bi;
    const int64_t ushape[5] = {al, al, kb, ct, k.bo};

    /* the kernel's arguments: x, U (pre-packed from the node's weight), bias, residual */
    te_epilogue ep;
    TRY(tune_conv_args(c, t, &g, x0->dims, x0->ndim, ushape, 5, t->out[0].dims, t->out[0].ndim,
                       out, &ep));
    te_tensor *src = te_placeholder(c, "w.src", TE_F32, w0->ndim, w0->dims);
    if (!src) return tune_failed(c, NAME);
    src->constant = true;
    te_tensor *packed = blocked ? src : te_conv2d_pack_weight(c, "w.packed", src, bi, k.bo, false);
    out->prepack_src[1] = src;
    out->prepack[1] = packed ? te_winograd_weight(c, "w.wino", packed, k.m) : NULL;
    if (!out->prepack[1]) return tune_failed(c, NAME);

    /* the algorithm */
    te_winograd_params wp = {.m = k.m, .conv = g.p, .channels = g.cout, .in_block = bi,
                             .nchw_out = !blocked};
    te_winograd_parts parts;
    te_tensor *y = te_conv2d_winograd(c, "y", out->args[0], out->args[1], &wp, &ep, &parts);
    if (!y) return tune_failed(c, NAME);
    out->args[out->nargs++] = y;

    /* the schedule */
    te_schedule *sc = te_schedule_create(c, &y, 1);
    if (!sc) return tune_failed(c, NAME);
    out->schedule = sc;
    /* the whole forms read a blocked input in place: the padding inline in the input
     * transform (loop partitioning takes its tests out of the interior tiles; a padded copy
     * at the block would be the whole input: the region of a block's rows through the
     * flattened tile index is not bounded tighter). An NCHW input still gets its blocked
     * padded copy first: read in place, each vector's lanes come from H x W apart, and the
     * partitioned transform ran 2x slower and took cc minutes (56x56 64->64, m = 6: 332 s). */
    const bool in_place = par_whole(&k) && !parts.layout;
    if (parts.pad) {
        if (in_place) TRY(te_compute_inline(te_stage_of(sc, parts.pad)));
        else TRY(schedule_copy(sc, parts.pad));
    }
    if (parts.layout) {
        if (parts.pad) TRY(te_compute_inline(te_stage_of(sc, parts.layout)));
        else TRY(schedule_copy(sc, parts.layout));
    }
    te_iter *block;
    TRY(schedule_input(sc, &parts, &k));
    TRY(schedule_gemm(sc, parts.mm, &k, par_blocks(&k)));
    TRY(schedule_output(sc, &parts, &k, !blocked, &block));
    te_stage *out_rows = te_stage_of(sc, parts.tout);
    /* V of the block's tiles before their GEMM, both at the block (the GEMM reads V through
     * its accumulator stage, which lowering sees through) */
    if (par_whole(&k)) TRY(te_compute_at(te_stage_of(sc, parts.v), out_rows, block));
    if (par_blocks(&k)) TRY(te_compute_at(te_stage_of(sc, parts.mm), out_rows, block));
    return WPK_OK;
}

const kernel_provider tune_conv2d_winograd = {
    .name = NAME,
    .family = "generated",
    .supports = supports,
    .describe = describe,
    .space = space,
    .default_config = default_config,
    .legal = kernel_legal_in_space,
    .build = build,
    .batch_buffers = true,
};
