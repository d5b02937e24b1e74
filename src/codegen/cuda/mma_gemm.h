/* mma_gemm.h -- CUDA C of a matrix product on tensor cores, printed from a mapping the ISA
 * mapper found onto mma.sync m16n8k8 TF32: one warp per 16 x 8 tile of C, fragments loaded
 * with the nest's own strides, the instruction as inline PTX. Without __CUDA_ARCH__ (the CPU
 * emulator of the tests) the same fragments go through a warp-wide software mma, so the
 * fragment layout is checked where there is no GPU. */
#ifndef WPK_CODEGEN_CUDA_MMA_GEMM_H
#define WPK_CODEGEN_CUDA_MMA_GEMM_H

#include "base/strbuf.h"
#include "codegen/cuda/cg_cuda.h"
#include "isa/mapper.h"

/* Append `extern "C" __global__ void name(const float *A, const float *B, float *C)` for
 * nest's accumulation mapped by m (intrinsic mma_m16n8k8_tf32): A and B are the nest's x and y
 * buffers in its argument order (x first), C its output, f32 in memory, converted to tf32 with
 * round-to-nearest (cvt.rna) and accumulated in f32. Every loop of the nest other than m, n, k
 * must have extent 1. *launch gets the grid (n / 8, m / 16) and one warp per block.
 * WPK_ERR_UNSUPPORTED naming the cause for another intrinsic or extra loops. */
wpk_status cg_cuda_mma_gemm_emit(wpk_context *ctx, const isa_nest *nest, const isa_mapping *m,
                                 const char *name, strbuf *out, cg_cuda_launch *launch);

#endif
