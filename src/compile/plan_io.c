/* plan_io.c -- a cpu_program as a runtime plan (see plan_io.h), in memory or written: the
 * tensor table, the constants blob, the modules, then one step per node. */
#define _GNU_SOURCE /* dladdr */
#include "compile/plan_io.h"

#include <assert.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "compile/program.h"
#include "kernels/step_runners.h"

#define MAX_OBJECTS 64
#define MAX_NODE_ARGS 64

static int64_t align64(int64_t n) { return (n + 63) / 64 * 64; }

static const char *object_of(cg_kernel_fn fn) {
    Dl_info info;
    void *addr;
    memcpy(&addr, &fn, sizeof addr);
    return dladdr(addr, &info) && info.dli_fname ? info.dli_fname : NULL;
}

static wpk_status read_whole(wpk_context *ctx, const char *path, rt_module *m) {
    FILE *f = fopen(path, "rb");
    if (!f) return wpk_error(ctx, WPK_ERR_IO, "kernel object '%s': %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 65536;
            uint8_t *b = wpk_realloc(buf, cap);
            if (!b) {
                wpk_free(buf);
                fclose(f);
                return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory reading '%s'", path);
            }
            buf = b;
        }
        size_t k = fread(buf + len, 1, cap - len, f);
        if (k == 0) break;
        len += k;
    }
    bool err = ferror(f);
    fclose(f);
    if (err) {
        wpk_free(buf);
        return wpk_error(ctx, WPK_ERR_IO, "kernel object '%s': read error", path);
    }
    m->data = buf;
    m->len = len;
    return WPK_OK;
}

/* The plan and the bytes it points at. */
struct cpu_plan {
    rt_plan plan;
    const char *objects[MAX_OBJECTS];
    uint8_t *blob_raw, *blob; /* blob: blob_raw 64-byte aligned, so an executor on host memory
                                 can read the constants where they are */
    int64_t blob_len;
    int ntensors, cap_tensors;
    uint8_t **payloads;     /* per step, wpk_malloc'd */
};

typedef struct cpu_plan builder;

static int add_tensor(builder *b, const char *name, wpk_dtype dtype, int64_t numel,
                      rt_place place, int64_t offset) {
    assert(b->ntensors < b->cap_tensors);
    rt_tensor_desc *d = &b->plan.tensors[b->ntensors];
    d->name = name;
    d->dtype = dtype;
    d->ndim = 1;
    d->dims[0] = numel;
    d->place = place;
    d->offset = offset;
    return b->ntensors++;
}

/* One tensor per value of g, in value order (tensor v is value v): constants in the blob,
 * activations at their workspace offsets, views of a constant on its bytes. */
static void value_tensors(builder *b, const ir_graph *g, const ir_tensor *vals,
                          const memory_plan *mem, int64_t *const_at) {
    for (int v = 0; v < g->nvalues; v++) {
        rt_tensor_desc *d = &b->plan.tensors[v];
        d->name = g->values[v].name;
        d->dtype = vals[v].dtype;
        d->ndim = vals[v].ndim;
        memcpy(d->dims, vals[v].dims, sizeof d->dims);
        int r = mem->root[v];
        if (const_at[v] >= 0) {
            d->place = RT_PLACE_CONST;
            d->offset = const_at[v];
        } else if (mem->offset[v] >= 0) {
            d->place = RT_PLACE_WORKSPACE;
            d->offset = mem->offset[v];
        } else if (r >= 0 && const_at[r] >= 0) {
            d->place = RT_PLACE_CONST;
            d->offset = const_at[r];
        }
    }
    b->ntensors = g->nvalues;
}

static wpk_status module_of(wpk_context *ctx, builder *b, const cpu_kernel *k, int *out) {
    const char *path = object_of(k->fn);
    if (!path)
        return wpk_error(ctx, WPK_ERR_INTERNAL, "kernel %s: no object file behind it", k->name);
    int o = 0;
    while (o < b->plan.nmodules && strcmp(b->objects[o], path)) o++;
    if (o == b->plan.nmodules) {
        if (o == MAX_OBJECTS)
            return wpk_error(ctx, WPK_ERR_INTERNAL, "more than %d kernel objects", MAX_OBJECTS);
        wpk_status st = read_whole(ctx, path, &b->plan.modules[o]);
        if (st) return st;
        b->objects[o] = path;
        b->plan.nmodules++;
    }
    *out = o;
    return WPK_OK;
}

/* Node k's generated kernel: its present inputs (packed ones as their packed bytes, added to
 * the blob), outputs, then scratch above the planned workspace. */
