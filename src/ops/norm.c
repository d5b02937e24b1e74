/* norm.c -- BatchNormalization (inference), LayerNormalization and Softmax: the ops that
 * normalize along axes (the Reduce ops are in reduce.c). Shape functions check the parameter
 * shapes; kernels accumulate statistics in double. */
#include <math.h>

#include "ops/op_util.h"

static bool has_in(const ir_node *n, ir_tensor *const *in, int i) { return i < n->nin && in[i]; }
static bool has_out(const ir_node *n, ir_tensor *const *out, int i) {
    return i < n->nout && out[i];
}

static int64_t prod(const int64_t *d, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= d[i];
    return p;
}

/* ---- BatchNormalization ---- */

/* Checks and the number of parameter values per channel in *per_channel: 1, or the spatial
 * size when opset < 9 has spatial = 0 (then scale, B, mean and var are shaped (C, D1, ...)). */
static wpk_status batch_norm_check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                   ir_tensor *const *out, int64_t *per_channel) {
    static const char *names[5] = {"X", "scale", "B", "input_mean", "input_var"};
    wpk_status st;
    for (int i = 0; i < 5; i++)
        if ((st = op_need_input(ctx, n, in, i, names[i])) || (st = op_need_f32(ctx, n, in, i)))
            return st;
    if (n->opset >= 14 && ir_attr_int(n, "training_mode", 0) != 0)
        return op_unsupported(ctx, n,
                              "attribute 'training_mode' = 1 is not supported (inference only)");
    for (int i = 1; i < n->nout; i++)
        if (out[i])
            return op_unsupported(ctx, n,
                                  "output %d (running or saved statistics) is only produced "
                                  "in training mode, which is not supported",
                                  i);
    const ir_tensor *x = in[0];
    if (x->ndim < 2)
        return op_fail(ctx, n, "input X has %d dims, expected at least 2 (N, C, ...)", x->ndim);
    bool spatial = n->opset >= 9 || ir_attr_int(n, "spatial", 1) != 0;
    *per_channel = spatial ? 1 : prod(x->dims, 2, x->ndim);
    int64_t c = x->dims[1];
    if (c < 0 || *per_channel < 0) return WPK_OK;
    for (int i = 1; i < 5; i++)
        if (ir_numel(in[i]) != c * *per_channel)
            return op_fail(ctx, n, "input '%s' has %lld values, expected %lld (%s)", names[i],
                           (long long)ir_numel(in[i]), (long long)(c * *per_channel),
                           spatial ? "one per channel"
                                   : "spatial = 0: one per channel and position");
    return WPK_OK;
}

wpk_status op_batch_norm_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                               ir_tensor *const *out) {
    int64_t per_channel;
    wpk_status st = batch_norm_check(ctx, n, in, out, &per_channel);
    if (st) return st;
    op_set_shape(out[0], WPK_DTYPE_FLOAT32, in[0]->ndim, in[0]->dims);
    return WPK_OK;
}

/* One BatchNormalization's operands, a plane (one image's channel) at a time. */
typedef struct bn_job {
    int64_t c, size, per_channel;
    double eps;
    const float *x, *scale, *bias, *mean, *var;
    float *y;
} bn_job;

static void bn_plane(const bn_job *j, int64_t p) {
    int64_t ch = p % j->c, size = j->size;
    const float *xp = j->x + p * size;
    float *yp = j->y + p * size;
    if (j->per_channel == 1) {
        double a = j->scale[ch] / sqrt((double)j->var[ch] + j->eps);
        const float fa = (float)a, fb = (float)(j->bias[ch] - j->mean[ch] * a);
#pragma omp simd
        for (int64_t i = 0; i < size; i++) yp[i] = xp[i] * fa + fb;
    } else {
        int64_t q = ch * size;
        for (int64_t i = 0; i < size; i++)
            yp[i] = (float)((xp[i] - j->mean[q + i]) / sqrt((double)j->var[q + i] + j->eps) *
                            j->scale[q + i] + j->bias[q + i]);
    }
}

