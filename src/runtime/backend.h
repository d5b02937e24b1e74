/* backend.h -- a device the executor runs a plan on, as a vtable with a self pointer (ggml's
 * backend_i): memory (alloc/free), copies in and out, modules loaded from a plan's bytes, the
 * steps run in order (with per-step timing), synchronize. The cpu instance is runtime/cpu; the
 * CUDA one (runtime/cuda) has the same shape. Device addresses are void * whatever the device
 * (a CUdeviceptr fits), and mean nothing to the host unless the backend says host_visible. */
#ifndef WPK_RUNTIME_BACKEND_H
#define WPK_RUNTIME_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/runner.h"

/* One step as the backend runs it: its runner, state and argument addresses (all fixed at
 * load), and the node it computes (for messages). */
typedef struct rt_exec_step {
    const rt_runner *runner;
    void *state;
    void **argv;
    const char *node;
    int threads;        /* the step's team size; 0: the backend's */
} rt_exec_step;

typedef struct rt_backend rt_backend;

typedef struct rt_backend_i {
    const char *name;
    bool host_visible;  /* device addresses can be read and written by the host (the cpu) */
    /* bytes (>= 1) at a 64-byte aligned device address; WPK_ERR_NOMEM. */
    wpk_status (*alloc)(rt_backend *self, wpk_context *ctx, size_t bytes, void **ptr);
    void (*free)(rt_backend *self, void *ptr);
    /* host -> device and device -> host copies; complete when synchronize returns. */
    wpk_status (*upload)(rt_backend *self, wpk_context *ctx, void *dst, const void *src,
                         size_t bytes);
    wpk_status (*download)(rt_backend *self, wpk_context *ctx, void *dst, const void *src,
                           size_t bytes);
    /* A module from a plan's bytes (borrowed for the call), into *module (what the backend's
     * runners take); `what` names the plan in messages. */
    wpk_status (*load_module)(rt_backend *self, wpk_context *ctx, const char *what,
                              const void *data, size_t len, void **module);
    void (*unload_module)(rt_backend *self, void *module);
    /* Run steps[0..n) in order. step_ms: NULL, or per step its wall time in milliseconds
     * (measured on the device where it has its own clock). Allocates nothing; the first
     * step's error stops the run. */
    wpk_status (*run_steps)(rt_backend *self, wpk_context *ctx, const rt_exec_step *steps,
                            int n, double *step_ms);
    wpk_status (*synchronize)(rt_backend *self, wpk_context *ctx);
    /* Optional (NULL: the executor uploads zeros): set bytes at dst to zero, complete when
     * synchronize returns. */
    wpk_status (*zero)(rt_backend *self, wpk_context *ctx, void *dst, size_t bytes);
    /* Optional: steps (as passed to run_steps) are going away; drop what the backend keeps
     * for them (a captured graph), so a later array at the same address is not mistaken for
     * them. */
    void (*forget_steps)(rt_backend *self, const rt_exec_step *steps);
} rt_backend_i;

struct rt_backend {
    const rt_backend_i *iface;
    void *context;      /* the device's own (an rt_cuda), NULL on the cpu */
    int threads;        /* cpu threads the steps run on (>= 1) */
};

/* The cpu backend for `threads` threads (0: the machine's default) into *b; it also registers
 * the cpu's own step runner, "generated". Allocates nothing. */
void rt_cpu_backend_init(rt_backend *b, int threads);

/* The CUDA ones are declared here, not only in runtime/cuda/cuda_rt.h, so that the plan API
 * (wpk_plan.c), which may include base and runtime alone, can run a plan for the GPU. */

/* The fingerprint of CUDA device `ordinal` (base/target_fingerprint.h: target_cuda_fingerprint)
 * into buf, cap bytes; WPK_ERR_UNSUPPORTED "CUDA unavailable: <reason>" without a usable one.
 * Keeps nothing open; thread-safe. */
wpk_status rt_cuda_target(wpk_context *ctx, int ordinal, char *buf, size_t cap);

/* Device `ordinal` opened and the cuda backend over it into *out (the steps captured once into
 * a CUDA Graph, the watchdog's default timeout). ctx (borrowed) must outlive it: later failures
 * are reported on it. Errors as rt_cuda_open's (WPK_ERR_UNSUPPORTED "CUDA unavailable: ...")
 * and WPK_ERR_NOMEM. rt_cuda_backend_close frees the backend and closes the device (NULL is
 * fine). */
wpk_status rt_cuda_backend_open(wpk_context *ctx, int ordinal, rt_backend **out);
void rt_cuda_backend_close(rt_backend *b);

#endif
