/* cuda_libs.h -- the CUDA vendor libraries: cuDNN's forward convolution, cuBLAS's sgemm and
 * cuBLASLt's matmul, each as a kernel_provider (lib_cudnn, lib_cublas, lib_cublaslt; listed by
 * lib_cuda_providers() in lib.h) over the device-level calls declared here, which measurements
 * and benchmarks also use directly. The libraries are loaded with dlopen when first needed
 * (runtime/cuda/loader.c); on a device d (runtime/cuda/cuda_rt.h), failures are reported on d's
 * context and classified with rt_cuda_last_fault(d).
 *
 * A provider's kernel runs on the device it was created for (kernel_device.cuda; a host device
 * is refused with WPK_ERR_UNSUPPORTED): the data of the tensors given to run are device
 * addresses (CUdeviceptr values cast to void *), except for the constant inputs, which create
 * copied into device memory the kernel owns. Kernels queue their work on d's stream and do not
 * wait for it. */
#ifndef WPK_KERNELS_VENDOR_CUDA_LIBS_H
#define WPK_KERNELS_VENDOR_CUDA_LIBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/provider.h"
#include "runtime/cuda/cuda_rt.h"

/* ---- the providers ---- */
extern const kernel_provider lib_cudnn;    /* Conv / wpk::FusedConv, NCHW 2-D; ReLU epilogue */
extern const kernel_provider lib_cublas;   /* Gemm / MatMul without an epilogue */
extern const kernel_provider lib_cublaslt; /* Gemm / MatMul / FusedGemm / FusedMatMul, bias+ReLU */

/* ---- cuDNN: forward convolution, every algorithm a config ---- */
typedef struct rt_conv_desc {
    int64_t n, c, h, w;      /* X, NCHW */
    int64_t k, kh, kw;       /* W [k, c/groups, kh, kw] */
    int64_t stride[2], pad[4], dilation[2], groups; /* pads top, left, bottom, right */
    bool bias, residual, relu; /* fused epilogue: y = relu(conv + bias + z) */
    bool tf32;               /* let cuDNN use TF32 tensor cores (faster, ~1e-3 relative error) */
} rt_conv_desc;

typedef struct rt_cudnn_conv rt_cudnn_conv;

/* cuDNN's version (9xxxx) when it loads, else 0 with the reason on ctx. */
size_t rt_cudnn_version(wpk_context *ctx);
/* A conv on device d. WPK_ERR_UNSUPPORTED when cuDNN is missing or the conv is not one it
 * takes (asymmetric pads; an epilogue other than bias/residual/relu). */
wpk_status rt_cudnn_conv_create(rt_cuda *d, const rt_conv_desc *desc, rt_cudnn_conv **out);
void rt_cudnn_conv_free(rt_cudnn_conv *c);
/* The forward algorithms cuDNN offers for this conv (ids 0..7, its own order of preference),
 * each a config: returns the count, algos[0..min(count, max)). */
int rt_cudnn_conv_algos(rt_cudnn_conv *c, int *algos, int max);
const char *rt_cudnn_algo_name(int algo);
/* Workspace bytes algo needs (WPK_ERR_UNSUPPORTED when it does not run this conv). */
wpk_status rt_cudnn_conv_workspace(rt_cudnn_conv *c, int algo, size_t *bytes);
/* Queue y = epilogue(conv(x, w)) with algo; bias and z are 0 when the desc has none; the
 * workspace (the conv's own, grown as needed) is allocated on first use of each size. */
wpk_status rt_cudnn_conv_run(rt_cudnn_conv *c, int algo, uint64_t x, uint64_t w, uint64_t bias,
                             uint64_t z, uint64_t y);

/* ---- cuBLAS ---- */
typedef struct rt_cublas rt_cublas;
wpk_status rt_cublas_create(rt_cuda *d, bool tf32, rt_cublas **out);
void rt_cublas_free(rt_cublas *b);
/* Row-major C[m, n] = A[m, k] * B (B is [k, n], or [n, k] when trans_b), queued on d's stream. */
wpk_status rt_cublas_matmul(rt_cublas *b, int64_t m, int64_t n, int64_t k, uint64_t a,
                            uint64_t bm, bool trans_b, uint64_t c);

