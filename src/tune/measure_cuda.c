/* measure_cuda.c -- the measurer's build worker and run child for device CUDA: a candidate of a
 * CUDA template built, lowered, emitted and compiled by NVRTC in the build worker (its module
 * image and launch dims sent back), then loaded, checked against the reference outputs and
 * timed with CUDA events in a run child that opens the device itself, so a kernel that hangs
 * or crashes loses only that child's context. A CUDA library's candidate (cuDNN, cuBLAS,
 * cuBLASLt: its config an algorithm) has nothing to build; the run child makes its kernel on
 * the device, checks and times it the same way. Faults are classified as the runtime reports
 * them (runtime/cuda/cuda_rt.h). */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "codegen/cuda/cg_cuda.h"
#include "kernels/conv.h"
#include "loop/lower.h"
#include "base/target_fingerprint.h"
#include "runtime/cuda/cuda_rt.h"
#include "tune/measure_impl.h"

#define ENTRY "wpk_tune_k"

/* ---- build worker ---- */

/* The kernel's entry as the source declares it (a test's edit_source may rename it): the
 * identifier after `__global__ void` and its optional __launch_bounds__(...). */
static bool entry_name(const char *src, char *out, size_t cap) {
    const char *p = src ? strstr(src, "__global__ void") : NULL;
    if (!p) return false;
    p += strlen("__global__ void");
    while (*p == ' ' || *p == '\n' || *p == '\t') p++;
    if (!strncmp(p, "__launch_bounds__", 17)) {
        p = strchr(p, ')');
        if (!p) return false;
        p++;
    }
    while (*p == ' ' || *p == '\n' || *p == '\t') p++;
    size_t n = 0;
    while ((p[n] == '_' || (p[n] >= 'a' && p[n] <= 'z') || (p[n] >= 'A' && p[n] <= 'Z') ||
            (n && p[n] >= '0' && p[n] <= '9')) && n + 1 < cap)
        n++;
    if (!n || p[n] != '(') return false;
    memcpy(out, p, n);
    out[n] = '\0';
    return true;
}

/* The candidate's CUDA C source and launch dims, as the CUDA program builds a node's kernel
 * (compile/cuda_program.c): template build, lowering, emission. */
static wpk_status emit(wpk_context *ctx, tune_measurer *m, tune_job *j, strbuf *src,
                       cg_cuda_launch *L, int *ninputs, int *nargs) {
    const tune_task *t = m->task;
    te_ctx c;
    te_ctx_init(&c, ctx);
    tune_build tb;
    wpk_status st = t->tmpl->build(t->tmpl, &c, t, &m->space, &j->cfg, &tb);
    for (int i = 0; st == WPK_OK && i < TUNE_MAX_ARGS; i++)
        if (tb.prepack[i])
            st = wpk_error(ctx, WPK_ERR_INTERNAL, "template %s pre-packs input %d: the CUDA "
                           "target runs no pack kernels", t->tmpl->name, i);
    loop_func *f = NULL;
    if (st == WPK_OK) {
        *ninputs = tb.ninputs;
        *nargs = tb.nargs;
        st = loop_lower(&c, tb.schedule, ENTRY, tb.args, tb.nargs, &f);
    }
    if (st == WPK_OK) st = cg_cuda_emit(ctx, f, NULL, src, L);
    te_ctx_free(&c);
    return st;
}

