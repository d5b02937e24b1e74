/* kernels.c -- what the cpu backend would compile for a model, as text: its kernel tasks and
 * their search spaces (`wpk space`), the nodes left to reference kernels (`wpk info`), and one
 * node's kernel from tensor expression to loops (`wpk lower`). */
#include <string.h>

#include "api/exec_plan.h"
#include "api/model.h"
#include "base/alloc.h"
#include "kernels/cpu_kernel.h"
#include "kernels/graph_tasks.h"

/* The model's graph specialized with symbolic dims bound to 1 (static shapes required). */
static wpk_status specialize(wpk_context *ctx, const wpk_model *m, exec_plan **out) {
    const ir_graph *g = m->g;
    ir_tensor *shapes = wpk_calloc((size_t)g->ninputs + 1, sizeof(ir_tensor));
    if (!shapes) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory specializing the model");
    for (int i = 0; i < g->ninputs; i++) {
        shapes[i] = g->values[g->inputs[i]].t;
        shapes[i].data = NULL;
        for (int d = 0; d < shapes[i].ndim; d++)
            if (shapes[i].dims[d] < 0) shapes[i].dims[d] = 1;
    }
    wpk_status st = exec_plan_create(ctx, g, shapes, true, out);
    wpk_free(shapes);
    return st;
}

typedef enum what { SPACE, REFERENCE } what;

static wpk_status report(wpk_context *ctx, const wpk_model *m, what w, char **out) {
    *out = NULL;
    wpk_clear_error(ctx);
    exec_plan *p = NULL;
    cpu_tasks t = {0};
    wpk_status st = specialize(ctx, m, &p);
    if (st == WPK_OK) st = cpu_tasks_collect(ctx, p->g, p->vals, &t);
    if (st == WPK_OK) {
        strbuf b = {0};
        if (w == SPACE) cpu_tasks_print(&t, p->g, &b);
        else cpu_tasks_print_reference(&t, p->g, &b);
        if (b.oom || !b.s) {
            sb_free(&b);
            st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory printing kernel tasks");
        } else {
            *out = sb_take(&b);
        }
    }
    if (st) wpk_error_prefix(ctx, "%s", m->g->path ? m->g->path : "model");
    cpu_tasks_free(&t);
    exec_plan_free(p);
    return st;
}

wpk_status wpk_model_space(wpk_context *ctx, const wpk_model *m, char **out) {
    return report(ctx, m, SPACE, out);
}

wpk_status wpk_model_reference_kernels(wpk_context *ctx, const wpk_model *m, char **out) {
    return report(ctx, m, REFERENCE, out);
}

wpk_status wpk_model_lower(wpk_context *ctx, const wpk_model *m, const char *node,
                           const char *config, char **out) {
    *out = NULL;
    wpk_clear_error(ctx);
    exec_plan *p = NULL;
    wpk_status st = specialize(ctx, m, &p);
    const ir_node *n = NULL;
    for (int k = 0; st == WPK_OK && k < p->g->nnodes && !n; k++)
        if (!strcmp(p->g->nodes[k].name, node)) n = &p->g->nodes[k];
    if (st == WPK_OK && !n)
        st = wpk_error(ctx, WPK_ERR_INVALID_ARG, "no node named '%s' in the graph (optimized and "
                       "specialized as the cpu backend compiles it; `wpk info --graph` after "
                       "`wpk optimize` lists the names)", node);
    ir_tensor *in[64], *outs[64];
    const kernel_provider *t = NULL;
    if (st == WPK_OK && (n->nin > 64 || n->nout > 64))
        st = wpk_error(ctx, WPK_ERR_INVALID_ARG, "node '%s' (%s) has too many tensors for a "
                       "kernel", node, n->op_type);
    if (st == WPK_OK) {
        cpu_node_tensors(n, p->vals, in, outs);
        t = kernel_provider_for(n, in, outs);
        if (!t)
            st = wpk_error(ctx, WPK_ERR_INVALID_ARG, "node '%s' (%s): no template takes it; it "
                           "runs its reference kernel", node, n->op_type);
    }
    tune_task *task = st == WPK_OK ? wpk_calloc(1, sizeof *task) : NULL;
    if (st == WPK_OK && !task) st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory");
    if (st == WPK_OK) {
        tune_task_init(task, t, n, in, outs);
        strbuf b = {0};
        st = cpu_kernel_print(ctx, task, config, &b);
        if (st == WPK_OK && (b.oom || !b.s))
            st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory printing a kernel");
        if (st == WPK_OK) *out = sb_take(&b);
        sb_free(&b);
    }
    if (st) wpk_error_prefix(ctx, "%s", m->g->path ? m->g->path : "model");
    wpk_free(task);
    exec_plan_free(p);
    return st;
}
