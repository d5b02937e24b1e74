/* lib_node.c -- reading a conv or matrix-product node for the library providers (lib_node.h).
 * The node's own shape function checks it first, so a malformed node gets the same message it
 * gets everywhere else; the geometry then comes from the attributes the reference kernels read
 * (ops/spatial.h for strides, dilations, pads and auto_pad). */
#include "kernels/vendor/lib_node.h"

#include <string.h>

#include "ops/op_util.h"
#include "ops/spatial.h"

bool lib_is_conv(const ir_node *n) {
    return n->op == IR_OP_CONV || n->op == IR_OP_FUSED_CONV || n->op == IR_OP_CONV_NCHWC;
}

bool lib_is_gemm(const ir_node *n) {
    return n->op == IR_OP_GEMM || n->op == IR_OP_FUSED_GEMM || n->op == IR_OP_MATMUL ||
           n->op == IR_OP_FUSED_MATMUL;
}

/* Every present input and output float32 with known, non-zero dims; the output's shape what the
 * node's shape function infers from the inputs. */
static wpk_status check_tensors(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                ir_tensor *const *out) {
    if (n->nout < 1 || !out[0]) return op_fail(ctx, n, "output 0 is missing");
    for (int i = 0; i <= n->nin; i++) {
        const ir_tensor *t = i < n->nin ? in[i] : out[0];
        if (!t) continue;
        const char *what = i < n->nin ? "input" : "output";
        int idx = i < n->nin ? i : 0;
        if (t->dtype != WPK_DTYPE_FLOAT32)
            return op_unsupported(ctx, n, "%s %d is %s; the library providers take float32",
                                  what, idx, wpk_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++)
            if (t->dims[d] < 1)
                return op_unsupported(ctx, n, "%s %d has size %lld in dim %d; the library "
                                      "providers take known, non-zero sizes", what, idx,
                                      (long long)t->dims[d], d);
    }
    ir_tensor inferred = {0};
    ir_tensor *o[1] = {&inferred};
    wpk_status st = ir_op_get(n->op)->shape(ctx, n, in, o);
    if (st) return st;
    if (!ir_same_shape(&inferred, out[0])) {
        char a[128], b[128];
        return op_fail(ctx, n, "output 0 has shape %s but its inputs give %s",
                       op_dims_str(a, sizeof a, out[0]->ndim, out[0]->dims),
                       op_dims_str(b, sizeof b, inferred.ndim, inferred.dims));
    }
    return WPK_OK;
}

/* ---- convolutions ---- */

/* Conv / FusedConv: X [N, C, H, W], W [K, C/group, KH, KW]. */
static wpk_status read_plain_conv(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                  lib_conv *c) {
    const ir_tensor *x = in[0], *w = in[1];
    if (x->ndim != 4)
        return op_unsupported(ctx, n, "a %d-D convolution; the library providers take 2-D ones",
                              x->ndim - 2);
    sp_geom g = {.nsp = 2, .in = {x->dims[2], x->dims[3]}, .kernel = {w->dims[2], w->dims[3]}};
    sp_pad_mode mode;
    wpk_status st = sp_read_attrs(ctx, n, &g, &mode);
    if (st) return st;
    for (int i = 0; i < 2; i++)
        if (!sp_resolve(&g, i, mode, false))
            return op_fail(ctx, n, "spatial dim %d: the kernel does not fit the padded input", i);
    c->n = x->dims[0], c->c = x->dims[1], c->h = x->dims[2], c->w = x->dims[3];
    c->k = w->dims[0], c->cg = w->dims[1], c->kh = w->dims[2], c->kw = w->dims[3];
    c->group = ir_attr_int(n, "group", 1);
    for (int i = 0; i < 2; i++) {
        c->stride[i] = g.stride[i], c->dil[i] = g.dil[i];
        c->pad0[i] = g.pad0[i], c->pad1[i] = g.pad1[i];
    }
    c->oh = g.out[0], c->ow = g.out[1];
    return WPK_OK;
}

/* ConvNCHWc: X [N, C/bi, H, W, bi] or [N, C, H, W], W packed [C/bo, Ckb, KH, KW, bi, bo] (or
 * the depthwise [C/x, 1, KH, KW, 1, x]), explicit pads (its shape function insists). */
static wpk_status read_blocked_conv(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                    ir_tensor *const *out, lib_conv *c) {
    const ir_tensor *x = in[0], *w = in[1], *y = out[0];
    if (!w->data)
        return op_unsupported(ctx, n, "the packed weight W is not constant; the library "
                              "providers unpack it when they are created");
    sp_geom g = {.nsp = 2, .in = {x->dims[2], x->dims[3]}, .kernel = {w->dims[2], w->dims[3]}};
    sp_pad_mode mode;
    wpk_status st = sp_read_attrs(ctx, n, &g, &mode);
    if (st) return st;
    c->xblock = x->ndim == 5 ? x->dims[4] : 0;
    c->yblock = w->dims[5];
    c->n = x->dims[0], c->h = x->dims[2], c->w = x->dims[3];
    c->kh = w->dims[2], c->kw = w->dims[3];
    c->group = ir_attr_int(n, "group", 1);
    c->k = ir_attr_int(n, "channels", 0);
    c->depthwise_packed = c->group > 1 && w->dims[4] == 1 && c->xblock > 1;
    if (c->depthwise_packed) {
        c->c = c->k; /* one input channel per group: X's padding lanes are not channels */
        c->cg = 1;
    } else {
        int64_t bi = c->xblock ? c->xblock : 1;
        c->c = x->dims[1] * bi; /* padding lanes are channels with zero weights */
        c->cg = w->dims[1] * bi;
    }
    for (int i = 0; i < 2; i++) {
        c->stride[i] = g.stride[i], c->dil[i] = g.dil[i];
        c->pad0[i] = g.pad0[i], c->pad1[i] = g.pad1[i];
    }
    c->oh = y->dims[2], c->ow = y->dims[3];
    return WPK_OK;
}

