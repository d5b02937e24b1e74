/* bench_conv_cuda.c -- the twelve ResNet-18 convolutions at batch 1 on a GPU: the conv2d_cuda
 * template tuned by a search strategy (default "ga", Woodpecker-DL's) against the best cuDNN
 * forward algorithm, measured in the same run with CUDA events (median of the samples), every
 * wpk candidate checked against cuDNN's output before it may win. Prints a table (per conv:
 * cuDNN's best algorithm and time, wpk's best config and time, the ratio) and the geometric mean
 * of the ratios; --json FILE writes every sample with the provenance (commit, GPU, driver,
 * NVRTC, cuDNN, options). Exits 77 without a GPU.
 *
 * Both sides are timed as replays of a CUDA Graph that holds the sample's launches (captured
 * once): what a caller replaying a captured plan pays, without the host's per-call cost (for
 * cuDNN, the planning its legacy API does in every call); --launches times direct launches.
 * Candidates are compiled (NVRTC) in parallel, a proposal batch at a time.
 *
 *   bench_conv_cuda [--trials N] [--strategy ga|random|anneal|...] [--only I] [--json FILE]
 *                   [--tf32] [--flush-l2] [--launches]
 */
#define _DEFAULT_SOURCE

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/context.h"
#include "codegen/cuda/cg_cuda.h"
#include "conv_problem.h"
#include "loop/lower.h"
#include "kernels/vendor/cuda_libs.h"
#include "runtime/cuda/cuda_rt.h"
#include "tune/strategy.h"
#include "kernels/conv2d_cuda.h"

#define SAMPLES 10
#define BATCH 8 /* configs proposed at a time */

typedef struct workload {
    const char *name;
    int64_t h, c, k, r, stride, pad;
} workload;

/* (input size, in channels, out channels, kernel, stride, pad) of ResNet-18's convolutions */
static const workload WORKLOADS[] = {
    {"conv1 7x7/2", 224, 3, 64, 7, 2, 3},   {"56 3x3 64", 56, 64, 64, 3, 1, 1},
    {"56 1x1 64", 56, 64, 64, 1, 1, 0},     {"56 3x3/2 128", 56, 64, 128, 3, 2, 1},
    {"56 1x1/2 128", 56, 64, 128, 1, 2, 0}, {"28 3x3 128", 28, 128, 128, 3, 1, 1},
    {"28 3x3/2 256", 28, 128, 256, 3, 2, 1}, {"28 1x1/2 256", 28, 128, 256, 1, 2, 0},
    {"14 3x3 256", 14, 256, 256, 3, 1, 1},  {"14 3x3/2 512", 14, 256, 512, 3, 2, 1},
    {"14 1x1/2 512", 14, 256, 512, 1, 2, 0}, {"7 3x3 512", 7, 512, 512, 3, 1, 1},
};
#define NWORK ((int)(sizeof WORKLOADS / sizeof WORKLOADS[0]))

static rt_cuda *dev;
static cg_cuda_compile_options copt;
static rt_cuda_measure meas;

static double median(double *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1], v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct cudnn_job {
    rt_cudnn_conv *conv;
    int algo;
    uint64_t x, w, y;
} cudnn_job;

static wpk_status run_cudnn(void *user, rt_cuda *d) {
    (void)d;
    cudnn_job *j = user;
    return rt_cudnn_conv_run(j->conv, j->algo, j->x, j->w, 0, 0, j->y);
}

typedef struct kernel_job {
    rt_cuda_kernel *k;
    uint64_t args[3];
} kernel_job;

static wpk_status run_kernel(void *user, rt_cuda *d) {
    kernel_job *j = user;
    return rt_cuda_kernel_launch(d, j->k, j->args, 3);
}

/* A candidate compiled (in parallel with the batch's others) and waiting to be measured. */
typedef struct compiled {
    tune_result r; /* TUNE_OK until something fails */
    cg_cuda_image img;
    cg_cuda_launch L;
} compiled;

/* Build, lower, emit and compile one config; thread-safe (its own contexts). */
static void compile_config(const tune_task *task, const tune_space *sp, const tune_config *cfg,
                           compiled *out) {
    memset(out, 0, sizeof *out);
    out->r.status = TUNE_COMPILE_ERROR;
    wpk_context *ctx = wpk_context_create();
    te_ctx c;
    te_ctx_init(&c, ctx);
    tune_build b;
    loop_func *f = NULL;
    strbuf sb = {0};
    if (tune_conv2d_cuda.build(&tune_conv2d_cuda, &c, task, sp, cfg, &b) != WPK_OK)
        out->r.status = TUNE_INVALID;
    else if (loop_lower(&c, b.schedule, "conv", b.args, b.nargs, &f) == WPK_OK &&
             cg_cuda_emit(ctx, f, NULL, &sb, &out->L) == WPK_OK &&
             cg_cuda_compile(ctx, sb.s, &copt, &out->img) == WPK_OK)
        out->r.status = TUNE_OK;
    sb_free(&sb);
    te_ctx_free(&c);
    wpk_context_free(ctx);
}

