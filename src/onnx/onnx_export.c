/* onnx_export.c -- graph IR -> ONNX ModelProto file: the model header (the IR version that goes
 * with the opset, opset imports), graph inputs and outputs with their types, initializers as
 * raw_data, nodes and attributes (older opsets' attribute forms restored), and the atomic write.
 * The protobuf-c structs borrow names, dims and tensor data from the graph; only the structs
 * and pointer arrays are allocated, in one arena freed at the end. */
#include "onnx/onnx_export.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "ir/eval.h"
#include "onnx/onnx.pb-c.h"

#define NAME_FMT "%.200s"

typedef struct writer {
    wpk_context *ctx;
    const ir_graph *g;
    const char *path;
    arena mem;            /* every struct and pointer array of the message */
    wpk_status st;        /* the first failure; builders return NULL after recording it */
    bool *read;           /* per value: a written node or a graph output reads it */
    ir_tensor *inferred;  /* per value, for outputs the graph has no type for; NULL until needed */
    bool symbolic;        /* inferred[] bound symbolic input dims to 1 */
} writer;

static wpk_status nomem(wpk_context *ctx, const char *path) {
    return wpk_error(ctx, WPK_ERR_NOMEM, "%s: out of memory writing the model", path);
}

static void *alloc(writer *w, size_t n) {
    void *p = arena_alloc(&w->mem, n);
    if (!p && !w->st) w->st = nomem(w->ctx, w->path);
    return p;
}

/* A message struct in the arena, set to its generated initial value. */
static void *new_msg(writer *w, const void *init, size_t size) {
    void *p = alloc(w, size);
    if (p) memcpy(p, init, size);
    return p;
}

#define NEW(w, type, INIT) ((type *)new_msg((w), &(type)INIT, sizeof(type)))

/* ONNX's versioning table: the IR version released with each default-domain opset. Readers
 * such as onnx.checker and ONNX Runtime judge a file by its IR version (IR 3 lists initializers
 * among the inputs, later ones may not need to), so the file claims the one of its opset. */
static int64_t ir_version_for(int opset) {
    static const struct {
        int last_opset;
        int64_t ir;
    } table[] = {{8, 3}, {9, 4}, {10, 5}, {11, 6}, {14, 7}, {18, 8},
                 {20, 9}, {22, 10}, {23, 11}, {24, 12}, {27, 13}, {28, 14}};
    int n = (int)(sizeof table / sizeof table[0]);
    if (opset <= 0) return 8; /* no default-domain node: any IR version will do */
    for (int i = 0; i < n; i++)
        if (opset <= table[i].last_opset) return table[i].ir;
    return table[n - 1].ir;
}

/* ---- tensors and types ---- */

/* A TensorProto borrowing t's dims and data (made little-endian later, see to_little_endian). */
static Onnx__TensorProto *tensor_proto(writer *w, const char *name, const ir_tensor *t) {
    Onnx__TensorProto *tp = NEW(w, Onnx__TensorProto, ONNX__TENSOR_PROTO__INIT);
    if (!tp) return NULL;
    size_t nbytes = ir_nbytes(t);
    if (nbytes && !t->data) {
        w->st = wpk_error(w->ctx, WPK_ERR_INTERNAL, "%s: constant '" NAME_FMT "' has no data",
                          w->path, name ? name : "");
        return NULL;
    }
    tp->name = (char *)name;
    tp->has_data_type = 1;
    tp->data_type = (int32_t)t->dtype;
    tp->n_dims = (size_t)t->ndim;
    tp->dims = (int64_t *)t->dims;
    tp->has_raw_data = 1;
    tp->raw_data.len = nbytes;
    tp->raw_data.data = (uint8_t *)t->data;
    return tp;
}

/* A tensor type: each dim is its size, the symbolic name it had, or left unknown. A tensor whose
 * dtype is not known gets no type at all (ONNX lets readers infer it). */
