/* mock_libcuda.c -- a stand-in for the CUDA driver library (libcuda) with the ABI of the few
 * functions src/runtime/cuda uses, for testing the runtime without a GPU
 * (WPK_CUDA_DRIVER_LIBRARY=libwpk_mock_cuda.so). Device memory is host memory under a 1 GiB
 * cap; modules are accepted unless their image starts with "BADPTX"; kernels do no work, but
 * their names pick a behaviour: "spin" never finishes (the stream stays busy), "crash" fails its
 * launch with CUDA_ERROR_ILLEGAL_ADDRESS, "heavy" allows only 256 threads per block. Each launch
 * takes 10 us of "device time" between two events. One device: "wpk mock GPU", sm_90.
 * Two kernels do real work on their first two arguments over grid.x * block.x floats:
 * "wpk_mock_scale2" (y = 2x) and "wpk_mock_add1" (y = x + 1). Pinned host memory is plain
 * memory; stream capture records copies and launches into a graph instead of running them, and
 * a graph launch replays them (mock_graph_replays counts). mock_allocs counts device and pinned
 * allocations (a run must make none). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/cuda_api.h"

#define MOCK_MEMORY ((size_t)1 << 30)
#define LAUNCH_MS 0.01f

struct cu_function_s {
    char name[64];
    int max_dynamic_shared;
};
struct cu_module_s {
    struct cu_function_s *fns[16];
    int n;
};
#define GRAPH_OPS 256

typedef struct mock_op {
    int kind;                 /* 0: copy, 1: launch */
    void *dst;
    const void *src;
    size_t n;
    cu_function f;
    unsigned elems;
    cu_deviceptr a0, a1;
} mock_op;

struct cu_graph_s {
    mock_op ops[GRAPH_OPS];
    int n;
    bool broken;              /* an op beyond GRAPH_OPS */
};
struct cu_graph_exec_s {
    struct cu_graph_s g;
};
struct cu_stream_s {
    bool hung;
    struct cu_graph_s *capturing;
};
struct cu_event_s {
    long launches;
};

static size_t used;
static long launches;
long mock_graph_replays;
long mock_allocs;
/* Work a mock library did on the "device" (tests/cuda/mock_cudalibs.c): one launch's time
 * between events, so that its calls can be timed as kernels are. */
void wpk_mock_device_work(void);

static bool record(cu_stream s, mock_op op) {
    if (!s || !s->capturing) return false;
    if (s->capturing->n == GRAPH_OPS) s->capturing->broken = true;
    else s->capturing->ops[s->capturing->n++] = op;
    return true;
}

/* The kernels that compute: y[i] = 2 x[i] or x[i] + 1 over `elems` floats. */
static void run_kernel(cu_function f, unsigned elems, cu_deviceptr a0, cu_deviceptr a1) {
    const float *x = (const float *)(uintptr_t)a0;
    float *y = (float *)(uintptr_t)a1;
    if (!strcmp(f->name, "wpk_mock_scale2"))
        for (unsigned i = 0; i < elems; i++) y[i] = 2 * x[i];
    else if (!strcmp(f->name, "wpk_mock_add1"))
        for (unsigned i = 0; i < elems; i++) y[i] = x[i] + 1;
}
static struct cu_context_s {
    int unused;
} the_context;

