/* exec_plan.c -- specializing a graph to concrete input shapes, planning its memory, and
 * running it from one workspace (or dynamically, when a shape depends on run-time data). */
#include "api/exec_plan.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/target.h"
#include "kernels/step_runners.h"
#include "kernels/vendor/lib_runners.h"
#include "passes/pass.h"
#include "compile/cuda_choice.h"
#include "compile/cuda_program.h"

void exec_plan_free(exec_plan *p) {
    if (!p) return;
    rt_exec_free(p->x);
    cpu_plan_free(p->plan);
    cpu_program_free(p->cpu);
    wpk_free(p->in_bind);
    if (!p->cuda) wpk_free(p->profile); /* the CUDA runner's own otherwise */
    tune_cuda_runner_free(p->cuda);
    memory_plan_free(&p->mem);
    ir_exec_free(&p->exec);
    wpk_free(p->vals);
    wpk_free(p->key);
    ir_graph_free(p->g);
    wpk_free(p);
}

/* Shapes of every value, folding what the bound dims make known (the Shape->Gather->Concat
 * chains before a Reshape), into g->values[v].t. pass_infer_shapes never folds, so it leaves a
 * Reshape fed by such a chain unknown; the folded data is only used to learn shapes and then
 * dropped: the chain's nodes still run (fold-constants removes them where it runs). */
static wpk_status infer_static(wpk_context *ctx, ir_graph *g) {
    ir_tensor *vals = wpk_calloc((size_t)g->nvalues + 1, sizeof(ir_tensor));
    if (!vals) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory inferring shapes");
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].is_const || g->values[v].is_input) vals[v] = g->values[v].t;
    arena folded = {0};
    wpk_status st = ir_infer(ctx, g, vals, &folded);
    if (st == WPK_OK)
        for (int v = 0; v < g->nvalues; v++)
            if (!g->values[v].is_const && !g->values[v].is_input) {
                g->values[v].t = vals[v];
                g->values[v].t.data = NULL;
            }
    arena_free(&folded);
    wpk_free(vals);
    return st;
}

/* The rewrites that decline on symbolic dims, run again once the inputs' dims are bound. */
#define BOUND_SHAPE_REWRITES \
    "fold-constants,eliminate-identity,simplify-reshape,cse,dce,fuse-layernorm,fuse-attention," \
    "hoist-residual,fuse-epilogue"

static wpk_status specialize(wpk_context *ctx, exec_plan *p, const ir_graph *src,
                             const ir_tensor *shapes, int opt_level) {
    p->g = ir_graph_clone(src);
    if (!p->g) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory specializing the graph");
    ir_graph *g = p->g;
    bool bound_symbolic = false;
    for (int i = 0; i < g->ninputs; i++) {
        ir_value *v = &g->values[g->inputs[i]];
        if (v->t.ndim != shapes[i].ndim || v->t.dtype != shapes[i].dtype)
            return wpk_error(ctx, WPK_ERR_INTERNAL, "input '%s' bound with another type",
                             v->name);
        for (int d = 0; d < v->t.ndim; d++) {
            if (shapes[i].dims[d] < 0 || (v->t.dims[d] >= 0 && v->t.dims[d] != shapes[i].dims[d]))
                return wpk_error(ctx, WPK_ERR_INTERNAL, "input '%s' bound with another shape",
                                 v->name);
            bound_symbolic = bound_symbolic || v->t.dims[d] < 0;
            v->t.dims[d] = shapes[i].dims[d];
            v->dim_names[d] = NULL;
        }
    }
    pass_options opt = pass_default_options();
    opt.only = opt_level >= 2 && bound_symbolic ? BOUND_SHAPE_REWRITES : "fold-constants,dce";
    opt.dump = ""; /* the session's own optimization already honoured WPK_DUMP */
    opt.vector_floats = target_vector_floats();
    wpk_status st = passes_run(ctx, g, &opt);
    if (st == WPK_OK) st = infer_static(ctx, g);
    return st;
}

/* Point every value at its data: constants at theirs, activations into the workspace, views of
 * constants at the constant's data. */
