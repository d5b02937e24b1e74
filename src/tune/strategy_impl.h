/* strategy_impl.h -- what the search strategies share behind strategy.h: the table each one
 * fills, the bookkeeping of proposed and told configs (a hash set of choice vectors, the trial
 * history, the best so far), and a seeded random source. Internal to src/tune/strategy*.c. */
#ifndef WPK_TUNE_STRATEGY_IMPL_H
#define WPK_TUNE_STRATEGY_IMPL_H

#include <stddef.h>

#include "tune/strategy.h"

/* A choice vector packed into 5 bits per knob (TUNE_MAX_VALUES = 32, TUNE_MAX_KNOBS = 16):
 * knobs 0..11 in lo, 12..15 in hi; hi's top bit marks a used slot in a tune_cfg_set. */
typedef struct tune_cfg_key {
    uint64_t lo, hi;
} tune_cfg_key;

/* Open-addressing map from config to an int (a trial index, or -1 for "proposed, not told"). */
typedef struct tune_cfg_set {
    tune_cfg_key *keys;
    int *vals;
    size_t cap, count; /* cap is 0 or a power of two; count <= cap / 2 */
} tune_cfg_set;

tune_cfg_key tune_cfg_key_of(const tune_space *space, const tune_config *c);
/* The value stored for key, or NULL. */
int *tune_cfg_set_find(const tune_cfg_set *set, tune_cfg_key key);
/* Insert or overwrite. WPK_ERR_NOMEM (set unchanged) when it cannot grow. */
wpk_status tune_cfg_set_put(tune_cfg_set *set, tune_cfg_key key, int val);
void tune_cfg_set_clear(tune_cfg_set *set);
void tune_cfg_set_free(tune_cfg_set *set);

typedef struct tune_trial {
    tune_config config;
    tune_result result;
} tune_trial;

typedef struct tune_strategy_ops {
    const char *name;
    /* Set up s->impl; a message on s->ctx and a status on failure (free is then not called). */
    wpk_status (*init)(tune_strategy *s);
    /* Fill out[0..max) with configs accepted by tune_strategy_take; return how many. */
    int (*propose)(tune_strategy *s, tune_config *out, int max);
    /* Called after the shared bookkeeping recorded the results (s->trials, s->best). */
    void (*tell)(tune_strategy *s, const tune_config *c, const tune_result *r, int n);
    void (*free)(tune_strategy *s);
} tune_strategy_ops;

struct tune_strategy {
    const tune_strategy_ops *ops;
    wpk_context *ctx;          /* borrowed */
    const tune_space *space;   /* borrowed */
    tune_strategy_params params;
    int64_t size;              /* tune_space_size (saturates at INT64_MAX) */
    int nmutable;              /* knobs with more than one value */
    int mutable_knob[TUNE_MAX_KNOBS];
    uint64_t rng;              /* xorshift64* state, never 0 */
    tune_cfg_set seen;         /* proposed or told; value: index into trials, or -1 */
    tune_trial *trials;        /* every distinct config told, latest result */
    int ntrials, trials_cap;
    int ntold;                 /* results told, counting repeats (progress for schedules) */
    int best;                  /* index into trials of the fastest TUNE_OK, or -1 */
    void *impl;                /* the strategy's own state */
};

/* ---- random source (seeded per strategy; the same seed gives the same stream) ---- */
uint64_t tune_rng_next(uint64_t *state);
/* Uniform in [0, n), n >= 1, without modulo bias. */
int64_t tune_rng_below(uint64_t *state, int64_t n);
/* Uniform in [0, 1). */
double tune_rng_unit(uint64_t *state);

/* ---- bookkeeping ---- */
bool tune_strategy_legal(const tune_strategy *s, const tune_config *c);
/* Legal and neither proposed nor told before. */
bool tune_strategy_fresh(const tune_strategy *s, const tune_config *c);
/* Mark c proposed if it is fresh: 1 taken, 0 not fresh, -1 out of memory (message on ctx). */
int tune_strategy_take(tune_strategy *s, const tune_config *c);
/* The trial told for c, or NULL. */
const tune_trial *tune_strategy_trial(const tune_strategy *s, const tune_config *c);
/* A uniformly random fresh config into *c: a few random draws, then (in spaces small enough to
 * walk) a scan in mixed-radix order from a random start, so that a nearly exhausted space still
 * yields its last configs. False when none was found (exhausted, or nothing legal nearby).
 * Does not take it. */
bool tune_strategy_random_fresh(tune_strategy *s, tune_config *c);
/* Change one mutable knob of c: to an adjacent value with probability p_adjacent (values are
 * ordered, so neighbours tend to perform alike), else to any other value. No-op when no knob
 * has two values. */
void tune_strategy_mutate(tune_strategy *s, tune_config *c, double p_adjacent);
/* A fresh mutant of `from`, one or two knobs away, into *c; false when a few draws found
 * none fresh. */
bool tune_strategy_near(tune_strategy *s, const tune_config *from, tune_config *c);
/* The same from params.start; false when there is no start. */
bool tune_strategy_near_start(tune_strategy *s, tune_config *c);
bool tune_config_equal(const tune_space *space, const tune_config *a, const tune_config *b);

/* Ordering for results: TUNE_OK by seconds, then every failure (never better than an OK). */
bool tune_result_better(const tune_result *a, const tune_result *b);

/* How many fresh/seen configs a single propose call may skip before giving up (see strategy.h). */
#define TUNE_MAX_SKIPS (1 << 22)
/* Spaces up to this size are walked by tune_strategy_random_fresh when random draws miss. */
#define TUNE_SCAN_LIMIT (1 << 20)
/* Configs walked that way when the space has a legality check (which may lower each one). */
#define TUNE_LEGAL_SCAN 256

extern const tune_strategy_ops tune_random_ops, tune_grid_ops, tune_ga_ops, tune_rl_ops,
    tune_anneal_ops, tune_model_ops;

#endif