/* exported: the driver's names and signatures */
cu_result cuInit(unsigned flags);
cu_result cuDriverGetVersion(int *v);
cu_result cuDeviceGetCount(int *n);
cu_result cuDeviceGet(cu_device *d, int ordinal);
cu_result cuDeviceGetName(char *name, int len, cu_device d);
cu_result cuDeviceGetAttribute(int *v, int attr, cu_device d);
cu_result cuDeviceTotalMem_v2(size_t *bytes, cu_device d);
cu_result cuDevicePrimaryCtxRetain(cu_context *c, cu_device d);
cu_result cuDevicePrimaryCtxRelease_v2(cu_device d);
cu_result cuCtxSetCurrent(cu_context c);
cu_result cuCtxSynchronize(void);
cu_result cuMemGetInfo_v2(size_t *free_b, size_t *total);
cu_result cuMemAlloc_v2(cu_deviceptr *p, size_t bytes);
cu_result cuMemFree_v2(cu_deviceptr p);
cu_result cuMemcpyHtoD_v2(cu_deviceptr dst, const void *src, size_t n);
cu_result cuMemcpyDtoH_v2(void *dst, cu_deviceptr src, size_t n);
cu_result cuMemcpyHtoDAsync_v2(cu_deviceptr dst, const void *src, size_t n, cu_stream s);
cu_result cuMemcpyDtoHAsync_v2(void *dst, cu_deviceptr src, size_t n, cu_stream s);
cu_result cuMemsetD8Async(cu_deviceptr dst, unsigned char v, size_t n, cu_stream s);
cu_result cuModuleLoadData(cu_module *m, const void *image);
cu_result cuModuleUnload(cu_module m);
cu_result cuModuleGetFunction(cu_function *f, cu_module m, const char *name);
cu_result cuFuncGetAttribute(int *v, int attr, cu_function f);
cu_result cuFuncSetAttribute(cu_function f, int attr, int v);
cu_result cuLaunchKernel(cu_function f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned shared, cu_stream s, void **params,
                         void **extra);
cu_result cuStreamCreate(cu_stream *s, unsigned flags);
cu_result cuStreamDestroy_v2(cu_stream s);
cu_result cuStreamSynchronize(cu_stream s);
cu_result cuStreamQuery(cu_stream s);
cu_result cuEventCreate(cu_event *e, unsigned flags);
cu_result cuEventDestroy_v2(cu_event e);
cu_result cuEventRecord(cu_event e, cu_stream s);
cu_result cuEventSynchronize(cu_event e);
cu_result cuEventElapsedTime_v2(float *ms, cu_event a, cu_event b);
cu_result cuGetErrorName(cu_result r, const char **s);
cu_result cuGetErrorString(cu_result r, const char **s);
cu_result cuMemAllocHost_v2(void **p, size_t bytes);
cu_result cuMemFreeHost(void *p);
cu_result cuMemcpyDtoDAsync_v2(cu_deviceptr dst, cu_deviceptr src, size_t n, cu_stream s);
cu_result cuStreamBeginCapture_v2(cu_stream s, int mode);
cu_result cuStreamEndCapture(cu_stream s, cu_graph *g);
cu_result cuGraphInstantiateWithFlags(cu_graph_exec *e, cu_graph g, unsigned long long flags);
cu_result cuGraphLaunch(cu_graph_exec e, cu_stream s);
cu_result cuGraphExecDestroy(cu_graph_exec e);
cu_result cuGraphDestroy(cu_graph g);

