/* layernorm_cuda.c -- the CUDA template of LayerNormalization (ONNX's and wpk's, float32
 * statistics, no Mean/InvStdDev outputs): rows over the grid, one row per thread, the row's
 * mean, variance and outputs in that thread's registers and loops. The node reader, key and
 * operands are the CPU template's (layernorm_rows.h, its supports and describe); the algorithm is
 * te_layer_norm_split_mean over the input viewed as [rows, normalized dims...]; this file is
 * the GPU schedule.
 *
 * The mean is computed twice (once for the variance, once for the outputs): a compute placed
 * inside another stage's loop serves one consumer, and another pass over a row the thread has
 * just read (in L1) costs less than a second kernel. As softmax_cuda, a block-per-row form
 * would need cross-thread reductions, which the generator does not have. Knob: `threads` per
 * block. */
#include <stdio.h>
#include <string.h>

#include "te/algo/layer_norm.h"
#include "kernels/common.h"
#include "kernels/conv.h"
#include "kernels/layernorm_rows.h"
#include "kernels/templates_cuda.h"

#define NAME "layernorm_cuda"

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out) {
    (void)self;
    return tune_layernorm.supports(&tune_layernorm, n, in, out);
}

/* The CPU template's key with this template's name in front. */
static void describe(const kernel_provider *self, tune_task *t) {
    (void)self;
    tune_layernorm.describe(&tune_layernorm, t);
    const char *colon = strchr(t->key, ':');
    char key[sizeof t->key + 32];
    snprintf(key, sizeof key, NAME ":%s", colon ? colon + 1 : t->key);
    memcpy(t->key, key, sizeof t->key - 1);
    t->key[sizeof t->key - 1] = '\0';
}

static void space(const kernel_provider *self, const tune_task *t, tune_space *s) {
    (void)self;
    memset(s, 0, sizeof *s);
    tune_ln_rows g;
    if (!tune_layernorm_read_task(t, &g)) return;
    static const int64_t threads[] = {32, 64, 128, 256};
    int k = 1;
    while (k < 4 && threads[k - 1] < g.rows) k++;
    tune_space_add(s, "threads", k, threads);
}

/* small blocks: more of them spread over the SMs (a ViT has 197 rows, ConvNeXt's last stage
   49) */
static void default_config(const kernel_provider *self, const tune_task *t, const tune_space *s,
                           tune_config *cfg) {
    (void)self;
    memset(cfg, 0, sizeof *cfg);
    tune_ln_rows g;
    if (!tune_layernorm_read_task(t, &g)) return;
    tune_config_set(s, cfg, "threads", g.rows >= 64 * 132 ? 128 : 32);
}

static wpk_status build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                        const tune_space *s, const tune_config *cfg, tune_build *out) {
    memset(out, 0, sizeof *out);
    tune_ln_rows g;
    if (!tune_layernorm_read_task(t, &g))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, NAME ": node '%s' is not a "
                         "LayerNormalization this template takes",
                         t->node ? t->node->name : "(null)");
    TRY(tune_check_legal(c, self, t, s, cfg));
    te_tensor *x, *scale, *bias;
    TRY(tune_layernorm_operands(c, t, &g, NAME, out, &x, &scale, &bias));
    te_algo_parts parts;
    te_tensor *y = te_layer_norm_split_mean(c, "y", x, scale, bias, 1, g.eps, &parts);
    if (!y) return tune_failed(c, NAME);
    out->args[out->nargs++] = y;
    te_schedule *sc = te_schedule_create(c, &y, 1);
    if (!sc) return tune_failed(c, NAME);
    out->schedule = sc;

    te_stage *sy = te_stage_of(sc, y);
    te_iter *b, *th;
    TRY(te_split(sy, y->axes[0], tune_value(s, cfg, "threads"), &b, &th));
    TRY(te_bind(sy, b, "blockIdx.x"));
    TRY(te_bind(sy, th, "threadIdx.x"));
    /* the outputs' mean and the variance at the row's thread; the variance's mean inside the
       variance's stage, its one consumer (at its innermost data axis) */
    te_tensor *var = parts.stats[1];
    te_stage *sm = te_stage_of(sc, parts.stats[0]), *sv = te_stage_of(sc, var);
    te_stage *svm = te_stage_of(sc, parts.stats[2]);
    TRY(te_compute_at(sm, sy, th));
    TRY(te_set_scope(sm, "local"));
    TRY(te_compute_at(sv, sy, th));
    TRY(te_set_scope(sv, "local"));
    TRY(te_compute_at(svm, sv, var->axes[var->ndim - 1]));
    TRY(te_set_scope(svm, "local"));
    return WPK_OK;
}

TUNE_TEMPLATE(tune_layernorm_cuda, NAME, supports, describe, kernel_legal_in_space);
