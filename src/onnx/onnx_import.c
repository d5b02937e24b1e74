/* onnx_import.c -- ONNX ModelProto -> graph IR: the model-level checks (ir_version, opsets),
 * initializers, graph inputs and outputs, nodes and their attributes; then the legacy-form
 * rewrite (onnx_legacy.c) and a topological sort. Tensor decoding lives in onnx_tensor.c. */
#include "onnx/onnx_import.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "onnx/onnx.pb-c.h"
#include "onnx/onnx_float16.h"
#include "onnx/onnx_legacy.h"
#include "onnx/onnx_proto.h"
#include "onnx/onnx_tensor.h"

/* Default-domain opsets this frontend reads. Below 7, ops broadcast differently and keep forms
 * (Reshape's shape attribute, BatchNormalization's consumed_inputs) nothing past the frontend
 * knows. The newest is 28 (onnx 1.23's) because, for every op in ops.def, what changed between
 * the version its kernel knows and opset 28 is either the set of accepted types (bfloat16,
 * float8, int4, and at 24/25 float8e8m0, int2, uint2), which the kernels refuse by dtype, or a
 * change the kernel sees through node->opset (Softmax's axis at 13, Split's num_outputs at 18,
 * Pad's wrap mode at 19, AveragePool's dilations at 19); Cast 28's round_mode only applies to
 * float8e8m0. So float32 semantics cannot change unseen. An op added to ops.def must be checked
 * against its versions up to OPSET_MAX; raising OPSET_MAX means reading every op's changes. */
#define OPSET_MIN 7
#define OPSET_MAX 28

/* Long names are cut in messages so a hostile model cannot push the cause out of the buffer. */
#define NAME_FMT "%.200s"

typedef struct importer {
    wpk_context *ctx;
    ir_graph *g;
    const Onnx__ModelProto *m;
    const char *base_dir;
    /* value name -> index, open addressing; entries are index + 1, 0 marks an empty slot.
     * ir_graph_find_value is a linear scan, too slow for the thousands of values in real models. */
    int *map;
    size_t map_cap, map_used;
} importer;

static const char *str_or_empty(const char *s) { return s ? s : ""; }

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static int find_value(const importer *im, const char *name) {
    if (!im->map_cap) return -1;
    size_t mask = im->map_cap - 1;
    for (size_t i = (size_t)hash_name(name) & mask;; i = (i + 1) & mask) {
        int e = im->map[i];
        if (!e) return -1;
        if (strcmp(im->g->values[e - 1].name, name) == 0) return e - 1;
    }
}

static void map_put(int *map, size_t cap, const char *name, int id) {
    size_t mask = cap - 1;
    size_t i = (size_t)hash_name(name) & mask;
    while (map[i]) i = (i + 1) & mask;
    map[i] = id + 1;
}

/* Find or add the value `name`; -1 when out of memory. */
static int intern_value(importer *im, const char *name) {
    int id = find_value(im, name);
    if (id >= 0) return id;
    if (2 * (im->map_used + 1) > im->map_cap) {
        size_t cap = im->map_cap ? 2 * im->map_cap : 256;
        int *map = wpk_calloc(cap, sizeof *map);
        if (!map) return -1;
        for (size_t i = 0; i < im->map_cap; i++)
            if (im->map[i]) map_put(map, cap, im->g->values[im->map[i] - 1].name, im->map[i] - 1);
        wpk_free(im->map);
        im->map = map;
        im->map_cap = cap;
    }
    id = ir_graph_add_value(im->g, name);
    if (id < 0) return -1;
    map_put(im->map, im->map_cap, name, id);
    im->map_used++;
    return id;
}

static wpk_status nomem(importer *im, const char *doing) {
    return wpk_error(im->ctx, WPK_ERR_NOMEM, "out of memory reading %s", doing);
}

/* The model's opset for `domain` ("" is the default domain); 0 when it imports none. */
static int opset_of(const Onnx__ModelProto *m, const char *domain) {
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = str_or_empty(m->opset_import[i]->domain);
        if (strcmp(d, "ai.onnx") == 0) d = "";
        if (strcmp(d, domain) == 0) return (int)m->opset_import[i]->version;
    }
    return 0;
}

