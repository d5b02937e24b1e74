/* strategy.c -- the strategy factory and what every strategy shares: the set of configs proposed
 * or told (so none is proposed twice), the history of results, the best so far, legality, and
 * the seeded random source. The search itself lives in one strategy_<name>.c per strategy. */
#include <assert.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "tune/strategy_impl.h"

_Static_assert(TUNE_MAX_VALUES <= 32, "tune_cfg_key packs 5 bits per knob");
_Static_assert(TUNE_MAX_KNOBS <= 24, "tune_cfg_key packs 24 knobs at most, hi's top bit is a flag");

#define USED (1ull << 63)

/* ---- random source ---- */

uint64_t tune_rng_next(uint64_t *x) {
    /* xorshift64*, the generator tune_config_random steps on the same state */
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 2685821657736338717ULL;
}

int64_t tune_rng_below(uint64_t *x, int64_t n) {
    assert(n >= 1);
    uint64_t un = (uint64_t)n;
    /* reject the top partial copy of [0, n) so every value is equally likely */
    uint64_t limit = UINT64_MAX - UINT64_MAX % un;
    uint64_t r;
    do r = tune_rng_next(x);
    while (r >= limit);
    return (int64_t)(r % un);
}

double tune_rng_unit(uint64_t *x) {
    return (double)(tune_rng_next(x) >> 11) * (1.0 / 9007199254740992.0);
}

static uint64_t splitmix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---- config keys and the config set ---- */

tune_cfg_key tune_cfg_key_of(const tune_space *space, const tune_config *c) {
    tune_cfg_key k = {0, USED};
    for (int i = 0; i < space->nknobs; i++) {
        uint64_t v = (uint64_t)c->choice[i] & 31u;
        if (i < 12) k.lo |= v << (5 * i);
        else k.hi |= v << (5 * (i - 12));
    }
    return k;
}

static size_t key_hash(tune_cfg_key k) {
    return (size_t)splitmix64(k.lo ^ splitmix64(k.hi));
}

int *tune_cfg_set_find(const tune_cfg_set *set, tune_cfg_key key) {
    if (!set->cap) return NULL;
    size_t mask = set->cap - 1;
    for (size_t i = key_hash(key) & mask;; i = (i + 1) & mask) {
        if (!set->keys[i].hi) return NULL;
        if (set->keys[i].lo == key.lo && set->keys[i].hi == key.hi) return &set->vals[i];
    }
}

static void put_slot(tune_cfg_key *keys, int *vals, size_t cap, tune_cfg_key key, int val) {
    size_t mask = cap - 1, i = key_hash(key) & mask;
    while (keys[i].hi) i = (i + 1) & mask;
    keys[i] = key;
    vals[i] = val;
}

wpk_status tune_cfg_set_put(tune_cfg_set *set, tune_cfg_key key, int val) {
    int *v = tune_cfg_set_find(set, key);
    if (v) {
        *v = val;
        return WPK_OK;
    }
    if ((set->count + 1) * 2 > set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 64;
        tune_cfg_key *keys = wpk_calloc(cap, sizeof *keys);
        int *vals = wpk_malloc(cap * sizeof *vals);
        if (!keys || !vals) {
            wpk_free(keys);
            wpk_free(vals);
            return WPK_ERR_NOMEM;
        }
        for (size_t i = 0; i < set->cap; i++)
            if (set->keys[i].hi) put_slot(keys, vals, cap, set->keys[i], set->vals[i]);
        wpk_free(set->keys);
        wpk_free(set->vals);
        set->keys = keys;
        set->vals = vals;
        set->cap = cap;
    }
    put_slot(set->keys, set->vals, set->cap, key, val);
    set->count++;
    return WPK_OK;
}

void tune_cfg_set_clear(tune_cfg_set *set) {
    if (set->cap) memset(set->keys, 0, set->cap * sizeof *set->keys);
    set->count = 0;
}

void tune_cfg_set_free(tune_cfg_set *set) {
    wpk_free(set->keys);
    wpk_free(set->vals);
    memset(set, 0, sizeof *set);
}

bool tune_config_equal(const tune_space *space, const tune_config *a, const tune_config *b) {
    for (int k = 0; k < space->nknobs; k++)
        if (a->choice[k] != b->choice[k]) return false;
    return true;
}

bool tune_result_better(const tune_result *a, const tune_result *b) {
    if (a->status != TUNE_OK) return false;
    return b->status != TUNE_OK || a->seconds < b->seconds;
}

