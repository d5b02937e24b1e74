/* test_strategies.c -- the search strategies (src/tune/strategy*.c) on synthetic objectives, no
 * compiling: a conv-template-like space (8 knobs of 4-12 values, 1.6M configs) whose run time is
 * a smooth function of the knobs with interactions (register tiles that spill, cache-sized
 * blocks, loop orders that pay only with big blocks, parallel chunks) and 1% noise, with failing
 * regions: a compile error, a timeout, and a wrong-result trap whose reported seconds are tiny.
 * For every strategy: no duplicate proposals, legality (pruning), records told first are never
 * proposed, a tiny space exhausted exactly once, reproducibility (same seed and tells, same
 * proposals), failures never the best, out-of-memory at every allocation. Then GA convergence
 * (and none declared falsely by a two-config population), the model's cold start from prior
 * records, and the search-quality table: trials to reach within 5% of the optimum (known by
 * brute force) per strategy over several seeds, where ga, rl, anneal and model must need
 * clearly fewer trials than random; rl and anneal from a start; rl's policy file and its
 * carry-over from one run to the next, and a policy pretrained on other workloads beating a
 * fresh one. WPK_TEST_SEEDS=N runs N seeds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/context.h"
#include "check.h"
#include "tune/rl_policy.h"
#include "tune/strategy.h"

static const char *const names[] = {"random", "grid", "ga", "rl", "anneal", "model"};
#define NSTRAT (int)(sizeof names / sizeof names[0])

/* ---- the synthetic conv space and its run time ---- */

static const int64_t K_OC[] = {1, 2, 4, 8, 16, 32, 64},
                     K_OW[] = {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16},
                     K_OH[] = {1, 2, 3, 4}, K_VEC[] = {1, 2, 4, 8, 16},
                     K_IC[] = {1, 2, 4, 8, 16, 32, 64, 128}, K_UNROLL[] = {0, 1, 2, 4, 8},
                     K_ORDER[] = {0, 1, 2, 3, 4, 5}, K_PAR[] = {0, 1, 2, 3};
#define NV(a) (int)(sizeof a / sizeof a[0])

static tune_space conv_space(void) {
    tune_space s = {0};
    tune_space_add(&s, "tile_oc", NV(K_OC), K_OC);
    tune_space_add(&s, "tile_ow", NV(K_OW), K_OW);
    tune_space_add(&s, "tile_oh", NV(K_OH), K_OH);
    tune_space_add(&s, "vec", NV(K_VEC), K_VEC);
    tune_space_add(&s, "ic_block", NV(K_IC), K_IC);
    tune_space_add(&s, "unroll", NV(K_UNROLL), K_UNROLL);
    tune_space_add(&s, "order", NV(K_ORDER), K_ORDER);
    tune_space_add(&s, "parallel", NV(K_PAR), K_PAR);
    return s;
}

typedef struct knobs {
    double oc, ow, oh, vec, ic, unroll;
    int order, par;
} knobs;

static knobs knobs_of(const tune_config *c) {
    return (knobs){(double)K_OC[c->choice[0]], (double)K_OW[c->choice[1]],
                   (double)K_OH[c->choice[2]], (double)K_VEC[c->choice[3]],
                   (double)K_IC[c->choice[4]], (double)K_UNROLL[c->choice[5]],
                   (int)K_ORDER[c->choice[6]], (int)K_PAR[c->choice[7]]};
}

static double acc_regs(knobs k) {
    return k.oc / k.vec * k.ow * k.oh;
}

static double tile_bytes(knobs k) {
    return k.ic * (k.ow + 2) * (k.oh + 2) * 4 + k.ic * k.oc * 9 * 4;
}

/* The workload the objective times: its output channels (how many parallel chunks a channel
 * tile leaves) and what a short input-channel block costs. Other workloads of the same
 * template change these; the tests run on the first unless they say otherwise. */
typedef struct workload {
    double out_channels, ic_cost;
} workload;
static workload W = {64, 0.2};

/* Noise-free seconds of a config (scaled by `scale`), or the class of its failure. */
static tune_status true_time(const tune_config *c, double scale, double *sec) {
    knobs k = knobs_of(c);
    if (k.vec > k.oc) return TUNE_COMPILE_ERROR;              /* vector wider than the tile */
    if (k.oh == 3 && k.unroll == 8) return TUNE_WRONG_RESULT; /* a miscompiling region */
    if (k.ic == 128 && k.ow == 1) return TUNE_TIMEOUT;
    double acc = acc_regs(k), t = 1.0;
    t *= acc > 16 ? 1 + 0.08 * (acc - 16) : 1 + 0.8 / acc; /* spills vs. load-bound */
    static const double vec_eff[] = {4.0, 2.2, 1.4, 1.0, 1.12};
    t *= vec_eff[c->choice[3]];
    double ws = tile_bytes(k);
    t *= ws > 32768 ? 1 + 0.3 * log2(ws / 32768) : 1; /* the tile leaves L1 */
    t *= 1 + W.ic_cost / k.ic;
    static const double order_eff[] = {1.0, 1.03, 1.25, 1.02, 1.4, 1.18};
    double o = order_eff[k.order];
    if (k.order == 3 && k.ic >= 16) o *= 0.93; /* reduction-outer pays with big ic blocks */
    if (k.order == 1 && k.oh >= 2) o *= 0.93;
    t *= o;
    static const double par_eff[] = {4.0, 1.0, 1.02, 1.01};
    double p = par_eff[k.par];
    const double chunks = W.out_channels / k.oc;
    if (k.par == 1 && chunks < 4) p *= 4.0 / chunks * 0.8; /* too few chunks for 4 cores */
    if (k.par == 3 && chunks * (56 / k.oh) > 200) p *= 1.05;
    t *= p;
    static const double unroll_eff[] = {1.0, 0.98, 0.97, 0.98, 1.12};
    double u = unroll_eff[c->choice[5]];
    if (k.unroll >= 4 && k.ow > 8) u *= 1.1; /* the i-cache */
    t *= u;
    *sec = 1e-4 * scale * t;
    return TUNE_OK;
}

static int64_t index_of(const tune_space *s, const tune_config *c) {
    int64_t i = 0;
    for (int k = 0; k < s->nknobs; k++) i = i * s->knobs[k].nvalues + c->choice[k];
    return i;
}

/* A measurement: the true time with 1% noise that is fixed per config (a re-measure agrees);
 * a wrong result comes with a tiny time, so a strategy that trusted it would pick it. */
