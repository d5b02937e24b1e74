/* target_fingerprint.c -- the machine's fingerprint: uname for the architecture, cpuid (x86) or
 * /proc/cpuinfo (elsewhere) for the model and ISA extensions, sysconf for the CPU count; a GPU's
 * from what its driver reports. */
#include "base/target_fingerprint.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#define FP_MAX 512

static char fingerprint[FP_MAX];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Append src to dst (capacity cap) as printable ASCII with whitespace runs collapsed to one
 * space and no space at either end: the fingerprint is a key compared as text, so a model name
 * padded differently by two firmware versions must not make two machines out of one. */
static void append_clean(char *dst, size_t cap, const char *src) {
    size_t n = strlen(dst);
    bool space = false;
    for (const unsigned char *p = (const unsigned char *)src; *p && n + 2 < cap; p++) {
        if (*p <= ' ' || *p >= 0x7f) {
            space = true;
            continue;
        }
        if (space && n > 0 && dst[n - 1] != ' ') dst[n++] = ' ';
        space = false;
        dst[n++] = (char)*p;
    }
    dst[n] = '\0';
}

/* The value of the first "key : value" line of /proc/cpuinfo whose key is one of keys. */
static bool cpuinfo_value(const char *const *keys, char *out, size_t cap) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon) continue;
        size_t klen = (size_t)(colon - line);
        while (klen > 0 && (line[klen - 1] == ' ' || line[klen - 1] == '\t')) klen--;
        for (int i = 0; keys[i] && !found; i++) {
            if (strlen(keys[i]) != klen || strncmp(line, keys[i], klen) != 0) continue;
            const char *v = colon + 1;
            while (*v == ' ' || *v == '\t') v++;
            snprintf(out, cap, "%s", v);
            out[strcspn(out, "\n")] = '\0';
            found = true;
        }
    }
    fclose(f);
    return found;
}

#if defined(__x86_64__) || defined(__i386__)

enum { EAX, EBX, ECX, EDX };

/* The extensions code generation cares about, in the order they are printed. Each needs its
 * cpuid bit and the register state the OS saves on a context switch (XCR0): a CPU with AVX-512
 * under a kernel that does not enable ZMM state cannot run AVX-512 code. */
static const struct {
    const char *name;
    unsigned leaf, sub;
    int reg, bit;
    uint64_t xcr0;
} x86_flags[] = {
    {"avx", 1, 0, ECX, 28, 0x6},
    {"avx2", 7, 0, EBX, 5, 0x6},
    {"fma", 1, 0, ECX, 12, 0x6},
    {"f16c", 1, 0, ECX, 29, 0x6},
    {"avxvnni", 7, 1, EAX, 4, 0x6},
    {"avx512f", 7, 0, EBX, 16, 0xe6},
    {"avx512cd", 7, 0, EBX, 28, 0xe6},
    {"avx512dq", 7, 0, EBX, 17, 0xe6},
    {"avx512bw", 7, 0, EBX, 30, 0xe6},
    {"avx512vl", 7, 0, EBX, 31, 0xe6},
    {"avx512vnni", 7, 0, ECX, 11, 0xe6},
    {"avx512bf16", 7, 1, EAX, 5, 0xe6},
    {"avx512fp16", 7, 0, EDX, 23, 0xe6},
    {"amx-tile", 7, 0, EDX, 24, 0x60000},
    {"amx-int8", 7, 0, EDX, 25, 0x60000},
    {"amx-bf16", 7, 0, EDX, 22, 0x60000},
};

static bool cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
    r[0] = r[1] = r[2] = r[3] = 0;
    return __get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3]) != 0;
}

static void x86_model(char *out, size_t cap) {
    unsigned r[4];
    char brand[49] = {0};
    if (cpuid(0x80000000u, 0, r) && r[EAX] >= 0x80000004u) {
        for (unsigned i = 0; i < 3; i++) {
            cpuid(0x80000002u + i, 0, r);
            memcpy(brand + 16 * i, r, 16);
        }
    }
    append_clean(out, cap, brand);
    if (!out[0]) {
        static const char *const keys[] = {"model name", NULL};
        char v[256];
        if (cpuinfo_value(keys, v, sizeof v)) append_clean(out, cap, v);
    }
}

