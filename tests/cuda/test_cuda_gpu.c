/* test_cuda_gpu.c -- the CUDA target on a GPU: every conv case of conv_problem.h under the
 * conv2d_cuda template's default, hand-picked and random configs, and a hand-built elementwise
 * kernel with float4 accesses, built -> lowered -> emitted -> NVRTC (a cubin for the
 * device's own SM) -> loaded -> launched, compared with the CPU reference (tolerance TOL of
 * conv_problem.h); cuDNN's forward convolution with every algorithm it offers (FMA math, fused
 * bias + residual + ReLU where the case has them) and cuBLAS sgemm against the same references;
 * on-device timing with CUDA events; out-of-memory and invalid launches classified as such; the
 * watchdog stopping a kernel that never ends (last: it loses the context).
 * Without a GPU it prints "SKIP: no CUDA device: <reason>" and exits 77 (ctest: skipped).
 * WPK_TEST_SEED changes the random configs; WPK_GPU_RANDOM_CONFIGS their number (default 4). */
#define _DEFAULT_SOURCE

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "../unit/check.h"
#include "base/alloc.h"
#include "base/context.h"
#include "codegen/cuda/cg_cuda.h"
#include "conv_problem.h"
#include "loop/lower.h"
#include "kernels/vendor/cuda_libs.h"
#include "runtime/cuda/cuda_rt.h"
#include "te/schedule.h"
#include "kernels/conv2d_cuda.h"

static rt_cuda *dev;
static cg_cuda_compile_options copt;
static int kernels_run, cudnn_runs;

/* Compile, load and run kernel f: args[i] is the host data of f->args[i] (inputs uploaded,
 * outputs downloaded into it). */
