/* tune_tasks.h -- a model's tuning tasks (tune/tasks.h) taken from the graph as a session runs
 * it: optimized at an -O level, specialized at batch 1 (every symbolic dim bound to 1) by the
 * session's own specialization (exec_plan.h), split into kernel tasks by the cpu backend's task
 * collection (kernels/graph_tasks.h), so the records the tuner stores are the ones the backend
 * looks up. Internal to src/api and the CLI. */
#ifndef WPK_API_TUNE_TASKS_H
#define WPK_API_TUNE_TASKS_H

#include "api/model.h"
#include "tune/tasks.h"

/* The tasks of model (borrowed; must outlive the set) at optimization level opt_level (0..3,
 * the session's default is 2): per workload its primary task and, with alternatives, one task
 * per other implementation of its first node (distinct keys only). Errors: WPK_ERR_INVALID_ARG
 * for a level out of range, the model's unsupported ops (wpk_model_check_supported),
 * optimization and specialization errors (WPK_ERR_UNSUPPORTED naming a value whose shape is not
 * static at batch 1), WPK_ERR_NOMEM. *out is the caller's (tune_taskset_free), zeroed on
 * failure. */
wpk_status api_tune_tasks_extract(wpk_context *ctx, const wpk_model *model, int opt_level,
                                  bool alternatives, tune_taskset *out);

/* The tasks of model for the CUDA target, from the same specialized graph: per distinct
 * workload of the nodes that have a CUDA template (kernel_provider_cuda_for, as the CUDA
 * program picks it) one task with that template, keyed as the program looks its records up.
 * Nodes without a CUDA template are no task (the CUDA compile names them). Errors as
 * api_tune_tasks_extract's. */
wpk_status api_tune_tasks_extract_cuda(wpk_context *ctx, const wpk_model *model, int opt_level,
                                       tune_taskset *out);

#endif
