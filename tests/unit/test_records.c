/* test_records.c -- the tuning records database: round trips through add/count/has/best/each,
 * the tuner's finals (rounds, the latest deciding, kept apart from the trials, a version-1
 * file upgraded), the default path, refusing files that are not ours (and leaving them byte for byte as they
 * were), JSON-lines export/import, and failing allocations. Kills are in test_records_kill.c. */
#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "check.h"
#include "tune/records.h"
#include "wpk.h"

static char dir[256];

/* a path in the test's directory; the last 16 stay valid */
static const char *in_dir(const char *name) {
    static char bufs[16][512];
    static int k;
    char *b = bufs[k++ % 16];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
    return b;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1024, n = 0;
    char *s = malloc(cap);
    size_t got;
    while ((got = fread(s + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) s = realloc(s, cap *= 2);
    }
    fclose(f);
    *len = n;
    return s;
}

static void write_all(const char *path, const char *data, size_t len) {
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, len, f);
    fclose(f);
}

/* ---- owned copies of records, to compare ---- */

typedef struct rec {
    char *target, *workload, *template_name, *config, *toolchain;
    tune_status status;
    double *samples;
    int nsamples;
    double median;
    int64_t time;
} rec;

typedef struct recs {
    int n, cap, stop_after; /* stop_after > 0: the callback says stop after that many */
    rec *v;
} recs;

static char *dup_plain(const char *s) {
    char *d = malloc(strlen(s) + 1);
    strcpy(d, s);
    return d;
}

/* plain malloc, not wpk_malloc: the test's own memory must not move the fault-injection count */
static bool collect(void *user, const tune_record *r) {
    recs *rs = user;
    CHECK(r->samples != NULL); /* even without samples: memcpy of zero bytes must be legal */
    if (rs->n == rs->cap) rs->v = realloc(rs->v, (size_t)(rs->cap = rs->cap ? rs->cap * 2 : 16) * sizeof *rs->v);
    rec *c = &rs->v[rs->n++];
    c->target = dup_plain(r->target);
    c->workload = dup_plain(r->workload);
    c->template_name = dup_plain(r->template_name);
    c->config = dup_plain(r->config);
    c->toolchain = dup_plain(r->toolchain);
    c->status = r->status;
    c->nsamples = r->nsamples;
    c->samples = malloc((size_t)(r->nsamples + 1) * sizeof(double));
    if (r->nsamples) memcpy(c->samples, r->samples, (size_t)r->nsamples * sizeof(double));
    c->median = r->median;
    c->time = r->time;
    return rs->stop_after <= 0 || rs->n < rs->stop_after;
}

static void recs_free(recs *rs) {
    for (int i = 0; i < rs->n; i++) {
        rec *c = &rs->v[i];
        free(c->target), free(c->workload), free(c->template_name), free(c->config);
        free(c->toolchain), free(c->samples);
    }
    free(rs->v);
    memset(rs, 0, sizeof *rs);
}

/* field by field, doubles bit for bit */
static bool same(const rec *c, const tune_record *r) {
    return strcmp(c->target, r->target) == 0 && strcmp(c->workload, r->workload) == 0 &&
           strcmp(c->template_name, r->template_name) == 0 && strcmp(c->config, r->config) == 0 &&
           strcmp(c->toolchain, r->toolchain) == 0 && c->status == r->status &&
           c->nsamples == r->nsamples &&
           (r->nsamples == 0 || memcmp(c->samples, r->samples, (size_t)r->nsamples * sizeof(double)) == 0) &&
           memcmp(&c->median, &r->median, sizeof(double)) == 0 && c->time == r->time;
}

static tune_record view(const rec *c) {
    return (tune_record){c->target, c->workload, c->template_name, c->config, c->status,
                         c->samples, c->nsamples, c->median, c->toolchain, c->time};
}

static bool same_recs(const recs *a, const recs *b) {
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++) {
        tune_record r = view(&b->v[i]);
        if (!same(&a->v[i], &r)) return false;
    }
    return true;
}

static recs all_of(tune_db *db, const char *target, const char *workload) {
    recs rs = {0};
    wpk_status st = tune_db_each(db, target, workload, collect, &rs);
    CHECK(st == WPK_OK);
    return rs;
}

/* ---- records to store ---- */

#define TARGET "x86_64 Test CPU avx2,fma 4c"
#define NMANY 10000

static double many[NMANY];
static const double tricky[] = {0.1 + 0.2, 1e-300, 5e-324, 1.0 / 3.0, 0.0, 123456.789e-9, 2.5e-5};

static tune_record make(const char *workload, const char *config, tune_status status, double median) {
    return (tune_record){TARGET, workload, "conv2d_nchwc", config, status, tricky,
                         (int)(sizeof tricky / sizeof *tricky), median, "gcc 12.2.0 -O3 -march=native",
                         1700000000};
}

