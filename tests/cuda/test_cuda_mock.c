/* test_cuda_mock.c -- the CUDA runtime (src/runtime/cuda) against a mock driver
 * (tests/cuda/mock_libcuda.c, passed as argv[1] and loaded through $WPK_CUDA_DRIVER_LIBRARY):
 * what does not need a GPU to be right -- probing and opening a device, memory round trips,
 * out-of-memory classified as such and recoverable, module loads refused as LOAD or CONFIG with
 * the reason, shared memory opted into above 48 KiB, the event-timed measurement loop (batch
 * growth to the minimum sample time, the L2 flush), the backend vtable, a crashed launch and a
 * hung kernel (watchdog) losing the context while the rest of the process goes on; and the
 * isolated measurement (rt_cuda_run_isolated): a good candidate's samples, a hung kernel killed
 * by the host's deadline (TIMEOUT), one stopped by the child's own watchdog, device memory
 * exhaustion classified as OOM, a crashing child as CRASH; a runtime plan (runtime/plan.h) run
 * by rt_exec on the CUDA backend with the mock's computing kernels: modules loaded from the
 * plan's bytes, workspace offsets, constants uploaded once, device copies (one of a byte range),
 * direct runs and CUDA Graph capture + replay giving the same outputs, no allocation per run,
 * per-step times from events, the plan written and read back; steps the runners cannot take
 * (a kernel not in its module, a copy past its tensor, a module without its NUL) refused. */
#define _DEFAULT_SOURCE

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/check.h"
#include "base/context.h"
#include "base/alloc.h"
#include "runtime/exec.h"
#include "kernels/vendor/cuda_libs.h"
#include "runtime/cuda/cuda_rt.h"

static rt_cuda_kernel *load(wpk_context *ctx, rt_cuda *d, const char *image, const char *name,
                            rt_cuda_dims dims, wpk_status want) {
    rt_cuda_kernel *k = NULL;
    wpk_status st = rt_cuda_kernel_load(d, image, strlen(image) + 1, name, &dims, &k);
    if (st != want) fprintf(stderr, "load %s: %s\n", name, wpk_context_error(ctx));
    CHECK(st == want);
    CHECK((st == WPK_OK) == (k != NULL));
    return k;
}

typedef struct job {
    rt_cuda_kernel *k;
    uint64_t args[2];
} job;

static wpk_status enqueue(void *user, rt_cuda *d) {
    job *j = user;
    return rt_cuda_kernel_launch(d, j->k, j->args, 2);
}

/* ---- a plan on the CUDA backend through the executor ---- */

#define PN 256 /* floats per buffer: grid 4 x block 64 */
#define PB (PN * 4)

/* x -> 2x -> mid -> +1 -> y -> copy -> y2; w -> 2w -> y3; y's second half -> two copies (the
 * second into y4 at an offset) -> y4 */
typedef struct mock_plan {
    rt_plan p;
    rt_tensor_desc t[7];
    rt_module m[1];
    rt_step s[6];
    int32_t args[12];
    uint8_t launch[RT_CUDA_LAUNCH_PAYLOAD], copy[RT_CUDA_COPY_PAYLOAD], half[RT_CUDA_COPY_PAYLOAD];
    uint8_t quarter[RT_CUDA_COPY_TO_PAYLOAD];
    rt_io in[1], out[4];
    float w[PN];
} mock_plan;

