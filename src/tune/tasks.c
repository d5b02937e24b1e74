/* tasks.c -- a model's tuning tasks: optimize a clone of its graph as a session does,
 * specialize it at batch 1, collect its kernel tasks (see tasks.h). */
#include "tune/tasks.h"

#include <string.h>

#include "api/exec_plan.h"
#include "api/model.h"
#include "base/alloc.h"
#include "base/context.h"
#include "base/target.h"
#include "compile/tasks.h"
#include "passes/pass.h"

void tune_taskset_free(tune_taskset *t) {
    if (!t) return;
    wpk_free(t->tasks);
    exec_plan_free(t->plan);       /* before the graph it was specialized from */
    ir_graph_free(t->optimized);
    memset(t, 0, sizeof *t);
}

/* The graph at opt_level, as wpk_session_create makes it. */
static wpk_status optimize(wpk_context *ctx, const wpk_model *model, int level, ir_graph **out) {
    ir_graph *g = ir_graph_clone(model->g);
    if (!g) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory optimizing the model");
    pass_options opt = pass_default_options();
    opt.level = level;
    opt.vector_floats = target_vector_floats();
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

wpk_status tune_tasks_extract(wpk_context *ctx, const wpk_model *model, int opt_level,
                              tune_taskset *out) {
    memset(out, 0, sizeof *out);
    if (opt_level < 0 || opt_level > 3)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "optimization level %d is out of range (0 to "
                         "3)", opt_level);
    wpk_status st = wpk_model_check_supported(ctx, model);
    if (st) return st;
    st = optimize(ctx, model, opt_level, &out->optimized);
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
    if (st == WPK_OK) st = exec_plan_create(ctx, out->optimized, shapes, true, &out->plan);
    wpk_free(shapes);
    cpu_tasks ct = {0};
    if (st == WPK_OK) st = cpu_tasks_collect(ctx, out->plan->g, out->plan->vals, &ct);
    if (st == WPK_OK) {
        out->tasks = wpk_calloc((size_t)ct.ntasks + 1, sizeof *out->tasks);
        if (!out->tasks) st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory extracting tasks");
    }
    if (st == WPK_OK) {
        out->ntasks = ct.ntasks;
        out->nodes = out->plan->g->nnodes;
        for (int i = 0; i < ct.ntasks; i++) {
            tune_model_task *t = &out->tasks[i];
            t->task = ct.tasks[i].task;
            t->count = ct.tasks[i].count;
            t->flops = ct.tasks[i].flops;
            out->total_flops += t->flops;
            out->kernel_nodes += t->count;
        }
        for (int i = 0; i < ct.ntasks; i++)
            out->tasks[i].share =
                out->total_flops > 0 ? (double)out->tasks[i].flops / (double)out->total_flops : 0;
    }
    cpu_tasks_free(&ct);
    if (st) {
        if (model->g->path) wpk_error_prefix(ctx, "%s", model->g->path);
        tune_taskset_free(out);
    }
    return st;
}
