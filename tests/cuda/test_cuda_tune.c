/* test_cuda_tune.c -- tuning for the CUDA target on the mock driver (mock_libcuda.c): the
 * device probed in a child, the model's CUDA tasks, the tuner's loop with the measurer's
 * NVRTC build workers and isolated run children, records keyed by the GPU (none under the
 * CPU's fingerprint), failing candidates classified without stopping the job (a kernel that
 * does not compile, one whose launch crashes, one that never finishes), and the records read
 * back by `wpk compile --target cuda` (the plan's kernel marked tuned, at the best config, and
 * run from the .wpk) and by a session on the cuda backend. The conv's cuDNN algorithms are a
 * task of their own beside the template's (an alternative), measured on the mock libraries
 * (MOCK_CUDALIBS: they compute, and a call takes a launch's time): records under the GPU, an
 * algorithm cuDNN lacks classified as a compile error. The mock driver computes nothing, so
 * the template's outputs are not checked against the reference here and its timings are
 * whatever it says (test_cuda_gpu and bench/models_cuda.py check values and speed on a GPU).
 *   test_cuda_tune MOCK_LIBCUDA MOCK_CUDALIBS */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "../unit/check.h"
#include "api/tune_tasks.h"
#include "base/alloc.h"
#include "base/target_fingerprint.h"
#include "runtime/cuda/cuda_rt.h"
#include "runtime/plan.h"
#include "tune/tuner.h"
#include "wpk.h"

#define MODEL "tests/fuzz/corpus/conv_relu.onnx"
#define MOCK_FP "cuda wpk mock GPU sm_90 driver 13000"

/* A candidate's fate from its config text: a stable hash picks, for most, a kernel that runs,
 * and for some one renamed to a mock behaviour ("crash": an illegal address at launch; "spin":
 * never finishes) or one that does not compile. The default config always runs. */
enum { FATE_RUN, FATE_CRASH, FATE_SPIN, FATE_NO_COMPILE };
static const char *default_text;

static int fate_of(const char *config) {
    if (default_text && !strcmp(config, default_text)) return FATE_RUN;
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = config; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    int r = (int)(h % 6);
    return r == 1 ? FATE_CRASH : r == 2 ? FATE_SPIN : r == 3 ? FATE_NO_COMPILE : FATE_RUN;
}

static void rename_entry(strbuf *src, const char *to) {
    char *at = strstr(src->s, "wpk_tune_k(");
    if (!at) return;
    strbuf out = {0};
    sb_printf(&out, "%.*s%s%s", (int)(at - src->s), src->s, to, at + strlen("wpk_tune_k"));
    sb_free(src);
    *src = out;
}

static void sabotage(void *user, const char *config, strbuf *source) {
    (void)user;
    switch (fate_of(config)) {
    case FATE_CRASH: rename_entry(source, "crash"); break;
    case FATE_SPIN: rename_entry(source, "spin"); break;
    case FATE_NO_COMPILE: sb_printf(source, "\nthis is not CUDA C;\n"); break;
    default: break;
    }
}

typedef struct tally {
    int64_t by_status[TUNE_INVALID + 1];
    int wrong_fate; /* a record whose status is not the one its config was given */
} tally;

static bool count(void *user, const tune_record *r) {
    tally *t = user;
    if (r->status >= 0 && r->status <= TUNE_INVALID) t->by_status[r->status]++;
    static const tune_status want[] = {TUNE_OK, TUNE_CRASH, TUNE_TIMEOUT, TUNE_COMPILE_ERROR};
    if (r->status != want[fate_of(r->config)]) {
        fprintf(stderr, "config %s: %s\n", r->config, tune_status_name(r->status));
        t->wrong_fate++;
    }
    return true;
}

/* Statuses alone (a library's configs have no fate). */
static bool count_status(void *user, const tune_record *r) {
    tally *t = user;
    if (r->status >= 0 && r->status <= TUNE_INVALID) t->by_status[r->status]++;
    return true;
}

