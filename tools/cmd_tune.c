/* cmd_tune.c -- `wpk tune`: tune the kernels of one or more models on this machine, or on a
 * fleet of MPI processes (--mpi: src/tune/fleet.h), into the records database
 * (src/tune/tuner.h), with a progress line per task and a summary table at the end; also
 * imports and exports records as JSON lines. Exit codes as wpk.c's: 0 ok, 1 user error, 2
 * internal error. */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/context.h"
#include "tune/report.h"
#ifdef WPK_HAVE_MPI
#include "tune/fleet.h"
#endif
#include "base/target_fingerprint.h"
#include "api/tune_tasks.h"
#include "codegen/cuda/cg_cuda.h"
#include "runtime/cuda/cuda_rt.h"
#include "tune/tuner.h"
#include "wpk.h"

int cmd_tune(int argc, char **argv);

static const char USAGE[] =
    "usage: wpk tune MODEL... [--strategy ga|rl|anneal|random|grid|model] [--trials N | --time T]\n"
    "                [--db FILE] [--parallel auto|N] [--seed S] [-O LEVEL] [--batch N]\n"
    "                [--report DIR] [--timeout SECONDS] [--clock auto|wall|cpu]\n"
    "                [--import FILE] [--export FILE] [--no-alternatives] [-v]\n"
    "                [--mpi [--lease SECONDS]] [--target cpu|cuda]\n"
    "  MODEL...       one or more models: a workload several pose is one task, tuned once\n"
    "  --trials N     records per task, counting those already stored (default 64 without\n"
    "                 --time); re-running continues where it stopped and a finished job\n"
    "                 measures nothing\n"
    "  --time T       time budget for the whole model (90, 30s, 10m, 1h), spread over the\n"
    "                 tasks by expected gain\n"
    "  --flat N       stop a task once its best improved by less than 1% over its last N\n"
    "                 trials (default 48; 0: never), with --trials or --time\n"
    "  --db FILE      records database (default: $WPK_CACHE_DIR, $XDG_CACHE_HOME/wpk or\n"
    "                 ~/.cache/wpk, file records.db)\n"
    "  --parallel     build workers (auto: chosen and adjusted while tuning; measurements run\n"
    "                 one at a time unless timings stay accurate alongside builds)\n"
    "  -O LEVEL       graph optimization the tasks come from (default 3, as `wpk run`)\n"
    "  --report DIR   DIR/curves_<strategy>.csv (best-so-far GFLOP/s vs trials per task) and\n"
    "                 DIR/curves.png plotting every strategy's CSV in DIR\n"
    "  --timeout S    kill a kernel's measurement after S seconds (default 30)\n"
    "  --clock        what a sample times: wall-clock time, or the CPU time of the kernel's\n"
    "                 busiest thread (with OMP_WAIT_POLICY=passive), which other processes on a\n"
    "                 busy machine do not disturb; auto (default): cpu when the load average\n"
    "                 is at least half the cores, else wall\n"
    "  --import/--export FILE  records as JSON lines (MODEL may then be left out)\n"
    "  --no-alternatives  tune only each workload's primary template; by default every other\n"
    "                 implementation of it is measured too (Winograd, oneDNN, OpenBLAS), so\n"
    "                 that `wpk compile` and `wpk run` choose the fastest per node\n"
    "  --target       cpu (default): this machine's CPU; cuda: its GPU (device 0): the CUDA\n"
    "                 templates' kernels built by NVRTC in the build workers, each timed with\n"
    "                 CUDA events in a child process of its own, records keyed by the GPU\n"
    "                 (name, SM, driver, NVRTC), which `wpk compile|run --target cuda` read\n"
    "  --mpi          tune on the processes of `mpirun -n N wpk tune ... --mpi`: rank 0 runs\n"
    "                 the strategies and writes the database, every rank (0 included) builds\n"
    "                 and measures candidates; a rank whose CPU differs from rank 0's is left\n"
    "                 out. With Open MPI, `--mca orte_abort_on_non_zero_status 0` keeps the\n"
    "                 job going when a rank dies\n"
    "  --lease S      a rank holding candidates that sends nothing (results or its heartbeat)\n"
    "                 for S seconds is left out and its candidates handed out again\n"
    "                 (default 60)\n";

