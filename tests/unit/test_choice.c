/* test_choice.c -- per-node implementation choice from tuning records, and the per-node profile:
 * a temporary records database with hand-written records; the faster candidate (another
 * template, or another config of the same one) wins and the profile says "tuned"; no records
 * gives "default" (at batch 4 on oneDNN where built in); the tuner's finals outrank the
 * trials' medians, and decide between implementations when every one with records has them;
 * at batch 3 with records of batch 1 only, those ("tuned-b1"; Winograd's kernel then runs image
 * by image); forced providers; a record whose config no longer fits is skipped with a
 * warning naming the node and the config; outputs equal the reference backend's. Kernels are
 * compiled into a temporary cache (WPK_CACHE_DIR), so the user's records are never read. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/exec_plan.h"
#include "api/model.h"
#include "base/alloc.h"
#include "check.h"
#include "compile/choice.h"
#include "kernels/graph_tasks.h"
#include "tune/records.h"
#include "base/target_fingerprint.h"
#include "wpk.h"

#define MODEL "tests/fuzz/corpus/conv_relu.onnx"

static char dir[128];
static char warnings[8192];
static int batch = 1; /* of the runs below */
enum { NY = 2 * 8 * 8 }; /* the model's output per image */

static void on_log(void *user, wpk_log_level level, const char *msg) {
    (void)user;
    if (level != WPK_LOG_WARN) return;
    size_t l = strlen(warnings);
    snprintf(warnings + l, sizeof warnings - l, "%s\n", msg);
}

/* The candidates of the model's one compute node after -O2, as the cpu backend sees them. */
typedef struct cands {
    int n;
    tune_task task[8];
    char def[8][256];    /* each one's default config text */
    char other[8][256];  /* another config of it ("" when it has one config only) */
} cands;

static void find_candidates(wpk_context *ctx, cands *c) {
    memset(c, 0, sizeof *c);
    wpk_model *m = NULL;
    CHECK(wpk_model_load(ctx, MODEL, &m) == WPK_OK);
    if (!m) return;
    wpk_optimize_params op = wpk_optimize_default_params();
    op.level = 2;
    CHECK(wpk_model_optimize(ctx, m, &op) == WPK_OK);
    ir_tensor shapes[1] = {m->g->values[m->g->inputs[0]].t};
    shapes[0].dims[0] = 1;
    exec_plan *p = NULL;
    CHECK(exec_plan_create(ctx, m->g, shapes, true, &p) == WPK_OK);
    if (p) {
        CHECK(p->g->nnodes == 1);
        ir_tensor *in[8], *out[8];
        const ir_node *n = &p->g->nodes[0];
        cpu_node_tensors(n, p->vals, in, out);
        const kernel_provider *list[8];
        c->n = kernel_providers_for(n, in, out, list, 8);
        for (int i = 0; i < c->n; i++) {
            tune_task_init(&c->task[i], list[i], n, in, out);
            tune_space s;
            list[i]->space(list[i], &c->task[i], &s);
            tune_config cfg;
            list[i]->default_config(list[i], &c->task[i], &s, &cfg);
            strbuf b = {0};
            tune_config_print(&s, &cfg, &b);
            snprintf(c->def[i], sizeof c->def[i], "%s", b.s ? b.s : "");
            sb_free(&b);
            for (int64_t j = 0; j < tune_space_size(&s) && j < 64 && !c->other[i][0]; j++) {
                tune_config_from_index(&s, j, &cfg);
                tune_config_print(&s, &cfg, &b);
                if (b.s && strcmp(b.s, c->def[i])) snprintf(c->other[i], 256, "%s", b.s);
                sb_free(&b);
            }
        }
        /* the tasks are read after the plan is gone: keep their node out of reach */
        for (int i = 0; i < c->n; i++) c->task[i].node = NULL;
    }
    exec_plan_free(p);
    wpk_model_free(m);
}

static void add(tune_db *db, const tune_task *t, const char *config, double median) {
    double samples[3] = {median, median * 1.01, median * 0.99};
    tune_record r = {target_fingerprint(), t->key, t->tmpl->name, config, TUNE_OK, samples,
                     3, median, "test", 1700000000};
    CHECK(tune_db_add(db, &r) == WPK_OK);
}

/* A round of the tuner's finals of t: config a at median ma, b at mb. */
static void final_round(tune_db *db, const tune_task *t, const char *a, double ma, const char *b,
                        double mb) {
    double sa[1] = {ma}, sb[1] = {mb};
    const char *fp = target_fingerprint(), *name = t->tmpl->name;
    tune_record r[2] = {{fp, t->key, name, a, TUNE_OK, sa, 1, ma, "test", 1700000001},
                        {fp, t->key, name, b, TUNE_OK, sb, 1, mb, "test", 1700000001}};
    CHECK(tune_db_add_finals(db, r, 2) == WPK_OK);
}

