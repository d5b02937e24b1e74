/* cg_cuda.h -- CUDA code generation from the loop IR (emit_cuda.c) and its compile driver, NVRTC
 * loaded with dlopen at run time (nvrtc.c): CUDA C source -> PTX (or a cubin) for one SM version.
 * Nothing here needs a GPU or links a CUDA library; loading and launching the result is the
 * runtime's business (src/runtime/cuda). */
#ifndef WPK_CODEGEN_CUDA_CG_CUDA_H
#define WPK_CODEGEN_CUDA_CG_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "loop/loop.h"

typedef struct cg_cuda_options {
    /* 0: 32-bit index arithmetic where it is provably safe (every buffer under 2^31 elements,
     * no 64-bit data, every constant and loop bound within 32 bits), else 64-bit; 32 or 64
     * force one (32 is refused where it is not safe). */
    int index_bits;
    /* float4 loads and stores for 4k-lane vectors at stride 1 whose alignment to 16 bytes is
     * proven; otherwise vectors are written lane by lane. */
    bool vector_access;
} cg_cuda_options;

cg_cuda_options cg_cuda_default_options(void);

/* How to launch an emitted kernel: grid and block dims from the loops bound to blockIdx and
 * threadIdx (each the largest min + extent over its loops; 1 when unbound) and the bytes of
 * dynamic shared memory the kernel's __shared__ buffers take. */
typedef struct cg_cuda_launch {
    int64_t grid[3];     /* x, y, z */
    int64_t block[3];
    int64_t shared_bytes;
} cg_cuda_launch;

/* Append the CUDA C source of f: `extern "C" __global__ void NAME(T *__restrict__ arg, ...)`
 * with one typed pointer parameter per f->args[i] in order (inputs never stored are const),
 * __launch_bounds__ from the block's thread count, and the device helpers its body uses.
 * NVRTC compiles it as C++ without any header. `launch` (may be NULL) receives the launch
 * description. Contract with the caller, as in the C target: argument i points at device memory
 * aligned to f->args[i]->align bytes (float4 accesses rely on it) and distinct arguments do not
 * overlap (__restrict__).
 * Mapping: a loop bound to blockIdx.x/y/z or threadIdx.x/y/z is not a loop: its variable is
 * the index, guarded by the loop's range where the range does not cover the whole dimension.
 * LOOP_SCOPE_SHARED buffers live in dynamic shared memory, each at its own offset;
 * __syncthreads() is placed, outside every thread-bound loop, wherever a group of threads may
 * read shared memory another wrote since the last barrier or overwrite what another may still
 * read (so before and after a cooperative load inside a reduction loop). LOOP_SCOPE_STACK
 * buffers are per-thread arrays; one allocated outside the thread-bound loops (a block tile's
 * accumulator) is privatized: each thread keeps only its own elements, reindexed compactly, so
 * that a fully unrolled tile stays in registers. Vector expressions use float4 where proven
 * aligned and are written lane by lane elsewhere. Integer DIV/MOD are floor operations, float
 * MIN/MAX keep a NaN first operand, as in the C target.
 * Refused with WPK_ERR_UNSUPPORTED and a message naming the loop or buffer: LOOP_PARALLEL loops
 * (a CPU annotation: bind the loop instead), heap intermediates, a blockIdx loop inside another
 * kind of loop, two loop nests over the same blocks in sequence, a store into an argument
 * outside the blockIdx loops of a multi-block grid, a thread-bound loop inside one of the same
 * tag, non-constant bound loop ranges, a shared buffer allocated inside a thread-bound loop or
 * both written and read inside one (no place for a barrier), and a block-level stack buffer
 * whose elements threads share in a way privatization cannot keep. WPK_ERR_INVALID_ARG for a
 * kernel name that is not a C identifier or malformed IR. `out` is appended to only on success;
 * deterministic for the same f and options. */
wpk_status cg_cuda_emit(wpk_context *ctx, const loop_func *f, const cg_cuda_options *opt,
                        strbuf *out, cg_cuda_launch *launch);

/* ---- NVRTC (nvrtc.c) ---- */

typedef struct cg_cuda_compile_options {
    int sm;          /* SM version as major*10 + minor: 90 for H100 (the default when 0) */
    bool cubin;      /* a cubin for sm_XX (no JIT at load) instead of PTX for compute_XX */
    bool line_info;  /* -lineinfo, for profilers */
} cg_cuda_compile_options;

cg_cuda_compile_options cg_cuda_default_compile_options(void);

/* A compiled module image: PTX text (NUL-terminated) or cubin bytes. */
typedef struct cg_cuda_image {
    void *data;       /* the caller's, freed with cg_cuda_image_free */
    size_t size;      /* bytes (PTX: including its NUL) */
    bool cubin;
    int sm;
} cg_cuda_image;

/* Whether NVRTC can be loaded; WPK_ERR_UNSUPPORTED naming every place tried otherwise. The
 * library is $WPK_NVRTC_LIBRARY when set, else libnvrtc.so.13, .so.12, .so from the dlopen
 * search path, then /usr/local/cuda/lib64. Loaded once per process. Thread-safe. */
wpk_status cg_cuda_nvrtc_available(wpk_context *ctx);
/* NVRTC's version (after a successful load): major * 1000 + minor * 10, e.g. 13000. */
int cg_cuda_nvrtc_version(void);

/* Compile CUDA C `source` (a kernel from cg_cuda_emit) into an image for opt->sm. Images are
 * cached under $WPK_CACHE_DIR/cuda (else $XDG_CACHE_HOME/wpk/kernels/cuda, else
 * ~/.cache/wpk/kernels/cuda) by the SHA-256 of source, options and NVRTC version, written
 * atomically, the source beside each image (KEY.cu); a source that failed is kept as
 * KEY.failed.cu. A compile error is WPK_ERR_INTERNAL carrying NVRTC's log; no NVRTC is
 * WPK_ERR_UNSUPPORTED; the cache directory not writable is WPK_ERR_IO. Thread-safe. */
wpk_status cg_cuda_compile(wpk_context *ctx, const char *source, const cg_cuda_compile_options *opt,
                           cg_cuda_image *out);
/* NVRTC runs so far in this process (cache hits run none): for tests. Thread-safe. */
int cg_cuda_compile_count(void);
void cg_cuda_image_free(cg_cuda_image *img);

#endif
