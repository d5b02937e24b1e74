/* template.h -- schedule templates: for one kind of op, the algorithm (a tensor expression) plus
 * a schedule parameterized by knobs, and the task (workload) a graph node poses to it. Each
 * template is a provider in DESIGN.md's sense: supports / space / build. */
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

typedef struct kernel_provider {
    const char *name;
    /* Whether this template implements node n with these input/output shapes (static shapes,
     * float32). */
    bool (*supports)(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out);
    /* Fill task->key and flops (task->node/in/out are set by tune_task_init). */
    void (*describe)(tune_task *task);
    /* The knobs and legal values for this workload. */
    void (*space)(const tune_task *task, tune_space *out);
    /* A config that is good without tuning. */
    void (*default_config)(const tune_task *task, const tune_space *s, tune_config *out);
    /* Build the algorithm and apply the config's schedule. WPK_ERR_INVALID_ARG for a config the
     * schedule primitives reject (message naming the primitive). */
    wpk_status (*build)(te_ctx *c, const tune_task *task, const tune_space *s,
                        const tune_config *cfg, tune_build *out);
    /* A vendor library's template (src/kernels/vendor): build is NULL; the kernel of a config is made by
     * lib->create with the config's "algo" knob value as the index of the library's config.
     * NULL for the DSL templates. */
    const struct lib_provider *lib;
    /* Its kernels keep buffers that grow with the batch (Winograd's transformed input and
     * output): at batch 8 they leave the cache they fitted at batch 1. A plan whose node takes
     * this template's config from batch-1 records runs the kernel image by image, as it was
     * measured (cpu_kernel_build_per_image). */
    bool batch_buffers;
    /* Knobs added to the space after records were stored, as "knob=value,...": a config that
     * does not name one was measured with this value, not with today's default (NULL: none). */
    const char *unnamed;
} kernel_provider;

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