static Onnx__TypeProto *type_proto(writer *w, const ir_tensor *t, const char *const *dim_names) {
    if (t->dtype == WPK_DTYPE_UNDEFINED) return NULL;
    Onnx__TypeProto *type = NEW(w, Onnx__TypeProto, ONNX__TYPE_PROTO__INIT);
    Onnx__TypeProto__Tensor *tt = NEW(w, Onnx__TypeProto__Tensor, ONNX__TYPE_PROTO__TENSOR__INIT);
    Onnx__TensorShapeProto *shape = NEW(w, Onnx__TensorShapeProto, ONNX__TENSOR_SHAPE_PROTO__INIT);
    Onnx__TensorShapeProto__Dimension **dims = alloc(w, sizeof *dims * (size_t)(t->ndim + 1));
    if (!type || !tt || !shape || !dims) return NULL;
    for (int i = 0; i < t->ndim; i++) {
        Onnx__TensorShapeProto__Dimension *d =
            NEW(w, Onnx__TensorShapeProto__Dimension, ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT);
        if (!d) return NULL;
        if (t->dims[i] >= 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = t->dims[i];
        } else if (dim_names && dim_names[i]) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = (char *)dim_names[i];
        } /* else: a dim of unknown size, written with neither field */
        dims[i] = d;
    }
    shape->n_dim = (size_t)t->ndim;
    shape->dim = dims;
    tt->has_elem_type = 1;
    tt->elem_type = (int32_t)t->dtype;
    tt->shape = shape;
    type->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    type->tensor_type = tt;
    return type;
}

static Onnx__ValueInfoProto *value_info(writer *w, int v, const ir_tensor *t) {
    Onnx__ValueInfoProto *vi = NEW(w, Onnx__ValueInfoProto, ONNX__VALUE_INFO_PROTO__INIT);
    if (!vi) return NULL;
    vi->name = (char *)w->g->values[v].name;
    vi->type = type_proto(w, t, w->g->values[v].dim_names);
    return w->st ? NULL : vi;
}

/* The type a graph output is written with: as the graph knows it, or, when the graph does not
 * (static inference gives up on shapes computed from a symbolic batch dim, and a model loaded
 * without optimizing may never have had its outputs' types), its dtype and rank inferred here
 * with symbolic dims bound to 1. Its dims are then unknown (or named as the model named them)
 * unless no input dim is symbolic: a size seen at one binding may differ at another. What even
 * that cannot infer (an unsupported op upstream) is written without a type. */
static const ir_tensor *output_type(writer *w, int v) {
    const ir_graph *g = w->g;
    if (g->values[v].t.dtype != WPK_DTYPE_UNDEFINED) return &g->values[v].t;
    if (!w->inferred) {
        w->inferred = wpk_calloc((size_t)g->nvalues + 1, sizeof(ir_tensor));
        if (!w->inferred) {
            w->st = nomem(w->ctx, w->path);
            return NULL;
        }
        for (int k = 0; k < g->nvalues; k++) {
            if (!g->values[k].is_const && !g->values[k].is_input) continue;
            w->inferred[k] = g->values[k].t;
            for (int i = 0; i < w->inferred[k].ndim; i++)
                if (w->inferred[k].dims[i] < 0) {
                    w->inferred[k].dims[i] = 1;
                    w->symbolic = true;
                }
        }
        /* folding (into the writer's arena) evaluates the Shape->Gather->Concat chains that
         * size Reshapes; an inconsistent graph only costs the types */
        wpk_status st = ir_infer(w->ctx, g, w->inferred, &w->mem);
        if (st == WPK_ERR_NOMEM) {
            w->st = st;
            return NULL;
        }
        if (st) wpk_clear_error(w->ctx);
    }
    ir_tensor *t = &w->inferred[v];
    for (int i = 0; w->symbolic && i < t->ndim; i++) t->dims[i] = -1;
    return t;
}

/* ---- nodes ---- */

/* The attribute forms of older opsets, as onnx_legacy.c reads them: the importer moved these
 * operands into input slots 1, 2, 3; a file of such an opset must carry them as attributes
 * again, or readers of that opset see inputs the op does not have. Keep in step with the
 * rules there (the legacy_ops models of tests/optimize check both directions). */
typedef struct legacy_arg {
    const char *attr;  /* NULL ends the list */
    ir_attr_kind kind; /* IR_ATTR_FLOAT: a float32 scalar; IR_ATTR_INTS: a 1-D int64 tensor */
    bool required;     /* written even when empty */
} legacy_arg;

typedef struct legacy_form {
    const char *op_type;
    int below;          /* opsets below this one use the attribute form */
    legacy_arg args[3]; /* the attributes of input slots 1, 2, 3 */
} legacy_form;

