/* context.c -- error messages, logging and the small lookups (names of statuses and dtypes). */
#include "base/context.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

wpk_context *wpk_context_create(void) {
    wpk_context *ctx = wpk_calloc(1, sizeof *ctx);
    if (ctx) ctx->log_max = WPK_LOG_WARN;
    return ctx;
}

void wpk_context_free(wpk_context *ctx) { wpk_free(ctx); }

const char *wpk_context_error(const wpk_context *ctx) { return ctx ? ctx->msg : ""; }

void wpk_context_set_log(wpk_context *ctx, wpk_log_fn fn, void *user, wpk_log_level max_level) {
    ctx->log_fn = fn;
    ctx->log_user = user;
    ctx->log_max = max_level;
}

wpk_status wpk_error(wpk_context *ctx, wpk_status status, const char *fmt, ...) {
    if (!ctx) return status;
    ctx->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->msg, sizeof ctx->msg, fmt, ap);
    va_end(ap);
    return status;
}

void wpk_error_prefix(wpk_context *ctx, const char *fmt, ...) {
    if (!ctx) return;
    char prefix[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(prefix, sizeof prefix - 2, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    size_t plen = strlen(prefix);
    memcpy(prefix + plen, ": ", 3);
    plen += 2;
    /* shift the message right, keeping the NUL inside the buffer, then put the prefix in front */
    size_t mlen = strnlen(ctx->msg, sizeof ctx->msg - 1);
    if (plen + mlen > sizeof ctx->msg - 1) mlen = sizeof ctx->msg - 1 - plen;
    memmove(ctx->msg + plen, ctx->msg, mlen);
    ctx->msg[plen + mlen] = 0;
    memcpy(ctx->msg, prefix, plen);
}

void wpk_clear_error(wpk_context *ctx) {
    if (!ctx) return;
    ctx->status = WPK_OK;
    ctx->msg[0] = 0;
}

void wpk_log(wpk_context *ctx, wpk_log_level level, const char *fmt, ...) {
    if (!ctx || !ctx->log_fn || level > ctx->log_max) return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < (int)sizeof line) {
        ctx->log_fn(ctx->log_user, level, line);
        return;
    }
    /* long messages (graph dumps) are formatted again into a buffer of their size */
    char *big = wpk_malloc((size_t)n + 1);
    if (!big) {
        ctx->log_fn(ctx->log_user, level, line);
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    ctx->log_fn(ctx->log_user, level, big);
    wpk_free(big);
}

const char *wpk_status_name(wpk_status status) {
    switch (status) {
    case WPK_OK: return "ok";
    case WPK_ERR_INVALID_ARG: return "invalid argument";
    case WPK_ERR_IO: return "i/o error";
    case WPK_ERR_PARSE: return "parse error";
    case WPK_ERR_MODEL: return "invalid model";
    case WPK_ERR_UNSUPPORTED: return "unsupported";
    case WPK_ERR_NOMEM: return "out of memory";
    case WPK_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *wpk_dtype_name(wpk_dtype dtype) {
    switch (dtype) {
    case WPK_DTYPE_FLOAT32: return "float32";
    case WPK_DTYPE_UINT8: return "uint8";
    case WPK_DTYPE_INT8: return "int8";
    case WPK_DTYPE_INT32: return "int32";
    case WPK_DTYPE_INT64: return "int64";
    case WPK_DTYPE_BOOL: return "bool";
    case WPK_DTYPE_FLOAT64: return "float64";
    case WPK_DTYPE_FLOAT16: return "float16";
    case WPK_DTYPE_BFLOAT16: return "bfloat16";
    case WPK_DTYPE_UNDEFINED: break;
    }
    return "undefined";
}

size_t wpk_dtype_size(wpk_dtype dtype) {
    switch (dtype) {
    case WPK_DTYPE_FLOAT32: case WPK_DTYPE_INT32: return 4;
    case WPK_DTYPE_INT64: case WPK_DTYPE_FLOAT64: return 8;
    case WPK_DTYPE_UINT8: case WPK_DTYPE_INT8: case WPK_DTYPE_BOOL: return 1;
    case WPK_DTYPE_FLOAT16: case WPK_DTYPE_BFLOAT16: return 2;
    case WPK_DTYPE_UNDEFINED: break;
    }
    return 0;
}

const char *wpk_version(void) { return "0.1.0"; }
