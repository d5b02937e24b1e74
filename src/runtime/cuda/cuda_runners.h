/* cuda_runners.h -- what the CUDA backend (backend.c) and its step runners (runners.c) share;
 * internal to src/runtime/cuda. */
#ifndef WPK_RUNTIME_CUDA_CUDA_RUNNERS_H
#define WPK_RUNTIME_CUDA_CUDA_RUNNERS_H

#include "runtime/cuda/cuda_rt.h"

/* "cuda_kernel" and "cuda_copy", registered by rt_cuda_backend_create. */
extern const rt_runner rt_cuda_kernel_runner;
extern const rt_runner rt_cuda_copy_runner;

/* The backend's count of single kernel launches, which the kernel runner advances. */
int64_t *rt_cuda_backend_launch_count(rt_backend *b);

#endif