static void x86_extensions(char *out, size_t cap) {
    unsigned l1[4], l70[4], l71[4];
    cpuid(1, 0, l1);
    cpuid(7, 0, l70);
    /* sub-leaf 1 of leaf 7 exists only when sub-leaf 0 says so in EAX */
    if (l70[EAX] >= 1)
        cpuid(7, 1, l71);
    else
        memset(l71, 0, sizeof l71);
    uint64_t xcr0 = 0;
    if (l1[ECX] & (1u << 27)) { /* OSXSAVE: xgetbv may be executed */
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = ((uint64_t)hi << 32) | lo;
    }
    for (size_t i = 0; i < sizeof x86_flags / sizeof *x86_flags; i++) {
        const unsigned *r = x86_flags[i].leaf == 1 ? l1 : x86_flags[i].sub == 0 ? l70 : l71;
        if (!(r[x86_flags[i].reg] & (1u << x86_flags[i].bit))) continue;
        if ((xcr0 & x86_flags[i].xcr0) != x86_flags[i].xcr0) continue;
        size_t n = strlen(out);
        snprintf(out + n, cap - n, "%s%s", n ? "," : "", x86_flags[i].name);
    }
}

#else

static void other_model(char *out, size_t cap) {
    static const char *const names[] = {"model name", "Model", "cpu model", "cpu", NULL};
    static const char *const implementer[] = {"CPU implementer", NULL};
    static const char *const part[] = {"CPU part", NULL};
    char v[256], w[64];
    if (cpuinfo_value(names, v, sizeof v)) {
        append_clean(out, cap, v);
    } else if (cpuinfo_value(implementer, v, sizeof v) && cpuinfo_value(part, w, sizeof w)) {
        /* arm64 kernels name no model, only the implementer and part numbers */
        char both[256];
        snprintf(both, sizeof both, "implementer %.32s part %.32s", v, w);
        append_clean(out, cap, both);
    }
}

/* The extensions that matter to kernels, in print order, as the kernel's cpuinfo lists them. */
static void other_extensions(char *out, size_t cap) {
    static const char *const wanted[] = {"asimd", "asimdhp", "asimddp", "i8mm", "bf16", "sve",
                                         "sve2", "vsx", "altivec", "v", NULL};
    static const char *const keys[] = {"Features", "flags", "isa", NULL};
    char v[4096];
    if (!cpuinfo_value(keys, v, sizeof v)) return;
    for (int i = 0; wanted[i]; i++) {
        size_t wl = strlen(wanted[i]);
        for (const char *p = v; *p;) {
            size_t tl = strcspn(p, " \t");
            if (tl == wl && strncmp(p, wanted[i], wl) == 0) {
                size_t n = strlen(out);
                snprintf(out + n, cap - n, "%s%s", n ? "," : "", wanted[i]);
                break;
            }
            p += tl;
            p += strspn(p, " \t");
        }
    }
}

#endif

static void compute(void) {
    char arch[128] = {0}, model[256] = {0}, ext[256] = {0};
    struct utsname u;
    if (uname(&u) == 0) append_clean(arch, sizeof arch, u.machine);
#if defined(__x86_64__) || defined(__i386__)
    x86_model(model, sizeof model);
    x86_extensions(ext, sizeof ext);
#else
    other_model(model, sizeof model);
    other_extensions(ext, sizeof ext);
#endif
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    /* a fingerprint cut at the buffer's end still identifies the machine: it is kept as cut */
    int n = snprintf(fingerprint, sizeof fingerprint, "%s %s %s %ldc", arch[0] ? arch : "unknown",
                     model[0] ? model : "unknown", ext[0] ? ext : "none", cpus > 0 ? cpus : 1L);
    if (n < 0 || n >= (int)sizeof fingerprint) fingerprint[sizeof fingerprint - 1] = '\0';
}

const char *target_fingerprint(void) {
    pthread_once(&once, compute);
    return fingerprint;
}

void target_cuda_fingerprint(const char *name, int sm, int driver, char *buf, size_t cap) {
    char model[256] = {0};
    append_clean(model, sizeof model, name ? name : "");
    /* a fingerprint cut at the buffer's end still identifies the device: it is kept as cut */
    int n = snprintf(buf, cap, "cuda %s sm_%d driver %d", model[0] ? model : "unknown", sm,
                     driver);
    if (cap > 0 && (n < 0 || (size_t)n >= cap)) buf[cap - 1] = '\0';
}
