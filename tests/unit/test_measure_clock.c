/* test_measure_clock.c -- the measurer's CPU-time clock times the busiest thread: two
 * candidates of one conv task burn the same CPU time, one on the first thread of two alone
 * (the other idle), one split over both; the first must measure about twice as long as the
 * second. Dividing the process's CPU time by the threads measured them
 * the same, which made configs that leave threads idle look fast. The burns (spins on each
 * thread's own CPU clock, so exact whatever the machine's load) are injected at the start of
 * each kernel's C source (params.edit_source).
 * Then the run child's team: kernels that trap when two of the team's threads run on one CPU
 * at their first call (a fresh child's threads did, for tens of milliseconds), measured in
 * fresh children with as many threads as the process may use CPUs: every one must run.
 * Last, preempted samples: a kernel whose first 40 calls take 1.5 ms of CPU time and 4.5 ms of
 * wall time (a thread that waited for its core, as beside a build) and then 1 ms of both; its
 * median must be the undisturbed 1 ms (with the preempted samples counted it was 1.5 ms). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "kernel_source.h"
#include "ir/graph.h"
#include "tune/measure.h"

/* In a team of two, each thread spins until its own CPU clock has advanced by its share (ms):
 * CPU time exactly so, whatever the cores' speed and whoever else runs on them. */
#define BURN(ms0, ms1)                                                                        \
    "{\nint omp_get_thread_num(void);\n#pragma omp parallel num_threads(2)\n{\n"            \
    "double ms = omp_get_thread_num() ? " #ms1 " : " #ms0 ";\n"                              \
    "struct timespec a, b;\nclock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);\n"                  \
    "do clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);\n"                                       \
    "while ((b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) * 1e-6 < ms);\n}\n}"

static const char *burn_for(const char *config, const char *const *configs) {
    static const char *const code[2] = {BURN(4.0, 0.0), BURN(2.0, 2.0)};
    for (int i = 0; i < 2; i++)
        if (!strcmp(config, configs[i])) return code[i];
    return NULL;
}

static void edit(void *user, const char *config, strbuf *src) {
    const char *code = burn_for(config, user);
    if (code) CHECK(kernel_source_insert(src, "#include <time.h>\n", code));
}

static double medians[2];

/* Traps (a crash, which the measurer reports) when two threads of the kernel's team are on one
 * CPU when it is called. */
#define APART                                                                                 \
    "{\nint omp_get_thread_num(void), omp_get_num_threads(void), sched_getcpu(void);\n"       \
    "int cpu[256], n = 0;\n#pragma omp parallel\n{\nint i = omp_get_thread_num();\n"           \
    "if (i < 256) cpu[i] = sched_getcpu();\n#pragma omp single\nn = omp_get_num_threads();\n}\n" \
    "for (int i = 0; i < n && i < 256; i++)\nfor (int j = 0; j < i; j++)\n"                    \
    "if (cpu[i] == cpu[j]) __builtin_trap();\n}"

static void edit_apart(void *user, const char *config, strbuf *src) {
    (void)user;
    (void)config;
    CHECK(kernel_source_insert(src, "", APART));
}

static int apart_ok, apart_n;

#define PREEMPTED_THEN_NOT                                                                    \
    "{\nstatic int calls;\ndouble ms = calls < 40 ? 1.5 : 1.0;\nstruct timespec a, b;\n"         \
    "clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);\n"                                           \
    "do clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);\n"                                        \
    "while ((b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) * 1e-6 < ms);\n"            \
    "if (calls++ < 40) {\nstruct timespec z = {0, 3000000};\nnanosleep(&z, 0);\n}\n}"

static void edit_preempted(void *user, const char *config, strbuf *src) {
    (void)user;
    (void)config;
    CHECK(kernel_source_insert(src, "#include <time.h>\n", PREEMPTED_THEN_NOT));
}

static tune_measurement preempted_result;

static void on_preempted(void *user, int i, const tune_config *cfg, const tune_measurement *r) {
    (void)user;
    (void)i;
    (void)cfg;
    preempted_result = *r;
}

static void on_apart(void *user, int i, const tune_config *cfg, const tune_measurement *r) {
    (void)user;
    (void)i;
    (void)cfg;
    apart_n++;
    if (r->status == TUNE_OK) apart_ok++;
    else
        fprintf(stderr, "  threads shared a CPU: %s: %s\n", tune_status_name(r->status),
                r->message);
}

static void on_result(void *user, int i, const tune_config *cfg, const tune_measurement *r) {
    (void)user;
    (void)cfg;
    CHECK(r->status == TUNE_OK);
    if (r->status != TUNE_OK) fprintf(stderr, "  %s: %s\n", tune_status_name(r->status), r->message);
    if (i >= 0 && i < 2) medians[i] = r->median;
}

