/* layernorm.c -- the template of LayerNormalization (float32 statistics, no Mean/InvStdDev
 * outputs): te_layer_norm (te/algo/layer_norm.h) over the input viewed as [rows, normalized
 * dims...] (the dims before `axis` are one row axis; Scale and B broadcast to the normalized
 * dims as they are).
 *
 * The schedule: rows in parallel (`parallel`). The mean of every row is computed first (a
 * stage of its own: both the variance and the output read it); the variance is a "local"
 * stage computed at the row loop (`stats` 1) or also computed first for all rows (`stats`
 * 0); the row's normalized elements are fused into one loop cut into `vec`-lane vectors.
 * Rows of whole `vec`-lane vectors with full or one-value parameters take the lanes form
 * instead (build_lanes): a scalar sum of 768 floats is a chain of dependent adds, the lane
 * sums are one vector add per 16 floats. */
#include <string.h>

#include "te/algo/layer_norm.h"
#include "kernels/common.h"
#include "kernels/conv.h"
#include "kernels/layernorm_rows.h"

#define NAME "layernorm"

typedef tune_ln_rows ln;

/* p broadcasts to x's dims from axis on. */
static bool param_fits(const ir_tensor *p, const ir_tensor *x, int axis) {
    int nd = x->ndim - axis;
    if (!tune_static_f32(p) || p->ndim > nd) return false;
    for (int i = 0; i < p->ndim; i++) {
        int64_t want = x->dims[axis + nd - p->ndim + i];
        if (p->dims[i] != 1 && p->dims[i] != want) return false;
    }
    return true;
}

static bool read_ln(const ir_node *n, const ir_tensor *const *in, const ir_tensor *y, ln *g) {
    if (!n || (n->op != IR_OP_LAYER_NORM && n->op != IR_OP_LAYER_NORM_WPK) || n->nin < 2 ||
        n->nin > 3 || !in[0] || !in[1] || !y)
        return false;
    const ir_tensor *x = in[0];
    if (!tune_static_f32(x) || x->ndim < 1 || !ir_same_shape(x, y)) return false;
    if (ir_attr_int(n, "stash_type", 1) != WPK_DTYPE_FLOAT32) return false;
    int64_t axis = ir_attr_int(n, "axis", -1);
    if (axis < -x->ndim || axis >= x->ndim) return false;
    if (axis < 0) axis += x->ndim;
    g->axis = (int)axis;
    if (!param_fits(in[1], x, g->axis)) return false;
    if (n->nin > 2 && in[2] && !param_fits(in[2], x, g->axis)) return false;
    g->rows = g->cols = 1;
    for (int i = 0; i < x->ndim; i++) *(i < axis ? &g->rows : &g->cols) *= x->dims[i];
    g->eps = ir_attr_float(n, "epsilon", 1e-5f);
    /* the view [rows, normalized dims...] needs a dim to spare */
    return x->ndim - g->axis + 1 <= TE_MAX_DIMS;
}

bool tune_layernorm_read_task(const tune_task *t, ln *g) {
    const ir_tensor *in[3] = {tune_task_in(t, 0), tune_task_in(t, 1), tune_task_in(t, 2)};
    return read_ln(t->node, in, &t->out[0], g);
}

wpk_status tune_layernorm_operands(te_ctx *c, const tune_task *t, const ln *g, const char *tmpl,
                                   tune_build *out, te_tensor **x, te_tensor **scale,
                                   te_tensor **bias) {
    const ir_tensor *x0 = &t->in[0];
    int64_t shape[TE_MAX_DIMS];
    int nd = 1 + x0->ndim - g->axis;
    shape[0] = g->rows;
    for (int i = g->axis; i < x0->ndim; i++) shape[1 + i - g->axis] = x0->dims[i];
    *x = te_placeholder(c, "x", TE_F32, nd, shape);
    *scale = tune_placeholder(c, "scale", &t->in[1]);
    const ir_tensor *b0 = tune_task_in(t, 2);
    *bias = b0 ? tune_placeholder(c, "bias", b0) : NULL;
    if (!*x || !*scale || (b0 && !*bias)) return tune_failed(c, tmpl);
    out->args[out->nargs++] = *x;
    out->args[out->nargs++] = *scale;
    if (*bias) out->args[out->nargs++] = *bias;
    out->ninputs = out->nargs;
    return WPK_OK;
}

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out) {
    (void)self;
    ln g;
    if (!n || n->nout < 1 || !out[0]) return false;
    for (int i = 1; i < n->nout; i++)
        if (out[i]) return false; /* Mean, InvStdDev: the reference kernel writes them */
    const ir_tensor *ci[3] = {in[0], n->nin > 1 ? in[1] : NULL, n->nin > 2 ? in[2] : NULL};
    return read_ln(n, ci, out[0], &g);
}

