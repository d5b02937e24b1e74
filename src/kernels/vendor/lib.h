/* lib.h -- vendor-library kernel providers (src/kernels/vendor): oneDNN and OpenBLAS kernels
 * for the nodes the cpu backend runs, offered as candidates next to the generated ones. Each
 * provider lists its algorithms for a node as configs; the tuner measures every one into the
 * records like any generated config, and the cpu backend runs the one measured fastest. Each
 * is a kernel_provider (kernels/provider.h) that makes its kernels at load time.
 *
 * Nodes are seen as the cpu backend sees them after optimization, with static float32 shapes:
 * Conv and wpk::FusedConv (NCHW; bias, fused activation and residual add as the node's
 * attributes and inputs say), wpk::ConvNCHWc (blocked tensors), Gemm / wpk::FusedGemm, MatMul /
 * wpk::FusedMatMul. A provider that cannot reproduce the node's exact semantics (an activation
 * the library has no post-op for, a layout it does not take) does not support it. */
#ifndef WPK_KERNELS_VENDOR_LIB_H
#define WPK_KERNELS_VENDOR_LIB_H

#include <stdbool.h>

#include "kernels/provider.h"

/* The describe, space and default_config every library provider shares: its workload key is
 * "<library>|" + the key the node's first DSL template gives (or "<library>|<op>:<shapes>" where
 * none takes it), so the records of one workload's implementations sit side by side; its space
 * is one knob, "algo", numbering its algorithms for the node; the default is the first. */
void lib_describe(const kernel_provider *self, tune_task *task);
void lib_space(const kernel_provider *self, const tune_task *task, tune_space *s);
void lib_default_config(const kernel_provider *self, const tune_task *task, const tune_space *s,
                        tune_config *out);

/* WPK_ERR_UNSUPPORTED: provider self runs on the host only, node n was asked of a device. */
wpk_status lib_host_only(wpk_context *ctx, const kernel_provider *self, const ir_node *n);

/* The providers built in, NULL-terminated (a library that was not found at build time is left
 * out). */
const kernel_provider *const *lib_providers(void);
/* The provider called name, or NULL. */
const kernel_provider *lib_provider_find(const char *name);

/* The CUDA libraries' providers (cuDNN, cuBLAS, cuBLASLt: kernels/vendor/cuda_libs.h),
 * NULL-terminated. They are always built in (the libraries are loaded with dlopen when a
 * kernel is made) and make kernels for a CUDA device only, so they are kept apart from the
 * host list above, which the cpu backend's choice and tuning read. */
const kernel_provider *const *lib_cuda_providers(void);
/* The CUDA provider called name ("cudnn", "cublas", "cublaslt"), or NULL. */
const kernel_provider *lib_cuda_provider_find(const char *name);

#endif
