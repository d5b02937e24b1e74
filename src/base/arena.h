/* arena.h -- bump allocation for data that lives and dies together (a model, a compile). */
#ifndef WPK_BASE_ARENA_H
#define WPK_BASE_ARENA_H

#include <stddef.h>

typedef struct arena_chunk arena_chunk;

typedef struct arena {
    arena_chunk *head;
} arena;

/* Zeroed, 64-byte aligned memory owned by the arena; NULL when out of memory. */
void *arena_alloc(arena *a, size_t n);
/* A copy of s (or of n bytes of s) in the arena; NULL when out of memory. */
char *arena_strdup(arena *a, const char *s);
char *arena_strndup(arena *a, const char *s, size_t n);
void *arena_memdup(arena *a, const void *p, size_t n);
/* Free everything; the arena can be reused afterwards. */
void arena_free(arena *a);

#endif
