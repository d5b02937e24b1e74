/* onnx_export.c -- graph IR -> ONNX ModelProto. */
#include "onnx/onnx_export.h"

wpk_status onnx_export_file(wpk_context *ctx, const ir_graph *g, const char *path) {
    (void)g;
    return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "%s: writing ONNX is not implemented yet", path);
}
