/* model.c -- wpk_model: import, verify, infer shapes; describe inputs and outputs. */
#include "api/model.h"

#include <string.h>

#include "base/alloc.h"
#include "base/strbuf.h"
#include "ir/eval.h"
#include "ir/verify.h"
#include "onnx/onnx_export.h"
#include "onnx/onnx_import.h"
#include "passes/pass.h"
#include "base/target.h"

static wpk_status reinfer(wpk_context *ctx, wpk_model *m);

wpk_status wpk_model_load(wpk_context *ctx, const char *path, wpk_model **out) {
    *out = NULL;
    wpk_clear_error(ctx);
    wpk_model *m = wpk_calloc(1, sizeof *m);
    if (!m) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory loading %s", path);
    wpk_status st = onnx_import_file(ctx, path, &m->g);
    if (st == WPK_OK) st = ir_verify(ctx, m->g);
    if (st == WPK_OK) {
        st = reinfer(ctx, m);
        if (st) wpk_error_prefix(ctx, "%s", path);
    }
    if (st) {
        wpk_model_free(m);
        return st;
    }
    *out = m;
    return WPK_OK;
}

wpk_status api_model_from_buffer(wpk_context *ctx, const uint8_t *buf, size_t len,
                                 const char *what, wpk_model **out) {
    *out = NULL;
    wpk_model *m = wpk_calloc(1, sizeof *m);
    if (!m) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory loading %s", what);
    wpk_status st = onnx_import_buffer(ctx, buf, len, NULL, what, &m->g);
    if (st == WPK_OK) st = ir_verify(ctx, m->g);
    if (st == WPK_OK) {
        st = reinfer(ctx, m);
        if (st) wpk_error_prefix(ctx, "%s", what);
    }
    if (st) {
        wpk_model_free(m);
        return st;
    }
    *out = m;
    return WPK_OK;
}

wpk_status api_model_from_graph(wpk_context *ctx, ir_graph *g, const char *what,
                                wpk_model **out) {
    *out = NULL;
    wpk_model *m = wpk_calloc(1, sizeof *m);
    if (!m) {
        ir_graph_free(g);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory loading %s", what);
    }
    m->g = g;
    wpk_status st = ir_verify(ctx, m->g);
    if (st == WPK_OK) st = reinfer(ctx, m);
    if (st) {
        wpk_error_prefix(ctx, "%s", what);
        wpk_model_free(m);
        return st;
    }
    *out = m;
    return WPK_OK;
}

void wpk_model_free(wpk_model *m) {
    if (!m) return;
    ir_graph_free(m->g);
    wpk_free(m->vals);
    arena_free(&m->fold_mem);
    wpk_free(m);
}

int wpk_model_num_inputs(const wpk_model *m) { return m->g->ninputs; }
int wpk_model_num_outputs(const wpk_model *m) { return m->g->noutputs; }

static wpk_tensor_view describe_value(const ir_value *v, const ir_tensor *inferred) {
    wpk_tensor_view tv;
    memset(&tv, 0, sizeof tv);
    tv.name = v->name;
    const ir_tensor *t = v->t.dtype ? &v->t : inferred;
    tv.dtype = t->dtype;
    tv.ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) {
        tv.dims[i] = t->dims[i];
        tv.dim_names[i] = v->dim_names[i];
    }
    return tv;
}

wpk_tensor_view wpk_model_input(const wpk_model *m, int i) {
    int v = m->g->inputs[i];
    return describe_value(&m->g->values[v], &m->vals[v]);
}

wpk_tensor_view wpk_model_output(const wpk_model *m, int i) {
    int v = m->g->outputs[i];
    return describe_value(&m->g->values[v], &m->vals[v]);
}

wpk_status wpk_model_check_supported(wpk_context *ctx, const wpk_model *m) {
    const ir_graph *g = m->g;
    strbuf b = {0};
    int nbad = 0;
    /* one line per unsupported op type, listing all its nodes */
    for (int k = 0; k < g->nnodes; k++) {
        const ir_node *n = &g->nodes[k];
        if (n->op != IR_OP_UNSUPPORTED) continue;
        bool seen = false;
        for (int j = 0; j < k && !seen; j++)
            seen = g->nodes[j].op == IR_OP_UNSUPPORTED &&
                   strcmp(g->nodes[j].op_type, n->op_type) == 0 &&
                   strcmp(g->nodes[j].domain, n->domain) == 0;
        if (seen) continue;
        nbad++;
        sb_printf(&b, "\n  %s%s%s (nodes:", n->domain[0] ? n->domain : "", n->domain[0] ? "::" : "",
                  n->op_type);
        for (int j = k; j < g->nnodes; j++)
            if (g->nodes[j].op == IR_OP_UNSUPPORTED &&
                strcmp(g->nodes[j].op_type, n->op_type) == 0 &&
                strcmp(g->nodes[j].domain, n->domain) == 0)
                sb_printf(&b, " %s", g->nodes[j].name);
        sb_puts(&b, ")");
    }
    if (!nbad) {
        sb_free(&b);
        return WPK_OK;
    }
    char *list = sb_take(&b);
    wpk_status st = wpk_error(ctx, WPK_ERR_UNSUPPORTED, "%s: %d unsupported op type%s:%s",
                              g->path ? g->path : "model", nbad, nbad > 1 ? "s" : "", list ? list : "");
    wpk_free(list);
    return st;
}

wpk_optimize_params wpk_optimize_default_params(void) {
    wpk_optimize_params p;
    memset(&p, 0, sizeof p);
    p.level = pass_default_options().level;
    return p;
}

/* Shapes for reports: inferred with symbolic dims bound to 1, small results folded. */
static wpk_status reinfer(wpk_context *ctx, wpk_model *m) {
    wpk_free(m->vals);
    arena_free(&m->fold_mem);
    m->vals = wpk_calloc((size_t)m->g->nvalues + 1, sizeof(ir_tensor));
    if (!m->vals) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory inferring shapes");
    for (int v = 0; v < m->g->nvalues; v++) {
        const ir_value *val = &m->g->values[v];
        if (!val->is_const && !val->is_input) continue;
        m->vals[v] = val->t;
        for (int i = 0; i < val->t.ndim; i++)
            if (m->vals[v].dims[i] < 0) m->vals[v].dims[i] = 1;
    }
    return ir_infer(ctx, m->g, m->vals, &m->fold_mem);
}

wpk_status wpk_model_optimize(wpk_context *ctx, wpk_model *m, const wpk_optimize_params *params) {
    wpk_clear_error(ctx);
    wpk_optimize_params p = params ? *params : wpk_optimize_default_params();
    if (p.level < 0 || p.level > 3)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "optimization level %d is out of range (0 to 3)",
                         p.level);
    pass_options opt = pass_default_options();
    opt.level = p.level;
    opt.dump = p.dump;
    opt.only = p.passes;
    opt.vector_floats = target_vector_floats();
    wpk_status st = passes_run(ctx, m->g, &opt);
    if (st == WPK_OK) st = reinfer(ctx, m);
    if (st) wpk_error_prefix(ctx, "%s", m->g->path ? m->g->path : "model");
    return st;
}

int wpk_model_num_nodes(const wpk_model *m) { return m->g->nnodes; }

wpk_status wpk_model_save(wpk_context *ctx, const wpk_model *m, const char *path) {
    wpk_clear_error(ctx);
    return onnx_export_file(ctx, m->g, path);
}
