/* cuda_api.h -- the CUDA libraries as the runtime sees them: a table of function pointers per
 * library (driver, cuDNN, cuBLAS), filled by dlopen/dlsym at run time, and the few types and
 * constants those functions use, declared here so that building needs no CUDA header and no
 * CUDA library. Internal to src/runtime/cuda. Values and signatures are the libraries' ABI
 * (CUDA driver API 12/13, cuDNN 9's legacy convolution API, cuBLAS v2 API). */
#ifndef WPK_RUNTIME_CUDA_CUDA_API_H
#define WPK_RUNTIME_CUDA_CUDA_API_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/cuda/cuda_rt.h"
#include "wpk_runtime.h"

/* ---- driver API ---- */
typedef int cu_result;               /* CUresult: 0 is CUDA_SUCCESS */
typedef int cu_device;
typedef struct cu_context_s *cu_context;
typedef struct cu_module_s *cu_module;
typedef struct cu_function_s *cu_function;
typedef struct cu_stream_s *cu_stream;
typedef struct cu_event_s *cu_event;
typedef struct cu_graph_s *cu_graph;
typedef struct cu_graph_exec_s *cu_graph_exec;
typedef unsigned long long cu_deviceptr;

enum {
    CU_SUCCESS = 0, CU_ERROR_INVALID_VALUE = 1, CU_ERROR_OUT_OF_MEMORY = 2,
    CU_ERROR_NOT_INITIALIZED = 3, CU_ERROR_STUB_LIBRARY = 34, CU_ERROR_NO_DEVICE = 100,
    CU_ERROR_NO_BINARY_FOR_GPU = 209, CU_ERROR_INVALID_PTX = 218,
    CU_ERROR_UNSUPPORTED_PTX_VERSION = 222, CU_ERROR_NOT_READY = 600,
    CU_ERROR_ILLEGAL_ADDRESS = 700, CU_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    CU_ERROR_LAUNCH_TIMEOUT = 702, CU_ERROR_LAUNCH_FAILED = 719
};
enum {
    CU_ATTR_MAX_THREADS_PER_BLOCK = 1, CU_ATTR_MAX_SHARED_PER_BLOCK = 8,
    CU_ATTR_CLOCK_RATE = 13, CU_ATTR_SM_COUNT = 16, CU_ATTR_MEMORY_CLOCK_RATE = 36,
    CU_ATTR_MEMORY_BUS_WIDTH = 37, CU_ATTR_L2_CACHE_SIZE = 38, CU_ATTR_CC_MAJOR = 75,
    CU_ATTR_CC_MINOR = 76, CU_ATTR_MAX_SHARED_PER_BLOCK_OPTIN = 97
};
enum {
    CU_FUNC_ATTR_MAX_THREADS_PER_BLOCK = 0, CU_FUNC_ATTR_LOCAL_SIZE_BYTES = 3,
    CU_FUNC_ATTR_NUM_REGS = 4, CU_FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
};
#define CU_STREAM_NON_BLOCKING 1u
#define CU_EVENT_DEFAULT 0u