wpk_status lib_conv_read(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out, lib_conv *c) {
    memset(c, 0, sizeof *c);
    if (!lib_is_conv(n)) return op_unsupported(ctx, n, "not a convolution");
    wpk_status st;
    if ((st = op_need_input(ctx, n, in, 0, "X")) || (st = op_need_input(ctx, n, in, 1, "W")) ||
        (st = check_tensors(ctx, n, in, out)) || (st = act_read(ctx, n, &c->act)))
        return st;
    st = n->op == IR_OP_CONV_NCHWC ? read_blocked_conv(ctx, n, in, out, c)
                                   : read_plain_conv(ctx, n, in, c);
    if (st) return st;
    c->has_bias = lib_in(n, in, LIB_IN_BIAS) != NULL;
    c->has_z = n->op != IR_OP_CONV && lib_in(n, in, LIB_IN_Z) != NULL;
    return WPK_OK;
}

void lib_conv_weights(const lib_conv *c, const ir_tensor *w, float *dst) {
    const float *p = w->data;
    const int64_t taps = c->kh * c->kw;
    if (w->ndim == 4) {
        memcpy(dst, p, sizeof(float) * (size_t)(c->k * c->cg * taps));
        return;
    }
    /* ops/blocked.h: output channel oc, input channel ic of its group and tap t sit at
     * [oc / bo][ic / bi][t][ic % bi][oc % bo] (bi = 1 in the depthwise form) */
    const int64_t ckb = w->dims[1], bi = w->dims[4], bo = w->dims[5];
    for (int64_t oc = 0; oc < c->k; oc++)
        for (int64_t ic = 0; ic < c->cg; ic++)
            for (int64_t t = 0; t < taps; t++)
                dst[(oc * c->cg + ic) * taps + t] =
                    p[((((oc / bo) * ckb + ic / bi) * taps + t) * bi + ic % bi) * bo + oc % bo];
}

/* ---- matrix products ---- */

wpk_status lib_gemm_read(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out, lib_gemm *g) {
    memset(g, 0, sizeof *g);
    if (!lib_is_gemm(n)) return op_unsupported(ctx, n, "not a matrix product");
    wpk_status st;
    if ((st = op_need_input(ctx, n, in, 0, "A")) || (st = op_need_input(ctx, n, in, 1, "B")) ||
        (st = check_tensors(ctx, n, in, out)) || (st = act_read(ctx, n, &g->act)))
        return st;
    const ir_tensor *a = in[0], *b = in[1], *y = out[0];
    g->alpha = g->beta = 1.0f;
    if (n->op == IR_OP_GEMM || n->op == IR_OP_FUSED_GEMM) {
        g->ta = ir_attr_int(n, "transA", 0) != 0;
        g->tb = ir_attr_int(n, "transB", 0) != 0;
        if (n->op == IR_OP_GEMM) { /* FusedGemm's alpha and beta are its activation's */
            g->alpha = ir_attr_float(n, "alpha", 1.0f);
            g->beta = ir_attr_float(n, "beta", 1.0f);
        }
        g->m = y->dims[0], g->n = y->dims[1];
        g->k = a->dims[g->ta ? 0 : 1];
        const ir_tensor *cc = lib_in(n, in, LIB_IN_BIAS);
        if (cc) {
            g->has_c = true;
            g->cm = cc->ndim == 2 ? cc->dims[0] : 1;
            g->cn = cc->ndim >= 1 ? cc->dims[cc->ndim - 1] : 1;
        }
    } else {
        if (a->ndim < 2 || b->ndim < 2)
            return op_unsupported(ctx, n, "input %s is 1-D; the library providers take MatMul "
                                  "operands of 2 or more dims", a->ndim < 2 ? "A" : "B");
        g->m = a->dims[a->ndim - 2], g->k = a->dims[a->ndim - 1];
        g->n = b->dims[b->ndim - 1];
        g->nb = y->ndim - 2;
        for (int i = 0; i < g->nb; i++) {
            int ia = i - (g->nb - (a->ndim - 2)), ib = i - (g->nb - (b->ndim - 2));
            g->batch[i] = y->dims[i];
            g->abatch[i] = ia >= 0 ? a->dims[ia] : 1;
            g->bbatch[i] = ib >= 0 ? b->dims[ib] : 1;
        }
        g->has_bias = n->op == IR_OP_FUSED_MATMUL && lib_in(n, in, LIB_IN_BIAS);
    }
    g->has_z = (n->op == IR_OP_FUSED_GEMM || n->op == IR_OP_FUSED_MATMUL) &&
               lib_in(n, in, LIB_IN_Z);
    return WPK_OK;
}
