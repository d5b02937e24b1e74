/* program_cuda.c -- a static plan turned into a CUDA program description (program_cuda.h):
 * per node its CUDA template's kernel (built, lowered, emitted, NVRTC-compiled; shared between
 * nodes of one workload and config), its arguments placed at the memory plan's offsets or in
 * the weights blob, views free or copied. */
#include "compile/cuda_program.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/strbuf.h"
#include "ir/ops.h"
#include "loop/lower.h"
#include "kernels/templates_cuda.h"

#define WEIGHT_ALIGN 256
#define MAX_NODE_ARGS (TUNE_MAX_ARGS * 2)

tune_cuda_program_options tune_cuda_program_default_options(void) {
    return (tune_cuda_program_options){.sm = 90};
}

void tune_cuda_program_free(tune_cuda_program *p) {
    if (!p) return;
    for (int i = 0; i < p->nimages; i++) {
        cg_cuda_image_free(&p->compiled[i]);
        wpk_free(p->sources[i]);
    }
    wpk_free(p->images);
    wpk_free(p->compiled);
    wpk_free(p->sources);
    wpk_free(p->launch);
    wpk_free(p->keys);
    wpk_free(p->names);
    wpk_free(p->steps);
    wpk_free(p->weights);
    wpk_free(p->inputs);
    wpk_free(p->outputs);
    memset(p, 0, sizeof *p);
}

/* Ops whose output is their input relabelled (the memory planner's views). */
static bool is_view(const ir_node *n) {
    return ir_op_get(n->op)->ref == op_copy_ref || n->op == IR_OP_DROPOUT;
}

typedef struct builder {
    wpk_context *ctx;
    const ir_graph *g;
    const memory_plan *mem;
    const tune_cuda_program_options *opt;
    tune_cuda_program *p;
    int64_t *woff;            /* per value: its offset in the weights, -1 before it is placed */
    size_t wcap;
} builder;

/* Where value v lives: the workspace, or the weights (a constant, appended on first use). */
static wpk_status place(builder *b, int v, const char *node, rt_cuda_ref *out) {
    const memory_plan *mem = b->mem;
    if (mem->offset[v] >= 0) {
        *out = (rt_cuda_ref){RT_CUDA_WORKSPACE, (uint64_t)mem->offset[v]};
        return WPK_OK;
    }
    const ir_value *val = &b->g->values[v];
    if (!val->t.data)
        return wpk_error(b->ctx, WPK_ERR_INTERNAL, "CUDA backend: node '%s' reads '%s', which has "
                         "neither a planned buffer nor constant data", node, val->name);
    if (b->woff[v] < 0) {
        size_t bytes = ir_nbytes(&val->t);
        size_t at = (b->p->weights_bytes + WEIGHT_ALIGN - 1) / WEIGHT_ALIGN * WEIGHT_ALIGN;
        if (at + bytes > b->wcap) {
            size_t cap = (at + bytes) * 2 + 4096;
            unsigned char *w = wpk_realloc(b->p->weights, cap);
            if (!w) return wpk_error(b->ctx, WPK_ERR_NOMEM, "out of memory placing the weights");
            memset(w + b->wcap, 0, cap - b->wcap);
            b->p->weights = w, b->wcap = cap;
        }
        memcpy(b->p->weights + at, val->t.data, bytes);
        b->p->weights_bytes = at + bytes;
        b->woff[v] = (int64_t)at;
    }
    *out = (rt_cuda_ref){RT_CUDA_WEIGHTS, (uint64_t)b->woff[v]};
    return WPK_OK;
}