static int usage_fail(const char *fmt, const char *arg) {
    fprintf(stderr, "wpk: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(run 'wpk tune --help' for usage)\n");
    return 1;
}

static int fail_status(wpk_status st, wpk_context *ctx) {
    const char *msg = wpk_context_error(ctx);
    fprintf(stderr, "wpk: error: %s\n", msg && *msg ? msg : wpk_status_name(st));
    return st == WPK_ERR_NOMEM || st == WPK_ERR_INTERNAL ? 2 : 1;
}

static void log_stderr(void *user, wpk_log_level level, const char *msg) {
    (void)user;
    fprintf(stderr, "%s%s\n", level == WPK_LOG_ERROR   ? "wpk: error: "
                              : level == WPK_LOG_WARN ? "wpk: warning: "
                                                      : "",
            msg);
}

/* "90", "30s", "10m", "1.5h" -> seconds; false when malformed. */
static bool parse_time(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v > 0) || !isfinite(v)) return false;
    if (!strcmp(end, "") || !strcmp(end, "s")) *out = v;
    else if (!strcmp(end, "m")) *out = v * 60;
    else if (!strcmp(end, "h")) *out = v * 3600;
    else return false;
    return true;
}

static bool parse_long(const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static void duration(double s, char *buf, size_t cap) {
    if (s < 0) snprintf(buf, cap, "?");
    else if (s < 60) snprintf(buf, cap, "%.0fs", s);
    else if (s < 3600) snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
}

/* Other processes keep the cores busy: the 1-minute load average is at least half of them. */
static bool machine_busy(void) {
    double load = 0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &load) != 1) load = 0;
        fclose(f);
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return load >= 0.5 * (double)(cores > 0 ? cores : 1);
}

/* ---- progress on a terminal ---- */

typedef struct progress {
    bool tty;
    int last_task;
} progress;

static void on_progress(void *user, const tune_progress *p) {
    progress *pr = user;
    if (!pr->tty) return;
    if (pr->last_task >= 0 && pr->last_task != p->task && !p->done) fputs("\n", stdout);
    pr->last_task = p->task;
    char eta[32], trials[48], speed[32] = "";
    duration(p->eta_s, eta, sizeof eta);
    if (p->target > 0) snprintf(trials, sizeof trials, "%lld/%lld", (long long)p->trials, (long long)p->target);
    else snprintf(trials, sizeof trials, "%lld", (long long)p->trials);
    if (p->speedup > 0) snprintf(speed, sizeof speed, " (x%.2f vs default)", p->speedup);
    printf("\r\033[K[%d/%d] %.48s%s  trials %s  best %.1f GFLOP/s%s", p->task + 1, p->ntasks,
           p->key, strlen(p->key) > 48 ? "..." : "", trials, p->best_gflops, speed);
    if (p->failed) printf("  %lld failed", (long long)p->failed);
    if (p->flattened)
        printf("  flat: best %+.1f%% in its last %d trials (< 1%%), stopped", 100 * p->flat_gain,
               p->flat_trials);
    printf("  ETA %s", eta);
    if (p->done) {
        fputs("\n", stdout);
        pr->last_task = -1;
    }
    fflush(stdout);
}

/* ---- progress of a fleet: lines, since mpirun's output is not a terminal ---- */

#ifdef WPK_HAVE_MPI
typedef struct fleet_progress {
    tune_fleet *fleet;
    int done;                 /* tasks finished */
    double last;              /* when the last line was printed */
} fleet_progress;

#define FLEET_LINE_S 10.0