static const legacy_form legacy_forms[] = {
    {"Clip", 11, {{"min", IR_ATTR_FLOAT, false}, {"max", IR_ATTR_FLOAT, false}}},
    {"Squeeze", 13, {{"axes", IR_ATTR_INTS, false}}},
    {"Unsqueeze", 13, {{"axes", IR_ATTR_INTS, true}}},
    {"Split", 13, {{"split", IR_ATTR_INTS, false}}},
    {"ReduceMean", 18, {{"axes", IR_ATTR_INTS, false}}},
    {"Pad", 11, {{"pads", IR_ATTR_INTS, true}, {"value", IR_ATTR_FLOAT, false}}},
    {"Slice", 10, {{"starts", IR_ATTR_INTS, true}, {"ends", IR_ATTR_INTS, true},
                   {"axes", IR_ATTR_INTS, false}}},
};

static const legacy_form *legacy_form_of(const ir_node *n, int opset) {
    if (n->domain[0]) return NULL;
    for (size_t i = 0; i < sizeof legacy_forms / sizeof legacy_forms[0]; i++)
        if (strcmp(legacy_forms[i].op_type, n->op_type) == 0)
            return opset < legacy_forms[i].below ? &legacy_forms[i] : NULL;
    return NULL;
}

static Onnx__AttributeProto *attr_proto(writer *w, const ir_node *n, const ir_attr *a) {
    Onnx__AttributeProto *ap = NEW(w, Onnx__AttributeProto, ONNX__ATTRIBUTE_PROTO__INIT);
    if (!ap) return NULL;
    ap->name = (char *)a->name;
    ap->has_type = 1;
    ap->type = (int32_t)a->kind;
    switch (a->kind) {
    case IR_ATTR_FLOAT: ap->has_f = 1; ap->f = a->f; break;
    case IR_ATTR_INT: ap->has_i = 1; ap->i = a->i; break;
    case IR_ATTR_STRING:
        ap->has_s = 1;
        ap->s.data = (uint8_t *)(a->s ? a->s : "");
        ap->s.len = a->s ? strlen(a->s) : 0;
        break;
    case IR_ATTR_INTS: ap->n_ints = (size_t)a->n; ap->ints = a->ints; break;
    case IR_ATTR_FLOATS: ap->n_floats = (size_t)a->n; ap->floats = a->floats; break;
    case IR_ATTR_STRINGS:
        if (!(ap->strings = alloc(w, sizeof *ap->strings * (size_t)(a->n + 1)))) return NULL;
        ap->n_strings = (size_t)a->n;
        for (int k = 0; k < a->n; k++) {
            ap->strings[k].data = (uint8_t *)a->strs[k];
            ap->strings[k].len = strlen(a->strs[k]);
        }
        break;
    case IR_ATTR_TENSOR:
        if (!a->t || !(ap->t = tensor_proto(w, NULL, a->t))) {
            if (!w->st)
                w->st = wpk_error(w->ctx, WPK_ERR_INTERNAL, "%s: node '" NAME_FMT "' (" NAME_FMT
                                  "): tensor attribute '" NAME_FMT "' has no tensor",
                                  w->path, n->name, n->op_type, a->name);
            return NULL;
        }
        break;
    default:
        /* the importer keeps no payload for graphs (If/Loop bodies) and lists, so the node
         * cannot be written as it was read */
        w->st = wpk_error(w->ctx, WPK_ERR_UNSUPPORTED,
                          "%s: node '" NAME_FMT "' (" NAME_FMT "): attribute '" NAME_FMT "' is %s, "
                          "whose value Woodpecker does not keep, so the node cannot be written",
                          w->path, n->name, n->op_type, a->name,
                          a->kind == IR_ATTR_GRAPH ? "a graph" : "a list of graphs");
        return NULL;
    }
    return ap;
}

/* The attribute that carries constant input `slot` of n in the older opset's form; *skip when an
 * optional operand is empty (its absence means the same). */
