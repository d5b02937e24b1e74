/* wpk.c -- the command-line interface, a thin layer over include/wpk.h.
 * Exit codes: 0 ok, 1 user error (bad model, argument, input), 2 internal error. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/context.h"
#include "base/npy.h"
#include "wpk.h"

#define MAX_BINDINGS 64

static void usage(FILE *f) {
    fputs("usage: wpk <command> [options]\n"
          "\n"
          "commands:\n"
          "  info MODEL [--graph]          inputs/outputs, op histogram, parameters, FLOPs,\n"
          "                                unsupported ops; --graph prints the graph IR\n"
          "  run  MODEL [-i NAME=FILE.npy]... [-o OUTDIR] [--backend cpu|ref|cuda] [--threads N]\n"
          "             [--target cpu|cuda]\n"
          "             [--seed S] [--iters N] [-O LEVEL] [--db FILE] [--provider P] [-v]\n"
          "             [--precision fp32|bf16]\n"
          "  run  --plan MODEL.wpk [-i NAME=FILE.npy]... [-o OUTDIR] [--threads N] [--iters N]\n"
          "                                run the model; inputs not given get seeded random\n"
          "                                values; outputs go to OUTDIR/<name>.npy (default\n"
          "                                OUTDIR: wpk_out); --backend cpu (the default): per\n"
          "                                node the fastest kernel in the tuning records (--db,\n"
          "                                default: the cache's records.db; --db '' none) else\n"
          "                                the template's default, compiled on first use and\n"
          "                                cached; --provider auto|generated|ref|onednn|openblas\n"
          "                                forces one kind; ref: the reference kernels; --plan:\n"
          "                                a compiled plan (no C compiler needed); -v logs\n"
          "                                compile statistics\n"
          "  compile MODEL -o MODEL.wpk [--db FILE] [-O LEVEL] [--batch N] [--provider P]\n"
          "             [--threads N] [--strict] [--no-speed-check] [--target cpu|cuda]\n"
          "             [--precision fp32|bf16|tf32] [--precision-tolerance E]\n"
          "             [--fusion-search none|search|exhaustive|all]\n"
          "                                optimize (default -O3), specialize to batch N, choose\n"
          "                                every node's kernel from the records, build, pre-pack\n"
          "                                and plan memory into one file; prints per op how many\n"
          "                                nodes are tuned / default / library / reference;\n"
          "                                --strict fails naming the nodes without records;\n"
          "                                when records chose kernels, the plan is timed against\n"
          "                                the all-defaults one (and generated-only when it uses\n"
          "                                a library) and the fastest is written, said so\n"
          "                                --target cuda: for this machine's GPU (CUDA kernels\n"
          "                                from `wpk tune --target cuda`'s records, else their\n"
          "                                defaults), run where that GPU is;\n"
          "                                --precision bf16: convs on AVX-512 BF16 (bf16 weights,\n"
          "                                f32 accumulation), the error against fp32 printed;\n"
          "                                above E (1e-2) the leading convs stay fp32, up to\n"
          "                                10% of the bf16 work, named\n"
          "                                --fusion-search: choose which pad+conv, dw+pw and\n"
          "                                conv+pool groups fuse and each layer's threads, every\n"
          "                                plan timed in the model (search: a few profiled\n"
          "                                plans; exhaustive: all, small models); the plan\n"
          "                                keeps the choice\n"
          "  space MODEL [-O LEVEL]        the cpu backend's kernel tasks (graph optimized at\n"
          "                                LEVEL, default 3; symbolic dims at 1): workload key,\n"
          "                                template, nodes, FLOPs share, knobs, space size\n"
          "  lower MODEL --node NAME [--config K=V,...] [-O LEVEL]\n"
          "                                the tensor expressions, schedule and loops of one\n"
          "                                node's kernel (default config; --config overrides)\n"
          "  optimize MODEL [-o OUT.onnx] [-O LEVEL] [--dump PASS|all] [--passes A,B] [-v]\n"
          "                                graph passes only; writes a valid ONNX model and\n"
          "                                prints a before/after summary (levels 0-3, default 3)\n"
          "  tune MODEL [--strategy S] [--trials N | --time T] [--db FILE] [--parallel auto|N]\n"
          "                                tune the model's kernels on this machine into the\n"
          "                                records database ('wpk tune --help': every option)\n"
          "  bench MODEL|MODEL.wpk [--batch N] [--threads N] [--iters N] [--json] [--profile F]\n"
          "                                latency (min/median/p90/p99) and throughput, then\n"
          "                                the per-node table: provider, source, time, share\n"
          "                                ('wpk bench --help': every option)\n"
          "  serve MODEL|MODEL.wpk [--port N] [--max-batch B] [--max-delay-us T] [--threads N]\n"
          "                                KServe v2 HTTP inference server with dynamic batching\n"
          "                                ('wpk serve --help': every option)\n"
          "  version                       print the version\n",
          f);
}

static int fail(wpk_status st, const char *msg) {
    fprintf(stderr, "wpk: error: %s\n", msg && *msg ? msg : wpk_status_name(st));
    return (st == WPK_ERR_NOMEM || st == WPK_ERR_INTERNAL) ? 2 : 1;
}

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "wpk: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(run 'wpk help' for usage)\n");
    return 1;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

static void log_stderr(void *user, wpk_log_level level, const char *msg) {
    (void)user;
    fprintf(stderr, "%s%s\n", level <= WPK_LOG_WARN ? "wpk: warning: " : "", msg);
}

/* Op type -> count, for before/after summaries. */
typedef struct op_count {
    char op[64];
    int before, after;
} op_count;

