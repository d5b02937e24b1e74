/* cuda_program.c -- a static plan turned into a runtime plan for the CUDA backend
 * (cuda_program.h): per node its CUDA template's kernel (built, lowered, emitted,
 * NVRTC-compiled; one module shared by the nodes of one workload and config), its arguments the
 * tensors of its values (workspace offsets, constants in the blob), views free or copied; and
 * the runner that runs that plan through rt_exec on a device. */
#include "compile/cuda_program.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/strbuf.h"
#include "ir/ops.h"
#include "loop/lower.h"
#include "kernels/step_runners.h"
#include "kernels/templates_cuda.h"
#include "kernels/vendor/lib_runners.h"
#include "runtime/cuda/cuda_rt.h"
#include "runtime/exec.h"

#define WEIGHT_ALIGN 256
#define MAX_NODE_ARGS (TUNE_MAX_ARGS * 2)
#define MAX_STEP_ARGS 64    /* the "cuda_kernel" runner's limit */

tune_cuda_program_options tune_cuda_program_default_options(void) {
    return (tune_cuda_program_options){.sm = 90};
}

void tune_cuda_program_free(tune_cuda_program *p) {
    if (!p) return;
    for (int i = 0; i < p->nimages; i++) {
        cg_cuda_image_free(&p->compiled[i]);
        wpk_free(p->sources[i]);
    }
    wpk_free(p->compiled);
    wpk_free(p->sources);
    wpk_free(p->launch);
    wpk_free(p->keys);
    wpk_free(p->names);
    wpk_free((void *)p->plan.consts);
    rt_plan_free(&p->plan);
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
    unsigned char *weights;   /* the constants blob while it grows */
    size_t weights_bytes, wcap;
    int32_t *args;            /* the next free argument slot */
} builder;

/* Value v as an argument: its tensor, placed in the workspace by the memory plan or, for a
 * constant, in the blob (appended on first use). */
static wpk_status place(builder *b, int v, const char *node, int32_t *out) {
    rt_tensor_desc *d = &b->p->plan.tensors[v];
    *out = v;
    if (d->place != RT_PLACE_NONE) return WPK_OK;
    const ir_value *val = &b->g->values[v];
    if (!val->t.data)
        return wpk_error(b->ctx, WPK_ERR_INTERNAL, "CUDA backend: node '%s' reads '%s', which has "
                         "neither a planned buffer nor constant data", node, val->name);
    size_t bytes = ir_nbytes(&val->t);
    size_t at = (b->weights_bytes + WEIGHT_ALIGN - 1) / WEIGHT_ALIGN * WEIGHT_ALIGN;
    if (at + bytes > b->wcap) {
        size_t cap = (at + bytes) * 2 + 4096;
        unsigned char *w = wpk_realloc(b->weights, cap);
        if (!w) return wpk_error(b->ctx, WPK_ERR_NOMEM, "out of memory placing the weights");
        memset(w + b->wcap, 0, cap - b->wcap);
        b->weights = w, b->wcap = cap;
    }
    memcpy(b->weights + at, val->t.data, bytes);
    b->weights_bytes = at + bytes;
    d->place = RT_PLACE_CONST;
    d->offset = (int64_t)at;
    return WPK_OK;
}

/* A new step of the plan for node n (its arguments start at b->args). */
static rt_step *new_step(builder *b, const ir_node *n, const char *runner) {
    rt_plan *pl = &b->p->plan;
    rt_step *s = &pl->steps[pl->nsteps++];
    memset(s, 0, sizeof *s);
    s->runner = runner;
    s->module = -1;
    s->symbol = "";
    s->node = n->name;
    s->op = n->op_type;
    s->impl = "";
    s->source = "";
    s->args = b->args;
    return s;
}

/* A device copy of bytes from value x (at byte offset `at`) into value y (at byte offset
 * `to`). */
