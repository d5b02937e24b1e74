/* measure_stream.c -- the measurer's event loop and its parallelism policy (see measure.h).
 *
 * Candidates stream through build slots (forked build workers, kept full: a config whose C
 * takes a minute to compile holds one slot while the others go on) into measurements. With
 * several build workers a pool of waiting candidates is kept and the one expected to build
 * longest starts first (build costs learned per knob value), so that no long compile is left
 * to run alone at the end; a build's deadline counts CPU time, so builds starved of cores
 * are not cut short (measure.c). At
 * level 0 a measurement runs alone: every build worker's process group is paused with
 * SIGSTOP for as long as it runs and continued after, its deadline moved by the pause. At
 * level L >= 1 measurements run beside the builds in L slots, and results are held in
 * windows: each window re-times the control candidate under the same concurrency and
 * compares it with its time alone; within tolerance the window's results are delivered,
 * beyond it (or when timeouts and crashes rise above what kernels timed alone show) the
 * level is cut and the window's timings are re-taken at the lower level. The automatic
 * policy tries one level higher after a few untroubled windows, waiting longer after each
 * failed try (DOPpler: raise while accuracy holds, cut when errors or failures rise). Build
 * workers are halved when builds die of causes that are not the candidate's (timeouts,
 * SIGKILL) and raised back, one at a time, while they do not. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "tune/measure_impl.h"

/* Results judged by one control re-timing at level >= 1; also the unit the policy counts. */
#define WINDOW 8
/* Untroubled windows before trying the next level. */
#define PROMOTE_AFTER 2
/* Windows between fresh timings of the control alone. */
#define BASELINE_EVERY 4
/* A window of builds where this share died of causes not the candidate's halves them. */
#define SYS_FAIL_SHARE 0.25
/* Built candidates waiting for their measurement, beyond one per build slot. */
#define LOOKAHEAD 1
/* Candidates waiting for a build slot, with several build workers: what the order builds
 * start in is chosen from (a strategy's batch). */
#define POOL 8

typedef enum ctrl_phase { C_NONE, C_ALONE, C_CONC, C_DONE } ctrl_phase;

typedef struct stream {
    tune_measurer *m;
    tune_parallelism *par;
    tune_propose_fn propose;
    void *puser;
    tune_measure_fn fn;
    void *user;
    bool alone;            /* TUNE_MEASURE_ALONE: level 0 throughout, no promotion */
    bool exhausted;        /* propose has no more */
    tune_job **jobs;       /* candidates in flight or held (owned) */
    int n, cap;
    int next_index;
    int level;             /* of the current window */
    bool promoting;        /* the current window tries a level above par->level */
    ctrl_phase ctrl;       /* the control's part in the current window (level >= 1) */
    int held;              /* results of the current window waiting for its verdict */
    bool paused;           /* build workers stopped for a measurement alone */
    double paused_at;
    int builds_done, sys_fails;
} stream;

/* ---- jobs ---- */

static int count(const stream *S, tune_job_state st) {
    int c = 0;
    for (int i = 0; i < S->n; i++) c += S->jobs[i]->state == st;
    if (S->ctrl != C_NONE && S->m->control.state == st) c++;
    return c;
}

/* Forget job i, keeping the others in the order they came (builds start in that order). */
static void drop(stream *S, int i) {
    tune_job_clear(S->jobs[i]);
    wpk_free(S->jobs[i]);
    memmove(&S->jobs[i], &S->jobs[i + 1], sizeof *S->jobs * (size_t)(S->n - i - 1));
    S->n--;
}

static void deliver(stream *S, tune_job *j) {
    if (S->fn) S->fn(S->user, j->index, &j->cfg, &j->res);
}

/* Ask for configs while build slots (and the lookahead) have room. */
static wpk_status refill(stream *S) {
    tune_parallelism *par = S->par;
    while (!S->exhausted) {
        int waiting = 0, built = 0;
        for (int i = 0; i < S->n; i++) {
            tune_job_state st = S->jobs[i]->state;
            waiting += st == J_NEW || st == J_BUILDING;
            built += st == J_BUILT;
        }
        int room = par->builds + (par->builds > 1 ? POOL : 0) - waiting;
        if (room <= 0 || built >= par->builds + LOOKAHEAD || S->n >= TUNE_MAX_BATCH) break;
        if (room > TUNE_MAX_BATCH - S->n) room = TUNE_MAX_BATCH - S->n;
        tune_config cfgs[TUNE_MAX_BATCH];
        int got = S->propose(S->puser, cfgs, room);
        if (got <= 0) {
            S->exhausted = true;
            break;
        }
        if (got > room) got = room;
        for (int k = 0; k < got; k++) {
            if (S->n == S->cap) {
                int cap = S->cap ? 2 * S->cap : 16;
                tune_job **nj = wpk_realloc(S->jobs, sizeof *nj * (size_t)cap);
                if (!nj) return wpk_error(S->m->ctx, WPK_ERR_NOMEM, "out of memory measuring");
                S->jobs = nj;
                S->cap = cap;
            }
            tune_job *j = wpk_calloc(1, sizeof *j);
            if (!j) return wpk_error(S->m->ctx, WPK_ERR_NOMEM, "out of memory measuring");
            j->index = S->next_index++;
            j->cfg = cfgs[k];
            tune_measurer_text(S->m, &cfgs[k], j->text, sizeof j->text);
            j->res.error = -1;
            S->jobs[S->n++] = j;
        }
    }
    return WPK_OK;
}