static bool run_on_gpu(wpk_context *ctx, const loop_func *f, void *const *args, const char *what) {
    strbuf sb = {0};
    cg_cuda_launch L;
    wpk_status st = cg_cuda_emit(ctx, f, NULL, &sb, &L);
    if (st) {
        fprintf(stderr, "%s: emit: %s\n", what, wpk_context_error(ctx));
        CHECK(st == WPK_OK);
        sb_free(&sb);
        return false;
    }
    cg_cuda_image img;
    st = cg_cuda_compile(ctx, sb.s, &copt, &img);
    if (st) {
        fprintf(stderr, "%s: NVRTC: %s\n", what, wpk_context_error(ctx));
        CHECK(st == WPK_OK);
        sb_free(&sb);
        return false;
    }
    rt_cuda_dims dims;
    for (int i = 0; i < 3; i++) dims.grid[i] = L.grid[i], dims.block[i] = L.block[i];
    dims.shared_bytes = L.shared_bytes;
    rt_cuda_kernel *k = NULL;
    st = rt_cuda_kernel_load(dev, img.data, img.size, f->name, &dims, &k);
    if (st) fprintf(stderr, "%s: load: %s\n", what, wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    uint64_t dptr[32] = {0};
    bool ok = st == WPK_OK && f->nargs <= 32;
    for (int i = 0; ok && i < f->nargs; i++) {
        size_t bytes = (size_t)f->args[i]->size * 4;
        ok = rt_cuda_alloc(dev, bytes, &dptr[i]) == WPK_OK;
        if (ok && i < f->ninputs) ok = rt_cuda_upload(dev, dptr[i], args[i], bytes) == WPK_OK;
        else if (ok) ok = rt_cuda_memset_async(dev, dptr[i], 0xff, bytes) == WPK_OK; /* NaN */
    }
    if (ok) ok = rt_cuda_kernel_launch(dev, k, dptr, f->nargs) == WPK_OK && rt_cuda_sync(dev, 0) == WPK_OK;
    for (int i = f->ninputs; ok && i < f->nargs; i++)
        ok = rt_cuda_download(dev, args[i], dptr[i], (size_t)f->args[i]->size * 4) == WPK_OK;
    if (!ok) fprintf(stderr, "%s: run: %s\n", what, wpk_context_error(ctx));
    CHECK(ok);
    for (int i = 0; i < f->nargs; i++) rt_cuda_free(dev, dptr[i]);
    rt_cuda_kernel_free(k);
    cg_cuda_image_free(&img);
    sb_free(&sb);
    kernels_run += ok;
    return ok;
}

/* ---- float4 accesses on real memory ---- */

/* y[4q .. 4q+3] = 2 x[..] + 1 for quads q = bx * 128 + tx < nq: 16-byte loads and stores. */
static void test_elementwise(wpk_context *ctx) {
    const int64_t n = 100000, nq = n / 4;
    te_ctx c;
    te_ctx_init(&c, ctx);
    loop_buffer *X = loop_buffer_new(&c, "x", TE_F32, 1, &n, LOOP_SCOPE_ARG);
    loop_buffer *Y = loop_buffer_new(&c, "y", TE_F32, 1, &n, LOOP_SCOPE_ARG);
    const int64_t blocks = (nq + 127) / 128;
    te_iter *bx = te_iter_new(&c, "bx", TE_ITER_LOOP, 0, blocks);
    te_iter *tx = te_iter_new(&c, "tx", TE_ITER_LOOP, 0, 128);
    const te_expr *q = te_add(&c, te_mul(&c, te_var(&c, bx), te_int(&c, 128)), te_var(&c, tx));
    const te_expr *r = te_ramp(&c, te_mul(&c, q, te_int(&c, 4)), te_int(&c, 1), 4);
    const te_expr *v = te_add(&c, te_mul(&c, loop_load(&c, X, r), te_broadcast(&c, te_float(&c, 2), 4)),
                              te_broadcast(&c, te_float(&c, 1), 4));
    const loop_stmt *s = loop_if(&c, te_cmp(&c, TE_LT, q, te_int(&c, nq)), loop_store(&c, Y, r, v), NULL);
    s = loop_for(&c, tx, te_int(&c, 0), te_int(&c, 128), LOOP_BIND, s);
    ((loop_stmt *)s)->bind_tag = "threadIdx.x";
    s = loop_for(&c, bx, te_int(&c, 0), te_int(&c, blocks), LOOP_BIND, s);
    ((loop_stmt *)s)->bind_tag = "blockIdx.x";
    loop_buffer *args[] = {X, Y};
    loop_func f = {"elementwise", args, 2, 1, s};
    float *x = randoms(n), *y = nans(n), *want = nans(n);
    for (int64_t i = 0; i < n; i++) want[i] = 2 * x[i] + 1;
    if (run_on_gpu(ctx, &f, (void *[]){x, y}, "elementwise")) CHECK(close_all(y, want, n, "elementwise"));
    free(x), free(y), free(want);
    te_ctx_free(&c);
}

/* ---- the conv template ---- */

static bool conv_config(wpk_context *ctx, const conv_case *cc, problem *p, const tune_task *task,
                        const tune_space *sp, const tune_config *cfg, bool must_build) {
    strbuf cs = {0};
    tune_config_print(sp, cfg, &cs);
    char what[512];
    snprintf(what, sizeof what, "%s [%s]", cc->name, cs.s ? cs.s : "");
    sb_free(&cs);
    te_ctx c;
    te_ctx_init(&c, ctx);
    tune_build b;
    wpk_status st = tune_conv2d_cuda.build(&tune_conv2d_cuda, &c, task, sp, cfg, &b);
    if (st) {
        if (must_build) CHECK(st == WPK_OK);
        te_ctx_free(&c);
        return false;
    }
    void *args[TUNE_MAX_ARGS * 2];
    int ai = 0;
    for (int i = 0; i < task->nin && ai < b.ninputs; i++)
        if (p->in[i]) args[ai++] = p->in[i]->data;
    float *y = p->t[4].data;
    args[ai] = y;
    loop_func *f = NULL;
    CHECK(loop_lower(&c, b.schedule, "conv2d_cuda", b.args, b.nargs, &f) == WPK_OK);
    if (f && run_on_gpu(ctx, f, args, what)) CHECK(close_all(y, p->want, p->ny, what));
    te_ctx_free(&c);
    return true;
}

/* cuDNN on the same conv: every algorithm it offers must match the reference. */
static void conv_cudnn(wpk_context *ctx, const conv_case *cc, problem *p) {
    if (cc->act && strcmp(cc->act, "Relu")) return; /* cuDNN fuses ReLU only */
    rt_conv_desc d = {.n = cc->n, .c = cc->c, .h = cc->h, .w = cc->w, .k = cc->k, .kh = cc->kh,
                      .kw = cc->kw, .stride = {cc->stride, cc->stride},
                      .pad = {cc->pads[0], cc->pads[1], cc->pads[2], cc->pads[3]},
                      .dilation = {cc->dil, cc->dil}, .groups = cc->group, .bias = cc->bias,
                      .residual = cc->residual, .relu = cc->act != NULL};
    rt_cudnn_conv *conv = NULL;
    wpk_status st = rt_cudnn_conv_create(dev, &d, &conv);
    if (st == WPK_ERR_UNSUPPORTED) {
        fprintf(stderr, "%s: cuDNN declines: %s\n", cc->name, wpk_context_error(ctx));
        return;
    }
    CHECK(st == WPK_OK);
    if (st) return;
    const ir_tensor *in[4] = {p->in[0], p->in[1], p->in[2], p->in[3]};
    uint64_t dp[5] = {0};
    for (int i = 0; i < 4; i++)
        if (in[i]) {
            size_t bytes = (size_t)ir_numel(in[i]) * 4;
            CHECK(rt_cuda_alloc(dev, bytes, &dp[i]) == WPK_OK);
            CHECK(rt_cuda_upload(dev, dp[i], in[i]->data, bytes) == WPK_OK);
        }
    CHECK(rt_cuda_alloc(dev, (size_t)p->ny * 4, &dp[4]) == WPK_OK);
    int algos[16];
    int n = rt_cudnn_conv_algos(conv, algos, 16);
    CHECK(n > 0);
    for (int a = 0; a < n && a < 16; a++) {
        char what[256];
        snprintf(what, sizeof what, "%s [cuDNN %s]", cc->name, rt_cudnn_algo_name(algos[a]));
        CHECK(rt_cuda_memset_async(dev, dp[4], 0xff, (size_t)p->ny * 4) == WPK_OK);
        st = rt_cudnn_conv_run(conv, algos[a], dp[0], dp[1], dp[2], dp[3], dp[4]);
        if (st == WPK_ERR_UNSUPPORTED) continue; /* offered by the heuristics, refused at run */
        if (st) fprintf(stderr, "%s: %s\n", what, wpk_context_error(ctx));
        CHECK(st == WPK_OK);
        float *y = p->t[4].data;
        CHECK(rt_cuda_download(dev, y, dp[4], (size_t)p->ny * 4) == WPK_OK);
        CHECK(close_all(y, p->want, p->ny, what));
        cudnn_runs++;
    }
    for (int i = 0; i < 5; i++) rt_cuda_free(dev, dp[i]);
    rt_cudnn_conv_free(conv);
}

static void test_convs(wpk_context *ctx) {
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    const char *seed = getenv("WPK_TEST_SEED");
    if (seed) rng ^= strtoull(seed, NULL, 10) * 0x2545f4914f6cdd1dull;
    const char *nr = getenv("WPK_GPU_RANDOM_CONFIGS");
    int nrandom = nr ? atoi(nr) : 4;
    for (int i = 0; i < NCASES; i++) {
        const conv_case *cc = &CASES[i];
        problem p;
        tune_task task;
        tune_space sp;
        if (!problem_task_init(&p, cc, ctx, &task, &sp)) {
            CHECK(!"problem_init");
            continue;
        }
        tune_config cfg;
        tune_conv2d_cuda.default_config(&tune_conv2d_cuda, &task, &sp, &cfg);
        conv_config(ctx, cc, &p, &task, &sp, &cfg, true);
        for (int k = 0; k < 3 && cc->configs[k]; k++)
            if (tune_config_parse(ctx, &sp, cc->configs[k], &cfg) == WPK_OK)
                conv_config(ctx, cc, &p, &task, &sp, &cfg, true);
        for (int r = 0, tries = 0; r < nrandom && tries < 100; tries++) {
            tune_config_random(&sp, &rng, &cfg);
            if (conv_config(ctx, cc, &p, &task, &sp, &cfg, false)) r++;
        }
        conv_cudnn(ctx, cc, &p);
        problem_free(&p);
    }
}

/* ---- cuBLAS ---- */

static void test_cublas(wpk_context *ctx) {
    rt_cublas *b = NULL;
    wpk_status st = rt_cublas_create(dev, false, &b);
    if (st == WPK_ERR_UNSUPPORTED) {
        fprintf(stderr, "cuBLAS not checked: %s\n", wpk_context_error(ctx));
        return;
    }
    CHECK(st == WPK_OK);
    static const int64_t shapes[][3] = {{1, 1000, 512}, {64, 48, 36}, {7, 129, 33}};
    for (int s = 0; s < 3; s++) {
        int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        for (int tb = 0; tb < 2; tb++) {
            float *a = randoms(M * K), *bm = randoms(K * N), *c = nans(M * N), *want = nans(M * N);
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    float acc = 0;
                    for (int64_t k = 0; k < K; k++)
                        acc += a[i * K + k] * (tb ? bm[j * K + k] : bm[k * N + j]);
                    want[i * N + j] = acc;
                }
            uint64_t da, db, dc;
            CHECK(rt_cuda_alloc(dev, (size_t)(M * K) * 4, &da) == WPK_OK);
            CHECK(rt_cuda_alloc(dev, (size_t)(K * N) * 4, &db) == WPK_OK);
            CHECK(rt_cuda_alloc(dev, (size_t)(M * N) * 4, &dc) == WPK_OK);
            CHECK(rt_cuda_upload(dev, da, a, (size_t)(M * K) * 4) == WPK_OK);
            CHECK(rt_cuda_upload(dev, db, bm, (size_t)(K * N) * 4) == WPK_OK);
            CHECK(rt_cublas_matmul(b, M, N, K, da, db, tb, dc) == WPK_OK);
            CHECK(rt_cuda_download(dev, c, dc, (size_t)(M * N) * 4) == WPK_OK);
            char what[64];
            snprintf(what, sizeof what, "cuBLAS %lldx%lldx%lld%s", (long long)M, (long long)N,
                     (long long)K, tb ? " (B transposed)" : "");
            CHECK(close_all(c, want, M * N, what));
            rt_cuda_free(dev, da), rt_cuda_free(dev, db), rt_cuda_free(dev, dc);
            free(a), free(bm), free(c), free(want);
        }
    }
    rt_cublas_free(b);
}