static void on_fleet_progress(void *user, const tune_progress *p) {
    fleet_progress *fp = user;
    if (p->done) fp->done++;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double now = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    if (!p->done && now - fp->last < FLEET_LINE_S) return;
    fp->last = now;
    char eta[32], line[512];
    duration(p->eta_s, eta, sizeof eta);
    tune_fleet_describe(fp->fleet, line, sizeof line);
    printf("fleet: %d/%d tasks done, %s, ETA %s\n", fp->done, p->ntasks, line, eta);
    fflush(stdout);
}
#endif

/* ---- the summary ---- */

static void print_summary(const tune_summary *s, const tune_taskset *ts, const char *clock,
                          const tune_options *o) {
    char took[32];
    duration(s->seconds, took, sizeof took);
    printf("\nstrategy %s: %d task%s, %lld trial%s measured in %s (build workers %d, "
           "measurements %s; timed by %s)\n", s->strategy, s->ntasks, s->ntasks == 1 ? "" : "s",
           (long long)s->measured, s->measured == 1 ? "" : "s", took, s->parallel.builds,
           s->parallel.level == 0 ? "alone" : "alongside builds", clock);
    if (ts)
        printf("model: %d nodes, %d on %d tuned kernel task%s, %.3f GFLOPs in them\n", ts->nodes,
               ts->kernel_nodes, ts->ntasks, ts->ntasks == 1 ? "" : "s",
               (double)ts->total_flops * 1e-9);
    printf("weights: %.2f MB in the tuned tasks' nodes, %s\n",
           (double)s->constant_bytes / (1 << 20),
           s->cold ? "more than the cache (last level; a GPU's L2): timed cold (flushed before "
                     "each call)"
                   : "timed warm");
    printf("\n%4s %5s %6s %7s %10s %10s %8s %8s  %-10s %s\n", "task", "nodes", "FLOPs", "trials",
           "default", "best", "oneDNN", "speed-up", "fastest", "workload");
    printf("%4s %5s %6s %7s %10s %10s %8s %8s\n", "", "", "", "", "GFLOP/s", "GFLOP/s", "GFLOP/s",
           "");
    double geo = 0;
    int ngeo = 0;
    for (int i = 0; i < s->ntasks; i++) {
        const tune_task_summary *t = &s->tasks[i];
        bool alt = ts && i < ts->ntasks && ts->tasks[i].alt_of >= 0;
        char def[32] = "-", best[32] = "-", up[32] = "-", dnnl[32] = "-", fastest[32] = "-";
        if (t->default_s > 0) snprintf(def, sizeof def, "%.1f", (double)t->flops / t->default_s * 1e-9);
        if (t->best_s > 0) snprintf(best, sizeof best, "%.1f", (double)t->flops / t->best_s * 1e-9);
        if (!alt && t->default_s > 0 && t->best_s > 0) {
            snprintf(up, sizeof up, "%.2fx%s", t->default_s / t->best_s, t->remeasured ? "" : "*");
            geo += log(t->default_s / t->best_s);
            ngeo++;
        }
        if (!alt && ts) {
            /* the implementations of this workload: oneDNN's best, and which one is fastest */
            double fast = t->best_s;
            snprintf(fastest, sizeof fastest, "%s", t->best_s > 0 ? t->template_name : "-");
            for (int k = i + 1; k < s->ntasks && k < ts->ntasks && ts->tasks[k].alt_of == i; k++) {
                const tune_task_summary *a = &s->tasks[k];
                if (a->best_s <= 0) continue;
                if (!strcmp(a->template_name, "onednn"))
                    snprintf(dnnl, sizeof dnnl, "%.1f", (double)a->flops / a->best_s * 1e-9);
                if (fast <= 0 || a->best_s < fast) {
                    fast = a->best_s;
                    snprintf(fastest, sizeof fastest, "%s", a->template_name);
                }
            }
        }
        char num[16];
        if (alt) snprintf(num, sizeof num, "  +");
        else snprintf(num, sizeof num, "%d", i);
        printf("%4s %5d %5.1f%% %7lld %10s %10s %8s %8s  %-10s %s\n", num, t->count,
               100 * t->share, (long long)t->trials, def, best, dnnl, up, alt ? "" : fastest,
               t->key);
    }
    if (ngeo) printf("geometric mean speed-up over the default configs: %.2fx\n", exp(geo / ngeo));
    printf("(default and best re-measured alone at the end of each workload that measured "
           "anything, its implementations in the same rounds; * = from stored records; + = "
           "another implementation of the workload above; fastest: the one `wpk compile` "
           "picks)\n");
    bool any = false;
    for (int i = 0; i < s->ntasks; i++) {
        const tune_task_summary *t = &s->tasks[i];
        int64_t bad = t->measured - t->by_status[TUNE_OK];
        if (!t->best_config[0] && !t->skipped[0] && !bad) continue;
        if (!any) printf("\n");
        any = true;
        if (t->skipped[0]) {
            printf("task %d: not tuned: %s\n", i, t->skipped);
            continue;
        }
        printf("task %d: %s%s", i, t->best_config[0] ? "best " : "", t->best_config);
        if (bad)
            printf("%sfailed %lld (compile %lld, timeout %lld, crash %lld, wrong result %lld)",
                   t->best_config[0] ? "; " : "", (long long)bad,
                   (long long)t->by_status[TUNE_COMPILE_ERROR], (long long)t->by_status[TUNE_TIMEOUT],
                   (long long)t->by_status[TUNE_CRASH], (long long)t->by_status[TUNE_WRONG_RESULT]);
        if (t->converged) printf("%sthe strategy converged", t->best_config[0] || bad ? "; " : "");
        if (t->flattened)
            printf("; stopped early: its best improved %.1f%% over its last %d trials (< %.0f%%)",
                   100 * t->flat_gain, o->flat_trials, 100 * o->flat_gain);
        printf("\n");
    }
}