/* A round of the tuner's finals of t with one config. */
static void final_one(tune_db *db, const tune_task *t, const char *config, double median) {
    double sa[1] = {median};
    tune_record r = {target_fingerprint(), t->key, t->tmpl->name, config, TUNE_OK, sa, 1,
                     median, "test", 1700000002};
    CHECK(tune_db_add_finals(db, &r, 1) == WPK_OK);
}

/* Run the model with these params; profile of its node and the output. */
static wpk_status run(wpk_context *ctx, const wpk_session_params *sp, char *impl, size_t cap,
                      char *source, char *provider, float *y, int ny) {
    wpk_model *m = NULL;
    wpk_session *s = NULL;
    wpk_status st = wpk_model_load(ctx, MODEL, &m);
    if (st == WPK_OK) st = wpk_session_create(ctx, m, sp, &s);
    float x[4 * 3 * 8 * 8];
    for (int i = 0; i < batch * 3 * 8 * 8; i++) x[i] = (float)((i * 37) % 19) / 9.0f - 1.0f;
    int64_t dims[4] = {batch, 3, 8, 8};
    if (st == WPK_OK) st = wpk_session_set_input(s, "x", WPK_DTYPE_FLOAT32, dims, 4, x);
    if (st == WPK_OK) st = wpk_session_run(s);
    wpk_tensor_view v;
    if (st == WPK_OK) st = wpk_session_output(s, 0, &v);
    if (st == WPK_OK) memcpy(y, v.data, sizeof(float) * (size_t)ny * (size_t)batch);
    const wpk_node_profile *prof = NULL;
    int n = 0;
    if (st == WPK_OK && sp->profile) {
        st = wpk_session_profile(s, &prof, &n);
        CHECK(n >= 1);
        for (int k = 0; k < n; k++) {
            CHECK(prof[k].ms >= 0 && prof[k].node && prof[k].op);
            /* the compute node: the one that is not a view */
            if (strcmp(prof[k].op, "Reshape")) {
                snprintf(impl, cap, "%s", prof[k].impl);
                snprintf(source, 32, "%s", prof[k].source);
                snprintf(provider, 32, "%s", prof[k].provider);
            }
        }
    }
    wpk_session_free(s);
    wpk_model_free(m);
    return st;
}

static bool close_to(const float *a, const float *b, int n) {
    for (int i = 0; i < n; i++)
        if (!(fabsf(a[i] - b[i]) <= 1e-4f + 1e-4f * fabsf(b[i]))) return false;
    return true;
}

/* The model at batch 3 with sp (its node's profile into impl/source/provider), its output
 * checked against the reference backend's at the same batch. */
