/* backend.c -- the CUDA backend behind the runtime's backend vtable (backend.h, cuda_rt.h):
 * device memory and copies through the driver (driver.c), a plan's modules loaded from their
 * images, its steps run on the device's stream -- captured once per executor into a CUDA Graph
 * and relaunched, or launched one by one (no graphs, a failed capture, a profiled run between
 * CUDA events). Copies in and out go through pinned staging when they fit, so they are truly
 * asynchronous. Device addresses travel as void *. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/target_fingerprint.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_runners.h"

#define STAGE_MAX ((size_t)64 << 20) /* larger copies (a big model's weights) go direct */
#define MAX_PENDING 64

/* A download into staging, copied out to the caller's memory once the device is done. */
typedef struct pending {
    void *dst;
    size_t at, bytes;
} pending;

typedef struct cuda_backend {
    rt_backend base;                /* base.context is this struct */
    rt_cuda *d;
    rt_cuda_backend_options opt;
    bool want_graph;                /* still worth trying: graphs exist and no capture failed */
    const rt_exec_step *captured;   /* the steps the graph holds (NULL: none) */
    int ncaptured;
    cu_graph graph;
    cu_graph_exec exec;
    int64_t graph_launches, kernel_launches;
    cu_event *events;               /* a profiled run's, one more than its steps */
    int nevents;
    /* pinned staging: filled from 0 between synchronizes; grown at a synchronize to what the
       last round wanted, so the copies of an inference allocate nothing after its first */
    unsigned char *pin;
    size_t pin_cap, pin_used, pin_want;
    bool ran;                       /* steps ran: the copies from now on are a run's, not the
                                       load's (the weights are copied once, direct) */
    bool no_pin;                    /* the driver has no pinned memory, or refused it */
    pending pend[MAX_PENDING];
    int npend;
} cuda_backend;

static cuda_backend *self_of(const rt_backend *b) { return b->context; }
static uint64_t dev(const void *p) { return (uint64_t)(uintptr_t)p; }

static wpk_status cu_alloc(rt_backend *self, wpk_context *ctx, size_t bytes, void **ptr) {
    (void)ctx;
    uint64_t p = 0;
    wpk_status st = rt_cuda_alloc(self_of(self)->d, bytes, &p);
    *ptr = (void *)(uintptr_t)p;
    return st;
}

static void cu_free(rt_backend *self, void *ptr) { rt_cuda_free(self_of(self)->d, dev(ptr)); }

/* Room for bytes in the staging (its offset), or -1: then the copy goes direct and the
 * staging grows at the next synchronize. */
static int64_t stage(cuda_backend *b, size_t bytes) {
    size_t need = b->pin_used + (bytes + 63) / 64 * 64;
    if (!b->ran || b->no_pin || bytes > STAGE_MAX) return -1;
    if (!b->pin || need > b->pin_cap) {
        if (need > b->pin_want) b->pin_want = need;
        return -1;
    }
    int64_t at = (int64_t)b->pin_used;
    b->pin_used = need;
    return at;
}

static wpk_status cu_upload(rt_backend *self, wpk_context *ctx, void *dst, const void *src,
                            size_t bytes) {
    (void)ctx;
    cuda_backend *b = self_of(self);
    int64_t at = stage(b, bytes);
    if (at < 0) return rt_cuda_upload_async(b->d, dev(dst), src, bytes);
    memcpy(b->pin + at, src, bytes);
    return rt_cuda_upload_async(b->d, dev(dst), b->pin + at, bytes);
}

static wpk_status cu_download(rt_backend *self, wpk_context *ctx, void *dst, const void *src,
                              size_t bytes) {
    (void)ctx;
    cuda_backend *b = self_of(self);
    int64_t at = b->npend < MAX_PENDING ? stage(b, bytes) : -1;
    if (at < 0) return rt_cuda_download_async(b->d, dst, dev(src), bytes);
    b->pend[b->npend++] = (pending){dst, (size_t)at, bytes};
    return rt_cuda_download_async(b->d, b->pin + at, dev(src), bytes);
}

static wpk_status cu_zero(rt_backend *self, wpk_context *ctx, void *dst, size_t bytes) {
    (void)ctx;
    return rt_cuda_memset_async(self_of(self)->d, dev(dst), 0, bytes);
}

static wpk_status cu_load_module(rt_backend *self, wpk_context *ctx, const char *what,
                                 const void *data, size_t len, void **module) {
    (void)ctx;
    rt_cuda_module *m = NULL;
    char name[512];
    snprintf(name, sizeof name, "%s: a kernel module", what);
    wpk_status st = rt_cuda_module_load(self_of(self)->d, data, len, name, &m);
    *module = m;
    return st;
}

