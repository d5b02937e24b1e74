/* movement_cuda.c -- CUDA templates of the data-movement and reduction ops the CNNs beyond
 * ResNet/MobileNet need: concat_cuda (Concat of up to TUNE_MAX_ARGS inputs: GoogLeNet,
 * ShuffleNet, small DenseNet blocks), transpose_cuda (Transpose: ShuffleNet's channel shuffle),
 * slice_cuda (Slice with constant starts/ends/axes/steps: ShuffleNet's split) and
 * reduce_mean_cuda (ReduceMean over constant axes: MnasNet's pooling) and pad_cuda (Pad with
 * constant pads in any mode, crops included: DenseNet's, Swin's) and gather_cuda (Gather with
 * constant indices in an arithmetic sequence: a class token, one of q/k/v). Each output element
 * reads its inputs at computed indices (a select over the inputs for Concat, clamped so that
 * every load stays inside its tensor; the mean a per-thread reduction). The readers are here
 * (these ops have no CPU template); the algorithms are te/algo/movement.h's and the schedule is
 * tune_cuda_schedule_flat: `threads` per block, `per_thread` coalesced elements per thread. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "ir/ops.h"
#include "te/algo/movement.h"
#include "te/algo/pad.h"
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

/* ---- pad_cuda ---- */

static int64_t int_at(const ir_tensor *t, int64_t k) {
    return t->dtype == WPK_DTYPE_INT64 ? ((const int64_t *)t->data)[k]
                                       : (int64_t)((const int32_t *)t->data)[k];
}

/* Pad's axes (ONNX: pads [begins..., ends...] over `axes`, negative ones crop) and mode; the
 * constant from input 2 (known at build time, 0 without it). */
static bool pad_read(const ir_node *n, ir_tensor *const *in, const ir_tensor *y, te_pad_axis *ax,
                     te_pad_mode *mode, float *value) {
    if (!n || n->op != IR_OP_PAD || n->nin < 2 || n->nin > 4 || n->nout != 1 || !in[0] || !y ||
        !tune_static_f32(in[0]) || !tune_static_f32(y) || in[0]->ndim != y->ndim ||
        !const_ints(in[1]))
        return false;
    const char *m = ir_attr_str(n, "mode", "constant");
    if (!strcmp(m, "constant")) *mode = TE_PAD_CONSTANT;
    else if (!strcmp(m, "edge")) *mode = TE_PAD_EDGE;
    else if (!strcmp(m, "reflect")) *mode = TE_PAD_REFLECT;
    else if (!strcmp(m, "wrap")) *mode = TE_PAD_WRAP;
    else return false;
    *value = 0;
    if (n->nin > 2 && in[2]) {
        if (in[2]->dtype != WPK_DTYPE_FLOAT32 || !in[2]->data || ir_numel(in[2]) != 1) return false;
        *value = *(const float *)in[2]->data;
    }
    const ir_tensor *x = in[0];
    const int r = x->ndim;
    int axes[WPK_MAX_DIMS], na = r;
    for (int d = 0; d < r; d++) axes[d] = d;
    if (n->nin > 3 && in[3]) {
        if (!const_ints(in[3]) || in[3]->dims[0] > r) return false;
        na = (int)in[3]->dims[0];
        for (int i = 0; i < na; i++) {
            int64_t a = int_at(in[3], i);
            if (a < -r || a >= r) return false;
            axes[i] = norm_axis(a, r);
        }
    }
    if (in[1]->dims[0] != 2 * na) return false;
    for (int d = 0; d < r; d++) ax[d] = (te_pad_axis){0, 0, x->dims[d], x->dims[d]};
    for (int i = 0; i < na; i++) {
        const int64_t b = int_at(in[1], i), e = int_at(in[1], na + i), len = x->dims[axes[i]];
        te_pad_axis *a = &ax[axes[i]];
        a->lo = b < 0 ? -b : 0;
        a->len = len - a->lo - (e < 0 ? -e : 0);
        a->before = b > 0 ? b : 0;
        a->out = a->before + a->len + (e > 0 ? e : 0);
        if (a->len < 1) return false;
    }
    for (int d = 0; d < r; d++) {
        const int64_t after = ax[d].out - ax[d].before - ax[d].len;
        const int64_t most = *mode == TE_PAD_REFLECT ? ax[d].len - 1
                             : *mode == TE_PAD_WRAP  ? ax[d].len
                                                     : INT64_MAX;
        if (ax[d].out != y->dims[d] || ax[d].before > most || after > most) return false;
    }
    return true;
}

static bool pad_supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out) {
    (void)self;
    te_pad_axis ax[WPK_MAX_DIMS];
    te_pad_mode mode;
    float v;
    return in && out && pad_read(n, in, out[0], ax, &mode, &v);
}