static wpk_status check_opsets(importer *im) {
    const Onnx__ModelProto *m = im->m;
    int def = 0;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        const char *d = str_or_empty(o->domain);
        if (!o->has_version || o->version < 1 || o->version > INT_MAX)
            return wpk_error(im->ctx, WPK_ERR_MODEL,
                             "opset_import for domain '" NAME_FMT "' has no valid version", d);
        if (d[0] && strcmp(d, "ai.onnx") != 0) continue;
        if (def && def != (int)o->version)
            return wpk_error(im->ctx, WPK_ERR_MODEL,
                             "opset_import names the default domain twice (opsets %d and %d)", def,
                             (int)o->version);
        def = (int)o->version;
    }
    if (def && (def < OPSET_MIN || def > OPSET_MAX))
        return wpk_error(im->ctx, WPK_ERR_UNSUPPORTED,
                         "default-domain opset %d is not supported (Woodpecker reads opsets %d to "
                         "%d)", def, OPSET_MIN, OPSET_MAX);
    im->g->opset = def;
    return WPK_OK;
}

static wpk_status add_initializers(importer *im, const Onnx__GraphProto *gp) {
    char what[256];
    if (gp->n_sparse_initializer) {
        const Onnx__SparseTensorProto *sp = gp->sparse_initializer[0];
        const char *name = sp->values ? str_or_empty(sp->values->name) : "";
        return wpk_error(im->ctx, WPK_ERR_UNSUPPORTED,
                         "initializer '" NAME_FMT "' is sparse (sparse_initializer), which "
                         "Woodpecker does not support", name);
    }
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        const char *name = str_or_empty(tp->name);
        if (!name[0]) return wpk_error(im->ctx, WPK_ERR_MODEL, "initializer #%zu has no name", i);
        if (find_value(im, name) >= 0)
            return wpk_error(im->ctx, WPK_ERR_MODEL,
                             "initializer '" NAME_FMT "' is defined twice", name);
        snprintf(what, sizeof what, "initializer '" NAME_FMT "'", name);
        int id = intern_value(im, name);
        if (id < 0) return nomem(im, what);
        ir_tensor t;
        wpk_status st = onnx_tensor_decode(im->ctx, tp, im->base_dir, &im->g->mem, &t, what);
        if (st) return st;
        im->g->values[id].t = t;
        im->g->values[id].is_const = true;
    }
    return WPK_OK;
}

static const char *type_kind_name(Onnx__TypeProto__ValueCase c) {
    switch (c) {
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE: return "a sequence";
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE: return "a map";
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE: return "an optional";
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE: return "a sparse tensor";
    default: return "of a type Woodpecker does not know";
    }
}

/* Set value id's dtype, shape and dim names from a graph input's or output's ValueInfo. `what`
 * is "graph input 'x'". Inputs need a tensor type with a shape; outputs may leave both out
 * (shape inference fills them in), and then nothing is set. */
static wpk_status read_value_info(importer *im, const Onnx__ValueInfoProto *vi, int id,
                                  bool is_input, const char *what) {
    const Onnx__TypeProto *type = vi->type;
    if (!type) {
        if (is_input) return wpk_error(im->ctx, WPK_ERR_MODEL, "%s has no type", what);
        return WPK_OK;
    }
    if (type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return wpk_error(im->ctx, WPK_ERR_UNSUPPORTED,
                         "%s is %s, not a tensor; Woodpecker supports only tensors", what,
                         type_kind_name(type->value_case));
    const Onnx__TypeProto__Tensor *tt = type->tensor_type;
    wpk_dtype dt;
    if (!is_input && (!tt->has_elem_type || !tt->elem_type) && !tt->shape) return WPK_OK;
    wpk_status st = onnx_dtype_check(im->ctx, tt->has_elem_type ? tt->elem_type : 0, what, &dt);
    if (st) return st;
    const Onnx__TensorShapeProto *shape = tt->shape;
    if (!shape) {
        if (is_input)
            return wpk_error(im->ctx, WPK_ERR_UNSUPPORTED,
                             "%s has no shape (its rank is unknown); Woodpecker needs the rank of "
                             "every input", what);
        return WPK_OK;
    }
    if (shape->n_dim > WPK_MAX_DIMS)
        return wpk_error(im->ctx, WPK_ERR_UNSUPPORTED, "%s has %zu dims; at most %d are supported",
                         what, shape->n_dim, WPK_MAX_DIMS);
    ir_value *v = &im->g->values[id];
    ir_tensor t;
    memset(&t, 0, sizeof t);
    const char *names[WPK_MAX_DIMS] = {0};
    t.dtype = dt;
    t.ndim = (int)shape->n_dim;
    /* the known dims' product must fit a byte count, as for tensors (onnx_tensor.c) */
    uint64_t limit = (uint64_t)INT64_MAX / wpk_dtype_size(dt), numel = 1;
    bool empty = false, overflow = false;
    for (int i = 0; i < t.ndim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = shape->dim[i];
        t.dims[i] = -1;
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (d->dim_value < 0)
                return wpk_error(im->ctx, WPK_ERR_MODEL,
                                 "%s has a negative dim (%" PRId64 " at index %d)", what,
                                 d->dim_value, i);
            t.dims[i] = d->dim_value;
            empty |= d->dim_value == 0;
            if (d->dim_value && (uint64_t)d->dim_value > limit / numel) overflow = true;
            else if (d->dim_value) numel *= (uint64_t)d->dim_value;
        } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                   d->dim_param && d->dim_param[0]) {
            names[i] = arena_strdup(&im->g->mem, d->dim_param);
            if (!names[i]) return nomem(im, what);
        }
    }
    if (overflow && !empty)
        return wpk_error(im->ctx, WPK_ERR_MODEL, "%s has dims whose product overflows", what);
    v->t = t;
    memcpy(v->dim_names, names, sizeof names);
    return WPK_OK;
}

