/* tasks.h -- the kernel tasks of a specialized graph: for each node, the schedule template that
 * implements it (kernel_provider_for) and the workload it poses, with identical workloads
 * counted once; the nodes no template takes run their reference kernels. What `wpk space`
 * prints and what the cpu backend compiles. */
#ifndef WPK_KERNELS_GRAPH_TASKS_H
#define WPK_KERNELS_GRAPH_TASKS_H

#include "base/strbuf.h"
#include "kernels/provider.h"

typedef struct cpu_task {
    tune_task task;   /* of the first node posing it; task.node is borrowed from the graph */
    int count;        /* nodes posing this workload */
    int64_t flops;    /* of all of them */
} cpu_task;

typedef struct cpu_tasks {
    cpu_task *tasks;  /* in order of first appearance */
    int ntasks;
    int *node_task;   /* per node of the graph: index into tasks, or -1 (reference kernel) */
    int nnodes;
} cpu_tasks;

/* The tasks of g, whose values have the static dtypes and shapes of vals (one per value;
 * constants' data known, everything else's data NULL or ignored: a template only learns that
 * it is not constant). Nodes whose tensors are not all static run their reference kernels.
 * WPK_ERR_NOMEM. *out is the caller's (cpu_tasks_free). */
wpk_status cpu_tasks_collect(wpk_context *ctx, const ir_graph *g, const ir_tensor *vals,
                             cpu_tasks *out);
void cpu_tasks_free(cpu_tasks *t);

/* The node's tensors, one per input/output (NULL where omitted), pointing into vals. */
void cpu_node_tensors(const ir_node *n, ir_tensor *vals, ir_tensor **in, ir_tensor **out);

/* The report of `wpk space`: per task its workload key, template, node count, share of the
 * FLOPs, knobs with their value counts and the space size; then the reference-kernel line.
 * Deterministic. */
void cpu_tasks_print(const cpu_tasks *t, const ir_graph *g, strbuf *b);
/* "reference kernels (no template): Op (n nodes), ..." (or "none"), ops in order of first
 * appearance, without a trailing newline. Views (Reshape, Flatten, Squeeze, Unsqueeze,
 * Identity), Constant and Shape are not kernels and are left out. */
void cpu_tasks_print_reference(const cpu_tasks *t, const ir_graph *g, strbuf *b);

#endif