/* The tasks of models[0..n) as one set (a workload several pose is one task). */
static wpk_status load_tasks(wpk_context *ctx, const char *const *models, int n, int opt_level,
                             bool alternatives, bool cuda, wpk_model **ms, tune_taskset *out) {
    tune_taskset sets[16];
    memset(sets, 0, sizeof sets);
    wpk_status st = WPK_OK;
    int k = 0;
    for (; st == WPK_OK && k < n; k++) {
        st = wpk_model_load(ctx, models[k], &ms[k]);
        if (st == WPK_OK)
            st = cuda ? api_tune_tasks_extract_cuda(ctx, ms[k], opt_level, &sets[k])
                      : api_tune_tasks_extract(ctx, ms[k], opt_level, alternatives, &sets[k]);
        if (st) wpk_error_prefix(ctx, "%s", models[k]);
    }
    if (st == WPK_OK && n == 1) {
        *out = sets[0];
        return WPK_OK;
    }
    if (st == WPK_OK) return tune_taskset_merge(ctx, sets, n, out);
    for (int i = 0; i < k; i++) tune_taskset_free(&sets[i]);
    return st;
}

int cmd_tune(int argc, char **argv) {
    tune_options o = tune_default_options();
    const char *models[16], *db_path = NULL, *report = NULL, *import = NULL, *export = NULL;
    long long opt_level = wpk_optimize_default_params().level;
    int nmodels = 0;
    const char *model = NULL;
    bool verbose = false, trials_given = false, alternatives = true, mpi = false;
    bool lease_given = false, cuda = false;
    double lease_s = 60;
    const char *clock = "auto";
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(USAGE, stdout);
            return 0;
        } else if (!strcmp(a, "--strategy")) {
            if (!val) return usage_fail("%s needs a name", a);
            o.strategy = argv[++i];
        } else if (!strcmp(a, "--trials")) {
            if (!val || !parse_long(val, 1, 100000000, &n))
                return usage_fail("--trials needs a positive number, not '%s'", val ? val : "");
            o.trials = n, trials_given = true, i++;
        } else if (!strcmp(a, "--time")) {
            if (!val || !parse_time(val, &o.time_s))
                return usage_fail("--time needs a duration such as 90, 30s, 10m or 1h, not '%s'",
                                  val ? val : "");
            i++;
        } else if (!strcmp(a, "--db")) {
            if (!val) return usage_fail("%s needs a file", a);
            db_path = argv[++i];
        } else if (!strcmp(a, "--parallel")) {
            if (val && !strcmp(val, "auto")) o.parallel = 0;
            else if (val && parse_long(val, 1, 256, &n)) o.parallel = (int)n;
            else return usage_fail("--parallel needs 'auto' or a number from 1 to 256, not '%s'",
                                   val ? val : "");
            i++;
        } else if (!strcmp(a, "--seed")) {
            if (!val || !parse_long(val, 0, INT64_MAX, &n))
                return usage_fail("--seed needs a non-negative number, not '%s'", val ? val : "");
            o.seed = (uint64_t)n, i++;
        } else if (!strcmp(a, "--flat")) {
            if (!val || !parse_long(val, 0, 1000000, &n))
                return usage_fail("--flat needs a number of trials (0: never stop early), not "
                                  "'%s'", val ? val : "");
            o.flat_trials = (int)n, i++;
        } else if (!strcmp(a, "--batch")) {
            if (!val || !parse_long(val, 1, TUNE_MAX_BATCH, &n))
                return usage_fail("--batch needs a number from 1 to 64, not '%s'", val ? val : "");
            o.batch = (int)n, i++;
        } else if (!strcmp(a, "--timeout")) {
            double t;
            if (!val || !parse_time(val, &t))
                return usage_fail("--timeout needs a number of seconds, not '%s'", val ? val : "");
            o.measure.run_timeout_s = t, i++;
        } else if (!strcmp(a, "--clock")) {
            if (!val || (strcmp(val, "auto") && strcmp(val, "wall") && strcmp(val, "cpu")))
                return usage_fail("--clock needs auto, wall or cpu, not '%s'", val ? val : "");
            clock = argv[++i];
        } else if (!strcmp(a, "--report")) {
            if (!val) return usage_fail("%s needs a directory", a);
            report = argv[++i];
        } else if (!strcmp(a, "--import")) {
            if (!val) return usage_fail("%s needs a file", a);
            import = argv[++i];
        } else if (!strcmp(a, "--export")) {
            if (!val) return usage_fail("%s needs a file", a);
            export = argv[++i];
        } else if (!strncmp(a, "-O", 2)) {
            const char *lv = a[2] ? a + 2 : val;
            if (!lv || !parse_long(lv, 0, 3, &opt_level))
                return usage_fail("%s needs an optimization level from 0 to 3", a);
            if (!a[2]) i++;
        } else if (!strcmp(a, "-v")) {
            verbose = true;
        } else if (!strcmp(a, "--no-alternatives")) {
            alternatives = false;
        } else if (!strcmp(a, "--target")) {
            if (!val || (strcmp(val, "cpu") && strcmp(val, "cuda")))
                return usage_fail("--target needs cpu or cuda, not '%s'", val ? val : "");
            cuda = !strcmp(val, "cuda"), i++;
        } else if (!strcmp(a, "--mpi")) {
            mpi = true;
        } else if (!strcmp(a, "--lease")) {
            if (!val || !parse_time(val, &lease_s))
                return usage_fail("--lease needs a number of seconds, not '%s'", val ? val : "");
            lease_given = true, i++;
        } else if (a[0] == '-') {
            return usage_fail("unknown option '%s' for 'tune'", a);
        } else if (nmodels < (int)(sizeof models / sizeof models[0])) {
            models[nmodels++] = model = a;
        } else {
            return usage_fail("too many models: '%s'", a);
        }
    }
