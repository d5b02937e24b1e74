/* test_measure.c -- the measurer (src/tune/measure.c) end to end on a small conv task: a good
 * candidate measures OK with its samples and a checked result; deliberately broken candidates
 * (made by rewriting their C source in the build worker: no output written -> wrong result, a
 * NULL store -> crash, an endless loop -> timeout, a syntax error -> compile error, a 1 GiB
 * allocation under a 256 MiB cap -> crash, the same allocation without a cap -> OK) are each
 * classified with a message naming the cause, in one batch with good candidates after them,
 * which still measure OK; every candidate is heard exactly once, with two build workers and
 * with one; TUNE_MEASURE_ALONE; build deadlines in CPU time (a waiting build is not cut
 * short, a computing one is, and so is one waiting past the wall-time cap); with two build
 * workers the candidate expected to build longest starts first; the automatic parallelism
 * policy's bookkeeping; a child paused after closing its pipe is still reaped; candidates
 * with constants over cold_bytes timed call by call, flushed; median and spread;
 * must-fail creation. Kernels go to a fresh cache directory. */
#define _DEFAULT_SOURCE /* usleep */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "kernel_source.h"
#include "ir/graph.h"
#include "tune/measure.h"
#include "tune/measure_impl.h"

/* ---- the task: FusedConv 1x16x10x10 -> 16, 3x3, pad 1, bias, ReLU ---- */

typedef struct fixture {
    ir_graph *g;
    ir_tensor x, w, b, y;
    float *wdata, *bdata;
    tune_task task;
} fixture;

static void fixture_init(fixture *f) {
    memset(f, 0, sizeof *f);
    f->g = ir_graph_create();
    int k = ir_graph_add_node(f->g, "conv", "FusedConv", "wpk", 1, 3, 1);
    ir_node *n = &f->g->nodes[k];
    ir_node_set_ints(f->g, n, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    ir_node_set_ints(f->g, n, "kernel_shape", (const int64_t[]){3, 3}, 2);
    ir_node_set_str(f->g, n, "activation", "Relu");
    f->wdata = malloc(sizeof(float) * 16 * 16 * 9);
    f->bdata = malloc(sizeof(float) * 16);
    for (int i = 0; i < 16 * 16 * 9; i++) f->wdata[i] = (float)((i * 37 % 101) - 50) / 50.0f;
    for (int i = 0; i < 16; i++) f->bdata[i] = (float)i / 16.0f - 0.5f;
    f->x = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {1, 16, 10, 10}, NULL};
    f->w = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {16, 16, 3, 3}, f->wdata};
    f->b = (ir_tensor){WPK_DTYPE_FLOAT32, 1, {16}, f->bdata};
    f->y = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {1, 16, 10, 10}, NULL};
    ir_tensor *in[] = {&f->x, &f->w, &f->b}, *out[] = {&f->y};
    const kernel_provider *t = kernel_provider_for(n, in, out);
    CHECK(t != NULL);
    if (t) tune_task_init(&f->task, t, &f->g->nodes[k], in, out);
}

static void fixture_free(fixture *f) {
    ir_graph_free(f->g);
    free(f->wdata);
    free(f->bdata);
}

/* ---- breaking candidates: what to put at the start of the kernel's body, by config ---- */

typedef struct breaker {
    char config[8][512];
    const char *code[8];
    int n;
} breaker;

static void edit(void *user, const char *config, strbuf *src) {
    breaker *b = user;
    const char *code = NULL;
    for (int i = 0; i < b->n; i++)
        if (!strcmp(b->config[i], config)) code = b->code[i];
    if (code && !kernel_source_insert(src, NULL, code))
        fprintf(stderr, "test_measure: kernel signature not found\n");
}

/* ---- collecting results ---- */

typedef struct heard {
    tune_measurement r[16];
    int times[16];
} heard;

static void on_result(void *user, int i, const tune_config *cfg, const tune_measurement *r) {
    (void)cfg;
    heard *h = user;
    if (i < 0 || i >= 16) {
        CHECK(!"index out of range");
        return;
    }
    h->r[i] = *r;
    h->times[i]++;
}