static wpk_status add_inputs(importer *im, const Onnx__GraphProto *gp) {
    char what[256];
    im->g->inputs = arena_alloc(&im->g->mem, sizeof(int) * (gp->n_input + 1));
    if (!im->g->inputs) return nomem(im, "the graph inputs");
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        const char *name = str_or_empty(vi->name);
        if (!name[0]) return wpk_error(im->ctx, WPK_ERR_MODEL, "graph input #%zu has no name", i);
        snprintf(what, sizeof what, "graph input '" NAME_FMT "'", name);
        int id = find_value(im, name);
        /* Before IR version 4 every initializer is also listed as an input; since then such an
         * input is a default the user could override. Either way it is a constant here. */
        if (id >= 0 && im->g->values[id].is_const) continue;
        if (id >= 0) return wpk_error(im->ctx, WPK_ERR_MODEL, "%s is listed twice", what);
        id = intern_value(im, name);
        if (id < 0) return nomem(im, what);
        wpk_status st = read_value_info(im, vi, id, true, what);
        if (st) return st;
        im->g->values[id].is_input = true;
        im->g->inputs[im->g->ninputs++] = id;
    }
    return WPK_OK;
}

/* The attribute type of an AttributeProto written without `type` (models from before IR
 * version 2 did that); 0 when no value is set either. */
static int32_t infer_attr_type(const Onnx__AttributeProto *ap) {
    if (ap->has_f) return IR_ATTR_FLOAT;
    if (ap->has_i) return IR_ATTR_INT;
    if (ap->has_s) return IR_ATTR_STRING;
    if (ap->t) return IR_ATTR_TENSOR;
    if (ap->g) return IR_ATTR_GRAPH;
    if (ap->n_floats) return IR_ATTR_FLOATS;
    if (ap->n_ints) return IR_ATTR_INTS;
    if (ap->n_strings) return IR_ATTR_STRINGS;
    if (ap->n_tensors) return 9;
    if (ap->n_graphs) return 10;
    return 0;
}

/* ONNX's AttributeType names past the ones ir_attr holds, for messages. */
static const char *attr_type_name(int32_t type) {
    static const char *const names[] = {"UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR", "GRAPH",
                                        "FLOATS", "INTS", "STRINGS", "TENSORS", "GRAPHS",
                                        "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO",
                                        "TYPE_PROTOS"};
    return type >= 0 && type < (int32_t)(sizeof names / sizeof names[0]) ? names[type] : "unknown";
}

