/* tune_resnet18_convs.c -- the auto-tuner on ResNet-18's twelve convolutions at batch 1
 * (issue 5's benchmarks), reusing bench/conv_resnet18.c (included below) for the problems,
 * oneDNN at its best and the timing method.
 *
 *     tune_resnet18_convs [--part tune,strategies,parallel] [--trials 48] [--strategy ga]
 *                         [--db tune_resnet18.db] [--only c2,c6] [--min-ms 300]
 *                         [--compare c3,c2] [--compare-trials 80] [--strategies ga,model,...]
 *                         [--seeds 1] [--compare-impl conv2d_winograd] [--prior c6,c9]
 *                         [--compare-start CONFIG] [--pretrain-on c1,c2,...]
 *                         [--pretrain-trials 40] [--trace 1]
 *                         [--parallel-trials 24] [--parallel-rounds 1] [--parallel-conv c6]
 *                         [--timing auto|cold|warm] [--parallel auto|N]
 *
 * Part "tune": the convs as the -O3 pipeline hands them to the templates (wpk::ConvNCHWc on
 * blocked tensors, weights packed, bias + ReLU fused) are tuned with tune_run (--trials per
 * conv and implementation -- the direct conv template, and the Winograd template where it takes
 * the conv --, counting records already in --db, so a re-run resumes), then the default config,
 * the tuned config (the faster implementation's best after the tuner's final re-measurement)
 * and oneDNN are timed in one run,
 * alternating, by conv_resnet18.c's measure(): ratios tuned/oneDNN and tuned/default by wall
 * time and by CPU time per thread, their geometric means and minima. All three are timed as the
 * tuner timed the candidates (--timing auto): cold -- each call on its own, its weights and
 * bias flushed from the caches before it -- when the convs' weights outgrow the last-level
 * cache, as in the model, else warm; --timing cold or warm forces one.
 * Part "strategies": the slides' 1x1 64->64 56x56 conv (c3) and the 3x3 56x56 conv (c2) as
 * NCHW FusedConv nodes (the -O2 form, the larger space) in the space of the template that takes
 * them first (the direct blocked conv) or of --compare-impl's, each strategy from an empty database
 * for --compare-trials trials, --seeds times (seeds 7, 8, ...); then every config that was
 * among some run's finalists (its best few so far, which the tuner's final re-measurement
 * chooses from) re-timed in one interleaved measurement (after the parallel part's tuning:
 * it starts OpenMP threads), the fastest of them the bar; per strategy and seed: the proposals
 * and the wall time until the run's pick (the re-timed fastest of its finalists then) was
 * within 5% of the bar, and their means; and each random run's first proposals, a uniform
 * sample of the legal space, re-timed too, give random search's expected proposals without
 * the noise of its picks.
 * With --compare-start (a whole config of the compared template's space), every run measures
 * that config first and starts from it instead of the template's default: the search from a
 * poor start, where the default is already near the best.
 * With --prior, the model's and ga's runs start from the records of other convs (in the same
 * template's space: random search for --compare-trials trials each, tuned once beforehand):
 * transfer from other workloads (the cost model learns from all of their records, ga breeds
 * its first generation from each conv's fastest configs).
 * The strategy "rl-pretrained" is rl from a policy trained on --pretrain-on's convs first (rl,
 * --pretrain-trials trials each, from an empty database; never the compared conv), each run
 * from a copy of it and without those convs' records: transfer through the policy alone, beside
 * "rl" from a fresh policy. --trace 1 prints every run's proposals and its own medians.
 * Part "parallel": one fixed job on --parallel-conv (random search, fixed seed: the same
 * configs in the same order) tuned with one build worker and measurements alone, and with the
 * automatic parallelism, each from an empty kernel cache, in --parallel-rounds rounds that
 * alternate which goes first: wall times, the CPU time of the tuner's children, and the final
 * kernels of all runs timed in one run (issue 5's bar: wall time cut >= 40%, speed within 3%).
 *
 * Tuning runs first, while this process has started no OpenMP thread (the tuner forks its
 * workers; GNU OpenMP is not fork-safe): the process runs with one OpenMP thread until then.
 * Samples are timed with OMP_WAIT_POLICY=passive (set here, as conv_resnet18 does) by CPU time
 * per thread in the tuner (TUNE_CLOCK_CPU: other processes on a shared machine do not disturb
 * it) and by both clocks in the final comparison. */
#define main conv_resnet18_main
int conv_resnet18_main(int argc, char **argv);
#include "conv_resnet18.c"
#undef main

#include <dirent.h>
#include <errno.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "kernels/cpu_kernel.h"
#include "kernels/cpu_unit.h"
#include "ops/blocked.h"
#include "tune/finalists.h"
#include "base/target_fingerprint.h"
#include "tune/tuner.h"

#define MAX_STRATEGIES 8
#define MAX_SEEDS 8
/* strategies: the first proposals of each random run re-timed too, a uniform sample of the
 * legal space: the share within 5% of the best gives random search's expected proposals
 * without the noise of its picks */
#define SAMPLE_PER_RUN 12
/* strategies: the name of rl started from a policy trained on --pretrain-on's convs */
#define PRETRAINED "rl-pretrained"

/* ---- tasks: a conv node with its tensors ---- */

typedef struct conv_task {
    const conv_spec *spec;
    problem pb;
    ir_graph *g;
    ir_tensor x, w, b, y;
    float *wpacked;        /* blocked: the packed weights (the task's constant) */
    bool blocked;
    tune_model_task mt;
    tune_model_task alt;   /* another DSL implementation of the node (Winograd), when one
                              takes it: tuned too, and the faster of the two is "tuned" */
    bool has_alt;
} conv_task;

/* t's node as a task of template tm (t.mt's weights), or false when tm does not take it. */
static bool conv_task_as(conv_task *t, const kernel_provider *tm, tune_model_task *out) {
    ir_tensor *in[] = {&t->x, &t->w, &t->b}, *outs[] = {&t->y};
    if (!tm->supports(tm, t->mt.task.node, in, outs)) return false;
    *out = t->mt;
    tune_task_init(&out->task, tm, t->mt.task.node, in, outs);
    return true;
}

static void conv_task_init(conv_task *t, const conv_spec *c, bool blocked, wpk_context *ctx) {
    memset(t, 0, sizeof *t);
    t->spec = c;
    t->blocked = blocked;
    problem_init(&t->pb, c, ctx);
    t->g = ir_graph_create();
    ir_node *n = conv_node(t->g, c, blocked);
    const int64_t blk = block_lanes(), oh = t->pb.oh;
    t->b = (ir_tensor){WPK_DTYPE_FLOAT32, 1, {c->k}, t->pb.b};
    if (blocked) {
        int64_t bi = c->c < blk ? 1 : blk;
        t->x = (ir_tensor){WPK_DTYPE_FLOAT32, bi > 1 ? 5 : 4,
                           {1, bi > 1 ? (c->c + bi - 1) / bi : c->c, c->hw, c->hw, bi}, NULL};
        t->w = (ir_tensor){WPK_DTYPE_FLOAT32, 6, {0}, NULL};
        blocked_weight_dims(c->k, c->c, c->r, c->r, bi, blk, false, t->w.dims);
        t->wpacked = alloc64(sizeof(float) * (size_t)ir_numel(&t->w));
        blocked_pack_weights(t->pb.w, c->k, c->c, c->r, c->r, bi, blk, false, t->wpacked);
        t->w.data = t->wpacked;
        t->y = (ir_tensor){WPK_DTYPE_FLOAT32, 5, {1, (c->k + blk - 1) / blk, oh, oh, blk}, NULL};
    } else {
        t->x = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {1, c->c, c->hw, c->hw}, NULL};
        t->w = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {c->k, c->c, c->r, c->r}, t->pb.w};
        t->y = (ir_tensor){WPK_DTYPE_FLOAT32, 4, {1, c->k, oh, oh}, NULL};
    }
    ir_tensor *in[] = {&t->x, &t->w, &t->b}, *out[] = {&t->y};
    const kernel_provider *tm = kernel_provider_for(n, in, out);
    if (!tm) die(c->name, "no template takes this conv");
    tune_task_init(&t->mt.task, tm, n, in, out);
    t->mt.count = 1;
    t->mt.flops = t->mt.task.flops;
    t->mt.share = 1;
    t->mt.alt_of = -1;
    const kernel_provider *impls[8];
    int ni = kernel_providers_for(n, in, out, impls, 8);
    for (int i = 0; i < ni && !t->has_alt; i++)
        /* oneDNN is the peer, not a candidate */
        if (impls[i] != tm && kernel_provider_generates(impls[i]))
            t->has_alt = conv_task_as(t, impls[i], &t->alt);
}

