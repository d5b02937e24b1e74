/* cmd_bench.c -- `wpk bench`: a model's (or a compiled plan's) latency statistics on the cpu
 * backend, then the per-node table of a separate profiled pass (which node runs which
 * implementation, where its config came from, and how long it takes), with the provenance of
 * the figures; as text, or one JSON object (--json); optionally a Chrome/Perfetto trace of the
 * profiled runs. Exit codes as wpk.c's: 0 ok, 1 user error, 2 internal error. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "base/alloc.h"
#include "base/npy.h"
#include "base/provenance.h"
#include "base/strbuf.h"
#include "base/target.h"
#include "kernels/vendor/lib.h"
#include "runtime/cuda/cuda_rt.h"
#include "tune/measure.h"
#include "base/target_fingerprint.h"
#include "wpk.h"

int cmd_bench(int argc, char **argv);

static const char USAGE[] =
    "usage: wpk bench MODEL|PLAN.wpk [--batch N] [--threads N] [--iters N] [--warmup N]\n"
    "                 [--provider auto|generated|onednn|openblas|packed|ref] [--db FILE]\n"
    "                 [-O LEVEL] [--json] [--profile TRACE.json] [--top N] [--seed S]\n"
    "                 [--save DIR] [--precision fp32|bf16] [--target cpu|cuda]\n"
    "  latency of --iters timed runs (min, median, p90, p99, mean; throughput = batch / median)\n"
    "  on seeded random inputs, then the per-node time of a separate profiled pass (median of\n"
    "  up to 10 runs), so profiling does not skew the latency\n"
    "  --batch N      the value of every symbolic dim (default 1; a plan's: its own; with no\n"
    "                 symbolic dims, the samples per run are the first input's leading dim)\n"
    "  --threads N    threads (default 0: the physical cores)\n"
    "  --iters N      timed runs (default 20)\n"
    "  --warmup N     untimed runs before them (default 3); the first run, which plans and\n"
    "                 compiles the kernels, is never timed\n"
    "  --provider P   auto (default): per node the fastest implementation the records measured;\n"
    "                 or every node that can on one provider (MODEL only)\n"
    "  --db FILE      the tuning records the choices come from (MODEL only; default: the\n"
    "                 cache's records.db when it exists; '': none, every node at its default)\n"
    "  -O LEVEL       graph optimization (MODEL only; default 3, as wpk tune records at)\n"
    "  --precision P  fp32 (default) or bf16: convs on AVX-512 BF16, f32 accumulation\n"
    "                 (MODEL only)\n"
    "  --target T     cpu (default) or cuda: the model on this machine's GPU (MODEL only: a\n"
    "                 plan runs on its own target), its kernels from `wpk tune --target cuda`'s\n"
    "                 records; the timed runs replay a CUDA Graph, the profiled ones time each\n"
    "                 step with CUDA events (inputs copied in and outputs out in both)\n"
    "  --json         one JSON object: latency_ms, throughput, samples, the nodes, provenance\n"
    "  --profile F    write the profiled runs as a Chrome/Perfetto trace (JSON, ts/dur in us)\n"
    "  --top N        nodes in the text table (default 25; 0: all)\n"
    "  --save DIR     write the inputs and the last run's outputs to DIR/input_<i>.npy and\n"
    "                 DIR/output_<i>.npy\n";

#define PROFILE_RUNS_MAX 10

typedef struct bench_opts {
    const char *model, *db, *provider, *json_trace, *save, *precision;
    bool plan, json, batch_given, cuda;
    long batch, threads, iters, warmup, top;
    int opt_level;
    long seed;
} bench_opts;

/* The options that take a number: its range and where it goes. */
typedef struct numeric {
    const char *flag;
    long lo, hi;
    size_t offset; /* of a long in bench_opts */
} numeric;

static const numeric NUMERIC[] = {
    {"--batch", 1, 1 << 20, offsetof(bench_opts, batch)},
    {"--threads", 0, 4096, offsetof(bench_opts, threads)},
    {"--iters", 1, 1000000, offsetof(bench_opts, iters)},
    {"--warmup", 0, 1000000, offsetof(bench_opts, warmup)},
    {"--top", 0, 1000000, offsetof(bench_opts, top)},
    {"--seed", 0, 2147483647, offsetof(bench_opts, seed)},
};

static const numeric *numeric_option(const char *flag) {
    for (size_t i = 0; i < sizeof NUMERIC / sizeof *NUMERIC; i++)
        if (!strcmp(NUMERIC[i].flag, flag)) return &NUMERIC[i];
    return NULL;
}