static wpk_status read_attr(importer *im, int node, const Onnx__AttributeProto *ap, ir_attr *at,
                            bool *keep) {
    ir_graph *g = im->g;
    const ir_node *n = &g->nodes[node];
    const char *name = str_or_empty(ap->name);
    char what[700];
    snprintf(what, sizeof what, "node '" NAME_FMT "' (" NAME_FMT "): attribute '" NAME_FMT "'",
             n->name, n->op_type, name);
    int32_t type = ap->has_type ? ap->type : infer_attr_type(ap);
    *keep = true;
    switch (type) {
    case IR_ATTR_FLOAT: at->f = ap->f; break;
    case IR_ATTR_INT: at->i = ap->i; break;
    case IR_ATTR_STRING:
        at->s = ap->s.len ? arena_strndup(&g->mem, (const char *)ap->s.data, ap->s.len)
                          : arena_strdup(&g->mem, "");
        if (!at->s) return nomem(im, what);
        break;
    case IR_ATTR_TENSOR: {
        if (!ap->t) return wpk_error(im->ctx, WPK_ERR_MODEL, "%s has type TENSOR but no tensor", what);
        at->t = arena_alloc(&g->mem, sizeof *at->t);
        if (!at->t) return nomem(im, what);
        wpk_status st = onnx_tensor_decode(im->ctx, ap->t, im->base_dir, &g->mem, at->t, what);
        if (st) return st;
        break;
    }
    case IR_ATTR_GRAPH:
        /* If/Loop/Scan bodies are not read: those ops are not in the op table, so the node is
         * reported as unsupported; the attribute stays only so its name can be shown. */
        break;
    case IR_ATTR_FLOATS:
    case IR_ATTR_INTS: {
        size_t count = type == IR_ATTR_INTS ? ap->n_ints : ap->n_floats;
        if (count > INT_MAX)
            return wpk_error(im->ctx, WPK_ERR_UNSUPPORTED, "%s has too many values", what);
        at->n = (int)count;
        if (type == IR_ATTR_INTS)
            at->ints = arena_memdup(&g->mem, ap->ints, count * sizeof(int64_t));
        else
            at->floats = arena_memdup(&g->mem, ap->floats, count * sizeof(float));
        if (!at->ints && !at->floats) return nomem(im, what);
        break;
    }
    case IR_ATTR_STRINGS: {
        if (ap->n_strings > INT_MAX)
            return wpk_error(im->ctx, WPK_ERR_UNSUPPORTED, "%s has too many values", what);
        at->n = (int)ap->n_strings;
        at->strs = arena_alloc(&g->mem, sizeof *at->strs * (ap->n_strings + 1));
        if (!at->strs) return nomem(im, what);
        for (size_t k = 0; k < ap->n_strings; k++) {
            const ProtobufCBinaryData *s = &ap->strings[k];
            at->strs[k] = s->len ? arena_strndup(&g->mem, (const char *)s->data, s->len)
                                 : arena_strdup(&g->mem, "");
            if (!at->strs[k]) return nomem(im, what);
        }
        break;
    }
    case 0:
        return wpk_error(im->ctx, WPK_ERR_MODEL, "%s has no type and no value", what);
    default:
        /* lists of tensors or graphs, sparse tensors, type protos: no op in the table
         * takes one, so they only matter on nodes that are unsupported anyway */
        if (n->op != IR_OP_UNSUPPORTED)
            return wpk_error(im->ctx, WPK_ERR_UNSUPPORTED,
                             "%s has type %s (%" PRId32 "), which Woodpecker does not read", what,
                             attr_type_name(type), type);
        *keep = false;
        return WPK_OK;
    }
    at->kind = (ir_attr_kind)type;
    at->name = arena_strdup(&g->mem, name);
    if (!at->name) return nomem(im, what);
    return WPK_OK;
}

static wpk_status read_attrs(importer *im, int node, const Onnx__NodeProto *np) {
    ir_graph *g = im->g;
    ir_attr *attrs = arena_alloc(&g->mem, sizeof(ir_attr) * (np->n_attribute + 1));
    if (!attrs) return nomem(im, "node attributes");
    int nattr = 0;
    for (size_t i = 0; i < np->n_attribute; i++) {
        const Onnx__AttributeProto *ap = np->attribute[i];
        const ir_node *n = &g->nodes[node];
        const char *name = str_or_empty(ap->name);
        if (!name[0])
            return wpk_error(im->ctx, WPK_ERR_MODEL,
                             "node '" NAME_FMT "' (" NAME_FMT "): attribute #%zu has no name",
                             n->name, n->op_type, i);
        for (int k = 0; k < nattr; k++)
            if (strcmp(attrs[k].name, name) == 0)
                return wpk_error(im->ctx, WPK_ERR_MODEL,
                                 "node '" NAME_FMT "' (" NAME_FMT "): attribute '" NAME_FMT
                                 "' is given twice", n->name, n->op_type, name);
        bool keep;
        wpk_status st = read_attr(im, node, ap, &attrs[nattr], &keep);
        if (st) return st;
        if (keep) nattr++;
    }
    g->nodes[node].attrs = attrs;
    g->nodes[node].nattr = nattr;
    return WPK_OK;
}