void tune_build_child_cuda(tune_measurer *m, void *arg, int fd) {
    tune_job *j = arg;
    double t0 = tune_now();
    tune_build_msg h;
    memset(&h, 0, sizeof h);
    wpk_context *ctx = wpk_context_create();
    strbuf src = {0};
    cg_cuda_launch L;
    memset(&L, 0, sizeof L);
    cg_cuda_image img;
    memset(&img, 0, sizeof img);
    int ninputs = 0, nargs = 0;
    wpk_status st = ctx ? emit(ctx, m, j, &src, &L, &ninputs, &nargs) : WPK_ERR_NOMEM;
    if (st == WPK_OK && m->params.edit_source)
        m->params.edit_source(m->params.edit_user, j->text, &src);
    if (st == WPK_OK && !entry_name(src.s, h.name, sizeof h.name))
        st = wpk_error(ctx, WPK_ERR_INTERNAL, "the CUDA source declares no __global__ kernel");
    if (st == WPK_OK) {
        cg_cuda_compile_options co = cg_cuda_default_compile_options();
        if (m->params.cuda_sm) co.sm = m->params.cuda_sm;
        st = cg_cuda_compile(ctx, src.s, &co, &img);
    }
    if (st == WPK_OK && (nargs - ninputs < 1 || nargs - ninputs > m->task->nout))
        st = wpk_error(ctx, WPK_ERR_INTERNAL, "the kernel writes %d outputs, the node has %d",
                       nargs - ninputs, m->task->nout);
    if (st == WPK_OK) {
        h.ninputs = ninputs;
        h.noutputs = nargs - ninputs;
        for (int d = 0; d < 3; d++) {
            h.launch[d] = L.grid[d];
            h.launch[3 + d] = L.block[d];
        }
        h.launch[6] = L.shared_bytes;
    }
    const char *msg = st == WPK_OK ? "" : ctx ? wpk_context_error(ctx) : "out of memory";
    h.status = st == WPK_OK ? TUNE_OK : TUNE_COMPILE_ERROR;
    h.seconds = tune_now() - t0;
    h.msg_len = (int64_t)strlen(msg);
    h.src_len = st == WPK_OK ? (int64_t)img.size : 0;
    if (tune_write_all(fd, &h, sizeof h) && tune_write_all(fd, msg, (size_t)h.msg_len))
        tune_write_all(fd, img.data, (size_t)h.src_len);
    cg_cuda_image_free(&img);
    sb_free(&src);
    wpk_context_free(ctx);
}

/* ---- run child ---- */

typedef struct run_answer {
    tune_run_msg h;
    double samples[TUNE_MAX_SAMPLES];
    char msg[512];
} run_answer;

/* A device fault as the tuner's class: a launch that does not fit the device or a module the
 * driver refuses is the config's compile-time failure, the watchdog a timeout, the rest (an
 * illegal address, memory) a crash. */
static tune_status status_of(rt_cuda_fault f) {
    switch (f) {
    case RT_CUDA_FAULT_TIMEOUT: return TUNE_TIMEOUT;
    case RT_CUDA_FAULT_CONFIG:
    case RT_CUDA_FAULT_LOAD: return TUNE_COMPILE_ERROR;
    default: return TUNE_CRASH;
    }
}

static void fault(run_answer *r, rt_cuda *d, wpk_context *ctx, const char *what) {
    rt_cuda_fault f = d ? rt_cuda_last_fault(d) : RT_CUDA_FAULT_UNAVAILABLE;
    r->h.status = status_of(f);
    snprintf(r->msg, sizeof r->msg, "%s (%s): %s", what, rt_cuda_fault_name(f),
             wpk_context_error(ctx));
}

typedef struct launch_ctx {
    rt_cuda_kernel *k;
    const uint64_t *args;
    int nargs;
} launch_ctx;

static wpk_status launch(void *user, rt_cuda *d) {
    const launch_ctx *l = user;
    return rt_cuda_kernel_launch(d, l->k, l->args, l->nargs);
}

/* The outputs against the reference; a failure on r beyond the tolerance. */
static double check(tune_measurer *m, float *const *outs, int nout, run_answer *r) {
    double err = 0;
    for (int i = 0; i < nout; i++) {
        const ir_tensor *o = &m->task->out[i];
        const char *want = m->ref + m->ref_off[i];
        if (o->dtype != WPK_DTYPE_FLOAT32) {
            if (memcmp(outs[i], want, ir_nbytes(o))) err = INFINITY;
            continue;
        }
        int64_t worst;
        double e = tune_rel_error(outs[i], (const float *)want, ir_numel(o), &worst);
        if (!(e <= err)) err = e;
        if (!(e <= m->params.tolerance) && r->h.status == TUNE_OK) {
            r->h.status = TUNE_WRONG_RESULT;
            snprintf(r->msg, sizeof r->msg, "output %d differs from the reference: relative "
                     "error %.3g at element %lld (tolerance %.1g)", i, e, (long long)worst,
                     m->params.tolerance);
        }
    }
    return err;
}

/* Load, run once, check, time. Returns after filling r; the process ends right after, so
 * device buffers are left to the driver's teardown. */
/* The samples of a checked candidate: enqueue(user) timed with events, as the measurer's params
 * ask (warm-up, repeats from min_repeat_ms, capped by max_samples). */