/* One node of the profiled pass: the last run's strings and the median time over the runs. */
typedef struct node_stat {
    const char *node, *op, *provider, *impl, *source; /* borrowed from the profiled session */
    double ms;
    int order; /* execution order */
} node_stat;

typedef struct bench_result {
    double *samples;       /* iters wall-clock times in ms, in run order */
    double first_ms;       /* the first run: plans and compiles */
    double min, median, p90, p99, mean;
    node_stat *nodes;
    int nnodes, profile_runs;
    double *run_start_us, *run_ms; /* per profiled run, for the trace */
    double *trace_ms;              /* per profiled run and node: profile_runs * nnodes */
    int threads_used;
} bench_result;

/* The time of node i in profiled run k. */
static double *trace_at(const bench_result *r, int k, int i) {
    return &r->trace_ms[(size_t)k * (size_t)r->nnodes + (size_t)i];
}

static int usage_fail(const char *fmt, const char *arg) {
    fprintf(stderr, "wpk: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(run 'wpk bench --help' for usage)\n");
    return 1;
}

static int fail_status(wpk_status st, wpk_context *ctx) {
    const char *msg = wpk_context_error(ctx);
    fprintf(stderr, "wpk: error: %s\n", msg && *msg ? msg : wpk_status_name(st));
    return st == WPK_ERR_NOMEM || st == WPK_ERR_INTERNAL ? 2 : 1;
}

static void log_stderr(void *user, wpk_log_level level, const char *msg) {
    (void)user;
    fprintf(stderr, "%s%s\n", level == WPK_LOG_ERROR ? "wpk: error: " : "wpk: warning: ", msg);
}

static bool parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int parse_args(int argc, char **argv, bench_opts *o) {
    memset(o, 0, sizeof *o);
    o->batch = 1;
    o->iters = 20;
    o->warmup = 3;
    o->top = 25;
    o->opt_level = wpk_optimize_default_params().level;
    o->seed = 1;
    bool model_only = false; /* an option a plan already fixed */
    const char *model_only_flag = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        const numeric *num;
        long v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE, stdout);
            return -1;
        } else if ((num = numeric_option(a))) {
            if (!parse_long(val, num->lo, num->hi, &v)) {
                fprintf(stderr, "wpk: error: %s needs a number from %ld to %ld, not '%s'\n"
                        "(run 'wpk bench --help' for usage)\n", a, num->lo, num->hi,
                        val ? val : "");
                return 1;
            }
            *(long *)((char *)o + num->offset) = v;
            o->batch_given |= num->offset == offsetof(bench_opts, batch);
            i++;
        } else if (!strcmp(a, "--precision")) {
            if (!val) return usage_fail("%s needs fp32 or bf16", a);
            o->precision = val;
            model_only = true;
            model_only_flag = a;
            i++;
        } else if (!strcmp(a, "--provider")) {
            static const char *const known[] = {"auto",     "generated", "onednn",
                                                "openblas", "packed",    "ref"};
            bool ok = false;
            for (size_t k = 0; val && k < sizeof known / sizeof *known; k++)
                ok |= !strcmp(val, known[k]);
            if (!ok)
                return usage_fail("unknown provider '%s' (auto, generated, onednn, openblas, "
                                  "packed, ref)", val ? val : "");
            o->provider = val;
            model_only = true;
            model_only_flag = a;
            i++;
        } else if (!strcmp(a, "--db")) {
            if (!val) return usage_fail("%s needs a records database file ('' for none)", a);
            o->db = val;
            model_only = true;
            model_only_flag = a;
            i++;
        } else if (!strncmp(a, "-O", 2)) {
            const char *lv = a[2] ? a + 2 : val;
            if (!parse_long(lv, 0, 3, &v))
                return usage_fail("%s needs an optimization level from 0 to 3", a);
            o->opt_level = (int)v;
            model_only = true;
            model_only_flag = "-O";
            if (!a[2]) i++;
        } else if (!strcmp(a, "--target")) {
            if (!val || (strcmp(val, "cpu") && strcmp(val, "cuda")))
                return usage_fail("--target needs cpu or cuda, not '%s'", val ? val : "");
            o->cuda = !strcmp(val, "cuda");
            model_only = true;
            model_only_flag = a;
            i++;
        } else if (!strcmp(a, "--json")) {
            o->json = true;
        } else if (!strcmp(a, "--profile")) {
            if (!val || !*val) return usage_fail("%s needs a trace file name", a);
            o->json_trace = val;
            i++;
        } else if (!strcmp(a, "--save")) {
            if (!val || !*val) return usage_fail("%s needs a directory", a);
            o->save = val;
            i++;
        } else if (a[0] == '-') {
            return usage_fail("unknown option '%s' for 'bench'", a);
        } else if (!o->model) {
            o->model = a;
        } else {
            return usage_fail("unexpected argument '%s' (one model or plan)", a);
        }
    }
    if (!o->model) return usage_fail("%s", "'bench' needs a model (.onnx) or a plan (.wpk)");
    o->plan = ends_with(o->model, ".wpk");
    if (o->plan && model_only)
        return usage_fail("%s applies to a model, not to a plan: a plan's kernels, optimization "
                          "and records were fixed by 'wpk compile'", model_only_flag);
    return 0;
}

