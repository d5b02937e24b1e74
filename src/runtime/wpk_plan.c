/* wpk_plan.c -- the runtime's public API (include/wpk_runtime.h): a plan file read and checked
 * (artifact.h, plan.h), made ready on the cpu backend (exec.h), its inputs bound by name. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/target_fingerprint.h"
#include "runtime/exec.h"

struct wpk_plan {
    wpk_context *ctx;       /* borrowed: must outlive the plan */
    uint8_t *file;          /* the whole file: the plan's strings and bytes point into it */
    rt_plan plan;
    rt_backend be;
    rt_exec *x;
    wpk_node_profile *profile; /* per step when profiling, else NULL */
    int ran;
};

wpk_plan_params wpk_plan_default_params(void) {
    wpk_plan_params p;
    memset(&p, 0, sizeof p);
    return p;
}

void wpk_plan_free(wpk_plan *p) {
    if (!p) return;
    rt_exec_free(p->x);
    rt_plan_free(&p->plan);
    wpk_free(p->profile);
    wpk_free(p->file);
    wpk_free(p);
}

static wpk_status make_profile(wpk_context *ctx, wpk_plan *p) {
    const rt_plan *pl = &p->plan;
    p->profile = wpk_calloc((size_t)pl->nsteps + 1, sizeof *p->profile);
    if (!p->profile) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory for a profile");
    for (int k = 0; k < pl->nsteps; k++) {
        wpk_node_profile *e = &p->profile[k];
        e->node = pl->steps[k].node;
        e->op = pl->steps[k].op;
        e->provider = pl->steps[k].runner;
        e->impl = pl->steps[k].impl;
        e->source = pl->steps[k].source;
    }
    return WPK_OK;
}

wpk_status wpk_plan_load(wpk_context *ctx, const char *path, const wpk_plan_params *params,
                         wpk_plan **out) {
    *out = NULL;
    wpk_clear_error(ctx);
    wpk_plan_params pp = params ? *params : wpk_plan_default_params();
    if (pp.threads < 0)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "threads must be >= 0, not %d", pp.threads);
    wpk_plan *p = wpk_calloc(1, sizeof *p);
    if (!p) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory loading %s", path);
    p->ctx = ctx;
    artifact_reader body;
    wpk_status st = artifact_read(ctx, path, tune_target_fingerprint(), &p->file, &body, NULL, 0);
    if (st == WPK_OK) st = rt_plan_read(ctx, path, &body, &p->plan);
    rt_cpu_backend_init(&p->be, pp.threads);
    if (st == WPK_OK) st = rt_exec_create(ctx, path, &p->plan, &p->be, pp.profile != 0, &p->x);
    if (st == WPK_OK && pp.profile) st = make_profile(ctx, p);
    if (st) {
        wpk_plan_free(p);
        return st;
    }
    *out = p;
    return WPK_OK;
}

int wpk_plan_num_inputs(const wpk_plan *p) { return p->plan.ninputs; }
int wpk_plan_num_outputs(const wpk_plan *p) { return p->plan.noutputs; }

static wpk_tensor_view view_of(const wpk_plan *p, const rt_io *io) {
    const rt_tensor_desc *d = &p->plan.tensors[io->tensor];
    wpk_tensor_view v;
    memset(&v, 0, sizeof v);
    v.name = d->name;
    v.dtype = d->dtype;
    v.ndim = d->ndim;
    for (int k = 0; k < d->ndim; k++) {
        v.dims[k] = d->dims[k];
        v.dim_names[k] = io->dim_names[k] && *io->dim_names[k] ? io->dim_names[k] : NULL;
    }
    return v;
}

wpk_tensor_view wpk_plan_input_info(const wpk_plan *p, int i) {
    return view_of(p, &p->plan.inputs[i]);
}

wpk_tensor_view wpk_plan_output_info(const wpk_plan *p, int i) {
    return view_of(p, &p->plan.outputs[i]);
}