/* ---- timing, faults, the watchdog ---- */

typedef struct launch_job {
    rt_cuda_kernel *k;
    uint64_t args[2];
} launch_job;

static wpk_status enqueue(void *user, rt_cuda *d) {
    launch_job *j = user;
    return rt_cuda_kernel_launch(d, j->k, j->args, 2);
}

static rt_cuda_kernel *load_source(wpk_context *ctx, const char *src, const char *name,
                                   const rt_cuda_dims *dims) {
    cg_cuda_image img;
    rt_cuda_kernel *k = NULL;
    if (cg_cuda_compile(ctx, src, &copt, &img) != WPK_OK) {
        fprintf(stderr, "%s: %s\n", name, wpk_context_error(ctx));
        CHECK(!"compile");
        return NULL;
    }
    wpk_status st = rt_cuda_kernel_load(dev, img.data, img.size, name, dims, &k);
    if (st) fprintf(stderr, "%s: %s\n", name, wpk_context_error(ctx));
    cg_cuda_image_free(&img);
    return st ? NULL : k;
}

static void test_timing_and_faults(wpk_context *ctx) {
    const char *src = "extern \"C\" __global__ void scale(const float *x, float *y) {\n"
                      "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                      "    if (i < (1 << 22)) y[i] = 2.0f * x[i];\n}\n";
    rt_cuda_dims dims = {{(1 << 22) / 256, 1, 1}, {256, 1, 1}, 0};
    rt_cuda_kernel *k = load_source(ctx, src, "scale", &dims);
    if (!k) return;
    rt_cuda_kernel_info ki = rt_cuda_kernel_describe(k);
    CHECK(ki.registers > 0 && ki.max_threads >= 256);
    launch_job j = {k, {0, 0}};
    CHECK(rt_cuda_alloc(dev, (size_t)4 << 22, &j.args[0]) == WPK_OK);
    CHECK(rt_cuda_alloc(dev, (size_t)4 << 22, &j.args[1]) == WPK_OK);
    rt_cuda_measure m = rt_cuda_default_measure();
    double samples[10];
    CHECK(rt_cuda_time(dev, enqueue, &j, &m, samples) == WPK_OK);
    for (int i = 0; i < m.repeat; i++) CHECK(samples[i] > 0 && samples[i] < 0.1);
    m.flush_l2 = true;
    m.repeat = 3;
    CHECK(rt_cuda_time(dev, enqueue, &j, &m, samples) == WPK_OK);
    fprintf(stderr, "scale 16 MiB: %.1f us per launch (events; L2 flushed: %.1f us)\n",
            samples[0] * 1e6, samples[2] * 1e6);
    rt_cuda_free(dev, j.args[0]);
    rt_cuda_free(dev, j.args[1]);

    /* out of device memory: NOMEM, classified, and the device still works */
    const rt_cuda_info *info = rt_cuda_device_info(dev);
    uint64_t p = 0;
    CHECK_ERR(ctx, rt_cuda_alloc(dev, info->memory_bytes * 2, &p), WPK_ERR_NOMEM,
              "out of device memory");
    CHECK(rt_cuda_last_fault(dev) == RT_CUDA_FAULT_OOM && p == 0 && !rt_cuda_lost(dev));
    CHECK(rt_cuda_alloc(dev, 1024, &p) == WPK_OK);
    rt_cuda_free(dev, p);
    /* a launch that does not fit: an invalid config, not a crash */
    rt_cuda_dims big = {{1, 1, 1}, {2048, 1, 1}, 0};
    rt_cuda_kernel *bad = NULL;
    cg_cuda_image img;
    CHECK(cg_cuda_compile(ctx, src, &copt, &img) == WPK_OK);
    CHECK_ERR(ctx, rt_cuda_kernel_load(dev, img.data, img.size, "scale", &big, &bad),
              WPK_ERR_INTERNAL, "invalid config");
    CHECK(rt_cuda_last_fault(dev) == RT_CUDA_FAULT_CONFIG && !rt_cuda_lost(dev));
    big.block[0] = 256;
    big.shared_bytes = (int64_t)info->max_shared_per_block_optin + 1;
    CHECK_ERR(ctx, rt_cuda_kernel_load(dev, img.data, img.size, "scale", &big, &bad),
              WPK_ERR_INTERNAL, "bytes of shared memory");
    cg_cuda_image_free(&img);
    rt_cuda_kernel_free(k);
}

