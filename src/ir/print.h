/* print.h -- deterministic text form of a graph, for goldens, dumps and `wpk info --graph`. */
#ifndef WPK_IR_PRINT_H
#define WPK_IR_PRINT_H

#include "base/strbuf.h"
#include "ir/graph.h"

/* Append g's text to b. vals (may be NULL) gives inferred shapes per value. */
void ir_print(const ir_graph *g, const ir_tensor *vals, strbuf *b);
/* "float32[1, 3, 224, 224]" (symbolic dims by name when dim_names is given). */
void ir_print_type(const ir_tensor *t, const char *const *dim_names, strbuf *b);

#endif
