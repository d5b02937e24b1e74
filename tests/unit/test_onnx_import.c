/* test_onnx_import.c -- the ONNX frontend: every initializer storage form, external data, the
 * legacy-form rewrite, inputs/outputs/attributes, models written by ONNX's own serializer
 * (tests/fuzz/corpus/, from tests/unit/make_import_fixtures.py), must-fail cases with their
 * status and message, and fault injection (every allocation failing in turn). Models are built
 * in memory with the generated protobuf-c structs and packed. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "check.h"
#include "onnx/onnx.pb-c.h"
#include "onnx/onnx_import.h"

/* ---- building models: everything lives in one arena, freed at the end ---- */

static arena T;

#define NEW(type) ((type *)arena_alloc(&T, sizeof(type)))

/* Append item to a pointer array grown one slot at a time (models here are tiny). */
static void push(void *arr_p, size_t *n, void *item) {
    void ***arr = arr_p;
    void **grown = arena_alloc(&T, sizeof(void *) * (*n + 1));
    if (*n) memcpy(grown, *arr, sizeof(void *) * *n);
    grown[(*n)++] = item;
    *arr = grown;
}

static Onnx__ModelProto *model(int opset) {
    Onnx__ModelProto *m = NEW(Onnx__ModelProto);
    onnx__model_proto__init(m);
    m->has_ir_version = 1;
    m->ir_version = 8;
    Onnx__OperatorSetIdProto *o = NEW(Onnx__OperatorSetIdProto);
    onnx__operator_set_id_proto__init(o);
    o->domain = "";
    o->has_version = 1;
    o->version = opset;
    push(&m->opset_import, &m->n_opset_import, o);
    m->graph = NEW(Onnx__GraphProto);
    onnx__graph_proto__init(m->graph);
    m->graph->name = "test";
    return m;
}

static Onnx__TensorProto *tensor(const char *name, int dtype, int ndim, const int64_t *dims) {
    Onnx__TensorProto *t = NEW(Onnx__TensorProto);
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->has_data_type = 1;
    t->data_type = dtype;
    t->n_dims = (size_t)ndim;
    t->dims = (int64_t *)dims;
    return t;
}

static void raw(Onnx__TensorProto *t, const void *data, size_t n) {
    t->has_raw_data = 1;
    t->raw_data.len = n;
    t->raw_data.data = (uint8_t *)data;
}

static void external(Onnx__TensorProto *t, const char *location, const char *offset,
                     const char *length) {
    const char *kv[3][2] = {{"location", location}, {"offset", offset}, {"length", length}};
    t->has_data_location = 1;
    t->data_location = 1;
    for (int i = 0; i < 3; i++) {
        if (!kv[i][1]) continue;
        Onnx__StringStringEntryProto *e = NEW(Onnx__StringStringEntryProto);
        onnx__string_string_entry_proto__init(e);
        e->key = (char *)kv[i][0];
        e->value = (char *)kv[i][1];
        push(&t->external_data, &t->n_external_data, e);
    }
}

/* A tensor ValueInfo; dims of -1 take their name from params[i] (NULL: no dim_param). ndim < 0
 * leaves the shape out. */
static Onnx__ValueInfoProto *vinfo(const char *name, int dtype, int ndim, const int64_t *dims,
                                   const char *const *params) {
    Onnx__ValueInfoProto *vi = NEW(Onnx__ValueInfoProto);
    onnx__value_info_proto__init(vi);
    vi->name = (char *)name;
    vi->type = NEW(Onnx__TypeProto);
    onnx__type_proto__init(vi->type);
    vi->type->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    vi->type->tensor_type = NEW(Onnx__TypeProto__Tensor);
    onnx__type_proto__tensor__init(vi->type->tensor_type);
    vi->type->tensor_type->has_elem_type = 1;
    vi->type->tensor_type->elem_type = dtype;
    if (ndim < 0) return vi;
    Onnx__TensorShapeProto *s = NEW(Onnx__TensorShapeProto);
    onnx__tensor_shape_proto__init(s);
    for (int i = 0; i < ndim; i++) {
        Onnx__TensorShapeProto__Dimension *d = NEW(Onnx__TensorShapeProto__Dimension);
        onnx__tensor_shape_proto__dimension__init(d);
        if (dims[i] >= 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = dims[i];
        } else if (params && params[i]) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = (char *)params[i];
        }
        push(&s->dim, &s->n_dim, d);
    }
    vi->type->tensor_type->shape = s;
    return vi;
}

/* Split "a,,b" into {"a", "", "b"}. */
static void names(const char *list, char ***out, size_t *n) {
    *n = 0;
    if (!list) return;
    for (const char *p = list;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        push(out, n, arena_strndup(&T, p, len));
        if (!end) break;
        p = end + 1;
    }
}

static Onnx__NodeProto *node(Onnx__ModelProto *m, const char *op, const char *name,
                             const char *ins, const char *outs) {
    Onnx__NodeProto *n = NEW(Onnx__NodeProto);
    onnx__node_proto__init(n);
    n->op_type = (char *)op;
    n->name = (char *)name;
    names(ins, &n->input, &n->n_input);
    names(outs, &n->output, &n->n_output);
    push(&m->graph->node, &m->graph->n_node, n);
    return n;
}

static Onnx__AttributeProto *attr(Onnx__NodeProto *n, const char *name, int type) {
    Onnx__AttributeProto *a = NEW(Onnx__AttributeProto);
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = type;
    push(&n->attribute, &n->n_attribute, a);
    return a;
}

static void attr_ints(Onnx__NodeProto *n, const char *name, int count, const int64_t *v) {
    Onnx__AttributeProto *a = attr(n, name, IR_ATTR_INTS);
    a->n_ints = (size_t)count;
    a->ints = (int64_t *)v;
}

static void attr_float(Onnx__NodeProto *n, const char *name, float f) {
    Onnx__AttributeProto *a = attr(n, name, IR_ATTR_FLOAT);
    a->has_f = 1;
    a->f = f;
}

static void input(Onnx__ModelProto *m, Onnx__ValueInfoProto *vi) {
    push(&m->graph->input, &m->graph->n_input, vi);
}
static void output(Onnx__ModelProto *m, Onnx__ValueInfoProto *vi) {
    push(&m->graph->output, &m->graph->n_output, vi);
}
static void initializer(Onnx__ModelProto *m, Onnx__TensorProto *t) {
    push(&m->graph->initializer, &m->graph->n_initializer, t);
}

static uint8_t *pack(const Onnx__ModelProto *m, size_t *len) {
    *len = onnx__model_proto__get_packed_size(m);
    uint8_t *buf = arena_alloc(&T, *len);
    onnx__model_proto__pack(m, buf);
    return buf;
}

static wpk_context *ctx;

static wpk_status import(const Onnx__ModelProto *m, const char *dir, ir_graph **g) {
    size_t len;
    uint8_t *buf = pack(m, &len);
    return onnx_import_buffer(ctx, buf, len, dir, "test.onnx", g);
}

