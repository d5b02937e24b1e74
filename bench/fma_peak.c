/* fma_peak.c -- the machine's measured multiply-add peaks, single core and all cores: FP32 FMA
 * (the yardstick the convolution benchmarks report their GFLOP/s against), and where the CPU
 * has them the int8 VNNI (`vpdpbusd`) and BF16 (`vdpbf16ps`) dot products the int8 and bf16
 * kernels run on. A multiply-add counts as 2 operations for every kind (GFLOP/s, GOP/s).
 *
 * Independent FMA chains on the widest vectors the CPU has (AVX-512, else AVX2+FMA), enough of
 * them to cover the FMA latency on every pipe, explicit FMA intrinsics (no reliance on the
 * compiler contracting a*b+c). Each chain computes acc = acc * m + a with m just below 1, so the
 * values settle near a / (1 - m) and never overflow or go subnormal. The dot-product chains
 * accumulate small products into int32 (wrapping is harmless) or near-1 values into fp32.
 *
 *     cc -O2 -fopenmp bench/fma_peak.c -o fma_peak && ./fma_peak [--threads N] [--reps R] [--json]
 *
 * Prints provenance (commit, compiler, CPU, threads), every sample, median and best, by wall
 * time and by each thread's CPU time (on a machine shared with other work, the second is what
 * the cores can do; the first is what a kernel got). The peak is the best sample: noise only
 * ever makes a sample slower. */
#define _POSIX_C_SOURCE 200809L

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1
#endif

#define MAX_REPS 64

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef double (*kernel_fn)(long iters); /* returns a sum so no chain is dead code */

#ifdef HAVE_X86
/* 16 chains of 16 floats: 4-cycle latency x 2 pipes x 2 (headroom) */
__attribute__((target("avx512f"))) static double fma512(long iters) {
    __m512 m = _mm512_set1_ps(0.9999999f), a = _mm512_set1_ps(1e-7f);
    /* distinct starting values: identical chains would be merged into one by the compiler */
#define S512(k) _mm512_set1_ps(0.5f + 0.01f * (k))
    __m512 c0 = S512(0), c1 = S512(1), c2 = S512(2), c3 = S512(3), c4 = S512(4), c5 = S512(5);
    __m512 c6 = S512(6), c7 = S512(7), c8 = S512(8), c9 = S512(9), c10 = S512(10), c11 = S512(11);
    __m512 c12 = S512(12), c13 = S512(13), c14 = S512(14), c15 = S512(15);
    for (long i = 0; i < iters; i++) {
        c0 = _mm512_fmadd_ps(c0, m, a);
        c1 = _mm512_fmadd_ps(c1, m, a);
        c2 = _mm512_fmadd_ps(c2, m, a);
        c3 = _mm512_fmadd_ps(c3, m, a);
        c4 = _mm512_fmadd_ps(c4, m, a);
        c5 = _mm512_fmadd_ps(c5, m, a);
        c6 = _mm512_fmadd_ps(c6, m, a);
        c7 = _mm512_fmadd_ps(c7, m, a);
        c8 = _mm512_fmadd_ps(c8, m, a);
        c9 = _mm512_fmadd_ps(c9, m, a);
        c10 = _mm512_fmadd_ps(c10, m, a);
        c11 = _mm512_fmadd_ps(c11, m, a);
        c12 = _mm512_fmadd_ps(c12, m, a);
        c13 = _mm512_fmadd_ps(c13, m, a);
        c14 = _mm512_fmadd_ps(c14, m, a);
        c15 = _mm512_fmadd_ps(c15, m, a);
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                             _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
    __m512 t = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)),
                             _mm512_add_ps(_mm512_add_ps(c12, c13), _mm512_add_ps(c14, c15)));
    s = _mm512_add_ps(s, t);
    return (double)_mm512_reduce_add_ps(s);
}

