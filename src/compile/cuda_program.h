/* cuda_program.h -- the compiler's side of the CUDA target: a static plan (a graph whose shapes
 * are all known, in execution order, with its memory plan) turned into a target-neutral runtime
 * plan (runtime/plan.h) that rt_exec runs on the CUDA backend (runtime/cuda/cuda_rt.h). Every
 * node that computes gets the kernel of its CUDA template (templates_cuda.h) at the default
 * config or the one `choose` picks, lowered, emitted and compiled by NVRTC (one module per
 * distinct workload and config, its entry the step's symbol, the launch dims the step's
 * payload: runner "cuda_kernel") -- or, where choose_lib picks one, a step of a CUDA library
 * (runner "cudnn", "cublas" or "cublaslt": the node and the library's config, its kernel made
 * when the plan loads); tensor v is graph value v, at its workspace offset or, for a
 * constant, in the constants blob; views (Reshape, Flatten, ...) cost nothing where the planner
 * gave them their input's buffer and a device copy (runner "cuda_copy") where it did not.
 * Needs NVRTC, never a GPU. */
#ifndef WPK_COMPILE_CUDA_PROGRAM_H
#define WPK_COMPILE_CUDA_PROGRAM_H

#include "codegen/cuda/cg_cuda.h"
#include "passes/memory_plan.h"
#include "runtime/plan.h"
#include "kernels/provider.h"

typedef struct tune_cuda_program_options {
    int sm;                  /* the target GPU's SM version (0: 90) */
    bool cubin;              /* cubins for sm_XX instead of PTX */
    /* The config of task t (in t's space s) when it returns true; NULL or false: the
     * template's default. The records' best (tune_db_best) goes here. */
    bool (*choose)(void *user, const tune_task *t, const tune_space *s, tune_config *cfg);
    /* A CUDA library's kernel for the node of template task t instead of the template's (the
     * records say it is faster): the provider (of lib_cuda_providers) and its config index in
     * *config; NULL or absent: the template's kernel. */
    const kernel_provider *(*choose_lib)(void *user, const tune_task *t, int *config);
    void *choose_user;
} tune_cuda_program_options;

tune_cuda_program_options tune_cuda_program_default_options(void);

/* The program of one plan; everything it points to is its own (tune_cuda_program_free). */
typedef struct tune_cuda_program {
    rt_plan plan;                /* ready for rt_exec_create on the CUDA backend (or writing) */
    cg_cuda_image *compiled;     /* per module: NVRTC's output (the module's bytes) */
    char **sources;              /* per module: the CUDA C it was compiled from */
    cg_cuda_launch *launch;      /* per module */
    char (*keys)[600];           /* per module: template key + config (for sharing, reports) */
    char (*names)[32];           /* per module: its kernel's entry, "wpk_cuda_k<i>" */
    int nimages;
    int nkernel_nodes, nview_nodes, ncopy_steps, nlib_steps;
} tune_cuda_program;

/* Build the program of g (borrowed: the steps name its nodes, so g must outlive the program)
 * with its memory plan mem. Every node must have static float shapes and a CUDA template;
 * otherwise WPK_ERR_UNSUPPORTED naming every node that has none ("CUDA backend: no CUDA kernel
 * for node 'x' (op Y), ..."). Errors of the templates (WPK_ERR_INVALID_ARG naming the config),
 * of NVRTC (WPK_ERR_UNSUPPORTED without it; WPK_ERR_INTERNAL with its log), WPK_ERR_NOMEM.
 * On failure *out holds nothing. */
wpk_status tune_cuda_program_build(wpk_context *ctx, const ir_graph *g, const memory_plan *mem,
                                   const tune_cuda_program_options *opt, tune_cuda_program *out);
void tune_cuda_program_free(tune_cuda_program *p);

/* How the program runs node k of g: nothing (dead, or a view the planner gave its input's
 * buffer; a device copy where it did not), device copies (a Split into contiguous parts, a
 * Concat of more inputs than concat_cuda takes), a kernel of its CUDA template (*tmpl, when
 * tmpl is not NULL), or not at all (NONE: the program refuses the graph). */
typedef enum tune_cuda_node_impl {
    TUNE_CUDA_NODE_NONE,
    TUNE_CUDA_NODE_DEAD,
    TUNE_CUDA_NODE_VIEW,
    TUNE_CUDA_NODE_COPIES,
    TUNE_CUDA_NODE_KERNEL,
} tune_cuda_node_impl;
tune_cuda_node_impl tune_cuda_node_how(const ir_graph *g, int k, const kernel_provider **tmpl);

/* WPK_OK when every node of g has a way to run (tune_cuda_node_how), else WPK_ERR_UNSUPPORTED
 * naming every node that has none at once: what tune_cuda_program_build checks first, without
 * NVRTC or a device. */
wpk_status tune_cuda_program_check(wpk_context *ctx, const ir_graph *g);

/* ---- the whole backend for a session: device, program, runs ----
 * What a session with backend "cuda" needs, in three calls. create first probes the device
 * (WPK_ERR_UNSUPPORTED "CUDA unavailable: <reason>" before anything is compiled: no libcuda,
 * cuInit failed, no device), then builds the program for the device's own SM version, opens the
 * device and makes the plan ready on its backend with rt_exec (graph: the steps run as one
 * CUDA Graph after the first run).
 * g and mem are borrowed and must outlive the runner. run: inputs/outputs in the order of
 * g->inputs / g->outputs, each ir_nbytes of its value; the watchdog's timeout is rt_cuda_sync's
 * default. A runner is for one thread at a time. */
typedef struct tune_cuda_runner tune_cuda_runner;

wpk_status tune_cuda_runner_create(wpk_context *ctx, const ir_graph *g, const memory_plan *mem,
                                   const tune_cuda_program_options *opt, bool graph,
                                   tune_cuda_runner **out);
wpk_status tune_cuda_runner_run(tune_cuda_runner *r, const void *const *inputs,
                                void *const *outputs);
/* Time every step of the later runs (the backend then launches them one by one between CUDA
 * events instead of replaying a graph): *entries (r's, valid until it is freed) holds per step
 * of the plan what it runs and, after each run, its time (ms); *n the steps. WPK_ERR_NOMEM. */
wpk_status tune_cuda_runner_profile(tune_cuda_runner *r, const wpk_node_profile **entries,
                                    int *n);
/* "NVIDIA H100 80GB HBM3 (sm_90, driver 13000), 7 kernels, CUDA Graph" into buf. */
const char *tune_cuda_runner_describe(const tune_cuda_runner *r, char *buf, size_t cap);
void tune_cuda_runner_free(tune_cuda_runner *r);

#endif