static void check_ok(const tune_measurement *r, const tune_measure_params *p) {
    CHECK(r->status == TUNE_OK);
    if (r->status != TUNE_OK) fprintf(stderr, "  not OK: %s: %s\n", tune_status_name(r->status),
                                      r->message);
    CHECK(r->nsamples >= 3 && r->nsamples <= p->max_samples);
    CHECK(r->median > 0 && r->median < 1);
    CHECK(r->calls_per_sample >= 1);
    CHECK(r->error >= 0 && r->error <= p->tolerance);
    for (int s = 0; s < r->nsamples; s++) CHECK(r->samples[s] > 0);
    CHECK(fabs(r->median - tune_median(r->samples, r->nsamples)) < 1e-12);
}

static void check_fail(const tune_measurement *r, tune_status want, const char *needle) {
    if (r->status != want || !strstr(r->message, needle)) {
        fprintf(stderr, "  expected %s with \"%s\", got %s: \"%s\"\n", tune_status_name(want),
                needle, tune_status_name(r->status), r->message);
        check_failures++;
    }
    CHECK(r->median == 0);
}

/* Distinct configs of the task's space: the default, then seeded random ones. */
static int distinct_configs(const tune_task *t, tune_config *out, int n, char text[][512]) {
    tune_space s;
    t->tmpl->space(t->tmpl, t, &s);
    t->tmpl->default_config(t->tmpl, t, &s, &out[0]);
    uint64_t rng = 7;
    int have = 0;
    for (int tries = 0; have < n && tries < 10000; tries++) {
        tune_config c;
        if (have == 0) c = out[0];
        else tune_config_random(&s, &rng, &c);
        strbuf b = {0};
        tune_config_print(&s, &c, &b);
        bool dup = false;
        for (int i = 0; i < have; i++) dup |= !strcmp(text[i], b.s);
        if (!dup) {
            out[have] = c;
            snprintf(text[have++], 512, "%s", b.s);
        }
        sb_free(&b);
    }
    return have;
}

static void test_helpers(void) {
    double v[] = {5, 1, 4, 2, 3};
    CHECK(tune_median(v, 5) == 3);
    CHECK(v[0] == 5); /* not sorted in place */
    CHECK(fabs(tune_spread(v, 5) - (4.0 - 2.0) / 3.0) < 1e-12);
    double w[] = {2, 2, 2, 2};
    CHECK(tune_spread(w, 4) == 0);
    CHECK(isinf(tune_spread(w, 1)));
    CHECK(!strcmp(tune_status_name(TUNE_TIMEOUT), "TIMEOUT"));
    CHECK(strstr(tune_toolchain(), "-O3") != NULL);

    tune_parallelism p;
    tune_parallelism_init(&p, 3, 1);
    CHECK(!p.automatic && p.builds == 3 && p.level == 0 && p.max_level == 0);
    tune_parallelism_init(&p, 0, 0);
    CHECK(p.automatic && p.builds >= 1 && p.level == 0 && p.max_level == 1);
}

static void test_must_fail(wpk_context *ctx) {
    /* a node with more inputs than a kernel takes is refused, naming it */
    fixture f;
    fixture_init(&f);
    tune_task t = f.task;
    int k = ir_graph_add_node(f.g, "wide", "Concat", "", 1, 9, 1);
    t.node = &f.g->nodes[k];
    tune_measurer *m = NULL;
    CHECK_ERR(ctx, tune_measurer_create(ctx, &t, NULL, &m), WPK_ERR_UNSUPPORTED, "'wide'");
    CHECK(m == NULL);
    fixture_free(&f);
}

