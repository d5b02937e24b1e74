/* test_taskset_merge.c -- several models' tuning tasks as one set (tune_taskset_merge): a
 * workload two models pose is one task with their counts and FLOPs summed, an alternative
 * follows its primary's new index, shares are over the merged primaries, each set's owner is
 * released once with the merged set. */
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "check.h"
#include "kernels/provider.h"
#include "tune/tasks.h"

static int released;

static void owner_free(void *owner) {
    (void)owner;
    released++;
}

static const kernel_provider conv = {.name = "conv2d_nchwc"};
static const kernel_provider dense = {.name = "dense"};
static const kernel_provider wino = {.name = "winograd"};

static tune_model_task task(const kernel_provider *p, const char *key, int count, int64_t flops,
                            int alt_of) {
    tune_model_task t;
    memset(&t, 0, sizeof t);
    t.task.tmpl = p;
    snprintf(t.task.key, sizeof t.task.key, "%s", key);
    t.count = count;
    t.flops = flops;
    t.alt_of = alt_of;
    return t;
}

/* A set of tasks[0..n) (copied) with a counted owner. */
static tune_taskset set_of(const tune_model_task *tasks, int n) {
    tune_taskset s;
    memset(&s, 0, sizeof s);
    s.tasks = wpk_calloc((size_t)n, sizeof *s.tasks);
    memcpy(s.tasks, tasks, sizeof *tasks * (size_t)n);
    s.ntasks = n;
    s.nodes = 10;
    s.kernel_nodes = n;
    s.owner = &released;
    s.owner_free = owner_free;
    return s;
}

int main(void) {
    wpk_context *ctx = wpk_context_create();
    /* model a: a conv (with a Winograd alternative) and a dense; model b: a new conv, the same
       conv with its alternative, another dense */
    const tune_model_task a[] = {
        task(&conv, "conv:A", 2, 200, -1), task(&wino, "wino|conv:A", 2, 200, 0),
        task(&dense, "dense:X", 1, 50, -1)};
    const tune_model_task b[] = {
        task(&conv, "conv:B", 1, 100, -1), task(&conv, "conv:A", 3, 300, -1),
        task(&wino, "wino|conv:A", 3, 300, 1), task(&wino, "wino|conv:B", 1, 100, 0),
        task(&dense, "dense:Y", 1, 25, -1)};
    tune_taskset sets[2] = {set_of(a, 3), set_of(b, 5)};
    tune_taskset m;
    CHECK(tune_taskset_merge(ctx, sets, 2, &m) == WPK_OK);
    CHECK(sets[0].tasks == NULL && sets[1].tasks == NULL && released == 0);
    CHECK(m.ntasks == 6);
    CHECK(!strcmp(m.tasks[0].task.key, "conv:A") && m.tasks[0].count == 5 &&
          m.tasks[0].flops == 500 && m.tasks[0].alt_of == -1);
    CHECK(!strcmp(m.tasks[1].task.key, "wino|conv:A") && m.tasks[1].count == 5 &&
          m.tasks[1].alt_of == 0);
    CHECK(!strcmp(m.tasks[2].task.key, "dense:X") && m.tasks[2].alt_of == -1);
    CHECK(!strcmp(m.tasks[3].task.key, "conv:B") && m.tasks[3].alt_of == -1);
    /* b's alternative of its first task now follows that task's merged index */
    CHECK(!strcmp(m.tasks[4].task.key, "wino|conv:B") && m.tasks[4].alt_of == 3);
    CHECK(!strcmp(m.tasks[5].task.key, "dense:Y"));
    CHECK(m.total_flops == 500 + 50 + 100 + 25);
    CHECK(m.tasks[0].share > 0.7399 && m.tasks[0].share < 0.7408);
    CHECK(m.nodes == 20 && m.kernel_nodes == 8);
    tune_taskset_free(&m);
    CHECK(released == 2);
    wpk_context_free(ctx);
    CHECK_DONE();
}