/* y = (x - mean) / sqrt(var + epsilon) * scale + B, per channel; safe in place (y == x). */
wpk_status op_batch_norm_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             ir_tensor *const *out) {
    int64_t per_channel;
    wpk_status st = batch_norm_check(ctx, n, in, out, &per_channel);
    if (st) return st;
    const ir_tensor *x = in[0];
    bn_job j = {.c = x->dims[1], .size = prod(x->dims, 2, x->ndim), .per_channel = per_channel,
                .eps = ir_attr_float(n, "epsilon", 1e-5f), .x = x->data, .scale = in[1]->data,
                .bias = in[2]->data, .mean = in[3]->data, .var = in[4]->data,
                .y = out[0]->data};
    int64_t planes = x->dims[0] * j.c;
    if (op_parallel(planes, 2)) {
#pragma omp parallel for schedule(static)
        for (int64_t p = 0; p < planes; p++) bn_plane(&j, p);
    } else {
        for (int64_t p = 0; p < planes; p++) bn_plane(&j, p);
    }
    return WPK_OK;
}

/* ---- LayerNormalization ---- */

/* Scale/B must broadcast (numpy-style, unidirectionally) to X's dims [axis, ndim). */
static wpk_status check_norm_param(wpk_context *ctx, const ir_node *n, const ir_tensor *t,
                                   const char *what, const ir_tensor *x, int axis) {
    int nd = x->ndim - axis;
    bool ok = t->ndim <= nd;
    for (int i = 0; ok && i < t->ndim; i++) {
        int64_t want = x->dims[axis + nd - t->ndim + i], have = t->dims[i];
        ok = have == 1 || have == want || have < 0 || want < 0;
    }
    if (!ok) return op_fail(ctx, n, "input '%s' does not broadcast to the normalized dims "
                            "(X's dims from axis %d on)", what, axis);
    return WPK_OK;
}

static wpk_status layer_norm_check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                   int *axis) {
    wpk_status st;
    if ((st = op_need_input(ctx, n, in, 0, "X")) || (st = op_need_input(ctx, n, in, 1, "Scale")) ||
        (st = op_need_f32(ctx, n, in, 0)) || (st = op_need_f32(ctx, n, in, 1)))
        return st;
    if (has_in(n, in, 2) && (st = op_need_f32(ctx, n, in, 2))) return st;
    int64_t stash = ir_attr_int(n, "stash_type", 1);
    if (stash != WPK_DTYPE_FLOAT32)
        return op_unsupported(ctx, n, "attribute 'stash_type' = %lld is not supported (only 1, "
                              "float32)", (long long)stash);
    if ((st = op_axis(ctx, n, ir_attr_int(n, "axis", -1), in[0]->ndim, axis, "attribute 'axis'")))
        return st;
    if ((st = check_norm_param(ctx, n, in[1], "Scale", in[0], *axis))) return st;
    if (has_in(n, in, 2) && (st = check_norm_param(ctx, n, in[2], "B", in[0], *axis))) return st;
    return WPK_OK;
}

wpk_status op_layer_norm_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                               ir_tensor *const *out) {
    int axis;
    wpk_status st = layer_norm_check(ctx, n, in, &axis);
    if (st) return st;
    const ir_tensor *x = in[0];
    op_set_shape(out[0], WPK_DTYPE_FLOAT32, x->ndim, x->dims);
    /* Mean and InvStdDev keep X's rank: its dims before axis, then 1s. */
    int64_t dims[WPK_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) dims[i] = i < axis ? x->dims[i] : 1;
    for (int i = 1; i <= 2; i++)
        if (has_out(n, out, i)) op_set_shape(out[i], WPK_DTYPE_FLOAT32, x->ndim, dims);
    return WPK_OK;
}

