/* onnx_float16.h -- float16 / bfloat16 models (as onnxconverter_common's float16 conversion
 * writes them) made to run with 16-bit storage at the edges and float32 compute inside. */
#ifndef WPK_ONNX_ONNX_FLOAT16_H
#define WPK_ONNX_ONNX_FLOAT16_H

#include "ir/graph.h"

/* Rewrites g so that every tensor inside it is float32 where the file says float16 or
 * bfloat16: constants (initializers, Constant and ConstantOfShape values) are widened, Casts
 * to a 16-bit float cast to float32 instead, a 16-bit graph input is read through a Cast to
 * float32 and a 16-bit graph output is written by a Cast from float32, so callers still see
 * the file's dtypes. Values stay exact (every 16-bit float is a float32); results differ from
 * a 16-bit compute only by the roundings it would have made. A graph without 16-bit floats is
 * untouched. WPK_ERR_NOMEM. */
wpk_status onnx_float16_to_f32(wpk_context *ctx, ir_graph *g);

#endif
