/* ops.c -- the op table, generated from ops.def. */
#include "ir/ops.h"

#include <string.h>

static const ir_op_info table[IR_OP_COUNT] = {
    [IR_OP_UNSUPPORTED] = {NULL, NULL, NULL, NULL, false},
#define X(id, domain, name, shape, ref, inplace) [IR_OP_##id] = {domain, name, shape, ref, inplace},
#include "ir/ops.def"
#undef X
};

const ir_op_info *ir_op_get(ir_op op) {
    return (op > IR_OP_UNSUPPORTED && op < IR_OP_COUNT) ? &table[op] : &table[0];
}

ir_op ir_op_from_onnx(const char *domain, const char *op_type) {
    if (!domain || strcmp(domain, "ai.onnx") == 0) domain = "";
    for (int op = 1; op < IR_OP_COUNT; op++)
        if (strcmp(table[op].domain, domain) == 0 && strcmp(table[op].name, op_type) == 0)
            return (ir_op)op;
    return IR_OP_UNSUPPORTED;
}