cu_result cuInit(unsigned flags) { return flags == 0 ? CU_SUCCESS : CU_ERROR_INVALID_VALUE; }
cu_result cuDriverGetVersion(int *v) { *v = 13000; return CU_SUCCESS; }
cu_result cuDeviceGetCount(int *n) { *n = 1; return CU_SUCCESS; }
cu_result cuDeviceGet(cu_device *d, int ordinal) {
    if (ordinal != 0) return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *d = 0;
    return CU_SUCCESS;
}
cu_result cuDeviceGetName(char *name, int len, cu_device d) {
    (void)d;
    strncpy(name, "wpk mock GPU", (size_t)len);
    return CU_SUCCESS;
}
cu_result cuDeviceGetAttribute(int *v, int attr, cu_device d) {
    (void)d;
    switch (attr) {
    case CU_ATTR_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_ATTR_MAX_SHARED_PER_BLOCK: *v = 48 * 1024; break;
    case CU_ATTR_MAX_SHARED_PER_BLOCK_OPTIN: *v = 227 * 1024; break;
    case CU_ATTR_SM_COUNT: *v = 132; break;
    case CU_ATTR_CC_MAJOR: *v = 9; break;
    case CU_ATTR_CC_MINOR: *v = 0; break;
    case CU_ATTR_L2_CACHE_SIZE: *v = 1 << 20; break;
    default: *v = 1; break;
    }
    return CU_SUCCESS;
}
cu_result cuDeviceTotalMem_v2(size_t *bytes, cu_device d) {
    (void)d;
    *bytes = MOCK_MEMORY;
    return CU_SUCCESS;
}
cu_result cuDevicePrimaryCtxRetain(cu_context *c, cu_device d) {
    (void)d;
    *c = &the_context;
    return CU_SUCCESS;
}
cu_result cuDevicePrimaryCtxRelease_v2(cu_device d) { (void)d; return CU_SUCCESS; }
cu_result cuCtxSetCurrent(cu_context c) { return c == &the_context ? CU_SUCCESS : CU_ERROR_INVALID_VALUE; }
cu_result cuCtxSynchronize(void) { return CU_SUCCESS; }
cu_result cuMemGetInfo_v2(size_t *free_b, size_t *total) {
    *free_b = MOCK_MEMORY - used;
    *total = MOCK_MEMORY;
    return CU_SUCCESS;
}

/* The driver owns what it allocates until it is freed or the process ends (a lost context's
 * objects are left to the exit): the mock keeps every live object reachable here, so that a
 * leak checker sees only what a caller really lost track of. */
#define MOCK_MAX_LIVE 4096
static void *live[MOCK_MAX_LIVE];

static void *keep(void *p) {
    for (int i = 0; p && i < MOCK_MAX_LIVE; i++)
        if (!live[i]) {
            live[i] = p;
            break;
        }
    return p;
}

static void drop(void *p) {
    for (int i = 0; p && i < MOCK_MAX_LIVE; i++)
        if (live[i] == p) {
            live[i] = NULL;
            break;
        }
    free(p);
}

