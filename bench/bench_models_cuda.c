/* bench_models_cuda.c -- a whole ONNX model on the CUDA backend, end to end at batch 1: the
 * graph optimized at -O2 (BN folded, epilogues fused into FusedConv/FusedGemm), specialized and
 * memory-planned, every node's CUDA kernel (template defaults, or nothing: the run says which
 * node has none), placed on the GPU and run as one CUDA Graph; latency per inference on the
 * host clock (inputs copied in and outputs out included, as ONNX Runtime's session.run is
 * timed), median and min of --iters runs after --warmup, every sample kept. The input is
 * seeded uniform in [-1, 1) (--seed), or --input FILE.npy; --output FILE.npy writes the first
 * output, for bench/models_cuda.py to compare with ONNX Runtime's CUDA provider and PyTorch.
 * Prints one JSON object (provenance: commit, GPU, driver, NVRTC, kernels). Exits 77 without a
 * GPU, saying "no CUDA device: <reason>".
 * --check needs no GPU and compiles nothing: it lists the specialized graph's ops with how the
 * CUDA program runs each (a template's kernel, device copies, a view) and exits 1 naming every
 * node that has no way to run.
 *
 *   bench_models_cuda MODEL.onnx [--iters N] [--warmup N] [--no-graph] [--input X.npy]
 *                     [--output Y.npy] [--seed S] [--check]
 */
#define _DEFAULT_SOURCE

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/exec_plan.h"
#include "api/model.h"
#include "base/context.h"
#include "base/npy.h"
#include "codegen/cuda/cg_cuda.h"
#include "passes/pass.h"
#include "runtime/cuda/cuda_rt.h"
#include "compile/cuda_program.h"
#include "wpk.h"

#ifndef WPK_GIT_COMMIT
#define WPK_GIT_COMMIT "unknown"
#endif

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int fail(wpk_context *ctx, const char *what) {
    fprintf(stderr, "bench_models_cuda: %s: %s\n", what, wpk_context_error(ctx));
    return 1;
}