static tune_result measure(const tune_space *s, const tune_config *c) {
    double t;
    tune_result r = {true_time(c, 1.0, &t), 0};
    if (r.status == TUNE_WRONG_RESULT) r.seconds = 1e-9;
    if (r.status != TUNE_OK) return r;
    uint64_t h = (uint64_t)index_of(s, c) * 0x9E3779B97F4A7C15ull;
    double u = 0;
    for (int i = 0; i < 3; i++, h = h * 6364136223846793005ull + 1442695040888963407ull)
        u += (double)(h >> 11) / 9007199254740992.0 - 0.5;
    r.seconds = t * exp(0.01 * 2 * u);
    return r;
}

/* Hardware limits as a template would state them: at most 32 accumulator registers, the
 * vector no wider than the channel tile, a tile within L2 (256 KiB). */
static bool conv_legal(void *user, const tune_config *c) {
    (void)user;
    knobs k = knobs_of(c);
    return k.vec <= k.oc && acc_regs(k) <= 32 && tile_bytes(k) <= 256 * 1024;
}

/* Features as the tuner extracts them from the lowered loop IR: tile extents, vector width,
 * block sizes, register and cache footprints, loop order and parallel axis. */
static int conv_features(void *user, const tune_config *c, float *out, int max) {
    (void)user;
    knobs k = knobs_of(c);
    float f[] = {(float)log2(k.oc), (float)k.ow, (float)k.oh, (float)log2(k.vec),
                 (float)log2(k.ic), (float)k.unroll, (float)k.order, (float)k.par,
                 (float)acc_regs(k), (float)log2(tile_bytes(k)), (float)(k.oc / k.vec),
                 (float)(64 / k.oc)};
    int n = NV(f) < max ? NV(f) : max;
    for (int i = 0; i < n; i++) out[i] = f[i];
    return n;
}

/* ---- the ask/tell loop ---- */

typedef struct run {
    const tune_space *space;
    int budget, batch;
    double target;        /* a trial at or under this true time "reached" */
    uint8_t *proposed;    /* bitmap over config indices (NULL: not checked) */
    bool (*legal)(void *, const tune_config *);
    /* results */
    int trials, dups, illegal, reached_at; /* reached_at: 1-based trial, 0 if never */
    bool stopped;         /* propose returned 0 */
    int64_t *log;         /* config index per trial (NULL: not kept) */
} run;

static void drive(tune_strategy *st, run *r) {
    tune_config cfg[64];
    tune_result res[64];
    while (r->trials < r->budget) {
        int want = r->batch < r->budget - r->trials ? r->batch : r->budget - r->trials;
        int n = tune_strategy_propose(st, cfg, want);
        if (!n) {
            r->stopped = true;
            break;
        }
        for (int i = 0; i < n; i++) {
            int64_t idx = index_of(r->space, &cfg[i]);
            if (r->proposed) {
                if (r->proposed[idx / 8] & (1 << idx % 8)) r->dups++;
                r->proposed[idx / 8] |= (uint8_t)(1 << idx % 8);
            }
            if (r->legal && !r->legal(NULL, &cfg[i])) r->illegal++;
            if (r->log) r->log[r->trials] = idx;
            res[i] = measure(r->space, &cfg[i]);
            double t;
            r->trials++;
            if (!r->reached_at && true_time(&cfg[i], 1.0, &t) == TUNE_OK && t <= r->target)
                r->reached_at = r->trials;
        }
        tune_strategy_tell(st, cfg, res, n);
    }
}

/* drive, a batch at a time, until a trial reaches r->target (or the budget or the strategy
 * runs out): trials to the goal are then r->reached_at. */
static void drive_to_goal(tune_strategy *st, run *r) {
    while (!r->reached_at && !r->stopped && r->budget - r->trials > 0) {
        int budget = r->budget;
        r->budget = r->trials + r->batch < budget ? r->trials + r->batch : budget;
        drive(st, r);
        r->budget = budget;
    }
}

static tune_strategy *make(wpk_context *ctx, const char *name, const tune_space *s, uint64_t seed,
                           int64_t budget, bool legal) {
    tune_strategy_params p = {.seed = seed, .budget = budget, .featurize = conv_features};
    if (legal) p.legal = conv_legal;
    tune_strategy *st = tune_strategy_create(ctx, name, s, &p);
    CHECK(st != NULL);
    return st;
}

/* The optimum by brute force, and how many configs lie within 5% of it. */
static double optimum(const tune_space *s, int64_t *within5) {
    double best = INFINITY;
    int64_t n = tune_space_size(s);
    double *t = malloc((size_t)n * sizeof *t);
    for (int64_t i = 0; i < n; i++) {
        tune_config c = {0};
        tune_config_from_index(s, i, &c);
        if (true_time(&c, 1.0, &t[i]) != TUNE_OK) t[i] = INFINITY;
        if (t[i] < best) best = t[i];
    }
    *within5 = 0;
    for (int64_t i = 0; i < n; i++) *within5 += t[i] <= best * 1.05;
    free(t);
    return best;
}

/* ---- the tests ---- */

static void test_create_errors(wpk_context *ctx) {
    tune_space s = conv_space();
    tune_strategy_params p = {.seed = 1};
    CHECK(tune_strategy_create(ctx, "hill", &s, &p) == NULL);
    CHECK(strstr(wpk_context_error(ctx), "unknown tuning strategy 'hill'"));
    tune_space bad = s;
    bad.knobs[2].nvalues = 0;
    CHECK(tune_strategy_create(ctx, "ga", &bad, &p) == NULL);
    CHECK(strstr(wpk_context_error(ctx), "knob 'tile_oh' has 0 values"));
    for (int i = 0; i < NSTRAT; i++) {
        tune_strategy *st = tune_strategy_create(ctx, names[i], &s, NULL); /* params optional */
        CHECK(st && strcmp(tune_strategy_name(st), names[i]) == 0);
        tune_config c;
        CHECK(!tune_strategy_best(st, &c, NULL));
        CHECK(tune_strategy_propose(st, &c, 0) == 0);
        tune_strategy_free(st);
    }
}

/* No duplicates, only legal configs, a failure never the best, over 600 trials each. */
static void test_no_dups_legal(wpk_context *ctx) {
    tune_space s = conv_space();
    int64_t size = tune_space_size(&s);
    for (int i = 0; i < NSTRAT; i++) {
        for (int legal = 0; legal < 2; legal++) {
            tune_strategy *st = make(ctx, names[i], &s, 7, 600, legal);
            uint8_t *bits = calloc((size_t)size / 8 + 1, 1);
            run r = {&s, 600, 8, 0, bits, legal ? conv_legal : NULL, 0, 0, 0, 0, false, NULL};
            drive(st, &r);
            if (r.dups || r.illegal || r.trials != 600)
                fprintf(stderr, "%s legal=%d: %d trials, %d duplicates, %d illegal\n", names[i],
                        legal, r.trials, r.dups, r.illegal);
            CHECK(r.trials == 600 && r.dups == 0 && r.illegal == 0);
            tune_config best;
            tune_result br;
            CHECK(tune_strategy_best(st, &best, &br));
            CHECK(br.status == TUNE_OK && br.seconds > 1e-6);
            tune_result again = measure(&s, &best);
            CHECK(again.status == TUNE_OK && again.seconds == br.seconds);
            tune_strategy_free(st);
            free(bits);
        }
    }
}

