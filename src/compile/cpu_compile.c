/* cpu_compile.c -- the cpu backend's program: tasks -> kernels -> compiled units -> one step
 * per node with its argument pointers, pre-packed weights and scratch laid out once; running
 * it (see cpu_compile.h). */
#include "compile/cpu_compile.h"

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "compile/tasks.h"
#include "compile/unit.h"

#define MAX_NODE_ARGS 64

/* One node's work: a compiled kernel, or (fn NULL) its reference kernel. */
typedef struct cpu_step {
    cg_kernel_fn fn;
    int nargs;
    int *value;        /* per argument: the value whose data it is at run time, -1: fixed */
    void **argv;       /* per argument: the pointer passed (fixed ones set at compile) */
} cpu_step;

struct cpu_program {
    arena mem;          /* steps and their argument arrays */
    void **blocks;      /* wpk_malloc'd blocks behind the 64-byte aligned buffers (packed
                           weights, aligned constants, scratch): arena memory is not aligned
                           that far */
    int nblocks, cap_blocks;
    cpu_step *steps;    /* one per node */
    int nsteps;
    cpu_units units;
    cpu_compile_stats stats;
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

const cpu_compile_stats *cpu_program_stats(const cpu_program *p) { return &p->stats; }

void cpu_program_free(cpu_program *p) {
    if (!p) return;
    for (int i = 0; i < p->nblocks; i++) wpk_free(p->blocks[i]);
    wpk_free(p->blocks);
    cpu_units_free(&p->units);
    arena_free(&p->mem);
    wpk_free(p);
}

/* Bytes of the constant data a kernel argument reads: the value's own, or (a view of a
 * constant the planner left on the constant) its root's. NULL when v is an activation. */
static const void *const_data(const ir_graph *g, const memory_plan *mem, int v) {
    if (g->values[v].is_const) return g->values[v].t.data;
    int r = mem->root[v];
    if (mem->offset[v] < 0 && r >= 0 && g->values[r].is_const) return g->values[r].t.data;
    return NULL;
}

/* n bytes at a 64-byte aligned address, owned by the program; NULL when out of memory. */
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

typedef struct builder {
    wpk_context *ctx;
    cpu_program *p;
    const ir_graph *g;
    const ir_tensor *vals;
    const memory_plan *mem;
    void **aligned;     /* per value: its constant data at a 64-byte aligned address, or NULL */
} builder;

/* v's constant data where kernels can read it: 64-byte aligned (the generated code assumes it). */
static void *aligned_const(builder *B, int v, const void *data) {
    if (B->aligned[v]) return B->aligned[v];
    if ((uintptr_t)data % 64 == 0) return B->aligned[v] = (void *)data;
    size_t n = ir_nbytes(&B->vals[v]);
    void *copy = alloc64(B->p, n ? n : 1);
    if (copy) memcpy(copy, data, n);
    return B->aligned[v] = copy;
}

/* The step of node k on kernel kn: arguments from the node's present inputs (kernel input i
 * is the i-th present one: a template leaves trailing ones it bakes in, Clip's bounds), the
 * packed forms where the kernel packs, then outputs, then scratch. */
static wpk_status make_step(builder *B, int k, const cpu_kernel *kn, void *scratch,
                            cpu_step *s) {
    const ir_node *n = &B->g->nodes[k];
    cpu_program *p = B->p;
    int present[MAX_NODE_ARGS], np = 0, outs[MAX_NODE_ARGS], no = 0;
    for (int i = 0; i < n->nin && np < MAX_NODE_ARGS; i++)
        if (n->in[i] >= 0) present[np++] = n->in[i];
    for (int i = 0; i < n->nout && no < MAX_NODE_ARGS; i++)
        if (n->out[i] >= 0) outs[no++] = n->out[i];
    if (kn->ninputs > np || kn->noutputs != no)
        return wpk_error(B->ctx, WPK_ERR_INTERNAL, "node '%s': kernel %s (%s) takes %d inputs "
                         "and %d outputs, the node has %d and %d", n->name, kn->name,
                         kn->tmpl->name, kn->ninputs, kn->noutputs, np, no);
    s->nargs = kn->ninputs + kn->noutputs + kn->nscratch;
    s->value = arena_alloc(&p->mem, sizeof *s->value * (size_t)s->nargs);
    s->argv = arena_alloc(&p->mem, sizeof *s->argv * (size_t)s->nargs);
    if (!s->value || !s->argv) return wpk_error(B->ctx, WPK_ERR_NOMEM, "out of memory");
    int a = 0;
    for (int i = 0; i < kn->ninputs; i++, a++) {
        int v = present[i];
        const void *cd = const_data(B->g, B->mem, v);
        s->value[a] = cd ? -1 : v;
        if (!cd) continue;
        void *src = aligned_const(B, v, cd);
        if (!src) return wpk_error(B->ctx, WPK_ERR_NOMEM, "out of memory copying constants");
        s->argv[a] = src;
        if (i < TUNE_MAX_ARGS && kn->pack_numel[i] > 0) {
            /* the packed form lives as long as the program; computed now, once */
            void *packed = alloc64(p, sizeof(float) * (size_t)kn->pack_numel[i]);
            if (!packed) return wpk_error(B->ctx, WPK_ERR_NOMEM, "out of memory pre-packing");
            void *pargs[2] = {src, packed};
            kn->pack_fn[i](pargs);
            s->argv[a] = packed;
            p->stats.prepacked++;
        }
    }
    for (int i = 0; i < kn->noutputs; i++, a++) s->value[a] = outs[i];
    for (int i = 0; i < kn->nscratch; i++, a++) {
        s->value[a] = -1;
        s->argv[a] = (char *)scratch + kn->scratch_off[i];
    }
    s->fn = kn->fn;
    return WPK_OK;
}

static bool want_dump(void) {
    const char *d = getenv("WPK_DUMP");
    return d && (!strcmp(d, "lower") || !strcmp(d, "all"));
}

wpk_status cpu_program_create(wpk_context *ctx, const ir_graph *g, const ir_tensor *vals,
                              const memory_plan *mem, const cpu_options *opt, cpu_program **out) {
    *out = NULL;
    double t0 = now_ms();
    cpu_program *p = wpk_calloc(1, sizeof *p);
    if (!p) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory compiling the graph");
    p->nsteps = g->nnodes;
    p->stats.nodes = g->nnodes;
    p->steps = arena_alloc(&p->mem, sizeof *p->steps * (size_t)(g->nnodes + 1));
    builder B = {ctx, p, g, vals, mem, wpk_calloc((size_t)g->nvalues + 1, sizeof(void *))};
    cpu_tasks tasks = {0};
    cpu_kernel *kernels = NULL, **ready = NULL;
    wpk_status st = p->steps && B.aligned ? cpu_tasks_collect(ctx, g, vals, &tasks)
                                          : wpk_error(ctx, WPK_ERR_NOMEM, "out of memory");
    if (st == WPK_OK) {
        kernels = wpk_calloc((size_t)tasks.ntasks + 1, sizeof *kernels);
        ready = wpk_calloc((size_t)tasks.ntasks + 1, sizeof *ready);
        if (!kernels || !ready) st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory");
    }
    /* build every task's kernel; one that fails leaves its nodes on the reference kernel */
    int nready = 0;
    cpu_build_options bo = {cg_c_default_options(), want_dump()};
    int threads = opt && opt->threads > 0 ? opt->threads : omp_get_max_threads();
    bo.cg.openmp = threads > 1;
    for (int i = 0; st == WPK_OK && i < tasks.ntasks; i++) {
        const tune_task *t = &tasks.tasks[i].task;
        wpk_status bs = cpu_kernel_build(ctx, t, i, NULL, &bo, &kernels[i]);
        if (bs == WPK_ERR_NOMEM) st = bs;
        else if (bs) {
            wpk_log(ctx, WPK_LOG_WARN, "node '%s' (%s) runs its reference kernel: template %s "
                    "failed: %s", t->node->name, t->node->op_type, t->tmpl->name,
                    wpk_context_error(ctx));
            wpk_clear_error(ctx);
            p->stats.fallbacks += tasks.tasks[i].count;
        } else {
            ready[nready++] = &kernels[i];
        }
    }
    double t1 = now_ms();
    p->stats.build_ms = t1 - t0;
    if (st == WPK_OK) st = cpu_units_compile(ctx, ready, nready, &p->units);
    if (st == WPK_ERR_UNSUPPORTED) {
        /* no C compiler on this machine: the reference kernels still run the model */
        wpk_log(ctx, WPK_LOG_WARN, "the cpu backend runs every node on its reference kernel: %s",
                wpk_context_error(ctx));
        wpk_clear_error(ctx);
        for (int i = 0; i < nready; i++) {
            ready[i]->fn = NULL;
            p->stats.fallbacks += tasks.tasks[ready[i] - kernels].count;
        }
        nready = 0;
        st = WPK_OK;
    }
    double t2 = now_ms();
    p->stats.compile_ms = t2 - t1;
    p->stats.units = p->units.nunits;
    p->stats.compiler_runs = p->units.compiled;
    p->stats.kernels = nready;
    /* one scratch area for all kernels: they run one after another */
    int64_t scratch_bytes = 0;
    for (int i = 0; i < nready; i++)
        if (ready[i]->scratch_bytes > scratch_bytes) scratch_bytes = ready[i]->scratch_bytes;
    void *scratch = NULL;
    if (st == WPK_OK && scratch_bytes > 0 &&
        !(scratch = alloc64(p, (size_t)scratch_bytes)))
        st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory for %lld bytes of kernel scratch",
                       (long long)scratch_bytes);
    for (int k = 0; st == WPK_OK && k < g->nnodes; k++) {
        int ti = tasks.node_task[k];
        if (ti < 0 || !kernels[ti].fn) continue;
        st = make_step(&B, k, &kernels[ti], scratch, &p->steps[k]);
        p->stats.kernel_nodes++;
    }
    p->stats.pack_ms = now_ms() - t2;
    if (st == WPK_OK)
        wpk_log(ctx, WPK_LOG_INFO, "cpu: %d of %d nodes on %d kernels (%d unit%s, %d compiled, "
                "%d fallback%s, %d pre-packed); build %.0f ms, compile %.0f ms, pack %.0f ms",
                p->stats.kernel_nodes, p->stats.nodes, p->stats.kernels, p->stats.units,
                p->stats.units == 1 ? "" : "s", p->stats.compiler_runs, p->stats.fallbacks,
                p->stats.fallbacks == 1 ? "" : "s", p->stats.prepacked, p->stats.build_ms,
                p->stats.compile_ms, p->stats.pack_ms);
    for (int i = 0; kernels && i < tasks.ntasks; i++) cpu_kernel_free(&kernels[i]);
    wpk_free(kernels);
    wpk_free(ready);
    wpk_free(B.aligned);
    cpu_tasks_free(&tasks);
    if (st) {
        cpu_program_free(p);
        return st;
    }
    *out = p;
    return WPK_OK;
}

