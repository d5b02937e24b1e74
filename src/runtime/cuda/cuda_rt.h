/* cuda_rt.h -- the CUDA backend of the runtime: one GPU through the driver API (device memory,
 * async copies on the backend's stream, modules from NVRTC images, launches, on-device timing
 * with CUDA events, a watchdog for hung kernels). The vendor libraries' kernels on it (cuDNN,
 * cuBLAS, cuBLASLt) are kernels/vendor/cuda_libs.h. Every CUDA library is loaded with dlopen
 * when first needed, never linked: on a machine without a GPU the same binary runs and
 * rt_cuda_open reports "CUDA unavailable: <reason>". Depends on base only.
 *
 * Errors: WPK_ERR_UNSUPPORTED when CUDA (or a library it loads) is unavailable; WPK_ERR_NOMEM
 * for device (or host) memory exhaustion, classified as such (never as "no implementation");
 * WPK_ERR_INTERNAL for a failed launch, a crashed or hung kernel, a module that does not load.
 * rt_cuda_last_fault() tells the class for the tuner's records. A device handle is for one
 * thread at a time. */
#ifndef WPK_RUNTIME_CUDA_CUDA_RT_H
#define WPK_RUNTIME_CUDA_CUDA_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/backend.h"
#include "wpk_runtime.h"

typedef enum rt_cuda_fault {
    RT_CUDA_FAULT_NONE = 0,
    RT_CUDA_FAULT_UNAVAILABLE, /* no libcuda, cuInit failed, no device, no cuDNN/cuBLAS */
    RT_CUDA_FAULT_OOM,         /* device memory exhausted */
    RT_CUDA_FAULT_TIMEOUT,     /* the watchdog fired: the kernel still runs, the context is lost */
    RT_CUDA_FAULT_CONFIG,      /* the launch does not fit the device (threads, shared memory,
                                  registers): an invalid config, not a crash */
    RT_CUDA_FAULT_LOAD,        /* the module does not load (PTX newer than the driver, no code
                                  for this GPU, bad image) */
    RT_CUDA_FAULT_CRASH,       /* illegal address, launch failure: the context is lost */
    RT_CUDA_FAULT_LIBRARY      /* cuDNN / cuBLAS returned an error */
} rt_cuda_fault;

const char *rt_cuda_fault_name(rt_cuda_fault f);

typedef struct rt_cuda_info {
    char name[256];          /* "NVIDIA H100 80GB HBM3" */
    int ordinal;
    int sm;                  /* compute capability major*10 + minor: 90 */
    int sm_count;
    int driver_version;      /* 13000 for CUDA 13.0 */
    size_t memory_bytes;
    int l2_bytes;
    int max_threads_per_block;
    int max_shared_per_block;        /* without opting in */
    int max_shared_per_block_optin;
    int clock_khz, memory_clock_khz, memory_bus_bits;
} rt_cuda_info;

/* Whether a CUDA device can be used, without keeping anything open: WPK_OK with *info filled
 * (info may be NULL), or WPK_ERR_UNSUPPORTED with the message "CUDA unavailable: <reason>"
 * (no libcuda, cuInit failed with its error, no device). The driver is libcuda.so.1 (else
 * libcuda.so) from the dlopen search path, or $WPK_CUDA_DRIVER_LIBRARY when set (read once, at
 * the first use in the process). Thread-safe. */
wpk_status rt_cuda_probe(wpk_context *ctx, int ordinal, rt_cuda_info *info);

typedef struct rt_cuda rt_cuda;

/* Open device `ordinal`: its primary context (made current on this thread), a non-blocking
 * stream and two timing events. ctx (borrowed) must outlive the handle: later failures are
 * reported on it. WPK_ERR_UNSUPPORTED "CUDA unavailable: ..." as rt_cuda_probe. */
wpk_status rt_cuda_open(wpk_context *ctx, int ordinal, rt_cuda **out);
void rt_cuda_close(rt_cuda *d);
const rt_cuda_info *rt_cuda_device_info(const rt_cuda *d);
/* The class of the last failure on d (RT_CUDA_FAULT_NONE after a success). */
rt_cuda_fault rt_cuda_last_fault(const rt_cuda *d);
/* True once a sticky error (crash, watchdog) made the context unusable: the process should
 * report and exit (measurements run in a child process for this reason). */
bool rt_cuda_lost(const rt_cuda *d);
/* The backend's stream (a CUstream), for libraries that enqueue on it. */
void *rt_cuda_stream(const rt_cuda *d);

/* ---- memory: device addresses are uint64_t (CUdeviceptr), 256-byte aligned ---- */
wpk_status rt_cuda_alloc(rt_cuda *d, size_t bytes, uint64_t *ptr);
void rt_cuda_free(rt_cuda *d, uint64_t ptr);
/* Copies on the backend's stream: *_async return once queued (host memory must stay valid
 * until rt_cuda_sync); the plain ones wait. */
