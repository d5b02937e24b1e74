/* winograd.h -- 3x3 stride-1 convolution by Winograd's minimal filtering F(m x m, 3 x 3)
 * (Lavin & Gray's formulation), m = 2, 4 or 6, as tensor expressions in the blocked channel
 * layout of conv2d_nchwc.h, each step a compute a schedule template tiles on its own:
 *
 *   U = G g G^T            per output and input channel    te_winograd_weight: a constant
 *                                                           compute, pre-packed once
 *   V = B^T d B            per alpha x alpha input tile     "<name>.tin" (B^T d), "<name>.v"
 *   M[e] = sum_c U[e] V[e] alpha^2 GEMMs over input channels "<name>.m" (the reduction)
 *   Y = A^T M A            per m x m output tile            "<name>.tout" (A^T M), `name`
 *
 * with alpha = m + 2. The output stage crops the tiles at the image border (outputs need not
 * be multiples of m) and applies the fused epilogue (bias, residual, activation) as it writes.
 * The matrices are exact: interpolation points 0, 1, -1 for F(2,3) and 0, 1, -1, 2, -2 for
 * F(4,3) (each with the point at infinity); B^T and A^T hold small integers, G the fractions
 * 1/2 (F(2,3)) or 1/4, 1/6, 1/12, 1/24 (F(4,3), rounded once to float in U).
 *
 * Shapes, tiles of the output numbered p = (n * TH + th) * TW + tw, TH = ceil(OH / m),
 * TW = ceil(OW / m), P = N * TH * TW, C = CB * bi input channels as the blocks hold them:
 *
 *   x     [N, CB, H, W, bi]  (or [N, C, H, W]: blocked to bi lanes inside the padded copy)
 *   pad   [N, CB, TH*m + 2, TW*m + 2, bi]  zeros outside x: every tile reads inside it
 *   u     [alpha, alpha, KB, C, bo]
 *   tin   [alpha, alpha, P, C]  tin[e1, b, p, c] = sum_a BT[e1, a] pad[tile p, row a, col b]
 *   v     [alpha, alpha, P, C]  v[e1, e2, p, c]  = sum_b BT[e2, b] tin[e1, b, p, c]
 *   m     [alpha, alpha, P, KB, bo]
 *         m[e1, e2, p, kb, k] = sum_c v[e1, e2, p, c] u[e1, e2, kb, c, k]
 *   tout  [m, alpha, P, KB, bo]  tout[i, e2, ...] = sum_e1 AT[i, e1] m[e1, e2, ...]
 *   out   [N, KB, OH, OW, bo]  (or [N, K, OH, OW])
 *         out[n, kb, oh, ow, k] = epilogue(sum_e2 AT[ow % m, e2] tout[oh % m, e2, p, kb, k])
 *
 * The transforms are select chains over the transform axis whose branches are the sparse
 * rows of the matrix: a schedule that unrolls that axis leaves each copy exactly its row's
 * few adds (the simplifier decides the select), which is what makes them cheap. */
#ifndef WPK_TE_ALGO_WINOGRAD_H
#define WPK_TE_ALGO_WINOGRAD_H

#include "te/algo/conv2d.h"

typedef struct te_winograd_params {
    int m;                   /* output tile: 2, 4 or 6 (F(m x m, 3 x 3)) */
    te_conv2d_params conv;   /* pads; stride 1, dilation 1 and one group only */
    int64_t channels;        /* real output channels (the bias length; lanes past it are 0) */
    int64_t in_block;        /* a plain NCHW x: lanes of the blocked copy (u's C must be
                                ceil(C / in_block) * in_block); ignored for a blocked x */
    bool nchw_out;           /* output [N, channels, OH, OW] instead of blocked */
} te_winograd_params;

/* The computes of te_conv2d_winograd, for the schedule template. */
typedef struct te_winograd_parts {
    te_tensor *pad;          /* the padded (and, for NCHW x, blocked) input copy */
    te_tensor *layout;       /* NCHW x: the blocked view the pad reads (to inline), else NULL */
    te_tensor *tin, *v;      /* input transform: rows, then columns */
    te_tensor *mm;           /* the batched GEMM (a sum reduction over input channels) */
    te_tensor *tout, *out;   /* output transform: rows, then columns with the epilogue */
} te_winograd_parts;

/* alpha = m + 2 for a supported m, else 0. */
int te_winograd_alpha(int m);

/* The transformed weight "name" [alpha, alpha, KB, CB*bi, bo] of a packed 3x3 weight w
 * [KB, CB, 3, 3, bi, bo] (te_conv2d_pack_weight's layout, groups 1): U = G g G^T for every
 * output and input channel, two computes (G g, then (G g) G^T). Constant when w is. NULL with
 * a message for a weight that is not 6-D float32 with 3x3 taps, or an m other than 2 or 4. */
te_tensor *te_winograd_weight(te_ctx *c, const char *name, te_tensor *w, int m);

/* The Winograd conv `name` of x by u (te_winograd_weight's output) under p; parts (may be NULL)
 * receives the computes. NULL with a message naming `name` for strides, dilations or groups
 * other than 1, an m other than 2 or 4, shapes that do not agree (x's channels and u's, the
 * channels and u's output blocks), or an epilogue that does not fit (epilogue.h). */
te_tensor *te_conv2d_winograd(te_ctx *c, const char *name, te_tensor *x, te_tensor *u,
                              const te_winograd_params *p, const te_epilogue *ep,
                              te_winograd_parts *parts);

#endif
