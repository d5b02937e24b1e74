/* lib.c -- the vendor-library providers: the host ones found at build time, the CUDA ones (always
 * built, dlopen'd), and the workload key, space and default every one of them shares (lib.h). */
#include "kernels/vendor/lib.h"

#include <stdio.h>
#include <string.h>

#include "base/context.h"
#include "ir/flops.h"
#include "kernels/common.h"
#include "kernels/vendor/cuda_libs.h"

#ifdef WPK_HAVE_ONEDNN
extern const kernel_provider lib_onednn;
#endif
#ifdef WPK_HAVE_OPENBLAS
extern const kernel_provider lib_openblas;
#endif
extern const kernel_provider lib_packed_gemm;
extern const kernel_provider lib_int8; /* wpk's own int8 convolutions (qconv.c) */
extern const kernel_provider lib_qelem; /* int8 Q, DQ and QLinearAdd (qelementwise.c) */
extern const kernel_provider lib_qpool; /* wpk::MaxPool on int8 bytes (qmaxpool.c) */
extern const kernel_provider lib_qgap; /* int8 global average pool (qglobal_pool.c) */

static const kernel_provider *const providers[] = {
#ifdef WPK_HAVE_ONEDNN
    &lib_onednn,
#endif
#ifdef WPK_HAVE_OPENBLAS
    &lib_openblas,
#endif
    &lib_packed_gemm,
    &lib_int8,
    &lib_qelem,
    &lib_qpool,
    &lib_qgap,
    NULL,
};

const kernel_provider *const *lib_providers(void) { return providers; }

const kernel_provider *lib_provider_find(const char *name) {
    for (int i = 0; providers[i]; i++)
        if (!strcmp(providers[i]->name, name)) return providers[i];
    return NULL;
}

static const kernel_provider *const cuda_providers[] = {&lib_cudnn, &lib_cublas, &lib_cublaslt,
                                                       NULL};

const kernel_provider *const *lib_cuda_providers(void) { return cuda_providers; }

const kernel_provider *lib_cuda_provider_find(const char *name) {
    for (int i = 0; cuda_providers[i]; i++)
        if (!strcmp(cuda_providers[i]->name, name)) return cuda_providers[i];
    return NULL;
}

wpk_status lib_host_only(wpk_context *ctx, const kernel_provider *self, const ir_node *n) {
    return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s': %s runs on the host, not on a CUDA "
                     "device", n->name, self->name);
}

/* Past this many inputs or outputs a node's FLOPs are not counted. */
#define LIB_NODE_MAX_ARGS 64

static void task_tensors(const tune_task *task, ir_tensor **in, ir_tensor **out) {
    tune_task *m = (tune_task *)task;
    for (int i = 0; i < task->nin; i++)
        in[i] = m->in[i].dtype != WPK_DTYPE_UNDEFINED ? &m->in[i] : NULL;
    for (int i = 0; i < task->nout; i++)
        out[i] = m->out[i].dtype != WPK_DTYPE_UNDEFINED ? &m->out[i] : NULL;
}

void lib_describe(const kernel_provider *self, tune_task *task) {
    /* the task holds its first TUNE_MAX_ARGS tensors; FLOP counts see the node's arity (a
       QLinearConv has 9 inputs), the ones past the task's as absent */
    ir_tensor *in[LIB_NODE_MAX_ARGS] = {0}, *out[LIB_NODE_MAX_ARGS] = {0};
    task_tensors(task, in, out);
    const kernel_provider *dsl = task->primary;
    if (dsl) {
        tune_task inner = *task;
        inner.tmpl = dsl;
        memset(inner.key, 0, sizeof inner.key);
        inner.flops = 0;
        dsl->describe(dsl, &inner);
        /* "<library>|<key>", cut at the key's size like any key */
        size_t n = (size_t)snprintf(task->key, sizeof task->key, "%s|", self->name);
        size_t len = strlen(inner.key);
        if (n + len >= sizeof task->key) len = sizeof task->key - n - 1;
        memcpy(task->key + n, inner.key, len);
        task->key[n + len] = 0;
        task->flops = inner.flops;
        return;
    }
    snprintf(task->key, sizeof task->key, "%s|%s:", self->name, task->node->op_type);
    for (int i = 0; i < task->nin; i++) {
        if (!in[i]) continue;
        tune_key_add(task, "%si%d=", i ? "," : "", i);
        for (int d = 0; d < in[i]->ndim; d++)
            tune_key_add(task, "%s%lld", d ? "x" : "", (long long)in[i]->dims[d]);
    }
    bool fits = task->node->nin <= LIB_NODE_MAX_ARGS && task->node->nout <= LIB_NODE_MAX_ARGS;
    task->flops = fits ? ir_node_flops(task->node, in, out) : 0;
}

void lib_space(const kernel_provider *self, const tune_task *task, tune_space *s) {
    memset(s, 0, sizeof *s);
    ir_tensor *in[TUNE_MAX_ARGS] = {0}, *out[TUNE_MAX_ARGS] = {0};
    task_tensors(task, in, out);
    char names[LIB_MAX_CONFIGS][LIB_CONFIG_MAX];
    int n = self->configs(self, task->node, in, out, names);
    if (n < 1) n = 1;
    int64_t v[LIB_MAX_CONFIGS];
    for (int i = 0; i < n && i < LIB_MAX_CONFIGS; i++) v[i] = i;
    tune_space_add(s, "algo", n < LIB_MAX_CONFIGS ? n : LIB_MAX_CONFIGS, v);
}

void lib_default_config(const kernel_provider *self, const tune_task *task, const tune_space *s,
                        tune_config *out) {
    (void)self;
    (void)task;
    (void)s;
    memset(out, 0, sizeof *out);
}
