/* flops.c -- FLOP counts: 2 per multiply-add for the contraction ops, 1 per output otherwise. */
#include "ir/flops.h"

static int64_t conv_flops(ir_tensor *const *in, ir_tensor *const *out, const ir_node *n) {
    /* each output element of a group sums over C/group input channels x kernel window */
    const ir_tensor *w = in[1];
    int64_t window = 1;
    for (int i = 1; i < w->ndim; i++) window *= w->dims[i];
    if (n->op == IR_OP_CONV_TRANSPOSE) /* each input element scatters into Cout/group x kernel */
        return 2 * ir_numel(in[0]) * window;
    return 2 * ir_numel(out[0]) * window;
}

int64_t ir_node_flops(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    for (int i = 0; i < n->nin; i++)
        if (in[i] && in[i]->dtype == WPK_DTYPE_UNDEFINED) return 0;
    if (n->nout < 1 || !out[0] || out[0]->dtype == WPK_DTYPE_UNDEFINED) return 0;
    switch (n->op) {
    case IR_OP_CONV:
    case IR_OP_CONV_TRANSPOSE:
        return n->nin > 1 && in[1] ? conv_flops(in, out, n) : 0;
    case IR_OP_GEMM: {
        int64_t k = in[0]->ndim == 2 ? in[0]->dims[ir_attr_int(n, "transA", 0) ? 0 : 1] : 0;
        return 2 * ir_numel(out[0]) * k;
    }
    case IR_OP_MATMUL: {
        int64_t k = in[0]->ndim ? in[0]->dims[in[0]->ndim - 1] : 0;
        return 2 * ir_numel(out[0]) * k;
    }
    case IR_OP_SHAPE: case IR_OP_CONSTANT: case IR_OP_CONSTANT_OF_SHAPE: case IR_OP_RESHAPE:
    case IR_OP_FLATTEN: case IR_OP_SQUEEZE: case IR_OP_UNSQUEEZE: case IR_OP_IDENTITY:
    case IR_OP_DROPOUT:
        return 0;
    /* reductions and normalizations: (at least) one operation per input element */
    case IR_OP_REDUCE_MEAN: case IR_OP_REDUCE_SUM: case IR_OP_REDUCE_MAX: case IR_OP_REDUCE_MIN:
    case IR_OP_REDUCE_PROD: case IR_OP_REDUCE_L1: case IR_OP_REDUCE_L2:
    case IR_OP_REDUCE_SUM_SQUARE: case IR_OP_REDUCE_LOG_SUM: case IR_OP_REDUCE_LOG_SUM_EXP:
    case IR_OP_ARG_MAX: case IR_OP_ARG_MIN: case IR_OP_TOP_K:
        return ir_numel(in[0]);
    default:
        return ir_numel(out[0]);
    }
}