#ifndef WPK_HAVE_MPI
    if (mpi) return usage_fail("%s", "--mpi: this wpk was built without MPI (install "
                               "libopenmpi-dev and build again)");
    (void)lease_s;
#endif
    if (mpi && !model) return usage_fail("%s", "--mpi needs a model to tune");
    if (!mpi && lease_given) return usage_fail("%s", "--lease is for --mpi");
    if (!model && !import && !export) return usage_fail("%s", "'tune' needs a model file");
    if (cuda && mpi) return usage_fail("%s", "--mpi tunes the cpu target only");
    if (cuda && !model) return usage_fail("%s", "--target cuda needs a model to tune");
    /* kernels on the GPU are timed by its events: the host's clock is not what is measured */
    if (cuda) clock = "wall";
    if (o.time_s <= 0 && !trials_given) o.trials = 64;

    /* the clock: decided once (a re-executed process keeps the decision) */
    const char *decided = getenv("WPK_TUNE_CLOCK");
    if (decided && !strcmp(clock, "auto")) clock = decided;
    if (!strcmp(clock, "auto")) clock = machine_busy() ? "cpu" : "wall";
    o.measure.clock = !strcmp(clock, "cpu") ? TUNE_CLOCK_CPU : TUNE_CLOCK_WALL;
    if (o.measure.clock == TUNE_CLOCK_CPU && !getenv("OMP_WAIT_POLICY")) {
        /* waiting OpenMP threads must sleep, or CPU time counts their spinning; GNU OpenMP
           reads the policy when it loads: start again with it set */
        setenv("OMP_WAIT_POLICY", "passive", 1);
        setenv("WPK_TUNE_CLOCK", "cpu", 1);
        fflush(NULL);
        execv("/proc/self/exe", argv);
    }
    /* GNU OpenMP is not fork-safe: the tuner forks its workers, so this process runs no
       parallel region of its own (its children set their own thread counts) */
    omp_set_num_threads(1);
    wpk_context *ctx = wpk_context_create();
    if (!ctx) return fail_status(WPK_ERR_NOMEM, NULL);
    wpk_context_set_log(ctx, log_stderr, NULL, verbose ? WPK_LOG_DEBUG : WPK_LOG_WARN);
    tune_db *db = NULL;
    wpk_model *ms[sizeof models / sizeof models[0]] = {0};
    tune_taskset ts = {0};
    tune_summary sum = {0};
    int rc = 0;
    wpk_status st = WPK_OK;
