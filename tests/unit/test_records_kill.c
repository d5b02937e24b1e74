/* test_records_kill.c -- the records database under kill -9 and under several writers: a child
 * appends a known sequence of records and is SIGKILLed at random moments, many times; after
 * each kill the file passes SQLite's integrity check and holds exactly a prefix of the sequence
 * (every record the child reported stored, at most the one in flight beyond it, none twice,
 * none torn); the child then resumes as the tuner does (skipping what is stored) until the file
 * holds every record once. Also: kills while the file is being created, kills during a large
 * import (all or nothing), and writers in parallel processes. Set WPK_KILL_SEED to replay. */
#include <errno.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "tune/records.h"
#include "wpk.h"

#define NREC 400        /* records in the sequence */
#define NKILLS 60       /* kills while appending */
#define MAX_SAMPLES 160
#define TARGET "x86_64 Kill Test avx2 2c"

static char dir[256];
static char path[512];
static unsigned rng;

static unsigned next_rand(void) {
    rng = rng * 1103515245u + 12345u;
    return (rng >> 8) & 0xffffff;
}

/* ---- the intended sequence ---- */

typedef struct intended {
    char workload[32], config[48];
    double samples[MAX_SAMPLES];
    tune_record r;
} intended;

/* Record i of writer w: every field derives from (w, i), so a torn or misplaced record cannot
 * match its slot. */
static void make(int w, int i, intended *x) {
    snprintf(x->workload, sizeof x->workload, "w%d_conv%d", w, i % 5);
    snprintf(x->config, sizeof x->config, "tile=%d,vec=%d,w=%d", i, i * 7 % 13, w);
    int n = 40 + (i * 37) % (MAX_SAMPLES - 40);
    for (int j = 0; j < n; j++) x->samples[j] = (i * 1000 + j + 1) * 1e-7 / 3.0;
    tune_status st = i % 11 == 3 ? TUNE_TIMEOUT : i % 13 == 5 ? TUNE_WRONG_RESULT : TUNE_OK;
    x->r = (tune_record){TARGET, x->workload, "conv2d_nchwc", x->config, st, x->samples, n,
                         st == TUNE_OK ? x->samples[n / 2] : 0, "gcc 12 -O3", 1700000000 + i};
}

static bool same(const tune_record *a, const tune_record *b) {
    return strcmp(a->target, b->target) == 0 && strcmp(a->workload, b->workload) == 0 &&
           strcmp(a->template_name, b->template_name) == 0 && strcmp(a->config, b->config) == 0 &&
           strcmp(a->toolchain, b->toolchain) == 0 && a->status == b->status &&
           a->nsamples == b->nsamples &&
           memcmp(a->samples, b->samples, (size_t)a->nsamples * sizeof(double)) == 0 &&
           memcmp(&a->median, &b->median, sizeof(double)) == 0 && a->time == b->time;
}

/* ---- the child: append what is not stored yet, report each stored index on a pipe ---- */

static void writer(int w, int n, int report_fd) {
    wpk_context *ctx = wpk_context_create();
    tune_db *db = NULL;
    if (tune_db_open(ctx, path, &db) != WPK_OK) {
        fprintf(stderr, "writer %d: %s\n", w, wpk_context_error(ctx));
        _exit(3);
    }
    intended x;
    for (int i = 0; i < n; i++) {
        make(w, i, &x);
        if (tune_db_has(db, TARGET, x.workload, x.config)) continue; /* resuming, as the tuner does */
        if (tune_db_add(db, &x.r) != WPK_OK) {
            fprintf(stderr, "writer %d: %s\n", w, wpk_context_error(ctx));
            _exit(4);
        }
        if (report_fd >= 0 && write(report_fd, &i, sizeof i) != (ssize_t)sizeof i) _exit(5);
    }
    tune_db_close(db);
    wpk_context_free(ctx);
    _exit(0);
}

static pid_t spawn_writer(int w, int n, int *report_fd) {
    int fds[2] = {-1, -1};
    if (report_fd && pipe(fds) != 0) return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (fds[0] >= 0) close(fds[0]);
        writer(w, n, fds[1]);
    }
    if (fds[1] >= 0) close(fds[1]);
    if (report_fd) *report_fd = fds[0];
    return pid;
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---- checks on the file ---- */

