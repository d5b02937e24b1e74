/* test_cuda_program.c -- a whole small CNN through the CUDA backend's compile side and
 * executor: Conv(+bias) -> Relu -> Split (channel halves: two device copies) -> Add -> MaxPool
 * -> Add(broadcast) -> GlobalAveragePool -> Flatten (a view) -> Gemm -> Softmax, specialized
 * and memory-planned by exec_plan, turned into a program by tune_cuda_program_build (every
 * node's CUDA template, NVRTC for sm_90, the weights blob, the workspace offsets). Without a GPU the program is checked by running every
 * step's generated CUDA on the CPU emulator (tests/cuda/cuda_emu.h) over one host workspace
 * laid out as the device's would be, against the nodes' reference kernels run over the same
 * plan; with a GPU (rt_cuda_open succeeds) the same program also runs on the device, directly
 * and as a CUDA Graph, against the same reference. Without one that part is skipped with
 * "no CUDA device: <reason>". Also: a node without a CUDA template is refused, every such node
 * named. */
#define _DEFAULT_SOURCE

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "../unit/check.h"
#include "api/exec_plan.h"
#include "base/alloc.h"
#include "base/context.h"
#include "cuda_emu.h"
#include "ir/graph.h"
#include "ir/ops.h"
#include "runtime/cuda/cuda_program.h"
#include "test_data.h"
#include "compile/cuda_program.h"

static char tmp_dir[64];

static ir_tensor f32(int ndim, const int64_t *dims, float *data) {
    ir_tensor t = {WPK_DTYPE_FLOAT32, ndim, {0}, data};
    for (int i = 0; i < ndim; i++) t.dims[i] = dims[i];
    return t;
}

static int add_const(ir_graph *g, const char *name, int ndim, const int64_t *dims) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= dims[i];
    float *d = randoms(n);
    ir_tensor t = f32(ndim, dims, d);
    int v = ir_graph_add_const(g, name, &t);
    free(d);
    return v;
}

static int node(ir_graph *g, const char *name, const char *op, int nin, const int *in,
                const char *out) {
    int k = ir_graph_add_node(g, name, op, "", 13, nin, 1);
    ir_node *n = &g->nodes[k];
    for (int i = 0; i < nin; i++) n->in[i] = in[i];
    int v = ir_graph_value(g, out);
    n->out[0] = v;
    g->values[v].producer = k;
    return k;
}