/* The image for task t at config cfg: an existing one of the same key, or a new one. */
static wpk_status kernel_of(builder *b, const tune_task *t, const tune_space *s,
                            const tune_config *cfg, int *ninputs, int *image) {
    tune_cuda_program *p = b->p;
    strbuf cs = {0};
    tune_config_print(s, cfg, &cs);
    char key[600];
    snprintf(key, sizeof key, "%s|%s", t->key, cs.s ? cs.s : "");
    sb_free(&cs);
    te_ctx c;
    te_ctx_init(&c, b->ctx);
    tune_build tb;
    wpk_status st = t->tmpl->build(t->tmpl, &c, t, s, cfg, &tb);
    if (st) {
        wpk_error_prefix(b->ctx, "CUDA backend: node '%s'", t->node->name);
        te_ctx_free(&c);
        return st;
    }
    *ninputs = tb.ninputs;
    for (int i = 0; i < p->nimages; i++)
        if (!strcmp(p->keys[i], key)) {
            *image = i;
            te_ctx_free(&c);
            return WPK_OK;
        }
    for (int i = 0; i < TUNE_MAX_ARGS; i++)
        if (tb.prepack[i]) {
            te_ctx_free(&c);
            return wpk_error(b->ctx, WPK_ERR_INTERNAL, "CUDA backend: template %s pre-packs input "
                             "%d of node '%s'", t->tmpl->name, i, t->node->name);
        }
    const int k = p->nimages;
    snprintf(p->names[k], sizeof p->names[k], "wpk_cuda_k%d", k);
    loop_func *f = NULL;
    st = loop_lower(&c, tb.schedule, p->names[k], tb.args, tb.nargs, &f);
    strbuf src = {0};
    if (!st) st = cg_cuda_emit(b->ctx, f, NULL, &src, &p->launch[k]);
    te_ctx_free(&c);
    if (st) {
        sb_free(&src);
        wpk_error_prefix(b->ctx, "CUDA backend: node '%s' (%s)", t->node->name, key);
        return st;
    }
    cg_cuda_compile_options co = cg_cuda_default_compile_options();
    if (b->opt->sm) co.sm = b->opt->sm;
    co.cubin = b->opt->cubin;
    st = cg_cuda_compile(b->ctx, src.s, &co, &p->compiled[k]);
    if (st) {
        sb_free(&src);
        wpk_error_prefix(b->ctx, "CUDA backend: node '%s'", t->node->name);
        return st;
    }
    p->sources[k] = sb_take(&src);
    snprintf(p->keys[k], sizeof p->keys[k], "%s", key);
    const cg_cuda_launch *L = &p->launch[k];
    rt_cuda_image *im = &p->images[k];
    im->data = p->compiled[k].data;
    im->size = p->compiled[k].size;
    im->name = p->names[k];
    memcpy(im->dims.grid, L->grid, sizeof L->grid);
    memcpy(im->dims.block, L->block, sizeof L->block);
    im->dims.shared_bytes = L->shared_bytes;
    p->nimages++;
    *image = k;
    return WPK_OK;
}

