/* loader.c -- finding the CUDA libraries at run time: dlopen of the driver (libcuda), cuDNN,
 * cuBLAS and cuBLASLt, and their function tables (cuda_api.h), each filled once per process.
 * $WPK_CUDA_DRIVER_LIBRARY, $WPK_CUDNN_LIBRARY, $WPK_CUBLAS_LIBRARY and $WPK_CUBLASLT_LIBRARY
 * name another file for each (the tests' mocks). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/cuda_api.h"

void *rt_cuda_dlopen_first(const char *const *names, int n, const char *what, char *why,
                           size_t cap) {
    char tried[512] = "", last[512] = "";
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
        const char *e = dlerror();
        snprintf(last, sizeof last, "%s", e ? e : "?");
        if (used < sizeof tried)
            used += (size_t)snprintf(tried + used, sizeof tried - used, "%s%s", i ? ", " : "",
                                     names[i]);
    }
    snprintf(why, cap, "no %s (tried %s; %s)", what, tried, last);
    return NULL;
}

void *rt_cuda_sym(void *lib, const char *a, const char *b) {
    void *p = dlsym(lib, a);
    if (!p && b) p = dlsym(lib, b);
    return p;
}

/* $env when set (tests: a mock library), else the first of names that loads. */
static void *open_lib(const char *env, const char *const *names, int n, const char *what,
                      char *why, size_t cap) {
    const char *path = getenv(env);
    if (path && *path) {
        const char *one[1] = {path};
        char label[128];
        snprintf(label, sizeof label, "%s ($%s)", what, env);
        return rt_cuda_dlopen_first(one, 1, label, why, cap);
    }
    return rt_cuda_dlopen_first(names, n, what, why, cap);
}