/* The plan's kernel step: its source and implementation, or false. */
static bool plan_kernel(wpk_context *ctx, const char *path, char *source, char *impl,
                        size_t cap) {
    uint8_t *file = NULL;
    byte_reader body;
    rt_plan p;
    bool found = false;
    if (artifact_read(ctx, path, NULL, &file, &body, NULL, 0) == WPK_OK &&
        rt_plan_read(ctx, path, &body, &p) == WPK_OK) {
        for (int k = 0; k < p.nsteps && !found; k++)
            if (!strcmp(p.steps[k].runner, "cuda_kernel")) {
                snprintf(source, cap, "%s", p.steps[k].source);
                snprintf(impl, cap, "%s", p.steps[k].impl);
                found = true;
            }
        rt_plan_free(&p);
    }
    wpk_free(file);
    return found;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_cuda_tune MOCK_LIBCUDA MOCK_CUDALIBS\n");
        return 2;
    }
    setenv("WPK_CUDA_DRIVER_LIBRARY", argv[1], 1);
    setenv("WPK_CUDNN_LIBRARY", argv[2], 1);
    setenv("WPK_CUBLAS_LIBRARY", argv[2], 1);
    setenv("WPK_CUBLASLT_LIBRARY", argv[2], 1);
    char dir[64] = "/tmp/wpk_cuda_tune.XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char cache[128], db_path[128], plan[128];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    snprintf(db_path, sizeof db_path, "%s/records.db", dir);
    snprintf(plan, sizeof plan, "%s/gpu.wpk", dir);
    setenv("WPK_CACHE_DIR", cache, 1);
    wpk_context *ctx = wpk_context_create();

    /* the device, seen from a child: this process stays free of CUDA for its forks */
    rt_cuda_info info;
    wpk_status st = tune_cuda_probe(ctx, &info);
    if (st == WPK_ERR_UNSUPPORTED && strstr(wpk_context_error(ctx), "NVRTC")) {
        printf("SKIP: %s\n", wpk_context_error(ctx));
        return 77;
    }
    CHECK(st == WPK_OK);
    CHECK(!strcmp(info.name, "wpk mock GPU") && info.sm == 90);
    char target[700];
    tune_cuda_target(&info, target, sizeof target);
    CHECK(!strncmp(target, MOCK_FP " nvrtc ", strlen(MOCK_FP " nvrtc ")));

    wpk_model *m = NULL;
    CHECK(wpk_model_load(ctx, MODEL, &m) == WPK_OK);
    if (!m) CHECK_DONE();
    tune_taskset ts;
    CHECK(api_tune_tasks_extract_cuda(ctx, m, 3, &ts) == WPK_OK);
    /* the template's task, then cuDNN's as its alternative */
    CHECK(ts.ntasks == 2 && ts.kernel_nodes == 1);
    if (ts.ntasks != 2) CHECK_DONE();
    const tune_task *task = &ts.tasks[0].task, *lib = &ts.tasks[1].task;
    CHECK(ts.tasks[0].alt_of == -1 && ts.tasks[1].alt_of == 0 && ts.tasks[1].count == 1);
    CHECK(!strcmp(lib->tmpl->name, "cudnn") && !strncmp(lib->key, "cudnn|", 6));
    CHECK(!strcmp(task->tmpl->name, "conv2d_cuda"));
    CHECK(!strncmp(task->key, "conv2d_cuda:", 12));
    tune_space space;
    task->tmpl->space(task->tmpl, task, &space);
    tune_config def;
    task->tmpl->default_config(task->tmpl, task, &space, &def);
    strbuf def_text = {0};
    tune_config_print(&space, &def, &def_text);
    default_text = def_text.s;

    tune_db *db = NULL;
    CHECK(tune_db_open(ctx, db_path, &db) == WPK_OK);
    tune_options o = tune_default_options();
    o.strategy = "random";
    o.trials = 24;
    o.seed = 7;
    o.target = target;
    o.toolchain = "NVRTC for sm_90";
    o.measure.device = TUNE_DEVICE_CUDA;
    o.measure.cuda_sm = info.sm;
    o.measure.skip_check = true; /* the mock computes nothing */
    o.measure.run_timeout_s = 4; /* the spinning kernel: the child's watchdog at 2 s */
    o.measure.min_repeat_ms = 5;
    o.measure.min_sample_ms = 1;
    o.measure.edit_source = sabotage;
    tune_summary sum;
    st = tune_run(ctx, db, ts.tasks, ts.ntasks, &o, &sum);
    CHECK(st == WPK_OK);
    if (st) fprintf(stderr, "%s\n", wpk_context_error(ctx));
    CHECK(sum.ntasks == 2 && sum.tasks[0].measured >= 8);
    CHECK(sum.tasks[0].best_s > 0 && sum.tasks[0].remeasured);
    /* cuDNN's algorithms: timed on the mock libraries, the one it lacks (FFT) refused */
    tally lt;
    memset(&lt, 0, sizeof lt);
    CHECK(tune_db_each(db, target, lib->key, count_status, &lt) == WPK_OK);
    CHECK(sum.tasks[1].measured >= 2 && lt.by_status[TUNE_OK] >= 1 &&
          lt.by_status[TUNE_COMPILE_ERROR] >= 1);
    char lib_best[256];
    double lib_median = 0;
    CHECK(tune_db_best(db, target, lib->key, lib_best, sizeof lib_best, &lib_median) == WPK_OK &&
          lib_median > 0 && !strncmp(lib_best, "algo=", 5));

    /* every record under the GPU's key, each classified as its config was made to fail */
    tally t;
    memset(&t, 0, sizeof t);
    CHECK(tune_db_each(db, target, task->key, count, &t) == WPK_OK);
    CHECK(t.wrong_fate == 0);
    CHECK(t.by_status[TUNE_OK] >= 2);
    CHECK(t.by_status[TUNE_CRASH] >= 1);
    CHECK(t.by_status[TUNE_TIMEOUT] >= 1);
    CHECK(t.by_status[TUNE_COMPILE_ERROR] >= 1);
    CHECK(tune_db_count(db, target_fingerprint(), task->key) == 0);
    char best[1024];
    double median = 0;
    int finals = tune_db_final_best(db, target, task->key, best, sizeof best, &median);
    CHECK(finals == 1 && median > 0 && fate_of(best) == FATE_RUN);
    tune_db_close(db);

    /* a second run resumes: every config it asks about is stored, nothing is measured again */
    CHECK(tune_db_open(ctx, db_path, &db) == WPK_OK);
    tune_summary again;
    o.trials = 10;
    CHECK(tune_run(ctx, db, ts.tasks, ts.ntasks, &o, &again) == WPK_OK);
    CHECK(again.ntasks == 2 && again.tasks[0].measured == 0 && again.tasks[1].measured == 0);
    tune_summary_free(&again);
    tune_db_close(db);

    /* the CUDA compile chooses the finals' best, the plan says so and runs from its file */
    wpk_compile_params cp = wpk_compile_default_params();
    cp.target = WPK_BACKEND_CUDA;
    cp.records = db_path;
    cp.strict = 1; /* every kernel has records */
    st = wpk_compile(ctx, m, &cp, plan);
    CHECK(st == WPK_OK);
    if (st) fprintf(stderr, "%s\n", wpk_context_error(ctx));
    char source[1100], impl[1100];
    CHECK(plan_kernel(ctx, plan, source, impl, sizeof source));
    CHECK(!strcmp(source, "tuned"));
    char *bar = strchr(impl, '|');
    CHECK(bar && !strcmp(bar + 1, best));
    wpk_plan *p = NULL;
    CHECK(wpk_plan_load(ctx, plan, NULL, &p) == WPK_OK);
    float x[3 * 8 * 8] = {0};
    int64_t dims[4] = {1, 3, 8, 8};
    CHECK(p && wpk_plan_set_input(p, "x", WPK_DTYPE_FLOAT32, dims, 4, x) == WPK_OK);
    CHECK(p && wpk_plan_run(p) == WPK_OK);
    wpk_plan_free(p);

    /* without the records the same compile runs the default, and --strict names the node */
    cp.records = "";
    CHECK_ERR(ctx, wpk_compile(ctx, m, &cp, plan), WPK_ERR_INVALID_ARG,
              "1 node without tuning records for this GPU (--strict): 'conv'");

    /* a session on the cuda backend reads them too; its profile is per step */
    wpk_session_params sp = wpk_session_default_params();
    sp.backend = WPK_BACKEND_CUDA;
    sp.records = db_path;
    sp.profile = true;
    wpk_session *s = NULL;
    CHECK(wpk_session_create(ctx, m, &sp, &s) == WPK_OK);
    CHECK(s && wpk_session_set_input(s, "x", WPK_DTYPE_FLOAT32, dims, 4, x) == WPK_OK);
    CHECK(s && wpk_session_run(s) == WPK_OK);
    const wpk_node_profile *prof = NULL;
    int n = 0;
    CHECK(s && wpk_session_profile(s, &prof, &n) == WPK_OK);
    CHECK(n == 1 && prof && !strcmp(prof[0].source, "tuned") &&
          !strcmp(prof[0].provider, "cuda_kernel") && prof[0].ms > 0);
    wpk_session_free(s);

    tune_summary_free(&sum);
    tune_taskset_free(&ts);
    sb_free(&def_text);
    wpk_model_free(m);
    wpk_context_free(ctx);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    CHECK_DONE();
}
