/* memory_plan.h -- activation memory planning: when each tensor is live over the execution order,
 * which tensors share a buffer (in-place elementwise ops, reshape views), and where each buffer
 * sits in one workspace. */
#ifndef WPK_PASSES_MEMORY_PLAN_H
#define WPK_PASSES_MEMORY_PLAN_H

#include "ir/graph.h"

/* Every buffer starts at a multiple of this many bytes of the workspace (a cache line, and the
 * widest vector load); the workspace itself must be allocated at this alignment. */
#define MEMORY_PLAN_ALIGN 64

/* One entry per graph value in each array. A value is an activation when a node produces it or
 * it is a graph input; constants are not planned. Execution steps are node indices: a graph
 * input is defined at step -1, and graph inputs and outputs stay live to step nnodes (inputs are
 * bound before a run and may be reused by the next one; outputs are read after it). */
typedef struct memory_plan {
    int nvalues;
    int64_t *offset;  /* byte offset of the value's buffer in the workspace; -1 when it has none
                         there (constants, views of constants, values no node touches) */
    int *root;        /* the value whose buffer this one shares: itself when it heads a buffer,
                         a constant for a view of a constant, -1 when not planned */
    int *first;       /* step that defines the value */
    int *last;        /* last step that reads it (first when nothing reads it) */
    size_t *bytes;    /* the value's size; 0 when not planned */
    size_t workspace; /* bytes of the workspace: the planned peak */
    size_t unplanned; /* the sum of every activation's size: one buffer per tensor, no reuse */
    int inplace;      /* nodes writing their output over their first input's buffer */
    int views;        /* nodes (Reshape, Flatten, ...) whose output aliases their input, no copy */
    int concat_inputs; /* Concat inputs written by their producers into their slice of the
                          output, which the Concat then does not copy */
} memory_plan;

/* Plan g's activation memory. g's nodes must be in execution order and every activation's dtype
 * and shape must be static in g->values[v].t (see pass_shape_known). Sharing rules:
 *  - a view (an op whose reference kernel is the byte copy, or Dropout's first output) shares
 *    its input's buffer when the byte sizes match;
 *  - an op marked in-place in ops.def writes over its first input's buffer when every value
 *    sharing that buffer is last read at this node, none is a graph input or output, the input
 *    has as many elements as the output (so broadcasting maps element i to element i) of the
 *    same size, and no other input of the node is a different value on that buffer;
 *  - the inputs of a Concat whose parts of the output are contiguous (ones before the axis:
 *    batch 1 on the channel axis) at aligned offsets lie in their slice of its output buffer
 *    when each is read by the Concat alone and shares no buffer: root is the output, offset
 *    the output's plus the slice's; a group lives from its first member's step.
 * Buffers are then placed greedily, each in the smallest gap between the buffers already placed
 * whose lifetimes overlap its own (best fit), or above them all when no gap is big enough; this
 * runs in three orders (largest first, longest-lived first, largest size x lifetime first) and
 * the smallest workspace wins.
 * Returns WPK_ERR_UNSUPPORTED naming the value when a shape is not static (run the graph
 * dynamically instead), WPK_ERR_NOMEM. On success *p is the caller's (memory_plan_free); on
 * failure it holds nothing. */
wpk_status memory_plan_build(wpk_context *ctx, const ir_graph *g, memory_plan *p);
void memory_plan_free(memory_plan *p);

#endif
