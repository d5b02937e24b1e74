/* lib_node.h -- a node as the library providers (lib.h) see it, read once from its attributes
 * and tensors: the geometry and epilogue of a 2-D convolution (Conv, wpk::FusedConv,
 * wpk::ConvNCHWc) or of a matrix product (Gemm, wpk::FusedGemm, MatMul, wpk::FusedMatMul),
 * with what both providers refuse (other dtypes, unknown dims, malformed nodes) refused here,
 * with a message, so the providers only add their own limits. */
#ifndef WPK_KERNELS_VENDOR_LIB_NODE_H
#define WPK_KERNELS_VENDOR_LIB_NODE_H

#include <stdbool.h>

#include "ir/graph.h"
#include "ops/activation.h"

/* Input slots of the fused ops (ops/fused.c, ops/blocked.c). */
#define LIB_IN_BIAS 2
#define LIB_IN_Z 3

/* A 2-D convolution, epilogue included: Y = act(conv(X, W) + B + Z). */
typedef struct lib_conv {
    int64_t n, c, h, w;        /* X: images, channels (with a blocked X's padding lanes), plane */
    int64_t k, oh, ow;         /* Y: real channels, plane */
    int64_t kh, kw, group, cg; /* taps, groups, input channels per group (W's dim 1) */
    int64_t stride[2], dil[2]; /* dil: 1 is a dense kernel (ONNX's convention) */
    int64_t pad0[2], pad1[2];  /* begin and end pads in effect (auto_pad resolved) */
    int64_t xblock, yblock;    /* lanes per channel block of X and of Y; 0: plain NCHW */
    bool depthwise_packed;     /* ConvNCHWc weight in the [C/x, 1, KH, KW, 1, x] form */
    bool has_bias, has_z;
    act_params act;
} lib_conv;

/* Whether n is one of the ops lib_conv_read reads. */
bool lib_is_conv(const ir_node *n);

/* Read conv node n (in/out as lib.h's supports() gets them). WPK_ERR_MODEL when the node is
 * inconsistent (its shape function's message), WPK_ERR_UNSUPPORTED naming the cause for what no
 * provider takes: not 2-D, not float32, dims unknown, a blocked weight that is not constant.
 * ctx may be NULL (supports() asks without one). */
wpk_status lib_conv_read(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out, lib_conv *c);

/* W as an ONNX Conv weight [k, cg, kh, kw] (ConvNCHWc's packed weight unpacked, its padding
 * channels dropped) into dst (k * cg * kh * kw floats, borrowed); w is the node's input 1. */
void lib_conv_weights(const lib_conv *c, const ir_tensor *w, float *dst);

/* A batch of matrix products with its epilogue:
 * Y[b] = act(alpha * A[b]' B[b]' + beta * C + bias + Z[b]) (A' = A or its transpose). Gemm and
 * FusedGemm have one matrix (nb = 0) and C (2-D broadcast, input 2); MatMul and FusedMatMul have
 * no C, FusedMatMul's bias (input 2) is one value per column. */
typedef struct lib_gemm {
    int64_t m, n, k;
    bool ta, tb;               /* A is stored K x M, B is stored N x K */
    float alpha, beta;         /* 1 and 1 except for Gemm */
    int nb;                    /* batch dims of Y (MatMul) */
    int64_t batch[WPK_MAX_DIMS];        /* Y's batch dims */
    int64_t abatch[WPK_MAX_DIMS], bbatch[WPK_MAX_DIMS]; /* A's and B's, 1 where broadcast */
    bool has_c;                /* Gemm's C: cm x cn, each 1 (broadcast) or m / n */
    int64_t cm, cn;
    bool has_bias, has_z;      /* FusedMatMul's per-column bias; the residual Z (Y's shape) */
    act_params act;
} lib_gemm;

/* Whether n is one of the ops lib_gemm_read reads. */
bool lib_is_gemm(const ir_node *n);

/* Read product node n, as lib_conv_read does (1-D MatMul operands are refused: the passes
 * leave none on the paths the providers serve). */
wpk_status lib_gemm_read(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out, lib_gemm *g);

/* Input i of n when present (NULL past the node's inputs or where omitted). */
static inline ir_tensor *lib_in(const ir_node *n, ir_tensor *const *in, int i) {
    return i < n->nin ? in[i] : NULL;
}

#endif
