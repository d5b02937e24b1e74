/* task_gain.h -- the task scheduler's arithmetic, apart from any measuring: the expected gain
 * in the model's latency from one more step of a task (the Ansor-style gradient the tuner's
 * time budget follows), which task gets the next step, and the rule that stops a task whose
 * gain has flattened. Pure functions over a task's trial curve, so tests can drive them with
 * made-up measurements. */
#ifndef WPK_TUNE_TASK_GAIN_H
#define WPK_TUNE_TASK_GAIN_H

#include "tune/tuner.h"

/* Trials a task gets before its own progress says how much room it has. */
#define TUNE_YOUNG_TRIALS 16

/* What the scheduler knows of one task. */
typedef struct tune_task_view {
    const tune_curve_point *curve; /* its trials in record order (borrowed) */
    int ncurve;
    int count;        /* nodes of the model(s) posing the workload */
    int64_t flops;    /* of one node */
    double best_s;    /* its best median so far (0: none yet) */
    double spent_s;   /* tuning time it took in this run */
    int steps;        /* steps it had (spent_s / steps: the cost of one) */
    bool done;        /* finished (its cap, converged, flattened, or skipped) */
} tune_task_view;

/* Expected model time saved per second of tuning if t gets the next step of `batch` trials:
 * the time t takes in the model (count x best median: its share of the latency) times the
 * relative improvement per trial its last trials show (a window of max(n/4, 2 batches); 1/2
 * per batch while it is young, never under 1/(10n) per trial), times batch, over the time a
 * step of it costs. -1 for a task that is done. */
double tune_task_gain(const tune_task_view *t, int batch);

/* The index in tasks[0..n) with the largest gain (the first of equals); -1 when all are done. */
int tune_task_pick(const tune_task_view *tasks, int n, int batch);

/* The rule that stops a task: once it holds more than `window` trials, its best median improved
 * by less than `min_gain` (relative) over its last `window` trials. *gain (may be NULL) gets
 * that improvement (0 when nothing succeeded in the window's start). window <= 0: never. */
bool tune_task_flat(const tune_curve_point *curve, int n, int window, double min_gain,
                    double *gain);

#endif
