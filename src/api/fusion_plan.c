/* fusion_plan.c -- the fusion and team size plan of a model (fusion_plan.h): its layers (nodes
 * with enough FLOPs for a team size to matter) and fusion groups made a search space, each
 * point of it built as a graph, compiled as wpk_compile would and timed in the model. */
#include "api/fusion_plan.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/model.h"
#include "api/session.h"
#include "base/alloc.h"
#include "base/target.h"
#include "ir/flops.h"
#include "passes/fuse_groups.h"
#include "passes/pass.h"
#include "tune/fusion_search.h"

/* Nodes of fewer FLOPs run on the plan's threads: a team size is no knob for them. */
#define MIN_LAYER_FLOPS 100000
/* Each plan is run about this long (within these run counts) after one warm-up run. */
#define TIME_BUDGET_MS 200.0
#define MIN_RUNS 5
#define MAX_RUNS 60

typedef struct plan_space {
    wpk_context *ctx;
    const ir_graph *g;          /* optimized at min(level, 2), shapes inferred */
    int level;
    const wpk_compile_params *cp;
    const char *records;
    int ngroups;
    fusion_group groups[FUSION_MAX_GROUPS];
    int layer_node[FUSION_MAX_LAYERS];  /* the node of each layer in g */
    fusion_space s;
} plan_space;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* FLOPs of node k with every symbolic dim at the batch. */
static int64_t node_flops(const ir_graph *g, const ir_node *n, int batch) {
    ir_tensor t[16], *in[8] = {0}, *out[8] = {0};
    if (n->nin > 8 || n->nout > 8) return 0;
    for (int i = 0; i < n->nin + n->nout; i++) {
        int v = i < n->nin ? n->in[i] : n->out[i - n->nin];
        if (v < 0) continue;
        t[i] = g->values[v].t;
        for (int d = 0; d < t[i].ndim; d++)
            if (t[i].dims[d] < 0) t[i].dims[d] = batch;
        if (i < n->nin) in[i] = &t[i];
        else out[i - n->nin] = &t[i];
    }
    /* an epilogue-fused node counts as its base op (the epilogue's few operations aside) */
    ir_node base = *n;
    if (n->op == IR_OP_FUSED_CONV) base.op = IR_OP_CONV;
    if (n->op == IR_OP_FUSED_GEMM) base.op = IR_OP_GEMM;
    if (n->op == IR_OP_FUSED_MATMUL) base.op = IR_OP_MATMUL;
    return ir_node_flops(&base, in, out);
}

/* The layers and groups of ps->g into ps->s. */
static void find_space(plan_space *ps, int threads) {
    const ir_graph *g = ps->g;
    int *layer_of = wpk_calloc((size_t)g->nnodes + 1, sizeof *layer_of);
    fusion_space *s = &ps->s;
    s->max_threads = threads;
    for (int k = 0; layer_of && k < g->nnodes; k++) {
        const ir_node *n = &g->nodes[k];
        layer_of[k] = -1;
        int64_t f = node_flops(g, n, ps->cp->batch);
        if (f < MIN_LAYER_FLOPS || s->nlayers == FUSION_MAX_LAYERS) continue;
        const ir_tensor *y = n->nout > 0 && n->out[0] >= 0 ? &g->values[n->out[0]].t : NULL;
        ps->layer_node[s->nlayers] = k;
        s->flops[s->nlayers] = f;
        s->channels[s->nlayers] = y && y->ndim >= 2 && y->dims[1] > 0 ? y->dims[1] : 0;
        layer_of[k] = s->nlayers++;
    }
    fusion_group found[FUSION_MAX_GROUPS];
    int n = layer_of ? fusion_groups_find(g, found, FUSION_MAX_GROUPS) : 0;
    if (n > FUSION_MAX_GROUPS) n = FUSION_MAX_GROUPS;
    for (int i = 0; i < n; i++) {
        /* the node left keeps the conv's attributes: the pool's conv, else the second */
        bool keeps_first = found[i].kind == FUSION_CONV_POOL;
        int kept = layer_of[keeps_first ? found[i].first : found[i].second];
        int gone = layer_of[keeps_first ? found[i].second : found[i].first];
        if (kept < 0) continue;
        ps->groups[ps->ngroups] = found[i];
        s->kept[ps->ngroups] = kept;
        s->absorbed[ps->ngroups++] = gone;
    }
    s->ngroups = ps->ngroups;
    wpk_free(layer_of);
}

