/* conv.c -- the conv templates' shared part: a conv node read into numbers, its workload key,
 * the placeholders of its kernel's arguments, config checks (see conv.h). */
#include "kernels/conv.h"

#include <float.h>
#include <stdio.h>
#include <string.h>

#include "base/target.h"
#include "kernels/common.h"

#define Z_INPUT 3
/* Attribute values beyond this are not convs anyone runs; refusing them keeps sizes small. */
#define ATTR_MAX ((int64_t)1 << 30)

int tune_vector_floats(void) { return target_vector_floats(); }

static bool static_f32(const ir_tensor *t, int ndim) {
    if (!t || t->dtype != WPK_DTYPE_FLOAT32 || t->ndim != ndim) return false;
    for (int i = 0; i < ndim; i++)
        if (t->dims[i] < 1) return false;
    return true;
}

/* Attribute `name` as `count` ints in [lo, ATTR_MAX] (def when absent or empty). */
static bool ints(const ir_node *n, const char *name, int count, int64_t def, int64_t lo,
                 int64_t *out) {
    int k;
    const int64_t *v = ir_attr_ints(n, name, &k);
    for (int i = 0; i < count; i++) out[i] = def;
    if (!v || k == 0) return true;
    if (k != count) return false;
    for (int i = 0; i < count; i++) {
        if (v[i] < lo || v[i] > ATTR_MAX) return false;
        out[i] = v[i];
    }
    return true;
}

/* Begin/end pads of one spatial dim: explicit, VALID, or SAME_* derived from the output size
 * (the end pad as large as the output needs, never negative). */
static bool resolve_pad(const char *mode, int64_t in, int64_t out, int64_t k, int64_t s,
                        int64_t d, const int64_t *explicit_pads, int dim, int64_t *p0,
                        int64_t *p1) {
    if (!mode[0] || !strcmp(mode, "NOTSET")) {
        *p0 = explicit_pads[dim];
        *p1 = explicit_pads[dim + 2];
        return true;
    }
    if (!strcmp(mode, "VALID")) {
        *p0 = *p1 = 0;
        return true;
    }
    int64_t total = (out - 1) * s + (k - 1) * d + 1 - in;
    if (total < 0) total = 0;
    if (!strcmp(mode, "SAME_UPPER")) *p0 = total / 2;
    else if (!strcmp(mode, "SAME_LOWER")) *p0 = total - total / 2;
    else return false;
    *p1 = total - *p0;
    return true;
}

static bool read_plain(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out,
                       tune_conv *g) {
    const ir_tensor *x = in[0], *w = in[1], *y = out[0];
    if (!static_f32(x, 4) || !static_f32(w, 4) || !static_f32(y, 4)) return false;
    g->n = x->dims[0], g->cin = x->dims[1], g->h = x->dims[2], g->w = x->dims[3];
    g->cout = w->dims[0], g->cg = w->dims[1], g->kh = w->dims[2], g->kw = w->dims[3];
    g->p.groups = ir_attr_int(n, "group", 1);
    if (g->p.groups < 1 || g->p.groups > ATTR_MAX || g->cin != g->cg * g->p.groups ||
        g->cout % g->p.groups)
        return false;
    int64_t pads[4];
    if (!ints(n, "strides", 2, 1, 1, g->p.stride) ||
        !ints(n, "dilations", 2, 1, 1, g->p.dilation) ||
        !ints(n, "pads", 4, 0, 0, pads))
        return false;
    const char *mode = ir_attr_str(n, "auto_pad", "NOTSET");
    const int64_t ins[2] = {g->h, g->w}, outs[2] = {y->dims[2], y->dims[3]}, ks[2] = {g->kh, g->kw};
    for (int i = 0; i < 2; i++)
        if (!resolve_pad(mode, ins[i], outs[i], ks[i], g->p.stride[i], g->p.dilation[i], pads, i,
                         &g->p.pad[i], &g->p.pad[i + 2]))
            return false;
    g->depthwise = g->p.groups > 1 && g->cg == 1 && g->cout == g->p.groups;
    g->wconst = w->data != NULL;
    return true;
}

