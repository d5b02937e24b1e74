/* fused.c -- Fused ops the graph optimizer creates: Conv/Gemm/MatMul with a bias, residual and
 * activation epilogue (passes/fuse_epilogue.c).
 *
 * Inputs: the base op's (FusedConv X, W, B; FusedGemm A, B, C; FusedMatMul A, B and a 1-D
 * bias broadcast against Y's last dim, as an Add of it would be), then an optional Z at index 3
 * with exactly Y's shape. Y = act(base(...) [+ bias] + Z). Attributes: the base op's, plus the
 * activation (ops/activation.h: `activation`, `alpha`, `beta`, `clip_min`, `clip_max`).
 * FusedGemm's `alpha` and `beta` are the activation's: its Gemm product always has alpha =
 * beta = 1 (the pass folds them into the operands or does not fuse).
 *
 * Each kernel runs the base op's shape function and reference kernel on a view of the node
 * without the activation attributes, then the epilogue in place over Y, so a fused node
 * computes what the unfused ops compute. */
#include "ops/activation.h"
#include "ops/op_util.h"

#include <stdio.h>
#include <string.h>

#define Z_INPUT 3
/* Elements per parallel task of the epilogue: below one block a single thread does it. */
#define BLOCK 16384
#define MAX_ATTRS 32

static bool is_act_attr(const char *name) {
    static const char *const act_attrs[] = {"activation", "alpha", "beta", "clip_min", "clip_max"};
    for (size_t i = 0; i < sizeof act_attrs / sizeof act_attrs[0]; i++)
        if (strcmp(name, act_attrs[i]) == 0) return true;
    return false;
}

/* *view = n without the activation's attributes (in attrs[MAX_ATTRS]), for the base op. */
static wpk_status base_view(wpk_context *ctx, const ir_node *n, ir_node *view, ir_attr *attrs) {
    if (n->nattr > MAX_ATTRS) return op_fail(ctx, n, "more than %d attributes", MAX_ATTRS);
    *view = *n;
    view->nattr = 0;
    view->attrs = attrs;
    for (int i = 0; i < n->nattr; i++)
        if (!is_act_attr(n->attrs[i].name)) attrs[view->nattr++] = n->attrs[i];
    return WPK_OK;
}

static const ir_tensor *opt_in(const ir_node *n, ir_tensor *const *in, int i) {
    return i < n->nin ? in[i] : NULL;
}

/* The checks every fused op adds to its base op's: the activation attributes, the input
 * count and Z (float32, Y's shape; dims unknown during static inference are not compared). */
static wpk_status check_epilogue(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                 const ir_tensor *y, act_params *act) {
    wpk_status st = act_read(ctx, n, act);
    if (st) return st;
    if (n->nin > Z_INPUT + 1)
        return op_fail(ctx, n, "has %d inputs; at most %d are allowed", n->nin, Z_INPUT + 1);
    const ir_tensor *z = opt_in(n, in, Z_INPUT);
    if (!z) return WPK_OK;
    if ((st = op_need_f32(ctx, n, in, Z_INPUT))) return st;
    bool same = z->ndim == y->ndim;
    for (int i = 0; same && i < y->ndim; i++)
        same = z->dims[i] == y->dims[i] || z->dims[i] < 0 || y->dims[i] < 0;
    if (!same) {
        char zs[160] = "", ys[160] = "";
        for (int i = 0; i < z->ndim; i++)
            snprintf(zs + strlen(zs), sizeof zs - strlen(zs), i ? ", %lld" : "%lld",
                     (long long)z->dims[i]);
        for (int i = 0; i < y->ndim; i++)
            snprintf(ys + strlen(ys), sizeof ys - strlen(ys), i ? ", %lld" : "%lld",
                     (long long)y->dims[i]);
        return op_fail(ctx, n, "residual input Z has shape [%s] but the output has [%s]; they "
                       "must be equal", zs, ys);
    }
    return WPK_OK;
}

/* An epilogue over Y: a task is up to `row` elements (with a bias, a whole row of it). */
typedef struct epi_job {
    float *y;
    int64_t count, row;
    const float *bias, *z; /* either may be NULL */
    const act_params *act;
} epi_job;

static void epi_task(const epi_job *j, int64_t t) {
    int64_t start = t * j->row, len = j->count - start < j->row ? j->count - start : j->row;
    float *restrict yr = j->y + start;
    if (j->bias) {
        const float *restrict br = j->bias;
#pragma omp simd
        for (int64_t i = 0; i < len; i++) yr[i] += br[i];
    }
    if (j->z) {
        const float *restrict zr = j->z + start;
#pragma omp simd
        for (int64_t i = 0; i < len; i++) yr[i] += zr[i];
    }
    act_apply(j->act, yr, len);
}