/* The node's step: a kernel over its present inputs (the first ninputs) and outputs. */
static wpk_status kernel_step(builder *b, int k) {
    const ir_graph *g = b->g;
    const ir_node *n = &g->nodes[k];
    ir_tensor *in[MAX_NODE_ARGS] = {0}, *out[MAX_NODE_ARGS] = {0};
    for (int i = 0; i < n->nin && i < MAX_NODE_ARGS; i++)
        in[i] = n->in[i] >= 0 ? &g->values[n->in[i]].t : NULL;
    for (int i = 0; i < n->nout && i < MAX_NODE_ARGS; i++)
        out[i] = n->out[i] >= 0 ? &g->values[n->out[i]].t : NULL;
    const kernel_provider *t = kernel_provider_cuda_for(n, in, out);
    tune_task task;
    tune_task_init(&task, t, n, in, out);
    tune_space s;
    t->space(t, &task, &s);
    tune_config cfg;
    if (!b->opt->choose || !b->opt->choose(b->opt->choose_user, &task, &s, &cfg))
        t->default_config(t, &task, &s, &cfg);
    int ninputs = 0, image = -1;
    wpk_status st = kernel_of(b, &task, &s, &cfg, &ninputs, &image);
    if (st) return st;
    rt_cuda_step *step = &b->p->steps[b->p->nsteps];
    memset(step, 0, sizeof *step);
    step->node = n->name;
    step->kernel = image;
    for (int i = 0; i < n->nin && step->nargs < ninputs; i++)
        if (n->in[i] >= 0 && (st = place(b, n->in[i], n->name, &step->args[step->nargs++])))
            return st;
    if (step->nargs != ninputs)
        return wpk_error(b->ctx, WPK_ERR_INTERNAL, "CUDA backend: node '%s': its kernel takes %d "
                         "inputs, the node has %d", n->name, ninputs, step->nargs);
    for (int i = 0; i < n->nout; i++) {
        if (n->out[i] < 0) continue;
        if (step->nargs == RT_CUDA_STEP_ARGS)
            return wpk_error(b->ctx, WPK_ERR_UNSUPPORTED, "CUDA backend: node '%s' has more "
                             "than %d arguments", n->name, RT_CUDA_STEP_ARGS);
        if (b->mem->offset[n->out[i]] < 0)
            return wpk_error(b->ctx, WPK_ERR_INTERNAL, "CUDA backend: output '%s' of node '%s' "
                             "has no planned buffer", g->values[n->out[i]].name, n->name);
        if ((st = place(b, n->out[i], n->name, &step->args[step->nargs++]))) return st;
    }
    b->p->nsteps++;
    b->p->nkernel_nodes++;
    return WPK_OK;
}

/* A view: nothing where it shares its input's buffer, else a device copy. */
static wpk_status view_step(builder *b, int k) {
    const ir_node *n = &b->g->nodes[k];
    int x = n->in[0], y = n->out[0];
    const memory_plan *mem = b->mem;
    if (y < 0 || mem->offset[y] < 0 || mem->offset[y] == mem->offset[x]) {
        b->p->nview_nodes++;
        return WPK_OK;
    }
    rt_cuda_step *step = &b->p->steps[b->p->nsteps];
    memset(step, 0, sizeof *step);
    step->node = n->name;
    step->kernel = -1;
    wpk_status st = place(b, x, n->name, &step->copy_src);
    if (!st) st = place(b, y, n->name, &step->copy_dst);
    if (st) return st;
    step->copy_bytes = mem->bytes[y];
    b->p->nsteps++;
    b->p->ncopy_steps++;
    return WPK_OK;
}

/* A Split whose outputs are contiguous ranges of its input (every dimension before the axis is
 * 1, as in ShuffleNet's channel split at batch 1): a device copy per output, no kernel. */
static bool contiguous_split(const ir_graph *g, const ir_node *n) {
    if (n->op != IR_OP_SPLIT || n->nin < 1 || n->in[0] < 0) return false;
    const ir_tensor *x = &g->values[n->in[0]].t;
    int64_t axis = ir_attr_int(n, "axis", 0);
    if (axis < 0) axis += x->ndim;
    if (axis < 0 || axis >= x->ndim) return false;
    for (int d = 0; d < axis; d++)
        if (x->dims[d] != 1) return false;
    size_t bytes = 0;
    for (int i = 0; i < n->nout; i++) {
        if (n->out[i] < 0 || g->values[n->out[i]].t.dtype != x->dtype) return false;
        bytes += ir_nbytes(&g->values[n->out[i]].t);
    }
    return bytes == ir_nbytes(x);
}

static wpk_status split_step(builder *b, int k) {
    const ir_node *n = &b->g->nodes[k];
    size_t at = 0;
    for (int i = 0; i < n->nout; i++) {
        rt_cuda_step *step = &b->p->steps[b->p->nsteps];
        memset(step, 0, sizeof *step);
        step->node = n->name;
        step->kernel = -1;
        wpk_status st = place(b, n->in[0], n->name, &step->copy_src);
        if (!st) st = place(b, n->out[i], n->name, &step->copy_dst);
        if (st) return st;
        step->copy_src.offset += at;
        step->copy_bytes = ir_nbytes(&b->g->values[n->out[i]].t);
        at += step->copy_bytes;
        b->p->nsteps++;
        b->p->ncopy_steps++;
    }
    return WPK_OK;
}

