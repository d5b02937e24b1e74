/* session.c -- wpk_session: bind inputs, run the graph on a backend, hand out outputs. */
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "api/model.h"
#include "base/alloc.h"
#include "ir/eval.h"
#include "ir/print.h"

struct wpk_session {
    wpk_context *ctx;       /* borrowed: must outlive the session */
    const wpk_model *model; /* borrowed: must outlive the session */
    wpk_session_params params;
    ir_exec exec;
    bool *bound;            /* per graph input */
    bool ran;
};

wpk_session_params wpk_session_default_params(void) {
    wpk_session_params p;
    memset(&p, 0, sizeof p);
    p.backend = WPK_BACKEND_REF;
    p.threads = 0;
    p.opt_level = 2;
    return p;
}

wpk_status wpk_session_create(wpk_context *ctx, const wpk_model *model,
                              const wpk_session_params *params, wpk_session **out) {
    *out = NULL;
    wpk_clear_error(ctx);
    wpk_session_params p = params ? *params : wpk_session_default_params();
    if (p.backend != WPK_BACKEND_REF)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "backend %d is not available", (int)p.backend);
    if (p.threads < 0)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "threads must be >= 0, not %d", p.threads);
    wpk_status st = wpk_model_check_supported(ctx, model);
    if (st) return st;
    wpk_session *s = wpk_calloc(1, sizeof *s);
    if (!s) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory creating a session");
    s->ctx = ctx;
    s->model = model;
    s->params = p;
    s->bound = wpk_calloc((size_t)model->g->ninputs + 1, sizeof(bool));
    st = s->bound ? ir_exec_init(ctx, &s->exec, model->g)
                  : wpk_error(ctx, WPK_ERR_NOMEM, "out of memory creating a session");
    if (st) {
        wpk_session_free(s);
        return st;
    }
    *out = s;
    return WPK_OK;
}

void wpk_session_free(wpk_session *s) {
    if (!s) return;
    ir_exec_free(&s->exec);
    wpk_free(s->bound);
    wpk_free(s);
}

static void type_text(const ir_tensor *t, const char *const *names, char *buf, size_t size) {
    strbuf b = {0};
    ir_print_type(t, names, &b);
    snprintf(buf, size, "%s", b.s ? b.s : "?");
    sb_free(&b);
}

wpk_status wpk_session_set_input(wpk_session *s, const char *name, wpk_dtype dtype,
                                 const int64_t *dims, int ndim, const void *data) {
    const ir_graph *g = s->model->g;
    wpk_context *ctx = s->ctx;
    wpk_clear_error(ctx);
    int which = -1;
    for (int i = 0; i < g->ninputs; i++)
        if (strcmp(g->values[g->inputs[i]].name, name) == 0) which = i;
    if (which < 0) {
        char names[1024] = "";
        for (int i = 0; i < g->ninputs; i++) {
            size_t l = strlen(names);
            snprintf(names + l, sizeof names - l, "%s'%s'", i ? ", " : "",
                     g->values[g->inputs[i]].name);
        }
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "the model has no input named '%s' (its inputs "
                         "are: %s)", name, names);
    }
    const ir_value *v = &g->values[g->inputs[which]];
    ir_tensor given = {.dtype = dtype, .ndim = ndim};
    if (ndim < 0 || ndim > WPK_MAX_DIMS)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "input '%s': %d dims is out of range", name, ndim);
    for (int i = 0; i < ndim; i++) {
        given.dims[i] = dims[i];
        if (dims[i] < 0)
            return wpk_error(ctx, WPK_ERR_INVALID_ARG, "input '%s': dim %d is negative", name, i);
    }
    bool ok = dtype == v->t.dtype && ndim == v->t.ndim;
    for (int i = 0; ok && i < ndim; i++) ok = v->t.dims[i] < 0 || v->t.dims[i] == dims[i];
    if (!ok) {
        char want[256], got[256];
        type_text(&v->t, v->dim_names, want, sizeof want);
        type_text(&given, NULL, got, sizeof got);
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "input '%s' expects %s, got %s", name, want, got);
    }
    wpk_status st = ir_exec_reserve(ctx, &s->exec, g->inputs[which], dtype, ndim, dims);
    if (st) return st;
    memcpy(s->exec.vals[g->inputs[which]].data, data, ir_nbytes(&given));
    s->bound[which] = true;
    return WPK_OK;
}

wpk_status wpk_session_run(wpk_session *s) {
    const ir_graph *g = s->model->g;
    wpk_clear_error(s->ctx);
    for (int i = 0; i < g->ninputs; i++)
        if (!s->bound[i])
            return wpk_error(s->ctx, WPK_ERR_INVALID_ARG, "input '%s' is not bound",
                             g->values[g->inputs[i]].name);
    if (s->params.threads > 0) omp_set_num_threads(s->params.threads);
    s->ran = false;
    wpk_status st = ir_exec_run(s->ctx, &s->exec, g);
    if (st) {
        wpk_error_prefix(s->ctx, "%s", g->path ? g->path : "model");
        return st;
    }
    s->ran = true;
    return WPK_OK;
}

wpk_status wpk_session_output(wpk_session *s, int i, wpk_tensor_view *out) {
    const ir_graph *g = s->model->g;
    if (i < 0 || i >= g->noutputs)
        return wpk_error(s->ctx, WPK_ERR_INVALID_ARG, "output index %d is out of range (%d outputs)",
                         i, g->noutputs);
    if (!s->ran) return wpk_error(s->ctx, WPK_ERR_INVALID_ARG, "the session has not run");
    const ir_tensor *t = &s->exec.vals[g->outputs[i]];
    memset(out, 0, sizeof *out);
    out->name = g->values[g->outputs[i]].name;
    out->dtype = t->dtype;
    out->ndim = t->ndim;
    memcpy(out->dims, t->dims, sizeof(int64_t) * (size_t)t->ndim);
    out->data = t->data;
    return WPK_OK;
}