static const ir_value *value(const ir_graph *g, const char *name) {
    int id = ir_graph_find_value(g, name);
    return id >= 0 ? &g->values[id] : NULL;
}

static const ir_node *find_node(const ir_graph *g, const char *name) {
    for (int i = 0; i < g->nnodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0) return &g->nodes[i];
    return NULL;
}

static bool same_dims(const ir_tensor *t, int ndim, const int64_t *dims) {
    if (t->ndim != ndim) return false;
    for (int i = 0; i < ndim; i++)
        if (t->dims[i] != dims[i]) return false;
    return true;
}

/* A constant input of node n at slot i holding `count` int64 values equal to want. */
static bool const_ints(const ir_graph *g, const ir_node *n, int i, int count, const int64_t *want) {
    if (!n || i >= n->nin || n->in[i] < 0) return false;
    const ir_value *v = &g->values[n->in[i]];
    return v->is_const && v->t.dtype == WPK_DTYPE_INT64 && v->t.ndim == 1 &&
           v->t.dims[0] == count && memcmp(v->t.data, want, sizeof(int64_t) * (size_t)count) == 0;
}

static bool const_float(const ir_graph *g, const ir_node *n, int i, float want) {
    if (!n || i >= n->nin || n->in[i] < 0) return false;
    const ir_value *v = &g->values[n->in[i]];
    return v->is_const && v->t.dtype == WPK_DTYPE_FLOAT32 && v->t.ndim == 0 &&
           *(const float *)v->t.data == want;
}

/* ---- storage forms ---- */

static const float F6[6] = {1.5f, -2, 3, 4.25f, -5, 6};
static const int64_t D23[2] = {2, 3};

static void test_storage_forms(void) {
    Onnx__ModelProto *m = model(13);
    Onnx__TensorProto *t = tensor("f_raw", WPK_DTYPE_FLOAT32, 2, D23);
    raw(t, F6, sizeof F6);
    initializer(m, t);
    t = tensor("f_typed", WPK_DTYPE_FLOAT32, 2, D23);
    t->n_float_data = 6;
    t->float_data = (float *)F6;
    initializer(m, t);

    static const int64_t I64[3] = {-1, 0, (int64_t)1 << 40};
    static const int64_t D3[1] = {3};
    t = tensor("i64_raw", WPK_DTYPE_INT64, 1, D3);
    raw(t, I64, sizeof I64);
    initializer(m, t);
    t = tensor("i64_typed", WPK_DTYPE_INT64, 1, D3);
    t->n_int64_data = 3;
    t->int64_data = (int64_t *)I64;
    initializer(m, t);

    static const int32_t I32[3] = {-7, 70000, 0};
    t = tensor("i32_typed", WPK_DTYPE_INT32, 1, D3);
    t->n_int32_data = 3;
    t->int32_data = (int32_t *)I32;
    initializer(m, t);
    t = tensor("i32_raw", WPK_DTYPE_INT32, 1, D3);
    raw(t, I32, sizeof I32);
    initializer(m, t);

    static const int32_t I8V[3] = {-128, 127, 5}, U8V[3] = {0, 255, 9}, BV[3] = {1, 0, 7};
    static const int8_t I8[3] = {-128, 127, 5};
    static const uint8_t U8[3] = {0, 255, 9}, B[3] = {1, 0, 1}, BRAW[3] = {1, 0, 2};
    const struct { const char *typed, *rawname; int dtype; const int32_t *v; const void *rawv, *want; } small[3] = {
        {"i8_typed", "i8_raw", WPK_DTYPE_INT8, I8V, I8, I8},
        {"u8_typed", "u8_raw", WPK_DTYPE_UINT8, U8V, U8, U8},
        {"b_typed", "b_raw", WPK_DTYPE_BOOL, BV, BRAW, B}};
    for (int k = 0; k < 3; k++) {
        t = tensor(small[k].typed, small[k].dtype, 1, D3);
        t->n_int32_data = 3;
        t->int32_data = (int32_t *)small[k].v;
        initializer(m, t);
        t = tensor(small[k].rawname, small[k].dtype, 1, D3);
        raw(t, small[k].rawv, 3);
        initializer(m, t);
    }

    static const double DV[2] = {0.1, -2.5};
    static const int64_t D2[1] = {2};
    t = tensor("f64_typed", WPK_DTYPE_FLOAT64, 1, D2);
    t->n_double_data = 2;
    t->double_data = (double *)DV;
    initializer(m, t);
    t = tensor("f64_raw", WPK_DTYPE_FLOAT64, 1, D2);
    raw(t, DV, sizeof DV);
    initializer(m, t);

    static const int64_t D0[2] = {0, 4};
    initializer(m, tensor("empty", WPK_DTYPE_FLOAT32, 2, D0));
    static const float S = 42;
    t = tensor("scalar", WPK_DTYPE_FLOAT32, 0, NULL);
    t->n_float_data = 1;
    t->float_data = (float *)&S;
    initializer(m, t);
    output(m, vinfo("f_raw", WPK_DTYPE_FLOAT32, 2, D23, NULL));

    ir_graph *g;
    wpk_status st = import(m, NULL, &g);
    CHECK(st == WPK_OK);
    if (st) {
        fprintf(stderr, "  %s\n", wpk_context_error(ctx));
        return;
    }
    CHECK(g->ninputs == 0 && g->noutputs == 1 && g->opset == 13);
    CHECK(strcmp(g->path, "test.onnx") == 0);
    const char *pairs[][3] = {{"f_raw", "f_typed", (const char *)F6}, {"i64_raw", "i64_typed", (const char *)I64},
                              {"i32_raw", "i32_typed", (const char *)I32}, {"i8_raw", "i8_typed", (const char *)I8},
                              {"u8_raw", "u8_typed", (const char *)U8}, {"b_raw", "b_typed", (const char *)B},
                              {"f64_raw", "f64_typed", (const char *)DV}};
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        const ir_value *a = value(g, pairs[k][0]), *b = value(g, pairs[k][1]);
        CHECK(a && b && a->is_const && b->is_const && !a->is_input);
        if (!a || !b) continue;
        CHECK(a->t.dtype == b->t.dtype && ir_same_shape(&a->t, &b->t));
        CHECK(memcmp(a->t.data, pairs[k][2], ir_nbytes(&a->t)) == 0);
        CHECK(memcmp(b->t.data, pairs[k][2], ir_nbytes(&b->t)) == 0);
        if (memcmp(a->t.data, pairs[k][2], ir_nbytes(&a->t)) != 0)
            fprintf(stderr, "  %s differs\n", pairs[k][0]);
    }
    const ir_value *v = value(g, "f_raw");
    CHECK(v && v->t.dtype == WPK_DTYPE_FLOAT32 && same_dims(&v->t, 2, D23));
    v = value(g, "empty");
    CHECK(v && v->is_const && v->t.data && ir_numel(&v->t) == 0 && same_dims(&v->t, 2, D0));
    v = value(g, "scalar");
    CHECK(v && v->t.ndim == 0 && *(const float *)v->t.data == 42);
    ir_graph_free(g);
}