static void time_samples(tune_measurer *m, rt_cuda *d, wpk_context *ctx,
                         rt_cuda_enqueue_fn enqueue, void *user,
                         int64_t const_bytes, int timeout_ms, run_answer *r) {
    rt_cuda_measure mm = rt_cuda_default_measure();
    mm.warmup = m->params.warmup_calls > 0 ? m->params.warmup_calls : 1;
    mm.number = 0;
    mm.min_ms = m->params.min_sample_ms > 0 ? m->params.min_sample_ms : 1;
    int repeat = (int)(m->params.min_repeat_ms / mm.min_ms);
    int cap = m->params.max_samples < RT_CUDA_MAX_SAMPLES ? m->params.max_samples
                                                          : RT_CUDA_MAX_SAMPLES;
    mm.repeat = repeat < m->params.min_samples ? m->params.min_samples
                : repeat > cap                 ? cap
                                               : repeat;
    /* weights that outgrow the cache (the tuner sets cold_bytes to 0 for such a model) are
       read from memory in every call of a model's run: flush the L2 before each sample */
    mm.flush_l2 = m->params.cold_bytes >= 0 && const_bytes > m->params.cold_bytes;
    mm.timeout_ms = timeout_ms;
    if (rt_cuda_time(d, enqueue, user, &mm, r->samples) != WPK_OK) {
        fault(r, d, ctx, "timing");
        return;
    }
    r->h.nsamples = mm.repeat;
    r->h.calls = mm.flush_l2 ? 1 : 0; /* 0: grown per sample by the device timer */
    r->h.cold = mm.flush_l2;
}

static void run_candidate(tune_measurer *m, tune_job *j, wpk_context *ctx, run_answer *r) {
    const tune_build_msg *k = &j->meta;
    const tune_task *t = m->task;
    if (k->ninputs > m->npresent || k->noutputs > t->nout || k->noutputs < 1 ||
        k->ninputs + k->noutputs > TUNE_MAX_ARGS * 2) {
        r->h.status = TUNE_COMPILE_ERROR;
        snprintf(r->msg, sizeof r->msg, "the kernel's arguments do not fit the task");
        return;
    }
    rt_cuda *d = NULL;
    if (rt_cuda_open(ctx, 0, &d) != WPK_OK) {
        fault(r, NULL, ctx, "opening the device");
        return;
    }
    const int timeout_ms = (int)(m->params.run_timeout_s * 500); /* half the host's deadline */
    uint64_t args[TUNE_MAX_ARGS * 2];
    int a = 0;
    int64_t const_bytes = 0;
    for (int i = 0; i < k->ninputs; i++) {
        const ir_tensor *x = &m->in[m->present[i]];
        size_t bytes = ir_nbytes(x);
        if (rt_cuda_alloc(d, bytes ? bytes : 1, &args[a]) != WPK_OK ||
            rt_cuda_upload(d, args[a], x->data, bytes) != WPK_OK) {
            fault(r, d, ctx, "placing the inputs");
            return;
        }
        if (t->in[m->present[i]].data) const_bytes += (int64_t)bytes;
        a++;
    }
    float *outs[TUNE_MAX_ARGS] = {0};
    for (int i = 0; i < k->noutputs; i++) {
        size_t bytes = ir_nbytes(&t->out[i]);
        outs[i] = wpk_malloc(bytes ? bytes : 1);
        if (!outs[i]) {
            r->h.status = TUNE_CRASH;
            snprintf(r->msg, sizeof r->msg, "out of host memory for the outputs");
            return;
        }
        /* NaN everywhere: an element the kernel never writes cannot pass the check */
        if (rt_cuda_alloc(d, bytes ? bytes : 1, &args[a]) != WPK_OK ||
            rt_cuda_memset_async(d, args[a], 0xff, bytes) != WPK_OK) {
            fault(r, d, ctx, "placing the outputs");
            return;
        }
        a++;
    }
    rt_cuda_dims dims;
    memcpy(dims.grid, k->launch, sizeof dims.grid);
    memcpy(dims.block, k->launch + 3, sizeof dims.block);
    dims.shared_bytes = k->launch[6];
    rt_cuda_kernel *kern = NULL;
    if (rt_cuda_kernel_load(d, j->source, (size_t)k->src_len, k->name, &dims, &kern) != WPK_OK) {
        fault(r, d, ctx, "loading the kernel");
        return;
    }
    launch_ctx l = {kern, args, a};
    if (launch(&l, d) != WPK_OK || rt_cuda_sync(d, timeout_ms) != WPK_OK) {
        fault(r, d, ctx, "the checked run");
        return;
    }
    for (int i = 0; i < k->noutputs; i++)
        if (rt_cuda_download(d, outs[i], args[k->ninputs + i], ir_nbytes(&t->out[i])) != WPK_OK) {
            fault(r, d, ctx, "reading the outputs");
            return;
        }
    r->h.error = m->params.skip_check ? -1 : check(m, outs, k->noutputs, r);
    if (r->h.status != TUNE_OK) return;
    time_samples(m, d, ctx, launch, &l, const_bytes, timeout_ms, r);
}

