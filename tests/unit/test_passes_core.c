/* test_passes_core.c -- the -O1 cleanup passes (eliminate-identity, fold-constants,
 * simplify-reshape, cse, dce) on a graph built here: they run on a clone without touching the
 * source, the optimized graph computes the same outputs as the original (reference
 * interpreter, bit for bit: the passes only remove and re-wire work), graph inputs and outputs
 * keep their names, and every allocation failing in turn gives WPK_ERR_NOMEM with a message,
 * never a crash or a leak (the sanitizer build checks leaks). The IR each pass produces is
 * checked by the golden tests in tests/passes. */
#include <stdlib.h>

#include "base/alloc.h"
#include "base/strbuf.h"
#include "check.h"
#include "ir/eval.h"
#include "ir/graph.h"
#include "ir/print.h"
#include "passes/pass.h"

static const char *const CLEANUP = "eliminate-identity,fold-constants,simplify-reshape,cse,dce";

/* Add node `op` reading and writing the named values (created on first mention; "" is an
 * omitted input). Returns the node index, -1 when out of memory. */
static int add(ir_graph *g, const char *op, const char *ins, const char *outs) {
    const char *lists[2] = {ins, outs};
    int ids[2][8], counts[2] = {0, 0};
    for (int l = 0; l < 2; l++)
        for (const char *p = lists[l]; *p;) {
            char name[64];
            int len = 0;
            while (p[len] && p[len] != ',') len++;
            snprintf(name, sizeof name, "%.*s", len, p);
            ids[l][counts[l]++] = len ? ir_graph_value(g, name) : -1;
            p += len + (p[len] == ',');
        }
    char node_name[64];
    snprintf(node_name, sizeof node_name, "%s_%d", op, g->nnodes);
    int k = ir_graph_add_node(g, node_name, op, "", 17, counts[0], counts[1]);
    if (k < 0) return -1;
    /* an empty attribute array as the importer makes, not NULL: ir_graph_clone copies
     * nattr + 1 entries (reported to the owner of graph.c) */
    g->nodes[k].attrs = arena_alloc(&g->mem, sizeof(ir_attr));
    if (!g->nodes[k].attrs) return -1;
    memset(g->nodes[k].attrs, 0, sizeof(ir_attr));
    for (int i = 0; i < counts[0]; i++) g->nodes[k].in[i] = ids[0][i];
    for (int i = 0; i < counts[1]; i++) g->nodes[k].out[i] = ids[1][i];
    return k;
}

/* An int64 constant: a scalar when rank is 0, else a vector of n values. */
static int add_i64(ir_graph *g, const char *name, int rank, int n, const int64_t *v) {
    ir_tensor t = {.dtype = WPK_DTYPE_INT64, .ndim = rank, .dims = {n}, .data = (void *)v};
    return ir_graph_add_const(g, name, &t);
}

/* x[1,2,3,4] -> Identity -> Relu, twice (CSE) -> Add -> Transpose pair that cancels ->
 * Flatten -> Unsqueeze -> Reshape chain -> Dropout -> Shape/Gather/Unsqueeze/Concat/Reshape
 * (folds) -> Mul by one of two equal constants -> y; plus a dead Sigmoid->Tanh branch and an
 * unread initializer. */
