/* records.c -- the tuning records database on SQLite: refusing files that are not ours, the
 * schema, crash-safe appends, the tuner's queries, and JSON-lines export/import. */
#include "tune/records.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/context.h"
#include "base/strbuf.h"

/* 0x57504b52, "WPKR", in the SQLite header's application_id field: how a file says it is ours. */
#define RECORDS_APP_ID 1464879954
#define RECORDS_FORMAT "wpk tuning records"
/* 1: records; 2: + finals (a file of version 1 is upgraded when it is opened) */
#define RECORDS_SCHEMA 2
#define STR_(x) #x
#define STR(x) STR_(x)
/* Tuner processes sharing a file wait this long for one another's commits (each takes ms; an
 * import of a large file holds the lock for longer). */
#define BUSY_TIMEOUT_MS 60000
/* Integers a JSON number (a double) carries exactly. */
#define JSON_INT_MAX 9007199254740992.0

struct tune_db {
    wpk_context *ctx; /* borrowed */
    sqlite3 *sql;
    char *path;
    sqlite3_stmt *add, *has, *count, *best, *dup, *final_add, *final_round, *final_best, *final_of;
    bool in_each;
};

static const char *const status_names[] = {
    [TUNE_OK] = "ok",
    [TUNE_COMPILE_ERROR] = "compile_error",
    [TUNE_TIMEOUT] = "timeout",
    [TUNE_CRASH] = "crash",
    [TUNE_WRONG_RESULT] = "wrong_result",
    [TUNE_INVALID] = "invalid",
};
#define NSTATUS ((int)(sizeof status_names / sizeof *status_names))

/* Statuses are stored by name, not number, so reordering the enum never relabels old records. */
static bool status_parse(const char *s, tune_status *out) {
    for (int i = 0; i < NSTATUS; i++) {
        if (strcmp(s, status_names[i]) == 0) {
            *out = (tune_status)i;
            return true;
        }
    }
    return false;
}

static const char *const schema_sql =
    "CREATE TABLE wpk_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "INSERT INTO wpk_meta VALUES('format', '" RECORDS_FORMAT "');"
    "INSERT INTO wpk_meta VALUES('schema_version', '" STR(RECORDS_SCHEMA) "');"
    /* id is the insertion order; samples is a JSON array of seconds */
    "CREATE TABLE records(id INTEGER PRIMARY KEY, target TEXT NOT NULL, workload TEXT NOT NULL,"
    " template TEXT NOT NULL, config TEXT NOT NULL, status TEXT NOT NULL, samples TEXT NOT NULL,"
    " median REAL NOT NULL, toolchain TEXT NOT NULL, time INTEGER NOT NULL);"
    "CREATE INDEX records_key ON records(target, workload, config);"
    "PRAGMA application_id = " STR(RECORDS_APP_ID) ";";

/* The tuner's final re-measurements, each round one workload's best few configs timed alone,
 * back to back (what `wpk compile` trusts over a trial's luck); version 2. */
static const char *const finals_sql =
    "CREATE TABLE finals(id INTEGER PRIMARY KEY, target TEXT NOT NULL, workload TEXT NOT NULL,"
    " template TEXT NOT NULL, config TEXT NOT NULL, samples TEXT NOT NULL, median REAL NOT NULL,"
    " round INTEGER NOT NULL, time INTEGER NOT NULL);"
    "CREATE INDEX finals_key ON finals(target, workload, round);";

#define RECORD_COLUMNS "target, workload, template, config, status, samples, median, toolchain, time"

/* ---- errors ---- */

static wpk_status sql_status(int rc) {
    switch (rc & 0xff) {
    case SQLITE_NOMEM: return WPK_ERR_NOMEM;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return WPK_ERR_PARSE;
    default: return WPK_ERR_IO;
    }
}

static wpk_status sql_fail(wpk_context *ctx, sqlite3 *s, const char *path, int rc, const char *what) {
    const char *hint = (rc & 0xff) == SQLITE_BUSY
                           ? " (another process held the database for longer than the busy timeout)"
                           : "";
    return wpk_error(ctx, sql_status(rc), "records '%s': %s: %s%s", path, what,
                     s ? sqlite3_errmsg(s) : sqlite3_errstr(rc), hint);
}

static wpk_status db_fail(tune_db *db, int rc, const char *what) {
    return sql_fail(db->ctx, db->sql, db->path, rc, what);
}

/* ---- numbers as text, whatever the process's locale ---- */

static locale_t c_loc;
static pthread_once_t c_loc_once = PTHREAD_ONCE_INIT;
static void c_loc_init(void) { c_loc = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

/* Records move between machines as text, so a decimal comma from a locale the application set
 * must never reach them: numbers are printed and read with this thread in the C locale. Returns
 * what leave_c_locale restores (0 when no C locale could be made: the process's own is used,
 * which is "C" unless the application changed it). */
static locale_t enter_c_locale(void) {
    pthread_once(&c_loc_once, c_loc_init);
    return c_loc ? uselocale(c_loc) : (locale_t)0;
}

static void leave_c_locale(locale_t old) {
    if (old) uselocale(old);
}

/* The shortest of %.15g..%.17g that reads back as the same double: exact, and the same double
 * always gives the same text, so records compare equal as text exactly when their values do. */
static void put_double(strbuf *b, double v) {
    char tmp[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v) break;
    }
    sb_puts(b, tmp);
}

static void put_samples(strbuf *b, const double *samples, int n) {
    sb_puts(b, "[");
    for (int i = 0; i < n; i++) {
        if (i) sb_puts(b, ",");
        put_double(b, samples[i]);
    }
    sb_puts(b, "]");
}

/* A growable array of samples reused across records. */
typedef struct sample_buf {
    double *v;
    int cap;
} sample_buf;

/* What a record without samples points at: callers may memcpy zero bytes from it. */
static const double no_samples[1];

static const double *samples_of(const sample_buf *sb) { return sb->v ? sb->v : no_samples; }

static bool sample_reserve(sample_buf *sb, int n) {
    if (n <= sb->cap) return true;
    int cap = sb->cap ? sb->cap : 64;
    while (cap < n) cap *= 2;
    double *v = wpk_realloc(sb->v, (size_t)cap * sizeof *v);
    if (!v) return false;
    sb->v = v;
    sb->cap = cap;
    return true;
}