/* ---- a library's candidate ---- */

typedef struct lib_run {
    const kernel_provider *lib;
    lib_kernel *lk;
    wpk_context *ctx;
    ir_tensor *const *in, *const *out;
} lib_run;

static wpk_status lib_enqueue(void *user, rt_cuda *d) {
    (void)d;
    const lib_run *l = user;
    return l->lib->run(l->lib, l->ctx, l->lk, l->in, l->out);
}

/* The library kernel of config j on the device: constants copied at create, the other inputs
 * and the outputs device buffers; run once, checked, timed as a kernel is. */
static void run_library(tune_measurer *m, tune_job *j, wpk_context *ctx, run_answer *r) {
    const tune_task *t = m->task;
    const kernel_provider *lib = t->tmpl;
    tune_space s;
    tune_config c;
    lib->space(lib, t, &s);
    if (tune_config_parse(ctx, &s, j->text, &c) != WPK_OK) {
        r->h.status = TUNE_COMPILE_ERROR;
        snprintf(r->msg, sizeof r->msg, "%s", wpk_context_error(ctx));
        return;
    }
    rt_cuda *d = NULL;
    if (rt_cuda_open(ctx, 0, &d) != WPK_OK) {
        fault(r, NULL, ctx, "opening the device");
        return;
    }
    ir_tensor ins[TUNE_MAX_ARGS], outs[TUNE_MAX_ARGS];
    ir_tensor *in[TUNE_MAX_ARGS] = {0}, *out[TUNE_MAX_ARGS] = {0};
    uint64_t dev_in[TUNE_MAX_ARGS] = {0}, dev_out[TUNE_MAX_ARGS] = {0};
    float *host_out[TUNE_MAX_ARGS] = {0};
    int64_t const_bytes = 0;
    for (int i = 0; i < t->nin; i++) {
        if (m->in[i].dtype == WPK_DTYPE_UNDEFINED) continue;
        ins[i] = m->in[i];
        in[i] = &ins[i];
        const size_t bytes = ir_nbytes(&ins[i]);
        if (t->in[i].data) {
            const_bytes += (int64_t)bytes; /* create copies it to the device */
            continue;
        }
        if (rt_cuda_alloc(d, bytes ? bytes : 1, &dev_in[i]) != WPK_OK ||
            rt_cuda_upload(d, dev_in[i], ins[i].data, bytes) != WPK_OK) {
            fault(r, d, ctx, "placing the inputs");
            return;
        }
        ins[i].data = NULL; /* not a constant: given at run time */
    }
    for (int i = 0; i < t->nout; i++) {
        const size_t bytes = ir_nbytes(&t->out[i]);
        outs[i] = t->out[i];
        outs[i].data = NULL;
        out[i] = &outs[i];
        host_out[i] = wpk_malloc(bytes ? bytes : 1);
        if (!host_out[i] || rt_cuda_alloc(d, bytes ? bytes : 1, &dev_out[i]) != WPK_OK ||
            rt_cuda_memset_async(d, dev_out[i], 0xff, bytes) != WPK_OK) {
            fault(r, d, ctx, "placing the outputs");
            return;
        }
    }
    const kernel_device dev = {0, d};
    lib_kernel *lk = NULL;
    wpk_status st = lib->create(lib, ctx, t->node, in, out, (int)tune_value(&s, &c, "algo"), &dev,
                                &lk);
    if (st) {
        r->h.status = st == WPK_ERR_NOMEM ? TUNE_CRASH : TUNE_COMPILE_ERROR;
        snprintf(r->msg, sizeof r->msg, "%s", wpk_context_error(ctx));
        return;
    }
    for (int i = 0; i < t->nin; i++)
        if (in[i] && dev_in[i]) ins[i].data = (void *)(uintptr_t)dev_in[i];
    for (int i = 0; i < t->nout; i++) outs[i].data = (void *)(uintptr_t)dev_out[i];
    const int timeout_ms = (int)(m->params.run_timeout_s * 500);
    lib_run l = {lib, lk, ctx, in, out};
    if (lib_enqueue(&l, d) != WPK_OK || rt_cuda_sync(d, timeout_ms) != WPK_OK) {
        fault(r, d, ctx, "the checked run");
        return;
    }
    for (int i = 0; i < t->nout; i++)
        if (rt_cuda_download(d, host_out[i], dev_out[i], ir_nbytes(&t->out[i])) != WPK_OK) {
            fault(r, d, ctx, "reading the outputs");
            return;
        }
    r->h.error = m->params.skip_check ? -1 : check(m, host_out, t->nout, r);
    if (r->h.status != TUNE_OK) return;
    time_samples(m, d, ctx, lib_enqueue, &l, const_bytes, timeout_ms, r);
    /* the kernel is not destroyed: the process ends now */
}

