/* movement_cuda.c -- CUDA templates of the data-movement and reduction ops the CNNs beyond
 * ResNet/MobileNet need: concat_cuda (Concat of up to TUNE_MAX_ARGS inputs: GoogLeNet,
 * ShuffleNet, small DenseNet blocks), transpose_cuda (Transpose: ShuffleNet's channel shuffle),
 * slice_cuda (Slice with constant starts/ends/axes/steps: ShuffleNet's split) and
 * reduce_mean_cuda (ReduceMean over constant axes: MnasNet's pooling). Each output element
 * reads its inputs at computed indices (a select over the inputs for Concat, clamped so that
 * every load stays inside its tensor; the mean a per-thread reduction). The readers are here
 * (these ops have no CPU template); the algorithms are te/algo/movement.h's and the schedule is
 * tune_cuda_schedule_flat: `threads` per block, `per_thread` coalesced elements per thread. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "ir/ops.h"
#include "te/algo/movement.h"
#include "kernels/common.h"
#include "kernels/conv.h"
#include "kernels/templates_cuda.h"

/* ---- shared: the knobs of the flat schedule (no float4: their loads are gathers) ---- */

static void flat_space(const kernel_provider *self, const tune_task *t, tune_space *s) {
    (void)self;
    tune_cuda_flat_space(t, s, false, false);
}

static void flat_default(const kernel_provider *self, const tune_task *t, const tune_space *s,
                         tune_config *cfg) {
    (void)self;
    tune_cuda_flat_default(t, s, false, cfg);
}

/* The last of what every build here does: y as the output argument, scheduled flat. */
static wpk_status finish(const kernel_provider *self, te_ctx *c, te_tensor *y,
                         const tune_space *s, const tune_config *cfg, tune_build *out) {
    if (!y) return tune_failed(c, self->name);
    out->args[out->nargs++] = y;
    return tune_cuda_build_flat(self, c, s, cfg, out);
}

/* x: the node's input 0 as the kernel's one input (the other inputs are constants read at build
 * time). */
static te_tensor *one_input(te_ctx *c, const tune_task *t, tune_build *out) {
    te_tensor *x = tune_placeholder(c, "x", &t->in[0]);
    if (x) out->args[out->nargs++] = x;
    out->ninputs = 1;
    return x;
}

static int norm_axis(int64_t a, int rank) { return (int)(a < 0 ? a + rank : a); }

static void key_shapes(tune_task *t, const char *name) {
    tune_key_add(t, "%s:%s", name, t->node->op_type);
    for (int i = 0; i < t->nin; i++) {
        tune_key_add(t, i ? "," : ",x=");
        tune_key_dims(t, &t->in[i]);
    }
}

/* A template of this file: its reader-backed entry points and the flat knobs. */
#define FLAT_PROVIDER(var, label, prefix)                                                  \
    const kernel_provider var = {                                                          \
        .name = label,                                                                     \
        .family = "generated",                                                             \
        .supports = prefix##_supports,                                                     \
        .describe = prefix##_describe,                                                     \
        .space = flat_space,                                                               \
        .default_config = flat_default,                                                    \
        .legal = kernel_legal_in_space,                                                    \
        .build = prefix##_build,                                                           \
    }

/* ---- concat_cuda ---- */

static bool concat_read(const ir_node *n, ir_tensor *const *in, const ir_tensor *y, int *axis) {
    if (!n || n->op != IR_OP_CONCAT || n->nin < 1 || n->nin > TUNE_MAX_ARGS || n->nout != 1 ||
        !y || !tune_static_f32(y))
        return false;
    int64_t a = ir_attr_int(n, "axis", INT64_MIN);
    if (a == INT64_MIN || a < -y->ndim || a >= y->ndim) return false;
    *axis = norm_axis(a, y->ndim);
    int64_t total = 0;
    for (int i = 0; i < n->nin; i++) {
        const ir_tensor *x = in[i];
        if (!x || !tune_static_f32(x) || x->ndim != y->ndim) return false;
        for (int d = 0; d < y->ndim; d++)
            if (d != *axis && x->dims[d] != y->dims[d]) return false;
        total += x->dims[*axis];
    }
    return total == y->dims[*axis];
}

static bool concat_supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                            ir_tensor *const *out) {
    (void)self;
    int axis;
    return out && concat_read(n, in, out[0], &axis);
}

