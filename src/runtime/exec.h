/* exec.h -- the executor: a read plan made ready on a backend (workspace and constants
 * allocated, modules loaded, each step prepared by its runner with its argument addresses
 * fixed), then run any number of times without allocating. */
#ifndef WPK_RUNTIME_EXEC_H
#define WPK_RUNTIME_EXEC_H

#include "runtime/backend.h"

typedef struct rt_exec rt_exec;

/* Make plan (borrowed: must outlive the executor) ready on backend (borrowed, likewise).
 * profile: keep per-step times (rt_exec_step_ms). `what` names the plan in messages. Errors:
 * WPK_ERR_UNSUPPORTED for a step whose runner is not registered (naming it and the node), a
 * runner's or the backend's errors, WPK_ERR_NOMEM. *out is the caller's (rt_exec_free). */
wpk_status rt_exec_create(wpk_context *ctx, const char *what, const rt_plan *plan,
                          rt_backend *backend, bool profile, rt_exec **out);
void rt_exec_free(rt_exec *x);

/* Device address of tensor t (NULL where it has no bytes). */
void *rt_exec_data(const rt_exec *x, int t);

/* Copy bytes of host data into tensor t (an input). */
wpk_status rt_exec_upload(rt_exec *x, wpk_context *ctx, int t, const void *data, size_t bytes);

/* Copy bytes of tensor t (an output) into host data; complete when it returns (on a device
 * that is not host_visible the outputs are read only this way). */
wpk_status rt_exec_download(rt_exec *x, wpk_context *ctx, int t, void *data, size_t bytes);

/* Run every step; the first error stops the run. Allocates nothing. Not thread-safe for one
 * executor. */
wpk_status rt_exec_run(rt_exec *x, wpk_context *ctx);

/* Per step, its time in the last run (ms); NULL without profile. */
const double *rt_exec_step_ms(const rt_exec *x);

/* Keep per-step times from the next run on, as rt_exec_create's profile. WPK_ERR_NOMEM. */
wpk_status rt_exec_profile(rt_exec *x, wpk_context *ctx);

/* Point workspace tensor t at data (borrowed: left alone and kept until the next bind or
 * rt_exec_free) instead of its planned place; NULL: back to its place. Every step argument
 * that is t follows, so an input is read where the caller keeps it, no copy. The caller makes
 * sure no other tensor shares t's bytes (a view of it, an op writing in place over it). Only
 * on a host-visible backend, whose runners take argument addresses at each run
 * (WPK_ERR_UNSUPPORTED otherwise); WPK_ERR_INVALID_ARG for a tensor outside the workspace.
 * Allocates nothing; not thread-safe for one executor. */
wpk_status rt_exec_bind(rt_exec *x, wpk_context *ctx, int t, void *data);

#endif