/* ---- the driver ---- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static rt_cu_api cu;
static bool cu_tried, cu_ok;
static char cu_why[768];

static void cu_bind(void) {
    /* libcuda.so.1 is what the driver installs; the toolkit's stubs/libcuda.so is never on the
     * search path we use (it would only answer CUDA_ERROR_STUB_LIBRARY) */
    static const char *const names[] = {"libcuda.so.1", "libcuda.so"};
    const char *env = getenv("WPK_CUDA_DRIVER_LIBRARY"); /* another driver (tests: a mock) */
    const char *one[1] = {env};
    void *lib = env && *env ? rt_cuda_dlopen_first(one, 1, "libcuda ($WPK_CUDA_DRIVER_LIBRARY)",
                                                   cu_why, sizeof cu_why)
                            : rt_cuda_dlopen_first(names, 2, "libcuda (the NVIDIA driver)", cu_why,
                                                   sizeof cu_why);
    if (!lib) return;
    const char *missing = NULL;
    RT_CUDA_BIND(lib, cu, init, "cuInit", NULL, &missing);
    RT_CUDA_BIND(lib, cu, driver_version, "cuDriverGetVersion", NULL, &missing);
    RT_CUDA_BIND(lib, cu, device_count, "cuDeviceGetCount", NULL, &missing);
    RT_CUDA_BIND(lib, cu, device_get, "cuDeviceGet", NULL, &missing);
    RT_CUDA_BIND(lib, cu, device_name, "cuDeviceGetName", NULL, &missing);
    RT_CUDA_BIND(lib, cu, device_attr, "cuDeviceGetAttribute", NULL, &missing);
    RT_CUDA_BIND(lib, cu, device_total_mem, "cuDeviceTotalMem_v2", NULL, &missing);
    RT_CUDA_BIND(lib, cu, primary_retain, "cuDevicePrimaryCtxRetain", NULL, &missing);
    RT_CUDA_BIND(lib, cu, primary_release, "cuDevicePrimaryCtxRelease_v2",
                 "cuDevicePrimaryCtxRelease", &missing);
    RT_CUDA_BIND(lib, cu, ctx_set_current, "cuCtxSetCurrent", NULL, &missing);
    RT_CUDA_BIND(lib, cu, ctx_synchronize, "cuCtxSynchronize", NULL, &missing);
    RT_CUDA_BIND(lib, cu, mem_get_info, "cuMemGetInfo_v2", NULL, &missing);
    RT_CUDA_BIND(lib, cu, mem_alloc, "cuMemAlloc_v2", NULL, &missing);
    RT_CUDA_BIND(lib, cu, mem_free, "cuMemFree_v2", NULL, &missing);
    RT_CUDA_BIND(lib, cu, memcpy_htod, "cuMemcpyHtoD_v2", NULL, &missing);
    RT_CUDA_BIND(lib, cu, memcpy_dtoh, "cuMemcpyDtoH_v2", NULL, &missing);
    RT_CUDA_BIND(lib, cu, memcpy_htod_async, "cuMemcpyHtoDAsync_v2", NULL, &missing);
    RT_CUDA_BIND(lib, cu, memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2", NULL, &missing);
    RT_CUDA_BIND(lib, cu, memset_d8_async, "cuMemsetD8Async", NULL, &missing);
    RT_CUDA_BIND(lib, cu, module_load_data, "cuModuleLoadData", NULL, &missing);
    RT_CUDA_BIND(lib, cu, module_unload, "cuModuleUnload", NULL, &missing);
    RT_CUDA_BIND(lib, cu, module_get_function, "cuModuleGetFunction", NULL, &missing);
    RT_CUDA_BIND(lib, cu, func_get_attr, "cuFuncGetAttribute", NULL, &missing);
    RT_CUDA_BIND(lib, cu, func_set_attr, "cuFuncSetAttribute", NULL, &missing);
    RT_CUDA_BIND(lib, cu, launch, "cuLaunchKernel", NULL, &missing);
    RT_CUDA_BIND(lib, cu, stream_create, "cuStreamCreate", NULL, &missing);
    RT_CUDA_BIND(lib, cu, stream_destroy, "cuStreamDestroy_v2", "cuStreamDestroy", &missing);
    RT_CUDA_BIND(lib, cu, stream_synchronize, "cuStreamSynchronize", NULL, &missing);
    RT_CUDA_BIND(lib, cu, stream_query, "cuStreamQuery", NULL, &missing);
    RT_CUDA_BIND(lib, cu, event_create, "cuEventCreate", NULL, &missing);
    RT_CUDA_BIND(lib, cu, event_destroy, "cuEventDestroy_v2", "cuEventDestroy", &missing);
    RT_CUDA_BIND(lib, cu, event_record, "cuEventRecord", NULL, &missing);
    RT_CUDA_BIND(lib, cu, event_synchronize, "cuEventSynchronize", NULL, &missing);
    /* CUDA 13 renamed it; older drivers have only the plain name (same signature) */
    RT_CUDA_BIND(lib, cu, event_elapsed, "cuEventElapsedTime_v2", "cuEventElapsedTime", &missing);
    RT_CUDA_BIND(lib, cu, error_name, "cuGetErrorName", NULL, &missing);
    RT_CUDA_BIND(lib, cu, error_string, "cuGetErrorString", NULL, &missing);
    const char *optional = NULL; /* their absence only turns the features off */
    RT_CUDA_BIND(lib, cu, mem_alloc_host, "cuMemAllocHost_v2", NULL, &optional);
    RT_CUDA_BIND(lib, cu, mem_free_host, "cuMemFreeHost", NULL, &optional);
    RT_CUDA_BIND(lib, cu, memcpy_dtod_async, "cuMemcpyDtoDAsync_v2", NULL, &optional);
    RT_CUDA_BIND(lib, cu, stream_begin_capture, "cuStreamBeginCapture_v2", NULL, &optional);
    RT_CUDA_BIND(lib, cu, stream_end_capture, "cuStreamEndCapture", NULL, &optional);
    RT_CUDA_BIND(lib, cu, graph_instantiate, "cuGraphInstantiateWithFlags", NULL, &optional);
    RT_CUDA_BIND(lib, cu, graph_launch, "cuGraphLaunch", NULL, &optional);
    RT_CUDA_BIND(lib, cu, graph_exec_destroy, "cuGraphExecDestroy", NULL, &optional);
    RT_CUDA_BIND(lib, cu, graph_destroy, "cuGraphDestroy", NULL, &optional);
    if (missing) {
        snprintf(cu_why, sizeof cu_why, "libcuda lacks %s (driver too old)", missing);
        dlclose(lib);
        return;
    }
    cu_ok = true;
}