/* ---- inputs ---- */

/* xorshift64*: the same inputs on every machine for a seed */
static uint64_t rng_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

/* floats uniform in [-1, 1); integers in [0, 10); booleans and bytes 0 or 1 */
static void fill_random(wpk_dtype dtype, void *data, int64_t n, uint64_t *rng) {
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = rng_next(rng);
        double u = (double)(r >> 11) / 9007199254740992.0;
        switch (dtype) {
        case WPK_DTYPE_FLOAT32: ((float *)data)[i] = (float)(2 * u - 1); break;
        case WPK_DTYPE_FLOAT64: ((double *)data)[i] = 2 * u - 1; break;
        case WPK_DTYPE_INT32: ((int32_t *)data)[i] = (int32_t)(r % 10); break;
        case WPK_DTYPE_INT64: ((int64_t *)data)[i] = (int64_t)(r % 10); break;
        default: ((uint8_t *)data)[i] = (uint8_t)(r & 1); break;
        }
    }
}

static int num_inputs(const wpk_session *s, const wpk_model *m) {
    return m ? wpk_model_num_inputs(m) : wpk_session_num_inputs(s);
}

static wpk_tensor_view input_info(const wpk_session *s, const wpk_model *m, int i) {
    return m ? wpk_model_input(m, i) : wpk_session_input_info(s, i);
}

static int num_outputs(const wpk_session *s, const wpk_model *m) {
    return m ? wpk_model_num_outputs(m) : wpk_session_num_outputs(s);
}

/* The batch to run at and to count throughput in, unless --batch says: a plan's value of the
 * symbolic dims (it was compiled for one batch); a model with no symbolic dims runs at its
 * fixed leading dim (a model exported at batch 8 runs 8 samples); otherwise 1. */
static void default_batch(const wpk_session *s, const wpk_model *m, bench_opts *o) {
    if (o->batch_given) return;
    bool symbolic = false;
    for (int i = 0; i < num_inputs(s, m); i++) {
        wpk_tensor_view in = input_info(s, m, i);
        for (int d = 0; d < in.ndim; d++) {
            if (!in.dim_names[d] && in.dims[d] >= 0) continue;
            symbolic = true;
            if (o->plan && in.dims[d] > 0) {
                o->batch = (long)in.dims[d];
                return;
            }
        }
    }
    if (symbolic || num_inputs(s, m) < 1) return;
    wpk_tensor_view first = input_info(s, m, 0);
    if (first.ndim >= 1 && first.dims[0] > 0) o->batch = (long)first.dims[0];
}

/* Bind every input of each session to the same seeded random tensor, symbolic dims at batch;
 * with save, also write each to save/input_<i>.npy. */
static wpk_status bind_inputs(wpk_context *ctx, wpk_session *const *sessions, int nsessions,
                              const wpk_model *m, const bench_opts *o) {
    uint64_t rng = (uint64_t)o->seed * 0x9E3779B97F4A7C15ULL + 0x2545F4914F6CDD1DULL;
    for (int i = 0; i < num_inputs(sessions[0], m); i++) {
        wpk_tensor_view in = input_info(sessions[0], m, i);
        int64_t n = 1;
        for (int d = 0; d < in.ndim; d++) {
            if (in.dims[d] < 0 || in.dim_names[d]) in.dims[d] = o->batch;
            n *= in.dims[d];
        }
        void *data = wpk_malloc((size_t)n * wpk_dtype_size(in.dtype) + 1);
        if (!data) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory for input '%s'", in.name);
        fill_random(in.dtype, data, n, &rng);
        wpk_status st = WPK_OK;
        for (int k = 0; st == WPK_OK && k < nsessions; k++)
            st = wpk_session_set_input(sessions[k], in.name, in.dtype, in.dims, in.ndim, data);
        if (st == WPK_OK && o->save) {
            char path[4096];
            snprintf(path, sizeof path, "%s/input_%d.npy", o->save, i);
            st = npy_write(ctx, path, in.dtype, in.ndim, in.dims, data);
        }
        wpk_free(data);
        if (st) return st;
    }
    return WPK_OK;
}