static wpk_status copy_step(builder *b, const ir_node *n, int x, int y, size_t at, size_t bytes,
                            size_t to) {
    rt_step *s = new_step(b, n, "cuda_copy");
    s->impl = "device copy";
    const size_t len = to ? RT_CUDA_COPY_TO_PAYLOAD : RT_CUDA_COPY_PAYLOAD;
    uint8_t *payload = arena_alloc(&b->p->plan.mem, len);
    if (!payload) return wpk_error(b->ctx, WPK_ERR_NOMEM, "out of memory building the plan");
    if (to)
        rt_cuda_copy_to_payload(at, bytes, to, payload);
    else
        rt_cuda_copy_payload(at, bytes, payload);
    s->payload = payload;
    s->payload_len = len;
    wpk_status st = place(b, x, n->name, &b->args[0]);
    if (!st) st = place(b, y, n->name, &b->args[1]);
    s->nargs = 2;
    b->args += 2;
    b->p->ncopy_steps++;
    return st;
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
    p->plan.modules[k].data = p->compiled[k].data;
    p->plan.modules[k].len = p->compiled[k].size;
    p->plan.nmodules = ++p->nimages;
    *image = k;
    return WPK_OK;
}

/* The node's step on CUDA library `lib` at config: the node and config as its payload, its
 * inputs then outputs as arguments (-1 where omitted). */
