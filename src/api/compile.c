/* compile.c -- wpk_compile: a model optimized, specialized to a batch, its kernels chosen from
 * the records, built, pre-packed and memory-planned, written as one .wpk artifact holding a
 * runtime plan (compile/plan_io.h for the cpu, compile/cuda_program.h for a CUDA GPU) under
 * its target's fingerprint, which libwpk_runtime runs without this compiler. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/fusion_plan.h"
#include "api/model.h"
#include "api/precision.h"
#include "api/session.h"
#include "base/alloc.h"
#include "base/strbuf.h"
#include "base/target.h"
#include "compile/choice.h"
#include "compile/cuda_choice.h"
#include "compile/cuda_program.h"
#include "compile/plan_io.h"
#include "onnx/onnx_export.h"
#include "passes/pass.h"
#include "base/target_fingerprint.h"
#include "runtime/cuda/cuda_rt.h"

#define MAX_LISTED 8
/* The speed check: about this much time spent running the candidate plans, in alternating
 * rounds (so a slow spell of the machine hits every candidate), within these run counts. */
#define CHECK_BUDGET_MS 2000.0
#define CHECK_MIN_RUNS 7
#define CHECK_MAX_RUNS 101
/* Another plan replaces the chosen one only when faster by more than this (the noise). */
#define CHECK_MARGIN 0.01

wpk_compile_params wpk_compile_default_params(void) {
    wpk_compile_params p;
    memset(&p, 0, sizeof p);
    p.opt_level = wpk_optimize_default_params().level;
    p.batch = 1;
    p.target = WPK_BACKEND_CPU;
    p.check_speed = 1;
    p.precision_tolerance = 1e-2;
    return p;
}

/* The ONNX bytes of g: written beside the plan (the exporter writes files), read back. */
static wpk_status graph_bytes(wpk_context *ctx, const ir_graph *g, const char *path,
                              uint8_t **out, size_t *len) {
    *out = NULL;
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.%ld.graph.tmp", path, (long)getpid()) >= (int)sizeof tmp)
        return wpk_error(ctx, WPK_ERR_IO, "%s: path too long", path);
    wpk_status st = onnx_export_file(ctx, g, tmp);
    if (st) return st;
    FILE *f = fopen(tmp, "rb");
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    uint8_t *buf = n >= 0 ? wpk_malloc((size_t)n + 1) : NULL;
    bool ok = buf && fseek(f, 0, SEEK_SET) == 0 && fread(buf, 1, (size_t)n, f) == (size_t)n;
    if (f) fclose(f);
    unlink(tmp);
    if (!ok) {
        wpk_free(buf);
        return wpk_error(ctx, n >= 0 && !buf ? WPK_ERR_NOMEM : WPK_ERR_IO,
                         "%s: cannot read back the plan's graph", tmp);
    }
    *out = buf;
    *len = (size_t)n;
    return WPK_OK;
}

/* The model's graph optimized at level, as a session (on the CUDA backend with cuda) optimizes
 * its copy. */
static wpk_status optimized(wpk_context *ctx, const wpk_model *model, int level, bool cuda,
                            ir_graph **out) {
    *out = ir_graph_clone(model->g);
    if (!*out) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory compiling the model");
    pass_options opt = pass_default_options();
    opt.level = level;
    /* the blocked layout (NCHWc) is the CPU kernels'; the CUDA templates read NCHW */
    opt.vector_floats = cuda ? 0 : target_vector_floats();
    return passes_run(ctx, *out, &opt);
}

wpk_status api_bind_zeros(wpk_context *ctx, wpk_session *s, const wpk_model *m, int batch) {
    for (int i = 0; i < wpk_model_num_inputs(m); i++) {
        wpk_tensor_view v = wpk_model_input(m, i);
        size_t n = wpk_dtype_size(v.dtype);
        for (int d = 0; d < v.ndim; d++) {
            if (v.dims[d] < 0) v.dims[d] = batch;
            n *= (size_t)v.dims[d];
        }
        void *zeros = wpk_calloc(n ? n : 1, 1);
        if (!zeros) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory binding '%s'", v.name);
        wpk_status st = wpk_session_set_input(s, v.name, v.dtype, v.dims, v.ndim, zeros);
        wpk_free(zeros);
        if (st) return st;
    }
    return WPK_OK;
}