static bool read_blocked(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out,
                         tune_conv *g) {
    const ir_tensor *x = in[0], *w = in[1], *y = out[0];
    if (!x || (!static_f32(x, 5) && !static_f32(x, 4)) || !static_f32(w, 6) || !static_f32(y, 5))
        return false;
    g->n = x->dims[0], g->h = x->dims[2], g->w = x->dims[3];
    g->bi = x->ndim == 5 ? x->dims[4] : 1;
    g->cin = x->dims[1] * g->bi;
    g->bo = w->dims[5];
    g->kh = w->dims[2], g->kw = w->dims[3];
    g->cout = ir_attr_int(n, "channels", -1);
    g->p.groups = ir_attr_int(n, "group", 1);
    if (g->cout < 1 || g->p.groups < 1 || g->p.groups > ATTR_MAX || y->dims[4] != g->bo ||
        y->dims[1] != w->dims[0])
        return false;
    if (!ints(n, "strides", 2, 1, 1, g->p.stride) ||
        !ints(n, "dilations", 2, 1, 1, g->p.dilation) ||
        !ints(n, "pads", 4, 0, 0, g->p.pad))
        return false;
    const char *mode = ir_attr_str(n, "auto_pad", "NOTSET");
    if (mode[0] && strcmp(mode, "NOTSET")) return false;
    g->depthwise = g->p.groups > 1 && w->dims[4] == 1 && g->bi > 1;
    g->cg = g->depthwise ? 1 : w->dims[1] * w->dims[4];
    g->wconst = w->data != NULL;
    return true;
}

bool tune_conv_read(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out, tune_conv *g) {
    memset(g, 0, sizeof *g);
    if (!n || n->nin < 2 || n->nout < 1 || !in || !out || !in[0] || !in[1] || !out[0]) return false;
    g->op = n->op;
    bool ok;
    switch (n->op) {
    case IR_OP_CONV: ok = n->nin <= 3 && read_plain(n, in, out, g); break;
    case IR_OP_FUSED_CONV: ok = n->nin <= Z_INPUT + 1 && read_plain(n, in, out, g); break;
    case IR_OP_CONV_NCHWC: ok = n->nin <= Z_INPUT + 1 && read_blocked(n, in, out, g); break;
    default: return false;
    }
    if (!ok) return false;
    const ir_tensor *y = out[0];
    int64_t oh, ow;
    te_ctx quiet = {.err = NULL};
    if (!te_conv2d_out_size(&quiet, "conv", n->name, g->h, g->w, g->kh, g->kw, &g->p, &oh, &ow) ||
        oh != y->dims[2] || ow != y->dims[3])
        return false;
    g->oh = oh, g->ow = ow;
    g->bias = n->nin > 2 && in[2];
    if (g->bias && !static_f32(in[2], 1)) return false;
    if (g->bias && in[2]->dims[0] != g->cout) return false;
    g->residual = n->op != IR_OP_CONV && n->nin > Z_INPUT && in[Z_INPUT];
    if (g->residual && !(static_f32(in[Z_INPUT], y->ndim) && ir_same_shape(in[Z_INPUT], y)))
        return false;
    if (n->op == IR_OP_CONV) g->act = te_act_default(TE_ACT_NONE);
    else if (!tune_read_act(n, &g->act)) return false;
    return true;
}

wpk_status tune_conv_build_nchw(te_ctx *c, const kernel_provider *self, const tune_task *t,
                                const tune_space *s, const tune_config *cfg, tune_conv *g) {
    if (!tune_conv_read_task(t, g) || g->op == IR_OP_CONV_NCHWC)
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, "%s: node '%s' is not a conv this "
                         "template takes", self->name, t->node ? t->node->name : "(null)");
    return tune_check_legal(c, self, t, s, cfg);
}

te_iter *tune_conv_raxis(const te_tensor *t, const char *name) {
    for (int i = 0; i < t->body->nraxes; i++)
        if (!strcmp(t->body->raxes[i]->name, name)) return t->body->raxes[i];
    return NULL;
}

bool tune_conv_read_task(const tune_task *t, tune_conv *g) {
    ir_tensor *in[TUNE_MAX_ARGS] = {0}, *out[TUNE_MAX_ARGS] = {0};
    for (int i = 0; i < t->nin; i++)
        if (t->in[i].dtype != WPK_DTYPE_UNDEFINED) in[i] = (ir_tensor *)&t->in[i];
    for (int i = 0; i < t->nout; i++) out[i] = (ir_tensor *)&t->out[i];
    return tune_conv_read(t->node, in, out, g);
}

