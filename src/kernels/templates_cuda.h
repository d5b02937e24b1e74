/* templates_cuda.h -- the CUDA target's schedule templates and their registry (templates_cuda.c),
 * kept apart from the CPU registry (templates.c) so that the cpu backend never picks a GPU
 * template and the CUDA target never a CPU one. Each template emits one CUDA kernel per node
 * through the loop IR and src/codegen/cuda, with its loops bound to blockIdx / threadIdx.
 *
 *   conv2d_cuda       Conv / wpk::FusedConv (conv2d_cuda.h: Woodpecker-DL's knobs)
 *   dense_cuda        Gemm / wpk::FusedGemm, MatMul / wpk::FusedMatMul (batch dims folded
 *                     into rows, or over blockIdx.z): a tiled GEMM with register tiles and
 *                     shared-memory staging (dense_cuda.c)
 *   pool2d_cuda       MaxPool / AveragePool on NCHW (injective_cuda.c)
 *   global_pool_cuda  GlobalAveragePool / GlobalMaxPool (injective_cuda.c)
 *   elementwise_cuda  the unary activations and math functions, broadcasting Add/Sub/Mul/Div/Pow
 *                     (injective_cuda.c)
 *   softmax_cuda      Softmax, one row per thread (softmax_cuda.c)
 *   concat_cuda, transpose_cuda, slice_cuda, reduce_mean_cuda   Concat (up to
 *                     TUNE_MAX_ARGS inputs), Transpose, Slice and ReduceMean with constant
 *                     parameters (movement_cuda.c)
 *   pad_cuda          Pad with constant pads, any mode, crops too (movement_cuda.c)
 *   gather_cuda       Gather with constant indices in an arithmetic sequence (movement_cuda.c)
 *   layernorm_cuda    LayerNormalization / wpk::LayerNormalization, one row per thread
 *                     (layernorm_cuda.c)
 */
#ifndef WPK_KERNELS_TEMPLATES_CUDA_H
#define WPK_KERNELS_TEMPLATES_CUDA_H

#include "kernels/provider.h"
#include "kernels/conv2d_cuda.h"

extern const kernel_provider tune_dense_cuda;
extern const kernel_provider tune_pool2d_cuda;
extern const kernel_provider tune_global_pool_cuda;
extern const kernel_provider tune_elementwise_cuda;
extern const kernel_provider tune_softmax_cuda;
extern const kernel_provider tune_concat_cuda;
extern const kernel_provider tune_transpose_cuda;
extern const kernel_provider tune_reduce_mean_cuda;
extern const kernel_provider tune_slice_cuda;
extern const kernel_provider tune_pad_cuda;
extern const kernel_provider tune_gather_cuda;
extern const kernel_provider tune_layernorm_cuda;

/* Every CUDA template, NULL-terminated, in order of preference (declared in conv2d_cuda.h too,
 * where it was first). */
const kernel_provider *const *kernel_providers_cuda(void);
/* The CUDA template for node n (the first that supports it), or NULL: the node has no generated
 * GPU kernel (the CUDA target then needs a library kernel for it, or refuses the model). */
const kernel_provider *kernel_provider_cuda_for(const ir_node *n, ir_tensor *const *in,
                                            ir_tensor *const *out);
/* The CUDA template called name ("dense_cuda"), or NULL. */
const kernel_provider *kernel_provider_cuda_find(const char *name);

/* ---- what the CUDA schedules share (sched_cuda.c) ---- */

/* The flat GPU schedule of an injective output y: a fresh schedule of y whose axes are fused
 * into one index space over the grid, `threads` per block, `per` elements per thread (coalesced:
 * thread t of step u handles block * per * threads + u * threads + t), `vec` > 1 making each
 * element a group of vec consecutive ones along the last axis (vectorized); every other compute
 * inlined, reductions accumulated per thread in registers. *out (the schedule) is set even on
 * failure, with the primitive's message on c (tmpl names the template). */
wpk_status tune_cuda_schedule_flat(te_ctx *c, const char *tmpl, te_tensor *y, int64_t threads,
                                   int64_t per, int64_t vec, te_schedule **out);
/* Its knobs for task t: "threads", "per_thread" and, with vec_knob, "vec" (4 offered when
 * vec_ok). Configs are stored by their text, so a template keeps the knobs it was measured with. */
void tune_cuda_flat_space(const tune_task *t, tune_space *s, bool vec_knob, bool vec_ok);
/* 256 threads (fewer for small outputs), one element each: enough blocks to fill the SMs for all
 * but the smallest outputs; float4 where vec_ok and the output is large. */
void tune_cuda_flat_default(const tune_task *t, const tune_space *s, bool vec_ok,
                            tune_config *cfg);
/* tune_cuda_schedule_flat of out's last argument (the output) with cfg's knobs, into
 * out->schedule. */
wpk_status tune_cuda_build_flat(const kernel_provider *self, te_ctx *c, const tune_space *s,
                                const tune_config *cfg, tune_build *out);

/* The smallest power of two >= v. */
int64_t tune_cuda_pow2_at_least(int64_t v);
/* A knob of the values of cand[0..n) that are at most limit (the first one always). */
void tune_cuda_add_upto(tune_space *s, const char *name, const int64_t *cand, int n,
                        int64_t limit);
/* A shared-memory stage copied by the whole block: its axes fused and spread over ndims (2 or 3)
 * thread dims with threads[0] (x), threads[1] (y), threads[2] (z) threads, x fastest, so
 * consecutive threads copy consecutive elements. */
wpk_status tune_cuda_cooperative(te_stage *st, int ndims, const int64_t *threads);

/* Limits every CUDA template keeps to (a block's threads, one thread's accumulators, the static
 * shared memory a block may take without opting in): configs beyond them are
 * WPK_ERR_INVALID_ARG from build and false from the templates' legality checks. */
#define CUDA_MAX_THREADS 1024
#define CUDA_MAX_ACCUM 64
#define CUDA_MAX_SHARED (48 * 1024)

#endif
