/* test_artifact.c -- compiled plans (.wpk): compile a model, load the plan with no C compiler
 * ($CC pointing nowhere; no compiler run counted) and check its outputs equal the session's that
 * compiled the same kernels; the per-node profile survives; a run of a plan allocates nothing;
 * inputs of another batch with no compiler are a clear error; another format version or target
 * is WPK_ERR_UNSUPPORTED saying what differs; the file truncated at every offset of its header
 * and at many more, or with a byte flipped at many offsets, is refused (WPK_ERR_PARSE, or
 * UNSUPPORTED where the flip hits the version) naming the file, never a crash; writing is
 * atomic (a failed write leaves the old plan). Kernels go to a temporary cache. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "check.h"
#include "codegen/c/cg_c.h"
#include "runtime/artifact.h"
#include "base/target_fingerprint.h"
#include "wpk.h"

#define MODEL "tests/fuzz/corpus/conv_relu.onnx"
#define NX (2 * 3 * 8 * 8)
#define NY (2 * 2 * 8 * 8)

static char dir[128], plan[200];

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len + 1);
    *n = b ? fread(b, 1, (size_t)len, f) : 0;
    fclose(f);
    return b;
}

static void spill(const char *path, const uint8_t *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(b, 1, n, f);
    fclose(f);
}

static float xin[NX];

static double cpu_ms(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

/* Bind x (batch 2 unless told), run, copy the output. */
static wpk_status run(wpk_session *s, int batch, float *y) {
    int64_t dims[4] = {batch, 3, 8, 8};
    wpk_status st = wpk_session_set_input(s, "x", WPK_DTYPE_FLOAT32, dims, 4, xin);
    if (st == WPK_OK) st = wpk_session_run(s);
    wpk_tensor_view v;
    if (st == WPK_OK) st = wpk_session_output(s, 0, &v);
    if (st == WPK_OK && y) memcpy(y, v.data, sizeof(float) * (size_t)(NY / 2 * batch));
    return st;
}

