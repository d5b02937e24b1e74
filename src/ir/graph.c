/* graph.c -- building graphs: values, nodes, constants, attribute lookup, topological order. */
#include "ir/graph.h"

#include <string.h>

#include "base/alloc.h"

ir_graph *ir_graph_create(void) { return wpk_calloc(1, sizeof(ir_graph)); }

void ir_graph_free(ir_graph *g) {
    if (!g) return;
    wpk_free(g->values);
    wpk_free(g->nodes);
    arena_free(&g->mem);
    wpk_free(g);
}

int ir_graph_find_value(const ir_graph *g, const char *name) {
    for (int i = 0; i < g->nvalues; i++)
        if (strcmp(g->values[i].name, name) == 0) return i;
    return -1;
}

int ir_graph_add_value(ir_graph *g, const char *name) {
    if (g->nvalues == g->cap_values) {
        int cap = g->cap_values ? 2 * g->cap_values : 64;
        ir_value *v = wpk_realloc(g->values, (size_t)cap * sizeof *v);
        if (!v) return -1;
        g->values = v;
        g->cap_values = cap;
    }
    char *copy = arena_strdup(&g->mem, name);
    if (!copy) return -1;
    ir_value *v = &g->values[g->nvalues];
    memset(v, 0, sizeof *v);
    v->name = copy;
    v->producer = -1;
    return g->nvalues++;
}

int ir_graph_value(ir_graph *g, const char *name) {
    int id = ir_graph_find_value(g, name);
    return id >= 0 ? id : ir_graph_add_value(g, name);
}

int ir_graph_add_node(ir_graph *g, const char *name, const char *op_type, const char *domain,
                      int opset, int nin, int nout) {
    if (g->nnodes == g->cap_nodes) {
        int cap = g->cap_nodes ? 2 * g->cap_nodes : 64;
        ir_node *n = wpk_realloc(g->nodes, (size_t)cap * sizeof *n);
        if (!n) return -1;
        g->nodes = n;
        g->cap_nodes = cap;
    }
    ir_node *n = &g->nodes[g->nnodes];
    memset(n, 0, sizeof *n);
    n->name = arena_strdup(&g->mem, name);
    n->op_type = arena_strdup(&g->mem, op_type);
    n->domain = arena_strdup(&g->mem, domain ? domain : "");
    n->in = arena_alloc(&g->mem, sizeof(int) * (size_t)(nin + 1));
    n->out = arena_alloc(&g->mem, sizeof(int) * (size_t)(nout + 1));
    if (!n->name || !n->op_type || !n->domain || !n->in || !n->out) return -1;
    for (int i = 0; i < nin; i++) n->in[i] = -1;
    for (int i = 0; i < nout; i++) n->out[i] = -1;
    n->nin = nin;
    n->nout = nout;
    n->opset = opset;
    n->op = ir_op_from_onnx(n->domain, op_type);
    return g->nnodes++;
}

int ir_graph_add_const(ir_graph *g, const char *name, const ir_tensor *t) {
    int id = ir_graph_add_value(g, name);
    if (id < 0) return -1;
    ir_value *v = &g->values[id];
    v->t = *t;
    v->t.data = arena_memdup(&g->mem, t->data, ir_nbytes(t));
    if (!v->t.data) return -1;
    v->is_const = true;
    return id;
}

/* Kahn's algorithm, stable: among ready nodes the earliest in file order goes first, so an
 * already sorted graph keeps its order. */
