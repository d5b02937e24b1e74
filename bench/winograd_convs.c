/* winograd_convs.c -- Winograd (conv2d_winograd) against the direct blocked conv
 * (conv2d_nchwc's default config) on ResNet-18's 3x3 stride-1 convolutions at batch 1: per-call
 * time of each, measured in one run, alternating.
 *
 *     winograd_convs [--threads 1] [--min-ms 300] [--only c2,c6] [--nchw] [--cold]
 *                    [--configs "m=4;m=2;m=4,tile_p=7,tile_k=4"]
 *
 * Each conv is a wpk::ConvNCHWc node as the layout pass (-O3) hands it over: NCHW16c tensors
 * (the machine's vector width), weights packed, bias and ReLU fused; --nchw makes it the -O2
 * form instead, a wpk::FusedConv on NCHW tensors (both templates block inside the kernel). Every kernel is built by
 * the cpu backend's builder (cpu_kernel_build: the Winograd weight transform as its pack
 * kernel, scratch arguments), compiled together (cpu_units_compile), and its output checked
 * against the direct conv's (relative L2) before anything is timed. Winograd runs under each
 * of --configs (partial configs over the template's default; the first is its default).
 *
 * Timing: samples alternate between the kernels of a conv until each has run --min-ms; a
 * sample is the mean over enough calls to last about 5 ms, by wall time and by the process's
 * CPU time (per thread: divided by --threads; the process re-executes itself with
 * OMP_WAIT_POLICY=passive unless it is set, so that idle threads sleep instead of spinning
 * on the CPU clock: GNU OpenMP reads it when it loads, before main). On a machine shared
 * with other work the CPU time is the figure to read. --cold times each call on its own after
 * flushing the weights (the node's and the packed ones) and the bias from the caches.
 * Output: a markdown table (median and best ms per call by CPU time, wall median, speed-up of
 * the best Winograd config over the direct conv), then provenance and every sample.
 *
 * Built by CMake as build/winograd_convs.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "base/target.h"
#include "kernels/cpu_kernel.h"
#include "kernels/cpu_unit.h"
#include "ir/graph.h"
#include "ops/blocked.h"
#include "kernels/provider.h"

#define MAX_SAMPLES 256
#define MAX_CONFIGS 12
#define SAMPLE_S 0.005

typedef struct conv_spec {
    const char *name;
    int64_t c, hw, k;
} conv_spec;

/* ResNet-18's 3x3 stride-1 convs (issue 4's numbering), pads 1. */
static const conv_spec CONVS[] = {
    {"c2", 64, 56, 64}, {"c6", 128, 28, 128}, {"c9", 256, 14, 256}, {"c12", 512, 7, 512}};
#define NCONVS ((int)(sizeof CONVS / sizeof CONVS[0]))

static void die(const char *what, const char *msg) {
    fprintf(stderr, "winograd_convs: %s: %s\n", what, msg);
    exit(2);
}

static void *alloc64(size_t bytes) {
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) die("out of memory", "");
    return p;
}

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *random_floats(int64_t n, unsigned *seed) {
    float *p = alloc64(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        p[i] = (float)((*seed >> 9) & 0xffff) / 32768.0f - 1.0f;
    }
    return p;
}

/* A conv's node and data, blocked as the layout pass leaves them. */
typedef struct problem {
    const conv_spec *spec;
    ir_graph *g;
    ir_node *node;
    ir_tensor x, w, b, y;
    ir_tensor *in[3], *out[1];
} problem;