/* every allocation carries its size in front of it */
cu_result cuMemAlloc_v2(cu_deviceptr *p, size_t bytes) {
    if (bytes > MOCK_MEMORY - used) return CU_ERROR_OUT_OF_MEMORY;
    mock_allocs++;
    size_t *b = keep(malloc(bytes + 16));
    if (!b) return CU_ERROR_OUT_OF_MEMORY;
    b[0] = bytes;
    used += bytes;
    *p = (cu_deviceptr)(uintptr_t)(b + 2);
    return CU_SUCCESS;
}
cu_result cuMemFree_v2(cu_deviceptr p) {
    size_t *b = (size_t *)(uintptr_t)p - 2;
    used -= b[0];
    drop(b);
    return CU_SUCCESS;
}
cu_result cuMemcpyHtoD_v2(cu_deviceptr dst, const void *src, size_t n) {
    memcpy((void *)(uintptr_t)dst, src, n);
    return CU_SUCCESS;
}
cu_result cuMemcpyDtoH_v2(void *dst, cu_deviceptr src, size_t n) {
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return CU_SUCCESS;
}
cu_result cuMemcpyHtoDAsync_v2(cu_deviceptr dst, const void *src, size_t n, cu_stream s) {
    if (record(s, (mock_op){.kind = 0, .dst = (void *)(uintptr_t)dst, .src = src, .n = n}))
        return CU_SUCCESS;
    return cuMemcpyHtoD_v2(dst, src, n);
}
cu_result cuMemcpyDtoHAsync_v2(void *dst, cu_deviceptr src, size_t n, cu_stream s) {
    if (record(s, (mock_op){.kind = 0, .dst = dst, .src = (const void *)(uintptr_t)src, .n = n}))
        return CU_SUCCESS;
    return cuMemcpyDtoH_v2(dst, src, n);
}
cu_result cuMemcpyDtoDAsync_v2(cu_deviceptr dst, cu_deviceptr src, size_t n, cu_stream s) {
    mock_op op = {.kind = 0, .dst = (void *)(uintptr_t)dst, .src = (const void *)(uintptr_t)src,
                  .n = n};
    if (!record(s, op)) memmove(op.dst, op.src, n);
    return CU_SUCCESS;
}
cu_result cuMemAllocHost_v2(void **p, size_t bytes) {
    mock_allocs++;
    *p = malloc(bytes ? bytes : 1);
    return *p ? CU_SUCCESS : CU_ERROR_OUT_OF_MEMORY;
}
cu_result cuMemFreeHost(void *p) {
    free(p);
    return CU_SUCCESS;
}
cu_result cuStreamBeginCapture_v2(cu_stream s, int mode) {
    if (s->capturing || mode < 0 || mode > 2) return CU_ERROR_INVALID_VALUE;
    s->capturing = calloc(1, sizeof *s->capturing);
    return s->capturing ? CU_SUCCESS : CU_ERROR_OUT_OF_MEMORY;
}
cu_result cuStreamEndCapture(cu_stream s, cu_graph *g) {
    if (!s->capturing) return CU_ERROR_INVALID_VALUE;
    *g = s->capturing;
    s->capturing = NULL;
    return (*g)->broken ? CU_ERROR_INVALID_VALUE : CU_SUCCESS;
}
cu_result cuGraphInstantiateWithFlags(cu_graph_exec *e, cu_graph g, unsigned long long flags) {
    (void)flags;
    *e = malloc(sizeof **e);
    if (!*e) return CU_ERROR_OUT_OF_MEMORY;
    (*e)->g = *g;
    return CU_SUCCESS;
}
cu_result cuGraphLaunch(cu_graph_exec e, cu_stream s) {
    if (s->capturing) return CU_ERROR_INVALID_VALUE;
    for (int i = 0; i < e->g.n; i++) {
        const mock_op *op = &e->g.ops[i];
        if (op->kind == 0) {
            memmove(op->dst, op->src, op->n);
        } else {
            run_kernel(op->f, op->elems, op->a0, op->a1);
            launches++;
        }
    }
    mock_graph_replays++;
    return CU_SUCCESS;
}
cu_result cuGraphExecDestroy(cu_graph_exec e) {
    free(e);
    return CU_SUCCESS;
}
cu_result cuGraphDestroy(cu_graph g) {
    free(g);
    return CU_SUCCESS;
}
cu_result cuMemsetD8Async(cu_deviceptr dst, unsigned char v, size_t n, cu_stream s) {
    (void)s;
    memset((void *)(uintptr_t)dst, v, n);
    return CU_SUCCESS;
}
cu_result cuModuleLoadData(cu_module *m, const void *image) {
    if (!image || !memcmp(image, "BADPTX", 6)) return CU_ERROR_INVALID_PTX;
    *m = calloc(1, sizeof **m);
    return *m ? CU_SUCCESS : CU_ERROR_OUT_OF_MEMORY;
}
cu_result cuModuleUnload(cu_module m) {
    for (int i = 0; i < m->n; i++) free(m->fns[i]);
    free(m);
    return CU_SUCCESS;
}
cu_result cuModuleGetFunction(cu_function *f, cu_module m, const char *name) {
    if (!strcmp(name, "missing")) return 500; /* CUDA_ERROR_NOT_FOUND */
    if (m->n == 16) return CU_ERROR_OUT_OF_MEMORY;
    *f = m->fns[m->n++] = calloc(1, sizeof **f);
    if (!*f) return CU_ERROR_OUT_OF_MEMORY;
    strncpy((*f)->name, name, sizeof (*f)->name - 1);
    return CU_SUCCESS;
}
cu_result cuFuncGetAttribute(int *v, int attr, cu_function f) {
    switch (attr) {
    case CU_FUNC_ATTR_NUM_REGS: *v = 40; break;
    case CU_FUNC_ATTR_LOCAL_SIZE_BYTES: *v = 0; break;
    case CU_FUNC_ATTR_MAX_THREADS_PER_BLOCK: *v = !strcmp(f->name, "heavy") ? 256 : 1024; break;
    default: return CU_ERROR_INVALID_VALUE;
    }
    return CU_SUCCESS;
}
cu_result cuFuncSetAttribute(cu_function f, int attr, int v) {
    if (attr != CU_FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES || v > 227 * 1024)
        return CU_ERROR_INVALID_VALUE;
    f->max_dynamic_shared = v;
    return CU_SUCCESS;
}
cu_result cuLaunchKernel(cu_function f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned shared, cu_stream s, void **params,
                         void **extra) {
    (void)extra, (void)gy, (void)gz;
    if ((unsigned long)bx * by * bz > 1024) return CU_ERROR_INVALID_VALUE;
    if (shared > 48 * 1024 && (int)shared > f->max_dynamic_shared) return CU_ERROR_INVALID_VALUE;
    if (!strcmp(f->name, "crash")) return CU_ERROR_ILLEGAL_ADDRESS;
    mock_op op = {.kind = 1, .f = f, .elems = gx * bx};
    if (!strncmp(f->name, "wpk_mock_", 9)) {
        op.a0 = *(cu_deviceptr *)params[0];
        op.a1 = *(cu_deviceptr *)params[1];
    }
    if (record(s, op)) return CU_SUCCESS;
    if (!strcmp(f->name, "spin")) s->hung = true;
    run_kernel(f, op.elems, op.a0, op.a1);
    launches++;
    return CU_SUCCESS;
}
cu_result cuStreamCreate(cu_stream *s, unsigned flags) {
    (void)flags;
    *s = keep(calloc(1, sizeof **s));
    return *s ? CU_SUCCESS : CU_ERROR_OUT_OF_MEMORY;
}
cu_result cuStreamDestroy_v2(cu_stream s) {
    drop(s);
    return CU_SUCCESS;
}
cu_result cuStreamSynchronize(cu_stream s) { return s->hung ? CU_ERROR_LAUNCH_TIMEOUT : CU_SUCCESS; }
cu_result cuStreamQuery(cu_stream s) { return s->hung ? CU_ERROR_NOT_READY : CU_SUCCESS; }
void wpk_mock_device_work(void) { launches++; }

