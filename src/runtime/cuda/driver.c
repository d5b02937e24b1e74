/* driver.c -- the CUDA backend's device (cuda_rt.h): availability with its reason, the primary
 * context and a stream, device memory, modules and launches, the watchdog, and timing with
 * CUDA events. Failures are classified (rt_cuda_fault) so that out-of-memory, invalid configs,
 * hangs and crashes are told apart. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/context.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_rt.h"

#define DEFAULT_TIMEOUT_MS 10000
#define DEFAULT_SHARED_LIMIT (48 * 1024)

struct rt_cuda {
    wpk_context *ctx;
    const rt_cu_api *cu;
    cu_device dev;
    cu_context cctx;
    cu_stream stream;
    cu_event ev[2];
    rt_cuda_info info;
    rt_cuda_fault fault;
    bool lost;
    uint64_t flush_buf;       /* the L2 flush buffer (lazily, twice the L2) */
    size_t flush_bytes;
};

struct rt_cuda_module {
    rt_cuda *d;
    cu_module mod;
};

struct rt_cuda_kernel {
    rt_cuda *d;
    cu_module mod;
    bool owns_module;         /* rt_cuda_kernel_load's; a module's kernel leaves it loaded */
    cu_function fn;
    rt_cuda_dims dims;
    rt_cuda_kernel_info info;
    char name[128];
};

const char *rt_cuda_fault_name(rt_cuda_fault f) {
    static const char *const names[] = {"none", "unavailable", "out of memory", "timeout",
                                        "invalid config", "load", "crash", "library"};
    return f >= RT_CUDA_FAULT_NONE && f <= RT_CUDA_FAULT_LIBRARY ? names[f] : "?";
}

static rt_cuda_fault classify(cu_result r) {
    switch (r) {
    case CU_SUCCESS: return RT_CUDA_FAULT_NONE;
    case CU_ERROR_OUT_OF_MEMORY: return RT_CUDA_FAULT_OOM;
    case CU_ERROR_LAUNCH_OUT_OF_RESOURCES: case CU_ERROR_INVALID_VALUE: return RT_CUDA_FAULT_CONFIG;
    case CU_ERROR_NO_BINARY_FOR_GPU: case CU_ERROR_INVALID_PTX:
    case CU_ERROR_UNSUPPORTED_PTX_VERSION: case 200 /* INVALID_IMAGE */: case 221 /* JIT not found */:
        return RT_CUDA_FAULT_LOAD;
    case CU_ERROR_LAUNCH_TIMEOUT: return RT_CUDA_FAULT_TIMEOUT;
    default:
        /* 700..719 (illegal address, misaligned access, illegal instruction, launch failure)
         * are sticky: the context is unusable; anything else is no less a failure */
        return RT_CUDA_FAULT_CRASH;
    }
}

