/* test_templates.c -- the non-conv schedule templates (src/kernels: dense, pool2d,
 * global_pool, softmax, layernorm, elementwise) end to end. Each case is one hand-built node
 * (odd sizes, batch > 1, transposes, broadcasting bias and operands, 1-D MatMul operands,
 * pools with pads, strides, dilation, ceil_mode, count_include_pad, SAME padding and the
 * blocked layout, softmax axes of both opset forms, layer norm axes and broadcast parameters
 * (rows of whole vectors too, their sums in lanes),
 * every unary and binary elementwise op) whose template is built under its default config and
 * random legal configs (tune_config_random, fixed seed; WPK_TEST_SEED changes it), pre-packed,
 * lowered and run on the loop interpreter (bounds-checked); the default and the first random
 * config are also built by the cpu backend's kernel builder (src/compile: scratch arguments,
 * pack kernels), compiled all together in one translation unit, and run. Every result is
 * compared with the node's reference kernel (src/ops): max |got - want| <= 1e-5 * max(1,
 * max |want|). Also: which template the registry picks (and that it declines what it must:
 * MaxPool's Indices, Clip with run-time bounds, dynamic shapes), workload keys, the config
 * text form, and must-fail configs naming the knob. Last, the compile step on a small graph:
 * two Gemms of one workload share a kernel with their own pre-packed weights, a node without
 * a template runs its reference kernel, and the program's outputs match the reference
 * interpreter's, run after run. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "api/exec_plan.h"
#include "check.h"
#include "kernels/cpu_kernel.h"
#include "kernels/graph_tasks.h"
#include "kernels/cpu_unit.h"
#include "ir/graph.h"
#include "loop/interp.h"
#include "loop/lower.h"
#include "kernels/provider.h"

#define TOL 1e-5
#define RANDOM_CONFIGS 3
#define MAX_IN 4

/* A node: op, inputs (shape; constant or not; NULL shape = omitted), attributes. */
typedef struct tcase {
    const char *name;
    const char *op, *domain;
    int opset;
    int nin;
    int ndims[MAX_IN];
    int64_t dims[MAX_IN][6];
    bool constant[MAX_IN];
    bool positive;              /* inputs in (0.1, 2): Log, Sqrt, Pow's base */
    const char *attrs;          /* "name=i:3" "name=f:0.5" "name=s:Relu" "name=is:1,1" ; separated */
    const char *expect;         /* the template the registry must pick; NULL: none */
} tcase;

#define D(...) {__VA_ARGS__}