/* The samples column ("[1.5e-05,1.6e-05]") back into doubles; false when the text is not such
 * an array (a damaged or hand-edited file), *oom when memory ran out. */
static bool parse_samples(const char *t, sample_buf *sb, int *n, bool *oom) {
    *n = 0;
    *oom = false;
    if (*t++ != '[') return false;
    if (*t == ']') return t[1] == '\0';
    for (;;) {
        char *end;
        double v = strtod(t, &end);
        if (end == t || !isfinite(v)) return false;
        if (!sample_reserve(sb, *n + 1)) {
            *oom = true;
            return false;
        }
        sb->v[(*n)++] = v;
        t = end;
        if (*t == ',') {
            t++;
            continue;
        }
        return t[0] == ']' && t[1] == '\0';
    }
}

/* ---- records: checks, binding, decoding ---- */

static wpk_status check_record(wpk_context *ctx, const tune_record *r) {
    if (!r) return wpk_error(ctx, WPK_ERR_INVALID_ARG, "record: NULL");
    const char *what = !r->target || !*r->target             ? "target"
                       : !r->workload || !*r->workload       ? "workload"
                       : !r->template_name || !*r->template_name ? "template"
                       : !r->config                          ? "config"
                       : !r->toolchain                       ? "toolchain"
                                                             : NULL;
    if (what) return wpk_error(ctx, WPK_ERR_INVALID_ARG, "record: no %s", what);
    if ((int)r->status < 0 || (int)r->status >= NSTATUS)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "record of workload '%s', config '%s': unknown "
                         "status %d", r->workload, r->config, (int)r->status);
    if (r->nsamples < 0 || (r->nsamples > 0 && !r->samples))
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "record of workload '%s', config '%s': %d "
                         "samples at %p", r->workload, r->config, r->nsamples, (const void *)r->samples);
    for (int i = 0; i < r->nsamples; i++) {
        if (!isfinite(r->samples[i]) || r->samples[i] < 0)
            return wpk_error(ctx, WPK_ERR_INVALID_ARG, "record of workload '%s', config '%s': "
                             "sample %d is %g, not a time in seconds", r->workload, r->config, i,
                             r->samples[i]);
    }
    if (!isfinite(r->median) || r->median < 0)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "record of workload '%s', config '%s': median "
                         "%g is not a time in seconds", r->workload, r->config, r->median);
    return WPK_OK;
}

