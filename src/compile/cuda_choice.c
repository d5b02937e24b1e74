/* cuda_choice.c -- the CUDA program's configs from the records of this GPU (cuda_choice.h). */
#include "compile/cuda_choice.h"

#include <stdio.h>
#include <string.h>

#include "base/context.h"
#include "tune/measure.h"

void cuda_choice_init(cuda_choice *c, tune_db *db, const rt_cuda_info *info) {
    memset(c, 0, sizeof *c);
    c->db = db;
    tune_cuda_target(info, c->target, sizeof c->target);
}

bool cuda_choice_pick(void *user, const tune_task *t, const tune_space *s, tune_config *cfg) {
    cuda_choice *c = user;
    c->asked++;
    if (!c->db) return false;
    char text[1024];
    double median;
    /* the finals were timed alone, back to back: trusted over the trials' own medians */
    int final = tune_db_final_best(c->db, c->target, t->key, text, sizeof text, &median);
    if (final != 1 &&
        tune_db_best(c->db, c->target, t->key, text, sizeof text, &median) != WPK_OK)
        return false;
    wpk_context quiet;
    memset(&quiet, 0, sizeof quiet);
    if (tune_config_parse(&quiet, s, text, cfg) != WPK_OK) return false;
    if (t->tmpl->legal && !t->tmpl->legal(t->tmpl, t, s, cfg)) return false;
    c->chosen++;
    return true;
}