static int count_ops(const wpk_model *m, op_count *counts, int n, int max, int after) {
    char *text = wpk_model_describe(m);
    /* the describe report ends with the op histogram: "  OpType   count" lines after "ops:" */
    char *p = text ? strstr(text, "\nops:\n") : NULL;
    for (p = p ? p + 6 : NULL; p && *p;) {
        char op[64];
        int c;
        if (sscanf(p, " %63s %d", op, &c) == 2) {
            int k = 0;
            while (k < n && strcmp(counts[k].op, op) != 0) k++;
            if (k == n && n < max) {
                memset(&counts[n], 0, sizeof counts[n]);
                snprintf(counts[n].op, sizeof counts[n].op, "%s", op);
                n++;
            }
            if (k < n) *(after ? &counts[k].after : &counts[k].before) = c;
        }
        p = strchr(p, '\n');
        if (p) p++;
    }
    free(text);
    return n;
}

static int parse_level(const char *val, int *level) {
    long v;
    if (!val || !parse_int(val, 0, 3, &v)) return 0;
    *level = (int)v;
    return 1;
}

static int cmd_optimize(int argc, char **argv) {
    const char *path = NULL, *out = NULL;
    wpk_optimize_params p = wpk_optimize_default_params();
    int verbose = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-o") == 0 && val) out = argv[++i];
        else if (strncmp(a, "-O", 2) == 0 && a[2] && parse_level(a + 2, &p.level)) continue;
        else if (strcmp(a, "-O") == 0 && parse_level(val, &p.level)) i++;
        else if (strcmp(a, "--dump") == 0 && val) p.dump = argv[++i];
        else if (strcmp(a, "--passes") == 0 && val) p.passes = argv[++i];
        else if (strcmp(a, "-v") == 0) verbose = 1;
        else if (a[0] == '-') return usage_error("bad option '%s' for 'optimize' (levels: -O0 to -O3)", a);
        else if (!path) path = a;
        else return usage_error("unexpected argument '%s'", a);
    }
    if (!path) return usage_error("%s", "usage: wpk optimize MODEL [-o OUT.onnx]");
    wpk_context *ctx = wpk_context_create();
    if (!ctx) return fail(WPK_ERR_NOMEM, "out of memory");
    if (verbose || p.dump) wpk_context_set_log(ctx, log_stderr, NULL, WPK_LOG_INFO);
    wpk_model *m = NULL;
    op_count counts[256];
    int n = 0, before = 0, rc = 0;
    wpk_status st = wpk_model_load(ctx, path, &m);
    if (st == WPK_OK) {
        before = wpk_model_num_nodes(m);
        n = count_ops(m, counts, 0, 256, 0);
        st = wpk_model_optimize(ctx, m, &p);
    }
    if (st == WPK_OK && out) st = wpk_model_save(ctx, m, out); /* no -o: report only */
    if (st == WPK_OK) {
        n = count_ops(m, counts, n, 256, 1);
        printf("%s -> %s (-O%d): %d nodes -> %d\n", path, out ? out : "(not written)", p.level,
               before, wpk_model_num_nodes(m));
        printf("  %-28s %7s %7s\n", "op", "before", "after");
        for (int k = 0; k < n; k++)
            if (counts[k].before != counts[k].after || verbose)
                printf("  %-28s %7d %7d\n", counts[k].op, counts[k].before, counts[k].after);
    } else {
        rc = fail(st, wpk_context_error(ctx));
    }
    wpk_model_free(m);
    wpk_context_free(ctx);
    return rc;
}

/* The plan lines of `info`: node count, activation memory and the nodes left to reference
 * kernels by the cpu backend, after default optimization. */
