/* tuner.c -- the tuning loop over a set of tasks and the scheduler that shares a time budget
 * between them (see tuner.h). */
#include "tune/tuner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/context.h"
#include "tune/features.h"
#include "tune/finalists.h"
#include "tune/rl_policy.h"
#include "tune/task_gain.h"
#include "base/target_fingerprint.h"

/* Seconds a cached build of a candidate takes before anything is known (template, lowering,
 * emitting, a cache hit): the final re-measurements' share of a time budget counts it. */
#define CACHED_BUILD_S 0.5

typedef struct tstate {
    const tune_model_task *mt;
    tune_task_summary *sum;
    tune_space space;
    tune_config def;
    char def_text[512];
    tune_strategy *strat;
    tune_measurer *meas;
    int64_t stored;           /* records in the database */
    int64_t target;           /* records wanted (INT64_MAX: no cap) */
    double best_s;            /* best recorded median */
    bool have_best, have_default;
    bool done;
    double spent_s;           /* tuning time this run */
    int batches;              /* steps */
    int ncap;                 /* of sum->curve */
    struct job *job;
    /* the stream: proposals not handed out yet, configs in flight, this step's share */
    tune_config queue[TUNE_MAX_BATCH];
    int qn, qi;
    char inflight[TUNE_MAX_BATCH][512];
    int ninflight;
    bool default_given;
    int64_t step_left;
    float *prior_x;           /* the "model" strategy's prior records (borrowed by it) */
    double *prior_sec;
    tune_config *prior_cfgs;  /* ga's and model's: other workloads' fastest configs */
    /* DSL templates: loop-IR features (the "model" strategy's) and pruning (every strategy's);
       NULL for a library template, which has no loops */
    tune_featurizer *feat;
    bool feat_tried;
    bool knob_features;       /* WPK_TUNE_FEATURES=knobs: the model learns from knob values */
} tstate;

typedef struct job {
    wpk_context *ctx;
    tune_db *db;
    const tune_options *opt;
    tune_summary *out;
    tstate *ts;
    int n;
    tune_parallelism par;
    double start;
    wpk_status db_status;     /* the first failure to store a record: stops the job */
    char toolchain[600];      /* for the records: compiler, flags, clock */
    const char *target;       /* the records' fingerprint */
    int64_t measured;
    double run_s;             /* wall time of this run's run children, for estimates */
    tune_rl_policy *policy;   /* "rl": shared by every task, saved at the end */
} job;

