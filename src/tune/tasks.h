/* tasks.h -- a model's tuning tasks: its distinct workloads (op + shapes + dtype +
 * fused epilogue: the template's workload key), each with the number of nodes that pose it and
 * its share of the FLOPs, taken from the graph as a session runs it: optimized at an -O level,
 * then specialized at batch 1 (every symbolic dim bound to 1) by the session's own
 * specialization (api/exec_plan.h), and split into kernel tasks by the cpu backend's task
 * collection (kernels/graph_tasks.h), so the records the tuner stores are the ones the backend
 * looks up. */
#ifndef WPK_TUNE_TASKS_H
#define WPK_TUNE_TASKS_H

#include "kernels/provider.h"

typedef struct tune_model_task {
    tune_task task;   /* task.node is borrowed from the set's specialized graph */
    int count;        /* nodes posing this workload */
    int64_t flops;    /* of all of them */
    double share;     /* flops / the set's total (0..1) */
    int alt_of;       /* -1: the workload's primary implementation (the template the cpu
                         backend runs without records); else the index of that task, of which
                         this is another implementation (kernel_providers_for: Winograd, a
                         vendor library), measured so that the backend can choose */
} tune_model_task;

typedef struct tune_taskset {
    tune_model_task *tasks;  /* in order of first appearance in the graph, each primary task
                                followed by its alternatives */
    int ntasks;
    int64_t total_flops;     /* of every primary task */
    int nodes;               /* nodes of the specialized graph */
    int kernel_nodes;        /* of them, nodes a template takes (the rest: reference kernels) */
    /* owned: what the tasks' nodes live in, released by owner_free (set by whoever made the
       set: api/tune_tasks.c specializes the model's graph) */
    void *owner;
    void (*owner_free)(void *owner);
} tune_taskset;

/* Release the tasks and their owner. */
void tune_taskset_free(tune_taskset *t);

/* One set of the tasks of sets[0..n) (several models tuned in one job): a workload posed by
 * several (the same key and template) is one task, its node counts and FLOPs summed; the
 * first set's order, then each later set's new tasks in its order; shares over the sum.
 * Takes over the sets (zeroed, also on failure, when they are freed). The tasks' nodes still
 * point into their own set's graph, which the merged set now owns. WPK_ERR_NOMEM. */
wpk_status tune_taskset_merge(wpk_context *ctx, tune_taskset *sets, int n, tune_taskset *out);

#endif
