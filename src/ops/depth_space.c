/* depth_space.c -- DepthToSpace and SpaceToDepth: blocks of b x b pixels move between the
 * channel dim and the two spatial dims of an NCHW tensor, channel-block order DCR (the block
 * index outer) or CRD (the channel outer). Elements move by size, so every dtype runs. */
#include "ops/op_util.h"

#include <string.h>

#define PAR_MIN_BYTES (1 << 20)

/* count elements of es bytes from src (every src_step-th) to dst (every dst_step-th). */
static void copy_strided(char *dst, int64_t dst_step, const char *src, int64_t src_step,
                         size_t es, int64_t count) {
    if (es == 4) {
        for (int64_t i = 0; i < count; i++)
            memcpy(dst + 4 * i * dst_step, src + 4 * i * src_step, 4);
        return;
    }
    for (int64_t i = 0; i < count; i++)
        memcpy(dst + (size_t)(i * dst_step) * es, src + (size_t)(i * src_step) * es, es);
}

typedef struct ds_geom {
    bool to_space, crd;
    int64_t n, c, h, w, b; /* the input's dims and the block size */
} ds_geom;

static wpk_status ds_read(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                          ds_geom *g) {
    wpk_status st = op_need_input(ctx, n, in, 0, "input");
    if (st) return st;
    const ir_tensor *x = in[0];
    g->to_space = strcmp(n->op_type, "DepthToSpace") == 0;
    if (!wpk_dtype_size(x->dtype))
        return op_unsupported(ctx, n, "dtype %d is not supported", (int)x->dtype);
    char b1[160];
    if (x->ndim != 4)
        return op_fail(ctx, n, "the input %s must have 4 dims (N, C, H, W)",
                       op_dims_str(b1, sizeof b1, x->ndim, x->dims));
    const ir_attr *bs = ir_attr_find(n, "blocksize");
    if (!bs) return op_fail(ctx, n, "attribute 'blocksize' is missing");
    if (bs->i < 1 || bs->i > (1 << 20))
        return op_fail(ctx, n, "attribute 'blocksize' is %lld; it must be positive",
                       (long long)bs->i);
    const char *mode = ir_attr_str(n, "mode", "DCR");
    if (strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0)
        return op_fail(ctx, n, "attribute 'mode' is '%s'; it must be DCR or CRD", mode);
    *g = (ds_geom){g->to_space, strcmp(mode, "CRD") == 0, x->dims[0], x->dims[1], x->dims[2],
                   x->dims[3], bs->i};
    int64_t b = g->b;
    if (g->to_space && g->c >= 0 && g->c % (b * b) != 0)
        return op_fail(ctx, n, "the input's %lld channels are not a multiple of blocksize^2 = "
                       "%lld", (long long)g->c, (long long)(b * b));
    if (!g->to_space && ((g->h >= 0 && g->h % b) || (g->w >= 0 && g->w % b)))
        return op_fail(ctx, n, "the input's height %lld and width %lld must be multiples of "
                       "blocksize %lld", (long long)g->h, (long long)g->w, (long long)b);
    return WPK_OK;
}

/* The channel of the deep tensor holding block offset (i, j) of shallow channel c. */
static int64_t deep_channel(const ds_geom *g, int64_t shallow_c, int64_t c, int64_t i,
                            int64_t j) {
    return g->crd ? (c * g->b + i) * g->b + j : (i * g->b + j) * shallow_c + c;
}

wpk_status op_depth_space_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                ir_tensor *const *out) {
    ds_geom g;
    wpk_status st = ds_read(ctx, n, in, &g);
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    int64_t b = g.b, dims[4] = {g.n, -1, -1, -1};
    if (g.to_space) {
        dims[1] = g.c < 0 ? -1 : g.c / (b * b);
        dims[2] = g.h < 0 ? -1 : g.h * b;
        dims[3] = g.w < 0 ? -1 : g.w * b;
    } else {
        dims[1] = g.c < 0 ? -1 : g.c * b * b;
        dims[2] = g.h < 0 ? -1 : g.h / b;
        dims[3] = g.w < 0 ? -1 : g.w / b;
    }
    op_set_shape(out[0], in[0]->dtype, 4, dims);
    return WPK_OK;
}

/* One output row (n, c, y) of the shallow (space) side: for DepthToSpace written from the deep
 * input, for SpaceToDepth read into the deep output; rows of the shallow tensor are W*b wide. */
static void ds_row(const ds_geom *g, const char *src, char *dst, size_t es, int64_t row) {
    int64_t b = g->b;
    if (g->to_space) {
        int64_t sc = g->c / (b * b), oh = row % (g->h * b), nc = row / (g->h * b);
        int64_t c = nc % sc, n = nc / sc, h = oh / b, i = oh % b, ow = g->w * b;
        char *o = dst + (size_t)(row * ow) * es;
        for (int64_t j = 0; j < b; j++) {
            int64_t ch = n * g->c + deep_channel(g, sc, c, i, j);
            copy_strided(o + (size_t)j * es, b, src + (size_t)((ch * g->h + h) * g->w) * es, 1,
                         es, g->w);
        }
    } else {
        int64_t oh = g->h / b, ow = g->w / b, dc = g->c * b * b;
        int64_t y = row % oh, nc = row / oh, oc = nc % dc, n = nc / dc, c, i, j;
        if (g->crd) {
            c = oc / (b * b);
            i = oc / b % b;
            j = oc % b;
        } else {
            c = oc % g->c;
            i = oc / g->c / b;
            j = oc / g->c % b;
        }
        const char *s = src + (size_t)(((n * g->c + c) * g->h + y * b + i) * g->w + j) * es;
        copy_strided(dst + (size_t)(row * ow) * es, 1, s, b, es, ow);
    }
}

wpk_status op_depth_space_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                              ir_tensor *const *out) {
    ds_geom g;
    wpk_status st = ds_read(ctx, n, in, &g);
    if (st) return st;
    const ir_tensor *y = out[0];
    int64_t total = ir_numel(y);
    if (total == 0) return WPK_OK;
    size_t es = wpk_dtype_size(y->dtype);
    int64_t rows = total / y->dims[3];
    const char *src = in[0]->data;
    char *dst = out[0]->data;
    if (op_parallel(total * (int64_t)es, PAR_MIN_BYTES)) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++) ds_row(&g, src, dst, es, r);
    } else {
        for (int64_t r = 0; r < rows; r++) ds_row(&g, src, dst, es, r);
    }
    return WPK_OK;
}