typedef struct rt_cu_api {
    cu_result (*init)(unsigned);
    cu_result (*driver_version)(int *);
    cu_result (*device_count)(int *);
    cu_result (*device_get)(cu_device *, int);
    cu_result (*device_name)(char *, int, cu_device);
    cu_result (*device_attr)(int *, int, cu_device);
    cu_result (*device_total_mem)(size_t *, cu_device);
    cu_result (*primary_retain)(cu_context *, cu_device);
    cu_result (*primary_release)(cu_device);
    cu_result (*ctx_set_current)(cu_context);
    cu_result (*ctx_synchronize)(void);
    cu_result (*mem_get_info)(size_t *, size_t *);
    cu_result (*mem_alloc)(cu_deviceptr *, size_t);
    cu_result (*mem_free)(cu_deviceptr);
    cu_result (*memcpy_htod)(cu_deviceptr, const void *, size_t);
    cu_result (*memcpy_dtoh)(void *, cu_deviceptr, size_t);
    cu_result (*memcpy_htod_async)(cu_deviceptr, const void *, size_t, cu_stream);
    cu_result (*memcpy_dtoh_async)(void *, cu_deviceptr, size_t, cu_stream);
    cu_result (*memset_d8_async)(cu_deviceptr, unsigned char, size_t, cu_stream);
    cu_result (*module_load_data)(cu_module *, const void *);
    cu_result (*module_unload)(cu_module);
    cu_result (*module_get_function)(cu_function *, cu_module, const char *);
    cu_result (*func_get_attr)(int *, int, cu_function);
    cu_result (*func_set_attr)(cu_function, int, int);
    cu_result (*launch)(cu_function, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, cu_stream, void **, void **);
    cu_result (*stream_create)(cu_stream *, unsigned);
    cu_result (*stream_destroy)(cu_stream);
    cu_result (*stream_synchronize)(cu_stream);
    cu_result (*stream_query)(cu_stream);
    cu_result (*event_create)(cu_event *, unsigned);
    cu_result (*event_destroy)(cu_event);
    cu_result (*event_record)(cu_event, cu_stream);
    cu_result (*event_synchronize)(cu_event);
    cu_result (*event_elapsed)(float *, cu_event, cu_event);
    cu_result (*error_name)(cu_result, const char **);
    cu_result (*error_string)(cu_result, const char **);
    /* optional (NULL when the driver lacks them): pinned host memory, device-to-device copies,
     * CUDA Graphs (stream capture) */
    cu_result (*mem_alloc_host)(void **, size_t);
    cu_result (*mem_free_host)(void *);
    cu_result (*memcpy_dtod_async)(cu_deviceptr, cu_deviceptr, size_t, cu_stream);
    cu_result (*stream_begin_capture)(cu_stream, int);
    cu_result (*stream_end_capture)(cu_stream, cu_graph *);
    cu_result (*graph_instantiate)(cu_graph_exec *, cu_graph, unsigned long long);
    cu_result (*graph_launch)(cu_graph_exec, cu_stream);
    cu_result (*graph_exec_destroy)(cu_graph_exec);
    cu_result (*graph_destroy)(cu_graph);
} rt_cu_api;

#define CU_STREAM_CAPTURE_MODE_THREAD_LOCAL 1

/* The driver API, loaded once per process (libcuda.so.1, then libcuda.so; never the toolkit's
 * stub). NULL with the reason in why[0..cap) when the library is missing or lacks a function. */
const rt_cu_api *rt_cu_load(char *why, size_t cap);
/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for r, into buf. */
const char *rt_cu_error_text(const rt_cu_api *cu, cu_result r, char *buf, size_t cap);

/* ---- cuDNN (legacy convolution API) ---- */
typedef int cudnn_status;            /* 0 is CUDNN_STATUS_SUCCESS */
typedef struct cudnn_context_s *cudnn_handle;
typedef struct cudnn_tensor_s *cudnn_tensor_desc;
typedef struct cudnn_filter_s *cudnn_filter_desc;
typedef struct cudnn_conv_s *cudnn_conv_desc;
typedef struct cudnn_act_s *cudnn_act_desc;

enum { CUDNN_NCHW = 0, CUDNN_FLOAT = 0, CUDNN_XCORR = 1, CUDNN_MATH_DEFAULT = 0,
       CUDNN_MATH_FMA = 3, CUDNN_ACT_RELU = 1, CUDNN_ACT_IDENTITY = 5, CUDNN_NAN_PROPAGATE = 1,
       CUDNN_ALGO_COUNT = 8 };

typedef struct cudnn_algo_perf {     /* cudnnConvolutionFwdAlgoPerf_t */
    int algo;
    cudnn_status status;
    float time;
    size_t memory;
    int determinism;
    int math_type;
    int reserved[3];
} cudnn_algo_perf;

