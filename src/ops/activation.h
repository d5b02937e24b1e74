/* activation.h -- the scalar activation functions, defined once for the elementwise kernels
 * and the fused epilogues (so a fused activation computes exactly what the unfused op does),
 * and the activation descriptor the wpk-domain fused ops carry as attributes. */
#ifndef WPK_OPS_ACTIVATION_H
#define WPK_OPS_ACTIVATION_H

#include <math.h>

#include "ir/graph.h"

/* ---- scalar functions (float32, as the ONNX ops define them) ---- */

static inline float act_relu(float v) { return v < 0.0f ? 0.0f : v; }

static inline float act_leaky_relu(float v, float alpha) { return v < 0.0f ? alpha * v : v; }

static inline float act_sigmoid(float v) {
    /* exp of a non-positive argument only, so large |v| neither overflows nor loses the tail */
    if (v >= 0.0f) return 1.0f / (1.0f + expf(-v));
    float e = expf(v);
    return e / (1.0f + e);
}

/* Clamp to [0, 1], keeping NaN (fminf/fmaxf would drop it). */
static inline float act_unit_clamp(float t) { return t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t); }

static inline float act_hard_sigmoid(float v, float alpha, float beta) {
    return act_unit_clamp(alpha * v + beta);
}

static inline float act_hard_swish(float v) { return v * act_unit_clamp(v * (1.0f / 6.0f) + 0.5f); }

/* x * sigmoid(x), as Mul(x, Sigmoid(x)) computes it. */
static inline float act_silu(float v) { return v * act_sigmoid(v); }

static inline float act_gelu(float v) {
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f));
}

static inline float act_gelu_tanh(float v) {
    return 0.5f * v * (1.0f + tanhf(0.79788456080286535588f * (v + 0.044715f * v * v * v)));
}

/* Clip: Min(hi, Max(v, lo)), so hi wins when lo > hi (as the spec says); comparisons rather
 * than fminf/fmaxf so NaN stays NaN. */
static inline float act_clip(float v, float lo, float hi) {
    return v < lo ? (lo > hi ? hi : lo) : (v > hi ? hi : v);
}

/* ---- the activation of a fused op ---- */

typedef enum act_kind {
    ACT_NONE,
    ACT_RELU,
    ACT_LEAKY_RELU,   /* alpha */
    ACT_CLIP,         /* lo, hi (absent bounds: -FLT_MAX, FLT_MAX) */
    ACT_HARD_SIGMOID, /* alpha, beta */
    ACT_HARD_SWISH,
    ACT_SIGMOID,
    ACT_SILU,
    ACT_GELU,         /* the exact (erf) form */
    ACT_TANH,
    ACT_COUNT
} act_kind;

typedef struct act_params {
    act_kind kind;
    float alpha, beta, lo, hi;
} act_params;

/* The attribute value naming kind ("Relu", "SiLU", ...); NULL for ACT_NONE. */
const char *act_name(act_kind kind);

/* Read the activation of a fused node from its attributes `activation`, `alpha`, `beta`,
 * `clip_min`, `clip_max` (absent `activation`: ACT_NONE; absent parameters: the defaults of
 * the ONNX op: LeakyRelu alpha 0.01, HardSigmoid alpha 0.2 and beta 0.5, Clip unbounded).
 * WPK_ERR_MODEL naming the node for an unknown activation or a parameter of the wrong kind. */
wpk_status act_read(wpk_context *ctx, const ir_node *n, act_params *p);

/* Write p as the attributes act_read reads (only the parameters its kind uses; Clip bounds at
 * +-FLT_MAX are left out). WPK_ERR_NOMEM. */
wpk_status act_write(ir_graph *g, ir_node *n, const act_params *p);

/* y[i] = act(y[i]) for i < count, on the calling thread (vectorized where the function allows). */
void act_apply(const act_params *p, float *y, int64_t count);

#endif