static void run_batch3(wpk_context *ctx, const wpk_session_params *sp, char *impl, size_t cap,
                       char *source, char *provider) {
    enum { B = 3 };
    float ref3[B * NY], y3[B * NY];
    wpk_session_params rp = wpk_session_default_params();
    rp.profile = 1;
    batch = B;
    CHECK(run(ctx, &rp, impl, cap, source, provider, ref3, NY) == WPK_OK);
    CHECK(run(ctx, sp, impl, cap, source, provider, y3, NY) == WPK_OK);
    CHECK(close_to(y3, ref3, B * NY));
    batch = 1;
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/wpk_test_choice_%d", (int)getpid());
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dir, dir);
    if (system(cmd) != 0) return 1;
    setenv("WPK_CACHE_DIR", dir, 1);
    wpk_context *ctx = wpk_context_create();
    wpk_context_set_log(ctx, on_log, NULL, WPK_LOG_WARN);

    float ref[NY], y[NY];
    char impl[512], source[32], provider[32];
    wpk_session_params sp = wpk_session_default_params();
    sp.profile = 1;
    /* the reference backend, profiled too */
    CHECK(run(ctx, &sp, impl, sizeof impl, source, provider, ref, NY) == WPK_OK);
    CHECK(!strcmp(provider, "ref") && !strcmp(source, "reference") && !strcmp(impl, ""));

    cands c;
    find_candidates(ctx, &c);
    CHECK(c.n >= 1 && c.other[0][0]);
    if (c.n < 1) CHECK_DONE();
    printf("%d candidate(s): %s%s%s\n", c.n, c.task[0].tmpl->name, c.n > 1 ? ", " : "",
           c.n > 1 ? c.task[1].tmpl->name : "");

    /* no records ("" = none): the primary template at its default */
    sp.backend = WPK_BACKEND_CPU;
    sp.records = "";
    CHECK(run(ctx, &sp, impl, sizeof impl, source, provider, y, NY) == WPK_OK);
    CHECK(!strcmp(source, "default") && !strcmp(provider, "generated"));
    CHECK(strstr(impl, c.task[0].tmpl->name) == impl && strstr(impl, c.def[0]));

    /* no records at batch 4: the conv runs on oneDNN where it is built in (choice.c's rule for
       batches of images), its output the reference backend's */
    {
        enum { B = 4 };
        float ref4[B * NY], y4[B * NY];
        wpk_session_params rp = wpk_session_default_params();
        rp.profile = 1;
        batch = B;
        CHECK(run(ctx, &rp, impl, sizeof impl, source, provider, ref4, NY) == WPK_OK);
        CHECK(run(ctx, &sp, impl, sizeof impl, source, provider, y4, NY) == WPK_OK);
        CHECK(!strcmp(source, "default"));
#ifdef WPK_HAVE_ONEDNN
        CHECK(!strcmp(provider, "onednn"));
#else
        CHECK(!strcmp(provider, "generated"));
#endif
        CHECK(close_to(y4, ref4, B * NY));
        printf("batch %d, no records: %s (%s)\n", B, provider, impl);
        batch = 1;
    }
    CHECK(close_to(y, ref, NY));

    /* an explicit database that does not exist is an error, not a silent default */
    char db_path[300];
    snprintf(db_path, sizeof db_path, "%s/none.db", dir);
    sp.records = db_path;
    CHECK_ERR(ctx, run(ctx, &sp, impl, sizeof impl, source, provider, y, NY), WPK_ERR_IO,
              "none.db");

    /* records: the faster of two configs of the primary template */
    snprintf(db_path, sizeof db_path, "%s/records.db", dir);
    tune_db *db = NULL;
    CHECK(tune_db_open(ctx, db_path, &db) == WPK_OK);
    if (!db) CHECK_DONE();
    add(db, &c.task[0], c.def[0], 2e-3);
    add(db, &c.task[0], c.other[0], 1e-3);
    add(db, &c.task[0], "no_such_knob=3", 1e-4); /* fastest, but no longer fits */
    sp.records = db_path;
    warnings[0] = 0;
    CHECK(run(ctx, &sp, impl, sizeof impl, source, provider, y, NY) == WPK_OK);
    CHECK(!strcmp(source, "tuned") && strstr(impl, c.other[0]));
    CHECK(strstr(warnings, "node 'conv'") && strstr(warnings, "no_such_knob=3"));
    CHECK(close_to(y, ref, NY));
    /* the default database (NULL) is $WPK_CACHE_DIR/records.db when it exists */
    sp.records = NULL;
    CHECK(run(ctx, &sp, impl, sizeof impl, source, provider, y, NY) == WPK_OK);
    CHECK(!strcmp(source, "tuned") && strstr(impl, c.other[0]));
    sp.records = db_path;
    /* the tuner's finals (the best configs re-timed alone) outrank the trials' medians: the
       other config's 1 ms trial was luck */
    final_round(db, &c.task[0], c.def[0], 1.1e-3, c.other[0], 1.4e-3);
    CHECK(run(ctx, &sp, impl, sizeof impl, source, provider, y, NY) == WPK_OK);
    CHECK(!strcmp(source, "tuned") && strstr(impl, c.def[0]) && !strstr(impl, c.other[0]));
    CHECK(close_to(y, ref, NY));
    /* a config faster than the default by less than the finals' noise (1.6%) leaves it */
    final_round(db, &c.task[0], c.def[0], 1.22e-3, c.other[0], 1.2e-3);
    CHECK(run(ctx, &sp, impl, sizeof impl, source, provider, y, NY) == WPK_OK);
    CHECK(!strcmp(source, "tuned") && strstr(impl, c.def[0]) && !strstr(impl, c.other[0]));
    /* the latest round decides */
    final_round(db, &c.task[0], c.def[0], 1.3e-3, c.other[0], 1.2e-3);
    CHECK(run(ctx, &sp, impl, sizeof impl, source, provider, y, NY) == WPK_OK);
    CHECK(!strcmp(source, "tuned") && strstr(impl, c.other[0]));

    /* at batch 3, which has no records, those of batch 1 choose (a model tuned at batch 1 and run
       at another keeps its tuned kernels) */
    run_batch3(ctx, &sp, impl, sizeof impl, source, provider);
    CHECK(!strcmp(source, "tuned-b1") && strstr(impl, c.other[0]));

    /* another candidate measured faster still wins over the primary */
    if (c.n > 1) {
        add(db, &c.task[1], c.def[1], 5e-4);
        CHECK(run(ctx, &sp, impl, sizeof impl, source, provider, y, NY) == WPK_OK);
        CHECK(!strcmp(source, "tuned") && strstr(impl, c.task[1].tmpl->name) == impl);
        CHECK(close_to(y, ref, NY));
        /* at batch 3 from those batch-1 records, a template whose buffers grow with the batch
           (Winograd's) runs image by image, as it was measured */
        run_batch3(ctx, &sp, impl, sizeof impl, source, provider);
        CHECK(!strcmp(source, "tuned-b1") && strstr(impl, c.task[1].tmpl->name) == impl);
        CHECK(c.task[1].tmpl->batch_buffers == (strstr(impl, "(x3 images)") != NULL));
        printf("batch 3: %s\n", impl);
        /* forcing "generated" keeps library candidates out */
        sp.provider = "generated";
        CHECK(run(ctx, &sp, impl, sizeof impl, source, provider, y, NY) == WPK_OK);
        CHECK(!strcmp(provider, "generated"));
        sp.provider = NULL;
    }
    /* a library's record faster than every generated one: the node runs the library */
    for (int i = 0; i < c.n; i++) {
        if (kernel_provider_generates(c.task[i].tmpl)) continue;
        add(db, &c.task[i], c.def[i], 1e-4);
        CHECK(run(ctx, &sp, impl, sizeof impl, source, provider, y, NY) == WPK_OK);
        CHECK(!strcmp(source, "tuned") && !strcmp(provider, c.task[i].tmpl->name));
        CHECK(close_to(y, ref, NY));
        printf("tuned: %s (%s)\n", provider, impl);
        /* forcing "generated" now picks the fastest generated one */
        sp.provider = "generated";
        CHECK(run(ctx, &sp, impl, sizeof impl, source, provider, y, NY) == WPK_OK);
        CHECK(!strcmp(provider, "generated") && !strcmp(source, "tuned"));
        sp.provider = NULL;
        break;
    }

    /* when every candidate with records has finals, the finals decide between them: the
       other implementations' faster trials were luck */
    if (c.n > 1) {
        for (int i = 1; i < c.n; i++) final_one(db, &c.task[i], c.def[i], 2e-3);
        CHECK(run(ctx, &sp, impl, sizeof impl, source, provider, y, NY) == WPK_OK);
        CHECK(!strcmp(source, "tuned") && !strcmp(provider, "generated") &&
              strstr(impl, c.task[0].tmpl->name) == impl && strstr(impl, c.other[0]));
        CHECK(close_to(y, ref, NY));
    }

    /* provider "ref": the reference kernel on the cpu backend */
    sp.provider = "ref";
    CHECK(run(ctx, &sp, impl, sizeof impl, source, provider, y, NY) == WPK_OK);
    CHECK(!strcmp(provider, "ref") && !strcmp(source, "reference"));
    CHECK(close_to(y, ref, NY));
    /* a library: its kernel where it takes the node, else the generated choice */
    const char *libs[] = {"onednn", "openblas"};
    for (int i = 0; i < 2; i++) {
        sp.provider = libs[i];
        wpk_status st = run(ctx, &sp, impl, sizeof impl, source, provider, y, NY);
        if (st == WPK_ERR_INVALID_ARG) {
            CHECK(strstr(wpk_context_error(ctx), "unknown provider"));
            printf("%s: not built in\n", libs[i]);
            continue;
        }
        CHECK(st == WPK_OK);
        CHECK(!strcmp(provider, libs[i]) || !strcmp(provider, "generated"));
        CHECK(close_to(y, ref, NY));
        printf("%s: node runs on %s (%s)\n", libs[i], provider, impl);
    }
    sp.provider = "cudnn";
    CHECK_ERR(ctx, run(ctx, &sp, impl, sizeof impl, source, provider, y, NY), WPK_ERR_INVALID_ARG,
              "unknown provider 'cudnn'");
    sp.provider = NULL;

    /* a config that parses but whose schedule the template rejects would warn and build the
       default; every config of the space is legal here, so the parse check above stands in */

    /* no profile asked: wpk_session_profile says so */
    {
        wpk_model *m = NULL;
        wpk_session *s = NULL;
        wpk_session_params np = wpk_session_default_params();
        CHECK(wpk_model_load(ctx, MODEL, &m) == WPK_OK);
        CHECK(wpk_session_create(ctx, m, &np, &s) == WPK_OK);
        const wpk_node_profile *prof;
        int n;
        CHECK_ERR(ctx, wpk_session_profile(s, &prof, &n), WPK_ERR_INVALID_ARG, "profile");
        CHECK(wpk_session_num_inputs(s) == 1 && wpk_session_num_outputs(s) == 1);
        CHECK(!strcmp(wpk_session_input_info(s, 0).name, "x"));
        wpk_session_free(s);
        wpk_model_free(m);
    }

    tune_db_close(db);
    wpk_context_free(ctx);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    CHECK_DONE();
}
