/* onnx_export.h -- graph IR -> ONNX ModelProto file (protobuf-c), for `wpk optimize`. */
#ifndef WPK_ONNX_EXPORT_H
#define WPK_ONNX_EXPORT_H

#include "ir/graph.h"

/* Write g as an ONNX model at path: initializers as raw_data, nodes of the "wpk" domain with a
 * "wpk" opset import. The file appears complete or not at all (written to a temporary name,
 * then renamed). WPK_ERR_IO naming the path on failure, WPK_ERR_NOMEM. */
wpk_status onnx_export_file(wpk_context *ctx, const ir_graph *g, const char *path);

#endif