wpk_status cpu_program_run(wpk_context *ctx, cpu_program *p, const ir_graph *g, ir_tensor *vals) {
    ir_tensor *in[MAX_NODE_ARGS], *out[MAX_NODE_ARGS];
    for (int k = 0; k < g->nnodes; k++) {
        cpu_step *s = &p->steps[k];
        if (s->fn) {
            for (int a = 0; a < s->nargs; a++)
                if (s->value[a] >= 0) s->argv[a] = vals[s->value[a]].data;
            s->fn(s->argv);
            continue;
        }
        const ir_node *n = &g->nodes[k];
        const ir_op_info *info = ir_op_get(n->op);
        if (!info->ref)
            return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s': op '%s' is not supported",
                             n->name, n->op_type);
        if (n->nin > MAX_NODE_ARGS || n->nout > MAX_NODE_ARGS)
            return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s' (%s): more than %d inputs or "
                             "outputs", n->name, n->op_type, MAX_NODE_ARGS);
        cpu_node_tensors(n, vals, in, out);
        /* a view the plan laid on its input's buffer: the bytes are already where they belong */
        if (info->ref == op_copy_ref && n->nout == 1 && out[0] && in[0] &&
            out[0]->data == in[0]->data)
            continue;
        wpk_status st = info->ref(ctx, n, in, out);
        if (st) return st;
    }
    return WPK_OK;
}