/* Parameters ?1..?9 in RECORD_COLUMNS order; the strings must outlive the statement's step. */
static int bind_record(sqlite3_stmt *q, const tune_record *r, const char *samples) {
    int rc = SQLITE_OK;
    const char *text[] = {r->target, r->workload, r->template_name, r->config,
                          status_names[r->status], samples};
    for (int i = 0; i < 6 && rc == SQLITE_OK; i++) rc = sqlite3_bind_text(q, i + 1, text[i], -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_bind_double(q, 7, r->median);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(q, 8, r->toolchain, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(q, 9, r->time);
    return rc;
}

/* Run a statement that returns no rows and leave it ready for reuse. */
static int step_done(sqlite3_stmt *q) {
    int rc = sqlite3_step(q);
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static const char *col_text(sqlite3_stmt *q, int i) {
    const char *s = (const char *)sqlite3_column_text(q, i);
    return s ? s : "";
}

/* A row of "SELECT id, " RECORD_COLUMNS into r (strings borrowed from q, samples in sb). */
static wpk_status decode_row(tune_db *db, sqlite3_stmt *q, sample_buf *sb, tune_record *r) {
    long long id = sqlite3_column_int64(q, 0);
    r->target = col_text(q, 1);
    r->workload = col_text(q, 2);
    r->template_name = col_text(q, 3);
    r->config = col_text(q, 4);
    if (!status_parse(col_text(q, 5), &r->status))
        return wpk_error(db->ctx, WPK_ERR_PARSE, "records '%s': record %lld has unknown status '%s'",
                         db->path, id, col_text(q, 5));
    bool oom;
    if (!parse_samples(col_text(q, 6), sb, &r->nsamples, &oom))
        return oom ? wpk_error(db->ctx, WPK_ERR_NOMEM, "records '%s': out of memory reading the "
                               "samples of record %lld", db->path, id)
                   : wpk_error(db->ctx, WPK_ERR_PARSE, "records '%s': record %lld has damaged "
                               "samples '%.64s'", db->path, id, col_text(q, 6));
    r->samples = samples_of(sb);
    r->median = sqlite3_column_double(q, 7);
    r->toolchain = col_text(q, 8);
    r->time = sqlite3_column_int64(q, 9);
    return WPK_OK;
}

typedef bool (*record_fn)(void *user, const tune_record *r);

/* Every record of target (NULL: all) and workload (NULL: all) in insertion order. */
static wpk_status walk(tune_db *db, const char *target, const char *workload, record_fn fn, void *user) {
    const char *sql = !target    ? "SELECT id, " RECORD_COLUMNS " FROM records ORDER BY id"
                      : !workload ? "SELECT id, " RECORD_COLUMNS " FROM records WHERE target = ?1 "
                                    "ORDER BY id"
                                  : "SELECT id, " RECORD_COLUMNS " FROM records WHERE target = ?1 "
                                    "AND workload = ?2 ORDER BY id";
    sqlite3_stmt *q;
    int rc = sqlite3_prepare_v2(db->sql, sql, -1, &q, NULL);
    if (rc != SQLITE_OK) return db_fail(db, rc, "reading records");
    if (target) sqlite3_bind_text(q, 1, target, -1, SQLITE_STATIC);
    if (workload) sqlite3_bind_text(q, 2, workload, -1, SQLITE_STATIC);
    sample_buf sb = {0};
    wpk_status st = WPK_OK;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        tune_record r;
        locale_t old = enter_c_locale(); /* only while reading: fn runs in the caller's locale */
        st = decode_row(db, q, &sb, &r);
        leave_c_locale(old);
        if (st != WPK_OK) break;
        /* the read keeps a transaction open until it ends: a write made from fn would commit
         * only then, so tune_db_add refuses while this flag is up */
        bool outer = db->in_each;
        db->in_each = true;
        bool more = fn(user, &r);
        db->in_each = outer;
        if (!more) break;
    }
    if (st == WPK_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) st = db_fail(db, rc, "reading records");
    sqlite3_finalize(q);
    wpk_free(sb.v);
    return st;
}

/* ---- opening: the default path, refusing what is not ours, the schema ---- */

/* mkdir -p (path is modified while it runs and restored) */
static bool make_dirs(char *path) {
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        bool ok = mkdir(path, 0755) == 0 || errno == EEXIST;
        *p = c;
        if (!ok) return false;
        if (!c) break;
    }
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static wpk_status default_path(wpk_context *ctx, char *out, size_t cap) {
    static const char file[] = "/records.db";
    const char *env = getenv("WPK_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    size_t room = cap - sizeof file; /* the directory first, the file name appended below */
    int n;
    if (env && *env)
        n = snprintf(out, room, "%s", env);
    else if (xdg && *xdg)
        n = snprintf(out, room, "%s/wpk", xdg);
    else if (home && *home)
        n = snprintf(out, room, "%s/.cache/wpk", home);
    else
        return wpk_error(ctx, WPK_ERR_IO, "records: no WPK_CACHE_DIR, XDG_CACHE_HOME or HOME to "
                         "keep the database in; name a file (--db)");
    if (n < 0 || (size_t)n >= room)
        return wpk_error(ctx, WPK_ERR_IO, "records: cache directory name too long: '%.200s...'", out);
    if (!make_dirs(out))
        return wpk_error(ctx, WPK_ERR_IO, "records: cannot create directory '%s': %s (set "
                         "WPK_CACHE_DIR to a writable one)", out, strerror(errno));
    memcpy(out + n, file, sizeof file);
    return WPK_OK;
}

static int query_int(sqlite3 *s, const char *sql, long long *out) {
    sqlite3_stmt *q;
    int rc = sqlite3_prepare_v2(s, sql, -1, &q, NULL);
    if (rc != SQLITE_OK) return rc;
    rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) *out = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return rc == SQLITE_ROW ? SQLITE_OK : rc == SQLITE_DONE ? SQLITE_NOTFOUND : rc;
}

/* Whether the open database s is ours: *empty when it holds nothing yet (a new file, or one a
 * creator was killed in before committing the schema). Anything else is refused. */
static wpk_status check_ours(wpk_context *ctx, sqlite3 *s, const char *path, bool *empty,
                             long long *version_out) {
    long long objects = 0, app = 0;
    *empty = false;
    *version_out = RECORDS_SCHEMA;
    int rc = query_int(s, "SELECT count(*) FROM sqlite_master", &objects);
    if ((rc & 0xff) == SQLITE_NOTADB)
        return wpk_error(ctx, WPK_ERR_PARSE, "records '%s': not a SQLite database, so not a wpk "
                         "records database; refusing to touch it (name another file with --db)", path);
    if (rc == SQLITE_OK) rc = query_int(s, "PRAGMA application_id", &app);
    if (rc != SQLITE_OK) return sql_fail(ctx, s, path, rc, "reading the schema");
    if (objects == 0 && (app == 0 || app == RECORDS_APP_ID)) {
        *empty = true;
        return WPK_OK;
    }
    if (app != RECORDS_APP_ID)
        return wpk_error(ctx, WPK_ERR_PARSE, "records '%s': a SQLite database of another program "
                         "(application_id %#llx, %lld schema objects), not a wpk records "
                         "database; refusing to modify it (name another file with --db)", path,
                         (unsigned long long)app, objects);
    long long version = 0;
    rc = query_int(s, "SELECT CAST(value AS INTEGER) FROM wpk_meta WHERE key = 'schema_version'",
                   &version);
    if (rc != SQLITE_OK && (rc & 0xff) != SQLITE_ERROR && rc != SQLITE_NOTFOUND)
        return sql_fail(ctx, s, path, rc, "reading the schema version");
    if (rc != SQLITE_OK || version < 1)
        return wpk_error(ctx, WPK_ERR_PARSE, "records '%s': marked as a wpk records database but "
                         "has no valid schema version; refusing to modify it", path);
    if (version > RECORDS_SCHEMA)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "records '%s': schema version %lld is newer "
                         "than this wpk understands (%d); use a newer wpk or another --db", path,
                         version, RECORDS_SCHEMA);
    if (version != RECORDS_SCHEMA && version != 1)
        return wpk_error(ctx, WPK_ERR_PARSE, "records '%s': unknown schema version %lld", path, version);
    *version_out = version;
    return WPK_OK;
}

static bool has_companion(const char *path, const char *suffix) {
    char name[4200];
    struct stat st;
    snprintf(name, sizeof name, "%s%s", path, suffix);
    return stat(name, &st) == 0;
}

/* "file:" URI of path with ?immutable=1, reserved characters percent-encoded */
static void file_uri(strbuf *b, const char *path) {
    sb_puts(b, path[0] == '/' ? "file://" : "file:");
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (*p == '?' || *p == '#' || *p == '%' || *p <= ' ' || *p >= 0x7f)
            sb_printf(b, "%%%02X", *p);
        else
            sb_printf(b, "%c", *p);
    }
    sb_puts(b, "?immutable=1");
}

/* Look before opening for writing: a file that is not ours is refused before SQLite may write
 * a byte of it (a journal mode switch or a schema would). An absent or empty file is ours. */