static void problem_init(problem *p, const conv_spec *c, bool nchw) {
    memset(p, 0, sizeof *p);
    p->spec = c;
    const int64_t blk = target_vector_floats(), hw = c->hw;
    p->g = ir_graph_create();
    int k = ir_graph_add_node(p->g, c->name, nchw ? "FusedConv" : "ConvNCHWc", "wpk", 1, 3, 1);
    if (k < 0) die("graph", "out of memory");
    ir_node *n = p->node = &p->g->nodes[k];
    ir_node_set_ints(p->g, n, "strides", (const int64_t[]){1, 1}, 2);
    ir_node_set_ints(p->g, n, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    ir_node_set_ints(p->g, n, "kernel_shape", (const int64_t[]){3, 3}, 2);
    ir_node_set_str(p->g, n, "activation", "Relu");
    if (!nchw) ir_node_set_int(p->g, n, "channels", c->k);
    unsigned seed = 42;
    p->x = (ir_tensor){WPK_DTYPE_FLOAT32, 5, {1, c->c / blk, hw, hw, blk}, NULL};
    p->x.data = random_floats(ir_numel(&p->x), &seed);
    float *w = random_floats(c->k * c->c * 9, &seed);
    p->w = (ir_tensor){WPK_DTYPE_FLOAT32, 6, {0}, NULL};
    blocked_weight_dims(c->k, c->c, 3, 3, blk, blk, false, p->w.dims);
    p->w.data = alloc64(sizeof(float) * (size_t)ir_numel(&p->w));
    blocked_pack_weights(w, c->k, c->c, 3, 3, blk, blk, false, p->w.data);
    free(w);
    p->b = (ir_tensor){WPK_DTYPE_FLOAT32, 1, {c->k}, random_floats(c->k, &seed)};
    p->y = (ir_tensor){WPK_DTYPE_FLOAT32, 5, {1, c->k / blk, hw, hw, blk}, NULL};
    if (nchw) {
        p->x.ndim = p->y.ndim = 4;
        p->x.dims[1] = c->c, p->y.dims[1] = c->k;
        float *wn = random_floats(c->k * c->c * 9, &seed);
        free(p->w.data);
        p->w = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {c->k, c->c, 3, 3}, wn};
    }
    p->in[0] = &p->x, p->in[1] = &p->w, p->in[2] = &p->b, p->out[0] = &p->y;
}

static void problem_free(problem *p) {
    free(p->x.data), free(p->w.data), free(p->b.data);
    ir_graph_free(p->g);
}

/* One kernel of a conv, ready to run. */
typedef struct kernel {
    char label[300];
    cpu_kernel k;
    void *args[CPU_MAX_KERNEL_ARGS];
    float *y;
    void *packed, *scratch;
    size_t packed_bytes;
    double cpu[MAX_SAMPLES], wall[MAX_SAMPLES];
    int nsamples;
    double err;
} kernel;

static void kernel_build(kernel *k, const problem *p, const char *tmpl, const char *config,
                         int index, wpk_context *ctx) {
    memset(k, 0, sizeof *k);
    tune_task task;
    tune_task_init(&task, kernel_provider_find(tmpl), p->node, p->in, p->out);
    if (cpu_kernel_build(ctx, &task, index, config, NULL, &k->k))
        die("cpu_kernel_build", wpk_context_error(ctx));
    snprintf(k->label, sizeof k->label, "%s %s", tmpl, k->k.config);
}

/* Pack the weights, bind the arguments (after compiling). */
static void kernel_bind(kernel *k, const problem *p) {
    void *data[3] = {p->x.data, p->w.data, p->b.data};
    int a = 0;
    for (int i = 0; i < k->k.ninputs; i++) {
        k->args[a++] = data[i];
        if (k->k.pack_numel[i] <= 0) continue;
        k->packed_bytes = sizeof(float) * (size_t)k->k.pack_numel[i];
        k->packed = alloc64(k->packed_bytes);
        k->k.pack_fn[i]((void *[]){data[i], k->packed});
        k->args[a - 1] = k->packed;
    }
    k->y = alloc64(ir_nbytes(&p->y));
    k->args[a++] = k->y;
    if (k->k.nscratch) k->scratch = alloc64((size_t)k->k.scratch_bytes);
    for (int i = 0; i < k->k.nscratch; i++) k->args[a++] = (char *)k->scratch + k->k.scratch_off[i];
}

static void kernel_free(kernel *k) {
    free(k->y), free(k->packed), free(k->scratch);
    cpu_kernel_free(&k->k);
}