const rt_cu_api *rt_cu_load(char *why, size_t cap) {
    pthread_mutex_lock(&lock);
    if (!cu_tried) {
        cu_tried = true;
        cu_bind();
    }
    bool ok = cu_ok;
    if (!ok) snprintf(why, cap, "%s", cu_why);
    pthread_mutex_unlock(&lock);
    return ok ? &cu : NULL;
}

const char *rt_cu_error_text(const rt_cu_api *api, cu_result r, char *buf, size_t cap) {
    const char *name = NULL, *text = NULL;
    if (api && api->error_name) api->error_name(r, &name);
    if (api && api->error_string) api->error_string(r, &text);
    snprintf(buf, cap, "%s (%s)", name ? name : "CUDA error", text ? text : "no description");
    if (!name) snprintf(buf, cap, "CUDA error %d", r);
    return buf;
}

/* ---- cuDNN ---- */

static rt_cudnn_api dnn;
static bool dnn_tried, dnn_ok;
static char dnn_why[768];

static void dnn_bind(void) {
    static const char *const names[] = {"libcudnn.so.9", "libcudnn.so",
                                        "/usr/local/cuda/lib64/libcudnn.so.9"};
    void *lib = open_lib("WPK_CUDNN_LIBRARY", names, 3, "cuDNN", dnn_why, sizeof dnn_why);
    if (!lib) return;
    const char *missing = NULL;
    RT_CUDA_BIND(lib, dnn, version, "cudnnGetVersion", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, error_string, "cudnnGetErrorString", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, create, "cudnnCreate", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, destroy, "cudnnDestroy", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, set_stream, "cudnnSetStream", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, create_tensor, "cudnnCreateTensorDescriptor", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, set_tensor4d, "cudnnSetTensor4dDescriptor", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, destroy_tensor, "cudnnDestroyTensorDescriptor", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, create_filter, "cudnnCreateFilterDescriptor", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, set_filter4d, "cudnnSetFilter4dDescriptor", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, destroy_filter, "cudnnDestroyFilterDescriptor", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, create_conv, "cudnnCreateConvolutionDescriptor", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, set_conv2d, "cudnnSetConvolution2dDescriptor", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, set_group_count, "cudnnSetConvolutionGroupCount", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, set_math_type, "cudnnSetConvolutionMathType", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, destroy_conv, "cudnnDestroyConvolutionDescriptor", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, create_act, "cudnnCreateActivationDescriptor", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, set_act, "cudnnSetActivationDescriptor", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, destroy_act, "cudnnDestroyActivationDescriptor", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, output_dim, "cudnnGetConvolution2dForwardOutputDim", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, get_algos, "cudnnGetConvolutionForwardAlgorithm_v7", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, workspace_size, "cudnnGetConvolutionForwardWorkspaceSize", NULL,
                 &missing);
    RT_CUDA_BIND(lib, dnn, forward, "cudnnConvolutionForward", NULL, &missing);
    RT_CUDA_BIND(lib, dnn, bias_act_forward, "cudnnConvolutionBiasActivationForward", NULL,
                 &missing);
    if (missing) {
        snprintf(dnn_why, sizeof dnn_why, "cuDNN lacks %s (the legacy convolution API)", missing);
        dlclose(lib);
        return;
    }
    dnn_ok = true;
}

const rt_cudnn_api *rt_cudnn_load(char *why, size_t cap) {
    pthread_mutex_lock(&lock);
    if (!dnn_tried) {
        dnn_tried = true;
        dnn_bind();
    }
    bool ok = dnn_ok;
    if (!ok) snprintf(why, cap, "%s", dnn_why);
    pthread_mutex_unlock(&lock);
    return ok ? &dnn : NULL;
}

/* ---- cuBLAS ---- */

static rt_cublas_api blas;
static bool blas_tried, blas_ok;
static char blas_why[768];