#ifdef WPK_HAVE_MPI
    tune_fleet *fleet = NULL;
    bool fleet_open = false;
    if (mpi) {
        st = tune_fleet_join(ctx, &argc, &argv, lease_s, &fleet);
        if (st) return fail_status(st, ctx);
        if (tune_fleet_rank(fleet) != 0) {
            bool refused = false;
            st = load_tasks(ctx, models, nmodels, (int)opt_level, alternatives, false, ms,
                            &ts);
            /* rank 0 waits for the hello of a rank that failed before it could say it, and
               cannot go on without a rank whose link to it broke */
            bool stuck = st != WPK_OK;
            if (st == WPK_OK) st = tune_fleet_serve(fleet, ts.tasks, ts.ntasks, &o, &refused);
            stuck = stuck || st == WPK_ERR_IO;
            if (st) rc = fail_status(st, ctx);
            tune_taskset_free(&ts);
            for (int i = 0; i < nmodels; i++) wpk_model_free(ms[i]);
            tune_fleet_leave(fleet, rc, stuck);
            wpk_context_free(ctx);
            return rc;
        }
    }
#endif
    /* the device is found (or its absence said) before anything else is done */
    rt_cuda_info gpu;
    char gpu_target[700], nvrtc[64];
    if (cuda) {
        st = tune_cuda_probe(ctx, &gpu);
        if (st) {
            rc = fail_status(st, ctx);
            wpk_context_free(ctx);
            return rc;
        }
        tune_cuda_target(&gpu, gpu_target, sizeof gpu_target);
        snprintf(nvrtc, sizeof nvrtc, "NVRTC %d.%d for sm_%d", cg_cuda_nvrtc_version() / 1000,
                 cg_cuda_nvrtc_version() % 1000 / 10, gpu.sm);
        o.target = gpu_target;
        o.toolchain = nvrtc;
        o.measure.device = TUNE_DEVICE_CUDA;
        o.measure.cuda_sm = gpu.sm;
        o.measure.cold_bytes = gpu.l2_bytes > 0 ? gpu.l2_bytes : -1;
    }
    st = tune_db_open(ctx, db_path, &db);
    if (st == WPK_OK && import) {
        int64_t added = 0;
        st = tune_db_import(db, import, &added);
        if (st == WPK_OK) printf("imported %lld record%s from %s\n", (long long)added,
                                 added == 1 ? "" : "s", import);
    }
    if (st == WPK_OK && model)
        st = load_tasks(ctx, models, nmodels, (int)opt_level, alternatives, cuda, ms, &ts);
    bool tty = isatty(STDOUT_FILENO) != 0;
    progress pr = {tty, -1};
    o.progress = on_progress;
    o.progress_user = &pr;