static void test_batch(wpk_context *ctx, int builds) {
    fixture f;
    fixture_init(&f);
    tune_config cfg[9];
    char text[9][512];
    int n = distinct_configs(&f.task, cfg, 9, text);
    CHECK(n == 9);
    /* 0: the default, good; 1..6 broken; 7, 8 good after them */
    breaker br = {.n = 6};
    const char *codes[6] = {
        "return;",                                             /* no output: wrong result */
        "*(volatile int *)0 = 1;",                              /* crash */
        "for (volatile int spin = 1; spin;) {}",                /* hang: timeout */
        "this is not C;",                                       /* compile error */
        "{ volatile char *big = __builtin_malloc((unsigned long)1 << 30); big[0] = 1; }",
        "{ volatile char *big = __builtin_malloc((unsigned long)1 << 30); big[0] = 1;"
        " __builtin_free((void *)big); }",
    };
    for (int i = 0; i < 6; i++) {
        snprintf(br.config[i], sizeof br.config[i], "%s", text[i + 1]);
        br.code[i] = codes[i];
    }
    tune_parallelism par;
    tune_parallelism_init(&par, builds, 0);
    tune_measure_params p = tune_measure_default_params();
    p.parallel = &par;
    p.run_timeout_s = 3;
    p.min_repeat_ms = 10;
    p.max_repeat_ms = 100;
    p.mem_cap_bytes = (int64_t)256 << 20;
    p.edit_source = edit;
    p.edit_user = &br;
    tune_measurer *m = NULL;
    wpk_status st = tune_measurer_create(ctx, &f.task, &p, &m);
    CHECK(st == WPK_OK);
    if (st) {
        fprintf(stderr, "  %s\n", wpk_context_error(ctx));
        fixture_free(&f);
        return;
    }
    heard h;
    memset(&h, 0, sizeof h);
    /* the uncapped allocation needs a measurer without the cap: measured separately below */
    CHECK(tune_measure_batch(m, cfg, 6, 0, on_result, &h) == WPK_OK);
    heard h2;
    memset(&h2, 0, sizeof h2);
    CHECK(tune_measure_batch(m, cfg + 7, 2, 0, on_result, &h2) == WPK_OK);
    for (int i = 0; i < 2; i++) {
        h.r[7 + i] = h2.r[i];
        h.times[7 + i] = h2.times[i];
    }
    CHECK(h2.times[2] == 0);
    for (int i = 0; i < 9; i++) CHECK(h.times[i] == (i == 6 ? 0 : 1));
    check_ok(&h.r[0], &p);
    check_fail(&h.r[1], TUNE_WRONG_RESULT, "differs from the reference");
    check_fail(&h.r[2], TUNE_CRASH, "signal 11");
    check_fail(&h.r[3], TUNE_TIMEOUT, "timed out");
    check_fail(&h.r[4], TUNE_COMPILE_ERROR, "error");
    /* malloc returns NULL under the cap and the store faults; a sanitizer's allocator aborts
       instead (an exit without a result) */
    if (!strstr(h.r[5].message, "without a result")) check_fail(&h.r[5], TUNE_CRASH, "signal");
    CHECK(h.r[5].status == TUNE_CRASH);
    check_ok(&h.r[7], &p);
    check_ok(&h.r[8], &p);
    for (int i = 0; i < 9; i++) CHECK(h.times[i] == 0 || h.r[i].level == 0);

    /* alone, again: the same results for the good ones, nothing stored anywhere */
    memset(&h, 0, sizeof h);
    CHECK(tune_measure_batch(m, cfg, 1, TUNE_MEASURE_ALONE, on_result, &h) == WPK_OK);
    CHECK(h.times[0] == 1);
    check_ok(&h.r[0], &p);
    tune_measurer_free(m);

    /* without the memory cap the 1 GiB allocation is fine (slow under a sanitizer: time) */
    p.mem_cap_bytes = 0;
    p.run_timeout_s = 60;
    CHECK(tune_measurer_create(ctx, &f.task, &p, &m) == WPK_OK);
    memset(&h, 0, sizeof h);
    CHECK(tune_measure_batch(m, cfg + 6, 1, 0, on_result, &h) == WPK_OK);
    CHECK(h.times[0] == 1);
    check_ok(&h.r[0], &p);
    tune_measurer_free(m);
    fixture_free(&f);
}

/* Build deadlines count the CPU time of the build worker and its compiler, not wall time: a
 * build that waits (a stand-in for one starved of cores by other builds or users) for twice its
 * limit still finishes, one that computes past its limit is cut short as a compile error naming
 * the CPU time, and one that waits past the wall-time cap (10 x the limit) is cut short too. */
typedef struct stall {
    char config[2][512];
    const char *what[2];  /* "wait" or "spin" */
    unsigned wait_s;
} stall;

static void stall_edit(void *user, const char *config, strbuf *src) {
    (void)src;
    const stall *s = user;
    for (int i = 0; i < 2; i++) {
        if (!s->what[i] || strcmp(s->config[i], config)) continue;
        if (!strcmp(s->what[i], "wait")) {
            sleep(s->wait_s);
        } else {
            for (volatile unsigned long spin = 1; spin; spin++) {
            }
        }
    }
}

