/* softmax_rows.c -- Softmax's reader, key and algorithm for its templates (softmax_rows.h). */
#include "kernels/softmax_rows.h"

#include <string.h>

#include "kernels/common.h"

static bool read_rows(const ir_node *n, const ir_tensor *x, const ir_tensor *y,
                      tune_softmax_rows *g) {
    if (!n || n->op != IR_OP_SOFTMAX || !x || !y || !tune_static_f32(x) || x->ndim < 1 ||
        !ir_same_shape(x, y))
        return false;
    const bool v13 = n->opset >= 13;
    int64_t axis = ir_attr_int(n, "axis", v13 ? -1 : 1);
    if (axis < -x->ndim || axis >= x->ndim) return false;
    if (axis < 0) axis += x->ndim;
    g->outer = g->len = g->inner = 1;
    for (int i = 0; i < x->ndim; i++) {
        if (i < axis) g->outer *= x->dims[i];
        else if (i == axis || !v13) g->len *= x->dims[i];
        else g->inner *= x->dims[i];
    }
    return true;
}

bool tune_softmax_read(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out,
                       tune_softmax_rows *g) {
    return n && n->nin == 1 && n->nout == 1 && read_rows(n, in[0], out[0], g);
}

bool tune_softmax_read_task(const tune_task *t, tune_softmax_rows *g) {
    return t->nin >= 1 && read_rows(t->node, &t->in[0], &t->out[0], g);
}

void tune_softmax_describe(const char *tmpl, const tune_softmax_rows *g, tune_task *t) {
    tune_key_add(t, "%s:outer%lld,len%lld,inner%lld", tmpl, (long long)g->outer,
                 (long long)g->len, (long long)g->inner);
    t->flops = 5 * g->outer * g->len * g->inner;
}

bool tune_softmax_supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                           ir_tensor *const *out) {
    (void)self;
    tune_softmax_rows g;
    return tune_softmax_read(n, in, out, &g);
}

void tune_softmax_describe_task(const kernel_provider *self, tune_task *t) {
    tune_softmax_rows g;
    if (tune_softmax_read_task(t, &g)) tune_softmax_describe(self->name, &g, t);
}

bool tune_softmax_space_start(const tune_task *t, tune_space *s, tune_softmax_rows *g) {
    memset(s, 0, sizeof *s);
    return tune_softmax_read_task(t, g);
}

bool tune_softmax_default_start(const tune_task *t, tune_config *cfg, tune_softmax_rows *g) {
    memset(cfg, 0, sizeof *cfg);
    return tune_softmax_read_task(t, g);
}

wpk_status tune_softmax_build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                              const tune_space *s, const tune_config *cfg, bool split_max,
                              tune_build *out, te_algo_parts *parts, tune_softmax_rows *g) {
    memset(out, 0, sizeof *out);
    if (!tune_softmax_read_task(t, g))
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, "%s: node '%s' is not a Softmax this "
                         "template takes", self->name, t->node ? t->node->name : "(null)");
    TRY(tune_check_legal(c, self, t, s, cfg));
    const int64_t shape[3] = {g->outer, g->len, g->inner};
    te_tensor *x = te_placeholder(c, "x", TE_F32, 3, shape);
    if (!x) return tune_failed(c, self->name);
    out->args[out->nargs++] = x;
    out->ninputs = 1;
    te_tensor *y = split_max ? te_softmax_split_max(c, "y", x, 1, parts)
                             : te_softmax(c, "y", x, 1, parts);
    if (!y) return tune_failed(c, self->name);
    out->args[out->nargs++] = y;
    out->schedule = te_schedule_create(c, &y, 1);
    return out->schedule ? WPK_OK : tune_failed(c, self->name);
}
