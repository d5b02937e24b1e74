/* conv2d_cuda.c -- the GPU convolution template: a direct NCHW conv (Conv / FusedConv, any
 * stride, padding, dilation and groups) scheduled for CUDA with Woodpecker-DL's knobs (see
 * conv2d_cuda.h).
 *
 * The node is read by conv.h's reader (shared with the CPU templates); the algorithm is
 * te/algo's conv: te_conv2d_nchw_reduce over the output rounded up to whole blocks (its extra
 * points read clamped indices and are never stored), so the region a block accumulates is
 * always a whole block: no window of it is ever shifted at the tensor's edge, and each thread's
 * part of it stays the same thread's (the CUDA code generator keeps it in registers). The input
 * is read through an inline te_pad_to view over the padded coordinates (the weights likewise
 * over the rounded-up channels); the output y is te_epilogue_compute_to over the real shape.
 * This file is the GPU schedule.
 *
 * The schedule:
 *   y:    n*oc_b -> blockIdx.z, oh_b -> blockIdx.y, ow_b -> blockIdx.x,
 *         oc_t -> threadIdx.z, oh_t -> threadIdx.y, ow_t -> threadIdx.x, then the thread's tile
 *         (unrolled): acc's values go out through the epilogue
 *   acc:  computed at y's ow_b ("local"): [outer reduction] | threads | [inner reduction] | tile
 *   x.shared, w.shared (shared = 1): computed at acc's innermost outer-reduction loop, their
 *         loops fused and spread over the block's threads (consecutive threads read consecutive
 *         addresses) */
#include "kernels/conv2d_cuda.h"

#include <string.h>

#include "te/algo/conv2d.h"
#include "te/algo/pad.h"
#include "kernels/common.h"
#include "kernels/conv.h"
#include "kernels/templates_cuda.h"

#define NAME "conv2d_cuda"

enum { ORDER_RC_OUTER, ORDER_TAPS_INNER, ORDER_TAPS_OUTER };