static void conv_task_free(conv_task *t) {
    free(t->wpacked);
    ir_graph_free(t->g);
    problem_free(&t->pb);
}

/* ---- a config's kernel, built the way the measurer and the cpu backend build it ---- */

typedef struct kernel {
    cg_module *mod;
    cg_kernel_fn fn;
    void *args[CPU_MAX_KERNEL_ARGS];
    float *y;
    void *bufs[8];
    int nbufs;
    const void *konst[MAX_CONSTS]; /* its constant arguments (weights, bias; packed or not) */
    size_t konst_bytes[MAX_CONSTS];
    int nkonst;
} kernel;

static void *own(kernel *k, size_t bytes) {
    void *p = alloc64(bytes);
    k->bufs[k->nbufs++] = p;
    return p;
}

/* data: the node's inputs in order (x, w, b). */
static void kernel_build(kernel *k, const conv_task *t, const tune_task *task, const char *config,
                         void *const *data, wpk_context *ctx) {
    memset(k, 0, sizeof *k);
    cpu_kernel ck;
    if (cpu_kernel_build(ctx, task, 0, config, NULL, &ck))
        die("cpu_kernel_build", wpk_context_error(ctx));
    strbuf unit = {0};
    const strbuf *srcs[1] = {&ck.source};
    if (cpu_unit_merge(ctx, srcs, 1, &unit) || cg_c_compile(ctx, unit.s, &k->mod))
        die("compile", wpk_context_error(ctx));
    sb_free(&unit);
    k->fn = cg_module_fn(k->mod, ck.name);
    int a = 0;
    const ir_tensor *in[3] = {&t->x, &t->w, &t->b};
    for (int i = 0; i < ck.ninputs; i++) {
        k->args[a++] = data[i];
        size_t bytes = i < 3 ? ir_nbytes(in[i]) : 0;
        if (ck.pack_numel[i] > 0) {
            cg_kernel_fn pack = cg_module_fn(k->mod, ck.pack_name[i]);
            bytes = sizeof(float) * (size_t)ck.pack_numel[i];
            void *packed = own(k, bytes);
            pack((void *[]){data[i], packed});
            k->args[a - 1] = packed;
        }
        if (i >= 1 && i < 3 && k->nkonst < MAX_CONSTS) /* w, b: the node's constants */
            k->konst[k->nkonst] = k->args[a - 1], k->konst_bytes[k->nkonst++] = bytes;
    }
    k->y = own(k, ir_nbytes(&t->y));
    k->args[a++] = k->y;
    char *scratch = ck.nscratch ? own(k, (size_t)ck.scratch_bytes + 64) : NULL;
    for (int i = 0; i < ck.nscratch; i++) k->args[a++] = scratch + ck.scratch_off[i];
    if (!k->fn) die("kernel", "symbol missing");
    cpu_kernel_free(&ck);
}

/* k's constants as t's, for cold timing. */
static void timed_constants_of_kernel(timed *t, const kernel *k) {
    for (int i = 0; i < k->nkonst; i++)
        t->konst[i] = k->konst[i], t->konst_bytes[i] = k->konst_bytes[i];
    t->nkonst = k->nkonst;
}

/* oneDNN's weights and bias, in its formats, as t's constants. */
static void timed_constants_of_onednn(timed *t, const onednn_conv *d) {
    const dnnl_memory_t mem[2] = {d->wei, d->bias};
    t->nkonst = 0;
    for (int i = 0; i < 2; i++) {
        const dnnl_memory_desc_t *md;
        void *p;
        DNNL_CHECK(dnnl_memory_get_memory_desc(mem[i], &md));
        DNNL_CHECK(dnnl_memory_get_data_handle(mem[i], &p));
        t->konst[t->nkonst] = p;
        t->konst_bytes[t->nkonst++] = dnnl_memory_desc_get_size(md);
    }
}

static void kernel_run(void *p) {
    kernel *k = p;
    k->fn(k->args);
}

/* The output as NCHW. */
static void kernel_output(const kernel *k, const conv_task *t, float *dst) {
    const int64_t kk = t->spec->k, plane = t->pb.oh * t->pb.oh, blk = block_lanes();
    if (!t->blocked) {
        memcpy(dst, k->y, sizeof(float) * (size_t)(kk * plane));
        return;
    }
    for (int64_t ch = 0; ch < kk; ch++)
        for (int64_t i = 0; i < plane; i++)
            dst[ch * plane + i] = k->y[((ch / blk) * plane + i) * blk + ch % blk];
}

static void kernel_free(kernel *k) {
    for (int i = 0; i < k->nbufs; i++) free(k->bufs[i]);
    cg_module_free(k->mod);
}

/* x in the layout the task's node reads. */
static float *input_for(const conv_task *t) {
    const conv_spec *c = t->spec;
    if (!t->blocked || t->x.ndim == 4) return t->pb.x;
    const int64_t bi = t->x.dims[4];
    float *xb = alloc64(sizeof(float) * (size_t)ir_numel(&t->x));
    for (int64_t ch = 0; ch < t->x.dims[1] * bi; ch++)
        for (int64_t i = 0; i < c->hw * c->hw; i++)
            xb[((ch / bi) * c->hw * c->hw + i) * bi + ch % bi] =
                ch < c->c ? t->pb.x[ch * c->hw * c->hw + i] : 0.0f;
    return xb;
}

/* ---- options ---- */

typedef struct opts {
    bool tune, strategies, parallel;
    int64_t trials, compare_trials, parallel_trials, parallel_rounds;
    int64_t seeds;           /* strategies: runs per strategy, seeds 7, 8, ... */
    const char *strategy, *db, *only, *compare, *strategy_list, *parallel_conv;
    const char *compare_impl; /* strategies: the template compared; NULL: the node's first */
    const char *compare_start; /* strategies: the config every run starts from; NULL: the
                                  template's default */
    const char *prior;        /* strategies: convs whose records the model and ga start from */
    const char *pretrain_on;  /* strategies: convs rl's policy is trained on for rl-pretrained */
    int64_t pretrain_trials;  /* strategies: rl trials per pretraining conv */
    bool trace;               /* strategies: every run's proposals to stderr */
    const char *timing;       /* tune: "cold", "warm", or "auto" (as the tuner timed) */
    int tune_parallel;        /* tune: build workers, 1 measuring alone; 0 automatic */
    double min_s;
} opts;

static tune_options tuner_options(const char *strategy, int64_t trials) {
    tune_options t = tune_default_options();
    t.strategy = strategy;
    t.trials = trials;
    t.seed = 7;
    t.measure.clock = TUNE_CLOCK_CPU;
    t.flat_trials = 0; /* every run its full trials: the curves compare proposals to the bar */
    return t;
}

static void open_db(const char *path, wpk_context *ctx, tune_db **db) {
    if (tune_db_open(ctx, path, db)) die("records", wpk_context_error(ctx));
}

/* An empty directory for a kernel cache of its own (files of an earlier run removed). */
static void fresh_cache(char *dir, size_t cap, const char *tag) {
    snprintf(dir, cap, "/tmp/wpk_tune_bench_cache_%ld_%s", (long)getpid(), tag);
    mkdir(dir, 0755);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[1024];
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    setenv("WPK_CACHE_DIR", dir, 1);
}

/* ---- part: tune, then default vs tuned vs oneDNN in one run ---- */

typedef struct result_row {
    timed def, tuned, dnnl;
    char config[600], impl[128];
    double err_def, err_tuned, err_dnnl;
    double tune_s;
    int64_t trials, measured;
} result_row;

typedef struct tuned {
    conv_task *ts;
    int idx[NCONVS], n;
    int sum_main[NCONVS], sum_alt[NCONVS]; /* per conv: its tasks' indices in sum (-1: none) */
    tune_summary sum;
    double wall;
} tuned;

/* How many of ResNet-18's nodes each conv is (c3, the slides' 1x1 example, is not one of
 * them: counted once): the tuner weighs the tasks, and times them with their weights cold
 * when the model's weights outgrow the cache, as it does for the model. */
