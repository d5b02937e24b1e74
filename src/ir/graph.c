/* graph.c -- building graphs: values, nodes, constants, attribute lookup, topological order. */
#include "ir/graph.h"

#include <stdio.h>
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

ir_graph *ir_graph_clone(const ir_graph *src) {
    ir_graph *g = ir_graph_create();
    if (!g) return NULL;
    g->opset = src->opset;
    g->path = src->path;
    g->values = wpk_malloc(sizeof(ir_value) * (size_t)(src->nvalues + 1));
    g->nodes = wpk_malloc(sizeof(ir_node) * (size_t)(src->nnodes + 1));
    g->inputs = arena_alloc(&g->mem, sizeof(int) * (size_t)(src->ninputs + 1));
    g->outputs = arena_alloc(&g->mem, sizeof(int) * (size_t)(src->noutputs + 1));
    if (!g->values || !g->nodes || !g->inputs || !g->outputs) goto oom;
    memcpy(g->values, src->values, sizeof(ir_value) * (size_t)src->nvalues);
    g->nvalues = g->cap_values = src->nvalues;
    memcpy(g->inputs, src->inputs, sizeof(int) * (size_t)src->ninputs);
    memcpy(g->outputs, src->outputs, sizeof(int) * (size_t)src->noutputs);
    g->ninputs = src->ninputs;
    g->noutputs = src->noutputs;
    for (int k = 0; k < src->nnodes; k++) {
        ir_node *n = &g->nodes[k];
        *n = src->nodes[k];
        n->in = arena_memdup(&g->mem, n->in, sizeof(int) * (size_t)(n->nin + 1));
        n->out = arena_memdup(&g->mem, n->out, sizeof(int) * (size_t)(n->nout + 1));
        if (n->attrs && !(n->attrs = arena_memdup(&g->mem, n->attrs, sizeof(ir_attr) * (size_t)n->nattr)))
            goto oom;
        if (!n->in || !n->out) goto oom;
    }
    g->nnodes = g->cap_nodes = src->nnodes;
    return g;
oom:
    ir_graph_free(g);
    return NULL;
}

void ir_graph_replace_uses(ir_graph *g, int from, int to) {
    for (int k = 0; k < g->nnodes; k++)
        for (int i = 0; i < g->nodes[k].nin; i++)
            if (g->nodes[k].in[i] == from) g->nodes[k].in[i] = to;
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] == from) g->outputs[i] = to;
}

bool ir_graph_is_output(const ir_graph *g, int v) {
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] == v) return true;
    return false;
}

int ir_graph_count_uses(const ir_graph *g, int v) {
    int uses = 0;
    for (int k = 0; k < g->nnodes; k++)
        if (!g->nodes[k].dead)
            for (int i = 0; i < g->nodes[k].nin; i++) uses += g->nodes[k].in[i] == v;
    for (int i = 0; i < g->noutputs; i++) uses += g->outputs[i] == v;
    return uses;
}

int ir_graph_single_consumer(const ir_graph *g, int v) {
    int found = -1, uses = 0;
    for (int k = 0; k < g->nnodes; k++) {
        if (g->nodes[k].dead) continue;
        for (int i = 0; i < g->nodes[k].nin; i++)
            if (g->nodes[k].in[i] == v) {
                uses++;
                found = k;
            }
    }
    return uses == 1 && !ir_graph_is_output(g, v) ? found : -1;
}

void ir_graph_compact(ir_graph *g) {
    int j = 0;
    for (int k = 0; k < g->nnodes; k++)
        if (!g->nodes[k].dead) g->nodes[j++] = g->nodes[k];
    g->nnodes = j;
    for (int v = 0; v < g->nvalues; v++) g->values[v].producer = -1;
    for (int k = 0; k < g->nnodes; k++)
        for (int o = 0; o < g->nodes[k].nout; o++)
            if (g->nodes[k].out[o] >= 0) g->values[g->nodes[k].out[o]].producer = k;
}

const char *ir_graph_unique_name(ir_graph *g, const char *base) {
    if (ir_graph_find_value(g, base) < 0) return arena_strdup(&g->mem, base);
    char buf[512];
    for (int i = 1;; i++) {
        snprintf(buf, sizeof buf, "%.480s_%d", base, i);
        if (ir_graph_find_value(g, buf) < 0) return arena_strdup(&g->mem, buf);
    }
}

