/* alloc.h -- the one door to the heap, so tests can fail the Nth allocation (fault injection). */
#ifndef WPK_BASE_ALLOC_H
#define WPK_BASE_ALLOC_H

#include <stddef.h>

void *wpk_malloc(size_t n);
void *wpk_calloc(size_t count, size_t size);
void *wpk_realloc(void *p, size_t n);
void wpk_free(void *p);
char *wpk_strdup(const char *s);

/* Fault injection: make allocation number n (1-based, counted from this call) fail; 0 disables.
 * Also armed at start-up from the environment variable WPK_FAIL_ALLOC=n. Not thread-safe. */
void wpk_alloc_fail_at(long n);
/* Allocations made since the last wpk_alloc_fail_at() (or start). */
long wpk_alloc_count(void);

#endif