typedef struct rt_cudnn_api {
    size_t (*version)(void);
    const char *(*error_string)(cudnn_status);
    cudnn_status (*create)(cudnn_handle *);
    cudnn_status (*destroy)(cudnn_handle);
    cudnn_status (*set_stream)(cudnn_handle, cu_stream);
    cudnn_status (*create_tensor)(cudnn_tensor_desc *);
    cudnn_status (*set_tensor4d)(cudnn_tensor_desc, int, int, int, int, int, int);
    cudnn_status (*destroy_tensor)(cudnn_tensor_desc);
    cudnn_status (*create_filter)(cudnn_filter_desc *);
    cudnn_status (*set_filter4d)(cudnn_filter_desc, int, int, int, int, int, int);
    cudnn_status (*destroy_filter)(cudnn_filter_desc);
    cudnn_status (*create_conv)(cudnn_conv_desc *);
    cudnn_status (*set_conv2d)(cudnn_conv_desc, int, int, int, int, int, int, int, int);
    cudnn_status (*set_group_count)(cudnn_conv_desc, int);
    cudnn_status (*set_math_type)(cudnn_conv_desc, int);
    cudnn_status (*destroy_conv)(cudnn_conv_desc);
    cudnn_status (*create_act)(cudnn_act_desc *);
    cudnn_status (*set_act)(cudnn_act_desc, int, int, double);
    cudnn_status (*destroy_act)(cudnn_act_desc);
    cudnn_status (*output_dim)(cudnn_conv_desc, cudnn_tensor_desc, cudnn_filter_desc, int *,
                               int *, int *, int *);
    cudnn_status (*get_algos)(cudnn_handle, cudnn_tensor_desc, cudnn_filter_desc, cudnn_conv_desc,
                              cudnn_tensor_desc, int, int *, cudnn_algo_perf *);
    cudnn_status (*workspace_size)(cudnn_handle, cudnn_tensor_desc, cudnn_filter_desc,
                                   cudnn_conv_desc, cudnn_tensor_desc, int, size_t *);
    cudnn_status (*forward)(cudnn_handle, const void *, cudnn_tensor_desc, const void *,
                            cudnn_filter_desc, const void *, cudnn_conv_desc, int, void *, size_t,
                            const void *, cudnn_tensor_desc, void *);
    cudnn_status (*bias_act_forward)(cudnn_handle, const void *, cudnn_tensor_desc, const void *,
                                     cudnn_filter_desc, const void *, cudnn_conv_desc, int, void *,
                                     size_t, const void *, cudnn_tensor_desc, const void *,
                                     cudnn_tensor_desc, const void *, cudnn_act_desc,
                                     cudnn_tensor_desc, void *);
} rt_cudnn_api;

const rt_cudnn_api *rt_cudnn_load(char *why, size_t cap);

/* ---- cuBLAS ---- */
typedef int cublas_status;           /* 0 is CUBLAS_STATUS_SUCCESS */
typedef struct cublas_context_s *cublas_handle;
enum { CUBLAS_N = 0, CUBLAS_T = 1, CUBLAS_MATH_DEFAULT = 0, CUBLAS_MATH_PEDANTIC = 2,
       CUBLAS_MATH_TF32 = 3, CUBLAS_ALLOC_FAILED = 3 };

typedef struct rt_cublas_api {
    cublas_status (*create)(cublas_handle *);
    cublas_status (*destroy)(cublas_handle);
    cublas_status (*version)(cublas_handle, int *);
    cublas_status (*set_stream)(cublas_handle, cu_stream);
    cublas_status (*set_math_mode)(cublas_handle, int);
    const char *(*status_string)(cublas_status);
    cublas_status (*sgemm)(cublas_handle, int, int, int, int, int, const float *, const float *,
                           int, const float *, int, const float *, float *, int);
} rt_cublas_api;

const rt_cublas_api *rt_cublas_load(char *why, size_t cap);

/* ---- cuBLASLt ---- */
typedef struct cublaslt_context_s *cublaslt_handle;
typedef struct cublaslt_desc_s *cublaslt_desc;
typedef struct cublaslt_layout_s *cublaslt_layout;
typedef struct cublaslt_pref_s *cublaslt_pref;

