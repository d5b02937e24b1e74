/* context.h -- the owner of error messages and the log callback (struct behind wpk_context). */
#ifndef WPK_BASE_CONTEXT_H
#define WPK_BASE_CONTEXT_H

#include "wpk_runtime.h"

#define WPK_ERR_MSG_MAX 4096

struct wpk_context {
    wpk_status status;
    char msg[WPK_ERR_MSG_MAX];
    wpk_log_fn log_fn;
    void *log_user;
    wpk_log_level log_max;
};

/* Record a failure on ctx (ctx may be NULL) and return status, so callers can write
 * `return wpk_error(ctx, WPK_ERR_MODEL, "node '%s' (Conv): ...", ...)`. */
wpk_status wpk_error(wpk_context *ctx, wpk_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Put "prefix: " in front of the message already on ctx (to add the place: file, node). */
void wpk_error_prefix(wpk_context *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void wpk_log(wpk_context *ctx, wpk_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void wpk_clear_error(wpk_context *ctx);

#endif