static void mock_plan_init(mock_plan *m) {
    memset(m, 0, sizeof *m);
    static const char *names[7] = {"x", "mid", "y", "y2", "w", "y3", "y4"};
    static const int64_t at[7] = {0, PB, 2 * PB, 3 * PB, 0, 4 * PB, 5 * PB};
    for (int t = 0; t < 7; t++) {
        m->t[t] = (rt_tensor_desc){names[t], WPK_DTYPE_FLOAT32, 1, {t == 6 ? PN / 2 : PN},
                                   t == 4 ? RT_PLACE_CONST : RT_PLACE_WORKSPACE, at[t]};
    }
    m->m[0] = (rt_module){"// PTX", 7};
    const rt_cuda_dims dims = {{4, 1, 1}, {64, 1, 1}, 0};
    rt_cuda_launch_payload(&dims, m->launch);
    rt_cuda_copy_payload(0, PB, m->copy);
    rt_cuda_copy_payload(PB / 2, PB / 4, m->half);
    rt_cuda_copy_to_payload(3 * PB / 4, PB / 4, PB / 4, m->quarter);
    static const int32_t args[12] = {0, 1, 1, 2, 2, 3, 4, 5, 2, 6, 2, 6};
    memcpy(m->args, args, sizeof args);
    const char *kr = "cuda_kernel", *cr = "cuda_copy";
    m->s[0] = (rt_step){kr, 0, "wpk_mock_scale2", 2, &m->args[0], m->launch, sizeof m->launch,
                        "scale", "Mul", "", "", 0};
    m->s[1] = (rt_step){kr, 0, "wpk_mock_add1", 2, &m->args[2], m->launch, sizeof m->launch,
                        "add", "Add", "", "", 0};
    m->s[2] = (rt_step){cr, -1, "", 2, &m->args[4], m->copy, sizeof m->copy, "copy",
                        "Identity", "", "", 0};
    m->s[3] = (rt_step){kr, 0, "wpk_mock_scale2", 2, &m->args[6], m->launch, sizeof m->launch,
                        "weights", "Mul", "", "", 0};
    m->s[4] = (rt_step){cr, -1, "", 2, &m->args[8], m->half, sizeof m->half, "half", "Slice",
                        "", "", 0};
    m->s[5] = (rt_step){cr, -1, "", 2, &m->args[10], m->quarter, sizeof m->quarter, "quarter",
                        "Concat", "", "", 0};
    for (int i = 0; i < PN; i++) m->w[i] = (float)i * 0.25f;
    m->in[0].tensor = 0;
    for (int i = 0; i < 4; i++) m->out[i].tensor = (int[]){2, 3, 5, 6}[i];
    rt_plan *p = &m->p;
    p->threads = 1;
    p->provider = p->records = "";
    p->workspace = 6 * PB;
    p->consts = m->w;
    p->consts_len = sizeof m->w;
    p->nmodules = 1, p->modules = m->m;
    p->ntensors = 7, p->tensors = m->t;
    p->ninputs = 1, p->inputs = m->in;
    p->noutputs = 4, p->outputs = m->out;
    p->nsteps = 6, p->steps = m->s;
}

/* Four runs of plan p on a backend (graph or not); the launch counts after them. */
static void run_plan(wpk_context *ctx, rt_cuda *d, const rt_plan *p, bool graph, bool profile,
                     int64_t *gl, int64_t *kl) {
    rt_cuda_backend_options bo = {graph, 0};
    rt_backend *be = NULL;
    CHECK(rt_cuda_backend_create(ctx, d, &bo, &be) == WPK_OK && be);
    if (!be) return;
    rt_exec *x = NULL;
    wpk_status st = rt_exec_create(ctx, "mock plan", p, be, profile, &x);
    if (st) fprintf(stderr, "exec: %s\n", wpk_context_error(ctx));
    CHECK(st == WPK_OK && x);
    void *mock = dlopen(getenv("WPK_CUDA_DRIVER_LIBRARY"), RTLD_NOW | RTLD_NOLOAD);
    long *allocs = mock ? dlsym(mock, "mock_allocs") : NULL;
    long dev_before = -1, host_before = -1;
    /* a plan read back from bytes holds its constants where the file put them: copied out,
       not read in place (the blob's offset in the file need not be float-aligned) */
    float w[PN];
    memcpy(w, p->consts, sizeof w);
    float xin[PN], y[4][PN];
    for (int run = 0; x && run < 4; run++) {
        /* the first run captures the graph, the first two size the pinned staging */
        if (run == 2) host_before = wpk_alloc_count(), dev_before = allocs ? *allocs : -1;
        for (int i = 0; i < PN; i++) xin[i] = (float)(i - run * 7);
        for (int j = 0; j < 4; j++)
            for (int i = 0; i < PN; i++) y[j][i] = NAN;
        st = rt_exec_upload(x, ctx, 0, xin, sizeof xin);
        if (!st) st = rt_exec_run(x, ctx);
        for (int j = 0; j < 4 && !st; j++) {
            int t = p->outputs[j].tensor;
            st = rt_exec_download(x, ctx, t, y[j], rt_tensor_bytes(&p->tensors[t]));
        }
        if (st) fprintf(stderr, "run: %s\n", wpk_context_error(ctx));
        CHECK(st == WPK_OK);
        bool ok = true;
        for (int i = 0; i < PN; i++)
            ok &= y[0][i] == 2 * xin[i] + 1 && y[1][i] == y[0][i] && y[2][i] == 2 * w[i];
        for (int i = 0; i < PN / 2; i++) ok &= y[3][i] == y[0][PN / 2 + i];
        CHECK(ok);
    }
    /* runs after those allocate nothing, on the host or the device (pinned memory included) */
    if (!profile) CHECK(wpk_alloc_count() == host_before);
    CHECK(allocs && *allocs == dev_before);
    if (!profile) CHECK(rt_cuda_backend_staged(be) > 0);
    if (mock) dlclose(mock);
    const double *ms = x ? rt_exec_step_ms(x) : NULL;
    if (profile) {
        /* the mock's events: 10 us per kernel launch, copies take none */
        CHECK(ms && fabs(ms[0] - 0.01) < 1e-6 && fabs(ms[1] - 0.01) < 1e-6 && ms[2] == 0.0);
    } else {
        CHECK(ms == NULL);
    }
    rt_cuda_backend_counts(be, gl, kl);
    CHECK(rt_cuda_backend_uses_graph(be) == (graph && !profile));
    rt_exec_free(x);
    rt_cuda_backend_free(be);
}

