/* softmax.c -- the CPU template of Softmax (float32): te_softmax over the input viewed as
 * [outer, len, inner] with the normalized axis in the middle (the reader, key and algorithm
 * call are softmax_rows.h's, shared with softmax_cuda.c); this file is the CPU schedule.
 *
 * The schedule: rows (outer x chunks of `chunk` inner columns) in parallel. The max of every
 * row is computed first (a stage of its own: both the sum and the output read it); the
 * exp-sum is a "local" stage computed at the row loop (`stats` 1) or also computed first for
 * all rows (`stats` 0); then the output is written with its contiguous axis cut
 * into `vec`-lane vectors: the normalized axis itself when inner is 1, else the chunk's
 * columns, whose statistics are then vectors as well. */
#include <string.h>

#include "kernels/common.h"
#include "kernels/conv.h"
#include "kernels/softmax_rows.h"

#define NAME "softmax"

static void space(const kernel_provider *self, const tune_task *t, tune_space *s) {
    (void)self;
    memset(s, 0, sizeof *s);
    tune_softmax_rows g;
    if (!tune_softmax_read_task(t, &g)) return;
    static const int64_t vecs[] = {1, 4, 8, 16}, chunks[] = {1, 16, 64, 256}, flag[] = {0, 1};
    int64_t contiguous = g.inner > 1 ? g.inner : g.len;
    int k = 1;
    while (k < 4 && vecs[k] <= contiguous) k++;
    tune_space_add(s, "vec", k, vecs);
    if (g.inner > 1) {
        k = 2;
        while (k < 4 && chunks[k - 1] < g.inner) k++;
        tune_space_add(s, "chunk", k - 1, chunks + 1);
    } else {
        tune_space_add(s, "chunk", 1, chunks);
    }
    tune_space_add(s, "stats", 2, flag);
    tune_space_add(s, "parallel", 2, flag);
}

static void default_config(const kernel_provider *self, const tune_task *t, const tune_space *s,
                           tune_config *cfg) {
    (void)self;
    memset(cfg, 0, sizeof *cfg);
    tune_softmax_rows g;
    if (!tune_softmax_read_task(t, &g)) return;
    tune_config_set(s, cfg, "vec", tune_vector_floats());
    tune_config_set(s, cfg, "chunk", 256);
    tune_config_set(s, cfg, "stats", 1);
    tune_config_set(s, cfg, "parallel", g.outer * g.len * g.inner >= 16384);
}

static wpk_status build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                        const tune_space *s, const tune_config *cfg, tune_build *out) {
    te_algo_parts parts;
    tune_softmax_rows g;
    TRY(tune_softmax_build(self, c, t, s, cfg, false, out, &parts, &g));
    const int64_t vec = tune_value(s, cfg, "vec"), chunk = tune_value(s, cfg, "chunk");
    const bool stats_at_row = tune_value(s, cfg, "stats") != 0;
    const bool parallel = tune_value(s, cfg, "parallel") != 0;
    te_schedule *sc = out->schedule;
    te_tensor *y = out->args[1];

    te_stage *so = te_stage_of(sc, y);
    te_iter *o = y->axes[0], *l = y->axes[1], *i = y->axes[2], *io = NULL, *ii = i, *row;
    if (g.inner > 1 && chunk > 1) {
        TRY(te_split(so, i, chunk, &io, &ii));
        TRY(te_reorder(so, 4, (te_iter *[]){o, io, l, ii}));
        TRY(te_fuse(so, o, io, &row));
    } else {
        row = o;
    }
    if (parallel) TRY(te_parallel(so, row));
    /* the contiguous axis in vectors */
    te_iter *vaxis = g.inner > 1 ? ii : l, *vo, *vi;
    int64_t vext = g.inner > 1 ? (chunk < g.inner ? chunk : g.inner) : g.len;
    if (vec > 1 && vext > 1) {
        TRY(te_split(so, vaxis, vec, &vo, &vi));
        TRY(te_vectorize(so, vi));
    }
    for (int k = 0; k < 2; k++) {
        te_tensor *st = parts.stats[k];
        te_stage *ss = te_stage_of(sc, st);
        /* the max is read by the sum and the output: lowering places a compute_at stage for
           one consumer, so it stays a stage of its own (one float per row) */
        if (stats_at_row && k == 1) {
            TRY(te_compute_at(ss, so, row));
            TRY(te_set_scope(ss, "local"));
        } else if (parallel) {
            TRY(te_parallel(ss, st->axes[0]));
        }
        if (g.inner > 1) {
            /* the reduction over len outside, the chunk's columns inside as vectors */
            te_iter *r = st->body->raxes[0], *ci = st->axes[2];
            TRY(te_reorder(ss, 2, (te_iter *[]){r, ci}));
            if (vec > 1 && vext > 1) {
                te_iter *co, *cv;
                TRY(te_split(ss, ci, vec, &co, &cv));
                TRY(te_vectorize(ss, cv));
            }
        }
    }
    return WPK_OK;
}

const kernel_provider tune_softmax = {
    .name = NAME,
    .family = "generated",
    .supports = tune_softmax_supports,
    .describe = tune_softmax_describe_task,
    .space = space,
    .default_config = default_config,
    .legal = kernel_legal_in_space,
    .build = build,
};
