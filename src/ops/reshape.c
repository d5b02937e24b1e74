/* reshape.c -- ops that keep the data and only relabel its shape (Flatten, Reshape, Squeeze,
 * Unsqueeze, Identity, Dropout at inference) and Shape, which turns a shape into data.
 * Dims below zero in an input are unknown (symbolic); the shape functions carry them through
 * as -1 where the output dim depends on them. */
#include "ops/op_util.h"

#include <string.h>

/* Product of dims[from, to); -1 when one of them is unknown. */
static int64_t dims_prod(const int64_t *dims, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) {
        if (dims[i] < 0) return -1;
        p *= dims[i];
    }
    return p;
}

wpk_status op_flatten_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                            ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "input");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    const ir_tensor *x = in[0];
    /* axis lies in [-rank, rank]; axis == rank gives [numel, 1] */
    int64_t axis = ir_attr_int(n, "axis", 1);
    if (axis < -x->ndim || axis > x->ndim)
        return op_fail(ctx, n, "attribute 'axis' %lld is out of range for a %d-d input",
                       (long long)axis, x->ndim);
    int a = (int)(axis < 0 ? axis + x->ndim : axis);
    int64_t dims[2] = {dims_prod(x->dims, 0, a), dims_prod(x->dims, a, x->ndim)};
    op_set_shape(out[0], x->dtype, 2, dims);
    return WPK_OK;
}

wpk_status op_reshape_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                            ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "data");
    if (!st) st = op_need_data(ctx, n, in, 1, "shape");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    const ir_tensor *x = in[0];
    int64_t shape[WPK_MAX_DIMS];
    int nd;
    st = op_read_ints(ctx, n, in[1], shape, WPK_MAX_DIMS, &nd, "shape");
    if (st) return st;
    bool allowzero = ir_attr_int(n, "allowzero", 0) != 0;
    char b1[160], b2[160];
    int infer = -1;
    int64_t known = 1; /* product of the output dims other than the inferred one */
    bool unknown = false;
    int64_t dims[WPK_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        int64_t d = shape[i];
        if (d == -1) {
            if (infer >= 0)
                return op_fail(ctx, n, "input 'shape' %s has more than one -1",
                               op_dims_str(b1, sizeof b1, nd, shape));
            infer = i;
            continue;
        }
        if (d < -1)
            return op_fail(ctx, n, "input 'shape' %s has the invalid value %lld at index %d",
                           op_dims_str(b1, sizeof b1, nd, shape), (long long)d, i);
        if (d == 0 && !allowzero) {
            if (i >= x->ndim)
                return op_fail(ctx, n, "input 'shape' %s has 0 at index %d, but the input %s "
                               "has no dim %d to copy", op_dims_str(b1, sizeof b1, nd, shape), i,
                               op_dims_str(b2, sizeof b2, x->ndim, x->dims), i);
            d = x->dims[i];
        }
        dims[i] = d;
        if (d < 0) unknown = true;
        else known *= d;
    }
    for (int i = 0; allowzero && infer >= 0 && i < nd; i++)
        if (shape[i] == 0)
            return op_fail(ctx, n, "input 'shape' %s has both 0 and -1, which allowzero=1 "
                           "makes ambiguous", op_dims_str(b1, sizeof b1, nd, shape));
    int64_t total = dims_prod(x->dims, 0, x->ndim);
    if (total < 0 || unknown) {
        /* the element count is not known yet: the inferred dim is unknown too */
        if (infer >= 0) dims[infer] = -1;
    } else if (infer >= 0) {
        if (known == 0 || total % known != 0)
            return op_fail(ctx, n, "cannot reshape %s (%lld elements) to %s: the -1 cannot be "
                           "inferred", op_dims_str(b1, sizeof b1, x->ndim, x->dims),
                           (long long)total, op_dims_str(b2, sizeof b2, nd, shape));
        dims[infer] = total / known;
    } else if (known != total) {
        return op_fail(ctx, n, "cannot reshape %s (%lld elements) to %s (%lld elements)",
                       op_dims_str(b1, sizeof b1, x->ndim, x->dims), (long long)total,
                       op_dims_str(b2, sizeof b2, nd, dims), (long long)known);
    }
    op_set_shape(out[0], x->dtype, nd, dims);
    return WPK_OK;
}

