/* quantize_linear.c -- QuantizeLinear and DequantizeLinear: the affine map between a float
 * tensor and an 8-bit integer one, y = saturate(round(x / scale) + zero_point) and
 * x = (y - zero_point) * scale, with the parameters per tensor, per slice along `axis`, or per
 * block of `block_size` elements along it. */
#include <string.h>

#include "base/half.h"
#include "ops/op_util.h"
#include "ops/quant.h"

/* Where the parameter of each element comes from: element i = (outer, along, inner) around
 * the axis; its parameter index is outer * pdim + along / block, times inner when blocked. */
typedef struct qparams {
    int64_t dim, inner, pdim, block;
    bool per_tensor, blocked;
} qparams;

static wpk_status read_params(wpk_context *ctx, const ir_node *n, const ir_tensor *x,
                              const ir_tensor *scale, const ir_tensor *zp, qparams *p) {
    memset(p, 0, sizeof *p);
    if (zp && (zp->ndim != scale->ndim || memcmp(zp->dims, scale->dims,
                                                 sizeof(int64_t) * (size_t)scale->ndim)))
        return op_fail(ctx, n, "the zero point's shape differs from the scale's");
    int64_t block = ir_attr_int(n, "block_size", 0);
    if (block < 0) return op_fail(ctx, n, "attribute 'block_size' is negative");
    p->per_tensor = ir_numel(scale) == 1 && scale->ndim <= 1 && block == 0;
    if (p->per_tensor) return WPK_OK;
    int axis;
    wpk_status st = op_axis(ctx, n, ir_attr_int(n, "axis", 1), x->ndim, &axis, "axis");
    if (st) return st;
    p->dim = x->dims[axis];
    p->inner = 1;
    for (int i = axis + 1; i < x->ndim; i++) p->inner *= x->dims[i];
    if (block == 0) {
        if (scale->ndim != 1 || scale->dims[0] != p->dim)
            return op_fail(ctx, n, "per-axis scale must be 1-D with %lld values (x's dim %d), "
                           "not %d-D with %lld", (long long)p->dim, axis, scale->ndim,
                           (long long)ir_numel(scale));
        p->pdim = p->dim;
        p->block = 1;
        return WPK_OK;
    }
    p->blocked = true;
    p->block = block;
    p->pdim = (p->dim + block - 1) / block;
    if (scale->ndim != x->ndim)
        return op_fail(ctx, n, "blocked scale must have x's rank %d, not %d", x->ndim,
                       scale->ndim);
    for (int i = 0; i < x->ndim; i++)
        if (scale->dims[i] != (i == axis ? p->pdim : x->dims[i]))
            return op_fail(ctx, n, "blocked scale dim %d is %lld, expected %lld", i,
                           (long long)scale->dims[i],
                           (long long)(i == axis ? p->pdim : x->dims[i]));
    return WPK_OK;
}

static int64_t param_index(const qparams *p, int64_t i) {
    if (p->per_tensor) return 0;
    int64_t inner = i % p->inner, rest = i / p->inner;
    int64_t along = rest % p->dim, outer = rest / p->dim;
    int64_t k = along / p->block;
    return p->blocked ? (outer * p->pdim + k) * p->inner + inner : k;
}

/* Inputs (x, scale, zero point?) present with the dtypes each op takes. */
static wpk_status need_inputs(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                              ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "x");
    if (!st) st = op_need_input(ctx, n, in, 1, "scale");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    if (!quant_is_scale_dtype(in[1]->dtype))
        return op_unsupported(ctx, n, "scale has dtype %s; float32, float16 and bfloat16 are "
                              "supported", wpk_dtype_name(in[1]->dtype));
    return WPK_OK;
}

static const ir_tensor *zero_point(const ir_node *n, ir_tensor *const *in) {
    return n->nin > 2 ? in[2] : NULL;
}

wpk_status op_quantize_linear_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                    ir_tensor *const *out) {
    wpk_status st = need_inputs(ctx, n, in, out);
    if (st) return st;
    if (!quant_is_scale_dtype(in[0]->dtype))
        return op_unsupported(ctx, n, "x has dtype %s; float32, float16 and bfloat16 are "
                              "supported", wpk_dtype_name(in[0]->dtype));
    const ir_tensor *zp = zero_point(n, in);
    int64_t want = ir_attr_int(n, "output_dtype", 0);
    wpk_dtype y = zp ? zp->dtype : want ? (wpk_dtype)want : WPK_DTYPE_UINT8;
    if (want && zp && want != zp->dtype)
        return op_fail(ctx, n, "attribute 'output_dtype' (%lld) differs from the zero point's "
                       "dtype %s", (long long)want, wpk_dtype_name(zp->dtype));
    if (!quant_is_int8(y))
        return op_unsupported(ctx, n, "quantizing to %s (ONNX type %d) is not supported (int8 "
                              "and uint8 are)", wpk_dtype_name(y), (int)y);
    qparams p;
    if ((st = read_params(ctx, n, in[0], in[1], zp, &p))) return st;
    op_set_shape(out[0], y, in[0]->ndim, in[0]->dims);
    return WPK_OK;
}