/* ---- external data ---- */

static char tmpdir[64];

static void write_file(const char *dir, const char *name, const void *data, size_t n) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK(fwrite(data, 1, n, f) == n);
    fclose(f);
}

static Onnx__ModelProto *external_model(const char *location, const char *offset,
                                        const char *length) {
    Onnx__ModelProto *m = model(13);
    Onnx__TensorProto *t = tensor("w", WPK_DTYPE_FLOAT32, 2, D23);
    external(t, location, offset, length);
    initializer(m, t);
    output(m, vinfo("w", WPK_DTYPE_FLOAT32, 2, D23, NULL));
    return m;
}

static void test_external_data(void) {
    strcpy(tmpdir, "/tmp/wpk_onnx_import_XXXXXX");
    CHECK(mkdtemp(tmpdir) != NULL);
    char sub[128];
    snprintf(sub, sizeof sub, "%s/weights", tmpdir);
    CHECK(mkdir(sub, 0755) == 0);
    /* 8 bytes of padding, then the 24 bytes of F6 */
    uint8_t blob[8 + sizeof F6] = {0};
    memcpy(blob + 8, F6, sizeof F6);
    write_file(sub, "w.bin", blob, sizeof blob);
    write_file(tmpdir, "outside.bin", F6, sizeof F6);

    char path[256];
    snprintf(path, sizeof path, "%s/model.onnx", tmpdir);
    size_t len;
    uint8_t *buf = pack(external_model("weights/w.bin", "8", "24"), &len);
    write_file(tmpdir, "model.onnx", buf, len);
    ir_graph *g;
    wpk_status st = onnx_import_file(ctx, path, &g);
    CHECK(st == WPK_OK);
    if (st == WPK_OK) {
        const ir_value *v = value(g, "w");
        CHECK(v && v->is_const && same_dims(&v->t, 2, D23) && memcmp(v->t.data, F6, sizeof F6) == 0);
        CHECK(strcmp(g->path, path) == 0);
        ir_graph_free(g);
    } else {
        fprintf(stderr, "  %s\n", wpk_context_error(ctx));
    }

    /* no length: the tensor's own size is read at the offset */
    CHECK(import(external_model("weights/w.bin", "8", NULL), tmpdir, &g) == WPK_OK);
    if (g) ir_graph_free(g);

    /* the same model from memory with no directory: refused */
    CHECK_ERR(ctx, import(external_model("weights/w.bin", "8", "24"), NULL, &g), WPK_ERR_UNSUPPORTED,
              "initializer 'w' keeps its data in an external file");
    CHECK(g == NULL);
    CHECK_ERR(ctx, import(external_model("../outside.bin", NULL, NULL), sub, &g), WPK_ERR_MODEL,
              "external data location '../outside.bin' is outside the model's directory");
    CHECK_ERR(ctx, import(external_model("weights/../../x.bin", NULL, NULL), tmpdir, &g),
              WPK_ERR_MODEL, "outside the model's directory");
    char abs[200];
    snprintf(abs, sizeof abs, "%s/outside.bin", tmpdir);
    CHECK_ERR(ctx, import(external_model(abs, NULL, NULL), tmpdir, &g), WPK_ERR_MODEL,
              "outside the model's directory");
    CHECK_ERR(ctx, import(external_model("weights/w.bin", "16", NULL), tmpdir, &g), WPK_ERR_MODEL,
              "needs 24 bytes at offset 16");
    CHECK_ERR(ctx, import(external_model("weights/w.bin", "999999", NULL), tmpdir, &g),
              WPK_ERR_MODEL, "offset 999999");
    CHECK_ERR(ctx, import(external_model("weights/w.bin", "8", "20"), tmpdir, &g), WPK_ERR_MODEL,
              "external data length 20 does not match");
    CHECK_ERR(ctx, import(external_model("weights/w.bin", "-8", NULL), tmpdir, &g), WPK_ERR_MODEL,
              "offset '-8' is not a non-negative integer");
    CHECK_ERR(ctx, import(external_model("weights/missing.bin", NULL, NULL), tmpdir, &g),
              WPK_ERR_IO, "No such file or directory");
    CHECK_ERR(ctx, import(external_model("weights", NULL, NULL), tmpdir, &g), WPK_ERR_IO,
              "is not a regular file");
    CHECK_ERR(ctx, import(external_model(NULL, NULL, NULL), tmpdir, &g), WPK_ERR_MODEL,
              "external data has no location");
    CHECK(strncmp(wpk_context_error(ctx), "test.onnx: ", 11) == 0);
}

/* ---- legacy attribute forms ---- */