/* A failing config told with a tiny time, and a re-measured best that got slower: the best
 * follows the latest OK results only. */
static void test_best_bookkeeping(wpk_context *ctx) {
    tune_space s = conv_space();
    tune_strategy *st = make(ctx, "random", &s, 3, 100, false);
    tune_config c[3] = {{{0}}, {{0}}, {{0}}};
    c[1].choice[0] = 1;
    c[2].choice[0] = 2;
    tune_result r[3] = {{TUNE_WRONG_RESULT, 1e-9}, {TUNE_OK, 2.0}, {TUNE_OK, 3.0}};
    tune_strategy_tell(st, c, r, 3);
    tune_config b;
    tune_result br;
    CHECK(tune_strategy_best(st, &b, &br) && b.choice[0] == 1 && br.seconds == 2.0);
    tune_result slower = {TUNE_OK, 5.0}, crash = {TUNE_CRASH, 0};
    tune_strategy_tell(st, &c[1], &slower, 1);
    CHECK(tune_strategy_best(st, &b, &br) && b.choice[0] == 2 && br.seconds == 3.0);
    tune_strategy_tell(st, &c[2], &crash, 1);
    CHECK(tune_strategy_best(st, &b, &br) && b.choice[0] == 1 && br.seconds == 5.0);
    tune_strategy_free(st);
}

/* Records told before the first proposal are never proposed. */
static void test_told_first(wpk_context *ctx) {
    tune_space s = conv_space();
    for (int i = 0; i < NSTRAT; i++) {
        tune_strategy *st = make(ctx, names[i], &s, 11, 400, false);
        int64_t size = tune_space_size(&s);
        uint8_t *bits = calloc((size_t)size / 8 + 1, 1);
        /* the grid's first 50 and 50 random ones */
        tune_config told[100];
        tune_result res[100];
        uint64_t rng = 99;
        for (int j = 0; j < 100; j++) {
            memset(&told[j], 0, sizeof told[j]);
            if (j < 50) tune_config_from_index(&s, j, &told[j]);
            else tune_config_random(&s, &rng, &told[j]);
            res[j] = measure(&s, &told[j]);
            int64_t idx = index_of(&s, &told[j]);
            bits[idx / 8] |= (uint8_t)(1 << idx % 8);
        }
        tune_strategy_tell(st, told, res, 100);
        run r = {&s, 300, 8, 0, bits, NULL, 0, 0, 0, 0, false, NULL};
        drive(st, &r);
        if (r.dups) fprintf(stderr, "%s re-proposed %d told configs\n", names[i], r.dups);
        CHECK(r.dups == 0 && r.trials == 300);
        tune_strategy_free(st);
        free(bits);
    }
}

static bool tiny_legal(void *user, const tune_config *c) {
    (void)user;
    return !(c->choice[0] == 1 && c->choice[1] >= 1); /* 4 of 12 pruned */
}

/* A 12-config space: every strategy proposes each legal config exactly once, then 0. */
static void test_exhaust_tiny(wpk_context *ctx) {
    tune_space s = {0};
    tune_space_add(&s, "a", 2, (const int64_t[]){1, 2});
    tune_space_add(&s, "b", 3, (const int64_t[]){4, 8, 16});
    tune_space_add(&s, "c", 2, (const int64_t[]){0, 1});
    tune_space_add(&s, "one", 1, (const int64_t[]){7}); /* a knob with a single value */
    for (int i = 0; i < NSTRAT; i++) {
        for (int legal = 0; legal < 2; legal++) {
            tune_strategy_params p = {.seed = 5, .budget = 100};
            if (legal) p.legal = tiny_legal;
            tune_strategy *st = tune_strategy_create(ctx, names[i], &s, &p);
            int count[12] = {0}, total = 0, n;
            tune_config c[5];
            for (int round = 0; round < 50 && (n = tune_strategy_propose(st, c, 5)) > 0; round++) {
                tune_result r[5];
                for (int j = 0; j < n; j++) {
                    count[index_of(&s, &c[j])]++;
                    r[j] = (tune_result){TUNE_OK, 1.0 + c[j].choice[1] + 0.5 * c[j].choice[0]};
                }
                total += n;
                tune_strategy_tell(st, c, r, n);
            }
            int want = legal ? 8 : 12, bad = 0;
            for (int j = 0; j < 12; j++) {
                tune_config cj = {0};
                tune_config_from_index(&s, j, &cj);
                bad += count[j] != (legal && !tiny_legal(NULL, &cj) ? 0 : 1);
            }
            if (bad || total != want)
                fprintf(stderr, "%s legal=%d: %d proposals\n", names[i], legal, total);
            CHECK(bad == 0 && total == want);
            CHECK(tune_strategy_propose(st, c, 5) == 0); /* stays exhausted */
            tune_strategy_free(st);
        }
    }
}

/* Grid: mixed-radix order, the pruned configs skipped. */
static void test_grid_order(wpk_context *ctx) {
    tune_space s = conv_space();
    tune_strategy_params p = {.seed = 1, .legal = conv_legal};
    tune_strategy *st = tune_strategy_create(ctx, "grid", &s, &p);
    tune_config c[16];
    int64_t next = 0;
    bool ok = true;
    for (int round = 0; round < 40; round++) {
        int n = tune_strategy_propose(st, c, 16);
        CHECK(n == 16);
        for (int j = 0; j < n; j++) {
            tune_config want = {0};
            do tune_config_from_index(&s, next++, &want);
            while (!conv_legal(NULL, &want));
            ok &= index_of(&s, &c[j]) == index_of(&s, &want);
        }
    }
    CHECK(ok);
    tune_strategy_free(st);
}

/* Same seed and same tells give the same proposals; another seed others. */
static void test_reproducible(wpk_context *ctx) {
    tune_space s = conv_space();
    for (int i = 0; i < NSTRAT; i++) {
        int64_t *log[3];
        for (int k = 0; k < 3; k++) {
            tune_strategy *st = make(ctx, names[i], &s, k == 2 ? 8 : 4, 400, true);
            log[k] = calloc(400, sizeof *log[k]);
            run r = {&s, 400, 8, 0, NULL, NULL, 0, 0, 0, 0, false, log[k]};
            drive(st, &r);
            tune_strategy_free(st);
        }
        CHECK(memcmp(log[0], log[1], 400 * sizeof *log[0]) == 0);
        if (strcmp(names[i], "grid") != 0) CHECK(memcmp(log[0], log[2], 400 * sizeof *log[0]) != 0);
        for (int k = 0; k < 3; k++) free(log[k]);
    }
}

