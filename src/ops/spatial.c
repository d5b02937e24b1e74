/* spatial.c -- spatial attributes of convolutions and pools and the output sizes they imply. */
#include "ops/spatial.h"

#include <string.h>

#include "ops/op_util.h"

wpk_status sp_attr_ints(wpk_context *ctx, const ir_node *n, const char *name, int count,
                        int64_t def, int64_t lo, int64_t *out) {
    const ir_attr *a = ir_attr_find(n, name);
    if (!a || (a->kind == IR_ATTR_INTS && a->n == 0)) {
        for (int i = 0; i < count; i++) out[i] = def;
        return WPK_OK;
    }
    if (a->kind != IR_ATTR_INTS)
        return op_fail(ctx, n, "attribute '%s' must be a list of ints", name);
    if (a->n != count)
        return op_fail(ctx, n, "attribute '%s' has %d values, expected %d", name, a->n, count);
    for (int i = 0; i < count; i++) {
        if (a->ints[i] < lo || a->ints[i] > SP_ATTR_MAX)
            return op_fail(ctx, n,
                           "attribute '%s' value %lld at index %d is out of range [%lld, %lld]",
                           name, (long long)a->ints[i], i, (long long)lo,
                           (long long)SP_ATTR_MAX);
        out[i] = a->ints[i];
    }
    return WPK_OK;
}

static wpk_status read_auto_pad(wpk_context *ctx, const ir_node *n, sp_pad_mode *mode) {
    const char *s = ir_attr_str(n, "auto_pad", "NOTSET");
    if (!strcmp(s, "NOTSET") || !s[0]) *mode = SP_PAD_NOTSET;
    else if (!strcmp(s, "SAME_UPPER")) *mode = SP_PAD_SAME_UPPER;
    else if (!strcmp(s, "SAME_LOWER")) *mode = SP_PAD_SAME_LOWER;
    else if (!strcmp(s, "VALID")) *mode = SP_PAD_VALID;
    else return op_fail(ctx, n, "attribute 'auto_pad' is '%s', expected NOTSET, SAME_UPPER, "
                        "SAME_LOWER or VALID", s);
    return WPK_OK;
}

wpk_status sp_read_attrs(wpk_context *ctx, const ir_node *n, sp_geom *g, sp_pad_mode *mode) {
    int64_t pads[2 * SP_MAX];
    wpk_status st;
    if ((st = sp_attr_ints(ctx, n, "strides", g->nsp, 1, 1, g->stride)) ||
        (st = sp_attr_ints(ctx, n, "dilations", g->nsp, 1, 1, g->dil)) ||
        (st = sp_attr_ints(ctx, n, "pads", 2 * g->nsp, 0, 0, pads)) ||
        (st = read_auto_pad(ctx, n, mode)))
        return st;
    memcpy(g->pad0, pads, sizeof(int64_t) * (size_t)g->nsp);
    memcpy(g->pad1, pads + g->nsp, sizeof(int64_t) * (size_t)g->nsp);
    return WPK_OK;
}

int sp_out_dims(const sp_geom *g, int64_t n, int64_t c, int64_t *dims) {
    dims[0] = n;
    dims[1] = c;
    memcpy(dims + 2, g->out, sizeof(int64_t) * (size_t)g->nsp);
    return g->nsp + 2;
}

bool sp_resolve(sp_geom *g, int i, sp_pad_mode mode, bool ceil_mode) {
    int64_t s = g->stride[i], len = g->in[i], span = sp_span(g, i);
    if (len < 0 || g->kernel[i] < 0) {
        g->out[i] = -1;
        g->pad0[i] = g->pad1[i] = 0;
        return true;
    }
    if (mode == SP_PAD_SAME_UPPER || mode == SP_PAD_SAME_LOWER) {
        g->out[i] = (len + s - 1) / s;
        int64_t total = (g->out[i] - 1) * s + span - len;
        if (total < 0) total = 0;
        g->pad0[i] = mode == SP_PAD_SAME_UPPER ? total / 2 : total - total / 2;
        g->pad1[i] = total - g->pad0[i];
        return true;
    }
    if (mode == SP_PAD_VALID) g->pad0[i] = g->pad1[i] = 0;
    int64_t room = len + g->pad0[i] + g->pad1[i] - span;
    if (room < 0) return false;
    if (ceil_mode && mode == SP_PAD_NOTSET) {
        g->out[i] = (room + s - 1) / s + 1;
        if ((g->out[i] - 1) * s >= len + g->pad0[i]) g->out[i]--;
    } else {
        g->out[i] = room / s + 1;
    }
    return true;
}