static wpk_status lib_step(builder *b, int k, const kernel_provider *lib, int config) {
    const ir_node *n = &b->g->nodes[k];
    uint8_t *bytes = NULL;
    size_t len = 0;
    wpk_status st = step_payload_encode(b->ctx, n, config, &bytes, &len);
    if (st) return st;
    uint8_t *payload = arena_alloc(&b->p->plan.mem, len);
    if (payload) memcpy(payload, bytes, len);
    wpk_free(bytes);
    if (!payload) return wpk_error(b->ctx, WPK_ERR_NOMEM, "out of memory building the plan");
    rt_step *step = new_step(b, n, lib->name);
    step->payload = payload;
    step->payload_len = len;
    step->source = "tuned";
    char impl[LIB_CONFIG_MAX + 64], names[LIB_MAX_CONFIGS][LIB_CONFIG_MAX];
    ir_tensor *in[MAX_NODE_ARGS] = {0}, *out[MAX_NODE_ARGS] = {0};
    for (int i = 0; i < n->nin; i++) in[i] = n->in[i] >= 0 ? &b->g->values[n->in[i]].t : NULL;
    for (int i = 0; i < n->nout; i++) out[i] = n->out[i] >= 0 ? &b->g->values[n->out[i]].t : NULL;
    const int nc = lib->configs(lib, n, in, out, names);
    snprintf(impl, sizeof impl, "%s %s", lib->name, config < nc ? names[config] : "?");
    char *kept = arena_alloc(&b->p->plan.mem, strlen(impl) + 1);
    if (!kept) return wpk_error(b->ctx, WPK_ERR_NOMEM, "out of memory building the plan");
    step->impl = strcpy(kept, impl);
    int a = 0;
    for (int i = 0; i < n->nin; i++, a++) {
        if (n->in[i] < 0) b->args[a] = -1;
        else if ((st = place(b, n->in[i], n->name, &b->args[a]))) return st;
    }
    for (int i = 0; i < n->nout; i++, a++) {
        if (n->out[i] < 0) b->args[a] = -1;
        else if ((st = place(b, n->out[i], n->name, &b->args[a]))) return st;
    }
    step->nargs = a;
    b->args += a;
    b->p->nlib_steps++;
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
    int lib_config = 0;
    const kernel_provider *lib =
        b->opt->choose_lib ? b->opt->choose_lib(b->opt->choose_user, &task, &lib_config) : NULL;
    if (lib) return lib_step(b, k, lib, lib_config);
    tune_config cfg;
    bool chosen = b->opt->choose && b->opt->choose(b->opt->choose_user, &task, &s, &cfg);
    if (!chosen) t->default_config(t, &task, &s, &cfg);
    int ninputs = 0, image = -1;
    wpk_status st = kernel_of(b, &task, &s, &cfg, &ninputs, &image);
    if (st) return st;
    rt_step *step = new_step(b, n, "cuda_kernel");
    step->module = image;
    step->symbol = b->p->names[image];
    step->impl = b->p->keys[image];
    step->source = chosen ? "tuned" : "default";
    const cg_cuda_launch *L = &b->p->launch[image];
    rt_cuda_dims dims;
    memcpy(dims.grid, L->grid, sizeof dims.grid);
    memcpy(dims.block, L->block, sizeof dims.block);
    dims.shared_bytes = L->shared_bytes;
    uint8_t *payload = arena_alloc(&b->p->plan.mem, RT_CUDA_LAUNCH_PAYLOAD);
    if (!payload) return wpk_error(b->ctx, WPK_ERR_NOMEM, "out of memory building the plan");
    rt_cuda_launch_payload(&dims, payload);
    step->payload = payload;
    step->payload_len = RT_CUDA_LAUNCH_PAYLOAD;
    int a = 0;
    for (int i = 0; i < n->nin && a < ninputs; i++)
        if (n->in[i] >= 0 && (st = place(b, n->in[i], n->name, &b->args[a++]))) return st;
    if (a != ninputs)
        return wpk_error(b->ctx, WPK_ERR_INTERNAL, "CUDA backend: node '%s': its kernel takes %d "
                         "inputs, the node has %d", n->name, ninputs, a);
    for (int i = 0; i < n->nout; i++) {
        if (n->out[i] < 0) continue;
        if (a == MAX_STEP_ARGS)
            return wpk_error(b->ctx, WPK_ERR_UNSUPPORTED, "CUDA backend: node '%s' has more "
                             "than %d arguments", n->name, MAX_STEP_ARGS);
        if (b->mem->offset[n->out[i]] < 0)
            return wpk_error(b->ctx, WPK_ERR_INTERNAL, "CUDA backend: output '%s' of node '%s' "
                             "has no planned buffer", g->values[n->out[i]].name, n->name);
        if ((st = place(b, n->out[i], n->name, &b->args[a++]))) return st;
    }
    step->nargs = a;
    b->args += a;
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
    return copy_step(b, n, x, y, 0, ir_nbytes(&b->g->values[y].t), 0);
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

/* A Concat of more inputs than concat_cuda takes, as device copies: per input, per row of
 * the dims before the axis, its contiguous run into its slice of the output (one copy per
 * input at batch 1 on the channel axis, DenseNet's case). -1 when it is not such a Concat or
 * would take more than MAX_CONCAT_COPIES copies; else the rows. */
#define MAX_CONCAT_COPIES 1024
static int64_t concat_rows(const ir_graph *g, const ir_node *n) {
    if (n->op != IR_OP_CONCAT || n->nout != 1 || n->out[0] < 0 || n->nin < 1) return -1;
    const ir_tensor *y = &g->values[n->out[0]].t;
    int64_t axis = ir_attr_int(n, "axis", INT64_MIN);
    if (axis == INT64_MIN || axis < -y->ndim || axis >= y->ndim) return -1;
    if (axis < 0) axis += y->ndim;
    int64_t rows = 1, total = 0;
    for (int d = 0; d < axis; d++) rows *= y->dims[d];
    for (int i = 0; i < n->nin; i++) {
        if (n->in[i] < 0) return -1;
        const ir_tensor *x = &g->values[n->in[i]].t;
        if (x->dtype != y->dtype || x->ndim != y->ndim) return -1;
        for (int d = 0; d < y->ndim; d++)
            if (d != axis && x->dims[d] != y->dims[d]) return -1;
        total += x->dims[axis];
    }
    if (total != y->dims[axis] || rows * n->nin > MAX_CONCAT_COPIES) return -1;
    return rows;
}

/* Whether the memory planner put every input of Concat n in its slice of the output already
 * (their producers wrote them there): nothing is left to copy. */
static bool concat_in_place(const ir_graph *g, const memory_plan *mem, const ir_node *n) {
    if (n->op != IR_OP_CONCAT || n->nout != 1 || n->out[0] < 0 || mem->offset[n->out[0]] < 0 ||
        concat_rows(g, n) != 1)
        return false;
    int64_t at = mem->offset[n->out[0]];
    for (int i = 0; i < n->nin; i++) {
        if (mem->offset[n->in[i]] != at) return false;
        at += (int64_t)ir_nbytes(&g->values[n->in[i]].t);
    }
    return true;
}

static wpk_status concat_copies(builder *b, int k) {
    const ir_graph *g = b->g;
    const ir_node *n = &g->nodes[k];
    const ir_tensor *y = &g->values[n->out[0]].t;
    const int64_t rows = concat_rows(g, n);
    const size_t row_bytes = rows > 0 ? ir_nbytes(y) / (size_t)rows : 0;
    size_t at = 0;
    for (int i = 0; i < n->nin; i++) {
        const size_t part = ir_nbytes(&g->values[n->in[i]].t) / (size_t)rows;
        for (int64_t r = 0; r < rows; r++) {
            wpk_status st = copy_step(b, n, n->in[i], n->out[0], (size_t)r * part, part,
                                      (size_t)r * row_bytes + at);
            if (st) return st;
        }
        at += part;
    }
    return WPK_OK;
}

static wpk_status split_step(builder *b, int k) {
    const ir_node *n = &b->g->nodes[k];
    size_t at = 0;
    for (int i = 0; i < n->nout; i++) {
        size_t bytes = ir_nbytes(&b->g->values[n->out[i]].t);
        wpk_status st = copy_step(b, n, n->in[0], n->out[i], at, bytes, 0);
        if (st) return st;
        at += bytes;
    }
    return WPK_OK;
}

/* Tensor v is value v: workspace values at their planned offsets now, constants when a step
 * first reads them (place), the rest nowhere. */
static void value_tensors(builder *b) {
    const ir_graph *g = b->g;
    for (int v = 0; v < g->nvalues; v++) {
        rt_tensor_desc *d = &b->p->plan.tensors[v];
        const ir_tensor *t = &g->values[v].t;
        d->name = g->values[v].name;
        d->dtype = t->dtype;
        d->ndim = t->ndim;
        memcpy(d->dims, t->dims, sizeof d->dims);
        d->place = b->mem->offset[v] >= 0 ? RT_PLACE_WORKSPACE : RT_PLACE_NONE;
        d->offset = b->mem->offset[v] >= 0 ? b->mem->offset[v] : 0;
    }
}

static bool planned_io(const memory_plan *mem, int v) { return v >= 0 && mem->offset[v] >= 0; }

/* Node n's CUDA template, or NULL. */
static const kernel_provider *template_of(const ir_graph *g, const ir_node *n) {
    ir_tensor *in[MAX_NODE_ARGS] = {0}, *o[MAX_NODE_ARGS] = {0};
    if (n->nin > MAX_NODE_ARGS || n->nout > MAX_NODE_ARGS) return NULL;
    for (int i = 0; i < n->nin; i++) in[i] = n->in[i] >= 0 ? &g->values[n->in[i]].t : NULL;
    for (int i = 0; i < n->nout; i++) o[i] = n->out[i] >= 0 ? &g->values[n->out[i]].t : NULL;
    return kernel_provider_cuda_for(n, in, o);
}

tune_cuda_node_impl tune_cuda_node_how(const ir_graph *g, int k, const kernel_provider **tmpl) {
    const ir_node *n = &g->nodes[k];
    const kernel_provider *t = NULL;
    tune_cuda_node_impl how = TUNE_CUDA_NODE_NONE;
    if (n->dead)
        how = TUNE_CUDA_NODE_DEAD;
    else if (is_view(n) && n->nin >= 1 && n->in[0] >= 0)
        how = TUNE_CUDA_NODE_VIEW;
    else if (contiguous_split(g, n))
        how = TUNE_CUDA_NODE_COPIES;
    else if ((t = template_of(g, n)))
        how = TUNE_CUDA_NODE_KERNEL;
    else if (concat_rows(g, n) > 0)
        how = TUNE_CUDA_NODE_COPIES;
    if (tmpl) *tmpl = t;
    return how;
}

wpk_status tune_cuda_program_check(wpk_context *ctx, const ir_graph *g) {
    strbuf missing = {0};
    int nmissing = 0;
    for (int k = 0; k < g->nnodes; k++) {
        if (tune_cuda_node_how(g, k, NULL) != TUNE_CUDA_NODE_NONE) continue;
        const ir_node *n = &g->nodes[k];
        sb_printf(&missing, "%s'%s' (%s)", nmissing ? ", " : "", n->name, n->op_type);
        nmissing++;
    }
    if (!nmissing) return WPK_OK;
    wpk_status st = wpk_error(ctx, WPK_ERR_UNSUPPORTED, "CUDA backend: no CUDA kernel for %d "
                              "node%s: %s", nmissing, nmissing > 1 ? "s" : "",
                              missing.s ? missing.s : "");
    sb_free(&missing);
    return st;
}

wpk_status tune_cuda_program_build(wpk_context *ctx, const ir_graph *g, const memory_plan *mem,
                                   const tune_cuda_program_options *opt, tune_cuda_program *out) {
    memset(out, 0, sizeof *out);
    tune_cuda_program_options def = tune_cuda_program_default_options();
    if (!opt) opt = &def;
    if (!g || !mem || mem->nvalues != g->nvalues)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "CUDA backend: no graph or a memory plan of "
                         "another graph");
    wpk_status st = tune_cuda_program_check(ctx, g);
    if (st) return st;
    lib_runners_register(); /* the plan's library steps, when choose_lib picks any */
    st = cg_cuda_nvrtc_available(ctx);
    if (st) return st;
    tune_cuda_program *p = out;
    rt_plan *pl = &p->plan;
    const size_t nn = g->nnodes > 0 ? (size_t)g->nnodes : 1;
    p->compiled = wpk_calloc(nn, sizeof *p->compiled);
    p->sources = wpk_calloc(nn, sizeof *p->sources);
    p->launch = wpk_calloc(nn, sizeof *p->launch);
    p->keys = wpk_calloc(nn, sizeof *p->keys);
    p->names = wpk_calloc(nn, sizeof *p->names);
    /* a step per node; a contiguous Split's one per output, a copied Concat's one per input
       and row */
    size_t nsteps = nn, nargs = 1;
    for (int k = 0; k < g->nnodes; k++) {
        const ir_node *n = &g->nodes[k];
        size_t copies = 0;
        if (tune_cuda_node_how(g, k, NULL) == TUNE_CUDA_NODE_COPIES)
            copies = n->op == IR_OP_SPLIT ? (size_t)n->nout
                                          : (size_t)n->nin * (size_t)concat_rows(g, n);
        nsteps += copies;
        nargs += 2 * (size_t)(n->nin + n->nout) + 2 * copies;
    }
    pl->threads = 1;
    pl->provider = "";
    pl->records = "";
    pl->workspace = (int64_t)mem->workspace;
    pl->ntensors = g->nvalues;
    pl->tensors = arena_alloc(&pl->mem, sizeof *pl->tensors * ((size_t)g->nvalues + 1));
    pl->modules = arena_alloc(&pl->mem, sizeof *pl->modules * nn);
    pl->steps = arena_alloc(&pl->mem, sizeof *pl->steps * nsteps);
    pl->inputs = arena_alloc(&pl->mem, sizeof *pl->inputs * ((size_t)g->ninputs + 1));
    pl->outputs = arena_alloc(&pl->mem, sizeof *pl->outputs * ((size_t)g->noutputs + 1));
    builder b = {ctx, g, mem, opt, p, NULL, 0, 0,
                 arena_alloc(&pl->mem, sizeof(int32_t) * nargs)};
    if (!p->compiled || !p->sources || !p->launch || !p->keys || !p->names || !pl->tensors ||
        !pl->modules || !pl->steps || !pl->inputs || !pl->outputs || !b.args) {
        tune_cuda_program_free(p);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory building a CUDA program");
    }
    value_tensors(&b);
    for (int k = 0; k < g->nnodes && !st; k++) {
        const ir_node *n = &g->nodes[k];
        const tune_cuda_node_impl how = tune_cuda_node_how(g, k, NULL);
        if (how == TUNE_CUDA_NODE_DEAD) continue;
        if (concat_in_place(g, mem, n)) {
            p->nview_nodes++;
            continue;
        }
        st = how == TUNE_CUDA_NODE_VIEW     ? view_step(&b, k)
             : how != TUNE_CUDA_NODE_COPIES ? kernel_step(&b, k)
             : n->op == IR_OP_SPLIT         ? split_step(&b, k)
                                            : concat_copies(&b, k);
    }
    pl->consts = b.weights;
    pl->consts_len = (int64_t)b.weights_bytes;
    pl->ninputs = g->ninputs;
    pl->noutputs = g->noutputs;
    for (int i = 0; i < g->ninputs && !st; i++) {
        int v = g->inputs[i];
        pl->inputs[i].tensor = v;
        for (int d = 0; d < WPK_MAX_DIMS; d++) pl->inputs[i].dim_names[d] = "";
        if (!planned_io(mem, v))
            st = wpk_error(ctx, WPK_ERR_INTERNAL, "CUDA backend: input '%s' has no planned buffer",
                           g->values[v].name);
    }
    for (int i = 0; i < g->noutputs && !st; i++) {
        int v = g->outputs[i];
        pl->outputs[i].tensor = v;
        if (!planned_io(mem, v))
            st = wpk_error(ctx, WPK_ERR_UNSUPPORTED, "CUDA backend: output '%s' is a constant "
                           "(no kernel computes it)", g->values[v].name);
    }
    if (st) {
        tune_cuda_program_free(p);
        return st;
    }
    return WPK_OK;
}