static bool integrity_ok(void) {
    /* killed before it created the file: nothing was stored, nothing is damaged */
    if (access(path, F_OK) != 0 && errno == ENOENT) return true;
    sqlite3 *s = NULL;
    bool ok = false;
    if (sqlite3_open_v2(path, &s, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        fprintf(stderr, "integrity_check: cannot open: %s\n", s ? sqlite3_errmsg(s) : "no memory");
    } else {
        sqlite3_busy_timeout(s, 5000); /* a lock is a wait, not damage */
        sqlite3_stmt *q;
        int rc = sqlite3_prepare_v2(s, "PRAGMA integrity_check", -1, &q, NULL);
        if (rc == SQLITE_OK) {
            rc = sqlite3_step(q);
            const char *res = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(q, 0) : NULL;
            ok = res && strcmp(res, "ok") == 0 && sqlite3_step(q) == SQLITE_DONE;
            if (!ok)
                fprintf(stderr, "integrity_check: %s (%s)\n", res ? res : "no result",
                        sqlite3_errmsg(s));
            sqlite3_finalize(q);
        } else {
            fprintf(stderr, "integrity_check: %s\n", sqlite3_errmsg(s));
        }
    }
    sqlite3_close(s);
    return ok;
}

typedef struct prefix_check {
    int writer;
    int n;      /* records seen so far of this writer */
    bool ok;
} prefix_check;

/* record k of the writer must be its intended record k */
static bool check_next(void *user, const tune_record *r) {
    prefix_check *p = user;
    int w = -1;
    const char *mark = strstr(r->config, ",w=");
    if (mark) w = atoi(mark + 3);
    if (w != p->writer) return true;
    intended x;
    make(p->writer, p->n, &x);
    if (!same(r, &x.r)) {
        fprintf(stderr, "writer %d: record %d is not the one intended (config '%s')\n", p->writer,
                p->n, r->config);
        p->ok = false;
        return false;
    }
    p->n++;
    return true;
}

/* How many records of writer w the file holds, after checking they are its sequence's first
 * ones in order; -1 when the file is damaged or out of order. */
static int stored_prefix(int w) {
    if (!integrity_ok()) {
        fprintf(stderr, "integrity_check failed on %s\n", path);
        return -1;
    }
    wpk_context *ctx = wpk_context_create();
    tune_db *db = NULL;
    int n = -1;
    if (tune_db_open(ctx, path, &db) == WPK_OK) {
        prefix_check p = {w, 0, true};
        if (tune_db_each(db, TARGET, NULL, check_next, &p) == WPK_OK && p.ok) n = p.n;
        tune_db_close(db);
    } else {
        fprintf(stderr, "reopen after kill: %s\n", wpk_context_error(ctx));
    }
    wpk_context_free(ctx);
    return n;
}

/* ---- the tests ---- */

static int64_t add_us; /* measured time of one append, to aim the kills */

static void remove_db(void);

static void test_kill_while_appending(void) {
    int kills = 0, prev = 0;
    for (int round = 0; round < NKILLS * 3 && kills < NKILLS; round++) {
        int fd = -1;
        pid_t pid = spawn_writer(0, NREC, &fd);
        /* from the open itself up to a dozen appends in */
        long delay = (long)(next_rand() % (unsigned)(add_us * 12 + 2000));
        sleep_us(delay);
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        int last = -1, i;
        while (read(fd, &i, sizeof i) == (ssize_t)sizeof i) last = i;
        close(fd);
        if (last < prev - 1) last = prev - 1; /* this child found those stored and skipped them */
        int n = stored_prefix(0);
        if (WIFSIGNALED(status)) kills++;
        else CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        /* what the child was told is stored is there; beyond it at most the one in flight */
        if (n < 0 || n < last + 1 || n > last + 2 || n < prev) {
            fprintf(stderr, "round %d (delay %ld us): %d stored, child reported up to %d, %d "
                    "before\n", round, delay, n, last, prev);
            check_failures++;
            return;
        }
        prev = n;
        if (n == NREC && kills >= NKILLS / 2) break;
        if (n == NREC) {
            /* every record went in before the kills came (a burst of speed on a shared
               machine): start again from an empty file, so the kills still get their rounds */
            remove_db();
            prev = 0;
        }
    }
    CHECK(kills >= NKILLS / 2);
    /* resume to the end without a kill */
    pid_t pid = spawn_writer(0, NREC, NULL);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(stored_prefix(0) == NREC);
    printf("appending: %d kills, %d records before the last resume, all %d once after it\n",
           kills, prev, NREC);
}

static void remove_db(void) {
    char side[600];
    const char *suffix[] = {"", "-wal", "-shm", "-journal"};
    for (int i = 0; i < 4; i++) {
        snprintf(side, sizeof side, "%s%s", path, suffix[i]);
        unlink(side);
    }
}

/* killed while the file is being created: the next open still works */
static void test_kill_while_creating(void) {
    int kills = 0;
    for (int round = 0; round < 30; round++) {
        remove_db();
        pid_t pid = spawn_writer(1, 5, NULL);
        sleep_us((long)(next_rand() % 3000));
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        kills += WIFSIGNALED(status);
        struct stat st;
        if (stat(path, &st) != 0) continue; /* killed before the file existed */
        int n = stored_prefix(1);
        if (n < 0) {
            fprintf(stderr, "creation round %d: file unusable after the kill\n", round);
            check_failures++;
            return;
        }
    }
    printf("creating: %d kills, the file opened after each\n", kills);
}

static int count_all(void) {
    wpk_context *ctx = wpk_context_create();
    tune_db *db = NULL;
    int n = -1;
    if (tune_db_open(ctx, path, &db) == WPK_OK) {
        n = 0;
        for (int w = 0; w < 8; w++) {
            char workload[32];
            for (int k = 0; k < 5; k++) {
                snprintf(workload, sizeof workload, "w%d_conv%d", w, k);
                n += (int)tune_db_count(db, TARGET, workload);
            }
        }
        tune_db_close(db);
    }
    wpk_context_free(ctx);
    return n;
}

static const char *const status_names[] = {"ok", "compile_error", "timeout", "crash",
                                           "wrong_result", "invalid"};

/* an import is one transaction: killed at any moment, the file holds all of it or none */
static void test_kill_while_importing(void) {
    char jsonl[600];
    snprintf(jsonl, sizeof jsonl, "%s/import.jsonl", dir);
    /* the file to import: 3000 records of writer 2, written here as JSON lines (appending
     * them through a database would cost a synced commit each) */
    FILE *f = fopen(jsonl, "w");
    if (!f) {
        check_failures++;
        return;
    }
    intended x;
    for (int i = 0; i < 3000; i++) {
        make(2, i, &x);
        fprintf(f, "{\"target\":\"%s\",\"workload\":\"%s\",\"template\":\"%s\",\"config\":\"%s\","
                "\"status\":\"%s\",\"samples\":[", x.r.target, x.r.workload, x.r.template_name,
                x.r.config, status_names[x.r.status]);
        for (int j = 0; j < x.r.nsamples; j++) fprintf(f, "%s%.17g", j ? "," : "", x.samples[j]);
        fprintf(f, "],\"median\":%.17g,\"toolchain\":\"%s\",\"time\":%lld}\n", x.r.median,
                x.r.toolchain, (long long)x.r.time);
    }
    fclose(f);

    remove_db();
    pid_t pid = spawn_writer(3, 10, NULL); /* 10 records already there */
    waitpid(pid, NULL, 0);
    CHECK(count_all() == 10);
    /* one timed import to aim at */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid = fork();
    if (pid == 0) {
        wpk_context *c = wpk_context_create();
        tune_db *d = NULL;
        int64_t added = 0;
        _exit(tune_db_open(c, path, &d) == WPK_OK && tune_db_import(d, jsonl, &added) == WPK_OK &&
                      added == 3000
                  ? 0
                  : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && count_all() == 3010);
    long import_us = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000;

    int none = 0, all = 0;
    for (int round = 0; round < 12; round++) {
        remove_db();
        pid = spawn_writer(3, 10, NULL);
        waitpid(pid, NULL, 0);
        pid = fork();
        if (pid == 0) {
            wpk_context *c = wpk_context_create();
            tune_db *d = NULL;
            if (tune_db_open(c, path, &d) == WPK_OK) tune_db_import(d, jsonl, NULL);
            _exit(0);
        }
        sleep_us((long)(next_rand() % (unsigned)(import_us * 5 / 4 + 1)));
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        int n = count_all();
        CHECK(integrity_ok());
        if (n == 10) none++;
        else if (n == 3010) all++;
        else {
            fprintf(stderr, "import round %d: %d records, want 10 or 3010\n", round, n);
            check_failures++;
        }
    }
    printf("importing: one import takes %ld ms; 12 kills left %d with none and %d with all\n",
           import_us / 1000, none, all);
}

/* writers in parallel processes, racing to create the file too: each one's records all land */
static void test_parallel_writers(void) {
    remove_db();
    enum { NW = 4, PER = 60 };
    pid_t pids[NW];
    for (int w = 0; w < NW; w++) pids[w] = spawn_writer(4 + w, PER, NULL);
    for (int w = 0; w < NW; w++) {
        int status = 0;
        waitpid(pids[w], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    for (int w = 0; w < NW; w++) CHECK(stored_prefix(4 + w) == PER);
    CHECK(count_all() == NW * PER);
    printf("parallel: %d writers x %d records, all stored once\n", NW, PER);
}

/* time a few appends, so the kills land across opens, appends and commits */
static void measure_append(void) {
    remove_db();
    wpk_context *ctx = wpk_context_create();
    tune_db *db = NULL;
    CHECK(tune_db_open(ctx, path, &db) == WPK_OK);
    if (!db) return;
    intended x;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 20; i++) {
        make(9, i, &x);
        CHECK(tune_db_add(db, &x.r) == WPK_OK);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    tune_db_close(db);
    wpk_context_free(ctx);
    add_us = ((t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000) / 20;
    if (add_us < 50) add_us = 50;
    printf("one append (WAL, synchronous=FULL): %lld us\n", (long long)add_us);
    remove_db();
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/wpk_records_kill_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/records.db", dir);
    const char *seed = getenv("WPK_KILL_SEED");
    rng = seed ? (unsigned)strtoul(seed, NULL, 10) : (unsigned)time(NULL);
    printf("WPK_KILL_SEED=%u\n", rng);
    measure_append();
    test_kill_while_appending();
    test_kill_while_creating();
    test_kill_while_importing();
    test_parallel_writers();
    if (check_failures == 0) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    } else {
        fprintf(stderr, "files kept in %s\n", dir);
    }
    CHECK_DONE();
}
