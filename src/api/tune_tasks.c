/* tune_tasks.c -- a model's tuning tasks: optimize a clone of its graph as a session does,
 * specialize it at batch 1, collect its kernel tasks (see tune_tasks.h). */
#include "api/tune_tasks.h"

#include <string.h>

#include "api/exec_plan.h"
#include "api/model.h"
#include "base/alloc.h"
#include "base/context.h"
#include "base/strbuf.h"
#include "ir/ops.h"
#include "base/target.h"
#include "kernels/graph_tasks.h"
#include "kernels/templates_cuda.h"
#include "kernels/vendor/lib.h"
#include "passes/pass.h"

/* What a task set's nodes live in: the optimized graph and its batch-1 specialization. */
typedef struct task_owner {
    ir_graph *optimized;
    exec_plan *plan;
} task_owner;

static void owner_free(void *p) {
    task_owner *o = p;
    if (!o) return;
    exec_plan_free(o->plan);       /* before the graph it was specialized from */
    ir_graph_free(o->optimized);
    wpk_free(o);
}

/* The graph at opt_level, as wpk_session_create makes it (for the CUDA backend with cuda). */
static wpk_status optimize(wpk_context *ctx, const wpk_model *model, int level, bool cuda,
                           ir_graph **out) {
    ir_graph *g = ir_graph_clone(model->g);
    if (!g) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory optimizing the model");
    pass_options opt = pass_default_options();
    opt.level = level;
    /* the blocked layout (NCHWc) is the CPU kernels'; the CUDA templates read NCHW */
    opt.vector_floats = cuda ? 0 : target_vector_floats();
    wpk_status st = passes_run(ctx, g, &opt);
    if (st == WPK_OK && g->ninputs != model->g->ninputs)
        st = wpk_error(ctx, WPK_ERR_INTERNAL, "optimization changed the graph's inputs");
    if (st) {
        ir_graph_free(g);
        return st;
    }
    *out = g;
    return WPK_OK;
}

/* Implementations of one node at most (templates + libraries). */
#define MAX_IMPLS 8

/* A task of implementation impl for primary task p's node, unless a task of the set has its
 * key already. */
static void add_alternative(tune_taskset *set, int p, const kernel_provider *impl,
                            ir_tensor *const *in, ir_tensor *const *out) {
    tune_task t;
    tune_task_init(&t, impl, set->tasks[p].task.node, in, out);
    for (int j = 0; j < set->ntasks; j++)
        if (!strcmp(set->tasks[j].task.key, t.key)) return;
    tune_model_task *a = &set->tasks[set->ntasks++];
    *a = set->tasks[p];
    a->task = t;
    a->alt_of = p;
}

/* After primary task p: a task for every other implementation of its node whose key no task
 * of the set has yet. */
static void add_alternatives(tune_taskset *set, int p, ir_tensor *vals) {
    const tune_task *pt = &set->tasks[p].task;
    ir_tensor *in[TUNE_MAX_ARGS * 8], *out[TUNE_MAX_ARGS * 8];
    if (pt->node->nin > TUNE_MAX_ARGS * 8 || pt->node->nout > TUNE_MAX_ARGS * 8) return;
    cpu_node_tensors(pt->node, vals, in, out);
    const kernel_provider *impls[MAX_IMPLS];
    int n = kernel_providers_for(pt->node, in, out, impls, MAX_IMPLS);
    for (int k = 0; k < n; k++) {
        if (impls[k] == pt->tmpl) continue;
        add_alternative(set, p, impls[k], in, out);
    }
}

/* The set's owner: model optimized at opt_level and specialized at batch 1 (own->plan). */
static wpk_status specialize(wpk_context *ctx, const wpk_model *model, int opt_level,
                             bool cuda, tune_taskset *out, task_owner **owner) {
    memset(out, 0, sizeof *out);
    *owner = NULL;
    if (opt_level < 0 || opt_level > 3)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "optimization level %d is out of range (0 to "
                         "3)", opt_level);
    wpk_status st = wpk_model_check_supported(ctx, model);
    if (st) return st;
    task_owner *own = wpk_calloc(1, sizeof *own);
    if (!own) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory extracting tasks");
    out->owner = own;
    out->owner_free = owner_free;
    *owner = own;
    st = optimize(ctx, model, opt_level, cuda, &own->optimized);
    /* batch 1: the input types with symbolic dims bound to 1, as the model's inference has
       them */
    ir_tensor *shapes = NULL;
    if (st == WPK_OK) {
        shapes = wpk_calloc((size_t)model->g->ninputs + 1, sizeof *shapes);
        if (!shapes) st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory extracting tasks");
        for (int i = 0; shapes && i < model->g->ninputs; i++) {
            shapes[i] = model->vals[model->g->inputs[i]];
            shapes[i].data = NULL;
        }
    }
    if (st == WPK_OK) st = exec_plan_create_at(ctx, own->optimized, shapes, true, opt_level,
                                              &own->plan);
    wpk_free(shapes);
    return st;
}

