/* program_cuda.h -- the compiler's side of the CUDA backend: a static plan (a graph whose shapes
 * are all known, in execution order, with its memory plan) turned into the description the
 * runtime's executor runs (runtime/cuda/cuda_program.h): every node that computes gets the
 * kernel of its CUDA template (templates_cuda.h) at the default config or the one `choose`
 * picks, lowered, emitted and compiled by NVRTC (kernels of one workload and config shared);
 * its arguments are the memory plan's workspace offsets, or offsets into one weights blob for
 * constants; views (Reshape, Flatten, ...) cost nothing where the planner gave them their
 * input's buffer and a device copy where it did not. Needs NVRTC, never a GPU.
 * It lives beside the templates because it is their client (a compile driver: task, build,
 * lower, emit, compile); the engine calls it from its plan compilation. */
#ifndef WPK_TUNE_TEMPLATES_PROGRAM_CUDA_H
#define WPK_TUNE_TEMPLATES_PROGRAM_CUDA_H

#include "codegen/cuda/cg_cuda.h"
#include "passes/memory_plan.h"
#include "runtime/cuda/cuda_program.h"
#include "kernels/provider.h"

typedef struct tune_cuda_program_options {
    int sm;                  /* the target GPU's SM version (0: 90) */
    bool cubin;              /* cubins for sm_XX instead of PTX */
    /* The config of task t (in t's space s) when it returns true; NULL or false: the
     * template's default. The records' best (tune_db_best) goes here. */
    bool (*choose)(void *user, const tune_task *t, const tune_space *s, tune_config *cfg);
    void *choose_user;
} tune_cuda_program_options;

tune_cuda_program_options tune_cuda_program_default_options(void);

/* The program of one plan; everything it points to is its own (tune_cuda_program_free). */
typedef struct tune_cuda_program {
    rt_cuda_program_desc desc;   /* ready for rt_cuda_program_create */
    rt_cuda_image *images;
    cg_cuda_image *compiled;     /* per image: NVRTC's output (the image data) */
    char **sources;              /* per image: the CUDA C it was compiled from */
    cg_cuda_launch *launch;      /* per image */
    char (*keys)[600];           /* per image: template key + config (for sharing, reports) */
    char (*names)[32];           /* per image: its kernel's entry, "wpk_cuda_k<i>" */
    int nimages;
    rt_cuda_step *steps;
    int nsteps;
    unsigned char *weights;
    size_t weights_bytes;
    rt_cuda_io *inputs, *outputs;
    int nkernel_nodes, nview_nodes, ncopy_steps;
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

/* ---- the whole backend for a session: device, program, runs ----
 * What a session with backend "cuda" needs, in three calls. create first probes the device
 * (WPK_ERR_UNSUPPORTED "CUDA unavailable: <reason>" before anything is compiled: no libcuda,
 * cuInit failed, no device), then builds the program for the device's own SM version, opens the
 * device and places the program on it (graph: runs as one CUDA Graph after the first).
 * g and mem are borrowed and must outlive the runner. run: inputs/outputs in the order of
 * g->inputs / g->outputs, each ir_nbytes of its value; the watchdog's timeout is rt_cuda_sync's
 * default. A runner is for one thread at a time. */
typedef struct tune_cuda_runner tune_cuda_runner;

wpk_status tune_cuda_runner_create(wpk_context *ctx, const ir_graph *g, const memory_plan *mem,
                                   const tune_cuda_program_options *opt, bool graph,
                                   tune_cuda_runner **out);
wpk_status tune_cuda_runner_run(tune_cuda_runner *r, const void *const *inputs,
                                void *const *outputs);
/* "NVIDIA H100 80GB HBM3 (sm_90, driver 13000), 7 kernels, CUDA Graph" into buf. */
const char *tune_cuda_runner_describe(const tune_cuda_runner *r, char *buf, size_t cap);
void tune_cuda_runner_free(tune_cuda_runner *r);

#endif
