/* tasks.c -- a specialized graph's kernel tasks: template per node, workloads deduplicated by
 * key, and their report (see tasks.h). */
#include "kernels/graph_tasks.h"

#include <string.h>

#include "base/alloc.h"

/* Nodes with more tensors than this never get a template (none takes so many). */
#define MAX_NODE_ARGS 64

void cpu_node_tensors(const ir_node *n, ir_tensor *vals, ir_tensor **in, ir_tensor **out) {
    for (int i = 0; i < n->nin; i++) in[i] = n->in[i] >= 0 ? &vals[n->in[i]] : NULL;
    for (int i = 0; i < n->nout; i++) out[i] = n->out[i] >= 0 ? &vals[n->out[i]] : NULL;
}

/* Every tensor of the node has a known dtype (static shapes are the templates' to check). */
static bool known(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    for (int i = 0; i < n->nin; i++)
        if (in[i] && in[i]->dtype == WPK_DTYPE_UNDEFINED) return false;
    for (int i = 0; i < n->nout; i++)
        if (out[i] && out[i]->dtype == WPK_DTYPE_UNDEFINED) return false;
    return n->nin <= MAX_NODE_ARGS && n->nout <= MAX_NODE_ARGS;
}

/* Whether two tasks are the same workload: the key, and which inputs are compile-time
 * constants (a template may pre-pack those: the kernel differs). */
static bool same_workload(const tune_task *a, const tune_task *b) {
    if (a->tmpl != b->tmpl || strcmp(a->key, b->key) || a->nin != b->nin) return false;
    for (int i = 0; i < a->nin; i++)
        if ((a->in[i].data != NULL) != (b->in[i].data != NULL)) return false;
    return true;
}

wpk_status cpu_tasks_collect(wpk_context *ctx, const ir_graph *g, const ir_tensor *vals,
                             cpu_tasks *out) {
    memset(out, 0, sizeof *out);
    out->nnodes = g->nnodes;
    out->node_task = wpk_calloc((size_t)g->nnodes + 1, sizeof *out->node_task);
    out->tasks = wpk_calloc((size_t)g->nnodes + 1, sizeof *out->tasks);
    if (!out->node_task || !out->tasks) {
        cpu_tasks_free(out);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory collecting kernel tasks");
    }
    ir_tensor *in[MAX_NODE_ARGS], *outs[MAX_NODE_ARGS];
    for (int k = 0; k < g->nnodes; k++) {
        const ir_node *n = &g->nodes[k];
        out->node_task[k] = -1;
        if (n->nin > MAX_NODE_ARGS || n->nout > MAX_NODE_ARGS) continue;
        /* the templates only read vals: the cast drops nothing they rely on */
        cpu_node_tensors(n, (ir_tensor *)vals, in, outs);
        if (!known(n, in, outs)) continue;
        const kernel_provider *t = kernel_provider_for(n, in, outs);
        if (!t) continue;
        cpu_task *ct = &out->tasks[out->ntasks];
        tune_task_init(&ct->task, t, n, in, outs);
        int found = -1;
        for (int j = 0; j < out->ntasks && found < 0; j++)
            if (same_workload(&out->tasks[j].task, &ct->task)) found = j;
        if (found < 0) found = out->ntasks++;
        out->tasks[found].count++;
        out->tasks[found].flops += ct->task.flops;
        out->node_task[k] = found;
    }
    return WPK_OK;
}

void cpu_tasks_free(cpu_tasks *t) {
    wpk_free(t->tasks);
    wpk_free(t->node_task);
    memset(t, 0, sizeof *t);
}

void cpu_tasks_print(const cpu_tasks *t, const ir_graph *g, strbuf *b) {
    int64_t total = 0;
    for (int i = 0; i < t->ntasks; i++) total += t->tasks[i].flops;
    int nodes = 0;
    for (int i = 0; i < t->ntasks; i++) nodes += t->tasks[i].count;
    sb_printf(b, "%d tasks for %d nodes (of %d), %.3f GFLOPs\n", t->ntasks, nodes, g->nnodes,
              (double)total * 1e-9);
    for (int i = 0; i < t->ntasks; i++) {
        const cpu_task *ct = &t->tasks[i];
        tune_space s;
        ct->task.tmpl->space(ct->task.tmpl, &ct->task, &s);
        double share = total > 0 ? 100.0 * (double)ct->flops / (double)total : 0.0;
        sb_printf(b, "task %d: %s\n", i, ct->task.key);
        sb_printf(b, "  template %s, %d node%s (first '%s'), %.1f%% of FLOPs\n", ct->task.tmpl->name,
                  ct->count, ct->count == 1 ? "" : "s", ct->task.node->name, share);
        sb_puts(b, "  knobs:");
        for (int k = 0; k < s.nknobs; k++)
            sb_printf(b, " %s(%d)", s.knobs[k].name, s.knobs[k].nvalues);
        sb_printf(b, "\n  space: %lld configs\n", (long long)tune_space_size(&s));
    }
    cpu_tasks_print_reference(t, g, b);
    sb_puts(b, "\n");
}

void cpu_tasks_print_reference(const cpu_tasks *t, const ir_graph *g, strbuf *b) {
    sb_puts(b, "reference kernels (no template): ");
    bool any = false;
    for (int k = 0; k < g->nnodes; k++) {
        const ir_node *n = &g->nodes[k];
        if (t->node_task[k] >= 0 || ir_op_get(n->op)->ref == op_copy_ref) continue;
        bool seen = false;
        for (int j = 0; j < k && !seen; j++)
            seen = t->node_task[j] < 0 && g->nodes[j].op == n->op &&
                   !strcmp(g->nodes[j].op_type, n->op_type);
        if (seen) continue;
        int count = 0;
        for (int j = k; j < g->nnodes; j++)
            count += t->node_task[j] < 0 && g->nodes[j].op == n->op &&
                     !strcmp(g->nodes[j].op_type, n->op_type);
        sb_printf(b, "%s%s (%d node%s)", any ? ", " : "", n->op_type, count, count == 1 ? "" : "s");
        any = true;
    }
    if (!any) sb_puts(b, "none");
}