/* Step k of a copy of the plan altered by `alter`, refused at load with want and needle. */
static void refused(wpk_context *ctx, rt_cuda *d, void (*alter)(mock_plan *), wpk_status want,
                    const char *needle) {
    mock_plan m;
    mock_plan_init(&m);
    alter(&m);
    rt_backend *be = NULL;
    CHECK(rt_cuda_backend_create(ctx, d, NULL, &be) == WPK_OK);
    rt_exec *x = NULL;
    CHECK_ERR(ctx, rt_exec_create(ctx, "mock plan", &m.p, be, false, &x), want, needle);
    CHECK(x == NULL);
    rt_cuda_backend_free(be);
}

static void no_symbol(mock_plan *m) { m->s[1].symbol = "missing"; }
static void past_end(mock_plan *m) { rt_cuda_copy_payload(PB / 2 + 4, PB / 2, m->half); }
static void past_slice(mock_plan *m) {
    rt_cuda_copy_to_payload(0, PB / 4, PB / 4 + 4, m->quarter);
}
static void no_nul(mock_plan *m) { m->m[0].len = 6; }
static void bad_module(mock_plan *m) { m->m[0] = (rt_module){"BADPTX", 7}; }
static void short_payload(mock_plan *m) { m->s[0].payload_len = 8; }

