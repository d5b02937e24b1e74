/* cuda_choice.c -- the CUDA program's configs from the records of this GPU (cuda_choice.h). */
#include "compile/cuda_choice.h"

#include <stdio.h>
#include <string.h>

#include "base/context.h"
#include "kernels/conv.h"
#include "kernels/vendor/lib.h"
#include "tune/measure.h"

void cuda_choice_init(cuda_choice *c, tune_db *db, const rt_cuda_info *info) {
    memset(c, 0, sizeof *c);
    c->db = db;
    tune_cuda_target(info, c->target, sizeof c->target);
}

/* The best record of workload key: its config text and median; false when there is none. The
 * finals were timed alone, back to back: trusted over the trials' own medians. */
static bool best_record(const cuda_choice *c, const char *key, char *text, size_t cap,
                        double *median) {
    if (!c->db) return false;
    return tune_db_final_best(c->db, c->target, key, text, cap, median) == 1 ||
           tune_db_best(c->db, c->target, key, text, cap, median) == WPK_OK;
}

bool cuda_choice_pick(void *user, const tune_task *t, const tune_space *s, tune_config *cfg) {
    cuda_choice *c = user;
    c->asked++;
    char text[1024];
    double median;
    if (!best_record(c, t->key, text, sizeof text, &median)) return false;
    wpk_context quiet;
    memset(&quiet, 0, sizeof quiet);
    if (tune_config_parse(&quiet, s, text, cfg) != WPK_OK) return false;
    if (t->tmpl->legal && !t->tmpl->legal(t->tmpl, t, s, cfg)) return false;
    c->chosen++;
    return true;
}

const kernel_provider *cuda_choice_lib(void *user, const tune_task *t, int *config) {
    cuda_choice *c = user;
    char text[1024];
    double best = 0, median;
    /* the template's record, when it has one, is the time to beat */
    const bool tmpl = best_record(c, t->key, text, sizeof text, &best);
    ir_tensor *in[TUNE_MAX_ARGS] = {0}, *out[TUNE_MAX_ARGS] = {0};
    for (int i = 0; i < t->nin; i++)
        in[i] = t->in[i].dtype != WPK_DTYPE_UNDEFINED ? (ir_tensor *)&t->in[i] : NULL;
    for (int i = 0; i < t->nout; i++) out[i] = (ir_tensor *)&t->out[i];
    const kernel_provider *const *libs = lib_cuda_providers(), *chosen = NULL;
    wpk_context quiet;
    memset(&quiet, 0, sizeof quiet);
    for (int i = 0; c->db && libs[i]; i++) {
        const kernel_provider *lib = libs[i];
        if (t->node->nin > TUNE_MAX_ARGS || !lib->supports(lib, t->node, in, out)) continue;
        tune_task lt;
        tune_task_init(&lt, lib, t->node, in, out);
        /* a library's fastest record that no longer fits its space is passed over, as a
           template's is */
        if (!best_record(c, lt.key, text, sizeof text, &median)) continue;
        if ((tmpl || chosen) && median >= best) continue;
        tune_space ls;
        tune_config cfg;
        lib->space(lib, &lt, &ls);
        if (tune_config_parse(&quiet, &ls, text, &cfg) != WPK_OK) continue;
        chosen = lib;
        best = median;
        *config = (int)tune_value(&ls, &cfg, "algo");
    }
    if (chosen) c->libs++;
    return chosen;
}