static void test_legacy(void) {
    static const int64_t axes02[2] = {0, 2}, axes0[1] = {0}, starts[2] = {0, 1}, ends[2] = {2, 4},
                         pads[4] = {0, 1, 0, 1}, split[2] = {2, 3}, axes1[1] = {1};
    static const int64_t shape[3] = {1, 4, 1};
    Onnx__ModelProto *m = model(9);
    input(m, vinfo("x", WPK_DTYPE_FLOAT32, 3, shape, NULL));
    Onnx__NodeProto *n = node(m, "Squeeze", "sq", "x", "s");
    attr_ints(n, "axes", 2, axes02);
    n = node(m, "Unsqueeze", "unsq", "s", "u");
    attr_ints(n, "axes", 1, axes0);
    n = node(m, "Slice", "slice", "u", "sl");
    attr_ints(n, "starts", 2, starts);
    attr_ints(n, "ends", 2, ends);
    n = node(m, "Slice", "slice_axes", "sl", "sl2");
    attr_ints(n, "starts", 2, starts);
    attr_ints(n, "ends", 2, ends);
    attr_ints(n, "axes", 1, axes1);
    n = node(m, "Clip", "clip", "sl2", "c");
    attr_float(n, "min", -1);
    attr_float(n, "max", 6);
    n = node(m, "Clip", "clip_max", "c", "c2");
    attr_float(n, "max", 2.5f);
    node(m, "Clip", "clip_none", "c2", "c3");
    n = node(m, "Pad", "pad", "c3", "p");
    attr_ints(n, "pads", 4, pads);
    attr_float(n, "value", 0.25f);
    Onnx__AttributeProto *mode = attr(n, "mode", IR_ATTR_STRING);
    mode->has_s = 1;
    mode->s.data = (uint8_t *)"reflect";
    mode->s.len = 7;
    n = node(m, "Split", "split", "p", "a,b");
    attr_ints(n, "split", 2, split);
    Onnx__AttributeProto *axis = attr(n, "axis", IR_ATTR_INT);
    axis->has_i = 1;
    axis->i = 1;
    n = node(m, "Split", "split_even", "p", "e1,e2");
    attr_ints(n, "split", 0, NULL); /* empty: means equal parts, as if absent */
    n = node(m, "ReduceMean", "mean", "a", "y");
    attr_ints(n, "axes", 1, axes1);
    Onnx__AttributeProto *keep = attr(n, "keepdims", IR_ATTR_INT);
    keep->has_i = 1;
    node(m, "ReduceMean", "mean_all", "b", "y2");
    output(m, vinfo("y", WPK_DTYPE_FLOAT32, -1, NULL, NULL));
    output(m, vinfo("y2", WPK_DTYPE_FLOAT32, -1, NULL, NULL));
    /* a value already named like a generated constant: the new one takes a suffix */
    node(m, "Relu", "taken", "x", "sq__axes");
    output(m, vinfo("sq__axes", WPK_DTYPE_FLOAT32, -1, NULL, NULL));

    ir_graph *g;
    wpk_status st = import(m, NULL, &g);
    CHECK(st == WPK_OK);
    if (st) {
        fprintf(stderr, "  %s\n", wpk_context_error(ctx));
        return;
    }
    const ir_node *sq = find_node(g, "sq");
    CHECK(sq && sq->nin == 2 && sq->nattr == 0 && const_ints(g, sq, 1, 2, axes02));
    CHECK(sq && strcmp(g->values[sq->in[1]].name, "sq__axes_1") == 0);
    const ir_node *u = find_node(g, "unsq");
    CHECK(u && u->nin == 2 && u->nattr == 0 && const_ints(g, u, 1, 1, axes0));
    CHECK(u && strcmp(g->values[u->in[1]].name, "unsq__axes") == 0);
    const ir_node *sl = find_node(g, "slice");
    CHECK(sl && sl->nin == 3 && sl->nattr == 0 && const_ints(g, sl, 1, 2, starts) &&
          const_ints(g, sl, 2, 2, ends));
    sl = find_node(g, "slice_axes");
    CHECK(sl && sl->nin == 4 && const_ints(g, sl, 3, 1, axes1));
    const ir_node *c = find_node(g, "clip");
    CHECK(c && c->nin == 3 && c->nattr == 0 && const_float(g, c, 1, -1) && const_float(g, c, 2, 6));
    c = find_node(g, "clip_max");
    CHECK(c && c->nin == 3 && c->in[1] == -1 && const_float(g, c, 2, 2.5f));
    c = find_node(g, "clip_none");
    CHECK(c && c->nin == 1);
    const ir_node *p = find_node(g, "pad");
    CHECK(p && p->nin == 3 && const_ints(g, p, 1, 4, pads) && const_float(g, p, 2, 0.25f));
    CHECK(p && p->nattr == 1 && strcmp(ir_attr_str(p, "mode", ""), "reflect") == 0);
    const ir_node *s = find_node(g, "split");
    CHECK(s && s->nin == 2 && const_ints(g, s, 1, 2, split) && ir_attr_int(s, "axis", 0) == 1 &&
          s->nattr == 1);
    s = find_node(g, "split_even");
    CHECK(s && s->nin == 1 && s->nattr == 0);
    const ir_node *r = find_node(g, "mean");
    CHECK(r && r->nin == 2 && const_ints(g, r, 1, 1, axes1) && r->nattr == 1 &&
          ir_attr_find(r, "keepdims"));
    r = find_node(g, "mean_all");
    CHECK(r && r->nin == 1);
    for (int i = 0; i < g->nnodes; i++) CHECK(g->nodes[i].opset == 9);
    ir_graph_free(g);

    /* the newest forms are left alone */
    m = model(13);
    input(m, vinfo("x", WPK_DTYPE_FLOAT32, 3, shape, NULL));
    input(m, vinfo("axes", WPK_DTYPE_INT64, 1, axes0, NULL));
    node(m, "Squeeze", "sq", "x,axes", "y");
    output(m, vinfo("y", WPK_DTYPE_FLOAT32, -1, NULL, NULL));
    CHECK(import(m, NULL, &g) == WPK_OK);
    if (g) {
        sq = find_node(g, "sq");
        CHECK(sq && sq->nin == 2 && sq->in[1] == ir_graph_find_value(g, "axes") && g->nvalues == 3);
        ir_graph_free(g);
    }

    /* malformed legacy forms */
    m = model(11);
    input(m, vinfo("x", WPK_DTYPE_FLOAT32, 3, shape, NULL));
    node(m, "Unsqueeze", "u", "x", "y");
    output(m, vinfo("y", WPK_DTYPE_FLOAT32, -1, NULL, NULL));
    CHECK_ERR(ctx, import(m, NULL, &g), WPK_ERR_MODEL,
              "test.onnx: node 'u' (Unsqueeze): attribute 'axes' is required at opset 11");
    m = model(11);
    input(m, vinfo("x", WPK_DTYPE_FLOAT32, 3, shape, NULL));
    n = node(m, "Squeeze", "s", "x,x", "y");
    attr_ints(n, "axes", 1, axes0);
    output(m, vinfo("y", WPK_DTYPE_FLOAT32, -1, NULL, NULL));
    CHECK_ERR(ctx, import(m, NULL, &g), WPK_ERR_MODEL, "node 's' (Squeeze): opset 11 takes 1 input");
    m = model(10);
    input(m, vinfo("x", WPK_DTYPE_FLOAT32, 3, shape, NULL));
    n = node(m, "Clip", "c", "x", "y");
    attr_ints(n, "min", 1, axes0);
    output(m, vinfo("y", WPK_DTYPE_FLOAT32, -1, NULL, NULL));
    CHECK_ERR(ctx, import(m, NULL, &g), WPK_ERR_MODEL, "node 'c' (Clip): attribute 'min' must be a float");
}

/* ---- inputs, outputs, nodes, attributes ---- */