static int print_plan(wpk_context *ctx, wpk_model *m) {
    wpk_optimize_params p = wpk_optimize_default_params();
    int before = wpk_model_num_nodes(m);
    wpk_memory_stats mem;
    char *ref = NULL;
    wpk_status st = wpk_model_optimize(ctx, m, &p);
    if (st == WPK_OK) st = wpk_model_memory_stats(ctx, m, &mem);
    if (st == WPK_OK) st = wpk_model_reference_kernels(ctx, m, &ref);
    if (st) return fail(st, wpk_context_error(ctx));
    printf("nodes: %d, after optimization (-O%d): %d\n", before, p.level, wpk_model_num_nodes(m));
    printf("peak activation memory: %zu bytes (unplanned: %zu bytes)\n", mem.planned_bytes,
           mem.unplanned_bytes);
    printf("%s\n", ref);
    free(ref);
    return 0;
}

/* `space` and `lower`: the model optimized at -O LEVEL, then the cpu backend's view of it. */
static int cmd_kernels(int argc, char **argv, bool lower) {
    const char *path = NULL, *node = NULL, *config = NULL;
    wpk_optimize_params p = wpk_optimize_default_params();
    const char *cmd = lower ? "lower" : "space";
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strncmp(a, "-O", 2) == 0 && a[2] && parse_level(a + 2, &p.level)) continue;
        else if (strcmp(a, "-O") == 0 && parse_level(val, &p.level)) i++;
        else if (lower && strcmp(a, "--node") == 0 && val) node = argv[++i];
        else if (lower && strcmp(a, "--config") == 0 && val) config = argv[++i];
        else if (a[0] == '-') {
            fprintf(stderr, "wpk: error: bad option '%s' for '%s'\n(run 'wpk help' for usage)\n",
                    a, cmd);
            return 1;
        } else if (!path) path = a;
        else return usage_error("unexpected argument '%s'", a);
    }
    if (!path) return usage_error("'%s' needs a model file", cmd);
    if (lower && !node) return usage_error("%s", "'lower' needs --node NAME");
    wpk_context *ctx = wpk_context_create();
    if (!ctx) return fail(WPK_ERR_NOMEM, "out of memory");
    wpk_model *m = NULL;
    char *text = NULL;
    wpk_status st = wpk_model_load(ctx, path, &m);
    if (st == WPK_OK) st = wpk_model_check_supported(ctx, m);
    if (st == WPK_OK) st = wpk_model_optimize(ctx, m, &p);
    if (st == WPK_OK)
        st = lower ? wpk_model_lower(ctx, m, node, config, &text) : wpk_model_space(ctx, m, &text);
    int rc = 0;
    if (st == WPK_OK) {
        if (!lower) printf("%s (-O%d, symbolic dims at 1)\n", path, p.level);
        fputs(text, stdout);
    } else {
        rc = fail(st, wpk_context_error(ctx));
    }
    free(text);
    wpk_model_free(m);
    wpk_context_free(ctx);
    return rc;
}

static int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    int graph = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--graph") == 0) graph = 1;
        else if (argv[i][0] == '-') return usage_error("unknown option '%s' for 'info'", argv[i]);
        else if (!path) path = argv[i];
        else return usage_error("unexpected argument '%s'", argv[i]);
    }
    if (!path) return usage_error("%s", "'info' needs a model file");
    wpk_context *ctx = wpk_context_create();
    if (!ctx) return fail(WPK_ERR_NOMEM, "out of memory");
    wpk_model *m = NULL;
    wpk_status st = wpk_model_load(ctx, path, &m);
    int rc = 0;
    if (st) {
        rc = fail(st, wpk_context_error(ctx));
    } else {
        char *text = wpk_model_describe(m);
        if (text) fputs(text, stdout);
        free(text);
        if (graph) {
            char *g = wpk_model_print(m);
            if (g) fputs(g, stdout);
            free(g);
        }
        st = wpk_model_check_supported(ctx, m);
        if (st) rc = fail(st, wpk_context_error(ctx));
        else rc = print_plan(ctx, m);
    }
    wpk_model_free(m);
    wpk_context_free(ctx);
    return rc;
}

/* xorshift64*: a seeded generator that gives the same inputs on every machine */
static uint64_t rng_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

static void fill_random(wpk_dtype dtype, void *data, int64_t n, uint64_t *rng) {
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = rng_next(rng);
        double u = (double)(r >> 11) / 9007199254740992.0; /* [0, 1) */
        switch (dtype) {
        case WPK_DTYPE_FLOAT32: ((float *)data)[i] = (float)(2 * u - 1); break;
        case WPK_DTYPE_FLOAT64: ((double *)data)[i] = 2 * u - 1; break;
        case WPK_DTYPE_INT32: ((int32_t *)data)[i] = (int32_t)(r % 10); break;
        case WPK_DTYPE_INT64: ((int64_t *)data)[i] = (int64_t)(r % 10); break;
        default: ((uint8_t *)data)[i] = (uint8_t)(r & 1); break;
        }
    }
}

