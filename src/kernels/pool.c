/* pool.c -- the templates of pooling: 2-D MaxPool / AveragePool on NCHW tensors and the layout
 * pass's MaxPoolNCHWc / AveragePoolNCHWc on blocked [N, C/x, H, W, x] tensors (one template,
 * "pool2d", over te_pool2d's algorithm, te/algo/pool.h), and GlobalAveragePool /
 * GlobalMaxPool ("global_pool", te_global_pool).
 *
 * pool2d, NCHW: images x channels (x rows, `parallel`) in parallel; each row cut into `vec`
 * output columns whose window reduction is a "local" stage at the column tile, taps outside
 * and columns inside (vectorized: with stride s a tap reads every s-th column), the average's
 * divide applied as the tile is written. Blocked: the lanes of a channel block are the vector,
 * a window's taps accumulate x lanes at a time, `ow_block` output pixels per step. Padding
 * is either a padded copy of the input made first (`pad_copy`: the reduction then reads
 * without tests) or computed inline (tests that loop partitioning keeps out of the interior).
 * For the blocked layout the algorithm reads the blocked input through an inline NCHW view,
 * so the pooling semantics (pads, dilation, ceil_mode, count_include_pad) are te_pool2d's.
 *
 * global_pool: one reduction per (image, channel) plane over its contiguous elements, planes
 * in parallel blocks of `grain`. */
#include <string.h>

#include "te/algo/pool.h"
#include "kernels/common.h"
#include "kernels/conv.h"

#define ATTR_MAX ((int64_t)1 << 30)

/* ---- pool2d ---- */

#define NAME "pool2d"

typedef struct pool {
    bool blocked;            /* [N, C/x, H, W, x] */
    int64_t n, c, h, w, x;   /* c: channels as the algorithm sees them (blocked: C/x * x) */
    int64_t oh, ow;
    te_pool2d_params p;
} pool;

static bool ints(const ir_node *n, const char *name, int count, int64_t def, int64_t lo,
                 int64_t *out) {
    const ir_attr *a = ir_attr_find(n, name);
    for (int i = 0; i < count; i++) out[i] = def;
    if (!a || (a->kind == IR_ATTR_INTS && a->n == 0)) return true;
    if (a->kind != IR_ATTR_INTS || a->n != count) return false;
    for (int i = 0; i < count; i++) {
        if (a->ints[i] < lo || a->ints[i] > ATTR_MAX) return false;
        out[i] = a->ints[i];
    }
    return true;
}

/* Read a pooling node: attributes as ops/pool.c and ops/blocked_pool.c read them (auto_pad
 * resolved to explicit pads), and te_pool2d's output size checked against the node's. */