wpk_status op_quantize_linear_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                  ir_tensor *const *out) {
    const ir_tensor *x = in[0], *scale = in[1], *zp = zero_point(n, in);
    qparams p;
    wpk_status st = read_params(ctx, n, x, scale, zp, &p);
    if (st) return st;
    wpk_dtype yt = out[0]->dtype;
    int64_t count = ir_numel(x);
    if (p.per_tensor && x->dtype == WPK_DTYPE_FLOAT32) {
        /* the common case (activations) in one loop the compiler vectorizes */
        const float *xv = x->data, s = quant_float_at(scale, 0);
        int32_t z = quant_int_at(zp, 0), lo = yt == WPK_DTYPE_INT8 ? -128 : 0;
        int32_t hi = yt == WPK_DTYPE_INT8 ? 127 : 255;
        uint8_t *y = out[0]->data;
#pragma omp simd
        for (int64_t i = 0; i < count; i++) y[i] = (uint8_t)quant_round_clamp(xv[i] / s, z, lo, hi);
        return WPK_OK;
    }
    for (int64_t i = 0; i < count; i++) {
        int64_t k = param_index(&p, i);
        float v = quant_float_at(x, i) / quant_float_at(scale, k);
        quant_store8(out[0]->data, yt, i, quant_saturate(v, quant_int_at(zp, k), yt));
    }
    return WPK_OK;
}

wpk_status op_dequantize_linear_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                      ir_tensor *const *out) {
    wpk_status st = need_inputs(ctx, n, in, out);
    if (st) return st;
    const ir_tensor *x = in[0], *zp = zero_point(n, in);
    if (!quant_is_int8(x->dtype) && x->dtype != WPK_DTYPE_INT32)
        return op_unsupported(ctx, n, "x has dtype %s; int8, uint8 and int32 are supported",
                              wpk_dtype_name(x->dtype));
    if (zp && zp->dtype != x->dtype)
        return op_fail(ctx, n, "the zero point has dtype %s but x has %s",
                       wpk_dtype_name(zp->dtype), wpk_dtype_name(x->dtype));
    int64_t want = ir_attr_int(n, "output_dtype", 0);
    if (want && want != in[1]->dtype)
        return op_fail(ctx, n, "attribute 'output_dtype' (%lld) differs from the scale's dtype "
                       "%s", (long long)want, wpk_dtype_name(in[1]->dtype));
    qparams p;
    if ((st = read_params(ctx, n, x, in[1], zp, &p))) return st;
    op_set_shape(out[0], in[1]->dtype, x->ndim, x->dims);
    return WPK_OK;
}

wpk_status op_dequantize_linear_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                    ir_tensor *const *out) {
    const ir_tensor *x = in[0], *scale = in[1], *zp = zero_point(n, in);
    qparams p;
    wpk_status st = read_params(ctx, n, x, scale, zp, &p);
    if (st) return st;
    int64_t count = ir_numel(x);
    wpk_dtype yt = out[0]->dtype;
    if (p.per_tensor && yt == WPK_DTYPE_FLOAT32 && quant_is_int8(x->dtype)) {
        const float s = quant_float_at(scale, 0);
        const int32_t z = quant_int_at(zp, 0);
        float *y = out[0]->data;
        if (x->dtype == WPK_DTYPE_UINT8) {
            const uint8_t *xv = x->data;
#pragma omp simd
            for (int64_t i = 0; i < count; i++) y[i] = (float)(xv[i] - z) * s;
        } else {
            const int8_t *xv = x->data;
#pragma omp simd
            for (int64_t i = 0; i < count; i++) y[i] = (float)(xv[i] - z) * s;
        }
        return WPK_OK;
    }
    for (int64_t i = 0; i < count; i++) {
        int64_t k = param_index(&p, i);
        int64_t q = (int64_t)quant_int_at(x, i) - quant_int_at(zp, k);
        float v = (float)q * quant_float_at(scale, k);
        if (yt == WPK_DTYPE_FLOAT16)
            ((uint16_t *)out[0]->data)[i] = half_f32_to_f16(v);
        else if (yt == WPK_DTYPE_BFLOAT16)
            ((uint16_t *)out[0]->data)[i] = half_f32_to_bf16(v);
        else
            ((float *)out[0]->data)[i] = v;
    }
    return WPK_OK;
}