/* --check: "op how count" per distinct (op, how) of the specialized graph, then the verdict. */
static int check_kernels(wpk_context *ctx, const ir_graph *g) {
    enum { MAX_ROWS = 256 };
    typedef struct op_row {
        const char *op, *how;
        int n;
    } op_row;
    op_row rows[MAX_ROWS];
    int nrows = 0;
    for (int k = 0; k < g->nnodes; k++) {
        const kernel_provider *t = NULL;
        const tune_cuda_node_impl how = tune_cuda_node_how(g, k, &t);
        static const char *const names[] = {"NONE", "dead", "view", "device copies", ""};
        if (how == TUNE_CUDA_NODE_DEAD) continue;
        const char *h = how == TUNE_CUDA_NODE_KERNEL ? t->name : names[how];
        int r = 0;
        while (r < nrows && (strcmp(rows[r].op, g->nodes[k].op_type) || strcmp(rows[r].how, h)))
            r++;
        if (r == nrows && nrows < MAX_ROWS) rows[nrows++] = (op_row){g->nodes[k].op_type, h, 0};
        if (r < nrows) rows[r].n++;
    }
    for (int r = 0; r < nrows; r++) printf("%-28s %-20s %d\n", rows[r].op, rows[r].how, rows[r].n);
    if (tune_cuda_program_check(ctx, g)) return fail(ctx, "check");
    printf("every node has a CUDA kernel\n");
    return 0;
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *in_npy = NULL, *out_npy = NULL;
    int iters = 100, warmup = 10;
    bool graph = true, check = false;
    unsigned seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool more = i + 1 < argc;
        if (!strcmp(a, "--iters") && more) iters = atoi(argv[++i]);
        else if (!strcmp(a, "--warmup") && more) warmup = atoi(argv[++i]);
        else if (!strcmp(a, "--no-graph")) graph = false;
        else if (!strcmp(a, "--check")) check = true;
        else if (!strcmp(a, "--input") && more) in_npy = argv[++i];
        else if (!strcmp(a, "--output") && more) out_npy = argv[++i];
        else if (!strcmp(a, "--seed") && more) seed = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (a[0] != '-' && !model_path) model_path = a;
        else {
            fprintf(stderr, "usage: bench_models_cuda MODEL.onnx [--iters N] [--warmup N] "
                    "[--no-graph] [--input X.npy] [--output Y.npy] [--seed S] [--check]\n");
            return 1;
        }
    }
    if (!model_path || iters < 1 || warmup < 0) {
        fprintf(stderr, "bench_models_cuda: a model and --iters >= 1 are needed\n");
        return 1;
    }
    wpk_context *ctx = wpk_context_create();
    rt_cuda_info info;
    if (!check && rt_cuda_probe(ctx, 0, &info)) {
        printf("SKIP: no CUDA device: %s\n",
               wpk_context_error(ctx) + strlen("CUDA unavailable: "));
        wpk_context_free(ctx);
        return 77;
    }
    wpk_model *model = NULL;
    if (wpk_model_load(ctx, model_path, &model)) return fail(ctx, "load");
    ir_graph *g = ir_graph_clone(model->g);
    pass_options po = pass_default_options();
    po.level = 2;
    if (!g || passes_run(ctx, g, &po)) return fail(ctx, "optimize");
    if (g->ninputs != 1) {
        fprintf(stderr, "bench_models_cuda: %d inputs; one is supported here\n", g->ninputs);
        return 1;
    }
    /* batch 1: symbolic dims bound to 1 */
    ir_tensor shape = g->values[g->inputs[0]].t;
    for (int d = 0; d < shape.ndim; d++)
        if (shape.dims[d] < 1) shape.dims[d] = 1;
    shape.data = NULL;
    exec_plan *plan = NULL;
    if (exec_plan_create(ctx, g, &shape, true, &plan)) return fail(ctx, "plan");
    if (check) {
        int rc = check_kernels(ctx, plan->g);
        exec_plan_free(plan);
        ir_graph_free(g);
        wpk_model_free(model);
        wpk_context_free(ctx);
        return rc;
    }
    double t0 = now_s();
    tune_cuda_runner *r = NULL;
    if (tune_cuda_runner_create(ctx, plan->g, &plan->mem, NULL, graph, &r))
        return fail(ctx, "compile");
    const double compile_s = now_s() - t0;
    const ir_graph *pg = plan->g;
    const ir_tensor *xt = &pg->values[pg->inputs[0]].t, *yt = &pg->values[pg->outputs[0]].t;
    size_t nx = ir_numel(xt), ny = ir_numel(yt);
    float *x = malloc(nx * 4), *y = malloc(ny * 4);
    if (in_npy) {
        npy_array a;
        if (npy_read(ctx, in_npy, &a)) return fail(ctx, "input");
        if (a.dtype != WPK_DTYPE_FLOAT32 || a.nbytes != nx * 4) {
            fprintf(stderr, "bench_models_cuda: %s is not float32 of %zu elements\n", in_npy, nx);
            return 1;
        }
        memcpy(x, a.data, nx * 4);
        npy_free(&a);
    } else {
        srand(seed);
        for (size_t i = 0; i < nx; i++) x[i] = (float)rand() / ((float)RAND_MAX + 1) * 2 - 1;
    }
    const void *in[1] = {x};
    void *out[1] = {y};
    for (int i = 0; i < warmup + 1; i++)
        if (tune_cuda_runner_run(r, in, out)) return fail(ctx, "run");
    double *s = malloc(sizeof *s * (size_t)iters);
    for (int i = 0; i < iters; i++) {
        double a = now_s();
        if (tune_cuda_runner_run(r, in, out)) return fail(ctx, "run");
        s[i] = now_s() - a;
    }
    if (out_npy && npy_write(ctx, out_npy, WPK_DTYPE_FLOAT32, yt->ndim, yt->dims, y))
        return fail(ctx, "output");
    char desc[512];
    tune_cuda_runner_describe(r, desc, sizeof desc);
    printf("{\"model\": \"%s\", \"commit\": \"%s\", \"backend\": \"%s\", \"nvrtc\": %d, "
           "\"graph\": %s, \"compile_s\": %.3f, \"iters\": %d, \"warmup\": %d, \"samples_ms\": [",
           model_path, WPK_GIT_COMMIT, desc, cg_cuda_nvrtc_version(), graph ? "true" : "false",
           compile_s, iters, warmup);
    for (int i = 0; i < iters; i++) printf("%s%.4f", i ? ", " : "", s[i] * 1e3);
    qsort(s, (size_t)iters, sizeof *s, cmp_double);
    printf("], \"median_ms\": %.4f, \"min_ms\": %.4f}\n", s[iters / 2] * 1e3, s[0] * 1e3);
    free(s), free(x), free(y);
    tune_cuda_runner_free(r);
    exec_plan_free(plan);
    ir_graph_free(g);
    wpk_model_free(model);
    wpk_context_free(ctx);
    return 0;
}