/* Last: a kernel that never ends trips the watchdog; the context is lost afterwards. */
static void test_watchdog(wpk_context *ctx) {
    const char *src = "extern \"C\" __global__ void spin(volatile int *flag, int *out) {\n"
                      "    while (*flag == 0) { }\n    out[0] = 1;\n}\n";
    rt_cuda_dims dims = {{1, 1, 1}, {1, 1, 1}, 0};
    rt_cuda_kernel *k = load_source(ctx, src, "spin", &dims);
    if (!k) return;
    uint64_t args[2];
    CHECK(rt_cuda_alloc(dev, 4, &args[0]) == WPK_OK && rt_cuda_alloc(dev, 4, &args[1]) == WPK_OK);
    CHECK(rt_cuda_memset_async(dev, args[0], 0, 4) == WPK_OK);
    CHECK(rt_cuda_kernel_launch(dev, k, args, 2) == WPK_OK);
    CHECK_ERR(ctx, rt_cuda_sync(dev, 300), WPK_ERR_INTERNAL, "did not finish within 300 ms");
    CHECK(rt_cuda_last_fault(dev) == RT_CUDA_FAULT_TIMEOUT && rt_cuda_lost(dev));
    CHECK_ERR(ctx, rt_cuda_alloc(dev, 4, &args[0]), WPK_ERR_INTERNAL, "context was lost");
}