wpk_status rt_cuda_upload(rt_cuda *d, uint64_t dst, const void *src, size_t bytes);
wpk_status rt_cuda_download(rt_cuda *d, void *dst, uint64_t src, size_t bytes);
wpk_status rt_cuda_upload_async(rt_cuda *d, uint64_t dst, const void *src, size_t bytes);
wpk_status rt_cuda_download_async(rt_cuda *d, void *dst, uint64_t src, size_t bytes);
wpk_status rt_cuda_memset_async(rt_cuda *d, uint64_t dst, int byte, size_t bytes);
/* Wait for everything queued, at most timeout_ms (0: the default, $WPK_CUDA_TIMEOUT_MS or 10 s).
 * The watchdog: past the deadline it returns WPK_ERR_INTERNAL with fault TIMEOUT and the device
 * counts as lost (a running kernel cannot be stopped). */
wpk_status rt_cuda_sync(rt_cuda *d, int timeout_ms);

/* ---- generated kernels ---- */
typedef struct rt_cuda_dims {
    int64_t grid[3], block[3];
    int64_t shared_bytes;    /* dynamic shared memory */
} rt_cuda_dims;

typedef struct rt_cuda_kernel rt_cuda_kernel;

typedef struct rt_cuda_kernel_info {
    int registers;           /* per thread */
    int local_bytes;         /* per thread: spills and local arrays not in registers */
    int max_threads;         /* per block, as compiled */
} rt_cuda_kernel_info;

/* Load `image` (PTX text with its NUL, or a cubin: cg_cuda_compile's output) and find kernel
 * `name`; dims is how it is launched. Shared memory above the default 48 KiB is opted into;
 * more than the device allows, or more threads than the kernel allows, is fault CONFIG. A
 * module the driver refuses (PTX of a newer CUDA than the driver, no code for this GPU) is
 * fault LOAD with the driver's error. */
wpk_status rt_cuda_kernel_load(rt_cuda *d, const void *image, size_t size, const char *name,
                               const rt_cuda_dims *dims, rt_cuda_kernel **out);
void rt_cuda_kernel_free(rt_cuda_kernel *k);

/* A module loaded once whose kernels are bound one by one (a plan's module, backend.h). A PTX
 * image must end in its NUL: WPK_ERR_PARSE otherwise; the driver's refusals as above (LOAD),
 * naming `what`. Kernels of a module must be freed before it. */
typedef struct rt_cuda_module rt_cuda_module;
wpk_status rt_cuda_module_load(rt_cuda *d, const void *image, size_t size, const char *what,
                               rt_cuda_module **out);
void rt_cuda_module_free(rt_cuda_module *m);
rt_cuda *rt_cuda_module_device(const rt_cuda_module *m);
/* Kernel `name` of m launched with dims, checked as rt_cuda_kernel_load checks it; freeing it
 * leaves m loaded. */
wpk_status rt_cuda_module_kernel(rt_cuda_module *m, const char *name, const rt_cuda_dims *dims,
                                 rt_cuda_kernel **out);
rt_cuda_kernel_info rt_cuda_kernel_describe(const rt_cuda_kernel *k);
/* Queue one launch with args[i] the device address of the kernel's argument i. */
wpk_status rt_cuda_kernel_launch(rt_cuda *d, rt_cuda_kernel *k, const uint64_t *args, int nargs);

/* ---- measurement on the device ---- */
typedef struct rt_cuda_measure {
    int warmup;              /* launches before timing */
    int number;              /* launches per sample (0: grown until a sample takes min_ms) */
    int repeat;              /* samples */
    double min_ms;           /* with number 0 */
    bool flush_l2;           /* overwrite an L2-sized buffer before each timed launch (then one
                                launch per sample: the flush is not timed) */
    int timeout_ms;          /* watchdog per sample (0: the default of rt_cuda_sync) */
    bool graph;              /* capture a sample's launches into a CUDA Graph once and time its
                                replays: the host's per-launch cost (a library's planning in
                                each call, say) is left out, as for a caller that replays a
                                captured graph; without flush_l2 only */
} rt_cuda_measure;

rt_cuda_measure rt_cuda_default_measure(void);

/* What one launch is: queue the work on the backend's stream. */
typedef wpk_status (*rt_cuda_enqueue_fn)(void *user, rt_cuda *d);

/* Time fn with CUDA events around it on the device (not the host clock): samples[0..repeat)
 * in seconds per launch (the caller's array, m->repeat long). Faults as the launches'. */
wpk_status rt_cuda_time(rt_cuda *d, rt_cuda_enqueue_fn fn, void *user, const rt_cuda_measure *m,
                        double *samples);

