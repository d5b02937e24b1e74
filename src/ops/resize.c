/* resize.c -- Resize and Upsample: nearest, linear and cubic interpolation over any set of axes,
 * every coordinate transformation mode, antialiased downscaling, scales or sizes. Interpolation
 * is separable, so each axis contributes a few taps (source index, weight) per output index;
 * the kernel walks the output row by row (rows of the last axis), combines the taps of the outer
 * axes into weighted source rows and applies the last axis's taps, computed once per column. */
#include "ops/op_util.h"

#include <math.h>
#include <omp.h>
#include <string.h>

/* Taps per output index along one axis; antialiased downscaling by more than about 15x needs
 * more and is refused. */
#define RESIZE_MAX_TAPS 32
/* Output dims at most (a bound that keeps sizes computed from scales finite). */
#define RESIZE_MAX_DIM ((int64_t)1 << 40)
/* Last-axis taps computed at once (stack table shared by the team): 64 KiB. */
#define TABLE_TAPS 8192
#define PAR_MIN_WORK (1 << 16)
/* Input rows up to this long are combined on the stack before the last axis's taps. */
#define RESIZE_ROW_MAX 4096

enum { MODE_NEAREST, MODE_LINEAR, MODE_CUBIC };
/* SIMPLE: Upsample's and Resize-10's rule (truncate when upsampling, ceil when downsampling). */
enum { NEAREST_ROUND_PREFER_FLOOR, NEAREST_ROUND_PREFER_CEIL, NEAREST_FLOOR, NEAREST_CEIL,
       NEAREST_SIMPLE };
enum { CT_HALF_PIXEL, CT_HALF_PIXEL_SYMMETRIC, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS,
       CT_ASYMMETRIC, CT_TF_HALF_PIXEL_FOR_NN, CT_TF_CROP_AND_RESIZE };

typedef struct resize_axis {
    int64_t in, out;
    double scale, roi_start, roi_end;
    bool identity; /* out == in, scale 1, whole roi: the axis is copied */
    int taps;
} resize_axis;

typedef struct resize_plan {
    int mode, nearest, coord, ndim;
    bool antialias, exclude_outside;
    double cubic_a;
    float extrapolation;
    resize_axis ax[WPK_MAX_DIMS];
} resize_plan;

static const char *const MODE_NAMES[] = {"nearest", "linear", "cubic"};
static const char *const NEAREST_NAMES[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                            "ceil"};
static const char *const COORD_NAMES[] = {"half_pixel", "half_pixel_symmetric",
                                          "pytorch_half_pixel", "align_corners", "asymmetric",
                                          "tf_half_pixel_for_nn", "tf_crop_and_resize"};

