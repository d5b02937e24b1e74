/* softmax_cuda.c -- the CUDA template of Softmax (float32): rows over the grid, one row per
 * thread, the row's max, exp-sum and outputs in that thread's registers and loop. The reader,
 * key and algorithm are softmax_rows.h's (shared with the CPU template); this file is the GPU
 * schedule.
 *
 * A row is one (outer, inner) pair of the [outer, len, inner] view. The algorithm is
 * te_softmax_split_max: the row's max is computed twice (one for the outputs, one for the sum),
 * since a compute placed inside another stage's loop serves one consumer, and the second max
 * pass over a row in registers costs less than a kernel boundary. Every row's statistics stay in
 * its thread. A cooperative (block per row) form needs cross-thread reductions, which the
 * generator does not have; the classifier softmax of a CNN is one row of 1000 and this form
 * takes microseconds. */
#include <string.h>

#include "kernels/common.h"
#include "kernels/conv.h"
#include "kernels/softmax_rows.h"
#include "kernels/templates_cuda.h"

#define NAME "softmax_cuda"

static void space(const kernel_provider *self, const tune_task *t, tune_space *s) {
    (void)self;
    tune_softmax_rows g;
    if (!tune_softmax_space_start(t, s, &g)) return;
    static const int64_t threads[] = {32, 64, 128, 256};
    const int64_t rows = g.outer * g.inner;
    int k = 1;
    while (k < 4 && threads[k - 1] < rows) k++;
    tune_space_add(s, "threads", k, threads);
}

static void default_config(const kernel_provider *self, const tune_task *t, const tune_space *s,
                           tune_config *cfg) {
    (void)self;
    tune_softmax_rows g;
    if (!tune_softmax_default_start(t, cfg, &g)) return;
    /* small blocks: more of them spread over the SMs */
    tune_config_set(s, cfg, "threads", g.outer * g.inner >= 64 * 132 ? 128 : 32);
}

static wpk_status build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                        const tune_space *s, const tune_config *cfg, tune_build *out) {
    te_algo_parts parts;
    tune_softmax_rows g;
    TRY(tune_softmax_build(self, c, t, s, cfg, true, out, &parts, &g));
    const int64_t threads = tune_value(s, cfg, "threads");
    te_schedule *sc = out->schedule;
    te_tensor *y = out->args[1], *sum = parts.stats[1];
    te_stage *sy = te_stage_of(sc, y);
    te_iter *row, *b, *th;
    TRY(te_reorder(sy, 3, (te_iter *[]){y->axes[0], y->axes[2], y->axes[1]}));
    TRY(te_fuse(sy, y->axes[0], y->axes[2], &row));
    TRY(te_split(sy, row, threads, &b, &th));
    TRY(te_bind(sy, b, "blockIdx.x"));
    TRY(te_bind(sy, th, "threadIdx.x"));
    /* the sum and the outputs' max at the row's thread; the sum's max inside the sum's stage,
       its one consumer (at the sum's innermost data axis) */
    te_stage *ss = te_stage_of(sc, sum), *s1 = te_stage_of(sc, parts.stats[0]);
    te_stage *s2 = te_stage_of(sc, parts.stats[2]);
    TRY(te_compute_at(ss, sy, th));
    TRY(te_set_scope(ss, "local"));
    TRY(te_compute_at(s1, sy, th));
    TRY(te_set_scope(s1, "local"));
    TRY(te_compute_at(s2, ss, sum->axes[2]));
    TRY(te_set_scope(s2, "local"));
    return WPK_OK;
}

TUNE_TEMPLATE(tune_softmax_cuda, NAME, tune_softmax_supports, tune_softmax_describe_task,
              kernel_legal_in_space);