/* y = act(y + bias[i % cols] + z) over count elements (bias and z optional), in parallel
 * tasks when there is more than a block. With a bias, tasks are whole rows of `cols`. */
static void epilogue(float *y, int64_t count, const float *bias, int64_t cols, const float *z,
                     const act_params *act) {
    if (count == 0 || (!bias && !z && act->kind == ACT_NONE)) return;
    epi_job j = {.y = y, .count = count, .row = bias ? cols : (count < BLOCK ? count : BLOCK),
                 .bias = bias, .z = z, .act = act};
    int64_t tasks = (count + j.row - 1) / j.row;
    if (op_parallel(count, BLOCK + 1)) {
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < tasks; t++) epi_task(&j, t);
    } else {
        for (int64_t t = 0; t < tasks; t++) epi_task(&j, t);
    }
}

/* The bias of FusedMatMul: float32, 1-D, as long as Y's last dim. */
static wpk_status check_matmul_bias(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                    const ir_tensor *y) {
    const ir_tensor *b = opt_in(n, in, 2);
    if (!b) return WPK_OK;
    wpk_status st = op_need_f32(ctx, n, in, 2);
    if (st) return st;
    if (y->ndim < 1)
        return op_fail(ctx, n, "input 'bias' needs an output with at least one dim, but the "
                       "output is a scalar");
    int64_t cols = y->dims[y->ndim - 1];
    if (b->ndim != 1 || (b->dims[0] >= 0 && cols >= 0 && b->dims[0] != cols))
        return op_fail(ctx, n, "input 'bias' must be 1-D with %lld values (the output's last "
                       "dim), but has %d dims and %lld values", (long long)cols, b->ndim,
                       (long long)ir_numel(b));
    return WPK_OK;
}

/* A fused op's shape function and kernel around its base op's (`base`). With `bias` (the
 * FusedMatMul case), input 2 is the epilogue's bias; otherwise it is the base op's own. */
static wpk_status fused_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                              ir_tensor *const *out, ir_shape_fn base, bool bias) {
    ir_node view;
    ir_attr attrs[MAX_ATTRS];
    act_params act;
    wpk_status st = base_view(ctx, n, &view, attrs);
    if (!st) st = base(ctx, &view, in, out);
    if (!st && bias) st = check_matmul_bias(ctx, n, in, out[0]);
    if (!st) st = check_epilogue(ctx, n, in, out[0], &act);
    return st;
}

static wpk_status fused_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                            ir_tensor *const *out, ir_ref_fn base, bool bias) {
    ir_node view;
    ir_attr attrs[MAX_ATTRS];
    act_params act;
    wpk_status st = base_view(ctx, n, &view, attrs);
    if (!st && bias) st = check_matmul_bias(ctx, n, in, out[0]);
    if (!st) st = check_epilogue(ctx, n, in, out[0], &act);
    if (!st) st = base(ctx, &view, in, out);
    if (st) return st;
    const ir_tensor *b = bias ? opt_in(n, in, 2) : NULL, *z = opt_in(n, in, Z_INPUT);
    const ir_tensor *y = out[0];
    epilogue(y->data, ir_numel(y), b ? b->data : NULL, b ? y->dims[y->ndim - 1] : 0,
             z ? z->data : NULL, &act);
    return WPK_OK;
}

wpk_status op_fused_conv_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                               ir_tensor *const *out) {
    return fused_shape(ctx, n, in, out, op_conv_shape, false);
}

wpk_status op_fused_conv_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             ir_tensor *const *out) {
    return fused_ref(ctx, n, in, out, op_conv_ref, false);
}

wpk_status op_fused_gemm_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                               ir_tensor *const *out) {
    return fused_shape(ctx, n, in, out, op_gemm_shape, false);
}

wpk_status op_fused_gemm_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             ir_tensor *const *out) {
    return fused_ref(ctx, n, in, out, op_gemm_ref, false);
}

wpk_status op_fused_matmul_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                 ir_tensor *const *out) {
    return fused_shape(ctx, n, in, out, op_matmul_shape, true);
}

wpk_status op_fused_matmul_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                               ir_tensor *const *out) {
    return fused_ref(ctx, n, in, out, op_matmul_ref, true);
}
