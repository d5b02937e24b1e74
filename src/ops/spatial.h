/* spatial.h -- the spatial attributes that convolutions and pools share (kernel_shape, strides,
 * dilations, pads, auto_pad) and the output sizes and padding they imply, for ops/conv.c and
 * ops/pool.c. */
#ifndef WPK_OPS_SPATIAL_H
#define WPK_OPS_SPATIAL_H

#include <stdbool.h>

#include "ir/graph.h"

/* Spatial dims at most: a tensor's dims after N and C. */
#define SP_MAX (WPK_MAX_DIMS - 2)
/* Attribute values above this are rejected so that sizes computed from them cannot overflow. */
#define SP_ATTR_MAX ((int64_t)1 << 30)

typedef enum sp_pad_mode {
    SP_PAD_NOTSET,
    SP_PAD_SAME_UPPER,
    SP_PAD_SAME_LOWER,
    SP_PAD_VALID
} sp_pad_mode;

/* The spatial geometry of one node, per spatial dim. in and out are -1 where unknown during
 * static shape inference (kernel too, for a Conv whose W is not known). pad0/pad1 are the begin
 * and end pads: as written until resolved, then the ones in effect. */
typedef struct sp_geom {
    int nsp;
    int64_t in[SP_MAX], out[SP_MAX], kernel[SP_MAX], stride[SP_MAX], dil[SP_MAX];
    int64_t pad0[SP_MAX], pad1[SP_MAX];
} sp_geom;

/* Ints attribute `name` of node n into out[0..count), each value in [lo, SP_ATTR_MAX]; every
 * value is `def` when the attribute is absent or an empty list (some exporters write one).
 * WPK_ERR_MODEL naming the attribute (and the value and index) otherwise. */
wpk_status sp_attr_ints(wpk_context *ctx, const ir_node *n, const char *name, int count,
                        int64_t def, int64_t lo, int64_t *out);

/* Attributes strides and dilations (default 1) into g->stride, g->dil, pads (default 0; all
 * begins, then all ends) into g->pad0, g->pad1, and auto_pad into *mode (an empty string is
 * NOTSET), for g->nsp dims, in that order. WPK_ERR_MODEL naming the attribute when one is
 * malformed or out of range. */
wpk_status sp_read_attrs(wpk_context *ctx, const ir_node *n, sp_geom *g, sp_pad_mode *mode);

/* The extent of dim i's window with its dilation: (kernel - 1) * dil + 1. */
static inline int64_t sp_span(const sp_geom *g, int i) {
    return (g->kernel[i] - 1) * g->dil[i] + 1;
}

/* dims = (n, c, g->out...), the output shape of a node with this geometry; returns its rank. */
int sp_out_dims(const sp_geom *g, int64_t n, int64_t c, int64_t *dims);

/* [*lo, *hi): the indices i in [0, count) whose position i * step + off lies in [0, bound)
 * (empty when none does). The kernels' in-bounds range of a tap or window, computed once
 * instead of testing every position; inline, as they call it in their inner loops. */
static inline void sp_tap_range(int64_t count, int64_t step, int64_t off, int64_t bound,
                                int64_t *lo, int64_t *hi) {
    int64_t l = off >= 0 ? 0 : (-off + step - 1) / step;
    int64_t last = bound - 1 - off;
    int64_t h = last < 0 ? 0 : last / step + 1;
    if (h > count) h = count;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* Resolves out, pad0 and pad1 of dim i of a sliding window (Conv, the pools) from its in,
 * kernel, stride, dil and explicit pads, as ONNX specifies: SAME_UPPER/SAME_LOWER give
 * out = ceil(in / stride) and pad just enough, the odd pad at the end (UPPER) or the beginning
 * (LOWER); VALID drops the pads; NOTSET keeps them. Then out = (in + pads - span) / stride + 1,
 * rounded up with ceil_mode (NOTSET only), where a last window that would start inside the end
 * padding is dropped (as ONNX Runtime and PyTorch do). An unknown in or kernel gives out = -1
 * and no pads. Returns false, with out unset and pad0/pad1 the pads in effect, when the window
 * does not fit the padded input: the caller reports it. */
bool sp_resolve(sp_geom *g, int i, sp_pad_mode mode, bool ceil_mode);

#endif
