/* hash.h -- content hashes: SHA-256 for keys whose collisions would load the wrong thing
 * (compiled-kernel cache, artifacts), FNV-1a for in-memory tables. */
#ifndef WPK_BASE_HASH_H
#define WPK_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct wpk_sha256 {
    uint32_t h[8];
    uint64_t nbytes;   /* message length so far */
    uint8_t block[64]; /* pending input, nbytes % 64 bytes of it */
} wpk_sha256;

/* Streaming SHA-256 (FIPS 180-4): init, update any number of times, final. Not thread-safe per
 * state; separate states are independent. */
void wpk_sha256_init(wpk_sha256 *s);
void wpk_sha256_update(wpk_sha256 *s, const void *data, size_t n);
void wpk_sha256_final(wpk_sha256 *s, uint8_t digest[32]);
/* The digest as 64 lowercase hex digits and a NUL into hex[65]. */
void wpk_sha256_hex(const uint8_t digest[32], char hex[65]);

/* 64-bit FNV-1a of n bytes, continuing from `seed` (start with WPK_FNV1A_SEED). */
#define WPK_FNV1A_SEED 0xcbf29ce484222325ull
uint64_t wpk_fnv1a64(const void *data, size_t n, uint64_t seed);

#endif
