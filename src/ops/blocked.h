/* blocked.h -- the blocked channel layout NCHW[x]c shared by its ops (ops/blocked.c) and the
 * layout pass (passes/layout.c): how ConvNCHWc wants its weights packed.
 *
 * A blocked tensor is [N, ceil(C/x), spatial..., x]: channel c sits in block c/x at lane c%x,
 * and the lanes past C in the last block hold zeros (Reorder writes them, ConvNCHWc keeps them).
 *
 * ConvNCHWc's packed weight is [Cout/bo, Ckb, KH, KW, bi, bo] (bo = x of the output, bi = x of
 * the input, 1 when the input is plain NCHW): for output block ob, input block kb of its group
 * and tap (kh, kw), a bi x bo matrix whose row i is the bo output lanes' weights for input lane
 * i -- the kernel broadcasts one input value and multiplies it by a whole row. Depthwise convs
 * (group == channels, one input channel each) pack as [C/x, 1, KH, KW, 1, x]: one weight per
 * lane. Entries for padded channels are zero. */
#ifndef WPK_OPS_BLOCKED_H
#define WPK_OPS_BLOCKED_H

#include <stdbool.h>
#include <stdint.h>

/* The shape of the packed weight of a conv with `cout` output channels, `cin_group` input
 * channels per group, a kh x kw kernel, input block bi (1 for an NCHW input), output block bo;
 * depthwise: the [C/x, 1, KH, KW, 1, x] form (cin_group must be 1, bi is ignored). */
void blocked_weight_dims(int64_t cout, int64_t cin_group, int64_t kh, int64_t kw, int64_t bi,
                         int64_t bo, bool depthwise, int64_t dims[6]);

/* Pack an ONNX Conv weight w [cout, cin_group, kh, kw] into out (blocked_weight_dims' shape,
 * every element written, zeros for padded channels). Both buffers are borrowed. */
void blocked_pack_weights(const float *w, int64_t cout, int64_t cin_group, int64_t kh,
                          int64_t kw, int64_t bi, int64_t bo, bool depthwise, float *out);

/* Whether the blocked kernels take block size x (the lane counts they are specialized for). */
bool blocked_block_ok(int64_t x);

#endif