static wpk_status save_outputs(wpk_context *ctx, wpk_session *s, const wpk_model *m,
                               const char *dir) {
    for (int i = 0; i < num_outputs(s, m); i++) {
        wpk_tensor_view t;
        wpk_status st = wpk_session_output(s, i, &t);
        if (st) return st;
        char path[4096];
        snprintf(path, sizeof path, "%s/output_%d.npy", dir, i);
        st = npy_write(ctx, path, t.dtype, t.ndim, t.dims, t.data);
        if (st) return st;
    }
    return WPK_OK;
}

/* ---- timing ---- */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The nearest-rank percentile of sorted v[0..n): the smallest value with at least q of the
 * samples at or below it. */
static double percentile(const double *sorted, int n, double q) {
    int rank = (int)ceil(q * n);
    if (rank < 1) rank = 1;
    return sorted[rank > n ? n - 1 : rank - 1];
}

static wpk_status timed_runs(wpk_context *ctx, wpk_session *s, const bench_opts *o,
                             bench_result *r) {
    double t0 = now_ms();
    wpk_status st = wpk_session_run(s);
    r->first_ms = now_ms() - t0;
    for (long i = 0; st == WPK_OK && i < o->warmup; i++) st = wpk_session_run(s);
    for (long i = 0; st == WPK_OK && i < o->iters; i++) {
        t0 = now_ms();
        st = wpk_session_run(s);
        r->samples[i] = now_ms() - t0;
    }
    if (st) return st;
    int n = (int)o->iters;
    double *sorted = wpk_malloc((size_t)n * sizeof *sorted);
    if (!sorted) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory for the samples");
    memcpy(sorted, r->samples, (size_t)n * sizeof *sorted);
    r->median = median_of(sorted, n);
    r->min = sorted[0];
    r->p90 = percentile(sorted, n, 0.90);
    r->p99 = percentile(sorted, n, 0.99);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += sorted[i];
    r->mean = sum / n;
    wpk_free(sorted);
    return WPK_OK;
}

/* The profiled pass: one untimed run, then up to PROFILE_RUNS_MAX runs whose per-node times
 * give each node's median. */
static wpk_status profiled_runs(wpk_context *ctx, wpk_session *s, const bench_opts *o,
                                bench_result *r) {
    wpk_status st = wpk_session_run(s);
    if (st) return st;
    int runs = o->iters < PROFILE_RUNS_MAX ? (int)o->iters : PROFILE_RUNS_MAX;
    double origin = now_ms();
    for (int k = 0; k < runs; k++) {
        double t0 = now_ms();
        st = wpk_session_run(s);
        double t1 = now_ms();
        const wpk_node_profile *prof;
        int n;
        if (st == WPK_OK) st = wpk_session_profile(s, &prof, &n);
        if (st) return st;
        if (k == 0) {
            r->nnodes = n;
            r->nodes = wpk_calloc((size_t)n + 1, sizeof *r->nodes);
            r->trace_ms = wpk_calloc((size_t)runs * (size_t)n + 1, sizeof *r->trace_ms);
            r->run_start_us = wpk_calloc((size_t)runs, sizeof *r->run_start_us);
            r->run_ms = wpk_calloc((size_t)runs, sizeof *r->run_ms);
            if (!r->nodes || !r->trace_ms || !r->run_start_us || !r->run_ms)
                return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory for the profile");
        } else if (n != r->nnodes) {
            return wpk_error(ctx, WPK_ERR_INTERNAL, "the profile had %d nodes in one run and %d "
                             "in the next", r->nnodes, n);
        }
        for (int i = 0; i < n; i++) {
            node_stat *ns = &r->nodes[i];
            ns->node = prof[i].node ? prof[i].node : "";
            ns->op = prof[i].op ? prof[i].op : "";
            ns->provider = prof[i].provider ? prof[i].provider : "";
            ns->impl = prof[i].impl ? prof[i].impl : "";
            ns->source = prof[i].source ? prof[i].source : "";
            ns->order = i;
            *trace_at(r, k, i) = prof[i].ms;
        }
        r->run_start_us[k] = (t0 - origin) * 1e3;
        r->run_ms[k] = t1 - t0;
        r->profile_runs = k + 1;
    }
    double *col = wpk_malloc((size_t)runs * sizeof *col + 1);
    if (!col) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory for the profile");
    for (int i = 0; i < r->nnodes; i++) {
        for (int k = 0; k < runs; k++) col[k] = *trace_at(r, k, i);
        r->nodes[i].ms = median_of(col, runs);
    }
    wpk_free(col);
    return WPK_OK;
}

