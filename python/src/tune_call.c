/* tune_call.c -- _wpk.tune: a model's kernel tasks tuned into a records database, as `wpk tune`
 * does (tools/cmd_tune.c), the summary returned as a dict. The tuner forks measurement workers
 * and GNU OpenMP is not fork-safe, so this runs no parallel region of its own; wpk.tune calls
 * it in a fresh Python process. */
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "wpk_module.h"

#include "api/tune_tasks.h"
#include "tune/tuner.h"

/* Log lines go straight to stderr, as `wpk tune` writes them: the tuner's forked workers must
 * not call into the interpreter. */
static void log_stderr(void *user, wpk_log_level level, const char *message) {
    (void)user;
    fprintf(stderr, "%s%s\n", level == WPK_LOG_ERROR  ? "wpk: error: "
                              : level == WPK_LOG_WARN ? "wpk: warning: "
                                                      : "wpk: ",
            message);
}

static PyObject *task_dict(const tune_task_summary *t, const tune_taskset *ts, int i) {
    int alternative = i < ts->ntasks && ts->tasks[i].alt_of >= 0;
    return Py_BuildValue(
        "{s:s,s:s,s:i,s:O,s:L,s:d,s:L,s:L,s:d,s:d,s:s,s:s,s:O}", "key", t->key, "template",
        t->template_name, "nodes", t->count, "alternative", alternative ? Py_True : Py_False,
        "flops", (long long)t->flops, "share", t->share, "trials", (long long)t->trials,
        "measured", (long long)t->measured, "default_s", t->default_s, "best_s", t->best_s,
        "best_config", t->best_config, "skipped", t->skipped, "converged",
        t->converged ? Py_True : Py_False);
}

static PyObject *summary_dict(const tune_summary *s, const tune_taskset *ts) {
    PyObject *tasks = PyList_New(s->ntasks);
    if (!tasks) return NULL;
    for (int i = 0; i < s->ntasks; i++) {
        PyObject *t = task_dict(&s->tasks[i], ts, i);
        if (!t) {
            Py_DECREF(tasks);
            return NULL;
        }
        PyList_SET_ITEM(tasks, i, t);
    }
    return Py_BuildValue("{s:s,s:d,s:L,s:i,s:N}", "strategy", s->strategy, "seconds", s->seconds,
                         "measured", (long long)s->measured, "build_workers", s->parallel.builds,
                         "tasks", tasks);
}

PyObject *pywpk_tune(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kwlist[] = {"model", "db", "strategy", "trials", "time_s", "seed", "opt_level",
                             "parallel", "timeout_s", "alternatives", "clock", "verbose", NULL};
    PyObject *model_obj = NULL, *db_obj = NULL;
    tune_options o = tune_default_options();
    long long trials = 0, seed = (long long)o.seed;
    int opt_level = -1, alternatives = 1, verbose = 0; /* opt_level < 0: the default */
    double timeout_s = 0;
    const char *clock = "wall";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&O&|sLdLiidpsp", kwlist,
                                     PyUnicode_FSConverter, &model_obj, PyUnicode_FSConverter,
                                     &db_obj, &o.strategy, &trials, &o.time_s, &seed, &opt_level,
                                     &o.parallel, &timeout_s, &alternatives, &clock, &verbose))
        return NULL;
    PyObject *result = NULL;
    if (strcmp(clock, "wall") && strcmp(clock, "cpu")) {
        PyErr_Format(PyExc_ValueError, "clock must be 'wall' or 'cpu', not '%s'", clock);
        goto done;
    }
    if (opt_level < 0) opt_level = wpk_optimize_default_params().level;
    o.trials = trials;
    o.seed = (uint64_t)seed;
    if (timeout_s > 0) o.measure.run_timeout_s = timeout_s;
    o.measure.clock = !strcmp(clock, "cpu") ? TUNE_CLOCK_CPU : TUNE_CLOCK_WALL;
    wpk_context *ctx = wpk_context_create();
    if (!ctx) {
        PyErr_NoMemory();
        goto done;
    }
    wpk_context_set_log(ctx, log_stderr, NULL, verbose ? WPK_LOG_DEBUG : WPK_LOG_WARN);
    const char *model_path = PyBytes_AS_STRING(model_obj), *db_path = PyBytes_AS_STRING(db_obj);
    tune_db *db = NULL;
    wpk_model *m = NULL;
    tune_taskset ts = {0};
    tune_summary sum = {0};
    wpk_status st;
    Py_BEGIN_ALLOW_THREADS
    omp_set_num_threads(1);
    st = tune_db_open(ctx, *db_path ? db_path : NULL, &db);
    if (st == WPK_OK) st = wpk_model_load(ctx, model_path, &m);
    if (st == WPK_OK) st = api_tune_tasks_extract(ctx, m, opt_level, alternatives != 0, &ts);
    if (st == WPK_OK) st = tune_run(ctx, db, ts.tasks, ts.ntasks, &o, &sum);
    Py_END_ALLOW_THREADS
    if (st == WPK_OK) result = summary_dict(&sum, &ts);
    else pywpk_raise(st, wpk_context_error(ctx));
    tune_summary_free(&sum);
    tune_taskset_free(&ts);
    wpk_model_free(m);
    tune_db_close(db);
    wpk_context_free(ctx);
done:
    Py_XDECREF(model_obj);
    Py_XDECREF(db_obj);
    return result;
}