wpk_status api_tune_tasks_extract(wpk_context *ctx, const wpk_model *model, int opt_level,
                                  bool alternatives, tune_taskset *out) {
    task_owner *own = NULL;
    wpk_status st = specialize(ctx, model, opt_level, false, out, &own);
    if (!own) return st;
    cpu_tasks ct = {0};
    if (st == WPK_OK) st = cpu_tasks_collect(ctx, own->plan->g, own->plan->vals, &ct);
    int per = alternatives ? MAX_IMPLS : 1;
    if (st == WPK_OK) {
        out->tasks = wpk_calloc((size_t)ct.ntasks * (size_t)per + 1, sizeof *out->tasks);
        if (!out->tasks) st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory extracting tasks");
    }
    if (st == WPK_OK) {
        out->nodes = own->plan->g->nnodes;
        for (int i = 0; i < ct.ntasks; i++) {
            out->total_flops += ct.tasks[i].flops;
            out->kernel_nodes += ct.tasks[i].count;
        }
        for (int i = 0; i < ct.ntasks; i++) {
            int primary = out->ntasks;
            tune_model_task *t = &out->tasks[out->ntasks++];
            t->task = ct.tasks[i].task;
            t->count = ct.tasks[i].count;
            t->flops = ct.tasks[i].flops;
            t->share = out->total_flops > 0 ? (double)t->flops / (double)out->total_flops : 0;
            t->alt_of = -1;
            if (alternatives) add_alternatives(out, primary, own->plan->vals);
        }
    }
    cpu_tasks_free(&ct);
    if (st) {
        if (model->g->path) wpk_error_prefix(ctx, "%s", model->g->path);
        tune_taskset_free(out);
    }
    return st;
}

/* ---- the CUDA target ---- */

#define MAX_CUDA_ARGS (TUNE_MAX_ARGS * 8)
#define MAX_LISTED 8
#define MAX_CUDA_LIBS 4

/* After primary task p (of node n's template): a task for every CUDA library that takes n
 * (cuDNN, cuBLAS, cuBLASLt), measured so that the CUDA compile can choose it. */
static void add_cuda_alternatives(tune_taskset *set, int p, ir_tensor *const *in,
                                  ir_tensor *const *out) {
    const ir_node *n = set->tasks[p].task.node;
    const kernel_provider *const *libs = lib_cuda_providers();
    for (int k = 0; n->nin <= TUNE_MAX_ARGS && libs[k] && k < MAX_CUDA_LIBS; k++) {
        if (!libs[k]->supports(libs[k], n, in, out)) continue;
        add_alternative(set, p, libs[k], in, out);
    }
}

wpk_status api_tune_tasks_extract_cuda(wpk_context *ctx, const wpk_model *model, int opt_level,
                                       tune_taskset *out) {
    task_owner *own = NULL;
    wpk_status st = specialize(ctx, model, opt_level, true, out, &own);
    if (!own) return st;
    const ir_graph *g = st == WPK_OK ? own->plan->g : NULL;
    strbuf names = {0};
    int missing = 0; /* nodes that compute without a CUDA template */
    if (st == WPK_OK) {
        out->tasks = wpk_calloc((size_t)g->nnodes * (1 + MAX_CUDA_LIBS) + 1, sizeof *out->tasks);
        if (!out->tasks) st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory extracting tasks");
    }
    for (int k = 0; st == WPK_OK && k < g->nnodes; k++) {
        const ir_node *n = &g->nodes[k];
        if (n->nin > MAX_CUDA_ARGS || n->nout > MAX_CUDA_ARGS) continue;
        /* the tensors the CUDA program builds each node's kernel from (cuda_program.c) */
        ir_tensor *in[MAX_CUDA_ARGS] = {0}, *outs[MAX_CUDA_ARGS] = {0};
        for (int i = 0; i < n->nin; i++) in[i] = n->in[i] >= 0 ? &g->values[n->in[i]].t : NULL;
        for (int i = 0; i < n->nout; i++)
            outs[i] = n->out[i] >= 0 ? &g->values[n->out[i]].t : NULL;
        const kernel_provider *t = kernel_provider_cuda_for(n, in, outs);
        bool view = ir_op_get(n->op)->ref == op_copy_ref || n->op == IR_OP_DROPOUT;
        if (!t && !view && missing++ < MAX_LISTED)
            sb_printf(&names, "%s'%s' (%s)", missing > 1 ? ", " : "", n->name, n->op_type);
        if (!t) continue;
        tune_task task;
        tune_task_init(&task, t, n, in, outs);
        int found = -1;
        for (int j = 0; j < out->ntasks && found < 0; j++)
            if (!strcmp(out->tasks[j].task.key, task.key)) found = j;
        const bool first = found < 0;
        if (first) {
            found = out->ntasks++;
            out->tasks[found].task = task;
            out->tasks[found].alt_of = -1;
        }
        out->tasks[found].count++;
        out->tasks[found].flops += task.flops;
        /* the libraries' tasks follow their primary, sharing its counts */
        for (int j = found + 1; !first && j < out->ntasks && out->tasks[j].alt_of == found; j++) {
            out->tasks[j].count++;
            out->tasks[j].flops += task.flops;
        }
        if (first) add_cuda_alternatives(out, found, in, outs);
        out->total_flops += task.flops;
        out->kernel_nodes++;
    }
    if (missing > MAX_LISTED) sb_printf(&names, " and %d more", missing - MAX_LISTED);
    if (st == WPK_OK && missing)
        wpk_log(ctx, WPK_LOG_WARN, "%d node%s without a CUDA template, not tuned: %s", missing,
                missing == 1 ? "" : "s", names.s ? names.s : "");
    sb_free(&names);
    if (st == WPK_OK) {
        out->nodes = g->nnodes;
        for (int i = 0; i < out->ntasks; i++)
            out->tasks[i].share = out->total_flops > 0
                                      ? (double)out->tasks[i].flops / (double)out->total_flops
                                      : 0;
    }
    if (st) {
        if (model->g->path) wpk_error_prefix(ctx, "%s", model->g->path);
        tune_taskset_free(out);
    }
    return st;
}