#ifdef WPK_HAVE_MPI
    fleet_progress fp = {.fleet = fleet};
    if (st == WPK_OK && fleet) {
        st = tune_fleet_open(fleet, target_fingerprint(), ts.tasks, ts.ntasks);
        fleet_open = st == WPK_OK;
        o.runner = tune_fleet_runner(fleet);
        o.progress = on_fleet_progress;
        o.progress_user = &fp;
        tty = true;
        pr.tty = false;
    }
#endif
    if (st == WPK_OK && model) {
        if (tty) {
            printf("tuning %d task%s of", ts.ntasks, ts.ntasks == 1 ? "" : "s");
            for (int i = 0; i < nmodels; i++) printf(" %s", models[i]);
            printf(" on %s", o.target ? o.target : target_fingerprint());
#ifdef WPK_HAVE_MPI
            int acc = 1, lost = 0;
            if (fleet) tune_fleet_counts(fleet, &acc, &lost);
            if (fleet) printf(", %d of %d MPI ranks", acc, tune_fleet_size(fleet));
#endif
            printf("\n");
            fflush(stdout);
        }
        st = tune_run(ctx, db, ts.tasks, ts.ntasks, &o, &sum);
        if (pr.tty && pr.last_task >= 0) fputs("\n", stdout);
#ifdef WPK_HAVE_MPI
        if (fleet_open) {
            char line[512];
            tune_fleet_describe(fleet, line, sizeof line);
            printf("fleet: %s\n", line);
            tune_fleet_describe_time(fleet, line, sizeof line);
            printf("fleet time: %s\n", line);
        }
#endif
        /* what was done is worth showing even when the job stopped on an error */
        if (sum.ntasks)
            print_summary(&sum, &ts, cuda ? "device time (CUDA events)"
                                     : o.measure.clock == TUNE_CLOCK_CPU
                                         ? "the busiest thread's CPU time" : "wall time", &o);
        if (report && sum.ntasks) {
            wpk_status rs = tune_report_write(ctx, report, &sum);
            if (rs == WPK_OK) printf("report: %s/curves_%s.csv, %s/curves.png\n", report,
                                     sum.strategy, report);
            else if (st == WPK_OK) st = rs;
        }
    }
    if (st == WPK_OK && export) {
        st = tune_db_export(db, export);
        if (st == WPK_OK) printf("exported the records to %s\n", export);
    }
    if (st) rc = fail_status(st, ctx);
    tune_summary_free(&sum);
    tune_taskset_free(&ts);
    for (int i = 0; i < nmodels; i++) wpk_model_free(ms[i]);
    tune_db_close(db);
    fflush(stdout);
#ifdef WPK_HAVE_MPI
    if (fleet) {
        tune_fleet_stop(fleet);
        /* the other ranks wait for rank 0's verdict until the fleet is open */
        tune_fleet_leave(fleet, rc, !fleet_open);
    }
#endif
    wpk_context_free(ctx);
    return rc;
}
