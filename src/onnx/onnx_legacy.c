/* onnx_legacy.c -- older opsets kept some operands as attributes that later opsets made inputs;
 * this file moves them into their input slots (as constants) so that only the input form exists
 * past the frontend. One table row per op whose form changed. */
#include "onnx/onnx_legacy.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

typedef struct legacy_arg {
    const char *attr;  /* NULL ends the list */
    int slot;          /* the input it becomes */
    ir_attr_kind kind; /* IR_ATTR_INTS -> 1-D int64 tensor, IR_ATTR_INT -> one of 1 element;
                        * IR_ATTR_FLOAT -> float32 scalar */
    bool required;
} legacy_arg;

typedef struct legacy_rule {
    const char *op_type;
    int below; /* the attribute form is used by opsets below this one */
    legacy_arg args[3];
} legacy_rule;

/* Every legacy form takes one data input (input 0); the arguments follow it. Clip's and Pad's
 * scalars become float32 constants: before opsets 11 both ops were defined for float types
 * only, and the kernels compute in float32. */
static const legacy_rule rules[] = {
    {"Clip", 11, {{"min", 1, IR_ATTR_FLOAT, false}, {"max", 2, IR_ATTR_FLOAT, false}}},
    {"Squeeze", 13, {{"axes", 1, IR_ATTR_INTS, false}}},
    {"Unsqueeze", 13, {{"axes", 1, IR_ATTR_INTS, true}}},
    {"Split", 13, {{"split", 1, IR_ATTR_INTS, false}}},
    {"ReduceMean", 18, {{"axes", 1, IR_ATTR_INTS, false}}},
    {"ReduceSum", 13, {{"axes", 1, IR_ATTR_INTS, false}}},
    {"ReduceMax", 18, {{"axes", 1, IR_ATTR_INTS, false}}},
    {"ReduceMin", 18, {{"axes", 1, IR_ATTR_INTS, false}}},
    {"ReduceProd", 18, {{"axes", 1, IR_ATTR_INTS, false}}},
    {"ReduceL1", 18, {{"axes", 1, IR_ATTR_INTS, false}}},
    {"ReduceL2", 18, {{"axes", 1, IR_ATTR_INTS, false}}},
    {"ReduceSumSquare", 18, {{"axes", 1, IR_ATTR_INTS, false}}},
    {"ReduceLogSum", 18, {{"axes", 1, IR_ATTR_INTS, false}}},
    {"ReduceLogSumExp", 18, {{"axes", 1, IR_ATTR_INTS, false}}},
    {"TopK", 10, {{"k", 1, IR_ATTR_INT, true}}},
    {"Pad", 11, {{"pads", 1, IR_ATTR_INTS, true}, {"value", 2, IR_ATTR_FLOAT, false}}},
    {"Slice", 10, {{"starts", 1, IR_ATTR_INTS, true}, {"ends", 2, IR_ATTR_INTS, true},
                   {"axes", 3, IR_ATTR_INTS, false}}},
};

static const legacy_rule *find_rule(const char *op_type, int opset) {
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (strcmp(rules[i].op_type, op_type) == 0) return opset < rules[i].below ? &rules[i] : NULL;
    return NULL;
}

int onnx_legacy_slots(const char *op_type, int opset, int nin) {
    const legacy_rule *r = find_rule(op_type, opset);
    for (int a = 0; r && a < 3 && r->args[a].attr; a++)
        if (r->args[a].slot + 1 > nin) nin = r->args[a].slot + 1;
    return nin;
}

static void remove_attr(ir_node *n, const char *name) {
    for (int i = 0; i < n->nattr; i++)
        if (strcmp(n->attrs[i].name, name) == 0) {
            memmove(&n->attrs[i], &n->attrs[i + 1], sizeof(ir_attr) * (size_t)(n->nattr - i - 1));
            n->nattr--;
            return;
        }
}

/* Add t as a constant named "<node>__<attr>", with a numeric suffix if the model already uses
 * that name. Returns the value index, -1 when out of memory. */
static int add_operand(ir_graph *g, const char *node, const char *attr, const ir_tensor *t) {
    size_t cap = strlen(node) + strlen(attr) + 32;
    char *name = wpk_malloc(cap);
    if (!name) return -1;
    snprintf(name, cap, "%s__%s", node, attr);
    for (int k = 1; ir_graph_find_value(g, name) >= 0; k++)
        snprintf(name, cap, "%s__%s_%d", node, attr, k);
    int id = ir_graph_add_const(g, name, t);
    wpk_free(name);
    return id;
}

wpk_status onnx_legacy_canonicalize(wpk_context *ctx, ir_graph *g, int node, int file_nin) {
    ir_node *n = &g->nodes[node];
    const legacy_rule *r = n->domain[0] ? NULL : find_rule(n->op_type, n->opset);
    if (!r) return WPK_OK;
    if (file_nin > 1)
        return wpk_error(ctx, WPK_ERR_MODEL,
                         "node '%s' (%s): opset %d takes 1 input (its other operands are "
                         "attributes), but the node has %d",
                         n->name, n->op_type, n->opset, file_nin);
    int nin = file_nin;
    for (int a = 0; a < 3 && r->args[a].attr; a++) {
        const legacy_arg *arg = &r->args[a];
        const ir_attr *at = ir_attr_find(n, arg->attr);
        if (!at) {
            if (arg->required)
                return wpk_error(ctx, WPK_ERR_MODEL,
                                 "node '%s' (%s): attribute '%s' is required at opset %d", n->name,
                                 n->op_type, arg->attr, n->opset);
            continue;
        }
        if (at->kind != arg->kind)
            return wpk_error(ctx, WPK_ERR_MODEL, "node '%s' (%s): attribute '%s' must be %s",
                             n->name, n->op_type, arg->attr,
                             arg->kind == IR_ATTR_INTS  ? "a list of ints"
                             : arg->kind == IR_ATTR_INT ? "an int"
                                                        : "a float");
        /* an empty optional list means what its absence means (all axes, equal split sizes) */
        if (arg->kind == IR_ATTR_INTS && at->n == 0 && !arg->required) {
            remove_attr(n, arg->attr);
            continue;
        }
        ir_tensor t;
        memset(&t, 0, sizeof t);
        float f = at->f;
        if (arg->kind == IR_ATTR_INTS) {
            t.dtype = WPK_DTYPE_INT64;
            t.ndim = 1;
            t.dims[0] = at->n;
            t.data = at->ints;
        } else if (arg->kind == IR_ATTR_INT) {
            t.dtype = WPK_DTYPE_INT64;
            t.ndim = 1;
            t.dims[0] = 1;
            t.data = (void *)&at->i;
        } else {
            t.dtype = WPK_DTYPE_FLOAT32;
            t.data = &f;
        }
        int id = add_operand(g, n->name, arg->attr, &t);
        if (id < 0)
            return wpk_error(ctx, WPK_ERR_NOMEM, "node '%s' (%s): out of memory", n->name,
                             n->op_type);
        n->in[arg->slot] = id;
        if (arg->slot + 1 > nin) nin = arg->slot + 1;
        remove_attr(n, arg->attr);
    }
    n->nin = nin;
    return WPK_OK;
}
