/* session.c -- wpk_session: the model's graph optimized once at create, specialized and
 * memory-planned per set of input shapes (a small cache of plans), run from one workspace; or
 * a compiled plan run by the runtime (wpk_plan, include/wpk_runtime.h), which has no model. */
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "api/exec_plan.h"
#include "api/model.h"
#include "api/session.h"
#include "kernels/step_runners.h"
#include "kernels/vendor/lib_runners.h"
#include "base/alloc.h"
#include "compile/choice.h"
#include "base/target.h"
#include "ir/print.h"
#include "passes/pass.h"
#include "runtime/cuda/cuda_rt.h"

/* Plans kept per session, one per set of input shapes seen (a server alternating between a
 * few batch sizes re-plans none of them); the least recently used goes first. */
#define PLAN_CACHE 8

struct wpk_session {
    wpk_context *ctx;       /* borrowed: must outlive the session */
    const wpk_model *model; /* borrowed: must outlive the session */
    wpk_session_params params;
    ir_graph *g;            /* the model's graph optimized at params.opt_level; shares payloads
                               with the model's graph */
    ir_tensor *in;          /* per graph input: the bound tensor, data owned (in_cap bytes at
                               a MEMORY_PLAN_ALIGN boundary of in_raw[i], so a compiled plan
                               can read it where it is) */
    void **in_raw;
    size_t *in_cap;
    bool *bound;
    exec_plan *plans[PLAN_CACHE]; /* most recently used first */
    int nplans;
    exec_plan *last;        /* the plan of the last successful run */
    char *ws_raw, *ws;      /* the workspace: ws is ws_raw aligned to MEMORY_PLAN_ALIGN */
    size_t ws_size;
    int threads;            /* params.threads, or the default (target_default_threads) */
    char *records, *provider; /* copies of params' strings (which point at them) */
    bool bf16;                /* params.precision "bf16" */
    int optimized_at;         /* the level the model's graph was optimized at before the
                                 session (session_set_optimized_at); 0 otherwise */
    wpk_plan *rt;           /* a plan's session: the runtime's plan (model and the rest unset);
                               NULL otherwise */
    char *plan_path;        /* a plan's session: its file, for messages */
};

wpk_session_params wpk_session_default_params(void) {
    wpk_session_params p;
    memset(&p, 0, sizeof p);
    p.backend = WPK_BACKEND_REF;
    p.threads = 0;
    p.opt_level = wpk_optimize_default_params().level;
    return p;
}

static wpk_status optimize(wpk_context *ctx, wpk_session *s) {
    s->g = ir_graph_clone(s->model->g);
    if (!s->g) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory creating a session");
    pass_options opt = pass_default_options();
    opt.level = s->params.opt_level;
    /* the blocked layout (NCHWc) is the CPU kernels'; the CUDA templates read NCHW */
    opt.vector_floats = s->params.backend == WPK_BACKEND_CUDA ? 0 : target_vector_floats();
    wpk_status st = passes_run(ctx, s->g, &opt);
    if (st == WPK_OK && s->g->ninputs != s->model->g->ninputs)
        st = wpk_error(ctx, WPK_ERR_INTERNAL, "optimization changed the graph's inputs");
    if (st == WPK_OK && s->g->noutputs != s->model->g->noutputs)
        st = wpk_error(ctx, WPK_ERR_INTERNAL, "optimization changed the graph's outputs");
    return st;
}

