/* plan.c -- the compiled plan's bytes (see plan.h). Layout: its target, how it was made, the
 * workspace size, the constants blob, the modules, the tensor table, inputs, outputs, then the
 * steps. */
#include "runtime/plan.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

/* far beyond any plan, small enough that sizes computed from them cannot overflow */
#define MAX_BYTES ((int64_t)1 << 40)
#define MAX_ITEMS (1u << 24)
#define MAX_MODULES 1024
#define MAX_ARGS 4096
#define MAX_STEP_THREADS 4096u

void rt_plan_profile_entries(const rt_plan *p, wpk_node_profile *out) {
    for (int k = 0; k < p->nsteps; k++) {
        out[k].node = p->steps[k].node;
        out[k].op = p->steps[k].op;
        out[k].provider = p->steps[k].runner;
        out[k].impl = p->steps[k].impl;
        out[k].source = p->steps[k].source;
    }
}

size_t rt_tensor_bytes(const rt_tensor_desc *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->dims[d];
    return (size_t)n * wpk_dtype_size(t->dtype);
}

void rt_type_text(wpk_dtype dtype, int ndim, const int64_t *dims, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "%s[", wpk_dtype_name(dtype));
    for (int d = 0; d < ndim && n >= 0 && (size_t)n < cap; d++)
        n += snprintf(buf + n, cap - (size_t)n, "%s%lld", d ? ", " : "", (long long)dims[d]);
    if (n >= 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, "]");
}

wpk_status rt_plan_write(wpk_context *ctx, const rt_plan *p, byte_writer *w) {
    bw_u32(w, (uint32_t)p->target);
    bw_u32(w, (uint32_t)p->opt_level);
    bw_u32(w, (uint32_t)p->batch);
    bw_str(w, p->provider);
    bw_str(w, p->records);
    bw_u32(w, (uint32_t)p->threads);
    bw_i64(w, p->workspace);
    bw_bytes(w, p->consts, (size_t)p->consts_len);
    bw_u32(w, (uint32_t)p->nmodules);
    for (int m = 0; m < p->nmodules; m++) bw_bytes(w, p->modules[m].data, p->modules[m].len);
    bw_u32(w, (uint32_t)p->ntensors);
    for (int t = 0; t < p->ntensors; t++) {
        const rt_tensor_desc *d = &p->tensors[t];
        bw_str(w, d->name);
        bw_u32(w, (uint32_t)d->dtype);
        bw_u32(w, (uint32_t)d->ndim);
        for (int k = 0; k < d->ndim; k++) bw_i64(w, d->dims[k]);
        bw_u32(w, (uint32_t)d->place);
        bw_i64(w, d->offset);
    }
    bw_u32(w, (uint32_t)p->ninputs);
    for (int i = 0; i < p->ninputs; i++) {
        bw_u32(w, (uint32_t)p->inputs[i].tensor);
        int nd = p->tensors[p->inputs[i].tensor].ndim;
        for (int d = 0; d < nd; d++) bw_str(w, p->inputs[i].dim_names[d]);
    }
    bw_u32(w, (uint32_t)p->noutputs);
    for (int i = 0; i < p->noutputs; i++) bw_u32(w, (uint32_t)p->outputs[i].tensor);
    bw_u32(w, (uint32_t)p->nsteps);
    for (int k = 0; k < p->nsteps; k++) {
        const rt_step *s = &p->steps[k];
        bw_str(w, s->runner);
        bw_u32(w, (uint32_t)(s->module + 1));
        bw_str(w, s->symbol);
        bw_u32(w, (uint32_t)s->nargs);
        for (int a = 0; a < s->nargs; a++) bw_u32(w, (uint32_t)(s->args[a] + 1));
        bw_bytes(w, s->payload, s->payload_len);
        bw_str(w, s->node);
        bw_str(w, s->op);
        bw_str(w, s->impl);
        bw_str(w, s->source);
    }
    /* per-step team sizes follow the steps only where a step has one, so a plan without
       them reads the same as before they existed */
    bool threads = false;
    for (int k = 0; k < p->nsteps; k++) threads = threads || p->steps[k].threads > 0;
    if (threads)
        for (int k = 0; k < p->nsteps; k++) bw_u32(w, (uint32_t)p->steps[k].threads);
    return w->oom ? wpk_error(ctx, WPK_ERR_NOMEM, "out of memory writing the plan") : WPK_OK;
}

static wpk_status damaged(wpk_context *ctx, const char *what, const char *why) {
    return wpk_error(ctx, WPK_ERR_PARSE, "%s: the plan is damaged: %s", what, why);
}

static void *alloc_items(rt_plan *p, size_t n, size_t each) {
    return arena_alloc(&p->mem, (n ? n : 1) * each);
}

static bool read_tensor(byte_reader *r, const rt_plan *p, rt_tensor_desc *d) {
    d->name = br_str(r);
    d->dtype = (wpk_dtype)br_u32(r);
    uint32_t nd = br_u32(r);
    if (r->bad || nd > WPK_MAX_DIMS) return false;
    d->ndim = (int)nd;
    int64_t numel = 1;
    bool sized = true;
    for (int k = 0; k < d->ndim; k++) {
        d->dims[k] = br_i64(r);
        sized = sized && d->dims[k] >= 0 && d->dims[k] <= MAX_BYTES;
        if (sized) numel *= d->dims[k];
        sized = sized && numel <= MAX_BYTES;
    }
    uint32_t place = br_u32(r);
    d->place = (rt_place)place;
    d->offset = br_i64(r);
    if (r->bad || place > RT_PLACE_CONST) return false;
    /* a tensor with no bytes may be of no known type (a value nothing computes) */
    if (d->place == RT_PLACE_NONE) return true;
    if (!sized || wpk_dtype_size(d->dtype) == 0) return false;
    int64_t bytes = (int64_t)rt_tensor_bytes(d);
    if (d->place == RT_PLACE_WORKSPACE)
        return d->offset >= 0 && d->offset <= p->workspace - bytes;
    return d->offset >= 0 && d->offset % 64 == 0 && d->offset <= p->consts_len - bytes;
}