static wpk_status kernel_step(wpk_context *ctx, builder *b, const cpu_program *p,
                              const ir_graph *g, int k, int64_t scratch_base, rt_step *s,
                              int32_t *args) {
    const ir_node *n = &g->nodes[k];
    const cpu_step *cs = &p->steps[k];
    const cpu_kernel *kn = &p->kernels[cs->kernel];
    wpk_status st = module_of(ctx, b, kn, &s->module);
    if (st) return st;
    s->symbol = kn->name;
    int present[MAX_NODE_ARGS], np = 0, a = 0;
    for (int i = 0; i < n->nin && np < MAX_NODE_ARGS; i++)
        if (n->in[i] >= 0) present[np++] = n->in[i];
    for (int i = 0; i < kn->ninputs; i++, a++) {
        args[a] = present[i];
        if (i >= TUNE_MAX_ARGS || kn->pack_numel[i] <= 0) continue;
        size_t bytes = sizeof(float) * (size_t)kn->pack_numel[i];
        int64_t at = align64(b->blob_len);
        memcpy(b->blob + at, cs->argv[a], bytes);
        b->blob_len = at + (int64_t)bytes;
        args[a] = add_tensor(b, arena_strdup(&b->plan.mem, n->name), WPK_DTYPE_FLOAT32,
                             kn->pack_numel[i], RT_PLACE_CONST, at);
    }
    for (int i = 0; i < n->nout; i++)
        if (n->out[i] >= 0) args[a++] = n->out[i];
    for (int i = 0; i < kn->nscratch; i++, a++)
        args[a] = add_tensor(b, "scratch", WPK_DTYPE_UINT8, kn->scratch_bytes - kn->scratch_off[i],
                             RT_PLACE_WORKSPACE, scratch_base + kn->scratch_off[i]);
    s->nargs = a;
    return WPK_OK;
}

/* A reference or library step: the node's inputs then outputs, the node as payload. */
static wpk_status node_step(wpk_context *ctx, builder *b, const cpu_program *p, const ir_graph *g,
                            int k, rt_step *s, int32_t *args) {
    const ir_node *n = &g->nodes[k];
    const cpu_step *cs = &p->steps[k];
    int a = 0;
    for (int i = 0; i < n->nin; i++) args[a++] = n->in[i];
    for (int i = 0; i < n->nout; i++) args[a++] = n->out[i];
    s->nargs = a;
    s->module = -1;
    s->symbol = "";
    size_t len = 0;
    wpk_status st = step_payload_encode(ctx, n, cs->kind == CPU_STEP_LIB ? cs->lib_config : 0,
                                        &b->payloads[k], &len);
    s->payload = b->payloads[k];
    s->payload_len = len;
    return st;
}

void cpu_plan_free(cpu_plan *b) {
    if (!b) return;
    for (int m = 0; m < b->plan.nmodules; m++) wpk_free((void *)b->plan.modules[m].data);
    for (int k = 0; b->payloads && k < b->plan.nsteps; k++) wpk_free(b->payloads[k]);
    wpk_free(b->payloads);
    wpk_free(b->blob_raw);
    rt_plan_free(&b->plan);
    wpk_free(b);
}

const rt_plan *cpu_plan_get(const cpu_plan *b) { return &b->plan; }