static bool read_pool(const ir_node *n, const ir_tensor *x, const ir_tensor *y, pool *g) {
    memset(g, 0, sizeof *g);
    if (!n || !x || !y || !tune_static_f32(x) || !tune_static_f32(y)) return false;
    bool is_max;
    switch (n->op) {
    case IR_OP_MAX_POOL: case IR_OP_AVERAGE_POOL: g->blocked = false; break;
    case IR_OP_MAX_POOL_NCHWC: case IR_OP_AVERAGE_POOL_NCHWC: g->blocked = true; break;
    default: return false;
    }
    is_max = n->op == IR_OP_MAX_POOL || n->op == IR_OP_MAX_POOL_NCHWC;
    if (x->ndim != (g->blocked ? 5 : 4) || y->ndim != x->ndim) return false;
    g->n = x->dims[0], g->h = x->dims[2], g->w = x->dims[3];
    g->x = g->blocked ? x->dims[4] : 1;
    g->c = x->dims[1] * g->x;
    int64_t k[2], s[2], d[2], pads[4];
    if (!ints(n, "kernel_shape", 2, 0, 1, k) || k[0] < 1 || !ints(n, "strides", 2, 1, 1, s) ||
        !ints(n, "dilations", 2, 1, 1, d) || !ints(n, "pads", 4, 0, 0, pads))
        return false;
    int64_t ceil_mode = ir_attr_int(n, "ceil_mode", 0), inc = ir_attr_int(n, "count_include_pad", 0);
    if ((ceil_mode != 0 && ceil_mode != 1) || (inc != 0 && inc != 1) || (is_max && inc)) return false;
    g->p = te_pool2d_default_params(is_max ? TE_POOL_MAX : TE_POOL_AVG, k[0], k[1]);
    g->p.count_include_pad = inc;
    const char *mode = ir_attr_str(n, "auto_pad", "NOTSET");
    const int64_t in[2] = {g->h, g->w};
    for (int i = 0; i < 2; i++) {
        g->p.stride[i] = s[i];
        g->p.dilation[i] = d[i];
        int64_t span = (k[i] - 1) * d[i] + 1;
        if (!mode[0] || !strcmp(mode, "NOTSET")) {
            g->p.pad[i] = pads[i];
            g->p.pad[i + 2] = pads[i + 2];
            g->p.ceil_mode = ceil_mode;
        } else if (!strcmp(mode, "VALID")) {
            g->p.pad[i] = g->p.pad[i + 2] = 0;
        } else if (!strcmp(mode, "SAME_UPPER") || !strcmp(mode, "SAME_LOWER")) {
            int64_t out = (in[i] + s[i] - 1) / s[i], total = (out - 1) * s[i] + span - in[i];
            if (total < 0) total = 0;
            g->p.pad[i] = !strcmp(mode, "SAME_UPPER") ? total / 2 : total - total / 2;
            g->p.pad[i + 2] = total - g->p.pad[i];
            if (g->p.pad[i] >= span || g->p.pad[i + 2] >= span) return false;
        } else {
            return false;
        }
    }
    g->oh = y->dims[2], g->ow = y->dims[3];
    if (y->dims[0] != g->n || y->dims[1] != x->dims[1] || (g->blocked && y->dims[4] != g->x))
        return false;
    /* te_pool2d's size rules (pool.h) must give the node's output; worked out here rather than
       by building the algorithm, which would allocate (supports() must not fail) */
    const int64_t outs[2] = {g->oh, g->ow};
    for (int i = 0; i < 2; i++) {
        const te_pool2d_params *p = &g->p;
        int64_t span = (p->kernel[i] - 1) * p->dilation[i] + 1;
        int64_t p0 = p->pad[i], p1 = p->pad[i + 2], room = in[i] + p0 + p1 - span, out;
        if (p0 >= span || p1 >= span || room < 0) return false;
        if (p->ceil_mode) {
            out = (room + p->stride[i] - 1) / p->stride[i] + 1;
            if ((out - 1) * p->stride[i] >= in[i] + p0) out--;
        } else {
            out = room / p->stride[i] + 1;
        }
        if (out != outs[i]) return false;
    }
    return true;
}

static bool read_task(const tune_task *t, pool *g) {
    return t->nin >= 1 && read_pool(t->node, &t->in[0], &t->out[0], g);
}

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out) {
    (void)self;
    pool g;
    if (!n || n->nin != 1 || n->nout < 1 || (n->nout > 1 && out[1])) return false;
    return read_pool(n, in[0], out[0], &g);
}

static void describe(const kernel_provider *self, tune_task *t) {
    (void)self;
    pool g;
    if (!read_task(t, &g)) return;
    const te_pool2d_params *p = &g.p;
    tune_key_add(t, NAME ":%s,x=", t->node->op_type);
    tune_key_dims(t, &t->in[0]);
    tune_key_add(t, ",k%lld,%lld,st%lld,%lld,pd%lld,%lld,%lld,%lld,dl%lld,%lld%s%s",
              (long long)p->kernel[0], (long long)p->kernel[1], (long long)p->stride[0],
              (long long)p->stride[1], (long long)p->pad[0], (long long)p->pad[1],
              (long long)p->pad[2], (long long)p->pad[3], (long long)p->dilation[0],
              (long long)p->dilation[1], p->ceil_mode ? ",ceil" : "",
              p->count_include_pad ? ",incpad" : "");
    t->flops = g.n * g.c * g.oh * g.ow * p->kernel[0] * p->kernel[1];
}

static bool padded(const pool *g) {
    return g->p.pad[0] || g->p.pad[1] || g->p.pad[2] || g->p.pad[3] || g->p.ceil_mode;
}

static void space(const kernel_provider *self, const tune_task *t, tune_space *s) {
    (void)self;
    memset(s, 0, sizeof *s);
    pool g;
    if (!read_task(t, &g)) return;
    static const int64_t vecs[] = {1, 4, 8, 16}, flag[] = {0, 1}, zero[] = {0};
    if (g.blocked) {
        static const int64_t ows[] = {1, 2, 4};
        int k = 1;
        while (k < 3 && ows[k] <= g.ow) k++;
        tune_space_add(s, "ow_block", k, ows);
    } else {
        int k = 1;
        while (k < 4 && vecs[k - 1] < g.ow) k++;
        tune_space_add(s, "vec", k, vecs);
    }
    tune_space_add(s, "unroll_kw", g.p.kernel[1] > 1 ? 2 : 1, flag);
    tune_space_add(s, "parallel", 2, flag);
    tune_space_add(s, "pad_copy", padded(&g) ? 2 : 1, padded(&g) ? flag : zero);
}

