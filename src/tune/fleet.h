/* fleet.h -- tuning on a fleet of MPI processes (Open MPI; built where CMake finds MPI, then
 * WPK_HAVE_MPI is defined). Every process of `mpirun -n N wpk tune --mpi` extracts the same
 * tasks; rank 0 runs the tuner (scheduler, strategies, the only writer of the records
 * database) with the fleet's runner (tuner.h), which hands candidates to every accepted rank,
 * rank 0 included, and brings back their results, each under the fingerprint and toolchain of
 * the rank that measured it; the next task starts while the last one's tail is out, and the
 * finalists' re-measurements go to whichever rank is free. A rank whose target fingerprint or
 * tasks differ from rank 0's is told so and left out. A rank that sends nothing (results or
 * its heartbeat) for the lease while it holds work is taken for dead or hung: left out, its
 * candidates and re-measurement handed out again, anything it sends later ignored, so no
 * candidate is recorded twice. */
#ifndef WPK_TUNE_FLEET_H
#define WPK_TUNE_FLEET_H

#include <stdbool.h>
#include <stdint.h>

#include "tune/tasks.h"
#include "tune/tuner.h"

typedef struct tune_fleet tune_fleet;

/* Joins the MPI job (MPI_Init_thread, at least MPI_THREAD_SERIALIZED; argc/argv as main's).
 * lease_s: how long a rank holding candidates may stay silent before it is left out (> 0).
 * ctx (borrowed, must outlive the fleet) hears its messages and log lines. Errors:
 * WPK_ERR_UNSUPPORTED when MPI cannot start or lacks the thread level, WPK_ERR_NOMEM. */
wpk_status tune_fleet_join(wpk_context *ctx, int *argc, char ***argv, double lease_s,
                           tune_fleet **out);
/* Leaves the job and frees f: MPI_Finalize, or MPI_Abort with exit_code when abort is set
 * (others may wait for this rank: rank 0 failed before the fleet opened, another rank before
 * its hello) or when ranks were lost (a dead or hung rank cannot take part in finalizing; a
 * line says so). NULL: nothing. */
void tune_fleet_leave(tune_fleet *f, int exit_code, bool abort);

int tune_fleet_rank(const tune_fleet *f);
int tune_fleet_size(const tune_fleet *f);

/* Rank 0: hears every other rank's hello and accepts those whose fingerprint is `target` and
 * whose tasks are tasks[0..ntasks) (the same keys in the same order); the others are told why
 * and left out (a warning names each). Errors: WPK_ERR_IO when MPI fails. */
wpk_status tune_fleet_open(tune_fleet *f, const char *target, const tune_model_task *tasks,
                           int ntasks);
/* Rank 0: the runner to put in tune_options.runner (valid while f lives). */
const tune_runner *tune_fleet_runner(tune_fleet *f);
/* Rank 0: ranks accepted (rank 0 included) and lost so far. */
void tune_fleet_counts(const tune_fleet *f, int *accepted, int *lost);
/* Rank 0: one line of progress into buf: candidates per second since the open, each rank's
 * share of the results ("0:34% 1:33% 2:33%", a lost rank marked "lost"). */
void tune_fleet_describe(const tune_fleet *f, char *buf, size_t cap);
/* Rank 0: where the time went since the open, one line: each rank's share of it spent
 * measuring, and rank 0's seconds measuring candidates, re-measuring finalists, waiting for
 * the others' results and between tasks (the tuner's own work), and the CPU seconds of its
 * bookkeeping inside them (strategies, storing results, MPI). */
void tune_fleet_describe_time(const tune_fleet *f, char *buf, size_t cap);
/* Rank 0: tells every accepted rank that the job is over. */
void tune_fleet_stop(tune_fleet *f);

/* Ranks other than 0: say hello (this machine's fingerprint, or $WPK_FLEET_FINGERPRINT where
 * set: a stand-in for another machine in tests, and the toolchain the records name), then
 * measure the candidates rank 0 sends for tasks[0..ntasks) with opt's measurement settings
 * until it says stop. *refused is set when rank 0 left this rank out (its reason on ctx as a
 * warning). Errors: WPK_ERR_IO when MPI fails, a measurer's errors (rank 0 is told first). */
wpk_status tune_fleet_serve(tune_fleet *f, const tune_model_task *tasks, int ntasks,
                            const tune_options *opt, bool *refused);

#endif
