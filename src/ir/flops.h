/* flops.h -- floating-point operation counts of nodes, for reports and (later) cost models. */
#ifndef WPK_IR_FLOPS_H
#define WPK_IR_FLOPS_H

#include "ir/graph.h"

/* FLOPs of node n given its inputs' and outputs' shapes (a multiply-add counts 2); 0 when a
 * shape is unknown. Ops without multiply-adds count one per output element. */
int64_t ir_node_flops(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out);

#endif