static void default_config(const kernel_provider *self, const tune_task *t, const tune_space *s,
                           tune_config *cfg) {
    (void)self;
    memset(cfg, 0, sizeof *cfg);
    pool g;
    if (!read_task(t, &g)) return;
    int64_t vec = tune_vector_floats();
    tune_config_set(s, cfg, "vec", g.ow >= vec ? vec : g.ow >= 8 ? 8 : 4);
    tune_config_set(s, cfg, "ow_block", 2);
    tune_config_set(s, cfg, "unroll_kw", 1);
    /* rows too when images x channels alone leave threads idle */
    tune_config_set(s, cfg, "parallel", g.n * (g.c / g.x) < 4 * tune_threads());
    tune_config_set(s, cfg, "pad_copy", 0);
}

/* The reduction axes of t (kh, kw, in that order, those that exist). */
static int raxes(const te_tensor *t, te_iter **out) {
    if (t->body->kind != TE_REDUCE) return 0;
    for (int i = 0; i < t->body->nraxes; i++) out[i] = t->body->raxes[i];
    return t->body->nraxes;
}

/* The window reduction `acc` computed at `at` of the output stage: taps outside (kw unrolled
 * on request), then its data axes from `inner` on, the last vectorized. */
static wpk_status schedule_acc(te_schedule *sc, te_tensor *acc, te_stage *so, te_iter *at,
                               int inner, bool unroll_kw) {
    te_stage *sa = te_stage_of(sc, acc);
    TRY(te_compute_at(sa, so, at));
    TRY(te_set_scope(sa, "local"));
    te_iter *order[8], *r[2];
    int nr = raxes(acc, r), k = 0;
    for (int i = 0; i < nr; i++) order[k++] = r[i];
    for (int d = inner; d < acc->ndim; d++) order[k++] = acc->axes[d];
    TRY(te_reorder(sa, k, order));
    if (unroll_kw && nr > 0 && !strcmp(r[nr - 1]->name, "kw")) TRY(te_unroll(sa, r[nr - 1]));
    return te_vectorize(sa, acc->axes[acc->ndim - 1]);
}