static void test_build_deadline(wpk_context *ctx) {
    fixture f;
    fixture_init(&f);
    tune_config cfg[3];
    char text[3][512];
    int n = distinct_configs(&f.task, cfg, 3, text);
    CHECK(n == 3);
    stall sl = {.what = {"wait", "spin"}, .wait_s = 3};
    snprintf(sl.config[0], sizeof sl.config[0], "%s", text[1]);
    snprintf(sl.config[1], sizeof sl.config[1], "%s", text[2]);
    tune_parallelism par;
    tune_parallelism_init(&par, 2, 0);
    tune_measure_params p = tune_measure_default_params();
    p.parallel = &par;
    p.build_timeout_s = 1.5;
    p.min_repeat_ms = 10;
    p.max_repeat_ms = 60;
    p.edit_source = stall_edit;
    p.edit_user = &sl;
    tune_measurer *m = NULL;
    CHECK(tune_measurer_create(ctx, &f.task, &p, &m) == WPK_OK);
    if (!m) {
        fixture_free(&f);
        return;
    }
    heard h;
    memset(&h, 0, sizeof h);
    CHECK(tune_measure_batch(m, cfg, 3, 0, on_result, &h) == WPK_OK);
    for (int i = 0; i < 3; i++) CHECK(h.times[i] == 1);
    check_ok(&h.r[0], &p);
    check_fail(&h.r[2], TUNE_COMPILE_ERROR, "timed out");
#ifdef __linux__ /* elsewhere the limit is wall time */
    check_ok(&h.r[1], &p);          /* waited 3 s on a 1.5 s limit: not cut short */
    CHECK(h.r[1].build_s >= 3.0);
    check_fail(&h.r[2], TUNE_COMPILE_ERROR, "s of CPU time");
#endif
    tune_measurer_free(m);

    /* waiting past the wall-time cap: 0.25 s of CPU time, so 2.5 s */
    p.build_timeout_s = 0.25;
    sl.what[1] = NULL;
    sl.wait_s = 5;
    CHECK(tune_measurer_create(ctx, &f.task, &p, &m) == WPK_OK);
    if (m) {
        memset(&h, 0, sizeof h);
        CHECK(tune_measure_batch(m, cfg + 1, 1, 0, on_result, &h) == WPK_OK);
        CHECK(h.times[0] == 1);
        check_fail(&h.r[0], TUNE_COMPILE_ERROR, "timed out");
        CHECK(h.r[0].build_s < 4.5);
        tune_measurer_free(m);
    }
    fixture_free(&f);
}

/* With two build workers the candidate expected to build longest starts first: configs with
 * one value of a knob cost a second of CPU time more to build (a spin in the build worker);
 * after a batch that shows it, a batch with two such configs last starts them first (the build
 * workers write each config's text to a file as they reach the compiler). */
typedef struct costly {
    char config[40][512];
    int n;
    double spin_s;
    const char *log;
} costly;

static void costly_edit(void *user, const char *config, strbuf *src) {
    (void)src;
    const costly *c = user;
    FILE *f = fopen(c->log, "a");
    if (f) {
        fprintf(f, "%s\n", config);
        fclose(f);
    }
    for (int i = 0; i < c->n; i++) {
        if (strcmp(c->config[i], config)) continue;
        clock_t end = clock() + (clock_t)(c->spin_s * CLOCKS_PER_SEC);
        while (clock() < end) {
        }
    }
}