static void bind(exec_plan *p, char *workspace) {
    const ir_graph *g = p->g;
    for (int v = 0; v < g->nvalues; v++) {
        int r = p->mem.root[v];
        if (g->values[v].is_const) p->vals[v].data = g->values[v].t.data;
        else if (p->mem.offset[v] >= 0) p->vals[v].data = workspace + p->mem.offset[v];
        else if (r >= 0 && g->values[r].is_const) p->vals[v].data = g->values[r].t.data;
        else p->vals[v].data = NULL;
    }
    p->bound = workspace;
}

wpk_status exec_plan_create(wpk_context *ctx, const ir_graph *src, const ir_tensor *shapes,
                            bool require_static, exec_plan **out) {
    return exec_plan_create_at(ctx, src, shapes, require_static, 0, out);
}

wpk_status exec_plan_create_at(wpk_context *ctx, const ir_graph *src, const ir_tensor *shapes,
                               bool require_static, int opt_level, exec_plan **out) {
    *out = NULL;
    exec_plan *p = wpk_calloc(1, sizeof *p);
    if (!p) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory planning the graph");
    p->ninputs = src->ninputs;
    p->key = wpk_calloc((size_t)src->ninputs + 1, sizeof(ir_tensor));
    wpk_status st = p->key ? WPK_OK : wpk_error(ctx, WPK_ERR_NOMEM, "out of memory planning");
    for (int i = 0; st == WPK_OK && i < src->ninputs; i++) {
        p->key[i] = shapes[i];
        p->key[i].data = NULL;
    }
    if (st == WPK_OK) st = specialize(ctx, p, src, shapes, opt_level);
    if (st == WPK_OK) {
        st = memory_plan_build(ctx, p->g, &p->mem);
        p->is_static = st == WPK_OK;
        if (st == WPK_ERR_UNSUPPORTED && !require_static) {
            wpk_clear_error(ctx);
            st = ir_exec_init(ctx, &p->exec, p->g);
        }
    }
    if (st == WPK_OK && p->is_static) {
        p->vals = wpk_calloc((size_t)p->g->nvalues + 1, sizeof(ir_tensor));
        if (!p->vals) st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory planning the graph");
        for (int v = 0; st == WPK_OK && v < p->g->nvalues; v++) p->vals[v] = p->g->values[v].t;
    }
    if (st) {
        exec_plan_free(p);
        return st;
    }
    *out = p;
    return WPK_OK;
}

/* ---- the CUDA backend ---- */

wpk_status exec_plan_compile_cuda(wpk_context *ctx, exec_plan *p, tune_db *db) {
    if (!p->is_static)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "the CUDA backend needs every shape static "
                         "at these input shapes");
    rt_cuda_info info;
    wpk_status st = rt_cuda_probe(ctx, 0, &info);
    if (st) return st;
    cuda_choice c;
    cuda_choice_init(&c, db, &info);
    tune_cuda_program_options opt = tune_cuda_program_default_options();
    opt.sm = 0; /* the device's own */
    opt.choose = cuda_choice_pick;
    opt.choose_lib = cuda_choice_lib;
    opt.choose_user = &c;
    return tune_cuda_runner_create(ctx, p->g, &p->mem, &opt, true, &p->cuda);
}

#define CUDA_MAX_IO 64

/* Inputs from, outputs into the plan's host workspace (already bound and filled). */
static wpk_status run_cuda(wpk_context *ctx, exec_plan *p) {
    const ir_graph *g = p->g;
    const void *in[CUDA_MAX_IO];
    void *out[CUDA_MAX_IO];
    if (g->ninputs > CUDA_MAX_IO || g->noutputs > CUDA_MAX_IO)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "the CUDA backend takes at most %d inputs "
                         "and outputs", CUDA_MAX_IO);
    for (int i = 0; i < g->ninputs; i++) in[i] = p->vals[g->inputs[i]].data;
    for (int i = 0; i < g->noutputs; i++) out[i] = p->vals[g->outputs[i]].data;
    return tune_cuda_runner_run(p->cuda, in, out);
}

