/* op_util.h -- helpers shared by the op files: errors that name the node, reading small int
 * tensors (shapes, axes, indices), axis normalization, broadcasting, and the rule for when a
 * kernel loop runs in parallel. */
#ifndef WPK_OPS_OP_UTIL_H
#define WPK_OPS_OP_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "ir/graph.h"

/* WPK_ERR_MODEL with "node 'NAME' (OpType): <message>". */
wpk_status op_fail(wpk_context *ctx, const ir_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* WPK_ERR_UNSUPPORTED with "node 'NAME' (OpType): <message>". */
wpk_status op_unsupported(wpk_context *ctx, const ir_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Check that input i is present (else WPK_ERR_MODEL naming `what`). */
wpk_status op_need_input(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, int i,
                         const char *what);
/* Check that input i is present and its data is known (else WPK_ERR_UNSUPPORTED "input 'what'
 * is not constant"): for inputs that carry shapes, axes or sizes. */
wpk_status op_need_data(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, int i,
                        const char *what);
/* Check that output i is present (else WPK_ERR_MODEL "output i is missing"). */
wpk_status op_need_output(wpk_context *ctx, const ir_node *n, ir_tensor *const *out, int i);
/* Check dtype is float32 for input i (else WPK_ERR_UNSUPPORTED naming the dtype). */
wpk_status op_need_f32(wpk_context *ctx, const ir_node *n, ir_tensor *const *in, int i);

/* Read an int32/int64 tensor (with data) into out[0..max); *count = its element count.
 * WPK_ERR_MODEL when it has more than max elements or another dtype. */
wpk_status op_read_ints(wpk_context *ctx, const ir_node *n, const ir_tensor *t, int64_t *out,
                        int max, int *count, const char *what);

/* A 0/1 flag attribute (absent: 0) into *out; WPK_ERR_MODEL naming it for another value. */
wpk_status op_attr_flag(wpk_context *ctx, const ir_node *n, const char *name, bool *out);

/* Normalize axis in [-ndim, ndim) to [0, ndim); WPK_ERR_MODEL naming `what` otherwise. */
wpk_status op_axis(wpk_context *ctx, const ir_node *n, int64_t axis, int ndim, int *out,
                   const char *what);

/* Numpy-style multidirectional broadcast of the shapes of a and b into out (dims, ndim). */
wpk_status op_broadcast(wpk_context *ctx, const ir_node *n, const ir_tensor *a,
                        const ir_tensor *b, ir_tensor *out);

/* Set dtype and shape of an output. */
void op_set_shape(ir_tensor *t, wpk_dtype dtype, int ndim, const int64_t *dims);

/* Row-major strides of t in elements, with stride 0 where a dim of t is broadcast to out's
 * (t right-aligned against an out of out_ndim dims). */
void op_broadcast_strides(const ir_tensor *t, int out_ndim, const int64_t *out_dims,
                          int64_t *strides);

/* Whether a Dropout's ratio input is a known scalar 0 (float32 or float64): training mode
 * then drops nothing and the node is the identity. */
bool op_dropout_ratio_zero(const ir_tensor *ratio);

/* Element i of an int32/int64 tensor as int64. */
int64_t op_int_at(const ir_tensor *t, int64_t i);

/* Every element of the int32/int64 index tensor idx lies in [-d, d) (negative ones count from
 * the back of an axis of size d); otherwise an error naming the element and the axis. */
wpk_status op_check_indices(wpk_context *ctx, const ir_node *n, const ir_tensor *idx, int64_t d,
                            int axis);

/* "[2,3,4]" into buf (cut short when cap is too small), for messages; returns buf. */
const char *op_dims_str(char *buf, size_t cap, int ndim, const int64_t *dims);

/* Whether a kernel loop of `work` units (the site's own unit: elements, bytes, tasks) should
 * run as an OpenMP parallel region: work >= min_work and more than one thread available.
 * Each site has a parallel branch and a serial branch over the same loop body, and takes the
 * serial one when this is false instead of entering a region with an `if` clause or on a
 * one-thread team: libgomp allocates and frees a team for every region that runs on one
 * thread, and the runtime allocates nothing while it runs a model
 * (tests/unit/test_zero_alloc.c counts the OpenMP runtime's allocations too). Thread safe. */
bool op_parallel(int64_t work, int64_t min_work);

#endif
