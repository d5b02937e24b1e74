/* test_graph.c -- graph construction, topological sort, verifier, printer golden. */
#include <stdlib.h>

#include "base/strbuf.h"
#include "check.h"
#include "ir/graph.h"
#include "ir/print.h"
#include "ir/verify.h"
#include "base/arena.h"
#include <stdint.h>

/* x -> Relu(a) -> Add(a, b) -> y, with b = Sigmoid(x); nodes added out of order */
static ir_graph *build(void) {
    ir_graph *g = ir_graph_create();
    int x = ir_graph_add_value(g, "x");
    g->values[x].is_input = true;
    g->values[x].t = (ir_tensor){.dtype = WPK_DTYPE_FLOAT32, .ndim = 2, .dims = {-1, 4}};
    g->values[x].dim_names[0] = "N";
    int a = ir_graph_add_value(g, "a"), b = ir_graph_add_value(g, "b"), y = ir_graph_add_value(g, "y");
    int n = ir_graph_add_node(g, "add", "Add", "", 13, 2, 1);
    g->nodes[n].in[0] = a;
    g->nodes[n].in[1] = b;
    g->nodes[n].out[0] = y;
    n = ir_graph_add_node(g, "relu", "Relu", "", 13, 1, 1);
    g->nodes[n].in[0] = x;
    g->nodes[n].out[0] = a;
    n = ir_graph_add_node(g, "sig", "Sigmoid", "", 13, 1, 1);
    g->nodes[n].in[0] = x;
    g->nodes[n].out[0] = b;
    static int inputs[1], outputs[1];
    inputs[0] = x;
    outputs[0] = y;
    g->inputs = inputs;
    g->ninputs = 1;
    g->outputs = outputs;
    g->noutputs = 1;
    g->opset = 13;
    return g;
}

/* arena memory is 64-byte aligned, as arena.h promises (kernels rely on it) */
static void arena_alignment(void) {
    arena a = {0};
    for (size_t n = 1; n < 300000; n = n * 3 + 1) {
        void *p = arena_alloc(&a, n);
        CHECK(p && ((uintptr_t)p & 63) == 0);
    }
    arena_free(&a);
}

int main(void) {
    arena_alignment();
    wpk_context *ctx = wpk_context_create();
    ir_graph *g = build();
    CHECK_ERR(ctx, ir_verify(ctx, g), WPK_ERR_MODEL, "node 'add' (Add) reads 'a' before it is produced");
    CHECK(ir_graph_toposort(ctx, g) == WPK_OK);
    CHECK(ir_verify(ctx, g) == WPK_OK);
    CHECK(strcmp(g->nodes[0].name, "relu") == 0 && strcmp(g->nodes[2].name, "add") == 0);
    CHECK(g->nodes[0].op == IR_OP_RELU && g->nodes[2].op == IR_OP_ADD);

    strbuf b = {0};
    ir_print(g, NULL, &b);
    const char *golden = "graph opset=13\n"
                         "  input %x: float32[N, 4]\n"
                         "  constants: 0\n"
                         "  %a = Relu(%x)  # relu\n"
                         "  %b = Sigmoid(%x)  # sig\n"
                         "  %y = Add(%a, %b)  # add\n"
                         "  output %y\n";
    CHECK(b.s && strcmp(b.s, golden) == 0);
    if (b.s && strcmp(b.s, golden) != 0) fprintf(stderr, "got:\n%s", b.s);
    sb_free(&b);

    /* a cycle: relu reads y */
    g->nodes[0].in[0] = g->nodes[2].out[0];
    CHECK_ERR(ctx, ir_graph_toposort(ctx, g), WPK_ERR_MODEL, "cycle");
    /* a value nobody produces */
    int ghost = ir_graph_add_value(g, "ghost");
    g->nodes[0].in[0] = ghost;
    CHECK_ERR(ctx, ir_graph_toposort(ctx, g), WPK_ERR_MODEL, "reads 'ghost'");

    int unk = ir_graph_add_node(g, "weird", "FancyOp", "com.example", 1, 0, 0);
    CHECK(g->nodes[unk].op == IR_OP_UNSUPPORTED);
    CHECK(ir_op_from_onnx("", "Conv") == IR_OP_CONV && ir_op_from_onnx("ai.onnx", "Gemm") == IR_OP_GEMM);
    CHECK(ir_op_from_onnx("com.microsoft", "Conv") == IR_OP_UNSUPPORTED);
    g->inputs = g->outputs = NULL;
    ir_graph_free(g);
    wpk_context_free(ctx);
    CHECK_DONE();
}