/* p applied to g (a clone of ps->g, or ps->g's own copy): team sizes, groups, the layout. */
static wpk_status build(plan_space *ps, ir_graph *g, const fusion_point *p) {
    wpk_context *ctx = ps->ctx;
    for (int l = 0; l < ps->s.nlayers; l++) {
        ir_node *n = &g->nodes[ps->layer_node[l]];
        if (p->threads[l] < ps->s.max_threads &&
            ir_node_set_int(g, n, IR_ATTR_THREADS, p->threads[l]))
            return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory planning node '%s'", n->name);
    }
    wpk_status st = fusion_groups_apply(ctx, g, ps->groups, ps->ngroups, p->fuse, NULL);
    if (st == WPK_OK && ps->level >= 3) {
        pass_options opt = pass_default_options();
        opt.level = ps->level;
        opt.only = "layout,dce";
        opt.vector_floats = target_vector_floats();
        st = passes_run(ctx, g, &opt);
    }
    return st;
}

/* Per profile entry, the layer whose segment it belongs to: the next layer's node run. */
static void segment_map(const plan_space *ps, const wpk_node_profile *prof, int n, int *seg) {
    int next = -1;
    for (int i = n - 1; i >= 0; i--) {
        for (int l = 0; l < ps->s.nlayers; l++)
            if (strcmp(prof[i].node, ps->g->nodes[ps->layer_node[l]].name) == 0) {
                next = l;
                break;
            }
        seg[i] = next;
    }
}

static wpk_status time_session(plan_space *ps, wpk_session *s, double *ms, double *layer_ms) {
    double t0 = now_ms();
    wpk_status st = wpk_session_run(s);
    if (st) return st;
    double first = now_ms() - t0;
    int runs = (int)(TIME_BUDGET_MS / (first > 1e-3 ? first : 1e-3));
    runs = runs < MIN_RUNS ? MIN_RUNS : runs > MAX_RUNS ? MAX_RUNS : runs;
    int nl = ps->s.nlayers;
    double *total = wpk_calloc((size_t)runs, sizeof *total);
    double *seg = layer_ms ? wpk_calloc((size_t)runs * (size_t)nl + 1, sizeof *seg) : NULL;
    int *map = NULL, nprof = 0;
    if (!total || (layer_ms && !seg)) st = WPK_ERR_NOMEM;
    for (int r = 0; st == WPK_OK && r < runs; r++) {
        t0 = now_ms();
        if ((st = wpk_session_run(s))) break;
        total[r] = now_ms() - t0;
        if (!layer_ms) continue;
        const wpk_node_profile *prof;
        if ((st = wpk_session_profile(s, &prof, &nprof))) break;
        if (!map && !(map = wpk_calloc((size_t)nprof + 1, sizeof *map))) {
            st = WPK_ERR_NOMEM;
            break;
        }
        if (r == 0) segment_map(ps, prof, nprof, map);
        for (int l = 0; l < nl; l++) seg[(size_t)l * (size_t)runs + (size_t)r] = -1;
        for (int i = 0; i < nprof; i++) {
            if (map[i] < 0) continue;
            double *at = &seg[(size_t)map[i] * (size_t)runs + (size_t)r];
            *at = (*at < 0 ? 0 : *at) + prof[i].ms;
        }
    }
    if (st == WPK_ERR_NOMEM) st = wpk_error(ps->ctx, st, "out of memory timing a fusion plan");
    if (st == WPK_OK) {
        qsort(total, (size_t)runs, sizeof *total, cmp_double);
        *ms = total[runs / 2];
        for (int l = 0; layer_ms && l < nl; l++) {
            double *v = &seg[(size_t)l * (size_t)runs];
            qsort(v, (size_t)runs, sizeof *v, cmp_double);
            layer_ms[l] = v[runs / 2];
        }
    }
    wpk_free(total);
    wpk_free(seg);
    wpk_free(map);
    return st;
}

