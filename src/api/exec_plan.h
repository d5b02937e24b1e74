/* exec_plan.h -- a graph specialized to concrete input shapes and ready to run: the graph cloned
 * with its inputs' dims bound, folded again, its shapes inferred, and its activations laid out
 * in one workspace by the memory planner, so a run calls no shape function and allocates
 * nothing. When a shape depends on data computed during the run, the plan runs the graph with
 * the dynamic reference interpreter instead. */
#ifndef WPK_API_EXEC_PLAN_H
#define WPK_API_EXEC_PLAN_H

#include <stdbool.h>

#include "compile/cpu_compile.h"
#include "compile/plan_io.h"
#include "ir/eval.h"
#include "passes/memory_plan.h"
#include "runtime/exec.h"
#include "tune/records.h"
#include "wpk.h"

typedef struct exec_plan {
    int ninputs;
    ir_tensor *key;     /* per graph input: the dtype and dims the plan was built for */
    ir_graph *g;        /* the specialized graph; owned, shares payloads with its source */
    bool is_static;     /* every shape is static: mem and vals run it; otherwise exec does */
    memory_plan mem;
    ir_tensor *vals;    /* per value of g: static dtype and shape, data bound to a workspace */
    const char *bound;  /* the workspace vals point into; NULL before the first run */
    ir_exec exec;       /* the dynamic interpreter's buffers when !is_static */
    cpu_program *cpu;   /* generated kernels (the cpu backend), or NULL: reference kernels */
    cpu_plan *plan;     /* cpu as a runtime plan (tensor v is value v), run by x */
    rt_backend be;      /* the cpu backend x runs on */
    rt_exec *x;         /* the runtime's executor of plan, with its own workspace; NULL
                           without cpu */
    bool *in_bind;      /* per graph input: x reads it where the caller keeps it (no other
                           value shares its bytes and it is no output), else it is copied */
    struct tune_cuda_runner *cuda; /* the CUDA backend: the plan on the GPU, or NULL */
    wpk_node_profile *profile; /* per node (on the CUDA backend: per step), when profiling:
                                  what it runs (strings borrowed from plan) and its time in
                                  the last run; nprofile entries (owned unless cuda's) */
    int nprofile;
} exec_plan;

/* Specialize src (borrowed; must outlive the plan) to the input types in shapes[i], one per
 * src->inputs[i], every dim concrete (data ignored): clone it, bind the inputs' dims, run the
 * fold-constants and dce passes, infer every shape (folding what is known), plan memory.
 * require_static: fail with WPK_ERR_UNSUPPORTED naming the value whose shape is not static
 * instead of falling back to the dynamic interpreter. Returns WPK_ERR_MODEL (naming the node)
 * when the graph is inconsistent at these shapes, WPK_ERR_NOMEM. *out is the caller's. */
wpk_status exec_plan_create(wpk_context *ctx, const ir_graph *src, const ir_tensor *shapes,
                            bool require_static, exec_plan **out);
/* exec_plan_create for a src optimized at opt_level: at 2 and above, when a symbolic dim got
 * bound, the rewrites that need static shapes (attention, LayerNorm, epilogue fusion) run
 * again on the bound graph. */
wpk_status exec_plan_create_at(wpk_context *ctx, const ir_graph *src, const ir_tensor *shapes,
                               bool require_static, int opt_level, exec_plan **out);
void exec_plan_free(exec_plan *p);

/* Compile a static plan's nodes into generated kernels (the cpu backend: compile/cpu_compile.h)
 * for runs on `threads` threads (0: OpenMP's default), made a runtime plan (compile/plan_io.h)
 * that exec_plan_run runs on the runtime's executor (runtime/exec.h) on the cpu backend. A
 * plan that is not static keeps running on the dynamic interpreter (nothing is compiled).
 * Errors of cpu_program_create, cpu_program_plan and rt_exec_create. */
wpk_status exec_plan_compile_cpu(wpk_context *ctx, exec_plan *p, int threads);

/* The CUDA backend (compile/cuda_program.h): the static plan's nodes as CUDA
 * kernels placed on device 0, each at the config the records db (borrowed, may be NULL) hold
 * for this GPU (compile/cuda_choice.h), else its template's default, run by exec_plan_run
 * (inputs copied in, outputs back into the plan's host workspace). WPK_ERR_UNSUPPORTED for a
 * plan that is not static, without a device ("CUDA unavailable: <reason>") or for nodes
 * without a CUDA kernel (named). */
wpk_status exec_plan_compile_cuda(wpk_context *ctx, exec_plan *p, tune_db *db);

/* Compile a static plan for the cpu backend with opt (threads, provider, records): as
 * exec_plan_compile_cpu. */
wpk_status exec_plan_compile(wpk_context *ctx, exec_plan *p, const cpu_options *opt);

/* Time every node of each later run (wpk_session_profile) from the executor's per-step times.
 * A static plan on reference kernels gets a program of reference steps (compile nothing), run
 * on `threads` threads (0: the default) by the same executor; a plan on the dynamic
 * interpreter cannot be profiled per node (WPK_ERR_UNSUPPORTED, saying so). WPK_ERR_NOMEM. */
wpk_status exec_plan_enable_profile(wpk_context *ctx, exec_plan *p, int threads);

/* Open the tuning records as wpk_session_params.records says: NULL, the default database
 * ($WPK_CACHE_DIR, else $XDG_CACHE_HOME/wpk, else ~/.cache/wpk; file records.db) when that file
 * exists, else none (*out NULL); "" none; a path, that file, which must exist (WPK_ERR_IO
 * naming it otherwise). Errors of tune_db_open. *out is the caller's (tune_db_close). */
wpk_status exec_plan_records_open(wpk_context *ctx, const char *records, tune_db **out);

/* The file exec_plan_records_open would open for `records` into path ("" for none). */
void exec_plan_records_path(const char *records, char *path, size_t cap);

/* True when the plan was built for exactly these input dtypes and shapes. */
bool exec_plan_matches(const exec_plan *p, const ir_tensor *shapes);

/* Run the plan on inputs[i] (one per graph input, types as the plan's key). Data borrowed
 * until the next run or exec_plan_free: a compiled plan reads an input aligned to
 * MEMORY_PLAN_ALIGN in place where in_bind says it may (else copies it into its executor's
 * workspace). A static plan without an executor works in `workspace` (borrowed: at least
 * p->mem.workspace bytes, aligned to MEMORY_PLAN_ALIGN, and left alone until its outputs have
 * been read; unused, may be NULL, with one). A static plan allocates nothing. Returns the
 * first kernel's error. */
wpk_status exec_plan_run(wpk_context *ctx, exec_plan *p, char *workspace, const ir_tensor *inputs);

/* Graph output i of the last run (its data in the executor's or the given workspace, a
 * constant, or the interpreter's buffers). */
const ir_tensor *exec_plan_output(const exec_plan *p, int i);

#endif