static wpk_status probe(wpk_context *ctx, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT) return WPK_OK;
        return wpk_error(ctx, WPK_ERR_IO, "records '%s': %s", path, strerror(errno));
    }
    if (!S_ISREG(st.st_mode))
        return wpk_error(ctx, WPK_ERR_IO, "records '%s': not a regular file", path);
    if (st.st_size == 0) return WPK_OK;
    static const char magic[16] = "SQLite format 3";
    char head[16];
    int fd = open(path, O_RDONLY);
    if (fd < 0) return wpk_error(ctx, WPK_ERR_IO, "records '%s': %s", path, strerror(errno));
    ssize_t n = read(fd, head, sizeof head);
    close(fd);
    if (n != (ssize_t)sizeof head || memcmp(head, magic, sizeof magic) != 0)
        return wpk_error(ctx, WPK_ERR_PARSE, "records '%s': not a SQLite database, so not a wpk "
                         "records database; refusing to touch it (name another file with --db)", path);
    /* With no journal or log beside it the file holds all there is, and it is read as
     * immutable: a read-only connection would otherwise leave a -wal and -shm beside a file
     * that may be refused. With one, SQLite must see it to read the file right. */
    strbuf uri = {0};
    bool alone = !has_companion(path, "-wal") && !has_companion(path, "-journal");
    if (alone) file_uri(&uri, path);
    if (uri.oom) {
        sb_free(&uri);
        return wpk_error(ctx, WPK_ERR_NOMEM, "records '%s': out of memory", path);
    }
    sqlite3 *s = NULL;
    int rc = sqlite3_open_v2(alone ? uri.s : path, &s,
                             SQLITE_OPEN_READONLY | (alone ? SQLITE_OPEN_URI : 0), NULL);
    sb_free(&uri);
    wpk_status ret;
    if (rc != SQLITE_OK) {
        ret = sql_fail(ctx, s, path, rc, "cannot open");
    } else {
        bool empty;
        long long version;
        sqlite3_extended_result_codes(s, 1);
        sqlite3_busy_timeout(s, BUSY_TIMEOUT_MS);
        ret = check_ours(ctx, s, path, &empty, &version);
    }
    sqlite3_close(s);
    return ret;
}

static int exec(tune_db *db, const char *sql) { return sqlite3_exec(db->sql, sql, NULL, NULL, NULL); }

static void rollback(tune_db *db) {
    if (!sqlite3_get_autocommit(db->sql)) exec(db, "ROLLBACK");
}

/* Check the file again under the write lock (the probe could have raced another creator),
 * create the schema in one transaction if it is new, then switch to WAL with full sync. */
