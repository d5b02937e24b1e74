/* pass_manager.c -- runs passes.def in order, with shape inference before each pass, optional
 * dumps, change counts and (debug builds) verification between passes. */
#include "passes/pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/strbuf.h"
#include "ir/eval.h"
#include "ir/print.h"
#include "ir/verify.h"

typedef struct pass_entry {
    const char *name;
    pass_fn fn;
    int level;
} pass_entry;

static const pass_entry pipeline[] = {
#define P(name, fn, level, doc) {name, fn, level},
#include "passes/passes.def"
#undef P
};

pass_options pass_default_options(void) {
    pass_options o;
    memset(&o, 0, sizeof o);
    o.level = 3;
    o.vector_floats = 8;
    return o;
}

bool pass_shape_known(const ir_tensor *t) {
    if (t->dtype == WPK_DTYPE_UNDEFINED) return false;
    for (int i = 0; i < t->ndim; i++)
        if (t->dims[i] < 0) return false;
    return true;
}

wpk_status pass_infer_shapes(wpk_context *ctx, ir_graph *g) {
    ir_tensor *vals = wpk_calloc((size_t)g->nvalues + 1, sizeof(ir_tensor));
    if (!vals) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory inferring shapes");
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].is_const || g->values[v].is_input) vals[v] = g->values[v].t;
    wpk_status st = ir_infer(ctx, g, vals, NULL);
    if (st == WPK_OK)
        for (int v = 0; v < g->nvalues; v++)
            if (!g->values[v].is_const && !g->values[v].is_input) {
                g->values[v].t = vals[v];
                g->values[v].t.data = NULL;
            }
    wpk_free(vals);
    return st;
}

static bool listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) return true;
        p = end ? end + 1 : NULL;
    }
    return false;
}

static void dump(wpk_context *ctx, const ir_graph *g, const char *title) {
    strbuf b = {0};
    sb_printf(&b, "== %s ==\n", title);
    ir_print(g, NULL, &b);
    if (b.s) wpk_log(ctx, WPK_LOG_INFO, "%s", b.s);
    sb_free(&b);
}

wpk_status passes_run(wpk_context *ctx, ir_graph *g, const pass_options *opt) {
    const char *want_dump = opt->dump ? opt->dump : getenv("WPK_DUMP");
    bool dump_all = want_dump && strcmp(want_dump, "all") == 0;
    if (dump_all) dump(ctx, g, "before optimization");
    for (size_t i = 0; i < sizeof pipeline / sizeof pipeline[0]; i++) {
        const pass_entry *p = &pipeline[i];
        if (opt->only ? !listed(opt->only, p->name) : opt->level < p->level) continue;
        wpk_status st = pass_infer_shapes(ctx, g);
        int changed = 0;
        if (st == WPK_OK) st = p->fn(ctx, g, opt, &changed);
        if (st) {
            wpk_error_prefix(ctx, "pass %s", p->name);
            return st;
        }
        wpk_log(ctx, WPK_LOG_INFO, "pass %s: %d change%s", p->name, changed, changed == 1 ? "" : "s");
        if (changed && (dump_all || (want_dump && strcmp(want_dump, p->name) == 0))) {
            char title[128];
            snprintf(title, sizeof title, "after %s (%d change%s)", p->name, changed,
                     changed == 1 ? "" : "s");
            dump(ctx, g, title);
        }
#ifndef NDEBUG
        st = ir_verify(ctx, g);
        if (st) {
            wpk_error_prefix(ctx, "graph invalid after pass %s", p->name);
            return st == WPK_ERR_NOMEM ? st : WPK_ERR_INTERNAL;
        }
#endif
    }
    return pass_infer_shapes(ctx, g);
}
