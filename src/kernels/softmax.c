/* softmax.c -- the template of Softmax (float32): te_softmax (te/algo/softmax.h) over the
 * input viewed as [outer, len, inner] with the normalized axis in the middle (opset 13: one
 * axis; older opsets: everything from `axis` on flattened into len, inner 1).
 *
 * The schedule: rows (outer x chunks of `chunk` inner columns) in parallel. The max of every
 * row is computed first (a stage of its own: both the sum and the output read it); the
 * exp-sum is a "local" stage computed at the row loop (`stats` 1) or also computed first for
 * all rows (`stats` 0); then the output is written with its contiguous axis cut
 * into `vec`-lane vectors: the normalized axis itself when inner is 1, else the chunk's
 * columns, whose statistics are then vectors as well. */
#include <string.h>

#include "te/algo/softmax.h"
#include "kernels/common.h"
#include "kernels/conv.h"

#define NAME "softmax"

typedef struct sm {
    int64_t outer, len, inner;
} sm;

static bool read_sm(const ir_node *n, const ir_tensor *x, const ir_tensor *y, sm *g) {
    if (!n || n->op != IR_OP_SOFTMAX || !x || !y || !tune_static_f32(x) || x->ndim < 1 ||
        !ir_same_shape(x, y))
        return false;
    bool v13 = n->opset >= 13;
    int64_t axis = ir_attr_int(n, "axis", v13 ? -1 : 1);
    if (axis < -x->ndim || axis >= x->ndim) return false;
    if (axis < 0) axis += x->ndim;
    g->outer = g->len = g->inner = 1;
    for (int i = 0; i < x->ndim; i++) {
        if (i < axis) g->outer *= x->dims[i];
        else if (i == axis || !v13) g->len *= x->dims[i];
        else g->inner *= x->dims[i];
    }
    return true;
}

static bool read_task(const tune_task *t, sm *g) {
    return t->nin >= 1 && read_sm(t->node, &t->in[0], &t->out[0], g);
}

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    (void)self;
    sm g;
    return n && n->nin == 1 && n->nout == 1 && read_sm(n, in[0], out[0], &g);
}

static void describe(const kernel_provider *self, tune_task *t) {
    (void)self;
    sm g;
    if (!read_task(t, &g)) return;
    tune_key_add(t, NAME ":outer%lld,len%lld,inner%lld", (long long)g.outer, (long long)g.len,
                 (long long)g.inner);
    t->flops = 5 * g.outer * g.len * g.inner;
}

static void space(const kernel_provider *self, const tune_task *t, tune_space *s) {
    (void)self;
    memset(s, 0, sizeof *s);
    sm g;
    if (!read_task(t, &g)) return;
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

static void default_config(const kernel_provider *self, const tune_task *t, const tune_space *s, tune_config *cfg) {
    (void)self;
    memset(cfg, 0, sizeof *cfg);
    sm g;
    if (!read_task(t, &g)) return;
    tune_config_set(s, cfg, "vec", tune_vector_floats());
    tune_config_set(s, cfg, "chunk", 256);
    tune_config_set(s, cfg, "stats", 1);
    tune_config_set(s, cfg, "parallel", g.outer * g.len * g.inner >= 16384);
}

#define TRY(x)                                                                             \
    do {                                                                                   \
        wpk_status st_ = (x);                                                              \
        if (st_) return st_;                                                               \
    } while (0)

static wpk_status build(const kernel_provider *self, te_ctx *c, const tune_task *t, const tune_space *s,
                        const tune_config *cfg, tune_build *out) {
    (void)self;
    memset(out, 0, sizeof *out);
    sm g;
    if (!read_task(t, &g))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, NAME ": node '%s' is not a Softmax this "
                         "template takes", t->node ? t->node->name : "(null)");
    TRY(tune_check_legal(c, self, t, s, cfg));
    const int64_t vec = tune_value(s, cfg, "vec"), chunk = tune_value(s, cfg, "chunk");
    const bool stats_at_row = tune_value(s, cfg, "stats") != 0;
    const bool parallel = tune_value(s, cfg, "parallel") != 0;
    const int64_t shape[3] = {g.outer, g.len, g.inner};
    te_tensor *x = te_placeholder(c, "x", TE_F32, 3, shape);
    if (!x) return tune_failed(c, NAME);
    out->args[out->nargs++] = x;
    out->ninputs = 1;
    te_algo_parts parts;
    te_tensor *y = te_softmax(c, "y", x, 1, &parts);
    if (!y) return tune_failed(c, NAME);
    out->args[out->nargs++] = y;
    te_schedule *sc = te_schedule_create(c, &y, 1);
    if (!sc) return tune_failed(c, NAME);
    out->schedule = sc;

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
    .supports = supports,
    .describe = describe,
    .space = space,
    .default_config = default_config,
    .build = build,
};