wpk_status exec_plan_compile_cpu(wpk_context *ctx, exec_plan *p, int threads) {
    cpu_options opt = {threads, NULL, NULL, false, false, 0};
    return exec_plan_compile(ctx, p, &opt);
}

/* Which inputs the executor may read where the caller keeps them: those whose bytes no other
 * value shares (a view of the input, an op writing over it) and that are no graph output (an
 * output's bytes must stay as the run left them while the caller binds the next inputs). */
static wpk_status find_bindable(wpk_context *ctx, exec_plan *p) {
    const ir_graph *g = p->g;
    p->in_bind = wpk_calloc((size_t)g->ninputs + 1, sizeof *p->in_bind);
    if (!p->in_bind) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory planning the graph");
    for (int i = 0; i < g->ninputs; i++) {
        int in = g->inputs[i];
        bool alone = p->mem.offset[in] >= 0 && p->mem.root[in] == in;
        for (int v = 0; alone && v < g->nvalues; v++) alone = v == in || p->mem.root[v] != in;
        for (int o = 0; alone && o < g->noutputs; o++) alone = g->outputs[o] != in;
        p->in_bind[i] = alone;
    }
    return WPK_OK;
}

/* p->cpu as a runtime plan, made ready on the cpu backend. The plan's tensor v is value v, so
 * the outputs' vals point at the executor's bytes from now on. */
static wpk_status make_exec(wpk_context *ctx, exec_plan *p) {
    /* the in-process plan may have reference and library steps, as a loaded one may */
    step_runners_register();
    lib_runners_register();
    wpk_status st = cpu_program_plan(ctx, p->cpu, p->g, p->vals, &p->mem, NULL, NULL, &p->plan);
    if (st) return st;
    const rt_plan *pl = cpu_plan_get(p->plan);
    rt_cpu_backend_init(&p->be, pl->threads);
    st = rt_exec_create(ctx, "the compiled graph", pl, &p->be, false, &p->x);
    if (st == WPK_OK) st = find_bindable(ctx, p);
    for (int o = 0; st == WPK_OK && o < p->g->noutputs; o++)
        p->vals[p->g->outputs[o]].data = rt_exec_data(p->x, p->g->outputs[o]);
    return st;
}

wpk_status exec_plan_compile(wpk_context *ctx, exec_plan *p, const cpu_options *opt) {
    if (!p->is_static || p->cpu) return WPK_OK;
    wpk_status st = cpu_program_create(ctx, p->g, p->vals, &p->mem, opt, &p->cpu);
    return st ? st : make_exec(ctx, p);
}

wpk_status exec_plan_enable_profile(wpk_context *ctx, exec_plan *p, int threads) {
    if (p->profile) return WPK_OK;
    if (p->cuda) {
        const wpk_node_profile *entries;
        wpk_status st = tune_cuda_runner_profile(p->cuda, &entries, &p->nprofile);
        if (st == WPK_OK) p->profile = (wpk_node_profile *)entries;
        return st;
    }
    if (!p->is_static)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "the graph's shapes depend on data computed "
                         "while it runs (it runs on the dynamic interpreter): no per-node "
                         "profile");
    if (!p->cpu) {
        /* reference kernels through the executor, which times each step */
        cpu_options ref = {threads, "ref", NULL, false, false, 0};
        wpk_status st = cpu_program_create(ctx, p->g, p->vals, &p->mem, &ref, &p->cpu);
        if (st == WPK_OK) st = make_exec(ctx, p);
        if (st) return st;
    }
    wpk_status st = rt_exec_profile(p->x, ctx);
    if (st) return st;
    const rt_plan *pl = cpu_plan_get(p->plan);
    p->profile = wpk_calloc((size_t)pl->nsteps + 1, sizeof *p->profile);
    if (!p->profile) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory for a profile");
    rt_plan_profile_entries(pl, p->profile);
    p->nprofile = p->g->nnodes;
    return WPK_OK;
}