static void test_graph_parts(void) {
    static const int64_t xdims[3] = {-1, 3, -1}, wdims[1] = {3};
    static const char *const params[3] = {"N", NULL, NULL};
    static const float W[3] = {1, 2, 3};
    Onnx__ModelProto *m = model(17);
    Onnx__OperatorSetIdProto *o = NEW(Onnx__OperatorSetIdProto);
    onnx__operator_set_id_proto__init(o);
    o->domain = "com.example";
    o->has_version = 1;
    o->version = 3;
    push(&m->opset_import, &m->n_opset_import, o);
    Onnx__TensorProto *w = tensor("w", WPK_DTYPE_FLOAT32, 1, wdims);
    raw(w, W, sizeof W);
    initializer(m, w);
    /* outputs declared before the nodes that make them; nodes out of order */
    output(m, vinfo("y", WPK_DTYPE_FLOAT32, 3, xdims, params));
    output(m, vinfo("k", WPK_DTYPE_INT64, -1, NULL, NULL));
    input(m, vinfo("x", WPK_DTYPE_FLOAT32, 3, xdims, params));
    input(m, vinfo("w", WPK_DTYPE_FLOAT32, 1, wdims, NULL)); /* initializer-backed */
    node(m, "Mul", NULL, "r,w", "y");
    node(m, "Relu", NULL, "x", "r");
    Onnx__NodeProto *n = node(m, "Constant", "const", NULL, "k");
    Onnx__AttributeProto *a = attr(n, "value", IR_ATTR_TENSOR);
    static const int64_t K[2] = {7, -7}, kdims[1] = {2};
    a->t = tensor("", WPK_DTYPE_INT64, 1, kdims);
    a->t->n_int64_data = 2;
    a->t->int64_data = (int64_t *)K;
    n = node(m, "Frobnicate", "custom", "x,,w", "f1,");
    n->domain = "com.example";
    a = attr(n, "note", IR_ATTR_STRING);
    a->has_s = 1;
    a->s.data = (uint8_t *)"hi";
    a->s.len = 2;
    a = attr(n, "list", IR_ATTR_STRINGS);
    static ProtobufCBinaryData STRS[2] = {{3, (uint8_t *)"Tanh"}, {0, NULL}};
    a->n_strings = 2;
    a->strings = STRS;
    a = attr(n, "fs", IR_ATTR_FLOATS);
    static const float FS[2] = {0.5f, 1.5f};
    a->n_floats = 2;
    a->floats = (float *)FS;
    n = node(m, "If", "branch", "x", "z");
    a = attr(n, "then_branch", IR_ATTR_GRAPH);
    a->g = NEW(Onnx__GraphProto);
    onnx__graph_proto__init(a->g);
    n = node(m, "NotAnOp", "odd", "x", "q");
    n->domain = "ai.onnx";

    ir_graph *g;
    wpk_status st = import(m, NULL, &g);
    CHECK(st == WPK_OK);
    if (st) {
        fprintf(stderr, "  %s\n", wpk_context_error(ctx));
        return;
    }
    CHECK(g->opset == 17 && g->ninputs == 1 && g->noutputs == 2);
    const ir_value *x = &g->values[g->inputs[0]];
    CHECK(strcmp(x->name, "x") == 0 && x->is_input && !x->is_const);
    CHECK(x->t.dtype == WPK_DTYPE_FLOAT32 && same_dims(&x->t, 3, xdims));
    CHECK(x->dim_names[0] && strcmp(x->dim_names[0], "N") == 0 && !x->dim_names[1] && !x->dim_names[2]);
    const ir_value *wv = value(g, "w");
    CHECK(wv && wv->is_const && !wv->is_input);
    const ir_value *y = &g->values[g->outputs[0]];
    CHECK(strcmp(y->name, "y") == 0 && y->t.dtype == WPK_DTYPE_FLOAT32 && y->t.ndim == 3 &&
          y->dim_names[0] && strcmp(y->dim_names[0], "N") == 0);
    const ir_value *k = &g->values[g->outputs[1]];
    CHECK(strcmp(k->name, "k") == 0 && k->t.dtype == WPK_DTYPE_UNDEFINED); /* no shape declared */
    /* sorted: Relu before Mul; unnamed nodes named by op type and file position */
    const ir_node *relu = find_node(g, "Relu_1"), *mul = find_node(g, "Mul_0");
    CHECK(relu && mul && relu < mul && relu->op == IR_OP_RELU && mul->op == IR_OP_MUL);
    const ir_node *c = find_node(g, "const");
    const ir_attr *va = c ? ir_attr_find(c, "value") : NULL;
    CHECK(va && va->kind == IR_ATTR_TENSOR && va->t && va->t->dtype == WPK_DTYPE_INT64 &&
          same_dims(va->t, 1, kdims) && memcmp(va->t->data, K, sizeof K) == 0);
    const ir_node *cu = find_node(g, "custom");
    CHECK(cu && cu->op == IR_OP_UNSUPPORTED && strcmp(cu->domain, "com.example") == 0 &&
          cu->opset == 3 && strcmp(cu->op_type, "Frobnicate") == 0);
    CHECK(cu && cu->nin == 3 && cu->in[1] == -1 && cu->nout == 2 && cu->out[1] == -1);
    CHECK(cu && strcmp(ir_attr_str(cu, "note", ""), "hi") == 0);
    const ir_attr *list = cu ? ir_attr_find(cu, "list") : NULL;
    CHECK(list && list->kind == IR_ATTR_STRINGS && list->n == 2 &&
          strcmp(list->strs[0], "Tan") == 0 && strcmp(list->strs[1], "") == 0);
    const ir_attr *fs = cu ? ir_attr_find(cu, "fs") : NULL;
    CHECK(fs && fs->kind == IR_ATTR_FLOATS && fs->n == 2 && fs->floats[1] == 1.5f);
    const ir_node *br = find_node(g, "branch");
    CHECK(br && br->op == IR_OP_UNSUPPORTED && ir_attr_find(br, "then_branch") &&
          ir_attr_find(br, "then_branch")->kind == IR_ATTR_GRAPH);
    const ir_node *odd = find_node(g, "odd");
    CHECK(odd && odd->op == IR_OP_UNSUPPORTED && odd->domain[0] == 0 && odd->opset == 17);
    ir_graph_free(g);
}

/* ---- models written by ONNX itself (tests/fuzz/corpus, see make_import_fixtures.py) ---- */