static Onnx__AttributeProto *legacy_attr(writer *w, const ir_node *n, const legacy_arg *arg,
                                         int slot, int opset, bool *skip) {
    const ir_value *v = &w->g->values[n->in[slot]];
    const ir_tensor *t = &v->t;
    ir_attr a;
    memset(&a, 0, sizeof a);
    a.name = arg->attr;
    a.kind = arg->kind;
    *skip = false;
    const char *why = NULL;
    if (!v->is_const) {
        why = "is computed in the graph";
    } else if (arg->kind == IR_ATTR_FLOAT) {
        if (t->dtype != WPK_DTYPE_FLOAT32 || ir_numel(t) != 1 || t->ndim > 1)
            why = "is not a float32 scalar";
        else
            a.f = *(const float *)t->data;
    } else if (t->dtype != WPK_DTYPE_INT64 || t->ndim != 1 || t->dims[0] > INT_MAX) {
        why = "is not a list of int64";
    } else {
        a.n = (int)t->dims[0];
        a.ints = t->data;
        /* an empty list of optional axes or sizes means what its absence means */
        if ((*skip = a.n == 0 && !arg->required)) return NULL;
    }
    if (why) {
        w->st = wpk_error(w->ctx, WPK_ERR_UNSUPPORTED,
                          "%s: node '" NAME_FMT "' (" NAME_FMT "): at opset %d '%s' is an "
                          "attribute, but input %d ('" NAME_FMT "') %s", w->path, n->name,
                          n->op_type, opset, arg->attr, slot, v->name, why);
        return NULL;
    }
    return attr_proto(w, n, &a);
}

/* Edge names: "" for an omitted edge in the middle, trailing omitted edges dropped. Marks the
 * values as read (what matters is which constants inputs read: they become initializers). */
static char **edge_names(writer *w, const int *vals, int count, size_t *n_out) {
    while (count > 0 && vals[count - 1] < 0) count--;
    char **names = alloc(w, sizeof *names * (size_t)(count + 1));
    if (!names) return NULL;
    for (int i = 0; i < count; i++) {
        names[i] = (char *)(vals[i] >= 0 ? w->g->values[vals[i]].name : "");
        if (vals[i] >= 0) w->read[vals[i]] = true;
    }
    *n_out = (size_t)count;
    return names;
}

static Onnx__NodeProto *node_proto(writer *w, const ir_node *n) {
    const ir_graph *g = w->g;
    Onnx__NodeProto *np = NEW(w, Onnx__NodeProto, ONNX__NODE_PROTO__INIT);
    Onnx__AttributeProto **attrs = alloc(w, sizeof *attrs * (size_t)(n->nattr + 4));
    if (!np || !attrs) return NULL;
    np->name = (char *)n->name;
    np->op_type = (char *)n->op_type;
    np->domain = n->domain[0] ? (char *)n->domain : NULL;
    for (int i = 0; i < n->nattr; i++)
        if (!(attrs[np->n_attribute++] = attr_proto(w, n, &n->attrs[i]))) return NULL;

    int nin = n->nin;
    const legacy_form *lf = legacy_form_of(n, g->opset);
    if (lf) {
        int slots = 0;
        while (slots < 3 && lf->args[slots].attr) slots++;
        for (int i = slots + 1; i < n->nin; i++)
            if (n->in[i] >= 0) {
                w->st = wpk_error(w->ctx, WPK_ERR_UNSUPPORTED,
                                  "%s: node '" NAME_FMT "' (" NAME_FMT "): opset %d has no "
                                  "input %d", w->path, n->name, n->op_type, g->opset, i);
                return NULL;
            }
        for (int s = 1; s <= slots && s < n->nin; s++) {
            if (n->in[s] < 0) continue;
            bool skip;
            Onnx__AttributeProto *ap = legacy_attr(w, n, &lf->args[s - 1], s, g->opset, &skip);
            if (ap) attrs[np->n_attribute++] = ap;
            else if (!skip) return NULL;
        }
        nin = n->nin > 0 ? 1 : 0;
    }
    np->attribute = attrs;
    np->input = edge_names(w, n->in, nin, &np->n_input);
    np->output = edge_names(w, n->out, n->nout, &np->n_output);
    return np->input && np->output ? np : NULL;
}

/* ---- the model ---- */

/* opset_import: the default domain at the graph's opset, "wpk" at 1, any other domain a node
 * uses at that node's version. */
