/* cse.c -- Common-subexpression elimination: identical small constants become one, then nodes
 * with the same op, inputs and attributes become one. */
#include "passes/pass.h"

#include <string.h>

#include "base/alloc.h"

/* Constants up to this size are compared byte for byte: enough for the shape, axes and scalar
 * constants exporters repeat, without hashing every weight of the model on each run. */
#define CSE_CONST_MAX_BYTES 65536

static uint64_t mix(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull; /* FNV-1a */
    return h;
}

static const uint64_t HASH_SEED = 0xcbf29ce484222325ull;

/* Buckets of value or node indices chained through next[]: head[h & mask] is the latest. */
typedef struct table {
    int *head, *next;
    uint64_t mask;
} table;

static bool table_init(table *t, int items) {
    size_t size = 16;
    while (size < 2 * (size_t)items) size *= 2;
    t->head = wpk_malloc(size * sizeof(int));
    t->next = wpk_malloc(((size_t)items + 1) * sizeof(int));
    t->mask = size - 1;
    if (!t->head || !t->next) return false;
    for (size_t i = 0; i < size; i++) t->head[i] = -1;
    return true;
}

static void table_free(table *t) {
    wpk_free(t->head);
    wpk_free(t->next);
}

/* ---- constants ---- */

static bool small_const(const ir_value *v) {
    return v->is_const && !v->is_input && v->t.data && ir_nbytes(&v->t) <= CSE_CONST_MAX_BYTES;
}

static uint64_t const_hash(const ir_tensor *t) {
    uint64_t h = mix(HASH_SEED, &t->dtype, sizeof t->dtype);
    h = mix(h, &t->ndim, sizeof t->ndim);
    h = mix(h, t->dims, sizeof(int64_t) * (size_t)t->ndim);
    return mix(h, t->data, ir_nbytes(t));
}

static bool same_tensor(const ir_tensor *a, const ir_tensor *b) {
    if (a->dtype != b->dtype || !ir_same_shape(a, b)) return false;
    size_t bytes = ir_nbytes(a);
    return bytes == 0 || (a->data && b->data && memcmp(a->data, b->data, bytes) == 0);
}

/* Make readers of a later copy of a constant read the first one. A constant that is a graph
 * output keeps its own name. */
static wpk_status merge_constants(wpk_context *ctx, ir_graph *g, int *changed) {
    table t;
    if (!table_init(&t, g->nvalues)) {
        table_free(&t);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory merging constants");
    }
    for (int v = 0; v < g->nvalues; v++) {
        if (!small_const(&g->values[v])) continue;
        uint64_t b = const_hash(&g->values[v].t) & t.mask;
        int same = -1;
        for (int u = t.head[b]; u >= 0 && same < 0; u = t.next[u])
            if (same_tensor(&g->values[u].t, &g->values[v].t)) same = u;
        if (same < 0) {
            t.next[v] = t.head[b];
            t.head[b] = v;
        } else if (!ir_graph_is_output(g, v) && ir_graph_count_uses(g, v) > 0) {
            ir_graph_replace_uses(g, v, same);
            ++*changed;
        }
    }
    table_free(&t);
    return WPK_OK;
}

/* ---- nodes ---- */

/* Ops that give the same outputs for the same inputs every time. Unsupported ops may be
 * random (RandomNormalLike) and Dropout may train, so those never merge. */
static bool pure(const ir_node *n) {
    return n->op != IR_OP_UNSUPPORTED && n->op != IR_OP_DROPOUT;
}

static uint64_t node_hash(const ir_node *n) {
    uint64_t h = mix(HASH_SEED, n->op_type, strlen(n->op_type));
    h = mix(h, n->domain, strlen(n->domain) + 1);
    h = mix(h, &n->nin, sizeof n->nin);
    return mix(h, n->in, sizeof(int) * (size_t)n->nin);
}

/* Attribute payloads compared exactly: floats bit for bit (so NaN equals itself and -0 does
 * not equal 0), tensors by dtype, shape and bytes; kinds we cannot compare never match. */
