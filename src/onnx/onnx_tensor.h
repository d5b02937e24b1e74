/* onnx_tensor.h -- decoding ONNX TensorProto values (initializers, tensor attributes, test data)
 * into ir_tensor, in every storage form ONNX writes: raw_data, the typed repeated fields, and
 * external data files. */
#ifndef WPK_ONNX_TENSOR_H
#define WPK_ONNX_TENSOR_H

#include <stdint.h>

#include "base/arena.h"
#include "base/context.h"
#include "ir/tensor.h"
#include "onnx/onnx.pb-c.h"

/* The dtype for an ONNX TensorProto.DataType; WPK_DTYPE_UNDEFINED for one Woodpecker cannot hold. */
wpk_dtype onnx_dtype(int32_t onnx_type);
/* ONNX's name of a data type ("float16"), or "unknown" for a number ONNX does not define. */
const char *onnx_dtype_name(int32_t onnx_type);
/* WPK_ERR_UNSUPPORTED "<what> has dtype float16, ..." when onnx_type cannot be held,
 * WPK_ERR_MODEL when it is 0 (undefined); else WPK_OK with *out set. */
wpk_status onnx_dtype_check(wpk_context *ctx, int32_t onnx_type, const char *what, wpk_dtype *out);

/* Decode tp (borrowed) into t: dtype, shape, and data allocated in arena a (even for zero
 * elements, so t->data is never NULL on success). base_dir is the directory external data
 * locations are relative to (NULL: external data is refused). `what` names the tensor in
 * messages ("initializer 'w'"); messages do not name the model file, the caller prefixes it.
 * Returns WPK_ERR_MODEL (dims or data inconsistent, bad external data entry), WPK_ERR_UNSUPPORTED
 * (dtype, segments, too many dims, external data without base_dir), WPK_ERR_IO (external file),
 * WPK_ERR_NOMEM. */
wpk_status onnx_tensor_decode(wpk_context *ctx, const Onnx__TensorProto *tp, const char *base_dir,
                              arena *a, ir_tensor *t, const char *what);

#endif
