/* test_onnx_export.c -- the ONNX writer: models loaded, saved and loaded again print the same
 * graph and run to bit-identical outputs (files of the fuzz corpus, the corpus models optimized,
 * hand-built graphs with every attribute kind, symbolic dims, omitted edges, wpk-domain nodes
 * and older-opset attribute forms); the file's header and fields read back with protobuf-c; and
 * must-fail cases with their status and message, each leaving no file behind and an existing
 * file untouched: missing directory, a directory in the way, a write failing midway (file size
 * limit), every allocation failing in turn, nodes that cannot be written, a model over 2 GiB. */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/model.h"
#include "base/alloc.h"
#include "base/strbuf.h"
#include "check.h"
#include "ir/print.h"
#include "onnx/onnx.pb-c.h"
#include "onnx/onnx_export.h"
#include "onnx/onnx_import.h"

static char dir[64];

static const char *in_dir(const char *name) {
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* The entries of the test directory (a failed write must not leave a temporary file). */
static int dir_entries(void) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d) closedir(d);
    return n;
}

static unsigned char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

static bool same_file(const char *path, const unsigned char *want, size_t len) {
    size_t n = 0;
    unsigned char *b = read_file(path, &n);
    bool same = b && n == len && memcmp(b, want, len) == 0;
    free(b);
    return same;
}

static Onnx__ModelProto *unpack_file(const char *path) {
    size_t len = 0;
    unsigned char *b = read_file(path, &len);
    Onnx__ModelProto *m = b ? onnx__model_proto__unpack(NULL, len, b) : NULL;
    free(b);
    return m;
}

static char *graph_text(const ir_graph *g) {
    strbuf b = {0};
    ir_print(g, NULL, &b);
    return sb_take(&b);
}

/* ---- running: seeded inputs, every output's shape and bytes concatenated ---- */

typedef struct run_result {
    unsigned char *bytes;
    size_t len;
} run_result;

static void append(run_result *r, const void *p, size_t n) {
    r->bytes = realloc(r->bytes, r->len + n + 1);
    memcpy(r->bytes + r->len, p, n);
    r->len += n;
}

static wpk_status run_model(wpk_context *ctx, const wpk_model *m, run_result *r) {
    memset(r, 0, sizeof *r);
    wpk_session_params p = wpk_session_default_params();
    p.opt_level = 0; /* the graph as it is */
    wpk_session *s = NULL;
    wpk_status st = wpk_session_create(ctx, m, &p, &s);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int i = 0; st == WPK_OK && i < wpk_model_num_inputs(m); i++) {
        wpk_tensor_view in = wpk_model_input(m, i);
        int64_t n = 1;
        for (int d = 0; d < in.ndim; d++) n *= in.dims[d] < 0 ? (in.dims[d] = 2) : in.dims[d];
        float *data = calloc((size_t)n + 1, 8);
        for (int64_t k = 0; in.dtype == WPK_DTYPE_FLOAT32 && k < n; k++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            data[k] = (float)(seed >> 40) / (float)(1 << 23) - 1.0f;
        }
        st = wpk_session_set_input(s, in.name, in.dtype, in.dims, in.ndim, data);
        free(data);
    }
    if (st == WPK_OK) st = wpk_session_run(s);
    for (int i = 0; st == WPK_OK && i < wpk_model_num_outputs(m); i++) {
        wpk_tensor_view o;
        st = wpk_session_output(s, i, &o);
        if (st) break;
        int64_t n = 1;
        for (int d = 0; d < o.ndim; d++) n *= o.dims[d];
        append(r, &o.ndim, sizeof o.ndim);
        append(r, o.dims, sizeof o.dims[0] * (size_t)o.ndim);
        append(r, o.data, (size_t)n * wpk_dtype_size(o.dtype));
    }
    wpk_session_free(s);
    return st;
}

/* ---- round trips ---- */

static bool same_text(const char *what, char *a, char *b) {
    bool same = a && b && strcmp(a, b) == 0;
    if (!same)
        fprintf(stderr, "%s: the graph changed in the round trip:\n%s\n----\n%s\n", what, a, b);
    free(a);
    free(b);
    return same;
}

