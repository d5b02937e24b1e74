/* layer_norm.h -- layer normalization (ONNX LayerNormalization, stash_type float32) as three
 * computes over the dims from `axis` on (d of them, D elements):
 *   mean[..., 0...] = sum(r...: x[..., r...] * (1/D))                    ("<name>.mean")
 *   var[..., 0...]  = sum(r...: (x[..., r...] - mean)^2 * (1/D))         ("<name>.var")
 *   out[...]        = (x - mean) * (1 / sqrt(var + epsilon)) * scale + bias   (`name`)
 * Statistics keep x's rank with the normalized dims 1; scale and bias broadcast
 * (numpy-style, right-aligned, size-1 dims repeat) to the normalized dims. */
#ifndef WPK_TE_ALGO_LAYER_NORM_H
#define WPK_TE_ALGO_LAYER_NORM_H

#include "te/algo/algo.h"

/* Layer norm of x over dims [axis, ndim) (negative axis counts from the end). scale is
 * required, bias may be NULL. parts: main/out the normalize, stats[0] mean, stats[1] variance.
 * NULL with a message for a bad axis or parameters that do not broadcast. */
te_tensor *te_layer_norm(te_ctx *c, const char *name, te_tensor *x, te_tensor *scale,
                         te_tensor *bias, int axis, float epsilon, te_algo_parts *parts);

/* The same with the mean computed twice: "<name>.mean" for the output, "<name>.var_mean"
 * (stats[2]) for the variance, so that a schedule computing each statistic inside its
 * consumer's loop (a GPU thread's row in registers) has one mean per consumer. */
te_tensor *te_layer_norm_split_mean(te_ctx *c, const char *name, te_tensor *x, te_tensor *scale,
                                    te_tensor *bias, int axis, float epsilon,
                                    te_algo_parts *parts);

/* The same over x viewed as [rows, groups, lanes] (the normalized D = groups * lanes elements
 * of a row in `groups` runs of `lanes`), each sum taken in two steps so a schedule can keep
 * its partial sums in vector lanes (float sums are not reassociated otherwise):
 *   lane_sum[r, 0, l] = sum(g: x[r, g, l])               ("<name>.lane_sum", lane_parts[0])
 *   mean[r, 0, 0]     = sum(l: lane_sum[r, 0, l] * (1/D))
 *   lane_var[r, 0, l] = sum(g: (x[r, g, l] - mean)^2)    ("<name>.lane_var", lane_parts[1])
 *   var[r, 0, 0]      = sum(l: lane_var[r, 0, l] * (1/D))
 * scale and bias (bias may be NULL) are [groups, lanes] or [1, 1]. parts as te_layer_norm's. */
te_tensor *te_layer_norm_lanes(te_ctx *c, const char *name, te_tensor *x, te_tensor *scale,
                               te_tensor *bias, float epsilon, te_algo_parts *parts,
                               te_tensor **lane_parts);

#endif