/* 12 chains of 8 floats: without AVX-512 there are 16 vector registers */
__attribute__((target("avx2,fma"))) static double fma256(long iters) {
    __m256 m = _mm256_set1_ps(0.9999999f), a = _mm256_set1_ps(1e-7f);
#define S256(k) _mm256_set1_ps(0.5f + 0.01f * (k))
    __m256 c0 = S256(0), c1 = S256(1), c2 = S256(2), c3 = S256(3), c4 = S256(4), c5 = S256(5);
    __m256 c6 = S256(6), c7 = S256(7), c8 = S256(8), c9 = S256(9), c10 = S256(10), c11 = S256(11);
    for (long i = 0; i < iters; i++) {
        c0 = _mm256_fmadd_ps(c0, m, a);
        c1 = _mm256_fmadd_ps(c1, m, a);
        c2 = _mm256_fmadd_ps(c2, m, a);
        c3 = _mm256_fmadd_ps(c3, m, a);
        c4 = _mm256_fmadd_ps(c4, m, a);
        c5 = _mm256_fmadd_ps(c5, m, a);
        c6 = _mm256_fmadd_ps(c6, m, a);
        c7 = _mm256_fmadd_ps(c7, m, a);
        c8 = _mm256_fmadd_ps(c8, m, a);
        c9 = _mm256_fmadd_ps(c9, m, a);
        c10 = _mm256_fmadd_ps(c10, m, a);
        c11 = _mm256_fmadd_ps(c11, m, a);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                             _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
    float out[8];
    _mm256_storeu_ps(out, s);
    double t = 0;
    for (int i = 0; i < 8; i++) t += out[i];
    return t;
}

/* 16 chains of 16 int32 lanes, each a 4-deep u8 x s8 dot product per instruction */
__attribute__((target("avx512f,avx512vnni"))) static double vnni512(long iters) {
    __m512i u = _mm512_set1_epi32(0x01020304), w = _mm512_set1_epi32(0x01ff01ff);
    __m512i c[16];
    for (int k = 0; k < 16; k++) c[k] = _mm512_set1_epi32(k);
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 16
        for (int k = 0; k < 16; k++) c[k] = _mm512_dpbusd_epi32(c[k], u, w);
        __asm__ volatile("" : "+v"(u)); /* the sources stay live: the loop is not folded */
    }
    long long t = 0;
    for (int k = 0; k < 16; k++) t += _mm512_reduce_add_epi32(c[k]);
    return (double)t;
}

/* the same on 256-bit vectors (AVX512-VL encoding): some cores issue two of these per cycle
 * where they issue one 512-bit */
__attribute__((target("avx512f,avx512vl,avx512vnni"))) static double vnni256(long iters) {
    __m256i u = _mm256_set1_epi32(0x01020304), w = _mm256_set1_epi32(0x01ff01ff);
    __m256i c[16];
    for (int k = 0; k < 16; k++) c[k] = _mm256_set1_epi32(k);
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 16
        for (int k = 0; k < 16; k++) c[k] = _mm256_dpbusd_epi32(c[k], u, w);
        __asm__ volatile("" : "+v"(u));
    }
    int out[8];
    __m256i s = c[0];
    for (int k = 1; k < 16; k++) s = _mm256_add_epi32(s, c[k]);
    _mm256_storeu_si256((__m256i *)out, s);
    double t = 0;
    for (int i = 0; i < 8; i++) t += out[i];
    return t;
}

/* 16 chains of 16 fp32 lanes, each a 2-deep bf16 dot product per instruction */
__attribute__((target("avx512f,avx512bf16"))) static double bf16dot512(long iters) {
    __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3380);
    __m512 c[16];
    for (int k = 0; k < 16; k++) c[k] = _mm512_set1_ps(0.5f + 0.01f * (float)k);
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 16
        for (int k = 0; k < 16; k++) c[k] = _mm512_dpbf16_ps(c[k], a, b);
        __asm__ volatile("" : "+v"(a));
    }
    __m512 s = c[0];
    for (int k = 1; k < 16; k++) s = _mm512_add_ps(s, c[k]);
    return (double)_mm512_reduce_add_ps(s);
}
#endif

typedef struct variant {
    const char *name;
    kernel_fn fn;
    double flops_per_iter; /* chains x lanes x dot depth x 2 */
} variant;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static volatile double sink;

static double thread_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One sample: `threads` threads each run v for iters. *wall: GFLOP/s over the barrier-to-barrier
 * wall time (what a kernel gets). *cpu: the sum over threads of flops / that thread's CPU time
 * (what the cores do while they run: on a shared machine, time other processes take is not
 * counted against the hardware). */
static void measure(const variant *v, int threads, long iters, double *wall, double *cpu) {
    double t0 = 0, t1 = 0, rate = 0;
    double flops = v->flops_per_iter * (double)iters;
#pragma omp parallel num_threads(threads) reduction(+ : rate)
    {
#pragma omp barrier
#pragma omp master
        t0 = now();
        double c0 = thread_cpu_now();
        double r = v->fn(iters);
        rate = flops / (thread_cpu_now() - c0) * 1e-9;
#pragma omp atomic
        sink += r;
#pragma omp barrier
#pragma omp master
        t1 = now();
    }
    *wall = flops * threads / (t1 - t0) * 1e-9;
    *cpu = rate;
}