static wpk_status add_opsets(writer *w, Onnx__ModelProto *m) {
    const ir_graph *g = w->g;
    Onnx__OperatorSetIdProto **ops = alloc(w, sizeof *ops * (size_t)(g->nnodes + 2));
    if (!ops) return w->st;
    m->opset_import = ops;
    for (int k = -1; k < g->nnodes; k++) {
        const ir_node *n = k >= 0 ? &g->nodes[k] : NULL;
        if (n && n->dead) continue;
        const char *domain = n ? n->domain : "";
        if (!domain[0] && !g->opset) {
            if (!n) continue; /* a graph without default-domain nodes needs no opset for them */
            return w->st = wpk_error(w->ctx, WPK_ERR_INTERNAL,
                                     "%s: node '" NAME_FMT "' (" NAME_FMT ") is in the default "
                                     "domain, but the graph has no default-domain opset",
                                     w->path, n->name, n->op_type);
        }
        size_t i = 0;
        while (i < m->n_opset_import && strcmp(ops[i]->domain, domain) != 0) i++;
        if (i < m->n_opset_import) continue;
        Onnx__OperatorSetIdProto *o =
            NEW(w, Onnx__OperatorSetIdProto, ONNX__OPERATOR_SET_ID_PROTO__INIT);
        if (!o) return w->st;
        o->domain = (char *)domain;
        o->has_version = 1;
        o->version = !n ? g->opset : strcmp(domain, "wpk") == 0 ? 1 : n->opset;
        ops[m->n_opset_import++] = o;
    }
    return WPK_OK;
}

static wpk_status build_graph(writer *w, Onnx__GraphProto *gp, int64_t ir_version) {
    const ir_graph *g = w->g;
    gp->name = "woodpecker";
    gp->node = alloc(w, sizeof *gp->node * (size_t)(g->nnodes + 1));
    gp->output = alloc(w, sizeof *gp->output * (size_t)(g->noutputs + 1));
    if (!gp->node || !gp->output) return w->st;
    for (int k = 0; k < g->nnodes; k++) {
        if (g->nodes[k].dead) continue;
        if (!(gp->node[gp->n_node++] = node_proto(w, &g->nodes[k]))) return w->st;
    }
    for (int i = 0; i < g->noutputs; i++) {
        int v = g->outputs[i];
        w->read[v] = true;
        const ir_tensor *t = output_type(w, v);
        if (!t || !(gp->output[gp->n_output++] = value_info(w, v, t))) return w->st;
    }
    int nconst = 0;
    for (int v = 0; v < g->nvalues; v++) nconst += g->values[v].is_const && w->read[v];
    gp->initializer = alloc(w, sizeof *gp->initializer * (size_t)(nconst + 1));
    /* before IR version 4 every initializer is also a graph input */
    size_t ninputs = (size_t)g->ninputs + (ir_version < 4 ? (size_t)nconst : 0);
    gp->input = alloc(w, sizeof *gp->input * (ninputs + 1));
    if (!gp->initializer || !gp->input) return w->st;
    for (int i = 0; i < g->ninputs; i++) {
        int v = g->inputs[i];
        if (!(gp->input[gp->n_input++] = value_info(w, v, &g->values[v].t))) return w->st;
    }
    for (int v = 0; v < g->nvalues; v++) {
        const ir_value *val = &g->values[v];
        if (!val->is_const || !w->read[v]) continue;
        if (!(gp->initializer[gp->n_initializer++] = tensor_proto(w, val->name, &val->t)))
            return w->st;
        if (ir_version < 4 && !(gp->input[gp->n_input++] = value_info(w, v, &val->t)))
            return w->st;
    }
    return WPK_OK;
}

