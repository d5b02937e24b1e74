/* measure_child.c -- what the measurer's child processes do (see measure.h): a build worker
 * builds one candidate and compiles it into the kernel cache; a run child loads it, packs its
 * weights, checks its output against the reference once and times it; the reference child
 * computes the reference outputs. Each answers through its pipe and returns. */
#if defined(__linux__)
#define _GNU_SOURCE /* sched_getcpu, pthread_setaffinity_np */
#include <sched.h>
#endif
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h> /* _mm_clflush */
#endif

#include "base/alloc.h"
#include "base/context.h"
#include "codegen/c/cg_c.h"
#include "kernels/cpu_unit.h"
#include "ir/ops.h"
#include "kernels/vendor/lib.h"
#include "tune/measure_impl.h"

/* ---- build worker ---- */

/* A library's candidate has nothing to compile: its config is checked against the space, and
 * the run child makes the kernel. */
static void build_library(tune_measurer *m, tune_job *j, int fd) {
    tune_build_msg h;
    memset(&h, 0, sizeof h);
    wpk_context *ctx = wpk_context_create();
    tune_space s;
    tune_config c;
    m->task->tmpl->space(m->task->tmpl, m->task, &s);
    wpk_status st = ctx ? tune_config_parse(ctx, &s, j->text, &c) : WPK_ERR_NOMEM;
    const char *msg = st == WPK_OK ? "" : ctx ? wpk_context_error(ctx) : "out of memory";
    h.status = st == WPK_OK ? TUNE_OK : TUNE_COMPILE_ERROR;
    h.noutputs = m->task->nout;
    h.msg_len = (int64_t)strlen(msg);
    if (tune_write_all(fd, &h, sizeof h)) tune_write_all(fd, msg, (size_t)h.msg_len);
    wpk_context_free(ctx);
}

void tune_build_child(tune_measurer *m, void *arg, int fd) {
    tune_job *j = arg;
    if (!kernel_provider_generates(m->task->tmpl)) {
        build_library(m, j, fd);
        return;
    }
    if (m->params.device == TUNE_DEVICE_CUDA) {
        tune_build_child_cuda(m, arg, fd);
        return;
    }
    double t0 = tune_now();
    tune_build_msg h;
    memset(&h, 0, sizeof h);
    wpk_context *ctx = wpk_context_create();
    strbuf unit = {0};
    cpu_kernel k;
    memset(&k, 0, sizeof k);
    wpk_status st = ctx ? cpu_kernel_build(ctx, m->task, 0, j->text, NULL, &k) : WPK_ERR_NOMEM;
    if (st == WPK_OK) {
        const strbuf *srcs[1] = {&k.source};
        st = cpu_unit_merge(ctx, srcs, 1, &unit);
    }
    if (st == WPK_OK && m->params.edit_source) m->params.edit_source(m->params.edit_user, j->text, &unit);
    cg_module *mod = NULL;
    if (st == WPK_OK) st = cg_c_compile(ctx, unit.s ? unit.s : "", &mod);
    if (st == WPK_OK && !cg_module_fn(mod, k.name))
        st = wpk_error(ctx, WPK_ERR_INTERNAL, "kernel %s is missing from its object", k.name);
    for (int i = 0; st == WPK_OK && i < TUNE_MAX_ARGS; i++)
        if (k.pack_numel[i] > 0 && !cg_module_fn(mod, k.pack_name[i]))
            st = wpk_error(ctx, WPK_ERR_INTERNAL, "pack kernel %s is missing from its object",
                           k.pack_name[i]);
    cg_module_free(mod);
    if (st == WPK_OK) {
        h.ninputs = k.ninputs;
        h.noutputs = k.noutputs;
        h.nscratch = k.nscratch;
        memcpy(h.scratch_off, k.scratch_off, sizeof h.scratch_off);
        h.scratch_bytes = k.scratch_bytes;
        snprintf(h.name, sizeof h.name, "%s", k.name);
        for (int i = 0; i < TUNE_MAX_ARGS; i++) {
            snprintf(h.pack_name[i], sizeof h.pack_name[i], "%s", k.pack_name[i]);
            h.pack_numel[i] = k.pack_numel[i];
        }
    }
    const char *msg = st == WPK_OK ? "" : ctx ? wpk_context_error(ctx) : "out of memory";
    h.status = st == WPK_OK ? TUNE_OK : TUNE_COMPILE_ERROR;
    h.seconds = tune_now() - t0;
    h.msg_len = (int64_t)strlen(msg);
    h.src_len = st == WPK_OK && unit.s ? (int64_t)unit.len : 0;
    if (tune_write_all(fd, &h, sizeof h) && tune_write_all(fd, msg, (size_t)h.msg_len))
        tune_write_all(fd, unit.s, (size_t)h.src_len);
    cpu_kernel_free(&k);
    sb_free(&unit);
    wpk_context_free(ctx);
}