/* ---- reports ---- */

/* Per provider (or per source): nodes and time, in first-seen order. */
typedef struct group {
    const char *name;
    int nodes;
    double ms;
} group;

static int group_by(const bench_result *r, bool by_source, group *g, int cap) {
    int n = 0;
    for (int i = 0; i < r->nnodes; i++) {
        const char *key = by_source ? r->nodes[i].source : r->nodes[i].provider;
        int k = 0;
        while (k < n && strcmp(g[k].name, key) != 0) k++;
        if (k == n) {
            if (n == cap) continue;
            g[n++] = (group){key, 0, 0};
        }
        g[k].nodes++;
        g[k].ms += r->nodes[i].ms;
    }
    return n;
}

static double nodes_total(const bench_result *r) {
    double t = 0;
    for (int i = 0; i < r->nnodes; i++) t += r->nodes[i].ms;
    return t;
}

static int by_time_desc(const void *a, const void *b) {
    const node_stat *x = a, *y = b;
    if (x->ms != y->ms) return x->ms < y->ms ? 1 : -1;
    return x->order - y->order;
}

static void collect_provenance(provenance *p, int threads, bool cuda) {
    provenance_init(p);
    provenance_set(p, "compiler", "%s", tune_toolchain());
    provenance_set(p, "target", "%s", target_fingerprint());
    rt_cuda_info gpu;
    if (cuda && rt_cuda_probe(NULL, 0, &gpu) == WPK_OK) {
        char fp[700];
        tune_cuda_target(&gpu, fp, sizeof fp);
        provenance_set(p, "gpu", "%s (%d SMs, %.1f GiB)", fp, gpu.sm_count,
                       (double)gpu.memory_bytes / (1 << 30));
    }
    provenance_set(p, "threads", "%d", threads);
    const char *wait = getenv("OMP_WAIT_POLICY");
    const char *spin = getenv("GOMP_SPINCOUNT");
    provenance_set(p, "omp_wait_policy", "%s", wait && *wait ? wait : "default");
    if (spin && *spin) provenance_set(p, "gomp_spincount", "%s", spin);
    char libs[PROVENANCE_VALUE] = "";
    const kernel_provider *const *lp = lib_providers();
    for (int i = 0; lp[i]; i++) {
        size_t l = strlen(libs);
        snprintf(libs + l, sizeof libs - l, "%s%s", i ? "; " : "", lp[i]->version(lp[i]));
    }
    provenance_set(p, "libraries", "%s", libs[0] ? libs : "none built in");
}