/* Load a compiled candidate, check it against want (device output of cuDNN, host copy) and
 * time it. */
static tune_result measure_config(compiled *cp, uint64_t dx, uint64_t dw, uint64_t dy,
                                  const float *want, float *got, int64_t ny, double *samples) {
    tune_result r = cp->r;
    rt_cuda_kernel *k = NULL;
    if (r.status != TUNE_OK) goto out;
    r.status = TUNE_COMPILE_ERROR;
    rt_cuda_dims dims;
    for (int i = 0; i < 3; i++) dims.grid[i] = cp->L.grid[i], dims.block[i] = cp->L.block[i];
    dims.shared_bytes = cp->L.shared_bytes;
    if (rt_cuda_kernel_load(dev, cp->img.data, cp->img.size, "conv", &dims, &k) != WPK_OK) {
        r.status = rt_cuda_last_fault(dev) == RT_CUDA_FAULT_CONFIG ? TUNE_INVALID : TUNE_COMPILE_ERROR;
        goto out;
    }
    kernel_job j = {k, {dx, dw, dy}}; /* the kernel's arguments: x, w, y (no bias) */
    if (rt_cuda_memset_async(dev, dy, 0xff, (size_t)ny * 4) || run_kernel(&j, dev) ||
        rt_cuda_sync(dev, 0) || rt_cuda_download(dev, got, dy, (size_t)ny * 4)) {
        r.status = rt_cuda_last_fault(dev) == RT_CUDA_FAULT_TIMEOUT ? TUNE_TIMEOUT : TUNE_CRASH;
        goto out;
    }
    if (!close_all(got, want, ny, "candidate")) {
        r.status = TUNE_WRONG_RESULT;
        goto out;
    }
    if (rt_cuda_time(dev, run_kernel, &j, &meas, samples) != WPK_OK) {
        r.status = rt_cuda_last_fault(dev) == RT_CUDA_FAULT_TIMEOUT ? TUNE_TIMEOUT : TUNE_CRASH;
        goto out;
    }
    double tmp[SAMPLES];
    memcpy(tmp, samples, sizeof tmp);
    r.status = TUNE_OK;
    r.seconds = median(tmp, SAMPLES);
out:
    rt_cuda_kernel_free(k);
    cg_cuda_image_free(&cp->img);
    return r;
}

static void git_commit(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown");
    FILE *p = popen("git rev-parse --short HEAD 2>/dev/null", "r");
    if (!p) return;
    if (fgets(buf, (int)cap, p)) buf[strcspn(buf, "\n")] = '\0';
    pclose(p);
}