/* Record failure r of `what` on d (and the context): the status follows the fault's class. */
static wpk_status failed(rt_cuda *d, cu_result r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static wpk_status failed(rt_cuda *d, cu_result r, const char *fmt, ...) {
    char what[512], err[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    rt_cu_error_text(d->cu, r, err, sizeof err);
    d->fault = classify(r);
    if ((r >= 700 && r <= 719 && r != CU_ERROR_LAUNCH_OUT_OF_RESOURCES)) d->lost = true;
    wpk_status st = d->fault == RT_CUDA_FAULT_OOM ? WPK_ERR_NOMEM : WPK_ERR_INTERNAL;
    if (d->fault == RT_CUDA_FAULT_OOM) {
        size_t free_b = 0, total = 0;
        d->cu->mem_get_info(&free_b, &total);
        return wpk_error(d->ctx, st, "CUDA: out of device memory: %s: %s (%zu of %zu MiB free)",
                         what, err, free_b >> 20, total >> 20);
    }
    return wpk_error(d->ctx, st, "CUDA: %s: %s [%s%s]", what, err, rt_cuda_fault_name(d->fault),
                     d->lost ? "; the context is lost" : "");
}

static wpk_status lost(rt_cuda *d) {
    return wpk_error(d->ctx, WPK_ERR_INTERNAL, "CUDA: the device context was lost to an earlier "
                     "%s; open a new process", rt_cuda_fault_name(d->fault));
}

static void use(rt_cuda *d) { d->cu->ctx_set_current(d->cctx); }

/* ---- availability ---- */

static wpk_status unavailable(wpk_context *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static wpk_status unavailable(wpk_context *ctx, const char *fmt, ...) {
    char why[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "CUDA unavailable: %s", why);
}

static wpk_status find_device(wpk_context *ctx, int ordinal, const rt_cu_api **api, cu_device *dev) {
    char why[768];
    const rt_cu_api *cu = rt_cu_load(why, sizeof why);
    if (!cu) return unavailable(ctx, "%s", why);
    char err[256];
    cu_result r = cu->init(0);
    if (r != CU_SUCCESS)
        return unavailable(ctx, "cuInit failed: %s", rt_cu_error_text(cu, r, err, sizeof err));
    int n = 0;
    r = cu->device_count(&n);
    if (r != CU_SUCCESS)
        return unavailable(ctx, "cuDeviceGetCount failed: %s",
                           rt_cu_error_text(cu, r, err, sizeof err));
    if (n == 0) return unavailable(ctx, "no device (the driver sees no GPU)");
    if (ordinal < 0 || ordinal >= n) return unavailable(ctx, "no device %d (%d present)", ordinal, n);
    if ((r = cu->device_get(dev, ordinal)) != CU_SUCCESS)
        return unavailable(ctx, "cuDeviceGet(%d) failed: %s", ordinal,
                           rt_cu_error_text(cu, r, err, sizeof err));
    *api = cu;
    return WPK_OK;
}

static void read_info(const rt_cu_api *cu, cu_device dev, int ordinal, rt_cuda_info *info) {
    memset(info, 0, sizeof *info);
    info->ordinal = ordinal;
    cu->device_name(info->name, (int)sizeof info->name - 1, dev);
    int major = 0, minor = 0;
    cu->device_attr(&major, CU_ATTR_CC_MAJOR, dev);
    cu->device_attr(&minor, CU_ATTR_CC_MINOR, dev);
    info->sm = major * 10 + minor;
    cu->device_attr(&info->sm_count, CU_ATTR_SM_COUNT, dev);
    cu->device_attr(&info->l2_bytes, CU_ATTR_L2_CACHE_SIZE, dev);
    cu->device_attr(&info->max_threads_per_block, CU_ATTR_MAX_THREADS_PER_BLOCK, dev);
    cu->device_attr(&info->max_shared_per_block, CU_ATTR_MAX_SHARED_PER_BLOCK, dev);
    cu->device_attr(&info->max_shared_per_block_optin, CU_ATTR_MAX_SHARED_PER_BLOCK_OPTIN, dev);
    cu->device_attr(&info->clock_khz, CU_ATTR_CLOCK_RATE, dev);
    cu->device_attr(&info->memory_clock_khz, CU_ATTR_MEMORY_CLOCK_RATE, dev);
    cu->device_attr(&info->memory_bus_bits, CU_ATTR_MEMORY_BUS_WIDTH, dev);
    cu->device_total_mem(&info->memory_bytes, dev);
    cu->driver_version(&info->driver_version);
}

wpk_status rt_cuda_probe(wpk_context *ctx, int ordinal, rt_cuda_info *info) {
    const rt_cu_api *cu;
    cu_device dev;
    wpk_status st = find_device(ctx, ordinal, &cu, &dev);
    if (st == WPK_OK && info) read_info(cu, dev, ordinal, info);
    return st;
}

wpk_status rt_cuda_open(wpk_context *ctx, int ordinal, rt_cuda **out) {
    *out = NULL;
    const rt_cu_api *cu;
    cu_device dev;
    wpk_status st = find_device(ctx, ordinal, &cu, &dev);
    if (st) return st;
    rt_cuda *d = wpk_calloc(1, sizeof *d);
    if (!d) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory opening the CUDA device");
    d->ctx = ctx;
    d->cu = cu;
    d->dev = dev;
    read_info(cu, dev, ordinal, &d->info);
    cu_result r = cu->primary_retain(&d->cctx, dev);
    if (r != CU_SUCCESS) {
        st = failed(d, r, "retaining the primary context of device %d", ordinal);
        wpk_free(d);
        return st;
    }
    if ((r = cu->ctx_set_current(d->cctx)) != CU_SUCCESS ||
        (r = cu->stream_create(&d->stream, CU_STREAM_NON_BLOCKING)) != CU_SUCCESS ||
        (r = cu->event_create(&d->ev[0], CU_EVENT_DEFAULT)) != CU_SUCCESS ||
        (r = cu->event_create(&d->ev[1], CU_EVENT_DEFAULT)) != CU_SUCCESS) {
        st = failed(d, r, "setting up device %d (context, stream, events)", ordinal);
        rt_cuda_close(d);
        return st;
    }
    *out = d;
    return WPK_OK;
}

void rt_cuda_close(rt_cuda *d) {
    if (!d) return;
    /* A lost context may still be running the kernel that hung it, and freeing or destroying
     * anything on it waits for that kernel: leave it all to the process's exit, which the
     * driver tears down (a measuring child exits right after). */
    if (d->cctx && !d->lost) {
        use(d);
        d->cu->ctx_synchronize();
        if (d->flush_buf) d->cu->mem_free(d->flush_buf);
        for (int i = 0; i < 2; i++)
            if (d->ev[i]) d->cu->event_destroy(d->ev[i]);
        if (d->stream) d->cu->stream_destroy(d->stream);
        d->cu->primary_release(d->dev);
    }
    wpk_free(d);
}

const rt_cuda_info *rt_cuda_device_info(const rt_cuda *d) { return &d->info; }
rt_cuda_fault rt_cuda_last_fault(const rt_cuda *d) { return d->fault; }
bool rt_cuda_lost(const rt_cuda *d) { return d->lost; }
void *rt_cuda_stream(const rt_cuda *d) { return d->stream; }
wpk_context *rt_cuda_ctx(const rt_cuda *d) { return d->ctx; }
void rt_cuda_set_fault(rt_cuda *d, rt_cuda_fault f) { d->fault = f; }
const rt_cu_api *rt_cuda_cu(const rt_cuda *d) { return d->cu; }

wpk_status rt_cuda_check(rt_cuda *d, cu_result r, const char *what) {
    if (r == CU_SUCCESS) return WPK_OK;
    return failed(d, r, "%s", what);
}

/* ---- memory ---- */

wpk_status rt_cuda_alloc(rt_cuda *d, size_t bytes, uint64_t *ptr) {
    *ptr = 0;
    if (d->lost) return lost(d);
    use(d);
    cu_deviceptr p = 0;
    cu_result r = d->cu->mem_alloc(&p, bytes ? bytes : 1);
    if (r != CU_SUCCESS) return failed(d, r, "allocating %zu bytes", bytes);
    d->fault = RT_CUDA_FAULT_NONE;
    *ptr = p;
    return WPK_OK;
}

void rt_cuda_free(rt_cuda *d, uint64_t ptr) {
    if (!d || !ptr) return;
    use(d);
    d->cu->mem_free(ptr);
}

wpk_status rt_cuda_upload(rt_cuda *d, uint64_t dst, const void *src, size_t bytes) {
    wpk_status st = rt_cuda_upload_async(d, dst, src, bytes);
    return st ? st : rt_cuda_sync(d, 0);
}

wpk_status rt_cuda_download(rt_cuda *d, void *dst, uint64_t src, size_t bytes) {
    wpk_status st = rt_cuda_download_async(d, dst, src, bytes);
    return st ? st : rt_cuda_sync(d, 0);
}

wpk_status rt_cuda_upload_async(rt_cuda *d, uint64_t dst, const void *src, size_t bytes) {
    if (d->lost) return lost(d);
    use(d);
    cu_result r = d->cu->memcpy_htod_async(dst, src, bytes, d->stream);
    return r == CU_SUCCESS ? WPK_OK : failed(d, r, "copying %zu bytes to the device", bytes);
}

wpk_status rt_cuda_download_async(rt_cuda *d, void *dst, uint64_t src, size_t bytes) {
    if (d->lost) return lost(d);
    use(d);
    cu_result r = d->cu->memcpy_dtoh_async(dst, src, bytes, d->stream);
    return r == CU_SUCCESS ? WPK_OK : failed(d, r, "copying %zu bytes from the device", bytes);
}

wpk_status rt_cuda_memset_async(rt_cuda *d, uint64_t dst, int byte, size_t bytes) {
    if (d->lost) return lost(d);
    use(d);
    cu_result r = d->cu->memset_d8_async(dst, (unsigned char)byte, bytes, d->stream);
    return r == CU_SUCCESS ? WPK_OK : failed(d, r, "setting %zu bytes", bytes);
}

static int default_timeout_ms(void) {
    const char *e = getenv("WPK_CUDA_TIMEOUT_MS");
    long v = e && *e ? strtol(e, NULL, 10) : 0;
    return v > 0 && v < INT32_MAX ? (int)v : DEFAULT_TIMEOUT_MS;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

wpk_status rt_cuda_sync(rt_cuda *d, int timeout_ms) {
    if (d->lost) return lost(d);
    use(d);
    if (timeout_ms <= 0) timeout_ms = default_timeout_ms();
    double deadline = now_ms() + timeout_ms;
    long nap_ns = 20000;
    /* poll instead of blocking, so that a kernel that never ends cannot hang the process */
    for (;;) {
        cu_result r = d->cu->stream_query(d->stream);
        if (r == CU_SUCCESS) {
            d->fault = RT_CUDA_FAULT_NONE;
            return WPK_OK;
        }
        if (r != CU_ERROR_NOT_READY) return failed(d, r, "running the queued work");
        if (now_ms() > deadline) {
            d->fault = RT_CUDA_FAULT_TIMEOUT;
            d->lost = true;
            return wpk_error(d->ctx, WPK_ERR_INTERNAL, "CUDA: the queued work did not finish "
                             "within %d ms (watchdog) [timeout; the context is lost]", timeout_ms);
        }
        struct timespec t = {0, nap_ns};
        nanosleep(&t, NULL);
        if (nap_ns < 1000000) nap_ns *= 2;
    }
}

/* ---- modules and launches ---- */

/* cuModuleLoadData of image; a refusal is fault LOAD (or OOM) naming `what`. */
static wpk_status load_module(rt_cuda *d, const void *image, size_t size, const char *what,
                              cu_module *mod) {
    if (d->lost) return lost(d);
    if (!image || size == 0)
        return wpk_error(d->ctx, WPK_ERR_INVALID_ARG, "%s: no module image", what);
    /* PTX is read up to its NUL, so text without one would be read past its end */
    if (size < 4 || memcmp(image, "\177ELF", 4)) {
        if (((const char *)image)[size - 1] != 0)
            return wpk_error(d->ctx, WPK_ERR_PARSE, "%s: the module is neither a cubin nor PTX "
                             "text ending in NUL", what);
    }
    use(d);
    cu_result r = d->cu->module_load_data(mod, image);
    if (r != CU_SUCCESS) {
        wpk_status st = failed(d, r, "loading the module of %s (driver %d)", what,
                               d->info.driver_version);
        if (d->fault != RT_CUDA_FAULT_OOM) d->fault = RT_CUDA_FAULT_LOAD;
        return st;
    }
    return WPK_OK;
}

/* Kernel `name` of mod, checked to launch with dims. On failure mod stays as it was. */
static wpk_status bind_kernel(rt_cuda *d, cu_module mod, bool owns, const char *name,
                              const rt_cuda_dims *dims, rt_cuda_kernel **out) {
    *out = NULL;
    rt_cuda_kernel *k = wpk_calloc(1, sizeof *k);
    if (!k) return wpk_error(d->ctx, WPK_ERR_NOMEM, "out of memory loading a kernel");
    k->d = d;
    k->mod = mod;
    k->owns_module = owns;
    k->dims = *dims;
    snprintf(k->name, sizeof k->name, "%s", name);
    cu_result r;
    if ((r = d->cu->module_get_function(&k->fn, k->mod, name)) != CU_SUCCESS) {
        wpk_free(k);
        return failed(d, r, "kernel '%s' is not in its module", name);
    }
    d->cu->func_get_attr(&k->info.registers, CU_FUNC_ATTR_NUM_REGS, k->fn);
    d->cu->func_get_attr(&k->info.local_bytes, CU_FUNC_ATTR_LOCAL_SIZE_BYTES, k->fn);
    d->cu->func_get_attr(&k->info.max_threads, CU_FUNC_ATTR_MAX_THREADS_PER_BLOCK, k->fn);
    int64_t threads = dims->block[0] * dims->block[1] * dims->block[2];
    const char *bad = NULL;
    char why[256];
    if (threads > k->info.max_threads) {
        snprintf(why, sizeof why, "%" PRId64 " threads per block, the kernel allows %d (registers: %d "
                 "per thread)", threads, k->info.max_threads, k->info.registers);
        bad = why;
    } else if (dims->shared_bytes > d->info.max_shared_per_block_optin) {
        snprintf(why, sizeof why, "%" PRId64 " bytes of shared memory, the device allows %d",
                 dims->shared_bytes, d->info.max_shared_per_block_optin);
        bad = why;
    } else if (dims->shared_bytes > DEFAULT_SHARED_LIMIT &&
               (r = d->cu->func_set_attr(k->fn, CU_FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         (int)dims->shared_bytes)) != CU_SUCCESS) {
        wpk_free(k);
        return failed(d, r, "opting kernel '%s' into %" PRId64 " bytes of shared memory", name,
                      dims->shared_bytes);
    }
    if (bad) {
        wpk_free(k);
        d->fault = RT_CUDA_FAULT_CONFIG;
        return wpk_error(d->ctx, WPK_ERR_INTERNAL, "CUDA: kernel '%s' cannot launch: %s [invalid "
                         "config]", name, bad);
    }
    d->fault = RT_CUDA_FAULT_NONE;
    *out = k;
    return WPK_OK;
}

wpk_status rt_cuda_kernel_load(rt_cuda *d, const void *image, size_t size, const char *name,
                               const rt_cuda_dims *dims, rt_cuda_kernel **out) {
    *out = NULL;
    if (d->lost) return lost(d);
    if (!image || size == 0 || !name || !dims)
        return wpk_error(d->ctx, WPK_ERR_INVALID_ARG, "rt_cuda_kernel_load: no image, name or "
                         "dims");
    char what[160];
    snprintf(what, sizeof what, "kernel '%s'", name);
    cu_module mod = NULL;
    wpk_status st = load_module(d, image, size, what, &mod);
    if (st) return st;
    st = bind_kernel(d, mod, true, name, dims, out);
    if (st) d->cu->module_unload(mod);
    return st;
}

wpk_status rt_cuda_module_load(rt_cuda *d, const void *image, size_t size, const char *what,
                               rt_cuda_module **out) {
    *out = NULL;
    rt_cuda_module *m = wpk_calloc(1, sizeof *m);
    if (!m) return wpk_error(d->ctx, WPK_ERR_NOMEM, "out of memory loading %s", what);
    m->d = d;
    wpk_status st = load_module(d, image, size, what, &m->mod);
    if (st) {
        wpk_free(m);
        return st;
    }
    d->fault = RT_CUDA_FAULT_NONE;
    *out = m;
    return WPK_OK;
}

void rt_cuda_module_free(rt_cuda_module *m) {
    if (!m) return;
    use(m->d);
    m->d->cu->module_unload(m->mod);
    wpk_free(m);
}

rt_cuda *rt_cuda_module_device(const rt_cuda_module *m) { return m->d; }

wpk_status rt_cuda_module_kernel(rt_cuda_module *m, const char *name, const rt_cuda_dims *dims,
                                 rt_cuda_kernel **out) {
    *out = NULL;
    rt_cuda *d = m->d;
    if (d->lost) return lost(d);
    if (!name || !dims)
        return wpk_error(d->ctx, WPK_ERR_INVALID_ARG, "rt_cuda_module_kernel: no name or dims");
    use(d);
    return bind_kernel(d, m->mod, false, name, dims, out);
}

void rt_cuda_kernel_free(rt_cuda_kernel *k) {
    if (!k) return;
    if (k->owns_module) {
        use(k->d);
        k->d->cu->module_unload(k->mod);
    }
    wpk_free(k);
}

rt_cuda_kernel_info rt_cuda_kernel_describe(const rt_cuda_kernel *k) { return k->info; }

#define MAX_KERNEL_ARGS 64

wpk_status rt_cuda_kernel_launch(rt_cuda *d, rt_cuda_kernel *k, const uint64_t *args, int nargs) {
    if (d->lost) return lost(d);
    if (nargs < 0 || nargs > MAX_KERNEL_ARGS)
        return wpk_error(d->ctx, WPK_ERR_INVALID_ARG, "kernel '%s': %d arguments", k->name, nargs);
    use(d);
    /* cuLaunchKernel takes a pointer to each argument's value */
    cu_deviceptr vals[MAX_KERNEL_ARGS];
    void *params[MAX_KERNEL_ARGS];
    for (int i = 0; i < nargs; i++) {
        vals[i] = args[i];
        params[i] = &vals[i];
    }
    const rt_cuda_dims *g = &k->dims;
    cu_result r = d->cu->launch(k->fn, (unsigned)g->grid[0], (unsigned)g->grid[1],
                                (unsigned)g->grid[2], (unsigned)g->block[0], (unsigned)g->block[1],
                                (unsigned)g->block[2], (unsigned)g->shared_bytes, d->stream,
                                params, NULL);
    if (r != CU_SUCCESS)
        return failed(d, r, "launching kernel '%s' (grid %" PRId64 "x%" PRId64 "x%" PRId64
                      ", block %" PRId64 "x%" PRId64 "x%" PRId64 ", %" PRId64 " bytes shared)",
                      k->name, g->grid[0], g->grid[1], g->grid[2], g->block[0], g->block[1],
                      g->block[2], g->shared_bytes);
    return WPK_OK;
}

/* ---- timing ---- */

rt_cuda_measure rt_cuda_default_measure(void) {
    return (rt_cuda_measure){.warmup = 2, .number = 0, .repeat = 10, .min_ms = 1.0,
                             .flush_l2 = false, .timeout_ms = 0};
}

/* n launches between the two events; the elapsed device time in ms. */
static wpk_status timed(rt_cuda *d, rt_cuda_enqueue_fn fn, void *user, int n, bool flush,
                        int timeout_ms, float *ms) {
    wpk_status st;
    cu_result r;
    if (flush && (st = rt_cuda_memset_async(d, d->flush_buf, 0, d->flush_bytes))) return st;
    if ((r = d->cu->event_record(d->ev[0], d->stream)) != CU_SUCCESS)
        return failed(d, r, "recording the start event");
    for (int i = 0; i < n; i++)
        if ((st = fn(user, d))) return st;
    if ((r = d->cu->event_record(d->ev[1], d->stream)) != CU_SUCCESS)
        return failed(d, r, "recording the end event");
    if ((st = rt_cuda_sync(d, timeout_ms))) return st;
    if ((r = d->cu->event_elapsed(ms, d->ev[0], d->ev[1])) != CU_SUCCESS)
        return failed(d, r, "reading the events' elapsed time");
    return WPK_OK;
}

/* n launches of fn captured into one instantiated graph */
static wpk_status capture(rt_cuda *d, rt_cuda_enqueue_fn fn, void *user, int n, cu_graph_exec *exec) {
    const rt_cu_api *cu = d->cu;
    *exec = NULL;
    if (!cu->stream_begin_capture || !cu->stream_end_capture || !cu->graph_instantiate ||
        !cu->graph_launch || !cu->graph_exec_destroy || !cu->graph_destroy)
        return wpk_error(d->ctx, WPK_ERR_UNSUPPORTED, "rt_cuda_time: this driver has no CUDA "
                         "Graphs (stream capture)");
    cu_result r = cu->stream_begin_capture(d->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (r != CU_SUCCESS) return failed(d, r, "beginning the graph capture");
    wpk_status st = WPK_OK;
    for (int i = 0; i < n && !st; i++) st = fn(user, d);
    cu_graph g = NULL;
    r = cu->stream_end_capture(d->stream, &g);
    if (!st && r != CU_SUCCESS) st = failed(d, r, "ending the graph capture");
    if (!st && (r = cu->graph_instantiate(exec, g, 0)) != CU_SUCCESS)
        st = failed(d, r, "instantiating the graph");
    if (g) cu->graph_destroy(g);
    return st;
}

static wpk_status timed_graph(rt_cuda *d, cu_graph_exec exec, int timeout_ms, float *ms) {
    cu_result r;
    if ((r = d->cu->event_record(d->ev[0], d->stream)) != CU_SUCCESS)
        return failed(d, r, "recording the start event");
    if ((r = d->cu->graph_launch(exec, d->stream)) != CU_SUCCESS)
        return failed(d, r, "launching the graph");
    if ((r = d->cu->event_record(d->ev[1], d->stream)) != CU_SUCCESS)
        return failed(d, r, "recording the end event");
    wpk_status st = rt_cuda_sync(d, timeout_ms);
    if (st) return st;
    if ((r = d->cu->event_elapsed(ms, d->ev[0], d->ev[1])) != CU_SUCCESS)
        return failed(d, r, "reading the events' elapsed time");
    return WPK_OK;
}

wpk_status rt_cuda_time(rt_cuda *d, rt_cuda_enqueue_fn fn, void *user, const rt_cuda_measure *m,
                        double *samples) {
    if (d->lost) return lost(d);
    rt_cuda_measure def = rt_cuda_default_measure();
    if (!m) m = &def;
    if (m->repeat < 1 || m->number < 0 || m->warmup < 0)
        return wpk_error(d->ctx, WPK_ERR_INVALID_ARG, "rt_cuda_time: repeat %d, number %d, "
                         "warmup %d", m->repeat, m->number, m->warmup);
    use(d);
    wpk_status st;
    if (m->flush_l2 && !d->flush_buf) {
        size_t bytes = (size_t)(d->info.l2_bytes > 0 ? d->info.l2_bytes : 64 << 20) * 2;
        if ((st = rt_cuda_alloc(d, bytes, &d->flush_buf))) return st;
        d->flush_bytes = bytes;
    }
    for (int i = 0; i < m->warmup; i++)
        if ((st = fn(user, d))) return st;
    if (m->warmup && (st = rt_cuda_sync(d, m->timeout_ms))) return st;
    int n = m->flush_l2 ? 1 : m->number;
    float ms = 0;
    if (n == 0) {
        /* grow the batch until one sample is long enough for the events' resolution */
        n = 1;
        for (;;) {
            if ((st = timed(d, fn, user, n, false, m->timeout_ms, &ms))) return st;
            if (ms >= m->min_ms || n >= (1 << 20)) break;
            double want = ms > 0 ? m->min_ms / ms * 1.25 : 16;
            n = (int)(n * (want < 2 ? 2 : want > 16 ? 16 : want));
        }
    }
    if (m->graph && !m->flush_l2) {
        cu_graph_exec exec = NULL;
        st = capture(d, fn, user, n, &exec);
        for (int i = 0; i < m->repeat && !st; i++) {
            st = timed_graph(d, exec, m->timeout_ms, &ms);
            samples[i] = (double)ms / 1e3 / n;
        }
        if (exec && !d->lost) d->cu->graph_exec_destroy(exec);
        return st;
    }
    for (int i = 0; i < m->repeat; i++) {
        if ((st = timed(d, fn, user, n, m->flush_l2, m->timeout_ms, &ms))) return st;
        samples[i] = (double)ms / 1e3 / n;
    }
    return WPK_OK;
}