static void test_build_order(wpk_context *ctx) {
    fixture f;
    fixture_init(&f);
    enum { N = 40 };
    static tune_config cfg[N];
    static char text[N][512];
    int n = distinct_configs(&f.task, cfg, N, text);
    tune_space sp;
    f.task.tmpl->space(f.task.tmpl, &f.task, &sp);
    int knob = 0;
    while (knob < sp.nknobs && sp.knobs[knob].nvalues < 2) knob++;
    CHECK(knob < sp.nknobs);
    /* costly: the knob's first value */
    tune_config b1[8], b2[8];
    int cheap[N], dear[N], nc = 0, nd = 0;
    for (int i = 1; i < n && knob < sp.nknobs; i++) {
        if (cfg[i].choice[knob] == 0) dear[nd++] = i;
        else cheap[nc++] = i;
    }
    CHECK(nd >= 5 && nc >= 11);
    if (nd < 5 || nc < 11) {
        fixture_free(&f);
        return;
    }
    char log[] = "/tmp/wpk_test_build_order_XXXXXX";
    int fd = mkstemp(log);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    costly c = {.spin_s = 1.0, .log = log};
    for (int i = 0; i < 5; i++) snprintf(c.config[c.n++], 512, "%s", text[dear[i]]);
    /* the first batch: 3 costly among 5 cheap; the second: 6 cheap, then 2 costly */
    for (int i = 0; i < 8; i++) b1[i] = i % 3 == 1 ? cfg[dear[i / 3]] : cfg[cheap[i - i / 3]];
    for (int i = 0; i < 6; i++) b2[i] = cfg[cheap[5 + i]];
    b2[6] = cfg[dear[3]];
    b2[7] = cfg[dear[4]];
    tune_parallelism par;
    tune_parallelism_init(&par, 2, 0);
    tune_measure_params p = tune_measure_default_params();
    p.parallel = &par;
    p.min_repeat_ms = 5;
    p.max_repeat_ms = 20;
    p.edit_source = costly_edit;
    p.edit_user = &c;
    tune_measurer *m = NULL;
    CHECK(tune_measurer_create(ctx, &f.task, &p, &m) == WPK_OK);
    heard h;
    memset(&h, 0, sizeof h);
    if (m) CHECK(tune_measure_batch(m, b1, 8, 0, on_result, &h) == WPK_OK);
    for (int i = 0; m && i < 8; i++) CHECK(h.times[i] == 1 && h.r[i].status == TUNE_OK);
    FILE *lf = fopen(log, "w"); /* forget the first batch's order */
    if (lf) fclose(lf);
    memset(&h, 0, sizeof h);
    if (m) CHECK(tune_measure_batch(m, b2, 8, 0, on_result, &h) == WPK_OK);
    for (int i = 0; m && i < 8; i++) CHECK(h.times[i] == 1 && h.r[i].status == TUNE_OK);
    char line[2][600] = {"", ""};
    lf = fopen(log, "r");
    for (int i = 0; lf && i < 2; i++)
        if (fgets(line[i], sizeof line[i], lf)) line[i][strcspn(line[i], "\n")] = '\0';
    if (lf) fclose(lf);
    bool first3 = !strcmp(line[0], c.config[3]) || !strcmp(line[1], c.config[3]);
    bool first4 = !strcmp(line[0], c.config[4]) || !strcmp(line[1], c.config[4]);
    CHECK(first3 && first4);
    if (!first3 || !first4) fprintf(stderr, "  builds started with '%s' and '%s'\n", line[0], line[1]);
    unlink(log);
    tune_measurer_free(m);
    fixture_free(&f);
}

/* The automatic policy on kernels of one thread (so a second measurement slot exists): six
 * configs measured five times over (cached builds after the first round), enough windows for
 * a promotion to be tried; every candidate is heard once whatever the policy decides, and its
 * counters add up. */
static void test_auto(wpk_context *ctx) {
    fixture f;
    fixture_init(&f);
    tune_config cfg[6];
    char text[6][512];
    int n = distinct_configs(&f.task, cfg, 6, text);
    tune_parallelism par;
    tune_parallelism_init(&par, 0, 1);
    CHECK(par.max_level >= 1);
    tune_measure_params p = tune_measure_default_params();
    p.parallel = &par;
    p.threads = 1;
    p.min_repeat_ms = 10;
    p.max_repeat_ms = 60;
    tune_measurer *m = NULL;
    CHECK(tune_measurer_create(ctx, &f.task, &p, &m) == WPK_OK);
    if (!m) {
        fixture_free(&f);
        return;
    }
    tune_measurer_set_control(m, &cfg[0]);
    for (int round = 0; round < 5; round++) {
        heard h;
        memset(&h, 0, sizeof h);
        CHECK(tune_measure_batch(m, cfg, n, 0, on_result, &h) == WPK_OK);
        for (int i = 0; i < n; i++) {
            CHECK(h.times[i] == 1);
            check_ok(&h.r[i], &p);
            CHECK(h.r[i].level >= 0 && h.r[i].level <= par.max_level);
        }
    }
    CHECK(par.level >= 0 && par.level <= par.max_level);
    CHECK(par.promotions + par.demotions >= 1); /* a promotion was tried */
    CHECK(par.level <= par.promotions);
    fprintf(stderr, "auto policy: level %d, %d promotions, %d demotions, %d re-measured, last "
            "control error %.3f\n", par.level, par.promotions, par.demotions, par.remeasured,
            par.last_error);
    tune_measurer_free(m);
    fixture_free(&f);
}