static const tcase CASES[] = {
    /* ---- dense ---- */
    {"gemm const B", "Gemm", "", 17, 2, {2, 2}, {D(5, 7), D(7, 9)}, {0, 1}, 0, "", "dense"},
    {"gemm transB bias (fc)", "Gemm", "", 17, 3, {2, 2, 1}, {D(3, 67), D(45, 67), D(45)},
     {0, 1, 1}, 0, "transB=i:1", "dense"},
    {"gemm transA alpha beta C[M,1]", "Gemm", "", 17, 3, {2, 2, 2}, {D(7, 5), D(7, 10), D(5, 1)},
     {0, 1, 1}, 0, "transA=i:1;alpha=f:0.5;beta=f:2", "dense"},
    {"gemm dynamic B, C scalar", "Gemm", "", 17, 3, {2, 2, 0}, {D(4, 6), D(6, 33), D(0)},
     {0, 0, 1}, 0, "beta=f:-1", "dense"},
    {"gemm both transposed, C[M,N]", "Gemm", "", 17, 3, {2, 2, 2}, {D(9, 3), D(17, 9), D(3, 17)},
     {0, 1, 0}, 0, "transA=i:1;transB=i:1", "dense"},
    {"fused gemm res + gelu", "FusedGemm", "wpk", 1, 4, {2, 2, 1, 2},
     {D(6, 20), D(31, 20), D(31), D(6, 31)}, {0, 1, 1, 0}, 0, "transB=i:1;activation=s:Gelu",
     "dense"},
    {"fused gemm leaky", "FusedGemm", "wpk", 1, 3, {2, 2, 2}, {D(2, 5), D(5, 64), D(1, 64)},
     {0, 1, 1}, 0, "activation=s:LeakyRelu;alpha=f:0.2", "dense"},
    {"matmul batched const B", "MatMul", "", 13, 2, {4, 2}, {D(2, 3, 5, 7), D(7, 4)}, {0, 1}, 0,
     "", "dense"},
    {"matmul batch broadcast", "MatMul", "", 13, 2, {4, 3}, {D(2, 1, 5, 7), D(3, 7, 6)}, {0, 0},
     0, "", "dense"},
    {"matmul 1-D A", "MatMul", "", 13, 2, {1, 2}, {D(7), D(7, 19)}, {0, 1}, 0, "", "dense"},
    {"matmul 1-D B", "MatMul", "", 13, 2, {3, 1}, {D(2, 5, 7), D(7)}, {0, 0}, 0, "", "dense"},
    {"fused matmul bias res relu", "FusedMatMul", "wpk", 1, 4, {3, 2, 1, 3},
     {D(2, 3, 11), D(11, 13), D(13), D(2, 3, 13)}, {0, 1, 1, 0}, 0, "activation=s:Relu",
     "dense"},
    /* ---- pool2d ---- */
    {"maxpool 3x3 s2 p1", "MaxPool", "", 13, 1, {4}, {D(1, 5, 13, 12)}, {0}, 0,
     "kernel_shape=is:3,3;strides=is:2,2;pads=is:1,1,1,1", "pool2d"},
    {"maxpool 2x2 s2 batch 2", "MaxPool", "", 13, 1, {4}, {D(2, 3, 8, 9)}, {0}, 0,
     "kernel_shape=is:2,2;strides=is:2,2", "pool2d"},
    {"maxpool ceil dilation asym pads", "MaxPool", "", 13, 1, {4}, {D(1, 2, 11, 10)}, {0}, 0,
     "kernel_shape=is:3,2;strides=is:2,3;dilations=is:2,1;pads=is:1,0,2,1;ceil_mode=i:1",
     "pool2d"},
    {"maxpool SAME_UPPER", "MaxPool", "", 13, 1, {4}, {D(1, 3, 7, 8)}, {0}, 0,
     "kernel_shape=is:3,3;strides=is:2,2;auto_pad=s:SAME_UPPER", "pool2d"},
    {"maxpool 1x1 s2", "MaxPool", "", 13, 1, {4}, {D(1, 4, 7, 7)}, {0}, 0,
     "kernel_shape=is:1,1;strides=is:2,2", "pool2d"},
    {"avgpool pads not counted", "AveragePool", "", 13, 1, {4}, {D(2, 3, 9, 7)}, {0}, 0,
     "kernel_shape=is:3,3;pads=is:1,1,1,1", "pool2d"},
    {"avgpool pads counted, ceil", "AveragePool", "", 13, 1, {4}, {D(1, 4, 10, 11)}, {0}, 0,
     "kernel_shape=is:3,3;strides=is:2,2;pads=is:1,1,1,1;count_include_pad=i:1;ceil_mode=i:1",
     "pool2d"},
    {"avgpool 2x2 s2 no pad", "AveragePool", "", 13, 1, {4}, {D(1, 8, 6, 6)}, {0}, 0,
     "kernel_shape=is:2,2;strides=is:2,2", "pool2d"},
    {"blocked maxpool 3x3 s2 p1", "MaxPoolNCHWc", "wpk", 1, 1, {5}, {D(1, 2, 9, 10, 8)}, {0}, 0,
     "kernel_shape=is:3,3;strides=is:2,2;pads=is:1,1,1,1", "pool2d"},
    {"blocked avgpool ceil, counted, batch 2", "AveragePoolNCHWc", "wpk", 1, 1, {5},
     {D(2, 1, 7, 7, 16)}, {0}, 0,
     "kernel_shape=is:2,2;strides=is:2,2;pads=is:0,0,1,1;count_include_pad=i:1;ceil_mode=i:1",
     "pool2d"},
    /* ---- global_pool ---- */
    {"global avg", "GlobalAveragePool", "", 13, 1, {4}, {D(2, 5, 7, 9)}, {0}, 0, "",
     "global_pool"},
    {"global max", "GlobalMaxPool", "", 13, 1, {4}, {D(1, 70, 7, 7)}, {0}, 0, "", "global_pool"},
    {"global avg 1-D spatial", "GlobalAveragePool", "", 13, 1, {3}, {D(2, 3, 10)}, {0}, 0, "",
     "global_pool"},
    {"global max 3-D spatial", "GlobalMaxPool", "", 13, 1, {5}, {D(1, 3, 4, 3, 5)}, {0}, 0, "",
     "global_pool"},
    /* ---- softmax ---- */
    {"softmax last axis", "Softmax", "", 13, 1, {2}, {D(3, 37)}, {0}, 0, "", "softmax"},
    {"softmax middle axis", "Softmax", "", 13, 1, {3}, {D(2, 5, 19)}, {0}, 0, "axis=i:1",
     "softmax"},
    {"softmax axis 0 wide", "Softmax", "", 13, 1, {2}, {D(4, 300)}, {0}, 0, "axis=i:0",
     "softmax"},
    {"softmax opset 11 flattens", "Softmax", "", 11, 1, {3}, {D(2, 3, 4)}, {0}, 0, "axis=i:1",
     "softmax"},
    /* ---- layernorm ---- */
    {"layernorm last axis", "LayerNormalization", "", 17, 3, {3, 1, 1}, {D(2, 5, 16), D(16), D(16)},
     {0, 1, 1}, 0, "", "layernorm"},
    {"layernorm two axes, no bias", "LayerNormalization", "", 17, 2, {3, 2}, {D(3, 7, 9), D(7, 9)},
     {0, 1}, 0, "axis=i:-2;epsilon=f:0.001", "layernorm"},
    {"layernorm broadcast scale", "LayerNormalization", "", 17, 3, {3, 2, 1},
     {D(4, 3, 10), D(1, 10), D(1)}, {0, 1, 1}, 0, "axis=i:1", "layernorm"},
    /* rows of whole vectors: the sums in vector lanes (te_layer_norm_lanes) */
    {"layernorm lanes, two axes", "LayerNormalization", "", 17, 3, {3, 2, 2},
     {D(3, 4, 12), D(4, 12), D(4, 12)}, {0, 1, 1}, 0, "axis=i:1", "layernorm"},
    {"layernorm lanes, one-value scale", "LayerNormalization", "", 17, 3, {2, 1, 1},
     {D(5, 32), D(1), D(1)}, {0, 1, 1}, 0, "epsilon=f:0.01", "layernorm"},
    /* ---- elementwise ---- */
    {"relu", "Relu", "", 13, 1, {3}, {D(2, 3, 37)}, {0}, 0, "", "elementwise"},
    {"leaky relu", "LeakyRelu", "", 13, 1, {2}, {D(5, 9)}, {0}, 0, "alpha=f:0.3", "elementwise"},
    {"sigmoid", "Sigmoid", "", 13, 1, {4}, {D(1, 16, 7, 7)}, {0}, 0, "", "elementwise"},
    {"hard sigmoid", "HardSigmoid", "", 13, 1, {1}, {D(33)}, {0}, 0, "alpha=f:0.3;beta=f:0.4",
     "elementwise"},
    {"hard swish", "HardSwish", "", 14, 1, {2}, {D(3, 50)}, {0}, 0, "", "elementwise"},
    {"tanh", "Tanh", "", 13, 1, {2}, {D(4, 4)}, {0}, 0, "", "elementwise"},
    {"erf", "Erf", "", 13, 1, {2}, {D(3, 21)}, {0}, 0, "", "elementwise"},
    {"gelu", "Gelu", "", 20, 1, {2}, {D(3, 21)}, {0}, 0, "", "elementwise"},
    {"gelu tanh", "Gelu", "", 20, 1, {2}, {D(3, 21)}, {0}, 0, "approximate=s:tanh",
     "elementwise"},
    {"sqrt", "Sqrt", "", 13, 1, {2}, {D(6, 11)}, {0}, 1, "", "elementwise"},
    {"exp", "Exp", "", 13, 1, {2}, {D(6, 11)}, {0}, 0, "", "elementwise"},
    {"log", "Log", "", 13, 1, {2}, {D(6, 11)}, {0}, 1, "", "elementwise"},
    {"neg", "Neg", "", 13, 1, {2}, {D(6, 11)}, {0}, 0, "", "elementwise"},
    {"abs", "Abs", "", 13, 1, {2}, {D(6, 11)}, {0}, 0, "", "elementwise"},
    {"reciprocal", "Reciprocal", "", 13, 1, {2}, {D(6, 11)}, {0}, 1, "", "elementwise"},
    {"clip 0..6", "Clip", "", 13, 3, {2, 0, 0}, {D(2, 50), D(0), D(0)}, {0, 1, 1}, 0, "",
     "elementwise"},
    {"add same shape", "Add", "", 14, 2, {4, 4}, {D(2, 3, 5, 7), D(2, 3, 5, 7)}, {0, 0}, 0, "",
     "elementwise"},
    {"add per-channel bias", "Add", "", 14, 2, {4, 3}, {D(1, 16, 9, 9), D(16, 1, 1)}, {0, 1}, 0,
     "", "elementwise"},
    {"mul trailing broadcast", "Mul", "", 14, 2, {4, 2}, {D(2, 3, 4, 5), D(4, 5)}, {0, 1}, 0, "",
     "elementwise"},
    {"sub both broadcast", "Sub", "", 14, 2, {3, 3}, {D(2, 1, 5), D(1, 4, 1)}, {0, 0}, 0, "",
     "elementwise"},
    {"div scalar", "Div", "", 14, 2, {2, 0}, {D(7, 13), D(0)}, {0, 1}, 1, "", "elementwise"},
    {"pow", "Pow", "", 15, 2, {2, 1}, {D(3, 9), D(9)}, {0, 0}, 1, "", "elementwise"},
    {"floor", "Floor", "", 13, 1, {2}, {D(6, 11)}, {0}, 0, "", "elementwise"},
    {"ceil", "Ceil", "", 13, 1, {2}, {D(6, 11)}, {0}, 0, "", "elementwise"},
    {"sign", "Sign", "", 13, 1, {2}, {D(6, 11)}, {0}, 0, "", "elementwise"},
    {"elu", "Elu", "", 6, 1, {2}, {D(6, 11)}, {0}, 0, "alpha=f:0.7", "elementwise"},
    {"selu", "Selu", "", 6, 1, {2}, {D(6, 11)}, {0}, 0, "", "elementwise"},
    {"softplus", "Softplus", "", 1, 1, {2}, {D(6, 11)}, {0}, 0, "", "elementwise"},
    {"softsign", "Softsign", "", 1, 1, {2}, {D(6, 11)}, {0}, 0, "", "elementwise"},
    {"mish", "Mish", "", 18, 1, {3}, {D(2, 6, 11)}, {0}, 0, "", "elementwise"},
    {"prelu per-channel slope", "PRelu", "", 16, 2, {4, 3}, {D(1, 16, 9, 9), D(16, 1, 1)},
     {0, 1}, 0, "", "elementwise"},
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

static unsigned rng_state = 777;
static float frand(void) {
    rng_state = rng_state * 1103515245u + 12345u;
    return (float)((rng_state >> 9) & 0xffff) / 32768.0f - 1.0f;
}

static float *buffer(int64_t n, bool positive) {
    float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64 + 64));
    for (int64_t i = 0; i < n; i++) p[i] = positive ? 0.1f + 0.95f * (frand() + 1.0f) : frand();
    return p;
}