/* The offset in a broadcast Scale/B of element j of the normalized block (dims[0..nd)). */
static int64_t param_at(const int64_t *strides, const int64_t *dims, int nd, int64_t j) {
    int64_t off = 0;
    for (int i = nd - 1; i >= 0; i--) {
        off += (j % dims[i]) * strides[i];
        j /= dims[i];
    }
    return off;
}

/* One LayerNormalization's operands: rows of d elements, Scale/B broadcast over a row
 * (full: one value per element, else read through param_at). */
typedef struct ln_job {
    int nd;
    const int64_t *ndims;
    int64_t d, sstr[WPK_MAX_DIMS], bstr[WPK_MAX_DIMS];
    bool sfull, bfull;
    double eps;
    const float *x, *s, *b; /* b may be NULL */
    float *y, *mean, *inv;  /* mean and inv (the optional outputs) may be NULL */
} ln_job;

static void ln_row(const ln_job *j, int64_t r) {
    const int64_t d = j->d;
    const float *xr = j->x + r * d, *sd = j->s, *bd = j->b;
    float *yr = j->y + r * d;
    double sum = 0.0, sq = 0.0;
    for (int64_t k = 0; k < d; k++) sum += xr[k];
    double mean = sum / (double)d;
    for (int64_t k = 0; k < d; k++) sq += (xr[k] - mean) * (xr[k] - mean);
    double inv = 1.0 / sqrt(sq / (double)d + j->eps);
    if (j->mean) j->mean[r] = (float)mean;
    if (j->inv) j->inv[r] = (float)inv;
    const float fm = (float)mean, fi = (float)inv;
    if (j->sfull && j->bfull) {
#pragma omp simd
        for (int64_t k = 0; k < d; k++) yr[k] = (xr[k] - fm) * fi * sd[k] + (bd ? bd[k] : 0.0f);
    } else {
        for (int64_t k = 0; k < d; k++) {
            float s = sd[j->sfull ? k : param_at(j->sstr, j->ndims, j->nd, k)];
            float b = bd ? bd[j->bfull ? k : param_at(j->bstr, j->ndims, j->nd, k)] : 0.0f;
            yr[k] = (xr[k] - fm) * fi * s + b;
        }
    }
}

wpk_status op_layer_norm_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             ir_tensor *const *out) {
    int axis;
    wpk_status st = layer_norm_check(ctx, n, in, &axis);
    if (st) return st;
    const ir_tensor *x = in[0], *sc = in[1], *bi = has_in(n, in, 2) ? in[2] : NULL;
    ln_job j = {.nd = x->ndim - axis, .ndims = x->dims + axis,
                .d = prod(x->dims, axis, x->ndim), .eps = ir_attr_float(n, "epsilon", 1e-5f),
                .x = x->data, .s = sc->data, .b = bi ? bi->data : NULL, .y = out[0]->data,
                .mean = has_out(n, out, 1) ? out[1]->data : NULL,
                .inv = has_out(n, out, 2) ? out[2]->data : NULL};
    op_broadcast_strides(sc, j.nd, j.ndims, j.sstr);
    if (bi) op_broadcast_strides(bi, j.nd, j.ndims, j.bstr);
    j.sfull = ir_numel(sc) == j.d;
    j.bfull = !bi || ir_numel(bi) == j.d;
    int64_t rows = prod(x->dims, 0, axis);
    if (op_parallel(rows, 2)) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++) ln_row(&j, r);
    } else {
        for (int64_t r = 0; r < rows; r++) ln_row(&j, r);
    }
    return WPK_OK;
}

/* ---- Softmax ---- */

/* Softmax runs over `len` elements spaced `inner` apart, `outer` times. Opset 13 normalizes
 * along one axis (default -1); earlier opsets flatten X to 2-D at `axis` (default 1) and
 * normalize each row. */