wpk_status wpk_session_create(wpk_context *ctx, const wpk_model *model,
                              const wpk_session_params *params, wpk_session **out) {
    *out = NULL;
    wpk_clear_error(ctx);
    wpk_session_params p = params ? *params : wpk_session_default_params();
    if (p.backend != WPK_BACKEND_REF && p.backend != WPK_BACKEND_CPU &&
        p.backend != WPK_BACKEND_CUDA)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "backend %d is not available", (int)p.backend);
    /* the CUDA backend: no device is said at once, before any work */
    if (p.backend == WPK_BACKEND_CUDA) {
        wpk_status cst = rt_cuda_probe(ctx, 0, NULL);
        if (cst) return cst;
    }
    if (p.threads < 0)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "threads must be >= 0, not %d", p.threads);
    if (p.opt_level < 0 || p.opt_level > 3)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "optimization level %d is out of range (0 to "
                         "3)", p.opt_level);
    wpk_status st = cpu_provider_check(ctx, p.provider);
    if (st) return st;
    bool bf16 = false;
    st = cpu_precision_check(ctx, p.precision, p.backend == WPK_BACKEND_CUDA, &bf16);
    if (st) return st;
    if (!(p.bf16_fp32_share >= 0 && p.bf16_fp32_share <= 1))
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "bf16_fp32_share must be within 0 and 1, "
                         "not %g", p.bf16_fp32_share);
    if (bf16 && p.backend != WPK_BACKEND_CPU)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "precision bf16 runs on the cpu backend, not "
                         "the reference one");
    if (p.records && *p.records) {
        /* a database named but missing is a mistake to report now, not a silent default */
        tune_db *db = NULL;
        st = exec_plan_records_open(ctx, p.records, &db);
        tune_db_close(db);
        if (st) return st;
    }
    st = wpk_model_check_supported(ctx, model);
    if (st) return st;
    wpk_session *s = wpk_calloc(1, sizeof *s);
    if (!s) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory creating a session");
    s->ctx = ctx;
    s->model = model;
    s->params = p;
    s->threads = p.threads > 0 ? p.threads : target_default_threads();
    s->bf16 = bf16;
    s->params.precision = NULL; /* what it asked for is s->bf16; the caller's string is not kept */
    if (p.records && !(s->params.records = s->records = wpk_strdup(p.records))) st = WPK_ERR_NOMEM;
    if (p.provider && !(s->params.provider = s->provider = wpk_strdup(p.provider)))
        st = WPK_ERR_NOMEM;
    if (st) {
        wpk_session_free(s);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory creating a session");
    }
    size_t nin = (size_t)model->g->ninputs + 1;
    s->in = wpk_calloc(nin, sizeof *s->in);
    s->in_raw = wpk_calloc(nin, sizeof *s->in_raw);
    s->in_cap = wpk_calloc(nin, sizeof *s->in_cap);
    s->bound = wpk_calloc(nin, sizeof *s->bound);
    st = s->in && s->in_raw && s->in_cap && s->bound
             ? optimize(ctx, s)
             : wpk_error(ctx, WPK_ERR_NOMEM, "out of memory creating a session");
    if (st) {
        wpk_error_prefix(ctx, "%s", model->g->path ? model->g->path : "model");
        wpk_session_free(s);
        return st;
    }
    *out = s;
    return WPK_OK;
}

void wpk_session_free(wpk_session *s) {
    if (!s) return;
    for (int i = 0; i < s->nplans; i++) exec_plan_free(s->plans[i]);
    for (int i = 0; s->in_raw && s->model && i < s->model->g->ninputs; i++)
        wpk_free(s->in_raw[i]);
    wpk_free(s->in_raw);
    wpk_free(s->in);
    wpk_free(s->in_cap);
    wpk_free(s->bound);
    wpk_free(s->ws_raw);
    ir_graph_free(s->g);
    wpk_free(s->records);
    wpk_free(s->provider);
    wpk_plan_free(s->rt);
    wpk_free(s->plan_path);
    wpk_free(s);
}

static void type_text(const ir_tensor *t, const char *const *names, char *buf, size_t size) {
    strbuf b = {0};
    ir_print_type(t, names, &b);
    snprintf(buf, size, "%s", b.s ? b.s : "?");
    sb_free(&b);
}

wpk_status wpk_session_set_input(wpk_session *s, const char *name, wpk_dtype dtype,
                                 const int64_t *dims, int ndim, const void *data) {
    if (s->rt) return wpk_plan_set_input(s->rt, name, dtype, dims, ndim, data);
    const ir_graph *g = s->model->g;
    wpk_context *ctx = s->ctx;
    wpk_clear_error(ctx);
    int which = -1;
    for (int i = 0; i < g->ninputs; i++)
        if (strcmp(g->values[g->inputs[i]].name, name) == 0) which = i;
    if (which < 0) {
        char names[1024] = "";
        for (int i = 0; i < g->ninputs; i++) {
            size_t l = strlen(names);
            snprintf(names + l, sizeof names - l, "%s'%s'", i ? ", " : "",
                     g->values[g->inputs[i]].name);
        }
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "the model has no input named '%s' (its inputs "
                         "are: %s)", name, names);
    }
    const ir_value *v = &g->values[g->inputs[which]];
    ir_tensor given = {.dtype = dtype, .ndim = ndim};
    if (ndim < 0 || ndim > WPK_MAX_DIMS)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "input '%s': %d dims is out of range", name, ndim);
    for (int i = 0; i < ndim; i++) {
        given.dims[i] = dims[i];
        if (dims[i] < 0)
            return wpk_error(ctx, WPK_ERR_INVALID_ARG, "input '%s': dim %d is negative", name, i);
    }
    bool ok = dtype == v->t.dtype && ndim == v->t.ndim;
    for (int i = 0; ok && i < ndim; i++) ok = v->t.dims[i] < 0 || v->t.dims[i] == dims[i];
    if (!ok) {
        char want[256], got[256];
        type_text(&v->t, v->dim_names, want, sizeof want);
        type_text(&given, NULL, got, sizeof got);
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "input '%s' expects %s, got %s", name, want, got);
    }
    size_t bytes = ir_nbytes(&given);
    ir_tensor *t = &s->in[which];
    if (bytes > s->in_cap[which] || !t->data) {
        /* grown only: rebinding the same shapes allocates nothing */
        size_t cap = bytes ? bytes : 1;
        char *raw = wpk_malloc(cap + MEMORY_PLAN_ALIGN);
        if (!raw)
            return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory binding input '%s'", name);
        wpk_free(s->in_raw[which]);
        s->in_raw[which] = raw;
        t->data = raw + (MEMORY_PLAN_ALIGN - (uintptr_t)raw % MEMORY_PLAN_ALIGN) %
                            MEMORY_PLAN_ALIGN;
        s->in_cap[which] = cap;
    }
    void *keep = t->data;
    *t = given;
    t->data = keep;
    if (bytes) memcpy(t->data, data, bytes);
    s->bound[which] = true;
    return WPK_OK;
}