/* Output names become file names: keep [A-Za-z0-9._-], replace the rest with '_'. */
static void safe_name(const char *name, char *out, size_t size) {
    size_t j = 0;
    for (size_t i = 0; name[i] && j + 1 < size; i++) {
        char c = name[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        out[j++] = ok ? c : '_';
    }
    out[j] = 0;
    if (j == 0 || strcmp(out, ".") == 0 || strcmp(out, "..") == 0) snprintf(out, size, "output");
}

static void print_shape(const wpk_tensor_view *t) {
    printf("[");
    for (int i = 0; i < t->ndim; i++) printf(i ? ", %lld" : "%lld", (long long)t->dims[i]);
    printf("] %s", wpk_dtype_name(t->dtype));
}

typedef struct run_opts {
    const char *model, *outdir, *plan;
    const char *names[MAX_BINDINGS], *files[MAX_BINDINGS];
    int nbind;
    wpk_session_params params;
    uint64_t seed;
    long iters;
    int verbose;
} run_opts;

static int parse_run(int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->outdir = "wpk_out";
    o->params = wpk_session_default_params();
    /* generated kernels unless --backend ref (the library's default stays the reference
       backend until its fault-injection test tolerates the compiler probe cg_c memoizes) */
    o->params.backend = WPK_BACKEND_CPU;
    o->seed = 1;
    o->iters = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        long v;
        if (strcmp(a, "-i") == 0 || strcmp(a, "--input") == 0) {
            if (!val) return usage_error("%s needs NAME=FILE.npy", a);
            const char *eq = strchr(val, '=');
            if (!eq || eq == val || !eq[1])
                return usage_error("bad input binding '%s': expected NAME=FILE.npy", val);
            if (o->nbind == MAX_BINDINGS) return usage_error("more than %s inputs", "64");
            char *name = wpk_strdup(val);
            if (!name) return fail(WPK_ERR_NOMEM, "out of memory");
            name[eq - val] = 0;
            o->names[o->nbind] = name;
            o->files[o->nbind++] = eq + 1;
            i++;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output-dir") == 0) {
            if (!val) return usage_error("%s needs a directory", a);
            o->outdir = val;
            i++;
        } else if (strcmp(a, "--backend") == 0) {
            if (!val) return usage_error("%s needs a name", a);
            if (strcmp(val, "ref") == 0) o->params.backend = WPK_BACKEND_REF;
            else if (strcmp(val, "cpu") == 0) o->params.backend = WPK_BACKEND_CPU;
            else if (strcmp(val, "cuda") == 0) o->params.backend = WPK_BACKEND_CUDA;
            else return usage_error("unknown backend '%s' (available: cpu, ref, cuda)", val);
            i++;
        } else if (strcmp(a, "--target") == 0) {
            if (!val || (strcmp(val, "cpu") && strcmp(val, "cuda")))
                return usage_error("--target needs cpu or cuda, not '%s'", val ? val : "");
            o->params.backend = strcmp(val, "cpu") ? WPK_BACKEND_CUDA : WPK_BACKEND_CPU;
            i++;
        } else if (strcmp(a, "--threads") == 0) {
            if (!val || !parse_int(val, 0, 4096, &v))
                return usage_error("--threads needs a number from 0 to 4096, not '%s'",
                                   val ? val : "");
            o->params.threads = (int)v;
            i++;
        } else if (strncmp(a, "-O", 2) == 0) {
            const char *lv = a[2] ? a + 2 : val;
            if (!parse_level(lv, &o->params.opt_level))
                return usage_error("%s needs an optimization level from 0 to 3", a);
            if (!a[2]) i++;
        } else if (strcmp(a, "--seed") == 0) {
            if (!val || !parse_int(val, 0, 2147483647, &v))
                return usage_error("--seed needs a non-negative number, not '%s'", val ? val : "");
            o->seed = (uint64_t)v;
            i++;
        } else if (strcmp(a, "-v") == 0) {
            o->verbose = 1;
        } else if (strcmp(a, "--plan") == 0) {
            if (!val) return usage_error("%s needs a compiled plan (.wpk)", a);
            o->plan = val;
            i++;
        } else if (strcmp(a, "--db") == 0 || strcmp(a, "--records") == 0) {
            if (!val) return usage_error("%s needs a records database file ('' for none)", a);
            o->params.records = val;
            i++;
        } else if (strcmp(a, "--provider") == 0) {
            if (!val) return usage_error("%s needs auto, generated, ref, onednn or openblas", a);
            o->params.provider = val;
            i++;
        } else if (strcmp(a, "--precision") == 0) {
            if (!val) return usage_error("%s needs fp32, bf16 or tf32", a);
            o->params.precision = val;
            i++;
        } else if (strcmp(a, "--iters") == 0) {
            if (!val || !parse_int(val, 1, 1000000, &v))
                return usage_error("--iters needs a positive number, not '%s'", val ? val : "");
            o->iters = v;
            i++;
        } else if (a[0] == '-') {
            return usage_error("unknown option '%s' for 'run'", a);
        } else if (!o->model) {
            o->model = a;
        } else {
            return usage_error("unexpected argument '%s'", a);
        }
    }
    if (!o->model && !o->plan) return usage_error("%s", "'run' needs a model file or --plan FILE");
    if (o->model && o->plan)
        return usage_error("'run --plan' takes no model file (the plan has its graph): '%s'",
                           o->model);
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Bind every graph input: from its -i file, or seeded random values. */
static wpk_status bind_inputs(wpk_context *ctx, wpk_session *s, const run_opts *o) {
    for (int b = 0; b < o->nbind; b++) {
        int found = 0;
        for (int i = 0; i < wpk_session_num_inputs(s); i++)
            found |= strcmp(wpk_session_input_info(s, i).name, o->names[b]) == 0;
        if (!found) {
            char names[1024] = "";
            for (int i = 0; i < wpk_session_num_inputs(s); i++) {
                size_t l = strlen(names);
                snprintf(names + l, sizeof names - l, "%s'%s'", i ? ", " : "",
                         wpk_session_input_info(s, i).name);
            }
            return wpk_error(ctx, WPK_ERR_INVALID_ARG, "-i %s=%s: the model has no input named "
                             "'%s' (its inputs are: %s)", o->names[b], o->files[b], o->names[b],
                             names);
        }
        npy_array a;
        wpk_status st = npy_read(ctx, o->files[b], &a);
        if (st) return st;
        st = wpk_session_set_input(s, o->names[b], a.dtype, a.dims, a.ndim, a.data);
        npy_free(&a);
        if (st) return st;
    }
    uint64_t rng = o->seed * 0x9E3779B97F4A7C15ULL + 0x2545F4914F6CDD1DULL;
    for (int i = 0; i < wpk_session_num_inputs(s); i++) {
        wpk_tensor_view in = wpk_session_input_info(s, i);
        int given = 0;
        for (int b = 0; b < o->nbind; b++) given |= strcmp(in.name, o->names[b]) == 0;
        if (given) continue;
        int64_t n = 1;
        for (int d = 0; d < in.ndim; d++) {
            if (in.dims[d] < 0) in.dims[d] = 1; /* symbolic dims run at 1 unless given (a plan's
                                                   session gives the dims it was compiled for) */
            n *= in.dims[d];
        }
        void *data = wpk_malloc((size_t)n * wpk_dtype_size(in.dtype) + 1);
        if (!data) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory for input '%s'", in.name);
        fill_random(in.dtype, data, n, &rng);
        wpk_status st = wpk_session_set_input(s, in.name, in.dtype, in.dims, in.ndim, data);
        wpk_free(data);
        if (st) return st;
    }
    return WPK_OK;
}

static wpk_status write_outputs(wpk_context *ctx, wpk_session *s, const char *outdir) {
    if (mkdir(outdir, 0777) != 0 && errno != EEXIST)
        return wpk_error(ctx, WPK_ERR_IO, "%s: cannot create the output directory: %s", outdir,
                         strerror(errno));
    for (int i = 0; i < wpk_session_num_outputs(s); i++) {
        wpk_tensor_view t;
        wpk_status st = wpk_session_output(s, i, &t);
        if (st) return st;
        char name[256], path[4096];
        safe_name(t.name, name, sizeof name);
        snprintf(path, sizeof path, "%s/%s.npy", outdir, name);
        st = npy_write(ctx, path, t.dtype, t.ndim, t.dims, t.data);
        if (st) return st;
        printf("output %s: ", t.name);
        print_shape(&t);
        printf(" -> %s\n", path);
    }
    return WPK_OK;
}

static int cmd_run(int argc, char **argv) {
    run_opts o;
    int rc = parse_run(argc, argv, &o);
    if (rc) return rc;
    wpk_context *ctx = wpk_context_create();
    if (!ctx) return fail(WPK_ERR_NOMEM, "out of memory");
    /* warnings always (a kernel left to its reference kernel); everything with -v or a dump
       asked for ($WPK_DUMP=lower: the loops of every kernel compiled) */
    const char *dump = getenv("WPK_DUMP");
    wpk_context_set_log(ctx, log_stderr, NULL,
                        o.verbose || (dump && *dump) ? WPK_LOG_INFO : WPK_LOG_WARN);
    wpk_model *m = NULL;
    wpk_session *s = NULL;
    double *times = wpk_calloc((size_t)o.iters, sizeof(double));
    wpk_status st = times ? WPK_OK : WPK_ERR_NOMEM;
    if (st == WPK_OK && o.plan) {
        st = wpk_session_create_from_plan(ctx, o.plan, &o.params, &s);
    } else if (st == WPK_OK) {
        st = wpk_model_load(ctx, o.model, &m);
        if (st == WPK_OK) st = wpk_session_create(ctx, m, &o.params, &s);
    }
    if (st == WPK_OK) st = bind_inputs(ctx, s, &o);
    for (long it = 0; st == WPK_OK && it < o.iters; it++) {
        double t0 = now_ms();
        st = wpk_session_run(s);
        times[it] = now_ms() - t0;
    }
    if (st == WPK_OK) st = write_outputs(ctx, s, o.outdir);
    if (st == WPK_OK) {
        qsort(times, (size_t)o.iters, sizeof(double), cmp_double);
        if (o.iters == 1)
            printf("latency: %.3f ms\n", times[0]);
        else
            printf("latency: median %.3f ms, min %.3f ms over %ld runs\n", times[o.iters / 2],
                   times[0], o.iters);
    } else {
        rc = fail(st, wpk_context_error(ctx));
    }
    wpk_session_free(s);
    wpk_model_free(m);
    wpk_context_free(ctx);
    wpk_free(times);
    for (int b = 0; b < o.nbind; b++) wpk_free((void *)o.names[b]);
    return rc;
}

/* Per op type: how many nodes run what, for compile's summary. */
typedef struct kind_count {
    char op[64];
    int nodes, tuned, def, library, reference;
} kind_count;

/* Summarize a plan: load it (which checks it), run it once on zeros with profiling, and count
 * per op type where each node's kernel came from. Returns the node count, -1 on failure. */
static int summarize_plan(wpk_context *ctx, const char *path, int threads, kind_count *kinds,
                          int max, int *nkinds, wpk_status *st) {
    wpk_session_params sp = wpk_session_default_params();
    sp.threads = threads;
    sp.profile = 1;
    wpk_session *s = NULL;
    *st = wpk_session_create_from_plan(ctx, path, &sp, &s);
    for (int i = 0; *st == WPK_OK && i < wpk_session_num_inputs(s); i++) {
        wpk_tensor_view in = wpk_session_input_info(s, i);
        int64_t n = 1;
        for (int d = 0; d < in.ndim; d++) n *= in.dims[d];
        void *zeros = wpk_calloc((size_t)n * wpk_dtype_size(in.dtype) + 1, 1);
        *st = zeros ? wpk_session_set_input(s, in.name, in.dtype, in.dims, in.ndim, zeros)
                    : WPK_ERR_NOMEM;
        wpk_free(zeros);
    }
    if (*st == WPK_OK) *st = wpk_session_run(s);
    const wpk_node_profile *prof = NULL;
    int n = 0;
    if (*st == WPK_OK) *st = wpk_session_profile(s, &prof, &n);
    *nkinds = 0;
    for (int k = 0; *st == WPK_OK && k < n; k++) {
        int j = 0;
        while (j < *nkinds && strcmp(kinds[j].op, prof[k].op)) j++;
        if (j == *nkinds) {
            if (*nkinds == max) j = max - 1; /* the last row collects the rest */
            else {
                memset(&kinds[j], 0, sizeof kinds[j]);
                snprintf(kinds[j].op, sizeof kinds[j].op, "%s", prof[k].op);
                (*nkinds)++;
            }
        }
        kind_count *c = &kinds[j];
        c->nodes++;
        if (!strcmp(prof[k].source, "reference")) c->reference++;
        /* a CUDA plan's steps (kernels, device copies) are generated too */
        else if (strcmp(prof[k].provider, "generated") && strncmp(prof[k].provider, "cuda_", 5))
            c->library++;
        else if (!strncmp(prof[k].source, "tuned", 5)) c->tuned++; /* or tuned-b1 */
        else c->def++;
    }
    wpk_session_free(s);
    return *st == WPK_OK ? n : -1;
}

/* The compile step's speed check: each plan timed in the model, and the one written. */
static void print_speed_check(const wpk_compile_report *r) {
    if (r->nplans < 2) return;
    printf("speed check (median ms in the model, alternating rounds):");
    for (int i = 0; i < r->nplans; i++)
        printf(" %s %.3f%s", r->plans[i].name, r->plans[i].median_ms,
               i == r->kept ? " (kept)" : "");
    const double chosen = r->plans[0].median_ms, kept = r->plans[r->kept].median_ms;
    if (r->kept) printf("\n  the chosen kernels were %.2fx slower together than the %s plan: "
                        "wrote the %s plan\n", chosen / kept, r->plans[r->kept].name,
                        r->plans[r->kept].name);
    else printf("\n");
}

static int cmd_compile(int argc, char **argv) {
    const char *path = NULL, *out = NULL;
    wpk_compile_params p = wpk_compile_default_params();
    wpk_compile_report report;
    wpk_fusion_report fusion;
    p.report = &report;
    p.fusion_report = &fusion;
    int verbose = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        long v;
        if (strcmp(a, "-o") == 0) {
            if (!val) return usage_error("%s needs the plan file to write", a);
            out = argv[++i];
        } else if (strncmp(a, "-O", 2) == 0) {
            const char *lv = a[2] ? a + 2 : val;
            if (!parse_level(lv, &p.opt_level))
                return usage_error("%s needs an optimization level from 0 to 3", a);
            if (!a[2]) i++;
        } else if (strcmp(a, "--db") == 0 || strcmp(a, "--records") == 0) {
            if (!val) return usage_error("%s needs a records database file ('' for none)", a);
            p.records = argv[++i];
        } else if (strcmp(a, "--batch") == 0) {
            if (!val || !parse_int(val, 1, 1 << 20, &v))
                return usage_error("--batch needs a positive number, not '%s'", val ? val : "");
            p.batch = (int)v;
            i++;
        } else if (strcmp(a, "--threads") == 0) {
            if (!val || !parse_int(val, 0, 4096, &v))
                return usage_error("--threads needs a number from 0 to 4096, not '%s'",
                                   val ? val : "");
            p.threads = (int)v;
            i++;
        } else if (strcmp(a, "--provider") == 0) {
            if (!val) return usage_error("%s needs auto, generated, ref, onednn or openblas", a);
            p.provider = argv[++i];
        } else if (strcmp(a, "--precision") == 0) {
            if (!val) return usage_error("%s needs fp32, bf16 or tf32", a);
            p.precision = argv[++i];
        } else if (strcmp(a, "--precision-tolerance") == 0) {
            char *end = NULL;
            double tol = val ? strtod(val, &end) : -1;
            if (!val || end == val || *end || !(tol >= 0 && tol <= 1))
                return usage_error("--precision-tolerance needs a relative error from 0 to 1 "
                                   "(0: keep every conv bf16), not '%s'", val ? val : "");
            p.precision_tolerance = tol;
            i++;
        } else if (strcmp(a, "--strict") == 0) {
            p.strict = 1;
        } else if (strcmp(a, "--no-speed-check") == 0) {
            p.check_speed = 0;
        } else if (strcmp(a, "--fusion-search") == 0) {
            static const char *const modes[] = {"none", "search", "exhaustive", "all"};
            int mode = -1;
            for (int k = 0; val && k < 4; k++)
                if (strcmp(val, modes[k]) == 0) mode = k;
            if (mode < 0)
                return usage_error("--fusion-search needs none, search, exhaustive or all, not "
                                   "'%s'", val ? val : "");
            p.fusion_search = mode;
            i++;
        } else if (strcmp(a, "--target") == 0) {
            if (!val || (strcmp(val, "cpu") && strcmp(val, "cuda")))
                return usage_error("--target needs cpu or cuda, not '%s'", val ? val : "");
            p.target = strcmp(val, "cpu") ? WPK_BACKEND_CUDA : WPK_BACKEND_CPU;
            i++;
        } else if (strcmp(a, "-v") == 0) {
            verbose = 1;
        } else if (a[0] == '-') {
            return usage_error("unknown option '%s' for 'compile'", a);
        } else if (!path) {
            path = a;
        } else {
            return usage_error("unexpected argument '%s'", a);
        }
    }
    if (!path) return usage_error("%s", "'compile' needs a model file");
    if (!out) return usage_error("%s", "'compile' needs -o MODEL.wpk");
    wpk_context *ctx = wpk_context_create();
    if (!ctx) return fail(WPK_ERR_NOMEM, "out of memory");
    wpk_context_set_log(ctx, log_stderr, NULL, verbose ? WPK_LOG_INFO : WPK_LOG_WARN);
    wpk_model *m = NULL;
    double t0 = now_ms();
    wpk_status st = wpk_model_load(ctx, path, &m);
    if (st == WPK_OK) st = wpk_compile(ctx, m, &p, out);
    double t1 = now_ms();
    int rc = 0;
    kind_count kinds[64];
    int nkinds = 0, nodes = -1;
    if (st == WPK_OK) nodes = summarize_plan(ctx, out, p.threads, kinds, 64, &nkinds, &st);
    if (st == WPK_OK) {
        struct stat sb;
        long long bytes = stat(out, &sb) == 0 ? (long long)sb.st_size : -1;
        int tot[4] = {0};
        for (int k = 0; k < nkinds; k++) {
            tot[0] += kinds[k].tuned;
            tot[1] += kinds[k].def;
            tot[2] += kinds[k].library;
            tot[3] += kinds[k].reference;
        }
        printf("%s -> %s (-O%d, batch %d): %d nodes, %lld bytes, compiled in %.0f ms\n", path,
               out, p.opt_level, p.batch, nodes, bytes, t1 - t0);
        printf("  %-28s %6s %6s %8s %8s %10s\n", "op", "nodes", "tuned", "default", "library",
               "reference");
        for (int k = 0; k < nkinds; k++)
            printf("  %-28s %6d %6d %8d %8d %10d\n", kinds[k].op, kinds[k].nodes, kinds[k].tuned,
                   kinds[k].def, kinds[k].library, kinds[k].reference);
        printf("  %-28s %6d %6d %8d %8d %10d\n", "total", nodes, tot[0], tot[1], tot[2], tot[3]);
        print_speed_check(&report);
        if (report.precision_rel_l2 >= 0)
            printf("precision %s: relative L2 error against fp32 %.3g (output 0, seeded random "
                   "inputs)\n", p.precision, report.precision_rel_l2);
        if (report.precision_rel_l2 >= 0)
            printf("precision %s: %d conv(s) kept fp32 (%.1f%% of the bf16 convs' multiply-adds, "
                   "tolerance %g)%s%s\n", p.precision, report.precision_fp32_convs,
                   100 * report.precision_fp32_share, p.precision_tolerance,
                   report.precision_fp32_convs ? ": " : "", report.precision_fp32_names);
        if (p.fusion_search != WPK_FUSION_NONE)
            printf("fusion search: %d groups, %d layers: fused %d, %d layers on fewer threads; "
                   "%d plans timed in %.0f ms; %.3f ms in the search (unfused %.3f ms)\n",
                   fusion.groups, fusion.layers, fusion.fused, fusion.reduced,
                   fusion.evaluations, fusion.search_ms, fusion.best_ms, fusion.base_ms);
    } else {
        rc = fail(st, wpk_context_error(ctx));
    }
    wpk_model_free(m);
    wpk_context_free(ctx);
    return rc;
}