static const int RESNET18_NODES[NCONVS] = {1, 4, 1, 1, 1, 3, 1, 1, 3, 1, 1, 3};

static void part_tune(const opts *o, wpk_context *ctx, tuned *T) {
    T->ts = calloc(NCONVS, sizeof *T->ts);
    tune_model_task mts[2 * NCONVS];
    int nm = 0;
    T->n = 0;
    for (int ci = 0; ci < NCONVS; ci++) {
        if (!selected(o->only, CONVS[ci].name)) continue;
        conv_task *t = &T->ts[T->n];
        conv_task_init(t, &CONVS[ci], true, ctx);
        t->mt.count = t->alt.count = RESNET18_NODES[ci];
        T->sum_main[T->n] = nm;
        mts[nm++] = t->mt;
        T->sum_alt[T->n] = -1;
        if (t->has_alt) {
            T->sum_alt[T->n] = nm;
            mts[nm] = t->alt;
            mts[nm++].alt_of = T->sum_main[T->n];
        }
        T->idx[T->n++] = ci;
    }
    tune_db *db;
    open_db(o->db, ctx, &db);
    tune_options to = tuner_options(o->strategy, o->trials);
    to.parallel = o->tune_parallel;
    double t0 = now();
    if (tune_run(ctx, db, mts, nm, &to, &T->sum)) die("tune_run", wpk_context_error(ctx));
    T->wall = now() - t0;
    tune_db_close(db);
    fprintf(stderr, "tuned %d convs: %lld trials measured in %.0f s\n", T->n,
            (long long)T->sum.measured, T->wall);
}

/* Default vs tuned vs oneDNN, in this process: after every tuning run (OpenMP threads start
 * here). */