static void print_text(const bench_opts *o, const bench_result *r, const provenance *prov) {
    printf("%s: %s, batch %ld, threads %d%s", o->model, o->plan ? "plan" : "model", o->batch,
           r->threads_used, o->cuda ? ", target cuda" : "");
    if (!o->plan)
        printf(", -O%d, provider %s, records %s", o->opt_level, o->provider ? o->provider : "auto",
               o->db ? o->db : "default");
    printf("\nfirst run%s: %.1f ms\n", o->plan ? "" : " (plans and compiles the kernels)",
           r->first_ms);
    printf("latency over %ld runs after %ld warm-up: min %.3f  median %.3f  p90 %.3f  p99 %.3f  "
           "mean %.3f ms\n", o->iters, o->warmup, r->min, r->median, r->p90, r->p99, r->mean);
    printf("throughput: %.2f samples/s (batch / median)\n", (double)o->batch * 1e3 / r->median);

    double total = nodes_total(r);
    printf("\nper node: median of %d profiled run%s (separate from the timed runs); the nodes "
           "sum to %.3f ms\n", r->profile_runs, r->profile_runs == 1 ? "" : "s", total);
    node_stat *sorted = wpk_malloc((size_t)r->nnodes * sizeof *sorted + 1);
    if (sorted) {
        memcpy(sorted, r->nodes, (size_t)r->nnodes * sizeof *sorted);
        qsort(sorted, (size_t)r->nnodes, sizeof *sorted, by_time_desc);
        printf("%9s %6s  %-28s %-20s %-9s %-9s %s\n", "ms", "share", "node", "op", "provider",
               "source", "implementation");
        int shown = o->top == 0 || o->top > r->nnodes ? r->nnodes : (int)o->top;
        for (int i = 0; i < shown; i++) {
            const node_stat *n = &sorted[i];
            printf("%9.3f %5.1f%%  %-28.28s %-20.20s %-9s %-9s %s\n", n->ms,
                   total > 0 ? 100 * n->ms / total : 0, n->node, n->op, n->provider, n->source,
                   n->impl);
        }
        if (shown < r->nnodes) {
            double rest = 0;
            for (int i = shown; i < r->nnodes; i++) rest += sorted[i].ms;
            printf("%9.3f %5.1f%%  ... %d more node%s (--top 0 lists all)\n", rest,
                   total > 0 ? 100 * rest / total : 0, r->nnodes - shown,
                   r->nnodes - shown == 1 ? "" : "s");
        }
        wpk_free(sorted);
    }
    group g[16];
    int ng = group_by(r, false, g, 16);
    printf("providers:");
    for (int k = 0; k < ng; k++)
        printf("%s %s %d node%s %.3f ms (%.1f%%)", k ? "," : "", g[k].name, g[k].nodes,
               g[k].nodes == 1 ? "" : "s", g[k].ms, total > 0 ? 100 * g[k].ms / total : 0);
    ng = group_by(r, true, g, 16);
    printf("\nsources:");
    for (int k = 0; k < ng; k++) printf("%s %s %d", k ? "," : "", g[k].name, g[k].nodes);
    printf("\n\nprovenance:\n");
    strbuf b = {0};
    provenance_text(prov, "  ", &b);
    if (b.s) fputs(b.s, stdout);
    sb_free(&b);
}

static cJSON *groups_json(const bench_result *r, bool by_source) {
    group g[16];
    int ng = group_by(r, by_source, g, 16);
    double total = nodes_total(r);
    cJSON *obj = cJSON_CreateObject();
    for (int k = 0; obj && k < ng; k++) {
        if (by_source) {
            cJSON_AddNumberToObject(obj, g[k].name, g[k].nodes);
            continue;
        }
        cJSON *e = cJSON_AddObjectToObject(obj, g[k].name);
        if (!e) continue;
        cJSON_AddNumberToObject(e, "nodes", g[k].nodes);
        cJSON_AddNumberToObject(e, "ms", g[k].ms);
        cJSON_AddNumberToObject(e, "share", total > 0 ? g[k].ms / total : 0);
    }
    return obj;
}

static cJSON *tensors_json(wpk_session *s, const wpk_model *m, bool inputs, const bench_opts *o) {
    cJSON *arr = cJSON_CreateArray();
    int n = inputs ? num_inputs(s, m) : num_outputs(s, m);
    for (int i = 0; arr && i < n; i++) {
        wpk_tensor_view t;
        if (inputs) {
            t = input_info(s, m, i);
            for (int d = 0; d < t.ndim; d++)
                if (t.dims[d] < 0 || t.dim_names[d]) t.dims[d] = o->batch;
        } else if (wpk_session_output(s, i, &t) != WPK_OK) {
            continue;
        }
        cJSON *e = cJSON_CreateObject();
        if (!e) break;
        cJSON_AddStringToObject(e, "name", t.name ? t.name : "");
        cJSON_AddStringToObject(e, "dtype", wpk_dtype_name(t.dtype));
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; shape && d < t.ndim; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t.dims[d]));
        if (o->save) {
            char file[64];
            snprintf(file, sizeof file, "%s_%d.npy", inputs ? "input" : "output", i);
            cJSON_AddStringToObject(e, "file", file);
        }
        cJSON_AddItemToArray(arr, e);
    }
    return arr;
}

