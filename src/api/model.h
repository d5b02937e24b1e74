/* model.h -- the struct behind wpk_model: the imported graph and its statically inferred shapes. */
#ifndef WPK_API_MODEL_H
#define WPK_API_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "ir/graph.h"
#include "wpk.h"

struct wpk_model {
    ir_graph *g;
    ir_tensor *vals;  /* per value: shapes inferred with symbolic dims bound to 1 */
    arena fold_mem;   /* data of values folded during inference */
};

/* A model read from ONNX bytes in memory (a compiled plan's graph; borrowed for the call):
 * imported, verified, shapes inferred, as wpk_model_load does with a file; `what` names it in
 * messages. Errors of onnx_import_buffer. *out is the caller's (wpk_model_free). */
wpk_status api_model_from_buffer(wpk_context *ctx, const uint8_t *buf, size_t len,
                                 const char *what, wpk_model **out);

/* A model over g (taken over, freed with the model or on error; a clone must not outlive its
 * source): verified and its shapes inferred as api_model_from_buffer does. */
wpk_status api_model_from_graph(wpk_context *ctx, ir_graph *g, const char *what,
                                wpk_model **out);

#endif