/* ---- bookkeeping ---- */

bool tune_strategy_legal(const tune_strategy *s, const tune_config *c) {
    return !s->params.legal || s->params.legal(s->params.legal_user, c);
}

bool tune_strategy_fresh(const tune_strategy *s, const tune_config *c) {
    return !tune_cfg_set_find(&s->seen, tune_cfg_key_of(s->space, c)) && tune_strategy_legal(s, c);
}

int tune_strategy_take(tune_strategy *s, const tune_config *c) {
    if (!tune_strategy_fresh(s, c)) return 0;
    if (tune_cfg_set_put(&s->seen, tune_cfg_key_of(s->space, c), -1) != WPK_OK) {
        wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy '%s': out of memory recording a proposal",
                  s->ops->name);
        return -1;
    }
    return 1;
}

const tune_trial *tune_strategy_trial(const tune_strategy *s, const tune_config *c) {
    const int *v = tune_cfg_set_find(&s->seen, tune_cfg_key_of(s->space, c));
    return v && *v >= 0 ? &s->trials[*v] : NULL;
}

bool tune_strategy_random_fresh(tune_strategy *s, tune_config *c) {
    memset(c, 0, sizeof *c);
    for (int t = 0; t < 64; t++) {
        tune_config_random(s->space, &s->rng, c);
        if (tune_strategy_fresh(s, c)) return true;
    }
    /* 64 misses: the space is mostly seen or illegal; walk it when that is affordable. A
       legality check may build and lower the config (milliseconds each): then the walk is a
       bounded stretch from a random start, not the whole space */
    if (s->size > TUNE_SCAN_LIMIT) return false;
    int64_t start = tune_rng_below(&s->rng, s->size);
    int64_t walk = s->params.legal && s->size > TUNE_LEGAL_SCAN ? TUNE_LEGAL_SCAN : s->size;
    for (int64_t i = 0; i < walk; i++) {
        tune_config_from_index(s->space, (start + i) % s->size, c);
        if (tune_strategy_fresh(s, c)) return true;
    }
    return false;
}

void tune_strategy_mutate(tune_strategy *s, tune_config *c, double p_adjacent) {
    if (!s->nmutable) return;
    int k = s->mutable_knob[tune_rng_below(&s->rng, s->nmutable)];
    int n = s->space->knobs[k].nvalues, cur = c->choice[k];
    if (tune_rng_unit(&s->rng) < p_adjacent) {
        int step = tune_rng_next(&s->rng) & 1 ? 1 : -1;
        if (cur + step < 0 || cur + step >= n) step = -step;
        c->choice[k] = cur + step;
    } else {
        int v = (int)tune_rng_below(&s->rng, n - 1);
        c->choice[k] = v >= cur ? v + 1 : v;
    }
}

bool tune_strategy_near(tune_strategy *s, const tune_config *from, tune_config *c) {
    for (int t = 0; t < 16; t++) {
        *c = *from;
        tune_strategy_mutate(s, c, 0.5);
        if (tune_rng_next(&s->rng) & 1) tune_strategy_mutate(s, c, 0.5);
        if (tune_strategy_fresh(s, c)) return true;
    }
    return false;
}

bool tune_strategy_near_start(tune_strategy *s, tune_config *c) {
    return s->params.has_start && tune_strategy_near(s, &s->params.start, c);
}

/* ---- the interface ---- */

static const tune_strategy_ops *const strategies[] = {
    &tune_random_ops, &tune_grid_ops, &tune_ga_ops, &tune_rl_ops, &tune_anneal_ops, &tune_model_ops,
};

