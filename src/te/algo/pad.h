/* pad.h -- constant padding as a compute: the padded tensor reads the input inside and is
 * `value` outside, so a conv or pool can read any window without bounds checks. A schedule
 * template either keeps it as a root stage (a padded copy) or compute_inline's it into the
 * consumer, where loop partitioning takes the select out of the interior. */
#ifndef WPK_TE_ALGO_PAD_H
#define WPK_TE_ALGO_PAD_H

#include "te/algo/algo.h"

/* out[i...] = select(every i[d] - before[d] in [0, shape[d]), x[i - before], value), shape
 * x.shape + before + after (before/after: x->ndim non-negative counts each). The load's index
 * is clamped into x, so evaluating the discarded side of the select reads memory inside x.
 * axis_names may be NULL (i0, i1, ...). Returns x itself when nothing is padded; NULL with a
 * message for negative pads or a non-float32 x. */
te_tensor *te_pad(te_ctx *c, const char *name, te_tensor *x, const int64_t *before,
                  const int64_t *after, double value, const char *const *axis_names);

/* The same with the output's extent given instead of the pads after: out has `shape`, which may
 * end before x does (those points are not read) or past it (value there), so a schedule that
 * covers whole blocks reads any point of its rounded-up window. Returns x itself when before is
 * all 0 and shape is x's. */
te_tensor *te_pad_to(te_ctx *c, const char *name, te_tensor *x, const int64_t *before,
                     const int64_t *shape, double value, const char *const *axis_names);

/* One axis of a Pad in any mode: output index o reads input index lo + j, j = o - before,
 * where 0 <= j < len; outside, per mode, the constant, the nearest edge, the mirror image
 * (numpy's reflect, the edge not repeated) or the wrapped index. ONNX's negative pads are
 * crops (lo > 0, len shorter than the axis). */
typedef enum te_pad_mode { TE_PAD_CONSTANT, TE_PAD_EDGE, TE_PAD_REFLECT, TE_PAD_WRAP } te_pad_mode;
typedef struct te_pad_axis {
    int64_t before, lo, len, out;
} te_pad_axis;

/* out (extents ax[d].out) of x padded or cropped per axis in `mode` (value: the constant's).
 * Reflect and wrap take pads of at most len - 1 and len (one mirror or wrap per side); NULL
 * with a message for axes that do not fit x or those limits. */
te_tensor *te_pad_any(te_ctx *c, const char *name, te_tensor *x, const te_pad_axis *ax,
                       te_pad_mode mode, double value);

#endif