/* Every allocation failing in turn: no crash, no leak (ASan), a NOMEM message. */
static void test_out_of_memory(wpk_context *ctx) {
    tune_space s = conv_space();
    for (int i = 0; i < NSTRAT; i++) {
        bool finished = false;
        for (long n = 1; !finished && n < 400; n++) {
            wpk_alloc_fail_at(n);
            tune_strategy_params p = {.seed = 2, .budget = 80, .featurize = conv_features};
            tune_strategy *st = tune_strategy_create(ctx, names[i], &s, &p);
            if (st) {
                /* 5 batches: the config set grows twice, every strategy breeds/fits/moves */
                run r = {&s, 80, 16, 0, NULL, NULL, 0, 0, 0, 0, false, NULL};
                drive(st, &r);
                tune_strategy_free(st);
            } else {
                CHECK(strstr(wpk_context_error(ctx), "out of memory"));
            }
            finished = wpk_alloc_count() < n; /* the n-th allocation never happened */
        }
        wpk_alloc_fail_at(0);
        CHECK(finished);
    }
}

/* With a flat objective the best never improves: GA stops after its stall limit, long before
 * the space or the budget runs out. */
static void test_ga_converges(wpk_context *ctx) {
    tune_space s = conv_space();
    tune_strategy_params p = {.seed = 3, .budget = 100000};
    tune_strategy *st = tune_strategy_create(ctx, "ga", &s, &p);
    tune_config c[16];
    tune_result r[16];
    int trials = 0, n;
    while (trials < 100000 && (n = tune_strategy_propose(st, c, 16)) > 0) {
        for (int j = 0; j < n; j++) r[j] = (tune_result){TUNE_OK, 1.0};
        tune_strategy_tell(st, c, r, n);
        trials += n;
    }
    CHECK(trials > 64 && trials < 2000);
    CHECK(tune_strategy_propose(st, c, 16) == 0);
    tune_strategy_free(st);
}

static bool sparse_legal(void *user, const tune_config *c) {
    return index_of(user, c) % 31 == 0;
}

/* A budget of 5 trials makes a population of two; told three records in a space where 1 config
 * in 31 is legal, its child is most often a repeat or illegal even after re-mutation. GA must
 * still propose (random immigrants) rather than report convergence: the resumed `wpk tune`
 * would otherwise stop a task short of its trials. */
static void test_ga_small_population(wpk_context *ctx) {
    tune_space s = conv_space();
    for (uint64_t seed = 1; seed <= 20; seed++) {
        tune_strategy_params p = {.seed = seed, .budget = 5, .legal = sparse_legal,
                                  .legal_user = &s};
        tune_strategy *st = tune_strategy_create(ctx, "ga", &s, &p);
        tune_config told[3];
        tune_result r[3];
        for (int i = 0; i < 3; i++) {
            tune_config_from_index(&s, 31 * (int64_t)(seed * 1000 + 7 * i), &told[i]);
            r[i] = (tune_result){TUNE_OK, 1.0 + 0.1 * i};
        }
        tune_strategy_tell(st, told, r, 3);
        tune_config c[4];
        int n = tune_strategy_propose(st, c, 4);
        CHECK(n > 0);
        for (int j = 0; j < n; j++) {
            CHECK(sparse_legal(&s, &c[j]));
            for (int i = 0; i < 3; i++) CHECK(index_of(&s, &c[j]) != index_of(&s, &told[i]));
        }
        tune_strategy_free(st);
    }
}

/* Cold start: records of another workload (10x slower, same shape of landscape) make the
 * model's first batches better than random ones. */
static void test_model_prior(wpk_context *ctx) {
    tune_space s = conv_space();
    enum { NPRIOR = 400, DIM = 12, FIRST = 32 };
    float *pf = malloc(NPRIOR * DIM * sizeof *pf);
    double *ps = malloc(NPRIOR * sizeof *ps);
    uint64_t rng = 12345;
    for (int i = 0; i < NPRIOR; i++) {
        tune_config c = {0};
        tune_config_random(&s, &rng, &c);
        CHECK(conv_features(NULL, &c, &pf[i * DIM], DIM) == DIM);
        double t;
        ps[i] = true_time(&c, 10.0, &t) == TUNE_OK ? t : -1; /* failures: no time */
    }
    double mean[2];
    for (int prior = 0; prior < 2; prior++) {
        double sum = 0;
        int nsum = 0;
        for (uint64_t seed = 1; seed <= 4; seed++) {
            tune_strategy_params p = {.seed = seed, .budget = 500, .featurize = conv_features};
            if (prior) p.prior_features = pf, p.prior_seconds = ps, p.prior_count = NPRIOR,
                p.prior_dim = DIM;
            tune_strategy *st = tune_strategy_create(ctx, "model", &s, &p);
            tune_config c[FIRST];
            int n = tune_strategy_propose(st, c, FIRST);
            CHECK(n == FIRST);
            for (int j = 0; j < n; j++) {
                double t;
                sum += true_time(&c[j], 1.0, &t) == TUNE_OK ? log(t) : log(1e-3);
                nsum++;
            }
            tune_strategy_free(st);
        }
        mean[prior] = sum / nsum;
    }
    printf("model cold start: mean log-seconds of the first %d proposals: %.3f without prior "
           "records, %.3f with\n", FIRST, mean[0], mean[1]);
    CHECK(mean[1] < mean[0] - 0.3);
    free(pf);
    free(ps);
}

/* A start config one knob off the optimum of s (the loop order: 25% slower); *best gets the
 * optimum's time and *within5 how many configs lie within 5% of it. */
static tune_config start_near_optimum(const tune_space *s, double *best, int64_t *within5) {
    int64_t n = tune_space_size(s), opt = -1;
    double t;
    *best = optimum(s, within5);
    for (int64_t i = 0; i < n && opt < 0; i++) {
        tune_config c = {0};
        tune_config_from_index(s, i, &c);
        if (true_time(&c, 1.0, &t) == TUNE_OK && t == *best) opt = i;
    }
    tune_config start = {0};
    tune_config_from_index(s, opt, &start);
    start.choice[6] = 2;
    return start;
}

/* Mean trials over seeds 1..8 for ga under p (its seed set per run) to reach within 5% of
 * `best` (the cap of 2000 counted for a run that does not). */
static double ga_mean_trials(wpk_context *ctx, const tune_space *s, tune_strategy_params p,
                             double best) {
    enum { CAP = 2000, BATCH = 8, SEEDS = 8 };
    double sum = 0;
    p.budget = CAP;
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
        p.seed = seed;
        tune_strategy *st = tune_strategy_create(ctx, "ga", s, &p);
        CHECK(st != NULL);
        if (!st) return CAP;
        run r = {s, CAP, BATCH, best * 1.05, NULL, NULL, 0, 0, 0, 0, false, NULL};
        drive_to_goal(st, &r);
        sum += r.reached_at ? r.reached_at : CAP;
        tune_strategy_free(st);
    }
    return sum / SEEDS;
}

