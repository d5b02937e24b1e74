/* fleet_mpi.c -- the tuner's runner over MPI ranks (fleet.h): rank 0's side hands candidates
 * and finalists' re-measurements out and gathers results between its own measurements; the
 * other ranks' side measures what it is sent, with a heartbeat thread that tells rank 0 the
 * rank is alive while it builds. */
#include "tune/fleet.h"

#include <mpi.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/context.h"
#include "base/target_fingerprint.h"

/* Candidates a remote rank holds at once: the one it measures and the next, so that it never
 * waits for rank 0 between them (rank 0 serves between its own builds' polls, and its
 * strategies may be busy then). A task's tail does not hold the fleet up: the next task
 * starts while it is out. */
#define DEPTH 2
#define HEARTBEAT_S 1.0
/* Results a remote rank has on their way to rank 0 at most. */
#define OUTBOX 4
/* A rank waiting for messages looks this often (it must not sit in a blocking receive while
 * the heartbeat thread needs MPI). */
#define POLL_S 0.005

enum { TAG_HELLO = 1, TAG_VERDICT, TAG_WORK, TAG_RESULT, TAG_HEARTBEAT, TAG_STOP, TAG_FINALS };

typedef struct hello_msg {
    char target[256];
    char toolchain[640];
    char host[64];
    int32_t ntasks, pid;
    uint64_t tasks_hash;
} hello_msg;

typedef struct verdict_msg {
    int32_t accepted;
    char why[512];
} verdict_msg;

typedef struct work_msg {
    int64_t seq;
    int32_t task;
    char config[512];
} work_msg;

/* Re-measure these configs alone, in rounds (tuner.h's remeasure). */
typedef struct finals_msg {
    int64_t seq;
    int32_t n, rounds;
    int32_t task[TUNE_REMEASURE_MAX];
    char config[TUNE_REMEASURE_MAX][512];
} finals_msg;

typedef struct result_msg {
    int64_t seq;
    int32_t item, round;      /* of a re-measurement: which config, which round */
    double busy_s;            /* the rank's time spent measuring since it joined */
    int32_t status, nsamples, level, cold;
    int32_t failed;           /* the rank cannot measure the task at all (message says why) */
    int64_t calls_per_sample;
    double median, error, build_s, run_s;
    double samples[TUNE_MAX_SAMPLES];
    char message[640];
} result_msg;

typedef struct held {
    int64_t seq;
    int task;
    tune_config cfg;
} held;

/* A task's stream as rank 0 knows it; it outlives the runner's stream call while candidates
 * of it are out. */
typedef struct stream_state {
    tune_propose_fn propose;
    void *puser;
    tune_measure_fn fn;
    void *user;
    tune_measurer *local;
    bool exhausted;           /* propose gave nothing: never asked again */
    int out;                  /* candidates on other ranks */
} stream_state;

/* A re-measurement job (remeasure): queued, out on a rank, or being measured by rank 0. */
typedef struct final_job {
    tune_remeasure_item items[TUNE_REMEASURE_MAX];
    int n, rounds;
    tune_measure_fn fn;
    void (*done)(void *user);
    void *user;
    int64_t seq;
    tune_measurement *got;    /* [round * n + item] from a remote rank */
    int ngot;
} final_job;

typedef struct rank_state {
    bool accepted, lost;
    char target[256], toolchain[640], host[64];
    int pid;
    held inflight[DEPTH];
    int n;
    final_job *finals;        /* out on this rank */
    /* Messages to it while their sends are in progress: rank 0 does not wait for a rank to
       take them (Open MPI's send waits for a busy receiver to call MPI, and a stopped rank
       never does) */
    work_msg outbox[DEPTH];
    MPI_Request outreq[DEPTH];    /* MPI_REQUEST_NULL: the slot is free */
    finals_msg *sending;
    MPI_Request send_req;
    double last_heard;
    int64_t results;
    double busy_s;            /* as it last said */
} rank_state;

/* Where rank 0's time goes (seconds): its measurer's streams, its own re-measurements,
 * waiting for others' results (wall time); inside those, the CPU time of its bookkeeping: the
 * strategies (propose), storing results and telling the strategies, and MPI serving (CPU
 * time, since on a loaded core the wall time of many short calls is mostly preemption). */
typedef struct time_split {
    double measuring, finals, waiting;
    double strategy, records, serving;
} time_split;

struct tune_fleet {
    wpk_context *ctx;
    int rank, size;
    double lease_s;
    rank_state *ranks;        /* rank 0: every rank's state */
    tune_runner runner;
    double opened;
    int64_t next_seq;
    /* rank 0 */
    const tune_model_task *tasks;
    int ntasks;
    int task;                 /* whose stream is open (-1: none) */
    tune_space *spaces;       /* per task */
    stream_state *streams;    /* per task */
    held *requeue;            /* candidates of lost ranks, handed out again first */
    int nrequeue, caprequeue;
    final_job **finals;       /* re-measurements queued (rank -1) */
    int nfinals, capfinals;
    int finals_out;           /* jobs out on other ranks */
    time_split t;
    /* a serving rank: MPI calls from its two threads take turns */
    pthread_mutex_t lock;
    bool beating;
    pthread_t beat;
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void nap(double s) {
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&t, NULL);
}

static void final_job_free(final_job *j) {
    if (!j) return;
    wpk_free(j->got);
    wpk_free(j);
}

static uint64_t hash_text(uint64_t h, const char *s) {
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (h ^ 0xff) * 1099511628211ULL;
}

/* What the tasks are (keys and templates, in order): ranks must agree on it. */
static uint64_t tasks_hash(const tune_model_task *tasks, int ntasks) {
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < ntasks; i++)
        h = hash_text(hash_text(h, tasks[i].task.key), tasks[i].task.tmpl->name);
    return h;
}

static void config_text(const tune_space *s, const tune_config *c, char *dst, size_t cap) {
    strbuf b = {0};
    tune_config_print(s, c, &b);
    snprintf(dst, cap, "%s", b.s ? b.s : "");
    sb_free(&b);
}

/* The toolchain the records of this process name: as the tuner's own (tuner.c). */
static void toolchain_of(const tune_options *opt, char *dst, size_t cap) {
    snprintf(dst, cap, "%s%s", tune_toolchain(),
             opt->measure.clock == TUNE_CLOCK_CPU ? "; timed by the busiest thread's CPU time"
                                                  : "");
}

