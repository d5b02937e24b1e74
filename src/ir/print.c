/* print.c -- graph printer: one line per input, constant summary, node and output. */
#include "ir/print.h"

#include <inttypes.h>

void ir_print_type(const ir_tensor *t, const char *const *dim_names, strbuf *b) {
    if (t->dtype == WPK_DTYPE_UNDEFINED) {
        sb_puts(b, "?");
        return;
    }
    sb_printf(b, "%s[", wpk_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim; i++) {
        if (i) sb_puts(b, ", ");
        if (dim_names && dim_names[i])
            sb_puts(b, dim_names[i]);
        else if (t->dims[i] < 0)
            sb_puts(b, "?");
        else
            sb_printf(b, "%" PRId64, t->dims[i]);
    }
    sb_puts(b, "]");
}

static void print_attr(const ir_attr *a, strbuf *b) {
    sb_printf(b, "%s=", a->name);
    switch (a->kind) {
    case IR_ATTR_INT: sb_printf(b, "%" PRId64, a->i); break;
    case IR_ATTR_FLOAT: sb_printf(b, "%g", (double)a->f); break;
    case IR_ATTR_STRING: sb_printf(b, "\"%s\"", a->s ? a->s : ""); break;
    case IR_ATTR_INTS:
        sb_puts(b, "[");
        for (int i = 0; i < a->n; i++) sb_printf(b, i ? ", %" PRId64 : "%" PRId64, a->ints[i]);
        sb_puts(b, "]");
        break;
    case IR_ATTR_FLOATS:
        sb_puts(b, "[");
        for (int i = 0; i < a->n; i++) sb_printf(b, i ? ", %g" : "%g", (double)a->floats[i]);
        sb_puts(b, "]");
        break;
    case IR_ATTR_STRINGS:
        sb_puts(b, "[");
        for (int i = 0; i < a->n; i++) sb_printf(b, i ? ", \"%s\"" : "\"%s\"", a->strs[i]);
        sb_puts(b, "]");
        break;
    case IR_ATTR_TENSOR:
        if (a->t) ir_print_type(a->t, NULL, b);
        break;
    default: sb_puts(b, "<unsupported attribute kind>"); break;
    }
}

void ir_print(const ir_graph *g, const ir_tensor *vals, strbuf *b) {
    sb_printf(b, "graph opset=%d\n", g->opset);
    for (int i = 0; i < g->ninputs; i++) {
        const ir_value *v = &g->values[g->inputs[i]];
        sb_printf(b, "  input %%%s: ", v->name);
        ir_print_type(&v->t, v->dim_names, b);
        sb_puts(b, "\n");
    }
    int nconst = 0;
    for (int v = 0; v < g->nvalues; v++) nconst += g->values[v].is_const;
    sb_printf(b, "  constants: %d\n", nconst);
    for (int k = 0; k < g->nnodes; k++) {
        const ir_node *n = &g->nodes[k];
        sb_puts(b, "  ");
        for (int i = 0; i < n->nout; i++) {
            if (i) sb_puts(b, ", ");
            if (n->out[i] < 0) {
                sb_puts(b, "_");
                continue;
            }
            sb_printf(b, "%%%s", g->values[n->out[i]].name);
            if (vals) {
                sb_puts(b, ": ");
                ir_print_type(&vals[n->out[i]], NULL, b);
            }
        }
        sb_printf(b, " = %s%s%s(", n->domain[0] ? n->domain : "", n->domain[0] ? "::" : "",
                  n->op_type);
        for (int i = 0; i < n->nin; i++) {
            if (i) sb_puts(b, ", ");
            if (n->in[i] < 0) sb_puts(b, "_");
            else sb_printf(b, "%%%s", g->values[n->in[i]].name);
        }
        sb_puts(b, ")");
        for (int i = 0; i < n->nattr; i++) {
            sb_puts(b, i ? ", " : " {");
            print_attr(&n->attrs[i], b);
        }
        sb_printf(b, "%s  # %s\n", n->nattr ? "}" : "", n->name);
    }
    for (int i = 0; i < g->noutputs; i++)
        sb_printf(b, "  output %%%s\n", g->values[g->outputs[i]].name);
}
