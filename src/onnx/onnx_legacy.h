/* onnx_legacy.h -- rewriting older-opset attribute forms into the newest input form, so shape
 * functions and kernels read one form: Clip < 11 (min/max), Squeeze/Unsqueeze < 13 (axes),
 * Split < 13 (split), ReduceMean < 18 (axes), Pad < 11 (pads, value), Slice < 10
 * (starts, ends, axes). */
#ifndef WPK_ONNX_LEGACY_H
#define WPK_ONNX_LEGACY_H

#include "ir/graph.h"

/* The number of input slots a node of op_type (default domain) at opset needs once rewritten:
 * nin (its inputs in the file) or more. Nodes are created with this many slots. */
int onnx_legacy_slots(const char *op_type, int opset, int nin);

/* Rewrite node `node` of g in place when its op and opset have an attribute form: each
 * converted attribute becomes a new constant value ("<node>__<attribute>") in its input slot,
 * and is removed from the node. The node must have been created with onnx_legacy_slots() slots
 * and file_nin of them filled from the file. Returns WPK_ERR_MODEL naming node and attribute
 * when the legacy form is malformed (required attribute missing, wrong attribute type, an input
 * where the attribute belongs), WPK_ERR_NOMEM. Messages do not name the model file. */
wpk_status onnx_legacy_canonicalize(wpk_context *ctx, ir_graph *g, int node, int file_nin);

#endif