/* ---- the runner ---- */

struct tune_cuda_runner {
    wpk_context *ctx;
    rt_cuda *d;
    tune_cuda_program prog;
    rt_backend *be;
    rt_exec *x;
    wpk_node_profile *profile; /* per step, once profiling */
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
    r->ctx = ctx;
    tune_cuda_program_options o = opt ? *opt : tune_cuda_program_default_options();
    if (!opt || !opt->sm) o.sm = info.sm; /* code for this GPU */
    st = tune_cuda_program_build(ctx, g, mem, &o, &r->prog);
    if (!st) st = rt_cuda_open(ctx, 0, &r->d);
    rt_cuda_backend_options bo = {graph, 0};
    if (!st) st = rt_cuda_backend_create(ctx, r->d, &bo, &r->be);
    if (!st) st = rt_exec_create(ctx, "CUDA program", &r->prog.plan, r->be, false, &r->x);
    if (st) {
        tune_cuda_runner_free(r);
        return st;
    }
    *out = r;
    return WPK_OK;
}

wpk_status tune_cuda_runner_run(tune_cuda_runner *r, const void *const *inputs,
                                void *const *outputs) {
    const rt_plan *pl = &r->prog.plan;
    wpk_status st = WPK_OK;
    for (int i = 0; i < pl->ninputs && !st; i++) {
        int t = pl->inputs[i].tensor;
        st = rt_exec_upload(r->x, r->ctx, t, inputs[i], rt_tensor_bytes(&pl->tensors[t]));
    }
    if (!st) st = rt_exec_run(r->x, r->ctx);
    const double *ms = r->profile ? rt_exec_step_ms(r->x) : NULL;
    for (int k = 0; ms && k < pl->nsteps; k++) r->profile[k].ms = ms[k];
    for (int i = 0; i < pl->noutputs && !st; i++) {
        int t = pl->outputs[i].tensor;
        st = rt_exec_download(r->x, r->ctx, t, outputs[i], rt_tensor_bytes(&pl->tensors[t]));
    }
    return st;
}

