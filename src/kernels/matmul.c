/* matmul.c -- the products' reader, key and epilogue arguments for their templates (matmul.h). */
#include "kernels/matmul.h"

#include <string.h>

#include "kernels/common.h"

#define Z_INPUT 3

bool tune_mm_is_gemm(const tune_mm *g) { return g->op == IR_OP_GEMM || g->op == IR_OP_FUSED_GEMM; }

/* C of a Gemm broadcasts to [M, N]. */
static bool c_fits(const ir_tensor *c, int64_t m, int64_t n) {
    if (c->ndim > 2) return false;
    const int64_t want[2] = {m, n};
    for (int i = 0; i < c->ndim; i++) {
        int64_t d = c->dims[i], w = want[2 - c->ndim + i];
        if (d != 1 && d != w) return false;
    }
    return true;
}

static bool read_mm(const ir_node *n, const ir_tensor *const *in, const ir_tensor *const *out,
                    tune_mm *g) {
    memset(g, 0, sizeof *g);
    if (!n || n->nout < 1 || !out[0] || !tune_static_f32(out[0]) || n->nin < 2) return false;
    if (n->nout > 1 && out[1]) return false;
    g->op = n->op;
    switch (n->op) {
    case IR_OP_GEMM: case IR_OP_MATMUL:
        if (n->nin > (n->op == IR_OP_GEMM ? 3 : 2)) return false;
        break;
    case IR_OP_FUSED_GEMM: case IR_OP_FUSED_MATMUL:
        if (n->nin > Z_INPUT + 1) return false;
        break;
    default: return false;
    }
    g->a = in[0], g->b = in[1];
    g->c = n->nin > 2 ? in[2] : NULL;
    g->z = n->nin > Z_INPUT ? in[Z_INPUT] : NULL;
    if (!tune_static_f32(g->a) || !tune_static_f32(g->b)) return false;
    if ((g->c && !tune_static_f32(g->c)) || (g->z && !tune_static_f32(g->z))) return false;
    const ir_tensor *a = g->a, *b = g->b;
    g->alpha = g->beta = 1.0f;
    if (tune_mm_is_gemm(g)) {
        if (a->ndim != 2 || b->ndim != 2) return false;
        g->ta = ir_attr_int(n, "transA", 0) != 0;
        g->tb = ir_attr_int(n, "transB", 0) != 0;
        if (n->op == IR_OP_GEMM) {
            g->alpha = ir_attr_float(n, "alpha", 1.0f);
            g->beta = ir_attr_float(n, "beta", 1.0f);
        }
        g->m = a->dims[g->ta ? 1 : 0];
        g->k = a->dims[g->ta ? 0 : 1];
        g->n = b->dims[g->tb ? 0 : 1];
        if (b->dims[g->tb ? 1 : 0] != g->k) return false;
        if (g->c && !c_fits(g->c, g->m, g->n)) return false;
    } else {
        if (a->ndim < 1 || b->ndim < 1) return false;
        g->m = a->ndim == 1 ? 1 : a->dims[a->ndim - 2];
        g->k = a->dims[a->ndim - 1];
        g->n = b->ndim == 1 ? 1 : b->dims[b->ndim - 1];
        if ((b->ndim == 1 ? b->dims[0] : b->dims[b->ndim - 2]) != g->k) return false;
        int na = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
        g->nb = na > nbb ? na : nbb;
        if (g->nb + 2 > TE_MAX_DIMS) return false;
        for (int i = 0; i < g->nb; i++) {
            int ia = i - (g->nb - na), ib = i - (g->nb - nbb);
            int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
            if (da != db && da != 1 && db != 1) return false;
            g->batch[i] = da > db ? da : db;
        }
        /* FusedMatMul's bias: one value per column */
        if (g->c && (g->c->ndim != 1 || g->c->dims[0] != g->n)) return false;
    }
    int64_t want = g->m * g->n;
    for (int i = 0; i < g->nb; i++) want *= g->batch[i];
    if (ir_numel(out[0]) != want) return false;
    if (g->z && ir_numel(g->z) != want) return false;
    if (n->op == IR_OP_FUSED_GEMM || n->op == IR_OP_FUSED_MATMUL) {
        if (!tune_read_act(n, &g->act)) return false;
    } else {
        g->act = te_act_default(TE_ACT_NONE);
    }
    g->packable = b->data != NULL && (b->ndim == 2 || (b->ndim > 2 && ir_numel(b) == g->k * g->n));
    return true;
}

