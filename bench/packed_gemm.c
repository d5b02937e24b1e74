/* packed_gemm.c -- the packed AVX-512 GEMM provider alone on a transformer's matrix shapes
 * (M tokens x K -> N, B constant), with and without its fused epilogue, against this CPU's
 * FMA peak: how close the micro-kernel and its blocking come to what the cores can do.
 *
 *     build/packed_gemm_bench [--threads N] [--reps R] [--m M] [--cold] [--provider NAME]
 *
 * --provider times another library provider on the same nodes (onednn, openblas: the peers).
 * --cold rotates through enough kernels (each with its own packed B) to overflow the last-level
 * cache twice, so B comes from memory as a large model's weights do; without it B stays cached.
 *
 * Times by wall clock and by the process's CPU time (on a machine shared with other work the
 * second is what the cores did; the first is what a run got); prints the median of R runs. */
#define _POSIX_C_SOURCE 200809L

#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/target.h"
#include "ir/graph.h"
#include "kernels/vendor/lib.h"

typedef struct shape {
    const char *what;
    int64_t k, n;
    const char *act; /* NULL: bias only */
} shape;

/* ViT-B / BERT-base encoder layer: QKV in-projection, out-projection, MLP up (GELU), MLP down */
static const shape SHAPES[] = {
    {"qkv in-proj", 768, 2304, NULL},
    {"out-proj", 768, 768, NULL},
    {"mlp up + gelu", 768, 3072, "Gelu"},
    {"mlp up, bias only", 768, 3072, NULL},
    {"mlp down", 3072, 768, NULL},
};
#define NSHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

static double clock_of(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static float *filled(int64_t n, unsigned seed) {
    float *p = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; p && i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    return p;
}

#define MAX_COPIES 64

/* Seconds per run (wall, CPU) of one shape, medians of `reps`; false when it cannot run. */
static bool time_shape(wpk_context *ctx, const kernel_provider *lp, const shape *s, int64_t m,
                       int threads, int reps, bool cold, double *wall, double *cpu) {
    ir_graph *g = ir_graph_create();
    int id = ir_graph_add_node(g, s->what, "FusedMatMul", "wpk", 1, 3, 1);
    ir_node *node = &g->nodes[id];
    if (s->act) ir_node_set_str(g, node, "activation", s->act);
    ir_tensor a = {WPK_DTYPE_FLOAT32, 3, {1, m, s->k}, NULL};
    ir_tensor b = {WPK_DTYPE_FLOAT32, 2, {s->k, s->n}, filled(s->k * s->n, 3)};
    ir_tensor bias = {WPK_DTYPE_FLOAT32, 1, {s->n}, filled(s->n, 5)};
    ir_tensor y = {WPK_DTYPE_FLOAT32, 3, {1, m, s->n}, malloc(sizeof(float) * (size_t)(m * s->n))};
    ir_tensor a_run = a;
    a_run.data = filled(m * s->k, 7);
    ir_tensor *in[3] = {&a, &b, &bias}, *run_in[3] = {&a_run, &b, &bias}, *out[1] = {&y};
    lib_kernel *k[MAX_COPIES] = {NULL};
    int64_t llc = target_llc_bytes(), b_bytes = (int64_t)sizeof(float) * s->k * s->n;
    int copies = cold ? (int)((2 * (llc > 0 ? llc : 32 << 20) + b_bytes - 1) / b_bytes) : 1;
    if (copies > MAX_COPIES) copies = MAX_COPIES;
    bool ok = true;
    for (int i = 0; i < copies && ok; i++)
        if (lp->create(lp, ctx, node, in, out, 0, &(kernel_device){threads, NULL}, &k[i])) {
            fprintf(stderr, "%s: %s\n", s->what, wpk_context_error(ctx));
            ok = false;
        }
    if (ok) {
        double *w = malloc(sizeof(double) * (size_t)reps * 2), *c = w + reps;
        for (int i = 0; i < copies; i++) lp->run(lp, ctx, k[i], run_in, out); /* warm-up */
        for (int r = 0; r < reps; r++) {
            double w0 = clock_of(CLOCK_MONOTONIC), c0 = clock_of(CLOCK_PROCESS_CPUTIME_ID);
            lp->run(lp, ctx, k[r % copies], run_in, out);
            c[r] = clock_of(CLOCK_PROCESS_CPUTIME_ID) - c0;
            w[r] = clock_of(CLOCK_MONOTONIC) - w0;
        }
        qsort(w, (size_t)reps, sizeof *w, cmp_double);
        qsort(c, (size_t)reps, sizeof *c, cmp_double);
        *wall = w[reps / 2];
        *cpu = c[reps / 2];
        free(w);
    }
    for (int i = 0; i < copies; i++) lp->destroy(lp, k[i]);
    free(a_run.data), free(b.data), free(bias.data), free(y.data);
    ir_graph_free(g);
    return ok;
}

int main(int argc, char **argv) {
    int threads = 1, reps = 30;
    int64_t m = 197;
    bool cold = false;
    const char *provider = "packed";
    for (int i = 1; i < argc; i++) {
        bool value = i + 1 < argc;
        if (!strcmp(argv[i], "--cold")) cold = true;
        else if (value && !strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
        else if (value && !strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
        else if (value && !strcmp(argv[i], "--m")) m = atoll(argv[++i]);
        else if (value && !strcmp(argv[i], "--provider")) provider = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--threads N] [--reps R] [--m M] [--cold] "
                    "[--provider NAME]\n", argv[0]);
            return 1;
        }
    }
    if (threads < 1 || reps < 1 || m < 1) {
        fprintf(stderr, "--threads, --reps and --m take positive numbers\n");
        return 1;
    }
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f")) {
        printf("packed_gemm_bench: this CPU has no AVX-512, the packed GEMM's ISA\n");
        return 77;
    }
    const kernel_provider *lp = lib_provider_find(provider);
    if (!lp) {
        fprintf(stderr, "no library provider named '%s' in this build\n", provider);
        return 1;
    }
    wpk_context *ctx = wpk_context_create();
    printf("%s; M %lld, %d thread%s, B %s, median of %d runs\n", lp->version(lp), (long long)m,
           threads, threads > 1 ? "s" : "", cold ? "from memory" : "cached", reps);
    printf("%-20s %6s %6s %9s %9s %12s %12s\n", "shape", "K", "N", "wall ms", "cpu ms",
           "GFLOP/s wall", "GFLOP/s/core");
    for (int i = 0; i < NSHAPES; i++) {
        double wall, cpu;
        if (!time_shape(ctx, lp, &SHAPES[i], m, threads, reps, cold, &wall, &cpu)) continue;
        double flop = 2.0 * (double)m * (double)SHAPES[i].k * (double)SHAPES[i].n;
        printf("%-20s %6lld %6lld %9.3f %9.3f %12.1f %12.1f\n", SHAPES[i].what,
               (long long)SHAPES[i].k, (long long)SHAPES[i].n, wall * 1e3, cpu * 1e3,
               flop / wall * 1e-9, flop / cpu * 1e-9);
    }
    wpk_context_free(ctx);
    return 0;
}
