/* check.h -- the tiny assertion kit of the C unit tests: count failures, keep going. */
#ifndef WPK_TESTS_CHECK_H
#define WPK_TESTS_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_failures;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
            check_failures++;                                                          \
        }                                                                              \
    } while (0)

/* status equals want and the context's message contains `needle` */
#define CHECK_ERR(ctx, st, want, needle)                                               \
    do {                                                                               \
        wpk_status st_ = (st);                                                         \
        if (st_ != (want) || !strstr(wpk_context_error(ctx), (needle))) {              \
            fprintf(stderr, "%s:%d: expected %s with \"%s\", got %s: \"%s\"\n",        \
                    __FILE__, __LINE__, wpk_status_name(want), (needle),               \
                    wpk_status_name(st_), wpk_context_error(ctx));                     \
            check_failures++;                                                          \
        }                                                                              \
    } while (0)

#define CHECK_DONE()                                                                   \
    do {                                                                               \
        if (check_failures) fprintf(stderr, "%d check(s) failed\n", check_failures);   \
        return check_failures ? 1 : 0;                                                 \
    } while (0)

#endif
