/* ops.h -- the op enum and table, generated from ops.def, and the signatures every op
 * implements: a shape function and a reference kernel. */
#ifndef WPK_IR_OPS_H
#define WPK_IR_OPS_H

#include <stdbool.h>

#include "base/context.h"
#include "ir/tensor.h"

typedef enum ir_op {
    IR_OP_UNSUPPORTED = 0,
#define X(id, domain, name, shape, ref, inplace) IR_OP_##id,
#include "ir/ops.def"
#undef X
    IR_OP_COUNT
} ir_op;

struct ir_node;

/* Shape function: from the inputs' dtypes and shapes (and data, where an input carries a shape
 * or indices: `data` is NULL when not known), set every present output's dtype, ndim and dims.
 * in[i] / out[i] are NULL for omitted optional inputs/outputs. Returns WPK_ERR_MODEL with a
 * message naming node and attribute when the node is inconsistent, WPK_ERR_UNSUPPORTED for a
 * valid case not implemented (e.g. a dtype), and WPK_ERR_UNSUPPORTED "... is not constant"
 * when it needs an input's data that is not known. Never touches out[i]->data. */
typedef wpk_status (*ir_shape_fn)(wpk_context *ctx, const struct ir_node *n,
                                  ir_tensor *const *in, ir_tensor *const *out);

/* Reference kernel: computes outputs from inputs. Called after the shape function, with every
 * input's data present and every output's data allocated to its inferred size. The plain,
 * obviously-correct implementation every other backend is checked against. */
typedef wpk_status (*ir_ref_fn)(wpk_context *ctx, const struct ir_node *n,
                                ir_tensor *const *in, ir_tensor *const *out);

typedef struct ir_op_info {
    const char *domain;     /* "" for ONNX's default domain, "wpk" for ours */
    const char *name;       /* op type */
    ir_shape_fn shape;
    ir_ref_fn ref;
    bool inplace;           /* output may share the first input's buffer */
} ir_op_info;

/* The table entry of op (IR_OP_UNSUPPORTED has a NULL name). */
const ir_op_info *ir_op_get(ir_op op);
/* The op for a domain ("" or "ai.onnx" for the default one) and op type; IR_OP_UNSUPPORTED
 * when not in the table. */
ir_op ir_op_from_onnx(const char *domain, const char *op_type);

#define X(id, domain, name, shape, ref, inplace) \
    wpk_status shape(wpk_context *, const struct ir_node *, ir_tensor *const *, ir_tensor *const *); \
    wpk_status ref(wpk_context *, const struct ir_node *, ir_tensor *const *, ir_tensor *const *);
#include "ir/ops.def"
#undef X

#endif
