/* cpu_compile.c -- the cpu backend's program: choices -> kernels -> compiled units -> one step
 * per node (a generated kernel with its weights pre-packed once, a library kernel the library
 * takes, or the reference kernel), which plan_io.c makes a runtime plan (see cpu_compile.h). */
#include "compile/cpu_compile.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/target.h"
#include "compile/program.h"
#include "kernels/graph_tasks.h"

#define MAX_NODE_ARGS 64

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

const cpu_compile_stats *cpu_program_stats(const cpu_program *p) { return &p->stats; }

int cpu_program_threads(const cpu_options *opt) {
    return opt && opt->threads > 0 ? opt->threads : target_default_threads();
}

void cpu_program_free(cpu_program *p) {
    if (!p) return;
    for (int i = 0; i < p->nblocks; i++) wpk_free(p->blocks[i]);
    wpk_free(p->blocks);
    for (int i = 0; i < p->nkernels; i++) cpu_kernel_free(&p->kernels[i]);
    wpk_free(p->kernels);
    cpu_units_free(&p->units);
    arena_free(&p->mem);
    wpk_free(p);
}

void cpu_program_node_info(const cpu_program *p, int k, const char **provider, const char **impl,
                           const char **source) {
    const cpu_step *s = &p->steps[k];
    *provider = s->kind == CPU_STEP_KERNEL ? "generated" : s->kind == CPU_STEP_LIB ? s->lib->name
                                                                                   : "ref";
    *impl = s->impl ? s->impl : "";
    *source = cpu_source_name(s->kind == CPU_STEP_REF ? CPU_SOURCE_REFERENCE : s->source);
}

/* Bytes of the constant data a kernel argument reads: the value's own, or (a view of a
 * constant the planner left on the constant) its root's. NULL when v is an activation. */
static const void *const_data(const ir_graph *g, const memory_plan *mem, int v) {
    if (g->values[v].is_const) return g->values[v].t.data;
    int r = mem->root[v];
    if (mem->offset[v] < 0 && r >= 0 && g->values[r].is_const) return g->values[r].t.data;
    return NULL;
}

/* n bytes at a 64-byte aligned address, owned by p; NULL when out of memory. */
static void *alloc64(cpu_program *p, size_t n) {
    if (p->nblocks == p->cap_blocks) {
        int cap = p->cap_blocks ? 2 * p->cap_blocks : 32;
        void **b = wpk_realloc(p->blocks, sizeof *b * (size_t)cap);
        if (!b) return NULL;
        p->blocks = b;
        p->cap_blocks = cap;
    }
    char *raw = wpk_malloc(n + 64);
    if (!raw) return NULL;
    p->blocks[p->nblocks++] = raw;
    return raw + (64 - (uintptr_t)raw % 64) % 64;
}

/* v's constant data where kernels can read it: 64-byte aligned (the generated code assumes it). */
static void *aligned_const(cpu_program *p, void **aligned, const ir_tensor *vals, int v,
                           const void *data) {
    if (aligned[v]) return aligned[v];
    if ((uintptr_t)data % 64 == 0) return aligned[v] = (void *)data;
    size_t n = ir_nbytes(&vals[v]);
    void *copy = alloc64(p, n ? n : 1);
    if (copy) memcpy(copy, data, n);
    return aligned[v] = copy;
}

/* Node k's step on kernel ki: per argument (the node's present inputs, kernel input i being the
 * i-th present one: a template leaves trailing ones it bakes in, Clip's bounds; then outputs,
 * then scratch) the packed form where the kernel packs a constant, made now. */
