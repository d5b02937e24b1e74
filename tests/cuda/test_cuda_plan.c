/* test_cuda_plan.c -- a compiled plan for a CUDA GPU on the mock driver
 * (mock_libcuda.c): wpk_compile with target CUDA writes a plan that names its target and is
 * keyed by the GPU's fingerprint; wpk_plan_load runs it on the cuda backend (inputs up,
 * outputs down: the mock computes nothing, so only shapes and statuses are checked); the same
 * body under another GPU's fingerprint is refused naming both GPUs; a cpu plan still loads on
 * the cpu backend; a bad target is refused, and --strict without records names the node.
 *   test_cuda_plan MOCK_LIBCUDA */
#include <stdlib.h>
#include <unistd.h>

#include "../unit/check.h"
#include "base/alloc.h"
#include "base/target_fingerprint.h"
#include "runtime/plan.h"
#include "wpk.h"

#define MODEL "tests/fuzz/corpus/conv_relu.onnx"
#define MOCK_FP "cuda wpk mock GPU sm_90 driver 13000"

static char dir[128];

/* The target recorded in the plan at path (-1 when it does not read). */
static int plan_target(wpk_context *ctx, const char *path) {
    uint8_t *file = NULL;
    byte_reader body;
    rt_plan p;
    int target = -1;
    if (artifact_read(ctx, path, NULL, &file, &body, NULL, 0) == WPK_OK &&
        rt_plan_read(ctx, path, &body, &p) == WPK_OK) {
        target = (int)p.target;
        rt_plan_free(&p);
    }
    wpk_free(file);
    return target;
}

/* Load, feed zeros, run twice, check the output's type and that its bytes came back. */
static void load_and_run(wpk_context *ctx, const char *path) {
    wpk_plan *p = NULL;
    wpk_status st = wpk_plan_load(ctx, path, NULL, &p);
    CHECK(st == WPK_OK);
    if (st) {
        fprintf(stderr, "%s\n", wpk_context_error(ctx));
        return;
    }
    float x[3 * 8 * 8] = {0};
    int64_t dims[4] = {1, 3, 8, 8};
    for (int r = 0; r < 2; r++) {
        CHECK(wpk_plan_set_input(p, "x", WPK_DTYPE_FLOAT32, dims, 4, x) == WPK_OK);
        CHECK(wpk_plan_run(p) == WPK_OK);
    }
    wpk_tensor_view y;
    CHECK(wpk_plan_output(p, 0, &y) == WPK_OK);
    CHECK(y.data && y.ndim == 4 && y.dims[1] == 2 && y.dims[3] == 8);
    wpk_plan_free(p);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_cuda_plan MOCK_LIBCUDA\n");
        return 2;
    }
    /* read once, at the first use of the driver in the process */
    setenv("WPK_CUDA_DRIVER_LIBRARY", argv[1], 1);
    snprintf(dir, sizeof dir, "/tmp/wpk_cuda_plan.XXXXXX");
    if (!mkdtemp(dir)) return 1;
    char cache[200], gpu[200], cpu[200], other[200];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    setenv("WPK_CACHE_DIR", cache, 1);
    snprintf(gpu, sizeof gpu, "%s/gpu.wpk", dir);
    snprintf(cpu, sizeof cpu, "%s/cpu.wpk", dir);
    snprintf(other, sizeof other, "%s/other.wpk", dir);

    wpk_context *ctx = wpk_context_create();
    wpk_model *m = NULL;
    CHECK(wpk_model_load(ctx, MODEL, &m) == WPK_OK);
    if (!m) CHECK_DONE();
    wpk_compile_params cp = wpk_compile_default_params();
    CHECK(cp.target == WPK_BACKEND_CPU);
    cp.records = "";

    /* refused before any work */
    cp.target = WPK_BACKEND_REF;
    CHECK_ERR(ctx, wpk_compile(ctx, m, &cp, gpu), WPK_ERR_INVALID_ARG, "target 0");
    cp.target = WPK_BACKEND_CUDA;
    cp.strict = 1;
    CHECK_ERR(ctx, wpk_compile(ctx, m, &cp, gpu), WPK_ERR_INVALID_ARG,
              "without tuning records for this GPU (--strict): 'conv'");
    CHECK(access(gpu, F_OK) != 0);
    cp.strict = 0;

    /* the GPU's plan: its target and fingerprint, and it runs on the mock's device */
    CHECK(wpk_compile(ctx, m, &cp, gpu) == WPK_OK);
    CHECK(plan_target(ctx, gpu) == RT_TARGET_CUDA);
    {
        uint8_t *file = NULL;
        byte_reader body;
        char fp[512] = "";
        CHECK(artifact_read(ctx, gpu, NULL, &file, &body, fp, sizeof fp) == WPK_OK);
        CHECK(!strcmp(fp, MOCK_FP));
        /* the same plan for another GPU */
        byte_writer w = {0};
        if (file) {
            w.data = (uint8_t *)body.p;
            w.len = (size_t)(body.end - body.p);
            CHECK(artifact_write(ctx, other, "cuda Other GPU sm_80 driver 12000", &w) == WPK_OK);
        }
        wpk_free(file);
    }
    load_and_run(ctx, gpu);
    wpk_plan *p = NULL;
    CHECK_ERR(ctx, wpk_plan_load(ctx, other, NULL, &p), WPK_ERR_UNSUPPORTED,
              "built for 'cuda Other GPU sm_80 driver 12000', this machine is '" MOCK_FP "'");
    CHECK(!p);

    /* a session over the plan runs it the same way */
    wpk_session *s = NULL;
    CHECK(wpk_session_create_from_plan(ctx, gpu, NULL, &s) == WPK_OK);
    wpk_session_free(s);

    /* a cpu plan, the mock present: the cpu backend, as before */
    cp.target = WPK_BACKEND_CPU;
    CHECK(wpk_compile(ctx, m, &cp, cpu) == WPK_OK);
    CHECK(plan_target(ctx, cpu) == RT_TARGET_CPU);
    load_and_run(ctx, cpu);

    wpk_model_free(m);
    wpk_context_free(ctx);
    unlink(gpu);
    unlink(cpu);
    unlink(other);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    CHECK_DONE();
}