/* ---- the order builds start in ---- */

/* What a build costs is learned per knob value: the log of its CPU seconds (compiler
 * included), so that a knob value that makes compiles ten times longer (wide vectors, deep
 * unrolling) stands out whatever else the config holds. */
static void learn_build(tune_measurer *m, const tune_job *j) {
    if (j->sys_fail || j->build.cpu_total <= 0) return;
    double c = log(j->build.cpu_total + 0.01);
    for (int k = 0; k < m->space.nknobs; k++) {
        int v = j->cfg.choice[k];
        if (v < 0 || v >= TUNE_MAX_VALUES) continue;
        m->build_log_sum[k][v] += c;
        m->build_count[k][v]++;
    }
    m->build_log_total += c;
    m->build_total++;
}

/* The expected log cost of building cfg: the mean over every build, moved by each of its knob
 * values' mean (shrunk towards the overall mean: one build says little). 0 before any. */
static double build_cost(const tune_measurer *m, const tune_config *cfg) {
    if (m->build_total == 0) return 0;
    double mean = m->build_log_total / m->build_total, cost = mean;
    for (int k = 0; k < m->space.nknobs; k++) {
        int v = cfg->choice[k];
        if (v < 0 || v >= TUNE_MAX_VALUES) continue;
        cost += (m->build_log_sum[k][v] + mean) / (m->build_count[k][v] + 1) - mean;
    }
    return cost;
}

/* The waiting candidate to build next. With one build worker the first: the order changes
 * nothing. With several the one expected to build longest (the first among equals): a long
 * compile started last would hold the whole job up while the other workers sit idle. */
static tune_job *next_to_build(stream *S) {
    tune_job *best = NULL;
    double best_cost = 0;
    for (int i = 0; i < S->n; i++) {
        tune_job *j = S->jobs[i];
        if (j->state != J_NEW) continue;
        if (S->par->builds <= 1) return j;
        double c = build_cost(S->m, &j->cfg);
        if (!best || c > best_cost) best = j, best_cost = c;
    }
    return best;
}

/* ---- pausing builds for a measurement alone ---- */

static void each_build(stream *S, void (*fn)(stream *, tune_proc *)) {
    for (int i = 0; i < S->n; i++)
        if (S->jobs[i]->state == J_BUILDING) fn(S, &S->jobs[i]->build);
    if (S->ctrl != C_NONE && S->m->control.state == J_BUILDING) fn(S, &S->m->control.build);
}

static void stop_one(stream *S, tune_proc *p) {
    (void)S;
    if (p->stopped || p->killed) return;
    kill(-p->pid, SIGSTOP);
    p->stopped = true;
    p->stopped_at = tune_now();
}

static void cont_one(stream *S, tune_proc *p) {
    (void)S;
    tune_proc_resume(p);
}

static void pause_builds(stream *S) {
    each_build(S, stop_one);
    S->paused = true;
}

static void resume_builds(stream *S) {
    each_build(S, cont_one);
    S->paused = false;
}

/* ---- starting children ---- */

static bool start_build(stream *S, tune_job *j) {
    if (!tune_proc_start(S->m, &j->build, S->m->params.build_timeout_s, tune_build_child, j))
        return false;
    /* builds share the cores with each other and with whatever else runs: a compiler given
       half a core takes twice as long without being any nearer a hang */
    j->build.cpu_limit = S->m->params.build_timeout_s;
    j->state = J_BUILDING;
    return true;
}

static bool start_run(stream *S, tune_job *j, bool alone) {
    if (alone) pause_builds(S);
    if (!tune_proc_start(S->m, &j->run, S->m->params.run_timeout_s, tune_run_child, j)) {
        if (alone) resume_builds(S);
        return false;
    }
    j->alone = alone;
    j->res.level = alone ? 0 : S->level;
    j->state = J_RUNNING;
    return true;
}