/* A start config (the template's default in the tuner): the first half of ga's first
 * generation are its mutants, one or two knobs away, and from a start near the optimum (one
 * knob off, 25% slower) ga reaches within 5% of it in far fewer trials than from a random
 * first generation. */
static void test_ga_start(wpk_context *ctx) {
    tune_space s = conv_space();
    int64_t within5;
    double best, t;
    const tune_config start = start_near_optimum(&s, &best, &within5);
    CHECK(true_time(&start, 1.0, &t) == TUNE_OK && t > 1.2 * best);
    /* the first generation: its first half near mutants of the start */
    tune_strategy_params p = {.seed = 1, .budget = 2000, .start = start, .has_start = true};
    tune_strategy *st = tune_strategy_create(ctx, "ga", &s, &p);
    tune_config c[64];
    int k = st ? tune_strategy_propose(st, c, 64) : 0, near = 0;
    for (int i = 0; i < k / 2; i++) {
        int diff = 0;
        for (int j = 0; j < s.nknobs; j++) diff += c[i].choice[j] != start.choice[j];
        near += diff >= 1 && diff <= 2;
    }
    CHECK(k >= 16 && near == k / 2);
    tune_strategy_free(st);
    const double with = ga_mean_trials(ctx, &s, p, best);
    p.has_start = false;
    const double without = ga_mean_trials(ctx, &s, p, best);
    printf("ga from a start one knob off the optimum: %.0f trials to within 5%% (without a "
           "start %.0f)\n", with, without);
    CHECK(with < 0.5 * without);
}

/* A start two knobs off the optimum, the loop order two values away past a slower one and the
 * parallel axis another (26% slower), as the default of 56x56 64->64's Winograd template was
 * two knobs off (its parallel form 8 against 5, and tile_p): with the start's result told
 * first, as the tuner does, ga reaches within 5% of the optimum in a budget of 80 trials, the
 * strategies bench's, in every run, and in at most 35 trials on average (42-46 without its
 * one-knob neighbours step: mutation changes one gene, often to an adjacent value). */
static void test_ga_two_knobs(wpk_context *ctx) {
    tune_space s = conv_space();
    int64_t within5;
    double best;
    tune_config start = start_near_optimum(&s, &best, &within5);
    start.choice[6] = NV(K_ORDER) - 1;
    start.choice[7] = NV(K_PAR) - 1;
    tune_result sr;
    sr.status = true_time(&start, 1.0, &sr.seconds);
    CHECK(sr.status == TUNE_OK && sr.seconds > 1.2 * best);
    enum { CAP = 80, BATCH = 8, SEEDS = 10 };
    int hits = 0;
    double sum = 0;
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
        tune_strategy_params p = {.seed = seed, .budget = CAP, .start = start, .has_start = true};
        tune_strategy *st = tune_strategy_create(ctx, "ga", &s, &p);
        CHECK(st != NULL);
        tune_strategy_tell(st, &start, &sr, 1);
        run r = {&s, CAP, BATCH, best * 1.05, NULL, NULL, 0, 0, 0, 0, false, NULL};
        drive_to_goal(st, &r);
        hits += r.reached_at != 0;
        sum += r.reached_at ? r.reached_at : CAP;
        tune_strategy_free(st);
    }
    printf("ga from a start two knobs off the optimum (%.2fx its time): %d of %d runs within 5%% "
           "in %d trials, %.0f on average\n", sr.seconds / best, hits, SEEDS, CAP, sum / SEEDS);
    CHECK(hits == SEEDS && sum / SEEDS <= 35);
}

/* Transfer: the fastest configs of other workloads (prior_configs; the tuner reads them from
 * the records) are ga's and the model's first proposals, in their order, and one of them one
 * knob off this workload's optimum (25% slower) brings ga to within 5% of it in well under
 * half the trials of a start from nothing. */
static void test_ga_prior_configs(wpk_context *ctx) {
    tune_space s = conv_space();
    int64_t within5;
    double best;
    tune_config prior[2];
    prior[1] = start_near_optimum(&s, &best, &within5);
    uint64_t rng = 99;
    double t;
    do tune_config_random(&s, &rng, &prior[0]);
    while (!conv_legal(NULL, &prior[0]) || true_time(&prior[0], 1.0, &t) != TUNE_OK);
    /* ga's and the model's first proposals, before the model's ranking or the start's
       mutants */
    tune_strategy_params p = {.seed = 1, .budget = 80, .featurize = conv_features,
                              .legal = conv_legal, .prior_configs = prior,
                              .prior_config_count = 2, .start = prior[0], .has_start = true};
    for (int m = 0; m < 2; m++) {
        tune_strategy *st = tune_strategy_create(ctx, m ? "model" : "ga", &s, &p);
        tune_config c[8];
        CHECK(st && tune_strategy_propose(st, c, 8) == 8);
        CHECK(!memcmp(&c[0], &prior[0], sizeof c[0]) && !memcmp(&c[1], &prior[1], sizeof c[1]));
        tune_strategy_free(st);
    }
    /* rl proposes them first too; anneal starts a chain at each (proposing it first) */
    for (int m = 0; m < 2; m++) {
        tune_strategy *st = tune_strategy_create(ctx, m ? "anneal" : "rl", &s, &p);
        tune_config c[8];
        int k = st ? tune_strategy_propose(st, c, 8) : 0, found = 0;
        CHECK(k == 8);
        if (!m) CHECK(!memcmp(&c[0], &prior[0], sizeof c[0]) &&
                      !memcmp(&c[1], &prior[1], sizeof c[1]));
        for (int i = 0; m && i < k; i++) found += !memcmp(&c[i], &prior[1], sizeof c[i]);
        if (m) CHECK(found == 1);
        tune_strategy_free(st);
    }
    p.featurize = NULL;
    p.has_start = false;
    const double with = ga_mean_trials(ctx, &s, p, best);
    p.prior_config_count = 0;
    const double without = ga_mean_trials(ctx, &s, p, best);
    printf("ga with another workload's best one knob off the optimum: %.0f trials to within 5%% "
           "(without it %.0f)\n", with, without);
    CHECK(with < 0.5 * without);
}

/* The model's cold start from the start config alone (the tuner tells the default's result
 * before it asks): one result ranks nothing, so the first batch is mutants of the start, one
 * or two knobs away and over several knobs (not a sweep of the first knob's values, as the
 * ties of a model trained on one row gave), and from a start one knob off the optimum the
 * model reaches within 5% of it in at most two batches. */
