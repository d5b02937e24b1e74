/* provider.h -- the kernel provider, one interface for every way to implement a node (the DSL
 * schedule templates and the vendor libraries), the task (workload) a node poses to one, and the
 * registry that lists them for a node, so which implementation runs is one measured choice. */
#ifndef WPK_KERNELS_PROVIDER_H
#define WPK_KERNELS_PROVIDER_H

#include "ir/graph.h"
#include "te/schedule.h"
#include "kernels/space.h"

#define TUNE_MAX_ARGS 8

/* A workload: what one node asks for, independent of how it runs. Two nodes with the same key
 * share tuning records and compiled kernels. */
typedef struct tune_task {
    const struct kernel_provider *tmpl;
    char key[512];               /* "conv2d_nchwc:n1,c64,h56,w56,k64,r3,s3,st1,1,pd1,1,1,1,dl1,1,g1,ep=relu+res" */
    int64_t flops;               /* for GFLOP/s and the task scheduler's weights */
    const ir_node *node;         /* borrowed: the node it came from (attributes) */
    ir_tensor in[TUNE_MAX_ARGS]; /* shapes/dtypes of the node's inputs (data of constants kept) */
    int nin;
    ir_tensor out[TUNE_MAX_ARGS];
    int nout;
    /* The node's first code-generating provider (kernel_provider_for), or NULL: a library's
     * workload key extends its key, so the records of one workload's implementations sit side
     * by side. Set by tune_task_init before describe, so describe needs no registry. */
    const struct kernel_provider *primary;
} tune_task;

/* A kernel built from a template: its lowered function plus how its arguments map to the node's
 * tensors. args of a kernel: the node's inputs (in order, some replaced by pre-packed versions),
 * then its outputs. */
typedef struct tune_build {
    te_schedule *schedule;
    te_tensor *args[TUNE_MAX_ARGS * 2];
    int nargs, ninputs;
    /* Pre-packing: prepack[i] (or NULL) is a compute reading only constant placeholders that
     * turns node input i into the layout args[i] expects; it runs once, not per inference. */
    te_tensor *prepack[TUNE_MAX_ARGS];
    te_tensor *prepack_src[TUNE_MAX_ARGS];
} tune_build;

/* A kernel a library made for one node at load time (its packed weights, its primitive). */
typedef struct lib_kernel lib_kernel;

/* Where a library's kernel runs: the host's threads, or a CUDA device. */
typedef struct kernel_device {
    int threads;            /* cpu threads (0: OpenMP's default) */
    struct rt_cuda *cuda;   /* borrowed: the device (runtime/cuda); NULL on the cpu */
} kernel_device;

#define LIB_CONFIG_MAX 64
#define LIB_MAX_CONFIGS 16

/* A kernel provider: one way to implement nodes, measured against the others. Every function
 * takes the provider itself first. Two families implement it: the DSL templates generate code
 * (build: the algorithm and the config's schedule; the compiler lowers and emits it into a
 * module the runtime loads), the vendor libraries make their kernels at load time (create, run,
 * destroy, constants: src/kernels/vendor). kernel_provider_generates tells which a provider is;
 * what a provider lacks is NULL. */
typedef struct kernel_provider kernel_provider;
struct kernel_provider {
    const char *name;
    /* What `--provider` selects it by: "generated" for every DSL template, else its name. */
    const char *family;
    /* The implementation's own description, read by its entry points through self (NULL when
     * they need none): one set of entry points can serve several providers. */
    const void *impl;
    /* Whether it implements node n with these tensors (in/out: one per node input / output, NULL
     * where omitted; static shapes, constants' data set). */
    bool (*supports)(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out);
    /* Fill task->key and flops (task->node/in/out are set by tune_task_init). */
    void (*describe)(const kernel_provider *self, tune_task *task);
    /* The knobs and legal values for this workload. */
    void (*space)(const kernel_provider *self, const tune_task *task, tune_space *out);
    /* A config that is good without tuning. */
    void (*default_config)(const kernel_provider *self, const tune_task *task, const tune_space *s,
                           tune_config *out);
    /* Whether build (or create) takes cfg, decided cheaply without building: what a search
     * prunes with before measuring. kernel_legal_in_space where only the knobs' ranges limit
     * it. */
    bool (*legal)(const kernel_provider *self, const tune_task *task, const tune_space *s,
                  const tune_config *cfg);