static wpk_status build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                        const tune_space *s,
                        const tune_config *cfg, tune_build *out) {
    memset(out, 0, sizeof *out);
    pool g;
    if (!read_task(t, &g))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, NAME ": node '%s' is not a pooling this "
                         "template takes", t->node ? t->node->name : "(null)");
    TRY(tune_check_legal(c, self, t, s, cfg));
    const bool unroll_kw = tune_value(s, cfg, "unroll_kw") != 0;
    const bool rows = tune_value(s, cfg, "parallel") != 0;
    const bool pad_copy = tune_value(s, cfg, "pad_copy") != 0;
    te_tensor *x = tune_placeholder(c, "x", &t->in[0]);
    if (!x) return tune_failed(c, NAME);
    out->args[out->nargs++] = x;
    out->ninputs = 1;
    te_tensor *x4 = x;
    const int64_t s4[4] = {g.n, g.c, g.h, g.w};
    if (g.blocked) {
        /* the NCHW view of the blocked input: channel c is lane c % x of block c / x */
        te_iter **ax = te_compute_axes(c, 4, s4, (const char *const[]){"n", "c", "h", "w"});
        if (!ax) return tune_failed(c, NAME);
        const te_expr *vc = te_var(c, ax[1]), *bx = te_int(c, g.x);
        const te_expr *idx[5] = {te_var(c, ax[0]), te_div(c, vc, bx), te_var(c, ax[2]),
                                 te_var(c, ax[3]), te_mod(c, vc, bx)};
        const te_expr *v = te_load(c, x, 5, idx);
        x4 = v ? te_compute(c, "x.view", 4, s4, ax, v) : NULL;
        if (!x4) return tune_failed(c, NAME);
    }
    te_algo_parts parts;
    te_tensor *p4 = te_pool2d(c, "pool", x4, &g.p, &parts);
    if (!p4) return tune_failed(c, NAME);
    te_tensor *y = p4;
    if (g.blocked) {
        const int64_t s5[5] = {g.n, g.c / g.x, g.oh, g.ow, g.x};
        te_iter **ax = te_compute_axes(c, 5, s5,
                                       (const char *const[]){"n", "cb", "oh", "ow", "l"});
        if (!ax) return tune_failed(c, NAME);
        const te_expr *idx[4] = {te_var(c, ax[0]),
                                 te_algo_affine(c, te_var(c, ax[1]), g.x, te_var(c, ax[4])),
                                 te_var(c, ax[2]), te_var(c, ax[3])};
        const te_expr *v = te_load(c, p4, 4, idx);
        y = v ? te_compute(c, "y", 5, s5, ax, v) : NULL;
        if (!y) return tune_failed(c, NAME);
    }
    out->args[out->nargs++] = y;

    te_schedule *sc = te_schedule_create(c, &y, 1);
    if (!sc) return tune_failed(c, NAME);
    out->schedule = sc;
    if (g.blocked) TRY(te_compute_inline(te_stage_of(sc, x4)));
    if (parts.pad) {
        te_stage *sp = te_stage_of(sc, parts.pad);
        if (pad_copy) {
            te_iter *f;
            TRY(te_fuse(sp, parts.pad->axes[0], parts.pad->axes[1], &f));
            TRY(te_parallel(sp, f));
        } else {
            TRY(te_compute_inline(sp));
        }
    }
    /* the reduction's accumulator: the max itself, or the average's sum */
    te_tensor *acc = parts.main;
    te_stage *so;
    if (g.blocked) {
        /* the divide and the max are read through the blocked copy-out */
        if (parts.epilogue) TRY(te_compute_inline(te_stage_of(sc, parts.epilogue)));
        so = te_stage_of(sc, y);
        const int64_t owb = tune_value(s, cfg, "ow_block");
        te_iter *f, *owo, *owi;
        TRY(te_split(so, y->axes[3], owb, &owo, &owi));
        TRY(te_fuse(so, y->axes[0], y->axes[1], &f));
        if (rows) TRY(te_fuse(so, f, y->axes[2], &f));
        TRY(te_parallel(so, f));
        TRY(te_unroll(so, owi));
        TRY(te_vectorize(so, y->axes[4]));
        if (acc->body->kind == TE_REDUCE) {
            /* the whole tile (ow_block pixels x lanes) per step of the taps */
            te_stage *sa = te_stage_of(sc, acc);
            TRY(te_compute_at(sa, so, owo));
            TRY(te_set_scope(sa, "local"));
            te_iter *r[2], *order[8];
            int nr = raxes(acc, r), k = 0;
            for (int i = 0; i < nr; i++) order[k++] = r[i];
            order[k++] = acc->axes[3];
            order[k++] = acc->axes[1];
            TRY(te_reorder(sa, k, order));
            if (unroll_kw && nr > 0 && !strcmp(r[nr - 1]->name, "kw")) TRY(te_unroll(sa, r[nr - 1]));
            TRY(te_unroll(sa, acc->axes[3]));
            TRY(te_vectorize(sa, acc->axes[1]));
        } else {
            TRY(te_compute_inline(te_stage_of(sc, acc)));
        }
        return WPK_OK;
    }
    const int64_t vec = tune_value(s, cfg, "vec");
    if (acc == y && acc->body->kind == TE_REDUCE) TRY(te_cache_write(sc, y, "local", &acc));
    so = te_stage_of(sc, y);
    te_iter *f, *owo = y->axes[3], *owi = NULL;
    if (vec > 1) TRY(te_split(so, y->axes[3], vec, &owo, &owi));
    TRY(te_fuse(so, y->axes[0], y->axes[1], &f));
    if (rows) TRY(te_fuse(so, f, y->axes[2], &f));
    TRY(te_parallel(so, f));
    if (owi) TRY(te_vectorize(so, owi));
    if (acc != y && acc->body->kind == TE_REDUCE) {
        if (vec > 1) TRY(schedule_acc(sc, acc, so, owo, 3, unroll_kw));
        else {
            TRY(te_compute_at(te_stage_of(sc, acc), so, owo));
            TRY(te_set_scope(te_stage_of(sc, acc), "local"));
        }
    } else if (acc != y) {
        TRY(te_compute_inline(te_stage_of(sc, acc)));
    }
    return WPK_OK;
}

const kernel_provider tune_pool2d = {
    .name = NAME,
    .family = "generated",
    .supports = supports,
    .describe = describe,
    .space = space,
    .default_config = default_config,
    .legal = kernel_legal_in_space,
    .build = build,
};