static void test_plan(wpk_context *ctx, rt_cuda *d) {
    mock_plan m;
    mock_plan_init(&m);
    int64_t gl = -1, kl = -1;
    run_plan(ctx, d, &m.p, false, false, &gl, &kl);
    CHECK(gl == 0 && kl == 12);
    run_plan(ctx, d, &m.p, true, false, &gl, &kl);
    CHECK(gl == 4 && kl == 0); /* captured once, launched as a graph four times */
    run_plan(ctx, d, &m.p, true, true, &gl, &kl);
    CHECK(gl == 0 && kl == 12); /* a profiled run launches step by step between events */
    /* the plan survives being written and read back (what a .wpk holds) */
    byte_writer w = {0};
    CHECK(rt_plan_write(ctx, &m.p, &w) == WPK_OK);
    byte_reader r = {w.data, w.data + w.len, false};
    rt_plan back;
    wpk_status st = rt_plan_read(ctx, "mock.wpk", &r, &back);
    if (st) fprintf(stderr, "read: %s\n", wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    if (st == WPK_OK) {
        CHECK(back.nsteps == 6 && !strcmp(back.steps[5].runner, "cuda_copy") &&
              back.steps[5].payload_len == RT_CUDA_COPY_TO_PAYLOAD);
        run_plan(ctx, d, &back, true, false, &gl, &kl);
        CHECK(gl == 4 && kl == 0);
        rt_plan_free(&back);
    }
    bw_free(&w);
    refused(ctx, d, no_symbol, WPK_ERR_INTERNAL, "node 'add': CUDA: kernel 'missing' is not in");
    refused(ctx, d, past_end, WPK_ERR_PARSE, "node 'half': a copy of 512 bytes at offset 516");
    refused(ctx, d, past_slice, WPK_ERR_PARSE, "node 'quarter': a copy of 256 bytes at offset 0 "
            "from 1024 bytes to offset 260 of 512");
    refused(ctx, d, no_nul, WPK_ERR_PARSE, "neither a cubin nor PTX text ending in NUL");
    refused(ctx, d, bad_module, WPK_ERR_INTERNAL, "CUDA_ERROR_INVALID_PTX");
    CHECK(rt_cuda_last_fault(d) == RT_CUDA_FAULT_LOAD);
    refused(ctx, d, short_payload, WPK_ERR_PARSE, "node 'scale': a launch payload of 8 bytes");
}

/* A plan whose step 'add' runs kernel `symbol` on a fresh device: its run fails with needle and
 * fault, and the device is lost (as the old program executor's runs were). */
static void plan_fault(wpk_context *ctx, const char *symbol, bool graph, const char *needle,
                       rt_cuda_fault fault) {
    rt_cuda *d = NULL;
    CHECK(rt_cuda_open(ctx, 0, &d) == WPK_OK);
    if (!d) return;
    mock_plan m;
    mock_plan_init(&m);
    m.s[1].symbol = symbol;
    rt_cuda_backend_options bo = {graph, 50};
    rt_backend *be = NULL;
    rt_exec *x = NULL;
    CHECK(rt_cuda_backend_create(ctx, d, &bo, &be) == WPK_OK);
    CHECK(be && rt_exec_create(ctx, "mock plan", &m.p, be, false, &x) == WPK_OK);
    if (x) {
        CHECK_ERR(ctx, rt_exec_run(x, ctx), WPK_ERR_INTERNAL, needle);
        CHECK(rt_cuda_last_fault(d) == fault && rt_cuda_lost(d));
        CHECK(!rt_cuda_backend_uses_graph(be));
    }
    rt_exec_free(x);
    rt_cuda_backend_free(be);
    rt_cuda_close(d);
}

/* ---- isolated measurement ---- */

typedef enum { ISO_OK, ISO_HANG, ISO_CHILD_WATCHDOG, ISO_OOM, ISO_ABORT } iso_kind;

static wpk_status iso_child(void *user, rt_cuda *d, rt_cuda_result *r) {
    iso_kind kind = *(iso_kind *)user;
    uint64_t a = 0, b = 0;
    wpk_status st = rt_cuda_alloc(d, kind == ISO_OOM ? (size_t)2 << 30 : 1024, &a);
    if (st) return st;
    if ((st = rt_cuda_alloc(d, 1024, &b))) return st;
    if (kind == ISO_ABORT) abort();
    rt_cuda_dims dims = {{4, 1, 1}, {128, 1, 1}, 0};
    rt_cuda_kernel *k = NULL;
    const char *name = kind == ISO_HANG || kind == ISO_CHILD_WATCHDOG ? "spin" : "k";
    if ((st = rt_cuda_kernel_load(d, "// PTX", 7, name, &dims, &k))) return st;
    job j = {k, {a, b}};
    if (kind == ISO_OK) {
        rt_cuda_measure m = rt_cuda_default_measure();
        m.repeat = 5;
        st = rt_cuda_time(d, enqueue, &j, &m, r->samples);
        if (!st) r->nsamples = m.repeat;
    } else {
        st = rt_cuda_kernel_launch(d, k, j.args, 2);
        if (!st) st = rt_cuda_sync(d, kind == ISO_HANG ? 600000 : 50);
    }
    rt_cuda_kernel_free(k);
    return st;
}

static void test_isolated(wpk_context *ctx) {
    rt_cuda_result r;
    iso_kind kind = ISO_OK;
    CHECK(rt_cuda_run_isolated(ctx, 0, 20, iso_child, &kind, &r) == WPK_OK);
    if (r.fault) fprintf(stderr, "isolated ok: %s\n", r.message);
    CHECK(r.fault == RT_CUDA_FAULT_NONE && r.nsamples == 5 && fabs(r.samples[4] - 1e-5) < 1e-7);
    kind = ISO_HANG;
    CHECK(rt_cuda_run_isolated(ctx, 0, 0.3, iso_child, &kind, &r) == WPK_OK);
    CHECK(r.fault == RT_CUDA_FAULT_TIMEOUT && strstr(r.message, "(watchdog)") != NULL);
    CHECK(r.nsamples == 0);
    kind = ISO_CHILD_WATCHDOG;
    CHECK(rt_cuda_run_isolated(ctx, 0, 20, iso_child, &kind, &r) == WPK_OK);
    CHECK(r.fault == RT_CUDA_FAULT_TIMEOUT && strstr(r.message, "within 50 ms") != NULL);
    kind = ISO_OOM;
    CHECK(rt_cuda_run_isolated(ctx, 0, 20, iso_child, &kind, &r) == WPK_OK);
    CHECK(r.fault == RT_CUDA_FAULT_OOM && strstr(r.message, "out of device memory") != NULL);
    kind = ISO_ABORT;
    CHECK(rt_cuda_run_isolated(ctx, 0, 20, iso_child, &kind, &r) == WPK_OK);
    CHECK(r.fault == RT_CUDA_FAULT_CRASH && strstr(r.message, "signal 6") != NULL);
    /* a device the child cannot open */
    kind = ISO_OK;
    CHECK(rt_cuda_run_isolated(ctx, 7, 20, iso_child, &kind, &r) == WPK_OK);
    CHECK(r.fault == RT_CUDA_FAULT_UNAVAILABLE && strstr(r.message, "no device 7") != NULL);
    CHECK_ERR(ctx, rt_cuda_run_isolated(ctx, 0, 1, NULL, NULL, &r), WPK_ERR_INVALID_ARG,
              "no function");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s path/to/libwpk_mock_cuda.so\n", argv[0]);
        return 1;
    }
    setenv("WPK_CUDA_DRIVER_LIBRARY", argv[1], 1);
    wpk_context *ctx = wpk_context_create();
    rt_cuda_info info;
    wpk_status st = rt_cuda_probe(ctx, 0, &info);
    if (st) fprintf(stderr, "probe: %s\n", wpk_context_error(ctx));
    CHECK(st == WPK_OK);
    CHECK(!strcmp(info.name, "wpk mock GPU") && info.sm == 90 && info.sm_count == 132);
    CHECK(info.memory_bytes == (size_t)1 << 30 && info.max_shared_per_block_optin == 227 * 1024);
    CHECK(info.driver_version == 13000);
    CHECK_ERR(ctx, rt_cuda_probe(ctx, 3, NULL), WPK_ERR_UNSUPPORTED, "CUDA unavailable: no device 3");
    rt_cuda *d = NULL;
    CHECK(rt_cuda_open(ctx, 0, &d) == WPK_OK && d);
    if (!d) return 1;
    CHECK(rt_cuda_stream(d) != NULL && !rt_cuda_lost(d));

    /* memory: a round trip, then exhaustion classified and recovered from */
    float host[256], back[256];
    for (int i = 0; i < 256; i++) host[i] = (float)i * 0.5f, back[i] = NAN;
    uint64_t p = 0, q = 0;
    CHECK(rt_cuda_alloc(d, sizeof host, &p) == WPK_OK && p != 0);
    CHECK(rt_cuda_upload(d, p, host, sizeof host) == WPK_OK);
    CHECK(rt_cuda_download(d, back, p, sizeof back) == WPK_OK);
    CHECK(!memcmp(host, back, sizeof host));
    CHECK(rt_cuda_memset_async(d, p, 0, sizeof host) == WPK_OK && rt_cuda_sync(d, 0) == WPK_OK);
    CHECK(rt_cuda_download(d, back, p, sizeof back) == WPK_OK && back[7] == 0.0f);
    CHECK_ERR(ctx, rt_cuda_alloc(d, (size_t)2 << 30, &q), WPK_ERR_NOMEM, "out of device memory");
    CHECK(strstr(wpk_context_error(ctx), "CUDA_ERROR_OUT_OF_MEMORY") != NULL);
    CHECK(rt_cuda_last_fault(d) == RT_CUDA_FAULT_OOM && q == 0 && !rt_cuda_lost(d));
    CHECK(rt_cuda_alloc(d, 64, &q) == WPK_OK && rt_cuda_last_fault(d) == RT_CUDA_FAULT_NONE);

    /* modules: a good one; a bad image; launches that do not fit */
    rt_cuda_dims dims = {{4, 1, 1}, {128, 1, 1}, 0};
    rt_cuda_kernel *k = load(ctx, d, "// PTX", "k", dims, WPK_OK);
    if (k) {
        rt_cuda_kernel_info ki = rt_cuda_kernel_describe(k);
        CHECK(ki.registers == 40 && ki.local_bytes == 0 && ki.max_threads == 1024);
    }
    load(ctx, d, "BADPTX", "k", dims, WPK_ERR_INTERNAL);
    CHECK(rt_cuda_last_fault(d) == RT_CUDA_FAULT_LOAD);
    CHECK(strstr(wpk_context_error(ctx), "CUDA_ERROR_INVALID_PTX") != NULL);
    load(ctx, d, "// PTX", "missing", dims, WPK_ERR_INTERNAL);
    rt_cuda_dims wide = {{1, 1, 1}, {512, 1, 1}, 0};
    load(ctx, d, "// PTX", "heavy", wide, WPK_ERR_INTERNAL);
    CHECK(rt_cuda_last_fault(d) == RT_CUDA_FAULT_CONFIG);
    CHECK(strstr(wpk_context_error(ctx), "512 threads per block, the kernel allows 256") != NULL);
    rt_cuda_dims greedy = {{1, 1, 1}, {64, 1, 1}, 300 * 1024};
    load(ctx, d, "// PTX", "k", greedy, WPK_ERR_INTERNAL);
    CHECK(strstr(wpk_context_error(ctx), "307200 bytes of shared memory, the device allows 232448"));
    greedy.shared_bytes = 100 * 1024; /* above 48 KiB: opted into */
    rt_cuda_kernel *big = load(ctx, d, "// PTX", "k", greedy, WPK_OK);
    uint64_t args[2] = {p, q};
    if (big) CHECK(rt_cuda_kernel_launch(d, big, args, 2) == WPK_OK && rt_cuda_sync(d, 0) == WPK_OK);
    rt_cuda_kernel_free(big);

    /* timing: 10 us of device time per launch; batches grow until a sample takes 1 ms */
    if (k) {
        job j = {k, {p, q}};
        rt_cuda_measure m = rt_cuda_default_measure();
        double samples[10];
        CHECK(rt_cuda_time(d, enqueue, &j, &m, samples) == WPK_OK);
        for (int i = 0; i < m.repeat; i++) CHECK(fabs(samples[i] - 1e-5) < 1e-7);
        m.number = 3;
        m.repeat = 2;
        CHECK(rt_cuda_time(d, enqueue, &j, &m, samples) == WPK_OK && fabs(samples[1] - 1e-5) < 1e-7);
        /* replays of a captured graph: the mock's clock advances only by the replayed launches */
        m.graph = true;
        void *mock = dlopen(getenv("WPK_CUDA_DRIVER_LIBRARY"), RTLD_NOW | RTLD_NOLOAD);
        long *replays = mock ? dlsym(mock, "mock_graph_replays") : NULL;
        long before = replays ? *replays : -1;
        CHECK(rt_cuda_time(d, enqueue, &j, &m, samples) == WPK_OK);
        for (int i = 0; i < m.repeat; i++) CHECK(fabs(samples[i] - 1e-5) < 1e-7);
        CHECK(replays && *replays - before == m.repeat); /* one replay per sample */
        if (mock) dlclose(mock);
        m.graph = false;
        m.flush_l2 = true;
        CHECK(rt_cuda_time(d, enqueue, &j, &m, samples) == WPK_OK && fabs(samples[0] - 1e-5) < 1e-7);
        m.repeat = 0;
        CHECK_ERR(ctx, rt_cuda_time(d, enqueue, &j, &m, samples), WPK_ERR_INVALID_ARG, "repeat 0");
    }

    /* the backend through its vtable */
    rt_backend *be = NULL;
    CHECK(rt_cuda_backend_create(ctx, d, NULL, &be) == WPK_OK && be);
    const rt_backend_i *bi = be->iface;
    CHECK(!strcmp(bi->name, "cuda") && !bi->host_visible && rt_cuda_backend_device(be) == d);
    void *dr = NULL;
    CHECK(bi->alloc(be, ctx, sizeof host, &dr) == WPK_OK);
    CHECK(bi->upload(be, ctx, dr, host, sizeof host) == WPK_OK);
    CHECK(bi->download(be, ctx, back, dr, sizeof back) == WPK_OK);
    CHECK(bi->synchronize(be, ctx) == WPK_OK && !memcmp(host, back, sizeof host));
    CHECK(bi->zero(be, ctx, dr, sizeof host) == WPK_OK && bi->synchronize(be, ctx) == WPK_OK);
    CHECK(bi->download(be, ctx, back, dr, sizeof back) == WPK_OK && back[3] == 0.0f);
    bi->free(be, dr);
    rt_cuda_backend_free(be);
    uint64_t r = 0;

    /* cuDNN and cuBLAS over this driver fail cleanly (or are absent), never crash */
    rt_conv_desc cd = {.n = 1, .c = 4, .h = 8, .w = 8, .k = 4, .kh = 3, .kw = 3, .stride = {1, 1},
                       .pad = {1, 1, 1, 1}, .dilation = {1, 1}, .groups = 1};
    rt_cudnn_conv *conv = NULL;
    st = rt_cudnn_conv_create(d, &cd, &conv);
    if (st == WPK_OK) rt_cudnn_conv_free(conv);
    else fprintf(stderr, "cuDNN over the mock driver: %s\n", wpk_context_error(ctx));
    cd.pad[2] = 2;
    CHECK_ERR(ctx, rt_cudnn_conv_create(d, &cd, &conv), WPK_ERR_UNSUPPORTED, "");

    rt_cuda_free(d, p);
    rt_cuda_free(d, q);

    /* a crashed launch loses the context; every later call says so */
    rt_cuda_kernel *crash = load(ctx, d, "// PTX", "crash", dims, WPK_OK);
    if (crash) {
        CHECK_ERR(ctx, rt_cuda_kernel_launch(d, crash, args, 2), WPK_ERR_INTERNAL,
                  "CUDA_ERROR_ILLEGAL_ADDRESS");
        CHECK(rt_cuda_last_fault(d) == RT_CUDA_FAULT_CRASH && rt_cuda_lost(d));
        CHECK_ERR(ctx, rt_cuda_alloc(d, 4, &r), WPK_ERR_INTERNAL, "the device context was lost");
    }
    rt_cuda_kernel_free(crash);
    rt_cuda_kernel_free(k);
    rt_cuda_close(d);

    CHECK(rt_cuda_open(ctx, 0, &d) == WPK_OK);
    if (d) test_plan(ctx, d);
    rt_cuda_close(d);

    /* a plan's crashing kernel (in the graph capture), a hung one (the backend's watchdog) */
    plan_fault(ctx, "crash", true, "CUDA_ERROR_ILLEGAL_ADDRESS", RT_CUDA_FAULT_CRASH);
    plan_fault(ctx, "spin", false, "did not finish within 50 ms (watchdog)", RT_CUDA_FAULT_TIMEOUT);

    /* a kernel that never ends: the watchdog gives up on it */
    CHECK(rt_cuda_open(ctx, 0, &d) == WPK_OK);
    rt_cuda_kernel *spin = load(ctx, d, "// PTX", "spin", dims, WPK_OK);
    if (spin) {
        CHECK(rt_cuda_kernel_launch(d, spin, args, 2) == WPK_OK);
        CHECK_ERR(ctx, rt_cuda_sync(d, 50), WPK_ERR_INTERNAL, "did not finish within 50 ms (watchdog)");
        CHECK(rt_cuda_last_fault(d) == RT_CUDA_FAULT_TIMEOUT && rt_cuda_lost(d));
    }
    rt_cuda_kernel_free(spin);
    rt_cuda_close(d);
    test_isolated(ctx);
    wpk_context_free(ctx);
    CHECK_DONE();
}
