/* templates.c -- the registry of schedule templates (template.h): a table in order of
 * preference, the first that supports a node gets it, and the task a node poses. */
#include <string.h>

#include "kernels/provider.h"
#include "kernels/common.h"
#include "kernels/conv.h"
#include "kernels/vendor/lib.h"

/* Specialized templates before the general ones that also take their nodes: the blocked conv
 * is preferred wherever it applies, the NCHW direct conv takes the rest. */
static const kernel_provider *const registry[] = {
    &tune_conv2d_nchwc,
    &tune_conv2d_nchw,
    /* an alternative for the nodes the two above take, never the first (kernel_providers_for) */
    &tune_conv2d_winograd,
    &tune_dense,
    &tune_pool2d,
    &tune_global_pool,
    &tune_softmax,
    &tune_layernorm,
    &tune_elementwise,
    NULL,
};

const kernel_provider *const *kernel_providers(void) { return registry; }

int kernel_providers_for(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out,
                       const kernel_provider **list, int max) {
    int k = 0;
    for (int i = 0; registry[i] && k < max; i++)
        if (registry[i]->supports(registry[i], n, in, out)) list[k++] = registry[i];
    const kernel_provider *const *libs = lib_providers();
    for (int i = 0; libs[i] && k < max; i++)
        if (libs[i]->supports(libs[i], n, in, out)) list[k++] = libs[i];
    return k;
}

const kernel_provider *kernel_provider_find(const char *name) {
    for (int i = 0; registry[i]; i++)
        if (!strcmp(registry[i]->name, name)) return registry[i];
    const kernel_provider *const *libs = lib_providers();
    for (int i = 0; libs[i]; i++)
        if (!strcmp(libs[i]->name, name)) return libs[i];
    return NULL;
}

const kernel_provider *kernel_provider_for(const ir_node *n, ir_tensor *const *in,
                                       ir_tensor *const *out) {
    for (int i = 0; registry[i]; i++)
        if (registry[i]->supports(registry[i], n, in, out)) return registry[i];
    return NULL;
}

void tune_task_init(tune_task *task, const kernel_provider *t, const ir_node *n,
                    ir_tensor *const *in, ir_tensor *const *out) {
    memset(task, 0, sizeof *task);
    task->tmpl = t;
    task->node = n;
    /* an omitted optional input stays a zeroed tensor (dtype UNDEFINED) in its slot */
    task->nin = n->nin < TUNE_MAX_ARGS ? n->nin : TUNE_MAX_ARGS;
    for (int i = 0; i < task->nin; i++)
        if (in[i]) task->in[i] = *in[i];
    task->nout = n->nout < TUNE_MAX_ARGS ? n->nout : TUNE_MAX_ARGS;
    for (int i = 0; i < task->nout; i++)
        if (out[i]) task->out[i] = *out[i];
    task->primary = kernel_provider_for(n, in, out);
    t->describe(t, task);
}