/* Attributes from "name=i:3;name=f:0.5;name=s:Relu;name=is:1,1". */
static void set_attrs(ir_graph *g, ir_node *n, const char *spec) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *a = strtok_r(buf, ";", &save); a; a = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(a, '='), *colon = eq ? strchr(eq, ':') : NULL;
        if (!colon) continue;
        *eq = 0;
        *colon = 0;
        const char *kind = eq + 1, *val = colon + 1;
        if (!strcmp(kind, "i")) ir_node_set_int(g, n, a, atoll(val));
        else if (!strcmp(kind, "f")) ir_node_set_float(g, n, a, strtof(val, NULL));
        else if (!strcmp(kind, "s")) ir_node_set_str(g, n, a, val);
        else {
            int64_t v[8];
            int k = 0;
            for (char *p = (char *)val; *p && k < 8;) {
                v[k++] = strtoll(p, &p, 10);
                if (*p == ',') p++;
            }
            ir_node_set_ints(g, n, a, v, k);
        }
    }
}

typedef struct problem {
    ir_graph *g;
    ir_node *node;
    ir_tensor t[MAX_IN + 1];
    ir_tensor *in[MAX_IN], *out[2];
    float *data[MAX_IN];   /* each input's data (also for inputs the kernel sees as dynamic) */
    int64_t ny;
    float *want;
} problem;

