/* artifact.h -- the container of a compiled plan (.wpk): a header (magic, format version, the
 * target fingerprint), a body of sections the writer lays out (base/bytes.h), and a SHA-256
 * of all of it. A reader checks, in order: the magic, the format version (another one is
 * WPK_ERR_UNSUPPORTED), the size and the checksum (WPK_ERR_PARSE: truncated or damaged), then
 * the target (another machine's is WPK_ERR_UNSUPPORTED); messages name the file. Internal to src/runtime, src/compile, src/api. */
#ifndef WPK_RUNTIME_ARTIFACT_H
#define WPK_RUNTIME_ARTIFACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/bytes.h"
#include "base/context.h"

#define ARTIFACT_MAGIC "WPKPLAN\n"
#define ARTIFACT_VERSION 3u /* 3: the plan names its target (cpu, cuda) */

/* Write header + body + checksum to path atomically (a temporary file beside it, renamed over
 * path once complete and synced). fingerprint: the target the plan is for. WPK_ERR_IO naming the
 * path. */
wpk_status artifact_write(wpk_context *ctx, const char *path, const char *fingerprint,
                          const byte_writer *body);

/* Read and check the file at path. expect_target: the fingerprint it must have been built for
 * (NULL: any; then *target, when given, receives the file's). On success *file is the whole file
 * (the caller's, wpk_free) and body points into it. Errors as above, and WPK_ERR_IO when the
 * file cannot be read, WPK_ERR_NOMEM. */
wpk_status artifact_read(wpk_context *ctx, const char *path, const char *expect_target,
                         uint8_t **file, byte_reader *body, char *target, size_t target_cap);

#endif