/* Load path as a plan: must be refused with want, the message naming the file. */
static void refused(wpk_context *ctx, const char *path, wpk_status want, const char *needle,
                    size_t at) {
    wpk_session *s = NULL;
    wpk_session_params sp = wpk_session_default_params();
    wpk_status st = wpk_session_create_from_plan(ctx, path, &sp, &s);
    if (st != want || !strstr(wpk_context_error(ctx), path) ||
        !strstr(wpk_context_error(ctx), needle)) {
        fprintf(stderr, "at %zu: expected %s with '%s', got %s: %s\n", at, wpk_status_name(want),
                needle, wpk_status_name(st), wpk_context_error(ctx));
        check_failures++;
    }
    wpk_session_free(s);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/wpk_test_artifact_%d", (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dir, dir);
    if (system(cmd) != 0) return 1;
    setenv("WPK_CACHE_DIR", dir, 1);
    snprintf(plan, sizeof plan, "%s/m.wpk", dir);
    for (int i = 0; i < NX; i++) xin[i] = (float)((i * 29) % 23) / 11.0f - 1.0f;
    wpk_context *ctx = wpk_context_create();

    wpk_model *m = NULL;
    CHECK(wpk_model_load(ctx, MODEL, &m) == WPK_OK);
    if (!m) CHECK_DONE();
    wpk_compile_params cp = wpk_compile_default_params();
    cp.batch = 2;
    cp.records = "";
    CHECK(cp.opt_level == 3 && cp.batch == 2 && cp.check_speed);
    /* --strict: every node without records is an error naming it */
    cp.strict = 1;
    CHECK_ERR(ctx, wpk_compile(ctx, m, &cp, plan), WPK_ERR_INVALID_ARG, "'conv'");
    struct stat sb;
    CHECK(stat(plan, &sb) != 0);
    cp.strict = 0;
    CHECK(wpk_compile(ctx, m, &cp, plan) == WPK_OK);
    /* no directory to write into: an I/O error, nothing half-written */
    CHECK_ERR(ctx, wpk_compile(ctx, m, &cp, "/nonexistent-dir/m.wpk"), WPK_ERR_IO, "nonexistent");
    cp.batch = 0;
    CHECK_ERR(ctx, wpk_compile(ctx, m, &cp, plan), WPK_ERR_INVALID_ARG, "batch");
    cp.batch = 2;

    /* the session that compiles the same kernels, for the expected outputs */
    float want[NY], got[NY];
    wpk_session_params sp = wpk_session_default_params();
    sp.backend = WPK_BACKEND_CPU;
    sp.records = "";
    wpk_session *s = NULL;
    CHECK(wpk_session_create(ctx, m, &sp, &s) == WPK_OK);
    CHECK(run(s, 2, want) == WPK_OK);
    wpk_session_free(s);

    /* the plan with no C compiler anywhere */
    setenv("CC", "/nonexistent/cc", 1);
    int compiles = cg_c_compile_count();
    sp = wpk_session_default_params();
    sp.profile = 1;
    s = NULL;
    CHECK(wpk_session_create_from_plan(ctx, plan, &sp, &s) == WPK_OK);
    if (s) {
        CHECK(wpk_session_num_inputs(s) == 1 && wpk_session_num_outputs(s) == 1);
        wpk_tensor_view in = wpk_session_input_info(s, 0);
        CHECK(in.ndim == 4 && in.dims[0] == 2 && in.dim_names[0] && !strcmp(in.dim_names[0], "N"));
        CHECK(run(s, 2, got) == WPK_OK);
        bool same = true;
        for (int i = 0; i < NY; i++) same = same && fabsf(got[i] - want[i]) <= 1e-6f;
        CHECK(same);
        const wpk_node_profile *prof;
        int n;
        CHECK(wpk_session_profile(s, &prof, &n) == WPK_OK && n == 1);
        if (n == 1)
            CHECK(!strcmp(prof[0].provider, "generated") && !strcmp(prof[0].source, "default") &&
                  strstr(prof[0].impl, "conv2d") && prof[0].ms >= 0);
        /* a run allocates nothing */
        CHECK(run(s, 2, NULL) == WPK_OK);
        long before = wpk_alloc_count();
        CHECK(run(s, 2, NULL) == WPK_OK);
        CHECK(wpk_alloc_count() == before);
        /* another batch needs the compiler that is not there */
        CHECK_ERR(ctx, run(s, 1, got), WPK_ERR_UNSUPPORTED, "compiled for inputs float32[2, 3, 8, 8]");
        /* and the plan's own shapes still run after that */
        CHECK(run(s, 2, got) == WPK_OK);
    }
    wpk_session_free(s);
    CHECK(cg_c_compile_count() == compiles);
    unsetenv("CC");

    size_t len = 0;
    uint8_t *bytes = slurp(plan, &len);
    CHECK(bytes && len > 64);
    if (!bytes) CHECK_DONE();
    char bad[200];
    snprintf(bad, sizeof bad, "%s/bad.wpk", dir);

    /* another format version */
    uint8_t *copy = malloc(len);
    memcpy(copy, bytes, len);
    copy[8] = 1; /* the format before the runtime plan */
    spill(bad, copy, len);
    refused(ctx, bad, WPK_ERR_UNSUPPORTED, "format version 1, this wpk reads 3", 8);
    /* not a plan at all */
    refused(ctx, MODEL, WPK_ERR_PARSE, "not a compiled wpk plan", 0);
    /* another machine's plan: the same body under another fingerprint */
    {
        uint8_t *file = NULL;
        byte_reader body;
        char fp[512];
        CHECK(artifact_read(ctx, plan, NULL, &file, &body, fp, sizeof fp) == WPK_OK);
        CHECK(!strcmp(fp, target_fingerprint()));
        byte_writer w = {0};
        if (file) {
            w.data = (uint8_t *)body.p;
            w.len = (size_t)(body.end - body.p);
            CHECK(artifact_write(ctx, bad, "riscv64 Other CPU none 1c", &w) == WPK_OK);
        }
        wpk_free(file);
        refused(ctx, bad, WPK_ERR_UNSUPPORTED, "built for 'riscv64 Other CPU none 1c'", 0);
    }
    /* truncated: at every offset of the first 256 bytes, then at about 300 more */
    for (size_t cut = 0; cut < len; cut += cut < 256 ? 1 : len / 300 + 1) {
        spill(bad, bytes, cut);
        refused(ctx, bad, WPK_ERR_PARSE, "", cut);
    }
    /* one byte flipped: anywhere but the version is damage */
    for (size_t at = 0; at < len; at += at < 128 ? 1 : len / 300 + 1) {
        memcpy(copy, bytes, len);
        copy[at] ^= 0x5a;
        spill(bad, copy, len);
        bool version = at >= 8 && at < 12;
        refused(ctx, bad, version ? WPK_ERR_UNSUPPORTED : WPK_ERR_PARSE, "", at);
    }
    refused(ctx, "/nonexistent/m.wpk", WPK_ERR_IO, "", 0);
    /* the good plan is still the good plan (the failed writes above left it alone); on two
       threads, its idle OpenMP workers stop spinning soon after a run: the process burns
       (almost) no CPU while the caller sleeps. libgomp spins GOMP_SPINCOUNT times (300,000 by
       default: some milliseconds) before it sleeps; OMP_WAIT_POLICY=active would spin on and
       fail this. */
    s = NULL;
    sp = wpk_session_default_params();
    sp.threads = 2;
    CHECK(wpk_session_create_from_plan(ctx, plan, &sp, &s) == WPK_OK);
    for (int i = 0; s && i < 5; i++) CHECK(run(s, 2, got) == WPK_OK);
    double c0 = cpu_ms();
    struct timespec nap = {0, 300 * 1000 * 1000};
    while (nanosleep(&nap, &nap) != 0) continue;
    double idle = cpu_ms() - c0;
    printf("CPU time while idle for 300 ms after a run on 2 threads: %.2f ms\n", idle);
    CHECK(idle < 40.0);
    wpk_session_free(s);

    /* every allocation of loading a plan failing in turn: out of memory, or fine, never a crash
       or a leak (the sanitizer build checks the leaks) */
    {
        long a0 = wpk_alloc_count();
        s = NULL;
        CHECK(wpk_session_create_from_plan(ctx, plan, &sp, &s) == WPK_OK);
        wpk_session_free(s);
        long n = wpk_alloc_count() - a0;
        int nomem = 0;
        for (long k = 1; k <= n + 1; k++) {
            s = NULL;
            wpk_alloc_fail_at(k);
            wpk_status st = wpk_session_create_from_plan(ctx, plan, &sp, &s);
            wpk_alloc_fail_at(0);
            if (st == WPK_OK) CHECK(run(s, 2, got) == WPK_OK);
            else if (st == WPK_ERR_NOMEM) nomem++;
            else {
                fprintf(stderr, "allocation %ld failing: %s: %s\n", k, wpk_status_name(st),
                        wpk_context_error(ctx));
                check_failures++;
            }
            wpk_session_free(s);
        }
        printf("loading a plan: %ld allocations, each failing in turn: %d out of memory\n", n,
               nomem);
        CHECK(nomem > 0);
    }

    free(copy);
    free(bytes);
    wpk_model_free(m);
    wpk_context_free(ctx);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    CHECK_DONE();
}