/* Connect a node's inputs or outputs: "" is an omitted optional edge (-1). */
static wpk_status connect(importer *im, int node, char **names, size_t count, bool outputs) {
    for (size_t k = 0; k < count; k++) {
        if (!names[k][0]) continue;
        int id = intern_value(im, names[k]);
        if (id < 0) return nomem(im, "node edges");
        if (outputs) {
            im->g->nodes[node].out[k] = id;
            im->g->values[id].producer = node; /* recomputed by the sort; marks "has a source" */
        } else {
            im->g->nodes[node].in[k] = id;
        }
    }
    return WPK_OK;
}

static wpk_status add_nodes(importer *im, const Onnx__GraphProto *gp) {
    char generated[256];
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        const char *op_type = str_or_empty(np->op_type);
        const char *domain = str_or_empty(np->domain);
        if (strcmp(domain, "ai.onnx") == 0) domain = "";
        const char *name = np->name;
        if (!name || !name[0]) {
            snprintf(generated, sizeof generated, NAME_FMT "_%zu", op_type, i);
            name = generated;
        }
        if (!op_type[0])
            return wpk_error(im->ctx, WPK_ERR_MODEL, "node '" NAME_FMT "' (#%zu) has no op_type",
                             name, i);
        int opset = domain[0] ? opset_of(im->m, domain) : im->g->opset;
        if (!domain[0] && !opset)
            return wpk_error(im->ctx, WPK_ERR_MODEL,
                             "node '" NAME_FMT "' (" NAME_FMT ") is in the default ONNX domain, "
                             "but the model imports no opset for that domain", name, op_type);
        if (np->n_input > INT_MAX / 2 || np->n_output > INT_MAX / 2)
            return wpk_error(im->ctx, WPK_ERR_UNSUPPORTED,
                             "node '" NAME_FMT "' (" NAME_FMT ") has too many inputs or outputs",
                             name, op_type);
        int nin = (int)np->n_input;
        int slots = domain[0] ? nin : onnx_legacy_slots(op_type, opset, nin);
        int idx = ir_graph_add_node(im->g, name, op_type, domain, opset, slots, (int)np->n_output);
        if (idx < 0) return nomem(im, "the nodes");
        wpk_status st = connect(im, idx, np->input, np->n_input, false);
        if (!st) st = connect(im, idx, np->output, np->n_output, true);
        if (!st) st = read_attrs(im, idx, np);
        if (st) return st;
    }
    return WPK_OK;
}

static wpk_status add_outputs(importer *im, const Onnx__GraphProto *gp) {
    char what[256];
    im->g->outputs = arena_alloc(&im->g->mem, sizeof(int) * (gp->n_output + 1));
    if (!im->g->outputs) return nomem(im, "the graph outputs");
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        const char *name = str_or_empty(vi->name);
        if (!name[0]) return wpk_error(im->ctx, WPK_ERR_MODEL, "graph output #%zu has no name", i);
        snprintf(what, sizeof what, "graph output '" NAME_FMT "'", name);
        int id = find_value(im, name);
        const ir_value *v = id >= 0 ? &im->g->values[id] : NULL;
        if (!v || (v->producer < 0 && !v->is_input && !v->is_const))
            return wpk_error(im->ctx, WPK_ERR_MODEL,
                             "%s is not produced by any node, and is not a graph input or an "
                             "initializer", what);
        if (v->producer >= 0) {
            wpk_status st = read_value_info(im, vi, id, false, what);
            if (st) return st;
        }
        im->g->outputs[im->g->noutputs++] = id;
    }
    return WPK_OK;
}

static wpk_status build_graph(importer *im) {
    const Onnx__GraphProto *gp = im->m->graph;
    wpk_status st = check_opsets(im);
    if (!st) st = add_initializers(im, gp);
    if (!st) st = add_inputs(im, gp);
    if (!st) st = add_nodes(im, gp);
    if (!st) st = add_outputs(im, gp);
    /* after every name in the file is known, so the constants' new names cannot collide */
    for (int i = 0; !st && i < im->g->nnodes; i++)
        st = onnx_legacy_canonicalize(im->ctx, im->g, i, (int)gp->node[i]->n_input);
    if (!st) st = onnx_float16_to_f32(im->ctx, im->g);
    if (!st) st = ir_graph_toposort(im->ctx, im->g);
    return st;
}