/* The nodes left at their default config: logged, and with strict an error naming them. */
static wpk_status check_untuned(wpk_context *ctx, const exec_plan *p, int strict) {
    strbuf names = {0};
    int untuned = 0;
    for (int k = 0; k < p->g->nnodes; k++) {
        const char *provider, *impl, *source;
        cpu_program_node_info(p->cpu, k, &provider, &impl, &source);
        if (strcmp(source, "default")) continue;
        if (untuned++ < MAX_LISTED)
            sb_printf(&names, "%s'%s' (%s)", untuned > 1 ? ", " : "", p->g->nodes[k].name,
                      p->g->nodes[k].op_type);
    }
    if (untuned > MAX_LISTED) sb_printf(&names, " and %d more", untuned - MAX_LISTED);
    wpk_status st = WPK_OK;
    if (untuned && strict)
        st = wpk_error(ctx, WPK_ERR_INVALID_ARG, "%d node%s without tuning records (--strict): %s; "
                       "run 'wpk tune' on the model first", untuned, untuned == 1 ? "" : "s",
                       names.s ? names.s : "");
    else if (untuned)
        wpk_log(ctx, WPK_LOG_WARN, "%d node%s without tuning records run their default config: %s",
                untuned, untuned == 1 ? "" : "s", names.s ? names.s : "");
    sb_free(&names);
    return st;
}

/* The cpu target: p's cpu_program written under this machine's fingerprint. */
static wpk_status write_plan(wpk_context *ctx, const char *path, const wpk_compile_params *cp,
                             const char *records, const exec_plan *p, const ir_graph *named) {
    byte_writer w = {0};
    plan_meta meta = {cp->opt_level, cp->batch, cp->provider ? cp->provider : "", records};
    wpk_status st = cpu_program_save(ctx, p->cpu, p->g, p->vals, &p->mem, named, &meta, &w);
    if (st == WPK_OK) st = artifact_write(ctx, path, target_fingerprint(), &w);
    bw_free(&w);
    return st;
}

/* ---- the speed check: the chosen plan against the plans without its choices ---- */

/* The level at which the compiled graph's shape-dependent rewrites run once the batch is
 * bound, as a session's own: the optimization level, but with a fusion search, whose plan is
 * laid on the graph as it was optimized, none. */
static int bound_rewrites_level(const wpk_compile_params *cp) {
    return cp->fusion_search == WPK_FUSION_NONE ? cp->opt_level : 0;
}

/* One plan of the speed check: a session over the specialized model, prepared. */
typedef struct plan_candidate {
    const char *name;
    const char *records, *provider;
    wpk_session *s;
    exec_plan *p;
    double *ms;
    int runs;
    double bf16_fp32_share; /* wpk_session_params.bf16_fp32_share */
} plan_candidate;

static wpk_status candidate_open(wpk_context *ctx, const wpk_model *m,
                                 const wpk_compile_params *cp, plan_candidate *c) {
    wpk_session_params sp = wpk_session_default_params();
    sp.backend = WPK_BACKEND_CPU;
    sp.opt_level = 0; /* optimized before */
    sp.threads = cp->threads;
    sp.records = c->records;
    sp.provider = c->provider;
    sp.precision = cp->precision;
    sp.bf16_fp32_share = c->bf16_fp32_share;
    wpk_status st = wpk_session_create(ctx, m, &sp, &c->s);
    if (st == WPK_OK) session_set_optimized_at(c->s, bound_rewrites_level(cp));
    if (st == WPK_OK) st = api_bind_zeros(ctx, c->s, m, cp->batch);
    if (st == WPK_OK) st = session_prepare(c->s, &c->p);
    if (st == WPK_OK && !c->p->cpu)
        st = wpk_error(ctx, WPK_ERR_UNSUPPORTED, "the graph's shapes depend on data computed "
                       "while it runs: it cannot be compiled into a plan");
    return st;
}

