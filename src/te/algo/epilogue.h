/* epilogue.h -- the elementwise tail the graph optimizer fuses into a producer (bias add,
 * residual add, activation), as tensor expressions, so it runs inside the producer's loop nest.
 *
 * Design. Y = act(P + bias[channel] + Z), in that order (FusedConv/FusedGemm/ConvNCHWc's
 * order). A reduction's body must be the reduction alone, so the epilogue of a conv, matmul or
 * pool is a separate elementwise compute reading the reduction at the same indices:
 *
 *     acc[n, oc, oh, ow] = sum(rc, kh, kw: ...)                       ("<name>.acc")
 *     out[n, oc, oh, ow] = act(acc[n, oc, oh, ow] + bias[oc] + z[...]) ("<name>", the output)
 *
 * A schedule template keeps `out` as the root stage and computes `acc` inside out's tile loop
 * (te_compute_at + te_set_scope(acc, "local")): the tile's accumulators stay in registers and
 * the epilogue is applied as the tile is written out, one loop nest, no intermediate buffer
 * (TVM's x86 conv schedule). te_cache_write(acc, "local") followed by te_compute_inline of the
 * copy stage gives the same nest. When the producer is not a reduction, te_epilogue_apply folds
 * the epilogue straight into the producer's body and no stage is added at all.
 *
 * The activations compute what ops/activation.h computes (Relu keeps NaN; Clip lets hi win when
 * lo > hi; GELU is the erf form); te cannot include that header (te does not depend on ir), so
 * te_act mirrors its act_params field for field. */
#ifndef WPK_TE_ALGO_EPILOGUE_H
#define WPK_TE_ALGO_EPILOGUE_H

#include "te/algo/algo.h"

typedef enum te_act_kind {
    TE_ACT_NONE,
    TE_ACT_RELU,
    TE_ACT_LEAKY_RELU,   /* alpha */
    TE_ACT_CLIP,         /* lo, hi */
    TE_ACT_HARD_SIGMOID, /* alpha, beta */
    TE_ACT_HARD_SWISH,
    TE_ACT_SIGMOID,
    TE_ACT_SILU,
    TE_ACT_GELU,         /* 0.5 x (1 + erf(x / sqrt 2)) */
    TE_ACT_TANH
} te_act_kind;

typedef struct te_act {
    te_act_kind kind;
    float alpha, beta, lo, hi;
} te_act;

/* kind with ONNX's default parameters (LeakyRelu alpha 0.01, HardSigmoid 0.2 and 0.5, Clip
 * unbounded: -FLT_MAX, FLT_MAX). */
te_act te_act_default(te_act_kind kind);

typedef struct te_epilogue {
    te_tensor *bias;     /* borrowed, may be NULL: 1-D float32, one value per output channel */
    te_tensor *residual; /* borrowed, may be NULL: float32 of the output's shape, added as is */
    te_act act;
} te_epilogue;

/* True when ep is NULL or adds nothing. */
bool te_epilogue_empty(const te_epilogue *ep);

/* act(v); v unchanged for TE_ACT_NONE. */
const te_expr *te_activation(te_ctx *c, const te_act *a, const te_expr *v);

/* The epilogue applied to `value`, the producer's element at `axes` (ndim of them, the output's
 * data axes): value + bias[channel] + residual[axes], activated, then 0 where `valid` is false
 * (valid NULL: everywhere; the blocked layout's padding lanes). `channel` must stay inside
 * [0, channels) wherever it is evaluated; `channels` is the bias length expected. `name` (the
 * output) names the op in messages: a bias that is not 1-D float32 of `channels` values, a
 * residual that is not float32 of the axes' extents. NULL on error. */
const te_expr *te_epilogue_apply(te_ctx *c, const char *name, const te_epilogue *ep,
                                 const te_expr *value, int ndim, te_iter *const *axes,
                                 const te_expr *channel, int64_t channels, const te_expr *valid);

/* The epilogue as its own compute `name` over producer's shape: name[axes] =
 * epilogue(producer[axes]) with the bias indexed by axis `channel_axis`. */
te_tensor *te_epilogue_compute(te_ctx *c, const char *name, te_tensor *producer,
                               const te_epilogue *ep, int channel_axis);

/* The same over the first shape[i] points of each of producer's axes (shape: producer->ndim
 * extents, none larger than producer's): a producer a schedule computes over a rounded-up
 * extent, whose extra points are never stored. The bias has shape[channel_axis] values. */
te_tensor *te_epilogue_compute_to(te_ctx *c, const char *name, te_tensor *producer,
                                  const int64_t *shape, const te_epilogue *ep, int channel_axis);

#endif
