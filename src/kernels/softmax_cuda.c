/* softmax_cuda.c -- the CUDA template of Softmax (float32): rows over the grid, one row per
 * thread, the row's max, exp-sum and outputs in that thread's registers and loop.
 *
 * The input is viewed as [outer, len, inner] with the normalized axis in the middle (opset 13:
 * one axis; older opsets: everything from `axis` on flattened into len), as the CPU template
 * and the reference kernel read it; a row is one (outer, inner) pair. The algorithm is
 *     y[o, l, i] = exp(x[o, l, i] - max1[o, i]) / sum[o, i],
 *     sum[o, i]  = sum(k: exp(x[o, k, i] - max2[o, i])),
 * with the row's max computed twice (max1 for the outputs, max2 for the sum): a compute placed
 * inside another stage's loop serves one consumer, and the second max pass over a row in
 * registers costs less than a kernel boundary. Every row's statistics stay in its thread. A
 * cooperative (block per row) form needs cross-thread reductions, which the generator does not
 * have; the classifier softmax of a CNN is one row of 1000 and this form takes microseconds. */
#include <string.h>

#include "kernels/common.h"
#include "kernels/conv.h"
#include "kernels/templates_cuda.h"

#define NAME "softmax_cuda"

typedef struct sm {
    int64_t outer, len, inner;
} sm;

static bool read_sm(const ir_node *n, const ir_tensor *x, const ir_tensor *y, sm *g) {
    if (!n || n->op != IR_OP_SOFTMAX || !x || !y || !tune_static_f32(x) || x->ndim < 1 ||
        !ir_same_shape(x, y))
        return false;
    const bool v13 = n->opset >= 13;
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
    static const int64_t threads[] = {32, 64, 128, 256};
    const int64_t rows = g.outer * g.inner;
    int k = 1;
    while (k < 4 && threads[k - 1] < rows) k++;
    tune_space_add(s, "threads", k, threads);
}

static void default_config(const kernel_provider *self, const tune_task *t, const tune_space *s, tune_config *cfg) {
    (void)self;
    memset(cfg, 0, sizeof *cfg);
    sm g;
    if (!read_task(t, &g)) return;
    /* small blocks: more of them spread over the SMs */
    tune_config_set(s, cfg, "threads", g.outer * g.inner >= 64 * 132 ? 128 : 32);
}

#define TRY(x)                                                                             \
    do {                                                                                   \
        wpk_status st_ = (x);                                                              \
        if (st_) return st_;                                                               \
    } while (0)

/* max(k: x[o, k, i]) over [outer, inner] (name "max1" / "max2"). */
static te_tensor *row_max(te_ctx *c, te_tensor *x, const sm *g, const char *name) {
    const int64_t shape[2] = {g->outer, g->inner};
    te_iter **ax = te_compute_axes(c, 2, shape, (const char *const[]){"o", "i"});
    te_iter *k = te_reduce_axis(c, "k", 0, g->len);
    if (!ax || !k) return NULL;
    const te_expr *idx[3] = {te_var(c, ax[0]), te_var(c, k), te_var(c, ax[1])};
    const te_expr *v = te_reduce(c, TE_REDUCE_MAX, te_load(c, x, 3, idx), 1, &k);
    return v ? te_compute(c, name, 2, shape, ax, v) : NULL;
}

static wpk_status build(const kernel_provider *self, te_ctx *c, const tune_task *t, const tune_space *s,
                        const tune_config *cfg, tune_build *out) {
    (void)self;
    memset(out, 0, sizeof *out);
    sm g;
    if (!read_task(t, &g))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, NAME ": node '%s' is not a Softmax this "
                         "template takes", t->node ? t->node->name : "(null)");
    TRY(tune_check_legal(c, self, t, s, cfg));
    const int64_t threads = tune_value(s, cfg, "threads");
    const int64_t shape[3] = {g.outer, g.len, g.inner};
    te_tensor *x = te_placeholder(c, "x", TE_F32, 3, shape);
    if (!x) return tune_failed(c, NAME);
    out->args[out->nargs++] = x;
    out->ninputs = 1;

    te_tensor *m1 = row_max(c, x, &g, "max1"), *m2 = row_max(c, x, &g, "max2");
    const int64_t sshape[2] = {g.outer, g.inner};
    te_iter **sa = te_compute_axes(c, 2, sshape, (const char *const[]){"o", "i"});
    te_iter *k = te_reduce_axis(c, "k", 0, g.len);
    if (!m1 || !m2 || !sa || !k) return tune_failed(c, NAME);
    const te_expr *so = te_var(c, sa[0]), *si = te_var(c, sa[1]);
    const te_expr *xk = te_load(c, x, 3, (const te_expr *[]){so, te_var(c, k), si});
    const te_expr *e = te_call(c, TE_FN_EXP,
                               te_sub(c, xk, te_load(c, m2, 2, (const te_expr *[]){so, si})), NULL);
    const te_expr *sum_v = te_reduce(c, TE_REDUCE_SUM, e, 1, &k);
    te_tensor *sum = sum_v ? te_compute(c, "sum", 2, sshape, sa, sum_v) : NULL;
    te_iter **ya = te_compute_axes(c, 3, shape, (const char *const[]){"o", "l", "i"});
    if (!sum || !ya) return tune_failed(c, NAME);
    const te_expr *yo = te_var(c, ya[0]), *yl = te_var(c, ya[1]), *yi = te_var(c, ya[2]);
    const te_expr *num = te_call(c, TE_FN_EXP,
                                 te_sub(c, te_load(c, x, 3, (const te_expr *[]){yo, yl, yi}),
                                        te_load(c, m1, 2, (const te_expr *[]){yo, yi})), NULL);
    const te_expr *yv = te_div(c, num, te_load(c, sum, 2, (const te_expr *[]){yo, yi}));
    te_tensor *y = yv ? te_compute(c, "y", 3, shape, ya, yv) : NULL;
    if (!y) return tune_failed(c, NAME);
    out->args[out->nargs++] = y;

    te_schedule *sc = te_schedule_create(c, &y, 1);
    if (!sc) return tune_failed(c, NAME);
    out->schedule = sc;
    te_stage *sy = te_stage_of(sc, y);
    te_iter *row, *b, *th;
    TRY(te_reorder(sy, 3, (te_iter *[]){y->axes[0], y->axes[2], y->axes[1]}));
    TRY(te_fuse(sy, y->axes[0], y->axes[2], &row));
    TRY(te_split(sy, row, threads, &b, &th));
    TRY(te_bind(sy, b, "blockIdx.x"));
    TRY(te_bind(sy, th, "threadIdx.x"));
    /* the sum and max1 at the row's thread; max2 inside the sum's stage, its one consumer */
    te_stage *ss = te_stage_of(sc, sum), *s1 = te_stage_of(sc, m1), *s2 = te_stage_of(sc, m2);
    TRY(te_compute_at(ss, sy, th));
    TRY(te_set_scope(ss, "local"));
    TRY(te_compute_at(s1, sy, th));
    TRY(te_set_scope(s1, "local"));
    TRY(te_compute_at(s2, ss, sum->axes[1]));
    TRY(te_set_scope(s2, "local"));
    return WPK_OK;
}

const kernel_provider tune_softmax_cuda = {
    .name = NAME,
    .family = "generated",
    .supports = supports,
    .describe = describe,
    .space = space,
    .default_config = default_config,
    .build = build,
};
