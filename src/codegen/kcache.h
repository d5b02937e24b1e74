/* kcache.h -- the on-disk kernel cache the compile drivers share (codegen/c/jit.c for objects,
 * codegen/cuda/nvrtc.c for PTX and cubins): where it lives, content keys, whole-file writes and
 * the trimmed compiler message. Thread-safe; nothing here runs a compiler. */
#ifndef WPK_CODEGEN_KCACHE_H
#define WPK_CODEGEN_KCACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/context.h"

/* The cache directory, created when missing: $WPK_CACHE_DIR, else $XDG_CACHE_HOME/wpk/kernels,
 * else ~/.cache/wpk/kernels, each followed by `sub` ("" or "/cuda"). WPK_ERR_IO naming `what`
 * ("kernel cache") when there is no place for it or it cannot be created. */
wpk_status cg_cache_dir(wpk_context *ctx, const char *sub, const char *what, char *dir,
                        size_t cap);
/* key (65 bytes): the hex SHA-256 of parts[0..n) (each with its NUL) then `source`. */
void cg_cache_key(const char *const *parts, int n, const char *source, char *key);
/* Write a new file (O_EXCL) of len bytes; false with errno, and no file left, on failure. */
bool cg_cache_write(const char *path, const void *data, size_t len);
/* A number no other call in this process returns: temporaries are KEY.PID.N.tmp. */
long cg_cache_serial(void);
/* A compiler's message for a status: trailing blanks dropped, at most `max` bytes of its start
 * (the first error is the cause), "[...]" where cut. */
void cg_cache_trim(const char *text, size_t max, char *dst, size_t cap);

#endif
