/* constant.c -- ops that make a tensor from attributes: Constant and ConstantOfShape. */
#include "ops/op_util.h"

#include <string.h>

static wpk_status need_output(wpk_context *ctx, const ir_node *n, ir_tensor *const *out) {
    if (n->nout < 1 || !out[0]) return op_fail(ctx, n, "output 0 is missing");
    return WPK_OK;
}

/* Constant carries its value in exactly one of these attributes. */
static const char *const value_attrs[] = {"value", "value_float", "value_floats", "value_int",
                                          "value_ints", "sparse_value", "value_string",
                                          "value_strings"};

/* The one value attribute of a Constant node, with its kind checked. */
static wpk_status constant_attr(wpk_context *ctx, const ir_node *n, const ir_attr **out) {
    const ir_attr *found = NULL;
    for (size_t i = 0; i < sizeof value_attrs / sizeof value_attrs[0]; i++) {
        const ir_attr *a = ir_attr_find(n, value_attrs[i]);
        if (!a) continue;
        if (found)
            return op_fail(ctx, n, "has both attribute '%s' and '%s'; exactly one value "
                           "attribute is allowed", found->name, a->name);
        found = a;
    }
    if (!found) return op_fail(ctx, n, "has no value attribute ('value', 'value_float', ...)");
    const char *name = found->name;
    if (strcmp(name, "sparse_value") == 0 || strncmp(name, "value_string", 12) == 0)
        return op_unsupported(ctx, n, "attribute '%s' is not supported (no sparse or string "
                              "tensors)", name);
    static const struct { const char *name; ir_attr_kind kind; } kinds[] = {
        {"value", IR_ATTR_TENSOR}, {"value_float", IR_ATTR_FLOAT},
        {"value_floats", IR_ATTR_FLOATS}, {"value_int", IR_ATTR_INT},
        {"value_ints", IR_ATTR_INTS}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(name, kinds[i].name) == 0 && found->kind != kinds[i].kind)
            return op_fail(ctx, n, "attribute '%s' has the wrong kind (%d)", name,
                           (int)found->kind);
    if (found->kind == IR_ATTR_TENSOR) {
        const ir_tensor *t = found->t;
        if (!t) return op_fail(ctx, n, "attribute 'value' holds no tensor");
        if (!wpk_dtype_size(t->dtype))
            return op_unsupported(ctx, n, "attribute 'value' has dtype %d, which is not "
                                  "supported", (int)t->dtype);
        if (!t->data && ir_numel(t) != 0)
            return op_fail(ctx, n, "attribute 'value' has no data");
    }
    *out = found;
    return WPK_OK;
}

wpk_status op_constant_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             ir_tensor *const *out) {
    (void)in;
    const ir_attr *a;
    wpk_status st = need_output(ctx, n, out);
    if (!st) st = constant_attr(ctx, n, &a);
    if (st) return st;
    int64_t len = a->n;
    switch (a->kind) {
    case IR_ATTR_TENSOR: op_set_shape(out[0], a->t->dtype, a->t->ndim, a->t->dims); break;
    case IR_ATTR_FLOAT: op_set_shape(out[0], WPK_DTYPE_FLOAT32, 0, NULL); break;
    case IR_ATTR_INT: op_set_shape(out[0], WPK_DTYPE_INT64, 0, NULL); break;
    case IR_ATTR_FLOATS: op_set_shape(out[0], WPK_DTYPE_FLOAT32, 1, &len); break;
    case IR_ATTR_INTS: op_set_shape(out[0], WPK_DTYPE_INT64, 1, &len); break;
    default: return op_fail(ctx, n, "attribute '%s' has an unexpected kind", a->name);
    }
    return WPK_OK;
}

