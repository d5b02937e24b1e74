/* fusion_search.c -- the fusion plan and team size search (fusion_search.h).
 *
 * The profile search follows DLFusion: a rule from each layer's operation count and channel
 * count proposes its team size (small layers do not pay for a team's fork and join); a few
 * plans are then timed with per-layer profiles -- nothing fused and every group fused, each
 * at the rule's teams, at one thread and at the plan's threads -- and every layer takes the
 * team, and every group the choice, that its profiled time favors, in the model. The plan
 * composed so is timed once more. From the fastest plan so far, one move at a time (a group
 * flipped, a layer's team changed), the layers with the most time first, is then kept when it
 * is faster: the profiles judge each layer apart, and a move is judged in the model. The
 * fastest plan timed wins, and the unfused plan at the plan's threads stays unless another
 * beats it by a margin. */
#include "tune/fusion_search.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/context.h"

/* A plan replaces the base plan only when faster by more than this (the noise). */
#define MARGIN 0.01
/* The most single moves the profile search times after its composed plan. */
#define REFINE_MAX 32
/* The profile search's team levels: the rule's, one thread, the plan's threads. */
enum { LEVEL_RULE, LEVEL_ONE, LEVEL_ALL, NUM_LEVELS };

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

int fusion_rule_threads(int64_t flops, int64_t channels, int max_threads) {
    int64_t t = flops / FUSION_FLOPS_PER_THREAD;
    if (channels > 0 && channels / FUSION_CHANNELS_PER_THREAD < t)
        t = channels / FUSION_CHANNELS_PER_THREAD;
    if (t > max_threads) t = max_threads;
    return t < 1 ? 1 : (int)t;
}

/* Layer l is fused into another by a chosen group. */
static bool absorbed(const fusion_space *s, const bool *fuse, int l) {
    for (int g = 0; g < s->ngroups; g++)
        if (fuse[g] && s->absorbed[g] == l) return true;
    return false;
}

/* The FLOPs of layer l's node in a plan fusing `fuse`: its own and those it absorbs. */
static int64_t node_flops(const fusion_space *s, const bool *fuse, int l) {
    int64_t f = s->flops[l];
    for (int g = 0; g < s->ngroups; g++)
        if (fuse[g] && s->kept[g] == l && s->absorbed[g] >= 0) f += s->flops[s->absorbed[g]];
    return f;
}

int64_t fusion_exhaustive_count(const fusion_space *s) {
    /* every fusion plan is timed at least once: past this many groups the count is moot */
    if (((int64_t)1 << (s->ngroups < 20 ? s->ngroups : 20)) > FUSION_EXHAUSTIVE_MAX)
        return INT32_MAX;
    bool fuse[FUSION_MAX_GROUPS];
    int64_t total = 0;
    for (int64_t mask = 0; mask < ((int64_t)1 << s->ngroups); mask++) {
        for (int g = 0; g < s->ngroups; g++) fuse[g] = (mask >> g) & 1;
        int64_t plans = 1;
        for (int l = 0; l < s->nlayers && plans <= INT32_MAX; l++)
            if (!absorbed(s, fuse, l)) plans *= s->max_threads;
        total += plans;
        if (total > INT32_MAX) return INT32_MAX;
    }
    return total;
}

static wpk_status check_space(wpk_context *ctx, const fusion_space *s) {
    if (s->nlayers < 0 || s->nlayers > FUSION_MAX_LAYERS || s->ngroups < 0 ||
        s->ngroups > FUSION_MAX_GROUPS || s->max_threads < 1)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "fusion search: %d layers and %d groups "
                         "(at most %d and %d), %d threads", s->nlayers, s->ngroups,
                         FUSION_MAX_LAYERS, FUSION_MAX_GROUPS, s->max_threads);
    for (int g = 0; g < s->ngroups; g++)
        if (s->kept[g] < 0 || s->kept[g] >= s->nlayers || s->absorbed[g] >= s->nlayers)
            return wpk_error(ctx, WPK_ERR_INVALID_ARG, "fusion search: group %d names a layer "
                             "out of range", g);
    return WPK_OK;
}

static void base_point(const fusion_space *s, fusion_point *p) {
    memset(p->fuse, 0, sizeof p->fuse);
    for (int l = 0; l < s->nlayers; l++) p->threads[l] = s->max_threads;
}

/* ---- exhaustive ---- */