int main(int argc, char **argv) {
    int trials = 200, only = -1;
    const char *strategy = "ga", *json = NULL;
    bool tf32 = false;
    meas = rt_cuda_default_measure();
    meas.repeat = SAMPLES;
    meas.graph = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--trials") && i + 1 < argc) trials = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--strategy") && i + 1 < argc) strategy = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "--tf32")) tf32 = true;
        else if (!strcmp(argv[i], "--flush-l2")) meas.flush_l2 = true;
        else if (!strcmp(argv[i], "--launches")) meas.graph = false;
        else {
            fprintf(stderr, "usage: %s [--trials N] [--strategy S] [--only I] [--json FILE] "
                    "[--tf32] [--flush-l2] [--launches]\n", argv[0]);
            return 1;
        }
    }
    wpk_context *ctx = wpk_context_create();
    rt_cuda_info info;
    if (rt_cuda_probe(ctx, 0, &info) != WPK_OK || cg_cuda_nvrtc_available(ctx) != WPK_OK) {
        printf("SKIP: %s\n", wpk_context_error(ctx));
        return 77;
    }
    if (rt_cuda_open(ctx, 0, &dev) != WPK_OK) {
        fprintf(stderr, "%s\n", wpk_context_error(ctx));
        return 1;
    }
    copt = cg_cuda_default_compile_options();
    copt.sm = info.sm;
    copt.cubin = true;
    char commit[64];
    git_commit(commit, sizeof commit);
    size_t dnn = rt_cudnn_version(ctx);
    printf("wpk %s | %s sm_%d, %d SMs, driver %d | NVRTC %d (cubin sm_%d) | cuDNN %zu (%s math) | "
           "strategy %s, %d trials per conv | median of %d samples, CUDA events%s%s\n",
           commit, info.name, info.sm, info.sm_count, info.driver_version, cg_cuda_nvrtc_version(),
           info.sm, dnn, tf32 ? "TF32" : "FMA", strategy, trials, SAMPLES,
           meas.flush_l2 ? ", L2 flushed" : "",
           meas.graph && !meas.flush_l2 ? ", launches replayed from a CUDA Graph"
                                        : ", direct launches");
    printf("%-14s %-22s %10s %10s %7s  %s\n", "conv", "cuDNN best", "cuDNN us", "wpk us", "ratio",
           "wpk config");
    FILE *js = json ? fopen(json, "w") : NULL;
    if (js)
        fprintf(js, "{\"commit\": \"%s\", \"gpu\": \"%s\", \"sm\": %d, \"driver\": %d, \"nvrtc\": %d, "
                "\"cudnn\": %zu, \"strategy\": \"%s\", \"trials\": %d, \"tf32\": %s, "
                "\"flush_l2\": %s, \"graph\": %s, \"convs\": [\n", commit, info.name, info.sm,
                info.driver_version, cg_cuda_nvrtc_version(), dnn, strategy, trials,
                tf32 ? "true" : "false", meas.flush_l2 ? "true" : "false",
                meas.graph && !meas.flush_l2 ? "true" : "false");
    double log_sum = 0;
    int counted = 0;
    for (int wi = 0; wi < NWORK; wi++) {
        if (only >= 0 && wi != only) continue;
        const workload *wl = &WORKLOADS[wi];
        conv_case cc = {wl->name, "Conv", 1, wl->c, wl->h, wl->h, wl->k, wl->r, wl->r, wl->stride,
                        1, 1, {wl->pad, wl->pad, wl->pad, wl->pad}, false, false, NULL,
                        {NULL, NULL, NULL}};
        problem p;
        if (!problem_init(&p, &cc, ctx)) return 1;
        ir_tensor *in[4] = {p.in[0], p.in[1], NULL, NULL};
        uint64_t dx, dw, dy;
        size_t xb = (size_t)ir_numel(p.in[0]) * 4, wb = (size_t)ir_numel(p.in[1]) * 4;
        if (rt_cuda_alloc(dev, xb, &dx) || rt_cuda_alloc(dev, wb, &dw) ||
            rt_cuda_alloc(dev, (size_t)p.ny * 4, &dy) || rt_cuda_upload(dev, dx, p.in[0]->data, xb) ||
            rt_cuda_upload(dev, dw, p.in[1]->data, wb)) {
            fprintf(stderr, "%s\n", wpk_context_error(ctx));
            return 1;
        }
        /* cuDNN: every algorithm, the best one */
        rt_conv_desc d = {.n = 1, .c = wl->c, .h = wl->h, .w = wl->h, .k = wl->k, .kh = wl->r,
                          .kw = wl->r, .stride = {wl->stride, wl->stride},
                          .pad = {wl->pad, wl->pad, wl->pad, wl->pad}, .dilation = {1, 1},
                          .groups = 1, .tf32 = tf32};
        rt_cudnn_conv *conv = NULL;
        double dnn_best = INFINITY, dnn_samples[SAMPLES], samples[SAMPLES];
        int dnn_algo = -1;
        float *got = nans(p.ny);
        if (rt_cudnn_conv_create(dev, &d, &conv) == WPK_OK) {
            int algos[16], n = rt_cudnn_conv_algos(conv, algos, 16);
            for (int a = 0; a < n && a < 16; a++) {
                cudnn_job j = {conv, algos[a], dx, dw, dy};
                if (run_cudnn(&j, dev) || rt_cuda_download(dev, got, dy, (size_t)p.ny * 4) ||
                    !close_all(got, p.want, p.ny, rt_cudnn_algo_name(algos[a])))
                    continue;
                wpk_status st = rt_cuda_time(dev, run_cudnn, &j, &meas, samples);
                if (st && meas.graph && !rt_cuda_lost(dev)) {
                    /* an algorithm that cannot be captured is timed on direct launches */
                    fprintf(stderr, "%s, %s: not captured (%s): timed on direct launches\n",
                            wl->name, rt_cudnn_algo_name(algos[a]), wpk_context_error(ctx));
                    rt_cuda_measure direct = meas;
                    direct.graph = false;
                    st = rt_cuda_time(dev, run_cudnn, &j, &direct, samples);
                }
                if (st) continue;
                double tmp[SAMPLES];
                memcpy(tmp, samples, sizeof tmp);
                double med = median(tmp, SAMPLES);
                if (js)
                    fprintf(js, "  {\"conv\": \"%s\", \"provider\": \"cudnn\", \"algo\": \"%s\", "
                            "\"median_s\": %.9g}%s\n", wl->name, rt_cudnn_algo_name(algos[a]), med,
                            ",");
                if (med < dnn_best) {
                    dnn_best = med, dnn_algo = algos[a];
                    memcpy(dnn_samples, samples, sizeof samples);
                }
            }
        } else {
            fprintf(stderr, "%s: cuDNN: %s\n", wl->name, wpk_context_error(ctx));
        }
        /* wpk: the template searched by the strategy */
        tune_task task;
        tune_task_init(&task, &tune_conv2d_cuda, p.node, in, p.out);
        tune_space sp;
        tune_conv2d_cuda.space(&tune_conv2d_cuda, &task, &sp);
        /* configs over the template's limits come back TUNE_INVALID from build at once */
        tune_strategy_params sparams = {.seed = 1, .budget = trials};
        tune_strategy *s = tune_strategy_create(ctx, strategy, &sp, &sparams);
        if (!s) {
            fprintf(stderr, "strategy: %s\n", wpk_context_error(ctx));
            return 1;
        }
        tune_config cfgs[BATCH], best_cfg;
        tune_result res[BATCH], best = {TUNE_INVALID, 0};
        double best_samples[SAMPLES] = {0};
        compiled cps[BATCH];
        tune_conv2d_cuda.default_config(&tune_conv2d_cuda, &task, &sp, &cfgs[0]);
        compile_config(&task, &sp, &cfgs[0], &cps[0]);
        res[0] = measure_config(&cps[0], dx, dw, dy, p.want, got, p.ny, samples);
        tune_strategy_tell(s, cfgs, res, 1);
        if (res[0].status == TUNE_OK) best = res[0], best_cfg = cfgs[0], memcpy(best_samples, samples, sizeof samples);
        for (int done = 1; done < trials;) {
            int n = tune_strategy_propose(s, cfgs, trials - done < BATCH ? trials - done : BATCH);
            if (n <= 0) break;
#pragma omp parallel for schedule(dynamic, 1)
            for (int i = 0; i < n; i++) compile_config(&task, &sp, &cfgs[i], &cps[i]);
            for (int i = 0; i < n; i++) {
                res[i] = measure_config(&cps[i], dx, dw, dy, p.want, got, p.ny, samples);
                if (res[i].status == TUNE_OK && (best.status != TUNE_OK || res[i].seconds < best.seconds)) {
                    best = res[i], best_cfg = cfgs[i];
                    memcpy(best_samples, samples, sizeof samples);
                }
                if (rt_cuda_lost(dev)) {
                    fprintf(stderr, "the device context was lost (%s): stopping\n",
                            rt_cuda_fault_name(rt_cuda_last_fault(dev)));
                    return 2;
                }
            }
            tune_strategy_tell(s, cfgs, res, n);
            done += n;
        }
        strbuf cs = {0};
        if (best.status == TUNE_OK) tune_config_print(&sp, &best_cfg, &cs);
        double ratio = best.status == TUNE_OK && dnn_algo >= 0 ? dnn_best / best.seconds : NAN;
        printf("%-14s %-22s %10.1f %10.1f %6.2fx  %s\n", wl->name,
               dnn_algo >= 0 ? rt_cudnn_algo_name(dnn_algo) : "-", dnn_best * 1e6,
               best.status == TUNE_OK ? best.seconds * 1e6 : NAN, ratio, cs.s ? cs.s : "-");
        fflush(stdout);
        if (ratio == ratio) log_sum += log(ratio), counted++;
        if (js) {
            fprintf(js, "  {\"conv\": \"%s\", \"cudnn_algo\": \"%s\", \"cudnn_samples_s\": [", wl->name,
                    dnn_algo >= 0 ? rt_cudnn_algo_name(dnn_algo) : "");
            for (int i = 0; i < SAMPLES; i++) fprintf(js, "%s%.9g", i ? ", " : "", dnn_samples[i]);
            fprintf(js, "], \"wpk_config\": \"%s\", \"wpk_samples_s\": [", cs.s ? cs.s : "");
            for (int i = 0; i < SAMPLES; i++) fprintf(js, "%s%.9g", i ? ", " : "", best_samples[i]);
            fprintf(js, "], \"ratio\": %.6g}%s\n", ratio, wi + 1 < NWORK && only < 0 ? "," : "");
        }
        sb_free(&cs);
        tune_strategy_free(s);
        rt_cudnn_conv_free(conv);
        rt_cuda_free(dev, dx), rt_cuda_free(dev, dw), rt_cuda_free(dev, dy);
        free(got);
        problem_free(&p);
    }
    if (counted) printf("geometric mean of cuDNN / wpk over %d convs: %.3fx\n", counted,
                        exp(log_sum / counted));
    if (js) fprintf(js, "]}\n"), fclose(js);
    rt_cuda_close(dev);
    wpk_context_free(ctx);
    return 0;
}