/* ---- run child ---- */

double tune_rel_error(const float *got, const float *want, int64_t n, int64_t *worst) {
    double e = 0, top = 0;
    *worst = -1;
    for (int64_t i = 0; i < n; i++) {
        double w = want[i], g = got[i];
        if (isnan(w) && isnan(g)) continue;
        double d = fabs(g - w);
        if (!(d <= e)) {
            e = isnan(d) ? INFINITY : d;
            *worst = i;
        }
        if (fabs(w) > top) top = fabs(w);
    }
    return top > 0 ? e / top : e;
}

typedef struct run_state {
    tune_run_msg h;
    double samples[TUNE_MAX_SAMPLES];
    char msg[512];
} run_state;

static void run_fail(run_state *r, tune_status s, const char *fmt, const char *detail) {
    r->h.status = s;
    snprintf(r->msg, sizeof r->msg, fmt, detail);
}

static double seconds(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The CPU clocks of the OpenMP team's threads. A CPU-time sample is the busiest thread's CPU
 * time, not the process's divided by the threads: a config that leaves a thread idle (one
 * channel block on two threads) otherwise measured twice as fast as it runs (223 against 169
 * GFLOP/s). With passive waiting an idle thread burns no CPU, so the busiest thread's time is
 * the run's critical path. The kernels' parallel regions (and oneDNN's and OpenBLAS's, on the
 * same OpenMP runtime) run on this team. */
#define MAX_TEAM 256
typedef struct team_clocks {
    clockid_t id[MAX_TEAM];
    int n;       /* 0: unknown; the process clock divided by the threads instead */
    int threads; /* the team's size */
} team_clocks;

static void team_clocks_init(team_clocks *t, int threads) {
    memset(t, 0, sizeof *t);
    t->threads = threads > 0 ? threads : 1;
    if (t->threads > MAX_TEAM) return;
    bool got[MAX_TEAM] = {false};
    int team = 0;
#pragma omp parallel num_threads(t->threads)
    {
        int i = omp_get_thread_num();
        clockid_t id;
        if (i < MAX_TEAM && pthread_getcpuclockid(pthread_self(), &id) == 0) {
            t->id[i] = id;
            got[i] = true;
        }
#pragma omp single
        team = omp_get_num_threads();
    }
    for (int i = 0; i < team; i++)
        if (!got[i]) return;
    t->n = team;
}

/* The clock's reading now: wall time in now[0]; the CPU time of each of team's threads in
 * now[0..n); or, when the team's clocks are unknown, the process's CPU time per thread. */
static void sample_clock(tune_clock c, const team_clocks *t, double *now) {
    if (c == TUNE_CLOCK_WALL) now[0] = tune_now();
    else if (!t->n) now[0] = seconds(CLOCK_PROCESS_CPUTIME_ID) / t->threads;
    for (int i = 0; c != TUNE_CLOCK_WALL && i < t->n; i++) now[i] = seconds(t->id[i]);
}

/* One call of the candidate: a generated kernel on its arguments, or a library kernel; and the
 * buffers of its constants (packed weights, bias). */
typedef struct candidate {
    cg_kernel_fn fn;
    void **args;
    const kernel_provider *lib;
    lib_kernel *lk;
    wpk_context *ctx;
    ir_tensor *const *in, *const *out;
    const void *konst[CPU_MAX_KERNEL_ARGS];
    size_t konst_bytes[CPU_MAX_KERNEL_ARGS];
    int nkonst;
} candidate;

/* Whether c's constants take more than cold_bytes (-1: never cold). */
static bool is_cold(const candidate *c, int64_t cold_bytes) {
    size_t total = 0;
    for (int i = 0; i < c->nkonst; i++) total += c->konst_bytes[i];
    return cold_bytes >= 0 && total > (size_t)cold_bytes;
}

