/* task_gain.c -- the scheduler's expected gain per task, its pick, and the flattening rule
 * (see task_gain.h). */
#include "tune/task_gain.h"

/* The best successful median among curve[0..n) (0: none). */
static double best_of(const tune_curve_point *curve, int n) {
    double best = 0;
    for (int i = 0; i < n; i++)
        if (curve[i].status == TUNE_OK && curve[i].median > 0 &&
            (best == 0 || curve[i].median < best))
            best = curve[i].median;
    return best;
}

double tune_task_gain(const tune_task_view *t, int batch) {
    if (t->done) return -1;
    if (batch < 1) batch = 1;
    /* unmeasured: 10 GFLOP/s */
    const double model_s = t->best_s > 0 ? t->count * t->best_s
                                         : (double)t->count * (double)t->flops / 10e9;
    const int n = t->ncurve;
    double room;
    if (n < TUNE_YOUNG_TRIALS) {
        room = 0.5;
    } else {
        /* best-so-far now against w trials ago */
        int w = n / 4 > 2 * batch ? n / 4 : 2 * batch;
        if (w > n - 1) w = n - 1;
        double then = best_of(t->curve, n - w), now = best_of(t->curve, n);
        double rate = then > 0 && now > 0 ? (then - now) / then / w : 0;
        double floor = 0.1 / n; /* never give up on a task altogether */
        room = (rate > floor ? rate : floor) * batch;
    }
    double cost = t->steps > 0 ? t->spent_s / t->steps : 1.0;
    return model_s * room / (cost > 1e-3 ? cost : 1e-3);
}

int tune_task_pick(const tune_task_view *tasks, int n, int batch) {
    int best = -1;
    double g = 0;
    for (int i = 0; i < n; i++) {
        double e = tune_task_gain(&tasks[i], batch);
        if (e >= 0 && (best < 0 || e > g)) best = i, g = e;
    }
    return best;
}

bool tune_task_flat(const tune_curve_point *curve, int n, int window, double min_gain,
                    double *gain) {
    if (gain) *gain = 0;
    if (window <= 0 || n <= window) return false;
    double then = best_of(curve, n - window), now = best_of(curve, n);
    if (then <= 0) return false; /* nothing succeeded before the window: no baseline yet */
    double g = (then - now) / then;
    if (gain) *gain = g;
    return g < min_gain;
}