static void test_round_trip(void) {
    wpk_context *ctx = wpk_context_create();
    tune_db *db = NULL;
    CHECK(tune_db_open(ctx, in_dir("rt.db"), &db) == WPK_OK);
    if (!db) return;
    for (int i = 0; i < NMANY; i++) many[i] = (i + 1) * 1.000000123e-6;
    tune_record in[] = {
        make("conv_a", "tile=4,vec=8", TUNE_OK, 2.5e-5),
        make("conv_a", "tile=8,vec=8", TUNE_TIMEOUT, 0),
        make("conv_a", "tile=2,vec=8", TUNE_WRONG_RESULT, 1e-9), /* fastest, but wrong: never best */
        make("conv_a", "tile=16,vec=16", TUNE_OK, 1.5e-5),
        make("conv_a", "tile=1,vec=1", TUNE_COMPILE_ERROR, 0),
        make("conv_a", "tile=3,vec=4", TUNE_CRASH, 0),
        make("conv_a", "tile=5,vec=4", TUNE_INVALID, 0),
        make("conv_a", "tile=32,vec=16", TUNE_OK, 1.5e-5), /* ties the best: the earlier wins */
        make("conv_b", "x=\"quoted\\back\nslash\ttab\x01\xc3\xa9", TUNE_OK, 3e-5),
        make("conv_b", "", TUNE_OK, 4e-5), /* a template without knobs */
    };
    int n_in = (int)(sizeof in / sizeof *in);
    in[1].nsamples = 0;
    in[1].samples = NULL;
    in[3].samples = many;
    in[3].nsamples = NMANY;
    in[8].toolchain = "";
    for (int i = 0; i < n_in; i++) CHECK(tune_db_add(db, &in[i]) == WPK_OK);
    tune_record other = make("conv_a", "tile=4,vec=8", TUNE_OK, 1e-6);
    other.target = "aarch64 Other 8c";
    CHECK(tune_db_add(db, &other) == WPK_OK);

    CHECK(tune_db_count(db, TARGET, "conv_a") == 8);
    CHECK(tune_db_count(db, TARGET, "conv_b") == 2);
    CHECK(tune_db_count(db, TARGET, "conv_c") == 0);
    CHECK(tune_db_count(db, other.target, "conv_a") == 1);
    CHECK(tune_db_has(db, TARGET, "conv_a", "tile=8,vec=8"));   /* failures count as measured */
    CHECK(tune_db_has(db, TARGET, "conv_b", ""));
    CHECK(!tune_db_has(db, TARGET, "conv_a", "tile=8,vec=16"));
    CHECK(!tune_db_has(db, TARGET, "conv_b", "tile=4,vec=8"));
    CHECK(!tune_db_has(db, "x86_64 Elsewhere 2c", "conv_a", "tile=4,vec=8"));

    char config[64];
    double median = -1;
    CHECK(tune_db_best(db, TARGET, "conv_a", config, sizeof config, &median) == WPK_OK);
    CHECK(strcmp(config, "tile=16,vec=16") == 0 && median == 1.5e-5);
    /* exactly enough room, then one byte short */
    CHECK(tune_db_best(db, TARGET, "conv_a", config, strlen("tile=16,vec=16") + 1, NULL) == WPK_OK);
    CHECK_ERR(ctx, tune_db_best(db, TARGET, "conv_a", config, strlen("tile=16,vec=16"), &median),
              WPK_ERR_INVALID_ARG, "needs 15 bytes");
    CHECK(tune_db_best(db, TARGET, "conv_a", NULL, 0, &median) == WPK_OK && median == 1.5e-5);
    CHECK_ERR(ctx, tune_db_best(db, TARGET, "conv_c", config, sizeof config, &median),
              WPK_ERR_INVALID_ARG, "no successful record of workload 'conv_c'");
    tune_record bad_only = make("conv_d", "a=1", TUNE_TIMEOUT, 0);
    CHECK(tune_db_add(db, &bad_only) == WPK_OK);
    CHECK(tune_db_best(db, TARGET, "conv_d", config, sizeof config, &median) == WPK_ERR_INVALID_ARG);

    /* each: insertion order, every field, bit for bit; one workload, then all of the target */
    recs a = all_of(db, TARGET, "conv_a");
    CHECK(a.n == 8);
    for (int i = 0; i < 8 && i < a.n; i++) CHECK(same(&a.v[i], &in[i]));
    recs t = all_of(db, TARGET, NULL);
    CHECK(t.n == n_in + 1);
    for (int i = 0; i < n_in && i < t.n; i++) CHECK(same(&t.v[i], &in[i]));
    recs stop = {.stop_after = 3};
    CHECK(tune_db_each(db, TARGET, NULL, collect, &stop) == WPK_OK && stop.n == 3);
    recs_free(&stop);

    /* what a store must refuse, storing nothing */
    tune_record bad[9];
    for (int i = 0; i < 9; i++) bad[i] = make("conv_a", "tile=99", TUNE_OK, 1e-5);
    double nan_sample[] = {1e-5, NAN};
    double neg_sample[] = {-1e-5};
    bad[0].target = NULL;
    bad[1].workload = "";
    bad[2].status = (tune_status)99;
    bad[3].nsamples = -1;
    bad[4].samples = nan_sample, bad[4].nsamples = 2;
    bad[5].samples = neg_sample, bad[5].nsamples = 1;
    bad[6].median = INFINITY;
    bad[7].samples = NULL;
    bad[8].config = NULL;
    for (int i = 0; i < 9; i++) CHECK(tune_db_add(db, &bad[i]) == WPK_ERR_INVALID_ARG);
    CHECK_ERR(ctx, tune_db_add(db, &bad[4]), WPK_ERR_INVALID_ARG, "sample 1 is nan");
    CHECK(tune_db_count(db, TARGET, "conv_a") == 8);
    CHECK(!tune_db_has(db, TARGET, "conv_a", "tile=99"));
    CHECK(tune_db_each(db, NULL, NULL, collect, &stop) == WPK_ERR_INVALID_ARG);
    tune_db_close(db);

    /* everything is still there after reopening */
    CHECK(tune_db_open(ctx, in_dir("rt.db"), &db) == WPK_OK);
    if (db) {
        recs again = all_of(db, TARGET, NULL);
        CHECK(same_recs(&t, &again));
        recs_free(&again);
        tune_db_close(db);
    }
    recs_free(&a);
    recs_free(&t);
    wpk_context_free(ctx);
}

