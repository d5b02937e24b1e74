/* strategy.h -- search strategies behind one ask/tell interface over one space:
 * random, grid (with pruning), genetic algorithm, reinforcement learning, simulated annealing,
 * and cost-model-guided search. Seeded and reproducible: the same seed and the same results told
 * give the same proposals. */
#ifndef WPK_TUNE_STRATEGY_H
#define WPK_TUNE_STRATEGY_H

#include <stdbool.h>

#include "kernels/space.h"

/* The outcome of measuring one config. */
typedef enum tune_status {
    TUNE_OK = 0,
    TUNE_COMPILE_ERROR,   /* the schedule was rejected or the compiler failed */
    TUNE_TIMEOUT,         /* the kernel did not finish in time */
    TUNE_CRASH,           /* the child died (signal) or ran out of its memory cap */
    TUNE_WRONG_RESULT,    /* output differs from the reference: never a winner */
    TUNE_INVALID          /* not a legal config (pruned) */
} tune_status;

typedef struct tune_result {
    tune_status status;
    double seconds;       /* median run time; meaningful when status == TUNE_OK */
} tune_result;

/* Features of a config for cost models (extracted from its lowered loop IR by the tuner).
 * Returns the number written (<= max), or -1 when the config cannot be lowered. */
typedef int (*tune_featurize_fn)(void *user, const tune_config *c, float *out, int max);

typedef struct tune_strategy_params {
    uint64_t seed;
    int64_t budget;               /* trials the caller intends to spend (sizes populations) */
    tune_featurize_fn featurize;  /* "model": features per config; NULL: the knob values */
    void *featurize_user;
    /* "model": records of other workloads to start from (features + seconds), may be empty;
     * prior_dim floats per record as featurize computes them, seconds <= 0 for a failure */
    const float *prior_features;
    const double *prior_seconds;
    int prior_count, prior_dim;
    /* "ga", "model": configs of this space that were the fastest on other workloads of the
     * template (their records), best first, proposed before anything else */
    const tune_config *prior_configs;
    int prior_config_count;
    /* Pruning (every strategy): a config for which legal() is false is never proposed -- the
     * template's legality and hardware limits (registers, cache sizes). NULL: all are legal.
     * Called often; must be cheap and pure (the same answer for the same config). */
    bool (*legal)(void *user, const tune_config *c);
    void *legal_user;
    /* A config expected to be good, such as the template's default (has_start false: none).
     * "ga" breeds half of its first generation from it (its mutants, one or two knobs away,
     * proposed first); "model", untrained, proposes such mutants for its first batch. */
    tune_config start;
    bool has_start;
    /* "rl": the policy it samples from and trains (rl_policy.h), shared by the tasks of a job
     * and saved between runs; borrowed, must outlive the strategy. NULL: a fresh one of its own */
    struct tune_rl_policy *rl_policy;
} tune_strategy_params;

typedef struct tune_strategy tune_strategy;

/* Names: "random", "grid", "ga", "rl", "anneal", "model". NULL (and a message on ctx) for an
 * unknown name, a malformed space or when out of memory. The space must outlive the strategy;
 * ctx (borrowed, may be NULL) must too: propose leaves its out-of-memory message there.
 * params is copied (prior_* arrays are borrowed and must outlive the strategy). A strategy is
 * not thread-safe; separate strategies are independent. */
tune_strategy *tune_strategy_create(wpk_context *ctx, const char *name, const tune_space *space,
                                    const tune_strategy_params *params);
void tune_strategy_free(tune_strategy *s);
const char *tune_strategy_name(const tune_strategy *s);

/* Up to max configs to measure next, none proposed before by this strategy (configs told as
 * already measured, e.g. from stored records, count as proposed). Returns the count; 0 when the
 * strategy has converged or exhausted the space (or ran out of memory: WPK_ERR_NOMEM on ctx).
 * A call skips at most ~4M illegal or already-seen configs, so in a huge space that is nearly
 * all illegal it may return fewer than max, or 0. */
int tune_strategy_propose(tune_strategy *s, tune_config *out, int max);
/* Results of measured configs (any order, any subset of what was proposed, or configs measured
 * earlier and loaded from records). */
void tune_strategy_tell(tune_strategy *s, const tune_config *configs, const tune_result *results, int n);
/* The fastest config told with TUNE_OK (a failure is never the best; a config told twice counts
 * with its latest result). False when none was. */
bool tune_strategy_best(const tune_strategy *s, tune_config *config, tune_result *result);

#endif