static wpk_status kernel_step(wpk_context *ctx, cpu_program *p, const ir_graph *g,
                              const ir_tensor *vals, const memory_plan *mem, void **aligned, int k,
                              int ki) {
    const ir_node *n = &g->nodes[k];
    const cpu_kernel *kn = &p->kernels[ki];
    cpu_step *s = &p->steps[k];
    int present[MAX_NODE_ARGS], np = 0, no = 0;
    for (int i = 0; i < n->nin && np < MAX_NODE_ARGS; i++)
        if (n->in[i] >= 0) present[np++] = n->in[i];
    for (int i = 0; i < n->nout; i++) no += n->out[i] >= 0;
    if (kn->ninputs > np || kn->noutputs != no)
        return wpk_error(ctx, WPK_ERR_INTERNAL, "node '%s': kernel %s (%s) takes %d inputs "
                         "and %d outputs, the node has %d and %d", n->name, kn->name,
                         kn->tmpl ? kn->tmpl->name : "?", kn->ninputs, kn->noutputs, np, no);
    s->nargs = kn->ninputs + kn->noutputs + kn->nscratch;
    s->argv = arena_alloc(&p->mem, sizeof *s->argv * (size_t)s->nargs);
    if (!s->argv) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory");
    memset(s->argv, 0, sizeof *s->argv * (size_t)s->nargs);
    int a = 0;
    for (int i = 0; i < kn->ninputs; i++, a++) {
        int v = present[i];
        const void *cd = const_data(g, mem, v);
        /* the plan reads other constants from its own blob: only a packed one is made here */
        if (!cd || i >= TUNE_MAX_ARGS || kn->pack_numel[i] <= 0) continue;
        void *src = aligned_const(p, aligned, vals, v, cd);
        if (!src) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory copying constants");
        /* the packed form lives as long as the program; computed now, once */
        size_t bytes = sizeof(float) * (size_t)kn->pack_numel[i];
        void *dst = alloc64(p, bytes);
        if (!dst) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory pre-packing");
        if (!kn->pack_fn[i])
            return wpk_error(ctx, WPK_ERR_INTERNAL, "node '%s': no packed form of input %d",
                             n->name, i);
        void *pargs[2] = {src, dst};
        kn->pack_fn[i](pargs);
        s->argv[a] = dst;
        p->stats.prepacked++;
    }
    s->kind = CPU_STEP_KERNEL;
    s->kernel = ki;
    return WPK_OK;
}

/* Node k's step on library lib at config index `config` (lib->create with the node's tensors
 * of vals: constants' data set). Errors of lib->create (WPK_ERR_UNSUPPORTED: the library
 * refuses; the caller falls back). */
static wpk_status lib_step(wpk_context *ctx, cpu_program *p, const ir_graph *g,
                           const ir_tensor *vals, int k, const kernel_provider *lib, int config) {
    const ir_node *n = &g->nodes[k];
    ir_tensor *in[MAX_NODE_ARGS], *out[MAX_NODE_ARGS];
    if (n->nin > MAX_NODE_ARGS || n->nout > MAX_NODE_ARGS)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s': too many tensors", n->name);
    /* lib->create only reads the tensors (weights are packed into the kernel) */
    cpu_node_tensors(n, (ir_tensor *)vals, in, out);
    cpu_step *s = &p->steps[k];
    const kernel_device dev = {p->threads, NULL};
    lib_kernel *lk = NULL;
    wpk_status st = lib->create(lib, ctx, n, in, out, config, &dev, &lk);
    if (st) return st;
    /* made only to learn that the library takes the node: the plan's step runner makes the
       kernel the runs use */
    lib->destroy(lib, lk);
    s->kind = CPU_STEP_LIB;
    s->lib = lib;
    s->lib_config = config;
    char names[LIB_MAX_CONFIGS][LIB_CONFIG_MAX];
    int nc = lib->configs(lib, n, in, out, names);
    char impl[LIB_CONFIG_MAX + 64];
    snprintf(impl, sizeof impl, "%s %s", lib->name, config < nc ? names[config] : "?");
    s->impl = arena_strdup(&p->mem, impl);
    return s->impl ? WPK_OK : wpk_error(ctx, WPK_ERR_NOMEM, "out of memory");
}

static bool want_dump(void) {
    const char *d = getenv("WPK_DUMP");
    return d && (!strcmp(d, "lower") || !strcmp(d, "all"));
}

/* The config index of a library choice ("algo=N"; default 0). */
static int lib_config_of(const cpu_choice *c) {
    const char *a = strstr(c->config, "algo=");
    return a ? atoi(a + 5) : 0;
}

/* Library kernels first: a node whose library refuses falls back to its generated choice
 * before the generated kernels are built. */
