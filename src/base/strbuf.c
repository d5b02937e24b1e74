/* strbuf.c -- growable string with printf-style appends. */
#include "base/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

static bool reserve(strbuf *b, size_t extra) {
    if (b->oom) return false;
    if (b->len + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *s = wpk_realloc(b->s, cap);
    if (!s) {
        b->oom = true;
        return false;
    }
    b->s = s;
    b->cap = cap;
    return true;
}

void sb_printf(strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void sb_puts(strbuf *b, const char *s) {
    size_t n = strlen(s);
    if (!reserve(b, n)) return;
    memcpy(b->s + b->len, s, n + 1);
    b->len += n;
}

char *sb_take(strbuf *b) {
    char *s = b->s;
    if (!s) s = wpk_strdup("");
    b->s = NULL;
    b->len = b->cap = 0;
    b->oom = false;
    return s;
}

void sb_free(strbuf *b) {
    wpk_free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
    b->oom = false;
}
