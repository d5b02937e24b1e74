/* tasks.h -- a model's tuning tasks (issue 5): its distinct workloads (op + shapes + dtype +
 * fused epilogue: the template's workload key), each with the number of nodes that pose it and
 * its share of the FLOPs, taken from the graph as a session runs it: optimized at an -O level,
 * then specialized at batch 1 (every symbolic dim bound to 1) by the session's own
 * specialization (api/exec_plan.h), and split into kernel tasks by the cpu backend's task
 * collection (compile/tasks.h), so the records the tuner stores are the ones the backend
 * looks up. */
#ifndef WPK_TUNE_TASKS_H
#define WPK_TUNE_TASKS_H

#include "tune/template.h"

typedef struct tune_model_task {
    tune_task task;   /* task.node is borrowed from the set's specialized graph */
    int count;        /* nodes posing this workload */
    int64_t flops;    /* of all of them */
    double share;     /* flops / the set's total (0..1) */
    int alt_of;       /* -1: the workload's primary implementation (the template the cpu
                         backend runs without records); else the index of that task, of which
                         this is another implementation (tune_templates_for: Winograd, a
                         vendor library), measured so that the backend can choose */
} tune_model_task;

typedef struct tune_taskset {
    tune_model_task *tasks;  /* in order of first appearance in the graph, each primary task
                                followed by its alternatives */
    int ntasks;
    int64_t total_flops;     /* of every primary task */
    int nodes;               /* nodes of the specialized graph */
    int kernel_nodes;        /* of them, nodes a template takes (the rest: reference kernels) */
    /* owned: what the tasks' nodes live in */
    struct ir_graph *optimized;
    struct exec_plan *plan;
} tune_taskset;

/* The tasks of model (borrowed; must outlive the set) at optimization level opt_level (0..3,
 * the session's default is 2): per workload its primary task and, with alternatives, one task
 * per other implementation of its first node (distinct keys only). Errors: WPK_ERR_INVALID_ARG for a level out of range, the
 * model's unsupported ops (wpk_model_check_supported), optimization and specialization errors
 * (WPK_ERR_UNSUPPORTED naming a value whose shape is not static at batch 1), WPK_ERR_NOMEM.
 * *out is the caller's (tune_taskset_free), zeroed on failure. */
wpk_status tune_tasks_extract(wpk_context *ctx, const wpk_model *model, int opt_level,
                              bool alternatives, tune_taskset *out);
void tune_taskset_free(tune_taskset *t);

#endif