static bool problem_init(problem *p, const tcase *tc, wpk_context *ctx) {
    memset(p, 0, sizeof *p);
    p->g = ir_graph_create();
    int k = ir_graph_add_node(p->g, tc->name, tc->op, tc->domain, tc->opset, tc->nin, 1);
    ir_node *n = p->node = &p->g->nodes[k];
    set_attrs(p->g, n, tc->attrs);
    for (int i = 0; i < tc->nin; i++) {
        ir_tensor *t = &p->t[i];
        *t = (ir_tensor){WPK_DTYPE_FLOAT32, tc->ndims[i], {0}, NULL};
        memcpy(t->dims, tc->dims[i], sizeof(int64_t) * (size_t)tc->ndims[i]);
        p->data[i] = buffer(ir_numel(t), tc->positive);
        t->data = p->data[i];
        p->in[i] = t;
    }
    if (!strcmp(tc->op, "Clip")) { /* bounds 0 and 6 around data in [-8, 8) */
        p->data[1][0] = 0.0f;
        p->data[2][0] = 6.0f;
        for (int64_t i = 0; i < ir_numel(p->in[0]); i++) p->data[0][i] *= 8.0f;
    }
    ir_tensor *y = &p->t[MAX_IN];
    p->out[0] = y;
    *y = (ir_tensor){0};
    if (ir_op_get(n->op)->shape(ctx, n, p->in, p->out)) {
        fprintf(stderr, "%s: shape: %s\n", tc->name, wpk_context_error(ctx));
        return false;
    }
    p->ny = ir_numel(y);
    y->data = aligned_alloc(64, (size_t)((p->ny * 4 + 63) / 64 * 64 + 64));
    p->want = malloc(sizeof(float) * (size_t)p->ny + 4);
    if (ir_op_get(n->op)->ref(ctx, n, p->in, p->out)) {
        fprintf(stderr, "%s: reference: %s\n", tc->name, wpk_context_error(ctx));
        return false;
    }
    memcpy(p->want, y->data, sizeof(float) * (size_t)p->ny);
    /* what the templates see: data only for the constant inputs */
    for (int i = 0; i < tc->nin; i++)
        if (!tc->constant[i]) p->t[i].data = NULL;
    return true;
}

static void problem_free(problem *p) {
    for (int i = 0; i < MAX_IN; i++) free(p->data[i]);
    free(p->t[MAX_IN].data);
    free(p->want);
    ir_graph_free(p->g);
}

static bool close_enough(const problem *p, const float *got, const char *what) {
    double err = 0, big = 1;
    int64_t at = 0;
    for (int64_t i = 0; i < p->ny; i++) {
        double d = fabs((double)got[i] - p->want[i]);
        if (!(d <= err)) err = d, at = i;
        if (fabs(p->want[i]) > big) big = fabs(p->want[i]);
    }
    if (err <= TOL * big) return true;
    fprintf(stderr, "%s: [%lld] = %g, want %g (max error %g)\n", what, (long long)at, got[at],
            p->want[at], err);
    return false;
}

/* The kernel's input arguments: the node's present inputs in order (a kernel may take fewer:
 * Clip's bounds are baked in). */