static void describe(const kernel_provider *self, tune_task *t) {
    (void)self;
    ln g;
    if (!tune_layernorm_read_task(t, &g)) return;
    tune_key_add(t, NAME ":x=");
    tune_key_dims(t, &t->in[0]);
    tune_key_add(t, ",axis%d,scale=", g.axis);
    tune_key_dims(t, &t->in[1]);
    const ir_tensor *bias = tune_task_in(t, 2);
    if (bias) {
        tune_key_add(t, ",bias=");
        tune_key_dims(t, bias);
    }
    tune_key_add(t, ",eps%g", (double)g.eps);
    t->flops = 8 * g.rows * g.cols;
}

static void space(const kernel_provider *self, const tune_task *t, tune_space *s) {
    (void)self;
    memset(s, 0, sizeof *s);
    ln g;
    if (!tune_layernorm_read_task(t, &g)) return;
    static const int64_t vecs[] = {1, 4, 8, 16}, flag[] = {0, 1};
    int k = 1;
    while (k < 4 && vecs[k] <= g.cols) k++;
    tune_space_add(s, "vec", k, vecs);
    tune_space_add(s, "stats", 2, flag);
    tune_space_add(s, "parallel", g.rows > 1 ? 2 : 1, flag);
}

static void default_config(const kernel_provider *self, const tune_task *t, const tune_space *s,
                           tune_config *cfg) {
    (void)self;
    memset(cfg, 0, sizeof *cfg);
    ln g;
    if (!tune_layernorm_read_task(t, &g)) return;
    tune_config_set(s, cfg, "vec", tune_vector_floats());
    tune_config_set(s, cfg, "stats", 1);
    tune_config_set(s, cfg, "parallel", g.rows * g.cols >= 16384);
}

/* The lanes form (te_layer_norm_lanes) takes a row of whole vectors whose scale and bias are
 * either full (one value per element) or one value: then every sum runs in vector lanes. */
static bool lanes_fit(const tune_task *t, const ln *g, int64_t vec) {
    if (vec <= 1 || g->cols % vec) return false;
    for (int i = 1; i < 3; i++) {
        const ir_tensor *p = tune_task_in(t, i);
        if (p && ir_numel(p) != g->cols && ir_numel(p) != 1) return false;
    }
    return true;
}

/* The schedule of the lanes form: rows in parallel (`parallel`); each statistic's lane sums
 * are computed at its row as one vector (the groups reduced outside, the lanes inside);
 * the mean is a stage of its own (both the variance and the output read it), the variance is
 * computed at the output's row (`stats` 1) or first for all rows; the output row in vectors. */
