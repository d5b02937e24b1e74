/* provenance.h -- where a measured figure comes from (STYLE.md: every benchmark figure carries
 * it): the commit, the compiler and flags, the CPU, the threads, the load and the library
 * versions, as ordered key/value pairs printed as text or as a JSON object.
 *
 * base/ depends on nothing else in the library, so it gathers what base can know itself (the
 * commit libwpk was configured at, libwpk's own compiler and flags, the CPU model, the cores,
 * the load average); a caller that sees more (the kernels' toolchain, the target fingerprint,
 * the vendor libraries' versions: tune/ and lib/) adds it with provenance_set. */
#ifndef WPK_BASE_PROVENANCE_H
#define WPK_BASE_PROVENANCE_H

#include "base/strbuf.h"

#define PROVENANCE_MAX 24
#define PROVENANCE_KEY 32
#define PROVENANCE_VALUE 512

typedef struct provenance {
    int n;
    struct {
        char key[PROVENANCE_KEY];
        char value[PROVENANCE_VALUE]; /* printable text, truncated to fit */
    } e[PROVENANCE_MAX];
} provenance;

/* The commit libwpk was configured at ("3f2a9c1", "unknown" outside a git checkout). Static. */
const char *provenance_commit(void);

/* Fill p with, in order: commit, version (wpk_version), build (libwpk's compiler, version and
 * flags), cpu (the model name; "unknown" when the OS does not say), cores (online CPUs),
 * loadavg (the 1, 5 and 15 minute load averages; "unknown" without /proc/loadavg). Cannot fail. */
void provenance_init(provenance *p);

/* Set key to the printf-formatted value: replaces the key's value where it is already there,
 * else appends it (ignored once PROVENANCE_MAX keys are held; keys longer than
 * PROVENANCE_KEY - 1 characters are truncated). Control characters in the value become
 * spaces, so every value prints on one line. */
void provenance_set(provenance *p, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The value of key, or NULL. Borrowed from p. */
const char *provenance_get(const provenance *p, const char *key);

/* "key: value" lines, each prefixed with indent, appended to out. */
void provenance_text(const provenance *p, const char *indent, strbuf *out);

/* One JSON object {"key": "value", ...} (every value a string, escaped), appended to out. */
void provenance_json(const provenance *p, strbuf *out);

#endif