/* Write c's constants back and drop them from every cache, as a model's other layers would. */
static void flush_constants(const candidate *c) {
#if defined(__x86_64__) || defined(__i386__)
    for (int i = 0; i < c->nkonst; i++)
        for (size_t o = 0; o < c->konst_bytes[i]; o += 64)
            _mm_clflush((const char *)c->konst[i] + o);
    _mm_mfence();
#else
    (void)c;
#endif
}

static void call(const candidate *c) {
    if (c->fn) c->fn(c->args);
    else c->lib->run(c->lib, c->ctx, c->lk, c->in, c->out);
}

/* A CPU-time sample is "preempted" when its wall time exceeds its busiest thread's CPU time
 * by PREEMPTED x the least such ratio of the run's samples: a thread waited for its core while
 * another process ran there (a build worker beside the measurement), and the switches cost it
 * CPU time too (cache refills): 10-45% more, measured on 2 cores under a build's load, with
 * the wall time 2-8x the CPU time against 1.1x undisturbed. The least ratio is the kernel's
 * own fork-and-join overhead, so a kernel of many short parallel loops is not all "preempted".
 * While every sample so far took more than UNSETTLED x its CPU time (all of them preempted,
 * as when a build starts with the measurement), sampling goes on, up to max_repeat_ms. */
#define PREEMPTED 1.4
#define UNSETTLED 2.0

/* The samples of the first n that were not preempted, into out (in order); their count, or 0
 * while all of them may have been. */
static int undisturbed(const double *samples, const double *ratio, int n, double *out) {
    double least = INFINITY;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (ratio[i] < least) least = ratio[i];
    if (least > UNSETTLED) return 0;
    for (int i = 0; i < n; i++)
        if (ratio[i] <= PREEMPTED * least) out[k++] = samples[i];
    return k;
}

static void time_kernel(const tune_measure_params *p, const candidate *cand, run_state *r) {
    for (int w = 0; w < p->warmup_calls; w++) call(cand);
    /* calls per sample from the fastest of three calls: one call that met a busy core must
       not make every sample a single call */
    double one = INFINITY;
    for (int k = 0; k < 3; k++) {
        double t = tune_now();
        call(cand);
        double d = tune_now() - t;
        if (d < one) one = d;
    }
    double per_sample = p->min_sample_ms * 1e-3;
    int64_t calls = one > 0 ? (int64_t)ceil(per_sample / one) : 1000000;
    if (calls < 1) calls = 1;
    if (calls > 1000000) calls = 1000000;
    /* cold: each call timed on its own, after its constants were flushed */
    const bool cold = is_cold(cand, p->cold_bytes);
    const int64_t per_reading = cold ? 1 : calls;
    r->h.calls = calls;
    r->h.cold = cold;
    team_clocks team = {.n = 0, .threads = 1};
    if (p->clock == TUNE_CLOCK_CPU) team_clocks_init(&team, p->threads);
    const int nclocks = team.n ? team.n : 1;
    const bool by_cpu = p->clock == TUNE_CLOCK_CPU;
    double start = tune_now();
    double ratio[TUNE_MAX_SAMPLES]; /* wall time over the busiest thread's CPU time */
    int n = 0;
    while (n < p->max_samples) {
        double spent[MAX_TEAM] = {0}, wall = 0;
        for (int64_t c = 0; c < calls; c += per_reading) {
            double t0[MAX_TEAM], t1[MAX_TEAM];
            if (cold) flush_constants(cand);
            double w0 = tune_now();
            sample_clock(p->clock, &team, t0);
            for (int64_t k = 0; k < per_reading; k++) call(cand);
            sample_clock(p->clock, &team, t1);
            wall += tune_now() - w0;
            for (int i = 0; i < nclocks; i++) spent[i] += t1[i] - t0[i];
        }
        double busy = 0; /* the busiest thread's CPU time, or the wall time */
        for (int i = 0; i < nclocks; i++)
            if (spent[i] > busy) busy = spent[i];
        ratio[n] = by_cpu && busy > 0 ? wall / busy : 1.0;
        r->samples[n++] = busy / (double)calls;
        double elapsed = tune_now() - start;
        if (elapsed >= p->max_repeat_ms * 1e-3 && n >= 3) break; /* slow, or never steady */
        /* enough samples not preempted, and steady */
        double kept[TUNE_MAX_SAMPLES];
        const int good = undisturbed(r->samples, ratio, n, kept);
        if (good >= p->min_samples && elapsed >= p->min_repeat_ms * 1e-3 &&
            tune_spread(kept, good) <= p->max_spread)
            break;
    }
    /* the preempted samples left out, where at least three (or min_samples) are left */
    double kept[TUNE_MAX_SAMPLES];
    const int good = undisturbed(r->samples, ratio, n, kept);
    if (good < n && good >= (p->min_samples < 3 ? p->min_samples : 3)) {
        memcpy(r->samples, kept, sizeof *kept * (size_t)good);
        n = good;
    }
    r->h.nsamples = n;
}