static void test_onnx_written(void) {
    ir_graph *g;
    wpk_status st = onnx_import_file(ctx, "tests/fuzz/corpus/conv_relu.onnx", &g);
    CHECK(st == WPK_OK);
    if (st == WPK_OK) {
        const ir_value *x = &g->values[g->inputs[0]];
        static const int64_t xd[4] = {-1, 3, 8, 8}, wd[4] = {2, 3, 3, 3};
        CHECK(same_dims(&x->t, 4, xd) && strcmp(x->dim_names[0], "N") == 0);
        const ir_value *w = value(g, "W"), *b = value(g, "B");
        CHECK(w && same_dims(&w->t, 4, wd) && ((const float *)w->t.data)[53] == 53.0f / 64);
        CHECK(b && ((const float *)b->t.data)[0] == 0.5f && ((const float *)b->t.data)[1] == -0.25f);
        const ir_node *conv = find_node(g, "conv");
        int np;
        const int64_t *pads = conv ? ir_attr_ints(conv, "pads", &np) : NULL;
        CHECK(pads && np == 4 && pads[3] == 1);
        CHECK(find_node(g, "Relu_1") && g->nodes[1].op == IR_OP_RELU);
        ir_graph_free(g);
    } else {
        fprintf(stderr, "  %s\n", wpk_context_error(ctx));
    }

    st = onnx_import_file(ctx, "tests/fuzz/corpus/legacy_ops.onnx", &g);
    CHECK(st == WPK_OK);
    if (st == WPK_OK) {
        static const int64_t starts[2] = {0, 1}, ends[2] = {2, 4}, pads[4] = {0, 1, 0, 1},
                             split[2] = {2, 3}, one[1] = {1}, zero[1] = {0};
        const ir_node *sl = find_node(g, "slice");
        CHECK(sl && const_ints(g, sl, 1, 2, starts) && const_ints(g, sl, 2, 2, ends) && sl->nattr == 0);
        CHECK(const_ints(g, find_node(g, "unsq"), 1, 1, zero));
        CHECK(const_ints(g, find_node(g, "sq"), 1, 1, zero));
        CHECK(const_float(g, find_node(g, "clip"), 1, -1) && const_float(g, find_node(g, "clip"), 2, 1.5f));
        CHECK(const_ints(g, find_node(g, "pad"), 1, 4, pads) && const_float(g, find_node(g, "pad"), 2, 0.25f));
        CHECK(const_ints(g, find_node(g, "split"), 1, 2, split));
        CHECK(const_ints(g, find_node(g, "mean"), 1, 1, one));
        ir_graph_free(g);
    } else {
        fprintf(stderr, "  %s\n", wpk_context_error(ctx));
    }

    st = onnx_import_file(ctx, "tests/fuzz/corpus/mixed.onnx", &g);
    CHECK(st == WPK_OK);
    if (st == WPK_OK) {
        CHECK(g->ninputs == 2 && g->noutputs == 4); /* i64 is initializer-backed */
        static const int64_t i64[3] = {-1, 0, (int64_t)1 << 40};
        static const int32_t i32[2] = {-7, 70000};
        static const int8_t i8[2] = {-128, 127};
        static const uint8_t u8[2] = {0, 255}, flag[3] = {1, 0, 1};
        static const double f64[2] = {0.1, -2.5};
        CHECK(memcmp(value(g, "i64")->t.data, i64, sizeof i64) == 0 && value(g, "i64")->is_const);
        CHECK(memcmp(value(g, "i32")->t.data, i32, sizeof i32) == 0);
        CHECK(memcmp(value(g, "i8")->t.data, i8, sizeof i8) == 0);
        CHECK(memcmp(value(g, "u8")->t.data, u8, sizeof u8) == 0);
        CHECK(memcmp(value(g, "flag")->t.data, flag, sizeof flag) == 0);
        CHECK(memcmp(value(g, "f64")->t.data, f64, sizeof f64) == 0);
        CHECK(value(g, "cond")->is_input && value(g, "cond")->t.ndim == 0);
        const ir_node *k = find_node(g, "Constant_0");
        const ir_attr *a = k ? ir_attr_find(k, "value") : NULL;
        CHECK(a && a->t && ((const float *)a->t->data)[1] == 2.5f);
        CHECK(find_node(g, "branch")->op == IR_OP_UNSUPPORTED);
        CHECK(find_node(g, "custom")->op == IR_OP_UNSUPPORTED && find_node(g, "custom")->opset == 2);
        ir_graph_free(g);
    } else {
        fprintf(stderr, "  %s\n", wpk_context_error(ctx));
    }
}

/* ---- must-fail ---- */

static void expect(const Onnx__ModelProto *m, wpk_status want, const char *needle) {
    ir_graph *g = (ir_graph *)&g; /* must be reset to NULL */
    CHECK_ERR(ctx, import(m, NULL, &g), want, needle);
    CHECK(g == NULL);
    CHECK(strncmp(wpk_context_error(ctx), "test.onnx", 9) == 0);
}

/* A one-initializer model (the initializer is also the output). */
static Onnx__ModelProto *one_tensor(Onnx__TensorProto *t) {
    Onnx__ModelProto *m = model(13);
    initializer(m, t);
    output(m, vinfo(t->name, WPK_DTYPE_FLOAT32, -1, NULL, NULL));
    return m;
}