wpk_status op_constant_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                           ir_tensor *const *out) {
    (void)in;
    const ir_attr *a;
    wpk_status st = constant_attr(ctx, n, &a);
    if (st) return st;
    void *y = out[0]->data;
    size_t bytes = ir_nbytes(out[0]);
    switch (a->kind) {
    case IR_ATTR_TENSOR:
        if (bytes != ir_nbytes(a->t))
            return op_fail(ctx, n, "output has %zu bytes but attribute 'value' %zu", bytes,
                           ir_nbytes(a->t));
        if (bytes) memcpy(y, a->t->data, bytes);
        break;
    case IR_ATTR_FLOAT: *(float *)y = a->f; break;
    case IR_ATTR_INT: *(int64_t *)y = a->i; break;
    case IR_ATTR_FLOATS:
        if (a->n) memcpy(y, a->floats, sizeof(float) * (size_t)a->n);
        break;
    case IR_ATTR_INTS:
        if (a->n) memcpy(y, a->ints, sizeof(int64_t) * (size_t)a->n);
        break;
    default: return op_fail(ctx, n, "attribute '%s' has an unexpected kind", a->name);
    }
    return WPK_OK;
}

/* The fill value: attribute 'value' (a one-element tensor), float32 0 when absent. */
static wpk_status fill_value(wpk_context *ctx, const ir_node *n, const ir_tensor **t) {
    const ir_attr *a = ir_attr_find(n, "value");
    *t = NULL;
    if (!a) return WPK_OK;
    if (a->kind != IR_ATTR_TENSOR || !a->t)
        return op_fail(ctx, n, "attribute 'value' must be a tensor");
    if (ir_numel(a->t) != 1)
        return op_fail(ctx, n, "attribute 'value' must have one element, not %lld",
                       (long long)ir_numel(a->t));
    if (!wpk_dtype_size(a->t->dtype))
        return op_unsupported(ctx, n, "attribute 'value' has dtype %d, which is not supported",
                              (int)a->t->dtype);
    if (!a->t->data) return op_fail(ctx, n, "attribute 'value' has no data");
    *t = a->t;
    return WPK_OK;
}

wpk_status op_constant_of_shape_shape(wpk_context *ctx, const ir_node *n,
                                      ir_tensor *const *in, ir_tensor *const *out) {
    const ir_tensor *v;
    wpk_status st = need_output(ctx, n, out);
    if (!st) st = op_need_data(ctx, n, in, 0, "input");
    if (!st) st = fill_value(ctx, n, &v);
    if (st) return st;
    if (in[0]->dtype != WPK_DTYPE_INT64)
        return op_fail(ctx, n, "input 'input' (the shape) must be int64, not %s",
                       wpk_dtype_name(in[0]->dtype));
    if (in[0]->ndim != 1)
        return op_fail(ctx, n, "input 'input' (the shape) must be 1-D, not %d-D", in[0]->ndim);
    int64_t dims[WPK_MAX_DIMS];
    int nd;
    st = op_read_ints(ctx, n, in[0], dims, WPK_MAX_DIMS, &nd, "input");
    if (st) return st;
    for (int i = 0; i < nd; i++)
        if (dims[i] < 0)
            return op_fail(ctx, n, "input 'input' (the shape) has the negative dim %lld at "
                           "index %d", (long long)dims[i], i);
    op_set_shape(out[0], v ? v->dtype : WPK_DTYPE_FLOAT32, nd, dims);
    return WPK_OK;
}

wpk_status op_constant_of_shape_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                    ir_tensor *const *out) {
    (void)in;
    const ir_tensor *v;
    wpk_status st = fill_value(ctx, n, &v);
    if (st) return st;
    ir_tensor *y = out[0];
    size_t es = wpk_dtype_size(y->dtype);
    int64_t count = ir_numel(y);
    unsigned char value[16] = {0};
    if (v) memcpy(value, v->data, es);
    bool zero = true;
    for (size_t i = 0; i < es; i++) zero = zero && value[i] == 0;
    if (count == 0) return WPK_OK;
    if (zero) {
        memset(y->data, 0, (size_t)count * es);
        return WPK_OK;
    }
    char *dst = y->data;
    for (int64_t i = 0; i < count; i++) memcpy(dst + (size_t)i * es, value, es);
    return WPK_OK;
}