wpk_status op_unsqueeze_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                              ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "data");
    if (!st) st = op_need_data(ctx, n, in, 1, "axes");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    const ir_tensor *x = in[0];
    int64_t axes[WPK_MAX_DIMS];
    int na;
    st = op_read_ints(ctx, n, in[1], axes, WPK_MAX_DIMS, &na, "axes");
    if (st) return st;
    int rank = x->ndim + na;
    if (rank > WPK_MAX_DIMS)
        return op_unsupported(ctx, n, "the output would have %d dims; at most %d are supported",
                              rank, WPK_MAX_DIMS);
    bool inserted[WPK_MAX_DIMS] = {false};
    for (int i = 0; i < na; i++) {
        int a;
        st = op_axis(ctx, n, axes[i], rank, &a, "axis in 'axes'");
        if (st) return st;
        if (inserted[a])
            return op_fail(ctx, n, "input 'axes' names output axis %d twice", a);
        inserted[a] = true;
    }
    int64_t dims[WPK_MAX_DIMS];
    for (int i = 0, k = 0; i < rank; i++) dims[i] = inserted[i] ? 1 : x->dims[k++];
    op_set_shape(out[0], x->dtype, rank, dims);
    return WPK_OK;
}

wpk_status op_squeeze_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                            ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "data");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    const ir_tensor *x = in[0];
    bool drop[WPK_MAX_DIMS] = {false};
    char b1[160];
    /* an empty 'axes' tensor means no axes were given, as in ONNX Runtime */
    if (n->nin > 1 && in[1] && ir_numel(in[1]) != 0) {
        st = op_need_data(ctx, n, in, 1, "axes");
        if (st) return st;
        int64_t axes[WPK_MAX_DIMS];
        int na;
        st = op_read_ints(ctx, n, in[1], axes, WPK_MAX_DIMS, &na, "axes");
        if (st) return st;
        for (int i = 0; i < na; i++) {
            int a;
            st = op_axis(ctx, n, axes[i], x->ndim, &a, "axis in 'axes'");
            if (st) return st;
            if (drop[a]) return op_fail(ctx, n, "input 'axes' names axis %d twice", a);
            /* an unknown dim that is named here must be 1 at run time */
            if (x->dims[a] != 1 && x->dims[a] >= 0)
                return op_fail(ctx, n, "cannot squeeze axis %d of %s: its size is %lld, not 1",
                               a, op_dims_str(b1, sizeof b1, x->ndim, x->dims),
                               (long long)x->dims[a]);
            drop[a] = true;
        }
    } else {
        for (int i = 0; i < x->ndim; i++) {
            if (x->dims[i] < 0)
                return op_unsupported(ctx, n, "Squeeze without 'axes' on %s: whether dim %d "
                                      "is 1 is not known", op_dims_str(b1, sizeof b1, x->ndim,
                                                                    x->dims), i);
            drop[i] = x->dims[i] == 1;
        }
    }
    int64_t dims[WPK_MAX_DIMS];
    int rank = 0;
    for (int i = 0; i < x->ndim; i++)
        if (!drop[i]) dims[rank++] = x->dims[i];
    op_set_shape(out[0], x->dtype, rank, dims);
    return WPK_OK;
}

wpk_status op_identity_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "input");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    op_set_shape(out[0], in[0]->dtype, in[0]->ndim, in[0]->dims);
    return WPK_OK;
}

/* Dropout at inference is the identity; its optional mask is all true. So is training mode
 * with a ratio of 0 (exporters write it where a model calls dropout with training on and
 * p = 0: torchvision's Swin). Training mode with another ratio would need random numbers and
 * is refused. */
