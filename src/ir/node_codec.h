/* node_codec.h -- one node of the graph IR as bytes and back: its name, op type, domain, opset,
 * input and output counts and every attribute (ints, floats, strings, tensors), so a runtime
 * step can carry the node its reference or library kernel needs without the graph. Edges are
 * not kept: a step names its tensors itself. */
#ifndef WPK_IR_NODE_CODEC_H
#define WPK_IR_NODE_CODEC_H

#include "ir/graph.h"

/* n's bytes into *out (the caller's, wpk_free) and *len. WPK_ERR_UNSUPPORTED for a graph or
 * strings attribute (no op the runtime runs has one), WPK_ERR_NOMEM. */
wpk_status ir_node_encode(wpk_context *ctx, const ir_node *n, uint8_t **out, size_t *len);

/* The node in data[0..len) into *n: strings, attributes and its in/out arrays (filled with -1)
 * allocated in mem; op looked up in the op table. WPK_ERR_PARSE when the bytes are not a
 * node, WPK_ERR_NOMEM. */
wpk_status ir_node_decode(wpk_context *ctx, const void *data, size_t len, arena *mem,
                          ir_node *n);

#endif