    /* ---- code-generating providers (the DSL templates) ---- */
    /* Build the algorithm and apply the config's schedule. WPK_ERR_INVALID_ARG for a config the
     * schedule primitives reject (message naming the primitive). */
    wpk_status (*build)(const kernel_provider *self, te_ctx *c, const tune_task *task,
                        const tune_space *s, const tune_config *cfg, tune_build *out);
    /* Its kernels keep buffers that grow with the batch (Winograd's transformed input and
     * output): at batch 8 they leave the cache they fitted at batch 1. A plan whose node takes
     * this template's config from batch-1 records runs the kernel image by image, as it was
     * measured (cpu_kernel_build_per_image). */
    bool batch_buffers;
    /* Knobs added to the space after records were stored, as "knob=value,...": a config that
     * does not name one was measured with this value, not with today's default (NULL: none). */
    const char *unnamed;

    /* ---- kernels made at load time (the vendor libraries); a config is knob "algo", the
     * index of one of the library's algorithms for the node ---- */
    /* Names of its algorithms for n ("direct", "gemm", "winograd", ...), at most
     * LIB_MAX_CONFIGS, into names; returns how many (>= 1 when supports is true). */
    int (*configs)(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                   ir_tensor *const *out, char (*names)[LIB_CONFIG_MAX]);
    /* A kernel for n at algorithm `config`, to run on dev (borrowed for the call; a provider
     * for one kind of device refuses the other with WPK_ERR_UNSUPPORTED). Constant inputs (those whose tensors have data here) are packed now into the layout the
     * library wants and their data is not read again. WPK_ERR_UNSUPPORTED when the library
     * refuses this config for this node (the message says why), WPK_ERR_NOMEM. *out_k is the
     * caller's (destroy). */
    wpk_status (*create)(const kernel_provider *self, wpk_context *ctx, const ir_node *n,
                         ir_tensor *const *in, ir_tensor *const *out, int config,
                         const kernel_device *dev, lib_kernel **out_k);
    /* Run on this call's buffers: in/out as at create, data set (for the non-constant inputs and
     * the outputs). Allocates nothing. */
    wpk_status (*run)(const kernel_provider *self, wpk_context *ctx, lib_kernel *k,
                      ir_tensor *const *in, ir_tensor *const *out);
    void (*destroy)(const kernel_provider *self, lib_kernel *k);
    /* The buffers holding k's copies of its constant inputs, as (start, bytes) pairs, at most
     * max; returns how many. The tuner flushes them from the caches to time k as a model runs
     * it when they are larger than the cache. */
    int (*constants)(const kernel_provider *self, const lib_kernel *k, const void **start,
                     size_t *bytes, int max);
    /* "oneDNN v3.0.0 (cpu runtime: OpenMP)", for provenance; static. */
    const char *(*version)(const kernel_provider *self);
};

/* The legality of a provider whose only limits are its knobs' ranges: every choice of cfg is
 * one of its knob's values in s. */
bool kernel_legal_in_space(const kernel_provider *self, const tune_task *task, const tune_space *s,
                           const tune_config *cfg);

/* Whether p generates code (a DSL template) rather than making kernels at load time. */
static inline bool kernel_provider_generates(const kernel_provider *p) { return p->build != NULL; }

/* The template for node n (first in the registry that supports it), or NULL: that node runs on
 * its reference kernel. in/out: the node's tensors with static shapes. */
const kernel_provider *kernel_provider_for(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out);
/* Every template that implements node n, at most max into out, in order of preference: the
 * DSL templates of the registry (the first is kernel_provider_for's), then alternatives such as
 * Winograd convolution, then the vendor libraries' templates (src/kernels/vendor). Each poses its own
 * task (its own workload key: a library's key is "<library>|" + the key the first DSL template
 * gives, or "<library>|<op>:<shapes>" where none takes the node), measured and recorded like
 * any other, so which implementation a node runs is one measured choice among them. Returns
 * how many. */
int kernel_providers_for(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out,
                       const kernel_provider **list, int max);
/* The template called name ("conv2d_nchwc", "onednn"), or NULL. */
const kernel_provider *kernel_provider_find(const char *name);
/* Fill a task for node n and template t. */
void tune_task_init(tune_task *task, const kernel_provider *t, const ir_node *n, ir_tensor *const *in,
                    ir_tensor *const *out);
/* All registered templates, NULL-terminated (the registry is a table in templates.c). */
const kernel_provider *const *kernel_providers(void);

#endif