/* fusion_measure_fn: point p built, compiled as wpk_compile would, timed. */
static wpk_status measure(void *user, const fusion_point *p, double *ms, double *layer_ms) {
    plan_space *ps = user;
    wpk_context *ctx = ps->ctx;
    ir_graph *g = ir_graph_clone(ps->g);
    if (!g) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory building a fusion plan");
    wpk_status st = build(ps, g, p);
    wpk_model *m = NULL;
    if (st == WPK_OK) st = api_model_from_graph(ctx, g, "fusion plan", &m);
    else ir_graph_free(g);
    wpk_session_params sp = wpk_session_default_params();
    sp.backend = WPK_BACKEND_CPU;
    sp.opt_level = 0; /* built above */
    sp.threads = ps->cp->threads;
    sp.records = ps->records;
    sp.provider = ps->cp->provider;
    sp.profile = layer_ms != NULL;
    wpk_session *s = NULL;
    exec_plan *plan = NULL;
    if (st == WPK_OK) st = wpk_session_create(ctx, m, &sp, &s);
    if (st == WPK_OK) st = api_bind_zeros(ctx, s, m, ps->cp->batch);
    if (st == WPK_OK) st = session_prepare(s, &plan);
    if (st == WPK_OK) st = time_session(ps, s, ms, layer_ms);
    if (st == WPK_OK) {
        int fused = 0, fewer = 0;
        for (int i = 0; i < ps->s.ngroups; i++) fused += p->fuse[i];
        for (int l = 0; l < ps->s.nlayers; l++) fewer += p->threads[l] < ps->s.max_threads;
        wpk_log(ctx, WPK_LOG_INFO, "fusion plan: %d groups fused, %d layers on fewer threads: "
                "%.3f ms (%d nodes)", fused, fewer, *ms, plan->g->nnodes);
    }
    wpk_session_free(s);
    wpk_model_free(m);
    return st;
}

wpk_status fusion_plan_apply(wpk_context *ctx, ir_graph *g, int level,
                             const wpk_compile_params *cp, const char *records,
                             wpk_fusion_report *report) {
    /* the plan runs at the batch: bound here, shapes compare by value (an operand of one row
       and one of the batch's stay apart) */
    for (int i = 0; i < g->ninputs; i++) {
        ir_tensor *t = &g->values[g->inputs[i]].t;
        for (int d = 0; d < t->ndim; d++)
            if (t->dims[d] < 0) t->dims[d] = cp->batch;
    }
    plan_space *ps = wpk_calloc(1, sizeof *ps);
    fusion_result *res = wpk_calloc(1, sizeof *res);
    wpk_status st = ps && res ? pass_infer_shapes(ctx, g)
                              : wpk_error(ctx, WPK_ERR_NOMEM, "out of memory planning fusion");
    if (st == WPK_OK) {
        *ps = (plan_space){.ctx = ctx, .g = g, .level = level, .cp = cp, .records = records};
        find_space(ps, cp->threads > 0 ? cp->threads : target_default_threads());
        if (cp->fusion_search == WPK_FUSION_ALL) {
            for (int i = 0; i < ps->s.ngroups; i++) res->best.fuse[i] = true;
            for (int l = 0; l < ps->s.nlayers; l++) res->best.threads[l] = ps->s.max_threads;
        } else {
            fusion_search_mode mode = cp->fusion_search == WPK_FUSION_EXHAUSTIVE
                                          ? FUSION_SEARCH_EXHAUSTIVE
                                          : FUSION_SEARCH_PROFILE;
            st = fusion_search(ctx, &ps->s, mode, measure, ps, res);
        }
    }
    if (st == WPK_OK) st = build(ps, g, &res->best);
    if (st == WPK_OK) {
        wpk_fusion_report r = {.groups = ps->s.ngroups, .layers = ps->s.nlayers,
                               .evaluations = res->evaluations, .search_ms = res->search_ms,
                               .best_ms = res->best_ms, .base_ms = res->base_ms};
        for (int i = 0; i < ps->s.ngroups; i++) r.fused += res->best.fuse[i];
        for (int l = 0; l < ps->s.nlayers; l++)
            r.reduced += res->best.threads[l] < ps->s.max_threads;
        wpk_log(ctx, WPK_LOG_INFO, "fusion search: %d groups, %d layers; fused %d, %d layers on "
                "fewer threads; %d plans timed in %.0f ms; %.3f ms (unfused %.3f ms)", r.groups,
                r.layers, r.fused, r.reduced, r.evaluations, r.search_ms, r.best_ms, r.base_ms);
        if (report) *report = r;
    }
    wpk_free(ps);
    wpk_free(res);
    return st;
}