/* ---- cuBLASLt: row-major GEMM with the bias / ReLU epilogue fused, each algorithm its
 * heuristic offers a config ---- */
typedef struct rt_gemm_desc {
    int64_t m, n, k;
    bool trans_a, trans_b;   /* A stored [k, m] / B stored [n, k] (Gemm's transA / transB) */
    bool bias, relu;         /* C[m, n] = relu(A B + bias[n]): Gemm's C as a row, FusedGemm */
    bool tf32;               /* TF32 tensor cores (else FP32 pedantic math) */
} rt_gemm_desc;

typedef struct rt_cublaslt_gemm rt_cublaslt_gemm;

#define RT_CUBLASLT_MAX_ALGOS 8
#define RT_CUBLASLT_MAX_WORKSPACE ((size_t)32 << 20)

/* Describe the product on device d and ask cuBLASLt's heuristic for up to RT_CUBLASLT_MAX_ALGOS
 * algorithms (each needing at most RT_CUBLASLT_MAX_WORKSPACE); the largest workspace among them
 * is allocated now. WPK_ERR_UNSUPPORTED when cuBLASLt is missing or offers no algorithm (the
 * message says which); WPK_ERR_NOMEM for device memory. *out is the caller's. */
wpk_status rt_cublaslt_gemm_create(rt_cuda *d, const rt_gemm_desc *g, rt_cublaslt_gemm **out);
void rt_cublaslt_gemm_free(rt_cublaslt_gemm *g);
/* How many algorithms (configs 0..n-1, the heuristic's order: its best first). */
int rt_cublaslt_gemm_configs(const rt_cublaslt_gemm *g);
/* Queue C = epilogue(A B) with algorithm `config` on d's stream; bias 0 unless the desc has one. */
wpk_status rt_cublaslt_gemm_run(rt_cublaslt_gemm *g, int config, uint64_t a, uint64_t b,
                                uint64_t bias, uint64_t c);

/* ---- shared by the three providers (cuda_libs.c) ---- */
#define LIB_CUDA_MAX_IN 4

/* A kernel's device copies of its node's constant inputs. */
typedef struct lib_cuda_consts {
    rt_cuda *d;                         /* borrowed: the device they live on */
    int nin;
    uint64_t ptr[LIB_CUDA_MAX_IN];      /* 0 where input i is not constant (or absent) */
} lib_cuda_consts;

/* WPK_ERR_UNSUPPORTED: provider self runs on a CUDA device, node n was asked of the host. */
wpk_status lib_cuda_device_only(wpk_context *ctx, const kernel_provider *self, const ir_node *n);
/* Copy every input of n whose tensor has data (host memory) into device memory on d, waiting
 * for the copies (the host data may go after). WPK_ERR_NOMEM / the device's error, on ctx
 * naming the node and provider `lib`, with nothing left allocated. */
wpk_status lib_cuda_consts_upload(wpk_context *ctx, rt_cuda *d, const char *lib,
                                  const ir_node *n, ir_tensor *const *in, lib_cuda_consts *c);
void lib_cuda_consts_free(lib_cuda_consts *c);
/* The device address of input i for a run: the kernel's copy of a constant, else the caller's
 * (in[i]->data), 0 where absent. */
uint64_t lib_cuda_in(const lib_cuda_consts *c, ir_tensor *const *in, int i);
/* Check a run's tensors (output 0 and every non-constant input present have data) for kernel
 * `name` of provider `lib`: WPK_ERR_INVALID_ARG naming the missing one. */
wpk_status lib_cuda_check_run(wpk_context *ctx, const char *name, const char *lib,
                              const lib_cuda_consts *c, ir_tensor *const *in,
                              ir_tensor *const *out);
/* st, with the message the device left on its own context copied to ctx as
 * "node '<name>' (<lib>): <message>" (WPK_OK passes through). */
wpk_status lib_cuda_relay(wpk_context *ctx, rt_cuda *d, const char *name, const char *lib,
                          wpk_status st);

#endif
