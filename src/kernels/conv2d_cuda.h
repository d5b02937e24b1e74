/* conv2d_cuda.h -- the GPU convolution template (conv2d_cuda.c): a direct NCHW conv scheduled
 * for CUDA with Woodpecker-DL's knobs. It is not in the CPU registry (templates.c): the CUDA
 * target finds it through its own registry (templates_cuda.h). */
#ifndef WPK_KERNELS_CONV2D_CUDA_H
#define WPK_KERNELS_CONV2D_CUDA_H

#include "kernels/provider.h"

/* Knobs (names as tune_config_print writes them):
 *   thread_x, thread_y, thread_z  threads of a block along output columns, rows, channels
 *                                 (Woodpecker-DL's ThreadX/Y/Z); at most 1024 in all
 *   tile_x, tile_y, tile_z        outputs one thread computes along each (TileX/Y/Z): its
 *                                 register tile, at most 64 accumulators
 *   tile_rz                       input channels per reduction step (TileRZ); a divisor of the
 *                                 channels per group
 *   shared                        1: each reduction step first stages the block's input window and
 *                                 weights in shared memory (cooperative, coalesced loads)
 *   order                         the reduction loop order: 0 channels-outer (rc_o | threads |
 *                                 rc_i, kh, kw), 1 taps-inner-first (rc_o | threads | kh, kw,
 *                                 rc_i), 2 taps-outermost (kh, kw, rc_o | threads | rc_i: a
 *                                 smaller shared window per step)
 * A block covers thread_z*tile_z channels x thread_y*tile_y rows x thread_x*tile_x columns of
 * one image; the grid covers the (rounded up) output. A config whose block needs more threads
 * or shared memory than CONV2D_CUDA_MAX_SHARED / 1024 threads allow is WPK_ERR_INVALID_ARG from
 * build (the tuner records it as invalid). */
#define CONV2D_CUDA_MAX_SHARED (48 * 1024)
#define CONV2D_CUDA_MAX_ACCUM 64

extern const kernel_provider tune_conv2d_cuda;

/* The CUDA templates, NULL-terminated (the registry: src/kernels/templates_cuda.c). */
const kernel_provider *const *kernel_providers_cuda(void);

/* Bytes of shared memory a config of this task stages per reduction step (0 with shared off);
 * -1 when the task is not one this template takes. */
int64_t tune_conv2d_cuda_shared_bytes(const tune_task *t, const tune_space *s,
                                      const tune_config *cfg);


#endif