/* The whole report as one JSON object; NULL when out of memory. The caller frees it. */
static char *report_json(const bench_opts *o, const bench_result *r, const provenance *prov,
                         wpk_session *s, const wpk_model *m) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    cJSON_AddStringToObject(j, "model", o->model);
    cJSON_AddBoolToObject(j, "plan", o->plan);
    cJSON_AddNumberToObject(j, "batch", (double)o->batch);
    cJSON_AddNumberToObject(j, "threads", r->threads_used);
    if (!o->plan) {
        cJSON_AddNumberToObject(j, "opt_level", o->opt_level);
        cJSON_AddStringToObject(j, "provider", o->provider ? o->provider : "auto");
        if (o->db) cJSON_AddStringToObject(j, "records", o->db);
        else cJSON_AddNullToObject(j, "records");
    }
    cJSON_AddNumberToObject(j, "iters", (double)o->iters);
    cJSON_AddNumberToObject(j, "warmup", (double)o->warmup);
    cJSON_AddNumberToObject(j, "first_run_ms", r->first_ms);
    cJSON *lat = cJSON_AddObjectToObject(j, "latency_ms");
    if (lat) {
        cJSON_AddNumberToObject(lat, "min", r->min);
        cJSON_AddNumberToObject(lat, "median", r->median);
        cJSON_AddNumberToObject(lat, "p90", r->p90);
        cJSON_AddNumberToObject(lat, "p99", r->p99);
        cJSON_AddNumberToObject(lat, "mean", r->mean);
    }
    cJSON_AddNumberToObject(j, "throughput", (double)o->batch * 1e3 / r->median);
    cJSON_AddItemToObject(j, "samples_ms", cJSON_CreateDoubleArray(r->samples, (int)o->iters));
    cJSON_AddNumberToObject(j, "profile_runs", r->profile_runs);
    double total = nodes_total(r);
    cJSON_AddNumberToObject(j, "nodes_ms", total);
    cJSON *nodes = cJSON_AddArrayToObject(j, "nodes");
    for (int i = 0; nodes && i < r->nnodes; i++) {
        const node_stat *n = &r->nodes[i];
        cJSON *e = cJSON_CreateObject();
        if (!e) break;
        cJSON_AddStringToObject(e, "node", n->node);
        cJSON_AddStringToObject(e, "op", n->op);
        cJSON_AddStringToObject(e, "provider", n->provider);
        cJSON_AddStringToObject(e, "impl", n->impl);
        cJSON_AddStringToObject(e, "source", n->source);
        cJSON_AddNumberToObject(e, "ms", n->ms);
        cJSON_AddNumberToObject(e, "share", total > 0 ? n->ms / total : 0);
        cJSON_AddItemToArray(nodes, e);
    }
    cJSON_AddItemToObject(j, "providers", groups_json(r, false));
    cJSON_AddItemToObject(j, "sources", groups_json(r, true));
    cJSON_AddItemToObject(j, "inputs", tensors_json(s, m, true, o));
    cJSON_AddItemToObject(j, "outputs", tensors_json(s, m, false, o));
    strbuf b = {0};
    provenance_json(prov, &b);
    cJSON *pj = b.s ? cJSON_Parse(b.s) : NULL;
    sb_free(&b);
    if (pj) {
        /* threads as a number, as at the top level */
        cJSON_ReplaceItemInObject(pj, "threads", cJSON_CreateNumber(r->threads_used));
        cJSON_AddItemToObject(j, "provenance", pj);
    }
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    return text;
}

/* The profiled runs as Chrome trace events on one track: each run a slice, its nodes laid
 * back to back inside it (the profile gives each node's duration, not its start, so gaps
 * between nodes are not shown). */
static wpk_status write_trace(wpk_context *ctx, const char *path, const bench_result *r) {
    cJSON *arr = cJSON_CreateArray();
    bool ok = arr != NULL;
    for (int k = 0; ok && k < r->profile_runs; k++) {
        double sum = 0;
        for (int i = 0; i < r->nnodes; i++) sum += *trace_at(r, k, i);
        double run_ms = r->run_ms[k] > sum ? r->run_ms[k] : sum;
        double ts = r->run_start_us[k];
        for (int i = -1; ok && i < r->nnodes; i++) {
            cJSON *e = cJSON_CreateObject();
            ok = e != NULL;
            if (!ok) break;
            char name[32];
            snprintf(name, sizeof name, "run %d", k + 1);
            double dur = i < 0 ? run_ms : *trace_at(r, k, i);
            cJSON_AddStringToObject(e, "name", i < 0 ? name : r->nodes[i].node);
            cJSON_AddStringToObject(e, "cat", i < 0 ? "run" : r->nodes[i].provider);
            cJSON_AddStringToObject(e, "ph", "X");
            cJSON_AddNumberToObject(e, "ts", ts);
            cJSON_AddNumberToObject(e, "dur", dur * 1e3);
            cJSON_AddNumberToObject(e, "pid", 1);
            cJSON_AddNumberToObject(e, "tid", 1);
            if (i >= 0) {
                cJSON *args = cJSON_AddObjectToObject(e, "args");
                if (args) {
                    cJSON_AddStringToObject(args, "op", r->nodes[i].op);
                    cJSON_AddStringToObject(args, "impl", r->nodes[i].impl);
                    cJSON_AddStringToObject(args, "source", r->nodes[i].source);
                }
                ts += dur * 1e3;
            }
            cJSON_AddItemToArray(arr, e);
        }
    }
    char *text = ok ? cJSON_PrintUnformatted(arr) : NULL;
    cJSON_Delete(arr);
    if (!text) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory writing the trace");
    FILE *f = fopen(path, "w");
    bool written = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0) written = false;
    free(text);
    if (!written)
        return wpk_error(ctx, WPK_ERR_IO, "--profile %s: cannot write the trace: %s", path,
                         strerror(errno));
    return WPK_OK;
}