wpk_status tune_fleet_join(wpk_context *ctx, int *argc, char ***argv, double lease_s,
                           tune_fleet **out) {
    *out = NULL;
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "MPI could not start (MPI_Init_thread)");
    if (inited) MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_SERIALIZED) {
        MPI_Abort(MPI_COMM_WORLD, 2);
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "this MPI does not support threads "
                         "(MPI_THREAD_SERIALIZED), which the heartbeat needs");
    }
    tune_fleet *f = wpk_calloc(1, sizeof *f);
    if (!f) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory joining the MPI job");
    f->ctx = ctx;
    f->lease_s = lease_s > 0 ? lease_s : 60;
    MPI_Comm_rank(MPI_COMM_WORLD, &f->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &f->size);
    pthread_mutex_init(&f->lock, NULL);
    /* a failing MPI call returns its code instead of aborting the job */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    *out = f;
    return WPK_OK;
}

int tune_fleet_rank(const tune_fleet *f) { return f->rank; }
int tune_fleet_size(const tune_fleet *f) { return f->size; }

void tune_fleet_counts(const tune_fleet *f, int *accepted, int *lost) {
    *accepted = *lost = 0;
    for (int r = 0; f->ranks && r < f->size; r++) {
        *accepted += f->ranks[r].accepted;
        *lost += f->ranks[r].lost;
    }
}

void tune_fleet_leave(tune_fleet *f, int exit_code, bool abort) {
    if (!f) return;
    int accepted, lost;
    tune_fleet_counts(f, &accepted, &lost);
    if (f->beating) {
        pthread_mutex_lock(&f->lock);
        f->beating = false;
        pthread_mutex_unlock(&f->lock);
        pthread_join(f->beat, NULL);
    }
    for (int r = 0; f->ranks && r < f->size; r++) {
        final_job_free(f->ranks[r].finals);
        /* a lost rank's unfinished send keeps its buffer: MPI may still read it */
        if (f->ranks[r].lost) continue;
        for (int k = 0; k < DEPTH && f->ranks[r].accepted; k++)
            MPI_Wait(&f->ranks[r].outreq[k], MPI_STATUS_IGNORE);
        if (f->ranks[r].sending) {
            MPI_Wait(&f->ranks[r].send_req, MPI_STATUS_IGNORE);
            wpk_free(f->ranks[r].sending);
        }
    }
    for (int i = 0; i < f->nfinals; i++) final_job_free(f->finals[i]);
    wpk_free(f->finals);
    wpk_free(f->ranks);
    wpk_free(f->requeue);
    wpk_free(f->spaces);
    wpk_free(f->streams);
    pthread_mutex_destroy(&f->lock);
    wpk_context *ctx = f->ctx;
    wpk_free(f);
    if (lost)
        wpk_log(ctx, WPK_LOG_WARN, "%d rank%s left out while tuning cannot take part in ending "
                "the job: ending it with MPI_Abort (the records are complete)", lost,
                lost == 1 ? " was" : "s were");
    if (lost || abort) {
        fflush(NULL);
        MPI_Abort(MPI_COMM_WORLD, exit_code);
    }
    MPI_Finalize();
}

/* ---- rank 0 ---- */

static bool requeue_push(tune_fleet *f, const held *h) {
    if (f->nrequeue == f->caprequeue) {
        int cap = f->caprequeue ? 2 * f->caprequeue : 16;
        held *n = wpk_realloc(f->requeue, sizeof *n * (size_t)cap);
        if (!n) return false;
        f->requeue = n;
        f->caprequeue = cap;
    }
    f->requeue[f->nrequeue++] = *h;
    return true;
}

/* A candidate handed out again, of `task` (< 0: of any task). */
static bool requeue_take(tune_fleet *f, int task, held *out) {
    for (int i = f->nrequeue - 1; i >= 0; i--)
        if (task < 0 || f->requeue[i].task == task) {
            *out = f->requeue[i];
            f->requeue[i] = f->requeue[--f->nrequeue];
            return true;
        }
    return false;
}

static bool requeued(const tune_fleet *f, int task) {
    for (int i = 0; i < f->nrequeue; i++)
        if (f->requeue[i].task == task) return true;
    return false;
}

static bool finals_push(tune_fleet *f, final_job *j) {
    if (f->nfinals == f->capfinals) {
        int cap = f->capfinals ? 2 * f->capfinals : 8;
        final_job **n = wpk_realloc(f->finals, sizeof *n * (size_t)cap);
        if (!n) return false;
        f->finals = n;
        f->capfinals = cap;
    }
    f->finals[f->nfinals++] = j;
    return true;
}

/* The oldest queued re-measurement. */
static final_job *finals_pop(tune_fleet *f) {
    if (!f->nfinals) return NULL;
    final_job *j = f->finals[0];
    memmove(f->finals, f->finals + 1, sizeof *f->finals * (size_t)(--f->nfinals));
    return j;
}

/* The strategies' and the records' time is rank 0's bookkeeping: counted apart. */
static bool propose_one(tune_fleet *f, stream_state *s, tune_config *out) {
    if (s->exhausted) return false;
    const double t0 = cpu_s();
    bool got = s->propose(s->puser, out, 1) == 1;
    f->t.strategy += cpu_s() - t0;
    if (!got) s->exhausted = true;
    return got;
}

static void tell(tune_fleet *f, tune_measure_fn fn, void *user, int i, const tune_config *cfg,
                 const tune_measurement *r) {
    const double t0 = cpu_s();
    fn(user, i, cfg, r);
    f->t.records += cpu_s() - t0;
}

/* The next candidate for another rank: one handed out again first, else the open stream's. */
static bool next_remote(tune_fleet *f, held *out) {
    if (requeue_take(f, -1, out)) return true;
    if (f->task < 0) return false;
    out->task = f->task;
    return propose_one(f, &f->streams[f->task], &out->cfg);
}

