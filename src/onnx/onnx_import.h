/* onnx_import.h -- the ONNX frontend: read a model file (or bytes) into a graph IR, and decode
 * single serialized tensors (ONNX test data).
 *
 * The importer checks everything it reads (lengths, dims, data sizes, external data paths) and
 * never crashes on malformed bytes. Older-opset attribute forms are rewritten into the newest
 * input form (Clip min/max, Squeeze/Unsqueeze axes, Split sizes, ReduceMean axes, Pad pads and
 * value, Slice starts/ends/axes), so later stages see one form. Ops Woodpecker does not implement
 * are not an error here: their nodes keep op == IR_OP_UNSUPPORTED so all of them can be listed.
 * Not thread-safe with respect to ctx (one context per thread). */
#ifndef WPK_ONNX_IMPORT_H
#define WPK_ONNX_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/context.h"
#include "ir/graph.h"

/* Read an ONNX model file (external data files resolved relative to its directory) into a new
 * graph, topologically sorted. On success *out is owned by the caller (ir_graph_free). On failure
 * *out is NULL and ctx holds a message starting with the path: WPK_ERR_IO (missing/unreadable
 * file), WPK_ERR_PARSE (not an ONNX model), WPK_ERR_MODEL (inconsistent model),
 * WPK_ERR_UNSUPPORTED (opset, dtype, sparse or segmented tensors, non-tensor graph inputs),
 * WPK_ERR_NOMEM. */
wpk_status onnx_import_file(wpk_context *ctx, const char *path, ir_graph **out);

/* Parse a model from memory (buf borrowed for the call). base_dir is the directory external data
 * paths are relative to (NULL: a tensor with external data is an error); `what` names the source
 * in messages and becomes the graph's path (NULL: "<memory>"). Returns as onnx_import_file. */
wpk_status onnx_import_buffer(wpk_context *ctx, const uint8_t *buf, size_t len, const char *base_dir,
                              const char *what, ir_graph **out);

/* Decode one serialized TensorProto (e.g. ONNX test data input_0.pb) into t, its data allocated in
 * arena a; *name (if name is not NULL) is the tensor's name, copied into a ("" when unnamed).
 * External data is an error. Messages do not name a file: prefix it with wpk_error_prefix.
 * Returns WPK_ERR_PARSE (not a TensorProto), WPK_ERR_MODEL (data inconsistent with dims),
 * WPK_ERR_UNSUPPORTED (dtype), WPK_ERR_NOMEM. */
wpk_status onnx_read_tensor(wpk_context *ctx, const uint8_t *buf, size_t len, arena *a,
                            ir_tensor *t, const char **name);

#endif