static double rel_l2(const float *got, const float *want, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

static void flush(const void *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_clflush((const char *)p + o);
}

/* One sample: calls of k for about SAMPLE_S, mean seconds per call (cpu per thread, wall).
 * Cold: before each call (outside the timed region) the weights the kernel reads -- the
 * node's, its packed copy -- and the bias are flushed from every cache, as the tuner times
 * a model whose weights outgrow the last-level cache. */
static void sample(kernel *k, const problem *p, int reps, int threads, bool cold) {
    double cpu = 0, wall = 0;
    for (int r = 0; r < reps; r += cold ? 1 : reps) {
        if (cold) {
            flush(p->w.data, ir_nbytes(&p->w));
            flush(p->b.data, ir_nbytes(&p->b));
            if (k->packed) flush(k->packed, k->packed_bytes);
            _mm_mfence();
        }
        double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
        for (int i = 0; i < (cold ? 1 : reps); i++) k->k.fn(k->args);
        cpu += clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        wall += clock_s(CLOCK_MONOTONIC) - w0;
    }
    if (k->nsamples < MAX_SAMPLES) {
        k->cpu[k->nsamples] = cpu / reps / threads;
        k->wall[k->nsamples] = wall / reps;
        k->nsamples++;
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n) {
    double s[MAX_SAMPLES];
    memcpy(s, v, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof(double), cmp_double);
    return n ? (n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2])) : 0;
}

static double best(const double *v, int n) {
    double b = n ? v[0] : 0;
    for (int i = 1; i < n; i++)
        if (v[i] < b) b = v[i];
    return b;
}

static void provenance(int threads) {
    char line[256] = "?";
    FILE *f = popen("git rev-parse --short HEAD 2>/dev/null", "r");
    if (f) {
        if (fgets(line, sizeof line, f)) line[strcspn(line, "\n")] = 0;
        pclose(f);
    }
    printf("\ncommit %s (plus the working tree); C compiler of the kernels: cg_c (system cc, "
           "its default flags); vector width %d floats; %d thread(s)\n", line,
           target_vector_floats(), threads);
    f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            printf("CPU: %s", strchr(line, ':') + 2);
            break;
        }
    if (f) fclose(f);
    printf("OMP_WAIT_POLICY=%s\n", getenv("OMP_WAIT_POLICY"));
    f = fopen("/proc/loadavg", "r");
    if (f && fgets(line, sizeof line, f)) printf("load average (1, 5, 15 min): %s", line);
    if (f) fclose(f);
}

