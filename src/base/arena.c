/* arena.c -- chunked bump allocator; big requests get a chunk of their own. */
#include "base/arena.h"

#include <stdint.h>
#include <string.h>

#include "base/alloc.h"

#define ARENA_ALIGN 64
#define ARENA_CHUNK (256 * 1024)

struct arena_chunk {
    arena_chunk *next;
    size_t used, size;
    unsigned char data[];
};

void *arena_alloc(arena *a, size_t n) {
    n = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (n == 0) n = ARENA_ALIGN;
    arena_chunk *c = a->head;
    /* the heap aligns chunks to 16 bytes only: align the address itself, not just the offset */
    size_t pad = c ? (size_t)(-(uintptr_t)(c->data + c->used) & (ARENA_ALIGN - 1)) : 0;
    if (!c || c->size - c->used < n + pad) {
        size_t size = (n > ARENA_CHUNK / 4 ? n : ARENA_CHUNK) + ARENA_ALIGN;
        if (size > SIZE_MAX - sizeof(arena_chunk)) return NULL;
        c = wpk_malloc(sizeof(arena_chunk) + size);
        if (!c) return NULL;
        c->size = size;
        c->used = 0;
        if (a->head && size != ARENA_CHUNK + ARENA_ALIGN) {
            /* a dedicated big chunk goes behind the current one so its free space stays in use */
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    pad = (size_t)(-(uintptr_t)(c->data + c->used) & (ARENA_ALIGN - 1));
    void *p = c->data + c->used + pad;
    c->used += n + pad;
    memset(p, 0, n);
    return p;
}

char *arena_strndup(arena *a, const char *s, size_t n) {
    char *d = arena_alloc(a, n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

char *arena_strdup(arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

void *arena_memdup(arena *a, const void *p, size_t n) {
    void *d = arena_alloc(a, n);
    if (d && n) memcpy(d, p, n);
    return d;
}

void arena_free(arena *a) {
    arena_chunk *c = a->head;
    while (c) {
        arena_chunk *next = c->next;
        wpk_free(c);
        c = next;
    }
    a->head = NULL;
}
