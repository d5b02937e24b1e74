/* alloc.c -- heap wrappers with a counter that can fail the Nth allocation on purpose. */
#include "base/alloc.h"

#include <stdlib.h>
#include <string.h>

static long alloc_count;
static long fail_at = -1; /* -1: not yet read from the environment */

static int should_fail(void) {
    if (fail_at < 0) {
        const char *env = getenv("WPK_FAIL_ALLOC");
        fail_at = env ? atol(env) : 0;
    }
    alloc_count++;
    return fail_at > 0 && alloc_count == fail_at;
}

void wpk_alloc_fail_at(long n) {
    fail_at = n;
    alloc_count = 0;
}

long wpk_alloc_count(void) { return alloc_count; }

void *wpk_malloc(size_t n) { return should_fail() ? NULL : malloc(n ? n : 1); }

void *wpk_calloc(size_t count, size_t size) {
    return should_fail() ? NULL : calloc(count ? count : 1, size ? size : 1);
}

void *wpk_realloc(void *p, size_t n) { return should_fail() ? NULL : realloc(p, n ? n : 1); }

void wpk_free(void *p) { free(p); }

char *wpk_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = wpk_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}