static wpk_status make_lib_steps(wpk_context *ctx, cpu_program *p, const ir_graph *g,
                                 const ir_tensor *vals, cpu_choices *ch) {
    for (int k = 0; k < g->nnodes; k++) {
        int ci = ch->node_choice[k];
        if (ci < 0 || kernel_provider_generates(ch->choices[ci].task.tmpl)) continue;
        const cpu_choice *c = &ch->choices[ci];
        wpk_status st = lib_step(ctx, p, g, vals, k, c->task.tmpl, lib_config_of(c));
        if (st == WPK_OK) {
            p->steps[k].source = c->source;
            p->stats.lib_nodes++;
            p->stats.tuned_nodes += cpu_source_measured(c->source);
            continue;
        }
        if (st == WPK_ERR_NOMEM) return st;
        wpk_log(ctx, WPK_LOG_WARN, "node '%s' (%s): %s config '%s' cannot run here (%s); "
                "using the generated kernel", g->nodes[k].name, g->nodes[k].op_type,
                c->task.tmpl->name, c->config[0] ? c->config : "algo=0", wpk_context_error(ctx));
        wpk_clear_error(ctx);
        memset(&p->steps[k], 0, sizeof p->steps[k]);
        cpu_choices_fall_back(ch, k);
    }
    return WPK_OK;
}

/* Build every generated choice's kernel into p->kernels (index = choice index; tmpl NULL where
 * none). A build that fails at a recorded config warns and falls back to the default config;
 * one that fails at the default leaves its nodes on the reference kernel. */
static wpk_status build_kernels(wpk_context *ctx, cpu_program *p, cpu_choices *ch,
                                const cpu_build_options *bo) {
    for (int i = 0; i < ch->n; i++) {
        cpu_choice *c = &ch->choices[i];
        if (c->count <= 0 || !kernel_provider_generates(c->task.tmpl)) continue;
        for (;;) {
            const char *config = c->config[0] ? c->config : NULL;
            wpk_status bs = c->images > 1 ? cpu_kernel_build_per_image(ctx, &c->task, i, config,
                                                                       c->images, bo,
                                                                       &p->kernels[i])
                                          : cpu_kernel_build(ctx, &c->task, i, config, bo,
                                                             &p->kernels[i]);
            if (bs == WPK_OK) break;
            if (bs == WPK_ERR_NOMEM) return bs;
            const ir_node *n = c->task.node;
            if (c->config[0]) {
                char was[sizeof c->config + 64];
                snprintf(was, sizeof was, "%s config '%s'", c->task.tmpl->name, c->config);
                if (cpu_choice_fallback(c)) {
                    wpk_log(ctx, WPK_LOG_WARN, "node '%s' (%s): %s does not build (%s); using "
                            "the default config", n->name, n->op_type, was,
                            wpk_context_error(ctx));
                    wpk_clear_error(ctx);
                    continue;
                }
            }
            wpk_log(ctx, WPK_LOG_WARN, "node '%s' (%s) runs its reference kernel: template %s "
                    "failed: %s", n->name, n->op_type, c->task.tmpl->name, wpk_context_error(ctx));
            wpk_clear_error(ctx);
            p->stats.fallbacks += c->count;
            memset(&p->kernels[i], 0, sizeof p->kernels[i]);
            break;
        }
    }
    return WPK_OK;
}