static void space(const kernel_provider *self, const tune_task *t, tune_space *s) {
    (void)self;
    memset(s, 0, sizeof *s);
    tune_conv g;
    if (!tune_conv_read_task(t, &g) || g.op == IR_OP_CONV_NCHWC) return;
    static const int64_t tx[] = {1, 2, 4, 8, 16, 32}, ty[] = {1, 2, 4, 8, 16};
    static const int64_t tz[] = {1, 2, 4, 8, 16, 32, 64};
    static const int64_t tiles[] = {1, 2, 4}, ztiles[] = {1, 2, 4, 8}, flag[] = {0, 1};
    static const int64_t orders[] = {ORDER_RC_OUTER, ORDER_TAPS_INNER, ORDER_TAPS_OUTER};
    tune_cuda_add_upto(s, "thread_x", tx, 6, tune_cuda_pow2_at_least(g.ow));
    tune_cuda_add_upto(s, "thread_y", ty, 5, tune_cuda_pow2_at_least(g.oh));
    tune_cuda_add_upto(s, "thread_z", tz, 7, tune_cuda_pow2_at_least(g.cout));
    tune_cuda_add_upto(s, "tile_x", tiles, 3, g.ow);
    tune_cuda_add_upto(s, "tile_y", tiles, 3, g.oh);
    tune_cuda_add_upto(s, "tile_z", ztiles, 4, g.cout);
    static const int64_t rz[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
    int64_t v[TUNE_MAX_VALUES];
    int k = 0;
    for (int i = 0; i < 12; i++)
        if (rz[i] <= g.cg && g.cg % rz[i] == 0) v[k++] = rz[i];
    tune_space_add(s, "tile_rz", k, v);
    tune_space_add(s, "shared", 2, flag);
    tune_space_add(s, "order", g.kh * g.kw > 1 ? 3 : 1, orders);
}

typedef struct knobs {
    int64_t thx, thy, thz, tx, ty, tz, trz;
    bool shared;
    int order;
} knobs;

static knobs read_knobs(const tune_space *s, const tune_config *cfg) {
    knobs k;
    k.thx = tune_value(s, cfg, "thread_x"), k.thy = tune_value(s, cfg, "thread_y");
    k.thz = tune_value(s, cfg, "thread_z");
    k.tx = tune_value(s, cfg, "tile_x"), k.ty = tune_value(s, cfg, "tile_y");
    k.tz = tune_value(s, cfg, "tile_z"), k.trz = tune_value(s, cfg, "tile_rz");
    k.shared = tune_value(s, cfg, "shared") != 0;
    k.order = (int)tune_value(s, cfg, "order");
    return k;
}

/* What the shared stages hold per reduction step: the input window of the block's outputs for
 * tile_rz channels (of each group the block's channels span) and the block's weights. */
static int64_t shared_bytes(const tune_conv *g, const knobs *k) {
    if (!k->shared) return 0;
    const int64_t bz = k->thz * k->tz, by = k->thy * k->ty, bx = k->thx * k->tx;
    const bool taps_out = k->order == ORDER_TAPS_OUTER;
    const int64_t rows = (by - 1) * g->p.stride[0] + (taps_out ? 0 : (g->kh - 1) * g->p.dilation[0]) + 1;
    const int64_t cols = (bx - 1) * g->p.stride[1] + (taps_out ? 0 : (g->kw - 1) * g->p.dilation[1]) + 1;
    int64_t chans = k->trz;
    if (g->p.groups > 1) {
        const int64_t per = g->cout / g->p.groups;
        int64_t span = (bz + per - 1) / per + 1;
        if (span > g->p.groups) span = g->p.groups;
        chans = (span - 1) * g->cg + k->trz;
    }
    const int64_t in = chans * rows * cols, wt = bz * k->trz * (taps_out ? 1 : g->kh * g->kw);
    return ((in * 4 + 15) / 16 + (wt * 4 + 15) / 16) * 16;
}

/* The knob of a dimension that has more than one thread although the first thread's tile
 * already covers it (tile >= extent), NULL when there is none. The other threads would have no
 * output, and the CUDA code generator cannot keep acc per thread there (the thread loop over
 * the dimension is gone). */
static const char *idle_threads(const tune_conv *g, const knobs *k) {
    if (k->thz > 1 && k->tz >= g->cout) return "thread_z";
    if (k->thy > 1 && k->ty >= g->oh) return "thread_y";
    if (k->thx > 1 && k->tx >= g->ow) return "thread_x";
    return NULL;
}

int64_t tune_conv2d_cuda_shared_bytes(const tune_task *t, const tune_space *s,
                                      const tune_config *cfg) {
    tune_conv g;
    if (!tune_conv_read_task(t, &g) || g.op == IR_OP_CONV_NCHWC) return -1;
    knobs k = read_knobs(s, cfg);
    return shared_bytes(&g, &k);
}

/* The limits build checks (threads, accumulators, shared memory), without building. */
static bool legal(const kernel_provider *self, const tune_task *t, const tune_space *s,
                  const tune_config *cfg) {
    tune_conv g;
    if (!tune_conv_read_task(t, &g) || g.op == IR_OP_CONV_NCHWC) return false;
    if (!kernel_legal_in_space(self, t, s, cfg)) return false;
    knobs k = read_knobs(s, cfg);
    return k.thx * k.thy * k.thz <= 1024 && k.tx * k.ty * k.tz <= CONV2D_CUDA_MAX_ACCUM &&
           shared_bytes(&g, &k) <= CONV2D_CUDA_MAX_SHARED && !idle_threads(&g, &k);
}

/* A block of about 128-256 threads, 4-16 accumulators each, staged through shared memory. */
static void default_config(const kernel_provider *self, const tune_task *t, const tune_space *s,
                           tune_config *cfg) {
    (void)self;
    tune_conv g;
    if (!tune_conv_default_start(t, cfg, &g)) return;
    int64_t thx = g.ow >= 8 ? 8 : tune_cuda_pow2_at_least(g.ow), thy = g.oh >= 4 ? 4 : tune_cuda_pow2_at_least(g.oh);
    tune_config_set(s, cfg, "thread_x", thx);
    tune_config_set(s, cfg, "thread_y", thy);
    thx = tune_value(s, cfg, "thread_x"), thy = tune_value(s, cfg, "thread_y");
    int64_t thz = 128 / (thx * thy);
    tune_config_set(s, cfg, "thread_z", thz < 1 ? 1 : thz);
    tune_config_set(s, cfg, "tile_x", g.ow >= 16 ? 2 : 1);
    tune_config_set(s, cfg, "tile_y", g.oh >= 16 ? 2 : 1);
    tune_config_set(s, cfg, "tile_z", g.cout >= 64 ? 4 : g.cout >= 16 ? 2 : 1);
    tune_config_set(s, cfg, "tile_rz", 8);
    tune_config_set(s, cfg, "shared", 1);
    tune_config_set(s, cfg, "order", ORDER_RC_OUTER);
    /* a dimension one thread's tile covers gets one thread */
    static const char *const dims[3][2] = {
        {"thread_z", "tile_z"}, {"thread_y", "tile_y"}, {"thread_x", "tile_x"}};
    const int64_t extent[3] = {g.cout, g.oh, g.ow};
    for (int d = 0; d < 3; d++)
        if (tune_value(s, cfg, dims[d][1]) >= extent[d]) tune_config_set(s, cfg, dims[d][0], 1);
    /* too much shared memory for a wide block: narrow the channel tile until it fits */
    knobs k = read_knobs(s, cfg);
    while (shared_bytes(&g, &k) > CONV2D_CUDA_MAX_SHARED && k.trz > 1) {
        tune_config_set(s, cfg, "tile_rz", k.trz / 2);
        int64_t before = k.trz;
        k = read_knobs(s, cfg);
        if (k.trz == before) break;
    }
    if (shared_bytes(&g, &k) > CONV2D_CUDA_MAX_SHARED) tune_config_set(s, cfg, "shared", 0);
}

static wpk_status failed(te_ctx *c) { return tune_failed(c, NAME); }

static wpk_status build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                        const tune_space *s, const tune_config *cfg, tune_build *out) {
    memset(out, 0, sizeof *out);
    tune_conv g;
    TRY(tune_conv_build_nchw(c, self, t, s, cfg, &g));
    const knobs k = read_knobs(s, cfg);
    const int64_t threads = k.thx * k.thy * k.thz, accum = k.tx * k.ty * k.tz;
    if (threads > 1024)
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, NAME ": %lld threads per block (thread_x * "
                         "thread_y * thread_z) is more than 1024", (long long)threads);
    if (accum > CONV2D_CUDA_MAX_ACCUM)
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, NAME ": %lld accumulators per thread "
                         "(tile_x * tile_y * tile_z) is more than %d", (long long)accum,
                         CONV2D_CUDA_MAX_ACCUM);
    const char *idle = idle_threads(&g, &k);
    if (idle)
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, NAME ": %s > 1, but one thread's tile (%lld x "
                         "%lld x %lld: channels, rows, columns) already covers that dimension of "
                         "the output (%lld x %lld x %lld): the other threads would have nothing",
                         idle, (long long)k.tz, (long long)k.ty, (long long)k.tx,
                         (long long)g.cout, (long long)g.oh, (long long)g.ow);
    const int64_t smem = shared_bytes(&g, &k);
    if (smem > CONV2D_CUDA_MAX_SHARED)
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, NAME ": the shared stages need %lld bytes "
                         "of shared memory (more than %d): smaller blocks or tile_rz",
                         (long long)smem, CONV2D_CUDA_MAX_SHARED);

    te_epilogue ep;
    const ir_tensor *x0 = &t->in[0], *w0 = &t->in[1];
    TRY(tune_conv_args(c, t, &g, x0->dims, 4, w0->dims, 4, t->out[0].dims, 4, out, &ep));
    te_tensor *x = out->args[0], *w = out->args[1];

    /* the reduction over whole blocks */
    const int64_t bz = k.thz * k.tz, by = k.thy * k.ty, bx = k.thx * k.tx;
    const int64_t cop = (g.cout + bz - 1) / bz * bz, ohp = (g.oh + by - 1) / by * by;
    const int64_t owp = (g.ow + bx - 1) / bx * bx;
    const int64_t hp = (ohp - 1) * g.p.stride[0] + (g.kh - 1) * g.p.dilation[0] + 1;
    const int64_t wp = (owp - 1) * g.p.stride[1] + (g.kw - 1) * g.p.dilation[1] + 1;
    /* grouped: the block's padded channels may reach past the last group: so may the input */
    const int64_t per = g.cout / g.p.groups;
    const int64_t cp = g.p.groups > 1 ? (cop + per - 1) / per * g.cg : g.cin;
    /* read at unclamped indices, the views keep the regions bounds inference gives the shared
       stages tight */
    te_tensor *pad = te_pad_to(c, "pad", x, (int64_t[]){0, 0, g.p.pad[0], g.p.pad[1]},
                               (int64_t[]){g.n, cp, hp, wp}, 0.0,
                               (const char *const[]){"n", "c", "h", "w"});
    te_tensor *wv = te_pad_to(c, "w.pad", w, (int64_t[]){0, 0, 0, 0},
                              (int64_t[]){cop, g.cg, g.kh, g.kw}, 0.0,
                              (const char *const[]){"oc", "ic", "kh", "kw"});
    const int64_t ashape[4] = {g.n, cop, ohp, owp};
    te_tensor *acc = pad && wv ? te_conv2d_nchw_reduce(c, "acc", pad, wv, &g.p, ashape, per) : NULL;
    /* the output: the epilogue on acc, over the real shape */
    te_tensor *y = te_epilogue_compute_to(c, "y", acc, t->out[0].dims, &ep, 1);
    if (!y) return failed(c);
    out->args[out->nargs++] = y;

    te_schedule *sc = te_schedule_create(c, &y, 1);
    if (!sc) return failed(c);
    out->schedule = sc;
    te_tensor *xs = NULL, *ws = NULL;
    if (k.shared) {
        TRY(te_cache_read(sc, pad, "shared", &acc, 1, &xs));
        TRY(te_cache_read(sc, wv, "shared", &acc, 1, &ws));
    }
    if (pad != x) TRY(te_compute_inline(te_stage_of(sc, pad)));
    if (wv != w) TRY(te_compute_inline(te_stage_of(sc, wv)));

    /* y: blocks and threads over the output, the thread's tile innermost */
    te_stage *sy = te_stage_of(sc, y);
    te_iter *io[3], *ii[3], *ib[3], *it[3];
    const int64_t tile[3] = {k.tz, k.ty, k.tx}, thr[3] = {k.thz, k.thy, k.thx};
    for (int d = 0; d < 3; d++) {
        TRY(te_split(sy, y->axes[d + 1], tile[d], &io[d], &ii[d]));
        TRY(te_split(sy, io[d], thr[d], &ib[d], &it[d]));
    }
    TRY(te_reorder(sy, 10, (te_iter *[]){y->axes[0], ib[0], ib[1], ib[2], it[0], it[1], it[2],
                                         ii[0], ii[1], ii[2]}));
    te_iter *nb;
    TRY(te_fuse(sy, y->axes[0], ib[0], &nb));
    TRY(te_bind(sy, nb, "blockIdx.z"));
    TRY(te_bind(sy, ib[1], "blockIdx.y"));
    TRY(te_bind(sy, ib[2], "blockIdx.x"));
    TRY(te_bind(sy, it[0], "threadIdx.z"));
    TRY(te_bind(sy, it[1], "threadIdx.y"));
    TRY(te_bind(sy, it[2], "threadIdx.x"));
    for (int d = 0; d < 3; d++) TRY(te_unroll(sy, ii[d]));

    /* acc: the block's whole tile, computed at the innermost block loop */
    te_stage *sa = te_stage_of(sc, acc);
    TRY(te_compute_at(sa, sy, ib[2]));
    TRY(te_set_scope(sa, "local"));
    te_iter *at[3], *ai[3];
    for (int d = 0; d < 3; d++) TRY(te_split(sa, acc->axes[d + 1], tile[d], &at[d], &ai[d]));
    te_iter *rco, *rci;
    te_iter *rc = tune_conv_raxis(acc, "rc"), *rh = tune_conv_raxis(acc, "kh"),
           *rw = tune_conv_raxis(acc, "kw");
    TRY(te_split(sa, rc, k.trz, &rco, &rci));
    te_iter *ord[11];
    int n = 0;
    ord[n++] = acc->axes[0];
    te_iter *attach;
    if (k.order == ORDER_TAPS_OUTER) {
        ord[n++] = rh, ord[n++] = rw, ord[n++] = rco;
        attach = rco;
        ord[n++] = at[0], ord[n++] = at[1], ord[n++] = at[2];
        ord[n++] = rci;
    } else {
        ord[n++] = rco;
        attach = rco;
        ord[n++] = at[0], ord[n++] = at[1], ord[n++] = at[2];
        if (k.order == ORDER_TAPS_INNER) ord[n++] = rh, ord[n++] = rw, ord[n++] = rci;
        else ord[n++] = rci, ord[n++] = rh, ord[n++] = rw;
    }
    ord[n++] = ai[0], ord[n++] = ai[1], ord[n++] = ai[2];
    TRY(te_reorder(sa, n, ord));
    TRY(te_bind(sa, at[0], "threadIdx.z"));
    TRY(te_bind(sa, at[1], "threadIdx.y"));
    TRY(te_bind(sa, at[2], "threadIdx.x"));
    for (int d = 0; d < 3; d++) TRY(te_unroll(sa, ai[d]));

    if (k.shared) {
        te_stage *sx = te_stage_of(sc, xs), *sw = te_stage_of(sc, ws);
        TRY(te_compute_at(sx, sa, attach));
        TRY(te_compute_at(sw, sa, attach));
        const int64_t block[3] = {k.thx, k.thy, k.thz};
        TRY(tune_cuda_cooperative(sx, 3, block));
        TRY(tune_cuda_cooperative(sw, 3, block));
    }
    return WPK_OK;
}

TUNE_TEMPLATE(tune_conv2d_cuda, NAME, tune_conv_supports_nchw, tune_conv_describe_task, legal);
