/* records.h -- the tuning records database (SQLite): one row per measurement. Crash-safe (each
 * record is its own committed transaction in WAL mode with full sync: a kill -9 loses at most the
 * trial in flight and never corrupts the file) and resumable (the tuner asks what is stored). */
#ifndef WPK_TUNE_RECORDS_H
#define WPK_TUNE_RECORDS_H

#include <stdbool.h>
#include <stdint.h>

#include "tune/strategy.h"

typedef struct tune_record {
    const char *target;      /* target fingerprint (CPU model + ISA flags, or GPU + SM) */
    const char *workload;    /* tune_task.key */
    const char *template_name;
    const char *config;      /* tune_config_print text */
    tune_status status;
    const double *samples;   /* seconds, every sample kept */
    int nsamples;
    double median;           /* seconds; 0 when status != TUNE_OK */
    const char *toolchain;   /* compiler + version + flags */
    int64_t time;            /* unix seconds when measured */
} tune_record;

typedef struct tune_db tune_db;

/* Open (creating if needed) the database at path; NULL path = the default location
 * ($WPK_CACHE_DIR or $XDG_CACHE_HOME/wpk or ~/.cache/wpk, file records.db). A file that is not a
 * records database is refused with WPK_ERR_IO/WPK_ERR_PARSE naming it, never overwritten.
 * ctx (borrowed, must outlive db) receives the messages of every later failing call on db.
 * One db per thread; separate processes may share the file (SQLite locking, busy timeout). */
wpk_status tune_db_open(wpk_context *ctx, const char *path, tune_db **out);
void tune_db_close(tune_db *db);
/* The file db was opened at (the default location resolved); valid while db is open. */
const char *tune_db_path(const tune_db *db);
/* Append one record (a committed transaction). */
wpk_status tune_db_add(tune_db *db, const tune_record *r);
/* Records stored for (target, workload): total, and whether `config` is among them. */
int64_t tune_db_count(tune_db *db, const char *target, const char *workload);
bool tune_db_has(tune_db *db, const char *target, const char *workload, const char *config);
/* The fastest successful record for (target, workload): config text copied into config (size
 * bytes) and its median. WPK_ERR_INVALID_ARG when there is none (not an error to report). */
wpk_status tune_db_best(tune_db *db, const char *target, const char *workload, char *config,
                        size_t size, double *median);
/* Call fn for every record of (target, workload) (workload NULL: every workload of target), in
 * insertion order; fn returns false to stop. Strings in r are valid during the call only. */
wpk_status tune_db_each(tune_db *db, const char *target, const char *workload,
                        bool (*fn)(void *user, const tune_record *r), void *user);
/* The tuner's final re-measurements of one workload (the default and its best few configs,
 * timed alone, back to back: DOPpler's check of the trials before they are trusted): the n
 * records r, all successful and of one target and workload, stored as the workload's next
 * round in one transaction (all or none). They are kept apart from the records: they are not
 * trials (tune_db_count, tune_db_has and the exports do not see them). */
wpk_status tune_db_add_finals(tune_db *db, const tune_record *r, int n);
/* The fastest config of the latest round of finals of (target, workload) into config (size
 * bytes) and its median there (median may be NULL): 1; 0 when there are none; -1 on an error
 * (the message on the db's context). */
int tune_db_final_best(tune_db *db, const char *target, const char *workload, char *config,
                       size_t size, double *median);
/* config's median in the latest round of finals of (target, workload) into *median: 1; 0 when
 * that round did not time it (or there are no finals); -1 on an error. */
int tune_db_final_of(tune_db *db, const char *target, const char *workload, const char *config,
                     double *median);
/* JSON lines, one record per line, every field: export all records; import skips records already
 * present (same target, workload, config, time and samples), so importing twice adds nothing. */
wpk_status tune_db_export(tune_db *db, const char *path);
wpk_status tune_db_import(tune_db *db, const char *path, int64_t *added);

#endif