void tune_run_child_cuda(tune_measurer *m, void *arg, int fd) {
    tune_job *j = arg;
    run_answer r;
    memset(&r, 0, sizeof r);
    r.h.status = TUNE_OK;
    r.h.error = -1;
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++) signal(fatal[i], SIG_DFL);
    wpk_context *ctx = wpk_context_create();
    if (ctx && !kernel_provider_generates(m->task->tmpl)) {
        run_library(m, j, ctx, &r);
    } else if (ctx) {
        run_candidate(m, j, ctx, &r);
    } else {
        r.h.status = TUNE_CRASH;
        snprintf(r.msg, sizeof r.msg, "out of memory starting the run");
    }
    r.h.msg_len = (int64_t)strlen(r.msg);
    if (tune_write_all(fd, &r.h, sizeof r.h) &&
        tune_write_all(fd, r.samples, sizeof(double) * (size_t)r.h.nsamples))
        tune_write_all(fd, r.msg, (size_t)r.h.msg_len);
}

/* ---- the device, seen from the tuner ---- */

/* The child's half of tune_cuda_probe: the device's facts in the result (name in message,
 * SM, driver version and L2 bytes in samples). */
static wpk_status probe_child(void *user, rt_cuda *d, rt_cuda_result *r) {
    (void)user;
    const rt_cuda_info *info = rt_cuda_device_info(d);
    snprintf(r->message, sizeof r->message, "%s", info->name);
    r->samples[0] = info->sm;
    r->samples[1] = info->driver_version;
    r->samples[2] = info->l2_bytes;
    r->nsamples = 3;
    return WPK_OK;
}

wpk_status tune_cuda_probe(wpk_context *ctx, rt_cuda_info *info) {
    memset(info, 0, sizeof *info);
    rt_cuda_result r;
    wpk_status st = rt_cuda_run_isolated(ctx, 0, 60, probe_child, NULL, &r);
    if (st) return st;
    if (r.fault == RT_CUDA_FAULT_UNAVAILABLE)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "%s", r.message);
    if (r.fault != RT_CUDA_FAULT_NONE || r.nsamples != 3)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "CUDA unavailable: probing the device "
                         "failed (%s): %s", rt_cuda_fault_name(r.fault), r.message);
    snprintf(info->name, sizeof info->name, "%.255s", r.message);
    info->sm = (int)r.samples[0];
    info->driver_version = (int)r.samples[1];
    info->l2_bytes = (int)r.samples[2];
    return cg_cuda_nvrtc_available(ctx);
}

void tune_cuda_target(const rt_cuda_info *info, char *buf, size_t cap) {
    /* NVRTC's version is known once it is loaded: the same key before and after */
    wpk_context quiet;
    memset(&quiet, 0, sizeof quiet);
    (void)cg_cuda_nvrtc_available(&quiet);
    char gpu[600];
    target_cuda_fingerprint(info->name, info->sm, info->driver_version, gpu, sizeof gpu);
    snprintf(buf, cap, "%s nvrtc %d", gpu, cg_cuda_nvrtc_version());
}