static bool host_little_endian(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* raw_data is little-endian whatever the host: on a big-endian one, point each tensor at a
 * byte-swapped copy. Done after the size check, so a model too large to write is not copied. */
static wpk_status to_little_endian(writer *w, Onnx__TensorProto *tp) {
    size_t elem = wpk_dtype_size((wpk_dtype)tp->data_type);
    if (host_little_endian() || elem == 1 || !tp->raw_data.len) return WPK_OK;
    uint8_t *copy = alloc(w, tp->raw_data.len);
    if (!copy) return w->st;
    for (size_t off = 0; off + elem <= tp->raw_data.len; off += elem)
        for (size_t i = 0; i < elem; i++) copy[off + i] = tp->raw_data.data[off + elem - 1 - i];
    tp->raw_data.data = copy;
    return WPK_OK;
}

static wpk_status swap_all(writer *w, Onnx__GraphProto *gp) {
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (to_little_endian(w, gp->initializer[i])) return w->st;
    for (size_t k = 0; k < gp->n_node; k++)
        for (size_t i = 0; i < gp->node[k]->n_attribute; i++)
            if (gp->node[k]->attribute[i]->t && to_little_endian(w, gp->node[k]->attribute[i]->t))
                return w->st;
    return WPK_OK;
}

/* ---- the file ---- */

/* protobuf-c streams the packed message through this, so the model is never in memory twice. */
typedef struct file_sink {
    ProtobufCBuffer base;
    FILE *f;
    int err; /* errno of the first failed write; 0 while all is well */
} file_sink;

static void sink_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
    file_sink *s = (file_sink *)b;
    if (s->err || !len) return;
    errno = 0;
    if (fwrite(data, 1, len, s->f) != len) s->err = errno ? errno : EIO;
}

/* Write m to a temporary file next to path, then rename it over path: a reader never sees a
 * half-written model, and a failed write leaves whatever was at path untouched. */
static wpk_status write_atomically(writer *w, const Onnx__ModelProto *m) {
    size_t cap = strlen(w->path) + 32;
    char *tmp = wpk_malloc(cap);
    if (!tmp) return nomem(w->ctx, w->path);
    snprintf(tmp, cap, "%s.tmp.%ld", w->path, (long)getpid());
    wpk_status st = WPK_OK;
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        st = wpk_error(w->ctx, WPK_ERR_IO, "%s: cannot write: %s", w->path, strerror(errno));
        wpk_free(tmp);
        return st;
    }
    file_sink sink = {{sink_append}, f, 0};
    onnx__model_proto__pack_to_buffer(m, &sink.base);
    if (!sink.err && fflush(f) != 0) sink.err = errno;
    /* the data must be on disk before the rename makes it the model at path */
    if (!sink.err && fsync(fileno(f)) != 0) sink.err = errno;
    if (fclose(f) != 0 && !sink.err) sink.err = errno;
    if (sink.err) {
        st = wpk_error(w->ctx, WPK_ERR_IO, "%s: cannot write: %s", w->path, strerror(sink.err));
    } else if (rename(tmp, w->path) != 0) {
        st = wpk_error(w->ctx, WPK_ERR_IO, "%s: cannot write (renaming '%s' to it): %s", w->path,
                       tmp, strerror(errno));
    }
    if (st) remove(tmp);
    wpk_free(tmp);
    return st;
}

wpk_status onnx_export_file(wpk_context *ctx, const ir_graph *g, const char *path) {
    writer w;
    memset(&w, 0, sizeof w);
    w.ctx = ctx;
    w.g = g;
    w.path = path;
    w.read = wpk_calloc((size_t)g->nvalues + 1, sizeof *w.read);
    if (!w.read) return nomem(ctx, path);

    int64_t ir_version = ir_version_for(g->opset);
    Onnx__ModelProto *m = NEW(&w, Onnx__ModelProto, ONNX__MODEL_PROTO__INIT);
    Onnx__GraphProto *gp = NEW(&w, Onnx__GraphProto, ONNX__GRAPH_PROTO__INIT);
    if (m && gp) {
        m->has_ir_version = 1;
        m->ir_version = ir_version;
        m->producer_name = "woodpecker";
        m->producer_version = (char *)wpk_version();
        m->graph = gp;
        if (add_opsets(&w, m) == WPK_OK) build_graph(&w, gp, ir_version);
    }
    if (!w.st) {
        /* protobuf's messages are limited to 2 GiB; larger models need external data files */
        size_t size = onnx__model_proto__get_packed_size(m);
        if (size > (size_t)INT32_MAX)
            w.st = wpk_error(ctx, WPK_ERR_UNSUPPORTED,
                             "%s: the model would take %zu bytes, over protobuf's 2 GiB limit "
                             "for one file (writing weights to external data files is not "
                             "supported)", path, size);
    }
    if (!w.st && swap_all(&w, gp) == WPK_OK) w.st = write_atomically(&w, m);
    wpk_status st = w.st;
    arena_free(&w.mem);
    wpk_free(w.inferred);
    wpk_free(w.read);
    return st;
}
