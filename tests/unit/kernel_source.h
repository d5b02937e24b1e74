/* kernel_source.h -- for measurer tests that edit a candidate's generated C source
 * (tune_measure_params.edit_source): put code at the start of the kernel's body. */
#ifndef WPK_TESTS_KERNEL_SOURCE_H
#define WPK_TESTS_KERNEL_SOURCE_H

#include <stdbool.h>
#include <string.h>

#include "base/strbuf.h"

/* src with `head` (or nothing) before it and `code` first in the body of kernel k0; false,
 * src unchanged, when the source has no such kernel. */
static inline bool kernel_source_insert(strbuf *src, const char *head, const char *code) {
    static const char sig[] = "void k0(void *const *args) {\n";
    const char *at = src->s ? strstr(src->s, sig) : NULL;
    if (!at) return false;
    size_t cut = (size_t)(at - src->s) + strlen(sig);
    strbuf out = {0};
    sb_printf(&out, "%s%.*s%s\n%s", head ? head : "", (int)cut, src->s, code, src->s + cut);
    sb_free(src);
    *src = out;
    return true;
}

#endif
