/* kernel.h -- one task's kernel, from template to C source: build the template at a config,
 * lower the schedule and the pre-pack computes to loops, turn the kernel's own heap buffers
 * into scratch arguments, emit C. Also the text `wpk lower` prints. Internal to src/compile. */
#ifndef WPK_KERNELS_CPU_KERNEL_H
#define WPK_KERNELS_CPU_KERNEL_H

#include "codegen/c/cg_c.h"
#include "kernels/provider.h"

#define CPU_MAX_SCRATCH 8
#define CPU_MAX_KERNEL_ARGS (TUNE_MAX_ARGS * 2 + CPU_MAX_SCRATCH)

typedef struct cpu_kernel {
    const kernel_provider *tmpl;
    char name[32];              /* the kernel's C symbol: "k<index>" */
    char config[256];           /* the config's text form */
    int ninputs, noutputs;      /* arguments taken from the node's tensors */
    int nscratch;               /* then this many scratch arguments */
    int64_t scratch_off[CPU_MAX_SCRATCH]; /* byte offsets in the scratch area (64-aligned) */
    int64_t scratch_bytes;      /* the area this kernel needs */
    /* pre-packing of input argument i (pack_numel[i] > 0): kernel pack_name[i] turns the node's
       input into a buffer of pack_numel[i] floats that argument i then points at */
    char pack_name[TUNE_MAX_ARGS][40];
    int64_t pack_numel[TUNE_MAX_ARGS];
    strbuf source;              /* C of the kernel and its pack kernels (cg_c_emit, one each) */
    int nfuncs;                 /* functions in source */
    cg_kernel_fn fn;            /* once compiled and loaded */
    cg_kernel_fn pack_fn[TUNE_MAX_ARGS];
} cpu_kernel;

typedef struct cpu_build_options {
    cg_c_options cg;   /* C emission (vector width, OpenMP pragmas) */
    bool dump;         /* log the loops of every function at INFO */
} cpu_build_options;

/* Build task's kernel named "k<index>" at config text `config` (NULL: the template's default;
 * a partial "knob=value,..." overrides only the knobs it names), emitted with opt (NULL: the
 * running CPU's defaults, no dump). WPK_ERR_INVALID_ARG for a config that does not fit (naming
 * the knob) or a schedule that does not lower, WPK_ERR_NOMEM; the message is left on ctx. */
wpk_status cpu_kernel_build(wpk_context *ctx, const tune_task *task, int index, const char *config,
                            const cpu_build_options *opt, cpu_kernel *k);
/* t at one image: its leading dim set to 1 when t is computed at run time (no data) and that
 * dim is `images`; otherwise t as it is. What batch-1 records and per-image kernels see. */
ir_tensor cpu_tensor_at_one_image(const ir_tensor *t, int64_t images);
/* The same for a kernel that runs image by image: built for the task at batch 1 (the leading
 * dim of every tensor computed at run time whose leading dim is `images` set to 1), and
 * called once per image by the function k->name, each such argument advanced by one image.
 * For kernels chosen from batch-1 records whose buffers grow with the batch (see
 * kernel_provider.batch_buffers): they run as they were measured. */
wpk_status cpu_kernel_build_per_image(wpk_context *ctx, const tune_task *task, int index,
                                      const char *config, int64_t images,
                                      const cpu_build_options *opt, cpu_kernel *k);
void cpu_kernel_free(cpu_kernel *k);

/* The text of `wpk lower`: the task, the config, the tensor expressions (te_print_graph), the
 * schedule (te_print_schedule) and the loops of the kernel and its pack kernels
 * (loop_print_func), appended to b. Same errors as cpu_kernel_build. */
wpk_status cpu_kernel_print(wpk_context *ctx, const tune_task *task, const char *config,
                            strbuf *b);

/* Build task's kernel at config text `config` (as cpu_kernel_build reads it) and lower it
 * without emitting C: *out is the kernel's loop function as the code generator would get it
 * (before scratch hoisting, which changes no loop), allocated in c's arena and valid until
 * te_ctx_free(c). Its pack kernels (run once, at compile time) are lowered too and left out.
 * For the tuner's cost-model features and pruning (src/tune/features.c): no compiler runs.
 * Same errors as cpu_kernel_build, left on c->err. */
wpk_status cpu_kernel_lower(te_ctx *c, const tune_task *task, const char *config,
                            loop_func **out);

/* The config text for `config` (NULL: default; partial text: the default with the named knobs
 * replaced, and a knob the template added since (kernel_provider.unnamed) at the value configs
 * were measured with before it) in s, as tune_config. WPK_ERR_INVALID_ARG naming the knob or
 * value. */
wpk_status cpu_config_resolve(wpk_context *ctx, const tune_task *task, const tune_space *s,
                              const char *config, tune_config *out);

/* Heap buffers the kernel would allocate for its whole body (the allocations that enclose it,
 * outermost first) become arguments appended after its outputs: the caller passes scratch
 * memory instead, so a run allocates nothing. At most `max` are taken; returns how many,
 * their buffers in f->args[f->nargs - n ...]. Only the arena of c is allocated from (-1 when
 * that fails). */
int cpu_hoist_scratch(te_ctx *c, loop_func *f, int max);

#endif
