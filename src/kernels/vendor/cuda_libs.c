/* cuda_libs.c -- what the cuDNN, cuBLAS and cuBLASLt providers (cuda_libs.h) share: refusing the
 * host, the device copies of a node's constant inputs, checking a run's tensors, and carrying a
 * device failure's message over to the caller's context with the node named. */
#include "kernels/vendor/cuda_libs.h"

#include <stdio.h>
#include <string.h>

#include "base/context.h"
#include "runtime/cuda/cuda_api.h"

wpk_status lib_cuda_device_only(wpk_context *ctx, const kernel_provider *self, const ir_node *n) {
    return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s': %s runs on a CUDA device, not on the "
                     "host", n->name, self->name);
}

void lib_cuda_consts_free(lib_cuda_consts *c) {
    for (int i = 0; i < LIB_CUDA_MAX_IN; i++) {
        if (c->ptr[i]) rt_cuda_free(c->d, c->ptr[i]);
        c->ptr[i] = 0;
    }
}

wpk_status lib_cuda_consts_upload(wpk_context *ctx, rt_cuda *d, const char *lib,
                                  const ir_node *n, ir_tensor *const *in, lib_cuda_consts *c) {
    memset(c, 0, sizeof *c);
    c->d = d;
    c->nin = n->nin < LIB_CUDA_MAX_IN ? n->nin : LIB_CUDA_MAX_IN;
    for (int i = 0; i < c->nin; i++) {
        if (!in[i] || !in[i]->data) continue;
        size_t bytes = ir_nbytes(in[i]);
        /* a synchronous copy: the caller's host data need not outlive create */
        wpk_status st = rt_cuda_alloc(d, bytes ? bytes : 4, &c->ptr[i]);
        if (!st && bytes) st = rt_cuda_upload(d, c->ptr[i], in[i]->data, bytes);
        if (st) {
            lib_cuda_consts_free(c);
            char what[96];
            snprintf(what, sizeof what, "%s, copying input %d to the device", lib, i);
            return lib_cuda_relay(ctx, d, n->name, what, st);
        }
    }
    return WPK_OK;
}

uint64_t lib_cuda_in(const lib_cuda_consts *c, ir_tensor *const *in, int i) {
    if (i >= c->nin) return 0;
    if (c->ptr[i]) return c->ptr[i];
    return in[i] ? (uint64_t)(uintptr_t)in[i]->data : 0;
}

wpk_status lib_cuda_check_run(wpk_context *ctx, const char *name, const char *lib,
                              const lib_cuda_consts *c, ir_tensor *const *in,
                              ir_tensor *const *out) {
    if (!out || !out[0] || !out[0]->data)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "node '%s' (%s): output 0 has no device "
                         "address", name, lib);
    for (int i = 0; i < c->nin; i++)
        if (!c->ptr[i] && in[i] && !in[i]->data)
            return wpk_error(ctx, WPK_ERR_INVALID_ARG, "node '%s' (%s): input %d has no device "
                             "address", name, lib, i);
    return WPK_OK;
}

wpk_status lib_cuda_relay(wpk_context *ctx, rt_cuda *d, const char *name, const char *lib,
                          wpk_status st) {
    if (st == WPK_OK) return st;
    /* copied first: ctx may be the device's own context, whose message is being rewritten */
    char why[1024];
    snprintf(why, sizeof why, "%s", wpk_context_error(rt_cuda_ctx(d)));
    return wpk_error(ctx, st, "node '%s' (%s): %s", name, lib, why);
}