wpk_status op_dropout_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                            ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "data");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    const ir_tensor *x = in[0];
    if (n->nin > 2 && in[2]) {
        st = op_need_data(ctx, n, in, 2, "training_mode");
        if (st) return st;
        if (in[2]->dtype != WPK_DTYPE_BOOL || ir_numel(in[2]) != 1)
            return op_fail(ctx, n, "input 'training_mode' must be a bool scalar");
        if (*(const uint8_t *)in[2]->data && !op_dropout_ratio_zero(in[1]))
            return op_unsupported(ctx, n, "training_mode is true with a ratio other than 0; "
                                  "only inference (dropout as identity) is supported");
    }
    if (ir_attr_int(n, "is_test", 1) == 0)
        return op_unsupported(ctx, n, "attribute 'is_test' is 0; only inference is supported");
    op_set_shape(out[0], x->dtype, x->ndim, x->dims);
    if (n->nout > 1 && out[1]) op_set_shape(out[1], WPK_DTYPE_BOOL, x->ndim, x->dims);
    return WPK_OK;
}

bool op_dropout_ratio_zero(const ir_tensor *ratio) {
    if (!ratio || !ratio->data || ir_numel(ratio) != 1) return false;
    if (ratio->dtype == WPK_DTYPE_FLOAT32) return *(const float *)ratio->data == 0.0f;
    if (ratio->dtype == WPK_DTYPE_FLOAT64) return *(const double *)ratio->data == 0.0;
    return false;
}

/* Input 0's bytes to output 0; a no-op when the runtime placed them in one buffer. */
wpk_status op_copy_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                       ir_tensor *const *out) {
    size_t bytes = ir_nbytes(out[0]);
    if (ir_nbytes(in[0]) != bytes)
        return wpk_error(ctx, WPK_ERR_INTERNAL, "node '%s' (%s): input has %zu bytes but the "
                         "output %zu", n->name, n->op_type, ir_nbytes(in[0]), bytes);
    if (bytes && in[0]->data != out[0]->data) memmove(out[0]->data, in[0]->data, bytes);
    return WPK_OK;
}

wpk_status op_dropout_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                          ir_tensor *const *out) {
    wpk_status st = op_copy_ref(ctx, n, in, out);
    if (st) return st;
    if (n->nout > 1 && out[1] && ir_numel(out[1]))
        memset(out[1]->data, 1, (size_t)ir_numel(out[1]));
    return WPK_OK;
}

/* The [start, end) range of dims Shape reports: all of them before opset 15, then the
 * attributes, negative from the back, clamped to [0, rank]. */
static void shape_range(const ir_node *n, int rank, int *start, int *end) {
    int64_t s = 0, e = rank;
    if (n->opset >= 15) {
        s = ir_attr_int(n, "start", 0);
        e = ir_attr_int(n, "end", rank);
    }
    if (s < 0) s += rank;
    if (e < 0) e += rank;
    s = s < 0 ? 0 : s > rank ? rank : s;
    e = e < 0 ? 0 : e > rank ? rank : e;
    *start = (int)s;
    *end = (int)(e < s ? s : e);
}

wpk_status op_shape_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                          ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "data");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    int s, e;
    shape_range(n, in[0]->ndim, &s, &e);
    int64_t len = e - s;
    op_set_shape(out[0], WPK_DTYPE_INT64, 1, &len);
    return WPK_OK;
}

wpk_status op_shape_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out) {
    int s, e;
    shape_range(n, in[0]->ndim, &s, &e);
    int64_t *y = out[0]->data;
    for (int i = s; i < e; i++) {
        if (in[0]->dims[i] < 0)
            return op_unsupported(ctx, n, "dim %d of the input is not known", i);
        y[i - s] = in[0]->dims[i];
    }
    return WPK_OK;
}
