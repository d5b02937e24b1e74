/* test_task_gain.c -- the task scheduler's choices (src/tune/task_gain.c) on made-up
 * measurements: the next step goes to the task with the largest expected gain in the model's
 * latency (its node count x its time, its recent improvement, the cost of a step), a task
 * that is done is never picked, and the flattening rule stops a task whose best has stopped
 * improving and not one that still improves. Then a simulated job: tasks whose true speed-up
 * curves are known, scheduled step by step, where the budget must follow the latency share
 * and a flat task must stop early. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "tune/task_gain.h"

#define MAXN 4096

typedef struct fake {
    tune_curve_point curve[MAXN];
    tune_task_view v;
} fake;

/* n trials whose best falls from `from` to `to` seconds geometrically over the first `until`
 * trials, then stays; every 7th trial a failure. */
static void fill(fake *f, int n, double from, double to, int until, int count) {
    memset(f, 0, sizeof *f);
    for (int i = 0; i < n; i++) {
        double x = i < until ? (double)i / until : 1.0;
        double best = from * pow(to / from, x);
        f->curve[i] = i % 7 == 6 ? (tune_curve_point){TUNE_TIMEOUT, 0, 0, false}
                                 : (tune_curve_point){TUNE_OK, best * (1 + 0.2 * (i % 3)), 0,
                                                      false};
    }
    f->v = (tune_task_view){.curve = f->curve, .ncurve = n, .count = count, .flops = 1000000,
                            .best_s = n ? to : 0, .spent_s = n / 8.0, .steps = n / 8};
    if (n && until > n) f->v.best_s = from * pow(to / from, (double)(n - 1) / until);
}

static fake F[3];

static void test_pick(void) {
    tune_task_view v[3];
    /* the same progress, 3 nodes against 1: the one with three times the latency share */
    fill(&F[0], 64, 2e-3, 1e-3, 200, 1);
    fill(&F[1], 64, 2e-3, 1e-3, 200, 3);
    v[0] = F[0].v, v[1] = F[1].v;
    CHECK(tune_task_pick(v, 2, 8) == 1);
    CHECK(tune_task_gain(&v[1], 8) > 2.9 * tune_task_gain(&v[0], 8));
    /* a heavy task that stopped improving 40 trials ago against a lighter one still
       improving: the improving one */
    fill(&F[0], 64, 2e-3, 1e-3, 24, 2);
    fill(&F[1], 64, 2e-3, 1e-3, 64, 1);
    v[0] = F[0].v, v[1] = F[1].v;
    CHECK(tune_task_pick(v, 2, 8) == 1);
    /* ... unless its share of the latency is far larger */
    F[0].v.count = 400;
    v[0] = F[0].v;
    CHECK(tune_task_pick(v, 2, 8) == 0);
    /* a young task (no measurements yet) is optimistic: picked over an old flat one */
    fill(&F[0], 200, 2e-3, 1e-3, 24, 1);
    fill(&F[2], 0, 0, 0, 0, 1);
    F[2].v.flops = 2000000; /* 10 GFLOP/s assumed: 0.2 ms */
    v[0] = F[0].v, v[1] = F[2].v;
    CHECK(tune_task_pick(v, 2, 8) == 1);
    /* young tasks (their default measured, little else) by their share of the latency: the
       default's time x the nodes posing it */
    fill(&F[0], 1, 3e-3, 3e-3, 1, 1);
    fill(&F[1], 1, 1e-3, 1e-3, 1, 4);
    fill(&F[2], 1, 1e-3, 1e-3, 1, 2);
    v[0] = F[0].v, v[1] = F[1].v, v[2] = F[2].v;
    CHECK(tune_task_pick(v, 3, 8) == 1);
    v[1].done = true;
    CHECK(tune_task_pick(v, 3, 8) == 0);
    /* a costly step lowers the gain in proportion */
    fill(&F[0], 64, 2e-3, 1e-3, 200, 1);
    fill(&F[1], 64, 2e-3, 1e-3, 200, 1);
    F[1].v.spent_s *= 4;
    v[0] = F[0].v, v[1] = F[1].v;
    CHECK(tune_task_pick(v, 2, 8) == 0);
    CHECK(fabs(tune_task_gain(&v[0], 8) / tune_task_gain(&v[1], 8) - 4) < 1e-9);
    /* done tasks are never picked; all done: none */
    v[0].done = true;
    CHECK(tune_task_pick(v, 2, 8) == 1 && tune_task_gain(&v[0], 8) < 0);
    v[1].done = true;
    CHECK(tune_task_pick(v, 2, 8) == -1);
}