static void lose(tune_fleet *f, int r, const char *why) {
    rank_state *s = &f->ranks[r];
    wpk_log(f->ctx, WPK_LOG_WARN, "rank %d (%s, pid %d) %s: left out, its %d candidate%s%s "
            "handed out again", r, s->host, s->pid, why, s->n, s->n == 1 ? "" : "s",
            s->finals ? " and a re-measurement" : "");
    for (int k = 0; k < s->n; k++) {
        f->streams[s->inflight[k].task].out--;
        if (!requeue_push(f, &s->inflight[k]))
            wpk_log(f->ctx, WPK_LOG_ERROR, "out of memory keeping rank %d's candidates", r);
    }
    s->n = 0;
    if (s->finals) {
        /* its partial results are dropped: the job is measured again, whole, elsewhere */
        s->finals->ngot = 0;
        f->finals_out--;
        if (!finals_push(f, s->finals)) {
            wpk_log(f->ctx, WPK_LOG_ERROR, "out of memory keeping rank %d's re-measurement", r);
            final_job_free(s->finals);
        }
        s->finals = NULL;
    }
    s->lost = true;
}

static void copy_result(tune_measurement *res, const result_msg *m, const rank_state *s) {
    res->status = (tune_status)m->status;
    res->median = m->median;
    res->nsamples = m->nsamples < 0 ? 0 : m->nsamples > TUNE_MAX_SAMPLES ? TUNE_MAX_SAMPLES
                                                                          : m->nsamples;
    memcpy(res->samples, m->samples, sizeof res->samples[0] * (size_t)res->nsamples);
    res->calls_per_sample = m->calls_per_sample;
    res->cold = m->cold != 0;
    res->error = m->error;
    res->build_s = m->build_s;
    res->run_s = m->run_s;
    res->level = m->level;
    snprintf(res->message, sizeof res->message, "%s", m->message);
    res->target = s->target;
    res->toolchain = s->toolchain;
}

/* A finished re-measurement's results, round by round, then its done. */
static void deliver(tune_fleet *f, final_job *j) {
    for (int round = 0; round < j->rounds; round++)
        for (int i = 0; i < j->n; i++)
            tell(f, j->fn, j->user, i, &j->items[i].cfg, &j->got[round * j->n + i]);
    const double t0 = cpu_s();
    j->done(j->user);
    f->t.records += cpu_s() - t0;
    final_job_free(j);
}

static void on_remote_final(tune_fleet *f, int r, const result_msg *m) {
    rank_state *s = &f->ranks[r];
    final_job *j = s->finals;
    if (m->failed) {
        char why[700];
        snprintf(why, sizeof why, "cannot re-measure finalists: %.600s", m->message);
        lose(f, r, why);
        return;
    }
    if (m->item < 0 || m->item >= j->n || m->round < 0 || m->round >= j->rounds) {
        lose(f, r, "sent the result of a re-measurement it was not given");
        return;
    }
    copy_result(&j->got[m->round * j->n + m->item], m, s);
    if (++j->ngot < j->n * j->rounds) return;
    s->finals = NULL;
    f->finals_out--;
    wpk_log(f->ctx, WPK_LOG_DEBUG, "fleet: %.2f s: rank %d: re-measured %d finalists",
            now_s() - f->opened, r, j->n);
    deliver(f, j);
}

static void on_remote_result(tune_fleet *f, int r, const result_msg *m) {
    rank_state *s = &f->ranks[r];
    s->last_heard = now_s();
    if (!s->accepted || s->lost) return; /* late: its candidates went elsewhere */
    if (m->busy_s > s->busy_s) s->busy_s = m->busy_s;
    if (s->finals && m->seq == s->finals->seq) {
        on_remote_final(f, r, m);
        return;
    }
    int k = 0;
    while (k < s->n && s->inflight[k].seq != m->seq) k++;
    if (k == s->n) return;
    if (m->failed) {
        char why[700];
        snprintf(why, sizeof why, "cannot measure task %d: %.600s", s->inflight[k].task,
                 m->message);
        lose(f, r, why);
        return;
    }
    held h = s->inflight[k];
    s->inflight[k] = s->inflight[--s->n];
    stream_state *ss = &f->streams[h.task];
    ss->out--;
    tune_measurement *res = wpk_calloc(1, sizeof *res);
    if (!res) {
        ss->out++;
        s->inflight[s->n++] = h;
        lose(f, r, "sent a result rank 0 had no memory for");
        return;
    }
    copy_result(res, m, s);
    s->results++;
    wpk_log(f->ctx, WPK_LOG_DEBUG, "fleet: %.2f s: rank %d: result of candidate %lld of task %d "
            "(build %.2f s, run %.2f s)", now_s() - f->opened, r, (long long)m->seq, h.task,
            m->build_s, m->run_s);
    tell(f, ss->fn, ss->user, 0, &h.cfg, res);
    wpk_free(res);
}

