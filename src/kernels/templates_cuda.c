/* templates_cuda.c -- the registry of the CUDA target's schedule templates (templates_cuda.h):
 * a table in order of preference, separate from the CPU's (templates.c). */
#include "kernels/templates_cuda.h"

#include <string.h>

static const kernel_provider *const registry[] = {
    &tune_conv2d_cuda,
    &tune_dense_cuda,
    &tune_pool2d_cuda,
    &tune_global_pool_cuda,
    &tune_softmax_cuda,
    &tune_elementwise_cuda,
    &tune_concat_cuda,
    &tune_transpose_cuda,
    &tune_reduce_mean_cuda,
    &tune_slice_cuda,
    &tune_pad_cuda,
    &tune_gather_cuda,
    &tune_layernorm_cuda,
    NULL,
};

const kernel_provider *const *kernel_providers_cuda(void) { return registry; }

const kernel_provider *kernel_provider_cuda_for(const ir_node *n, ir_tensor *const *in,
                                            ir_tensor *const *out) {
    for (int i = 0; registry[i]; i++)
        if (registry[i]->supports(registry[i], n, in, out)) return registry[i];
    return NULL;
}

const kernel_provider *kernel_provider_cuda_find(const char *name) {
    for (int i = 0; name && registry[i]; i++)
        if (!strcmp(registry[i]->name, name)) return registry[i];
    return NULL;
}
