/* test_cuda_mock.c -- the CUDA runtime (src/runtime/cuda) against a mock driver
 * (tests/cuda/mock_libcuda.c, passed as argv[1] and loaded through $WPK_CUDA_DRIVER_LIBRARY):
 * what does not need a GPU to be right -- probing and opening a device, memory round trips,
 * out-of-memory classified as such and recoverable, module loads refused as LOAD or CONFIG with
 * the reason, shared memory opted into above 48 KiB, the event-timed measurement loop (batch
 * growth to the minimum sample time, the L2 flush), the backend vtable, a crashed launch and a
 * hung kernel (watchdog) losing the context while the rest of the process goes on; and the
 * isolated measurement (rt_cuda_run_isolated): a good candidate's samples, a hung kernel killed
 * by the host's deadline (TIMEOUT), one stopped by the child's own watchdog, device memory
 * exhaustion classified as OOM, a crashing child as CRASH; the program executor (cuda_program.h)
 * with the mock's computing kernels: workspace offsets, weights uploaded once, a device copy,
 * pinned staging, direct runs and CUDA Graph capture + replay giving the same outputs, steps
 * reaching outside their space refused. */
#define _DEFAULT_SOURCE

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "../unit/check.h"
#include "base/context.h"
#include "runtime/cuda/cuda_program.h"
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

/* ---- the program executor ---- */

#define PN 256 /* floats per buffer: grid 4 x block 64 */

static void test_program(wpk_context *ctx, rt_cuda *d) {
    const rt_cuda_dims dims = {{4, 1, 1}, {64, 1, 1}, 0};
    const rt_cuda_image images[2] = {{"// PTX", 7, "wpk_mock_scale2", dims},
                                     {"// PTX", 7, "wpk_mock_add1", dims}};
    const uint64_t B = PN * 4;
    /* in -> 2x -> mid -> +1 -> out -> copy -> out2; weights -> 2w -> out3 */
    const rt_cuda_step steps[4] = {
        {"scale", 0, 2, {{RT_CUDA_WORKSPACE, 0}, {RT_CUDA_WORKSPACE, B}}, {0}, {0}, 0},
        {"add", 1, 2, {{RT_CUDA_WORKSPACE, B}, {RT_CUDA_WORKSPACE, 2 * B}}, {0}, {0}, 0},
        {"copy", -1, 0, {{0}}, {RT_CUDA_WORKSPACE, 2 * B}, {RT_CUDA_WORKSPACE, 3 * B}, B},
        {"weights", 0, 2, {{RT_CUDA_WEIGHTS, 0}, {RT_CUDA_WORKSPACE, 4 * B}}, {0}, {0}, 0}};
    const rt_cuda_io in[1] = {{{RT_CUDA_WORKSPACE, 0}, B}};
    const rt_cuda_io outs[3] = {{{RT_CUDA_WORKSPACE, 2 * B}, B}, {{RT_CUDA_WORKSPACE, 3 * B}, B},
                                {{RT_CUDA_WORKSPACE, 4 * B}, B}};
    float w[PN], x[PN], y[3][PN];
    for (int i = 0; i < PN; i++) w[i] = (float)i * 0.25f;
    rt_cuda_program_desc desc = {images, 2, steps, 4, 5 * B, w, sizeof w, in, 1, outs, 3};
    for (int graph = 0; graph < 2; graph++) {
        rt_cuda_program *p = NULL;
        wpk_status st = rt_cuda_program_create(d, &desc, graph, &p);
        if (st) fprintf(stderr, "program: %s\n", wpk_context_error(ctx));
        CHECK(st == WPK_OK && p);
        if (!p) continue;
        CHECK(rt_cuda_program_device_bytes(p) == 6 * B);
        for (int run = 0; run < 3; run++) {
            for (int i = 0; i < PN; i++) x[i] = (float)(i - run * 7);
            for (int j = 0; j < 3; j++)
                for (int i = 0; i < PN; i++) y[j][i] = NAN;
            void *o[3] = {y[0], y[1], y[2]};
            const void *ii[1] = {x};
            st = rt_cuda_program_run(p, ii, o, 0);
            if (st) fprintf(stderr, "program run: %s\n", wpk_context_error(ctx));
            CHECK(st == WPK_OK);
            bool ok = true;
            for (int i = 0; i < PN; i++)
                ok &= y[0][i] == 2 * x[i] + 1 && y[1][i] == y[0][i] && y[2][i] == 2 * w[i];
            CHECK(ok);
        }
        int64_t gl, kl;
        rt_cuda_program_counts(p, &gl, &kl);
        if (graph) CHECK(rt_cuda_program_uses_graph(p) && gl == 3 && kl == 0);
        else CHECK(!rt_cuda_program_uses_graph(p) && gl == 0 && kl == 9);
        rt_cuda_program_free(p);
    }
    /* refused: an argument past the workspace, a kernel that is not there */
    rt_cuda_step badstep = steps[1];
    badstep.args[1].offset = 5 * B;
    desc.steps = &badstep, desc.nsteps = 1;
    rt_cuda_program *p = NULL;
    CHECK_ERR(ctx, rt_cuda_program_create(d, &desc, false, &p), WPK_ERR_INVALID_ARG,
              "step 'add': an argument at offset 5120");
    CHECK(p == NULL);
    badstep = steps[1];
    badstep.kernel = 2;
    CHECK_ERR(ctx, rt_cuda_program_create(d, &desc, false, &p), WPK_ERR_INVALID_ARG,
              "names kernel 2 of 2");
    badstep = steps[2];
    badstep.copy_bytes = 3 * B;
    CHECK_ERR(ctx, rt_cuda_program_create(d, &desc, false, &p), WPK_ERR_INVALID_ARG,
              "the copy's destination");
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
    rt_backend be;
    rt_cuda_backend_init(&be, d);
    const rt_backend_i *bi = be.iface;
    CHECK(!strcmp(bi->name, "cuda") && !bi->host_visible);
    void *dr = NULL;
    CHECK(bi->alloc(&be, ctx, sizeof host, &dr) == WPK_OK);
    CHECK(bi->upload(&be, ctx, dr, host, sizeof host) == WPK_OK);
    CHECK(bi->download(&be, ctx, back, dr, sizeof back) == WPK_OK);
    CHECK(bi->synchronize(&be, ctx) == WPK_OK && !memcmp(host, back, sizeof host));
    bi->free(&be, dr);
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
    if (d) test_program(ctx, d);
    rt_cuda_close(d);

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
