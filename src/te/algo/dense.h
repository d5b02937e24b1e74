/* dense.h -- matrix products as tensor expressions: batched MatMul with numpy-style broadcast
 * of the batch dims, optional transposed operands, and dense (a fully connected layer: the
 * weight stored [N, K], Gemm with transB) with a fused epilogue (epilogue.h; the bias indexes
 * the last output dim).
 *
 *   a [..., M, K] (trans_a: [..., K, M]), b [..., K, N] (trans_b: [..., N, K]) ->
 *   acc[..., m, n] = sum(k < K: a[..., m, k] * b[..., k, n])
 * A batch dim of size 1 broadcasts against the other operand's. */
#ifndef WPK_TE_ALGO_DENSE_H
#define WPK_TE_ALGO_DENSE_H

#include "te/algo/epilogue.h"

typedef struct te_matmul_params {
    bool trans_a, trans_b;
} te_matmul_params;

/* The product `name` of a and b (both at least 2-D float32; computes "<name>.acc" + `name` with
 * an epilogue, else the reduction is `name`). ep may be NULL; its bias has N values, its
 * residual the output's shape. NULL with a message for shapes that do not fit. */
te_tensor *te_matmul(te_ctx *c, const char *name, te_tensor *a, te_tensor *b,
                     const te_matmul_params *p, const te_epilogue *ep, te_algo_parts *parts);

/* Gemm's epilogue: act(alpha * acc + beta * c + residual). */
typedef struct te_gemm_epilogue {
    float alpha, beta;
    te_tensor *c;        /* borrowed, may be NULL: at most 2-D, right-aligned against the last
                            two output dims, each dim equal or 1 (Gemm's C, a bias of N values) */
    te_tensor *residual; /* borrowed, may be NULL: the output's shape */
    te_act act;
} te_gemm_epilogue;

/* True when ep adds nothing (alpha 1, no c, no residual, no activation). */
bool te_gemm_epilogue_empty(const te_gemm_epilogue *ep);

/* The epilogue `name` over the first shape[i] points of acc's axes (shape: acc->ndim extents,
 * acc->shape or less where acc covers a rounded-up extent). NULL with a message when c or the
 * residual does not fit. */
te_tensor *te_gemm_epilogue_compute(te_ctx *c, const char *name, te_tensor *acc,
                                    const int64_t *shape, const te_gemm_epilogue *ep);

/* x [M, K] times w [N, K] transposed: a fully connected layer (te_matmul with trans_b). */
te_tensor *te_dense(te_ctx *c, const char *name, te_tensor *x, te_tensor *w,
                    const te_epilogue *ep, te_algo_parts *parts);

#endif