static wpk_status build_lanes(te_ctx *c, const tune_task *t, const ln *g, int64_t vec,
                              bool stats_at_row, bool parallel, tune_build *out) {
    const int64_t groups = g->cols / vec;
    te_tensor *x = te_placeholder(c, "x", TE_F32, 3, (const int64_t[]){g->rows, groups, vec});
    te_tensor *params[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        const ir_tensor *p = tune_task_in(t, 1 + i);
        if (!p) continue;
        bool one = ir_numel(p) == 1;
        params[i] = te_placeholder(c, i ? "bias" : "scale", TE_F32, 2,
                                   (const int64_t[]){one ? 1 : groups, one ? 1 : vec});
        if (!params[i]) return tune_failed(c, NAME);
    }
    if (!x) return tune_failed(c, NAME);
    out->args[out->nargs++] = x;
    for (int i = 0; i < 2; i++)
        if (params[i]) out->args[out->nargs++] = params[i];
    out->ninputs = out->nargs;
    te_algo_parts parts;
    te_tensor *lane_parts[2];
    te_tensor *y = te_layer_norm_lanes(c, "y", x, params[0], params[1], g->eps, &parts,
                                       lane_parts);
    if (!y) return tune_failed(c, NAME);
    out->args[out->nargs++] = y;
    te_schedule *sc = te_schedule_create(c, &y, 1);
    if (!sc) return tune_failed(c, NAME);
    out->schedule = sc;
    te_stage *so = te_stage_of(sc, y);
    if (parallel) TRY(te_parallel(so, y->axes[0]));
    TRY(te_vectorize(so, y->axes[2]));
    for (int k = 0; k < 2; k++) {
        te_tensor *st = parts.stats[k];
        te_stage *ss = te_stage_of(sc, st);
        if (stats_at_row && k == 1) {
            TRY(te_compute_at(ss, so, y->axes[0]));
            TRY(te_set_scope(ss, "local"));
        } else if (parallel) {
            TRY(te_parallel(ss, st->axes[0]));
        }
        te_tensor *lp = lane_parts[k];
        te_stage *ls = te_stage_of(sc, lp);
        TRY(te_compute_at(ls, ss, st->axes[0]));
        TRY(te_set_scope(ls, "local"));
        TRY(te_reorder(ls, 2, (te_iter *[]){lp->body->raxes[0], lp->axes[2]}));
        TRY(te_vectorize(ls, lp->axes[2]));
    }
    return WPK_OK;
}

static wpk_status build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                        const tune_space *s,
                        const tune_config *cfg, tune_build *out) {
    memset(out, 0, sizeof *out);
    ln g;
    if (!tune_layernorm_read_task(t, &g))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, NAME ": node '%s' is not a "
                         "LayerNormalization this template takes",
                         t->node ? t->node->name : "(null)");
    TRY(tune_check_legal(c, self, t, s, cfg));
    const int64_t vec = tune_value(s, cfg, "vec");
    const bool stats_at_row = tune_value(s, cfg, "stats") != 0;
    const bool parallel = tune_value(s, cfg, "parallel") != 0;
    if (lanes_fit(t, &g, vec)) return build_lanes(c, t, &g, vec, stats_at_row, parallel, out);
    te_tensor *x, *scale, *bias;
    TRY(tune_layernorm_operands(c, t, &g, NAME, out, &x, &scale, &bias));
    int nd = x->ndim;
    te_algo_parts parts;
    te_tensor *y = te_layer_norm(c, "y", x, scale, bias, 1, g.eps, &parts);
    if (!y) return tune_failed(c, NAME);
    out->args[out->nargs++] = y;
    te_schedule *sc = te_schedule_create(c, &y, 1);
    if (!sc) return tune_failed(c, NAME);
    out->schedule = sc;

    te_stage *so = te_stage_of(sc, y);
    te_iter *row = y->axes[0], *col = y->axes[1];
    for (int d = 2; d < nd; d++) TRY(te_fuse(so, col, y->axes[d], &col));
    if (parallel) TRY(te_parallel(so, row));
    if (vec > 1) {
        te_iter *co, *ci;
        TRY(te_split(so, col, vec, &co, &ci));
        TRY(te_vectorize(so, ci));
    }
    for (int k = 0; k < 2; k++) {
        te_stage *ss = te_stage_of(sc, parts.stats[k]);
        /* the mean is read by the variance and the output: lowering places a compute_at
           stage for one consumer, so it stays a stage of its own (one float per row) */
        if (stats_at_row && k == 1) {
            TRY(te_compute_at(ss, so, row));
            TRY(te_set_scope(ss, "local"));
        } else if (parallel) {
            TRY(te_parallel(ss, parts.stats[k]->axes[0]));
        }
    }
    return WPK_OK;
}

const kernel_provider tune_layernorm = {
    .name = NAME,
    .family = "generated",
    .supports = supports,
    .describe = describe,
    .space = space,
    .default_config = default_config,
    .legal = kernel_legal_in_space,
    .build = build,
};
