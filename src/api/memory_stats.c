/* memory_stats.c -- planned vs unplanned activation memory of a model, for `wpk info`. */
#include <string.h>

#include "api/exec_plan.h"
#include "api/model.h"
#include "base/alloc.h"

wpk_status wpk_model_memory_stats(wpk_context *ctx, const wpk_model *m, wpk_memory_stats *out) {
    wpk_clear_error(ctx);
    memset(out, 0, sizeof *out);
    const ir_graph *g = m->g;
    ir_tensor *shapes = wpk_calloc((size_t)g->ninputs + 1, sizeof(ir_tensor));
    if (!shapes) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory planning activation memory");
    for (int i = 0; i < g->ninputs; i++) {
        shapes[i] = g->values[g->inputs[i]].t;
        for (int d = 0; d < shapes[i].ndim; d++)
            if (shapes[i].dims[d] < 0) shapes[i].dims[d] = 1; /* symbolic dims bound to 1 */
    }
    exec_plan *p = NULL;
    wpk_status st = exec_plan_create(ctx, g, shapes, true, &p);
    if (st == WPK_OK) {
        out->planned_bytes = p->mem.workspace;
        out->unplanned_bytes = p->mem.unplanned;
    } else {
        wpk_error_prefix(ctx, "%s: planning activation memory", g->path ? g->path : "model");
    }
    exec_plan_free(p);
    wpk_free(shapes);
    return st;
}