static void candidate_close(plan_candidate *c) {
    wpk_session_free(c->s);
    free(c->ms);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* What the records chose: a node run from a record (*any), and one of them a library's. */
static void chosen_kinds(const exec_plan *p, bool *any, bool *library) {
    *any = *library = false;
    for (int k = 0; k < p->g->nnodes; k++) {
        const char *provider, *impl, *source;
        cpu_program_node_info(p->cpu, k, &provider, &impl, &source);
        if (strncmp(source, "tuned", 5)) continue;
        *any = true;
        if (strcmp(provider, "generated")) *library = true;
    }
}

/* Median ms of each candidate, measured in alternating rounds after one warm-up run each. */
static wpk_status time_candidates(wpk_context *ctx, plan_candidate *c, int n) {
    double slowest = 0;
    for (int i = 0; i < n; i++) {
        double t0 = now_ms();
        wpk_status st = wpk_session_run(c[i].s);
        if (st) return st;
        double t = now_ms() - t0;
        if (t > slowest) slowest = t;
    }
    int runs = (int)(CHECK_BUDGET_MS / (n * (slowest > 1e-3 ? slowest : 1e-3)));
    runs = runs < CHECK_MIN_RUNS ? CHECK_MIN_RUNS : runs > CHECK_MAX_RUNS ? CHECK_MAX_RUNS : runs;
    for (int i = 0; i < n; i++)
        if (!(c[i].ms = malloc(sizeof(double) * (size_t)runs)))
            return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory timing the plans");
    for (int r = 0; r < runs; r++)
        for (int i = 0; i < n; i++) {
            double t0 = now_ms();
            wpk_status st = wpk_session_run(c[i].s);
            if (st) return st;
            c[i].ms[c[i].runs++] = now_ms() - t0;
        }
    for (int i = 0; i < n; i++) qsort(c[i].ms, (size_t)c[i].runs, sizeof(double), cmp_double);
    return WPK_OK;
}

static double candidate_median(const plan_candidate *c) {
    return c->ms[c->runs / 2];
}

/* Which of the timed candidates to write: the chosen plan (c[0]) unless another is faster
 * by more than the noise margin. */
static int fastest_candidate(const plan_candidate *c, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (candidate_median(&c[i]) < candidate_median(&c[best]) * (1.0 - CHECK_MARGIN))
            best = i;
    return best;
}

/* The convs p keeps fp32 at share: an INFO line naming them (TensorRT reports the layers it
 * left at a higher precision), their names into report (optional), and their count. */
static int report_fp32_convs(wpk_context *ctx, const exec_plan *p, double share, double err,
                             wpk_compile_report *report) {
    bool *keep = wpk_calloc((size_t)p->g->nnodes + 1, sizeof *keep);
    if (!keep) return 0;
    int kept = share > 0 ? cpu_bf16_fp32_nodes(p->g, p->vals, share, keep, &share) : 0;
    strbuf names = {0};
    for (int k = 0; k < p->g->nnodes; k++)
        if (keep[k]) sb_printf(&names, "%s%s", names.len ? ", " : "", p->g->nodes[k].name);
    wpk_log(ctx, WPK_LOG_INFO, "precision bf16: %d conv(s) kept fp32 (%.1f%% of the bf16 convs' "
            "multiply-adds), error %.3g%s%s", kept, 100 * share, err, kept ? ": " : "",
            names.s && !names.oom ? names.s : "");
    if (report) report->precision_fp32_share = kept ? share : 0;
    if (report && names.s && !names.oom) {
        size_t room = sizeof report->precision_fp32_names;
        snprintf(report->precision_fp32_names, room, "%s", names.s);
        if (names.len >= room) memcpy(report->precision_fp32_names + room - 4, "...", 4);
    }
    sb_free(&names);
    wpk_free(keep);
    return kept;
}

/* The cpu target: the plan from the records (chosen), checked in context when the records
 * chose anything, then written; with bf16, at the share of fp32 convs the measured
 * search chose. */
static wpk_status compile_cpu(wpk_context *ctx, const char *path, const wpk_compile_params *cp,
                              const char *records, const wpk_model *m) {
    plan_candidate c[WPK_COMPILE_MAX_PLANS];
    memset(c, 0, sizeof c);
    int n = 1;
    bool bf16 = false;
    double share = 0, err = -1;
    wpk_status st = WPK_OK;
    if (cpu_precision_check(ctx, cp->precision, false, &bf16) == WPK_OK && bf16) {
        api_precision_run r = {m, cp->precision, cp->batch, cp->threads, records, cp->provider};
        st = api_precision_search(ctx, &r, cp->precision_tolerance, &share, &err);
        if (st == WPK_OK)
            wpk_log(ctx, WPK_LOG_INFO, "precision %s: relative L2 error of output 0 against "
                    "fp32 %.3g (seeded random inputs)", cp->precision, err);
        if (cp->report) {
            cp->report->precision_rel_l2 = err;
            cp->report->precision_fp32_share = share;
        }
    }
    c[0] = (plan_candidate){.name = "chosen", .records = records, .provider = cp->provider,
                            .bf16_fp32_share = share};
    if (st == WPK_OK) st = candidate_open(ctx, m, cp, &c[0]);
    if (st == WPK_OK && bf16) {
        int kept = report_fp32_convs(ctx, c[0].p, share, err, cp->report);
        if (cp->report) cp->report->precision_fp32_convs = kept;
    }
    if (st == WPK_OK) st = check_untuned(ctx, c[0].p, cp->strict);
    bool any = false, library = false;
    if (st == WPK_OK) chosen_kinds(c[0].p, &any, &library);
    if (st == WPK_OK && cp->check_speed && any) {
        c[n++] = (plan_candidate){.name = "defaults", .records = "", .provider = cp->provider,
                                  .bf16_fp32_share = share};
        bool auto_provider = !cp->provider || !strcmp(cp->provider, "auto");
        if (library && auto_provider)
            c[n++] = (plan_candidate){.name = "generated", .records = records,
                                      .provider = "generated", .bf16_fp32_share = share};
        for (int i = 1; st == WPK_OK && i < n; i++) st = candidate_open(ctx, m, cp, &c[i]);
        if (st == WPK_OK) st = time_candidates(ctx, c, n);
    }
    int kept = n > 1 && st == WPK_OK ? fastest_candidate(c, n) : 0;
    if (st == WPK_OK) {
        const plan_candidate *k = &c[kept];
        st = write_plan(ctx, path, cp, k->records, k->p, m->g);
    }
    if (st == WPK_OK && n > 1) {
        wpk_log(ctx, WPK_LOG_INFO, "speed check: kept the %s plan (%.3f ms; chosen %.3f ms)",
                c[kept].name, candidate_median(&c[kept]), candidate_median(&c[0]));
        if (cp->report) {
            cp->report->nplans = n;
            cp->report->kept = kept;
            for (int i = 0; i < n; i++) {
                cp->report->plans[i].name = c[i].name;
                cp->report->plans[i].median_ms = candidate_median(&c[i]);
            }
        }
    }
    for (int i = 0; i < n; i++) candidate_close(&c[i]);
    return st;
}

/* The kernel steps of a CUDA plan left at their template's default: logged, and with strict an
 * error naming them. */
static wpk_status check_untuned_cuda(wpk_context *ctx, const rt_plan *plan, int strict) {
    strbuf names = {0};
    int untuned = 0;
    for (int k = 0; k < plan->nsteps; k++) {
        const rt_step *s = &plan->steps[k];
        if (strcmp(s->runner, "cuda_kernel") || strcmp(s->source, "default")) continue;
        if (untuned++ < MAX_LISTED)
            sb_printf(&names, "%s'%s' (%s)", untuned > 1 ? ", " : "", s->node, s->op);
    }
    if (untuned > MAX_LISTED) sb_printf(&names, " and %d more", untuned - MAX_LISTED);
    wpk_status st = WPK_OK;
    if (untuned && strict)
        st = wpk_error(ctx, WPK_ERR_INVALID_ARG, "%d node%s without tuning records for this GPU "
                       "(--strict): %s; run 'wpk tune --target cuda' on the model first",
                       untuned, untuned == 1 ? "" : "s", names.s ? names.s : "");
    else if (untuned)
        wpk_log(ctx, WPK_LOG_WARN, "%d node%s without tuning records for this GPU run their "
                "template's default config: %s", untuned, untuned == 1 ? "" : "s",
                names.s ? names.s : "");
    sb_free(&names);
    return st;
}

/* The CUDA target: p's graph and memory plan as a CUDA program for the device's SM (info),
 * each kernel at the config the records hold for this GPU (compile/cuda_choice.h) or its
 * template's default, written under the GPU's fingerprint. */
static wpk_status write_cuda_plan(wpk_context *ctx, const char *path, const wpk_compile_params *cp,
                                  const char *records, const rt_cuda_info *info,
                                  const exec_plan *p) {
    if (!p->is_static)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "the graph's shapes depend on data computed "
                         "while it runs: it cannot be compiled into a plan");
    tune_db *db = NULL;
    wpk_status st = records[0] ? tune_db_open(ctx, records, &db) : WPK_OK;
    if (st) return st;
    cuda_choice choice;
    cuda_choice_init(&choice, db, info);
    tune_cuda_program_options opt = tune_cuda_program_default_options();
    opt.sm = info->sm;
    opt.choose = cuda_choice_pick;
    opt.choose_lib = cuda_choice_lib;
    opt.choose_user = &choice;
    tune_cuda_program prog;
    st = tune_cuda_program_build(ctx, p->g, &p->mem, &opt, &prog);
    tune_db_close(db);
    if (st) return st;
    if ((st = check_untuned_cuda(ctx, &prog.plan, cp->strict))) {
        tune_cuda_program_free(&prog);
        return st;
    }
    /* the program's plan is the target's own; what it was made from is for reports */
    prog.plan.target = RT_TARGET_CUDA;
    prog.plan.opt_level = cp->opt_level;
    prog.plan.batch = cp->batch;
    prog.plan.provider = cp->provider ? cp->provider : "";
    prog.plan.records = records;
    prog.plan.threads = 1;
    char fp[600];
    target_cuda_fingerprint(info->name, info->sm, info->driver_version, fp, sizeof fp);
    byte_writer w = {0};
    st = rt_plan_write(ctx, &prog.plan, &w);
    if (st == WPK_OK) st = artifact_write(ctx, path, fp, &w);
    bw_free(&w);
    tune_cuda_program_free(&prog);
    return st;
}