int main(int argc, char **argv) {
    (void)argc;
    /* idle OpenMP threads must sleep, as `wpk tune` has them with the CPU clock: libgomp reads
       the policy when it is loaded, so start again with it set */
    if (!getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "passive", 1);
        execv("/proc/self/exe", argv);
    }
    char dir[] = "/tmp/wpk_test_measure_clock_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    setenv("WPK_CACHE_DIR", dir, 1);
    wpk_context *ctx = wpk_context_create();

    /* FusedConv 1x16x8x8 -> 16, 1x1 */
    ir_graph *g = ir_graph_create();
    int k = ir_graph_add_node(g, "conv", "FusedConv", "wpk", 1, 2, 1);
    float w[16 * 16];
    for (int i = 0; i < 16 * 16; i++) w[i] = (float)(i % 7) / 7.0f - 0.5f;
    ir_tensor x = {WPK_DTYPE_FLOAT32, 4, {1, 16, 8, 8}, NULL};
    ir_tensor wt = {WPK_DTYPE_FLOAT32, 4, {16, 16, 1, 1}, w};
    ir_tensor y = {WPK_DTYPE_FLOAT32, 4, {1, 16, 8, 8}, NULL};
    ir_tensor *in[] = {&x, &wt}, *out[] = {&y};
    const kernel_provider *t = kernel_provider_for(&g->nodes[k], in, out);
    CHECK(t != NULL);
    if (!t) CHECK_DONE();
    tune_task task;
    tune_task_init(&task, t, &g->nodes[k], in, out);

    /* two distinct configs of the task: the default and the first other one */
    tune_space s;
    t->space(t, &task, &s);
    tune_config cfg[2];
    char text[2][512] = {"", ""};
    t->default_config(t, &task, &s, &cfg[0]);
    strbuf b = {0};
    tune_config_print(&s, &cfg[0], &b);
    snprintf(text[0], sizeof text[0], "%s", b.s ? b.s : "");
    sb_free(&b);
    for (int64_t j = 0; !text[1][0] && j < tune_space_size(&s); j++) {
        tune_config_from_index(&s, j, &cfg[1]);
        tune_config_print(&s, &cfg[1], &b);
        if (b.s && strcmp(b.s, text[0])) snprintf(text[1], sizeof text[1], "%s", b.s);
        sb_free(&b);
    }
    CHECK(text[1][0] != 0);
    const char *configs[2] = {text[0], text[1]};

    tune_measure_params p = tune_measure_default_params();
    p.threads = 2;
    p.clock = TUNE_CLOCK_CPU;
    p.min_repeat_ms = 50;
    p.edit_source = edit;
    p.edit_user = (void *)configs;
    tune_measurer *m = NULL;
    CHECK(tune_measurer_create(ctx, &task, &p, &m) == WPK_OK);
    if (m) CHECK(tune_measure_batch(m, cfg, 2, TUNE_MEASURE_ALONE, on_result, NULL) == WPK_OK);
    tune_measurer_free(m);
    double ratio = medians[1] > 0 ? medians[0] / medians[1] : 0;
    printf("one thread busy: %.2f ms, both: %.2f ms, ratio %.2f (want about 2)\n",
           medians[0] * 1e3, medians[1] * 1e3, ratio);
    CHECK(ratio > 1.7 && ratio < 2.3);

    /* the team apart: as many threads as CPUs, the two configs in three batches (six fresh
       run children) */
    cpu_set_t allowed; /* the CPUs this process may use, which a container may narrow */
    long ncpu = sched_getaffinity(0, sizeof allowed, &allowed) ? 0 : CPU_COUNT(&allowed);
    if (ncpu >= 2 && ncpu <= 64) {
        p.threads = (int)ncpu;
        p.edit_source = edit_apart;
        p.edit_user = NULL;
        m = NULL;
        CHECK(tune_measurer_create(ctx, &task, &p, &m) == WPK_OK);
        for (int round = 0; m && round < 3; round++)
            CHECK(tune_measure_batch(m, cfg, 2, TUNE_MEASURE_ALONE, on_apart, NULL) == WPK_OK);
        tune_measurer_free(m);
        printf("%d threads on distinct CPUs in %d of %d fresh run children\n", (int)ncpu, apart_ok,
               apart_n);
        CHECK(apart_n == 6 && apart_ok == 6);
    } else {
        printf("team apart: skipped (%ld CPUs)\n", ncpu);
    }

    /* preempted samples left out: one thread, its first 40 calls preempted */
    p.threads = 1;
    p.edit_source = edit_preempted;
    m = NULL;
    CHECK(tune_measurer_create(ctx, &task, &p, &m) == WPK_OK);
    if (m) CHECK(tune_measure_batch(m, cfg, 1, TUNE_MEASURE_ALONE, on_preempted, NULL) == WPK_OK);
    tune_measurer_free(m);
    printf("first 40 calls preempted (1.5 ms CPU, 4.5 ms wall), then 1 ms: median %.2f ms of %d "
           "samples kept\n", preempted_result.median * 1e3, preempted_result.nsamples);
    CHECK(preempted_result.status == TUNE_OK);
    CHECK(preempted_result.median > 0.9e-3 && preempted_result.median < 1.1e-3);

    ir_graph_free(g);
    wpk_context_free(ctx);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    CHECK_DONE();
}