void exec_plan_records_path(const char *records, char *path, size_t cap) {
    path[0] = 0;
    if (records) {
        snprintf(path, cap, "%s", records);
        return;
    }
    /* the default location, as tune_db_open finds it, but only read when it is there */
    const char *env = getenv("WPK_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n = -1;
    if (env && *env) n = snprintf(path, cap, "%s/records.db", env);
    else if (xdg && *xdg) n = snprintf(path, cap, "%s/wpk/records.db", xdg);
    else if (home && *home) n = snprintf(path, cap, "%s/.cache/wpk/records.db", home);
    struct stat sb;
    if (n < 0 || (size_t)n >= cap || stat(path, &sb) != 0) path[0] = 0;
}

wpk_status exec_plan_records_open(wpk_context *ctx, const char *records, tune_db **out) {
    *out = NULL;
    char path[4096];
    exec_plan_records_path(records, path, sizeof path);
    if (!path[0]) return WPK_OK;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return wpk_error(ctx, WPK_ERR_IO, "%s: no such tuning records database", path);
    wpk_status st = tune_db_open(ctx, path, out);
    if (st && st != WPK_ERR_NOMEM && !records) {
        /* the default database, not asked for by name: unreadable, it is as good as absent */
        wpk_log(ctx, WPK_LOG_WARN, "tuning records not used: %s", wpk_context_error(ctx));
        wpk_clear_error(ctx);
        *out = NULL;
        return WPK_OK;
    }
    return st;
}

bool exec_plan_matches(const exec_plan *p, const ir_tensor *shapes) {
    for (int i = 0; i < p->ninputs; i++)
        if (p->key[i].dtype != shapes[i].dtype || !ir_same_shape(&p->key[i], &shapes[i]))
            return false;
    return true;
}

/* Inputs bound (read in place, or copied into the executor's workspace), the steps run. */
static wpk_status run_exec(wpk_context *ctx, exec_plan *p, const ir_tensor *inputs) {
    const ir_graph *g = p->g;
    for (int i = 0; i < g->ninputs; i++) {
        int t = g->inputs[i];
        size_t bytes = ir_nbytes(&inputs[i]);
        /* the kernels read activations 64-byte aligned: an input elsewhere is copied */
        bool in_place = p->in_bind[i] && (uintptr_t)inputs[i].data % MEMORY_PLAN_ALIGN == 0;
        if (p->in_bind[i]) {
            wpk_status st = rt_exec_bind(p->x, ctx, t, in_place ? inputs[i].data : NULL);
            if (st) return st;
        }
        void *at = rt_exec_data(p->x, t);
        if (!in_place && bytes && at) memcpy(at, inputs[i].data, bytes);
    }
    wpk_status st = rt_exec_run(p->x, ctx);
    const double *ms = rt_exec_step_ms(p->x);
    for (int k = 0; p->profile && ms && k < g->nnodes; k++) p->profile[k].ms = ms[k];
    return st;
}

wpk_status exec_plan_run(wpk_context *ctx, exec_plan *p, char *workspace, const ir_tensor *inputs) {
    const ir_graph *g = p->g;
    if (!p->is_static) {
        for (int i = 0; i < g->ninputs; i++) {
            const ir_tensor *t = &inputs[i];
            wpk_status st =
                ir_exec_reserve(ctx, &p->exec, g->inputs[i], t->dtype, t->ndim, t->dims);
            if (st) return st;
            if (ir_nbytes(t)) memcpy(p->exec.vals[g->inputs[i]].data, t->data, ir_nbytes(t));
        }
        return ir_exec_run(ctx, &p->exec, g);
    }
    if (p->x && !p->cuda) return run_exec(ctx, p, inputs);
    if (p->bound != workspace) bind(p, workspace);
    for (int i = 0; i < g->ninputs; i++)
        if (ir_nbytes(&inputs[i]))
            memcpy(p->vals[g->inputs[i]].data, inputs[i].data, ir_nbytes(&inputs[i]));
    if (p->cuda) return run_cuda(ctx, p);
    return ir_exec_static(ctx, g, p->vals);
}

const ir_tensor *exec_plan_output(const exec_plan *p, int i) {
    int v = p->g->outputs[i];
    return p->is_static ? &p->vals[v] : &p->exec.vals[v];
}
