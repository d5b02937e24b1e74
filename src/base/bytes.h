/* bytes.h -- little-endian byte strings: a growing writer and a bounds-checked reader, for the
 * formats wpk writes itself (a plan's body, a node's payload). Integers read the same on every
 * host; a reader that runs past its end only sets a flag, so a parser checks once per section. */
#ifndef WPK_BASE_BYTES_H
#define WPK_BASE_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growing buffer (zero-initialize it); oom set, and later writes dropped, when an allocation
 * fails. data is the caller's (bw_free). */
typedef struct byte_writer {
    uint8_t *data;
    size_t len, cap;
    bool oom;
} byte_writer;

/* n raw bytes. */
void bw_raw(byte_writer *w, const void *data, size_t n);
void bw_u32(byte_writer *w, uint32_t v);
void bw_u64(byte_writer *w, uint64_t v);
void bw_i64(byte_writer *w, int64_t v);
void bw_f32(byte_writer *w, float v);
void bw_f64(byte_writer *w, double v);
/* A length-prefixed byte string. */
void bw_bytes(byte_writer *w, const void *data, size_t n);
/* A string (NULL as ""): its bytes and a NUL, length-prefixed, so a reader can hand out a
 * pointer into the buffer. */
void bw_str(byte_writer *w, const char *s);
void bw_free(byte_writer *w);

/* Reads what the writer wrote from [p, end) (borrowed); a read past the end, or a string
 * without exactly one NUL at its end, sets bad and returns zeros / NULL / "". */
typedef struct byte_reader {
    const uint8_t *p, *end;
    bool bad;
} byte_reader;

/* The next n raw bytes (a pointer into the buffer), or NULL. */
const void *br_raw(byte_reader *r, size_t n);
uint32_t br_u32(byte_reader *r);
uint64_t br_u64(byte_reader *r);
int64_t br_i64(byte_reader *r);
float br_f32(byte_reader *r);
double br_f64(byte_reader *r);
/* The next byte string: a pointer into the buffer and its length (*n). */
const void *br_bytes(byte_reader *r, size_t *n);
const char *br_str(byte_reader *r);
/* A u32 count that must be at most max and small enough that `each` bytes per item fit in
 * what is left: bad otherwise. */
uint32_t br_count(byte_reader *r, uint32_t max, size_t each);

#endif