/* ---- the command ---- */

static wpk_status open_session(wpk_context *ctx, const bench_opts *o, const wpk_model *m,
                               bool profile, wpk_session **out) {
    wpk_session_params p = wpk_session_default_params();
    p.backend = o->cuda ? WPK_BACKEND_CUDA : WPK_BACKEND_CPU;
    p.threads = (int)o->threads;
    p.opt_level = o->opt_level;
    p.records = o->db;
    p.provider = o->provider;
    p.precision = o->precision;
    p.profile = profile;
    return o->plan ? wpk_session_create_from_plan(ctx, o->model, &p, out)
                   : wpk_session_create(ctx, m, &p, out);
}

static void result_free(bench_result *r) {
    wpk_free(r->samples);
    wpk_free(r->nodes);
    wpk_free(r->trace_ms);
    wpk_free(r->run_start_us);
    wpk_free(r->run_ms);
}

int cmd_bench(int argc, char **argv) {
    bench_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (o.save && mkdir(o.save, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "wpk: error: --save %s: cannot create the directory: %s\n", o.save,
                strerror(errno));
        return 1;
    }
    wpk_context *ctx = wpk_context_create();
    if (!ctx) {
        fputs("wpk: error: out of memory\n", stderr);
        return 2;
    }
    wpk_context_set_log(ctx, log_stderr, NULL, WPK_LOG_WARN);
    bench_result r;
    memset(&r, 0, sizeof r);
    r.threads_used = o.threads > 0 ? (int)o.threads : target_cores();
    wpk_model *m = NULL;
    wpk_session *timed = NULL, *profiled = NULL;
    r.samples = wpk_calloc((size_t)o.iters, sizeof *r.samples);
    wpk_status st = r.samples ? WPK_OK : wpk_error(ctx, WPK_ERR_NOMEM, "out of memory");
    if (st == WPK_OK && !o.plan) st = wpk_model_load(ctx, o.model, &m);
    /* two sessions: the profiled one's per-node timing must not slow the timed runs */
    if (st == WPK_OK) st = open_session(ctx, &o, m, false, &timed);
    if (st == WPK_OK) st = open_session(ctx, &o, m, true, &profiled);
    if (st == WPK_OK) {
        wpk_session *both[2] = {timed, profiled};
        default_batch(timed, m, &o);
        st = bind_inputs(ctx, both, 2, m, &o);
    }
    if (st == WPK_OK) st = timed_runs(ctx, timed, &o, &r);
    if (st == WPK_OK && o.save) st = save_outputs(ctx, timed, m, o.save);
    if (st == WPK_OK) st = profiled_runs(ctx, profiled, &o, &r);
    if (st == WPK_OK && o.json_trace) st = write_trace(ctx, o.json_trace, &r);
    if (st == WPK_OK) {
        provenance prov;
        collect_provenance(&prov, r.threads_used, o.cuda);
        if (o.json) {
            char *text = report_json(&o, &r, &prov, timed, m);
            if (text) {
                puts(text);
                free(text);
            } else {
                st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory writing the JSON report");
            }
        } else {
            print_text(&o, &r, &prov);
        }
    }
    if (st) rc = fail_status(st, ctx);
    wpk_session_free(profiled);
    wpk_session_free(timed);
    wpk_model_free(m);
    result_free(&r);
    wpk_context_free(ctx);
    return rc;
}