static wpk_status no_process(stream *S, const char *what) {
    return wpk_error(S->m->ctx, WPK_ERR_IO, "cannot start %s: %s", what, strerror(errno));
}

static wpk_status start_builds(stream *S) {
    if (S->paused) return WPK_OK;
    tune_job *c = &S->m->control;
    if (S->ctrl != C_NONE && S->n > 0 && c->state == J_NEW && count(S, J_BUILDING) < S->par->builds &&
        !start_build(S, c) && count(S, J_BUILDING) + count(S, J_RUNNING) == 0)
        return no_process(S, "a build worker");
    while (count(S, J_BUILDING) < S->par->builds) {
        tune_job *j = next_to_build(S);
        if (!j) break;
        if (!start_build(S, j)) {
            if (count(S, J_BUILDING) + count(S, J_RUNNING) > 0) break; /* after one ends */
            return no_process(S, "a build worker");
        }
    }
    return WPK_OK;
}

static wpk_status start_runs(stream *S) {
    int running = count(S, J_RUNNING);
    tune_job *c = &S->m->control;
    if (S->level == 0 || S->ctrl == C_ALONE) {
        /* one at a time, builders paused: the control's time alone first when due */
        if (running) return WPK_OK;
        tune_job *j = NULL;
        if (S->ctrl == C_ALONE) {
            /* being built, or no candidate to judge yet */
            if (c->state != J_BUILT || S->n == 0) return WPK_OK;
            j = c;
        } else {
            for (int i = 0; i < S->n && !j; i++)
                if (S->jobs[i]->state == J_BUILT) j = S->jobs[i];
        }
        if (j && !start_run(S, j, true)) return no_process(S, "a measurement");
        return WPK_OK;
    }
    /* overlapped: the control under the window's concurrency (beside builds when there are
       any), then candidates, in `level` slots */
    if (S->ctrl == C_CONC && c->state == J_BUILT && running < S->level && S->n > 0) {
        bool builds_pending = false;
        for (int i = 0; i < S->n; i++) builds_pending |= S->jobs[i]->state == J_NEW;
        if (count(S, J_BUILDING) > 0 || (!builds_pending && S->exhausted) ||
            S->held + count(S, J_BUILT) >= WINDOW) {
            if (!start_run(S, c, false)) return running ? WPK_OK : no_process(S, "a measurement");
            running++;
        }
    }
    for (int i = 0; i < S->n && running < S->level; i++) {
        tune_job *j = S->jobs[i];
        if (j->state != J_BUILT) continue;
        if (!start_run(S, j, false)) return running ? WPK_OK : no_process(S, "a measurement");
        running++;
    }
    return WPK_OK;
}

/* ---- the policy ---- */

static void adjust_builds(stream *S) {
    tune_parallelism *par = S->par;
    if (!par->automatic || S->builds_done < WINDOW) return;
    if ((double)S->sys_fails / S->builds_done >= SYS_FAIL_SHARE) {
        par->builds = par->builds > 1 ? par->builds / 2 : 1;
        par->clean_builds = 0;
    } else if (++par->clean_builds >= 3 && par->builds < par->max_builds) {
        par->builds++;
        par->clean_builds = 0;
    }
    S->builds_done = S->sys_fails = 0;
}

/* Start a window at par's level, or one above it when a promotion is due. */
static void open_window(stream *S) {
    tune_parallelism *par = S->par;
    tune_measurer *m = S->m;
    S->level = S->alone || !m->has_control ? 0 : par->level;
    S->promoting = false;
    if (!S->alone && m->has_control && par->automatic && par->level < par->max_level &&
        par->wait == 0 && par->clean >= PROMOTE_AFTER) {
        S->level = par->level + 1;
        S->promoting = true;
    }
    S->held = 0;
    if (S->level == 0) {
        S->ctrl = C_NONE;
        return;
    }
    /* the control: built once per measurer (its source kept), timed alone when its time
       alone is stale, then under the window's concurrency */
    tune_job *c = &m->control;
    c->state = c->source ? J_BUILT : J_NEW;
    c->index = -1;
    bool stale = S->promoting || m->baseline_s <= 0 || m->since_baseline >= BASELINE_EVERY;
    S->ctrl = stale ? C_ALONE : C_CONC;
    m->since_baseline++;
}

