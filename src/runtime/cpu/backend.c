/* backend.c -- the cpu backend (backend.h): host memory, memcpy copies, modules through
 * dlopen (module.c), steps run one after another on the process's OpenMP pool. */
#include <omp.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/target.h"
#include "runtime/backend.h"
#include "runtime/cpu/cpu_rt.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The raw block's address sits just below the aligned one. */
static wpk_status cpu_alloc(rt_backend *self, wpk_context *ctx, size_t bytes, void **ptr) {
    (void)self;
    char *raw = bytes <= SIZE_MAX - 128 ? wpk_malloc(bytes + 128) : NULL;
    if (!raw) {
        *ptr = NULL;
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
    }
    char *p = raw + 64 + (64 - (uintptr_t)(raw + 64) % 64) % 64;
    memcpy(p - sizeof raw, &raw, sizeof raw);
    *ptr = p;
    return WPK_OK;
}

static void cpu_free(rt_backend *self, void *ptr) {
    (void)self;
    char *raw;
    memcpy(&raw, (char *)ptr - sizeof raw, sizeof raw);
    wpk_free(raw);
}

static wpk_status cpu_copy(rt_backend *self, wpk_context *ctx, void *dst, const void *src,
                           size_t bytes) {
    (void)self;
    (void)ctx;
    memcpy(dst, src, bytes);
    return WPK_OK;
}

static wpk_status cpu_load_module(rt_backend *self, wpk_context *ctx, const char *what,
                                  const void *data, size_t len, void **module) {
    (void)self;
    rt_cpu_module *m = NULL;
    wpk_status st = rt_cpu_module_load(ctx, what, data, len, &m);
    *module = m;
    return st;
}

static void cpu_unload_module(rt_backend *self, void *module) {
    (void)self;
    rt_cpu_module_free(module);
}

static wpk_status cpu_run_steps(rt_backend *self, wpk_context *ctx, const rt_exec_step *steps,
                                int n, double *step_ms) {
    omp_set_num_threads(self->threads);
    int team = self->threads;
    wpk_status st = WPK_OK;
    for (int k = 0; k < n; k++) {
        /* a step with its own team size gets it, never more than the backend's threads */
        int want = steps[k].threads > 0 && steps[k].threads < self->threads ? steps[k].threads
                                                                           : self->threads;
        if (want != team) omp_set_num_threads(team = want);
        double t0 = step_ms ? now_ms() : 0;
        st = steps[k].runner->run(steps[k].state, ctx, steps[k].argv);
        if (step_ms) step_ms[k] = now_ms() - t0;
        if (st) break;
    }
    if (team != self->threads) omp_set_num_threads(self->threads);
    return st;
}

static wpk_status cpu_synchronize(rt_backend *self, wpk_context *ctx) {
    (void)self;
    (void)ctx;
    return WPK_OK;
}

static const rt_backend_i cpu_iface = {
    .name = "cpu",
    .host_visible = true,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .load_module = cpu_load_module,
    .unload_module = cpu_unload_module,
    .run_steps = cpu_run_steps,
    .synchronize = cpu_synchronize,
};

void rt_cpu_backend_init(rt_backend *b, int threads) {
    /* the registry refuses only when full, and it has room for every built-in runner */
    (void)rt_runner_register(&rt_cpu_generated_runner);
    b->iface = &cpu_iface;
    b->context = NULL;
    b->threads = threads > 0 ? threads : target_default_threads();
}