#undef NAME

/* ---- global_pool ---- */

#define NAME "global_pool"

static bool g_supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                       ir_tensor *const *out) {
    (void)self;
    if (!n || (n->op != IR_OP_GLOBAL_AVERAGE_POOL && n->op != IR_OP_GLOBAL_MAX_POOL) ||
        n->nin != 1 || n->nout != 1 || !in[0] || !out[0])
        return false;
    const ir_tensor *x = in[0], *y = out[0];
    if (!tune_static_f32(x) || !tune_static_f32(y) || x->ndim < 3 || y->ndim != x->ndim)
        return false;
    return ir_numel(y) == x->dims[0] * x->dims[1];
}

static int64_t g_planes(const tune_task *t) { return t->in[0].dims[0] * t->in[0].dims[1]; }

static void g_describe(const kernel_provider *self, tune_task *t) {
    (void)self;
    tune_key_add(t, NAME ":%s,x=", t->node->op_type);
    tune_key_dims(t, &t->in[0]);
    t->flops = ir_numel(&t->in[0]);
}

static void g_space(const kernel_provider *self, const tune_task *t, tune_space *s) {
    (void)self;
    memset(s, 0, sizeof *s);
    static const int64_t grains[] = {1, 4, 16, 64, 256}, flag[] = {0, 1};
    int64_t planes = g_planes(t);
    int k = 1;
    while (k < 5 && grains[k] <= planes) k++;
    tune_space_add(s, "grain", k, grains);
    tune_space_add(s, "parallel", planes > 1 ? 2 : 1, flag);
}

static void g_default(const kernel_provider *self, const tune_task *t, const tune_space *s,
                      tune_config *cfg) {
    (void)self;
    memset(cfg, 0, sizeof *cfg);
    int64_t planes = g_planes(t), per = 1;
    for (int i = 2; i < t->in[0].ndim; i++) per *= t->in[0].dims[i];
    /* a few blocks per thread, each at least some thousand elements */
    int64_t grain = planes / (4 * tune_threads());
    if (grain * per < 4096) grain = (4096 + per - 1) / per;
    tune_config_set(s, cfg, "grain", grain);
    tune_config_set(s, cfg, "parallel", planes * per >= 32768);
}

static wpk_status g_build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                          const tune_space *s,
                          const tune_config *cfg, tune_build *out) {
    memset(out, 0, sizeof *out);
    if (!t->node || t->nin < 1 || t->in[0].ndim < 3)
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, NAME ": node '%s' is not a global pooling",
                         t->node ? t->node->name : "(null)");
    TRY(tune_check_legal(c, self, t, s, cfg));
    te_tensor *x = tune_placeholder(c, "x", &t->in[0]);
    if (!x) return tune_failed(c, NAME);
    out->args[out->nargs++] = x;
    out->ninputs = 1;
    te_algo_parts parts;
    bool is_max = t->node->op == IR_OP_GLOBAL_MAX_POOL;
    te_tensor *y = te_global_pool(c, "y", x, is_max ? TE_POOL_MAX : TE_POOL_AVG, &parts);
    if (!y) return tune_failed(c, NAME);
    out->args[out->nargs++] = y;
    te_schedule *sc = te_schedule_create(c, &y, 1);
    if (!sc) return tune_failed(c, NAME);
    out->schedule = sc;
    te_tensor *acc = parts.main;
    if (acc == y) TRY(te_cache_write(sc, y, "local", &acc));
    te_stage *so = te_stage_of(sc, y);
    /* planes: images x channels (the spatial axes of y have extent 1) */
    te_iter *f = y->axes[0];
    for (int d = 1; d < y->ndim; d++) TRY(te_fuse(so, f, y->axes[d], &f));
    te_iter *fo = f, *fi = f;
    const int64_t grain = tune_value(s, cfg, "grain");
    if (grain > 1) TRY(te_split(so, f, grain, &fo, &fi));
    if (tune_value(s, cfg, "parallel")) TRY(te_parallel(so, fo));
    TRY(te_compute_at(te_stage_of(sc, acc), so, fi));
    return te_set_scope(te_stage_of(sc, acc), "local");
}

const kernel_provider tune_global_pool = {
    .name = NAME,
    .family = "generated",
    .supports = g_supports,
    .describe = g_describe,
    .space = g_space,
    .default_config = g_default,
    .legal = kernel_legal_in_space,
    .build = g_build,
};