static void test_model_start(wpk_context *ctx) {
    tune_space s = conv_space();
    int64_t within5, n = tune_space_size(&s);
    double best;
    const tune_config start = start_near_optimum(&s, &best, &within5);
    tune_result sr;
    sr.status = true_time(&start, 1.0, &sr.seconds);
    enum { CAP = 2000, BATCH = 8, SEEDS = 8 };
    double sum = 0;
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
        tune_strategy_params p = {.seed = seed, .budget = CAP, .start = start, .has_start = true,
                                  .featurize = conv_features};
        tune_strategy *st = tune_strategy_create(ctx, "model", &s, &p);
        CHECK(st != NULL);
        tune_strategy_tell(st, &start, &sr, 1);
        if (seed == 1) {
            tune_config c[BATCH];
            int k = tune_strategy_propose(st, c, BATCH), near = 0;
            bool knob_changed[TUNE_MAX_KNOBS] = {false};
            int nchanged = 0;
            for (int i = 0; i < k; i++) {
                int diff = 0;
                for (int j = 0; j < s.nknobs; j++)
                    if (c[i].choice[j] != start.choice[j]) {
                        diff++;
                        nchanged += !knob_changed[j];
                        knob_changed[j] = true;
                    }
                near += diff >= 1 && diff <= 2;
            }
            CHECK(k == BATCH && near == k && nchanged >= 4);
            tune_strategy_free(st);
            st = tune_strategy_create(ctx, "model", &s, &p);
            tune_strategy_tell(st, &start, &sr, 1);
        }
        run r = {&s, CAP, BATCH, best * 1.05, NULL, NULL, 0, 0, 0, 0, false, NULL};
        drive_to_goal(st, &r);
        sum += r.reached_at ? r.reached_at : CAP;
        tune_strategy_free(st);
    }
    printf("model from a start one knob off the optimum: %.0f trials to within 5%% (random "
           "needs ~%lld)\n", sum / SEEDS, (long long)(n / within5));
    CHECK(sum / SEEDS <= 2 * BATCH); /* the sweep of the first knobs took 30 */
}

/* Mean trials over seeds 1..SEEDS for strategy `name` under p, with start's result told first
 * as the tuner does (when p has one), to reach within 5% of `best` (a miss counts as cap). */
static double mean_trials(wpk_context *ctx, const char *name, const tune_space *s,
                          tune_strategy_params p, double best, int cap, int seeds, int *hits) {
    double sum = 0;
    p.budget = cap;
    *hits = 0;
    for (uint64_t seed = 1; seed <= (uint64_t)seeds; seed++) {
        p.seed = seed;
        tune_strategy *st = tune_strategy_create(ctx, name, s, &p);
        CHECK(st != NULL);
        if (!st) return cap;
        if (p.has_start) {
            tune_result sr = measure(s, &p.start);
            tune_strategy_tell(st, &p.start, &sr, 1);
        }
        run r = {s, cap, 8, best * 1.05, NULL, NULL, 0, 0, 0, 0, false, NULL};
        drive_to_goal(st, &r);
        *hits += r.reached_at != 0;
        sum += r.reached_at ? r.reached_at : cap;
        tune_strategy_free(st);
    }
    return sum / seeds;
}

/* rl and anneal from a start two knobs off the optimum (the loop order two values away past a
 * slower one, and the parallel axis), as test_ga_two_knobs: their first proposals are the
 * start's neighbours, so both reach within 5% of the optimum in a budget of 80 trials in
 * nearly every run, in well under a fifth of random search's trials (~2700 here). */
static void test_rl_anneal_two_knobs(wpk_context *ctx) {
    tune_space s = conv_space();
    int64_t within5;
    double best, t;
    tune_config start = start_near_optimum(&s, &best, &within5);
    start.choice[6] = NV(K_ORDER) - 1;
    start.choice[7] = NV(K_PAR) - 1;
    CHECK(true_time(&start, 1.0, &t) == TUNE_OK && t > 1.2 * best);
    tune_strategy_params p = {.start = start, .has_start = true, .legal = conv_legal,
                              .featurize = conv_features};
    for (int m = 0; m < 2; m++) {
        const char *name = m ? "anneal" : "rl";
        int hits;
        double mean = mean_trials(ctx, name, &s, p, best, 80, 10, &hits);
        printf("%s from a start two knobs off the optimum: %d of 10 runs within 5%% in 80 "
               "trials, %.0f on average\n", name, hits, mean);
        CHECK(hits >= 8 && mean <= 45);
    }
    /* the first batch: one to three knobs from the start */
    for (int m = 0; m < 2; m++) {
        p.seed = 3;
        p.budget = 80;
        tune_strategy *st = tune_strategy_create(ctx, m ? "anneal" : "rl", &s, &p);
        tune_config c[8];
        int k = st ? tune_strategy_propose(st, c, 8) : 0, near = 0;
        for (int i = 0; i < k; i++) {
            int diff = 0;
            for (int j = 0; j < s.nknobs; j++) diff += c[i].choice[j] != start.choice[j];
            near += diff >= 1 && diff <= 3;
        }
        CHECK(k == 8 && near >= 7);
        tune_strategy_free(st);
    }
}