/* tune_db_add from inside tune_db_each would commit only when the walk ends: refused */
typedef struct nested {
    tune_db *db;
    wpk_status add_status;
    int64_t count_inside;
} nested;

static bool add_inside(void *user, const tune_record *r) {
    nested *n = user;
    tune_record copy = *r;
    copy.config = "nested=1";
    n->add_status = tune_db_add(n->db, &copy);
    n->count_inside = tune_db_count(n->db, r->target, r->workload); /* reads are fine */
    return false;
}

static void test_nested_and_shared(void) {
    wpk_context *ctx = wpk_context_create(), *ctx2 = wpk_context_create();
    tune_db *db = NULL, *db2 = NULL;
    CHECK(tune_db_open(ctx, in_dir("shared.db"), &db) == WPK_OK);
    CHECK(tune_db_open(ctx2, in_dir("shared.db"), &db2) == WPK_OK);
    if (!db || !db2) return;
    tune_record r = make("w", "k=1", TUNE_OK, 1e-5);
    CHECK(tune_db_add(db, &r) == WPK_OK);
    nested n = {db, WPK_OK, -1};
    CHECK(tune_db_each(db, TARGET, "w", add_inside, &n) == WPK_OK);
    CHECK(n.add_status == WPK_ERR_INVALID_ARG && n.count_inside == 1);
    CHECK(strstr(wpk_context_error(ctx), "inside tune_db_each") != NULL);
    /* two handles on one file see each other's commits */
    CHECK(tune_db_count(db2, TARGET, "w") == 1);
    r.config = "k=2";
    CHECK(tune_db_add(db2, &r) == WPK_OK);
    CHECK(tune_db_has(db, TARGET, "w", "k=2") && tune_db_count(db, TARGET, "w") == 2);
    tune_db_close(db2);
    tune_db_close(db);
    wpk_context_free(ctx);
    wpk_context_free(ctx2);
}