wpk_status cpu_program_create(wpk_context *ctx, const ir_graph *g, const ir_tensor *vals,
                              const memory_plan *mem, const cpu_options *opt, cpu_program **out) {
    *out = NULL;
    double t0 = now_ms();
    cpu_program *p = wpk_calloc(1, sizeof *p);
    if (!p) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory compiling the graph");
    p->nsteps = g->nnodes;
    p->stats.nodes = g->nnodes;
    p->threads = cpu_program_threads(opt);
    p->steps = arena_alloc(&p->mem, sizeof *p->steps * (size_t)(g->nnodes + 1));
    if (p->steps) memset(p->steps, 0, sizeof *p->steps * (size_t)(g->nnodes + 1));
    void **aligned = wpk_calloc((size_t)g->nvalues + 1, sizeof(void *));
    cpu_choices ch = {0};
    cpu_kernel **ready = NULL;
    cpu_choose_options co = {opt ? opt->db : NULL, NULL, opt ? opt->provider : NULL,
                             opt && opt->bf16, opt ? opt->bf16_fp32_share : 0};
    wpk_status st = p->steps && aligned ? cpu_choose(ctx, g, vals, &co, &ch)
                                        : wpk_error(ctx, WPK_ERR_NOMEM, "out of memory");
    if (st == WPK_OK) st = make_lib_steps(ctx, p, g, vals, &ch);
    if (st == WPK_OK) {
        p->nkernels = ch.n;
        p->kernels = wpk_calloc((size_t)ch.n + 1, sizeof *p->kernels);
        ready = wpk_calloc((size_t)ch.n + 1, sizeof *ready);
        if (!p->kernels || !ready) st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory");
    }
    cpu_build_options bo = {cg_c_default_options(), want_dump()};
    bo.cg.openmp = p->threads > 1;
    if (st == WPK_OK) st = build_kernels(ctx, p, &ch, &bo);
    int nready = 0;
    for (int i = 0; st == WPK_OK && i < ch.n; i++)
        if (p->kernels[i].tmpl) ready[nready++] = &p->kernels[i];
    double t1 = now_ms();
    p->stats.build_ms = t1 - t0;
    if (st == WPK_OK) st = cpu_units_compile(ctx, ready, nready, &p->units);
    if (st == WPK_ERR_UNSUPPORTED && !(opt && opt->require_compiler)) {
        /* no C compiler on this machine: the reference kernels still run the model */
        wpk_log(ctx, WPK_LOG_WARN, "the cpu backend runs every node on its reference kernel: %s",
                wpk_context_error(ctx));
        wpk_clear_error(ctx);
        for (int i = 0; i < nready; i++) {
            p->stats.fallbacks += ch.choices[ready[i] - p->kernels].count;
            cpu_kernel_free(ready[i]);
        }
        nready = 0;
        st = WPK_OK;
    }
    double t2 = now_ms();
    p->stats.compile_ms = t2 - t1;
    p->stats.units = p->units.nunits;
    p->stats.compiler_runs = p->units.compiled;
    p->stats.kernels = nready;
    /* one scratch area for all kernels (they run one after another), above the plan's
       workspace */
    for (int i = 0; i < nready; i++) {
        sb_free(&ready[i]->source); /* compiled: the text is not needed any more */
        if (ready[i]->scratch_bytes > p->scratch_bytes) p->scratch_bytes = ready[i]->scratch_bytes;
    }
    for (int k = 0; st == WPK_OK && k < g->nnodes; k++) {
        int ci = ch.node_choice[k];
        if (ci < 0 || p->steps[k].kind == CPU_STEP_LIB || !p->kernels[ci].fn) continue;
        const cpu_choice *c = &ch.choices[ci];
        st = kernel_step(ctx, p, g, vals, mem, aligned, k, ci);
        if (st) break;
        p->steps[k].source = c->source;
        char impl[sizeof c->config + 120], per[48] = "";
        if (c->images > 1) snprintf(per, sizeof per, " (x%lld images)", (long long)c->images);
        snprintf(impl, sizeof impl, "%s %s%s", c->task.tmpl->name, p->kernels[ci].config, per);
        if (!(p->steps[k].impl = arena_strdup(&p->mem, impl)))
            st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory");
        p->stats.kernel_nodes++;
        p->stats.tuned_nodes += cpu_source_measured(c->source);
    }
    p->stats.pack_ms = now_ms() - t2;
    if (st == WPK_OK)
        wpk_log(ctx, WPK_LOG_INFO, "cpu: %d of %d nodes on %d kernels, %d on library kernels, "
                "%d tuned (%d unit%s, %d compiled, %d fallback%s, %d pre-packed); build %.0f ms, "
                "compile %.0f ms, pack %.0f ms",
                p->stats.kernel_nodes, p->stats.nodes, p->stats.kernels, p->stats.lib_nodes,
                p->stats.tuned_nodes, p->stats.units, p->stats.units == 1 ? "" : "s",
                p->stats.compiler_runs, p->stats.fallbacks, p->stats.fallbacks == 1 ? "" : "s",
                p->stats.prepacked, p->stats.build_ms, p->stats.compile_ms, p->stats.pack_ms);
    wpk_free(ready);
    wpk_free(aligned);
    cpu_choices_free(&ch);
    if (st) {
        cpu_program_free(p);
        return st;
    }
    *out = p;
    return WPK_OK;
}
