/* conv_problem.h -- the convolution cases the CUDA tests share (tests/unit/test_codegen_cuda.c
 * on the interpreter, NVRTC and the CPU emulator; tests/cuda/test_cuda_gpu.c on a GPU): a conv
 * node built in a graph with random data, its reference output from the node's reference
 * kernel, and the comparison with the stated tolerance. Header-only, for one test file each. */
#ifndef WPK_TESTS_CUDA_CONV_PROBLEM_H
#define WPK_TESTS_CUDA_CONV_PROBLEM_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph.h"
#include "ir/ops.h"
#include "test_data.h"
#include "kernels/conv2d_cuda.h"

typedef struct conv_case {
    const char *name;
    const char *op;          /* Conv or FusedConv */
    int64_t n, c, h, w, k, kh, kw, stride, dil, group;
    int64_t pads[4];
    bool bias, residual;
    const char *act;
    const char *configs[3]; /* hand-picked configs besides the default (NULL: none) */
} conv_case;

static const conv_case CASES[] = {
    {"3x3 pad 1, tails in every dim", "Conv", 1, 8, 9, 11, 16, 3, 3, 1, 1, 1, {1, 1, 1, 1}, true,
     false, NULL,
     {"thread_x=4,thread_y=2,thread_z=2,tile_x=2,tile_y=2,tile_z=2,tile_rz=4,shared=1,order=0",
      "thread_x=4,thread_y=2,thread_z=2,tile_x=2,tile_y=2,tile_z=2,tile_rz=2,shared=0,order=1",
      "thread_x=8,thread_y=4,thread_z=1,tile_x=1,tile_y=1,tile_z=4,tile_rz=8,shared=1,order=2"}},
    {"stride 2, residual + relu", "FusedConv", 1, 16, 14, 14, 32, 3, 3, 2, 1, 1, {1, 1, 1, 1},
     true, true, "Relu",
     {"thread_x=8,thread_y=8,thread_z=2,tile_x=1,tile_y=1,tile_z=4,tile_rz=16,shared=1,order=1",
      NULL, NULL}},
    {"depthwise + relu6", "FusedConv", 1, 16, 10, 10, 16, 3, 3, 1, 1, 16, {1, 1, 1, 1}, true,
     false, "Clip",
     {"thread_x=4,thread_y=4,thread_z=4,tile_x=2,tile_y=1,tile_z=2,tile_rz=1,shared=1,order=0",
      NULL, NULL}},
    {"1x1, odd channels", "Conv", 1, 24, 7, 7, 20, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, false,
     NULL, {"thread_x=8,thread_y=8,thread_z=4,tile_x=1,tile_y=1,tile_z=2,tile_rz=8,shared=1,order=0",
            NULL, NULL}},
    {"batch 2, 7x7 stride 2, asymmetric pads", "Conv", 2, 3, 13, 12, 8, 7, 7, 2, 1, 1,
     {3, 2, 2, 3}, true, false, NULL, {NULL, NULL, NULL}},
    {"dilation 2, 2 groups, sigmoid", "FusedConv", 1, 8, 10, 9, 8, 3, 3, 1, 2, 2, {2, 2, 2, 2},
     true, false, "Sigmoid",
     {"thread_x=4,thread_y=2,thread_z=4,tile_x=2,tile_y=2,tile_z=1,tile_rz=2,shared=1,order=2",
      NULL, NULL}},
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))
#define RANDOM_CONFIGS 2

typedef struct problem {
    ir_graph *g;
    ir_node *node;
    ir_tensor t[5]; /* X, W, B, Z, Y */
    ir_tensor *in[4], *out[1];
    int64_t ny;
    float *want;
} problem;

static bool problem_init(problem *p, const conv_case *cc, wpk_context *ctx) {
    memset(p, 0, sizeof *p);
    p->g = ir_graph_create();
    bool onnx = !strcmp(cc->op, "Conv");
    int nin = 3 + (cc->residual ? 1 : 0);
    int k = ir_graph_add_node(p->g, cc->name, cc->op, onnx ? "" : "wpk", onnx ? 17 : 1, nin, 1);
    ir_node *n = p->node = &p->g->nodes[k];
    ir_node_set_ints(p->g, n, "strides", (const int64_t[]){cc->stride, cc->stride}, 2);
    ir_node_set_ints(p->g, n, "dilations", (const int64_t[]){cc->dil, cc->dil}, 2);
    ir_node_set_ints(p->g, n, "pads", cc->pads, 4);
    ir_node_set_int(p->g, n, "group", cc->group);
    if (cc->act) {
        ir_node_set_str(p->g, n, "activation", cc->act);
        if (!strcmp(cc->act, "Clip")) {
            ir_node_set_float(p->g, n, "clip_min", 0.0f);
            ir_node_set_float(p->g, n, "clip_max", 6.0f);
        }
    }
    const int64_t cg = cc->c / cc->group;
    ir_tensor *x = &p->t[0], *w = &p->t[1], *b = &p->t[2], *z = &p->t[3], *y = &p->t[4];
    *x = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {cc->n, cc->c, cc->h, cc->w},
                     randoms(cc->n * cc->c * cc->h * cc->w)};
    *w = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {cc->k, cg, cc->kh, cc->kw},
                     randoms(cc->k * cg * cc->kh * cc->kw)};
    *b = (ir_tensor){WPK_DTYPE_FLOAT32, 1, {cc->k}, randoms(cc->k)};
    p->in[0] = x, p->in[1] = w, p->in[2] = cc->bias ? b : NULL;
    p->out[0] = y;
    *y = (ir_tensor){WPK_DTYPE_FLOAT32, 0, {0}, NULL};
    if (ir_op_get(n->op)->shape(ctx, n, p->in, p->out)) {
        fprintf(stderr, "%s: shape: %s\n", cc->name, wpk_context_error(ctx));
        return false;
    }
    p->ny = ir_numel(y);
    if (cc->residual) {
        *z = (ir_tensor){WPK_DTYPE_FLOAT32, y->ndim, {0}, randoms(p->ny)};
        memcpy(z->dims, y->dims, sizeof z->dims);
        p->in[3] = z;
    }
    y->data = nans(p->ny);
    p->want = malloc(sizeof(float) * (size_t)p->ny);
    if (ir_op_get(n->op)->ref(ctx, n, p->in, p->out)) {
        fprintf(stderr, "%s: reference: %s\n", cc->name, wpk_context_error(ctx));
        return false;
    }
    memcpy(p->want, y->data, sizeof(float) * (size_t)p->ny);
    return true;
}

static void problem_free(problem *p) {
    for (int i = 0; i < 5; i++) free(p->t[i].data);
    free(p->want);
    ir_graph_free(p->g);
}

/* problem_init, then the conv2d_cuda template's task and knob space for the node; false (the
 * problem freed) when the problem cannot be built. */
static inline bool problem_task_init(problem *p, const conv_case *cc, wpk_context *ctx,
                                     tune_task *task, tune_space *sp) {
    if (!problem_init(p, cc, ctx)) {
        problem_free(p);
        return false;
    }
    ir_tensor *in[4] = {p->in[0], p->in[1], p->in[2], p->in[3]};
    tune_task_init(task, &tune_conv2d_cuda, p->node, in, p->out);
    tune_conv2d_cuda.space(&tune_conv2d_cuda, task, sp);
    return true;
}


#endif
