/* eval.h -- walking the graph in order: static shape inference (folding what is known) and
 * reference execution. Both use the op table's shape functions and reference kernels, so a
 * shape computed before a run is the shape the run produces. */
#ifndef WPK_IR_EVAL_H
#define WPK_IR_EVAL_H

#include "base/arena.h"
#include "ir/graph.h"

/* Static shape inference. vals has one entry per graph value; on entry, constants and graph
 * inputs are set (inputs with concrete dims, data NULL unless known); on return every value a
 * node produces has dtype and shape, or dtype WPK_DTYPE_UNDEFINED when it could not be known
 * (an unsupported op upstream, or a shape that depends on data computed at run time).
 * Nodes whose inputs are all known and whose outputs are small are evaluated (constant folding
 * of the Shape->Gather->Concat chains exporters emit; a Shape node needs only its input's dims
 * to be concrete, not its data); their data lives in `mem` (NULL: never fold). Symbolic dims
 * may be -1: a node that cannot be inferred from them is left unknown.
 * Returns WPK_ERR_MODEL (message naming the node) when a node is inconsistent. */
wpk_status ir_infer(wpk_context *ctx, const ir_graph *g, ir_tensor *vals, arena *mem);

/* Buffers owned by an execution: one per graph value, grown on demand, reused across runs. */
typedef struct ir_exec {
    ir_tensor *vals;  /* one per value; constants borrow the graph's data */
    size_t *caps;     /* capacity in bytes of the buffer owned for vals[i], 0 when borrowed */
    int nvalues;
} ir_exec;

/* Prepare an execution for g: constants bound, everything else empty. */
wpk_status ir_exec_init(wpk_context *ctx, ir_exec *x, const ir_graph *g);
void ir_exec_free(ir_exec *x);
/* Make vals[v] hold a tensor of the given type and shape, reusing its buffer when it is big
 * enough. The data is not initialized. */
wpk_status ir_exec_reserve(wpk_context *ctx, ir_exec *x, int v, wpk_dtype dtype, int ndim,
                           const int64_t *dims);
/* Run every node with its reference kernel; graph inputs must be bound in x->vals. */
wpk_status ir_exec_run(wpk_context *ctx, ir_exec *x, const ir_graph *g);

/* Run every node of g in order with its reference kernel on tensors laid out beforehand: vals
 * has one entry per value holding its dtype, static shape and data (constants' data, the memory
 * plan's buffers, the bound graph inputs). Calls no shape function and allocates nothing itself
 * (a kernel may: ReduceMean takes scratch). A node whose kernel only copies bytes (Reshape,
 * Flatten, Squeeze, Unsqueeze, Identity) is skipped when its output already shares its input's
 * buffer. Returns the first kernel's error. */
wpk_status ir_exec_static(wpk_context *ctx, const ir_graph *g, ir_tensor *vals);

#endif