static bool planned_io(const memory_plan *mem, int v) { return v >= 0 && mem->offset[v] >= 0; }

wpk_status tune_cuda_program_build(wpk_context *ctx, const ir_graph *g, const memory_plan *mem,
                                   const tune_cuda_program_options *opt, tune_cuda_program *out) {
    memset(out, 0, sizeof *out);
    tune_cuda_program_options def = tune_cuda_program_default_options();
    if (!opt) opt = &def;
    if (!g || !mem || mem->nvalues != g->nvalues)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "CUDA backend: no graph or a memory plan of "
                         "another graph");
    /* every node that computes needs a CUDA template: name all that have none at once */
    strbuf missing = {0};
    int nmissing = 0;
    for (int k = 0; k < g->nnodes; k++) {
        const ir_node *n = &g->nodes[k];
        if (n->dead || (is_view(n) && n->nin >= 1 && n->in[0] >= 0) || contiguous_split(g, n))
            continue;
        ir_tensor *in[MAX_NODE_ARGS] = {0}, *o[MAX_NODE_ARGS] = {0};
        bool fits = n->nin <= MAX_NODE_ARGS && n->nout <= MAX_NODE_ARGS;
        for (int i = 0; fits && i < n->nin; i++)
            in[i] = n->in[i] >= 0 ? &g->values[n->in[i]].t : NULL;
        for (int i = 0; fits && i < n->nout; i++)
            o[i] = n->out[i] >= 0 ? &g->values[n->out[i]].t : NULL;
        if (fits && kernel_provider_cuda_for(n, in, o)) continue;
        sb_printf(&missing, "%s'%s' (%s)", nmissing ? ", " : "", n->name, n->op_type);
        nmissing++;
    }
    if (nmissing) {
        wpk_status st = wpk_error(ctx, WPK_ERR_UNSUPPORTED, "CUDA backend: no CUDA kernel for %d "
                                  "node%s: %s", nmissing, nmissing > 1 ? "s" : "",
                                  missing.s ? missing.s : "");
        sb_free(&missing);
        return st;
    }
    sb_free(&missing);
    wpk_status st = cg_cuda_nvrtc_available(ctx);
    if (st) return st;
    tune_cuda_program *p = out;
    const size_t nn = g->nnodes > 0 ? (size_t)g->nnodes : 1;
    p->images = wpk_calloc(nn, sizeof *p->images);
    p->compiled = wpk_calloc(nn, sizeof *p->compiled);
    p->sources = wpk_calloc(nn, sizeof *p->sources);
    p->launch = wpk_calloc(nn, sizeof *p->launch);
    p->keys = wpk_calloc(nn, sizeof *p->keys);
    p->names = wpk_calloc(nn, sizeof *p->names);
    size_t nsteps = nn; /* a step per node, a contiguous Split's one per output */
    for (int k = 0; k < g->nnodes; k++)
        if (!g->nodes[k].dead && contiguous_split(g, &g->nodes[k]))
            nsteps += (size_t)g->nodes[k].nout - 1;
    p->steps = wpk_calloc(nsteps, sizeof *p->steps);
    p->inputs = wpk_calloc(g->ninputs ? (size_t)g->ninputs : 1, sizeof *p->inputs);
    p->outputs = wpk_calloc(g->noutputs ? (size_t)g->noutputs : 1, sizeof *p->outputs);
    builder b = {ctx, g, mem, opt, p, wpk_calloc((size_t)g->nvalues + 1, sizeof(int64_t)), 0};
    if (!p->images || !p->compiled || !p->sources || !p->launch || !p->keys || !p->names ||
        !p->steps ||
        !p->inputs || !p->outputs || !b.woff) {
        wpk_free(b.woff);
        tune_cuda_program_free(p);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory building a CUDA program");
    }
    for (int v = 0; v < g->nvalues; v++) b.woff[v] = -1;
    for (int k = 0; k < g->nnodes && !st; k++) {
        const ir_node *n = &g->nodes[k];
        if (n->dead) continue;
        st = is_view(n) && n->nin >= 1 && n->in[0] >= 0 ? view_step(&b, k)
             : contiguous_split(g, n)                    ? split_step(&b, k)
                                                         : kernel_step(&b, k);
    }
    for (int i = 0; i < g->ninputs && !st; i++) {
        int v = g->inputs[i];
        if (!planned_io(mem, v))
            st = wpk_error(ctx, WPK_ERR_INTERNAL, "CUDA backend: input '%s' has no planned buffer",
                           g->values[v].name);
        else
            p->inputs[i] = (rt_cuda_io){{RT_CUDA_WORKSPACE, (uint64_t)mem->offset[v]},
                                        mem->bytes[v]};
    }
    for (int i = 0; i < g->noutputs && !st; i++) {
        int v = g->outputs[i];
        if (!planned_io(mem, v))
            st = wpk_error(ctx, WPK_ERR_UNSUPPORTED, "CUDA backend: output '%s' is a constant "
                           "(no kernel computes it)", g->values[v].name);
        else
            p->outputs[i] = (rt_cuda_io){{RT_CUDA_WORKSPACE, (uint64_t)mem->offset[v]},
                                         mem->bytes[v]};
    }
    wpk_free(b.woff);
    if (st) {
        tune_cuda_program_free(p);
        return st;
    }
    p->desc = (rt_cuda_program_desc){p->images, p->nimages, p->steps, p->nsteps,
                                     mem->workspace, p->weights, p->weights_bytes,
                                     p->inputs, g->ninputs, p->outputs, g->noutputs};
    return WPK_OK;
}