wpk_status ir_graph_toposort(wpk_context *ctx, ir_graph *g) {
    int nn = g->nnodes, nv = g->nvalues;
    int *producer = wpk_malloc(sizeof(int) * (size_t)(nv + 1));
    int *pending = wpk_calloc((size_t)nn + 1, sizeof(int));
    int *order = wpk_malloc(sizeof(int) * (size_t)(nn + 1));
    char *done = wpk_calloc((size_t)nn + 1, 1);
    wpk_status st = WPK_OK;
    if (!producer || !pending || !order || !done) {
        st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory sorting the graph");
        goto out;
    }
    for (int v = 0; v < nv; v++) producer[v] = -1;
    for (int i = 0; i < nn; i++)
        for (int o = 0; o < g->nodes[i].nout; o++)
            if (g->nodes[i].out[o] >= 0) {
                int v = g->nodes[i].out[o];
                if (producer[v] >= 0 || g->values[v].is_const || g->values[v].is_input) {
                    st = wpk_error(ctx, WPK_ERR_MODEL, "value '%s' is assigned twice (node '%s')",
                                   g->values[v].name, g->nodes[i].name);
                    goto out;
                }
                producer[v] = i;
            }
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < g->nodes[i].nin; k++) {
            int v = g->nodes[i].in[k];
            if (v < 0) continue;
            if (producer[v] < 0 && !g->values[v].is_const && !g->values[v].is_input) {
                st = wpk_error(ctx, WPK_ERR_MODEL,
                               "node '%s' (%s) reads '%s', which is not a graph input, an "
                               "initializer, or the output of any node",
                               g->nodes[i].name, g->nodes[i].op_type, g->values[v].name);
                goto out;
            }
            if (producer[v] >= 0) pending[i]++;
        }
    int count = 0;
    while (count < nn) {
        int pick = -1;
        for (int i = 0; i < nn && pick < 0; i++)
            if (!done[i] && pending[i] == 0) pick = i;
        if (pick < 0) {
            for (int i = 0; i < nn; i++)
                if (!done[i]) {
                    st = wpk_error(ctx, WPK_ERR_MODEL, "node '%s' (%s) is part of a cycle",
                                   g->nodes[i].name, g->nodes[i].op_type);
                    goto out;
                }
        }
        done[pick] = 1;
        order[count++] = pick;
        for (int o = 0; o < g->nodes[pick].nout; o++) {
            int v = g->nodes[pick].out[o];
            if (v < 0) continue;
            for (int i = 0; i < nn; i++)
                if (!done[i])
                    for (int k = 0; k < g->nodes[i].nin; k++)
                        if (g->nodes[i].in[k] == v) pending[i]--;
        }
    }
    bool sorted = true;
    for (int i = 0; i < nn; i++) sorted &= order[i] == i;
    if (!sorted) {
        ir_node *copy = wpk_malloc(sizeof(ir_node) * (size_t)nn);
        if (!copy) {
            st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory sorting the graph");
            goto out;
        }
        for (int i = 0; i < nn; i++) copy[i] = g->nodes[order[i]];
        memcpy(g->nodes, copy, sizeof(ir_node) * (size_t)nn);
        wpk_free(copy);
    }
    for (int v = 0; v < nv; v++) g->values[v].producer = -1;
    for (int i = 0; i < nn; i++)
        for (int o = 0; o < g->nodes[i].nout; o++)
            if (g->nodes[i].out[o] >= 0) g->values[g->nodes[i].out[o]].producer = i;
out:
    wpk_free(producer);
    wpk_free(pending);
    wpk_free(order);
    wpk_free(done);
    return st;
}

const ir_attr *ir_attr_find(const ir_node *n, const char *name) {
    for (int i = 0; i < n->nattr; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

int64_t ir_attr_int(const ir_node *n, const char *name, int64_t def) {
    const ir_attr *a = ir_attr_find(n, name);
    return a && a->kind == IR_ATTR_INT ? a->i : def;
}

float ir_attr_float(const ir_node *n, const char *name, float def) {
    const ir_attr *a = ir_attr_find(n, name);
    return a && a->kind == IR_ATTR_FLOAT ? a->f : def;
}

const char *ir_attr_str(const ir_node *n, const char *name, const char *def) {
    const ir_attr *a = ir_attr_find(n, name);
    return a && a->kind == IR_ATTR_STRING ? a->s : def;
}

const int64_t *ir_attr_ints(const ir_node *n, const char *name, int *count) {
    const ir_attr *a = ir_attr_find(n, name);
    if (!a || a->kind != IR_ATTR_INTS) {
        *count = 0;
        return NULL;
    }
    *count = a->n;
    return a->ints;
}
