/* group_norm.c -- GroupNormalization and InstanceNormalization (the case of one channel per
 * group): each image's channel groups normalized to zero mean and unit variance, then scaled
 * and shifted per channel (per group at GroupNormalization opset 18). Statistics in double. */
#include <math.h>

#include "ops/op_util.h"

typedef struct gn_shape {
    int64_t n, c, groups, spatial;
    bool param_per_group; /* GroupNormalization-18: scale and bias hold one value per group */
} gn_shape;

static wpk_status gn_check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                           gn_shape *s) {
    static const char *names[3] = {"X", "scale", "B"};
    wpk_status st;
    for (int i = 0; i < 3; i++)
        if ((st = op_need_input(ctx, n, in, i, names[i])) || (st = op_need_f32(ctx, n, in, i)))
            return st;
    const ir_tensor *x = in[0];
    if (x->ndim < 2)
        return op_fail(ctx, n, "input X has %d dims, expected at least 2 (N, C, ...)", x->ndim);
    bool instance = n->op == IR_OP_INSTANCE_NORM;
    s->n = x->dims[0];
    s->c = x->dims[1];
    s->spatial = 1;
    for (int i = 2; i < x->ndim; i++) s->spatial *= x->dims[i];
    s->param_per_group = !instance && n->opset < 21;
    if (instance) {
        s->groups = s->c;
    } else {
        const ir_attr *g = ir_attr_find(n, "num_groups");
        if (!g || g->kind != IR_ATTR_INT)
            return op_fail(ctx, n, "attribute 'num_groups' (an int) is required");
        s->groups = g->i;
        if (s->groups <= 0 || (s->c >= 0 && s->c % s->groups != 0))
            return op_fail(ctx, n, "attribute 'num_groups' = %lld does not divide the %lld "
                           "channels", (long long)s->groups, (long long)s->c);
        int64_t stash = ir_attr_int(n, "stash_type", 1);
        if (stash != WPK_DTYPE_FLOAT32)
            return op_unsupported(ctx, n, "attribute 'stash_type' = %lld is not supported "
                                  "(only 1, float32)", (long long)stash);
    }
    int64_t want = s->param_per_group ? s->groups : s->c;
    for (int i = 1; i < 3; i++)
        if (want >= 0 && (in[i]->ndim != 1 || in[i]->dims[0] != want))
            return op_fail(ctx, n, "input '%s' must be 1-D of %lld values (one per %s)",
                           names[i], (long long)want, s->param_per_group ? "group" : "channel");
    return WPK_OK;
}

wpk_status op_group_norm_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                               ir_tensor *const *out) {
    gn_shape s;
    wpk_status st = gn_check(ctx, n, in, &s);
    if (st) return st;
    op_set_shape(out[0], WPK_DTYPE_FLOAT32, in[0]->ndim, in[0]->dims);
    return WPK_OK;
}

typedef struct gn_job {
    gn_shape s;
    double eps;
    const float *x, *scale, *bias;
    float *y;
} gn_job;

/* Block b is image b / groups, group b % groups: its channels are contiguous in X. */
static void gn_block(const gn_job *j, int64_t b) {
    const int64_t per = j->s.c / j->s.groups, size = per * j->s.spatial;
    const int64_t g = b % j->s.groups;
    const float *x = j->x + b * size;
    float *y = j->y + b * size;
    double sum = 0.0, sq = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t k = 0; k < size; k++) sum += x[k];
    double mean = sum / (double)size;
#pragma omp simd reduction(+ : sq)
    for (int64_t k = 0; k < size; k++) sq += (x[k] - mean) * (x[k] - mean);
    double inv = 1.0 / sqrt(sq / (double)size + j->eps);
    for (int64_t c = 0; c < per; c++) {
        int64_t p = j->s.param_per_group ? g : g * per + c;
        const float a = (float)(inv * j->scale[p]);
        const float sh = (float)(j->bias[p] - mean * inv * j->scale[p]);
        const float *xc = x + c * j->s.spatial;
        float *yc = y + c * j->s.spatial;
#pragma omp simd
        for (int64_t k = 0; k < j->s.spatial; k++) yc[k] = xc[k] * a + sh;
    }
}

wpk_status op_group_norm_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             ir_tensor *const *out) {
    gn_job j;
    wpk_status st = gn_check(ctx, n, in, &j.s);
    if (st) return st;
    j.eps = ir_attr_float(n, "epsilon", 1e-5f);
    j.x = in[0]->data;
    j.scale = in[1]->data;
    j.bias = in[2]->data;
    j.y = out[0]->data;
    int64_t blocks = j.s.n * j.s.groups;
    if (ir_numel(in[0]) == 0) return WPK_OK;
    if (blocks > 1 && op_parallel(ir_numel(in[0]), 1 << 14)) {
#pragma omp parallel for schedule(static)
        for (int64_t b = 0; b < blocks; b++) gn_block(&j, b);
    } else {
        for (int64_t b = 0; b < blocks; b++) gn_block(&j, b);
    }
    return WPK_OK;
}