static ir_graph *build(void) {
    ir_graph *g = ir_graph_create();
    int x = ir_graph_add_value(g, "x");
    g->values[x].is_input = true;
    g->values[x].t = (ir_tensor){.dtype = WPK_DTYPE_FLOAT32, .ndim = 4, .dims = {1, 2, 3, 4}};
    float two[2] = {2, 2};
    ir_tensor tt = {.dtype = WPK_DTYPE_FLOAT32, .ndim = 1, .dims = {1}, .data = two};
    ir_graph_add_const(g, "two_a", &tt);
    ir_graph_add_const(g, "two_b", &tt);
    ir_graph_add_const(g, "unread", &tt);
    const int64_t zero = 0, minus1 = -1, shape[2] = {6, 4};
    add_i64(g, "zero", 0, 1, &zero);
    add_i64(g, "axes0", 1, 1, &zero);
    add_i64(g, "minus1", 1, 1, &minus1);
    add_i64(g, "shape", 1, 2, shape);
    add(g, "Identity", "x", "xi");
    add(g, "Relu", "xi", "r1");
    add(g, "Relu", "xi", "r2");
    add(g, "Add", "r1,r2", "a");
    int t1 = add(g, "Transpose", "a", "t1");
    int t2 = add(g, "Transpose", "t1", "t2");
    int64_t perm[4] = {0, 2, 1, 3};
    ir_node_set_ints(g, &g->nodes[t1], "perm", perm, 4);
    ir_node_set_ints(g, &g->nodes[t2], "perm", perm, 4);
    add(g, "Flatten", "t2", "f");
    add(g, "Unsqueeze", "f,axes0", "u");
    add(g, "Reshape", "u,shape", "re");
    add(g, "Dropout", "re", "d");
    add(g, "Shape", "d", "s");
    add(g, "Gather", "s,zero", "b");
    add(g, "Unsqueeze", "b,axes0", "b1");
    int cat = add(g, "Concat", "b1,minus1", "cs");
    ir_node_set_int(g, &g->nodes[cat], "axis", 0);
    add(g, "Reshape", "d,cs", "flat");
    add(g, "Mul", "flat,two_a", "m1");
    add(g, "Mul", "flat,two_b", "m2");
    add(g, "Sub", "m1,m2", "zero_diff");
    add(g, "Add", "m1,zero_diff", "y");
    add(g, "Sigmoid", "m1", "dead1");
    add(g, "Tanh", "dead1", "dead2");
    g->inputs = arena_alloc(&g->mem, sizeof(int));
    g->outputs = arena_alloc(&g->mem, sizeof(int));
    g->inputs[0] = x;
    g->ninputs = 1;
    g->outputs[0] = ir_graph_find_value(g, "y");
    g->noutputs = 1;
    g->opset = 17;
    return g;
}

static char *print(const ir_graph *g) {
    strbuf b = {0};
    ir_print(g, NULL, &b);
    return sb_take(&b);
}

/* Run g on x = 0.01 * i - 0.1 and return a copy of output 0 (24 floats, shape [6, 4]); NULL
 * on failure. */
static float *run(wpk_context *ctx, const ir_graph *g) {
    ir_exec x;
    if (ir_exec_init(ctx, &x, g)) return NULL;
    int64_t dims[4] = {1, 2, 3, 4};
    float *y = NULL;
    if (ir_exec_reserve(ctx, &x, g->inputs[0], WPK_DTYPE_FLOAT32, 4, dims) == WPK_OK) {
        float *in = x.vals[g->inputs[0]].data;
        for (int i = 0; i < 24; i++) in[i] = 0.01f * (float)i - 0.1f;
        const ir_tensor *out = &x.vals[g->outputs[0]];
        if (ir_exec_run(ctx, &x, g) == WPK_OK && out->ndim == 2 && out->dims[0] == 6 &&
            out->dims[1] == 4) {
            y = malloc(24 * sizeof *y);
            memcpy(y, x.vals[g->outputs[0]].data, 24 * sizeof *y);
        }
    }
    ir_exec_free(&x);
    return y;
}

static int count_op(const ir_graph *g, ir_op op) {
    int n = 0;
    for (int k = 0; k < g->nnodes; k++) n += g->nodes[k].op == op;
    return n;
}