static void blas_bind(void) {
    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
                                        "/usr/local/cuda/lib64/libcublas.so"};
    void *lib = open_lib("WPK_CUBLAS_LIBRARY", names, 4, "cuBLAS", blas_why, sizeof blas_why);
    if (!lib) return;
    const char *missing = NULL;
    RT_CUDA_BIND(lib, blas, create, "cublasCreate_v2", NULL, &missing);
    RT_CUDA_BIND(lib, blas, destroy, "cublasDestroy_v2", NULL, &missing);
    RT_CUDA_BIND(lib, blas, version, "cublasGetVersion_v2", NULL, &missing);
    RT_CUDA_BIND(lib, blas, set_stream, "cublasSetStream_v2", NULL, &missing);
    RT_CUDA_BIND(lib, blas, set_math_mode, "cublasSetMathMode", NULL, &missing);
    RT_CUDA_BIND(lib, blas, status_string, "cublasGetStatusString", NULL, &missing);
    RT_CUDA_BIND(lib, blas, sgemm, "cublasSgemm_v2", NULL, &missing);
    if (missing) {
        snprintf(blas_why, sizeof blas_why, "cuBLAS lacks %s", missing);
        dlclose(lib);
        return;
    }
    blas_ok = true;
}

const rt_cublas_api *rt_cublas_load(char *why, size_t cap) {
    pthread_mutex_lock(&lock);
    if (!blas_tried) {
        blas_tried = true;
        blas_bind();
    }
    bool ok = blas_ok;
    if (!ok) snprintf(why, cap, "%s", blas_why);
    pthread_mutex_unlock(&lock);
    return ok ? &blas : NULL;
}

/* ---- cuBLASLt ---- */

static rt_cublaslt_api lt;
static bool lt_tried, lt_ok;
static char lt_why[768];

static void lt_bind(void) {
    static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so.12",
                                        "libcublasLt.so", "/usr/local/cuda/lib64/libcublasLt.so"};
    void *lib = open_lib("WPK_CUBLASLT_LIBRARY", names, 4, "cuBLASLt", lt_why, sizeof lt_why);
    if (!lib) return;
    const char *missing = NULL;
    RT_CUDA_BIND(lib, lt, create, "cublasLtCreate", NULL, &missing);
    RT_CUDA_BIND(lib, lt, destroy, "cublasLtDestroy", NULL, &missing);
    RT_CUDA_BIND(lib, lt, version, "cublasLtGetVersion", NULL, &missing);
    RT_CUDA_BIND(lib, lt, desc_create, "cublasLtMatmulDescCreate", NULL, &missing);
    RT_CUDA_BIND(lib, lt, desc_destroy, "cublasLtMatmulDescDestroy", NULL, &missing);
    RT_CUDA_BIND(lib, lt, desc_set, "cublasLtMatmulDescSetAttribute", NULL, &missing);
    RT_CUDA_BIND(lib, lt, layout_create, "cublasLtMatrixLayoutCreate", NULL, &missing);
    RT_CUDA_BIND(lib, lt, layout_destroy, "cublasLtMatrixLayoutDestroy", NULL, &missing);
    RT_CUDA_BIND(lib, lt, pref_create, "cublasLtMatmulPreferenceCreate", NULL, &missing);
    RT_CUDA_BIND(lib, lt, pref_destroy, "cublasLtMatmulPreferenceDestroy", NULL, &missing);
    RT_CUDA_BIND(lib, lt, pref_set, "cublasLtMatmulPreferenceSetAttribute", NULL, &missing);
    RT_CUDA_BIND(lib, lt, heuristic, "cublasLtMatmulAlgoGetHeuristic", NULL, &missing);
    RT_CUDA_BIND(lib, lt, matmul, "cublasLtMatmul", NULL, &missing);
    if (missing) {
        snprintf(lt_why, sizeof lt_why, "cuBLASLt lacks %s", missing);
        dlclose(lib);
        return;
    }
    lt_ok = true;
}

const rt_cublaslt_api *rt_cublaslt_load(char *why, size_t cap) {
    pthread_mutex_lock(&lock);
    if (!lt_tried) {
        lt_tried = true;
        lt_bind();
    }
    bool ok = lt_ok;
    if (!ok) snprintf(why, cap, "%s", lt_why);
    pthread_mutex_unlock(&lock);
    return ok ? &lt : NULL;
}
