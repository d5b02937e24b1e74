/* conv2d_nchw.c -- the fallback convolution template: every 2-D Conv / FusedConv the blocked
 * template does not take (depthwise with a channel multiplier, groups of odd channel counts,
 * few output channels, weights known only at run time), as a direct conv in NCHW.
 *
 * The schedule: the output is tiled into oc_block channels x oh_block rows x ow_block
 * columns; the tile's accumulator is a "local" stage computed at the tile loop with the
 * reduction (input channels, taps) outside and the tile inside, channels and rows unrolled and
 * columns vectorized: every step loads a vector of input columns and multiplies it by one
 * broadcast weight per channel of the tile. The epilogue runs as the tile is copied out.
 * Images x channel tiles x row tiles run in parallel. With `pack`, the weights are re-laid
 * out at compile time so that a tile's channels sit next to each other. */
#include <string.h>

#include "te/algo/conv2d_nchwc.h"
#include "kernels/common.h"
#include "kernels/conv.h"

#define NAME "conv2d_nchw"

enum { ORDER_IC_OUTER, ORDER_TAPS_OUTER };
enum { PAR_ROWS, PAR_CHANNELS };

/* The values of cand up to `limit` (the first one at least). */
static void add_upto(tune_space *s, const char *name, const int64_t *cand, int n, int64_t limit) {
    int k = 1;
    while (k < n && cand[k] <= limit) k++;
    tune_space_add(s, name, k, cand);
}

static void space(const kernel_provider *self, const tune_task *t, tune_space *s) {
    (void)self;
    memset(s, 0, sizeof *s);
    tune_conv g;
    if (!tune_conv_read_task(t, &g)) return;
    static const int64_t ocs[] = {1, 2, 3, 4, 6, 8}, ohs[] = {1, 2, 4};
    static const int64_t ows[] = {4, 8, 16, 32, 64}, flag[] = {0, 1};
    add_upto(s, "oc_block", ocs, 6, g.cout);
    add_upto(s, "oh_block", ohs, 3, g.oh);
    /* columns are the vector lanes: up to the first width covering the whole row */
    int k = 1;
    while (k < 5 && ows[k - 1] < g.ow) k++;
    tune_space_add(s, "ow_block", k, ows);
    tune_space_add(s, "unroll_kw", g.kw > 1 ? 2 : 1, flag);
    tune_space_add(s, "order", g.cg > 1 && g.kh * g.kw > 1 ? 2 : 1, flag);
    tune_space_add(s, "parallel", 2, flag);
    bool padded = g.p.pad[0] || g.p.pad[1] || g.p.pad[2] || g.p.pad[3];
    tune_space_add(s, "pad_copy", padded ? 2 : 1, padded ? flag : (const int64_t[]){0});
    tune_space_add(s, "pack", g.wconst ? 2 : 1, flag);
}

static void default_config(const kernel_provider *self, const tune_task *t, const tune_space *s,
                           tune_config *cfg) {
    (void)self;
    memset(cfg, 0, sizeof *cfg);
    tune_conv g;
    if (!tune_conv_read_task(t, &g)) return;
    const int64_t vec = tune_vector_floats();
    /* one vector of columns, or two when rows are long; channels fill the registers left */
    int64_t owb = g.ow > vec ? 2 * vec : vec;
    tune_config_set(s, cfg, "ow_block", owb);
    owb = tune_value(s, cfg, "ow_block");
    int64_t vecs = (owb + vec - 1) / vec, regs = vec >= 16 ? 24 : 12;
    tune_config_set(s, cfg, "oc_block", regs / vecs < 8 ? regs / vecs : 8);
    tune_config_set(s, cfg, "oh_block", 1);
    tune_config_set(s, cfg, "unroll_kw", 1);
    tune_config_set(s, cfg, "order", ORDER_IC_OUTER);
    tune_config_set(s, cfg, "parallel", PAR_ROWS);
    tune_config_set(s, cfg, "pad_copy", 1);
    tune_config_set(s, cfg, "pack", 1);
}