static void concat_describe(const kernel_provider *self, tune_task *t) {
    (void)self;
    key_shapes(t, "concat_cuda");
    tune_key_add(t, ",axis=%lld", (long long)ir_attr_int(t->node, "axis", 0));
    t->flops = ir_numel(&t->out[0]);
}

static wpk_status concat_build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                               const tune_space *s, const tune_config *cfg, tune_build *out) {
    memset(out, 0, sizeof *out);
    ir_tensor *in[TUNE_MAX_ARGS];
    for (int i = 0; i < t->nin; i++) in[i] = (ir_tensor *)&t->in[i];
    int axis;
    if (!concat_read(t->node, in, &t->out[0], &axis))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, "concat_cuda: node '%s' is not a Concat "
                         "this template takes", t->node ? t->node->name : "(null)");
    TRY(tune_check_legal(c, self, t, s, cfg));
    for (int i = 0; i < t->nin; i++) {
        te_tensor *x = tune_placeholder(c, "x", &t->in[i]);
        if (!x) return tune_failed(c, self->name);
        out->args[out->nargs++] = x;
    }
    out->ninputs = out->nargs;
    return finish(self, c, te_concat(c, "y", out->args, t->nin, axis), s, cfg, out);
}

FLAT_PROVIDER(tune_concat_cuda, "concat_cuda", concat);

/* ---- transpose_cuda ---- */

/* perm[i]: the input axis output axis i reads (default: reversed). */
static bool transpose_read(const ir_node *n, const ir_tensor *x, const ir_tensor *y, int *perm) {
    if (!n || n->op != IR_OP_TRANSPOSE || n->nin != 1 || n->nout != 1 || !x || !y ||
        !tune_static_f32(x) || !tune_static_f32(y) || x->ndim != y->ndim || x->ndim < 1)
        return false;
    const ir_attr *a = ir_attr_find(n, "perm");
    bool seen[WPK_MAX_DIMS] = {0};
    for (int i = 0; i < x->ndim; i++) {
        int64_t p = a && a->kind == IR_ATTR_INTS && a->n == x->ndim ? a->ints[i] : x->ndim - 1 - i;
        if (a && (a->kind != IR_ATTR_INTS || a->n != x->ndim)) return false;
        if (p < 0 || p >= x->ndim || seen[p] || y->dims[i] != x->dims[p]) return false;
        seen[p] = true;
        perm[i] = (int)p;
    }
    return true;
}

static bool transpose_supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                               ir_tensor *const *out) {
    (void)self;
    int perm[WPK_MAX_DIMS];
    return in && out && transpose_read(n, in[0], out[0], perm);
}

static void transpose_describe(const kernel_provider *self, tune_task *t) {
    (void)self;
    int perm[WPK_MAX_DIMS];
    if (!transpose_read(t->node, &t->in[0], &t->out[0], perm)) return;
    key_shapes(t, "transpose_cuda");
    tune_key_add(t, ",perm=");
    for (int i = 0; i < t->in[0].ndim; i++) tune_key_add(t, "%s%d", i ? "." : "", perm[i]);
    t->flops = ir_numel(&t->out[0]);
}

static wpk_status transpose_build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                                  const tune_space *s, const tune_config *cfg, tune_build *out) {
    memset(out, 0, sizeof *out);
    int perm[WPK_MAX_DIMS];
    if (!transpose_read(t->node, &t->in[0], &t->out[0], perm))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, "transpose_cuda: node '%s' is not a "
                         "Transpose this template takes", t->node ? t->node->name : "(null)");
    TRY(tune_check_legal(c, self, t, s, cfg));
    te_tensor *x = one_input(c, t, out);
    return finish(self, c, x ? te_transpose(c, "y", x, perm) : NULL, s, cfg, out);
}

FLAT_PROVIDER(tune_transpose_cuda, "transpose_cuda", transpose);

/* ---- reduce_mean_cuda ---- */