static void pad_describe(const kernel_provider *self, tune_task *t) {
    (void)self;
    te_pad_axis ax[WPK_MAX_DIMS];
    te_pad_mode mode;
    float v;
    ir_tensor *in[4] = {0};
    for (int i = 0; i < t->nin && i < 4; i++) in[i] = (ir_tensor *)tune_task_in(t, i);
    if (!pad_read(t->node, in, &t->out[0], ax, &mode, &v)) return;
    static const char *const modes[] = {"constant", "edge", "reflect", "wrap"};
    tune_key_add(t, "pad_cuda:x=");
    tune_key_dims(t, &t->in[0]);
    tune_key_add(t, ",%s", modes[mode]);
    for (int d = 0; d < t->in[0].ndim; d++)
        tune_key_add(t, "%s%lld+%lld:%lld", d ? "." : ",axes=", (long long)ax[d].before,
                     (long long)ax[d].lo, (long long)ax[d].out);
    if (mode == TE_PAD_CONSTANT && v != 0) tune_key_add(t, ",value=%g", (double)v);
    t->flops = ir_numel(&t->out[0]);
}

static wpk_status pad_build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                            const tune_space *s, const tune_config *cfg, tune_build *out) {
    memset(out, 0, sizeof *out);
    te_pad_axis ax[WPK_MAX_DIMS];
    te_pad_mode mode;
    float v;
    ir_tensor *in[4] = {0};
    for (int i = 0; i < t->nin && i < 4; i++) in[i] = (ir_tensor *)tune_task_in(t, i);
    if (!pad_read(t->node, in, &t->out[0], ax, &mode, &v))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, "pad_cuda: node '%s' is not a Pad with "
                         "constant pads this template takes", t->node ? t->node->name : "(null)");
    TRY(tune_check_legal(c, self, t, s, cfg));
    te_tensor *x = one_input(c, t, out);
    return finish(self, c, x ? te_pad_any(c, "y", x, ax, mode, v) : NULL, s, cfg, out);
}

FLAT_PROVIDER(tune_pad_cuda, "pad_cuda", pad);

/* ---- gather_cuda ---- */

/* Gather's axis and its constant indices as start + step * j (negative ones counted from the
 * end); false for indices that are not constant, not in an arithmetic sequence or outside. */
static bool gather_read(const ir_node *n, ir_tensor *const *in, const ir_tensor *y, int *axis,
                        int64_t *start, int64_t *step) {
    if (!n || n->op != IR_OP_GATHER || n->nin != 2 || n->nout != 1 || !in[0] || !in[1] || !y ||
        !tune_static_f32(in[0]) || !tune_static_f32(y) || !in[1]->data ||
        (in[1]->dtype != WPK_DTYPE_INT64 && in[1]->dtype != WPK_DTYPE_INT32))
        return false;
    const ir_tensor *x = in[0], *ix = in[1];
    const int64_t a = ir_attr_int(n, "axis", 0);
    if (a < -x->ndim || a >= x->ndim || x->ndim - 1 + ix->ndim > TE_MAX_DIMS) return false;
    *axis = norm_axis(a, x->ndim);
    const int64_t len = x->dims[*axis], count = ir_numel(ix);
    if (count < 1) return false;
    for (int64_t k = 0; k < count; k++) {
        int64_t v = int_at(ix, k);
        if (v < -len || v >= len) return false;
        if (v < 0) v += len;
        if (k == 0) *start = v, *step = 0;
        else if (k == 1) *step = v - *start;
        else if (v != *start + *step * k) return false;
    }
    /* the output: x's dims with the axis replaced by the indices' */
    int k = 0;
    for (int d = 0; d < x->ndim; d++) {
        const int64_t *dims = d == *axis ? ix->dims : &x->dims[d];
        const int nd = d == *axis ? ix->ndim : 1;
        for (int i = 0; i < nd; i++, k++)
            if (k >= y->ndim || y->dims[k] != dims[i]) return false;
    }
    return k == y->ndim;
}

static bool gather_supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                            ir_tensor *const *out) {
    (void)self;
    int axis;
    int64_t start, step;
    return in && out && gather_read(n, in, out[0], &axis, &start, &step);
}

static void gather_describe(const kernel_provider *self, tune_task *t) {
    (void)self;
    int axis;
    int64_t start, step;
    ir_tensor *in[2] = {&t->in[0], &t->in[1]};
    if (!gather_read(t->node, in, &t->out[0], &axis, &start, &step)) return;
    tune_key_add(t, "gather_cuda:x=");
    tune_key_dims(t, &t->in[0]);
    tune_key_add(t, ",axis=%d,idx=", axis);
    tune_key_dims(t, &t->in[1]);
    tune_key_add(t, ",from=%lld,step=%lld", (long long)start, (long long)step);
    t->flops = ir_numel(&t->out[0]);
}

static wpk_status gather_build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                               const tune_space *s, const tune_config *cfg, tune_build *out) {
    memset(out, 0, sizeof *out);
    int axis;
    int64_t start, step;
    ir_tensor *in[2] = {(ir_tensor *)&t->in[0], (ir_tensor *)&t->in[1]};
    if (!gather_read(t->node, in, &t->out[0], &axis, &start, &step))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, "gather_cuda: node '%s' is not a Gather "
                         "with constant indices in a sequence", t->node ? t->node->name : "(null)");
    TRY(tune_check_legal(c, self, t, s, cfg));
    te_tensor *x = one_input(c, t, out);
    return finish(self, c, x ? te_gather_affine(c, "y", x, axis, t->in[1].ndim, t->in[1].dims,
                                                start, step)
                             : NULL, s, cfg, out);
}

FLAT_PROVIDER(tune_gather_cuda, "gather_cuda", gather);
