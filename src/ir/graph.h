/* graph.h -- the graph IR: values (tensors), nodes (ops with attributes), graph inputs/outputs.
 * A graph owns all its memory in one arena; values and nodes are referred to by index. */
#ifndef WPK_IR_GRAPH_H
#define WPK_IR_GRAPH_H

#include <stdbool.h>

#include "base/arena.h"
#include "base/context.h"
#include "ir/ops.h"
#include "ir/tensor.h"

/* Numbered as ONNX's AttributeProto.AttributeType. */
typedef enum ir_attr_kind {
    IR_ATTR_FLOAT = 1,
    IR_ATTR_INT = 2,
    IR_ATTR_STRING = 3,
    IR_ATTR_TENSOR = 4,
    IR_ATTR_GRAPH = 5,
    IR_ATTR_FLOATS = 6,
    IR_ATTR_INTS = 7,
    IR_ATTR_STRINGS = 8
} ir_attr_kind;

typedef struct ir_attr {
    const char *name;
    ir_attr_kind kind;
    int64_t i;        /* IR_ATTR_INT */
    float f;          /* IR_ATTR_FLOAT */
    const char *s;    /* IR_ATTR_STRING (NUL-terminated) */
    int n;            /* element count of ints/floats/strings */
    int64_t *ints;    /* IR_ATTR_INTS */
    float *floats;    /* IR_ATTR_FLOATS */
    const char **strs; /* IR_ATTR_STRINGS (each NUL-terminated) */
    ir_tensor *t;     /* IR_ATTR_TENSOR, data in the graph's arena */
} ir_attr;

typedef struct ir_node {
    const char *name;     /* never NULL: unnamed nodes get "<OpType>_<index>" at import */
    const char *op_type;  /* ONNX op type as written, kept for unsupported ops */
    const char *domain;   /* "" for the default ONNX domain */
    ir_op op;             /* IR_OP_UNSUPPORTED when not in the op table */
    int opset;            /* the model's opset version for this node's domain */
    int nin, nout;
    int *in;              /* value indices; -1 for an omitted optional input */
    int *out;             /* value indices; -1 for an omitted optional output */
    int nattr;
    ir_attr *attrs;       /* the node's own array; entries may share strings/arrays with a clone's
                             source, so change an attribute with ir_node_set_attr, never in place */
    bool dead;            /* marked for removal by a pass; ir_graph_compact drops it */
} ir_node;

typedef struct ir_value {
    const char *name;
    ir_tensor t;          /* dtype and shape as declared or inferred; data for constants */
    const char *dim_names[WPK_MAX_DIMS]; /* symbolic dims of graph inputs (dims[i] == -1) */
    int producer;         /* node index; -1 for graph inputs and constants */
    bool is_const;        /* an initializer: t.data holds its values */
    bool is_input;        /* a graph input the user binds */
} ir_value;

typedef struct ir_graph {
    arena mem;
    ir_value *values;
    int nvalues, cap_values;
    ir_node *nodes;
    int nnodes, cap_nodes;
    int *inputs, ninputs;   /* graph inputs the user binds (initializers excluded) */
    int *outputs, noutputs;
    int opset;              /* opset version of the default ONNX domain */
    const char *path;       /* the file it was read from, for messages */
} ir_graph;

/* Create an empty graph; NULL when out of memory. */
ir_graph *ir_graph_create(void);
void ir_graph_free(ir_graph *g);

/* Find a value by name; -1 when absent. */
int ir_graph_find_value(const ir_graph *g, const char *name);
/* Add a value named `name` (copied) and return its index; -1 when out of memory. */
int ir_graph_add_value(ir_graph *g, const char *name);
/* Find or add. */
int ir_graph_value(ir_graph *g, const char *name);
/* Append a node with nin inputs and nout outputs (arrays allocated, filled with -1) and
 * return its index; -1 when out of memory. Strings are copied. */
int ir_graph_add_node(ir_graph *g, const char *name, const char *op_type, const char *domain,
                      int opset, int nin, int nout);
/* Add a constant value holding a copy of t (data copied into the graph) and return its index. */
int ir_graph_add_const(ir_graph *g, const char *name, const ir_tensor *t);

/* Put nodes in an order where every input is produced before it is read. Returns
 * WPK_ERR_MODEL naming a node in a cycle or one reading a value no one produces. */
wpk_status ir_graph_toposort(wpk_context *ctx, ir_graph *g);

/* ---- rewriting (for passes) ---- */

/* A copy that passes can rewrite: its own value/node tables, edge and attribute arrays; names,
 * attribute payloads and constant data are shared with src, which must outlive the copy.
 * NULL when out of memory. */
ir_graph *ir_graph_clone(const ir_graph *src);
/* Point every read of value `from` (node inputs, graph outputs) at `to`. */
void ir_graph_replace_uses(ir_graph *g, int from, int to);
/* Reads of v: node inputs of live nodes plus graph outputs. */
int ir_graph_count_uses(const ir_graph *g, int v);
/* The live node reading v, when exactly one node reads it once and it is not a graph output;
 * -1 otherwise. */
int ir_graph_single_consumer(const ir_graph *g, int v);
bool ir_graph_is_output(const ir_graph *g, int v);
/* Drop the nodes marked dead, keeping order, and refresh every value's producer. */
void ir_graph_compact(ir_graph *g);
/* A value name not used in g yet: base, or base_1, base_2, ... (in the graph arena). */
const char *ir_graph_unique_name(ir_graph *g, const char *base);
/* Give node n room for nin inputs (new slots are -1); WPK_ERR_NOMEM. */
wpk_status ir_node_resize(ir_graph *g, ir_node *n, int nin, int nout);
/* Add or replace an attribute of n (payload copied into the graph arena); WPK_ERR_NOMEM. */
wpk_status ir_node_set_attr(ir_graph *g, ir_node *n, const ir_attr *a);
wpk_status ir_node_set_int(ir_graph *g, ir_node *n, const char *name, int64_t v);
wpk_status ir_node_set_float(ir_graph *g, ir_node *n, const char *name, float v);
wpk_status ir_node_set_str(ir_graph *g, ir_node *n, const char *name, const char *v);
wpk_status ir_node_set_ints(ir_graph *g, ir_node *n, const char *name, const int64_t *v, int count);
void ir_node_remove_attr(ir_node *n, const char *name);
/* Turn node n into op `op` of the table (op_type and domain follow). */
void ir_node_set_op(ir_node *n, ir_op op);

/* The attribute giving a node's own OpenMP team size in a compiled plan (an int >= 1; absent:
 * the plan's threads). The fusion/threads plan search sets it; any op may carry it. */
#define IR_ATTR_THREADS "wpk_threads"

/* Attributes. The getters return the default when the attribute is absent. */
const ir_attr *ir_attr_find(const ir_node *n, const char *name);
int64_t ir_attr_int(const ir_node *n, const char *name, int64_t def);
float ir_attr_float(const ir_node *n, const char *name, float def);
const char *ir_attr_str(const ir_node *n, const char *name, const char *def);
/* The ints of attribute `name` and their count in *count; NULL (and *count = 0) when absent. */
const int64_t *ir_attr_ints(const ir_node *n, const char *name, int *count);

#endif