static wpk_status exhaustive(wpk_context *ctx, const fusion_space *s, fusion_measure_fn measure,
                             void *user, fusion_result *out, fusion_point *p) {
    int64_t count = fusion_exhaustive_count(s);
    if (count > FUSION_EXHAUSTIVE_MAX)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "the exhaustive fusion search would time %s%lld "
                         "plans (%d groups, %d layers, %d threads); it is an oracle for small "
                         "models (at most %d plans)", count == INT32_MAX ? "over " : "",
                         (long long)count, s->ngroups, s->nlayers, s->max_threads,
                         FUSION_EXHAUSTIVE_MAX);
    int units[FUSION_MAX_LAYERS];
    for (int64_t mask = 0; mask < ((int64_t)1 << s->ngroups); mask++) {
        for (int g = 0; g < s->ngroups; g++) p->fuse[g] = (mask >> g) & 1;
        int nu = 0;
        for (int l = 0; l < s->nlayers; l++) {
            p->threads[l] = 1;
            if (!absorbed(s, p->fuse, l)) units[nu++] = l;
        }
        for (;;) {
            double ms;
            wpk_status st = measure(user, p, &ms, NULL);
            if (st) return st;
            out->evaluations++;
            bool base = mask == 0;
            for (int u = 0; base && u < nu; u++) base = p->threads[units[u]] == s->max_threads;
            if (base) out->base_ms = ms;
            if (ms < out->best_ms) {
                out->best_ms = ms;
                out->best = *p;
            }
            /* the next team sizes, as a counter over the nodes */
            int u = 0;
            while (u < nu && p->threads[units[u]] == s->max_threads) p->threads[units[u++]] = 1;
            if (u == nu) break;
            p->threads[units[u]]++;
        }
    }
    return WPK_OK;
}

/* ---- profile ---- */

typedef struct profiled {
    double ms;
    double layer_ms[FUSION_MAX_LAYERS];
    int threads[FUSION_MAX_LAYERS];
} profiled;

static void level_point(const fusion_space *s, bool fused, int level, fusion_point *p) {
    for (int g = 0; g < s->ngroups; g++) p->fuse[g] = fused;
    for (int l = 0; l < s->nlayers; l++) {
        int t = level == LEVEL_ONE ? 1 : s->max_threads;
        if (level == LEVEL_RULE)
            t = fusion_rule_threads(node_flops(s, p->fuse, l), s->channels[l], s->max_threads);
        p->threads[l] = t;
    }
}

/* Per layer, the fastest team among the profiled plans of one fusion state (-1: no time). */
static void fastest(const fusion_space *s, const profiled *runs, int nruns, double *ms,
                    int *threads) {
    for (int l = 0; l < s->nlayers; l++) {
        ms[l] = -1;
        threads[l] = s->max_threads;
        for (int r = 0; r < nruns; r++)
            if (runs[r].layer_ms[l] >= 0 && (ms[l] < 0 || runs[r].layer_ms[l] < ms[l])) {
                ms[l] = runs[r].layer_ms[l];
                threads[l] = runs[r].threads[l];
            }
    }
}

/* Time p; keep it as the best when faster than the best by the margin. */
static wpk_status try_point(fusion_measure_fn measure, void *user, fusion_result *out,
                            const fusion_point *p) {
    double ms;
    wpk_status st = measure(user, p, &ms, NULL);
    if (st) return st;
    out->evaluations++;
    if (ms < out->best_ms * (1.0 - MARGIN / 2)) {
        out->best_ms = ms;
        out->best = *p;
    }
    return WPK_OK;
}

/* Single moves from the best plan, the layers with the most profiled time first: each group
 * flipped, each layer's team at every other size; at most REFINE_MAX plans. */
