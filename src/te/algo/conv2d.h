/* conv2d.h -- 2-D convolution in the NCHW layout as a tensor expression: strides, explicit
 * padding (a `pad` compute), dilation, groups (depthwise included), and a fused epilogue
 * (bias, residual, activation; epilogue.h).
 *
 *   x [N, C, H, W], w [Cout, C/groups, KH, KW] ->
 *   acc[n, oc, oh, ow] = sum(rc < C/groups, kh < KH, kw < KW:
 *                            pad[n, g(oc) * C/groups + rc, oh*sh + kh*dh, ow*sw + kw*dw] *
 *                            w[oc, rc, kh, kw])
 * with g(oc) = oc / (Cout/groups). Reduction axes of extent 1 are left out (1x1 kernels,
 * depthwise), so a depthwise 1x1 conv is no reduction at all. */
#ifndef WPK_TE_ALGO_CONV2D_H
#define WPK_TE_ALGO_CONV2D_H

#include "te/algo/epilogue.h"

typedef struct te_conv2d_params {
    int64_t stride[2];   /* h, w; >= 1 */
    int64_t pad[4];      /* top, left, bottom, right; >= 0 */
    int64_t dilation[2]; /* h, w; >= 1 */
    int64_t groups;      /* >= 1; C and Cout are multiples of it */
} te_conv2d_params;

/* Stride 1, no padding, dilation 1, one group. */
te_conv2d_params te_conv2d_default_params(void);

/* The output height and width of a conv of an h x w input with a kh x kw kernel under p;
 * false with a message naming `name` when the kernel (dilated) does not fit the padded input
 * or a parameter is out of range. */
bool te_conv2d_out_size(te_ctx *c, const char *op, const char *name, int64_t h, int64_t w,
                        int64_t kh, int64_t kw, const te_conv2d_params *p, int64_t *oh,
                        int64_t *ow);

/* The conv `name` of x by w (computes: "<name>.pad" when p pads, the reduction, and the
 * epilogue when ep is not empty: then the reduction is "<name>.acc" and the output `name`;
 * otherwise the reduction is the output `name`). ep may be NULL; its bias has Cout values.
 * parts (may be NULL) receives the computes. NULL with a message on c for shapes or
 * parameters that do not fit. */
te_tensor *te_conv2d_nchw(te_ctx *c, const char *name, te_tensor *x, te_tensor *w,
                          const te_conv2d_params *p, const te_epilogue *ep, te_algo_parts *parts);

/* The conv's reduction alone, `name`, over an input src that is padded already (p's pads are
 * not applied: src[n, c, oh*sh + kh*dh, ow*sw + kw*dw] is read as is) and over the output
 * extent `shape` [N, Cout', OH', OW'], which may be larger than the conv's own (a schedule that
 * covers whole blocks; src and w [Cout', C/groups, KH, KW] must hold every point it reads, a
 * te_pad_to view for instance). per_group: output channels per group, Cout / groups of the
 * conv itself, so that rounded-up channels keep reading their group's inputs. Every reduction
 * axis is kept, those of extent 1 too ("rc", "kh", "kw"), for a schedule that splits them by
 * name. */
te_tensor *te_conv2d_nchw_reduce(te_ctx *c, const char *name, te_tensor *src, te_tensor *w,
                                 const te_conv2d_params *p, const int64_t *shape,
                                 int64_t per_group);

#endif