wpk_status cpu_program_plan(wpk_context *ctx, const cpu_program *p, const ir_graph *g,
                            const ir_tensor *vals, const memory_plan *mem, const ir_graph *named,
                            const plan_meta *meta, cpu_plan **out) {
    *out = NULL;
    builder *b = wpk_calloc(1, sizeof *b);
    if (!b) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory building the plan");
    rt_plan *pl = &b->plan;
    const plan_meta none = {0, 0, "", ""};
    if (!meta) meta = &none;
    pl->opt_level = meta->opt_level;
    pl->batch = meta->batch;
    pl->provider = meta->provider;
    pl->records = meta->records;
    pl->threads = p->threads;
    /* sizes first: the constants some step reads as they are (a weight a generated kernel
       reads only in its packed form stays out), extra tensors (packed weights, scratch), the
       blob (packed weights first, in step order, then the constants), the arguments */
    int64_t *const_at = wpk_calloc((size_t)g->nvalues + 1, sizeof *const_at);
    bool *read = wpk_calloc((size_t)g->nvalues + 1, sizeof *read);
    int extra = 0;
    size_t nargs = 0;
    int64_t blob = 0;
    for (int k = 0; read && k < g->nnodes; k++) {
        const ir_node *n = &g->nodes[k];
        const cpu_step *cs = &p->steps[k];
        nargs += (size_t)(n->nin + n->nout);
        const cpu_kernel *kn = cs->kind == CPU_STEP_KERNEL ? &p->kernels[cs->kernel] : NULL;
        for (int i = 0, present = 0; i < n->nin; i++) {
            if (n->in[i] < 0) continue;
            bool packed = kn && present < TUNE_MAX_ARGS && kn->pack_numel[present] > 0;
            read[n->in[i]] = read[n->in[i]] || !packed;
            present++;
        }
        if (!kn) continue;
        extra += kn->nscratch;
        nargs += (size_t)kn->nscratch;
        for (int i = 0; i < kn->ninputs && i < TUNE_MAX_ARGS; i++)
            if (kn->pack_numel[i] > 0) {
                extra++;
                blob = align64(blob) + (int64_t)sizeof(float) * kn->pack_numel[i];
            }
    }
    for (int i = 0; read && i < g->noutputs; i++) read[g->outputs[i]] = true;
    for (int v = 0; read && v < g->nvalues; v++)
        if (read[v] && mem->root[v] >= 0) read[mem->root[v]] = true;
    for (int v = 0; const_at && read && v < g->nvalues; v++) {
        const_at[v] = -1;
        if (!read[v] || !g->values[v].is_const || !g->values[v].t.data) continue;
        const_at[v] = align64(blob);
        blob = const_at[v] + (int64_t)ir_nbytes(&vals[v]);
    }
    b->cap_tensors = g->nvalues + extra;
    pl->tensors = arena_alloc(&pl->mem, sizeof *pl->tensors * (size_t)(b->cap_tensors + 1));
    pl->modules = arena_alloc(&pl->mem, sizeof *pl->modules * MAX_OBJECTS);
    pl->steps = arena_alloc(&pl->mem, sizeof *pl->steps * (size_t)(g->nnodes + 1));
    pl->inputs = arena_alloc(&pl->mem, sizeof *pl->inputs * (size_t)(g->ninputs + 1));
    pl->outputs = arena_alloc(&pl->mem, sizeof *pl->outputs * (size_t)(g->noutputs + 1));
    int32_t *args = arena_alloc(&pl->mem, sizeof *args * (nargs + 1));
    b->blob_raw = wpk_calloc((size_t)blob + 64, 1);
    b->blob = b->blob_raw ? b->blob_raw + (64 - (uintptr_t)b->blob_raw % 64) % 64 : NULL;
    b->payloads = wpk_calloc((size_t)g->nnodes + 1, sizeof *b->payloads);
    wpk_status st = WPK_OK;
    if (!const_at || !read || !pl->tensors || !pl->modules || !pl->steps || !pl->inputs ||
        !pl->outputs || !args || !b->blob || !b->payloads)
        st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory building the plan");
    if (st == WPK_OK) {
        for (int v = 0; v < g->nvalues; v++)
            if (const_at[v] >= 0)
                memcpy(b->blob + const_at[v], g->values[v].t.data, ir_nbytes(&vals[v]));
        value_tensors(b, g, vals, mem, const_at);
    }
    int64_t scratch_base = align64((int64_t)mem->workspace);
    pl->workspace = scratch_base + p->scratch_bytes;
    pl->nsteps = g->nnodes;
    for (int k = 0; st == WPK_OK && k < g->nnodes; k++) {
        rt_step *s = &pl->steps[k];
        const char *impl, *source;
        cpu_program_node_info(p, k, &s->runner, &impl, &source);
        s->impl = impl;
        s->source = source;
        s->node = g->nodes[k].name;
        s->op = g->nodes[k].op_type;
        s->args = args;
        s->payload = NULL;
        int64_t team = ir_attr_int(&g->nodes[k], IR_ATTR_THREADS, 0);
        s->threads = team < 0 ? 0 : team > 4096 ? 4096 : (int)team;
        if (p->steps[k].kind == CPU_STEP_KERNEL)
            st = kernel_step(ctx, b, p, g, k, scratch_base, s, args);
        else
            st = node_step(ctx, b, p, g, k, s, args);
        args += s->nargs;
    }
    /* packed weights went from offset 0 (b->blob_len), below the constants */
    assert(st != WPK_OK || b->blob_len <= blob);
    pl->consts = b->blob;
    pl->consts_len = blob;
    pl->ntensors = b->ntensors;
    pl->ninputs = g->ninputs;
    pl->noutputs = g->noutputs;
    for (int i = 0; st == WPK_OK && i < g->ninputs; i++) {
        pl->inputs[i].tensor = g->inputs[i];
        const ir_value *nv = named ? &named->values[named->inputs[i]] : NULL;
        for (int d = 0; d < vals[g->inputs[i]].ndim; d++)
            pl->inputs[i].dim_names[d] = nv && nv->dim_names[d] ? nv->dim_names[d] : "";
    }
    for (int i = 0; st == WPK_OK && i < g->noutputs; i++) pl->outputs[i].tensor = g->outputs[i];
    wpk_free(const_at);
    wpk_free(read);
    if (st) {
        cpu_plan_free(b);
        return st;
    }
    *out = b;
    return WPK_OK;
}

wpk_status cpu_program_save(wpk_context *ctx, const cpu_program *p, const ir_graph *g,
                            const ir_tensor *vals, const memory_plan *mem, const ir_graph *named,
                            const plan_meta *meta, byte_writer *w) {
    cpu_plan *b = NULL;
    wpk_status st = cpu_program_plan(ctx, p, g, vals, mem, named, meta, &b);
    if (st == WPK_OK) st = rt_plan_write(ctx, &b->plan, w);
    cpu_plan_free(b);
    return st;
}
