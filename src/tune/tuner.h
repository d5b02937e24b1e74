/* tuner.h -- the tuning loop: for each task, resume from the records database, ask
 * the search strategy for configs, measure them (measure.h), store every result the moment it
 * is known, tell the strategy; and the task scheduler that spreads a time budget over the
 * tasks by expected gain. At the end of each task that measured anything, its default config
 * and its best few are re-measured alone, back to back, so the speed-up it reports is a ratio
 * from one run. */
#ifndef WPK_TUNE_TUNER_H
#define WPK_TUNE_TUNER_H

#include "tune/measure.h"
#include "tune/records.h"
#include "tune/tasks.h"

/* What the progress callback hears after each measured trial and when a task is done. */
typedef struct tune_progress {
    int task, ntasks;         /* the task's index in the set */
    const char *key;          /* its workload key */
    int64_t trials;           /* records stored for the task */
    int64_t target;           /* the per-task total asked for (0: none, time budget only) */
    int64_t measured;         /* of them, measured by this run */
    int64_t failed;           /* of those, not TUNE_OK */
    double best_gflops;       /* best recorded (0: none yet) */
    double speedup;           /* best over the default config (0: unknown) */
    double eta_s;             /* estimated time left for the whole job (< 0: unknown) */
    bool done;                /* the task's last report (after its re-measurement) */
    bool flattened;           /* stopped early: its best improved by flat_gain (< the option's)
                                 over its last flat_trials trials */
    double flat_gain;
    int flat_trials;
} tune_progress;

/* One config to re-measure: task index, its config, this process's measurer of the task. */
#define TUNE_REMEASURE_MAX 32
typedef struct tune_remeasure_item {
    int task;
    tune_config cfg;
    tune_measurer *local;
} tune_remeasure_item;

/* Where a task's candidates are built and measured. Without one (tune_options.runner NULL)
 * this process measures them with the task's measurer; a runner over several processes
 * (tune/fleet.h) measures some here through `local` and hands the others out. */
typedef struct tune_runner {
    /* Measure what propose gives for task index `task` of the job until it gives none and
     * every candidate handed out has a result; fn hears each result exactly once (a result
     * measured elsewhere names that machine: tune_measurement.target, .toolchain). local is
     * this process's measurer of the task. Errors as tune_measure_stream's. */
    wpk_status (*stream)(void *self, int task, tune_measurer *local, tune_propose_fn propose,
                         void *propose_user, tune_measure_fn fn, void *user);
    void *self;
    /* Optional, all three or none (then stream waits for every result and the tuner
     * re-measures finalists itself). With them stream returns once propose gives none and
     * `local` is idle: the results of candidates out elsewhere reach fn later, from inside a
     * later call of this runner, so the next task starts while the last one's tail runs. */
    /* Re-measure items[0..n) (n <= TUNE_REMEASURE_MAX) alone, `rounds` rounds in one process,
     * every other round in reverse order; items is copied. fn hears each item's result of each
     * round (i: its index in items), all together, then done(user); a process lost on the way
     * loses its partial results and the job is done again elsewhere. Returns at once. */
    wpk_status (*remeasure)(void *self, const tune_remeasure_item *items, int n,
                            int rounds, tune_measure_fn fn, void (*done)(void *user),
                            void *user);
    /* Waits until every candidate of task (< 0: of every task) handed out has its result
     * and, for task < 0, every re-measurement is done. */
    wpk_status (*settle)(void *self, int task);
} tune_runner;

typedef struct tune_options {
    const char *strategy;     /* "ga" (default), "rl", "anneal", "random", "grid", "model" */
    int64_t trials;           /* per task, counting records already stored; 0: no cap (then
                                 time_s must be set) */
    double time_s;            /* budget for the whole job, spread over tasks; 0: none */
    uint64_t seed;            /* strategies (per task: mixed with the workload key) and inputs */
    int batch;                /* configs measured per batch (default 8) */
    int top;                  /* best configs re-measured alone at the end (default 3) */
    /* A task stops early once its best median improved by less than flat_gain (relative,
       default 0.01) over its last flat_trials trials (default 48; 0: never), with a budget of
       trials or of time (tune_task_flat) */
    int flat_trials;
    double flat_gain;
    int parallel;             /* build workers; 0: automatic (tune_parallelism) */
    const char *start;        /* a whole config (text) that takes the template default's place
                                 for every task: measured first, the strategies' start, the
                                 finals' control; NULL: the default. For one task's space (a
                                 benchmark's search from a poor start) */
    tune_measure_params measure;  /* timing, timeouts, caps (.parallel is the tuner's) */
    const tune_runner *runner;    /* borrowed; NULL: every candidate measured here */
    /* The fingerprint the records are keyed by and the toolchain they name (borrowed; NULL:
       this CPU's, target_fingerprint, and the C compiler's): a GPU's for measure.device CUDA */
    const char *target;
    const char *toolchain;
    /* "rl": where its policy is loaded from and saved to after the run (rl_policy.h); NULL:
       next to the records database ("<db>.rl-policy") */
    const char *rl_policy;
    /* progress (called from the tuning thread); NULL: none */
    void (*progress)(void *user, const tune_progress *p);
    void *progress_user;
} tune_options;