/* The checks that tell a model from other protobuf bytes; messages name the source first. */
static wpk_status check_model(wpk_context *ctx, const Onnx__ModelProto *m, const char *what) {
    if (!m->has_ir_version || m->ir_version <= 0)
        return wpk_error(ctx, WPK_ERR_PARSE, "%s is not an ONNX model: ir_version is missing", what);
    if (!m->graph)
        return wpk_error(ctx, WPK_ERR_PARSE, "%s is not an ONNX model: it has no graph", what);
    if (!m->n_opset_import)
        return wpk_error(ctx, WPK_ERR_PARSE, "%s is not an ONNX model: it has no opset_import",
                         what);
    return WPK_OK;
}

wpk_status onnx_import_buffer(wpk_context *ctx, const uint8_t *buf, size_t len, const char *base_dir,
                              const char *what, ir_graph **out) {
    *out = NULL;
    if (!what) what = "<memory>";
    if (len == 0) return wpk_error(ctx, WPK_ERR_PARSE, "%s is not an ONNX model: it is empty", what);
    ProtobufCMessage *msg;
    const char *why;
    wpk_status st = onnx_proto_unpack(&onnx__model_proto__descriptor, buf, len, &msg, &why);
    if (st == WPK_ERR_NOMEM) return wpk_error(ctx, st, "%s: out of memory parsing the model", what);
    if (st) return wpk_error(ctx, st, "%s is not an ONNX model: %s", what, why);
    importer im = {ctx, NULL, (const Onnx__ModelProto *)msg, base_dir, NULL, 0, 0};
    st = check_model(ctx, im.m, what);
    if (st) {
        onnx_proto_free(msg);
        return st;
    }
    im.g = ir_graph_create();
    if (!im.g || !(im.g->path = arena_strdup(&im.g->mem, what)))
        st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory reading the model");
    else
        st = build_graph(&im);
    if (st) wpk_error_prefix(ctx, "%s", what);
    wpk_free(im.map);
    onnx_proto_free(msg);
    if (st) {
        ir_graph_free(im.g);
        return st;
    }
    *out = im.g;
    return WPK_OK;
}

/* Read all of f; regular files are sized up front, pipes grow the buffer. */
static wpk_status read_all(wpk_context *ctx, FILE *f, const char *path, uint8_t **buf, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0)
        return wpk_error(ctx, WPK_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return wpk_error(ctx, WPK_ERR_IO, "%s: cannot read: %s", path, strerror(EISDIR));
    if (S_ISREG(sb.st_mode) && (uint64_t)sb.st_size < SIZE_MAX)
        cap = (size_t)sb.st_size + 1; /* +1 so that reaching EOF needs no second buffer */
    uint8_t *b = wpk_malloc(cap);
    if (!b) return wpk_error(ctx, WPK_ERR_NOMEM, "%s: out of memory reading the file", path);
    for (;;) {
        n += fread(b + n, 1, cap - n, f);
        if (ferror(f)) {
            int err = errno;
            wpk_free(b);
            return wpk_error(ctx, WPK_ERR_IO, "%s: cannot read: %s", path, strerror(err));
        }
        if (feof(f)) break;
        if (cap > SIZE_MAX / 2) {
            wpk_free(b);
            return wpk_error(ctx, WPK_ERR_IO, "%s: the file is too large", path);
        }
        uint8_t *nb = wpk_realloc(b, cap * 2);
        if (!nb) {
            wpk_free(b);
            return wpk_error(ctx, WPK_ERR_NOMEM, "%s: out of memory reading the file", path);
        }
        b = nb;
        cap *= 2;
    }
    *buf = b;
    *len = n;
    return WPK_OK;
}

wpk_status onnx_import_file(wpk_context *ctx, const char *path, ir_graph **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return wpk_error(ctx, WPK_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t len = 0;
    wpk_status st = read_all(ctx, f, path, &buf, &len);
    fclose(f);
    if (st) return st;
    if (len == 0) {
        wpk_free(buf);
        return wpk_error(ctx, WPK_ERR_PARSE, "%s is not an ONNX model: the file is empty", path);
    }
    /* external data paths are relative to the model's directory */
    size_t plen = strlen(path);
    char *dir = wpk_malloc(plen + 2);
    if (!dir) {
        wpk_free(buf);
        return wpk_error(ctx, WPK_ERR_NOMEM, "%s: out of memory", path);
    }
    const char *slash = strrchr(path, '/');
    if (!slash) {
        strcpy(dir, ".");
    } else {
        size_t dlen = slash == path ? 1 : (size_t)(slash - path);
        memcpy(dir, path, dlen);
        dir[dlen] = 0;
    }
    st = onnx_import_buffer(ctx, buf, len, dir, path, out);
    wpk_free(dir);
    wpk_free(buf);
    return st;
}
