/* target.c -- CPU features from the compiler's cpuid builtins; physical cores from the
 * affinity mask and /sys's CPU topology; the last-level cache from /sys's cache list. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_ISSET */
#include "base/target.h"

#include <pthread.h>
#include <stdbool.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int target_vector_floats(void) {
    /* an override, so golden tests print the same blocked layouts on every machine */
    const char *env = getenv("WPK_VECTOR_FLOATS");
    if (env && (strcmp(env, "4") == 0 || strcmp(env, "8") == 0 || strcmp(env, "16") == 0))
        return atoi(env);
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return 16;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 8;
#endif
    return 4;
}

static long read_long(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long v = -1;
    if (fscanf(f, "%ld", &v) != 1) v = -1;
    fclose(f);
    return v;
}

#define MAX_CORES 1024

static int cores;
static pthread_once_t cores_once = PTHREAD_ONCE_INIT;

/* A core is a (package, core id) pair: the CPUs that share one are SMT siblings, which share
 * the core's vector units, so compute-bound kernels gain nothing from a thread on each. */
static void count_cores(void) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    bool have_set = sched_getaffinity(0, sizeof set, &set) == 0;
    static long seen[MAX_CORES][2];
    int n = 0, cpus = 0;
    bool topo = true;
    for (int c = 0; c < CPU_SETSIZE && topo; c++) {
        if (have_set ? !CPU_ISSET(c, &set) : c >= online) continue;
        cpus++;
        char path[128];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", c);
        long core = read_long(path);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id",
                 c);
        long pkg = read_long(path);
        if (core < 0) {
            topo = false;
            break;
        }
        bool dup = false;
        for (int i = 0; i < n && !dup; i++) dup = seen[i][0] == pkg && seen[i][1] == core;
        if (!dup && n < MAX_CORES) {
            seen[n][0] = pkg;
            seen[n][1] = core;
            n++;
        }
    }
    if (!topo || n == 0) n = cpus > 0 ? cpus : (int)online;
    cores = n > 0 ? n : 1;
}

int target_cores(void) {
    pthread_once(&cores_once, count_cores);
    return cores;
}

int target_default_threads(void) {
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && *env) {
        /* "4" or a nested list "4,2": the outer level's count */
        long v = strtol(env, NULL, 10);
        if (v > 0 && v <= 4096) return (int)v;
    }
    return target_cores();
}

/* "32K", "1024K", "2M" */
static int64_t parse_size(const char *s) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (v <= 0) return 0;
    if (*end == 'K' || *end == 'k') v *= 1024;
    else if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
    return v;
}

int64_t target_cache_bytes(int level) {
    for (int i = 0; i < 16; i++) {
        char path[128], buf[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (read_long(path) != level) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        bool data = fgets(buf, sizeof buf, f) && strncmp(buf, "Instruction", 11) != 0;
        fclose(f);
        if (!data) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!(f = fopen(path, "r"))) continue;
        int64_t size = fgets(buf, sizeof buf, f) ? parse_size(buf) : 0;
        fclose(f);
        if (size > 0) return size;
    }
    return 0;
}

static int64_t llc;
static pthread_once_t llc_once = PTHREAD_ONCE_INIT;

/* The data cache of the highest level /sys lists. */
static void read_llc(void) {
    for (int level = 4; level >= 1 && !llc; level--) llc = target_cache_bytes(level);
}

int64_t target_llc_bytes(void) {
    pthread_once(&llc_once, read_llc);
    return llc;
}
