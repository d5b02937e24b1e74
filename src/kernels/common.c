/* common.c -- helpers of the non-conv templates (see common.h). */
#include "kernels/common.h"

#include <stdio.h>
#include <string.h>

#include "base/target.h"
#include "ops/activation.h"

bool tune_static_f32(const ir_tensor *t) {
    if (!t || t->dtype != WPK_DTYPE_FLOAT32 || t->ndim < 0 || t->ndim > TE_MAX_DIMS) return false;
    for (int i = 0; i < t->ndim; i++)
        if (t->dims[i] < 1) return false;
    return true;
}

te_tensor *tune_placeholder(te_ctx *c, const char *name, const ir_tensor *t) {
    static const int64_t one = 1;
    te_tensor *p = t->ndim ? te_placeholder(c, name, TE_F32, t->ndim, t->dims)
                           : te_placeholder(c, name, TE_F32, 1, &one);
    if (p) p->constant = t->data != NULL;
    return p;
}

wpk_status tune_check_config(te_ctx *c, const char *tmpl, const tune_space *s,
                             const tune_config *cfg) {
    for (int k = 0; k < s->nknobs; k++)
        if (cfg->choice[k] < 0 || cfg->choice[k] >= s->knobs[k].nvalues)
            return wpk_error(c->err, WPK_ERR_INVALID_ARG, "%s: knob '%s' has no value number %d "
                             "(it has %d values)", tmpl, s->knobs[k].name, cfg->choice[k],
                             s->knobs[k].nvalues);
    return WPK_OK;
}

wpk_status tune_check_legal(te_ctx *c, const kernel_provider *self, const tune_task *t,
                            const tune_space *s, const tune_config *cfg) {
    const char *tmpl = self->name;
    TRY(tune_check_config(c, tmpl, s, cfg));
    tune_space legal;
    self->space(self, t, &legal);
    for (int k = 0; k < legal.nknobs; k++) {
        const tune_knob *kn = &legal.knobs[k];
        int64_t v = tune_config_get(s, cfg, kn->name, INT64_MIN);
        if (v == INT64_MIN)
            return wpk_error(c->err, WPK_ERR_INVALID_ARG, "%s: the config has no knob '%s'", tmpl,
                             kn->name);
        bool ok = false;
        for (int i = 0; i < kn->nvalues; i++) ok |= kn->values[i] == v;
        if (!ok)
            return wpk_error(c->err, WPK_ERR_INVALID_ARG, "%s: knob '%s' = %lld is not a legal "
                             "value for workload %s", tmpl, kn->name, (long long)v, t->key);
    }
    return WPK_OK;
}

wpk_status tune_failed(te_ctx *c, const char *tmpl) {
    if (c->oom) return WPK_ERR_NOMEM;
    wpk_error_prefix(c->err, "%s", tmpl);
    return WPK_ERR_INVALID_ARG;
}

bool tune_read_act(const ir_node *n, te_act *a) {
    act_params p;
    if (act_read(NULL, n, &p)) return false;
    /* te_act mirrors act_params (epilogue.h): the kinds are listed in the same order */
    static const te_act_kind kinds[ACT_COUNT] = {
        [ACT_NONE] = TE_ACT_NONE,                 [ACT_RELU] = TE_ACT_RELU,
        [ACT_LEAKY_RELU] = TE_ACT_LEAKY_RELU,     [ACT_CLIP] = TE_ACT_CLIP,
        [ACT_HARD_SIGMOID] = TE_ACT_HARD_SIGMOID, [ACT_HARD_SWISH] = TE_ACT_HARD_SWISH,
        [ACT_SIGMOID] = TE_ACT_SIGMOID,           [ACT_SILU] = TE_ACT_SILU,
        [ACT_GELU] = TE_ACT_GELU,                 [ACT_TANH] = TE_ACT_TANH,
    };
    *a = te_act_default(kinds[p.kind]);
    a->alpha = p.alpha;
    a->beta = p.beta;
    a->lo = p.lo;
    a->hi = p.hi;
    return true;
}

void tune_key_act(tune_task *task, const te_act *a) {
    switch (a->kind) {
    case TE_ACT_NONE: return;
    case TE_ACT_RELU: tune_key_add(task, ",act=relu"); return;
    case TE_ACT_LEAKY_RELU: tune_key_add(task, ",act=leaky(%g)", (double)a->alpha); return;
    case TE_ACT_CLIP:
        tune_key_add(task, ",act=clip(%g,%g)", (double)a->lo, (double)a->hi);
        return;
    case TE_ACT_HARD_SIGMOID:
        tune_key_add(task, ",act=hsig(%g,%g)", (double)a->alpha, (double)a->beta);
        return;
    case TE_ACT_HARD_SWISH: tune_key_add(task, ",act=hswish"); return;
    case TE_ACT_SIGMOID: tune_key_add(task, ",act=sigmoid"); return;
    case TE_ACT_SILU: tune_key_add(task, ",act=silu"); return;
    case TE_ACT_GELU: tune_key_add(task, ",act=gelu"); return;
    case TE_ACT_TANH: tune_key_add(task, ",act=tanh"); return;
    }
}

void tune_key_dims(tune_task *task, const ir_tensor *t) {
    if (t->ndim == 0) tune_key_add(task, "1");
    for (int i = 0; i < t->ndim; i++)
        tune_key_add(task, i ? "x%lld" : "%lld", (long long)t->dims[i]);
}

int tune_threads(void) { return target_cores(); }

wpk_status tune_schedule_flat(te_stage *st, te_iter *outer, int64_t nouter, te_iter *inner,
                              int64_t ninner, int64_t vec, int64_t unroll, int64_t grain,
                              bool parallel) {
    te_iter *rest = inner, *lanes = NULL, *unrolled = NULL;
    int64_t step = 1;
    if (vec > 1 && ninner > 1) {
        TRY(te_split(st, rest, vec, &rest, &lanes));
        step = vec;
    }
    if (unroll > 1 && ninner > step) {
        TRY(te_split(st, rest, unroll, &rest, &unrolled));
        step *= unroll;
    }
    /* blocks of `grain` elements: the unit of parallel work */
    int64_t per_block = grain > step ? grain / step : 1, blocks = (ninner + step - 1) / step;
    te_iter *par = rest;
    if (parallel && blocks > per_block) {
        te_iter *bi;
        TRY(te_split(st, rest, per_block, &par, &bi));
    } else if (parallel) {
        par = NULL; /* one block per row: the outer loop alone runs in parallel */
    }
    if (outer && nouter > 1 && par) TRY(te_fuse(st, outer, par, &par));
    else if (outer && nouter > 1) par = outer;
    if (parallel && par) TRY(te_parallel(st, par));
    if (unrolled) TRY(te_unroll(st, unrolled));
    if (lanes) TRY(te_vectorize(st, lanes));
    return WPK_OK;
}