static wpk_status refine(const fusion_space *s, fusion_measure_fn measure, void *user,
                         fusion_result *out, fusion_point *p, const double *layer_ms,
                         int *order) {
    for (int l = 0; l < s->nlayers; l++) order[l] = l;
    for (int i = 1; i < s->nlayers; i++) /* insertion sort, most time first */
        for (int j = i; j > 0 && layer_ms[order[j]] > layer_ms[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int budget = REFINE_MAX;
    wpk_status st = WPK_OK;
    for (int i = 0; st == WPK_OK && i < s->nlayers && budget > 0; i++) {
        int l = order[i];
        for (int g = 0; st == WPK_OK && g < s->ngroups && budget > 0; g++) {
            if (s->kept[g] != l) continue;
            *p = out->best;
            p->fuse[g] = !p->fuse[g];
            st = try_point(measure, user, out, p);
            budget--;
        }
        /* the team the layer had before its moves: one that wins must not bring it back */
        int had = out->best.threads[l];
        for (int t = 1; st == WPK_OK && t <= s->max_threads && budget > 0; t++) {
            if (absorbed(s, out->best.fuse, l) || t == had || t == out->best.threads[l])
                continue;
            *p = out->best;
            p->threads[l] = t;
            st = try_point(measure, user, out, p);
            budget--;
        }
    }
    return st;
}

static wpk_status profile(wpk_context *ctx, const fusion_space *s, fusion_measure_fn measure,
                          void *user, fusion_result *out, fusion_point *p) {
    profiled *runs = wpk_calloc(2 * NUM_LEVELS, sizeof *runs);
    double *ms = wpk_calloc(2 * (size_t)s->nlayers + 1, sizeof *ms);
    int *threads = wpk_calloc(3 * (size_t)s->nlayers + 1, sizeof *threads);
    wpk_status st = runs && ms && threads ? WPK_OK
                    : wpk_error(ctx, WPK_ERR_NOMEM, "out of memory in the fusion search");
    int nruns[2] = {0, 0};
    for (int fused = 0; st == WPK_OK && fused < (s->ngroups ? 2 : 1); fused++) {
        /* the plan's threads first: unfused, it is the base plan */
        static const int order[NUM_LEVELS] = {LEVEL_ALL, LEVEL_RULE, LEVEL_ONE};
        for (int i = 0; st == WPK_OK && i < NUM_LEVELS; i++) {
            level_point(s, fused, order[i], p);
            profiled *r = &runs[fused * NUM_LEVELS + nruns[fused]];
            bool seen = false;
            for (int j = 0; j < nruns[fused] && !seen; j++)
                seen = !memcmp(runs[fused * NUM_LEVELS + j].threads, p->threads,
                               sizeof(int) * (size_t)s->nlayers);
            if (seen) continue;
            memcpy(r->threads, p->threads, sizeof(int) * (size_t)s->nlayers);
            st = measure(user, p, &r->ms, r->layer_ms);
            if (st) break;
            out->evaluations++;
            nruns[fused]++;
            if (!fused && order[i] == LEVEL_ALL) out->base_ms = r->ms;
            if (r->ms < out->best_ms) {
                out->best_ms = r->ms;
                out->best = *p;
            }
        }
    }
    if (st == WPK_OK) {
        double *ms0 = ms, *ms1 = ms + s->nlayers;
        int *th0 = threads, *th1 = threads + s->nlayers;
        fastest(s, runs, nruns[0], ms0, th0);
        fastest(s, runs + NUM_LEVELS, nruns[1], ms1, th1);
        /* a group fuses when its node's time fused beats its layers' times apart */
        for (int l = 0; l < s->nlayers; l++) p->threads[l] = th0[l];
        for (int g = 0; g < s->ngroups; g++) {
            int k = s->kept[g], a = s->absorbed[g];
            double apart = ms0[k] + (a >= 0 && ms0[a] > 0 ? ms0[a] : 0);
            p->fuse[g] = ms1[k] >= 0 && ms0[k] >= 0 && ms1[k] < apart;
        }
        for (int g = 0; g < s->ngroups; g++)
            if (p->fuse[g]) p->threads[s->kept[g]] = th1[s->kept[g]];
        double composed;
        st = measure(user, p, &composed, NULL);
        if (st == WPK_OK) {
            out->evaluations++;
            if (composed < out->best_ms) {
                out->best_ms = composed;
                out->best = *p;
            }
            st = refine(s, measure, user, out, p, ms0, threads + 2 * s->nlayers);
        }
    }
    wpk_free(runs);
    wpk_free(ms);
    wpk_free(threads);
    return st;
}

wpk_status fusion_search(wpk_context *ctx, const fusion_space *s, fusion_search_mode mode,
                         fusion_measure_fn measure, void *user, fusion_result *out) {
    memset(out, 0, sizeof *out);
    wpk_status st = check_space(ctx, s);
    if (st) return st;
    fusion_point *p = wpk_calloc(1, sizeof *p);
    if (!p) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory in the fusion search");
    double t0 = now_ms();
    out->best_ms = 1e300;
    out->base_ms = -1;
    st = mode == FUSION_SEARCH_EXHAUSTIVE ? exhaustive(ctx, s, measure, user, out, p)
                                          : profile(ctx, s, measure, user, out, p);
    if (st == WPK_OK && out->base_ms >= 0 && out->best_ms > out->base_ms * (1.0 - MARGIN)) {
        base_point(s, &out->best);
        out->best_ms = out->base_ms;
    }
    out->search_ms = now_ms() - t0;
    wpk_free(p);
    return st;
}