static wpk_status build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                        const tune_space *s, const tune_config *cfg, tune_build *out) {
    memset(out, 0, sizeof *out);
    tune_conv g;
    TRY(tune_conv_build_nchw(c, self, t, s, cfg, &g));
    const int64_t ocb = tune_value(s, cfg, "oc_block"), ohb = tune_value(s, cfg, "oh_block");
    const int64_t owb = tune_value(s, cfg, "ow_block");
    const bool unroll_kw = tune_value(s, cfg, "unroll_kw") != 0;
    const bool pad_copy = tune_value(s, cfg, "pad_copy") != 0;
    const bool pack = tune_value(s, cfg, "pack") != 0;
    const int order = (int)tune_value(s, cfg, "order"), par = (int)tune_value(s, cfg, "parallel");
    const ir_tensor *x0 = &t->in[0], *w0 = &t->in[1];

    te_epilogue ep;
    const int64_t wp[6] = {(g.cout + ocb - 1) / ocb, g.cg, g.kh, g.kw, 1, ocb};
    if (pack) TRY(tune_conv_args(c, t, &g, x0->dims, 4, wp, 6, t->out[0].dims, 4, out, &ep));
    else TRY(tune_conv_args(c, t, &g, x0->dims, 4, w0->dims, 4, t->out[0].dims, 4, out, &ep));
    te_tensor *x = out->args[0], *w = out->args[1];
    if (pack) {
        /* the conv reads the packed weight through an inline view in the original shape */
        te_tensor *src = te_placeholder(c, "w.src", TE_F32, 4, w0->dims);
        if (!src) return tune_failed(c, NAME);
        src->constant = true;
        out->prepack_src[1] = src;
        out->prepack[1] = te_conv2d_pack_weight(c, "w.packed", src, 1, ocb, false);
        te_iter **ax =
            te_compute_axes(c, 4, w0->dims, (const char *const[]){"oc", "ic", "kh", "kw"});
        if (!out->prepack[1] || !ax) return tune_failed(c, NAME);
        const te_expr *oc = te_var(c, ax[0]), *zero = te_int(c, 0);
        const te_expr *idx[6] = {te_div(c, oc, te_int(c, ocb)), te_var(c, ax[1]), te_var(c, ax[2]),
                                 te_var(c, ax[3]), zero, te_mod(c, oc, te_int(c, ocb))};
        const te_expr *v = te_load(c, w, 6, idx);
        w = v ? te_compute(c, "w.view", 4, w0->dims, ax, v) : NULL;
        if (!w) return tune_failed(c, NAME);
    }
    te_algo_parts parts;
    te_tensor *y = te_conv2d_nchw(c, "y", x, w, &g.p, &ep, &parts);
    if (!y) return tune_failed(c, NAME);
    out->args[out->nargs++] = y;

    te_schedule *sc = te_schedule_create(c, &y, 1);
    if (!sc) return tune_failed(c, NAME);
    out->schedule = sc;
    if (pack) TRY(te_compute_inline(te_stage_of(sc, w)));
    te_tensor *acc = parts.main;
    if (!parts.epilogue && acc->body->kind == TE_REDUCE) TRY(te_cache_write(sc, y, "local", &acc));
    else if (!parts.epilogue) acc = NULL;

    te_stage *so = te_stage_of(sc, y);
    te_iter *oco, *oci, *oho, *ohi, *owo, *owi, *f;
    TRY(te_split(so, y->axes[1], ocb, &oco, &oci));
    TRY(te_split(so, y->axes[2], ohb, &oho, &ohi));
    TRY(te_split(so, y->axes[3], owb, &owo, &owi));
    TRY(te_reorder(so, 7, (te_iter *[]){y->axes[0], oco, oho, owo, oci, ohi, owi}));
    TRY(te_fuse(so, y->axes[0], oco, &f));
    if (par == PAR_ROWS) TRY(te_fuse(so, f, oho, &f));
    TRY(te_parallel(so, f));
    TRY(te_vectorize(so, owi));
    if (acc) {
        te_stage *sa = te_stage_of(sc, acc);
        TRY(te_compute_at(sa, so, owo));
        TRY(te_set_scope(sa, "local"));
        te_iter *rc = tune_conv_raxis(acc, "rc"), *kh = tune_conv_raxis(acc, "kh"),
               *kw = tune_conv_raxis(acc, "kw");
        te_iter *ord[8];
        int n = 0;
        if (order == ORDER_TAPS_OUTER) {
            if (kh) ord[n++] = kh;
            if (kw) ord[n++] = kw;
            if (rc) ord[n++] = rc;
        } else {
            if (rc) ord[n++] = rc;
            if (kh) ord[n++] = kh;
            if (kw) ord[n++] = kw;
        }
        ord[n++] = acc->axes[1];
        ord[n++] = acc->axes[2];
        ord[n++] = acc->axes[3];
        TRY(te_reorder(sa, n, ord));
        if (kw && unroll_kw) TRY(te_unroll(sa, kw));
        TRY(te_unroll(sa, acc->axes[1]));
        TRY(te_unroll(sa, acc->axes[2]));
        TRY(te_vectorize(sa, acc->axes[3]));
    }
    if (parts.pad) {
        te_stage *sp = te_stage_of(sc, parts.pad);
        if (pad_copy) {
            TRY(te_fuse(sp, parts.pad->axes[0], parts.pad->axes[1], &f));
            TRY(te_parallel(sp, f));
            te_iter *wo, *wi;
            TRY(te_split(sp, parts.pad->axes[3], tune_vector_floats(), &wo, &wi));
            TRY(te_vectorize(sp, wi));
        } else {
            TRY(te_compute_inline(sp));
        }
    }
    return WPK_OK;
}

const kernel_provider tune_conv2d_nchw = {
    .name = NAME,
    .family = "generated",
    .supports = tune_conv_supports_nchw,
    .describe = tune_conv_describe_task,
    .space = space,
    .default_config = default_config,
    .legal = kernel_legal_in_space,
    .build = build,
};
