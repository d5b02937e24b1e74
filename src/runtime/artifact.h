/* artifact.h -- the container of a compiled plan (.wpk): a header (magic, format version, the
 * target fingerprint), a body of sections the writer lays out, and a SHA-256 of all of it; and
 * the bounds-checked byte reader/writer the body is made with. A reader checks, in order: the
 * magic, the format version (another one is WPK_ERR_UNSUPPORTED), the size and the checksum
 * (WPK_ERR_PARSE: truncated or damaged), then the target (another machine's is
 * WPK_ERR_UNSUPPORTED); messages name the file. Internal to src/runtime, src/compile, src/api. */
#ifndef WPK_COMPILE_ARTIFACT_H
#define WPK_COMPILE_ARTIFACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/context.h"

#define ARTIFACT_MAGIC "WPKPLAN\n"
#define ARTIFACT_VERSION 3u /* 3: the plan names its target (cpu, cuda) */

/* A growing byte buffer; oom set (and later writes dropped) when an allocation fails. */
typedef struct artifact_writer {
    uint8_t *data;
    size_t len, cap;
    bool oom;
} artifact_writer;

void aw_u32(artifact_writer *w, uint32_t v);
void aw_u64(artifact_writer *w, uint64_t v);
void aw_i64(artifact_writer *w, int64_t v);
void aw_f64(artifact_writer *w, double v);
/* A length-prefixed byte string. */
void aw_bytes(artifact_writer *w, const void *data, size_t n);
/* A string (NULL as ""): its bytes and a NUL, length-prefixed, so a reader can hand out a
 * pointer into the buffer. */
void aw_str(artifact_writer *w, const char *s);
void aw_free(artifact_writer *w);

/* Reads what the writer wrote; any read past the end (or a string without its NUL) sets bad
 * and returns zeros / NULL / "", so a parser checks bad once at the end of a section. */
typedef struct artifact_reader {
    const uint8_t *p, *end;
    bool bad;
} artifact_reader;

uint32_t ar_u32(artifact_reader *r);
uint64_t ar_u64(artifact_reader *r);
int64_t ar_i64(artifact_reader *r);
double ar_f64(artifact_reader *r);
/* The next byte string: a pointer into the buffer and its length (*n). */
const void *ar_bytes(artifact_reader *r, size_t *n);
const char *ar_str(artifact_reader *r);
/* A count that must be at most max (and small enough that `each` bytes per item fit in what
 * is left): bad otherwise. */
uint32_t ar_count(artifact_reader *r, uint32_t max, size_t each);

/* Write header + body + checksum to path atomically (a temporary file beside it, renamed over
 * path once complete and synced). fingerprint: the target the plan is for. WPK_ERR_IO naming the
 * path. */
wpk_status artifact_write(wpk_context *ctx, const char *path, const char *fingerprint,
                          const artifact_writer *body);

/* Read and check the file at path. expect_target: the fingerprint it must have been built for
 * (NULL: any; then *target, when given, receives the file's). On success *file is the whole file
 * (the caller's, wpk_free) and body points into it. Errors as above, and WPK_ERR_IO when the
 * file cannot be read, WPK_ERR_NOMEM. */
wpk_status artifact_read(wpk_context *ctx, const char *path, const char *expect_target,
                         uint8_t **file, artifact_reader *body, char *target, size_t target_cap);

#endif