/* Kernels that time out or crash more often beside builds than alone. */
static bool failures_rose(const stream *S) {
    int bad = 0, ran = 0;
    for (int i = 0; i < S->n; i++) {
        const tune_job *j = S->jobs[i];
        if (j->state != J_DONE) continue;
        ran++;
        bad += j->res.status == TUNE_TIMEOUT || j->res.status == TUNE_CRASH;
    }
    return ran > 0 && (double)bad / ran > S->m->fail_rate_alone + 0.2;
}

/* The verdict on a window at level >= 1: deliver its results, or cut the level and re-time
 * them below it. */
static void close_window(stream *S) {
    tune_parallelism *par = S->par;
    tune_measurer *m = S->m;
    const tune_measurement *c = &m->control.res;
    double err = c->status == TUNE_OK && m->baseline_s > 0 ? fabs(c->median / m->baseline_s - 1.0)
                                                            : INFINITY;
    par->last_error = err;
    bool ok = err <= par->tolerance && !failures_rose(S);
    if (ok) {
        if (S->promoting) par->level = S->level, par->promotions++;
        par->clean++;
        if (par->wait > 0) par->wait--;
    } else {
        par->level = S->level - 1;
        par->wait = par->backoff;
        par->backoff *= 2;
        par->clean = 0;
        par->demotions++;
    }
    for (int i = 0; i < S->n;) {
        tune_job *j = S->jobs[i];
        if (j->state != J_DONE) {
            i++;
            continue;
        }
        if (!ok && (j->res.status == TUNE_OK || j->res.status == TUNE_TIMEOUT)) {
            j->state = J_BUILT; /* its timing is not to be trusted: again, lower */
            par->remeasured++;
            i++;
            continue;
        }
        deliver(S, j);
        drop(S, i);
    }
    m->control.state = J_DONE;
    open_window(S);
}

/* A level-0 result: delivered at once; every WINDOW of them is a step of the policy. */
static void level0_result(stream *S, tune_job *j, int i) {
    tune_measurer *m = S->m;
    if (!S->alone && j->res.status != TUNE_COMPILE_ERROR) {
        bool bad = j->res.status == TUNE_TIMEOUT || j->res.status == TUNE_CRASH;
        m->fail_rate_alone = 0.9 * m->fail_rate_alone + 0.1 * (bad ? 1.0 : 0.0);
    }
    deliver(S, j);
    drop(S, i);
    if (S->alone || S->level != 0 || ++S->par->counted < WINDOW) return;
    S->par->counted = 0;
    S->par->clean++;
    if (S->par->wait > 0) S->par->wait--;
    open_window(S);
}

/* ---- the loop ---- */

static void on_end(stream *S, tune_job *j) {
    tune_measurer *m = S->m;
    if (j->state == J_BUILDING) {
        tune_job_finish_build(m, j);
        learn_build(m, j);
        S->builds_done++;
        S->sys_fails += j->sys_fail;
        adjust_builds(S);
    } else {
        bool alone = j->alone;
        tune_job_finish_run(m, j);
        if (alone) resume_builds(S);
    }
    if (j == &m->control) {
        if (j->state != J_DONE) return; /* built: its runs come next */
        if (j->res.status != TUNE_OK) {
            /* a control that cannot run judges nothing: alone from now on */
            m->has_control = false;
            S->ctrl = C_DONE;
        } else if (S->ctrl == C_ALONE) {
            m->baseline_s = j->res.median;
            m->since_baseline = 0;
            S->ctrl = C_CONC;
            j->state = J_BUILT;
        } else {
            S->ctrl = C_DONE;
        }
        return;
    }
    if (j->state != J_DONE) return;
    int i = 0;
    while (S->jobs[i] != j) i++;
    /* a build failure says nothing about timing, and a run alone needs no verdict */
    if (j->res.level == 0 || j->run.start == 0) {
        level0_result(S, j, i);
    } else if (S->level == 0) {
        /* timed beside builds in a window that has closed since (the level was cut or the
           window filled while it ran), now that measurements run alone: again, alone */
        if (j->res.status == TUNE_OK || j->res.status == TUNE_TIMEOUT) {
            j->state = J_BUILT;
            S->par->remeasured++;
        } else {
            level0_result(S, j, i);
        }
    } else {
        S->held++;
    }
}

static bool window_closes(const stream *S) {
    if (S->level == 0 || S->ctrl != C_DONE) return false;
    int active = 0;
    for (int i = 0; i < S->n; i++) active += S->jobs[i]->state != J_DONE;
    return S->held >= WINDOW || (active == 0 && S->exhausted && S->held > 0);
}