int cmd_tune(int argc, char **argv); /* tools/cmd_tune.c: argv as main's */
int cmd_bench(int argc, char **argv); /* tools/cmd_bench.c: argv as main's */
int cmd_serve(int argc, char **argv); /* tools/cmd_serve.c: argv as main's */

/* The OpenMP runtime's idle workers: libgomp reads its wait policy once, when it is loaded --
 * before main. Its default spins 300,000 rounds (about 9 ms of CPU here) after each parallel
 * region; on a machine shared with other work a spinning worker takes the core its partner
 * needs (a ResNet-like plan, 2 threads, load ~15: 1.1-1.4 ms per run passive against 2.5-48 ms
 * spinning). Fully passive workers cost a futex wake-up per parallel region instead, and a
 * model runs dozens of them: MobileNetV2 at batch 1 on 2 threads, 13.0 ms passive against
 * 8.8 ms with 10,000 rounds (about 0.5 ms of CPU, then sleep), the same as 1,000 or 100,000.
 * So `run`, `compile` and `bench` start again with GOMP_SPINCOUNT=10000 -- a short spin that
 * bridges the gap between kernels, then sleep -- unless the user chose a policy
 * (OMP_WAIT_POLICY or GOMP_SPINCOUNT set). */
static void bounded_spin_openmp(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    if (setenv("GOMP_SPINCOUNT", "10000", 1) != 0) return;
    execv("/proc/self/exe", argv);
    unsetenv("GOMP_SPINCOUNT"); /* no re-exec possible: the default policy it is */
}

int main(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "run") || !strcmp(argv[1], "compile") ||
                      !strcmp(argv[1], "bench") || !strcmp(argv[1], "serve")))
        bounded_spin_openmp(argv);
    if (argc < 2) {
        usage(stderr);
        return 1;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "info") == 0) return cmd_info(argc - 2, argv + 2);
    if (strcmp(cmd, "run") == 0) return cmd_run(argc - 2, argv + 2);
    if (strcmp(cmd, "optimize") == 0) return cmd_optimize(argc - 2, argv + 2);
    if (strcmp(cmd, "space") == 0) return cmd_kernels(argc - 2, argv + 2, false);
    if (strcmp(cmd, "lower") == 0) return cmd_kernels(argc - 2, argv + 2, true);
    if (strcmp(cmd, "tune") == 0) return cmd_tune(argc, argv);
    if (strcmp(cmd, "bench") == 0) return cmd_bench(argc, argv);
    if (strcmp(cmd, "serve") == 0) return cmd_serve(argc, argv);
    if (strcmp(cmd, "compile") == 0) return cmd_compile(argc - 2, argv + 2);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("wpk %s\n", wpk_version());
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    return usage_error("unknown command '%s'", cmd);
}