/* x [1, 4, 12, 12] -> ... -> prob [1, 10] */
static ir_graph *small_cnn(bool with_unsupported) {
    ir_graph *g = ir_graph_create();
    int x = ir_graph_value(g, "x");
    g->values[x].t = f32(4, (const int64_t[]){1, 4, 12, 12}, NULL);
    g->values[x].is_input = true;
    g->inputs = arena_alloc(&g->mem, sizeof(int));
    g->inputs[0] = x, g->ninputs = 1;
    int w = add_const(g, "w", 4, (const int64_t[]){8, 4, 3, 3});
    int b = add_const(g, "b", 1, (const int64_t[]){8});
    int k = node(g, "conv", "Conv", 3, (const int[]){x, w, b}, "c");
    ir_node_set_ints(g, &g->nodes[k], "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    ir_node_set_ints(g, &g->nodes[k], "kernel_shape", (const int64_t[]){3, 3}, 2);
    node(g, "relu", "Relu", 1, (const int[]){ir_graph_find_value(g, "c")}, "r");
    /* a channel split into halves (two device copies) whose halves are added */
    k = ir_graph_add_node(g, "split", "Split", "", 13, 1, 2);
    g->nodes[k].in[0] = ir_graph_find_value(g, "r");
    ir_node_set_int(g, &g->nodes[k], "axis", 1);
    int halves[2] = {ir_graph_value(g, "r0"), ir_graph_value(g, "r1")};
    for (int i = 0; i < 2; i++) g->nodes[k].out[i] = halves[i], g->values[halves[i]].producer = k;
    node(g, "mix", "Add", 2, halves, "m");
    k = node(g, "pool", "MaxPool", 1, (const int[]){ir_graph_find_value(g, "m")}, "p");
    ir_node_set_ints(g, &g->nodes[k], "kernel_shape", (const int64_t[]){2, 2}, 2);
    ir_node_set_ints(g, &g->nodes[k], "strides", (const int64_t[]){2, 2}, 2);
    int s = add_const(g, "shift", 3, (const int64_t[]){4, 1, 1});
    node(g, "add", "Add", 2, (const int[]){ir_graph_find_value(g, "p"), s}, "a");
    node(g, "gap", "GlobalAveragePool", 1, (const int[]){ir_graph_find_value(g, "a")}, "gp");
    node(g, "flat", "Flatten", 1, (const int[]){ir_graph_find_value(g, "gp")}, "f");
    int fw = add_const(g, "fc.w", 2, (const int64_t[]){10, 4});
    int fb = add_const(g, "fc.b", 1, (const int64_t[]){10});
    k = node(g, "fc", "Gemm", 3, (const int[]){ir_graph_find_value(g, "f"), fw, fb}, "logits");
    ir_node_set_int(g, &g->nodes[k], "transB", 1);
    const char *last = "logits";
    if (with_unsupported) {
        node(g, "tr", "Transpose", 1, (const int[]){ir_graph_find_value(g, "logits")}, "t");
        int sc = add_const(g, "ln.scale", 1, (const int64_t[]){1});
        k = node(g, "ln", "LayerNormalization", 2, (const int[]){ir_graph_find_value(g, "t"), sc},
                 "n");
        g->nodes[k].opset = 17;
        k = node(g, "ln2", "LayerNormalization", 2, (const int[]){ir_graph_find_value(g, "n"), sc},
                 "n2");
        g->nodes[k].opset = 17;
        last = "n2";
    }
    node(g, "softmax", "Softmax", 1, (const int[]){ir_graph_find_value(g, last)}, "prob");
    g->outputs = arena_alloc(&g->mem, sizeof(int));
    g->outputs[0] = ir_graph_find_value(g, "prob"), g->noutputs = 1;
    return g;
}

/* The tensors of plan values bound to workspace ws (constants keep their data). */
static void bind(const exec_plan *p, unsigned char *ws, ir_tensor *vals) {
    for (int v = 0; v < p->g->nvalues; v++) {
        vals[v] = p->g->values[v].t;
        if (p->mem.offset[v] >= 0) vals[v].data = ws + p->mem.offset[v];
    }
}

/* The reference: every node's reference kernel over the plan's buffers. */
static bool reference(wpk_context *ctx, const exec_plan *p, const float *x, float *out) {
    unsigned char *ws = aligned_alloc(256, (p->mem.workspace + 255) / 256 * 256 + 256);
    ir_tensor *vals = calloc((size_t)p->g->nvalues, sizeof *vals);
    bind(p, ws, vals);
    const ir_graph *g = p->g;
    memcpy(vals[g->inputs[0]].data, x, p->mem.bytes[g->inputs[0]]);
    bool ok = true;
    for (int k = 0; k < g->nnodes && ok; k++) {
        const ir_node *n = &g->nodes[k];
        ir_tensor *in[8] = {0}, *o[8] = {0};
        for (int i = 0; i < n->nin; i++) in[i] = n->in[i] >= 0 ? &vals[n->in[i]] : NULL;
        for (int i = 0; i < n->nout; i++) o[i] = n->out[i] >= 0 ? &vals[n->out[i]] : NULL;
        if (o[0] && in[0] && o[0]->data == in[0]->data && ir_op_get(n->op)->ref == op_copy_ref)
            continue;
        wpk_status st = ir_op_get(n->op)->ref(ctx, n, in, o);
        if (st) fprintf(stderr, "reference %s: %s\n", n->name, wpk_context_error(ctx));
        ok = st == WPK_OK;
    }
    int y = g->outputs[0];
    memcpy(out, vals[y].data, p->mem.bytes[y]);
    free(vals);
    free(ws);
    return ok;
}

/* Every step's generated CUDA on the emulator over a host workspace and the weights blob. */
static bool emulate(wpk_context *ctx, const exec_plan *p, const tune_cuda_program *prog,
                    const float *x, float *out) {
    unsigned char *ws = aligned_alloc(256, (p->mem.workspace + 255) / 256 * 256 + 256);
    unsigned char *wt = aligned_alloc(256, (prog->weights_bytes + 255) / 256 * 256 + 256);
    memset(ws, 0xff, p->mem.workspace); /* NaN bytes: a value never written shows */
    memcpy(wt, prog->weights, prog->weights_bytes);
    memcpy(ws + prog->inputs[0].at.offset, x, prog->inputs[0].bytes);
    te_ctx c;
    te_ctx_init(&c, ctx);
    emu_kernel *ks = calloc((size_t)prog->nimages, sizeof *ks);
    bool ok = true;
    for (int i = 0; i < prog->nsteps && ok; i++) {
        const rt_cuda_step *s = &prog->steps[i];
        void *args[RT_CUDA_STEP_ARGS];
        if (s->kernel < 0) {
            unsigned char *src = (s->copy_src.space ? wt : ws) + s->copy_src.offset;
            memmove(ws + s->copy_dst.offset, src, s->copy_bytes);
            continue;
        }
        for (int a = 0; a < s->nargs; a++)
            args[a] = (s->args[a].space ? wt : ws) + s->args[a].offset;
        emu_kernel *k = &ks[s->kernel];
        if (!k->so) {
            /* the emulator wants the kernel's name and argument types: all float32 here */
            loop_buffer *bufs[RT_CUDA_STEP_ARGS];
            int64_t one = 1;
            for (int a = 0; a < s->nargs; a++)
                bufs[a] = loop_buffer_new(&c, "a", TE_F32, 1, &one, LOOP_SCOPE_ARG);
            loop_func f = {prog->names[s->kernel], bufs, s->nargs, 0, NULL};
            ok = emu_build(prog->sources[s->kernel], &f, tmp_dir, prog->names[s->kernel], k) == 0;
            if (!ok) break;
        }
        ok = emu_run(k, &prog->launch[s->kernel], args) == 0;
        if (!ok) fprintf(stderr, "emulating step '%s' failed\n", s->node);
    }
    memcpy(out, ws + prog->outputs[0].at.offset, prog->outputs[0].bytes);
    for (int i = 0; i < prog->nimages; i++) emu_free(&ks[i]);
    free(ks);
    te_ctx_free(&c);
    free(ws), free(wt);
    return ok;
}

static void on_device(wpk_context *ctx, const tune_cuda_program *prog, const float *x,
                      const float *want, int64_t ny) {
    rt_cuda *d = NULL;
    if (rt_cuda_open(ctx, 0, &d)) {
        fprintf(stderr, "no CUDA device: %s -- the program's device runs are skipped\n",
                wpk_context_error(ctx) + strlen("CUDA unavailable: "));
        return;
    }
    float *got = nans(ny);
    for (int graph = 0; graph < 2; graph++) {
        rt_cuda_program *rp = NULL;
        wpk_status st = rt_cuda_program_create(d, &prog->desc, graph, &rp);
        if (st) fprintf(stderr, "program: %s\n", wpk_context_error(ctx));
        CHECK(st == WPK_OK);
        for (int run = 0; rp && run < 3; run++) {
            const void *in[1] = {x};
            void *out[1] = {got};
            CHECK(rt_cuda_program_run(rp, in, out, 0) == WPK_OK);
            CHECK(close_all(got, want, ny, graph ? "on the GPU (graph)" : "on the GPU"));
        }
        if (rp && graph) CHECK(rt_cuda_program_uses_graph(rp));
        rt_cuda_program_free(rp);
    }
    free(got);
    rt_cuda_close(d);
}

int main(void) {
    wpk_context *ctx = wpk_context_create();
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/wpk_cuda_prog_XXXXXX");
    CHECK(mkdtemp(tmp_dir) != NULL);
    setenv("WPK_CACHE_DIR", tmp_dir, 1);
    if (cg_cuda_nvrtc_available(ctx)) {
        fprintf(stderr, "NVRTC not available (%s): skipped\n", wpk_context_error(ctx));
        wpk_context_free(ctx);
        return 77;
    }
    ir_graph *g = small_cnn(false);
    ir_tensor shape = f32(4, (const int64_t[]){1, 4, 12, 12}, NULL);
    exec_plan *p = NULL;
    wpk_status st = exec_plan_create(ctx, g, &shape, true, &p);
    if (st) fprintf(stderr, "plan: %s\n", wpk_context_error(ctx));
    CHECK(st == WPK_OK && p);
    tune_cuda_program prog;
    st = p ? tune_cuda_program_build(ctx, p->g, &p->mem, NULL, &prog) : WPK_ERR_INTERNAL;
    if (st) fprintf(stderr, "program build: %s\n", wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    if (st == WPK_OK) {
        /* 8 kernels (conv, relu, mix, pool, add, gap, fc, softmax), the Split two device copies,
         * the Flatten a free view */
        if (prog.nkernel_nodes != 8 || prog.ncopy_steps != 2 || prog.nsteps != 10)
            fprintf(stderr, "%d kernel nodes, %d copy steps, %d steps\n", prog.nkernel_nodes,
                    prog.ncopy_steps, prog.nsteps);
        CHECK(prog.nkernel_nodes == 8 && prog.nview_nodes == 1 && prog.ncopy_steps == 2);
        CHECK(prog.nimages == 8 && prog.nsteps == 10 && prog.desc.nsteps == 10);
        CHECK(prog.desc.workspace_bytes == p->mem.workspace && prog.weights_bytes > 0);
        for (int i = 0; i < prog.nimages; i++) {
            char entry[64];
            snprintf(entry, sizeof entry, ".entry %s(", prog.names[i]);
            CHECK(strstr((const char *)prog.compiled[i].data, entry) != NULL);
        }
        const int64_t ny = 10;
        float *x = randoms(4 * 12 * 12), *want = nans(ny), *got = nans(ny);
        CHECK(reference(ctx, p, x, want));
        char log[128];
        snprintf(log, sizeof log, "%s/cxx.log", tmp_dir);
        char *argv[] = {(char *)emu_compiler(), "--version", NULL};
        if (emu_spawn(argv, log) == 0) {
            CHECK(emulate(ctx, p, &prog, x, got));
            CHECK(close_all(got, want, ny, "the program on the emulator"));
        } else {
            fprintf(stderr, "no host C++ compiler: the emulated run is skipped\n");
        }
        on_device(ctx, &prog, x, want, ny);
        free(x), free(want), free(got);
        tune_cuda_program_free(&prog);
    }
    /* the runner: without a device it says so before compiling anything */
    tune_cuda_runner *runner = NULL;
    st = p ? tune_cuda_runner_create(ctx, p->g, &p->mem, NULL, true, &runner) : WPK_ERR_INTERNAL;
    if (st == WPK_OK) {
        char what[256];
        fprintf(stderr, "runner: %s\n", tune_cuda_runner_describe(runner, what, sizeof what));
        tune_cuda_runner_free(runner);
    } else {
        CHECK_ERR(ctx, st, WPK_ERR_UNSUPPORTED, "CUDA unavailable: ");
        CHECK(runner == NULL);
    }
    exec_plan_free(p);
    ir_graph_free(g);

    /* nodes without a CUDA template: all named at once */
    g = small_cnn(true);
    p = NULL;
    if (exec_plan_create(ctx, g, &shape, true, &p) == WPK_OK) {
        CHECK_ERR(ctx, tune_cuda_program_build(ctx, p->g, &p->mem, NULL, &prog),
                  WPK_ERR_UNSUPPORTED, "no CUDA kernel for 2 nodes: 'ln' (LayerNormalization), "
                  "'ln2' (LayerNormalization)");
    } else {
        fprintf(stderr, "plan: %s\n", wpk_context_error(ctx));
        CHECK(!"plan of the graph with unsupported nodes");
    }
    exec_plan_free(p);
    ir_graph_free(g);
    if (!getenv("WPK_TEST_KEEP")) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_dir);
    }
    wpk_context_free(ctx);
    CHECK_DONE();
}
