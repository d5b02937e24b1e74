/* wpk_plan.c -- the runtime's public API (include/wpk_runtime.h): a plan file read and checked
 * (artifact.h, plan.h), made ready on the backend of its target (exec.h: the cpu, or a CUDA
 * GPU whose fingerprint it must match), its inputs bound by name. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/target_fingerprint.h"
#include "runtime/exec.h"

#define FP_CAP 4200 /* a fingerprint as artifact.c keeps one, and its NUL */

struct wpk_plan {
    wpk_context *ctx;       /* borrowed: must outlive the plan */
    uint8_t *file;          /* the whole file: the plan's strings and bytes point into it */
    rt_plan plan;
    rt_backend cpu;
    rt_backend *be;         /* &cpu, or the GPU's (rt_cuda_backend_open) */
    rt_exec *x;
    wpk_node_profile *profile; /* per step when profiling, else NULL */
    /* A device the host cannot address: inputs wait in host copies until a run uploads them
       (the caller's bytes may be gone by then), outputs are downloaded after it. One block,
       allocated at load, so a run allocates nothing. */
    char *host;
    void **in_host, **out_host;
    bool *in_set;           /* input i was set since the last run */
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
    if (p->be != &p->cpu) rt_cuda_backend_close(p->be);
    rt_plan_free(&p->plan);
    wpk_free(p->host);
    wpk_free(p->in_host);
    wpk_free(p->out_host);
    wpk_free(p->in_set);
    wpk_free(p->profile);
    wpk_free(p->file);
    wpk_free(p);
}

static wpk_status make_profile(wpk_context *ctx, wpk_plan *p) {
    const rt_plan *pl = &p->plan;
    p->profile = wpk_calloc((size_t)pl->nsteps + 1, sizeof *p->profile);
    if (!p->profile) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory for a profile");
    rt_plan_profile_entries(pl, p->profile);
    return WPK_OK;
}

/* Host copies of every input and output (see struct wpk_plan). */
static wpk_status make_host(wpk_context *ctx, wpk_plan *p) {
    const rt_plan *pl = &p->plan;
    size_t total = 1;
    for (int i = 0; i < pl->ninputs; i++)
        total += rt_tensor_bytes(&pl->tensors[pl->inputs[i].tensor]);
    for (int i = 0; i < pl->noutputs; i++)
        total += rt_tensor_bytes(&pl->tensors[pl->outputs[i].tensor]);
    p->host = wpk_malloc(total);
    p->in_host = wpk_calloc((size_t)pl->ninputs + 1, sizeof *p->in_host);
    p->out_host = wpk_calloc((size_t)pl->noutputs + 1, sizeof *p->out_host);
    p->in_set = wpk_calloc((size_t)pl->ninputs + 1, sizeof *p->in_set);
    if (!p->host || !p->in_host || !p->out_host || !p->in_set)
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory for the plan's inputs and outputs");
    char *at = p->host;
    for (int i = 0; i < pl->ninputs; i++) {
        p->in_host[i] = at;
        at += rt_tensor_bytes(&pl->tensors[pl->inputs[i].tensor]);
    }
    for (int i = 0; i < pl->noutputs; i++) {
        p->out_host[i] = at;
        at += rt_tensor_bytes(&pl->tensors[pl->outputs[i].tensor]);
    }
    return WPK_OK;
}

static wpk_status other_target(wpk_context *ctx, const char *path, const char *built,
                               const char *here) {
    return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "%s: the plan was built for '%s', this machine "
                     "is '%s'; compile the model again here", path, built, here);
}

/* The backend of the plan's target, once this machine is shown to be the one it was built
 * for (built: the file's fingerprint). */
static wpk_status open_backend(wpk_context *ctx, const char *path, const char *built,
                               int threads, wpk_plan *p) {
    if (p->plan.target == RT_TARGET_CPU) {
        if (strcmp(built, target_fingerprint()))
            return other_target(ctx, path, built, target_fingerprint());
        rt_cpu_backend_init(&p->cpu, threads);
        p->be = &p->cpu;
        return WPK_OK;
    }
    char here[FP_CAP];
    wpk_status st = rt_cuda_target(ctx, 0, here, sizeof here);
    if (st) {
        wpk_error_prefix(ctx, "%s: the plan was built for '%s', this machine is '%s' with no "
                         "GPU for it", path, built, target_fingerprint());
        return st;
    }
    if (strcmp(built, here)) return other_target(ctx, path, built, here);
    st = rt_cuda_backend_open(ctx, 0, &p->be);
    if (st == WPK_OK) st = make_host(ctx, p);
    if (st) wpk_error_prefix(ctx, "%s", path);
    return st;
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
    p->be = &p->cpu;
    byte_reader body;
    char built[FP_CAP];
    /* the plan says its target, so the fingerprint is checked once the plan is read */
    wpk_status st = artifact_read(ctx, path, NULL, &p->file, &body, built, sizeof built);
    if (st == WPK_OK) st = rt_plan_read(ctx, path, &body, &p->plan);
    if (st == WPK_OK) st = open_backend(ctx, path, built, pp.threads, p);
    if (st == WPK_OK) st = rt_exec_create(ctx, path, &p->plan, p->be, pp.profile != 0, &p->x);
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
    if (p->be->iface->host_visible)
        return rt_exec_upload(p->x, ctx, t, data, rt_tensor_bytes(d));
    memcpy(p->in_host[which], data, rt_tensor_bytes(d));
    p->in_set[which] = true;
    return WPK_OK;
}

/* A device run: the inputs set since the last one go up, the outputs come back. */
static wpk_status run_device(wpk_plan *p) {
    const rt_plan *pl = &p->plan;
    wpk_status st = WPK_OK;
    for (int i = 0; i < pl->ninputs && !st; i++) {
        int t = pl->inputs[i].tensor;
        size_t bytes = rt_tensor_bytes(&pl->tensors[t]);
        if (p->in_set[i]) st = rt_exec_upload(p->x, p->ctx, t, p->in_host[i], bytes);
        p->in_set[i] = false;
    }
    if (!st) st = rt_exec_run(p->x, p->ctx);
    for (int i = 0; i < pl->noutputs && !st; i++) {
        int t = pl->outputs[i].tensor;
        if (rt_exec_data(p->x, t))
            st = rt_exec_download(p->x, p->ctx, t, p->out_host[i],
                                  rt_tensor_bytes(&pl->tensors[t]));
    }
    return st;
}

wpk_status wpk_plan_run(wpk_plan *p) {
    wpk_clear_error(p->ctx);
    p->ran = 0;
    wpk_status st = p->be->iface->host_visible ? rt_exec_run(p->x, p->ctx) : run_device(p);
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
    /* the cpu backend's memory is the host's; a device's outputs were downloaded */
    out->data = p->be->iface->host_visible ? rt_exec_data(p->x, p->plan.outputs[i].tensor)
                                           : p->out_host[i];
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
