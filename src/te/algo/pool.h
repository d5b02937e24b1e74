/* pool.h -- 2-D max and average pooling, and global pooling, as tensor expressions with the
 * semantics of ops/pool.c (ONNX's): explicit begin/end pads, dilation, ceil_mode (a last window
 * starting in the end padding is dropped), max over the window's input elements (padding and
 * ceil_mode's overhang never win), average over the input elements (count_include_pad = 0) or
 * over the window clipped to the padded input (count_include_pad = 1).
 *
 *   max: out[n, c, oh, ow] = max(kh, kw: pad[n, c, oh*sh + kh*dh, ow*sw + kw*dw])  (pad: -inf)
 *   avg: sum[...] = sum(kh, kw: pad[...])  (pad: 0);  out = sum / count(oh, ow)
 * The count is a constant when every window sees as many elements, else an expression of
 * oh and ow. */
#ifndef WPK_TE_ALGO_POOL_H
#define WPK_TE_ALGO_POOL_H

#include "te/algo/algo.h"

typedef enum te_pool_kind { TE_POOL_MAX, TE_POOL_AVG } te_pool_kind;

typedef struct te_pool2d_params {
    te_pool_kind kind;
    int64_t kernel[2];   /* h, w; >= 1 */
    int64_t stride[2];   /* >= 1 */
    int64_t pad[4];      /* top, left, bottom, right; >= 0 and smaller than the window */
    int64_t dilation[2]; /* >= 1 */
    bool ceil_mode;
    bool count_include_pad;
} te_pool2d_params;

/* kind over kh x kw windows, stride 1, no padding, dilation 1, floor mode, pads not counted. */
te_pool2d_params te_pool2d_default_params(te_pool_kind kind, int64_t kh, int64_t kw);

/* Pool x [N, C, H, W] into `name` (computes: "<name>.pad" when a window reaches outside x;
 * max: the reduction `name`; avg: the sum "<name>.sum" and the divide `name`). NULL with a
 * message for parameters that do not fit. */
te_tensor *te_pool2d(te_ctx *c, const char *name, te_tensor *x, const te_pool2d_params *p,
                     te_algo_parts *parts);

/* x [N, C, spatial...] -> [N, C, 1, ...]: max, or average over all spatial positions (avg:
 * "<name>.sum" and the divide `name`). */
te_tensor *te_global_pool(te_ctx *c, const char *name, te_tensor *x, te_pool_kind kind,
                          te_algo_parts *parts);

#endif
