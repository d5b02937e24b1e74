/* backend.c -- the CUDA backend behind the runtime's backend vtable (backend.h, cuda_rt.h):
 * device memory and copies through the driver (driver.c); device addresses travel as void *. */
#include <stdint.h>

#include "runtime/cuda/cuda_rt.h"

static uint64_t dev(const void *p) { return (uint64_t)(uintptr_t)p; }

static wpk_status cu_alloc(rt_backend *self, wpk_context *ctx, size_t bytes, void **ptr) {
    (void)ctx;
    uint64_t p = 0;
    wpk_status st = rt_cuda_alloc(self->context, bytes, &p);
    *ptr = (void *)(uintptr_t)p;
    return st;
}

static void cu_free(rt_backend *self, void *ptr) { rt_cuda_free(self->context, dev(ptr)); }

static wpk_status cu_upload(rt_backend *self, wpk_context *ctx, void *dst, const void *src,
                            size_t bytes) {
    (void)ctx;
    return rt_cuda_upload_async(self->context, dev(dst), src, bytes);
}

static wpk_status cu_download(rt_backend *self, wpk_context *ctx, void *dst, const void *src,
                              size_t bytes) {
    (void)ctx;
    return rt_cuda_download_async(self->context, dst, dev(src), bytes);
}

static wpk_status cu_load_module(rt_backend *self, wpk_context *ctx, const char *what,
                                 const void *data, size_t len, void **module) {
    (void)self;
    (void)data;
    (void)len;
    *module = NULL;
    return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "%s: the CUDA backend does not load a plan's "
                     "modules yet", what);
}

static void cu_unload_module(rt_backend *self, void *module) {
    (void)self;
    (void)module;
}

static wpk_status cu_run_steps(rt_backend *self, wpk_context *ctx, const rt_exec_step *steps,
                               int n, double *step_ms) {
    (void)self;
    (void)steps;
    (void)n;
    (void)step_ms;
    return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "the CUDA backend does not run a plan's steps yet");
}

static wpk_status cu_synchronize(rt_backend *self, wpk_context *ctx) {
    (void)ctx;
    return rt_cuda_sync(self->context, 0);
}

static const rt_backend_i cuda_iface = {
    .name = "cuda",
    .host_visible = false,
    .alloc = cu_alloc,
    .free = cu_free,
    .upload = cu_upload,
    .download = cu_download,
    .load_module = cu_load_module,
    .unload_module = cu_unload_module,
    .run_steps = cu_run_steps,
    .synchronize = cu_synchronize,
};

void rt_cuda_backend_init(rt_backend *b, rt_cuda *d) {
    b->iface = &cuda_iface;
    b->context = d;
    b->threads = 1;
}