tune_options tune_default_options(void) {
    tune_options o;
    memset(&o, 0, sizeof o);
    o.strategy = "ga";
    o.seed = 1;
    o.batch = 8;
    o.top = 3;
    o.flat_trials = 48;
    o.flat_gain = 0.01;
    o.measure = tune_measure_default_params();
    return o;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t fnv(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static void text_of(const tune_space *s, const tune_config *c, char *dst, size_t cap) {
    strbuf b = {0};
    tune_config_print(s, c, &b);
    snprintf(dst, cap, "%s", b.s ? b.s : "");
    sb_free(&b);
}

static bool curve_add(tstate *t, tune_status st, double median, double at, bool is_default) {
    tune_task_summary *s = t->sum;
    if (s->ncurve == t->ncap) {
        int cap = t->ncap ? 2 * t->ncap : 64;
        tune_curve_point *c = wpk_realloc(s->curve, sizeof *c * (size_t)cap);
        if (!c) return false;
        s->curve = c;
        t->ncap = cap;
    }
    s->curve[s->ncurve++] = (tune_curve_point){st, st == TUNE_OK ? median : 0, at, is_default};
    return true;
}

/* A result known (stored now or before): the best so far, the default's time. */
static void note(tstate *t, const char *text, tune_status st, double med) {
    if (st != TUNE_OK) return;
    if (!t->have_best || med < t->best_s) {
        t->best_s = med;
        t->have_best = true;
        snprintf(t->sum->best_config, sizeof t->sum->best_config, "%s", text);
        t->sum->best_s = med;
    }
    if (!strcmp(text, t->def_text) && (!t->have_default || med < t->sum->default_s)) {
        t->sum->default_s = med;
        t->have_default = true;
    }
}

/* ---- resuming ---- */

typedef struct loaded {
    tstate *t;
    tune_config *cfgs;
    tune_result *res;
    int n, cap;
    bool oom;
} loaded;

static bool on_record(void *user, const tune_record *r) {
    loaded *L = user;
    tstate *t = L->t;
    tune_config c;
    wpk_context quiet = {0};
    if (!curve_add(t, r->status, r->median, -1, !strcmp(r->config, t->def_text))) {
        L->oom = true;
        return false;
    }
    /* a config of another version of the template's space counts as a trial but cannot be
       told */
    if (tune_config_parse(&quiet, &t->space, r->config, &c) != WPK_OK) return true;
    if (L->n == L->cap) {
        int cap = L->cap ? 2 * L->cap : 64;
        tune_config *nc = wpk_realloc(L->cfgs, sizeof *nc * (size_t)cap);
        if (nc) L->cfgs = nc;
        tune_result *nr = nc ? wpk_realloc(L->res, sizeof *nr * (size_t)cap) : NULL;
        if (!nc || !nr) {
            L->oom = true;
            return false;
        }
        L->res = nr;
        L->cap = cap;
    }
    L->cfgs[L->n] = c;
    L->res[L->n++] = (tune_result){r->status, r->median};
    note(t, r->config, r->status, r->median);
    return true;
}

/* ---- priors for the cost model: records of other workloads of the same template ---- */

#define MAX_PRIOR 4096

typedef struct prior_set {
    const tstate *t;
    job *J;
    int dim;                  /* features per row */
    float *x;                 /* MAX_PRIOR rows of dim features */
    double *sec;
    uint64_t *wl;             /* each row's workload (hash of its key) */
    int n;
} prior_set;

/* Knob values of config text in the order of t's knobs (NAN for a knob it does not name):
 * what the model strategy's own featurization (the knob values) gives for t's configs. */
static void knob_values(const tune_space *s, const char *text, float *out) {
    for (int k = 0; k < s->nknobs; k++) {
        out[k] = NAN;
        size_t len = strlen(s->knobs[k].name);
        for (const char *p = text; p && *p;) {
            if (!strncmp(p, s->knobs[k].name, len) && p[len] == '=')
                out[k] = strtof(p + len + 1, NULL);
            p = strchr(p, ',');
            if (p) p++;
        }
    }
}

static tune_featurizer *featurizer_of(job *J, tstate *t);

static bool on_prior(void *user, const tune_record *r) {
    prior_set *P = user;
    const tstate *t = P->t;
    if (P->n == MAX_PRIOR) return false;
    if (strcmp(r->template_name, t->mt->task.tmpl->name) || !strcmp(r->workload, t->mt->task.key))
        return true;
    float *row = &P->x[(size_t)P->n * (size_t)P->dim];
    if (t->feat && !t->knob_features) {
        /* loop-IR features need the record's task: a workload of this job (records of
           workloads outside it cannot be rebuilt from their key and are left out) */
        tune_featurizer *f = NULL;
        for (int j = 0; j < P->J->n && !f; j++)
            if (P->J->ts[j].mt && !strcmp(P->J->ts[j].mt->task.key, r->workload))
                f = featurizer_of(P->J, &P->J->ts[j]);
        if (!f || tune_featurizer_get_text(f, r->config, row, P->dim) != P->dim) return true;
    } else {
        knob_values(&t->space, r->config, row);
    }
    P->sec[P->n] = r->status == TUNE_OK && r->median > 0 ? r->median : -1;
    P->wl[P->n++] = fnv(r->workload);
    return true;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The "model" strategy starts from the records of other workloads of the task's template:
 * features as its own (loop-IR features of the record's config lowered for its own task,
 * when that task is in this job; for a library template the knob values, aligned by name),
 * times divided by the median of
 * their own workload's successes, so that a 1x1 conv's records and a 3x3 conv's are on one
 * scale (the cost model ranks the priors as one group). */
static wpk_status load_prior(job *J, tstate *t, tune_strategy_params *sp, prior_set *P) {
    memset(P, 0, sizeof *P);
    P->t = t;
    P->J = J;
    int dim = P->dim = t->feat && !t->knob_features ? TUNE_FEATURE_DIM : t->space.nknobs;
    if (strcmp(J->opt->strategy, "model") || dim == 0) return WPK_OK;
    P->x = wpk_malloc(sizeof *P->x * (size_t)MAX_PRIOR * (size_t)dim);
    P->sec = wpk_malloc(sizeof *P->sec * MAX_PRIOR);
    P->wl = wpk_malloc(sizeof *P->wl * MAX_PRIOR);
    double *tmp = wpk_malloc(sizeof *tmp * MAX_PRIOR);
    wpk_status st = P->x && P->sec && P->wl && tmp
                        ? tune_db_each(J->db, J->target, NULL, on_prior, P)
                        : wpk_error(J->ctx, WPK_ERR_NOMEM, "out of memory reading prior records");
    /* each workload's median success, then every success over it */
    uint64_t *keys = st == WPK_OK ? wpk_malloc(sizeof *keys * MAX_PRIOR) : NULL;
    double *meds = keys ? wpk_malloc(sizeof *meds * MAX_PRIOR) : NULL;
    if (st == WPK_OK && !meds) st = wpk_error(J->ctx, WPK_ERR_NOMEM, "out of memory reading "
                                              "prior records");
    int nk = 0;
    for (int i = 0; st == WPK_OK && i < P->n; i++) {
        if (P->sec[i] <= 0) continue;
        int w = 0;
        while (w < nk && keys[w] != P->wl[i]) w++;
        if (w == nk) {
            int k = 0;
            for (int j = i; j < P->n; j++)
                if (P->wl[j] == P->wl[i] && P->sec[j] > 0) tmp[k++] = P->sec[j];
            qsort(tmp, (size_t)k, sizeof *tmp, cmp_dbl);
            keys[nk] = P->wl[i];
            meds[nk++] = tmp[k / 2];
        }
    }
    for (int i = 0; st == WPK_OK && i < P->n; i++) {
        if (P->sec[i] <= 0) continue;
        int w = 0;
        while (keys[w] != P->wl[i]) w++;
        P->sec[i] /= meds[w];
    }
    wpk_free(keys);
    wpk_free(meds);
    wpk_free(tmp);
    if (st) return st;
    sp->prior_features = P->x;
    sp->prior_seconds = P->sec;
    sp->prior_count = P->n;
    sp->prior_dim = dim;
    return WPK_OK;
}

/* ---- the ga and model strategies' start from other workloads: their fastest configs ---- */

#define PRIOR_PER_WORKLOAD 2  /* the fastest configs taken from each other workload */
#define MAX_PRIOR_WORKLOADS 64

typedef struct prior_best {
    const tstate *t;
    uint64_t wl[MAX_PRIOR_WORKLOADS];
    double sec[MAX_PRIOR_WORKLOADS][PRIOR_PER_WORKLOAD];   /* fastest first; 0: none */
    tune_config cfg[MAX_PRIOR_WORKLOADS][PRIOR_PER_WORKLOAD];
    int n;
} prior_best;

/* A success of another workload of t's template whose config fits t's space (the same knobs
 * at values legal here) among the fastest of its workload. */
static bool on_prior_best(void *user, const tune_record *r) {
    prior_best *B = user;
    const tstate *t = B->t;
    tune_config c;
    if (strcmp(r->template_name, t->mt->task.tmpl->name) || !strcmp(r->workload, t->mt->task.key) ||
        r->status != TUNE_OK || !(r->median > 0) ||
        tune_config_parse(NULL, &t->space, r->config, &c) != WPK_OK)
        return true;
    const uint64_t h = fnv(r->workload);
    int w = 0;
    while (w < B->n && B->wl[w] != h) w++;
    if (w == MAX_PRIOR_WORKLOADS) return true;
    if (w == B->n) B->wl[B->n++] = h;
    /* insert by time among the workload's kept few */
    for (int i = 0; i < PRIOR_PER_WORKLOAD; i++) {
        if (B->sec[w][i] > 0 && B->sec[w][i] <= r->median) continue;
        for (int j = PRIOR_PER_WORKLOAD - 1; j > i; j--)
            B->sec[w][j] = B->sec[w][j - 1], B->cfg[w][j] = B->cfg[w][j - 1];
        B->sec[w][i] = r->median;
        B->cfg[w][i] = c;
        break;
    }
    return true;
}

/* Each other workload's fastest config first, then their runners-up, into t->prior_cfgs for
 * the ga, model, rl and anneal strategies (the model also learns from all of their records):
 * proposed first, and ga's first generation and anneal's chains start from them. */
static wpk_status load_prior_configs(job *J, tstate *t, tune_strategy_params *sp) {
    static const char *const seeded[] = {"ga", "model", "rl", "anneal"};
    bool wanted = false;
    for (size_t i = 0; i < sizeof seeded / sizeof seeded[0]; i++)
        wanted = wanted || !strcmp(J->opt->strategy, seeded[i]);
    if (!wanted) return WPK_OK;
    prior_best *B = wpk_calloc(1, sizeof *B);
    if (!B) return wpk_error(J->ctx, WPK_ERR_NOMEM, "out of memory reading prior records");
    B->t = t;
    wpk_status st = tune_db_each(J->db, J->target, NULL, on_prior_best, B);
    int n = 0;
    if (st == WPK_OK && B->n) {
        t->prior_cfgs = wpk_malloc(sizeof *t->prior_cfgs * (size_t)B->n * PRIOR_PER_WORKLOAD);
        if (!t->prior_cfgs) st = wpk_error(J->ctx, WPK_ERR_NOMEM, "out of memory reading "
                                           "prior records");
        for (int i = 0; st == WPK_OK && i < PRIOR_PER_WORKLOAD; i++)
            for (int w = 0; w < B->n; w++)
                if (B->sec[w][i] > 0) t->prior_cfgs[n++] = B->cfg[w][i];
    }
    wpk_free(B);
    sp->prior_configs = t->prior_cfgs;
    sp->prior_config_count = n;
    return st;
}

/* t's featurizer, made on first use (NULL for a library template, or out of memory: then
 * the strategies see knob values and prune nothing). */
static tune_featurizer *featurizer_of(job *J, tstate *t) {
    if (!t->feat_tried && t->mt->task.tmpl->build) {
        wpk_context quiet = {0};
        t->feat = tune_featurizer_create(&quiet, &t->mt->task, NULL);
        if (!t->feat) wpk_log(J->ctx, WPK_LOG_WARN, "%s: %s: tuning without loop features",
                              t->mt->task.key, wpk_context_error(&quiet));
    }
    t->feat_tried = true;
    return t->feat;
}

static wpk_status task_setup(job *J, tstate *t) {
    const tune_task *task = &t->mt->task;
    const char *target = J->target;
    task->tmpl->space(task->tmpl, task, &t->space);
    if (J->opt->start) {
        wpk_status st = tune_config_parse(J->ctx, &t->space, J->opt->start, &t->def);
        if (st) {
            wpk_error_prefix(J->ctx, "%s: the start config", task->key);
            return st;
        }
    } else {
        task->tmpl->default_config(task->tmpl, task, &t->space, &t->def);
    }
    text_of(&t->space, &t->def, t->def_text, sizeof t->def_text);
    tune_strategy_params sp;
    memset(&sp, 0, sizeof sp);
    sp.seed = J->opt->seed ^ fnv(task->key);
    sp.budget = J->opt->trials > 0 ? J->opt->trials : 1000;
    sp.start = t->def;
    sp.has_start = true;
    sp.rl_policy = J->policy;
    if (featurizer_of(J, t)) {
        /* WPK_TUNE_FEATURES=knobs keeps the pruning but gives the model strategy the knob
           values instead of the loop features: for comparing the two */
        const char *fe = getenv("WPK_TUNE_FEATURES");
        t->knob_features = fe && !strcmp(fe, "knobs");
        sp.featurize = t->knob_features ? NULL : tune_featurize_config;
        sp.featurize_user = t->feat;
        sp.legal = tune_config_legal;
        sp.legal_user = t->feat;
    }
    prior_set P;
    wpk_status pst = load_prior(J, t, &sp, &P);
    if (pst == WPK_OK) pst = load_prior_configs(J, t, &sp);
    if (pst == WPK_OK) t->strat = tune_strategy_create(J->ctx, J->opt->strategy, &t->space, &sp);
    /* the strategy keeps the priors' rows: they are freed with the job */
    t->prior_x = P.x;
    t->prior_sec = P.sec;
    wpk_free(P.wl);
    if (pst) return pst;
    if (!t->strat) {
        wpk_error_prefix(J->ctx, "%s", task->key);
        return J->ctx && J->ctx->status ? J->ctx->status : WPK_ERR_INVALID_ARG;
    }
    loaded L = {.t = t};
    wpk_status st = tune_db_each(J->db, target, task->key, on_record, &L);
    if (st == WPK_OK && L.oom) st = wpk_error(J->ctx, WPK_ERR_NOMEM, "out of memory reading records");
    if (st == WPK_OK && L.n) tune_strategy_tell(t->strat, L.cfgs, L.res, L.n);
    wpk_free(L.cfgs);
    wpk_free(L.res);
    if (st) return st;
    t->stored = tune_db_count(J->db, target, task->key);
    t->target = J->opt->trials > 0 ? J->opt->trials : INT64_MAX;
    t->done = t->stored >= t->target;
    t->sum->trials = t->stored;
    return WPK_OK;
}

/* ---- measuring ---- */

static double gflops(const tstate *t, double s) {
    return s > 0 ? (double)t->mt->task.flops / s * 1e-9 : 0;
}

static double eta(const job *J) {
    double elapsed = now_s() - J->start;
    if (J->opt->time_s > 0) {
        double left = J->opt->time_s - elapsed;
        return left > 0 ? left : 0;
    }
    if (J->measured == 0) return -1;
    int64_t left = 0;
    for (int i = 0; i < J->n; i++)
        if (!J->ts[i].done && J->ts[i].target != INT64_MAX) left += J->ts[i].target - J->ts[i].stored;
    return (double)left * elapsed / (double)J->measured;
}

static void report(job *J, tstate *t, bool done) {
    if (!J->opt->progress) return;
    tune_progress p = {
        .task = (int)(t - J->ts), .ntasks = J->n, .key = t->mt->task.key,
        .trials = t->stored, .target = t->target == INT64_MAX ? 0 : t->target,
        .measured = t->sum->measured, .best_gflops = gflops(t, t->sum->best_s),
        /* recorded medians while tuning; the re-measured pair once the task is done */
        .speedup = t->sum->default_s > 0 && t->sum->best_s > 0 ? t->sum->default_s / t->sum->best_s
                                                               : 0,
        .eta_s = eta(J), .done = done, .flattened = t->sum->flattened,
        .flat_gain = t->sum->flat_gain, .flat_trials = J->opt->flat_trials};
    p.failed = t->sum->measured - t->sum->by_status[TUNE_OK];
    J->opt->progress(J->opt->progress_user, &p);
}

/* A result: stored at once (a committed record), then told and noted. */
static void on_result(void *user, int i, const tune_config *cfg, const tune_measurement *r) {
    (void)i;
    tstate *t = user;
    job *J = t->job;
    char text[512];
    text_of(&t->space, cfg, text, sizeof text);
    for (int k = 0; k < t->ninflight; k++)
        if (!strcmp(t->inflight[k], text)) {
            memmove(t->inflight[k], t->inflight[t->ninflight - 1], sizeof t->inflight[k]);
            t->ninflight--;
            break;
        }
    if (J->db_status) return;
    tune_record rec = {
        .target = r->target ? r->target : J->target, .workload = t->mt->task.key,
        .template_name = t->mt->task.tmpl->name, .config = text, .status = r->status,
        .samples = r->samples, .nsamples = r->nsamples, .median = r->median,
        .toolchain = r->toolchain ? r->toolchain : J->toolchain, .time = (int64_t)time(NULL)};
    J->db_status = tune_db_add(J->db, &rec);
    if (J->db_status) return;
    t->stored++;
    t->sum->trials = t->stored;
    t->sum->measured++;
    t->sum->by_status[r->status < 0 || r->status > TUNE_INVALID ? TUNE_CRASH : r->status]++;
    J->measured++;
    J->run_s += r->run_s;
    J->out->measured++;
    tune_result res = {r->status, r->median};
    tune_strategy_tell(t->strat, cfg, &res, 1);
    note(t, text, r->status, r->median);
    if (!curve_add(t, r->status, r->median, now_s() - J->start, !strcmp(text, t->def_text)))
        J->db_status = WPK_ERR_NOMEM;
    if (r->status != TUNE_OK)
        wpk_log(J->ctx, WPK_LOG_DEBUG, "%s: %s: %s: %s", t->mt->task.key, text,
                tune_status_name(r->status), r->message);
    report(J, t, false);
}

/* The stream's source for task t: the default config first when it is not stored, then the
 * strategy's proposals (asked for a batch at a time, handed out as build slots free up),
 * until the task holds its target counting what is in flight, or this step's share runs
 * out, or the strategy has nothing more. */
static int give(void *user, tune_config *out, int max) {
    tstate *t = user;
    job *J = t->job;
    const char *target = J->target;
    int k = 0;
    double gain;
    if (!t->sum->flattened && tune_task_flat(t->sum->curve, t->sum->ncurve, J->opt->flat_trials,
                                             J->opt->flat_gain, &gain)) {
        t->sum->flattened = true; /* step() ends the task when the stream has drained */
        t->sum->flat_gain = gain;
    }
    while (!t->sum->flattened && k < max && t->step_left > 0 &&
           t->stored + t->ninflight < t->target &&
           t->ninflight < TUNE_MAX_BATCH && !J->db_status) {
        tune_config c;
        if (!t->default_given) {
            t->default_given = true;
            if (tune_db_has(J->db, target, t->mt->task.key, t->def_text)) continue;
            c = t->def;
        } else {
            if (t->qi == t->qn) {
                t->qn = tune_strategy_propose(t->strat, t->queue, J->opt->batch);
                t->qi = 0;
                if (t->qn == 0) {
                    t->sum->converged = true;
                    break;
                }
            }
            c = t->queue[t->qi++];
        }
        char text[512];
        text_of(&t->space, &c, text, sizeof text);
        /* stored (told at setup, so never proposed: this guards the count) or in flight (the
           default, handed out before the strategy heard of it) */
        bool seen = tune_db_has(J->db, target, t->mt->task.key, text);
        for (int i = 0; i < t->ninflight && !seen; i++) seen = !strcmp(t->inflight[i], text);
        if (seen) continue;
        snprintf(t->inflight[t->ninflight++], sizeof t->inflight[0], "%s", text);
        t->step_left--;
        out[k++] = c;
    }
    return k;
}

static wpk_status ensure_measurer(job *J, tstate *t) {
    if (t->meas) return WPK_OK;
    tune_measure_params p = J->opt->measure;
    p.parallel = &J->par;
    if (!p.seed) p.seed = J->opt->seed;
    wpk_status st = tune_measurer_create(J->ctx, &t->mt->task, &p, &t->meas);
    if (st == WPK_OK) tune_measurer_set_control(t->meas, &t->def);
    return st;
}

/* Skip a task that cannot be measured, keeping the reason; other errors stop the job. */
static wpk_status setup_failed(job *J, tstate *t, wpk_status st) {
    if (st == WPK_ERR_NOMEM || st == WPK_ERR_IO) return st;
    snprintf(t->sum->skipped, sizeof t->sum->skipped, "%s", wpk_context_error(J->ctx));
    wpk_log(J->ctx, WPK_LOG_WARN, "not tuned: %s", t->sum->skipped);
    wpk_clear_error(J->ctx);
    t->done = true;
    return WPK_OK;
}

/* Whether the runner lets the next task start while the last one's tail is measured. */
static bool runs_ahead(const job *J) {
    const tune_runner *rn = J->opt->runner;
    return rn && rn->remeasure && rn->settle;
}

/* One step of a task: a stream of up to `share` configs (the default first when it is not
 * stored). With `ahead` (runs_ahead) it may end with candidates still out elsewhere. */
static wpk_status step(job *J, tstate *t, int64_t share, bool ahead) {
    if (t->done) return WPK_OK;
    double t0 = now_s();
    wpk_status st = ensure_measurer(J, t);
    if (st) return setup_failed(J, t, st);
    t->step_left = share;
    const tune_runner *rn = J->opt->runner;
    st = rn ? rn->stream(rn->self, (int)(t - J->ts), t->meas, give, t, on_result, t)
            : tune_measure_stream(t->meas, give, t, 0, on_result, t);
    if (st == WPK_OK && !ahead && runs_ahead(J)) st = rn->settle(rn->self, (int)(t - J->ts));
    t->spent_s += now_s() - t0;
    t->batches++;
    if (st == WPK_OK && J->db_status == WPK_ERR_NOMEM)
        st = wpk_error(J->ctx, WPK_ERR_NOMEM, "out of memory keeping a task's trials");
    else if (st == WPK_OK) st = J->db_status;
    if (st) return st;
    if (t->stored >= t->target || t->sum->converged) t->done = true;
    if (!t->done && t->sum->flattened) {
        t->done = true;
        report(J, t, false);
    }
    return WPK_OK;
}

/* ---- the final re-measurement ---- */

/* The finals' configs from a task's records: its finalists, the default left out. */
typedef struct top_list {
    tune_finalists f;
    const char *skip;         /* the default: re-measured anyway */
} top_list;

static bool pick(void *user, const tune_record *r) {
    top_list *T = user;
    if (r->status == TUNE_OK && strcmp(r->config, T->skip))
        tune_finalists_add(&T->f, r->config, r->median);
    return true;
}

/* Rounds of the final re-measurement, each over all of its configs, every other one in
 * reverse order, and a config's time is the median of its fastest round: a slow spell of a
 * shared machine (up to twice the time, for seconds: another tenant on the same cores) that
 * falls on some of a config's rounds then does not decide the ranking, as it could when each
 * config was timed once, back to back, or when the rounds' samples were pooled. */
#define FINAL_ROUNDS 3

typedef struct final_round {
    tune_measurement *out;    /* per config: the rounds' samples pooled, the fastest round's
                                 median */
    const int *perm;          /* this round's position -> config */
} final_round;

static void on_final(void *user, int i, const tune_config *cfg, const tune_measurement *r) {
    (void)cfg;
    final_round *F = user;
    tune_measurement *o = &F->out[F->perm[i]];
    if (o->status != TUNE_OK) return; /* failed in an earlier round: stays failed */
    if (r->status != TUNE_OK || o->nsamples == 0) {
        *o = *r;
        return;
    }
    for (int k = 0; k < r->nsamples && o->nsamples < TUNE_MAX_SAMPLES; k++)
        o->samples[o->nsamples++] = r->samples[k];
    if (r->median < o->median) o->median = r->median;
}

/* One task's finals: the default and its best few distinct configs (by recorded median). */
typedef struct finals {
    tstate *t;
    tune_config *cfgs;
    tune_measurement *r;
    char (*texts)[512];
    int n;                    /* 0: nothing to re-measure (the task measured nothing now) */
} finals;

static void finals_free(finals *f) {
    wpk_free(f->cfgs);
    wpk_free(f->r);
    wpk_free(f->texts);
    memset(f, 0, sizeof *f);
}

static wpk_status finals_prepare(job *J, tstate *t, finals *f) {
    memset(f, 0, sizeof *f);
    f->t = t;
    if (t->sum->measured == 0 || !t->meas || !t->have_best) return WPK_OK;
    top_list *T = wpk_calloc(1, sizeof *T);
    f->cfgs = wpk_calloc(TUNE_MAX_BATCH, sizeof *f->cfgs);
    f->r = wpk_calloc(TUNE_MAX_BATCH, sizeof *f->r);
    f->texts = wpk_calloc(TUNE_MAX_BATCH, 512);
    wpk_status st = T && f->cfgs && f->r && f->texts
                        ? WPK_OK
                        : wpk_error(J->ctx, WPK_ERR_NOMEM, "out of memory re-measuring");
    if (st == WPK_OK) {
        T->f.max = J->opt->top < 1 ? 1 : J->opt->top > TUNE_MAX_BATCH - 1 ? TUNE_MAX_BATCH - 1
                                                                            : J->opt->top;
        T->skip = t->def_text;
        st = tune_db_each(J->db, J->target, t->mt->task.key, pick, T);
    }
    if (st == WPK_OK) {
        f->cfgs[f->n] = t->def;
        snprintf(f->texts[f->n++], 512, "%s", t->def_text);
        for (int i = 0; i < T->f.n; i++) {
            wpk_context quiet = {0};
            if (tune_config_parse(&quiet, &t->space, T->f.v[i].text, &f->cfgs[f->n]) != WPK_OK)
                continue;
            snprintf(f->texts[f->n++], 512, "%s", T->f.v[i].text);
        }
    }
    wpk_free(T);
    if (st) finals_free(f);
    return st;
}

/* One round of f's configs alone, in reverse order on odd rounds. */
static wpk_status finals_round(finals *f, int round) {
    tune_config cfgs[TUNE_MAX_BATCH];
    int perm[TUNE_MAX_BATCH];
    for (int i = 0; i < f->n; i++) {
        perm[i] = round % 2 ? f->n - 1 - i : i;
        cfgs[i] = f->cfgs[perm[i]];
    }
    final_round F = {f->r, perm};
    return f->n ? tune_measure_batch(f->t->meas, cfgs, f->n, TUNE_MEASURE_ALONE, on_final, &F)
                : WPK_OK;
}

/* f's results as the task's finals in the records, and in its summary. */
static wpk_status finals_store(job *J, finals *f) {
    tstate *t = f->t;
    const tune_measurement *r = f->r;
    const int n = f->n;
    if (n == 0) return WPK_OK;
    wpk_status st = WPK_OK;
    if (!J->db_status) {
        tune_record *fin = wpk_calloc((size_t)n, sizeof *fin);
        int nf = 0;
        for (int i = 0; fin && i < n; i++)
            if (r[i].status == TUNE_OK)
                fin[nf++] = (tune_record){
                    .target = r[i].target ? r[i].target : J->target,
                    .workload = t->mt->task.key,
                    .template_name = t->mt->task.tmpl->name, .config = f->texts[i],
                    .status = TUNE_OK, .samples = r[i].samples, .nsamples = r[i].nsamples,
                    .median = r[i].median, .toolchain = r[i].toolchain ? r[i].toolchain
                                                                       : J->toolchain,
                    .time = (int64_t)time(NULL)};
        st = fin ? tune_db_add_finals(J->db, fin, nf)
                 : wpk_error(J->ctx, WPK_ERR_NOMEM, "out of memory storing the finals");
        wpk_free(fin);
    }
    if (st == WPK_OK && r[0].status == TUNE_OK) {
        int bi = 0; /* the default may be the best there is */
        for (int i = 1; i < n; i++)
            if (r[i].status == TUNE_OK && r[i].median < r[bi].median) bi = i;
        if (!tune_final_beats(r[bi].median, r[0].median)) bi = 0;
        t->sum->default_s = r[0].median;
        t->sum->best_s = r[bi].median;
        snprintf(t->sum->best_config, sizeof t->sum->best_config, "%s", f->texts[bi]);
        t->sum->remeasured = true;
    }
    return st;
}

/* The finals of a workload's implementations (its primary task and the alternatives that
 * ended with it: group[0..n)), re-measured alone in FINAL_ROUNDS rounds that take every
 * implementation in turn: the summary's ratios come from one run, and which implementation is
 * fastest from one measurement, not from two taken minutes apart (a slow spell over one
 * task's finals once made the direct conv lose to a Winograd one the bench then timed 18%
 * slower). The results are stored as each task's finals, which `wpk compile` trusts over the
 * trials' medians (the lowest of hundreds of noisy medians is low by luck as much as by
 * speed). They are not records: a record is one measurement of one trial; these check the
 * trials. */
static wpk_status finish_group(job *J, tstate *const *group, int n) {
    finals *f = wpk_calloc((size_t)n + 1, sizeof *f);
    if (!f) return wpk_error(J->ctx, WPK_ERR_NOMEM, "out of memory re-measuring");
    wpk_status st = WPK_OK;
    for (int k = 0; st == WPK_OK && k < n; k++) st = finals_prepare(J, group[k], &f[k]);
    for (int round = 0; st == WPK_OK && round < FINAL_ROUNDS; round++)
        for (int k = 0; st == WPK_OK && k < n; k++)
            st = finals_round(&f[round % 2 ? n - 1 - k : k], round);
    for (int k = 0; st == WPK_OK && k < n; k++) st = finals_store(J, &f[k]);
    for (int k = 0; k < n; k++) finals_free(&f[k]);
    wpk_free(f);
    return st;
}

/* The group of task t: its primary task's index. */
static int group_of(const job *J, const tstate *t) {
    int i = (int)(t - J->ts), p = t->mt->alt_of;
    return p >= 0 && p < J->n ? p : i;
}

/* Whether order[i] is the last of its group in order[0..n) (groups are contiguous there). */
static bool ends_group(const job *J, tstate *const *order, int n, int i) {
    return i + 1 == n || group_of(J, order[i + 1]) != group_of(J, order[i]);
}

/* Finish the group of t (t and the tasks of its group listed before it in order[0..n)),
 * reporting each. */
static wpk_status finish_with_group(job *J, tstate *const *order, int n, tstate *t) {
    tstate **group = wpk_calloc((size_t)n + 1, sizeof *group);
    if (!group) return wpk_error(J->ctx, WPK_ERR_NOMEM, "out of memory re-measuring");
    int ng = 0, g = group_of(J, t);
    for (int i = 0; i < n; i++)
        if (group_of(J, order[i]) == g) group[ng++] = order[i];
    wpk_status st = finish_group(J, group, ng);
    for (int i = 0; st == WPK_OK && i < ng; i++) report(J, group[i], true);
    wpk_free(group);
    return st;
}

/* A group's finals handed to the runner (runs_ahead): alive until the runner is done. */
typedef struct group_finals {
    job *J;
    int ng;
    tstate *group[TUNE_REMEASURE_MAX];
    finals f[TUNE_REMEASURE_MAX];
    int nitems;
    int of_item[TUNE_REMEASURE_MAX][2];    /* item -> (finals, config) */
} group_finals;

static void group_finals_free(group_finals *G) {
    for (int k = 0; k < G->ng; k++) finals_free(&G->f[k]);
    wpk_free(G);
}

static void on_group_final(void *user, int i, const tune_config *cfg, const tune_measurement *r) {
    group_finals *G = user;
    if (i < 0 || i >= G->nitems) return;
    finals *f = &G->f[G->of_item[i][0]];
    int perm = G->of_item[i][1];
    final_round F = {f->r, &perm};
    on_final(&F, 0, cfg, r);
}

static void group_finals_done(void *user) {
    group_finals *G = user;
    job *J = G->J;
    for (int k = 0; k < G->ng; k++) {
        wpk_status st = finals_store(J, &G->f[k]);
        if (st && !J->db_status) J->db_status = st;
        report(J, G->group[k], true);
    }
    group_finals_free(G);
}

/* finish_with_group's work handed to the runner, once the group's trials are in: its finals
 * run in whichever process is free while the next task is measured. A group with more
 * finalists than one hand-out holds is finished here. */
static wpk_status finish_group_async(job *J, tstate *const *order, int n, tstate *t) {
    const tune_runner *rn = J->opt->runner;
    group_finals *G = wpk_calloc(1, sizeof *G);
    if (!G) return wpk_error(J->ctx, WPK_ERR_NOMEM, "out of memory re-measuring");
    G->J = J;
    int g = group_of(J, t);
    wpk_status st = WPK_OK;
    for (int i = 0; st == WPK_OK && i < n; i++) {
        if (group_of(J, order[i]) != g) continue;
        if (G->ng == TUNE_REMEASURE_MAX) break;
        st = rn->settle(rn->self, (int)(order[i] - J->ts));
        if (st == WPK_OK) st = finals_prepare(J, order[i], &G->f[G->ng]);
        G->group[G->ng++] = order[i];
    }
    tune_remeasure_item items[TUNE_REMEASURE_MAX];
    bool fits_one = true;
    for (int k = 0; st == WPK_OK && k < G->ng; k++)
        for (int c = 0; c < G->f[k].n; c++) {
            if (G->nitems == TUNE_REMEASURE_MAX) {
                fits_one = false;
                break;
            }
            G->of_item[G->nitems][0] = k;
            G->of_item[G->nitems][1] = c;
            items[G->nitems++] = (tune_remeasure_item){
                .task = (int)(G->group[k] - J->ts), .cfg = G->f[k].cfgs[c],
                .local = G->group[k]->meas};
        }
    if (st == WPK_OK && (!fits_one || G->ng == TUNE_REMEASURE_MAX)) {
        group_finals_free(G);
        return finish_with_group(J, order, n, t);
    }
    if (st == WPK_OK && G->nitems == 0) {
        group_finals_done(G);
        return J->db_status;
    }
    if (st == WPK_OK)
        st = rn->remeasure(rn->self, items, G->nitems, FINAL_ROUNDS, on_group_final,
                           group_finals_done, G);
    if (st) group_finals_free(G);
    return st;
}

/* ---- the scheduler ---- */

/* What the scheduler's arithmetic (task_gain.h) sees of t. */
static tune_task_view view_of(const tstate *t) {
    return (tune_task_view){.curve = t->sum->curve, .ncurve = t->sum->ncurve,
                            .count = t->mt->count, .flops = t->mt->task.flops,
                            .best_s = t->have_best ? t->best_s : 0, .spent_s = t->spent_s,
                            .steps = t->batches, .done = t->done};
}

/* Whether one more step of t still ends before `end`, keeping time for the final
 * re-measurement of every task that measured something. */
static bool fits(const job *J, const tstate *t, double end) {
    if (t->done) return false;
    double run = J->measured ? J->run_s / (double)J->measured : 0.2;
    double reserve = 0;
    for (int i = 0; i < J->n; i++)
        if (J->ts[i].sum->measured > 0 || &J->ts[i] == t)
            reserve += CACHED_BUILD_S + (J->opt->top + 1) * run;
    double cost = t->batches > 0 ? t->spent_s / t->batches : 0;
    return now_s() + cost + reserve <= end;
}

/* The heaviest first; a workload's implementations next to each other (by their primary's
 * index), the primary first. */
static int by_weight(const void *a, const void *b) {
    const tstate *x = *(tstate *const *)a, *y = *(tstate *const *)b;
    const job *J = x->job;
    int gx = group_of(J, x), gy = group_of(J, y);
    int64_t fx = J->ts[gx].mt->flops, fy = J->ts[gy].mt->flops;
    if (fx != fy) return (fx < fy) - (fx > fy);
    if (gx != gy) return (gx > gy) - (gx < gy);
    return (x > y) - (x < y);
}

static wpk_status schedule(job *J) {
    tstate **order = wpk_calloc((size_t)J->n + 1, sizeof *order);
    if (!order) return wpk_error(J->ctx, WPK_ERR_NOMEM, "out of memory scheduling tasks");
    for (int i = 0; i < J->n; i++) order[i] = &J->ts[i];
    qsort(order, (size_t)J->n, sizeof *order, by_weight);
    wpk_status st = WPK_OK;
    const bool ahead = runs_ahead(J);
    int pending = -1;
    if (J->opt->time_s <= 0) {
        /* a trial budget per task: the heaviest first, each to its end */
        for (int i = 0; st == WPK_OK && i < J->n; i++) {
            tstate *t = order[i];
            st = step(J, t, INT64_MAX, ahead);
            if (st || !ends_group(J, order, J->n, i)) continue;
            /* the last of its group: the group's finals; with a runner that runs ahead, those
               of the group before it (whose tail has come in while this one ran) */
            if (!ahead) {
                st = finish_with_group(J, order, i + 1, t);
            } else {
                if (pending >= 0) st = finish_group_async(J, order, pending + 1, order[pending]);
                pending = i;
            }
        }
        if (st == WPK_OK && pending >= 0)
            st = finish_group_async(J, order, pending + 1, order[pending]);
        if (st == WPK_OK && ahead) st = J->opt->runner->settle(J->opt->runner->self, -1);
        if (st == WPK_OK) st = J->db_status;
        wpk_free(order);
        return st;
    }
    /* a round over every task, the heaviest first: its default, which gives its time in the
       model; then by expected gain, which takes a young task's room as large, so the next
       batches go to the tasks with the largest share of the latency (not a batch to every
       task: a model of 57 tasks would spend a third of 5 minutes on that). A step starts only
       when it should end before the budget, less what the final re-measurements will take. */
    const double end = J->start + J->opt->time_s;
    for (int i = 0; st == WPK_OK && i < J->n; i++)
        if (fits(J, order[i], end)) st = step(J, order[i], 1, ahead);
    tune_task_view *views = wpk_calloc((size_t)J->n + 1, sizeof *views);
    if (!views) st = wpk_error(J->ctx, WPK_ERR_NOMEM, "out of memory scheduling tasks");
    while (st == WPK_OK) {
        for (int i = 0; i < J->n; i++) views[i] = view_of(order[i]);
        int pick = tune_task_pick(views, J->n, J->opt->batch);
        if (pick < 0 || !fits(J, order[pick], end)) break;
        /* with a runner that runs ahead, a task's last results may still be out: its gain
           is judged on what is in */
        st = step(J, order[pick], J->opt->batch, ahead);
    }
    wpk_free(views);
    for (int i = 0; st == WPK_OK && i < J->n; i++)
        if (ends_group(J, order, J->n, i))
            st = ahead ? finish_group_async(J, order, i + 1, order[i])
                       : finish_with_group(J, order, i + 1, order[i]);
    if (st == WPK_OK && ahead) st = J->opt->runner->settle(J->opt->runner->self, -1);
    if (st == WPK_OK) st = J->db_status;
    wpk_free(order);
    return st;
}

/* ---- the job ---- */

void tune_summary_free(tune_summary *s) {
    if (!s) return;
    for (int i = 0; s->tasks && i < s->ntasks; i++) wpk_free(s->tasks[i].curve);
    wpk_free(s->tasks);
    memset(s, 0, sizeof *s);
}

/* The constant inputs of the model's nodes that the tasks stand for (each primary task's
 * times its node count; alternatives are the same nodes). */
int64_t tune_constant_bytes(const tune_model_task *tasks, int ntasks) {
    int64_t total = 0;
    for (int i = 0; i < ntasks; i++) {
        if (tasks[i].alt_of >= 0) continue;
        for (int k = 0; k < tasks[i].task.nin; k++)
            if (tasks[i].task.in[k].data)
                total += (int64_t)tasks[i].count * (int64_t)ir_nbytes(&tasks[i].task.in[k]);
    }
    return total;
}

wpk_status tune_run(wpk_context *ctx, tune_db *db, const tune_model_task *tasks, int ntasks,
                    const tune_options *opt, tune_summary *out) {
    memset(out, 0, sizeof *out);
    tune_options o = opt ? *opt : tune_default_options();
    if (!o.strategy) o.strategy = "ga";
    if (o.batch < 1) o.batch = 8;
    if (o.batch > TUNE_MAX_BATCH) o.batch = TUNE_MAX_BATCH;
    if (o.trials <= 0 && o.time_s <= 0)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "tuning needs a budget: trials per task or a "
                         "time");
    snprintf(out->strategy, sizeof out->strategy, "%s", o.strategy);
    job J = {.ctx = ctx, .db = db, .opt = &o, .out = out, .n = ntasks, .start = now_s()};
    J.target = o.target ? o.target : target_fingerprint();
    snprintf(J.toolchain, sizeof J.toolchain, "%s%s",
             o.toolchain ? o.toolchain : tune_toolchain(),
             o.measure.clock == TUNE_CLOCK_CPU ? "; timed by the busiest thread's CPU time" : "");
    int threads = o.measure.threads;
    tune_parallelism_init(&J.par, o.parallel, threads);
    out->tasks = wpk_calloc((size_t)ntasks + 1, sizeof *out->tasks);
    J.ts = wpk_calloc((size_t)ntasks + 1, sizeof *J.ts);
    wpk_status st = out->tasks && J.ts ? WPK_OK
                                       : wpk_error(ctx, WPK_ERR_NOMEM, "out of memory tuning");
    if (st == WPK_OK) out->ntasks = ntasks;
    for (int i = 0; st == WPK_OK && i < ntasks; i++) {
        tstate *t = &J.ts[i];
        tune_task_summary *s = &out->tasks[i];
        t->mt = &tasks[i];
        t->job = &J;
        t->sum = s;
        s->key = tasks[i].task.key;
        s->template_name = tasks[i].task.tmpl->name;
        s->count = tasks[i].count;
        s->flops = tasks[i].task.flops;
        s->share = tasks[i].share;
    }
    /* a model whose weights outgrow the cache has every layer's evicted by the others' before
       it runs again: time every candidate so */
    out->constant_bytes = tune_constant_bytes(tasks, ntasks);
    if (o.measure.cold_bytes >= 0 && out->constant_bytes > o.measure.cold_bytes) {
        o.measure.cold_bytes = 0;
        out->cold = true;
    }
    char policy_path[4096] = "";
    if (st == WPK_OK && !strcmp(o.strategy, "rl")) {
        if (o.rl_policy) snprintf(policy_path, sizeof policy_path, "%s", o.rl_policy);
        else tune_rl_policy_path(tune_db_path(db), policy_path, sizeof policy_path);
        J.policy = tune_rl_policy_load(ctx, policy_path);
        if (!J.policy) st = WPK_ERR_NOMEM;
    }
    /* every task known before any is set up: priors read other tasks' features */
    for (int i = 0; st == WPK_OK && i < ntasks; i++) st = task_setup(&J, &J.ts[i]);
    if (st == WPK_OK) st = schedule(&J);
    /* what the policy learnt is kept also when the job failed: the records of its trials are */
    if (J.policy && tune_rl_policy_updates(J.policy) > 0) {
        wpk_context quiet = {0};
        if (tune_rl_policy_save(&quiet, J.policy, policy_path) != WPK_OK)
            wpk_log(ctx, WPK_LOG_WARN, "%s (the records are kept; the next run starts from the "
                    "policy as it was)", wpk_context_error(&quiet));
        else
            wpk_log(ctx, WPK_LOG_INFO, "rl policy saved to '%s' (%d entries, %lld updates)",
                    policy_path, tune_rl_policy_size(J.policy),
                    (long long)tune_rl_policy_updates(J.policy));
    }
    for (int i = 0; J.ts && i < ntasks; i++) {
        tune_measurer_free(J.ts[i].meas);
        tune_strategy_free(J.ts[i].strat);
        if (J.ts[i].feat) {
            int64_t n;
            double sec;
            tune_featurizer_cost(J.ts[i].feat, &n, &sec);
            wpk_log(ctx, WPK_LOG_DEBUG, "%s: %lld configs lowered for features and pruning in "
                    "%.2f s", J.ts[i].mt->task.key, (long long)n, sec);
        }
        tune_featurizer_free(J.ts[i].feat);
        wpk_free(J.ts[i].prior_x);
        wpk_free(J.ts[i].prior_sec);
        wpk_free(J.ts[i].prior_cfgs);
    }
    wpk_free(J.ts);
    tune_rl_policy_free(J.policy);
    out->seconds = now_s() - J.start;
    out->parallel = J.par;
    return st;
}