cu_result cuEventCreate(cu_event *e, unsigned flags) {
    (void)flags;
    *e = keep(calloc(1, sizeof **e));
    return *e ? CU_SUCCESS : CU_ERROR_OUT_OF_MEMORY;
}
cu_result cuEventDestroy_v2(cu_event e) {
    drop(e);
    return CU_SUCCESS;
}
cu_result cuEventRecord(cu_event e, cu_stream s) {
    (void)s;
    e->launches = launches;
    return CU_SUCCESS;
}
cu_result cuEventSynchronize(cu_event e) { (void)e; return CU_SUCCESS; }
cu_result cuEventElapsedTime_v2(float *ms, cu_event a, cu_event b) {
    *ms = (float)(b->launches - a->launches) * LAUNCH_MS;
    return CU_SUCCESS;
}
cu_result cuGetErrorName(cu_result r, const char **s) {
    switch (r) {
    case CU_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CU_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CU_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CU_ERROR_INVALID_PTX: *s = "CUDA_ERROR_INVALID_PTX"; break;
    case CU_ERROR_ILLEGAL_ADDRESS: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
    case CU_ERROR_NOT_READY: *s = "CUDA_ERROR_NOT_READY"; break;
    default: *s = NULL; return CU_ERROR_INVALID_VALUE;
    }
    return CU_SUCCESS;
}
cu_result cuGetErrorString(cu_result r, const char **s) {
    *s = r == CU_ERROR_OUT_OF_MEMORY ? "out of memory" : "mock error";
    return CU_SUCCESS;
}
