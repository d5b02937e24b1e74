/* test_cuda_program.c -- a whole small CNN through the CUDA target's compile side and the
 * executor: Conv(+bias) -> Relu -> Split (channel halves: two device copies) -> Add -> MaxPool
 * -> Add(broadcast) -> GlobalAveragePool -> Flatten (a view) -> Gemm -> Softmax, specialized
 * and memory-planned by exec_plan, turned into a runtime plan by tune_cuda_program_build (every
 * node's CUDA template, NVRTC for sm_90, a module per kernel, the constants blob, the workspace
 * offsets). Without a GPU the plan is checked by running every step as its runner would -- the
 * generated CUDA of "cuda_kernel" steps on the CPU emulator (tests/cuda/cuda_emu.h), the
 * "cuda_copy" steps' byte ranges -- over one host workspace laid out as the device's, against
 * the nodes' reference kernels run over the same memory plan; the plan is also written and read
 * back. With a GPU (rt_cuda_open succeeds) the same plan runs through rt_exec on the CUDA
 * backend, directly and as a CUDA Graph, against the same reference; without one that part is
 * skipped with "no CUDA device: <reason>". Given the mock driver (argv[1]) the same path runs on
 * it (the mock computes nothing: statuses, graph capture and the session's runner). The same
 * checks run on a wider graph (LayerNormalization, a Concat of ten inputs as device copies into
 * the output's slices). Also: a node without a CUDA template is refused, every such node
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
#include "runtime/cuda/cuda_rt.h"
#include "runtime/exec.h"
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

enum { PLAIN, WIDE, UNSUPPORTED };

/* x [1, 4, 12, 12] -> ... -> prob [1, 10] (PLAIN); WIDE: logits -> LayerNormalization ->
 * Concat of ten (it and logits in turn) -> prob [1, 100]; UNSUPPORTED: logits -> Sin -> Sin ->
 * prob. */