static int kernel_inputs(const problem *p, void **args, int max) {
    int n = 0;
    for (int i = 0; i < p->node->nin && n < max; i++)
        if (p->in[i]) args[n++] = p->data[i];
    return n;
}

/* Build cfg, pre-pack on the interpreter, lower, interpret, compare. */
static void interpret(wpk_context *ctx, const tcase *tc, problem *p, const tune_task *task,
                      const tune_space *sp, const tune_config *cfg, const char *label) {
    strbuf cs = {0};
    tune_config_print(sp, cfg, &cs);
    char what[512];
    snprintf(what, sizeof what, "%s [%s %s]", tc->name, label, cs.s ? cs.s : "");
    sb_free(&cs);
    te_ctx c;
    te_ctx_init(&c, ctx);
    tune_build b;
    wpk_status st = task->tmpl->build(task->tmpl, &c, task, sp, cfg, &b);
    if (st) fprintf(stderr, "%s: build: %s\n", what, wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    void *args[TUNE_MAX_ARGS * 2];
    float *packed[TUNE_MAX_ARGS] = {0};
    int ai = st ? 0 : kernel_inputs(p, args, TUNE_MAX_ARGS);
    CHECK(st || ai >= b.ninputs);
    for (int i = 0; !st && i < b.ninputs; i++) {
        if (!b.prepack[i]) continue;
        CHECK(te_tensor_is_constant(b.prepack[i]) && tc->constant[i]);
        te_schedule *ps = te_schedule_create(&c, &b.prepack[i], 1);
        loop_func *pf = NULL;
        CHECK(ps && loop_lower(&c, ps, "prepack", (te_tensor *[]){b.prepack_src[i], b.prepack[i]},
                               2, &pf) == WPK_OK);
        if (!pf) break;
        int64_t size = 1;
        for (int d = 0; d < b.prepack[i]->ndim; d++) size *= b.prepack[i]->shape[d];
        packed[i] = aligned_alloc(64, (size_t)((size * 4 + 63) / 64 * 64));
        CHECK(loop_interp_run(ctx, pf, (void *[]){args[i], packed[i]}) == WPK_OK);
        args[i] = packed[i];
    }
    loop_func *f = NULL;
    if (!st) {
        CHECK(b.nargs == b.ninputs + 1);
        args[b.ninputs] = p->t[MAX_IN].data;
        st = loop_lower(&c, b.schedule, "kernel", b.args, b.nargs, &f);
        if (st) fprintf(stderr, "%s: lower: %s\n", what, wpk_context_error(ctx));
        CHECK(st == WPK_OK);
    }
    if (f) {
        float *y = p->t[MAX_IN].data;
        for (int64_t i = 0; i < p->ny; i++) y[i] = NAN;
        st = loop_interp_run(ctx, f, args);
        if (st) fprintf(stderr, "%s: interpreter: %s\n", what, wpk_context_error(ctx));
        CHECK(!st && close_enough(p, y, what));
    }
    for (int i = 0; i < TUNE_MAX_ARGS; i++) free(packed[i]);
    te_ctx_free(&c);
}

/* Kernels built by src/compile for the compiled pass, with what they need to run. */
#define MAX_KERNELS 256
typedef struct compiled {
    cpu_kernel k;
    int problem;
    char what[300];
} compiled;
static compiled kernels[MAX_KERNELS];
static int nkernels;

static void add_compiled(wpk_context *ctx, const tcase *tc, int pi, const tune_task *task,
                         const tune_space *sp, const tune_config *cfg) {
    if (nkernels == MAX_KERNELS) return;
    compiled *k = &kernels[nkernels];
    strbuf cs = {0};
    tune_config_print(sp, cfg, &cs);
    snprintf(k->what, sizeof k->what, "%s [compiled %s]", tc->name, cs.s ? cs.s : "");
    wpk_status st = cpu_kernel_build(ctx, task, nkernels, cs.s, NULL, &k->k);
    sb_free(&cs);
    if (st) fprintf(stderr, "%s: %s\n", k->what, wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    if (st) return;
    k->problem = pi;
    nkernels++;
}

static void run_compiled(wpk_context *ctx, problem *probs) {
    cpu_kernel *ks[MAX_KERNELS];
    for (int i = 0; i < nkernels; i++) ks[i] = &kernels[i].k;
    cpu_units u;
    wpk_status st = cpu_units_compile(ctx, ks, nkernels, &u);
    if (st) fprintf(stderr, "compile: %s\n", wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    printf("%d kernels compiled in %d unit(s), %d compiler run(s)\n", nkernels, u.nunits, u.compiled);
    for (int i = 0; !st && i < nkernels; i++) {
        compiled *c = &kernels[i];
        problem *p = &probs[c->problem];
        void *args[CPU_MAX_KERNEL_ARGS], *scratch = NULL;
        float *packed[TUNE_MAX_ARGS] = {0};
        int ni = kernel_inputs(p, args, TUNE_MAX_ARGS);
        CHECK(ni >= c->k.ninputs && c->k.noutputs == 1 && c->k.fn);
        for (int a = 0; a < c->k.ninputs; a++) {
            if (c->k.pack_numel[a] <= 0) continue;
            packed[a] = aligned_alloc(64, (size_t)((c->k.pack_numel[a] * 4 + 63) / 64 * 64));
            c->k.pack_fn[a]((void *[]){args[a], packed[a]});
            args[a] = packed[a];
        }
        int na = c->k.ninputs;
        float *y = p->t[MAX_IN].data;
        args[na++] = y;
        if (c->k.scratch_bytes) scratch = aligned_alloc(64, (size_t)c->k.scratch_bytes);
        for (int s = 0; s < c->k.nscratch; s++) args[na++] = (char *)scratch + c->k.scratch_off[s];
        for (int64_t e = 0; e < p->ny; e++) y[e] = NAN;
        c->k.fn(args);
        CHECK(close_enough(p, y, c->what));
        free(scratch);
        for (int a = 0; a < TUNE_MAX_ARGS; a++) free(packed[a]);
    }
    cpu_units_free(&u);
    for (int i = 0; i < nkernels; i++) cpu_kernel_free(&kernels[i].k);
}

static uint64_t seed_of(void) {
    const char *s = getenv("WPK_TEST_SEED");
    return s && *s ? strtoull(s, NULL, 10) : 20240611u;
}

static void test_case(wpk_context *ctx, const tcase *tc, int pi, problem *p, uint64_t *rng) {
    const kernel_provider *t = kernel_provider_for(p->node, p->in, p->out);
    if (!t || !tc->expect || strcmp(t->name, tc->expect)) {
        fprintf(stderr, "%s: template %s, expected %s\n", tc->name, t ? t->name : "none",
                tc->expect ? tc->expect : "none");
        check_failures++;
        return;
    }
    tune_task task;
    tune_task_init(&task, t, p->node, p->in, p->out);
    CHECK(!strncmp(task.key, t->name, strlen(t->name)) && task.key[strlen(t->name)] == ':');
    CHECK(task.flops > 0);
    tune_space sp;
    t->space(t, &task, &sp);
    CHECK(sp.nknobs > 0 && tune_space_size(&sp) >= 1);
    tune_config cfg;
    t->default_config(t, &task, &sp, &cfg);
    /* the text form round-trips */
    strbuf cs = {0};
    tune_config_print(&sp, &cfg, &cs);
    tune_config back;
    CHECK(tune_config_parse(ctx, &sp, cs.s, &back) == WPK_OK &&
          !memcmp(back.choice, cfg.choice, sizeof(int) * (size_t)sp.nknobs));
    sb_free(&cs);
    interpret(ctx, tc, p, &task, &sp, &cfg, "default");
    add_compiled(ctx, tc, pi, &task, &sp, &cfg);
    for (int r = 0; r < RANDOM_CONFIGS; r++) {
        tune_config_random(&sp, rng, &cfg);
        interpret(ctx, tc, p, &task, &sp, &cfg, "random");
        if (r == 0) add_compiled(ctx, tc, pi, &task, &sp, &cfg);
    }
}

/* Nodes no template may take. */
static void test_declines(wpk_context *ctx) {
    problem p;
    /* MaxPool with its Indices output */
    CHECK(problem_init(&p, &CASES[12], ctx));
    ir_tensor idx = {WPK_DTYPE_INT64, 4, {1, 5, 7, 6}, NULL};
    ir_node two = *p.node;
    int outs[2] = {0, 1};
    two.nout = 2;
    two.out = outs;
    ir_tensor *o2[2] = {p.out[0], &idx};
    CHECK(kernel_provider_for(&two, p.in, o2) == NULL);
    problem_free(&p);
    /* Clip whose bounds are known only at run time */
    const tcase *clip = NULL;
    for (int i = 0; i < NCASES; i++)
        if (!strcmp(CASES[i].op, "Clip")) clip = &CASES[i];
    CHECK(clip && problem_init(&p, clip, ctx));
    CHECK(kernel_provider_for(p.node, p.in, p.out) != NULL);
    p.t[2].data = NULL;
    CHECK(kernel_provider_for(p.node, p.in, p.out) == NULL);
    problem_free(&p);
    /* a dim not known statically */
    CHECK(problem_init(&p, &CASES[0], ctx));
    p.t[0].dims[0] = -1;
    CHECK(kernel_provider_for(p.node, p.in, p.out) == NULL);
    problem_free(&p);
}

/* Workload keys: what tells two workloads apart. */
static void test_keys(wpk_context *ctx) {
    problem p;
    static const struct {
        int i;
        const char *key;
    } want[] = {
        {1, "dense:Gemm,a=3x67,b=45x67,tb,c=45"},
        {5, "dense:FusedGemm,a=6x20,b=31x20,tb,c=31,res,act=gelu"},
        {12, "pool2d:MaxPool,x=1x5x13x12,k3,3,st2,2,pd1,1,1,1,dl1,1"},
        {22, "global_pool:GlobalAveragePool,x=2x5x7x9"},
        {27, "softmax:outer2,len5,inner19"},
        {29, "softmax:outer2,len12,inner1"},
        {30, "layernorm:x=2x5x16,axis2,scale=16,bias=16,eps1e-05"},
        {36, "elementwise:LeakyRelu(0.3):5x9"},
        {52, "elementwise:Add:1x16x9x9,16x1x1"},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        CHECK(problem_init(&p, &CASES[want[k].i], ctx));
        const kernel_provider *t = kernel_provider_for(p.node, p.in, p.out);
        tune_task task;
        if (t) tune_task_init(&task, t, p.node, p.in, p.out);
        CHECK(t && !strcmp(task.key, want[k].key));
        if (t && strcmp(task.key, want[k].key))
            fprintf(stderr, "key of '%s': %s, want %s\n", CASES[want[k].i].name, task.key,
                    want[k].key);
        problem_free(&p);
    }
}

/* Configs that must be refused, naming the knob. */
static void test_must_fail(wpk_context *ctx) {
    problem p, q;
    CHECK(problem_init(&p, &CASES[1], ctx));  /* N = 45 */
    CHECK(problem_init(&q, &CASES[6], ctx));  /* N = 64, M = 2 */
    const kernel_provider *t = kernel_provider_for(p.node, p.in, p.out);
    CHECK(t != NULL);
    if (!t) return;
    tune_task task, other;
    tune_task_init(&task, t, p.node, p.in, p.out);
    tune_task_init(&other, t, q.node, q.in, q.out);
    tune_space sp, osp;
    t->space(t, &task, &sp);
    t->space(t, &other, &osp);
    tune_config cfg;
    t->default_config(t, &task, &sp, &cfg);
    te_ctx c;
    te_ctx_init(&c, ctx);
    tune_build b;
    tune_config bad = cfg;
    bad.choice[1] = sp.knobs[1].nvalues;
    CHECK_ERR(ctx, t->build(t, &c, &task, &sp, &bad, &b), WPK_ERR_INVALID_ARG, sp.knobs[1].name);
    /* a config of another workload's space: tile_n 64 is legal for N = 64, not for N = 45
       (48 covers it) */
    tune_config ocfg;
    t->default_config(t, &other, &osp, &ocfg);
    tune_config_set(&osp, &ocfg, "tile_n", 64);
    CHECK(tune_config_get(&osp, &ocfg, "tile_n", 0) == 64);
    CHECK_ERR(ctx, t->build(t, &c, &task, &osp, &ocfg, &b), WPK_ERR_INVALID_ARG,
              "knob 'tile_n' = 64 is not a legal value");
    /* partial configs through the cpu backend's resolver */
    tune_config r;
    CHECK(cpu_config_resolve(ctx, &task, &sp, "tile_m=2", &r) == WPK_OK &&
          tune_config_get(&sp, &r, "tile_m", 0) == 2);
    CHECK_ERR(ctx, cpu_config_resolve(ctx, &task, &sp, "tile_q=2", &r), WPK_ERR_INVALID_ARG,
              "no knob 'tile_q'");
    CHECK_ERR(ctx, cpu_config_resolve(ctx, &task, &sp, "tile_n=5", &r), WPK_ERR_INVALID_ARG,
              "knob 'tile_n'");
    CHECK_ERR(ctx, cpu_config_resolve(ctx, &task, &sp, "tile_m", &r), WPK_ERR_INVALID_ARG,
              "expected knob=value");
    te_ctx_free(&c);
    problem_free(&p);
    problem_free(&q);
}

/* ---- the compile step (src/compile/cpu_compile.h) on a hand-built graph ---- */

static int g_node(ir_graph *g, const char *type, const char *out, int nin, const int *ins) {
    int k = ir_graph_add_node(g, out, type, "", 13, nin, 1);
    g->nodes[k].attrs = arena_alloc(&g->mem, sizeof(ir_attr));
    for (int i = 0; i < nin; i++) g->nodes[k].in[i] = ins[i];
    int v = ir_graph_add_value(g, out);
    g->nodes[k].out[0] = v;
    g->values[v].producer = k;
    return v;
}

static int g_const(ir_graph *g, const char *name, int ndim, const int64_t *dims) {
    ir_tensor t = {.dtype = WPK_DTYPE_FLOAT32, .ndim = ndim};
    memcpy(t.dims, dims, sizeof(int64_t) * (size_t)ndim);
    t.data = buffer(ir_numel(&t), false);
    int v = ir_graph_add_const(g, name, &t);
    free(t.data);
    return v;
}

static void test_program(wpk_context *ctx) {
    ir_graph *g = ir_graph_create();
    g->opset = 13;
    g->inputs = arena_alloc(&g->mem, sizeof(int) * 4);
    g->outputs = arena_alloc(&g->mem, sizeof(int) * 4);
    int x[2];
    for (int i = 0; i < 2; i++) {
        x[i] = ir_graph_add_value(g, i ? "x2" : "x1");
        g->values[x[i]].is_input = true;
        g->values[x[i]].t = (ir_tensor){WPK_DTYPE_FLOAT32, 2, {3, 40}, NULL};
        g->inputs[g->ninputs++] = x[i];
    }
    int w1 = g_const(g, "w1", 2, (const int64_t[]){24, 40}), c1 = g_const(g, "c1", 1, (const int64_t[]){24});
    int w2 = g_const(g, "w2", 2, (const int64_t[]){24, 40}), c2 = g_const(g, "c2", 1, (const int64_t[]){24});
    int y1 = g_node(g, "Gemm", "gemm1", 3, (const int[]){x[0], w1, c1});
    ir_node_set_int(g, &g->nodes[g->values[y1].producer], "transB", 1);
    int r = g_node(g, "Relu", "relu", 1, (const int[]){y1});
    int y2 = g_node(g, "Gemm", "gemm2", 3, (const int[]){x[1], w2, c2});
    ir_node_set_int(g, &g->nodes[g->values[y2].producer], "transB", 1);
    int a = g_node(g, "Add", "add", 2, (const int[]){r, y2});
    int sm = g_node(g, "Softmax", "softmax", 1, (const int[]){a});
    int t = g_node(g, "Transpose", "transpose", 1, (const int[]){sm});
    ir_node_set_ints(g, &g->nodes[g->values[t].producer], "perm", (const int64_t[]){1, 0}, 2);
    g->outputs[g->noutputs++] = t;
    CHECK(ir_graph_toposort(ctx, g) == WPK_OK);

    ir_tensor in[2];
    for (int i = 0; i < 2; i++) {
        in[i] = g->values[x[i]].t;
        in[i].data = buffer(3 * 40, false);
    }
    exec_plan *p = NULL;
    CHECK(exec_plan_create(ctx, g, in, true, &p) == WPK_OK);
    if (!p) return;
    cpu_tasks tasks;
    CHECK(cpu_tasks_collect(ctx, p->g, p->vals, &tasks) == WPK_OK);
    strbuf ref = {0};
    cpu_tasks_print_reference(&tasks, p->g, &ref);
    CHECK(ref.s && !strcmp(ref.s, "reference kernels (no template): Transpose (1 node)"));
    sb_free(&ref);
    CHECK(tasks.ntasks == 4 && tasks.tasks[0].count == 2 &&
          !strcmp(tasks.tasks[0].task.key, "dense:Gemm,a=3x40,b=24x40,tb,c=24"));
    cpu_tasks_free(&tasks);
    CHECK(exec_plan_compile_cpu(ctx, p, 0) == WPK_OK);
    const cpu_compile_stats *st = p->cpu ? cpu_program_stats(p->cpu) : NULL;
    CHECK(st && st->kernels == 4 && st->kernel_nodes == 5 && st->prepacked == 2 &&
          st->fallbacks == 0 && st->units == 1);

    /* the reference: the same plan's graph on the reference interpreter */
    ir_exec ex = {0};
    CHECK(ir_exec_init(ctx, &ex, p->g) == WPK_OK);
    for (int i = 0; i < 2; i++) {
        CHECK(ir_exec_reserve(ctx, &ex, p->g->inputs[i], in[i].dtype, in[i].ndim, in[i].dims) == WPK_OK);
        memcpy(ex.vals[p->g->inputs[i]].data, in[i].data, ir_nbytes(&in[i]));
    }
    CHECK(ir_exec_run(ctx, &ex, p->g) == WPK_OK);
    const ir_tensor *want = &ex.vals[p->g->outputs[0]];
    char *raw = malloc(p->mem.workspace + 128);
    char *ws = raw + (64 - (uintptr_t)raw % 64);
    for (int rep = 0; rep < 3; rep++) {
        memset(ws, 0x7f, p->mem.workspace);
        CHECK(exec_plan_run(ctx, p, ws, in) == WPK_OK);
        const ir_tensor *got = exec_plan_output(p, 0);
        CHECK(ir_same_shape(got, want) && got->dims[0] == 24 && got->dims[1] == 3);
        double err = 0;
        for (int64_t e = 0; e < ir_numel(want); e++) {
            double d = fabs((double)((float *)got->data)[e] - ((float *)want->data)[e]);
            if (d > err) err = d;
        }
        CHECK(err <= TOL);
    }
    free(raw);
    ir_exec_free(&ex);
    exec_plan_free(p);
    for (int i = 0; i < 2; i++) free(in[i].data);
    ir_graph_free(g);
}

int main(void) {
    wpk_context *ctx = wpk_context_create();
    char dir[] = "/tmp/wpk_templates_XXXXXX";
    bool own_cache = !getenv("WPK_CACHE_DIR");
    if (own_cache) {
        CHECK(mkdtemp(dir) != NULL);
        setenv("WPK_CACHE_DIR", dir, 1);
    }
    uint64_t rng = seed_of();
    test_declines(ctx);
    test_keys(ctx);
    test_must_fail(ctx);
    problem probs[NCASES];
    bool ok[NCASES];
    for (int i = 0; i < NCASES; i++) {
        ok[i] = problem_init(&probs[i], &CASES[i], ctx);
        CHECK(ok[i]);
        if (ok[i]) test_case(ctx, &CASES[i], i, &probs[i], &rng);
    }
    run_compiled(ctx, probs);
    test_program(ctx);
    for (int i = 0; i < NCASES; i++)
        if (ok[i]) problem_free(&probs[i]);
    if (own_cache) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        CHECK(system(cmd) == 0);
    }
    wpk_context_free(ctx);
    CHECK_DONE();
}