static void summarize(double *s, int n, double *med, double *best) {
    double sorted[MAX_REPS];
    memcpy(sorted, s, sizeof *s * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
    *med = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    *best = sorted[n - 1];
}

static void cpu_model(char *dst, size_t cap) {
    snprintf(dst, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *p = strchr(line, ':');
            if (p) {
                p += 2;
                p[strcspn(p, "\n")] = '\0';
                snprintf(dst, cap, "%s", p);
            }
            break;
        }
    }
    fclose(f);
}

static void git_commit(char *dst, size_t cap) {
    snprintf(dst, cap, "unknown");
    FILE *p = popen("git rev-parse --short HEAD 2>/dev/null", "r");
    if (!p) return;
    if (fgets(dst, (int)cap, p)) dst[strcspn(dst, "\n")] = '\0';
    if (pclose(p) != 0 || !dst[0]) snprintf(dst, cap, "unknown");
}

int main(int argc, char **argv) {
    int threads = omp_get_num_procs(), reps = 9;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json")) json = 1;
        else {
            fprintf(stderr, "usage: %s [--threads N] [--reps R] [--json]\n", argv[0]);
            return 1;
        }
    }
    if (threads < 1) threads = 1;
    if (reps < 1) reps = 1;
    if (reps > MAX_REPS) reps = MAX_REPS;

    variant vs[5];
    int nv = 0;
#ifdef HAVE_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) vs[nv++] = (variant){"avx512", fma512, 16 * 16 * 2};
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        vs[nv++] = (variant){"avx2", fma256, 12 * 8 * 2};
    if (__builtin_cpu_supports("avx512vnni")) {
        vs[nv++] = (variant){"vnni512", vnni512, 16 * 16 * 4 * 2};
        if (__builtin_cpu_supports("avx512vl"))
            vs[nv++] = (variant){"vnni256", vnni256, 16 * 8 * 4 * 2};
    }
    if (__builtin_cpu_supports("avx512bf16"))
        vs[nv++] = (variant){"bf16", bf16dot512, 16 * 16 * 2 * 2};
#endif
    if (nv == 0) {
        fprintf(stderr, "fma_peak: no AVX2/FMA or AVX-512 on this CPU; nothing to measure\n");
        return 1;
    }

    char cpu[256], commit[64];
    cpu_model(cpu, sizeof cpu);
    git_commit(commit, sizeof commit);
    if (json)
        printf("{\"bench\": \"fma_peak\", \"commit\": \"%s\", \"compiler\": \"%s\", "
               "\"cpu\": \"%s\", \"threads_all\": %d, \"reps\": %d, \"results\": [",
               commit, __VERSION__, cpu, threads, reps);
    else
        printf("fma_peak  commit %s  compiler %s  cpu %s  threads %d  reps %d\n", commit,
               __VERSION__, cpu, threads, reps);

    int first = 1;
    for (int k = 0; k < nv; k++) {
        const int counts[2] = {1, threads};
        for (int c = 0; c < (threads > 1 ? 2 : 1); c++) {
            int t = counts[c];
            /* size the run to about 0.2 s per sample from a short calibration */
            long iters = 1000000;
            double w, cp;
            measure(&vs[k], t, iters, &w, &cp);
            iters = (long)(0.2 * cp / t * 1e9 / vs[k].flops_per_iter);
            if (iters < 1000) iters = 1000;
            double sw[MAX_REPS], sc[MAX_REPS], medw, bestw, medc, bestc;
            for (int r = 0; r < reps; r++) measure(&vs[k], t, iters, &sw[r], &sc[r]);
            summarize(sw, reps, &medw, &bestw);
            summarize(sc, reps, &medc, &bestc);
            if (json) {
                printf("%s{\"isa\": \"%s\", \"threads\": %d, \"wall_gflops\": [", first ? "" : ", ",
                       vs[k].name, t);
                for (int r = 0; r < reps; r++) printf("%s%.2f", r ? ", " : "", sw[r]);
                printf("], \"cpu_gflops\": [");
                for (int r = 0; r < reps; r++) printf("%s%.2f", r ? ", " : "", sc[r]);
                printf("], \"wall_median\": %.2f, \"wall_best\": %.2f, \"cpu_median\": %.2f, "
                       "\"cpu_best\": %.2f}",
                       medw, bestw, medc, bestc);
            } else {
                printf("%-7s %2d thread%s  wall: best %7.2f median %7.2f GFLOP/s   "
                       "cpu-time: best %7.2f median %7.2f GFLOP/s\n",
                       vs[k].name, t, t == 1 ? " " : "s", bestw, medw, bestc, medc);
                printf("        samples wall");
                for (int r = 0; r < reps; r++) printf(" %.1f", sw[r]);
                printf("  cpu");
                for (int r = 0; r < reps; r++) printf(" %.1f", sc[r]);
                printf("\n");
            }
            first = 0;
        }
    }
    if (json) printf("]}\n");
    return 0;
}