/* Put p first in the plan cache (evicting the least recently used) with a workspace large
 * enough for it. Takes p over, also on failure. */
static wpk_status adopt(wpk_session *s, exec_plan *p) {
    /* a compiled plan's executor has a workspace of its own */
    if (p->is_static && !p->x && p->mem.workspace > s->ws_size) {
        size_t size = p->mem.workspace;
        char *raw = wpk_malloc(size + MEMORY_PLAN_ALIGN);
        if (!raw) {
            exec_plan_free(p);
            return wpk_error(s->ctx, WPK_ERR_NOMEM, "out of memory allocating a %zu-byte "
                             "workspace", size);
        }
        wpk_free(s->ws_raw);
        s->ws_raw = raw;
        s->ws = raw + (MEMORY_PLAN_ALIGN - (uintptr_t)raw % MEMORY_PLAN_ALIGN) % MEMORY_PLAN_ALIGN;
        s->ws_size = size;
    }
    if (s->nplans == PLAN_CACHE) {
        if (s->last == s->plans[PLAN_CACHE - 1]) s->last = NULL;
        exec_plan_free(s->plans[--s->nplans]);
    }
    memmove(&s->plans[1], &s->plans[0], sizeof(exec_plan *) * (size_t)s->nplans);
    s->plans[0] = p;
    s->nplans++;
    return WPK_OK;
}

/* The plan for the bound input shapes: from the cache, or specialized now. */
static wpk_status find_plan(wpk_session *s, exec_plan **out) {
    for (int i = 0; i < s->nplans; i++)
        if (exec_plan_matches(s->plans[i], s->in)) {
            exec_plan *p = s->plans[i];
            memmove(&s->plans[1], &s->plans[0], sizeof(exec_plan *) * (size_t)i);
            s->plans[0] = p;
            *out = p;
            return WPK_OK;
        }
    exec_plan *p = NULL;
    int level = s->params.opt_level > s->optimized_at ? s->params.opt_level : s->optimized_at;
    wpk_status st = exec_plan_create_at(s->ctx, s->g, s->in, false, level, &p);
    if (st == WPK_OK && s->params.backend == WPK_BACKEND_CPU) {
        /* the records are read while the plan's kernels are chosen, not held open */
        tune_db *db = NULL;
        st = exec_plan_records_open(s->ctx, s->params.records, &db);
        if (st == WPK_OK) {
            cpu_options opt = {s->threads, s->params.provider, db, false, s->bf16,
                               s->params.bf16_fp32_share};
            st = exec_plan_compile(s->ctx, p, &opt);
        }
        tune_db_close(db);
    }
    if (st == WPK_OK && s->params.backend == WPK_BACKEND_CUDA) {
        tune_db *db = NULL;
        st = exec_plan_records_open(s->ctx, s->params.records, &db);
        if (st == WPK_OK) st = exec_plan_compile_cuda(s->ctx, p, db);
        tune_db_close(db);
    }
    if (st == WPK_OK && s->params.profile) st = exec_plan_enable_profile(s->ctx, p, s->threads);
    if (st) {
        exec_plan_free(p);
        return st;
    }
    st = adopt(s, p);
    if (st == WPK_OK) *out = p;
    return st;
}

