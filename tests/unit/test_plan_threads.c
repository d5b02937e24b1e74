/* test_plan_threads.c -- a plan step's own OpenMP team size: written after the steps only when a
 * step has one (a plan without reads byte for byte as before), read back, damage in it refused;
 * and the cpu backend running each step on its team, never above its threads, restoring them
 * after the run. */
#include <omp.h>
#include <string.h>

#include "check.h"
#include "base/bytes.h"
#include "runtime/backend.h"
#include "runtime/plan.h"
#include "runtime/runner.h"

static int seen[4];

static wpk_status probe_prepare(const rt_runner *self, wpk_context *ctx, const rt_step_env *env,
                                int step, void **state) {
    (void)self, (void)ctx, (void)env;
    *state = &seen[step];
    return WPK_OK;
}
static wpk_status probe_run(void *state, wpk_context *ctx, void *const *argv) {
    (void)ctx, (void)argv;
    *(int *)state = omp_get_max_threads();
    return WPK_OK;
}
static void probe_release(void *state) { (void)state; }
static const rt_runner probe = {"threads_probe", probe_prepare, probe_run, probe_release, NULL};

static void plan_of(rt_plan *p, rt_step *steps, int n) {
    memset(p, 0, sizeof *p);
    p->provider = p->records = "";
    p->threads = 4;
    memset(steps, 0, sizeof *steps * (size_t)n);
    for (int k = 0; k < n; k++)
        steps[k] = (rt_step){.runner = "threads_probe", .module = -1, .symbol = "",
                             .node = "n", .op = "Relu", .impl = "", .source = ""};
    p->nsteps = n;
    p->steps = steps;
}

static wpk_status read_back(wpk_context *ctx, const byte_writer *w, size_t len, rt_plan *out) {
    byte_reader r = {w->data, w->data + len, false};
    return rt_plan_read(ctx, "plan", &r, out);
}

int main(void) {
    wpk_context *ctx = wpk_context_create();
    rt_step steps[4];
    rt_plan p, q;
    plan_of(&p, steps, 4);
    byte_writer plain = {0}, with = {0};
    CHECK(rt_plan_write(ctx, &p, &plain) == WPK_OK);
    steps[1].threads = 1;
    steps[3].threads = 9;
    CHECK(rt_plan_write(ctx, &p, &with) == WPK_OK);
    CHECK(with.len == plain.len + 4 * sizeof(uint32_t));
    CHECK(read_back(ctx, &plain, plain.len, &q) == WPK_OK);
    for (int k = 0; k < 4; k++) CHECK(q.steps[k].threads == 0);
    rt_plan_free(&q);
    CHECK(read_back(ctx, &with, with.len, &q) == WPK_OK);
    CHECK(q.steps[0].threads == 0 && q.steps[1].threads == 1 && q.steps[3].threads == 9);
    rt_plan_free(&q);
    /* a cut trailer, and a team size no machine has */
    CHECK_ERR(ctx, read_back(ctx, &with, with.len - 2, &q), WPK_ERR_PARSE, "a step's threads");
    rt_plan_free(&q);
    memset(with.data + with.len - 4, 0xff, 4);
    CHECK_ERR(ctx, read_back(ctx, &with, with.len, &q), WPK_ERR_PARSE, "a step's threads");
    rt_plan_free(&q);
    bw_free(&plain);
    bw_free(&with);

    /* the backend: step teams of 1, the backend's (0), and more than the backend has */
    CHECK(rt_runner_register(&probe) == WPK_OK);
    rt_backend be;
    rt_cpu_backend_init(&be, 3);
    rt_exec_step run[4] = {{0}};
    for (int k = 0; k < 4; k++) {
        run[k].runner = &probe;
        run[k].state = &seen[k];
        run[k].node = "n";
    }
    run[1].threads = 1;
    run[2].threads = 2;
    run[3].threads = 9;
    CHECK(be.iface->run_steps(&be, ctx, run, 4, NULL) == WPK_OK);
    CHECK(seen[0] == 3 && seen[1] == 1 && seen[2] == 2 && seen[3] == 3);
    CHECK(omp_get_max_threads() == 3);
    wpk_context_free(ctx);
    CHECK_DONE();
}