static void test_must_fail(void) {
    ir_graph *g;
    CHECK_ERR(ctx, onnx_import_file(ctx, "/nonexistent/model.onnx", &g), WPK_ERR_IO,
              "/nonexistent/model.onnx: cannot open: No such file or directory");
    CHECK(g == NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/empty.onnx", tmpdir);
    write_file(tmpdir, "empty.onnx", "", 0);
    CHECK_ERR(ctx, onnx_import_file(ctx, path, &g), WPK_ERR_PARSE, "empty.onnx is not an ONNX model: the file is empty");
    CHECK_ERR(ctx, onnx_import_file(ctx, tmpdir, &g), WPK_ERR_IO, "Is a directory");

    /* truncated: a valid model cut short */
    Onnx__ModelProto *m = model(13);
    static const int64_t d[2] = {2, 3};
    input(m, vinfo("x", WPK_DTYPE_FLOAT32, 2, d, NULL));
    node(m, "Relu", "r", "x", "y");
    output(m, vinfo("y", WPK_DTYPE_FLOAT32, 2, d, NULL));
    size_t len;
    uint8_t *buf = pack(m, &len);
    CHECK(onnx_import_buffer(ctx, buf, len, NULL, "ok.onnx", &g) == WPK_OK);
    ir_graph_free(g);
    write_file(tmpdir, "trunc.onnx", buf, len - 5);
    snprintf(path, sizeof path, "%s/trunc.onnx", tmpdir);
    CHECK_ERR(ctx, onnx_import_file(ctx, path, &g), WPK_ERR_PARSE, "trunc.onnx is not an ONNX model: protobuf parse failed");
    for (size_t cut = 1; cut < len; cut++) { /* every prefix: an error, never a crash */
        wpk_status st = onnx_import_buffer(ctx, buf, cut, NULL, "cut", &g);
        CHECK(st != WPK_OK && g == NULL);
    }

    /* random bytes (fixed seed) */
    uint8_t noise[512];
    uint32_t seed = 12345;
    for (size_t i = 0; i < sizeof noise; i++) {
        seed = seed * 1103515245u + 12345u;
        noise[i] = (uint8_t)(seed >> 16);
    }
    CHECK_ERR(ctx, onnx_import_buffer(ctx, noise, sizeof noise, NULL, "noise.bin", &g), WPK_ERR_PARSE,
              "noise.bin is not an ONNX model");

    /* valid protobuf, but not a model */
    Onnx__TensorProto *t = tensor("t", WPK_DTYPE_FLOAT32, 2, D23);
    raw(t, F6, sizeof F6);
    size_t tlen = onnx__tensor_proto__get_packed_size(t);
    uint8_t *tbuf = arena_alloc(&T, tlen);
    onnx__tensor_proto__pack(t, tbuf);
    CHECK_ERR(ctx, onnx_import_buffer(ctx, tbuf, tlen, NULL, "input_0.pb", &g), WPK_ERR_PARSE,
              "input_0.pb is not an ONNX model");
    size_t glen = onnx__graph_proto__get_packed_size(m->graph);
    uint8_t *gbuf = arena_alloc(&T, glen);
    onnx__graph_proto__pack(m->graph, gbuf);
    CHECK_ERR(ctx, onnx_import_buffer(ctx, gbuf, glen, NULL, "graph.pb", &g), WPK_ERR_PARSE,
              "graph.pb is not an ONNX model");
    m = model(13);
    m->graph = NULL;
    expect(m, WPK_ERR_PARSE, "test.onnx is not an ONNX model: it has no graph");
    m = model(13);
    m->n_opset_import = 0;
    expect(m, WPK_ERR_PARSE, "test.onnx is not an ONNX model: it has no opset_import");
    m = model(13);
    m->ir_version = 0;
    expect(m, WPK_ERR_PARSE, "test.onnx is not an ONNX model: ir_version is missing");

    /* opsets */
    expect(model(6), WPK_ERR_UNSUPPORTED,
           "test.onnx: default-domain opset 6 is not supported (Woodpecker reads opsets 7 to 28)");
    expect(model(29), WPK_ERR_UNSUPPORTED, "default-domain opset 29 is not supported");
    m = model(13);
    m->opset_import[0]->domain = "com.example";
    node(m, "Relu", "r", "x", "y");
    expect(m, WPK_ERR_MODEL, "node 'r' (Relu) is in the default ONNX domain, but the model imports no opset");

    /* tensors */
    t = tensor("w", WPK_DTYPE_FLOAT32, 2, D23);
    raw(t, F6, 8);
    expect(one_tensor(t), WPK_ERR_MODEL,
           "test.onnx: initializer 'w': raw_data has 8 bytes, but float32 [2, 3] needs 24");
    t = tensor("w", WPK_DTYPE_FLOAT32, 2, D23);
    t->n_float_data = 5;
    t->float_data = (float *)F6;
    expect(one_tensor(t), WPK_ERR_MODEL, "initializer 'w': float_data holds 5 values, but float32 [2, 3] needs 6");
    expect(one_tensor(tensor("w", WPK_DTYPE_FLOAT32, 2, D23)), WPK_ERR_MODEL,
           "initializer 'w' has no data, but float32 [2, 3] needs 6 values");
    t = tensor("w", WPK_DTYPE_FLOAT32, 2, D23);
    raw(t, F6, 24);
    t->n_float_data = 6;
    t->float_data = (float *)F6;
    expect(one_tensor(t), WPK_ERR_MODEL, "initializer 'w' has both raw_data and float_data");
    t = tensor("w", WPK_DTYPE_FLOAT32, 2, D23);
    static const int64_t I6[6] = {0};
    t->n_int64_data = 6;
    t->int64_data = (int64_t *)I6;
    expect(one_tensor(t), WPK_ERR_MODEL, "has int64_data, which cannot hold float32 values");
    static const int64_t neg[2] = {2, -3}, huge[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 1 << 20};
    expect(one_tensor(tensor("w", WPK_DTYPE_FLOAT32, 2, neg)), WPK_ERR_MODEL,
           "initializer 'w' has a negative dim (-3 at index 1)");
    t = tensor("w", WPK_DTYPE_FLOAT32, 3, huge);
    raw(t, F6, 24);
    expect(one_tensor(t), WPK_ERR_MODEL, "more elements than fit in memory");
    static const int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    expect(one_tensor(tensor("w", WPK_DTYPE_FLOAT32, 9, nine)), WPK_ERR_UNSUPPORTED,
           "initializer 'w' has 9 dims; at most 8 are supported");
    static const int32_t big[1] = {300};
    static const int64_t one[1] = {1};
    t = tensor("w", WPK_DTYPE_INT8, 1, one);
    t->n_int32_data = 1;
    t->int32_data = (int32_t *)big;
    expect(one_tensor(t), WPK_ERR_MODEL, "int32_data value 300 at index 0 is out of range for int8");
    t = tensor("h", 5, 1, one);
    raw(t, F6, 2);
    expect(one_tensor(t), WPK_ERR_UNSUPPORTED, "initializer 'h' has dtype int16 (5), which Woodpecker does not support");
    t = tensor("w", WPK_DTYPE_FLOAT32, 1, one);
    t->segment = NEW(Onnx__TensorProto__Segment);
    onnx__tensor_proto__segment__init(t->segment);
    expect(one_tensor(t), WPK_ERR_UNSUPPORTED, "is segmented");
    m = model(13);
    Onnx__SparseTensorProto *sp = NEW(Onnx__SparseTensorProto);
    onnx__sparse_tensor_proto__init(sp);
    sp->values = tensor("sparse_w", WPK_DTYPE_FLOAT32, 0, NULL);
    push(&m->graph->sparse_initializer, &m->graph->n_sparse_initializer, sp);
    expect(m, WPK_ERR_UNSUPPORTED, "initializer 'sparse_w' is sparse");
    t = tensor("w", WPK_DTYPE_FLOAT32, 1, one);
    raw(t, F6, 4);
    m = one_tensor(t);
    initializer(m, t);
    expect(m, WPK_ERR_MODEL, "initializer 'w' is defined twice");

    /* graph inputs and outputs */
    m = model(13);
    Onnx__ValueInfoProto *vi = vinfo("seq", WPK_DTYPE_FLOAT32, -1, NULL, NULL);
    vi->type->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
    vi->type->sequence_type = NEW(Onnx__TypeProto__Sequence);
    onnx__type_proto__sequence__init(vi->type->sequence_type);
    input(m, vi);
    expect(m, WPK_ERR_UNSUPPORTED, "test.onnx: graph input 'seq' is a sequence, not a tensor");
    m = model(13);
    input(m, vinfo("s", 8, 1, one, NULL));
    expect(m, WPK_ERR_UNSUPPORTED, "graph input 's' has dtype string (8)");
    m = model(13);
    input(m, vinfo("x", WPK_DTYPE_FLOAT32, -1, NULL, NULL));
    expect(m, WPK_ERR_UNSUPPORTED, "graph input 'x' has no shape");
    m = model(13);
    input(m, vinfo("x", WPK_DTYPE_FLOAT32, 2, neg, NULL));
    /* -3 is written as a dim_value here, not as a symbolic dim */
    m->graph->input[0]->type->tensor_type->shape->dim[1]->value_case =
        ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    m->graph->input[0]->type->tensor_type->shape->dim[1]->dim_value = -3;
    expect(m, WPK_ERR_MODEL, "graph input 'x' has a negative dim");
    m = model(13);
    input(m, vinfo("x", WPK_DTYPE_FLOAT32, 1, one, NULL));
    input(m, vinfo("x", WPK_DTYPE_FLOAT32, 1, one, NULL));
    expect(m, WPK_ERR_MODEL, "graph input 'x' is listed twice");
    m = model(13);
    output(m, vinfo("ghost", WPK_DTYPE_FLOAT32, 1, one, NULL));
    expect(m, WPK_ERR_MODEL, "graph output 'ghost' is not produced by any node");

    /* nodes */
    m = model(13);
    node(m, "Relu", "r", "nowhere", "y");
    output(m, vinfo("y", WPK_DTYPE_FLOAT32, 1, one, NULL));
    expect(m, WPK_ERR_MODEL, "test.onnx: node 'r' (Relu) reads 'nowhere'");
    m = model(13);
    input(m, vinfo("x", WPK_DTYPE_FLOAT32, 1, one, NULL));
    node(m, "Relu", "a", "x", "y");
    node(m, "Relu", "b", "x", "y");
    expect(m, WPK_ERR_MODEL, "value 'y' is assigned twice");
    m = model(13);
    input(m, vinfo("x", WPK_DTYPE_FLOAT32, 1, one, NULL));
    node(m, "", "blank", "x", "y");
    expect(m, WPK_ERR_MODEL, "node 'blank' (#0) has no op_type");
    m = model(13);
    input(m, vinfo("x", WPK_DTYPE_FLOAT32, 1, one, NULL));
    Onnx__NodeProto *n = node(m, "Relu", "r", "x", "y");
    attr_float(n, "alpha", 1);
    attr_float(n, "alpha", 2);
    expect(m, WPK_ERR_MODEL, "node 'r' (Relu): attribute 'alpha' is given twice");
    m = model(13);
    input(m, vinfo("x", WPK_DTYPE_FLOAT32, 1, one, NULL));
    n = node(m, "Constant", "c", NULL, "y");
    attr(n, "value", IR_ATTR_TENSOR);
    expect(m, WPK_ERR_MODEL, "node 'c' (Constant): attribute 'value' has type TENSOR but no tensor");
    m = model(13);
    n = node(m, "Constant", "c", NULL, "y");
    Onnx__AttributeProto *a = attr(n, "value", IR_ATTR_TENSOR);
    a->t = tensor("", WPK_DTYPE_FLOAT32, 2, D23);
    raw(a->t, F6, 4);
    expect(m, WPK_ERR_MODEL, "node 'c' (Constant): attribute 'value': raw_data has 4 bytes");
    m = model(13);
    n = node(m, "Constant", "c", NULL, "y");
    attr(n, "sparse_value", 11);
    expect(m, WPK_ERR_UNSUPPORTED, "attribute 'sparse_value' has type SPARSE_TENSOR (11), which Woodpecker does not read");

    /* Nesting deep enough to exhaust protobuf-c's unbounded recursion is refused up front:
     * ModelProto.graph(7){ input(11){ type(2){ sequence_type(4){ elem_type(1){ ... }}}}},
     * encoded from the inside out. */
    {
        size_t levels = 600, cap = 8 * levels + 64, at = cap, used = 0;
        uint8_t *b = arena_alloc(&T, cap);
        static const uint8_t tags[2] = {(1 << 3) | 2, (4 << 3) | 2}; /* innermost first */
        for (size_t i = 0; i < levels + 3; i++) {
            uint8_t tag = i < levels        ? tags[i % 2]
                          : i == levels     ? (2 << 3) | 2
                          : i == levels + 1 ? (11 << 3) | 2
                                            : (7 << 3) | 2;
            uint8_t v[10];
            int nv = 0;
            for (size_t l = used;; l >>= 7) {
                v[nv++] = (uint8_t)((l & 0x7f) | (l > 0x7f ? 0x80 : 0));
                if (l <= 0x7f) break;
            }
            at -= (size_t)nv;
            memcpy(b + at, v, (size_t)nv);
            b[--at] = tag;
            used += (size_t)nv + 1;
        }
        CHECK_ERR(ctx, onnx_import_buffer(ctx, b + at, used, NULL, "deep.onnx", &g), WPK_ERR_PARSE,
                  "deep.onnx is not an ONNX model: protobuf messages nest deeper than 100 levels");
    }
}

/* ---- onnx_read_tensor ---- */

static void test_read_tensor(void) {
    Onnx__TensorProto *t = tensor("input_0", WPK_DTYPE_FLOAT32, 2, D23);
    raw(t, F6, sizeof F6);
    size_t len = onnx__tensor_proto__get_packed_size(t);
    uint8_t *buf = arena_alloc(&T, len);
    onnx__tensor_proto__pack(t, buf);
    arena a = {0};
    ir_tensor out;
    const char *name = NULL;
    CHECK(onnx_read_tensor(ctx, buf, len, &a, &out, &name) == WPK_OK);
    CHECK(name && strcmp(name, "input_0") == 0);
    CHECK(out.dtype == WPK_DTYPE_FLOAT32 && same_dims(&out, 2, D23) &&
          memcmp(out.data, F6, sizeof F6) == 0);
    CHECK_ERR(ctx, onnx_read_tensor(ctx, buf, len - 3, &a, &out, &name), WPK_ERR_PARSE,
              "not a TensorProto: protobuf parse failed");
    t->has_data_type = 0;
    len = onnx__tensor_proto__get_packed_size(t);
    onnx__tensor_proto__pack(t, buf);
    CHECK_ERR(ctx, onnx_read_tensor(ctx, buf, len, &a, &out, NULL), WPK_ERR_PARSE,
              "not a TensorProto: it has no data_type");
    t = tensor("ext", WPK_DTYPE_FLOAT32, 2, D23);
    external(t, "x.bin", NULL, NULL);
    len = onnx__tensor_proto__get_packed_size(t);
    buf = arena_alloc(&T, len);
    onnx__tensor_proto__pack(t, buf);
    CHECK_ERR(ctx, onnx_read_tensor(ctx, buf, len, &a, &out, NULL), WPK_ERR_UNSUPPORTED,
              "tensor 'ext' keeps its data in an external file");
    arena_free(&a);
}

/* ---- fault injection: every allocation fails once; the result is OK or NOMEM, never a crash
 * or a leak (the sanitizer build checks leaks) ---- */

static void test_fault_injection(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/model.onnx", tmpdir); /* the external-data model */
    const char *files[] = {"tests/fuzz/corpus/legacy_ops.onnx", "tests/fuzz/corpus/mixed.onnx", path};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        int failures = 0;
        for (long n = 1;; n++) {
            ir_graph *g = NULL;
            wpk_alloc_fail_at(n);
            wpk_status st = onnx_import_file(ctx, files[f], &g);
            long made = wpk_alloc_count();
            wpk_alloc_fail_at(0);
            CHECK(st == WPK_OK || st == WPK_ERR_NOMEM);
            if (st != WPK_OK && st != WPK_ERR_NOMEM)
                fprintf(stderr, "  %s, allocation %ld: %s\n", files[f], n, wpk_context_error(ctx));
            if (st == WPK_ERR_NOMEM) {
                failures++;
                CHECK(g == NULL);
            }
            ir_graph_free(g);
            if (st == WPK_OK && made < n) break; /* ran to the end without reaching the failure */
            if (n > 100000) break;
        }
        CHECK(failures > 10);
    }
}

static void remove_tmpdir(void) {
    const char *files[] = {"weights/w.bin", "outside.bin", "model.onnx", "empty.onnx", "trunc.onnx"};
    char path[256];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", tmpdir, files[i]);
        remove(path);
    }
    snprintf(path, sizeof path, "%s/weights", tmpdir);
    rmdir(path);
    rmdir(tmpdir);
}

int main(void) {
    ctx = wpk_context_create();
    test_storage_forms();
    test_external_data();
    test_legacy();
    test_graph_parts();
    test_onnx_written();
    test_must_fail();
    test_read_tensor();
    test_fault_injection();
    remove_tmpdir();
    arena_free(&T);
    wpk_context_free(ctx);
    CHECK_DONE();
}
