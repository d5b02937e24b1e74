/* session.h -- what src/api's other files need of a session (the struct stays in session.c). */
#ifndef WPK_API_SESSION_H
#define WPK_API_SESSION_H

#include "api/exec_plan.h"
#include "wpk.h"

/* The plan for the inputs bound now: from the session's cache, or specialized and compiled as
 * its params say (records read, kernels built), without running it. Every input must be bound.
 * *out is borrowed from the session. */
wpk_status session_prepare(wpk_session *s, exec_plan **out);

/* Bind every input of m at its shape, symbolic dims at batch, to zeros (for timing a plan). */
wpk_status api_bind_zeros(wpk_context *ctx, wpk_session *s, const wpk_model *m, int batch);

/* The model's graph was optimized at level before this session was made on it with opt_level
 * 0 (wpk_compile): once the inputs' dims are bound, the rewrites that decline on symbolic dims
 * run at that level, as in a session that optimized the graph itself. Before the first plan. */
void session_set_optimized_at(wpk_session *s, int level);

/* The threads the session runs on (params.threads, or the default). */
int session_threads(const wpk_session *s);

#endif