bool tune_mm_read(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out, tune_mm *g) {
    if (!n || !in || !out || n->nin > TUNE_MAX_ARGS || n->nout > TUNE_MAX_ARGS) return false;
    const ir_tensor *ci[TUNE_MAX_ARGS] = {0}, *co[TUNE_MAX_ARGS] = {0};
    for (int i = 0; i < n->nin; i++) ci[i] = in[i];
    for (int i = 0; i < n->nout; i++) co[i] = out[i];
    return read_mm(n, ci, co, g);
}

bool tune_mm_read_task(const tune_task *t, tune_mm *g) {
    const ir_tensor *in[TUNE_MAX_ARGS] = {0}, *out[TUNE_MAX_ARGS] = {&t->out[0]};
    for (int i = 0; i < t->nin; i++) in[i] = tune_task_in(t, i);
    for (int i = 1; i < t->nout && i < TUNE_MAX_ARGS; i++) out[i] = &t->out[i];
    return read_mm(t->node, in, out, g);
}

bool tune_mm_is_2d(const tune_mm *g, int nout, const ir_tensor *y) {
    return nout == 1 && g->a->ndim == 2 && g->b->ndim == 2 && y->ndim == 2 &&
           y->dims[0] == g->m && y->dims[1] == g->n && (!g->z || ir_same_shape(g->z, y));
}

void tune_mm_describe(const char *tmpl, const tune_mm *g, tune_task *t) {
    tune_key_add(t, "%s:%s,a=", tmpl, t->node->op_type);
    tune_key_dims(t, g->a);
    tune_key_add(t, ",b=");
    tune_key_dims(t, g->b);
    if (g->ta) tune_key_add(t, ",ta");
    if (g->tb) tune_key_add(t, ",tb");
    if (g->alpha != 1.0f) tune_key_add(t, ",alpha=%g", (double)g->alpha);
    if (g->c) {
        tune_key_add(t, tune_mm_is_gemm(g) ? ",c=" : ",bias=");
        tune_key_dims(t, g->c);
        if (g->beta != 1.0f) tune_key_add(t, ",beta=%g", (double)g->beta);
    }
    if (g->z) tune_key_add(t, ",res");
    tune_key_act(t, &g->act);
    int64_t batch = 1;
    for (int i = 0; i < g->nb; i++) batch *= g->batch[i];
    t->flops = 2 * batch * g->m * g->n * g->k;
}

wpk_status tune_mm_build_start(const kernel_provider *self, te_ctx *c, const tune_task *t,
                               const tune_space *s, const tune_config *cfg, bool only_2d,
                               tune_mm *g, tune_build *out) {
    memset(out, 0, sizeof *out);
    if (!tune_mm_read_task(t, g) || (only_2d && !tune_mm_is_2d(g, t->nout, &t->out[0])))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, "%s: node '%s' is not a %sproduct this "
                         "template takes", self->name, t->node ? t->node->name : "(null)",
                         only_2d ? "2-D " : "");
    return tune_check_legal(c, self, t, s, cfg);
}

wpk_status tune_mm_epilogue_args(te_ctx *c, const tune_mm *g, tune_build *out,
                                 te_gemm_epilogue *ep) {
    *ep = (te_gemm_epilogue){g->alpha, g->beta, NULL, NULL, g->act};
    if (g->c) {
        ep->c = tune_placeholder(c, tune_mm_is_gemm(g) ? "c" : "bias", g->c);
        if (!ep->c) return WPK_ERR_NOMEM;
        out->args[out->nargs++] = ep->c;
    }
    if (g->z) {
        int64_t shape[TE_MAX_DIMS];
        memcpy(shape, g->batch, sizeof(int64_t) * (size_t)g->nb);
        shape[g->nb] = g->m;
        shape[g->nb + 1] = g->n;
        ep->residual = te_placeholder(c, "z", TE_F32, g->nb + 2, shape);
        if (!ep->residual) return WPK_ERR_NOMEM;
        out->args[out->nargs++] = ep->residual;
    }
    return WPK_OK;
}