static void kill_all(stream *S) {
    for (int i = 0; i < S->n; i++) {
        tune_job *j = S->jobs[i];
        tune_proc *p = j->state == J_BUILDING ? &j->build : j->state == J_RUNNING ? &j->run : NULL;
        if (p) {
            tune_proc_kill(p);
            tune_proc_reap(p);
        }
    }
    tune_job *c = &S->m->control;
    if (S->ctrl != C_NONE && (c->state == J_BUILDING || c->state == J_RUNNING)) {
        tune_proc *p = c->state == J_BUILDING ? &c->build : &c->run;
        tune_proc_kill(p);
        tune_proc_reap(p);
        c->state = J_DONE;
    }
}

static wpk_status run_stream(stream *S) {
    struct pollfd pf[TUNE_MAX_BATCH + 2];
    tune_job *whose[TUNE_MAX_BATCH + 2];
    int stalls = 0;
    open_window(S);
    for (;;) {
        wpk_status st = refill(S);
        if (st == WPK_OK) st = start_builds(S);
        if (st == WPK_OK) st = start_runs(S);
        if (st) {
            kill_all(S);
            return st;
        }
        if (window_closes(S)) {
            close_window(S);
            continue;
        }
        int np = 0;
        double now = tune_now(), next = now + 3600;
        tune_job *c = &S->m->control;
        for (int i = 0; i <= S->n; i++) {
            tune_job *j = i < S->n ? S->jobs[i] : S->ctrl != C_NONE ? c : NULL;
            if (!j) continue;
            tune_proc *p = j->state == J_BUILDING ? &j->build : j->state == J_RUNNING ? &j->run
                                                                                    : NULL;
            if (!p) continue;
            if (!p->stopped && tune_proc_expired(p, now)) tune_proc_kill(p);
            double dl = p->stopped ? now + 3600 : p->killed ? now + 1 : p->deadline;
            if (dl < next) next = dl;
            pf[np] = (struct pollfd){p->fd, POLLIN, 0};
            whose[np++] = j;
        }
        if (np == 0) {
            if (S->n == 0 && S->exhausted) break;
            /* nothing runs and nothing could start: a window whose control cannot run is
               judged failed (its results are re-timed alone); anything else is a bug */
            if (S->level > 0 && S->ctrl != C_DONE && S->ctrl != C_NONE) {
                S->ctrl = C_DONE;
                S->m->control.res.status = TUNE_CRASH;
                continue;
            }
            if (S->level > 0 && S->held > 0) {
                close_window(S);
                continue;
            }
            if (++stalls > 2) {
                kill_all(S);
                return wpk_error(S->m->ctx, WPK_ERR_INTERNAL, "the measurer stalled with %d "
                                 "candidates in flight", S->n);
            }
            continue;
        }
        stalls = 0;
        int wait_ms = (int)((next - now) * 1000) + 1, cap_ms = 1000;
        if (S->m->idle) {
            S->m->idle(S->m->idle_user);
            cap_ms = TUNE_IDLE_MS;
        }
        int r = poll(pf, (nfds_t)np, wait_ms < 1 ? 1 : wait_ms > cap_ms ? cap_ms : wait_ms);
        if (r <= 0) continue;
        for (int k = 0; k < np; k++) {
            if (!(pf[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            tune_job *j = whose[k];
            if (tune_proc_read(j->state == J_BUILDING ? &j->build : &j->run)) on_end(S, j);
        }
    }
    return WPK_OK;
}

wpk_status tune_measure_stream(tune_measurer *m, tune_propose_fn propose, void *propose_user,
                               int flags, tune_measure_fn fn, void *user) {
    stream S = {.m = m, .par = m->par, .propose = propose, .puser = propose_user, .fn = fn,
                .user = user, .alone = (flags & TUNE_MEASURE_ALONE) != 0};
    wpk_status st = run_stream(&S);
    for (int i = 0; i < S.n; i++) {
        tune_job_clear(S.jobs[i]);
        wpk_free(S.jobs[i]);
    }
    wpk_free(S.jobs);
    if (m->control.state == J_BUILDING || m->control.state == J_RUNNING) m->control.state = J_DONE;
    return st;
}

typedef struct array_source {
    const tune_config *cfgs;
    int n, next;
} array_source;

static int from_array(void *user, tune_config *out, int max) {
    array_source *a = user;
    int k = 0;
    while (k < max && a->next < a->n) out[k++] = a->cfgs[a->next++];
    return k;
}

wpk_status tune_measure_batch(tune_measurer *m, const tune_config *configs, int n, int flags,
                              tune_measure_fn fn, void *user) {
    array_source a = {configs, n, 0};
    return tune_measure_stream(m, from_array, &a, flags, fn, user);
}