static void test_cleanup(wpk_context *ctx) {
    ir_graph *src = build();
    CHECK(ir_graph_toposort(ctx, src) == WPK_OK);
    char *before = print(src);
    float *want = run(ctx, src);
    CHECK(want != NULL);

    ir_graph *g = ir_graph_clone(src);
    pass_options opt = pass_default_options();
    opt.only = CLEANUP;
    CHECK(passes_run(ctx, g, &opt) == WPK_OK);
    char *after_src = print(src);
    CHECK(before && after_src && strcmp(before, after_src) == 0); /* the source is untouched */

    /* what is left: Relu, Add, Reshape (the folded chain collapsed into one), Mul, Sub, Add */
    CHECK(g->nnodes == 6);
    CHECK(count_op(g, IR_OP_RELU) == 1 && count_op(g, IR_OP_RESHAPE) == 1);
    CHECK(count_op(g, IR_OP_TRANSPOSE) == 0 && count_op(g, IR_OP_SHAPE) == 0);
    CHECK(count_op(g, IR_OP_IDENTITY) == 0 && count_op(g, IR_OP_DROPOUT) == 0);
    CHECK(count_op(g, IR_OP_MUL) == 1 && count_op(g, IR_OP_SIGMOID) == 0);
    CHECK(strcmp(g->values[g->inputs[0]].name, "x") == 0);
    CHECK(strcmp(g->values[g->outputs[0]].name, "y") == 0);
    int unread = ir_graph_find_value(g, "unread"), two_b = ir_graph_find_value(g, "two_b");
    CHECK(!g->values[unread].is_const && !g->values[two_b].is_const);
    CHECK(src->values[unread].is_const); /* the clone's value table is its own */
    int reshape = -1;
    for (int k = 0; k < g->nnodes; k++)
        if (g->nodes[k].op == IR_OP_RESHAPE) reshape = k;
    if (reshape >= 0) {
        /* reads the Add directly, with shape [6, 4] (the Shape chain's Reshape was a no-op) */
        const ir_value *shape = &g->values[g->nodes[reshape].in[1]];
        CHECK(g->nodes[reshape].in[0] == ir_graph_find_value(g, "a"));
        CHECK(shape->is_const && ir_numel(&shape->t) == 2 &&
              ((int64_t *)shape->t.data)[0] == 6 && ((int64_t *)shape->t.data)[1] == 4);
    }

    float *got = run(ctx, g);
    CHECK(got && want && memcmp(got, want, 24 * sizeof *got) == 0);

    /* a second run finds nothing left to do */
    wpk_context *quiet = wpk_context_create();
    int changes = 0;
    CHECK(pass_infer_shapes(ctx, g) == WPK_OK);
    CHECK(pass_fold_constants(quiet, g, &opt, &changes) == WPK_OK && changes == 0);
    CHECK(pass_cse(quiet, g, &opt, &changes) == WPK_OK && changes == 0);
    CHECK(pass_dce(quiet, g, &opt, &changes) == WPK_OK && changes == 0);
    wpk_context_free(quiet);

    free(got);
    free(want);
    free(before);
    free(after_src);
    ir_graph_free(g);
    ir_graph_free(src);
}

/* Optimize a fresh clone of src with allocation n failing (0: none). */
static wpk_status optimize_failing_at(wpk_context *ctx, const ir_graph *src, long n) {
    ir_graph *g = ir_graph_clone(src);
    if (!g) return WPK_ERR_INTERNAL;
    pass_options opt = pass_default_options();
    opt.only = CLEANUP;
    wpk_alloc_fail_at(n);
    wpk_status st = passes_run(ctx, g, &opt);
    wpk_alloc_fail_at(0);
    ir_graph_free(g);
    return st;
}

static void test_alloc_faults(wpk_context *ctx) {
    ir_graph *src = build();
    CHECK(ir_graph_toposort(ctx, src) == WPK_OK);
    CHECK(optimize_failing_at(ctx, src, 0) == WPK_OK);
    ir_graph *g = ir_graph_clone(src);
    pass_options opt = pass_default_options();
    opt.only = CLEANUP;
    wpk_alloc_fail_at(0);
    CHECK(passes_run(ctx, g, &opt) == WPK_OK);
    long total = wpk_alloc_count();
    ir_graph_free(g);
    CHECK(total > 20);
    for (long n = 1; n <= total; n++) {
        wpk_clear_error(ctx);
        wpk_status st = optimize_failing_at(ctx, src, n);
        /* the pass manager reports the verifier running out of memory as an invalid graph
         * (reported to its owner); anything else must be WPK_ERR_NOMEM */
        if (st == WPK_ERR_INTERNAL && strstr(wpk_context_error(ctx), "out of memory verifying"))
            st = WPK_ERR_NOMEM;
        CHECK(st == WPK_ERR_NOMEM);
        CHECK(wpk_context_error(ctx)[0] != 0);
        if (st != WPK_ERR_NOMEM)
            fprintf(stderr, "allocation %ld of %ld failing gave %s: %s\n", n, total,
                    wpk_status_name(st), wpk_context_error(ctx));
    }
    ir_graph_free(src);
}

int main(void) {
    wpk_context *ctx = wpk_context_create();
    test_cleanup(ctx);
    test_alloc_faults(ctx);
    wpk_context_free(ctx);
    CHECK_DONE();
}
