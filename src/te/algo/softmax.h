/* softmax.h -- softmax along one axis as three computes (ONNX opset 13's Softmax; the
 * frontend turns older opsets' flattening into this form):
 *   max[..., 0, ...] = max(k: x[..., k, ...])                          ("<name>.max")
 *   sum[..., 0, ...] = sum(k: exp(x[..., k, ...] - max[..., 0, ...]))  ("<name>.sum")
 *   out[...]         = exp(x[...] - max[..., 0, ...]) / sum[..., 0, ...]  (`name`)
 * The statistics keep x's rank with the axis' dim 1. Subtracting the max keeps exp from
 * overflowing; the divide recomputes exp rather than storing it (one pass less over memory). */
#ifndef WPK_TE_ALGO_SOFTMAX_H
#define WPK_TE_ALGO_SOFTMAX_H

#include "te/algo/algo.h"

/* Softmax of x (float32) along `axis` (negative counts from the end). parts: main/out the
 * divide, stats[0] the max, stats[1] the sum. NULL with a message for a bad axis. */
te_tensor *te_softmax(te_ctx *c, const char *name, te_tensor *x, int axis, te_algo_parts *parts);

/* The same with the max computed twice: "<name>.max" for the divide, "<name>.sum_max" (stats[2])
 * for the exp-sum. A schedule that computes each statistic inside its consumer's loop (a GPU
 * thread's row in registers) needs one max per consumer: a compute placed inside another's loop
 * serves that one. */
te_tensor *te_softmax_split_max(te_ctx *c, const char *name, te_tensor *x, int axis,
                                te_algo_parts *parts);

#endif