static ir_graph *small_cnn(int variant) {
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
    if (variant == WIDE) {
        int sc = add_const(g, "ln.scale", 1, (const int64_t[]){10});
        int sb = add_const(g, "ln.bias", 1, (const int64_t[]){10});
        int lg = ir_graph_find_value(g, "logits");
        k = node(g, "ln", "LayerNormalization", 3, (const int[]){lg, sc, sb}, "n");
        g->nodes[k].opset = 17;
        int n = ir_graph_find_value(g, "n"), parts[10];
        for (int i = 0; i < 10; i++) parts[i] = i % 2 ? lg : n;
        k = node(g, "cat", "Concat", 10, parts, "wide");
        ir_node_set_int(g, &g->nodes[k], "axis", 1);
        last = "wide";
    } else if (variant == UNSUPPORTED) {
        node(g, "sin", "Sin", 1, (const int[]){ir_graph_find_value(g, "logits")}, "s1");
        node(g, "sin2", "Sin", 1, (const int[]){ir_graph_find_value(g, "s1")}, "s2");
        last = "s2";
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

/* Inputs or outputs of the graphs' nodes at most (the widest here: a 10-input Concat). */
#define MAX_NODE_ARGS 16

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
        ir_tensor *in[MAX_NODE_ARGS] = {0}, *o[MAX_NODE_ARGS] = {0};
        if (n->nin > MAX_NODE_ARGS || n->nout > MAX_NODE_ARGS) {
            fprintf(stderr, "reference %s: more than %d inputs or outputs\n", n->name,
                    MAX_NODE_ARGS);
            ok = false;
            break;
        }
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

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Every step of the plan as its runner would run it, over a host workspace and constants. */
static bool emulate(wpk_context *ctx, const tune_cuda_program *prog, const float *x, float *out) {
    const rt_plan *pl = &prog->plan;
    unsigned char *ws = aligned_alloc(256, ((size_t)pl->workspace + 255) / 256 * 256 + 256);
    unsigned char *wt = aligned_alloc(256, ((size_t)pl->consts_len + 255) / 256 * 256 + 256);
    memset(ws, 0xff, (size_t)pl->workspace); /* NaN bytes: a value never written shows */
    memcpy(wt, pl->consts, (size_t)pl->consts_len);
    void **data = calloc((size_t)pl->ntensors, sizeof *data);
    for (int t = 0; t < pl->ntensors; t++) {
        const rt_tensor_desc *d = &pl->tensors[t];
        data[t] = d->place == RT_PLACE_WORKSPACE ? ws + d->offset
                  : d->place == RT_PLACE_CONST   ? wt + d->offset
                                                 : NULL;
    }
    const rt_tensor_desc *in = &pl->tensors[pl->inputs[0].tensor];
    memcpy(data[pl->inputs[0].tensor], x, rt_tensor_bytes(in));
    te_ctx c;
    te_ctx_init(&c, ctx);
    emu_kernel *ks = calloc((size_t)prog->nimages, sizeof *ks);
    bool ok = true;
    for (int i = 0; i < pl->nsteps && ok; i++) {
        const rt_step *s = &pl->steps[i];
        if (!strcmp(s->runner, "cuda_copy")) {
            const bool to = s->payload_len == RT_CUDA_COPY_TO_PAYLOAD;
            ok = s->nargs == 2 && (to || s->payload_len == RT_CUDA_COPY_PAYLOAD);
            const uint8_t *p = s->payload;
            memmove((unsigned char *)data[s->args[1]] + (to ? le64(p + 16) : 0),
                    (unsigned char *)data[s->args[0]] + le64(p), le64(p + 8));
            continue;
        }
        CHECK(!strcmp(s->runner, "cuda_kernel") && s->module >= 0 && s->module < prog->nimages);
        CHECK(!strcmp(s->symbol, prog->names[s->module]));
        void *args[64];
        for (int a = 0; a < s->nargs; a++) args[a] = data[s->args[a]];
        emu_kernel *k = &ks[s->module];
        if (!k->so) {
            /* the emulator wants the kernel's name and argument types: all float32 here */
            loop_buffer *bufs[64];
            int64_t one = 1;
            for (int a = 0; a < s->nargs; a++)
                bufs[a] = loop_buffer_new(&c, "a", TE_F32, 1, &one, LOOP_SCOPE_ARG);
            loop_func f = {prog->names[s->module], bufs, s->nargs, 0, NULL};
            ok = emu_build(prog->sources[s->module], &f, tmp_dir, prog->names[s->module], k) == 0;
            if (!ok) break;
        }
        /* the launch the payload carries is the one the emitter chose */
        const uint8_t *p = s->payload;
        const cg_cuda_launch *L = &prog->launch[s->module];
        CHECK(s->payload_len == RT_CUDA_LAUNCH_PAYLOAD && (int64_t)le64(p) == L->grid[0] &&
              (int64_t)le64(p + 24) == L->block[0] && (int64_t)le64(p + 48) == L->shared_bytes);
        ok = emu_run(k, L, args) == 0;
        if (!ok) fprintf(stderr, "emulating step '%s' failed\n", s->node);
    }
    const rt_tensor_desc *y = &pl->tensors[pl->outputs[0].tensor];
    memcpy(out, data[pl->outputs[0].tensor], rt_tensor_bytes(y));
    for (int i = 0; i < prog->nimages; i++) emu_free(&ks[i]);
    free(ks);
    free(data);
    te_ctx_free(&c);
    free(ws), free(wt);
    return ok;
}

/* The plan through rt_exec on the CUDA backend: steps one by one, then as a CUDA Graph. */
static void on_device(wpk_context *ctx, const tune_cuda_program *prog, const float *x,
                      const float *want, int64_t ny) {
    rt_cuda *d = NULL;
    if (rt_cuda_open(ctx, 0, &d)) {
        fprintf(stderr, "no CUDA device: %s -- the plan's device runs are skipped\n",
                wpk_context_error(ctx) + strlen("CUDA unavailable: "));
        return;
    }
    /* the mock driver (argv[1]) runs the whole path but computes nothing: statuses only */
    bool mock = !strcmp(rt_cuda_device_info(d)->name, "wpk mock GPU");
    const rt_plan *pl = &prog->plan;
    int tx = pl->inputs[0].tensor, ty = pl->outputs[0].tensor;
    float *got = nans(ny);
    for (int graph = 0; graph < 2; graph++) {
        rt_cuda_backend_options bo = {graph == 1, 0};
        rt_backend *be = NULL;
        rt_exec *ex = NULL;
        wpk_status st = rt_cuda_backend_create(ctx, d, &bo, &be);
        if (!st) st = rt_exec_create(ctx, "small cnn", pl, be, false, &ex);
        if (st) fprintf(stderr, "plan on the device: %s\n", wpk_context_error(ctx));
        CHECK(st == WPK_OK);
        for (int run = 0; ex && run < 3; run++) {
            CHECK(rt_exec_upload(ex, ctx, tx, x, rt_tensor_bytes(&pl->tensors[tx])) == WPK_OK);
            CHECK(rt_exec_run(ex, ctx) == WPK_OK);
            CHECK(rt_exec_download(ex, ctx, ty, got, sizeof(float) * (size_t)ny) == WPK_OK);
            if (!mock) CHECK(close_all(got, want, ny, graph ? "on the GPU (graph)" : "on the GPU"));
        }
        if (ex && graph) CHECK(rt_cuda_backend_uses_graph(be));
        rt_exec_free(ex);
        rt_cuda_backend_free(be);
    }
    free(got);
    rt_cuda_close(d);
}

/* The plan of g's program against the reference: on the emulator and, where there is one,
 * the device. */
static void check_numbers(wpk_context *ctx, const exec_plan *p, const tune_cuda_program *prog) {
    const int64_t nx = 4 * 12 * 12, ny = (int64_t)ir_numel(&p->g->values[p->g->outputs[0]].t);
    float *x = randoms(nx), *want = nans(ny), *got = nans(ny);
    CHECK(reference(ctx, p, x, want));
    char log[128];
    snprintf(log, sizeof log, "%s/cxx.log", tmp_dir);
    char *cxx[] = {(char *)emu_compiler(), "--version", NULL};
    if (emu_spawn(cxx, log) == 0) {
        CHECK(emulate(ctx, prog, x, got));
        CHECK(close_all(got, want, ny, "the program on the emulator"));
    } else {
        fprintf(stderr, "no host C++ compiler: the emulated run is skipped\n");
    }
    on_device(ctx, prog, x, want, ny);
    free(x), free(want), free(got);
}

/* WIDE: the LayerNormalization a kernel, the Concat ten device copies into its slices. */
static void test_wide(wpk_context *ctx, const ir_tensor *shape) {
    ir_graph *g = small_cnn(WIDE);
    exec_plan *p = NULL;
    wpk_status st = exec_plan_create(ctx, g, shape, true, &p);
    if (st) fprintf(stderr, "plan (wide): %s\n", wpk_context_error(ctx));
    CHECK(st == WPK_OK && p);
    tune_cuda_program prog;
    st = p ? tune_cuda_program_build(ctx, p->g, &p->mem, NULL, &prog) : WPK_ERR_INTERNAL;
    if (st) fprintf(stderr, "program build (wide): %s\n", wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    if (st == WPK_OK) {
        int copies_to = 0, ln = 0;
        for (int i = 0; i < prog.plan.nsteps; i++) {
            const rt_step *s = &prog.plan.steps[i];
            copies_to += !strcmp(s->node, "cat") && !strcmp(s->runner, "cuda_copy") &&
                         s->payload_len == RT_CUDA_COPY_TO_PAYLOAD;
            ln += !strcmp(s->node, "ln") && strstr(s->impl, "layernorm_cuda:") != NULL;
        }
        /* the first part lands at offset 0 (the short payload), the nine others after it */
        CHECK(copies_to == 9 && ln == 1 && prog.ncopy_steps == 2 + 10);
        check_numbers(ctx, p, &prog);
        tune_cuda_program_free(&prog);
    }
    exec_plan_free(p);
    ir_graph_free(g);
}

int main(int argc, char **argv) {
    if (argc > 1) setenv("WPK_CUDA_DRIVER_LIBRARY", argv[1], 1); /* the mock driver */
    wpk_context *ctx = wpk_context_create();
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/wpk_cuda_prog_XXXXXX");
    CHECK(mkdtemp(tmp_dir) != NULL);
    setenv("WPK_CACHE_DIR", tmp_dir, 1);
    if (cg_cuda_nvrtc_available(ctx)) {
        fprintf(stderr, "NVRTC not available (%s): skipped\n", wpk_context_error(ctx));
        wpk_context_free(ctx);
        return 77;
    }
    ir_graph *g = small_cnn(PLAIN);
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
        if (prog.nkernel_nodes != 8 || prog.ncopy_steps != 2 || prog.plan.nsteps != 10)
            fprintf(stderr, "%d kernel nodes, %d copy steps, %d steps\n", prog.nkernel_nodes,
                    prog.ncopy_steps, prog.plan.nsteps);
        CHECK(prog.nkernel_nodes == 8 && prog.nview_nodes == 1 && prog.ncopy_steps == 2);
        CHECK(prog.nimages == 8 && prog.plan.nmodules == 8 && prog.plan.nsteps == 10);
        CHECK(prog.plan.workspace == (int64_t)p->mem.workspace && prog.plan.consts_len > 0);
        for (int i = 0; i < prog.nimages; i++) {
            char entry[64];
            snprintf(entry, sizeof entry, ".entry %s(", prog.names[i]);
            CHECK(strstr((const char *)prog.plan.modules[i].data, entry) != NULL);
        }
        /* what a .wpk would hold reads back whole */
        byte_writer w = {0};
        CHECK(rt_plan_write(ctx, &prog.plan, &w) == WPK_OK);
        byte_reader r = {w.data, w.data + w.len, false};
        rt_plan back;
        st = rt_plan_read(ctx, "small_cnn.wpk", &r, &back);
        if (st) fprintf(stderr, "read back: %s\n", wpk_context_error(ctx));
        CHECK(st == WPK_OK);
        if (st == WPK_OK) {
            CHECK(back.nsteps == 10 && back.nmodules == 8);
            CHECK(back.consts_len == prog.plan.consts_len);
            rt_plan_free(&back);
        }
        bw_free(&w);
        check_numbers(ctx, p, &prog);
        tune_cuda_program_free(&prog);
    }
    /* the runner: without a device it says so before compiling anything */
    tune_cuda_runner *runner = NULL;
    float x0[4 * 12 * 12] = {0}, y0[10];
    st = p ? tune_cuda_runner_create(ctx, p->g, &p->mem, NULL, true, &runner) : WPK_ERR_INTERNAL;
    if (st == WPK_OK) {
        char what[256];
        const float *in[1] = {x0};
        float *out[1] = {y0};
        CHECK(tune_cuda_runner_run(runner, (const void *const *)in, (void *const *)out) == WPK_OK);
        CHECK(tune_cuda_runner_run(runner, (const void *const *)in, (void *const *)out) == WPK_OK);
        fprintf(stderr, "runner: %s\n", tune_cuda_runner_describe(runner, what, sizeof what));
        CHECK(strstr(what, ", CUDA Graph") != NULL);
        tune_cuda_runner_free(runner);
    } else {
        CHECK_ERR(ctx, st, WPK_ERR_UNSUPPORTED, "CUDA unavailable: ");
        CHECK(runner == NULL);
    }
    exec_plan_free(p);
    ir_graph_free(g);

    test_wide(ctx, &shape);

    /* nodes without a CUDA template: all named at once, by the check and by the build */
    g = small_cnn(UNSUPPORTED);
    p = NULL;
    if (exec_plan_create(ctx, g, &shape, true, &p) == WPK_OK) {
        CHECK_ERR(ctx, tune_cuda_program_check(ctx, p->g), WPK_ERR_UNSUPPORTED,
                  "no CUDA kernel for 2 nodes: 'sin' (Sin), 'sin2' (Sin)");
        CHECK_ERR(ctx, tune_cuda_program_build(ctx, p->g, &p->mem, NULL, &prog),
                  WPK_ERR_UNSUPPORTED, "no CUDA kernel for 2 nodes: 'sin' (Sin), 'sin2' (Sin)");
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