tune_options tune_default_options(void);

/* One trial of a task in record order: what the report's curves are made of. */
typedef struct tune_curve_point {
    tune_status status;
    double median;            /* seconds; 0 unless TUNE_OK */
    double at_s;              /* seconds into this run when it was stored; -1: stored before */
    bool is_default;          /* the template's default config (measured first, not proposed) */
} tune_curve_point;

typedef struct tune_task_summary {
    const char *key;          /* borrowed from the task */
    const char *template_name;
    int count;                /* nodes posing it */
    int64_t flops;            /* of one node */
    double share;             /* of the set's FLOPs */
    int64_t trials;           /* records stored after the run */
    int64_t measured;         /* by this run */
    int64_t by_status[TUNE_INVALID + 1]; /* this run's measurements per status */
    bool converged;           /* the strategy had nothing more to propose */
    bool flattened;           /* stopped early by the flattening rule (tune_options.flat_*) */
    double flat_gain;         /* its best's relative improvement over that window */
    bool remeasured;          /* default_s and best_s are from the final re-measurement alone */
    double default_s;         /* median time of the default config (0: unknown) */
    double best_s;            /* of the best config (0: none succeeded) */
    char best_config[512];
    char skipped[512];        /* why the task could not be tuned ("" when it was) */
    tune_curve_point *curve;  /* every trial in record order (owned) */
    int ncurve;
} tune_task_summary;

typedef struct tune_summary {
    char strategy[32];
    tune_task_summary *tasks; /* in the set's order */
    int ntasks;
    double seconds;           /* wall time of the whole job */
    int64_t measured;
    tune_parallelism parallel; /* the final degree of parallelism */
    int64_t constant_bytes;   /* the model's weights: its nodes' constant inputs, summed over
                                 the primary tasks' nodes */
    bool cold;                /* they outgrow measure.cold_bytes (the last-level cache), so
                                 every candidate was timed with its constants cold */
} tune_summary;

/* Tune tasks[0..ntasks) (borrowed; the nodes must outlive the call) into db: the records of
 * (this machine's fingerprint, each task's key). Per task: stored records are read and told to
 * the strategy (never measured again); the default config is measured first when it is not
 * stored; then batches of the strategy's proposals until the task holds opt->trials records,
 * the strategy converges, or (with time_s) the scheduler stops giving it time. Each result is
 * a committed record as soon as it is final (at once when timed alone, the default; at the end
 * of its window when the measurer times beside builds), so a kill loses at most what was in
 * flight and never stores a config twice. With time_s the tasks share the budget by expected
 * gain (task_gain.h), after one round that measures every task's default: the time a task
 * takes in the model (count x best time, i.e. its FLOP share over its speed) times the
 * improvement its recent trials suggest per second of tuning. With either budget a task stops
 * once its gain flattens (opt->flat_trials, opt->flat_gain). At the end of a
 * workload (its primary task and its alternatives), the default and best few configs of each
 * are re-measured alone in shared rounds and stored as finals. When the tasks' weights (their
 * constant inputs times their counts) outgrow opt->measure.cold_bytes, every candidate is
 * timed with its constants cold (summary: constant_bytes, cold). A task that cannot be
 * measured (no reference kernel, its reference fails) is skipped with the reason in its
 * summary.
 * The calling process forks the measurer's workers: it should not have run OpenMP parallel
 * regions with more than one thread before (see measure.h); `wpk tune` runs with one.
 * Errors: WPK_ERR_INVALID_ARG for options (unknown strategy, no budget), a records database
 * error (the job stops at once), WPK_ERR_IO when no process can be made, WPK_ERR_NOMEM.
 * *out is the caller's (tune_summary_free), filled as far as the job got, also on failure. */
wpk_status tune_run(wpk_context *ctx, tune_db *db, const tune_model_task *tasks, int ntasks,
                    const tune_options *opt, tune_summary *out);
void tune_summary_free(tune_summary *s);

/* The constant inputs of the nodes tasks[0..ntasks) stand for (each primary task's times its
 * node count), which tune_run compares with measure.cold_bytes. */
int64_t tune_constant_bytes(const tune_model_task *tasks, int ntasks);

#endif