wpk_status session_prepare(wpk_session *s, exec_plan **out) {
    const ir_graph *g = s->model->g;
    for (int i = 0; i < g->ninputs; i++)
        if (!s->bound[i])
            return wpk_error(s->ctx, WPK_ERR_INVALID_ARG, "input '%s' is not bound",
                             g->values[g->inputs[i]].name);
    return find_plan(s, out);
}

void session_set_optimized_at(wpk_session *s, int level) { s->optimized_at = level; }

int session_threads(const wpk_session *s) { return s->threads; }

wpk_status wpk_session_run(wpk_session *s) {
    wpk_clear_error(s->ctx);
    if (s->rt) {
        wpk_status st = wpk_plan_run(s->rt);
        if (st) wpk_error_prefix(s->ctx, "%s", s->plan_path);
        return st;
    }
    const ir_graph *g = s->model->g;
    omp_set_num_threads(s->threads);
    s->last = NULL;
    exec_plan *p = NULL;
    wpk_status st = session_prepare(s, &p);
    if (st == WPK_OK) st = exec_plan_run(s->ctx, p, s->ws, s->in);
    if (st) {
        wpk_error_prefix(s->ctx, "%s", g->path ? g->path : "model");
        return st;
    }
    s->last = p;
    return WPK_OK;
}

wpk_status wpk_session_output(wpk_session *s, int i, wpk_tensor_view *out) {
    if (s->rt) return wpk_plan_output(s->rt, i, out);
    const ir_graph *g = s->model->g;
    if (i < 0 || i >= g->noutputs)
        return wpk_error(s->ctx, WPK_ERR_INVALID_ARG, "output index %d is out of range (%d outputs)",
                         i, g->noutputs);
    if (!s->last) return wpk_error(s->ctx, WPK_ERR_INVALID_ARG, "the session has not run");
    const ir_tensor *t = exec_plan_output(s->last, i);
    memset(out, 0, sizeof *out);
    out->name = g->values[g->outputs[i]].name;
    out->dtype = t->dtype;
    out->ndim = t->ndim;
    memcpy(out->dims, t->dims, sizeof(int64_t) * (size_t)t->ndim);
    out->data = t->data;
    return WPK_OK;
}

wpk_status wpk_session_profile(wpk_session *s, const wpk_node_profile **out, int *n) {
    *out = NULL;
    *n = 0;
    if (!s->params.profile)
        return wpk_error(s->ctx, WPK_ERR_INVALID_ARG, "the session was created without "
                         "params.profile: nothing is timed");
    if (s->rt) return wpk_plan_profile(s->rt, out, n);
    if (!s->last || !s->last->profile)
        return wpk_error(s->ctx, WPK_ERR_INVALID_ARG, "the session has not run");
    *out = s->last->profile;
    *n = s->last->nprofile;
    return WPK_OK;
}

int wpk_session_num_inputs(const wpk_session *s) {
    return s->rt ? wpk_plan_num_inputs(s->rt) : s->model->g->ninputs;
}

int wpk_session_num_outputs(const wpk_session *s) {
    return s->rt ? wpk_plan_num_outputs(s->rt) : s->model->g->noutputs;
}

wpk_tensor_view wpk_session_input_info(const wpk_session *s, int i) {
    /* a plan's: the dims it was compiled for, symbolic ones with their names */
    return s->rt ? wpk_plan_input_info(s->rt, i) : wpk_model_input(s->model, i);
}

wpk_tensor_view wpk_session_output_info(const wpk_session *s, int i) {
    return s->rt ? wpk_plan_output_info(s->rt, i) : wpk_model_output(s->model, i);
}

wpk_status wpk_session_create_from_plan(wpk_context *ctx, const char *path,
                                        const wpk_session_params *params, wpk_session **out) {
    *out = NULL;
    wpk_clear_error(ctx);
    wpk_session_params given = params ? *params : wpk_session_default_params();
    /* the plan's own choices; threads and profiling are the caller's */
    wpk_plan_params pp = wpk_plan_default_params();
    pp.threads = given.threads;
    pp.profile = given.profile;
    step_runners_register();
    lib_runners_register();
    wpk_session *s = wpk_calloc(1, sizeof *s);
    if (!s) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory loading %s", path);
    s->ctx = ctx;
    s->params = wpk_session_default_params();
    s->params.backend = WPK_BACKEND_CPU;
    s->params.threads = given.threads;
    s->params.profile = given.profile;
    wpk_status st = (s->plan_path = wpk_strdup(path))
                        ? wpk_plan_load(ctx, path, &pp, &s->rt)
                        : wpk_error(ctx, WPK_ERR_NOMEM, "out of memory loading %s", path);
    if (st) {
        wpk_session_free(s);
        return st;
    }
    *out = s;
    return WPK_OK;
}
