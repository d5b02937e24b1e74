/* conv2d_nchwc.h -- 2-D convolution in the blocked channel layout NCHW[x]c, the layout the
 * graph optimizer's layout pass produces (ops/blocked.h is the reference: same shapes, same
 * weight packing, zeros in the padding lanes), plus the weight packing and the layout
 * transforms, each a compute.
 *
 *   x   [N, C/bi, H, W, bi] (or plain [N, C, H, W]: bi = 1)
 *   w   [Cout/bo, Cg/bi, KH, KW, bi, bo]  packed, Cg = C/groups
 *       (depthwise: [C/bo, 1, KH, KW, 1, bo])
 *   out [N, Cout/bo, OH, OW, bo]
 *   acc[n, ocb, oh, ow, oci] = sum(icb, kh, kw, ici:
 *        pad[n, g(ocb) * Cg/bi + icb, oh*sh + kh*dh, ow*sw + kw*dw, ici] *
 *        w[ocb, icb, kh, kw, ici, oci])
 * Depthwise (groups > 1, a packed w with bi 1, a blocked x): lane oci of output block ocb reads
 * lane oci of input block ocb. Channel counts round up to whole blocks; the extra lanes of x
 * and of the packed w are zero, so the extra output lanes are too (the epilogue keeps them 0).
 * Packing reads only the original weight: when that is a `constant` placeholder the pack
 * compute is constant too (te_tensor_is_constant) and runs once, at compile time. */
#ifndef WPK_TE_ALGO_CONV2D_NCHWC_H
#define WPK_TE_ALGO_CONV2D_NCHWC_H

#include "te/algo/conv2d.h"

/* The blocked conv `name` (computes as te_conv2d_nchw: "<name>.pad", "<name>.acc" + `name`
 * with an epilogue, else the reduction is `name`). `channels` is the real output channel count
 * (the bias length; lanes past it are 0). Group rules as ops/blocked.c: a non-depthwise grouped
 * conv needs whole output blocks per group and channels == Cout/bo * bo. NULL with a message. */
te_tensor *te_conv2d_nchwc(te_ctx *c, const char *name, te_tensor *x, te_tensor *w,
                           int64_t channels, const te_conv2d_params *p, const te_epilogue *ep,
                           te_algo_parts *parts);

/* The packed weight of w [Cout, Cg, KH, KW] for input blocks of bi lanes (1 for a plain NCHW
 * input) and output blocks of bo: packed[ocb, icb, kh, kw, ici, oci] = w[ocb*bo + oci,
 * icb*bi + ici, kh, kw], 0 past Cout or Cg. Depthwise (Cg must be 1): [Cout/bo, 1, KH, KW, 1,
 * bo]. NULL with a message. */
te_tensor *te_conv2d_pack_weight(te_ctx *c, const char *name, te_tensor *w, int64_t bi,
                                 int64_t bo, bool depthwise);

/* [N, C, spatial...] -> [N, ceil(C/block), spatial..., block], zeros past C. */
te_tensor *te_layout_to_nchwc(te_ctx *c, const char *name, te_tensor *x, int64_t block);
/* [N, C/x, spatial..., x] -> [N, channels, spatial...]; channels within the last block. */
te_tensor *te_layout_from_nchwc(te_ctx *c, const char *name, te_tensor *x, int64_t channels);

#endif