/* A slot of r's outbox whose send is over (-1: none). */
static int free_slot(rank_state *s) {
    for (int k = 0; k < DEPTH; k++) {
        int done = 0;
        if (s->outreq[k] == MPI_REQUEST_NULL ||
            (MPI_Test(&s->outreq[k], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done))
            return k;
    }
    return -1;
}

/* Hands the oldest queued re-measurement to rank r. */
static void send_finals(tune_fleet *f, int r) {
    final_job *j = f->finals[0];
    finals_msg *m = wpk_calloc(1, sizeof *m);
    if (!j->got) j->got = wpk_calloc((size_t)(j->n * j->rounds), sizeof *j->got);
    if (!m || !j->got) {
        wpk_free(m);
        return;
    }
    finals_pop(f);
    j->seq = f->next_seq++;
    j->ngot = 0;
    m->seq = j->seq;
    m->n = j->n;
    m->rounds = j->rounds;
    for (int i = 0; i < j->n; i++) {
        m->task[i] = j->items[i].task;
        config_text(&f->spaces[j->items[i].task], &j->items[i].cfg, m->config[i],
                    sizeof m->config[i]);
    }
    rank_state *s = &f->ranks[r];
    s->finals = j;
    f->finals_out++;
    wpk_log(f->ctx, WPK_LOG_DEBUG, "fleet: %.2f s: rank %d: re-measuring %d finalists of task "
            "%d", now_s() - f->opened, r, j->n, j->items[0].task);
    /* the configs it uses only; sent without waiting for the rank to take it, so that a hung
       rank cannot hold rank 0 up (its lease still runs) */
    const int bytes = (int)(offsetof(finals_msg, config) + sizeof m->config[0] * (size_t)j->n);
    if (MPI_Isend(m, bytes, MPI_BYTE, r, TAG_FINALS, MPI_COMM_WORLD, &s->send_req) !=
        MPI_SUCCESS) {
        wpk_free(m);
        lose(f, r, "could not be sent a re-measurement");
        return;
    }
    s->sending = m;
}

/* Results and heartbeats that have arrived, leases, and every remote rank's work topped up:
 * a re-measurement to a rank with room first, else candidates. With wait_s > 0, keeps at it
 * until something arrives or wait_s has passed. */
static void service(tune_fleet *f, double wait_s) {
    const double c0 = cpu_s(), until = now_s() + wait_s, nested0 = f->t.strategy + f->t.records;
    for (;;) {
        bool heard = false;
        int flag = 1;
        while (flag) {
            MPI_Status stt;
            if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &stt) != MPI_SUCCESS)
                break;
            if (!flag) break;
            heard = true;
            int r = stt.MPI_SOURCE;
            if (stt.MPI_TAG == TAG_RESULT) {
                result_msg *m = wpk_malloc(sizeof *m);
                if (!m) break;
                MPI_Recv(m, sizeof *m, MPI_BYTE, r, TAG_RESULT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                on_remote_result(f, r, m);
                wpk_free(m);
            } else {
                /* a heartbeat, or a message with no business here now */
                int bytes = 0;
                MPI_Get_count(&stt, MPI_BYTE, &bytes);
                char *junk = wpk_malloc((size_t)bytes + 1);
                if (!junk) break;
                MPI_Recv(junk, bytes, MPI_BYTE, r, stt.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                wpk_free(junk);
                f->ranks[r].last_heard = now_s();
            }
        }
        const double now = now_s();
        for (int r = 1; r < f->size; r++) {
            rank_state *s = &f->ranks[r];
            if (!s->accepted || s->lost) continue;
            int sent = 0;
            if (s->sending && MPI_Test(&s->send_req, &sent, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
                sent) {
                wpk_free(s->sending);
                s->sending = NULL;
            }
            if ((s->n > 0 || s->finals) && now - s->last_heard > f->lease_s) {
                char why[128];
                snprintf(why, sizeof why, "sent nothing for %.0f s", now - s->last_heard);
                lose(f, r, why);
                continue;
            }
            /* behind the candidate it measures, not behind its next one */
            if (s->n < DEPTH && !s->finals && !s->sending && f->nfinals > 0) send_finals(f, r);
            while (!s->lost && !s->finals && s->n < DEPTH) {
                int slot = free_slot(s);
                held h;
                if (slot < 0 || !next_remote(f, &h)) break;
                h.seq = f->next_seq++;
                work_msg *w = &s->outbox[slot];
                *w = (work_msg){.seq = h.seq, .task = h.task};
                config_text(&f->spaces[h.task], &h.cfg, w->config, sizeof w->config);
                s->inflight[s->n++] = h;
                f->streams[h.task].out++;
                if (MPI_Isend(w, sizeof *w, MPI_BYTE, r, TAG_WORK, MPI_COMM_WORLD,
                              &s->outreq[slot]) != MPI_SUCCESS) {
                    lose(f, r, "could not be sent a candidate");
                    break;
                }
            }
        }
        if (heard || now >= until) break;
        nap(POLL_S);
    }
    f->t.serving += cpu_s() - c0 - (f->t.strategy + f->t.records - nested0);
}

/* Rank 0's own measurer asks for its next candidate when a build slot frees up: the moment
 * to serve the other ranks too. */
static int local_propose(void *user, tune_config *out, int max) {
    tune_fleet *f = user;
    int n = 0;
    held h;
    /* its own candidate first: with few left, rank 0 is not left waiting for the others */
    if (max > 0 && requeue_take(f, f->task, &h)) {
        *out = h.cfg;
        n = 1;
    } else if (max > 0 && propose_one(f, &f->streams[f->task], out)) {
        n = 1;
    }
    service(f, 0);
    return n;
}

static void local_result(void *user, int i, const tune_config *cfg, const tune_measurement *r) {
    tune_fleet *f = user;
    f->ranks[0].results++;
    wpk_log(f->ctx, WPK_LOG_DEBUG, "fleet: %.2f s: rank 0: a result of task %d (build %.2f s, "
            "run %.2f s)", now_s() - f->opened, f->task, r->build_s, r->run_s);
    stream_state *s = &f->streams[f->task];
    tell(f, s->fn, s->user, i, cfg, r);
    service(f, 0);
}

static void local_idle(void *user) { service(user, 0); }

/* Rank 0 measures task's stream with its own measurer until no candidate of it is left to
 * take; the others' results are gathered whenever its measurer asks for more, hears a result
 * or waits. */
static wpk_status measure_here(tune_fleet *f, int task) {
    stream_state *s = &f->streams[task];
    f->task = task;
    wpk_status st;
    do {
        service(f, 0);
        tune_measurer_set_idle(s->local, local_idle, f);
        st = tune_measure_stream(s->local, local_propose, f, 0, local_result, f);
        tune_measurer_set_idle(s->local, NULL, NULL);
    } while (st == WPK_OK && requeued(f, task));
    f->task = -1;
    return st;
}

static wpk_status fleet_stream(void *self, int task, tune_measurer *local, tune_propose_fn propose,
                               void *propose_user, tune_measure_fn fn, void *user) {
    tune_fleet *f = self;
    if (task < 0 || task >= f->ntasks)
        return wpk_error(f->ctx, WPK_ERR_INTERNAL, "fleet: task %d of %d", task, f->ntasks);
    stream_state *s = &f->streams[task];
    /* candidates of an earlier stream of the task that are still out report to this one's
       fn: the tuner's, for the same task */
    *s = (stream_state){.propose = propose, .puser = propose_user, .fn = fn, .user = user,
                        .local = local, .out = s->out};
    wpk_log(f->ctx, WPK_LOG_DEBUG, "fleet: %.2f s: task %d begins", now_s() - f->opened, task);
    const double t0 = now_s();
    wpk_status st = measure_here(f, task);
    f->t.measuring += now_s() - t0;
    wpk_log(f->ctx, WPK_LOG_DEBUG, "fleet: %.2f s: task %d's candidates are handed out",
            now_s() - f->opened, task);
    return st;
}

typedef struct local_round {
    tune_fleet *f;
    final_job *j;
    const int *item;          /* the batch's position -> item */
} local_round;

static void on_local_final(void *user, int i, const tune_config *cfg, const tune_measurement *r) {
    local_round *L = user;
    tell(L->f, L->j->fn, L->j->user, L->item[i], cfg, r);
}

/* A re-measurement on rank 0 (nothing else of its own runs then): the rounds as a remote
 * rank measures them, each config's results heard as they come. */
static wpk_status finals_here(tune_fleet *f, final_job *j) {
    const double t0 = now_s();
    wpk_status st = WPK_OK;
    for (int round = 0; st == WPK_OK && round < j->rounds; round++) {
        int item[TUNE_REMEASURE_MAX];
        tune_config cfgs[TUNE_REMEASURE_MAX];
        for (int i = 0; i < j->n; i++) {
            item[i] = round % 2 ? j->n - 1 - i : i;
            cfgs[i] = j->items[item[i]].cfg;
        }
        /* one batch per run of items of one measurer */
        for (int a = 0, b; st == WPK_OK && a < j->n; a = b) {
            tune_measurer *m = j->items[item[a]].local;
            for (b = a + 1; b < j->n && j->items[item[b]].local == m; b++) {}
            local_round L = {f, j, item + a};
            tune_measurer_set_idle(m, local_idle, f);
            st = tune_measure_batch(m, cfgs + a, b - a, TUNE_MEASURE_ALONE, on_local_final, &L);
            tune_measurer_set_idle(m, NULL, NULL);
        }
    }
    if (st == WPK_OK) {
        const double t1 = cpu_s();
        j->done(j->user);
        f->t.records += cpu_s() - t1;
    }
    final_job_free(j);
    f->t.finals += now_s() - t0;
    return st;
}

static bool any_remote(const tune_fleet *f) {
    for (int r = 1; r < f->size; r++)
        if (f->ranks[r].accepted && !f->ranks[r].lost) return true;
    return false;
}

static wpk_status fleet_remeasure(void *self, const tune_remeasure_item *items, int n,
                                  int rounds, tune_measure_fn fn, void (*done)(void *user),
                                  void *user) {
    tune_fleet *f = self;
    if (n < 1 || n > TUNE_REMEASURE_MAX || rounds < 1)
        return wpk_error(f->ctx, WPK_ERR_INTERNAL, "fleet: %d configs in %d rounds to "
                         "re-measure", n, rounds);
    for (int i = 0; i < n; i++)
        if (items[i].task < 0 || items[i].task >= f->ntasks || !items[i].local)
            return wpk_error(f->ctx, WPK_ERR_INTERNAL, "fleet: re-measuring task %d",
                             items[i].task);
    final_job *j = wpk_calloc(1, sizeof *j);
    if (!j || !finals_push(f, j)) {
        wpk_free(j);
        return wpk_error(f->ctx, WPK_ERR_NOMEM, "out of memory re-measuring finalists");
    }
    memcpy(j->items, items, sizeof *items * (size_t)n);
    j->n = n;
    j->rounds = rounds;
    j->fn = fn;
    j->done = done;
    j->user = user;
    service(f, 0);
    return WPK_OK;
}

static wpk_status fleet_settle(void *self, int task) {
    tune_fleet *f = self;
    const double t0 = now_s(), busy0 = f->t.measuring + f->t.finals;
    wpk_status st = WPK_OK;
    while (st == WPK_OK) {
        service(f, 0);
        bool left = false;
        for (int k = task < 0 ? 0 : task; k < (task < 0 ? f->ntasks : task + 1); k++)
            left = left || f->streams[k].out > 0 || requeued(f, k);
        if (task < 0) left = left || f->nfinals > 0 || f->finals_out > 0;
        if (!left) break;
        held h;
        if (!any_remote(f) && requeue_take(f, -1, &h)) {
            /* no one else is left: rank 0 measures what the lost ranks held */
            requeue_push(f, &h);
            const double t1 = now_s();
            st = measure_here(f, h.task);
            f->t.measuring += now_s() - t1;
        } else if (f->nfinals > 0) {
            /* every other rank is busy: rather than wait, rank 0 re-measures */
            st = finals_here(f, finals_pop(f));
        } else {
            service(f, 0.05);
        }
    }
    f->t.waiting += now_s() - t0 - (f->t.measuring + f->t.finals - busy0);
    return st;
}

wpk_status tune_fleet_open(tune_fleet *f, const char *target, const tune_model_task *tasks,
                           int ntasks) {
    f->ranks = wpk_calloc((size_t)f->size, sizeof *f->ranks);
    f->streams = wpk_calloc((size_t)ntasks + 1, sizeof *f->streams);
    f->spaces = wpk_calloc((size_t)ntasks + 1, sizeof *f->spaces);
    if (!f->ranks || !f->streams || !f->spaces)
        return wpk_error(f->ctx, WPK_ERR_NOMEM, "out of memory opening the fleet");
    f->tasks = tasks;
    f->ntasks = ntasks;
    f->task = -1;
    for (int i = 0; i < ntasks; i++) {
        const tune_task *t = &tasks[i].task;
        t->tmpl->space(t->tmpl, t, &f->spaces[i]);
        f->streams[i].exhausted = true;
    }
    for (int r = 0; r < f->size; r++)
        for (int k = 0; k < DEPTH; k++) f->ranks[r].outreq[k] = MPI_REQUEST_NULL;
    const uint64_t hash = tasks_hash(tasks, ntasks);
    rank_state *me = &f->ranks[0];
    me->accepted = true;
    snprintf(me->target, sizeof me->target, "%s", target);
    gethostname(me->host, sizeof me->host - 1);
    me->pid = (int)getpid();
    for (int r = 1; r < f->size; r++) {
        hello_msg h;
        if (MPI_Recv(&h, sizeof h, MPI_BYTE, r, TAG_HELLO, MPI_COMM_WORLD, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS)
            return wpk_error(f->ctx, WPK_ERR_IO, "fleet: no hello from rank %d", r);
        rank_state *s = &f->ranks[r];
        h.target[sizeof h.target - 1] = h.toolchain[sizeof h.toolchain - 1] = 0;
        h.host[sizeof h.host - 1] = 0;
        snprintf(s->target, sizeof s->target, "%s", h.target);
        snprintf(s->toolchain, sizeof s->toolchain, "%s", h.toolchain);
        snprintf(s->host, sizeof s->host, "%s", h.host);
        s->pid = h.pid;
        s->last_heard = now_s();
        verdict_msg v = {0};
        if (strcmp(h.target, target))
            snprintf(v.why, sizeof v.why, "its target '%.200s' differs from the run's '%.200s'",
                     h.target, target);
        else if (h.ntasks != ntasks || h.tasks_hash != hash)
            snprintf(v.why, sizeof v.why, "its %d tasks differ from rank 0's %d (another model "
                     "file, -O level or wpk build)", h.ntasks, ntasks);
        else
            v.accepted = 1;
        s->accepted = v.accepted != 0;
        if (!s->accepted)
            wpk_log(f->ctx, WPK_LOG_WARN, "rank %d (%s, pid %d) is left out: %s", r, s->host,
                    s->pid, v.why);
        if (MPI_Send(&v, sizeof v, MPI_BYTE, r, TAG_VERDICT, MPI_COMM_WORLD) != MPI_SUCCESS)
            return wpk_error(f->ctx, WPK_ERR_IO, "fleet: cannot answer rank %d", r);
    }
    f->runner = (tune_runner){.stream = fleet_stream, .self = f, .remeasure = fleet_remeasure,
                              .settle = fleet_settle};
    f->opened = now_s();
    return WPK_OK;
}

const tune_runner *tune_fleet_runner(tune_fleet *f) { return &f->runner; }

void tune_fleet_describe(const tune_fleet *f, char *buf, size_t cap) {
    int64_t total = 0;
    for (int r = 0; r < f->size; r++) total += f->ranks[r].results;
    double el = now_s() - f->opened;
    size_t n = (size_t)snprintf(buf, cap, "%.2f candidates/s, per rank",
                                el > 0 ? (double)total / el : 0);
    for (int r = 0; r < f->size && n < cap; r++) {
        const rank_state *s = &f->ranks[r];
        if (!s->accepted) n += (size_t)snprintf(buf + n, cap - n, " %d:out", r);
        else
            n += (size_t)snprintf(buf + n, cap - n, " %d:%.0f%%%s", r,
                                  total ? 100.0 * (double)s->results / (double)total : 0,
                                  s->lost ? "(lost)" : "");
    }
}

void tune_fleet_describe_time(const tune_fleet *f, char *buf, size_t cap) {
    const double el = now_s() - f->opened;
    const time_split *t = &f->t;
    size_t n = (size_t)snprintf(buf, cap, "%.1f s; measuring, per rank", el);
    for (int r = 0; r < f->size && n < cap; r++) {
        const rank_state *s = &f->ranks[r];
        if (!s->accepted) continue;
        double busy = r == 0 ? t->measuring + t->finals : s->busy_s;
        n += (size_t)snprintf(buf + n, cap - n, " %d:%.0f%%", r, el > 0 ? 100 * busy / el : 0);
    }
    if (n < cap)
        snprintf(buf + n, cap - n, "; rank 0: candidates %.1f s, finalists %.1f s, waiting for "
                 "others %.1f s, between tasks %.1f s; its CPU on strategies %.1f s, records "
                 "%.1f s, serving %.1f s", t->measuring, t->finals, t->waiting,
                 el - t->measuring - t->finals - t->waiting, t->strategy, t->records,
                 t->serving);
}

void tune_fleet_stop(tune_fleet *f) {
    for (int r = 1; f->ranks && r < f->size; r++) {
        /* a lost rank that still listens (one that failed to measure) ends too */
        if (!f->ranks[r].accepted) continue;
        char nothing = 0;
        MPI_Send(&nothing, 1, MPI_BYTE, r, TAG_STOP, MPI_COMM_WORLD);
    }
}

/* ---- the other ranks ---- */

typedef struct worker {
    tune_fleet *f;
    const tune_model_task *tasks;
    int ntasks;
    const tune_options *opt;
    tune_parallelism par;
    tune_measurer **meas;     /* per task, made on first use */
    tune_space space;         /* of the task being measured */
    work_msg *queue;          /* received, not yet given to the measurer */
    int qn, qcap;
    int64_t *seq_of;          /* the stream's index -> the candidate's seq */
    int nseq, capseq;
    int task;
    finals_msg *fin;          /* a re-measurement received, not yet measured */
    result_msg outbox[OUTBOX];    /* results while their sends are in progress */
    MPI_Request outreq[OUTBOX];
    int nextout;
    double busy_s, busy_since;    /* time measuring; since when (0: idle) */
    bool stop;
    wpk_status error;
} worker;

static double busy_now(const worker *W) {
    return W->busy_s + (W->busy_since > 0 ? now_s() - W->busy_since : 0);
}

static void *heartbeat(void *user) {
    tune_fleet *f = user;
    for (;;) {
        pthread_mutex_lock(&f->lock);
        bool on = f->beating;
        if (on) {
            char beat = 0;
            MPI_Send(&beat, 1, MPI_BYTE, 0, TAG_HEARTBEAT, MPI_COMM_WORLD);
        }
        pthread_mutex_unlock(&f->lock);
        if (!on) return NULL;
        nap(HEARTBEAT_S);
    }
}

/* Sends a result to rank 0 without waiting for it to take it (Open MPI's send waits for a busy
 * receiver to call MPI, and rank 0 may be measuring): only when OUTBOX sends are in progress
 * is the oldest waited for. */
static int post0(worker *W, const result_msg *m) {
    pthread_mutex_lock(&W->f->lock);
    const int k = W->nextout;
    W->nextout = (k + 1) % OUTBOX;
    int rc = MPI_Wait(&W->outreq[k], MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS) {
        W->outbox[k] = *m;
        rc = MPI_Isend(&W->outbox[k], sizeof *m, MPI_BYTE, 0, TAG_RESULT, MPI_COMM_WORLD,
                       &W->outreq[k]);
    }
    pthread_mutex_unlock(&W->f->lock);
    return rc;
}

/* Takes what rank 0 has sent into the queue; with wait, until something comes. */
static void receive(worker *W, bool wait) {
    tune_fleet *f = W->f;
    for (;;) {
        int flag = 0;
        MPI_Status stt;
        pthread_mutex_lock(&f->lock);
        int rc = MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &stt);
        if (rc == MPI_SUCCESS && flag) {
            if (stt.MPI_TAG == TAG_WORK && W->qn == W->qcap) {
                int cap = W->qcap ? 2 * W->qcap : 8;
                work_msg *q = wpk_realloc(W->queue, sizeof *q * (size_t)cap);
                if (q) W->queue = q, W->qcap = cap;
            }
            if (stt.MPI_TAG == TAG_FINALS && !W->fin && (W->fin = wpk_malloc(sizeof *W->fin))) {
                rc = MPI_Recv(W->fin, sizeof *W->fin, MPI_BYTE, 0, TAG_FINALS, MPI_COMM_WORLD,
                              MPI_STATUS_IGNORE);
            } else if (stt.MPI_TAG == TAG_WORK && W->qn < W->qcap) {
                rc = MPI_Recv(&W->queue[W->qn], sizeof W->queue[0], MPI_BYTE, 0, TAG_WORK,
                              MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (rc == MPI_SUCCESS) W->queue[W->qn++].config[sizeof W->queue[0].config - 1] = 0;
            } else {
                char buf[8];
                int bytes = 0;
                MPI_Get_count(&stt, MPI_BYTE, &bytes);
                rc = bytes <= (int)sizeof buf
                         ? MPI_Recv(buf, bytes, MPI_BYTE, 0, stt.MPI_TAG, MPI_COMM_WORLD,
                                    MPI_STATUS_IGNORE)
                         : MPI_ERR_TRUNCATE;
                if (stt.MPI_TAG == TAG_STOP) W->stop = true;
            }
        }
        pthread_mutex_unlock(&f->lock);
        if (rc != MPI_SUCCESS) {
            W->error = wpk_error(f->ctx, WPK_ERR_IO, "rank %d: receiving from rank 0 failed",
                                 f->rank);
            W->stop = true;
        }
        if (flag) continue;
        if (!wait || W->qn > 0 || W->fin || W->stop) return;
        nap(POLL_S);
    }
}

static void send_failed(worker *W, int64_t seq, const char *why) {
    result_msg *m = wpk_calloc(1, sizeof *m);
    if (!m) return;
    m->seq = seq;
    m->failed = 1;
    m->busy_s = busy_now(W);
    snprintf(m->message, sizeof m->message, "%s", why);
    post0(W, m);
    wpk_free(m);
}

/* The measurer's source: queued candidates of the task being measured, in order. */
static int worker_propose(void *user, tune_config *out, int max) {
    worker *W = user;
    receive(W, false);
    int k = 0;
    while (k < max && W->qn > 0 && !W->stop && W->queue[0].task == W->task) {
        work_msg w = W->queue[0];
        memmove(W->queue, W->queue + 1, sizeof *W->queue * (size_t)(--W->qn));
        wpk_context quiet = {0};
        if (tune_config_parse(&quiet, &W->space, w.config, &out[k]) != WPK_OK) {
            char why[640];
            snprintf(why, sizeof why, "its config '%.200s' does not parse: %.300s", w.config,
                     wpk_context_error(&quiet));
            send_failed(W, w.seq, why);
            continue;
        }
        if (W->nseq == W->capseq) {
            int cap = W->capseq ? 2 * W->capseq : 64;
            int64_t *n = wpk_realloc(W->seq_of, sizeof *n * (size_t)cap);
            if (!n) {
                send_failed(W, w.seq, "out of memory");
                continue;
            }
            W->seq_of = n;
            W->capseq = cap;
        }
        W->seq_of[W->nseq++] = w.seq;
        k++;
    }
    return k;
}

/* A measurement's fields into the message that carries it to rank 0. */
static void result_fill(result_msg *m, const tune_measurement *r) {
    m->status = (int32_t)r->status;
    m->nsamples = r->nsamples;
    memcpy(m->samples, r->samples, sizeof m->samples);
    m->level = r->level;
    m->cold = r->cold;
    m->calls_per_sample = r->calls_per_sample;
    m->median = r->median;
    m->error = r->error;
    m->build_s = r->build_s;
    m->run_s = r->run_s;
    snprintf(m->message, sizeof m->message, "%s", r->message);
}

static void worker_result(void *user, int i, const tune_config *cfg, const tune_measurement *r) {
    (void)cfg;
    worker *W = user;
    result_msg *m = wpk_calloc(1, sizeof *m);
    if (!m || i < 0 || i >= W->nseq) {
        wpk_free(m);
        return;
    }
    m->seq = W->seq_of[i];
    m->busy_s = busy_now(W);
    result_fill(m, r);
    if (post0(W, m) != MPI_SUCCESS) W->stop = true;
    wpk_free(m);
}

/* The measurer of task, made on first use (seq: what rank 0 is told failed, if it fails). */
static wpk_status measurer_of(worker *W, int task, int64_t seq) {
    if (!W->meas[task]) {
        tune_measure_params p = W->opt->measure;
        p.parallel = &W->par;
        if (!p.seed) p.seed = W->opt->seed;
        /* as tune_run times them on rank 0: cold where the model's weights outgrow the cache */
        if (p.cold_bytes >= 0 && tune_constant_bytes(W->tasks, W->ntasks) > p.cold_bytes)
            p.cold_bytes = 0;
        wpk_status st = tune_measurer_create(W->f->ctx, &W->tasks[task].task, &p, &W->meas[task]);
        if (st) {
            char why[600];
            snprintf(why, sizeof why, "%s", wpk_context_error(W->f->ctx));
            send_failed(W, seq, why);
            return st;
        }
        /* the control as rank 0's: --start's config, else the template's default */
        tune_config def;
        const tune_task *t = &W->tasks[task].task;
        t->tmpl->space(t->tmpl, t, &W->space);
        wpk_context quiet = {0};
        if (!W->opt->start || tune_config_parse(&quiet, &W->space, W->opt->start, &def) != WPK_OK)
            t->tmpl->default_config(t->tmpl, t, &W->space, &def);
        tune_measurer_set_control(W->meas[task], &def);
    }
    return WPK_OK;
}

/* Measures the queue's head task's candidates as one stream. */
static wpk_status measure_head(worker *W) {
    const int task = W->queue[0].task;
    if (task < 0 || task >= W->ntasks) {
        send_failed(W, W->queue[0].seq, "a task index out of range");
        memmove(W->queue, W->queue + 1, sizeof *W->queue * (size_t)(--W->qn));
        return WPK_OK;
    }
    wpk_status st = measurer_of(W, task, W->queue[0].seq);
    if (st) return st;
    const tune_task *t = &W->tasks[task].task;
    t->tmpl->space(t->tmpl, t, &W->space);
    W->task = task;
    W->nseq = 0;
    return tune_measure_stream(W->meas[task], worker_propose, W, 0, worker_result, W);
}

typedef struct final_round {
    worker *W;
    int64_t seq;
    int round;
    const int *item;          /* the batch's position -> item */
} final_round;

static void final_result(void *user, int i, const tune_config *cfg, const tune_measurement *r) {
    (void)cfg;
    final_round *R = user;
    result_msg *m = wpk_calloc(1, sizeof *m);
    if (!m) return;
    m->seq = R->seq;
    m->item = R->item[i];
    m->round = R->round;
    m->busy_s = busy_now(R->W);
    result_fill(m, r);
    if (post0(R->W, m) != MPI_SUCCESS) R->W->stop = true;
    wpk_free(m);
}

/* Re-measures the finalists rank 0 sent, alone, in its rounds (every other one reversed),
 * one batch per run of items of one task. */
static wpk_status measure_finals(worker *W) {
    finals_msg *m = W->fin;
    W->fin = NULL;
    const int n = m->n;
    tune_config cfgs[TUNE_REMEASURE_MAX];
    wpk_status st = WPK_OK;
    char why[640] = "";
    if (n < 1 || n > TUNE_REMEASURE_MAX || m->rounds < 1)
        snprintf(why, sizeof why, "%d configs in %d rounds", n, m->rounds);
    for (int i = 0; !why[0] && i < n; i++) {
        const int task = m->task[i];
        if (task < 0 || task >= W->ntasks) {
            snprintf(why, sizeof why, "task %d out of range", task);
            break;
        }
        st = measurer_of(W, task, m->seq);
        if (st) break;
        const tune_task *t = &W->tasks[task].task;
        t->tmpl->space(t->tmpl, t, &W->space);
        m->config[i][sizeof m->config[i] - 1] = 0;
        wpk_context quiet = {0};
        if (tune_config_parse(&quiet, &W->space, m->config[i], &cfgs[i]) != WPK_OK)
            snprintf(why, sizeof why, "its config '%.200s' does not parse: %.300s",
                     m->config[i], wpk_context_error(&quiet));
    }
    if (why[0]) send_failed(W, m->seq, why);
    for (int round = 0; !why[0] && st == WPK_OK && round < m->rounds && !W->stop; round++) {
        int item[TUNE_REMEASURE_MAX];
        tune_config order[TUNE_REMEASURE_MAX];
        for (int i = 0; i < n; i++) {
            item[i] = round % 2 ? n - 1 - i : i;
            order[i] = cfgs[item[i]];
        }
        for (int a = 0, b; st == WPK_OK && a < n; a = b) {
            for (b = a + 1; b < n && m->task[item[b]] == m->task[item[a]]; b++) {}
            final_round R = {W, m->seq, round, item + a};
            st = tune_measure_batch(W->meas[m->task[item[a]]], order + a, b - a,
                                    TUNE_MEASURE_ALONE, final_result, &R);
        }
    }
    if (st && !why[0]) {
        snprintf(why, sizeof why, "%s", wpk_context_error(W->f->ctx));
        send_failed(W, m->seq, why);
    }
    wpk_free(m);
    return st;
}

wpk_status tune_fleet_serve(tune_fleet *f, const tune_model_task *tasks, int ntasks,
                            const tune_options *opt, bool *refused) {
    *refused = false;
    hello_msg h;
    memset(&h, 0, sizeof h);
    const char *fp = getenv("WPK_FLEET_FINGERPRINT");
    snprintf(h.target, sizeof h.target, "%s", fp && *fp ? fp : target_fingerprint());
    toolchain_of(opt, h.toolchain, sizeof h.toolchain);
    gethostname(h.host, sizeof h.host - 1);
    h.ntasks = ntasks;
    h.pid = (int32_t)getpid();
    h.tasks_hash = tasks_hash(tasks, ntasks);
    verdict_msg v;
    if (MPI_Send(&h, sizeof h, MPI_BYTE, 0, TAG_HELLO, MPI_COMM_WORLD) != MPI_SUCCESS ||
        MPI_Recv(&v, sizeof v, MPI_BYTE, 0, TAG_VERDICT, MPI_COMM_WORLD, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS)
        return wpk_error(f->ctx, WPK_ERR_IO, "rank %d: no answer from rank 0", f->rank);
    if (!v.accepted) {
        v.why[sizeof v.why - 1] = 0;
        wpk_log(f->ctx, WPK_LOG_WARN, "rank %d is left out of the tuning job: %s", f->rank,
                v.why);
        *refused = true;
        return WPK_OK;
    }
    worker W = {.f = f, .tasks = tasks, .ntasks = ntasks, .opt = opt, .task = -1};
    for (int k = 0; k < OUTBOX; k++) W.outreq[k] = MPI_REQUEST_NULL;
    tune_parallelism_init(&W.par, opt->parallel, opt->measure.threads);
    W.meas = wpk_calloc((size_t)ntasks + 1, sizeof *W.meas);
    if (!W.meas) return wpk_error(f->ctx, WPK_ERR_NOMEM, "out of memory serving rank 0");
    f->beating = true;
    if (pthread_create(&f->beat, NULL, heartbeat, f) != 0) f->beating = false;
    wpk_status st = WPK_OK;
    while (!W.stop) {
        receive(&W, true);
        W.busy_since = now_s();
        if (W.fin && !W.stop && st == WPK_OK) st = measure_finals(&W);
        else if (W.qn > 0 && !W.stop && st == WPK_OK) st = measure_head(&W);
        W.busy_s += now_s() - W.busy_since;
        W.busy_since = 0;
        if (st == WPK_OK) st = W.error;
        /* after a failure rank 0 has left this rank out: it waits for the end of the job */
        if (st) {
            W.qn = 0;
            wpk_free(W.fin);
            W.fin = NULL;
        }
    }
    /* rank 0 took every result before it said stop */
    pthread_mutex_lock(&f->lock);
    MPI_Waitall(OUTBOX, W.outreq, MPI_STATUSES_IGNORE);
    pthread_mutex_unlock(&f->lock);
    for (int i = 0; i < ntasks; i++) tune_measurer_free(W.meas[i]);
    wpk_free(W.meas);
    wpk_free(W.queue);
    wpk_free(W.seq_of);
    wpk_free(W.fin);
    return st;
}