static void test_flat(void) {
    double g;
    /* best unchanged over the last 48 of 100 trials: flat, with a gain of 0 */
    fill(&F[0], 100, 2e-3, 1e-3, 40, 1);
    CHECK(tune_task_flat(F[0].curve, 100, 48, 0.01, &g) && fabs(g) < 1e-12);
    /* still improving 10% over the window: not flat, and the gain says how much */
    fill(&F[0], 100, 2e-3, 1e-3, 100, 1);
    CHECK(!tune_task_flat(F[0].curve, 100, 48, 0.01, &g) && g > 0.2);
    /* not more trials than the window: no verdict; window 0: never */
    fill(&F[0], 48, 2e-3, 2e-3, 1, 1);
    CHECK(!tune_task_flat(F[0].curve, 48, 48, 0.01, &g));
    CHECK(!tune_task_flat(F[0].curve, 48, 0, 0.01, &g));
    /* nothing succeeded before the window: no baseline, not flat */
    for (int i = 0; i < 60; i++) F[0].curve[i].status = TUNE_COMPILE_ERROR;
    F[0].curve[59] = (tune_curve_point){TUNE_OK, 1e-3, 0, false};
    CHECK(!tune_task_flat(F[0].curve, 60, 48, 0.01, &g));
    /* a gain just under the threshold: flat; just over: not */
    for (int i = 0; i < 60; i++) F[0].curve[i] = (tune_curve_point){TUNE_OK, 1e-3, 0, false};
    F[0].curve[55].median = 0.995e-3;
    CHECK(tune_task_flat(F[0].curve, 60, 48, 0.01, &g) && fabs(g - 0.005) < 1e-9);
    F[0].curve[55].median = 0.985e-3;
    CHECK(!tune_task_flat(F[0].curve, 60, 48, 0.01, &g));
}

/* A job on made-up tasks: each step measures a batch of 8, whose results follow the task's
 * true curve (its best approaching `floor` x its start at a rate of its own); the scheduler
 * picks by gain and stops a task by the flattening rule, as tune_run does. */
typedef struct sim_task {
    int count;
    double start_s, floor, rate; /* best after k trials: start x (floor + (1-floor) e^-rate k) */
} sim_task;

static void simulate(const sim_task *tasks, int n, int steps, int *trials, bool *flat) {
    static fake f[8];
    for (int i = 0; i < n; i++) {
        memset(&f[i], 0, sizeof f[i]);
        f[i].v = (tune_task_view){.curve = f[i].curve, .count = tasks[i].count,
                                  .flops = 1000000};
        flat[i] = false;
    }
    tune_task_view v[8];
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < n; i++) v[i] = f[i].v;
        int p = tune_task_pick(v, n, 8);
        if (p < 0) break;
        fake *t = &f[p];
        const sim_task *st = &tasks[p];
        for (int k = 0; k < 8 && t->v.ncurve < MAXN; k++) {
            int at = t->v.ncurve;
            double best = st->start_s * (st->floor + (1 - st->floor) * exp(-st->rate * at));
            /* every trial of the batch but one slower than the curve */
            double med = k == 0 ? best : best * (1.1 + 0.05 * k);
            t->curve[t->v.ncurve++] = (tune_curve_point){TUNE_OK, med, 0, false};
            if (t->v.best_s == 0 || med < t->v.best_s) t->v.best_s = med;
        }
        t->v.spent_s += 1.0;
        t->v.steps++;
        if (tune_task_flat(t->curve, t->v.ncurve, 48, 0.01, NULL)) t->v.done = flat[p] = true;
    }
    for (int i = 0; i < n; i++) trials[i] = f[i].v.ncurve;
}

static void test_simulated_job(void) {
    /* three workloads of one speed and progress, posed by 8, 2 and 1 nodes: the trials follow
       the latency share, the 8-node task getting the most */
    sim_task same[3] = {{8, 1e-3, 0.5, 0.02}, {2, 1e-3, 0.5, 0.02}, {1, 1e-3, 0.5, 0.02}};
    int trials[3];
    bool flat[3];
    simulate(same, 3, 60, trials, flat);
    printf("latency shares 8:2:1 -> trials %d, %d, %d\n", trials[0], trials[1], trials[2]);
    CHECK(trials[0] > trials[1] && trials[1] >= trials[2] && trials[0] >= 2 * trials[2]);
    /* a task whose gain flattens after a few trials stops early and the budget goes to the
       others, though it has the largest latency share */
    sim_task mixed[3] = {{8, 1e-3, 0.97, 0.5}, {2, 1e-3, 0.3, 0.003}, {1, 1e-3, 0.3, 0.003}};
    simulate(mixed, 3, 150, trials, flat);
    printf("a task flat after ~10 trials: stopped at %d trials (flat %d); the others %d, %d\n",
           trials[0], flat[0], trials[1], trials[2]);
    CHECK(flat[0] && trials[0] <= 80);
    CHECK(!flat[1] && trials[1] > trials[0]);
    CHECK(trials[0] + trials[1] + trials[2] == 150 * 8);
}

int main(void) {
    test_pick();
    test_flat();
    test_simulated_job();
    CHECK_DONE();
}