/* Cold constants: a candidate whose constants (its packed weights and bias, about 9 KB here)
 * take more than cold_bytes has each call timed after they were flushed from the caches, a
 * generated kernel and a library's alike; below the limit, or with -1, not. Prints the cold
 * and warm medians. */
static void test_cold(wpk_context *ctx) {
    fixture f;
    fixture_init(&f);
    ir_tensor *in[] = {&f.x, &f.w, &f.b}, *out[] = {&f.y};
    const kernel_provider *list[8];
    int nt = kernel_providers_for(&f.task.node[0], in, out, list, 8);
    for (int ti = 0; ti < nt; ti++) {
        tune_task task;
        tune_task_init(&task, list[ti], f.task.node, in, out);
        tune_space s;
        tune_config cfg;
        task.tmpl->space(task.tmpl, &task, &s);
        task.tmpl->default_config(task.tmpl, &task, &s, &cfg);
        /* never, above the constants' 9 KB: warm; every candidate, below them: cold */
        const int64_t limits[4] = {-1, (int64_t)1 << 30, 0, 1024};
        double median[2] = {0};
        for (int li = 0; li < 4; li++) {
            const bool cold = li >= 2;
            tune_measure_params p = tune_measure_default_params();
            p.threads = 1;
            p.min_repeat_ms = 20;
            p.max_repeat_ms = 100;
            p.cold_bytes = limits[li];
            tune_measurer *m = NULL;
            CHECK(tune_measurer_create(ctx, &task, &p, &m) == WPK_OK);
            if (!m) continue;
            heard h;
            memset(&h, 0, sizeof h);
            CHECK(tune_measure_batch(m, &cfg, 1, TUNE_MEASURE_ALONE, on_result, &h) == WPK_OK);
            CHECK(h.times[0] == 1);
            check_ok(&h.r[0], &p);
            CHECK(h.r[0].cold == cold);
            /* a call of this conv takes microseconds, a sample at least 1 ms, cold or not */
            CHECK(h.r[0].calls_per_sample > 1);
            median[cold] = h.r[0].median;
            tune_measurer_free(m);
        }
        fprintf(stderr, "cold constants, %s: %.2f us a call cold, %.2f warm\n", task.tmpl->name,
                median[1] * 1e6, median[0] * 1e6);
    }
    CHECK(nt >= 2); /* the DSL's template and at least one library's */
    fixture_free(&f);
}

/* A child that closes its pipe, then takes a while to exit. */
static void close_then_linger(tune_measurer *m, void *arg, int fd) {
    (void)m;
    (void)arg;
    close(fd);
    usleep(200 * 1000);
}

/* A child paused (a build, while a measurement runs alone) after its pipe closed is reaped:
 * the reap continues it instead of waiting for ever (the hang this once was). */
static void test_reap_paused(wpk_context *ctx) {
    fixture f;
    fixture_init(&f);
    tune_measurer *m = NULL;
    CHECK(tune_measurer_create(ctx, &f.task, NULL, &m) == WPK_OK);
    tune_proc p;
    if (m && tune_proc_start(m, &p, 10, close_then_linger, NULL)) {
        while (!tune_proc_read(&p)) usleep(1000);
        CHECK(kill(-p.pid, SIGSTOP) == 0);
        p.stopped = true;
        p.stopped_at = tune_now();
        alarm(20); /* a hang fails the test instead of holding the suite */
        tune_proc_reap(&p);
        alarm(0);
        CHECK(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0);
        CHECK(!p.stopped && p.pid == 0);
    } else {
        CHECK(!"tune_proc_start");
    }
    tune_measurer_free(m);
    fixture_free(&f);
}

int main(void) {
    char dir[] = "/tmp/wpk_test_measure_XXXXXX";
    if (!getenv("WPK_CACHE_DIR")) {
        if (!mkdtemp(dir)) return 1;
        setenv("WPK_CACHE_DIR", dir, 1);
    }
    wpk_context *ctx = wpk_context_create();
    test_helpers();
    test_must_fail(ctx);
    test_reap_paused(ctx);
    test_batch(ctx, 2);
    test_batch(ctx, 1);
    test_auto(ctx);
    test_build_deadline(ctx);
    test_build_order(ctx);
    test_cold(ctx);
    wpk_context_free(ctx);
    CHECK_DONE();
}
