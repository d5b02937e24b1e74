/* strbuf.h -- a growable string: every printer and report builds its text through one. */
#ifndef WPK_BASE_STRBUF_H
#define WPK_BASE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct strbuf {
    char *s;      /* always NUL-terminated once anything was appended */
    size_t len, cap;
    bool oom;     /* an append failed; the text is truncated */
} strbuf;

void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_puts(strbuf *b, const char *s);
/* Hand the text over to the caller (free() with wpk_free); the buffer is reset. */
char *sb_take(strbuf *b);
void sb_free(strbuf *b);

#endif
