/* test_fusion_search.c -- the fusion plan and team size search (src/tune/fusion_search.c) on
 * made-up models: where every plan timed is faster than the last, every move wins, and the
 * profile search still times at most its profiled plans, its composed plan and one move per
 * group and per other team of each layer, never one plan twice in its moves; where a model's
 * time is the sum of its layers' (each with a best team, each group with a gain or a loss), the
 * profile search finds what the exhaustive oracle finds, at a fraction of its plans. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "tune/fusion_search.h"

#define MAX_TIMED 4096

typedef struct model {
    const fusion_space *s;
    bool descending;                /* each plan timed is faster than the one before */
    int best_team[FUSION_MAX_LAYERS];
    double fuse_gain[FUSION_MAX_GROUPS]; /* ms saved (or lost, < 0) when the group fuses */
    int ntimed;
    fusion_point *timed;
} model;

static bool absorbed_in(const fusion_space *s, const fusion_point *p, int l) {
    for (int g = 0; g < s->ngroups; g++)
        if (p->fuse[g] && s->absorbed[g] == l) return true;
    return false;
}

static double layer_time(const model *m, const fusion_point *p, int l) {
    int miss = abs(p->threads[l] - m->best_team[l]);
    double ms = 1.0 + 0.5 * miss + 0.1 * l;
    for (int g = 0; g < m->s->ngroups; g++)
        if (p->fuse[g] && m->s->kept[g] == l) ms -= m->fuse_gain[g];
    return ms;
}

static wpk_status measure(void *user, const fusion_point *p, double *ms, double *layer_ms) {
    model *m = user;
    const fusion_space *s = m->s;
    if (m->ntimed < MAX_TIMED) m->timed[m->ntimed] = *p;
    m->ntimed++;
    double total = 0;
    for (int l = 0; l < s->nlayers; l++) {
        double t = absorbed_in(s, p, l) ? -1 : layer_time(m, p, l);
        if (layer_ms) layer_ms[l] = t;
        if (t > 0) total += t;
    }
    *ms = m->descending ? 1000.0 * pow(0.9, m->ntimed) : total;
    return WPK_OK;
}

static bool same_plan(const fusion_space *s, const fusion_point *a, const fusion_point *b) {
    for (int g = 0; g < s->ngroups; g++)
        if (a->fuse[g] != b->fuse[g]) return false;
    for (int l = 0; l < s->nlayers; l++)
        if (!absorbed_in(s, a, l) && a->threads[l] != b->threads[l]) return false;
    return true;
}

/* 5 layers, 3 teams; group 0 fuses layer 1 into 0, group 1 a non-layer node into layer 3. */
static void make_space(fusion_space *s) {
    memset(s, 0, sizeof *s);
    s->nlayers = 5;
    s->ngroups = 2;
    s->max_threads = 3;
    for (int l = 0; l < s->nlayers; l++) {
        s->flops[l] = (int64_t)(l + 1) * FUSION_FLOPS_PER_THREAD;
        s->channels[l] = 64;
    }
    s->kept[0] = 0;
    s->absorbed[0] = 1;
    s->kept[1] = 3;
    s->absorbed[1] = -1;
}

static void test_every_move_wins(wpk_context *ctx, const fusion_space *s, model *m) {
    m->descending = true;
    /* the profiles favor every layer's largest team: the composed plan has it, and a move to
     * a smaller team that wins must not bring the largest back */
    for (int l = 0; l < s->nlayers; l++) m->best_team[l] = s->max_threads;
    m->ntimed = 0;
    fusion_result r;
    CHECK(fusion_search(ctx, s, FUSION_SEARCH_PROFILE, measure, m, &r) == WPK_OK);
    /* 2 fusion states x 3 team levels, the composed plan, then the moves */
    int bound = 2 * 3 + 1 + s->ngroups + s->nlayers * (s->max_threads - 1);
    CHECK(r.evaluations == m->ntimed);
    CHECK(r.evaluations <= bound);
    if (r.evaluations > bound)
        fprintf(stderr, "the search timed %d plans, at most %d expected\n", r.evaluations,
                bound);
    /* the moves start after the 6 profiled plans (all distinct here) and the composed one;
     * none times a plan twice */
    const int first_move = 7;
    for (int i = first_move; i < m->ntimed && i < MAX_TIMED; i++)
        for (int j = first_move; j < i; j++)
            if (same_plan(s, &m->timed[i], &m->timed[j])) {
                fprintf(stderr, "moves %d and %d time the same plan\n", j, i);
                check_failures++;
            }
    /* the last plan timed was the fastest */
    CHECK(same_plan(s, &r.best, &m->timed[m->ntimed - 1]));
}

static void test_matches_oracle(wpk_context *ctx, const fusion_space *s, model *m) {
    m->descending = false;
    static const int teams[5] = {3, 2, 1, 2, 3};
    for (int l = 0; l < s->nlayers; l++) m->best_team[l] = teams[l];
    /* fusing layer 1 into 0 costs layer 0 more than layer 1's own time; group 1 saves time */
    m->fuse_gain[0] = -1.5;
    m->fuse_gain[1] = 0.3;
    fusion_result prof, oracle;
    m->ntimed = 0;
    CHECK(fusion_search(ctx, s, FUSION_SEARCH_EXHAUSTIVE, measure, m, &oracle) == WPK_OK);
    CHECK(oracle.evaluations == fusion_exhaustive_count(s));
    m->ntimed = 0;
    CHECK(fusion_search(ctx, s, FUSION_SEARCH_PROFILE, measure, m, &prof) == WPK_OK);
    CHECK(prof.best_ms <= oracle.best_ms * 1.0001);
    CHECK(prof.evaluations * 4 < oracle.evaluations);
    CHECK(!prof.best.fuse[0] && prof.best.fuse[1]);
    for (int l = 0; l < s->nlayers; l++)
        if (!absorbed_in(s, &prof.best, l)) CHECK(prof.best.threads[l] == teams[l]);
}

int main(void) {
    wpk_context *ctx = wpk_context_create();
    fusion_space *s = calloc(1, sizeof *s);
    model *m = calloc(1, sizeof *m);
    if (!ctx || !s || !m) return 1;
    m->timed = calloc(MAX_TIMED, sizeof *m->timed);
    if (!m->timed) return 1;
    make_space(s);
    m->s = s;
    test_every_move_wins(ctx, s, m);
    test_matches_oracle(ctx, s, m);
    free(m->timed);
    free(m);
    free(s);
    wpk_context_free(ctx);
    CHECK_DONE();
}