int main(void) {
    wpk_context *ctx = wpk_context_create();
    rt_cuda_info info;
    if (rt_cuda_probe(ctx, 0, &info) != WPK_OK) {
        printf("SKIP: no CUDA device: %s\n", wpk_context_error(ctx) + strlen("CUDA unavailable: "));
        wpk_context_free(ctx);
        return 77;
    }
    if (cg_cuda_nvrtc_available(ctx) != WPK_OK) {
        printf("SKIP: a CUDA device but no NVRTC: %s\n", wpk_context_error(ctx));
        wpk_context_free(ctx);
        return 77;
    }
    char dir[] = "/tmp/wpk_cuda_gpu_XXXXXX";
    if (!getenv("WPK_CACHE_DIR") && mkdtemp(dir)) setenv("WPK_CACHE_DIR", dir, 1);
    if (rt_cuda_open(ctx, 0, &dev) != WPK_OK) {
        fprintf(stderr, "open: %s\n", wpk_context_error(ctx));
        return 1;
    }
    fprintf(stderr, "device: %s, sm_%d, %d SMs, %zu MiB, driver %d, NVRTC %d, cuDNN %zu\n",
            info.name, info.sm, info.sm_count, info.memory_bytes >> 20, info.driver_version,
            cg_cuda_nvrtc_version(), rt_cudnn_version(ctx));
    copt = cg_cuda_default_compile_options();
    copt.sm = info.sm;
    copt.cubin = true; /* the device's own SM: no PTX JIT, no PTX-version mismatch */
    test_elementwise(ctx);
    test_convs(ctx);
    test_cublas(ctx);
    test_timing_and_faults(ctx);
    test_watchdog(ctx);
    fprintf(stderr, "kernels run: %d generated, %d cuDNN algorithm runs\n", kernels_run, cudnn_runs);
    rt_cuda_close(dev);
    wpk_context_free(ctx);
    if (check_failures) fprintf(stderr, "%d check(s) failed\n", check_failures);
    /* the watchdog's kernel still spins on the lost context, and the driver's exit handlers
     * would wait for it: leave without them (a measuring child does the same) */
    fflush(NULL);
    _exit(check_failures ? 1 : 0);
}