static wpk_status softmax_setup(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                int64_t *outer, int64_t *len, int64_t *inner) {
    wpk_status st;
    if ((st = op_need_input(ctx, n, in, 0, "input")) || (st = op_need_f32(ctx, n, in, 0)))
        return st;
    const ir_tensor *x = in[0];
    bool v13 = n->opset >= 13;
    int axis;
    if ((st = op_axis(ctx, n, ir_attr_int(n, "axis", v13 ? -1 : 1), x->ndim, &axis,
                      "attribute 'axis'")))
        return st;
    *outer = prod(x->dims, 0, axis);
    *len = v13 ? x->dims[axis] : prod(x->dims, axis, x->ndim);
    *inner = v13 ? prod(x->dims, axis + 1, x->ndim) : 1;
    return WPK_OK;
}

wpk_status op_softmax_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                            ir_tensor *const *out) {
    int64_t outer, len, inner;
    wpk_status st = softmax_setup(ctx, n, in, &outer, &len, &inner);
    if (st) return st;
    op_set_shape(out[0], WPK_DTYPE_FLOAT32, in[0]->ndim, in[0]->dims);
    return WPK_OK;
}

/* Columns of a strided softmax handled together, so the loops over them vectorize. */
#define SOFTMAX_CHUNK 256

/* One Softmax's operands: `outer` blocks of len x inner, a task is up to SOFTMAX_CHUNK
 * columns of one block (chunks of them per block). */
typedef struct softmax_job {
    int64_t len, inner, chunks;
    const float *x;
    float *y;
} softmax_job;

/* Subtracting the maximum first keeps exp() from overflowing. */
static void softmax_task(const softmax_job *j, int64_t t) {
    const int64_t len = j->len, inner = j->inner;
    int64_t o = t / j->chunks, c0 = (t % j->chunks) * SOFTMAX_CHUNK;
    int64_t cn = inner - c0 < SOFTMAX_CHUNK ? inner - c0 : SOFTMAX_CHUNK;
    const float *x = j->x + o * len * inner + c0;
    float *y = j->y + o * len * inner + c0;
    if (inner == 1) {
        float mx = -INFINITY;
        for (int64_t l = 0; l < len; l++) mx = x[l] > mx ? x[l] : mx;
        double sum = 0.0;
        for (int64_t l = 0; l < len; l++) {
            y[l] = expf(x[l] - mx);
            sum += y[l];
        }
        const float scale = (float)(1.0 / sum);
        for (int64_t l = 0; l < len; l++) y[l] *= scale;
        return;
    }
    float mx[SOFTMAX_CHUNK], sum[SOFTMAX_CHUNK];
    for (int64_t i = 0; i < cn; i++) {
        mx[i] = -INFINITY;
        sum[i] = 0.0f;
    }
    for (int64_t l = 0; l < len; l++)
        for (int64_t i = 0; i < cn; i++)
            mx[i] = x[l * inner + i] > mx[i] ? x[l * inner + i] : mx[i];
    for (int64_t l = 0; l < len; l++)
        for (int64_t i = 0; i < cn; i++) {
            y[l * inner + i] = expf(x[l * inner + i] - mx[i]);
            sum[i] += y[l * inner + i];
        }
    for (int64_t i = 0; i < cn; i++) sum[i] = 1.0f / sum[i];
    for (int64_t l = 0; l < len; l++)
#pragma omp simd
        for (int64_t i = 0; i < cn; i++) y[l * inner + i] *= sum[i];
}

wpk_status op_softmax_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                          ir_tensor *const *out) {
    int64_t outer, len, inner;
    wpk_status st = softmax_setup(ctx, n, in, &outer, &len, &inner);
    if (st) return st;
    softmax_job j = {.len = len, .inner = inner,
                     .chunks = (inner + SOFTMAX_CHUNK - 1) / SOFTMAX_CHUNK, .x = in[0]->data,
                     .y = out[0]->data};
    int64_t tasks = outer * j.chunks;
    if (op_parallel(tasks, 2)) {
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < tasks; t++) softmax_task(&j, t);
    } else {
        for (int64_t t = 0; t < tasks; t++) softmax_task(&j, t);
    }
    return WPK_OK;
}