const char *tune_cuda_runner_describe(const tune_cuda_runner *r, char *buf, size_t cap) {
    const rt_cuda_info *i = rt_cuda_device_info(r->d);
    snprintf(buf, cap, "%s (sm_%d, driver %d), %d kernels for %d nodes%s", i->name, i->sm,
             i->driver_version, r->prog.nimages, r->prog.nkernel_nodes,
             rt_cuda_backend_uses_graph(r->be) ? ", CUDA Graph" : "");
    return buf;
}

wpk_status tune_cuda_runner_profile(tune_cuda_runner *r, const wpk_node_profile **entries,
                                    int *n) {
    const rt_plan *pl = &r->prog.plan;
    if (!r->profile) {
        wpk_status st = rt_exec_profile(r->x, r->ctx);
        if (st) return st;
        r->profile = wpk_calloc((size_t)pl->nsteps + 1, sizeof *r->profile);
        if (!r->profile) return wpk_error(r->ctx, WPK_ERR_NOMEM, "out of memory for a profile");
        rt_plan_profile_entries(pl, r->profile);
    }
    *entries = r->profile;
    *n = pl->nsteps;
    return WPK_OK;
}

void tune_cuda_runner_free(tune_cuda_runner *r) {
    if (!r) return;
    wpk_free(r->profile);
    rt_exec_free(r->x);
    rt_cuda_backend_free(r->be);
    tune_cuda_program_free(&r->prog);
    rt_cuda_close(r->d);
    wpk_free(r);
}