/* reduced[d]: whether input axis d is averaged over; keep: keepdims. */
static bool mean_read(const ir_node *n, ir_tensor *const *in, const ir_tensor *y, bool *reduced,
                      bool *keep) {
    if (!n || n->op != IR_OP_REDUCE_MEAN || n->nin < 1 || n->nin > 2 || n->nout != 1 || !in[0] ||
        !y || !tune_static_f32(in[0]) || !tune_static_f32(y))
        return false;
    const ir_tensor *x = in[0];
    const int r = x->ndim;
    int64_t axes[WPK_MAX_DIMS];
    int na = 0;
    if (n->nin == 2 && in[1]) {
        const ir_tensor *a = in[1];
        if (a->dtype != WPK_DTYPE_INT64 || !a->data || a->ndim != 1 || a->dims[0] > r) return false;
        for (int i = 0; i < a->dims[0]; i++) axes[na++] = ((const int64_t *)a->data)[i];
    } else {
        const ir_attr *a = ir_attr_find(n, "axes");
        if (a && (a->kind != IR_ATTR_INTS || a->n > r)) return false;
        for (int i = 0; a && i < a->n; i++) axes[na++] = a->ints[i];
    }
    if (na == 0 && ir_attr_int(n, "noop_with_empty_axes", 0)) return false; /* a copy */
    for (int d = 0; d < r; d++) reduced[d] = na == 0;
    for (int i = 0; i < na; i++) {
        if (axes[i] < -r || axes[i] >= r) return false;
        reduced[norm_axis(axes[i], r)] = true;
    }
    *keep = ir_attr_int(n, "keepdims", 1) != 0;
    int k = 0;
    for (int d = 0; d < r; d++) {
        if (reduced[d] && !*keep) continue;
        if (k >= y->ndim || y->dims[k] != (reduced[d] ? 1 : x->dims[d])) return false;
        k++;
    }
    return k == y->ndim;
}

static bool mean_supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                          ir_tensor *const *out) {
    (void)self;
    bool red[WPK_MAX_DIMS], keep;
    return in && out && mean_read(n, in, out[0], red, &keep);
}

static void mean_describe(const kernel_provider *self, tune_task *t) {
    (void)self;
    bool red[WPK_MAX_DIMS], keep;
    ir_tensor *in[2] = {&t->in[0], t->nin > 1 ? &t->in[1] : NULL};
    if (!mean_read(t->node, in, &t->out[0], red, &keep)) return;
    tune_key_add(t, "reduce_mean_cuda:x=");
    tune_key_dims(t, &t->in[0]);
    tune_key_add(t, ",axes=");
    for (int d = 0, k = 0; d < t->in[0].ndim; d++)
        if (red[d]) tune_key_add(t, "%s%d", k++ ? "." : "", d);
    if (keep) tune_key_add(t, ",keep");
    t->flops = ir_numel(&t->in[0]);
}

static wpk_status mean_build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                             const tune_space *s, const tune_config *cfg, tune_build *out) {
    memset(out, 0, sizeof *out);
    bool red[WPK_MAX_DIMS], keep;
    ir_tensor *in[2] = {(ir_tensor *)&t->in[0], t->nin > 1 ? (ir_tensor *)&t->in[1] : NULL};
    if (!mean_read(t->node, in, &t->out[0], red, &keep))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, "reduce_mean_cuda: node '%s' is not a "
                         "ReduceMean this template takes", t->node ? t->node->name : "(null)");
    TRY(tune_check_legal(c, self, t, s, cfg));
    te_tensor *x = one_input(c, t, out);
    return finish(self, c, x ? te_reduce_mean(c, "y", x, red, keep, NULL) : NULL, s, cfg, out);
}

FLAT_PROVIDER(tune_reduce_mean_cuda, "reduce_mean_cuda", mean);

/* ---- slice_cuda ----
 * Slice's semantics (negative starts, clamping, backward steps) are the reference kernel's: at
 * build time it slices a tensor of element numbers, and each output dim's first source
 * coordinate and stride are read off the result (and checked to be affine everywhere), so the
 * kernel is y[i] = x[start + step * i] per dim with nothing re-derived here. */

static bool const_ints(const ir_tensor *t) {
    return t && t->data && t->ndim == 1 &&
           (t->dtype == WPK_DTYPE_INT64 || t->dtype == WPK_DTYPE_INT32);
}

static bool slice_ok(const ir_node *n, ir_tensor *const *in, const ir_tensor *y) {
    if (!n || n->op != IR_OP_SLICE || n->nin < 3 || n->nin > 5 || n->nout != 1 || !in[0] || !y ||
        !tune_static_f32(in[0]) || !tune_static_f32(y) || in[0]->ndim != y->ndim)
        return false;
    for (int i = 1; i < n->nin; i++)
        if ((i < 3 || in[i]) && !const_ints(in[i])) return false;
    return true;
}