wpk_status rt_plan_read(wpk_context *ctx, const char *what, byte_reader *r, rt_plan *p) {
    memset(p, 0, sizeof *p);
    uint32_t target = br_u32(r);
    p->target = (rt_target)target;
    p->opt_level = (int)br_u32(r);
    p->batch = (int)br_u32(r);
    p->provider = br_str(r);
    p->records = br_str(r);
    p->threads = (int)br_u32(r);
    p->workspace = br_i64(r);
    size_t clen = 0;
    p->consts = br_bytes(r, &clen);
    p->consts_len = (int64_t)clen;
    /* the format version fixes the set of targets: another value is damage */
    if (r->bad || target > RT_TARGET_CUDA || p->workspace < 0 || p->workspace > MAX_BYTES)
        return damaged(ctx, what, "its header");
    p->nmodules = (int)br_count(r, MAX_MODULES, 8);
    p->modules = alloc_items(p, (size_t)p->nmodules, sizeof *p->modules);
    if (!p->modules) return wpk_error(ctx, WPK_ERR_NOMEM, "%s: out of memory", what);
    for (int m = 0; m < p->nmodules; m++) p->modules[m].data = br_bytes(r, &p->modules[m].len);
    p->ntensors = (int)br_count(r, MAX_ITEMS, 24);
    if (r->bad) return damaged(ctx, what, "its modules");
    p->tensors = alloc_items(p, (size_t)p->ntensors, sizeof *p->tensors);
    if (!p->tensors) return wpk_error(ctx, WPK_ERR_NOMEM, "%s: out of memory", what);
    for (int t = 0; t < p->ntensors; t++)
        if (!read_tensor(r, p, &p->tensors[t])) return damaged(ctx, what, "its tensor table");
    p->ninputs = (int)br_count(r, MAX_ITEMS, 4);
    p->inputs = alloc_items(p, (size_t)p->ninputs, sizeof *p->inputs);
    if (!p->inputs) return wpk_error(ctx, WPK_ERR_NOMEM, "%s: out of memory", what);
    for (int i = 0; i < p->ninputs; i++) {
        uint32_t t = br_u32(r);
        if (r->bad || t >= (uint32_t)p->ntensors || p->tensors[t].place != RT_PLACE_WORKSPACE)
            return damaged(ctx, what, "its inputs");
        p->inputs[i].tensor = (int)t;
        for (int d = 0; d < p->tensors[t].ndim; d++) p->inputs[i].dim_names[d] = br_str(r);
    }
    p->noutputs = (int)br_count(r, MAX_ITEMS, 4);
    p->outputs = alloc_items(p, (size_t)p->noutputs, sizeof *p->outputs);
    if (!p->outputs) return wpk_error(ctx, WPK_ERR_NOMEM, "%s: out of memory", what);
    for (int i = 0; i < p->noutputs; i++) {
        uint32_t t = br_u32(r);
        if (r->bad || t >= (uint32_t)p->ntensors) return damaged(ctx, what, "its outputs");
        p->outputs[i].tensor = (int)t;
    }
    p->nsteps = (int)br_count(r, MAX_ITEMS, 40);
    p->steps = alloc_items(p, (size_t)p->nsteps, sizeof *p->steps);
    if (!p->steps) return wpk_error(ctx, WPK_ERR_NOMEM, "%s: out of memory", what);
    for (int k = 0; k < p->nsteps; k++) {
        rt_step *s = &p->steps[k];
        s->runner = br_str(r);
        uint32_t m = br_u32(r);
        s->module = (int)m - 1;
        s->symbol = br_str(r);
        s->nargs = (int)br_count(r, MAX_ARGS, 4);
        if (r->bad || m > (uint32_t)p->nmodules) return damaged(ctx, what, "its steps");
        int32_t *args = alloc_items(p, (size_t)s->nargs, sizeof *args);
        if (!args) return wpk_error(ctx, WPK_ERR_NOMEM, "%s: out of memory", what);
        for (int a = 0; a < s->nargs; a++) {
            uint32_t t = br_u32(r);
            if (t > (uint32_t)p->ntensors) return damaged(ctx, what, "a step's arguments");
            args[a] = (int32_t)t - 1;
        }
        s->args = args;
        s->payload = br_bytes(r, &s->payload_len);
        s->node = br_str(r);
        s->op = br_str(r);
        s->impl = br_str(r);
        s->source = br_str(r);
        if (r->bad) return damaged(ctx, what, "its steps");
    }
    if (r->p != r->end && p->nsteps > 0) {
        for (int k = 0; k < p->nsteps; k++) {
            uint32_t t = br_u32(r);
            if (r->bad || t > MAX_STEP_THREADS) return damaged(ctx, what, "a step's threads");
            p->steps[k].threads = (int)t;
        }
    }
    if (r->p != r->end) return damaged(ctx, what, "bytes after its last step");
    return WPK_OK;
}

void rt_plan_free(rt_plan *p) {
    arena_free(&p->mem);
    memset(p, 0, sizeof *p);
}