/* m saved and loaded again: the same graph text (with inferred shapes) and bit-identical
 * outputs; saving the reloaded model writes the same bytes, and loads as the same text again.
 * `same_names` is false where the first reload may name constants differently (see below). */
static void check_round_trip(wpk_context *ctx, wpk_model *m, const char *what, bool same_names) {
    const char *p1 = in_dir("rt1.onnx"), *p2 = in_dir("rt2.onnx");
    wpk_model *back = NULL, *back2 = NULL;
    wpk_status st = wpk_model_save(ctx, m, p1);
    if (st == WPK_OK) st = wpk_model_load(ctx, p1, &back);
    if (st) fprintf(stderr, "%s: save and reload: %s\n", what, wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    if (st) return;
    if (same_names) CHECK(same_text(what, wpk_model_print(m), wpk_model_print(back)));
    run_result r1, r2;
    st = run_model(ctx, m, &r1);
    if (st) fprintf(stderr, "%s: run: %s\n", what, wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    st = run_model(ctx, back, &r2);
    if (st) fprintf(stderr, "%s: run reloaded: %s\n", what, wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    CHECK(r1.len > 0 && r1.len == r2.len && memcmp(r1.bytes, r2.bytes, r1.len) == 0);
    free(r1.bytes);
    free(r2.bytes);

    st = wpk_model_save(ctx, back, p2);
    if (st == WPK_OK) st = wpk_model_load(ctx, p2, &back2);
    CHECK(st == WPK_OK);
    if (back2) CHECK(same_text(what, wpk_model_print(back), wpk_model_print(back2)));
    size_t n1 = 0, n2 = 0;
    unsigned char *f1 = read_file(p1, &n1), *f2 = read_file(p2, &n2);
    CHECK(f1 && f2 && n1 == n2 && memcmp(f1, f2, n1) == 0);
    free(f1);
    free(f2);
    wpk_model_free(back);
    wpk_model_free(back2);
    remove(p1);
    remove(p2);
}

static void test_corpus_round_trips(wpk_context *ctx) {
    static const char *files[] = {"tests/fuzz/corpus/conv_relu.onnx",
                                  "tests/fuzz/corpus/legacy_ops.onnx"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        for (int level = -1; level <= 3; level++) {
            wpk_model *m = NULL;
            CHECK(wpk_model_load(ctx, files[i], &m) == WPK_OK);
            if (!m) continue;
            if (level >= 0) {
                wpk_optimize_params p = wpk_optimize_default_params();
                p.level = level;
                wpk_status st = wpk_model_optimize(ctx, m, &p);
                if (st) fprintf(stderr, "%s -O%d: %s\n", files[i], level, wpk_context_error(ctx));
                CHECK(st == WPK_OK);
            }
            char what[128];
            snprintf(what, sizeof what, "%s (-O%d)", files[i], level);
            /* Optimized, legacy_ops's Slice reads one constant as starts and axes (CSE merged
             * the equal [0, 1]s). Written back as attributes at opset 9, they are re-created as
             * a constant each, so the first reload names them apart: same outputs, other text. */
            check_round_trip(ctx, m, what, i == 0 || level <= 0);
            wpk_model_free(m);
        }
    }
}

/* ---- hand-built graphs ---- */

static int add_const_f32(ir_graph *g, const char *name, int ndim, const int64_t *dims,
                         float scale) {
    ir_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = WPK_DTYPE_FLOAT32;
    t.ndim = ndim;
    if (ndim) memcpy(t.dims, dims, sizeof dims[0] * (size_t)ndim);
    int64_t n = ir_numel(&t);
    float *data = malloc(sizeof(float) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) data[i] = scale * (float)((i * 7) % 13 - 6);
    t.data = data;
    int id = ir_graph_add_const(g, name, &t);
    free(data);
    return id;
}

static int add_input(ir_graph *g, const char *name, int ndim, const int64_t *dims,
                     const char *const *dim_names) {
    int id = ir_graph_add_value(g, name);
    ir_value *v = &g->values[id];
    v->is_input = true;
    v->t.dtype = WPK_DTYPE_FLOAT32;
    v->t.ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        v->t.dims[i] = dims[i];
        v->dim_names[i] = dim_names ? dim_names[i] : NULL;
    }
    if (!g->inputs) g->inputs = arena_alloc(&g->mem, sizeof(int) * 4); /* room for 4 */
    g->inputs[g->ninputs++] = id;
    return id;
}

static int add_node(ir_graph *g, const char *name, const char *op, const char *domain, int nin,
                    const int *in, int nout, const char *const *outs) {
    int k = ir_graph_add_node(g, name, op, domain, g->opset, nin, nout);
    ir_node *n = &g->nodes[k];
    for (int i = 0; i < nin; i++) n->in[i] = in[i];
    for (int i = 0; i < nout; i++)
        if (outs[i]) {
            n->out[i] = ir_graph_add_value(g, outs[i]);
            g->values[n->out[i]].producer = k;
        }
    return k;
}

static void set_outputs(ir_graph *g, int count, const int *vals) {
    g->outputs = arena_alloc(&g->mem, sizeof(int) * (size_t)count);
    for (int i = 0; i < count; i++) g->outputs[g->noutputs++] = vals[i];
}

/* Opset 13: Conv with every kind of conv attribute, LeakyRelu, a Clip without its min (an
 * omitted input in the middle), a Dropout without its mask (a trailing omitted output), a
 * wpk::FusedConv with no bias and a residual input, a Constant node (tensor attribute), a
 * symbolic batch dim, two outputs, and a constant nothing reads. */
static ir_graph *runnable_graph(void) {
    ir_graph *g = ir_graph_create();
    g->opset = 13;
    const char *batch[] = {"N", NULL, NULL, NULL};
    int x = add_input(g, "x", 4, (int64_t[]){-1, 3, 8, 8}, batch);
    int w = add_const_f32(g, "W", 4, (int64_t[]){4, 3, 3, 3}, 0.05f);
    int b = add_const_f32(g, "B", 1, (int64_t[]){4}, 0.1f);
    int w2 = add_const_f32(g, "W2", 4, (int64_t[]){4, 4, 1, 1}, 0.2f);
    int hi = add_const_f32(g, "hi", 0, NULL, 0.0f);
    *(float *)g->values[hi].t.data = 0.5f;
    add_const_f32(g, "unused", 1, (int64_t[]){3}, 1.0f);

    int k = add_node(g, "conv", "Conv", "", 3, (int[]){x, w, b}, 1, (const char *[]){"c"});
    ir_node_set_ints(g, &g->nodes[k], "kernel_shape", (int64_t[]){3, 3}, 2);
    ir_node_set_ints(g, &g->nodes[k], "pads", (int64_t[]){1, 1, 1, 1}, 4);
    ir_node_set_ints(g, &g->nodes[k], "strides", (int64_t[]){1, 1}, 2);
    ir_node_set_int(g, &g->nodes[k], "group", 1);
    ir_node_set_str(g, &g->nodes[k], "auto_pad", "NOTSET");
    int c = g->nodes[k].out[0];
    k = add_node(g, "leaky", "LeakyRelu", "", 1, &c, 1, (const char *[]){"l"});
    ir_node_set_float(g, &g->nodes[k], "alpha", 0.125f);
    int l = g->nodes[k].out[0];
    k = add_node(g, "clip", "Clip", "", 3, (int[]){l, -1, hi}, 1, (const char *[]){"k"});
    int kc = g->nodes[k].out[0];
    k = add_node(g, "drop", "Dropout", "", 1, &kc, 2, (const char *[]){"d", NULL});
    int d = g->nodes[k].out[0];
    k = add_node(g, "fused", "Conv", "", 4, (int[]){d, w2, -1, kc}, 1, (const char *[]){"f"});
    ir_node_set_op(&g->nodes[k], IR_OP_FUSED_CONV);
    ir_node_set_ints(g, &g->nodes[k], "kernel_shape", (int64_t[]){1, 1}, 2);
    ir_node_set_str(g, &g->nodes[k], "activation", "Relu");
    int f = g->nodes[k].out[0];
    k = add_node(g, "const", "Constant", "", 0, NULL, 1, (const char *[]){"cv"});
    /* ir_node_set_attr keeps the tensor pointer: tensor and data live in the graph's arena */
    static const float vals[4] = {1.0f, -2.0f, 0.5f, 3.0f};
    ir_tensor *t = arena_alloc(&g->mem, sizeof *t);
    t->dtype = WPK_DTYPE_FLOAT32;
    t->ndim = 3;
    t->dims[0] = 4;
    t->dims[1] = t->dims[2] = 1;
    t->data = arena_memdup(&g->mem, vals, sizeof vals);
    ir_attr a = {.name = "value", .kind = IR_ATTR_TENSOR, .t = t};
    ir_node_set_attr(g, &g->nodes[k], &a);
    int cv = g->nodes[k].out[0];
    k = add_node(g, "add", "Add", "", 2, (int[]){f, cv}, 1, (const char *[]){"y"});
    set_outputs(g, 2, (int[]){g->nodes[k].out[0], l});
    for (int i = 0; i < g->nnodes; i++)
        g->nodes[i].op = ir_op_from_onnx(g->nodes[i].domain, g->nodes[i].op_type);
    return g;
}

static void test_runnable_graph(wpk_context *ctx) {
    ir_graph *g = runnable_graph();
    const char *p = in_dir("hand.onnx");
    wpk_status st = onnx_export_file(ctx, g, p);
    if (st) fprintf(stderr, "export: %s\n", wpk_context_error(ctx));
    CHECK(st == WPK_OK);

    /* what the file says */
    Onnx__ModelProto *m = unpack_file(p);
    CHECK(m != NULL);
    if (m) {
        CHECK(m->has_ir_version && m->ir_version == 7); /* opset 13 came with IR version 7 */
        CHECK(m->n_opset_import == 2);
        bool wpk_domain = false, default_domain = false;
        for (size_t i = 0; i < m->n_opset_import; i++) {
            const Onnx__OperatorSetIdProto *o = m->opset_import[i];
            wpk_domain |= strcmp(o->domain, "wpk") == 0 && o->version == 1;
            default_domain |= strcmp(o->domain, "") == 0 && o->version == 13;
        }
        CHECK(wpk_domain && default_domain);
        const Onnx__GraphProto *gp = m->graph;
        CHECK(gp->n_input == 1 && strcmp(gp->input[0]->name, "x") == 0);
        const Onnx__TensorShapeProto *s = gp->input[0]->type->tensor_type->shape;
        CHECK(s->n_dim == 4 && strcmp(s->dim[0]->dim_param, "N") == 0 &&
              s->dim[0]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
              s->dim[3]->dim_value == 8);
        CHECK(gp->n_initializer == 4); /* W, B, W2, hi; not the unread constant */
        for (size_t i = 0; i < gp->n_initializer; i++) {
            CHECK(strcmp(gp->initializer[i]->name, "unused") != 0);
            CHECK(gp->initializer[i]->has_raw_data);
        }
        CHECK(gp->n_node == 7);
        CHECK(gp->n_node == 7 && gp->node[2]->n_input == 3 &&
              strcmp(gp->node[2]->input[1], "") == 0); /* Clip without min */
        CHECK(gp->n_node == 7 && gp->node[3]->n_output == 1); /* the mask is dropped */
        CHECK(gp->n_node == 7 && strcmp(gp->node[4]->domain, "wpk") == 0 &&
              strcmp(gp->node[4]->op_type, "FusedConv") == 0 && gp->node[4]->n_input == 4 &&
              strcmp(gp->node[4]->input[2], "") == 0);
        CHECK(gp->n_output == 2 && gp->output[0]->type &&
              gp->output[0]->type->tensor_type->shape->n_dim == 4);
        onnx__model_proto__free_unpacked(m, NULL);
    }

    /* what reads back */
    ir_graph *back = NULL;
    st = onnx_import_file(ctx, p, &back);
    if (st) fprintf(stderr, "import: %s\n", wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    if (back) {
        /* what the file leaves out: the constant nothing reads, Dropout's omitted mask */
        strbuf want = {0};
        char *a = graph_text(g);
        const char *cut1 = strstr(a, "constants: 5\n"), *cut2 = strstr(a, "%d, _ = Dropout");
        CHECK(cut1 && cut2);
        if (cut1 && cut2) {
            size_t skip = strlen("constants: 5\n");
            sb_printf(&want, "%.*sconstants: 4\n%.*s%%d = Dropout%s", (int)(cut1 - a), a,
                      (int)(cut2 - cut1 - skip), cut1 + skip, cut2 + strlen("%d, _ = Dropout"));
            CHECK(same_text("hand-built graph", sb_take(&want), graph_text(back)));
        }
        free(a);
        ir_graph_free(back);
    }
    wpk_model *model = NULL;
    CHECK(wpk_model_load(ctx, p, &model) == WPK_OK);
    if (model) check_round_trip(ctx, model, "hand-built graph", true);
    wpk_model_free(model);
    remove(p);
    ir_graph_free(g);
}

/* A node of a custom domain with every attribute kind the IR holds; only written and read. */
static void test_attribute_kinds(wpk_context *ctx) {
    ir_graph *g = ir_graph_create();
    g->opset = 11;
    int x = add_input(g, "x", 2, (int64_t[]){-1, 3}, NULL); /* a symbolic dim without a name */
    int k = add_node(g, "custom", "Custom", "test.domain", 1, &x, 1, (const char *[]){"z"});
    g->nodes[k].opset = 2;
    g->nodes[k].op = IR_OP_UNSUPPORTED;
    ir_node *n = &g->nodes[k];
    ir_node_set_int(g, n, "i", -7);
    ir_node_set_float(g, n, "f", 1.5f);
    ir_node_set_str(g, n, "s", "hello");
    ir_node_set_ints(g, n, "ints", (int64_t[]){1, -2, 3}, 3);
    ir_node_set_ints(g, n, "no_ints", NULL, 0);
    ir_attr a;
    memset(&a, 0, sizeof a);
    float fl[2] = {0.5f, -1.0f};
    a.name = "floats";
    a.kind = IR_ATTR_FLOATS;
    a.n = 2;
    a.floats = fl;
    ir_node_set_attr(g, n, &a);
    static const int64_t tv[2] = {4, -5};
    ir_tensor *t = arena_alloc(&g->mem, sizeof *t);
    t->dtype = WPK_DTYPE_INT64;
    t->ndim = 1;
    t->dims[0] = 2;
    t->data = arena_memdup(&g->mem, tv, sizeof tv);
    memset(&a, 0, sizeof a);
    a.name = "t";
    a.kind = IR_ATTR_TENSOR;
    a.t = t;
    ir_node_set_attr(g, n, &a);
    set_outputs(g, 1, &g->nodes[k].out[0]);

    const char *p = in_dir("kinds.onnx");
    CHECK(onnx_export_file(ctx, g, p) == WPK_OK);
    Onnx__ModelProto *m = unpack_file(p);
    CHECK(m && m->ir_version == 6 && m->n_opset_import == 2);
    if (m) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[1];
        CHECK(strcmp(o->domain, "test.domain") == 0 && o->version == 2);
        const Onnx__TensorShapeProto__Dimension *d0 =
            m->graph->input[0]->type->tensor_type->shape->dim[0];
        CHECK(d0->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE__NOT_SET);
        CHECK(m->graph->output[0]->type == NULL); /* an unsupported op: its type is unknown */
        onnx__model_proto__free_unpacked(m, NULL);
    }
    ir_graph *back = NULL;
    CHECK(onnx_import_file(ctx, p, &back) == WPK_OK);
    if (back) {
        char *ta = graph_text(g), *tb = graph_text(back);
        CHECK(ta && tb && strcmp(ta, tb) == 0);
        if (!ta || !tb || strcmp(ta, tb) != 0) fprintf(stderr, "%s\n----\n%s\n", ta, tb);
        free(ta);
        free(tb);
        const ir_node *bn = &back->nodes[0];
        CHECK(bn->opset == 2 && strcmp(bn->domain, "test.domain") == 0);
        const ir_attr *at = ir_attr_find(bn, "t");
        CHECK(at && at->kind == IR_ATTR_TENSOR && at->t->dtype == WPK_DTYPE_INT64 &&
              at->t->ndim == 1 && memcmp(at->t->data, tv, sizeof tv) == 0);
        at = ir_attr_find(bn, "no_ints");
        CHECK(at && at->kind == IR_ATTR_INTS && at->n == 0);
        CHECK(back->values[back->inputs[0]].t.dims[0] == -1 &&
              back->values[back->inputs[0]].dim_names[0] == NULL);
        ir_graph_free(back);
    }
    remove(p);
    ir_graph_free(g);
}

/* Opset 8 (IR version 3): the operands the importer moved into inputs go back to attributes,
 * initializers are also listed as graph inputs. */
static ir_graph *legacy_graph(bool computed_max) {
    ir_graph *g = ir_graph_create();
    g->opset = 8;
    int x = add_input(g, "x", 2, (int64_t[]){2, 3}, NULL);
    int lo = add_const_f32(g, "clip__min", 0, NULL, 0.0f);
    int hi = add_const_f32(g, "clip__max", 0, NULL, 0.0f);
    *(float *)g->values[lo].t.data = -0.25f;
    *(float *)g->values[hi].t.data = 0.5f;
    ir_tensor axes;
    memset(&axes, 0, sizeof axes);
    int64_t axis0 = 0;
    axes.dtype = WPK_DTYPE_INT64;
    axes.ndim = 1;
    axes.dims[0] = 1;
    axes.data = &axis0;
    int ax = ir_graph_add_const(g, "unsq__axes", &axes);
    int bias = add_const_f32(g, "bias", 1, (int64_t[]){3}, 0.25f);
    if (computed_max) {
        int k = add_node(g, "neg", "Neg", "", 1, &x, 1, (const char *[]){"negx"});
        hi = g->nodes[k].out[0];
    }
    int k = add_node(g, "clip", "Clip", "", 3, (int[]){x, lo, hi}, 1, (const char *[]){"c"});
    int c = g->nodes[k].out[0];
    k = add_node(g, "unsq", "Unsqueeze", "", 2, (int[]){c, ax}, 1, (const char *[]){"u"});
    int u = g->nodes[k].out[0];
    k = add_node(g, "add", "Add", "", 2, (int[]){u, bias}, 1, (const char *[]){"y"});
    set_outputs(g, 1, &g->nodes[k].out[0]);
    for (int i = 0; i < g->nnodes; i++) g->nodes[i].op = ir_op_from_onnx("", g->nodes[i].op_type);
    return g;
}

static void test_legacy_forms(wpk_context *ctx) {
    ir_graph *g = legacy_graph(false);
    const char *p = in_dir("legacy.onnx");
    wpk_status st = onnx_export_file(ctx, g, p);
    if (st) fprintf(stderr, "legacy export: %s\n", wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    Onnx__ModelProto *m = unpack_file(p);
    CHECK(m && m->ir_version == 3);
    if (m) {
        const Onnx__GraphProto *gp = m->graph;
        CHECK(gp->n_initializer == 1 && strcmp(gp->initializer[0]->name, "bias") == 0);
        CHECK(gp->n_input == 2 && strcmp(gp->input[1]->name, "bias") == 0);
        const Onnx__NodeProto *clip = gp->node[0], *unsq = gp->node[1];
        CHECK(clip->n_input == 1 && clip->n_attribute == 2);
        for (size_t i = 0; i < clip->n_attribute; i++) {
            const Onnx__AttributeProto *a = clip->attribute[i];
            CHECK(a->type == IR_ATTR_FLOAT && a->has_f);
            CHECK(strcmp(a->name, "min") == 0 ? a->f == -0.25f : a->f == 0.5f);
        }
        CHECK(unsq->n_input == 1 && unsq->n_attribute == 1 &&
              strcmp(unsq->attribute[0]->name, "axes") == 0 &&
              unsq->attribute[0]->n_ints == 1 && unsq->attribute[0]->ints[0] == 0);
        onnx__model_proto__free_unpacked(m, NULL);
    }
    /* the importer turns them back into the same constants, so the graphs print alike */
    wpk_model *model = NULL;
    CHECK(wpk_model_load(ctx, p, &model) == WPK_OK);
    if (model) {
        char *a = graph_text(g), *b = graph_text(model->g);
        CHECK(a && b && strcmp(a, b) == 0);
        if (!a || !b || strcmp(a, b) != 0) fprintf(stderr, "%s\n----\n%s\n", a, b);
        free(a);
        free(b);
        check_round_trip(ctx, model, "legacy graph", true);
    }
    wpk_model_free(model);
    remove(p);
    ir_graph_free(g);

    /* a bound that is computed cannot be an attribute: declined, nothing written */
    g = legacy_graph(true);
    CHECK_ERR(ctx, onnx_export_file(ctx, g, p), WPK_ERR_UNSUPPORTED, "is computed in the graph");
    CHECK(strstr(wpk_context_error(ctx), "'clip' (Clip)") &&
          strstr(wpk_context_error(ctx), "'max'"));
    CHECK(dir_entries() == 0);
    ir_graph_free(g);
}

/* ---- must-fail ---- */

static void test_missing_directory(wpk_context *ctx, wpk_model *m) {
    const char *p = in_dir("no/such/dir/model.onnx");
    CHECK_ERR(ctx, wpk_model_save(ctx, m, p), WPK_ERR_IO, "No such file or directory");
    CHECK(strstr(wpk_context_error(ctx), p) != NULL);
    CHECK(dir_entries() == 0);
}

static void test_directory_in_the_way(wpk_context *ctx, wpk_model *m) {
    const char *p = in_dir("a_dir.onnx");
    CHECK(mkdir(p, 0700) == 0);
    CHECK_ERR(ctx, wpk_model_save(ctx, m, p), WPK_ERR_IO, "cannot write");
    CHECK(strstr(wpk_context_error(ctx), p) != NULL);
    struct stat sb;
    CHECK(stat(p, &sb) == 0 && S_ISDIR(sb.st_mode));
    CHECK(dir_entries() == 1); /* the directory, no temporary file */
    rmdir(p);
}

/* An existing model at the path, and a write that fails midway (the file size limit makes the
 * kernel refuse the bytes, as a full disk would): the old file stays, no temporary is left. */
static void test_write_fails_midway(wpk_context *ctx, wpk_model *m) {
    const char *p = in_dir("existing.onnx");
    static const unsigned char old[] = "the previous model";
    FILE *f = fopen(p, "wb");
    fwrite(old, 1, sizeof old, f);
    fclose(f);
    struct rlimit saved, small;
    CHECK(getrlimit(RLIMIT_FSIZE, &saved) == 0);
    small = saved;
    small.rlim_cur = 64;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
    wpk_status st = wpk_model_save(ctx, m, p);
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, prev);
    CHECK_ERR(ctx, st, WPK_ERR_IO, "File too large");
    CHECK(strstr(wpk_context_error(ctx), p) != NULL);
    CHECK(same_file(p, old, sizeof old));
    CHECK(dir_entries() == 1);

    /* and a write that works replaces it */
    CHECK(wpk_model_save(ctx, m, p) == WPK_OK);
    CHECK(!same_file(p, old, sizeof old));
    CHECK(dir_entries() == 1);
    remove(p);
}

/* Every allocation of a save failing in turn: WPK_ERR_NOMEM with a message, the existing file
 * untouched, nothing left behind (the sanitizer build checks for leaks). */
static void test_allocation_failures(wpk_context *ctx, wpk_model *m) {
    const char *p = in_dir("existing.onnx");
    static const unsigned char old[] = "the previous model";
    FILE *f = fopen(p, "wb");
    fwrite(old, 1, sizeof old, f);
    fclose(f);
    const char *scratch = in_dir("scratch.onnx");
    wpk_alloc_fail_at(0);
    CHECK(wpk_model_save(ctx, m, scratch) == WPK_OK);
    long total = wpk_alloc_count();
    remove(scratch);
    CHECK(total >= 3);
    for (long n = 1; n <= total; n++) {
        wpk_alloc_fail_at(n);
        wpk_status st = wpk_model_save(ctx, m, p);
        wpk_alloc_fail_at(0);
        CHECK_ERR(ctx, st, WPK_ERR_NOMEM, "out of memory");
        CHECK(same_file(p, old, sizeof old));
        CHECK(dir_entries() == 1);
    }
    remove(p);
}

/* A node the writer cannot write (an If whose branches the importer does not keep): refused
 * before anything is written. */
static void test_unwritable_node(wpk_context *ctx) {
    wpk_model *m = NULL;
    CHECK(wpk_model_load(ctx, "tests/fuzz/corpus/mixed.onnx", &m) == WPK_OK);
    if (!m) return;
    const char *p = in_dir("existing.onnx");
    static const unsigned char old[] = "the previous model";
    FILE *f = fopen(p, "wb");
    fwrite(old, 1, sizeof old, f);
    fclose(f);
    CHECK_ERR(ctx, wpk_model_save(ctx, m, p), WPK_ERR_UNSUPPORTED, "is a graph");
    CHECK(strstr(wpk_context_error(ctx), "(If)") != NULL);
    CHECK(same_file(p, old, sizeof old));
    CHECK(dir_entries() == 1);
    remove(p);
    wpk_model_free(m);
}

/* Over protobuf's 2 GiB: refused with a message before any byte is written. The constant claims
 * 600 million floats; its data is never read (the size check comes first). */
static void test_too_large(wpk_context *ctx) {
    ir_graph *g = ir_graph_create();
    g->opset = 13;
    int x = add_input(g, "x", 1, (int64_t[]){600000000}, NULL);
    static float small[4];
    int big = ir_graph_add_value(g, "big");
    g->values[big].is_const = true;
    g->values[big].t.dtype = WPK_DTYPE_FLOAT32;
    g->values[big].t.ndim = 1;
    g->values[big].t.dims[0] = 600000000;
    g->values[big].t.data = small;
    int k = add_node(g, "add", "Add", "", 2, (int[]){x, big}, 1, (const char *[]){"y"});
    g->nodes[k].op = ir_op_from_onnx("", "Add");
    int y = g->nodes[k].out[0];
    g->values[y].t = g->values[x].t;
    set_outputs(g, 1, &y);
    const char *p = in_dir("huge.onnx");
    CHECK_ERR(ctx, onnx_export_file(ctx, g, p), WPK_ERR_UNSUPPORTED, "2 GiB");
    CHECK(strstr(wpk_context_error(ctx), p) != NULL);
    CHECK(dir_entries() == 0);
    ir_graph_free(g);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/wpk-export-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    wpk_context *ctx = wpk_context_create();
    test_corpus_round_trips(ctx);
    test_runnable_graph(ctx);
    test_attribute_kinds(ctx);
    test_legacy_forms(ctx);
    wpk_model *m = NULL;
    CHECK(wpk_model_load(ctx, "tests/fuzz/corpus/conv_relu.onnx", &m) == WPK_OK);
    if (m) {
        test_missing_directory(ctx, m);
        test_directory_in_the_way(ctx, m);
        test_write_fails_midway(ctx, m);
        test_allocation_failures(ctx, m);
    }
    wpk_model_free(m);
    test_unwritable_node(ctx);
    test_too_large(ctx);
    wpk_context_free(ctx);
    CHECK(dir_entries() == 0);
    rmdir(dir);
    CHECK_DONE();
}
