/* describe.c -- the report behind `wpk info`: interface, op histogram, parameters, FLOPs,
 * unsupported ops. */
#include <string.h>

#include "api/model.h"
#include "base/alloc.h"
#include "base/strbuf.h"
#include "ir/flops.h"
#include "ir/print.h"

static void print_value_line(const ir_value *v, const ir_tensor *inferred, strbuf *b) {
    sb_printf(b, "  %-24s ", v->name);
    ir_print_type(v->t.dtype ? &v->t : inferred, v->dim_names, b);
    sb_puts(b, "\n");
}

static void human(double x, strbuf *b) {
    const char *unit[] = {"", "K", "M", "G", "T"};
    int u = 0;
    while (x >= 1000 && u < 4) {
        x /= 1000;
        u++;
    }
    sb_printf(b, u ? "%.2f%s" : "%.0f%s", x, unit[u]);
}

char *wpk_model_describe(const wpk_model *m) {
    const ir_graph *g = m->g;
    strbuf b = {0};
    sb_printf(&b, "model: %s (opset %d, %d nodes)\n", g->path ? g->path : "?", g->opset, g->nnodes);
    sb_puts(&b, "inputs:\n");
    for (int i = 0; i < g->ninputs; i++)
        print_value_line(&g->values[g->inputs[i]], &m->vals[g->inputs[i]], &b);
    sb_puts(&b, "outputs:\n");
    for (int i = 0; i < g->noutputs; i++)
        print_value_line(&g->values[g->outputs[i]], &m->vals[g->outputs[i]], &b);

    int64_t params = 0, flops = 0;
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].is_const) params += ir_numel(&g->values[v].t);
    bool dynamic = false;
    for (int i = 0; i < g->ninputs; i++)
        for (int d = 0; d < g->values[g->inputs[i]].t.ndim; d++)
            dynamic |= g->values[g->inputs[i]].t.dims[d] < 0;
    ir_tensor *in[64], *out[64];
    for (int k = 0; k < g->nnodes; k++) {
        const ir_node *n = &g->nodes[k];
        if (n->op == IR_OP_UNSUPPORTED || n->nin > 64 || n->nout > 64) continue;
        for (int i = 0; i < n->nin; i++) in[i] = n->in[i] >= 0 ? &m->vals[n->in[i]] : NULL;
        for (int i = 0; i < n->nout; i++) out[i] = n->out[i] >= 0 ? &m->vals[n->out[i]] : NULL;
        flops += ir_node_flops(n, in, out);
    }
    sb_puts(&b, "parameters: ");
    human((double)params, &b);
    sb_printf(&b, " (%lld)\nFLOPs: ", (long long)params);
    human((double)flops, &b);
    sb_printf(&b, "%s\n", dynamic ? " (symbolic dims bound to 1)" : "");

    /* op histogram, in order of first appearance */
    sb_puts(&b, "ops:\n");
    for (int k = 0; k < g->nnodes; k++) {
        const ir_node *n = &g->nodes[k];
        bool seen = false;
        for (int j = 0; j < k && !seen; j++)
            seen = strcmp(g->nodes[j].op_type, n->op_type) == 0 &&
                   strcmp(g->nodes[j].domain, n->domain) == 0;
        if (seen) continue;
        int count = 0;
        for (int j = k; j < g->nnodes; j++)
            count += strcmp(g->nodes[j].op_type, n->op_type) == 0 &&
                     strcmp(g->nodes[j].domain, n->domain) == 0;
        sb_printf(&b, "  %-24s %5d%s\n", n->op_type, count,
                  n->op == IR_OP_UNSUPPORTED ? "  UNSUPPORTED" : "");
    }
    return sb_take(&b);
}

char *wpk_model_print(const wpk_model *m) {
    strbuf b = {0};
    ir_print(m->g, m->vals, &b);
    return sb_take(&b);
}