wpk_status wpk_compile(wpk_context *ctx, const wpk_model *model, const wpk_compile_params *params,
                       const char *path) {
    wpk_clear_error(ctx);
    wpk_compile_params cp = params ? *params : wpk_compile_default_params();
    if (cp.opt_level < 0 || cp.opt_level > 3)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "optimization level %d is out of range (0 to "
                         "3)", cp.opt_level);
    if (cp.batch < 1)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "batch must be >= 1, not %d", cp.batch);
    if (cp.threads < 0)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "threads must be >= 0, not %d", cp.threads);
    if (!path || !*path) return wpk_error(ctx, WPK_ERR_INVALID_ARG, "no output path for the plan");
    if (cp.target != WPK_BACKEND_CPU && cp.target != WPK_BACKEND_CUDA)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "target %d cannot be compiled for (cpu or "
                         "cuda)", (int)cp.target);
    bool cuda = cp.target == WPK_BACKEND_CUDA;
    if (cp.fusion_search < WPK_FUSION_NONE || cp.fusion_search > WPK_FUSION_ALL)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "fusion search %d is not one of none, search, "
                         "exhaustive, all", cp.fusion_search);
    if (cuda && cp.fusion_search != WPK_FUSION_NONE)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "the fusion search plans the cpu target only");
    wpk_status st = wpk_model_check_supported(ctx, model);
    if (st) return st;
    /* no device is said at once, before any work; the plan is built for the one found */
    rt_cuda_info info;
    if (cuda && (st = rt_cuda_probe(ctx, 0, &info))) return st;
    /* the graph goes through its ONNX bytes before anything is specialized, as a model read
       from a file would: the kernels chosen are those a session on `wpk optimize`'s output gets */
    ir_graph *g = NULL;
    uint8_t *bytes = NULL;
    size_t len = 0;
    wpk_model *m = NULL;
    wpk_session *s = NULL;
    exec_plan *p = NULL;
    char records[4096];
    exec_plan_records_path(cp.records, records, sizeof records);
    if (cp.report) {
        memset(cp.report, 0, sizeof *cp.report);
        cp.report->precision_rel_l2 = -1;
    }
    if (cp.fusion_report) memset(cp.fusion_report, 0, sizeof *cp.fusion_report);
    bool reduced;
    if ((st = cpu_precision_check(ctx, cp.precision, cuda, &reduced))) return st;
    /* fusion groups are found before the blocked layout, which the plan then runs itself */
    bool fusion = cp.fusion_search != WPK_FUSION_NONE;
    st = optimized(ctx, model, fusion && cp.opt_level > 2 ? 2 : cp.opt_level, cuda, &g);
    if (st == WPK_OK && fusion)
        st = fusion_plan_apply(ctx, g, cp.opt_level, &cp, records, cp.fusion_report);
    if (st == WPK_OK) st = graph_bytes(ctx, g, path, &bytes, &len);
    if (st == WPK_OK) st = api_model_from_buffer(ctx, bytes, len, path, &m);
    if (st == WPK_OK && !cuda) st = compile_cpu(ctx, path, &cp, records, m);
    if (st == WPK_OK && cuda) {
        wpk_session_params sp = wpk_session_default_params();
        /* the CUDA program is built here from the specialized graph: the session compiles
           nothing for it (and opens no device) */
        sp.backend = WPK_BACKEND_REF;
        sp.opt_level = 0; /* optimized above */
        sp.threads = cp.threads;
        sp.records = records;
        sp.provider = cp.provider;
        st = wpk_session_create(ctx, m, &sp, &s);
        if (st == WPK_OK) session_set_optimized_at(s, bound_rewrites_level(&cp));
        if (st == WPK_OK) st = api_bind_zeros(ctx, s, m, cp.batch);
        if (st == WPK_OK) st = session_prepare(s, &p);
        if (st == WPK_OK) st = write_cuda_plan(ctx, path, &cp, records, &info, p);
    }
    if (st && model->g->path) wpk_error_prefix(ctx, "%s", model->g->path);
    wpk_session_free(s);
    wpk_model_free(m);
    wpk_free(bytes);
    ir_graph_free(g);
    return st;
}
