/* cuda_program.h -- a whole model on the GPU: the CUDA backend's executor. A program is what the
 * compiler hands the runtime (a plan's nodes as kernel images and launch steps, the weights,
 * where every activation lives in one workspace laid out by the memory planner); the runtime
 * loads the modules, uploads the weights once, allocates the workspace and pinned staging for
 * the inputs and outputs once, and runs the plan on the backend's stream: inputs copied in
 * asynchronously, the kernels, outputs copied out, one wait. With `graph` the first run
 * captures all of that (copies from and to the pinned staging included) into a CUDA Graph and
 * every run after it is one cuGraphLaunch -- no per-kernel launch overhead. Runs allocate
 * nothing. Depends on base and cuda_rt.h only: building a program from a graph is the
 * compiler's side (src/compile/cuda_program.c). */
#ifndef WPK_RUNTIME_CUDA_CUDA_PROGRAM_H
#define WPK_RUNTIME_CUDA_CUDA_PROGRAM_H

#include "runtime/cuda/cuda_rt.h"

#define RT_CUDA_STEP_ARGS 16

/* Where a buffer lives: an offset in the workspace (activations, inputs, outputs) or in the
 * weights (constants). Offsets must keep the alignment the kernels were generated for (the
 * memory planner's 64 bytes; both bases are 256-byte aligned). */
typedef enum rt_cuda_space { RT_CUDA_WORKSPACE = 0, RT_CUDA_WEIGHTS = 1 } rt_cuda_space;

typedef struct rt_cuda_ref {
    rt_cuda_space space;
    uint64_t offset;
} rt_cuda_ref;

typedef struct rt_cuda_image {
    const void *data;        /* PTX text with its NUL, or a cubin (cg_cuda_compile's) */
    size_t size;
    const char *name;        /* the kernel's entry */
    rt_cuda_dims dims;
} rt_cuda_image;

typedef struct rt_cuda_step {
    const char *node;        /* what it computes, for messages */
    int kernel;              /* index of its image; -1: a device copy (copy_*) */
    int nargs;
    rt_cuda_ref args[RT_CUDA_STEP_ARGS];
    rt_cuda_ref copy_src, copy_dst;
    size_t copy_bytes;
} rt_cuda_step;

typedef struct rt_cuda_io {
    rt_cuda_ref at;          /* in the workspace */
    size_t bytes;
} rt_cuda_io;

/* Everything borrowed: it need only live through rt_cuda_program_create. */
typedef struct rt_cuda_program_desc {
    const rt_cuda_image *images;
    int nimages;
    const rt_cuda_step *steps;
    int nsteps;
    size_t workspace_bytes;
    const void *weights;     /* host bytes, uploaded once */
    size_t weights_bytes;
    const rt_cuda_io *inputs;
    int ninputs;
    const rt_cuda_io *outputs;
    int noutputs;
} rt_cuda_program_desc;

typedef struct rt_cuda_program rt_cuda_program;

/* Load and place the program on d (borrowed; must outlive the program). Errors: those of
 * rt_cuda_kernel_load (LOAD, CONFIG) naming the step's node, WPK_ERR_NOMEM for device or
 * pinned memory, WPK_ERR_INVALID_ARG for a step whose argument or copy reaches outside its
 * space or names no image. With graph but a driver without CUDA Graphs the program runs its
 * steps one by one (rt_cuda_program_uses_graph says which). *out is the caller's. */
wpk_status rt_cuda_program_create(rt_cuda *d, const rt_cuda_program_desc *desc, bool graph,
                                  rt_cuda_program **out);
void rt_cuda_program_free(rt_cuda_program *p);
/* One inference: inputs[i] (desc->inputs[i].bytes each) in, outputs[j] out; waits for the
 * device at most timeout_ms (0: rt_cuda_sync's default; the watchdog's faults). The first run
 * of a graph program captures and instantiates it. Allocates nothing. */
wpk_status rt_cuda_program_run(rt_cuda_program *p, const void *const *inputs,
                               void *const *outputs, int timeout_ms);
/* Whether runs are CUDA Graph launches (after the first run), and how many launches of the
 * graph and of single kernels so far (for tests and profiles). */
bool rt_cuda_program_uses_graph(const rt_cuda_program *p);
void rt_cuda_program_counts(const rt_cuda_program *p, int64_t *graph_launches,
                            int64_t *kernel_launches);
/* Device bytes the program holds: workspace + weights + per-kernel nothing (modules are the
 * driver's). */
size_t rt_cuda_program_device_bytes(const rt_cuda_program *p);

#endif