/* ---- the runner ---- */

struct tune_cuda_runner {
    rt_cuda *d;
    tune_cuda_program prog;
    rt_cuda_program *rp;
};

wpk_status tune_cuda_runner_create(wpk_context *ctx, const ir_graph *g, const memory_plan *mem,
                                   const tune_cuda_program_options *opt, bool graph,
                                   tune_cuda_runner **out) {
    *out = NULL;
    rt_cuda_info info;
    wpk_status st = rt_cuda_probe(ctx, 0, &info);
    if (st) return st;
    tune_cuda_runner *r = wpk_calloc(1, sizeof *r);
    if (!r) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory creating the CUDA backend");
    tune_cuda_program_options o = opt ? *opt : tune_cuda_program_default_options();
    if (!opt || !opt->sm) o.sm = info.sm; /* code for this GPU */
    st = tune_cuda_program_build(ctx, g, mem, &o, &r->prog);
    if (!st) st = rt_cuda_open(ctx, 0, &r->d);
    if (!st) st = rt_cuda_program_create(r->d, &r->prog.desc, graph, &r->rp);
    if (st) {
        tune_cuda_runner_free(r);
        return st;
    }
    *out = r;
    return WPK_OK;
}

wpk_status tune_cuda_runner_run(tune_cuda_runner *r, const void *const *inputs,
                                void *const *outputs) {
    return rt_cuda_program_run(r->rp, inputs, outputs, 0);
}

const char *tune_cuda_runner_describe(const tune_cuda_runner *r, char *buf, size_t cap) {
    const rt_cuda_info *i = rt_cuda_device_info(r->d);
    snprintf(buf, cap, "%s (sm_%d, driver %d), %d kernels for %d nodes%s", i->name, i->sm,
             i->driver_version, r->prog.nimages, r->prog.nkernel_nodes,
             rt_cuda_program_uses_graph(r->rp) ? ", CUDA Graph" : "");
    return buf;
}

void tune_cuda_runner_free(tune_cuda_runner *r) {
    if (!r) return;
    rt_cuda_program_free(r->rp);
    tune_cuda_program_free(&r->prog);
    rt_cuda_close(r->d);
    wpk_free(r);
}