static int find_name(const char *s, const char *const *names, int count) {
    for (int i = 0; i < count; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

static bool present(const ir_node *n, ir_tensor *const *in, int i) {
    return i < n->nin && in[i] && ir_numel(in[i]) != 0;
}

static bool is_upsample(const ir_node *n) {
    return strcmp(n->op_type, "Upsample") == 0;
}

static wpk_status read_attrs(wpk_context *ctx, const ir_node *n, resize_plan *p) {
    /* Upsample and Resize-10 have no coordinate or nearest mode: asymmetric and "simple" */
    bool legacy = is_upsample(n) || n->opset < 11;
    const char *m = ir_attr_str(n, "mode", "nearest");
    p->mode = find_name(m, MODE_NAMES, legacy ? 2 : 3);
    if (p->mode < 0)
        return op_fail(ctx, n, "attribute 'mode' is '%s'; it must be nearest, linear%s", m,
                       legacy ? "" : " or cubic");
    if (legacy) {
        p->coord = CT_ASYMMETRIC;
        p->nearest = NEAREST_SIMPLE;
        p->cubic_a = -0.75;
        return WPK_OK;
    }
    const char *c = ir_attr_str(n, "coordinate_transformation_mode", "half_pixel");
    p->coord = find_name(c, COORD_NAMES, 7);
    if (p->coord < 0)
        return op_fail(ctx, n, "attribute 'coordinate_transformation_mode' is '%s'; it must be "
                       "half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners, "
                       "asymmetric, tf_half_pixel_for_nn or tf_crop_and_resize", c);
    const char *nm = ir_attr_str(n, "nearest_mode", "round_prefer_floor");
    p->nearest = find_name(nm, NEAREST_NAMES, 4);
    if (p->nearest < 0)
        return op_fail(ctx, n, "attribute 'nearest_mode' is '%s'; it must be round_prefer_floor, "
                       "round_prefer_ceil, floor or ceil", nm);
    p->cubic_a = ir_attr_float(n, "cubic_coeff_a", -0.75f);
    p->extrapolation = ir_attr_float(n, "extrapolation_value", 0.0f);
    wpk_status st = op_attr_flag(ctx, n, "exclude_outside", &p->exclude_outside);
    if (!st) st = op_attr_flag(ctx, n, "antialias", &p->antialias);
    if (st) return st;
    if (p->antialias && p->mode == MODE_NEAREST)
        return op_fail(ctx, n, "attribute 'antialias' is 1, which mode 'nearest' does not take");
    return WPK_OK;
}

/* The axes the scales/sizes/roi values apply to: attribute 'axes', or every axis. */
static wpk_status read_axes(wpk_context *ctx, const ir_node *n, int ndim, int *axes, int *count) {
    int na;
    const int64_t *raw = ir_attr_ints(n, "axes", &na);
    if (!raw) {
        for (int i = 0; i < ndim; i++) axes[i] = i;
        *count = ndim;
        return WPK_OK;
    }
    if (na > ndim)
        return op_fail(ctx, n, "attribute 'axes' has %d values but the input has %d dims", na,
                       ndim);
    bool seen[WPK_MAX_DIMS] = {false};
    for (int i = 0; i < na; i++) {
        wpk_status st = op_axis(ctx, n, raw[i], ndim, &axes[i], "axis in attribute 'axes'");
        if (st) return st;
        if (seen[axes[i]]) return op_fail(ctx, n, "attribute 'axes' names axis %d twice", axes[i]);
        seen[axes[i]] = true;
    }
    *count = na;
    return WPK_OK;
}

/* Per-axis scale and output size from scales (a float tensor or Upsample-7's attribute) or
 * sizes, with keep_aspect_ratio_policy. */
static wpk_status read_sizes(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             resize_plan *p, const int *axes, int na) {
    const ir_tensor *x = in[0];
    int scales_in = is_upsample(n) || n->opset < 11 ? 1 : 2, sizes_in = 3;
    bool has_scales = present(n, in, scales_in);
    bool has_sizes = !is_upsample(n) && n->opset >= 11 && present(n, in, sizes_in);
    const ir_attr *scales_attr = is_upsample(n) ? ir_attr_find(n, "scales") : NULL;
    if (has_scales && has_sizes)
        return op_fail(ctx, n, "both 'scales' and 'sizes' are given; exactly one must be");
    double scale[WPK_MAX_DIMS];
    int64_t size[WPK_MAX_DIMS];
    char b1[160];
    if (has_sizes) {
        wpk_status st = op_need_data(ctx, n, in, sizes_in, "sizes");
        if (st) return st;
        int count;
        st = op_read_ints(ctx, n, in[sizes_in], size, WPK_MAX_DIMS, &count, "sizes");
        if (st) return st;
        if (count != na)
            return op_fail(ctx, n, "input 'sizes' has %d values for %d axes", count, na);
        for (int i = 0; i < na; i++)
            if (size[i] < 0 || size[i] > RESIZE_MAX_DIM)
                return op_fail(ctx, n, "input 'sizes' %s has the value %lld, outside [0, %lld]",
                               op_dims_str(b1, sizeof b1, na, size), (long long)size[i],
                               (long long)RESIZE_MAX_DIM);
    } else if (has_scales || (scales_attr && scales_attr->kind == IR_ATTR_FLOATS)) {
        int count;
        if (has_scales) {
            wpk_status st = op_need_data(ctx, n, in, scales_in, "scales");
            if (st) return st;
            const ir_tensor *s = in[scales_in];
            if (s->dtype != WPK_DTYPE_FLOAT32)
                return op_fail(ctx, n, "input 'scales' must be float32, not %s",
                               wpk_dtype_name(s->dtype));
            if (ir_numel(s) > WPK_MAX_DIMS)
                return op_fail(ctx, n, "input 'scales' has %lld values for %d axes",
                               (long long)ir_numel(s), na);
            count = (int)ir_numel(s);
            for (int i = 0; i < count; i++) scale[i] = ((const float *)s->data)[i];
        } else {
            count = scales_attr->n;
            for (int i = 0; i < count && i < WPK_MAX_DIMS; i++) scale[i] = scales_attr->floats[i];
        }
        if (count != na)
            return op_fail(ctx, n, "'scales' has %d values for %d axes", count, na);
        for (int i = 0; i < na; i++)
            if (!(scale[i] > 0) || !isfinite(scale[i]))
                return op_fail(ctx, n, "'scales' value %g (index %d) is not a positive number",
                               scale[i], i);
    } else {
        return op_fail(ctx, n, "neither 'scales' nor 'sizes' is given; exactly one must be");
    }
    for (int a = 0; a < x->ndim; a++)
        p->ax[a] = (resize_axis){x->dims[a], x->dims[a], 1.0, 0.0, 1.0, true, 1};
    if (has_sizes) {
        const char *policy = ir_attr_str(n, "keep_aspect_ratio_policy", "stretch");
        bool larger = strcmp(policy, "not_smaller") == 0;
        if (!larger && strcmp(policy, "not_larger") != 0 && strcmp(policy, "stretch") != 0)
            return op_fail(ctx, n, "attribute 'keep_aspect_ratio_policy' is '%s'; it must be "
                           "stretch, not_larger or not_smaller", policy);
        bool keep = strcmp(policy, "stretch") != 0;
        double common = larger ? 0.0 : INFINITY;
        for (int i = 0; i < na; i++) {
            int64_t d = x->dims[axes[i]];
            scale[i] = d > 0 ? (double)size[i] / (double)d : 1.0;
            if (keep) common = larger ? fmax(common, scale[i]) : fmin(common, scale[i]);
        }
        for (int i = 0; i < na; i++) {
            int64_t d = x->dims[axes[i]];
            if (keep) {
                scale[i] = common;
                double out = common * (double)d + 0.5;
                size[i] = d < 0 ? -1 : out > RESIZE_MAX_DIM ? RESIZE_MAX_DIM : (int64_t)out;
            }
            p->ax[axes[i]].out = size[i];
            p->ax[axes[i]].scale = scale[i];
        }
        return WPK_OK;
    }
    for (int i = 0; i < na; i++) {
        int64_t d = x->dims[axes[i]];
        double out = floor(scale[i] * (double)d);
        if (out > RESIZE_MAX_DIM)
            return op_fail(ctx, n, "'scales' value %g makes axis %d %g long, more than %lld",
                           scale[i], axes[i], out, (long long)RESIZE_MAX_DIM);
        p->ax[axes[i]].scale = scale[i];
        p->ax[axes[i]].out = d < 0 ? -1 : (int64_t)out;
    }
    return WPK_OK;
}

static wpk_status read_roi(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                           resize_plan *p, const int *axes, int na) {
    if (p->coord != CT_TF_CROP_AND_RESIZE) return WPK_OK;
    wpk_status st = op_need_data(ctx, n, in, 1, "roi");
    if (st) return st;
    const ir_tensor *r = in[1];
    if (r->dtype != WPK_DTYPE_FLOAT32 && r->dtype != WPK_DTYPE_FLOAT64)
        return op_fail(ctx, n, "input 'roi' must be float32 or float64, not %s",
                       wpk_dtype_name(r->dtype));
    if (ir_numel(r) != 2 * na)
        return op_fail(ctx, n, "input 'roi' has %lld values; %d axes need %d",
                       (long long)ir_numel(r), na, 2 * na);
    for (int i = 0; i < na; i++) {
        double lo, hi;
        if (r->dtype == WPK_DTYPE_FLOAT32) {
            lo = ((const float *)r->data)[i];
            hi = ((const float *)r->data)[na + i];
        } else {
            lo = ((const double *)r->data)[i];
            hi = ((const double *)r->data)[na + i];
        }
        if (!isfinite(lo) || !isfinite(hi))
            return op_fail(ctx, n, "input 'roi' has a value that is not finite (axis %d)",
                           axes[i]);
        p->ax[axes[i]].roi_start = lo;
        p->ax[axes[i]].roi_end = hi;
    }
    return WPK_OK;
}

/* Taps of an interpolating axis: 2 (linear), 4 (cubic), wider when antialiasing a downscale. */
static int filter_taps(const resize_plan *p, double scale) {
    if (p->mode == MODE_NEAREST) return 1;
    double radius = p->mode == MODE_LINEAR ? 1.0 : 2.0;
    if (!p->antialias || scale >= 1.0) return (int)(2 * radius);
    double first = floor(-radius / scale) + 1; /* the window's first offset */
    return first < -RESIZE_MAX_TAPS ? RESIZE_MAX_TAPS + 1 : (int)(2 - 2 * first);
}

static wpk_status resize_plan_make(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                   resize_plan *p) {
    memset(p, 0, sizeof *p);
    wpk_status st = op_need_input(ctx, n, in, 0, "X");
    if (!st) st = read_attrs(ctx, n, p);
    if (st) return st;
    const ir_tensor *x = in[0];
    if (!wpk_dtype_size(x->dtype))
        return op_unsupported(ctx, n, "dtype %d is not supported", (int)x->dtype);
    if (p->mode != MODE_NEAREST && x->dtype != WPK_DTYPE_FLOAT32)
        return op_unsupported(ctx, n, "mode '%s' on dtype %s; only float32 is supported",
                              MODE_NAMES[p->mode], wpk_dtype_name(x->dtype));
    if (p->coord == CT_TF_CROP_AND_RESIZE && x->dtype != WPK_DTYPE_FLOAT32)
        return op_unsupported(ctx, n, "tf_crop_and_resize on dtype %s; only float32 is "
                              "supported", wpk_dtype_name(x->dtype));
    int axes[WPK_MAX_DIMS], na = 0;
    p->ndim = x->ndim;
    st = read_axes(ctx, n, x->ndim, axes, &na);
    if (!st) st = read_sizes(ctx, n, in, p, axes, na);
    if (!st) st = read_roi(ctx, n, in, p, axes, na);
    if (st) return st;
    for (int a = 0; a < x->ndim; a++) {
        resize_axis *ax = &p->ax[a];
        bool whole_roi = p->coord != CT_TF_CROP_AND_RESIZE ||
                         (fabs(ax->roi_start) < 1e-9 && fabs(ax->roi_end - 1.0) < 1e-9);
        ax->identity = ax->out == ax->in && fabs(ax->scale - 1.0) <= 1e-9 && whole_roi;
        ax->taps = ax->identity ? 1 : filter_taps(p, ax->scale);
        if (ax->taps > RESIZE_MAX_TAPS)
            return op_unsupported(ctx, n, "antialiased downscaling of axis %d by %g needs more "
                                  "than %d taps per output element, the most supported", a,
                                  ax->scale, RESIZE_MAX_TAPS);
    }
    return WPK_OK;
}

/* ---- taps ---- */

/* The source coordinate of output index o; *outside for tf_crop_and_resize beyond the input. */
static double source_coord(const resize_plan *p, const resize_axis *ax, int64_t o,
                           bool *outside) {
    double in = (double)ax->in, width = ax->scale * in, y = (double)o, x;
    *outside = false;
    switch (p->coord) {
    case CT_ALIGN_CORNERS:
        return width == 1 ? 0.0 : y * (in - 1) / (width - 1);
    case CT_ASYMMETRIC:
        return y / ax->scale;
    case CT_TF_HALF_PIXEL_FOR_NN:
        return (y + 0.5) / ax->scale;
    case CT_TF_CROP_AND_RESIZE:
        if (width == 1) x = (ax->roi_end - ax->roi_start) * (in - 1) / 2;
        else x = y * (ax->roi_end - ax->roi_start) * (in - 1) / (width - 1);
        x += ax->roi_start * (in - 1);
        *outside = x < 0 || x > in - 1;
        return x;
    case CT_PYTORCH_HALF_PIXEL:
        return width == 1 ? -0.5 : (y + 0.5) / ax->scale - 0.5;
    case CT_HALF_PIXEL_SYMMETRIC: {
        double adjustment = (double)ax->out / width, center = in / 2;
        return center * (1 - adjustment) + (y + 0.5) / ax->scale - 0.5;
    }
    default:
        return (y + 0.5) / ax->scale - 0.5;
    }
}

static int64_t clamp_index(int64_t i, int64_t len) {
    return i < 0 ? 0 : i >= len ? len - 1 : i;
}

/* The nearest source index of coordinate x. */
static int64_t nearest_index(const resize_plan *p, const resize_axis *ax, double x) {
    double fl = floor(x), frac = x - fl;
    int64_t i = (int64_t)fl;
    if (frac != 0) {
        switch (p->nearest) {
        case NEAREST_ROUND_PREFER_FLOOR: i += frac > 0.5; break;
        case NEAREST_ROUND_PREFER_CEIL: i += frac >= 0.5; break;
        case NEAREST_CEIL: i += 1; break;
        case NEAREST_SIMPLE: i += ax->scale < 1.0; break;
        default: break;
        }
    }
    return clamp_index(i, ax->in);
}

static double cubic_weight(double a, double d) {
    d = fabs(d);
    if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
    if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
    return 0;
}

/* Taps (source indices, weights) of output index o along ax; returns their count (ax->taps). */
static int axis_taps(const resize_plan *p, const resize_axis *ax, int64_t o, int64_t *idx,
                     float *w, bool *outside) {
    *outside = false;
    if (ax->identity) {
        idx[0] = o;
        w[0] = 1;
        return 1;
    }
    double x = source_coord(p, ax, o, outside);
    /* far outside the input every tap clamps to the edge (or is excluded) either way; the
     * bound keeps the integer conversions below defined */
    double bound = (double)ax->in + 2 * RESIZE_MAX_TAPS;
    x = x < -bound ? -bound : x > bound ? bound : x;
    if (p->mode == MODE_NEAREST) {
        idx[0] = nearest_index(p, ax, x);
        w[0] = 1;
        return 1;
    }
    /* the window sits left of x: at an integer x its left neighbour takes weight 0 */
    double base = floor(x);
    if (base == x) base -= 1;
    double ratio = x - base;
    int n = ax->taps;
    int64_t first = (int64_t)base - n / 2 + 1;
    double s = p->antialias && ax->scale < 1.0 ? ax->scale : 1.0, sum = 0;
    double wd[RESIZE_MAX_TAPS];
    for (int t = 0; t < n; t++) {
        double d = ((double)(t - n / 2 + 1) - ratio) * s;
        wd[t] = p->mode == MODE_LINEAR ? fmax(0.0, 1 - fabs(d)) : cubic_weight(p->cubic_a, d);
        int64_t i = first + t;
        if (p->exclude_outside && (i < 0 || i >= ax->in)) wd[t] = 0;
        sum += wd[t];
    }
    bool normalize = p->antialias || p->exclude_outside;
    if (sum == 0) sum = 1;
    for (int t = 0; t < n; t++) {
        idx[t] = clamp_index(first + t, ax->in);
        w[t] = (float)(normalize ? wd[t] / sum : wd[t]);
    }
    return n;
}

/* ---- shape ---- */

wpk_status op_resize_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                           ir_tensor *const *out) {
    resize_plan p;
    wpk_status st = resize_plan_make(ctx, n, in, &p);
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    int64_t dims[WPK_MAX_DIMS];
    for (int a = 0; a < p.ndim; a++) dims[a] = p.ax[a].out;
    op_set_shape(out[0], in[0]->dtype, p.ndim, dims);
    return WPK_OK;
}

/* ---- kernel ---- */

/* The output, row by row: rows are the last axis; cols [c0, c1) of each row at a time, their
 * last-axis taps in the shared table (taps per column, -1 index: extrapolated). */
typedef struct resize_job {
    const resize_plan *p;
    int last;
    int64_t in_strides[WPK_MAX_DIMS], c0, c1, width;
    const int32_t *col_idx;
    const float *col_w;
    int64_t repeat; /* > 1: nearest column c of the chunk reads source c / repeat */
    size_t es;
    const char *src;
    char *dst;
} resize_job;

/* Source row offsets and weights of the outer axes' tap combinations for output row r, through
 * the callback; returns false when the row lies outside a tf_crop_and_resize roi. */
typedef struct row_taps {
    int naxes, axis[WPK_MAX_DIMS], count[WPK_MAX_DIMS];
    int64_t idx[WPK_MAX_DIMS][RESIZE_MAX_TAPS], base;
    float w[WPK_MAX_DIMS][RESIZE_MAX_TAPS];
} row_taps;

static bool row_taps_make(const resize_job *j, int64_t r, row_taps *rt) {
    const resize_plan *p = j->p;
    rt->naxes = 0;
    rt->base = 0;
    int64_t rem = r;
    for (int a = j->last - 1; a >= 0; a--) {
        const resize_axis *ax = &p->ax[a];
        int64_t o = rem % ax->out;
        rem /= ax->out;
        if (ax->identity) {
            rt->base += o * j->in_strides[a];
            continue;
        }
        int k = rt->naxes++;
        bool outside;
        rt->axis[k] = a;
        rt->count[k] = axis_taps(p, ax, o, rt->idx[k], rt->w[k], &outside);
        if (outside) return false;
    }
    return true;
}

/* out[c] = sum over the column's taps of weight * s[index]. */
static void apply_cols(float *o, const float *s, const int32_t *ci, const float *cw,
                       int64_t cols, int taps) {
    if (taps == 2) {
        for (int64_t c = 0; c < cols; c++)
            o[c] = cw[2 * c] * s[ci[2 * c]] + cw[2 * c + 1] * s[ci[2 * c + 1]];
    } else if (taps == 1) {
        for (int64_t c = 0; c < cols; c++) o[c] = cw[c] * s[ci[c]];
    } else {
        for (int64_t c = 0; c < cols; c++) {
            float acc = 0;
            for (int t = 0; t < taps; t++) acc += cw[c * taps + t] * s[ci[c * taps + t]];
            o[c] = acc;
        }
    }
}

static void resize_row_float(const resize_job *j, int64_t r) {
    const int64_t cols = j->c1 - j->c0, in_width = j->p->ax[j->last].in;
    const int taps = j->p->ax[j->last].taps;
    const float *src = (const float *)j->src;
    float *o = (float *)j->dst + r * j->width + j->c0;
    row_taps rt;
    if (!row_taps_make(j, r, &rt)) {
        for (int64_t c = 0; c < cols; c++) o[c] = j->p->extrapolation;
        return;
    }
    if (rt.naxes == 0) { /* only the last axis resizes */
        apply_cols(o, src + rt.base, j->col_idx, j->col_w, cols, taps);
        return;
    }
    /* The outer axes' taps first combine whole input rows into one (a contiguous, vectorized
     * pass over in_width elements), which the last axis's taps then read: per output element
     * `taps` loads instead of taps times the outer combinations. */
    float row[RESIZE_ROW_MAX];
    bool fits = in_width <= RESIZE_ROW_MAX;
    int pick[WPK_MAX_DIMS] = {0};
    for (bool first = true;; first = false) {
        int64_t off = rt.base;
        float wr = 1;
        for (int k = 0; k < rt.naxes; k++) {
            off += rt.idx[k][pick[k]] * j->in_strides[rt.axis[k]];
            wr *= rt.w[k][pick[k]];
        }
        const float *s = src + off;
        if (fits) {
            if (first) for (int64_t x = 0; x < in_width; x++) row[x] = wr * s[x];
            else for (int64_t x = 0; x < in_width; x++) row[x] += wr * s[x];
        } else {
            const int32_t *ci = j->col_idx;
            const float *cw = j->col_w;
            for (int64_t c = 0; c < cols; c++) {
                float acc = 0;
                for (int t = 0; t < taps; t++) acc += cw[c * taps + t] * s[ci[c * taps + t]];
                o[c] = first ? wr * acc : o[c] + wr * acc;
            }
        }
        int k = 0; /* next combination, odometer-wise */
        while (k < rt.naxes && ++pick[k] == rt.count[k]) pick[k++] = 0;
        if (k == rt.naxes) break;
    }
    if (fits) apply_cols(o, row, j->col_idx, j->col_w, cols, taps);
}

/* Nearest on any dtype: one source element per output element, copied by size. Rows [r0, r1)
 * of one thread; a row reading the same source row as the one before it (upsampling) copies
 * that output row instead. */
static void resize_rows_nearest(const resize_job *j, int64_t r0, int64_t r1) {
    const int64_t cols = j->c1 - j->c0;
    const size_t es = j->es, run = (size_t)cols * es;
    int64_t prev = -1; /* the source offset of row r - 1; -1: none, or extrapolated */
    for (int64_t r = r0; r < r1; r++) {
        char *o = j->dst + (size_t)(r * j->width + j->c0) * es;
        row_taps rt;
        if (!row_taps_make(j, r, &rt)) {
            for (int64_t c = 0; c < cols; c++) memcpy(o + c * es, &j->p->extrapolation, es);
            prev = -1;
            continue;
        }
        int64_t off = rt.base;
        for (int k = 0; k < rt.naxes; k++) off += rt.idx[k][0] * j->in_strides[rt.axis[k]];
        if (off == prev) {
            memcpy(o, o - (size_t)j->width * es, run);
            continue;
        }
        prev = off;
        const char *s = j->src + (size_t)off * es;
        const int32_t *ci = j->col_idx;
        if (j->repeat > 1 && es == 4) { /* each source element `repeat` times, no table */
            const int64_t f = j->repeat;
            const uint32_t *s4 = (const uint32_t *)s + j->c0 / f;
            uint32_t *o4 = (uint32_t *)o;
            if (f == 2) { /* the common 2x: one 8-byte store per source element */
                for (int64_t x = 0; x < cols / 2; x++) {
                    uint64_t v = s4[x];
                    v |= v << 32;
                    memcpy(o4 + 2 * x, &v, 8);
                }
                continue;
            }
            for (int64_t x = 0; x < cols / f; x++)
                for (int64_t k = 0; k < f; k++) o4[x * f + k] = s4[x];
            continue;
        }
        switch (es) {
        case 4:
            for (int64_t c = 0; c < cols; c++) memcpy(o + 4 * c, s + 4 * (int64_t)ci[c], 4);
            break;
        case 1:
            for (int64_t c = 0; c < cols; c++) o[c] = s[ci[c]];
            break;
        default:
            for (int64_t c = 0; c < cols; c++) memcpy(o + c * es, s + (size_t)ci[c] * es, es);
            break;
        }
    }
}

/* f when the chunk's nearest columns read source c / f (an integer upscale), else 0. */
static int64_t integer_repeat(const resize_job *j) {
    int64_t in = j->p->ax[j->last].in, f = j->width / in;
    if (f < 2 || j->width % in || j->c0 % f || (j->c1 - j->c0) % f) return 0;
    for (int64_t c = j->c0; c < j->c1; c++)
        if (j->col_idx[c - j->c0] != c / f) return 0;
    return f;
}

/* Rows [r0, r1) of the current column chunk. */
static void resize_rows(const resize_job *j, int64_t r0, int64_t r1) {
    if (j->p->mode == MODE_NEAREST) {
        resize_rows_nearest(j, r0, r1);
        return;
    }
    for (int64_t r = r0; r < r1; r++) resize_row_float(j, r);
}

/* After the rows of a chunk: columns extrapolated along the last axis get the value. */
static void fill_outside_cols(const resize_job *j, int64_t rows, const bool *outside) {
    for (int64_t c = j->c0; c < j->c1; c++) {
        if (!outside[c - j->c0]) continue;
        for (int64_t r = 0; r < rows; r++)
            ((float *)j->dst)[r * j->width + c] = j->p->extrapolation;
    }
}

wpk_status op_resize_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out) {
    resize_plan p;
    wpk_status st = resize_plan_make(ctx, n, in, &p);
    if (st) return st;
    const ir_tensor *x = in[0];
    ir_tensor *y = out[0];
    if (ir_numel(y) == 0) return WPK_OK;
    if (ir_numel(x) == 0)
        return op_fail(ctx, n, "the input is empty but the output is not");
    size_t es = wpk_dtype_size(x->dtype);
    if (x->ndim == 0) {
        memcpy(y->data, x->data, es);
        return WPK_OK;
    }
    int last = x->ndim - 1;
    if (x->dims[last] > INT32_MAX)
        return op_unsupported(ctx, n, "the last axis has %lld elements; at most %d are supported",
                              (long long)x->dims[last], INT32_MAX);
    resize_job j = {.p = &p, .last = last, .width = y->dims[last], .es = es, .src = x->data,
                    .dst = y->data};
    int64_t s = 1;
    for (int a = last; a >= 0; a--) {
        j.in_strides[a] = s;
        s *= x->dims[a];
    }
    int32_t col_idx[TABLE_TAPS];
    float col_w[TABLE_TAPS];
    bool outside[TABLE_TAPS];
    const resize_axis *lx = &p.ax[last];
    int64_t chunk = TABLE_TAPS / lx->taps, rows = ir_numel(y) / j.width;
    j.col_idx = col_idx;
    j.col_w = col_w;
    for (j.c0 = 0; j.c0 < j.width; j.c0 = j.c1) {
        j.c1 = j.c0 + chunk < j.width ? j.c0 + chunk : j.width;
        bool any_outside = false;
        for (int64_t c = j.c0; c < j.c1; c++) {
            int64_t idx[RESIZE_MAX_TAPS];
            int64_t k = (c - j.c0) * lx->taps;
            int nt = axis_taps(&p, lx, c, idx, col_w + k, &outside[c - j.c0]);
            any_outside |= outside[c - j.c0];
            for (int t = 0; t < nt; t++) col_idx[k + t] = (int32_t)idx[t];
        }
        j.repeat = p.mode == MODE_NEAREST ? integer_repeat(&j) : 0;
        int64_t work = rows * (j.c1 - j.c0) * lx->taps;
        if (op_parallel(work, PAR_MIN_WORK)) {
            /* contiguous blocks of rows per thread, so nearest can copy a row it just wrote */
#pragma omp parallel
            {
                int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
                resize_rows(&j, rows * t / nt, rows * (t + 1) / nt);
            }
        } else {
            resize_rows(&j, 0, rows);
        }
        if (any_outside) fill_outside_cols(&j, rows, outside);
    }
    return WPK_OK;
}