/* "float32[2, 3, 8, 8], int64[2]": every input as compiled. */
static void inputs_text(const rt_plan *pl, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < pl->ninputs && n < cap; i++) {
        const rt_tensor_desc *d = &pl->tensors[pl->inputs[i].tensor];
        if (i) n += (size_t)snprintf(buf + n, cap - n, ", ");
        if (n < cap) rt_type_text(d->dtype, d->ndim, d->dims, buf + n, cap - n);
        n = strlen(buf);
    }
}

wpk_status wpk_plan_set_input(wpk_plan *p, const char *name, wpk_dtype dtype,
                              const int64_t *dims, int ndim, const void *data) {
    wpk_context *ctx = p->ctx;
    wpk_clear_error(ctx);
    const rt_plan *pl = &p->plan;
    int which = -1;
    for (int i = 0; i < pl->ninputs && which < 0; i++)
        if (!strcmp(pl->tensors[pl->inputs[i].tensor].name, name)) which = i;
    if (which < 0) {
        char names[1024] = "";
        for (int i = 0; i < pl->ninputs; i++) {
            size_t l = strlen(names);
            snprintf(names + l, sizeof names - l, "%s'%s'", i ? ", " : "",
                     pl->tensors[pl->inputs[i].tensor].name);
        }
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "the model has no input named '%s' (its "
                         "inputs are: %s)", name, names);
    }
    int t = pl->inputs[which].tensor;
    const rt_tensor_desc *d = &pl->tensors[t];
    char want[512], got[512];
    if (ndim < 0 || ndim > WPK_MAX_DIMS)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "input '%s': %d dims is out of range", name, ndim);
    rt_type_text(d->dtype, d->ndim, d->dims, want, sizeof want);
    rt_type_text(dtype, ndim, dims, got, sizeof got);
    if (dtype != d->dtype || ndim != d->ndim)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "input '%s' expects %s, got %s", name, want, got);
    for (int k = 0; k < ndim; k++)
        if (dims[k] != d->dims[k]) {
            char all[1024];
            inputs_text(pl, all, sizeof all);
            return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "the plan was compiled for inputs %s; "
                             "input '%s' is %s: compile the model again for these shapes", all,
                             name, got);
        }
    return rt_exec_upload(p->x, ctx, t, data, rt_tensor_bytes(d));
}

wpk_status wpk_plan_run(wpk_plan *p) {
    wpk_clear_error(p->ctx);
    p->ran = 0;
    wpk_status st = rt_exec_run(p->x, p->ctx);
    const double *ms = rt_exec_step_ms(p->x);
    for (int k = 0; p->profile && ms && k < p->plan.nsteps; k++) p->profile[k].ms = ms[k];
    p->ran = st == WPK_OK;
    return st;
}

wpk_status wpk_plan_output(wpk_plan *p, int i, wpk_tensor_view *out) {
    if (i < 0 || i >= p->plan.noutputs)
        return wpk_error(p->ctx, WPK_ERR_INVALID_ARG, "output index %d is out of range (%d "
                         "outputs)", i, p->plan.noutputs);
    if (!p->ran) return wpk_error(p->ctx, WPK_ERR_INVALID_ARG, "the plan has not run");
    *out = view_of(p, &p->plan.outputs[i]);
    /* the cpu backend's memory is the host's */
    out->data = rt_exec_data(p->x, p->plan.outputs[i].tensor);
    return WPK_OK;
}

wpk_status wpk_plan_profile(wpk_plan *p, const wpk_node_profile **out, int *n) {
    *out = NULL;
    *n = 0;
    if (!p->profile)
        return wpk_error(p->ctx, WPK_ERR_INVALID_ARG, "the plan was loaded without "
                         "params.profile: nothing is timed");
    if (!p->ran) return wpk_error(p->ctx, WPK_ERR_INVALID_ARG, "the plan has not run");
    *out = p->profile;
    *n = p->plan.nsteps;
    return WPK_OK;
}