typedef struct cublaslt_algo {       /* cublasLtMatmulAlgo_t: opaque, 64 bytes */
    unsigned long long data[8];
} cublaslt_algo;

typedef struct cublaslt_heuristic {  /* cublasLtMatmulHeuristicResult_t */
    cublaslt_algo algo;
    size_t workspace;
    cublas_status state;
    float waves;
    int reserved[4];
} cublaslt_heuristic;

enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_PEDANTIC = 69,
       CUBLAS_COMPUTE_32F_FAST_TF32 = 77, CUDA_R_32F = 0 };
enum { CUBLASLT_DESC_TRANSA = 3, CUBLASLT_DESC_TRANSB = 4, CUBLASLT_DESC_EPILOGUE = 7,
       CUBLASLT_DESC_BIAS_POINTER = 8, CUBLASLT_PREF_MAX_WORKSPACE = 1 };
enum { CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_RELU = 2, CUBLASLT_EPILOGUE_BIAS = 4,
       CUBLASLT_EPILOGUE_RELU_BIAS = 6 };

typedef struct rt_cublaslt_api {
    cublas_status (*create)(cublaslt_handle *);
    cublas_status (*destroy)(cublaslt_handle);
    size_t (*version)(void);
    cublas_status (*desc_create)(cublaslt_desc *, int, int);
    cublas_status (*desc_destroy)(cublaslt_desc);
    cublas_status (*desc_set)(cublaslt_desc, int, const void *, size_t);
    cublas_status (*layout_create)(cublaslt_layout *, int, unsigned long long, unsigned long long,
                                   long long);
    cublas_status (*layout_destroy)(cublaslt_layout);
    cublas_status (*pref_create)(cublaslt_pref *);
    cublas_status (*pref_destroy)(cublaslt_pref);
    cublas_status (*pref_set)(cublaslt_pref, int, const void *, size_t);
    cublas_status (*heuristic)(cublaslt_handle, cublaslt_desc, cublaslt_layout, cublaslt_layout,
                               cublaslt_layout, cublaslt_layout, cublaslt_pref, int,
                               cublaslt_heuristic *, int *);
    cublas_status (*matmul)(cublaslt_handle, cublaslt_desc, const void *, const void *,
                            cublaslt_layout, const void *, cublaslt_layout, const void *,
                            const void *, cublaslt_layout, void *, cublaslt_layout,
                            const cublaslt_algo *, void *, size_t, cu_stream);
} rt_cublaslt_api;

const rt_cublaslt_api *rt_cublaslt_load(char *why, size_t cap);

/* For the library providers (cudnn.c, cublas.c) and the step runners (runners.c): the device's
 * error context, the class of a failure they report on it, the driver table, and a driver
 * failure reported and classified as the device's own are (WPK_OK for CU_SUCCESS). */
wpk_context *rt_cuda_ctx(const rt_cuda *d);
void rt_cuda_set_fault(rt_cuda *d, rt_cuda_fault f);
const rt_cu_api *rt_cuda_cu(const rt_cuda *d);
wpk_status rt_cuda_check(rt_cuda *d, cu_result r, const char *what);

/* dlopen the first of names[] that loads (RTLD_NOW | RTLD_LOCAL); NULL with what was tried and
 * the last dlerror in why. */
void *rt_cuda_dlopen_first(const char *const *names, int n, const char *what, char *why, size_t cap);
/* The first of the names a .. b (b may be NULL) that lib exports, or NULL. */
void *rt_cuda_sym(void *lib, const char *a, const char *b);

/* Bind function pointer `field` of struct `api` to symbol `name` (or `alt`), noting the first
 * missing name in *missing. dlsym's data pointers convert to function pointers (POSIX). */
#define RT_CUDA_BIND(lib, api, field, name, alt, missing)                                  \
    do {                                                                                   \
        void *p_ = rt_cuda_sym((lib), (name), (alt));                                      \
        if (!p_ && !*(missing)) *(missing) = (name);                                       \
        memcpy(&(api).field, &p_, sizeof p_);                                              \
    } while (0)

#endif
