/* tasks.c -- releasing a model's tuning tasks and merging several models' (tasks.h). */
#include "tune/tasks.h"

#include <string.h>

#include "base/alloc.h"
#include "base/context.h"

void tune_taskset_free(tune_taskset *t) {
    if (!t) return;
    wpk_free(t->tasks);
    if (t->owner_free) t->owner_free(t->owner);
    memset(t, 0, sizeof *t);
}

typedef struct owners {
    tune_taskset *sets;       /* tasks freed, owners kept */
    int n;
} owners;

static void owners_free(void *user) {
    owners *o = user;
    for (int i = 0; i < o->n; i++) tune_taskset_free(&o->sets[i]);
    wpk_free(o->sets);
    wpk_free(o);
}

static int find_task(const tune_taskset *t, const tune_model_task *mt) {
    for (int i = 0; i < t->ntasks; i++)
        if (!strcmp(t->tasks[i].task.key, mt->task.key) &&
            !strcmp(t->tasks[i].task.tmpl->name, mt->task.tmpl->name))
            return i;
    return -1;
}

wpk_status tune_taskset_merge(wpk_context *ctx, tune_taskset *sets, int n, tune_taskset *out) {
    memset(out, 0, sizeof *out);
    int total = 0;
    for (int s = 0; s < n; s++) total += sets[s].ntasks;
    owners *o = wpk_calloc(1, sizeof *o);
    out->tasks = wpk_calloc((size_t)total + 1, sizeof *out->tasks);
    int *map = wpk_calloc((size_t)total + 1, sizeof *map);
    if (o) o->sets = wpk_calloc((size_t)n + 1, sizeof *o->sets);
    if (!o || !o->sets || !out->tasks || !map) {
        if (o) wpk_free(o->sets);
        wpk_free(o);
        wpk_free(out->tasks);
        wpk_free(map);
        out->tasks = NULL;
        for (int s = 0; s < n; s++) tune_taskset_free(&sets[s]);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory merging the models' tasks");
    }
    for (int s = 0; s < n; s++) {
        const tune_taskset *in = &sets[s];
        for (int i = 0; i < in->ntasks; i++) {
            const tune_model_task *mt = &in->tasks[i];
            int at = find_task(out, mt);
            if (at >= 0) {
                out->tasks[at].count += mt->count;
                out->tasks[at].flops += mt->flops;
            } else {
                at = out->ntasks++;
                out->tasks[at] = *mt;
                /* the primary comes before its alternatives, so it is mapped already */
                if (mt->alt_of >= 0) out->tasks[at].alt_of = map[mt->alt_of];
            }
            map[i] = at;
        }
        out->nodes += in->nodes;
        out->kernel_nodes += in->kernel_nodes;
        o->sets[s] = sets[s];
        wpk_free(o->sets[s].tasks);
        o->sets[s].tasks = NULL;
        o->sets[s].ntasks = 0;
        memset(&sets[s], 0, sizeof sets[s]);
    }
    for (int i = 0; i < out->ntasks; i++)
        if (out->tasks[i].alt_of < 0) out->total_flops += out->tasks[i].flops;
    for (int i = 0; i < out->ntasks; i++)
        out->tasks[i].share = out->total_flops > 0 ? (double)out->tasks[i].flops /
                                                         (double)out->total_flops : 0;
    o->n = n;
    wpk_free(map);
    out->owner = o;
    out->owner_free = owners_free;
    return WPK_OK;
}