/* ---- isolated measurement: a child process per candidate, killed by the host's watchdog ----
 * A kernel that never ends cannot be stopped from the process that launched it, and a crash
 * (illegal address) loses that process's context for good; so a tuner measures each candidate
 * in a forked child that opens the device itself, and the parent kills the child when its host
 * deadline passes (the driver then tears the child's context down). The parent must not have
 * initialized CUDA itself before forking (CUDA is not fork-safe): probe in a child too, or use
 * rt_cuda_run_isolated for that as well. */
#define RT_CUDA_MAX_SAMPLES 64

typedef struct rt_cuda_result {
    rt_cuda_fault fault;     /* NONE: samples are valid */
    double samples[RT_CUDA_MAX_SAMPLES]; /* seconds per launch */
    int nsamples;
    double error;            /* the child's check against a reference (-1: none) */
    char message[512];       /* why it failed, from the child or the watchdog */
} rt_cuda_result;

/* The child's work on device d (opened by the child): measure, fill r (fault NONE on success;
 * on failure the fault and message of what failed -- rt_cuda_last_fault(d) and the context's
 * message are copied in when the function returns an error without setting them). */
typedef wpk_status (*rt_cuda_child_fn)(void *user, rt_cuda *d, rt_cuda_result *r);

/* Run fn in a forked child on device `ordinal` with a host deadline of timeout_s seconds
 * (<= 0: 60 s). The result comes back through a pipe into *r: the child's own, or TIMEOUT (the
 * deadline passed: the child was killed with SIGKILL, "killed after N s (watchdog)"), CRASH (the
 * child died of a signal or exited without a result), UNAVAILABLE (the child could not open the
 * device, with the reason), OOM as the child classified it. Returns WPK_OK whenever *r holds a
 * classified result (a failed candidate included); WPK_ERR_IO when no child could be made.
 * The child's context (wpk_context) messages stay in the child; r->message carries them. */
wpk_status rt_cuda_run_isolated(wpk_context *ctx, int ordinal, double timeout_s,
                                rt_cuda_child_fn fn, void *user, rt_cuda_result *r);

/* ---- the backend (runtime/backend.h) over device d: a plan's modules loaded from their
 * images, its steps run on d's stream by the runners "cuda_kernel" (a module's kernel, the
 * step's payload its launch dims) and "cuda_copy" (a device copy). With graph the steps of one
 * executor are captured once into a CUDA Graph and every later run is one graph launch (a
 * driver without graphs, or a failed capture, falls back to launching the steps one by one);
 * a profiled run (step_ms) launches the steps one by one between CUDA events. A run's copies
 * in and out go through pinned staging (grown at a synchronize to what the last round of copies
 * wanted: the first two runs size it, later ones allocate nothing); the load's go direct.
 * synchronize
 * waits at most timeout_ms (0: rt_cuda_sync's default), the watchdog's faults. Errors are left
 * on d's context. d (borrowed) must outlive the backend; one thread at a time. ---- */
typedef struct rt_cuda_backend_options {
    bool graph;
    int timeout_ms;
} rt_cuda_backend_options;

wpk_status rt_cuda_backend_create(wpk_context *ctx, rt_cuda *d,
                                  const rt_cuda_backend_options *opt, rt_backend **out);
void rt_cuda_backend_free(rt_backend *b);
/* The device of a backend made by rt_cuda_backend_create. */
rt_cuda *rt_cuda_backend_device(const rt_backend *b);
/* Whether the steps run as a captured graph now, and how many graph launches and single kernel
 * launches (outside a capture) there were: for tests and reports. */
bool rt_cuda_backend_uses_graph(const rt_backend *b);
void rt_cuda_backend_counts(const rt_backend *b, int64_t *graph_launches,
                            int64_t *kernel_launches);
/* Bytes of pinned staging the backend holds for copies in and out (0: they go direct). */
size_t rt_cuda_backend_staged(const rt_backend *b);

/* ---- the payloads of the CUDA runners' steps (little-endian int64s) ---- */
#define RT_CUDA_LAUNCH_PAYLOAD 56 /* grid[3], block[3], shared_bytes */
#define RT_CUDA_COPY_PAYLOAD 16   /* source offset in its tensor, bytes */
#define RT_CUDA_COPY_TO_PAYLOAD 24 /* the same and the destination offset in its tensor */
void rt_cuda_launch_payload(const rt_cuda_dims *dims, uint8_t out[RT_CUDA_LAUNCH_PAYLOAD]);
void rt_cuda_copy_payload(uint64_t src_offset, uint64_t bytes,
                          uint8_t out[RT_CUDA_COPY_PAYLOAD]);
/* A copy into the destination at dst_offset (a Concat's input into its slice of the output). */
void rt_cuda_copy_to_payload(uint64_t src_offset, uint64_t bytes, uint64_t dst_offset,
                             uint8_t out[RT_CUDA_COPY_TO_PAYLOAD]);

#endif