static void cu_unload_module(rt_backend *self, void *module) {
    (void)self;
    rt_cuda_module_free(module);
}

static void drop_graph(cuda_backend *b) {
    const rt_cu_api *cu = rt_cuda_cu(b->d);
    /* a lost context may still run what hung it: leave its objects to the process's exit */
    if (!rt_cuda_lost(b->d)) {
        if (b->exec) cu->graph_exec_destroy(b->exec);
        if (b->graph) cu->graph_destroy(b->graph);
    }
    b->exec = NULL;
    b->graph = NULL;
    b->captured = NULL;
    b->ncaptured = 0;
}

static wpk_status launch_all(wpk_context *ctx, const rt_exec_step *steps, int n) {
    for (int k = 0; k < n; k++) {
        wpk_status st = steps[k].runner->run(steps[k].state, ctx, steps[k].argv);
        if (st) {
            wpk_error_prefix(ctx, "node '%s'", steps[k].node ? steps[k].node : "?");
            return st;
        }
    }
    return WPK_OK;
}

/* Capture the steps into a graph and instantiate it. */
static wpk_status capture(cuda_backend *b, wpk_context *ctx, const rt_exec_step *steps, int n) {
    const rt_cu_api *cu = rt_cuda_cu(b->d);
    cu_stream s = rt_cuda_stream(b->d);
    int64_t before = b->kernel_launches;
    wpk_status st = rt_cuda_check(b->d, cu->stream_begin_capture(
                                            s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                                  "beginning the graph capture");
    if (st) return st;
    wpk_status qs = launch_all(ctx, steps, n);
    cu_graph g = NULL;
    st = rt_cuda_check(b->d, cu->stream_end_capture(s, &g), "ending the graph capture");
    b->kernel_launches = before; /* captured, not launched */
    if (qs || st) {
        if (g) cu->graph_destroy(g);
        return qs ? qs : st;
    }
    b->graph = g;
    b->captured = steps;
    b->ncaptured = n;
    return rt_cuda_check(b->d, cu->graph_instantiate(&b->exec, g, 0), "instantiating the graph");
}

/* One by one between events; waits for the device to read the times. */
static wpk_status profiled(cuda_backend *b, wpk_context *ctx, const rt_exec_step *steps, int n,
                           double *step_ms) {
    const rt_cu_api *cu = rt_cuda_cu(b->d);
    cu_stream s = rt_cuda_stream(b->d);
    wpk_status st = WPK_OK;
    if (b->nevents < n + 1) {
        /* the first profiled run makes the events; later ones reuse them */
        cu_event *ev = wpk_realloc(b->events, sizeof *ev * (size_t)(n + 1));
        if (!ev) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory for the profile's events");
        b->events = ev;
        while (b->nevents < n + 1) {
            st = rt_cuda_check(b->d, cu->event_create(&ev[b->nevents], CU_EVENT_DEFAULT),
                               "creating an event");
            if (st) return st;
            b->nevents++;
        }
    }
    st = rt_cuda_check(b->d, cu->event_record(b->events[0], s), "recording an event");
    for (int k = 0; k < n && !st; k++) {
        st = launch_all(ctx, &steps[k], 1);
        if (!st) st = rt_cuda_check(b->d, cu->event_record(b->events[k + 1], s),
                                    "recording an event");
    }
    if (!st) st = rt_cuda_sync(b->d, b->opt.timeout_ms);
    for (int k = 0; k < n && !st; k++) {
        float ms = 0;
        st = rt_cuda_check(b->d, cu->event_elapsed(&ms, b->events[k], b->events[k + 1]),
                           "reading the events' elapsed time");
        step_ms[k] = ms;
    }
    return st;
}

static wpk_status cu_run_steps(rt_backend *self, wpk_context *ctx, const rt_exec_step *steps,
                               int n, double *step_ms) {
    cuda_backend *b = self_of(self);
    b->ran = true;
    if (step_ms) return profiled(b, ctx, steps, n, step_ms);
    if (b->want_graph && (b->captured != steps || b->ncaptured != n)) {
        drop_graph(b);
        wpk_status st = capture(b, ctx, steps, n);
        if (st) {
            drop_graph(b);
            if (rt_cuda_lost(b->d)) return st;
            /* the capture's error stays on the context as a note; launch one by one from now */
            b->want_graph = false;
        }
    }
    if (b->exec) {
        wpk_status st = rt_cuda_check(b->d, rt_cuda_cu(b->d)->graph_launch(b->exec,
                                                                           rt_cuda_stream(b->d)),
                                      "launching the graph");
        if (!st) b->graph_launches++;
        return st;
    }
    return launch_all(ctx, steps, n);
}

static wpk_status cu_synchronize(rt_backend *self, wpk_context *ctx) {
    (void)ctx;
    cuda_backend *b = self_of(self);
    wpk_status st = rt_cuda_sync(b->d, b->opt.timeout_ms);
    for (int i = 0; i < b->npend && !st; i++)
        memcpy(b->pend[i].dst, b->pin + b->pend[i].at, b->pend[i].bytes);
    b->npend = 0;
    b->pin_used = 0;
    if (st || b->pin_want <= b->pin_cap) return st;
    /* grow the staging now that nothing uses it; without it, copies just go direct */
    const rt_cu_api *cu = rt_cuda_cu(b->d);
    if (b->pin) cu->mem_free_host(b->pin);
    void *h = NULL;
    if (cu->mem_alloc_host(&h, b->pin_want) != CU_SUCCESS) h = NULL;
    b->pin = h;
    b->pin_cap = h ? b->pin_want : 0;
    b->no_pin = !h; /* never retried: a run must not try to allocate each time */
    return WPK_OK;
}

static void cu_forget_steps(rt_backend *self, const rt_exec_step *steps) {
    cuda_backend *b = self_of(self);
    if (b->captured == steps) drop_graph(b);
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
    .zero = cu_zero,
    .forget_steps = cu_forget_steps,
};

wpk_status rt_cuda_backend_create(wpk_context *ctx, rt_cuda *d,
                                  const rt_cuda_backend_options *opt, rt_backend **out) {
    *out = NULL;
    /* the registry refuses only when full, and it has room for every built-in runner */
    (void)rt_runner_register(&rt_cuda_kernel_runner);
    (void)rt_runner_register(&rt_cuda_copy_runner);
    cuda_backend *b = wpk_calloc(1, sizeof *b);
    if (!b) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory creating the CUDA backend");
    const rt_cu_api *cu = rt_cuda_cu(d);
    b->base.iface = &cuda_iface;
    b->base.context = b;
    b->base.threads = 1;
    b->d = d;
    if (opt) b->opt = *opt;
    b->no_pin = !cu->mem_alloc_host || !cu->mem_free_host;
    b->want_graph = b->opt.graph && cu->stream_begin_capture && cu->stream_end_capture &&
                    cu->graph_instantiate && cu->graph_launch && cu->graph_exec_destroy &&
                    cu->graph_destroy;
    *out = &b->base;
    return WPK_OK;
}

void rt_cuda_backend_free(rt_backend *base) {
    if (!base) return;
    cuda_backend *b = self_of(base);
    drop_graph(b);
    if (!rt_cuda_lost(b->d))
        for (int i = 0; i < b->nevents; i++) rt_cuda_cu(b->d)->event_destroy(b->events[i]);
    if (b->pin && !rt_cuda_lost(b->d)) rt_cuda_cu(b->d)->mem_free_host(b->pin);
    wpk_free(b->events);
    wpk_free(b);
}

rt_cuda *rt_cuda_backend_device(const rt_backend *b) { return self_of(b)->d; }

bool rt_cuda_backend_uses_graph(const rt_backend *b) { return self_of(b)->exec != NULL; }

void rt_cuda_backend_counts(const rt_backend *b, int64_t *graph_launches,
                            int64_t *kernel_launches) {
    if (graph_launches) *graph_launches = self_of(b)->graph_launches;
    if (kernel_launches) *kernel_launches = self_of(b)->kernel_launches;
}

int64_t *rt_cuda_backend_launch_count(rt_backend *b) { return &self_of(b)->kernel_launches; }

size_t rt_cuda_backend_staged(const rt_backend *b) { return self_of(b)->pin_cap; }

wpk_status rt_cuda_target(wpk_context *ctx, int ordinal, char *buf, size_t cap) {
    rt_cuda_info info;
    wpk_status st = rt_cuda_probe(ctx, ordinal, &info);
    if (st == WPK_OK) target_cuda_fingerprint(info.name, info.sm, info.driver_version, buf, cap);
    return st;
}

wpk_status rt_cuda_backend_open(wpk_context *ctx, int ordinal, rt_backend **out) {
    *out = NULL;
    rt_cuda *d = NULL;
    wpk_status st = rt_cuda_open(ctx, ordinal, &d);
    rt_cuda_backend_options opt = {true, 0};
    if (st == WPK_OK) st = rt_cuda_backend_create(ctx, d, &opt, out);
    if (st) rt_cuda_close(d);
    return st;
}

void rt_cuda_backend_close(rt_backend *b) {
    if (!b) return;
    rt_cuda *d = rt_cuda_backend_device(b);
    rt_cuda_backend_free(b);
    rt_cuda_close(d);
}
