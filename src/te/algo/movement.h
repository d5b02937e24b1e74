/* movement.h -- data movement and a mean as tensor expressions: Concat, Transpose, an affine
 * Slice and ReduceMean. Each output element reads its inputs at computed indices; nothing is
 * copied twice. Shapes come resolved (ONNX's negative axes, Slice's clamping: the template's
 * reader), so these check only that the pieces fit. */
#ifndef WPK_TE_ALGO_MOVEMENT_H
#define WPK_TE_ALGO_MOVEMENT_H

#include "te/algo/algo.h"

/* xs[0..n) (float32, equal ranks, equal dims but along `axis`) joined along axis: a select over
 * the inputs, from the last back, each load's index clamped into its input so the discarded
 * sides stay in bounds. */
te_tensor *te_concat(te_ctx *c, const char *name, te_tensor *const *xs, int n, int axis);

/* out[i...] = x[j...] with j[perm[d]] = i[d]: output axis d is input axis perm[d]. */
te_tensor *te_transpose(te_ctx *c, const char *name, te_tensor *x, const int *perm);

/* out[i...] = x[start + step * i...] over `shape` (per dim; steps may be negative): a Slice
 * whose starts and steps are resolved. The caller guarantees every read point is inside x. */
te_tensor *te_slice_affine(te_ctx *c, const char *name, te_tensor *x, const int64_t *shape,
                           const int64_t *start, const int64_t *step);

/* ONNX Gather of x along `axis` with indices of shape idx_dims (nidx dims, 0: a scalar) whose
 * values, flattened, are start, start + step, ...: out has x's dims before axis, then
 * idx_dims, then x's after it (a 0-d result as [1]). Every index must lie inside x. */
te_tensor *te_gather_affine(te_ctx *c, const char *name, te_tensor *x, int axis, int nidx,
                            const int64_t *idx_dims, int64_t start, int64_t step);

/* The mean of x over the axes with reduced[d] set, keeping them as dims of 1 (keep) or dropping
 * them: "<name>.sum" (the reduction, axes r<d>) and `name` = sum / count, the divide
 * ReduceMean's reference kernel does. parts: main the sum, epilogue/out the divide. */
te_tensor *te_reduce_mean(te_ctx *c, const char *name, te_tensor *x, const bool *reduced,
                          bool keep, te_algo_parts *parts);

#endif