static bool slice_supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                           ir_tensor *const *out) {
    (void)self;
    return in && out && slice_ok(n, in, out[0]);
}

static void slice_describe(const kernel_provider *self, tune_task *t) {
    (void)self;
    tune_key_add(t, "slice_cuda:x=");
    tune_key_dims(t, &t->in[0]);
    static const char *const names[] = {"", ",starts=", ",ends=", ",axes=", ",steps="};
    for (int i = 1; i < t->nin && i < 5; i++) {
        const ir_tensor *a = &t->in[i];
        if (!const_ints(a)) continue;
        tune_key_add(t, "%s", names[i]);
        for (int64_t k = 0; k < a->dims[0]; k++) {
            long long v = a->dtype == WPK_DTYPE_INT64 ? (long long)((const int64_t *)a->data)[k]
                                                      : (long long)((const int32_t *)a->data)[k];
            tune_key_add(t, "%s%lld", k ? "." : "", v);
        }
    }
    t->flops = ir_numel(&t->out[0]);
}

/* start/step per dim from the reference kernel's slice of element numbers. */
static wpk_status slice_probe(te_ctx *c, const tune_task *t, int64_t *start, int64_t *step) {
    const ir_tensor *xt = &t->in[0], *yt = &t->out[0];
    const int r = xt->ndim;
    const int64_t nx = ir_numel(xt), ny = ir_numel(yt);
    int64_t *ids = wpk_malloc(sizeof(int64_t) * (size_t)(nx + ny + 1));
    if (!ids) return wpk_error(c->err, WPK_ERR_NOMEM, "slice_cuda: out of memory");
    int64_t *src = ids + nx;
    for (int64_t i = 0; i < nx; i++) ids[i] = i;
    ir_tensor xi = *xt, yi = *yt;
    xi.dtype = yi.dtype = WPK_DTYPE_INT64;
    xi.data = ids, yi.data = src;
    ir_tensor *in[5] = {&xi, NULL, NULL, NULL, NULL}, *out[1] = {&yi};
    for (int i = 1; i < t->nin && i < 5; i++) in[i] = t->in[i].data ? (ir_tensor *)&t->in[i] : NULL;
    wpk_status st = ir_op_get(IR_OP_SLICE)->ref(c->err, t->node, in, out);
    /* x's strides, to turn an element number into coordinates */
    int64_t xs[WPK_MAX_DIMS], ys[WPK_MAX_DIMS];
    int64_t a = 1, b = 1;
    for (int d = r - 1; d >= 0; d--) {
        xs[d] = a, a *= xt->dims[d];
        ys[d] = b, b *= yt->dims[d];
    }
    for (int d = 0; !st && d < r; d++) {
        start[d] = ny ? src[0] / xs[d] % xt->dims[d] : 0;
        step[d] = yt->dims[d] > 1 ? src[ys[d]] / xs[d] % xt->dims[d] - start[d] : 1;
    }
    /* affine everywhere, or this template cannot express it */
    for (int64_t i = 0; !st && i < ny; i++) {
        int64_t want = 0, rest = i;
        for (int d = 0; d < r; d++) {
            int64_t k = rest / ys[d];
            rest %= ys[d];
            want += (start[d] + step[d] * k) * xs[d];
        }
        if (want != src[i])
            st = wpk_error(c->err, WPK_ERR_INVALID_ARG, "slice_cuda: node '%s' is not an affine "
                           "slice", t->node->name);
    }
    wpk_free(ids);
    return st;
}

static wpk_status slice_build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                              const tune_space *s, const tune_config *cfg, tune_build *out) {
    memset(out, 0, sizeof *out);
    ir_tensor *in[5] = {0};
    for (int i = 0; i < t->nin && i < 5; i++) in[i] = (ir_tensor *)tune_task_in(t, i);
    if (!slice_ok(t->node, in, &t->out[0]))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, "slice_cuda: node '%s' is not a Slice "
                         "with constant parameters", t->node ? t->node->name : "(null)");
    TRY(tune_check_legal(c, self, t, s, cfg));
    int64_t start[WPK_MAX_DIMS], step[WPK_MAX_DIMS];
    TRY(slice_probe(c, t, start, step));
    te_tensor *x = one_input(c, t, out);
    return finish(self, c, x ? te_slice_affine(c, "y", x, t->out[0].dims, start, step) : NULL, s,
                  cfg, out);
}

FLAT_PROVIDER(tune_slice_cuda, "slice_cuda", slice);