static void set_env(const char *name, const char *value) {
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

static void test_default_path(void) {
    const char *names[] = {"WPK_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
    char *saved[3];
    for (int i = 0; i < 3; i++) saved[i] = getenv(names[i]) ? dup_plain(getenv(names[i])) : NULL;
    wpk_context *ctx = wpk_context_create();
    tune_db *db = NULL;
    struct {
        const char *cache, *xdg, *home, *file;
    } cases[] = {
        {in_dir("cache/a/b"), in_dir("nope"), in_dir("nope"), in_dir("cache/a/b/records.db")},
        {NULL, in_dir("xdg"), in_dir("nope"), in_dir("xdg/wpk/records.db")},
        {"", NULL, in_dir("home"), in_dir("home/.cache/wpk/records.db")},
    };
    for (int i = 0; i < 3; i++) {
        set_env("WPK_CACHE_DIR", cases[i].cache);
        set_env("XDG_CACHE_HOME", cases[i].xdg);
        set_env("HOME", cases[i].home);
        CHECK(tune_db_open(ctx, NULL, &db) == WPK_OK);
        tune_record r = make("w", "k=1", TUNE_OK, 1e-5);
        CHECK(db && tune_db_add(db, &r) == WPK_OK);
        tune_db_close(db);
        db = NULL;
        CHECK(exists(cases[i].file));
        CHECK(!exists(in_dir("nope")));
    }
    /* a cache directory that cannot be made: named in the message */
    write_all(in_dir("plainfile"), "x", 1);
    set_env("WPK_CACHE_DIR", in_dir("plainfile/sub"));
    CHECK_ERR(ctx, tune_db_open(ctx, NULL, &db), WPK_ERR_IO, "plainfile/sub");
    CHECK(db == NULL);
    set_env("WPK_CACHE_DIR", NULL);
    set_env("XDG_CACHE_HOME", NULL);
    set_env("HOME", NULL);
    CHECK_ERR(ctx, tune_db_open(ctx, NULL, &db), WPK_ERR_IO, "no WPK_CACHE_DIR");
    for (int i = 0; i < 3; i++) {
        set_env(names[i], saved[i]);
        free(saved[i]);
    }
    wpk_context_free(ctx);
}

/* ---- files that are not ours ---- */

static void raw_sql(const char *path, const char *sql) {
    sqlite3 *s = NULL;
    CHECK(sqlite3_open(path, &s) == SQLITE_OK);
    char *err = NULL;
    if (sqlite3_exec(s, sql, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "raw_sql %s: %s\n", sql, err);
        check_failures++;
    }
    sqlite3_free(err);
    sqlite3_close(s);
}

/* open must fail with want naming the file, and leave it byte for byte as it was, with no
 * journal or WAL beside it */
static void expect_refused(const char *path, wpk_status want, const char *needle) {
    wpk_context *ctx = wpk_context_create();
    size_t n0 = 0, n1 = 0;
    char *before = read_all(path, &n0);
    tune_db *db = (tune_db *)1;
    CHECK_ERR(ctx, tune_db_open(ctx, path, &db), want, needle);
    CHECK_ERR(ctx, want, want, path);
    CHECK(db == NULL);
    char *after = read_all(path, &n1);
    CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0);
    char side[600];
    const char *suffix[] = {"-wal", "-shm", "-journal"};
    for (int i = 0; i < 3; i++) {
        snprintf(side, sizeof side, "%s%s", path, suffix[i]);
        CHECK(!exists(side));
    }
    free(before);
    free(after);
    wpk_context_free(ctx);
}

static void test_refuse(void) {
    const char *text = in_dir("notes.txt");
    write_all(text, "these are my notes\nkeep them\n", 29);
    expect_refused(text, WPK_ERR_PARSE, "not a SQLite database");

    char noise[3000];
    for (size_t i = 0; i < sizeof noise; i++) noise[i] = (char)(i * 7919 % 251);
    write_all(in_dir("noise.bin"), noise, sizeof noise);
    expect_refused(in_dir("noise.bin"), WPK_ERR_PARSE, "not a SQLite database");

    /* SQLite's magic, then rubbish: SQLite itself must decline it */
    char fake[4096];
    memcpy(fake, "SQLite format 3", 16);
    for (size_t i = 16; i < sizeof fake; i++) fake[i] = (char)(i * 31 % 256);
    write_all(in_dir("fake.db"), fake, sizeof fake);
    wpk_context *ctx = wpk_context_create();
    tune_db *db = NULL;
    wpk_status fake_st = tune_db_open(ctx, in_dir("fake.db"), &db);
    CHECK(fake_st != WPK_OK && db == NULL);
    fprintf(stderr, "SQLite magic + rubbish: %s\n", wpk_context_error(ctx));
    expect_refused(in_dir("fake.db"), fake_st, "fake.db");

    /* another program's database, even one with a table called records */
    raw_sql(in_dir("foreign.db"), "CREATE TABLE users(name TEXT); INSERT INTO users VALUES('ada');");
    expect_refused(in_dir("foreign.db"), WPK_ERR_PARSE, "another program");
    raw_sql(in_dir("lookalike.db"), "CREATE TABLE records(id INTEGER PRIMARY KEY, target TEXT);");
    expect_refused(in_dir("lookalike.db"), WPK_ERR_PARSE, "another program");
    raw_sql(in_dir("otherapp.db"), "PRAGMA application_id = 1234;");
    expect_refused(in_dir("otherapp.db"), WPK_ERR_PARSE, "another program");

    /* ours, but from a newer wpk; ours without a version */
    CHECK(tune_db_open(ctx, in_dir("newer.db"), &db) == WPK_OK);
    tune_record r = make("w", "k=1", TUNE_OK, 1e-5);
    CHECK(db && tune_db_add(db, &r) == WPK_OK);
    tune_db_close(db);
    raw_sql(in_dir("newer.db"), "UPDATE wpk_meta SET value = '3' WHERE key = 'schema_version';");
    expect_refused(in_dir("newer.db"), WPK_ERR_UNSUPPORTED, "schema version 3 is newer");
    CHECK(tune_db_open(ctx, in_dir("noversion.db"), &db) == WPK_OK);
    tune_db_close(db);
    raw_sql(in_dir("noversion.db"), "DROP TABLE wpk_meta;");
    expect_refused(in_dir("noversion.db"), WPK_ERR_PARSE, "no valid schema version");

    CHECK_ERR(ctx, tune_db_open(ctx, dir, &db), WPK_ERR_IO, "not a regular file");
    CHECK_ERR(ctx, tune_db_open(ctx, in_dir("missing/dir/x.db"), &db), WPK_ERR_IO, "missing/dir/x.db");

    /* an empty file holds nothing to lose: it becomes a database */
    write_all(in_dir("empty.db"), "", 0);
    CHECK(tune_db_open(ctx, in_dir("empty.db"), &db) == WPK_OK);
    CHECK(db && tune_db_add(db, &r) == WPK_OK && tune_db_count(db, TARGET, "w") == 1);
    tune_db_close(db);
    wpk_context_free(ctx);
}

/* ---- the tuner's final re-measurements ---- */

static int64_t meta_version(const char *path) {
    sqlite3 *s = NULL;
    sqlite3_stmt *q = NULL;
    int64_t v = -1;
    if (sqlite3_open(path, &s) == SQLITE_OK &&
        sqlite3_prepare_v2(s, "SELECT CAST(value AS INTEGER) FROM wpk_meta WHERE key = "
                           "'schema_version'", -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        v = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(s);
    return v;
}

static void test_finals(void) {
    wpk_context *ctx = wpk_context_create();
    tune_db *db = NULL;
    CHECK(tune_db_open(ctx, in_dir("finals.db"), &db) == WPK_OK);
    if (!db) return;
    char config[64];
    double median = 0;
    CHECK(tune_db_final_best(db, TARGET, "w", config, sizeof config, &median) == 0);
    tune_record a = make("w", "k=1", TUNE_OK, 1e-3), b = make("w", "k=2", TUNE_OK, 2e-3);
    CHECK(tune_db_add(db, &a) == WPK_OK && tune_db_add(db, &b) == WPK_OK);
    /* round 1: k=2 re-measured faster than k=1, whose trial was lucky */
    tune_record r1[2] = {make("w", "k=1", TUNE_OK, 3e-3), make("w", "k=2", TUNE_OK, 2.5e-3)};
    CHECK(tune_db_add_finals(db, r1, 2) == WPK_OK);
    CHECK(tune_db_final_best(db, TARGET, "w", config, sizeof config, &median) == 1);
    CHECK(!strcmp(config, "k=2") && median == 2.5e-3);
    /* finals are not trials: the records and their counts do not change */
    CHECK(tune_db_count(db, TARGET, "w") == 2 && !tune_db_has(db, TARGET, "w", "k=3"));
    /* the latest round decides */
    tune_record r2[3] = {make("w", "k=1", TUNE_OK, 2e-3), make("w", "k=2", TUNE_OK, 2.2e-3),
                         make("w", "k=3", TUNE_OK, 2.1e-3)};
    CHECK(tune_db_add_finals(db, r2, 3) == WPK_OK);
    CHECK(tune_db_final_best(db, TARGET, "w", config, sizeof config, &median) == 1);
    CHECK(!strcmp(config, "k=1") && median == 2e-3);
    /* one config's median in the latest round */
    CHECK(tune_db_final_of(db, TARGET, "w", "k=3", &median) == 1 && median == 2.1e-3);
    CHECK(tune_db_final_of(db, TARGET, "w", "k=9", &median) == 0);
    CHECK(tune_db_final_of(db, TARGET, "other", "k=1", &median) == 0);
    CHECK(tune_db_final_best(db, TARGET, "other", config, sizeof config, NULL) == 0);
    CHECK(tune_db_final_best(db, TARGET, "w", config, 2, NULL) == -1);
    /* a failed measurement, or another workload, in a round: refused whole */
    tune_record bad[2] = {make("w", "k=4", TUNE_OK, 1e-4), make("w", "k=5", TUNE_CRASH, 0)};
    CHECK_ERR(ctx, tune_db_add_finals(db, bad, 2), WPK_ERR_INVALID_ARG, "one workload");
    bad[1] = make("v", "k=5", TUNE_OK, 1e-4);
    CHECK_ERR(ctx, tune_db_add_finals(db, bad, 2), WPK_ERR_INVALID_ARG, "one workload");
    CHECK(tune_db_final_best(db, TARGET, "w", config, sizeof config, NULL) == 1);
    CHECK(!strcmp(config, "k=1"));
    tune_db_close(db);

    /* a version-1 file (no finals table) is upgraded when opened, its records kept */
    raw_sql(in_dir("finals.db"), "DROP TABLE finals; UPDATE wpk_meta SET value = '1' WHERE key = "
                                 "'schema_version';");
    CHECK(meta_version(in_dir("finals.db")) == 1);
    CHECK(tune_db_open(ctx, in_dir("finals.db"), &db) == WPK_OK);
    if (db) {
        CHECK(meta_version(in_dir("finals.db")) == 2);
        CHECK(tune_db_count(db, TARGET, "w") == 2);
        CHECK(tune_db_final_best(db, TARGET, "w", config, sizeof config, NULL) == 0);
        CHECK(tune_db_add_finals(db, r1, 2) == WPK_OK);
        CHECK(tune_db_final_best(db, TARGET, "w", config, sizeof config, NULL) == 1);
        tune_db_close(db);
    }
    wpk_context_free(ctx);
}

/* ---- export / import ---- */

static void fill(tune_db *db, int n) {
    static double s[300];
    for (int i = 0; i < n; i++) {
        char workload[32], config[64];
        snprintf(workload, sizeof workload, "conv_%d", i % 4);
        snprintf(config, sizeof config, "tile=%d,vec=%d,\"q\"", i, i % 3);
        int ns = (i * 37) % 300;
        for (int j = 0; j < ns; j++) s[j] = (i + 1) * (j + 1) * 1.0e-7 / 3.0;
        tune_record r = make(workload, config, (tune_status)(i % 6), i % 6 ? 0 : s[ns / 2]);
        r.samples = s;
        r.nsamples = ns;
        r.time = 1700000000 + i;
        if (i % 5 == 0) r.target = "aarch64 Other 8c";
        CHECK(tune_db_add(db, &r) == WPK_OK);
    }
}

static recs everything(tune_db *db) {
    recs rs = all_of(db, TARGET, NULL);
    recs other = all_of(db, "aarch64 Other 8c", NULL);
    for (int i = 0; i < other.n; i++) {
        tune_record r = view(&other.v[i]);
        collect(&rs, &r);
    }
    recs_free(&other);
    return rs;
}

static int64_t total(tune_db *db) {
    recs rs = everything(db);
    int64_t n = rs.n;
    recs_free(&rs);
    return n;
}

static void test_export_import(void) {
    wpk_context *ctx = wpk_context_create();
    tune_db *a = NULL, *b = NULL;
    CHECK(tune_db_open(ctx, in_dir("exp_a.db"), &a) == WPK_OK);
    CHECK(tune_db_open(ctx, in_dir("exp_b.db"), &b) == WPK_OK);
    if (!a || !b) return;
    fill(a, 60);
    tune_record odd = make("conv_0", "s=\"\\\n\t\x01\x1f\xc3\xa9", TUNE_OK, 2e-5);
    odd.toolchain = "cc \"quoted\" \\ -O3";
    CHECK(tune_db_add(a, &odd) == WPK_OK);
    CHECK(tune_db_export(a, in_dir("a.jsonl")) == WPK_OK);
    int64_t added = -1;
    CHECK(tune_db_import(b, in_dir("a.jsonl"), &added) == WPK_OK && added == 61);
    recs ra = everything(a), rb = everything(b);
    CHECK(ra.n == 61 && same_recs(&ra, &rb));
    /* and back out byte for byte */
    CHECK(tune_db_export(b, in_dir("b.jsonl")) == WPK_OK);
    size_t la = 0, lb = 0;
    char *ta = read_all(in_dir("a.jsonl"), &la), *tb = read_all(in_dir("b.jsonl"), &lb);
    CHECK(ta && tb && la == lb && memcmp(ta, tb, la) == 0);
    /* one line per record, every field named */
    int lines = 0;
    for (size_t i = 0; i < la; i++) lines += ta[i] == '\n';
    CHECK(lines == 61);
    CHECK(ta && strstr(ta, "\"template\":\"conv2d_nchwc\"") && strstr(ta, "\"status\":\"timeout\"") &&
          strstr(ta, "\"time\":1700000059") && strstr(ta, "0.30000000000000004"));
    free(ta);
    free(tb);
    /* importing twice, or into the source, adds nothing */
    CHECK(tune_db_import(b, in_dir("a.jsonl"), &added) == WPK_OK && added == 0);
    CHECK(tune_db_import(a, in_dir("b.jsonl"), &added) == WPK_OK && added == 0);
    CHECK(total(a) == 61 && total(b) == 61);
    /* a record that differs in any one field is not a duplicate */
    odd.time++;
    CHECK(tune_db_add(a, &odd) == WPK_OK);
    CHECK(tune_db_export(a, in_dir("a2.jsonl")) == WPK_OK);
    CHECK(tune_db_import(b, in_dir("a2.jsonl"), &added) == WPK_OK && added == 1);
    recs_free(&ra);
    recs_free(&rb);

    /* an export never replaces the database, nor leaves a temporary file when it fails */
    CHECK_ERR(ctx, tune_db_export(a, in_dir("exp_a.db")), WPK_ERR_INVALID_ARG, "database itself");
    CHECK(total(a) == 62);
    CHECK_ERR(ctx, tune_db_export(a, in_dir("nodir/x.jsonl")), WPK_ERR_IO, "nodir/x.jsonl");
    CHECK_ERR(ctx, tune_db_import(a, in_dir("nofile.jsonl"), &added), WPK_ERR_IO, "nofile.jsonl");
    /* blank lines and CRLF line ends are read */
    const char *crlf_name = in_dir("crlf.jsonl");
    FILE *f = fopen(crlf_name, "w");
    fprintf(f, "\r\n{\"target\":\"t\",\"workload\":\"w\",\"template\":\"x\",\"config\":\"c=1\","
               "\"status\":\"ok\",\"samples\":[1e-5,2e-5],\"median\":1.5e-5,\"toolchain\":\"cc\","
               "\"time\":5}\r\n  \n");
    fclose(f);
    CHECK(tune_db_import(a, crlf_name, &added) == WPK_OK && added == 1);
    CHECK(tune_db_has(a, "t", "w", "c=1"));
    tune_db_close(a);
    tune_db_close(b);
    wpk_context_free(ctx);
}

/* A file whose line 4 is bad: nothing of it is imported, and the message names file and line. */
static void test_import_bad(void) {
    static const char *good = "{\"target\":\"t\",\"workload\":\"w\",\"template\":\"x\",\"config\":\"c=%d\","
                              "\"status\":\"ok\",\"samples\":[1e-5],\"median\":1e-5,"
                              "\"toolchain\":\"cc\",\"time\":7}\n";
    static const char *bad[] = {
        "not json at all",
        "{\"target\":\"t\"",
        "[1,2,3]",
        "{}",
        "{\"target\":\"t\",\"workload\":\"w\",\"template\":\"x\",\"config\":\"c\",\"status\":\"ok\","
        "\"samples\":[1e-5],\"toolchain\":\"cc\",\"time\":7}", /* no median */
        "{\"target\":\"t\",\"workload\":\"w\",\"template\":\"x\",\"config\":\"c\",\"status\":\"ok\","
        "\"samples\":\"1e-5\",\"median\":1e-5,\"toolchain\":\"cc\",\"time\":7}",
        "{\"target\":\"t\",\"workload\":\"w\",\"template\":\"x\",\"config\":\"c\",\"status\":\"fast\","
        "\"samples\":[1e-5],\"median\":1e-5,\"toolchain\":\"cc\",\"time\":7}",
        "{\"target\":\"t\",\"workload\":\"w\",\"template\":\"x\",\"config\":\"c\",\"status\":\"ok\","
        "\"samples\":[-1e-5],\"median\":1e-5,\"toolchain\":\"cc\",\"time\":7}",
        "{\"target\":\"t\",\"workload\":\"w\",\"template\":\"x\",\"config\":\"c\",\"status\":\"ok\","
        "\"samples\":[1e400],\"median\":1e-5,\"toolchain\":\"cc\",\"time\":7}",
        "{\"target\":\"t\",\"workload\":\"w\",\"template\":\"x\",\"config\":\"c\",\"status\":\"ok\","
        "\"samples\":[1e-5,\"x\"],\"median\":1e-5,\"toolchain\":\"cc\",\"time\":7}",
        "{\"target\":\"t\",\"workload\":\"w\",\"template\":\"x\",\"config\":\"c\",\"status\":\"ok\","
        "\"samples\":[1e-5],\"median\":1e-5,\"toolchain\":\"cc\",\"time\":7.5}",
        "{\"target\":\"t\",\"workload\":\"w\",\"template\":\"x\",\"config\":\"c\",\"status\":\"ok\","
        "\"samples\":[1e-5],\"median\":1e-5,\"toolchain\":\"cc\",\"time\":7,\"extra\":1}",
        "{\"target\":\"t\",\"workload\":\"w\",\"template\":\"x\",\"config\":\"c\",\"status\":\"ok\","
        "\"samples\":[1e-5],\"median\":1e-5,\"toolchain\":\"cc\",\"time\":7,\"time\":8}",
        "{\"target\":\"t\",\"workload\":\"w\",\"template\":\"x\",\"config\":\"c\",\"status\":\"ok\","
        "\"samples\":[1e-5],\"median\":1e-5,\"toolchain\":\"cc\",\"time\":7} trailing",
        "{\"target\":\"\",\"workload\":\"w\",\"template\":\"x\",\"config\":\"c\",\"status\":\"ok\","
        "\"samples\":[1e-5],\"median\":1e-5,\"toolchain\":\"cc\",\"time\":7}",
        "{\"target\":\"t\",\"workload\":\"w\",\"template\":7,\"config\":\"c\",\"status\":\"ok\","
        "\"samples\":[1e-5],\"median\":1e-5,\"toolchain\":\"cc\",\"time\":7}",
    };
    static const char *why[] = {"not valid JSON", "not valid JSON", "not a JSON object",
                                "missing field 'target'", "missing field 'median'",
                                "field 'samples' is not an array", "unknown status 'fast'",
                                "sample 0 is", "sample 0 is inf", "samples[1] is not a number",
                                "not a whole number", "unknown field 'extra'",
                                "field 'time' given twice", "not valid JSON", "no target",
                                "field 'template' is not a string"};
    wpk_context *ctx = wpk_context_create();
    tune_db *db = NULL;
    CHECK(tune_db_open(ctx, in_dir("bad.db"), &db) == WPK_OK);
    if (!db) return;
    tune_record r = make("w", "before=1", TUNE_OK, 1e-5);
    CHECK(tune_db_add(db, &r) == WPK_OK);
    const char *name = in_dir("bad.jsonl");
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        FILE *f = fopen(name, "w");
        for (int k = 1; k <= 3; k++) fprintf(f, good, k);
        fprintf(f, "%s\n", bad[i]);
        fprintf(f, good, 5);
        fclose(f);
        int64_t added = -1;
        wpk_status st = tune_db_import(db, name, &added);
        char want[600];
        snprintf(want, sizeof want, "'%s' line 4", name);
        CHECK_ERR(ctx, st, WPK_ERR_PARSE, want);
        CHECK_ERR(ctx, st, WPK_ERR_PARSE, why[i]);
        CHECK(added == 0);
        CHECK(!tune_db_has(db, "t", "w", "c=1") && total(db) == 1);
    }
    /* a NUL byte inside a line */
    FILE *f = fopen(name, "wb");
    fprintf(f, good, 1);
    fwrite("{\"a\0\"}\n", 1, 7, f);
    fclose(f);
    CHECK_ERR(ctx, tune_db_import(db, name, NULL), WPK_ERR_PARSE, "line 2: a NUL byte");
    CHECK(total(db) == 1);
    /* the database itself is no JSON-lines file, and stays as it is */
    CHECK_ERR(ctx, tune_db_import(db, in_dir("bad.db"), NULL), WPK_ERR_PARSE, "line 1");
    CHECK(total(db) == 1);
    tune_db_close(db);
    wpk_context_free(ctx);
}

/* ---- failing allocations ---- */

static void test_faults(void) {
    wpk_context *ctx = wpk_context_create();
    tune_db *db = NULL;
    int failures = 0;
    /* open: each failing allocation is a clean NOMEM and a later open works */
    for (long n = 1; n < 100; n++) {
        wpk_alloc_fail_at(n);
        wpk_status st = tune_db_open(ctx, in_dir("faults.db"), &db);
        wpk_alloc_fail_at(0);
        if (st == WPK_OK) break;
        CHECK(st == WPK_ERR_NOMEM && db == NULL);
        failures++;
    }
    CHECK(db != NULL && failures > 0);
    if (!db) return;
    fill(db, 10);
    CHECK(tune_db_export(db, in_dir("faults.jsonl")) == WPK_OK);
    /* add: a failure stores nothing */
    tune_record r = make("conv_x", "f=1", TUNE_OK, 1e-5);
    r.samples = many;
    r.nsamples = 2000;
    failures = 0;
    for (long n = 1; n < 100; n++) {
        wpk_alloc_fail_at(n);
        wpk_status st = tune_db_add(db, &r);
        wpk_alloc_fail_at(0);
        if (st == WPK_OK) break;
        CHECK(st == WPK_ERR_NOMEM && tune_db_count(db, TARGET, "conv_x") == 0);
        failures++;
    }
    CHECK(failures > 0 && tune_db_count(db, TARGET, "conv_x") == 1);
    /* each */
    failures = 0;
    for (long n = 1; n < 100; n++) {
        recs rs = {0};
        wpk_alloc_fail_at(n);
        wpk_status st = tune_db_each(db, TARGET, NULL, collect, &rs);
        wpk_alloc_fail_at(0);
        recs_free(&rs);
        if (st == WPK_OK) break;
        CHECK(st == WPK_ERR_NOMEM);
        failures++;
    }
    CHECK(failures > 0);
    /* export: a failure leaves the previous export as it was and no temporary file */
    write_all(in_dir("prev.jsonl"), "previous\n", 9);
    failures = 0;
    for (long n = 1; n < 100; n++) {
        wpk_alloc_fail_at(n);
        wpk_status st = tune_db_export(db, in_dir("prev.jsonl"));
        wpk_alloc_fail_at(0);
        if (st == WPK_OK) break;
        CHECK(st == WPK_ERR_NOMEM);
        size_t len = 0;
        char *t = read_all(in_dir("prev.jsonl"), &len);
        CHECK(t && len == 9 && memcmp(t, "previous\n", 9) == 0);
        free(t);
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", in_dir("prev.jsonl"), (long)getpid());
        CHECK(!exists(tmp));
        failures++;
    }
    CHECK(failures > 0);
    tune_db_close(db);
    /* import: a failure imports nothing */
    CHECK(tune_db_open(ctx, in_dir("faults2.db"), &db) == WPK_OK);
    if (!db) return;
    failures = 0;
    for (long n = 1; n < 100; n++) {
        int64_t added = -1;
        wpk_alloc_fail_at(n);
        wpk_status st = tune_db_import(db, in_dir("faults.jsonl"), &added);
        wpk_alloc_fail_at(0);
        if (st == WPK_OK) {
            CHECK(added == 10 && total(db) == 10);
            break;
        }
        CHECK(st == WPK_ERR_NOMEM && added == 0 && total(db) == 0);
        failures++;
    }
    CHECK(failures > 0);
    tune_db_close(db);
    wpk_context_free(ctx);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/wpk_records_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip();
    test_nested_and_shared();
    test_default_path();
    test_refuse();
    test_finals();
    test_export_import();
    test_import_bad();
    test_faults();
    if (check_failures == 0) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    } else {
        fprintf(stderr, "files kept in %s\n", dir);
    }
    CHECK_DONE();
}
