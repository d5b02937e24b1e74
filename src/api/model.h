/* model.h -- the struct behind wpk_model: the imported graph and its statically inferred shapes. */
#ifndef WPK_API_MODEL_H
#define WPK_API_MODEL_H

#include "ir/graph.h"

struct wpk_model {
    ir_graph *g;
    ir_tensor *vals;  /* per value: shapes inferred with symbolic dims bound to 1 */
    arena fold_mem;   /* data of values folded during inference */
};

#endif