static bool same_attr(const ir_attr *a, const ir_attr *b) {
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case IR_ATTR_INT: return a->i == b->i;
    case IR_ATTR_FLOAT: return memcmp(&a->f, &b->f, sizeof a->f) == 0;
    case IR_ATTR_STRING: return a->s && b->s && strcmp(a->s, b->s) == 0;
    case IR_ATTR_INTS:
        return a->n == b->n && (a->n == 0 || memcmp(a->ints, b->ints, sizeof(int64_t) * (size_t)a->n) == 0);
    case IR_ATTR_FLOATS:
        return a->n == b->n && (a->n == 0 || memcmp(a->floats, b->floats, sizeof(float) * (size_t)a->n) == 0);
    case IR_ATTR_STRINGS:
        if (a->n != b->n) return false;
        for (int i = 0; i < a->n; i++)
            if (strcmp(a->strs[i], b->strs[i]) != 0) return false;
        return true;
    case IR_ATTR_TENSOR: return a->t && b->t && same_tensor(a->t, b->t);
    default: return false;
    }
}

static bool same_node(const ir_node *a, const ir_node *b) {
    if (strcmp(a->op_type, b->op_type) != 0 || strcmp(a->domain, b->domain) != 0 ||
        a->opset != b->opset || a->nin != b->nin || a->nout != b->nout || a->nattr != b->nattr)
        return false;
    for (int i = 0; i < a->nin; i++)
        if (a->in[i] != b->in[i]) return false;
    /* the same outputs present: a merged node must produce everything either produced */
    for (int o = 0; o < a->nout; o++)
        if ((a->out[o] < 0) != (b->out[o] < 0)) return false;
    for (int i = 0; i < a->nattr; i++) {
        const ir_attr *other = ir_attr_find(b, a->attrs[i].name);
        if (!other || !same_attr(&a->attrs[i], other)) return false;
    }
    return true;
}

/* Remove node k, which computes what the earlier node j computes. Readers of k's outputs read
 * j's; where k's output is a graph output, j writes that value instead (so the name stays),
 * which fails when j's output is a graph output too. */
static bool merge(ir_graph *g, int j, int k) {
    ir_node *a = &g->nodes[j], *b = &g->nodes[k];
    for (int o = 0; o < b->nout; o++)
        if (b->out[o] >= 0 && ir_graph_is_output(g, b->out[o]) && ir_graph_is_output(g, a->out[o]))
            return false;
    for (int o = 0; o < b->nout; o++) {
        int keep = a->out[o], gone = b->out[o];
        if (gone < 0) continue;
        if (ir_graph_is_output(g, gone)) {
            /* j comes before k, so readers of j's old value between them still see it made */
            a->out[o] = gone;
            ir_graph_replace_uses(g, keep, gone);
            g->values[gone].producer = j;
            g->values[keep].producer = -1;
        } else {
            ir_graph_replace_uses(g, gone, keep);
        }
    }
    b->dead = true;
    return true;
}

static wpk_status merge_nodes(wpk_context *ctx, ir_graph *g, int *changed) {
    table t;
    if (!table_init(&t, g->nnodes)) {
        table_free(&t);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory merging nodes");
    }
    /* in graph order: merges rewrite later nodes' inputs before those nodes are hashed */
    for (int k = 0; k < g->nnodes; k++) {
        ir_node *n = &g->nodes[k];
        if (n->dead || !pure(n)) continue;
        uint64_t b = node_hash(n) & t.mask;
        int same = -1;
        for (int j = t.head[b]; j >= 0 && same < 0; j = t.next[j])
            if (same_node(&g->nodes[j], n)) same = j;
        if (same >= 0 && merge(g, same, k)) {
            ++*changed;
            continue;
        }
        t.next[k] = t.head[b];
        t.head[b] = k;
    }
    table_free(&t);
    return WPK_OK;
}

wpk_status pass_cse(wpk_context *ctx, ir_graph *g, const pass_options *opt, int *changed) {
    (void)opt;
    *changed = 0;
    wpk_status st = merge_constants(ctx, g, changed);
    if (st == WPK_OK) st = merge_nodes(ctx, g, changed);
    if (st) return st;
    if (*changed) ir_graph_compact(g);
    return WPK_OK;
}