static int warnings;
static char last_warning[512];
static void on_log(void *user, wpk_log_level level, const char *msg) {
    (void)user;
    if (level != WPK_LOG_WARN) return;
    warnings++;
    snprintf(last_warning, sizeof last_warning, "%s", msg);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* The policy file: saved and loaded back weight for weight; a missing file is a fresh policy
 * without a warning; a corrupt, truncated or other-version file a fresh one with a warning
 * naming the file and the cause, never a failure. */
static void test_rl_policy_file(wpk_context *ctx) {
    char path[] = "/tmp/wpk_rl_policy_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    wpk_context_set_log(ctx, on_log, NULL, WPK_LOG_WARN);
    tune_rl_policy *p = tune_rl_policy_create(ctx);
    double *w = tune_rl_policy_weights(p, 0xabcdef12345ull, "tile_ow", 14);
    for (int i = 0; i < TUNE_RL_INPUTS; i++) w[i] = 0.25 * i - 1.0 / 3;
    tune_rl_policy_weights(p, 0xabcdef12345ull, "order", 2)[0] = -1.5;
    CHECK(tune_rl_policy_save(ctx, p, path) == WPK_OK);
    tune_rl_policy *q = tune_rl_policy_load(ctx, path);
    CHECK(q && tune_rl_policy_size(q) == 2 && warnings == 0);
    const double *v = q ? tune_rl_policy_find(q, 0xabcdef12345ull, "tile_ow", 14) : NULL;
    CHECK(v != NULL);
    for (int i = 0; v && i < TUNE_RL_INPUTS; i++) CHECK(fabs(v[i] - w[i]) < 1e-8);
    CHECK(q && !tune_rl_policy_find(q, 0xabcdef12345ull, "tile_ow", 16));
    tune_rl_policy_free(q);
    static const char *const bad[] = {
        "garbage\n",
        "wpk-rl-policy 99 50 0\n",
        "wpk-rl-policy 2 49 3\n0000000000abcdef order 2 1 2 3\n", /* truncated entry */
        "wpk-rl-policy 2 49 3\n0000000000abcdef order 2 nan",
    };
    const char *cause[] = {"not an rl policy file", "version 99", "malformed", "malformed"};
    for (int i = 0; i < 4; i++) {
        write_file(path, bad[i]);
        warnings = 0;
        q = tune_rl_policy_load(ctx, path);
        CHECK(q && tune_rl_policy_size(q) == 0 && warnings == 1);
        CHECK(strstr(last_warning, path) && strstr(last_warning, cause[i]) &&
              strstr(last_warning, "fresh policy"));
        tune_rl_policy_free(q);
    }
    remove(path);
    warnings = 0;
    q = tune_rl_policy_load(ctx, path);
    CHECK(q && tune_rl_policy_size(q) == 0 && warnings == 0);
    tune_rl_policy_free(q);
    CHECK(tune_rl_policy_save(ctx, p, "/nonexistent-dir/policy") == WPK_ERR_IO);
    CHECK(strstr(wpk_context_error(ctx), "/nonexistent-dir/policy"));
    wpk_clear_error(ctx);
    tune_rl_policy_free(p);
    wpk_context_set_log(ctx, NULL, NULL, WPK_LOG_WARN);
}

/* The policy carries over: a policy trained by one run (600 trials from nothing), saved and
 * loaded, brings a later run from a poor start to within 5% of the optimum in fewer trials
 * than a fresh policy. */
static void test_rl_carry_over(wpk_context *ctx) {
    tune_space s = conv_space();
    int64_t within5;
    double best, t;
    start_near_optimum(&s, &best, &within5);
    char path[] = "/tmp/wpk_rl_carry_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    tune_rl_policy *trained = tune_rl_policy_create(ctx);
    tune_strategy_params p = {.seed = 77, .budget = 600, .legal = conv_legal,
                              .rl_policy = trained};
    tune_strategy *st = tune_strategy_create(ctx, "rl", &s, &p);
    run r = {&s, 600, 8, 0, NULL, NULL, 0, 0, 0, 0, false, NULL};
    if (st) drive(st, &r);
    tune_strategy_free(st);
    CHECK(tune_rl_policy_updates(trained) > 400);
    CHECK(tune_rl_policy_save(ctx, trained, path) == WPK_OK);
    tune_rl_policy_free(trained);
    /* a poor start: the slowest of a few random legal configs */
    uint64_t rng = 5;
    tune_config start = {0}, c;
    double worst = 0;
    for (int i = 0; i < 64; i++) {
        tune_config_random(&s, &rng, &c);
        if (conv_legal(NULL, &c) && true_time(&c, 1.0, &t) == TUNE_OK && t > worst)
            worst = t, start = c;
    }
    enum { SEEDS = 8, CAP = 2000 };
    double sum[2] = {0, 0};
    for (int m = 0; m < 2; m++)
        for (uint64_t seed = 1; seed <= SEEDS; seed++) {
            tune_rl_policy *pol = m ? tune_rl_policy_load(ctx, path) : tune_rl_policy_create(ctx);
            tune_strategy_params q = {.seed = seed, .budget = CAP, .legal = conv_legal,
                                      .start = start, .has_start = true, .rl_policy = pol};
            st = tune_strategy_create(ctx, "rl", &s, &q);
            tune_result sr = measure(&s, &start);
            if (st) tune_strategy_tell(st, &start, &sr, 1);
            run g = {&s, CAP, 8, best * 1.05, NULL, NULL, 0, 0, 0, 0, false, NULL};
            if (st) drive_to_goal(st, &g);
            sum[m] += g.reached_at ? g.reached_at : CAP;
            tune_strategy_free(st);
            tune_rl_policy_free(pol);
        }
    remove(path);
    printf("rl from a poor start (%.1fx the optimum): %.0f trials to within 5%% with the saved "
           "policy of an earlier run, %.0f with a fresh one\n", worst / best, sum[1] / SEEDS,
           sum[0] / SEEDS);
    CHECK(sum[1] < 0.8 * sum[0]);
}

/* rl from `start` over seeds 1..RL_SEEDS, budget RL_CAP: m = 0 with a fresh policy, m = 1
 * with the one saved at path. hits[m] runs reach within 5% of `best`; mean[m] trials on
 * average (a miss counts as RL_CAP). */
enum { RL_SEEDS = 10, RL_CAP = 80 };
static void rl_fresh_vs_saved(wpk_context *ctx, const tune_space *s, const tune_config *start,
                              double best, const char *path, int hits[2], double mean[2]) {
    for (int m = 0; m < 2; m++) {
        double sum = 0;
        hits[m] = 0;
        for (uint64_t seed = 1; seed <= RL_SEEDS; seed++) {
            tune_rl_policy *pol = m ? tune_rl_policy_load(ctx, path) : tune_rl_policy_create(ctx);
            tune_strategy_params q = {.seed = seed, .budget = RL_CAP, .legal = conv_legal,
                                      .featurize = conv_features, .start = *start,
                                      .has_start = true, .rl_policy = pol};
            tune_strategy *st = tune_strategy_create(ctx, "rl", s, &q);
            tune_result sr = measure(s, start);
            if (st) tune_strategy_tell(st, start, &sr, 1);
            run g = {s, RL_CAP, 8, best * 1.05, NULL, NULL, 0, 0, 0, 0, false, NULL};
            if (st) drive_to_goal(st, &g);
            hits[m] += g.reached_at != 0;
            sum += g.reached_at ? g.reached_at : RL_CAP;
            tune_strategy_free(st);
            tune_rl_policy_free(pol);
        }
        mean[m] = sum / RL_SEEDS;
    }
}

/* Transfer through the policy alone: a policy trained by rl on two other workloads of the
 * template (other channel counts and block costs, 900 trials each from nothing, no records
 * passed on), saved and loaded, brings rl to within 5% of this workload's optimum faster than
 * a fresh policy: from a start two knobs off it (the loop order and the parallel axis), which
 * the fresh policy reaches too within 80 trials, and from one three knobs off (the unroll
 * factor as well), where moves of one knob pass through slower configs and the trained
 * policy's confident several-knob moves make the difference. anneal, with its moves of one to
 * three knobs and its restarts from the best, reaches the three-knob optimum too. */
static void test_rl_pretrained(wpk_context *ctx) {
    tune_space s = conv_space();
    char path[] = "/tmp/wpk_rl_pretrain_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    const workload measured = W, others[] = {{128, 0.1}, {32, 0.4}};
    tune_rl_policy *trained = tune_rl_policy_create(ctx);
    for (int w = 0; w < 2; w++) {
        W = others[w];
        tune_strategy_params p = {.seed = 50 + (uint64_t)w, .budget = 900, .legal = conv_legal,
                                  .featurize = conv_features, .rl_policy = trained};
        tune_strategy *st = tune_strategy_create(ctx, "rl", &s, &p);
        run r = {&s, 900, 8, 0, NULL, NULL, 0, 0, 0, 0, false, NULL};
        if (st) drive(st, &r);
        tune_strategy_free(st);
    }
    W = measured;
    CHECK(tune_rl_policy_updates(trained) > 400);
    CHECK(tune_rl_policy_save(ctx, trained, path) == WPK_OK);
    tune_rl_policy_free(trained);
    int64_t within5;
    double best, t, mean[2];
    int hits[2];
    tune_config start = start_near_optimum(&s, &best, &within5);
    start.choice[6] = NV(K_ORDER) - 1;
    start.choice[7] = NV(K_PAR) - 1;
    CHECK(true_time(&start, 1.0, &t) == TUNE_OK && t > 1.2 * best);
    rl_fresh_vs_saved(ctx, &s, &start, best, path, hits, mean);
    printf("rl from a start two knobs off the optimum, %d seeds, budget %d: a fresh policy %d "
           "runs within 5%%, %.1f trials on average; pretrained on two other workloads %d, "
           "%.1f\n", RL_SEEDS, RL_CAP, hits[0], mean[0], hits[1], mean[1]);
    CHECK(hits[0] >= 8 && mean[0] <= 40);
    CHECK(hits[1] == RL_SEEDS && mean[1] < 0.75 * mean[0]);
    /* a third knob off: the unroll factor at its far end */
    start.choice[5] = NV(K_UNROLL) - 1;
    CHECK(true_time(&start, 1.0, &t) == TUNE_OK && t > 1.3 * best && conv_legal(NULL, &start));
    rl_fresh_vs_saved(ctx, &s, &start, best, path, hits, mean);
    tune_strategy_params p = {.start = start, .has_start = true, .legal = conv_legal,
                              .featurize = conv_features};
    int anneal_hits;
    double anneal_mean =
        mean_trials(ctx, "anneal", &s, p, best, RL_CAP, RL_SEEDS, &anneal_hits);
    printf("from a start three knobs off the optimum (%.2fx), %d seeds, budget %d: rl with a "
           "fresh policy %d runs within 5%%, %.1f trials on average; pretrained %d, %.1f; "
           "anneal %d, %.1f\n", t / best, RL_SEEDS, RL_CAP, hits[0], mean[0], hits[1], mean[1],
           anneal_hits, anneal_mean);
    CHECK(hits[1] >= 9 && mean[1] < 0.75 * mean[0]);
    CHECK(anneal_hits >= 8);
    remove(path);
}

/* Trials to reach within 5% of the optimum, per strategy, over several seeds. */
static void test_search_quality(wpk_context *ctx) {
    tune_space s = conv_space();
    int64_t within5;
    double best = optimum(&s, &within5);
    int seeds = 5;
    const char *env = getenv("WPK_TEST_SEEDS");
    if (env && atoi(env) > 0) seeds = atoi(env);
    enum { CAP = 6000, BATCH = 8 };
    printf("search quality: %lld configs, %lld within 5%% of the optimum (random needs ~%lld "
           "trials); batch %d, cap %d trials, %d seeds\n",
           (long long)tune_space_size(&s), (long long)within5,
           (long long)(tune_space_size(&s) / within5), BATCH, CAP, seeds);
    printf("  %-8s %12s %12s %10s %12s\n", "strategy", "mean trials", "median", "success",
           "ms/run");
    double mean[NSTRAT], rate[NSTRAT];
    for (int i = 0; i < NSTRAT; i++) {
        int *reached = calloc((size_t)seeds, sizeof *reached);
        int ok = 0;
        double sum = 0;
        clock_t t0 = clock();
        for (int k = 0; k < seeds; k++) {
            tune_strategy *st = make(ctx, names[i], &s, 1000 + (uint64_t)k, CAP, false);
            run r = {&s, CAP, BATCH, best * 1.05, NULL, NULL, 0, 0, 0, 0, false, NULL};
            drive_to_goal(st, &r); /* the table counts trials to reach the goal */
            reached[k] = r.reached_at ? r.reached_at : CAP; /* a miss counts as the cap */
            ok += r.reached_at != 0;
            sum += reached[k];
            tune_strategy_free(st);
        }
        double ms = 1000.0 * (double)(clock() - t0) / CLOCKS_PER_SEC / seeds;
        for (int a = 1; a < seeds; a++)
            for (int b = a; b > 0 && reached[b] < reached[b - 1]; b--) {
                int t = reached[b];
                reached[b] = reached[b - 1];
                reached[b - 1] = t;
            }
        mean[i] = sum / seeds;
        rate[i] = (double)ok / seeds;
        printf("  %-8s %12.0f %12d %9.0f%% %12.1f\n", names[i], mean[i], reached[seeds / 2],
               100 * rate[i], ms);
        free(reached);
    }
    /* ga = 2, rl = 3, anneal = 4, model = 5, random = 0 in names[] */
    printf("  ratio to random: ga %.2f, rl %.2f, anneal %.2f, model %.2f\n", mean[2] / mean[0],
           mean[3] / mean[0], mean[4] / mean[0], mean[5] / mean[0]);
    CHECK(mean[3] <= 0.5 * mean[0] && rate[3] >= 0.8);
    CHECK(mean[4] <= 0.5 * mean[0] && rate[4] >= 0.8);
    CHECK(mean[2] <= 0.5 * mean[0] && rate[2] >= 0.8);
    CHECK(mean[5] <= 0.5 * mean[0] && rate[5] >= 0.8);
}

int main(void) {
    wpk_context *ctx = wpk_context_create();
    test_create_errors(ctx);
    test_no_dups_legal(ctx);
    test_best_bookkeeping(ctx);
    test_told_first(ctx);
    test_exhaust_tiny(ctx);
    test_grid_order(ctx);
    test_reproducible(ctx);
    test_out_of_memory(ctx);
    test_ga_converges(ctx);
    test_ga_small_population(ctx);
    test_ga_start(ctx);
    test_ga_two_knobs(ctx);
    test_ga_prior_configs(ctx);
    test_model_prior(ctx);
    test_model_start(ctx);
    test_rl_anneal_two_knobs(ctx);
    test_rl_policy_file(ctx);
    test_rl_carry_over(ctx);
    test_rl_pretrained(ctx);
    test_search_quality(ctx);
    wpk_context_free(ctx);
    CHECK_DONE();
}