/* The outputs against the reference outputs: the largest relative error; a failure on r when
 * it is beyond the tolerance. */
static double check_outputs(tune_measurer *m, float *const *outs, int nout, run_state *r) {
    const tune_task *t = m->task;
    double err = 0;
    for (int i = 0; i < nout; i++) {
        if (t->out[i].dtype != WPK_DTYPE_FLOAT32) {
            if (memcmp(outs[i], m->ref + m->ref_off[i], ir_nbytes(&t->out[i]))) err = INFINITY;
            continue;
        }
        int64_t worst;
        double e = tune_rel_error(outs[i], (const float *)(m->ref + m->ref_off[i]),
                             ir_numel(&t->out[i]), &worst);
        if (!(e <= err)) err = e;
        if (!(e <= m->params.tolerance)) {
            char detail[160];
            snprintf(detail, sizeof detail, "output %d differs from the reference: relative "
                     "error %.3g at element %lld (tolerance %.1g)", i, e, (long long)worst,
                     m->params.tolerance);
            run_fail(r, TUNE_WRONG_RESULT, "%s", detail);
        }
    }
    return err;
}

/* A library candidate: the provider makes its kernel for the task's node at the config's algo
 * (packing the constant weights), then it is checked and timed like a generated one. A config
 * the library refuses is a compile error (never a winner) with the library's reason. */
static void run_library(tune_measurer *m, tune_job *j, run_state *r, wpk_context *ctx) {
    const tune_task *t = m->task;
    const kernel_provider *lib = t->tmpl;
    tune_space s;
    tune_config c;
    t->tmpl->space(t->tmpl, t, &s);
    if (tune_config_parse(ctx, &s, j->text, &c) != WPK_OK) {
        run_fail(r, TUNE_COMPILE_ERROR, "%s", wpk_context_error(ctx));
        return;
    }
    int algo = (int)tune_config_get(&s, &c, "algo", 0);
    ir_tensor ins[TUNE_MAX_ARGS], outs[TUNE_MAX_ARGS];
    ir_tensor *in[TUNE_MAX_ARGS] = {0}, *out[TUNE_MAX_ARGS] = {0};
    float *obuf[TUNE_MAX_ARGS] = {0};
    void *raw;
    for (int i = 0; i < t->nin; i++) {
        if (m->in[i].dtype == WPK_DTYPE_UNDEFINED) continue;
        ins[i] = m->in[i];
        in[i] = &ins[i];
    }
    for (int i = 0; i < t->nout; i++) {
        size_t bytes = ir_nbytes(&t->out[i]);
        obuf[i] = tune_alloc64(bytes ? bytes : 1, &raw);
        if (!obuf[i]) {
            run_fail(r, TUNE_CRASH, "%s", "out of memory (the memory cap) for the outputs");
            return;
        }
        memset(obuf[i], 0xff, bytes);
        outs[i] = t->out[i];
        outs[i].data = obuf[i];
        out[i] = &outs[i];
    }
    lib_kernel *lk = NULL;
    const kernel_device dev = {m->params.threads, NULL};
    wpk_status st = lib->create(lib, ctx, t->node, in, out, algo, &dev, &lk);
    if (st == WPK_OK) st = lib->run(lib, ctx, lk, in, out);
    if (st) {
        run_fail(r, st == WPK_ERR_NOMEM ? TUNE_CRASH : TUNE_COMPILE_ERROR, "%s",
                 wpk_context_error(ctx));
        return;
    }
    r->h.error = check_outputs(m, obuf, t->nout, r);
    candidate cand = {.lib = lib, .lk = lk, .ctx = ctx, .in = in, .out = out};
    if (lib->constants)
        cand.nkonst = lib->constants(lib, lk, cand.konst, cand.konst_bytes, CPU_MAX_KERNEL_ARGS);
    if (r->h.status == TUNE_OK) time_kernel(&m->params, &cand, r);
    /* the kernel is not destroyed: the process ends now */
}

