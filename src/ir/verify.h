/* verify.h -- structural invariants of a graph, checked after import and between passes. */
#ifndef WPK_IR_VERIFY_H
#define WPK_IR_VERIFY_H

#include "ir/graph.h"

/* Check that every edge points at a value, every value read is produced before it is read
 * (nodes in topological order), no value has two producers, and every graph output has a
 * source. WPK_ERR_MODEL naming the node or value otherwise. */
wpk_status ir_verify(wpk_context *ctx, const ir_graph *g);

#endif