wpk_status ir_node_resize(ir_graph *g, ir_node *n, int nin, int nout) {
    int *in = arena_alloc(&g->mem, sizeof(int) * (size_t)(nin + 1));
    int *out = arena_alloc(&g->mem, sizeof(int) * (size_t)(nout + 1));
    if (!in || !out) return WPK_ERR_NOMEM;
    for (int i = 0; i < nin; i++) in[i] = i < n->nin ? n->in[i] : -1;
    for (int i = 0; i < nout; i++) out[i] = i < n->nout ? n->out[i] : -1;
    n->in = in;
    n->out = out;
    n->nin = nin;
    n->nout = nout;
    return WPK_OK;
}

wpk_status ir_node_set_attr(ir_graph *g, ir_node *n, const ir_attr *a) {
    ir_attr copy = *a;
    copy.name = arena_strdup(&g->mem, a->name);
    if (!copy.name) return WPK_ERR_NOMEM;
    if (a->s && !(copy.s = arena_strdup(&g->mem, a->s))) return WPK_ERR_NOMEM;
    if (a->ints && !(copy.ints = arena_memdup(&g->mem, a->ints, sizeof(int64_t) * (size_t)a->n)))
        return WPK_ERR_NOMEM;
    if (a->floats && !(copy.floats = arena_memdup(&g->mem, a->floats, sizeof(float) * (size_t)a->n)))
        return WPK_ERR_NOMEM;
    if (a->strs) {
        const char **strs = arena_alloc(&g->mem, sizeof *strs * (size_t)(a->n + 1));
        if (!strs) return WPK_ERR_NOMEM;
        for (int i = 0; i < a->n; i++)
            if (!(strs[i] = arena_strdup(&g->mem, a->strs[i]))) return WPK_ERR_NOMEM;
        copy.strs = strs;
    }
    if (a->t) {
        ir_tensor *t = arena_memdup(&g->mem, a->t, sizeof *t);
        if (!t) return WPK_ERR_NOMEM;
        if (a->t->data && !(t->data = arena_memdup(&g->mem, a->t->data, ir_nbytes(a->t))))
            return WPK_ERR_NOMEM;
        copy.t = t;
    }
    for (int i = 0; i < n->nattr; i++)
        if (strcmp(n->attrs[i].name, a->name) == 0) {
            n->attrs[i] = copy;
            return WPK_OK;
        }
    /* attribute arrays may be shared with a clone's source: always grow into a new array */
    ir_attr *attrs = arena_alloc(&g->mem, sizeof(ir_attr) * (size_t)(n->nattr + 1));
    if (!attrs) return WPK_ERR_NOMEM;
    if (n->nattr) memcpy(attrs, n->attrs, sizeof(ir_attr) * (size_t)n->nattr);
    attrs[n->nattr] = copy;
    n->attrs = attrs;
    n->nattr++;
    return WPK_OK;
}

wpk_status ir_node_set_int(ir_graph *g, ir_node *n, const char *name, int64_t v) {
    ir_attr a = {.name = name, .kind = IR_ATTR_INT, .i = v};
    return ir_node_set_attr(g, n, &a);
}

wpk_status ir_node_set_float(ir_graph *g, ir_node *n, const char *name, float v) {
    ir_attr a = {.name = name, .kind = IR_ATTR_FLOAT, .f = v};
    return ir_node_set_attr(g, n, &a);
}

wpk_status ir_node_set_str(ir_graph *g, ir_node *n, const char *name, const char *v) {
    ir_attr a = {.name = name, .kind = IR_ATTR_STRING, .s = v};
    return ir_node_set_attr(g, n, &a);
}

wpk_status ir_node_set_ints(ir_graph *g, ir_node *n, const char *name, const int64_t *v, int count) {
    ir_attr a = {.name = name, .kind = IR_ATTR_INTS, .ints = (int64_t *)v, .n = count};
    return ir_node_set_attr(g, n, &a);
}

void ir_node_remove_attr(ir_node *n, const char *name) {
    for (int i = 0; i < n->nattr; i++)
        if (strcmp(n->attrs[i].name, name) == 0) {
            /* the array is the node's own (see ir_node.attrs), so shifting in place is safe */
            memmove(&n->attrs[i], &n->attrs[i + 1], sizeof(ir_attr) * (size_t)(n->nattr - i - 1));
            n->nattr--;
            return;
        }
}

void ir_node_set_op(ir_node *n, ir_op op) {
    const ir_op_info *info = ir_op_get(op);
    n->op = op;
    n->op_type = info->name;
    n->domain = info->domain;
}