static wpk_status setup(tune_db *db) {
    int rc = exec(db, "BEGIN IMMEDIATE");
    if (rc != SQLITE_OK) return db_fail(db, rc, "cannot lock for setup");
    bool empty;
    long long version;
    wpk_status st = check_ours(db->ctx, db->sql, db->path, &empty, &version);
    if (st == WPK_OK && empty) {
        rc = exec(db, schema_sql);
        if (rc == SQLITE_OK) rc = exec(db, finals_sql);
        if (rc != SQLITE_OK) st = db_fail(db, rc, "creating the schema");
    } else if (st == WPK_OK && version == 1) {
        /* version 1 had no finals: add the table, in the same transaction as the new version */
        rc = exec(db, finals_sql);
        if (rc == SQLITE_OK)
            rc = exec(db, "UPDATE wpk_meta SET value = '" STR(RECORDS_SCHEMA) "' "
                          "WHERE key = 'schema_version'");
        if (rc != SQLITE_OK) st = db_fail(db, rc, "upgrading the schema to version 2");
    }
    if (st == WPK_OK) {
        rc = exec(db, "COMMIT");
        if (rc != SQLITE_OK) st = db_fail(db, rc, "creating the schema");
    }
    if (st != WPK_OK) {
        rollback(db);
        return st;
    }
    /* WAL: a commit is one append to the log, readers never block the writer, and a process
     * killed mid-write leaves a log tail that the next open ignores. A file system without
     * shared memory keeps the rollback journal, which with full sync is as safe, only slower. */
    sqlite3_stmt *q;
    rc = sqlite3_prepare_v2(db->sql, "PRAGMA journal_mode = WAL", -1, &q, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(q);
    if (rc != SQLITE_ROW || strcmp(col_text(q, 0), "wal") != 0)
        wpk_log(db->ctx, WPK_LOG_WARN, "records '%s': no WAL journal (%s); using the rollback "
                "journal", db->path, rc == SQLITE_ROW ? col_text(q, 0) : sqlite3_errmsg(db->sql));
    sqlite3_finalize(q);
    rc = exec(db, "PRAGMA synchronous = FULL");
    if (rc != SQLITE_OK) return db_fail(db, rc, "setting synchronous = FULL");
    const struct {
        sqlite3_stmt **q;
        const char *sql;
    } stmts[] = {
        {&db->add, "INSERT INTO records(" RECORD_COLUMNS ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"},
        {&db->has, "SELECT 1 FROM records WHERE target = ?1 AND workload = ?2 AND config = ?3 LIMIT 1"},
        {&db->count, "SELECT count(*) FROM records WHERE target = ?1 AND workload = ?2"},
        {&db->best, "SELECT config, median FROM records WHERE target = ?1 AND workload = ?2 AND "
                    "status = 'ok' ORDER BY median, id LIMIT 1"},
        /* an exact duplicate, for import */
        {&db->dup, "SELECT 1 FROM records WHERE target = ?1 AND workload = ?2 AND template = ?3 AND "
                   "config = ?4 AND status = ?5 AND samples = ?6 AND median = ?7 AND toolchain = ?8 "
                   "AND time = ?9 LIMIT 1"},
        {&db->final_add, "INSERT INTO finals(target, workload, template, config, samples, median, "
                         "round, time) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"},
        {&db->final_round, "SELECT coalesce(max(round), 0) FROM finals WHERE target = ?1 AND "
                           "workload = ?2"},
        /* the fastest of the latest round */
        {&db->final_best, "SELECT config, median FROM finals WHERE target = ?1 AND workload = ?2 "
                          "AND round = (SELECT max(round) FROM finals WHERE target = ?1 AND "
                          "workload = ?2) ORDER BY median, id LIMIT 1"},
        /* one config's median in the latest round */
        {&db->final_of, "SELECT median FROM finals WHERE target = ?1 AND workload = ?2 AND "
                        "config = ?3 AND round = (SELECT max(round) FROM finals WHERE target = ?1 "
                        "AND workload = ?2) LIMIT 1"},
    };
    for (size_t i = 0; i < sizeof stmts / sizeof *stmts; i++) {
        rc = sqlite3_prepare_v3(db->sql, stmts[i].sql, -1, SQLITE_PREPARE_PERSISTENT, stmts[i].q, NULL);
        if (rc != SQLITE_OK) return db_fail(db, rc, "preparing statements");
    }
    return WPK_OK;
}

wpk_status tune_db_open(wpk_context *ctx, const char *path, tune_db **out) {
    if (!out) return wpk_error(ctx, WPK_ERR_INVALID_ARG, "tune_db_open: no output handle");
    *out = NULL;
    char def[4096];
    if (!path) {
        wpk_status st = default_path(ctx, def, sizeof def);
        if (st != WPK_OK) return st;
        path = def;
    }
    wpk_status st = probe(ctx, path);
    if (st != WPK_OK) return st;
    tune_db *db = wpk_calloc(1, sizeof *db);
    if (!db) return wpk_error(ctx, WPK_ERR_NOMEM, "records '%s': out of memory", path);
    db->ctx = ctx;
    db->path = wpk_strdup(path);
    if (!db->path) {
        wpk_free(db);
        return wpk_error(ctx, WPK_ERR_NOMEM, "records '%s': out of memory", path);
    }
    int rc = sqlite3_open_v2(path, &db->sql, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        st = db_fail(db, rc, "cannot open");
    } else {
        sqlite3_extended_result_codes(db->sql, 1);
        sqlite3_busy_timeout(db->sql, BUSY_TIMEOUT_MS);
        st = setup(db);
    }
    if (st != WPK_OK) {
        tune_db_close(db);
        return st;
    }
    *out = db;
    return WPK_OK;
}

void tune_db_close(tune_db *db) {
    if (!db) return;
    sqlite3_stmt *stmts[] = {db->add, db->has,       db->count,       db->best,
                             db->dup, db->final_add, db->final_round, db->final_best,
                             db->final_of};
    for (size_t i = 0; i < sizeof stmts / sizeof *stmts; i++) sqlite3_finalize(stmts[i]);
    sqlite3_close(db->sql);
    wpk_free(db->path);
    wpk_free(db);
}

const char *tune_db_path(const tune_db *db) {
    return db->path;
}

/* ---- appends and queries ---- */

static wpk_status insert(tune_db *db, const tune_record *r, const char *samples) {
    int rc = bind_record(db->add, r, samples);
    if (rc == SQLITE_OK) rc = step_done(db->add);
    else sqlite3_clear_bindings(db->add);
    return rc == SQLITE_OK ? WPK_OK : db_fail(db, rc, "storing a record");
}

wpk_status tune_db_add(tune_db *db, const tune_record *r) {
    if (db->in_each)
        return wpk_error(db->ctx, WPK_ERR_INVALID_ARG, "records '%s': tune_db_add from inside "
                         "tune_db_each (it would commit only when the walk ends)", db->path);
    wpk_status st = check_record(db->ctx, r);
    if (st != WPK_OK) return st;
    strbuf b = {0};
    locale_t old = enter_c_locale();
    put_samples(&b, r->samples, r->nsamples);
    leave_c_locale(old);
    if (b.oom) {
        sb_free(&b);
        return wpk_error(db->ctx, WPK_ERR_NOMEM, "records '%s': out of memory storing a record of "
                         "workload '%s'", db->path, r->workload);
    }
    /* autocommit: the INSERT is its own transaction, durable when this returns */
    st = insert(db, r, b.s);
    sb_free(&b);
    return st;
}

static int bind_key(sqlite3_stmt *q, const char *target, const char *workload, const char *config) {
    int rc = sqlite3_bind_text(q, 1, target, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(q, 2, workload, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && config) rc = sqlite3_bind_text(q, 3, config, -1, SQLITE_STATIC);
    return rc;
}

static void done_with(sqlite3_stmt *q) {
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
}

int64_t tune_db_count(tune_db *db, const char *target, const char *workload) {
    if (!target || !workload) {
        wpk_error(db->ctx, WPK_ERR_INVALID_ARG, "tune_db_count: no target or workload");
        return -1;
    }
    int rc = bind_key(db->count, target, workload, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(db->count);
    int64_t n = rc == SQLITE_ROW ? sqlite3_column_int64(db->count, 0) : -1;
    done_with(db->count);
    if (n < 0) db_fail(db, rc, "counting records");
    return n;
}

bool tune_db_has(tune_db *db, const char *target, const char *workload, const char *config) {
    if (!target || !workload || !config) {
        wpk_error(db->ctx, WPK_ERR_INVALID_ARG, "tune_db_has: no target, workload or config");
        return false;
    }
    int rc = bind_key(db->has, target, workload, config);
    if (rc == SQLITE_OK) rc = sqlite3_step(db->has);
    done_with(db->has);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) db_fail(db, rc, "looking up a config");
    return rc == SQLITE_ROW;
}

wpk_status tune_db_best(tune_db *db, const char *target, const char *workload, char *config,
                        size_t size, double *median) {
    if (!target || !workload)
        return wpk_error(db->ctx, WPK_ERR_INVALID_ARG, "tune_db_best: no target or workload");
    int rc = bind_key(db->best, target, workload, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(db->best);
    wpk_status st = WPK_OK;
    if (rc == SQLITE_ROW) {
        const char *text = col_text(db->best, 0);
        size_t len = strlen(text);
        if (config && len >= size)
            st = wpk_error(db->ctx, WPK_ERR_INVALID_ARG, "records: the best config of workload "
                           "'%s' needs %zu bytes, %zu given", workload, len + 1, size);
        else if (config)
            memcpy(config, text, len + 1);
        if (st == WPK_OK && median) *median = sqlite3_column_double(db->best, 1);
    } else if (rc == SQLITE_DONE) {
        st = wpk_error(db->ctx, WPK_ERR_INVALID_ARG, "records '%s': no successful record of "
                       "workload '%s' on target '%s'", db->path, workload, target);
    } else {
        st = db_fail(db, rc, "finding the best record");
    }
    done_with(db->best);
    return st;
}

wpk_status tune_db_each(tune_db *db, const char *target, const char *workload,
                        bool (*fn)(void *user, const tune_record *r), void *user) {
    if (!target || !fn)
        return wpk_error(db->ctx, WPK_ERR_INVALID_ARG, "tune_db_each: no target or callback");
    return walk(db, target, workload, fn, user);
}

/* ---- final re-measurements ---- */

wpk_status tune_db_add_finals(tune_db *db, const tune_record *r, int n) {
    if (db->in_each)
        return wpk_error(db->ctx, WPK_ERR_INVALID_ARG, "records '%s': tune_db_add_finals from "
                         "inside tune_db_each", db->path);
    for (int i = 0; i < n; i++) {
        wpk_status st = check_record(db->ctx, &r[i]);
        if (st != WPK_OK) return st;
        if (r[i].status != TUNE_OK || strcmp(r[i].target, r[0].target) ||
            strcmp(r[i].workload, r[0].workload))
            return wpk_error(db->ctx, WPK_ERR_INVALID_ARG, "records '%s': a round of finals "
                             "holds successful measurements of one workload", db->path);
    }
    if (n <= 0) return WPK_OK;
    /* one transaction: a round is stored whole or not at all */
    int rc = exec(db, "BEGIN IMMEDIATE");
    if (rc != SQLITE_OK) return db_fail(db, rc, "storing final measurements");
    rc = bind_key(db->final_round, r[0].target, r[0].workload, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(db->final_round);
    const int64_t round = rc == SQLITE_ROW ? sqlite3_column_int64(db->final_round, 0) + 1 : 0;
    done_with(db->final_round);
    rc = rc == SQLITE_ROW ? SQLITE_OK : rc;
    strbuf b = {0};
    for (int i = 0; rc == SQLITE_OK && i < n; i++) {
        sb_free(&b);
        locale_t old = enter_c_locale();
        put_samples(&b, r[i].samples, r[i].nsamples);
        leave_c_locale(old);
        if (b.oom) {
            rc = SQLITE_NOMEM;
            break;
        }
        sqlite3_stmt *q = db->final_add;
        rc = sqlite3_bind_text(q, 1, r[i].target, -1, SQLITE_STATIC);
        if (rc == SQLITE_OK) rc = sqlite3_bind_text(q, 2, r[i].workload, -1, SQLITE_STATIC);
        if (rc == SQLITE_OK) rc = sqlite3_bind_text(q, 3, r[i].template_name, -1, SQLITE_STATIC);
        if (rc == SQLITE_OK) rc = sqlite3_bind_text(q, 4, r[i].config, -1, SQLITE_STATIC);
        if (rc == SQLITE_OK) rc = sqlite3_bind_text(q, 5, b.s ? b.s : "[]", -1, SQLITE_STATIC);
        if (rc == SQLITE_OK) rc = sqlite3_bind_double(q, 6, r[i].median);
        if (rc == SQLITE_OK) rc = sqlite3_bind_int64(q, 7, round);
        if (rc == SQLITE_OK) rc = sqlite3_bind_int64(q, 8, r[i].time);
        if (rc == SQLITE_OK) rc = step_done(q);
        else done_with(q);
    }
    sb_free(&b);
    if (rc == SQLITE_OK) rc = exec(db, "COMMIT");
    if (rc != SQLITE_OK) {
        rollback(db);
        return db_fail(db, rc, "storing final measurements");
    }
    return WPK_OK;
}

int tune_db_final_best(tune_db *db, const char *target, const char *workload, char *config,
                       size_t size, double *median) {
    if (!target || !workload || !config) {
        wpk_error(db->ctx, WPK_ERR_INVALID_ARG, "tune_db_final_best: no target, workload or "
                  "config buffer");
        return -1;
    }
    int rc = bind_key(db->final_best, target, workload, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(db->final_best);
    int found = 0;
    if (rc == SQLITE_ROW) {
        const char *text = col_text(db->final_best, 0);
        size_t len = strlen(text);
        if (len >= size) {
            wpk_error(db->ctx, WPK_ERR_INVALID_ARG, "records: the final config of workload '%s' "
                      "needs %zu bytes, %zu given", workload, len + 1, size);
            found = -1;
        } else {
            memcpy(config, text, len + 1);
            if (median) *median = sqlite3_column_double(db->final_best, 1);
            found = 1;
        }
    } else if (rc != SQLITE_DONE) {
        db_fail(db, rc, "finding the final best");
        found = -1;
    }
    done_with(db->final_best);
    return found;
}

int tune_db_final_of(tune_db *db, const char *target, const char *workload, const char *config,
                     double *median) {
    if (!target || !workload || !config || !median) {
        wpk_error(db->ctx, WPK_ERR_INVALID_ARG, "tune_db_final_of: no target, workload, config "
                  "or median");
        return -1;
    }
    int rc = bind_key(db->final_of, target, workload, config);
    if (rc == SQLITE_OK) rc = sqlite3_step(db->final_of);
    int found = 0;
    if (rc == SQLITE_ROW) {
        *median = sqlite3_column_double(db->final_of, 0);
        found = 1;
    } else if (rc != SQLITE_DONE) {
        db_fail(db, rc, "finding a config's finals");
        found = -1;
    }
    done_with(db->final_of);
    return found;
}

/* ---- JSON lines ---- */

/* A JSON string: quotes, backslashes and control characters escaped, other bytes as they are
 * (the text the tuner stores is ASCII; anything else passes through as UTF-8). */
static void put_json_string(strbuf *b, const char *s) {
    sb_puts(b, "\"");
    while (*s) {
        size_t run = 0;
        while (s[run] && s[run] != '"' && s[run] != '\\' && (unsigned char)s[run] >= 0x20) run++;
        if (run) {
            sb_printf(b, "%.*s", (int)run, s);
            s += run;
            continue;
        }
        unsigned char c = (unsigned char)*s++;
        if (c == '"') sb_puts(b, "\\\"");
        else if (c == '\\') sb_puts(b, "\\\\");
        else if (c == '\n') sb_puts(b, "\\n");
        else if (c == '\t') sb_puts(b, "\\t");
        else sb_printf(b, "\\u%04x", c);
    }
    sb_puts(b, "\"");
}

/* Printed here, not by cJSON: cJSON prints 15 digits when they come within an epsilon of the
 * value, which is not exact, and an export must read back as the very same doubles. */
static void put_record_json(strbuf *b, const tune_record *r) {
    sb_puts(b, "{\"target\":");
    put_json_string(b, r->target);
    sb_puts(b, ",\"workload\":");
    put_json_string(b, r->workload);
    sb_puts(b, ",\"template\":");
    put_json_string(b, r->template_name);
    sb_puts(b, ",\"config\":");
    put_json_string(b, r->config);
    sb_printf(b, ",\"status\":\"%s\",\"samples\":", status_names[r->status]);
    put_samples(b, r->samples, r->nsamples);
    sb_puts(b, ",\"median\":");
    put_double(b, r->median);
    sb_puts(b, ",\"toolchain\":");
    put_json_string(b, r->toolchain);
    sb_printf(b, ",\"time\":%lld}\n", (long long)r->time);
}

typedef struct export_state {
    FILE *f;
    strbuf line;
    bool failed; /* out of memory or a write error */
} export_state;

static bool export_one(void *user, const tune_record *r) {
    export_state *e = user;
    e->line.len = 0;
    put_record_json(&e->line, r);
    if (e->line.oom || fwrite(e->line.s, 1, e->line.len, e->f) != e->line.len) e->failed = true;
    return !e->failed;
}

static bool same_file(const char *a, const struct stat *b) {
    struct stat st;
    return stat(a, &st) == 0 && st.st_dev == b->st_dev && st.st_ino == b->st_ino;
}

/* Whether path names the database itself or one of its companion files. */
static bool is_db_file(tune_db *db, const char *path) {
    struct stat target;
    if (stat(path, &target) != 0) return false;
    if (same_file(db->path, &target)) return true;
    static const char *const suffix[] = {"-wal", "-shm", "-journal"};
    char name[4200];
    for (size_t i = 0; i < sizeof suffix / sizeof *suffix; i++) {
        snprintf(name, sizeof name, "%s%s", db->path, suffix[i]);
        if (same_file(name, &target)) return true;
    }
    return false;
}

wpk_status tune_db_export(tune_db *db, const char *path) {
    if (!path) return wpk_error(db->ctx, WPK_ERR_INVALID_ARG, "tune_db_export: no path");
    if (is_db_file(db, path))
        return wpk_error(db->ctx, WPK_ERR_INVALID_ARG, "records export '%s': that is the records "
                         "database itself; refusing to overwrite it", path);
    /* written beside the target and renamed over it when complete: a failure or a kill never
     * leaves a half export in place of a previous one */
    strbuf tmp = {0};
    sb_printf(&tmp, "%s.tmp.%ld", path, (long)getpid());
    if (tmp.oom) {
        sb_free(&tmp);
        return wpk_error(db->ctx, WPK_ERR_NOMEM, "records export '%s': out of memory", path);
    }
    int fd = open(tmp.s, O_WRONLY | O_CREAT | O_EXCL, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        wpk_status st = wpk_error(db->ctx, WPK_ERR_IO, "records export '%s': cannot create '%s': %s",
                                  path, tmp.s, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp.s);
        }
        sb_free(&tmp);
        return st;
    }
    export_state e = {.f = f};
    wpk_status st = walk(db, NULL, NULL, export_one, &e);
    if (st == WPK_OK && e.failed)
        st = e.line.oom ? wpk_error(db->ctx, WPK_ERR_NOMEM, "records export '%s': out of memory", path)
                        : wpk_error(db->ctx, WPK_ERR_IO, "records export '%s': write failed: %s",
                                    path, strerror(errno));
    if (st == WPK_OK && (fflush(f) != 0 || fsync(fileno(f)) != 0))
        st = wpk_error(db->ctx, WPK_ERR_IO, "records export '%s': write failed: %s", path,
                       strerror(errno));
    if (fclose(f) != 0 && st == WPK_OK)
        st = wpk_error(db->ctx, WPK_ERR_IO, "records export '%s': write failed: %s", path,
                       strerror(errno));
    if (st == WPK_OK && rename(tmp.s, path) != 0)
        st = wpk_error(db->ctx, WPK_ERR_IO, "records export '%s': cannot rename '%s' to it: %s",
                       path, tmp.s, strerror(errno));
    if (st != WPK_OK) unlink(tmp.s);
    sb_free(&e.line);
    sb_free(&tmp);
    return st;
}

enum { F_TARGET, F_WORKLOAD, F_TEMPLATE, F_CONFIG, F_STATUS, F_SAMPLES, F_MEDIAN, F_TOOLCHAIN,
       F_TIME, NFIELDS };
static const char *const field_names[NFIELDS] = {"target", "workload", "template", "config",
                                                 "status", "samples", "median", "toolchain", "time"};

/* One JSON line into r (strings borrowed from *json, which the caller deletes; samples in sb).
 * Strict: every field present once with its type, nothing else, so a line from a newer wpk
 * with fields this one does not know is refused rather than stored without them. */
static wpk_status parse_line(wpk_context *ctx, const char *line, cJSON **json, sample_buf *sb,
                             tune_record *r) {
    const char *end = NULL;
    cJSON *j = *json = cJSON_ParseWithOpts(line, &end, 1);
    if (!j)
        return wpk_error(ctx, WPK_ERR_PARSE, "not valid JSON (at column %ld)",
                         end && end >= line ? (long)(end - line) + 1 : 1L);
    if (!cJSON_IsObject(j)) return wpk_error(ctx, WPK_ERR_PARSE, "not a JSON object");
    const cJSON *f[NFIELDS] = {0};
    const cJSON *item;
    cJSON_ArrayForEach(item, j) {
        int k = 0;
        while (k < NFIELDS && strcmp(item->string, field_names[k]) != 0) k++;
        if (k == NFIELDS) return wpk_error(ctx, WPK_ERR_PARSE, "unknown field '%s'", item->string);
        if (f[k]) return wpk_error(ctx, WPK_ERR_PARSE, "field '%s' given twice", item->string);
        f[k] = item;
    }
    for (int k = 0; k < NFIELDS; k++) {
        if (!f[k]) return wpk_error(ctx, WPK_ERR_PARSE, "missing field '%s'", field_names[k]);
        bool ok = k == F_SAMPLES ? cJSON_IsArray(f[k])
                  : k == F_MEDIAN || k == F_TIME ? cJSON_IsNumber(f[k])
                                                 : cJSON_IsString(f[k]);
        if (!ok)
            return wpk_error(ctx, WPK_ERR_PARSE, "field '%s' is not %s", field_names[k],
                             k == F_SAMPLES ? "an array" : k == F_MEDIAN || k == F_TIME ? "a number" : "a string");
    }
    memset(r, 0, sizeof *r);
    r->target = f[F_TARGET]->valuestring;
    r->workload = f[F_WORKLOAD]->valuestring;
    r->template_name = f[F_TEMPLATE]->valuestring;
    r->config = f[F_CONFIG]->valuestring;
    r->toolchain = f[F_TOOLCHAIN]->valuestring;
    if (!status_parse(f[F_STATUS]->valuestring, &r->status))
        return wpk_error(ctx, WPK_ERR_PARSE, "unknown status '%s'", f[F_STATUS]->valuestring);
    int n = cJSON_GetArraySize(f[F_SAMPLES]);
    if (!sample_reserve(sb, n)) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory for %d samples", n);
    int i = 0;
    cJSON_ArrayForEach(item, f[F_SAMPLES]) {
        if (!cJSON_IsNumber(item)) return wpk_error(ctx, WPK_ERR_PARSE, "samples[%d] is not a number", i);
        sb->v[i++] = item->valuedouble;
    }
    r->samples = samples_of(sb);
    r->nsamples = n;
    r->median = f[F_MEDIAN]->valuedouble;
    double t = f[F_TIME]->valuedouble;
    if (t != floor(t) || fabs(t) > JSON_INT_MAX)
        return wpk_error(ctx, WPK_ERR_PARSE, "time %g is not a whole number of seconds", t);
    r->time = (int64_t)t;
    wpk_status st = check_record(ctx, r);
    return st == WPK_OK ? WPK_OK : WPK_ERR_PARSE; /* a bad value in a file is a parse error */
}

/* One line without its newline into *buf (NUL-terminated); returns its length, -1 at the end of
 * the file, -2 when out of memory. */
static long read_line(FILE *f, char **buf, size_t *cap) {
    size_t n = 0;
    int c = EOF;
    for (;;) {
        if (n + 2 > *cap) {
            size_t ncap = *cap ? *cap * 2 : 1024;
            char *nb = wpk_realloc(*buf, ncap);
            if (!nb) return -2;
            *buf = nb;
            *cap = ncap;
        }
        if ((c = getc(f)) == EOF || c == '\n') break;
        (*buf)[n++] = (char)c;
    }
    if (c == EOF && n == 0) return -1;
    (*buf)[n] = '\0';
    return (long)n;
}

wpk_status tune_db_import(tune_db *db, const char *path, int64_t *added) {
    if (added) *added = 0;
    if (!path) return wpk_error(db->ctx, WPK_ERR_INVALID_ARG, "tune_db_import: no path");
    if (db->in_each)
        return wpk_error(db->ctx, WPK_ERR_INVALID_ARG, "records '%s': tune_db_import from inside "
                         "tune_db_each", db->path);
    FILE *f = fopen(path, "r");
    if (!f) return wpk_error(db->ctx, WPK_ERR_IO, "records import '%s': %s", path, strerror(errno));
    /* one transaction for the whole file: a bad line or a kill imports nothing of it */
    int rc = exec(db, "BEGIN IMMEDIATE");
    if (rc != SQLITE_OK) {
        fclose(f);
        return db_fail(db, rc, "cannot lock for import");
    }
    char *line = NULL;
    size_t cap = 0;
    sample_buf sb = {0};
    strbuf samples = {0};
    int64_t n = 0;
    long lineno = 0;
    wpk_status st = WPK_OK;
    locale_t old = enter_c_locale();
    for (;;) {
        long len = read_line(f, &line, &cap);
        if (len == -1) break;
        lineno++;
        if (len == -2) {
            st = wpk_error(db->ctx, WPK_ERR_NOMEM, "records import '%s' line %ld: out of memory",
                           path, lineno);
            break;
        }
        if (len > 0 && line[len - 1] == '\r') line[--len] = '\0';
        if ((long)strlen(line) != len) {
            st = wpk_error(db->ctx, WPK_ERR_PARSE, "records import '%s' line %ld: a NUL byte",
                           path, lineno);
            break;
        }
        if (line[strspn(line, " \t")] == '\0') continue; /* blank lines carry nothing */
        cJSON *json = NULL;
        tune_record r;
        st = parse_line(db->ctx, line, &json, &sb, &r);
        if (st != WPK_OK) {
            wpk_error_prefix(db->ctx, "records import '%s' line %ld", path, lineno);
            cJSON_Delete(json);
            break;
        }
        samples.len = 0;
        put_samples(&samples, r.samples, r.nsamples);
        if (samples.oom) {
            st = wpk_error(db->ctx, WPK_ERR_NOMEM, "records import '%s' line %ld: out of memory",
                           path, lineno);
        } else {
            rc = bind_record(db->dup, &r, samples.s);
            if (rc == SQLITE_OK) rc = sqlite3_step(db->dup);
            done_with(db->dup);
            if (rc == SQLITE_DONE) {
                st = insert(db, &r, samples.s);
                n += st == WPK_OK;
            } else if (rc != SQLITE_ROW) {
                st = db_fail(db, rc, "looking up an imported record");
            }
        }
        cJSON_Delete(json);
        if (st != WPK_OK) break;
    }
    leave_c_locale(old);
    if (st == WPK_OK && ferror(f))
        st = wpk_error(db->ctx, WPK_ERR_IO, "records import '%s': read failed", path);
    if (st == WPK_OK) {
        rc = exec(db, "COMMIT");
        if (rc != SQLITE_OK) st = db_fail(db, rc, "committing the import");
    }
    if (st != WPK_OK) rollback(db);
    else if (added) *added = n;
    fclose(f);
    wpk_free(line);
    wpk_free(sb.v);
    sb_free(&samples);
    return st;
}