static void put_act(char *buf, size_t size, const te_act *a) {
    static const char *const names[] = {
        [TE_ACT_NONE] = "",         [TE_ACT_RELU] = "relu",       [TE_ACT_LEAKY_RELU] = "leaky",
        [TE_ACT_CLIP] = "clip",     [TE_ACT_HARD_SIGMOID] = "hsig", [TE_ACT_HARD_SWISH] = "hswish",
        [TE_ACT_SIGMOID] = "sigmoid", [TE_ACT_SILU] = "silu",     [TE_ACT_GELU] = "gelu",
        [TE_ACT_TANH] = "tanh",
    };
    switch (a->kind) {
    case TE_ACT_LEAKY_RELU: snprintf(buf, size, "leaky(%g)", (double)a->alpha); break;
    case TE_ACT_HARD_SIGMOID:
        snprintf(buf, size, "hsig(%g,%g)", (double)a->alpha, (double)a->beta);
        break;
    case TE_ACT_CLIP: snprintf(buf, size, "clip(%g,%g)", (double)a->lo, (double)a->hi); break;
    default: snprintf(buf, size, "%s", names[a->kind]); break;
    }
}

void tune_conv_describe(const char *tmpl, const tune_conv *g, tune_task *t) {
    char ep[96] = "", act[48];
    put_act(act, sizeof act, &g->act);
    snprintf(ep, sizeof ep, "%s%s%s%s%s", g->bias ? "bias" : "",
             g->bias && g->residual ? "+" : "", g->residual ? "res" : "",
             (g->bias || g->residual) && act[0] ? "+" : "", act);
    char blocks[48] = "";
    if (g->op == IR_OP_CONV_NCHWC)
        snprintf(blocks, sizeof blocks, ",x%lld>%lld", (long long)g->bi, (long long)g->bo);
    snprintf(t->key, sizeof t->key,
             "%s:n%lld,c%lld,h%lld,w%lld,k%lld,r%lld,s%lld,st%lld,%lld,pd%lld,%lld,%lld,%lld,"
             "dl%lld,%lld,g%lld%s%s%s",
             tmpl, (long long)g->n, (long long)g->cin, (long long)g->h, (long long)g->w,
             (long long)g->cout, (long long)g->kh, (long long)g->kw, (long long)g->p.stride[0],
             (long long)g->p.stride[1], (long long)g->p.pad[0], (long long)g->p.pad[1],
             (long long)g->p.pad[2], (long long)g->p.pad[3], (long long)g->p.dilation[0],
             (long long)g->p.dilation[1], (long long)g->p.groups, blocks, ep[0] ? ",ep=" : "",
             ep);
    t->flops = 2 * g->n * g->cout * g->oh * g->ow * g->cg * g->kh * g->kw;
}

wpk_status tune_conv_args(te_ctx *c, const tune_task *t, const tune_conv *g,
                          const int64_t *x_shape, int x_ndim, const int64_t *w_shape, int w_ndim,
                          const int64_t *z_shape, int z_ndim, tune_build *out, te_epilogue *ep) {
    memset(ep, 0, sizeof *ep);
    ep->act = g->act;
    out->nargs = 0;
    te_tensor *x = te_placeholder(c, "x", TE_F32, x_ndim, x_shape);
    te_tensor *w = te_placeholder(c, "w", TE_F32, w_ndim, w_shape);
    if (!x || !w) return c->oom ? WPK_ERR_NOMEM : WPK_ERR_INVALID_ARG;
    w->constant = g->wconst;
    out->args[out->nargs++] = x;
    out->args[out->nargs++] = w;
    if (g->bias) {
        ep->bias = te_placeholder(c, "bias", TE_F32, 1, (const int64_t[]){g->cout});
        if (!ep->bias) return c->oom ? WPK_ERR_NOMEM : WPK_ERR_INVALID_ARG;
        ep->bias->constant = t->nin > 2 && t->in[2].data != NULL;
        out->args[out->nargs++] = ep->bias;
    }
    if (g->residual) {
        ep->residual = te_placeholder(c, "z", TE_F32, z_ndim, z_shape);
        if (!ep->residual) return c->oom ? WPK_ERR_NOMEM : WPK_ERR_INVALID_ARG;
        out->args[out->nargs++] = ep->residual;
    }
    out->ninputs = out->nargs;
    return WPK_OK;
}

int64_t tune_value(const tune_space *s, const tune_config *cfg, const char *name) {
    return tune_config_get(s, cfg, name, 0);
}

bool tune_conv_supports_nchw(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                             ir_tensor *const *out) {
    (void)self;
    tune_conv g;
    return tune_conv_read(n, in, out, &g) && g.op != IR_OP_CONV_NCHWC;
}

void tune_conv_describe_task(const kernel_provider *self, tune_task *t) {
    tune_conv g;
    if (tune_conv_read_task(t, &g)) tune_conv_describe(self->name, &g, t);
}

bool tune_conv_default_start(const tune_task *t, tune_config *cfg, tune_conv *g) {
    memset(cfg, 0, sizeof *cfg);
    return tune_conv_read_task(t, g);
}
