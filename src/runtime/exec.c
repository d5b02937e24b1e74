/* exec.c -- the executor (exec.h): allocation and preparation at load, a straight run. */
#include "runtime/exec.h"

#include <stdint.h>
#include <string.h>

#include "base/alloc.h"

struct rt_exec {
    const rt_plan *plan;
    rt_backend *be;
    void *ws, *consts;      /* device memory */
    void **data;            /* per tensor: its address */
    void **modules;         /* per module */
    int nloaded;
    rt_exec_step *steps;
    int nprepared;
    void **argv;            /* every step's arguments, one array */
    double *step_ms;
    bool consts_borrowed;   /* consts are the plan's own bytes (host memory read in place) */
};

void rt_exec_free(rt_exec *x) {
    if (!x) return;
    if (x->be->iface->forget_steps) x->be->iface->forget_steps(x->be, x->steps);
    for (int k = 0; k < x->nprepared; k++)
        if (x->steps[k].runner->release) x->steps[k].runner->release(x->steps[k].state);
    for (int m = 0; m < x->nloaded; m++) x->be->iface->unload_module(x->be, x->modules[m]);
    if (x->ws) x->be->iface->free(x->be, x->ws);
    if (x->consts && !x->consts_borrowed) x->be->iface->free(x->be, x->consts);
    wpk_free(x->data);
    wpk_free(x->modules);
    wpk_free(x->steps);
    wpk_free(x->argv);
    wpk_free(x->step_ms);
    wpk_free(x);
}

void *rt_exec_data(const rt_exec *x, int t) { return x->data[t]; }

const double *rt_exec_step_ms(const rt_exec *x) { return x->step_ms; }

wpk_status rt_exec_upload(rt_exec *x, wpk_context *ctx, int t, const void *data, size_t bytes) {
    return bytes ? x->be->iface->upload(x->be, ctx, x->data[t], data, bytes) : WPK_OK;
}

wpk_status rt_exec_download(rt_exec *x, wpk_context *ctx, int t, void *data, size_t bytes) {
    if (!bytes) return WPK_OK;
    wpk_status st = x->be->iface->download(x->be, ctx, data, x->data[t], bytes);
    return st ? st : x->be->iface->synchronize(x->be, ctx);
}

/* Device memory: workspace (zeroed, so an input never bound reads as zeros) and constants. */
static wpk_status place(wpk_context *ctx, rt_exec *x) {
    const rt_plan *p = x->plan;
    const rt_backend_i *b = x->be->iface;
    wpk_status st = b->alloc(x->be, ctx, (size_t)p->workspace + 1, &x->ws);
    /* on host memory, aligned constants are read where the plan keeps them: no second copy
       (kernels never write a constant) */
    x->consts_borrowed = b->host_visible && p->consts && (uintptr_t)p->consts % 64 == 0;
    if (x->consts_borrowed) x->consts = (void *)p->consts;
    else if (st == WPK_OK) st = b->alloc(x->be, ctx, (size_t)p->consts_len + 1, &x->consts);
    if (st == WPK_OK && p->consts_len && !x->consts_borrowed)
        st = b->upload(x->be, ctx, x->consts, p->consts, (size_t)p->consts_len);
    for (int t = 0; st == WPK_OK && t < p->ntensors; t++) {
        const rt_tensor_desc *d = &p->tensors[t];
        char *base = d->place == RT_PLACE_WORKSPACE ? x->ws
                     : d->place == RT_PLACE_CONST   ? x->consts
                                                    : NULL;
        x->data[t] = base ? base + d->offset : NULL;
    }
    return st;
}

static wpk_status zero_workspace(wpk_context *ctx, rt_exec *x) {
    /* one page of zeros at a time: the host side of the copy allocates little */
    static const char zeros[4096];
    size_t left = (size_t)x->plan->workspace + 1;
    if (x->be->iface->zero) return x->be->iface->zero(x->be, ctx, x->ws, left);
    wpk_status st = WPK_OK;
    for (size_t at = 0; st == WPK_OK && at < left; at += sizeof zeros) {
        size_t n = left - at < sizeof zeros ? left - at : sizeof zeros;
        st = x->be->iface->upload(x->be, ctx, (char *)x->ws + at, zeros, n);
    }
    return st;
}