tune_strategy *tune_strategy_create(wpk_context *ctx, const char *name, const tune_space *space,
                                    const tune_strategy_params *params) {
    const tune_strategy_ops *ops = NULL;
    for (size_t i = 0; i < sizeof strategies / sizeof strategies[0]; i++)
        if (name && strcmp(strategies[i]->name, name) == 0) ops = strategies[i];
    if (!ops) {
        wpk_error(ctx, WPK_ERR_INVALID_ARG, "unknown tuning strategy '%s' (known: random, grid, "
                  "ga, rl, anneal, model)", name ? name : "(null)");
        return NULL;
    }
    if (space->nknobs < 0 || space->nknobs > TUNE_MAX_KNOBS) {
        wpk_error(ctx, WPK_ERR_INVALID_ARG, "tune strategy '%s': space has %d knobs (0..%d)", name,
                  space->nknobs, TUNE_MAX_KNOBS);
        return NULL;
    }
    for (int k = 0; k < space->nknobs; k++) {
        if (space->knobs[k].nvalues < 1 || space->knobs[k].nvalues > TUNE_MAX_VALUES) {
            wpk_error(ctx, WPK_ERR_INVALID_ARG, "tune strategy '%s': knob '%s' has %d values "
                      "(1..%d)", name, space->knobs[k].name ? space->knobs[k].name : "?",
                      space->knobs[k].nvalues, TUNE_MAX_VALUES);
            return NULL;
        }
    }
    tune_strategy *s = wpk_calloc(1, sizeof *s);
    if (!s) {
        wpk_error(ctx, WPK_ERR_NOMEM, "tune strategy '%s': out of memory", name);
        return NULL;
    }
    s->ops = ops;
    s->ctx = ctx;
    s->space = space;
    if (params) s->params = *params;
    s->size = tune_space_size(space);
    for (int k = 0; k < space->nknobs; k++)
        if (space->knobs[k].nvalues > 1) s->mutable_knob[s->nmutable++] = k;
    s->rng = splitmix64(s->params.seed);
    if (!s->rng) s->rng = 0x9E3779B97F4A7C15ull; /* xorshift must not start at 0 */
    s->best = -1;
    if (ops->init(s) != WPK_OK) {
        tune_cfg_set_free(&s->seen);
        wpk_free(s);
        return NULL;
    }
    return s;
}

void tune_strategy_free(tune_strategy *s) {
    if (!s) return;
    s->ops->free(s);
    tune_cfg_set_free(&s->seen);
    wpk_free(s->trials);
    wpk_free(s);
}

const char *tune_strategy_name(const tune_strategy *s) {
    return s->ops->name;
}

int tune_strategy_propose(tune_strategy *s, tune_config *out, int max) {
    if (max <= 0) return 0;
    int n = s->ops->propose(s, out, max);
    assert(n >= 0 && n <= max);
    return n;
}

static void rescan_best(tune_strategy *s) {
    s->best = -1;
    for (int i = 0; i < s->ntrials; i++)
        if (s->trials[i].result.status == TUNE_OK &&
            (s->best < 0 || tune_result_better(&s->trials[i].result, &s->trials[s->best].result)))
            s->best = i;
}

/* Record one result; false when out of memory (the result is then not remembered). */
static bool record(tune_strategy *s, const tune_config *c, const tune_result *r) {
    tune_cfg_key key = tune_cfg_key_of(s->space, c);
    int *slot = tune_cfg_set_find(&s->seen, key);
    if (slot && *slot >= 0) {
        /* told again (re-measured alone, say): the latest result stands */
        tune_trial *t = &s->trials[*slot];
        t->result = *r;
        rescan_best(s); /* rare; the old result may have been the best */
        return true;
    }
    if (s->ntrials == s->trials_cap) {
        int cap = s->trials_cap ? s->trials_cap * 2 : 64;
        tune_trial *t = wpk_realloc(s->trials, (size_t)cap * sizeof *t);
        if (!t) return false;
        s->trials = t;
        s->trials_cap = cap;
    }
    if (tune_cfg_set_put(&s->seen, key, s->ntrials) != WPK_OK) return false;
    tune_trial *t = &s->trials[s->ntrials];
    memset(t, 0, sizeof *t);
    for (int k = 0; k < s->space->nknobs; k++) t->config.choice[k] = c->choice[k];
    t->result = *r;
    if (r->status == TUNE_OK && (s->best < 0 || tune_result_better(r, &s->trials[s->best].result)))
        s->best = s->ntrials;
    s->ntrials++;
    return true;
}

void tune_strategy_tell(tune_strategy *s, const tune_config *configs, const tune_result *results,
                        int n) {
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < s->space->nknobs; k++)
            assert(configs[i].choice[k] >= 0 && configs[i].choice[k] < s->space->knobs[k].nvalues);
        if (!record(s, &configs[i], &results[i]))
            wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy '%s': out of memory recording a "
                      "result (it may be proposed again)", s->ops->name);
        s->ntold++;
    }
    s->ops->tell(s, configs, results, n);
}

bool tune_strategy_best(const tune_strategy *s, tune_config *config, tune_result *result) {
    if (s->best < 0) return false;
    if (config) *config = s->trials[s->best].config;
    if (result) *result = s->trials[s->best].result;
    return true;
}
