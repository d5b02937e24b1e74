/* activation.c -- the activation descriptor of fused ops: names, reading and writing it as node
 * attributes, and applying it to a buffer. */
#include "ops/activation.h"

#include <float.h>
#include <string.h>

#include "ops/op_util.h"

static const char *const names[ACT_COUNT] = {
    [ACT_NONE] = NULL,
    [ACT_RELU] = "Relu",
    [ACT_LEAKY_RELU] = "LeakyRelu",
    [ACT_CLIP] = "Clip",
    [ACT_HARD_SIGMOID] = "HardSigmoid",
    [ACT_HARD_SWISH] = "HardSwish",
    [ACT_SIGMOID] = "Sigmoid",
    [ACT_SILU] = "SiLU",
    [ACT_GELU] = "Gelu",
    [ACT_TANH] = "Tanh",
};

const char *act_name(act_kind kind) {
    return kind > ACT_NONE && kind < ACT_COUNT ? names[kind] : NULL;
}

/* A float attribute, or def when absent; WPK_ERR_MODEL when present with another kind. */
static wpk_status read_float(wpk_context *ctx, const ir_node *n, const char *name, float def,
                             float *out) {
    const ir_attr *a = ir_attr_find(n, name);
    *out = def;
    if (!a) return WPK_OK;
    if (a->kind != IR_ATTR_FLOAT) return op_fail(ctx, n, "attribute '%s' must be a float", name);
    *out = a->f;
    return WPK_OK;
}

wpk_status act_read(wpk_context *ctx, const ir_node *n, act_params *p) {
    memset(p, 0, sizeof *p);
    const ir_attr *a = ir_attr_find(n, "activation");
    if (!a) return WPK_OK;
    if (a->kind != IR_ATTR_STRING || !a->s)
        return op_fail(ctx, n, "attribute 'activation' must be a string");
    for (int k = ACT_NONE + 1; k < ACT_COUNT; k++)
        if (strcmp(a->s, names[k]) == 0) p->kind = (act_kind)k;
    if (p->kind == ACT_NONE)
        return op_fail(ctx, n, "attribute 'activation' is '%s', which is not one of Relu, "
                       "LeakyRelu, Clip, HardSigmoid, HardSwish, Sigmoid, SiLU, Gelu, Tanh", a->s);
    wpk_status st = WPK_OK;
    switch (p->kind) {
    case ACT_LEAKY_RELU: st = read_float(ctx, n, "alpha", 0.01f, &p->alpha); break;
    case ACT_HARD_SIGMOID:
        if (!(st = read_float(ctx, n, "alpha", 0.2f, &p->alpha)))
            st = read_float(ctx, n, "beta", 0.5f, &p->beta);
        break;
    case ACT_CLIP:
        if (!(st = read_float(ctx, n, "clip_min", -FLT_MAX, &p->lo)))
            st = read_float(ctx, n, "clip_max", FLT_MAX, &p->hi);
        break;
    default: break;
    }
    return st;
}

wpk_status act_write(ir_graph *g, ir_node *n, const act_params *p) {
    if (p->kind == ACT_NONE) return WPK_OK;
    wpk_status st = ir_node_set_str(g, n, "activation", act_name(p->kind));
    switch (p->kind) {
    case ACT_LEAKY_RELU:
        if (!st) st = ir_node_set_float(g, n, "alpha", p->alpha);
        break;
    case ACT_HARD_SIGMOID:
        if (!st) st = ir_node_set_float(g, n, "alpha", p->alpha);
        if (!st) st = ir_node_set_float(g, n, "beta", p->beta);
        break;
    case ACT_CLIP:
        if (!st && p->lo != -FLT_MAX) st = ir_node_set_float(g, n, "clip_min", p->lo);
        if (!st && p->hi != FLT_MAX) st = ir_node_set_float(g, n, "clip_max", p->hi);
        break;
    default: break;
    }
    return st;
}

#define APPLY(EXPR)                                                                \
    do {                                                                           \
        _Pragma("omp simd")                                                        \
        for (int64_t i = 0; i < count; i++) {                                      \
            float v = y[i];                                                        \
            y[i] = (EXPR);                                                         \
        }                                                                          \
    } while (0)

void act_apply(const act_params *p, float *y, int64_t count) {
    const float alpha = p->alpha, beta = p->beta, lo = p->lo, hi = p->hi;
    switch (p->kind) {
    case ACT_NONE: break;
    case ACT_RELU: APPLY(act_relu(v)); break;
    case ACT_LEAKY_RELU: APPLY(act_leaky_relu(v, alpha)); break;
    case ACT_CLIP: APPLY(act_clip(v, lo, hi)); break;
    case ACT_HARD_SIGMOID: APPLY(act_hard_sigmoid(v, alpha, beta)); break;
    case ACT_HARD_SWISH: APPLY(act_hard_swish(v)); break;
    case ACT_SIGMOID: APPLY(act_sigmoid(v)); break;
    case ACT_SILU: APPLY(act_silu(v)); break;
    case ACT_GELU: APPLY(act_gelu(v)); break;
    case ACT_TANH: APPLY(tanhf(v)); break;
    case ACT_COUNT: break;
    }
}