static void part_compare(const opts *o, wpk_context *ctx, int threads, tuned *T) {
    conv_task *ts = T->ts;
    const int n = T->n;
    const int *idx = T->idx;
    const tune_summary sum = T->sum;
    const double tune_wall = T->wall;
    /* timed as the tuner timed them (the model's view), unless --timing says otherwise: on a
       machine whose last-level cache holds fewer than the model's weights, the tuner chose each
       pick by its speed with cold weights, and timing the picks warm judges another contest */
    const bool cold = !strcmp(o->timing, "auto") ? sum.cold : !strcmp(o->timing, "cold");
    /* from here on this process runs kernels itself */
    omp_set_num_threads(threads);
    result_row *rows = calloc((size_t)n, sizeof *rows);
    for (int i = 0; i < n; i++) {
        conv_task *t = &ts[i];
        const tune_task_summary *s = &sum.tasks[T->sum_main[i]];
        const tune_task *best_task = &t->mt.task;
        result_row *r = &rows[i];
        r->trials = s->trials;
        r->measured = s->measured;
        /* "tuned": the faster of the implementations the tuner measured (each best re-timed
           alone at the end of its task) */
        if (T->sum_alt[i] >= 0) {
            const tune_task_summary *a = &sum.tasks[T->sum_alt[i]];
            r->trials += a->trials;
            r->measured += a->measured;
            if (a->best_s > 0 && (s->best_s <= 0 || a->best_s < s->best_s)) {
                s = a;
                best_task = &t->alt.task;
            }
        }
        snprintf(r->config, sizeof r->config, "%s %s", best_task->tmpl->name, s->best_config);
        float *x = input_for(t);
        void *data[3] = {x, t->w.data, t->b.data};
        kernel kd, kt;
        kernel_build(&kd, t, &t->mt.task, NULL, data, ctx);
        kernel_build(&kt, t, best_task, s->best_config[0] ? s->best_config : NULL, data, ctx);
        onednn_conv d;
        onednn_build(&d, &t->pb);
        int64_t ny = t->spec->k * t->pb.oh * t->pb.oh;
        float *got = alloc64(sizeof(float) * (size_t)ny);
        kernel_run(&kd);
        kernel_output(&kd, t, got);
        r->err_def = rel_err(got, t->pb.ref, ny);
        kernel_run(&kt);
        kernel_output(&kt, t, got);
        r->err_tuned = rel_err(got, t->pb.ref, ny);
        onednn_run(&d);
        onednn_output(&d, &t->pb, got);
        r->err_dnnl = rel_err(got, t->pb.ref, ny);
        if (!(r->err_def <= TOL) || !(r->err_tuned <= TOL) || !(r->err_dnnl <= TOL))
            die(t->spec->name, "wrong output");
        timed tm[3] = {{.run = kernel_run, .arg = &kd, .cold = cold},
                       {.run = kernel_run, .arg = &kt, .cold = cold},
                       {.run = onednn_run, .arg = &d, .cold = cold}};
        timed_constants_of_kernel(&tm[0], &kd);
        timed_constants_of_kernel(&tm[1], &kt);
        timed_constants_of_onednn(&tm[2], &d);
        measure(tm, 3, flops_of(t->spec), threads, o->min_s);
        r->def = tm[0], r->tuned = tm[1], r->dnnl = tm[2];
        snprintf(r->impl, sizeof r->impl, "%s", d.impl);
        fprintf(stderr, "%s: default %.1f, tuned %.1f, oneDNN %.1f GFLOP/s (CPU time, median)\n",
                t->spec->name, median(r->def.cpu, r->def.n), median(r->tuned.cpu, r->tuned.n),
                median(r->dnnl.cpu, r->dnnl.n));
        onednn_free(&d);
        kernel_free(&kd);
        kernel_free(&kt);
        free(got);
        if (x != t->pb.x) free(x);
    }

    printf("## Tuned vs default vs oneDNN (%d thread%s)\n\n", threads, threads == 1 ? "" : "s");
    printf("Tuning: strategy %s, %lld trials per implementation of each conv (the direct blocked "
           "conv, and Winograd for the 3x3 stride-1 convs; tuned = the faster of the two; "
           "records in %s, counting earlier runs), %lld measured in this run in %.0f s, timed by "
           "CPU time per thread; the convs' weights as often as ResNet-18 has each, %.1f MB, "
           "timed %s. oneDNN: convolution_auto with format any (its choice). The comparison "
           "below timed all three %s.\n\n",
           o->strategy, (long long)o->trials, o->db, (long long)sum.measured, tune_wall,
           (double)sum.constant_bytes / (1 << 20),
           sum.cold ? "cold (more than the last-level cache: flushed before each call)"
                    : "warm (they fit the last-level cache)",
           cold ? "cold (weights and bias flushed from the caches before each call, each call "
                  "timed on its own)"
                : "warm (calls back to back, the weights staying in the caches)");
    printf("| conv | GFLOP | default CPU | tuned CPU | oneDNN CPU | tuned/oneDNN CPU | "
           "tuned/default CPU | default wall | tuned wall | oneDNN wall | tuned/oneDNN wall |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    double rc[NCONVS] = {0}, rw[NCONVS] = {0}, rd[NCONVS] = {0}, minc = 1e9, minw = 1e9;
    for (int i = 0; i < n; i++) {
        const result_row *r = &rows[i];
        double dc = median(r->def.cpu, r->def.n), tc = median(r->tuned.cpu, r->tuned.n),
               oc = median(r->dnnl.cpu, r->dnnl.n);
        double dw = median(r->def.wall, r->def.n), tw = median(r->tuned.wall, r->tuned.n),
               ow = median(r->dnnl.wall, r->dnnl.n);
        rc[i] = tc / oc, rw[i] = tw / ow, rd[i] = tc / dc;
        if (rc[i] < minc) minc = rc[i];
        if (rw[i] < minw) minw = rw[i];
        printf("| %s | %.3f | %.1f | %.1f | %.1f | %.2f | %.2f | %.1f | %.1f | %.1f | %.2f |\n",
               CONVS[idx[i]].name, flops_of(&CONVS[idx[i]]) * 1e-9, dc, tc, oc, rc[i], rd[i], dw,
               tw, ow, rw[i]);
    }
    printf("\nGeometric means: tuned/oneDNN %.2f by CPU time (lowest %.2f), %.2f by wall time "
           "(lowest %.2f); tuned/default %.2f by CPU time.\n", geomean(rc, n), minc,
           geomean(rw, n), minw, geomean(rd, n));
    printf("Issue 5's bar (geometric mean >= 1.3, none below 0.9): %s by CPU time, %s by wall "
           "time.\n\n", geomean(rc, n) >= 1.3 && minc >= 0.9 ? "met" : "NOT met",
           geomean(rw, n) >= 1.3 && minw >= 0.9 ? "met" : "NOT met");
    printf("### Configurations and samples (GFLOP/s)\n\n");
    for (int i = 0; i < n; i++) {
        const result_row *r = &rows[i];
        printf("%s: tuned `%s` (%lld records, %lld measured now; rel err %.1e, default %.1e); "
               "oneDNN `%s` (rel err %.1e)\n", CONVS[idx[i]].name, r->config,
               (long long)r->trials, (long long)r->measured, r->err_tuned, r->err_def, r->impl,
               r->err_dnnl);
        print_samples("default cpu", r->def.cpu, r->def.n);
        print_samples("tuned cpu", r->tuned.cpu, r->tuned.n);
        print_samples("oneDNN cpu", r->dnnl.cpu, r->dnnl.n);
        print_samples("default wall", r->def.wall, r->def.n);
        print_samples("tuned wall", r->tuned.wall, r->tuned.n);
        print_samples("oneDNN wall", r->dnnl.wall, r->dnnl.n);
    }
    printf("\n");
    free(rows);
    tune_summary_free(&T->sum);
    for (int i = 0; i < n; i++) conv_task_free(&ts[i]);
    free(ts);
}

/* ---- part: strategies ---- */

static void temp_db(char *path, size_t cap, const char *tag) {
    snprintf(path, cap, "/tmp/wpk_tune_bench_%ld_%s.db", (long)getpid(), tag);
    unlink(path);
    char side[600];
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    /* rl's policy, saved next to the database: each run starts from a fresh one too */
    snprintf(side, sizeof side, "%s.rl-policy", path);
    unlink(side);
}

/* Each strategy's runs are judged by re-timing, not by their own measurements: this
 * machine's speed drifts by tens of percent between runs minutes apart (the same default
 * config measured 110.9-213.9 GFLOP/s across 15 runs), more than the strategies differ. So
 * every config that was among some run's finalists is timed again at the end, all of them in
 * one interleaved measurement, and a run's progress after k proposals is the re-timed speed
 * of the config the tuner would deliver had it stopped there: the fastest of its finalists
 * (its best `top` distinct proposals so far by its own measurements, which the tuner's final
 * re-measurement, interleaved too, chooses from; the default, which the finals also re-measure,
 * is left out, so that a good default does not stand in for the search). The bar is the
 * fastest of those configs: the best that all the runs together, the long run, found. */

/* One run of one strategy. */
typedef struct strat_run {
    int np;                   /* the strategy's proposals (the default config left out) */
    int ntop;                 /* finalists per proposal (the tuner's `top`) */
    int *top;                 /* per proposal k: the run's finalists after k + 1 proposals,
                                 top[k * ntop ..], as indices into its conv's configs, fastest
                                 by the run's own measurements first; -1 for none */
    double *at_s;             /* per proposal: seconds into the run when it was stored */
    double wall;
    int64_t failed;
} strat_run;

typedef struct strat_conv {
    conv_task t;
    tune_model_task mt;       /* the implementation compared: t.mt, or --compare-impl's */
    int64_t space;            /* configs in the template's space */
    char (*cfg)[512];         /* the configs to re-time: the default, every best so far */
    int ncfg, capcfg, def;    /* def: the default config's index */
    double *speed;            /* per config: median GFLOP/s by CPU time in the re-timing */
    int sample[MAX_SEEDS * SAMPLE_PER_RUN], nsample; /* random's first proposals: their configs,
                                                        -1 for a failure (never in the band) */
    strat_run runs[MAX_STRATEGIES][MAX_SEEDS];
} strat_conv;

typedef struct strat_job {
    char list[256];
    const char *names[MAX_STRATEGIES];
    int ns, nseeds, nconv;
    strat_conv convs[NCONVS];
} strat_job;

static int config_index(strat_conv *c, const char *text) {
    for (int i = 0; i < c->ncfg; i++)
        if (!strcmp(c->cfg[i], text)) return i;
    if (c->ncfg == c->capcfg) {
        c->capcfg = c->capcfg ? 2 * c->capcfg : 64;
        c->cfg = realloc(c->cfg, sizeof *c->cfg * (size_t)c->capcfg);
        if (!c->cfg) die("strategies", "out of memory");
    }
    snprintf(c->cfg[c->ncfg], sizeof c->cfg[0], "%s", text);
    return c->ncfg++;
}

/* A run's records in the order they were stored (its database was empty before it). */
typedef struct rec_list {
    char (*cfg)[512];
    tune_status *st;
    double *med;
    int n, cap;
} rec_list;

static bool on_rec(void *user, const tune_record *r) {
    rec_list *L = user;
    if (L->n == L->cap) {
        L->cap = L->cap ? 2 * L->cap : 128;
        L->cfg = realloc(L->cfg, sizeof *L->cfg * (size_t)L->cap);
        L->st = realloc(L->st, sizeof *L->st * (size_t)L->cap);
        L->med = realloc(L->med, sizeof *L->med * (size_t)L->cap);
        if (!L->cfg || !L->st || !L->med) die("strategies", "out of memory");
    }
    snprintf(L->cfg[L->n], sizeof L->cfg[0], "%s", r->config);
    L->st[L->n] = r->status;
    L->med[L->n++] = r->median;
    return true;
}

/* The run's finalists after each proposal, from its curve and its records (one trial each,
 * in the same order: checked). */
static void run_path(strat_conv *c, strat_run *run, const tune_task_summary *ts,
                     const rec_list *L, int top, bool sample) {
    if (L->n != ts->ncurve) die("strategies", "the run's records are not its trials");
    if (top < 1 || top > TUNE_MAX_BATCH) die("strategies", "the tuner's top is out of range");
    run->ntop = top;
    run->top = malloc(sizeof *run->top * (size_t)(L->n + 1) * (size_t)top);
    run->at_s = malloc(sizeof *run->at_s * (size_t)(L->n + 1));
    if (!run->top || !run->at_s) die("strategies", "out of memory");
    tune_finalists *F = calloc(1, sizeof *F); /* the default left out, as the finals do */
    if (!F) die("strategies", "out of memory");
    F->max = top;
    int k = 0;
    for (int i = 0; i < L->n; i++) {
        const tune_curve_point *p = &ts->curve[i];
        if (L->st[i] != p->status || (p->status == TUNE_OK && L->med[i] != p->median))
            die("strategies", "the run's records are not its trials");
        if (p->is_default) {
            c->def = config_index(c, L->cfg[i]);
            continue;
        }
        if (p->status == TUNE_OK) tune_finalists_add(F, L->cfg[i], p->median);
        if (sample && k < SAMPLE_PER_RUN && c->nsample < MAX_SEEDS * SAMPLE_PER_RUN)
            c->sample[c->nsample++] = p->status == TUNE_OK ? config_index(c, L->cfg[i]) : -1;
        for (int j = 0; j < top; j++)
            run->top[k * top + j] = j < F->n ? config_index(c, F->v[j].text) : -1;
        run->at_s[k++] = p->at_s;
    }
    run->np = k;
    free(F);
}

/* The run's pick after k + 1 proposals: the re-timed fastest of its finalists then, or -1. */
static int pick_at(const strat_conv *c, const strat_run *run, int k) {
    int best = -1;
    for (int j = 0; j < run->ntop; j++) {
        const int i = run->top[k * run->ntop + j];
        if (i >= 0 && (best < 0 || c->speed[i] > c->speed[best])) best = i;
    }
    return best;
}

/* The other convs of --prior in c's template: their tasks (ts[0] is c's own, then theirs). */
static int prior_tasks(const opts *o, wpk_context *ctx, const strat_conv *c, conv_task *pt,
                       tune_model_task *ts) {
    ts[0] = c->mt;
    int n = 1;
    for (int ci = 0; o->prior && ci < NCONVS; ci++) {
        if (!selected(o->prior, CONVS[ci].name) || &CONVS[ci] == c->t.spec) continue;
        conv_task_init(&pt[n - 1], &CONVS[ci], false, ctx);
        if (!conv_task_as(&pt[n - 1], c->mt.task.tmpl, &ts[n]))
            die(CONVS[ci].name, "--prior: the compared template does not take this conv");
        n++;
    }
    return n;
}

/* The records the model and ga strategies start from: --prior's convs tuned by random search into
 * prior_db (its own kernel cache), once. */
static void prior_tune(const opts *o, wpk_context *ctx, const tune_model_task *ts, int n,
                       const char *prior_db) {
    char cache[256];
    fresh_cache(cache, sizeof cache, "prior");
    tune_db *db;
    open_db(prior_db, ctx, &db);
    tune_options to = tuner_options("random", o->compare_trials);
    to.seed = 99;
    tune_summary sum;
    double t0 = now();
    if (tune_run(ctx, db, ts + 1, n - 1, &to, &sum)) die("tune_run", wpk_context_error(ctx));
    fprintf(stderr, "prior records: %d convs, %lld trials each, in %.0f s\n", n - 1,
            (long long)o->compare_trials, now() - t0);
    tune_summary_free(&sum);
    tune_db_close(db);
    fresh_cache(cache, sizeof cache, "prior");
    rmdir(cache);
}

static void copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    char buf[1 << 16];
    size_t k;
    bool ok = in && out;
    while (ok && (k = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, k, out) == k;
    if (in) fclose(in);
    if (out && fclose(out) != 0) ok = false;
    if (!ok) die(to, "cannot copy the prior records");
}

/* rl's policy trained on --pretrain-on's convs in c's template, rl for --pretrain-trials
 * trials each from an empty database (seed 99), into `policy`, once per compared conv: the
 * policy the rl-pretrained runs start from. Their records are not passed on (what carries
 * over is the policy alone), and the compared conv is refused: a policy that has seen the
 * measured workload would leak its answer. */
static void pretrain_policy(const opts *o, wpk_context *ctx, const strat_conv *c,
                            const char *db_path, const char *policy) {
    conv_task pt[NCONVS];
    tune_model_task ts[NCONVS];
    int n = 0;
    for (int ci = 0; ci < NCONVS; ci++) {
        if (!selected(o->pretrain_on, CONVS[ci].name)) continue;
        if (&CONVS[ci] == c->t.spec)
            die(CONVS[ci].name, "--pretrain-on names the compared conv (leakage: the policy "
                "would have been trained on the workload it is measured on)");
        conv_task_init(&pt[n], &CONVS[ci], false, ctx);
        if (!conv_task_as(&pt[n], c->mt.task.tmpl, &ts[n]))
            die(CONVS[ci].name, "--pretrain-on: the compared template does not take this conv");
        n++;
    }
    if (!n) die("--pretrain-on", "names no conv of ResNet-18 (c1..c12)");
    char cache[256];
    fresh_cache(cache, sizeof cache, "pretrain");
    tune_db *db;
    open_db(db_path, ctx, &db);
    tune_options to = tuner_options("rl", o->pretrain_trials);
    to.seed = 99;
    to.rl_policy = policy;
    tune_summary sum;
    double t0 = now();
    if (tune_run(ctx, db, ts, n, &to, &sum)) die("tune_run", wpk_context_error(ctx));
    fprintf(stderr, "rl policy pretrained on %d convs (%s), %lld trials each, in %.0f s\n", n,
            o->pretrain_on, (long long)o->pretrain_trials, now() - t0);
    tune_summary_free(&sum);
    tune_db_close(db);
    fresh_cache(cache, sizeof cache, "pretrain");
    rmdir(cache);
    for (int i = 0; i < n; i++) conv_task_free(&pt[i]);
}

/* A run's proposals in the order measured, with the run's own medians (--trace). */
static void trace_run(const char *conv, const char *strategy, int seed, const rec_list *L,
                      const tune_task_summary *ts, double flops) {
    for (int i = 0; i < L->n; i++)
        fprintf(stderr, "trace %s %s seed %d #%d%s %s: %s %.1f GFLOP/s\n", conv, strategy,
                seed, i, ts->curve[i].is_default ? " (default)" : "", L->cfg[i],
                L->st[i] == TUNE_OK ? "ok" : "failed",
                L->st[i] == TUNE_OK && L->med[i] > 0 ? flops / L->med[i] * 1e-9 : 0.0);
}

/* Every strategy --seeds times on each --compare conv, each run from an empty database and
 * an empty kernel cache of its own. Tuning only: it forks, so it runs before this process
 * starts OpenMP threads (strategies_report re-times). */
static void strategies_tune(const opts *o, wpk_context *ctx, strat_job *J) {
    memset(J, 0, sizeof *J);
    snprintf(J->list, sizeof J->list, "%s", o->strategy_list);
    for (char *save = NULL, *p = strtok_r(J->list, ",", &save); p && J->ns < MAX_STRATEGIES;
         p = strtok_r(NULL, ",", &save))
        J->names[J->ns++] = p;
    J->nseeds = (int)o->seeds;
    const char *saved = getenv("WPK_CACHE_DIR");
    char saved_copy[1024] = "";
    if (saved) snprintf(saved_copy, sizeof saved_copy, "%s", saved);
    for (int ci = 0; ci < NCONVS; ci++) {
        if (!selected(o->compare, CONVS[ci].name)) continue;
        strat_conv *c = &J->convs[J->nconv++];
        conv_task_init(&c->t, &CONVS[ci], false, ctx);
        c->mt = c->t.mt;
        const kernel_provider *tm = o->compare_impl ? kernel_provider_find(o->compare_impl) : NULL;
        if (o->compare_impl && (!tm || !conv_task_as(&c->t, tm, &c->mt)))
            die(o->compare_impl, "is not a template that takes this conv");
        tune_space sp;
        c->mt.task.tmpl->space(c->mt.task.tmpl, &c->mt.task, &sp);
        c->space = tune_space_size(&sp);
        conv_task pt[NCONVS];
        tune_model_task tasks[NCONVS + 1];
        const int nts = prior_tasks(o, ctx, c, pt, tasks);
        char prior_db[512];
        temp_db(prior_db, sizeof prior_db, "prior");
        if (nts > 1) prior_tune(o, ctx, tasks, nts, prior_db);
        char pretrain_db[512], pretrained[600];
        temp_db(pretrain_db, sizeof pretrain_db, "pretrain");
        snprintf(pretrained, sizeof pretrained, "%s.rl-policy", pretrain_db);
        bool want_pretrained = false;
        for (int s = 0; s < J->ns; s++) want_pretrained |= !strcmp(J->names[s], PRETRAINED);
        if (want_pretrained && !o->pretrain_on)
            die(PRETRAINED, "needs --pretrain-on: the convs its policy is trained on");
        if (want_pretrained) pretrain_policy(o, ctx, c, pretrain_db, pretrained);
        for (int s = 0; s < J->ns; s++)
            for (int r = 0; r < J->nseeds; r++) {
                char path[512], cache[256], tag[64];
                snprintf(tag, sizeof tag, "%s_%s_%d", CONVS[ci].name, J->names[s], r);
                fresh_cache(cache, sizeof cache, tag);
                temp_db(path, sizeof path, J->names[s]);
                /* the model's and ga's runs: the prior records first (the model learns from
                   all of them, ga starts from each conv's fastest); their convs are finished (as
                   many records as trials), so the run measures c alone */
                const bool with_prior =
                    nts > 1 && (!strcmp(J->names[s], "model") || !strcmp(J->names[s], "ga"));
                if (with_prior) copy_file(prior_db, path);
                /* rl-pretrained: rl from the pretrained policy, a copy per run so that every
                   seed starts from the same one */
                const bool pretrained_run = !strcmp(J->names[s], PRETRAINED);
                char policy[600];
                snprintf(policy, sizeof policy, "%s.rl-policy", path);
                if (pretrained_run) copy_file(pretrained, policy);
                tune_db *db;
                open_db(path, ctx, &db);
                tune_options to =
                    tuner_options(pretrained_run ? "rl" : J->names[s], o->compare_trials);
                to.seed = 7 + (uint64_t)r;
                to.start = o->compare_start;
                tune_summary sum;
                double t0 = now();
                if (tune_run(ctx, db, tasks, with_prior ? nts : 1, &to, &sum))
                    die("tune_run", wpk_context_error(ctx));
                strat_run *run = &c->runs[s][r];
                run->wall = now() - t0;
                const tune_task_summary *ts = &sum.tasks[0];
                if (strcmp(ts->key, c->mt.task.key)) die(ts->key, "is not the compared conv");
                run->failed = ts->measured - ts->by_status[TUNE_OK];
                rec_list L = {0};
                if (tune_db_each(db, target_fingerprint(), ts->key, on_rec, &L))
                    die("records", wpk_context_error(ctx));
                run_path(c, run, ts, &L, to.top, !strcmp(J->names[s], "random"));
                if (o->trace) trace_run(CONVS[ci].name, J->names[s], 7 + r, &L, ts,
                                        flops_of(c->t.spec));
                free(L.cfg), free(L.st), free(L.med);
                tune_db_close(db);
                temp_db(path, sizeof path, tag); /* the database, its journal, rl's policy */
                fresh_cache(cache, sizeof cache, tag); /* empty it again: disk */
                rmdir(cache);
                fprintf(stderr, "%s %s seed %d: %lld trials in %.0f s, %d configs to re-time\n",
                        CONVS[ci].name, J->names[s], 7 + r, (long long)ts->trials, run->wall,
                        c->ncfg);
                tune_summary_free(&sum);
            }
        temp_db(prior_db, sizeof prior_db, "prior"); /* removed */
        temp_db(pretrain_db, sizeof pretrain_db, "pretrain"); /* and the pretrained policy */
        for (int i = 0; i + 1 < nts; i++) conv_task_free(&pt[i]);
    }
    if (saved) setenv("WPK_CACHE_DIR", saved_copy, 1);
    else unsetenv("WPK_CACHE_DIR");
}

/* Every config of c, checked against the reference and timed in one interleaved measurement. */
static void strategies_retime(const opts *o, wpk_context *ctx, int threads, strat_conv *c) {
    char cache[256];
    fresh_cache(cache, sizeof cache, "strat_final");
    const conv_task *t = &c->t;
    float *x = input_for(t);
    void *data[3] = {x, t->w.data, t->b.data};
    kernel *ks = calloc((size_t)c->ncfg, sizeof *ks);
    timed *tm = calloc((size_t)c->ncfg, sizeof *tm);
    c->speed = calloc((size_t)c->ncfg, sizeof *c->speed);
    const int64_t ny = t->spec->k * t->pb.oh * t->pb.oh;
    float *got = alloc64(sizeof(float) * (size_t)ny);
    if (!ks || !tm || !c->speed) die("strategies", "out of memory");
    for (int i = 0; i < c->ncfg; i++) {
        kernel_build(&ks[i], t, &c->mt.task, c->cfg[i], data, ctx);
        kernel_run(&ks[i]);
        kernel_output(&ks[i], t, got);
        if (!(rel_err(got, t->pb.ref, ny) <= TOL)) die(c->cfg[i], "wrong output");
        tm[i] = (timed){.run = kernel_run, .arg = &ks[i]};
    }
    measure(tm, c->ncfg, flops_of(t->spec), threads, o->min_s);
    for (int i = 0; i < c->ncfg; i++) {
        c->speed[i] = median(tm[i].cpu, tm[i].n);
        kernel_free(&ks[i]);
    }
    free(got);
    free(tm);
    free(ks);
    if (x != t->pb.x) free(x);
    fresh_cache(cache, sizeof cache, "strat_final");
    rmdir(cache);
}

/* Proposals (1-based) until the run's pick re-timed within 5% of the bar, or -1. */
static int proposals_to(const strat_conv *c, const strat_run *run, double bar, double *at_s) {
    for (int k = 0; k < run->np; k++) {
        const int p = pick_at(c, run, k);
        if (p >= 0 && c->speed[p] * 1.05 >= bar) {
            *at_s = run->at_s[k];
            return k + 1;
        }
    }
    return -1;
}

static void strategies_report(const opts *o, wpk_context *ctx, int threads, strat_job *J) {
    const int ns = J->ns, nseeds = J->nseeds;
    const char *saved = getenv("WPK_CACHE_DIR");
    char saved_copy[1024] = "";
    if (saved) snprintf(saved_copy, sizeof saved_copy, "%s", saved);
    omp_set_num_threads(threads);
    printf("## Strategies: proposals and wall time to within 5%% of the best found\n\n");
    if (o->compare_start)
        printf("Every run starts from `%s` (--compare-start) instead of the template's default "
               "config: below, \"the default\" is that config.\n\n", o->compare_start);
    printf("Each strategy from an empty database and an empty kernel cache of its own, %lld "
           "trials (the template's default config first, then the strategy's proposals), "
           "seeds 7 to %d (one run each); convs as NCHW FusedConv nodes (the -O2 form, the "
           "larger space); the tuner times by CPU time per thread. A run's finalists after k "
           "proposals are its best %d distinct proposals so far by its own measurements, the "
           "configs the tuner's final re-measurement chooses from had it stopped there (the "
           "default, which the finals re-measure too, left out). Every config that was some "
           "run's finalist is timed again, all in one interleaved measurement (%d threads, "
           "each config %.0f ms), so that the machine's drift between runs does not decide. A "
           "run's pick after k proposals is the re-timed fastest of its finalists then. The "
           "bar: within 5%% of the fastest re-timed config (the best of all %d runs: the long "
           "run). Proposals and seconds to the bar count the strategy's own proposals (the "
           "default left out: it is the same for all); a run that does not reach the bar "
           "counts as its proposals in the mean (a lower bound, marked >=).\n\n",
           (long long)o->compare_trials, 7 + nseeds - 1, tuner_options("random", 1).top,
           threads, o->min_s * 1e3, ns * nseeds);
    for (int ci = 0; ci < J->nconv; ci++) {
        strat_conv *c = &J->convs[ci];
        strategies_retime(o, ctx, threads, c);
        double best = 0;
        int besti = -1;
        for (int s = 0; s < ns; s++)
            for (int r = 0; r < nseeds; r++)
                for (int k = 0; k < c->runs[s][r].np; k++) {
                    int p = pick_at(c, &c->runs[s][r], k);
                    if (p >= 0 && c->speed[p] > best) best = c->speed[p], besti = p;
                }
        const conv_spec *sp = c->t.spec;
        printf("### %s (%lldx%lld %lld->%lld k%lld s%lld), template %s, space of %lld configs\n\n"
               "%d configs re-timed. Best %.1f GFLOP/s (`%s`); bar %.1f GFLOP/s; the default "
               "config %.1f GFLOP/s (`%s`).\n\n",
               sp->name, (long long)sp->hw, (long long)sp->hw, (long long)sp->c,
               (long long)sp->k, (long long)sp->r, (long long)sp->s, c->mt.task.tmpl->name,
               (long long)c->space,
               c->ncfg, best, besti >= 0 ? c->cfg[besti] : "-", best / 1.05,
               c->speed[c->def], c->cfg[c->def]);
        printf("| strategy | best final pick, GFLOP/s re-timed | proposals to the bar, per "
               "seed | mean proposals | mean seconds to the bar | seconds per run | failed |\n"
               "|---|---|---|---|---|---|---|\n");
        double mean_props[MAX_STRATEGIES];
        bool censored[MAX_STRATEGIES];
        for (int s = 0; s < ns; s++) {
            char per[256] = "";
            double sum_p = 0, sum_at = 0, sbest = 0, wall = 0;
            long long failed = 0;
            censored[s] = false;
            for (int r = 0; r < nseeds; r++) {
                const strat_run *run = &c->runs[s][r];
                double at = run->wall;
                int hit = proposals_to(c, run, best, &at);
                size_t l = strlen(per);
                snprintf(per + l, sizeof per - l, "%s%s%d", r ? ", " : "", hit > 0 ? "" : ">",
                         hit > 0 ? hit : run->np);
                if (hit < 0) censored[s] = true;
                sum_p += hit > 0 ? hit : run->np;
                sum_at += at;
                const int last = run->np > 0 ? pick_at(c, run, run->np - 1) : -1;
                if (last >= 0 && c->speed[last] > sbest) sbest = c->speed[last];
                wall += run->wall;
                failed += run->failed;
            }
            mean_props[s] = sum_p / nseeds;
            printf("| %s | %.1f | %s | %s%.1f | %s%.0f | %.0f | %lld |\n", J->names[s], sbest,
                   per, censored[s] ? ">= " : "", mean_props[s], censored[s] ? ">= " : "",
                   sum_at / nseeds, wall / nseeds, failed);
        }
        int ri = -1;
        for (int s = 0; s < ns; s++)
            if (!strcmp(J->names[s], "random")) ri = s;
        if (ri >= 0) {
            printf("\nIssue 5's bar (a strategy's mean proposals <= random's / 5 = %s%.1f):",
                   censored[ri] ? ">= " : "", mean_props[ri] / 5);
            for (int s = 0; s < ns; s++) {
                if (s == ri) continue;
                bool met = !censored[s] && mean_props[s] <= mean_props[ri] / 5;
                /* random's mean is a lower bound when some of its runs did not reach */
                printf(" %s %s%s;", J->names[s], met ? "met" : "not met",
                       !met && censored[ri] && !censored[s] ? " (random's mean is a lower bound)"
                                                            : "");
            }
            printf("\n");
        }
        if (c->nsample) {
            int in = 0;
            for (int i = 0; i < c->nsample; i++)
                in += c->sample[i] >= 0 && c->speed[c->sample[i]] * 1.05 >= best;
            const double need = (double)c->nsample / (in ? in : 1);
            printf("\nA uniform sample of the legal space (the first %d proposals of each random "
                   "run, %d configs, re-timed with the rest): %d within 5%% of the best, so "
                   "random search needs about %s%.1f proposals on average without the noise of "
                   "its picks, and a fifth of that is %s%.1f.\n", SAMPLE_PER_RUN, c->nsample, in,
                   in ? "" : "> ", need, in ? "" : "> ", need / 5);
        }
        printf("\nRe-timed GFLOP/s of each run's pick after every 10th proposal:\n\n");
        for (int s = 0; s < ns; s++)
            for (int r = 0; r < nseeds; r++) {
                const strat_run *run = &c->runs[s][r];
                printf("  %-7s seed %d:", J->names[s], 7 + r);
                for (int k = 9; k < run->np; k += 10) {
                    const int p = pick_at(c, run, k);
                    printf(" %.1f", p >= 0 ? c->speed[p] : 0.0);
                }
                printf("\n");
            }
        printf("\n");
        for (int s = 0; s < ns; s++)
            for (int r = 0; r < nseeds; r++) {
                free(c->runs[s][r].top);
                free(c->runs[s][r].at_s);
            }
        free(c->cfg);
        free(c->speed);
        conv_task_free(&c->t);
    }
    if (saved) setenv("WPK_CACHE_DIR", saved_copy, 1);
    else unsetenv("WPK_CACHE_DIR");
}

/* ---- part: parallel vs serial ---- */

typedef struct par_run {
    bool automatic;
    char load[128];          /* /proc/loadavg before the run */
    double wall;             /* seconds */
    double cpu;              /* CPU seconds of the tuner's children (builds and their
                                compilers, measurements) */
    double best_s;           /* the tuner's best, re-measured alone at the end */
    char best[512];
    tune_parallelism par;
    int64_t measured, failed;
    int timing;              /* its best config's entry in the final timing */
} par_run;

static double children_cpu(void) {
    struct rusage u;
    getrusage(RUSAGE_CHILDREN, &u);
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec +
           (double)u.ru_stime.tv_sec + 1e-6 * (double)u.ru_stime.tv_usec;
}

/* The fixed job once: empty database, empty kernel cache of its own. */
static void parallel_run(const opts *o, wpk_context *ctx, conv_task *t, bool automatic,
                         int round, par_run *r) {
    char path[512], cache[256], tag[64];
    snprintf(tag, sizeof tag, "par%d_%s", round, automatic ? "auto" : "serial");
    fresh_cache(cache, sizeof cache, tag);
    temp_db(path, sizeof path, tag);
    tune_db *db;
    open_db(path, ctx, &db);
    tune_options to = tuner_options("random", o->parallel_trials);
    to.parallel = automatic ? 0 : 1;
    to.batch = 8;
    tune_summary s;
    memset(r, 0, sizeof *r);
    r->automatic = automatic;
    loadavg(r->load, sizeof r->load);
    double c0 = children_cpu(), t0 = now();
    if (tune_run(ctx, db, &t->mt, 1, &to, &s)) die("tune_run", wpk_context_error(ctx));
    r->wall = now() - t0;
    r->cpu = children_cpu() - c0;
    r->best_s = s.tasks[0].best_s;
    snprintf(r->best, sizeof r->best, "%s", s.tasks[0].best_config);
    r->par = s.parallel;
    r->measured = s.tasks[0].measured;
    r->failed = s.tasks[0].measured - s.tasks[0].by_status[TUNE_OK];
    tune_summary_free(&s);
    tune_db_close(db);
    unlink(path);
    fresh_cache(cache, sizeof cache, tag); /* empty it again: disk */
    rmdir(cache);
    fprintf(stderr, "round %d, %s: %.1f s wall, %.1f s CPU, best %.1f GFLOP/s, load %s\n", round,
            automatic ? "auto" : "serial", r->wall, r->cpu,
            r->best_s > 0 ? flops_of(t->spec) / r->best_s * 1e-9 : 0, r->load);
}

/* One fixed tuning job -- random search with a fixed seed: the same configs in the same order
 * -- from empty caches, one build at a time with every measurement alone (--parallel 1:
 * build, measure, build, ...) against the automatic parallelism, in rounds that alternate
 * which goes first (a drift in the machine's load favours neither); then the final kernels of
 * every run timed in one run, alternating, by conv_resnet18.c's measure(). */
static void part_parallel(const opts *o, wpk_context *ctx, int threads) {
    const conv_spec *c = NULL;
    for (int i = 0; i < NCONVS && !c; i++)
        if (!strcmp(CONVS[i].name, o->parallel_conv)) c = &CONVS[i];
    if (!c) die("--parallel-conv", o->parallel_conv);
    if (o->parallel_rounds < 1 || o->parallel_rounds > 8) die("--parallel-rounds", "1 to 8");
    if (o->parallel_trials < 1) die("--parallel-trials", "at least 1");
    conv_task t;
    conv_task_init(&t, c, false, ctx);
    const char *saved = getenv("WPK_CACHE_DIR");
    char saved_copy[1024] = "";
    if (saved) snprintf(saved_copy, sizeof saved_copy, "%s", saved);
    const int nr = 2 * (int)o->parallel_rounds;
    par_run runs[16];
    for (int r = 0; r < (int)o->parallel_rounds; r++)
        for (int k = 0; k < 2; k++) {
            bool automatic = (k == 0) == (r % 2 == 1); /* serial first in even rounds */
            parallel_run(o, ctx, &t, automatic, r, &runs[2 * r + k]);
        }

    /* the final kernels, in this process from here on (every tuning run has forked) */
    char cache[256];
    fresh_cache(cache, sizeof cache, "par_final");
    omp_set_num_threads(threads);
    float *x = input_for(&t);
    void *data[3] = {x, t.w.data, t.b.data};
    kernel ks[16];
    timed tm[16];
    int nk = 0;
    for (int i = 0; i < nr; i++) {
        runs[i].timing = -1;
        if (!runs[i].best[0]) continue;
        for (int j = 0; j < i && runs[i].timing < 0; j++)
            if (!strcmp(runs[j].best, runs[i].best)) runs[i].timing = runs[j].timing;
        if (runs[i].timing >= 0) continue;
        kernel_build(&ks[nk], &t, &t.mt.task, runs[i].best, data, ctx);
        tm[nk] = (timed){.run = kernel_run, .arg = &ks[nk]};
        runs[i].timing = nk++;
    }
    measure(tm, nk, flops_of(c), threads, o->min_s);

    printf("## Parallel vs one-at-a-time measurement\n\n");
    printf("One fixed job: %s as an NCHW FusedConv (template %s), random search with seed 7 (the "
           "same %lld configs in the same order), batches of 8, from an empty database and an "
           "empty kernel cache each run; timed by CPU time per thread. `--parallel 1`: one build "
           "worker, each measurement alone (build, measure, build, ...). `--parallel auto`: one "
           "build worker per core, builds paused while a measurement runs alone, the "
           "measurement level raised while a control kernel re-timed beside the builds stays "
           "within 5%%; the default and the final top 3 re-measured alone, in three "
           "interleaved rounds, either way. %d round%s, alternating which mode goes first. "
           "CPU s: the tuner's child processes (build workers with their compilers, "
           "measurements).\n\n", c->name, t.mt.task.tmpl->name,
           (long long)o->parallel_trials, (int)o->parallel_rounds,
           o->parallel_rounds == 1 ? "" : "s");
    printf("| round | mode | load average before | wall s | CPU s | CPU / wall | failed | best "
           "GFLOP/s (re-measured alone) | best GFLOP/s (final timing, CPU) | build workers | "
           "measurement level | promotions / demotions |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    double wall[2][8], speed[2][8];
    int nw[2] = {0, 0};
    for (int i = 0; i < nr; i++) {
        const par_run *r = &runs[i];
        int m = r->automatic;
        double fin = r->timing >= 0 ? median(tm[r->timing].cpu, tm[r->timing].n) : 0;
        wall[m][nw[m]] = r->wall;
        speed[m][nw[m]++] = fin;
        char load[32];
        snprintf(load, sizeof load, "%.14s", r->load);
        printf("| %d | %s | %s | %.1f | %.1f | %.2f | %lld | %.1f | %.1f | %d | %d | %d / %d |\n",
               i / 2, m ? "--parallel auto" : "--parallel 1", load, r->wall, r->cpu,
               r->cpu / r->wall, (long long)r->failed,
               r->best_s > 0 ? flops_of(c) / r->best_s * 1e-9 : 0, fin, r->par.builds,
               r->par.level, r->par.promotions, r->par.demotions);
    }
    const int rounds = (int)o->parallel_rounds;
    double cut[8], ratio[8], worst_cut = 1, worst_ratio = 1e9;
    for (int r = 0; r < rounds; r++) {
        cut[r] = 1 - wall[1][r] / wall[0][r];
        ratio[r] = speed[0][r] > 0 ? speed[1][r] / speed[0][r] : 0;
        if (cut[r] < worst_cut) worst_cut = cut[r];
        if (ratio[r] < worst_ratio) worst_ratio = ratio[r];
    }
    double med_cut = 1 - median(wall[1], rounds) / median(wall[0], rounds);
    printf("\nWall time cut (1 - auto / serial): median walls %.0f%%", 100 * med_cut);
    for (int r = 0; r < rounds; r++) printf("%s round %d %.0f%%", r ? "," : ";", r, 100 * cut[r]);
    printf(". Final kernel speed, auto / serial (their best configs timed in one run, CPU "
           "time):");
    for (int r = 0; r < rounds; r++) printf("%s round %d %.3f", r ? "," : "", r, ratio[r]);
    printf(".\nIssue 5's bar (cut >= 40%%, final speed within 3%%): %s (median cut %.0f%%, "
           "lowest %.0f%%; lowest speed ratio %.3f).\n\n", med_cut >= 0.4 && worst_ratio >= 0.97
           ? "met" : "NOT met", 100 * med_cut, 100 * worst_cut, worst_ratio);
    printf("Best configs and the final timing's samples (GFLOP/s by CPU time per thread):\n\n");
    for (int k = 0; k < nk; k++) {
        int first = 0;
        while (runs[first].timing != k) first++;
        printf("- `%s`: the best of", runs[first].best);
        for (int i = first, said = 0; i < nr; i++)
            if (runs[i].timing == k)
                printf("%s round %d %s", said++ ? "," : "", i / 2,
                       runs[i].automatic ? "auto" : "serial");
        printf("\n");
        print_samples("cpu", tm[k].cpu, tm[k].n);
        print_samples("wall", tm[k].wall, tm[k].n);
    }
    printf("\n");
    for (int k = 0; k < nk; k++) kernel_free(&ks[k]);
    fresh_cache(cache, sizeof cache, "par_final");
    rmdir(cache);
    if (saved) setenv("WPK_CACHE_DIR", saved_copy, 1);
    else unsetenv("WPK_CACHE_DIR");
    if (x != t.pb.x) free(x);
    conv_task_free(&t);
}

int main(int argc, char **argv) {
    if (!getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "passive", 1);
        execv("/proc/self/exe", argv);
    }
    opts o = {.trials = 48, .compare_trials = 80, .seeds = 1, .parallel_trials = 24,
              .pretrain_trials = 40,
              .parallel_rounds = 1,
              .parallel_conv = "c6", .strategy = "ga",
              .db = "tune_resnet18.db", .compare = "c3,c2",
              .strategy_list = "ga,model,rl,anneal,random,grid", .min_s = 0.3,
              .timing = "auto"};
    const char *parts = "tune,strategies,parallel";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) die("usage", "every option takes a value");
        if (!strcmp(a, "--part")) parts = v;
        else if (!strcmp(a, "--trials")) o.trials = atoll(v);
        else if (!strcmp(a, "--strategy")) o.strategy = v;
        else if (!strcmp(a, "--db")) o.db = v;
        else if (!strcmp(a, "--only")) o.only = v;
        else if (!strcmp(a, "--min-ms")) o.min_s = atof(v) * 1e-3;
        else if (!strcmp(a, "--timing")) o.timing = v;
        else if (!strcmp(a, "--parallel")) o.tune_parallel = strcmp(v, "auto") ? atoi(v) : 0;
        else if (!strcmp(a, "--compare")) o.compare = v;
        else if (!strcmp(a, "--compare-trials")) o.compare_trials = atoll(v);
        else if (!strcmp(a, "--compare-impl")) o.compare_impl = v;
        else if (!strcmp(a, "--compare-start")) o.compare_start = v;
        else if (!strcmp(a, "--prior")) o.prior = v;
        else if (!strcmp(a, "--pretrain-on")) o.pretrain_on = v;
        else if (!strcmp(a, "--pretrain-trials")) o.pretrain_trials = atoll(v);
        else if (!strcmp(a, "--trace")) o.trace = strcmp(v, "0") != 0;
        else if (!strcmp(a, "--seeds")) o.seeds = atoll(v);
        else if (!strcmp(a, "--strategies")) o.strategy_list = v;
        else if (!strcmp(a, "--parallel-trials")) o.parallel_trials = atoll(v);
        else if (!strcmp(a, "--parallel-rounds")) o.parallel_rounds = atoll(v);
        else if (!strcmp(a, "--parallel-conv")) o.parallel_conv = v;
        else die("unknown option", a);
        i++;
    }
    if (o.seeds < 1 || o.seeds > MAX_SEEDS) die("--seeds", "takes 1 to 8 runs per strategy");
    if (strcmp(o.timing, "auto") && strcmp(o.timing, "cold") && strcmp(o.timing, "warm"))
        die("--timing", "takes auto, cold or warm");
    o.tune = strstr(parts, "tune") != NULL;
    o.strategies = strstr(parts, "strategies") != NULL;
    o.parallel = strstr(parts, "parallel") != NULL;
    int threads = omp_get_max_threads();
    omp_set_num_threads(1); /* no OpenMP thread before the tuner forks */
    wpk_context *ctx = wpk_context_create();
    char commit[64], cc[256], cpu[256], load0[128], load1[128];
    first_line("git describe --always --dirty --abbrev=7 2>/dev/null", commit, sizeof commit);
    first_line("cc --version 2>/dev/null", cc, sizeof cc);
    cpu_model(cpu, sizeof cpu);
    loadavg(load0, sizeof load0);
    double t0 = now();
    printf("# wpk tune: ResNet-18 convolutions at batch 1\n\n");
    tuned T;
    memset(&T, 0, sizeof T);
    if (o.tune) part_tune(&o, ctx, &T);
    strat_job *S = o.strategies ? calloc(1, sizeof *S) : NULL;
    if (S) strategies_tune(&o, ctx, S);
    if (o.parallel) part_parallel(&o, ctx, threads);
    if (S) strategies_report(&o, ctx, threads, S);
    free(S);
    if (o.tune) part_compare(&o, ctx, threads, &T);
    loadavg(load1, sizeof load1);
    const dnnl_version_t *dv = dnnl_version();
    printf("## Provenance\n\n- commit %s; bench by gcc %s; kernels by %s\n- CPU %s, %d logical "
           "CPUs, %d kernel threads; OMP_WAIT_POLICY=%s; load average before %s, after %s\n- "
           "oneDNN %d.%d.%d, convolution_auto, formats any, bias + ReLU post-op, reorders "
           "outside the timed region\n- final timing: conv_resnet18.c's measure(): warm-up, then "
           "alternating ~%.0f ms samples until each ran %.0f ms; the tuner: TUNE_CLOCK_CPU, "
           "min_repeat 50 ms\n- total bench time %.0f s\n", commit, __VERSION__,
           tune_toolchain(), cpu, omp_get_num_procs(), threads, getenv("OMP_WAIT_POLICY"), load0,
           load1, dv->major, dv->minor, dv->patch, SAMPLE_S * 1e3, o.min_s * 1e3, now() - t0);
    wpk_context_free(ctx);
    return 0;
}