int main(int argc, char **argv) {
    int threads = 1;
    double min_s = 0.3;
    const char *only = NULL;
    const char *configs = "m=4;m=2";
    bool nchw = false, cold = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-ms") && i + 1 < argc) min_s = atof(argv[++i]) / 1e3;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--configs") && i + 1 < argc) configs = argv[++i];
        else if (!strcmp(argv[i], "--nchw")) nchw = true;
        else if (!strcmp(argv[i], "--cold")) cold = true;
        else die("usage", "winograd_convs [--threads N] [--min-ms MS] [--only c2,c6] [--nchw] "
                 "[--cold] [--configs \"m=4;m=2,tile_p=8\"]");
    }
    if (threads < 1) die("--threads", "at least 1");
    if (!getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "passive", 1);
        execv("/proc/self/exe", argv);
        die("execv /proc/self/exe", "cannot re-execute with OMP_WAIT_POLICY=passive");
    }
    omp_set_num_threads(threads);
    char cfgbuf[1024];
    snprintf(cfgbuf, sizeof cfgbuf, "%s", configs);
    const char *cfg[MAX_CONFIGS];
    int ncfg = 0;
    for (char *s = strtok(cfgbuf, ";"); s && ncfg < MAX_CONFIGS; s = strtok(NULL, ";"))
        cfg[ncfg++] = s;
    wpk_context *ctx = wpk_context_create();

    printf("%s nodes, weights %s\n\n", nchw ? "FusedConv (NCHW, -O2)" : "ConvNCHWc (blocked, -O3)",
           cold ? "cold (flushed before each call)" : "warm");
    printf("| conv | direct ms (median / best) | best Winograd config | Winograd ms (median / "
           "best) | speed-up (median) | wall ms direct / Winograd |\n|---|---|---|---|---|---|\n");
    static kernel ks[MAX_CONFIGS + 1];
    for (int ci = 0; ci < NCONVS; ci++) {
        const conv_spec *c = &CONVS[ci];
        if (only && !strstr(only, c->name)) continue;
        problem p;
        problem_init(&p, c, nchw);
        int nk = 1 + ncfg;
        kernel_build(&ks[0], &p, "conv2d_nchwc", NULL, 0, ctx);
        for (int i = 0; i < ncfg; i++)
            kernel_build(&ks[1 + i], &p, "conv2d_winograd", cfg[i], 1 + i, ctx);
        cpu_kernel *list[MAX_CONFIGS + 1];
        for (int i = 0; i < nk; i++) list[i] = &ks[i].k;
        cpu_units u;
        if (cpu_units_compile(ctx, list, nk, &u)) die("compile", wpk_context_error(ctx));
        for (int i = 0; i < nk; i++) {
            kernel_bind(&ks[i], &p);
            ks[i].k.fn(ks[i].args);
            ks[i].err = i ? rel_l2(ks[i].y, ks[0].y, ir_numel(&p.y)) : 0;
            if (!(ks[i].err <= 1e-4)) die(ks[i].label, "output differs from the direct conv");
        }
        /* calls per sample, from one timed call each after the warm-up */
        int reps[MAX_CONFIGS + 1];
        for (int i = 0; i < nk; i++) {
            double w0 = clock_s(CLOCK_MONOTONIC);
            ks[i].k.fn(ks[i].args);
            double t = clock_s(CLOCK_MONOTONIC) - w0;
            reps[i] = t > 0 ? (int)(SAMPLE_S / t) + 1 : 1;
        }
        for (bool more = true; more;) {
            more = false;
            for (int i = 0; i < nk; i++) {
                sample(&ks[i], &p, reps[i], threads, cold);
                double total = 0;
                for (int s = 0; s < ks[i].nsamples; s++) total += ks[i].cpu[s] * reps[i];
                more |= total < min_s && ks[i].nsamples < MAX_SAMPLES;
            }
        }
        int bw = 1;
        for (int i = 2; i < nk; i++)
            if (median(ks[i].cpu, ks[i].nsamples) < median(ks[bw].cpu, ks[bw].nsamples)) bw = i;
        double dm = median(ks[0].cpu, ks[0].nsamples), wm = median(ks[bw].cpu, ks[bw].nsamples);
        printf("| %s %lldx%lld %lld->%lld | %.3f / %.3f | %s | %.3f / %.3f | %.2f | %.3f / %.3f "
               "|\n", c->name, (long long)c->hw, (long long)c->hw, (long long)c->c,
               (long long)c->k, 1e3 * dm, 1e3 * best(ks[0].cpu, ks[0].nsamples),
               ks[bw].k.config, 1e3 * wm, 1e3 * best(ks[bw].cpu, ks[bw].nsamples), dm / wm,
               1e3 * median(ks[0].wall, ks[0].nsamples),
               1e3 * median(ks[bw].wall, ks[bw].nsamples));
        fflush(stdout);
        for (int i = 0; i < nk; i++) {
            fprintf(stderr, "%s %s: rel L2 vs direct %.3g; ms by CPU time median %.3f best "
                    "%.3f; samples:", c->name, ks[i].label, ks[i].err,
                    1e3 * median(ks[i].cpu, ks[i].nsamples), 1e3 * best(ks[i].cpu, ks[i].nsamples));
            for (int s = 0; s < ks[i].nsamples; s++) fprintf(stderr, " %.3f", 1e3 * ks[i].cpu[s]);
            fprintf(stderr, "\n");
            kernel_free(&ks[i]);
        }
        cpu_units_free(&u);
        problem_free(&p);
    }
    provenance(threads);
    wpk_context_free(ctx);
    return 0;
}