/* A freshly forked child's OpenMP threads can start on one CPU and stay there until the
 * scheduler's load balancing moves one: on a 2-core VM, measured up to 45 ms of samples at
 * half speed, more often the more children had been forked before; by CPU time as well, since
 * the threads hand the core to each other at every barrier. Records and finals mixed such
 * samples with good ones (a quarter of the samples 1.4x slower than the fastest: 17% of a bar
 * run's records, 10% with the pinning; the rest come from builds beside the measurement,
 * bench/results/tune_resnet18.md, 11-27). So the team's threads
 * are pinned to distinct CPUs, a thread keeping the CPU it is on where no teammate shares it.
 * Only where one measurement at a time can run (threads > half the CPUs: the measurer's
 * level is then 0 or 1): children side by side would each pin their teams to the same CPUs. */
static void spread_team(int threads) {
#if defined(__linux__)
    cpu_set_t allowed;
    if (threads < 2 || threads > MAX_TEAM || sched_getaffinity(0, sizeof allowed, &allowed))
        return;
    const int ncpu = CPU_COUNT(&allowed);
    if (ncpu < threads || 2 * threads <= ncpu) return;
    int cpu[MAX_TEAM], target[MAX_TEAM];
    bool ok = true;
#pragma omp parallel num_threads(threads)
    {
        int i = omp_get_thread_num(), c = sched_getcpu();
        cpu[i] = c;
        if (c < 0 || c >= CPU_SETSIZE || omp_get_num_threads() != threads) {
#pragma omp atomic write
            ok = false;
        }
    }
    if (!ok) return;
    bool used[CPU_SETSIZE] = {false};
    for (int i = 0; i < threads; i++) {
        target[i] = used[cpu[i]] ? -1 : cpu[i];
        used[cpu[i]] = true;
    }
    for (int i = 0, next = 0; i < threads; i++) {
        while (target[i] < 0 && next < CPU_SETSIZE) {
            if (CPU_ISSET(next, &allowed) && !used[next]) target[i] = next, used[next] = true;
            next++;
        }
        if (target[i] < 0) return; /* fewer free CPUs than the set says: leave it be */
    }
#pragma omp parallel num_threads(threads)
    {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(target[omp_get_thread_num()], &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    }
#else
    (void)threads;
#endif
}

void tune_run_child(tune_measurer *m, void *arg, int fd) {
    tune_job *j = arg;
    if (m->params.device == TUNE_DEVICE_CUDA) {
        tune_run_child_cuda(m, arg, fd);
        return;
    }
    const tune_build_msg *k = &j->meta;
    const tune_task *t = m->task;
    run_state r;
    memset(&r, 0, sizeof r);
    r.h.status = TUNE_OK;
    r.h.error = -1;
    /* a crashing kernel is the candidate's doing: it dies of its signal, whatever handler
       this process had (a sanitizer's would report it as an exit) */
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++) signal(fatal[i], SIG_DFL);
    omp_set_num_threads(m->params.threads);
    spread_team(m->params.threads);
    wpk_context *ctx = wpk_context_create();
    cg_module *mod = NULL;
    void *args[CPU_MAX_KERNEL_ARGS], *raw[CPU_MAX_KERNEL_ARGS];
    int nraw = 0, a = 0;
    float *outs[TUNE_MAX_ARGS] = {0};
    cg_kernel_fn fn = NULL;
    if (!ctx) {
        run_fail(&r, TUNE_CRASH, "%s", "out of memory starting the run");
        goto done;
    }
    if (!kernel_provider_generates(t->tmpl)) {
        run_library(m, j, &r, ctx);
        goto done;
    }
    if (k->ninputs > m->npresent || k->noutputs > t->nout || k->noutputs < 1 ||
        k->ninputs + k->noutputs + k->nscratch > CPU_MAX_KERNEL_ARGS) {
        run_fail(&r, TUNE_COMPILE_ERROR, "%s", "the kernel's arguments do not fit the task");
        goto done;
    }
    /* a cache hit: the build worker compiled exactly this source */
    if (cg_c_compile(ctx, j->source, &mod) != WPK_OK || !(fn = cg_module_fn(mod, k->name))) {
        run_fail(&r, TUNE_COMPILE_ERROR, "loading the kernel: %s", wpk_context_error(ctx));
        goto done;
    }
    candidate cand = {.args = args};
    for (int i = 0; i < k->ninputs; i++) {
        void *src = m->in[m->present[i]].data;
        args[a++] = src;
        if (k->pack_numel[i] <= 0) {
            if (t->in[m->present[i]].data) { /* a constant the kernel reads as it is */
                cand.konst[cand.nkonst] = src;
                cand.konst_bytes[cand.nkonst++] = ir_nbytes(&t->in[m->present[i]]);
            }
            continue;
        }
        cg_kernel_fn pack = cg_module_fn(mod, k->pack_name[i]);
        void *packed = tune_alloc64(sizeof(float) * (size_t)k->pack_numel[i], &raw[nraw++]);
        if (!pack || !packed) {
            run_fail(&r, pack ? TUNE_CRASH : TUNE_COMPILE_ERROR, "%s",
                     pack ? "out of memory (the memory cap) for packed weights"
                          : "a pack kernel is missing");
            goto done;
        }
        void *pargs[2] = {src, packed};
        pack(pargs);
        args[a - 1] = packed;
        cand.konst[cand.nkonst] = packed;
        cand.konst_bytes[cand.nkonst++] = sizeof(float) * (size_t)k->pack_numel[i];
    }
    for (int i = 0; i < k->noutputs; i++) {
        size_t bytes = ir_nbytes(&t->out[i]);
        outs[i] = tune_alloc64(bytes ? bytes : 1, &raw[nraw++]);
        if (!outs[i]) {
            run_fail(&r, TUNE_CRASH, "%s", "out of memory (the memory cap) for the outputs");
            goto done;
        }
        /* NaN everywhere: an element the kernel never writes cannot pass the check */
        memset(outs[i], 0xff, bytes);
        args[a++] = outs[i];
    }
    if (k->nscratch > 0) {
        char *scratch = tune_alloc64((size_t)k->scratch_bytes + 64, &raw[nraw++]);
        if (!scratch) {
            run_fail(&r, TUNE_CRASH, "%s", "out of memory (the memory cap) for scratch");
            goto done;
        }
        for (int i = 0; i < k->nscratch; i++) args[a++] = scratch + k->scratch_off[i];
    }
    fn(args);
    double err = m->params.skip_check ? -1 : check_outputs(m, outs, k->noutputs, &r);
    r.h.error = err;
    cand.fn = fn;
    if (r.h.status == TUNE_OK) time_kernel(&m->params, &cand, &r);
done:
    r.h.msg_len = (int64_t)strlen(r.msg);
    if (tune_write_all(fd, &r.h, sizeof r.h) &&
        tune_write_all(fd, r.samples, sizeof(double) * (size_t)r.h.nsamples))
        tune_write_all(fd, r.msg, (size_t)r.h.msg_len);
    /* no cleanup of the kernel or buffers: the process ends now, and unloading a kernel under
       idle OpenMP threads is what cg_c.h warns about */
    (void)raw;
}

/* ---- reference child ---- */

void tune_reference_child(tune_measurer *m, void *unused, int fd) {
    (void)unused;
    const tune_task *t = m->task;
    ir_tensor *in[TUNE_MAX_ARGS] = {0}, out[TUNE_MAX_ARGS], *pout[TUNE_MAX_ARGS];
    for (int i = 0; i < t->nin; i++)
        if (m->in[i].dtype != WPK_DTYPE_UNDEFINED) in[i] = &m->in[i];
    for (int i = 0; i < t->nout; i++) {
        out[i] = t->out[i];
        out[i].data = m->ref + m->ref_off[i];
        pout[i] = &out[i];
    }
    omp_set_num_threads(m->params.threads);
    wpk_context *ctx = wpk_context_create();
    wpk_status st = ctx ? ir_op_get(t->node->op)->ref(ctx, t->node, in, pout) : WPK_ERR_NOMEM;
    const char *msg = st == WPK_OK ? "" : ctx ? wpk_context_error(ctx) : "out of memory";
    tune_ref_msg h = {st == WPK_OK ? 0 : 1, 0, (int64_t)strlen(msg)};
    if (tune_write_all(fd, &h, sizeof h)) tune_write_all(fd, msg, (size_t)h.msg_len);
}