static wpk_status prepare_steps(wpk_context *ctx, const char *what, rt_exec *x) {
    const rt_plan *p = x->plan;
    rt_step_env env = {p, x->data, x->modules, x->be->threads, x->be};
    void **argv = x->argv;
    for (int k = 0; k < p->nsteps; k++) {
        const rt_step *s = &p->steps[k];
        rt_exec_step *e = &x->steps[k];
        e->runner = rt_runner_find(s->runner);
        e->node = s->node;
        e->threads = s->threads;
        e->argv = argv;
        for (int a = 0; a < s->nargs; a++) argv[a] = s->args[a] >= 0 ? x->data[s->args[a]] : NULL;
        argv += s->nargs;
        if (!e->runner)
            return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "%s: node '%s' runs on %s, which this "
                             "wpk was built without", what, s->node, s->runner);
        wpk_status st = e->runner->prepare(e->runner, ctx, &env, k, &e->state);
        if (st) {
            wpk_error_prefix(ctx, "%s", what);
            return st;
        }
        x->nprepared = k + 1;
    }
    return WPK_OK;
}

wpk_status rt_exec_create(wpk_context *ctx, const char *what, const rt_plan *plan,
                          rt_backend *backend, bool profile, rt_exec **out) {
    *out = NULL;
    rt_exec *x = wpk_calloc(1, sizeof *x);
    if (!x) return wpk_error(ctx, WPK_ERR_NOMEM, "%s: out of memory loading the plan", what);
    x->plan = plan;
    x->be = backend;
    size_t nargs = 0;
    for (int k = 0; k < plan->nsteps; k++) nargs += (size_t)plan->steps[k].nargs;
    x->data = wpk_calloc((size_t)plan->ntensors + 1, sizeof *x->data);
    x->modules = wpk_calloc((size_t)plan->nmodules + 1, sizeof *x->modules);
    x->steps = wpk_calloc((size_t)plan->nsteps + 1, sizeof *x->steps);
    x->argv = wpk_calloc(nargs + 1, sizeof *x->argv);
    if (profile) x->step_ms = wpk_calloc((size_t)plan->nsteps + 1, sizeof *x->step_ms);
    wpk_status st = WPK_OK;
    if (!x->data || !x->modules || !x->steps || !x->argv || (profile && !x->step_ms))
        st = wpk_error(ctx, WPK_ERR_NOMEM, "%s: out of memory loading the plan", what);
    if (st == WPK_OK) st = place(ctx, x);
    if (st == WPK_OK) st = zero_workspace(ctx, x);
    for (int m = 0; st == WPK_OK && m < plan->nmodules; m++) {
        st = backend->iface->load_module(backend, ctx, what, plan->modules[m].data,
                                         plan->modules[m].len, &x->modules[m]);
        if (st == WPK_OK) x->nloaded = m + 1;
    }
    if (st == WPK_OK) st = prepare_steps(ctx, what, x);
    if (st == WPK_OK) st = backend->iface->synchronize(backend, ctx);
    if (st) {
        rt_exec_free(x);
        return st;
    }
    *out = x;
    return WPK_OK;
}

wpk_status rt_exec_run(rt_exec *x, wpk_context *ctx) {
    wpk_status st = x->be->iface->run_steps(x->be, ctx, x->steps, x->plan->nsteps, x->step_ms);
    if (st == WPK_OK) st = x->be->iface->synchronize(x->be, ctx);
    return st;
}

wpk_status rt_exec_profile(rt_exec *x, wpk_context *ctx) {
    if (x->step_ms) return WPK_OK;
    x->step_ms = wpk_calloc((size_t)x->plan->nsteps + 1, sizeof *x->step_ms);
    return x->step_ms ? WPK_OK : wpk_error(ctx, WPK_ERR_NOMEM, "out of memory for a profile");
}

wpk_status rt_exec_bind(rt_exec *x, wpk_context *ctx, int t, void *data) {
    const rt_plan *p = x->plan;
    if (!x->be->iface->host_visible)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "the %s backend cannot bind a tensor to "
                         "memory of the caller's", x->be->iface->name);
    if (p->tensors[t].place != RT_PLACE_WORKSPACE)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "tensor '%s' is not in the workspace",
                         p->tensors[t].name);
    if (!data) data = (char *)x->ws + p->tensors[t].offset;
    if (x->data[t] == data) return WPK_OK;
    /* the steps' argument arrays as prepare_steps laid them out, one after another */
    void **argv = x->argv;
    for (int k = 0; k < p->nsteps; k++) {
        const rt_step *s = &p->steps[k];
        for (int a = 0; a < s->nargs; a++)
            if (s->args[a] == t) argv[a] = data;
        argv += s->nargs;
    }
    x->data[t] = data;
    return WPK_OK;
}
