/* provenance.c -- the provenance of a measurement as key/value pairs (provenance.h). The commit
 * and libwpk's flags come from compile definitions CMake sets at configure time; the rest is
 * read from the machine. */
#include "base/provenance.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "wpk_runtime.h"

#ifndef WPK_GIT_COMMIT
#define WPK_GIT_COMMIT "unknown"
#endif
#ifndef WPK_BUILD_FLAGS
#define WPK_BUILD_FLAGS "unknown flags"
#endif

#if defined(__clang__)
#define BUILD_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define BUILD_COMPILER "gcc " __VERSION__
#else
#define BUILD_COMPILER "unknown compiler"
#endif

const char *provenance_commit(void) { return WPK_GIT_COMMIT[0] ? WPK_GIT_COMMIT : "unknown"; }

/* The first "model name" line of /proc/cpuinfo (x86, most arm64 kernels say "CPU part"
 * instead: then "unknown", and the caller's target fingerprint still names the ISA). */
static void cpu_model(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *v = strchr(line, ':');
        if (!v) continue;
        v++;
        while (*v == ' ' || *v == '\t') v++;
        snprintf(buf, cap, "%s", v);
        buf[strcspn(buf, "\n")] = 0;
        break;
    }
    fclose(f);
}

static void load_average(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return;
    double a, b, c;
    if (fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3) snprintf(buf, cap, "%.2f %.2f %.2f", a, b, c);
    fclose(f);
}

void provenance_init(provenance *p) {
    memset(p, 0, sizeof *p);
    char buf[PROVENANCE_VALUE];
    provenance_set(p, "commit", "%s", provenance_commit());
    provenance_set(p, "version", "%s", wpk_version());
    provenance_set(p, "build", "%s %s", BUILD_COMPILER, WPK_BUILD_FLAGS);
    cpu_model(buf, sizeof buf);
    provenance_set(p, "cpu", "%s", buf);
    provenance_set(p, "cores", "%ld", sysconf(_SC_NPROCESSORS_ONLN));
    load_average(buf, sizeof buf);
    provenance_set(p, "loadavg", "%s", buf);
}

void provenance_set(provenance *p, const char *key, const char *fmt, ...) {
    int i = 0;
    while (i < p->n && strncmp(p->e[i].key, key, PROVENANCE_KEY - 1) != 0) i++;
    if (i == p->n) {
        if (p->n == PROVENANCE_MAX) return;
        snprintf(p->e[i].key, PROVENANCE_KEY, "%s", key);
        p->n++;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->e[i].value, PROVENANCE_VALUE, fmt, ap);
    va_end(ap);
    for (char *c = p->e[i].value; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = ' ';
}

const char *provenance_get(const provenance *p, const char *key) {
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->e[i].key, key) == 0) return p->e[i].value;
    return NULL;
}

void provenance_text(const provenance *p, const char *indent, strbuf *out) {
    for (int i = 0; i < p->n; i++) sb_printf(out, "%s%s: %s\n", indent, p->e[i].key, p->e[i].value);
}

/* A JSON string: quotes and backslashes escaped (values hold no control characters, and
 * bytes >= 0x80 pass through as the UTF-8 they are). */
static void json_string(strbuf *out, const char *s) {
    sb_puts(out, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') sb_printf(out, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) sb_printf(out, "\\u%04x", (unsigned char)*s);
        else sb_printf(out, "%c", *s);
    }
    sb_puts(out, "\"");
}

void provenance_json(const provenance *p, strbuf *out) {
    sb_puts(out, "{");
    for (int i = 0; i < p->n; i++) {
        if (i) sb_puts(out, ", ");
        json_string(out, p->e[i].key);
        sb_puts(out, ": ");
        json_string(out, p->e[i].value);
    }
    sb_puts(out, "}");
}
