/* features.h -- a config's schedule as its code will run, read from the task's lowered loop IR:
 * a fixed-length feature vector for the "model" strategy's cost model (the same
 * length and meaning for every template and workload, so records of other workloads train it
 * too), and the pruning predicate every strategy honours (configs that do not lower, register
 * tiles larger than the register file, reduction working sets far beyond L2). */
#ifndef WPK_TUNE_FEATURES_H
#define WPK_TUNE_FEATURES_H

#include <stdbool.h>
#include <stdint.h>

#include "loop/loop.h"
#include "kernels/provider.h"

/* What the features are measured against. */
typedef struct tune_machine {
    int vector_floats;       /* lanes of one vector register: 16 (AVX-512), 8 (AVX2), 4 */
    int vector_regs;         /* vector registers: 32 with AVX-512, else 16 */
    int cores;               /* target_cores() */
    int64_t l1_bytes;        /* data cache per core */
    int64_t l2_bytes;
} tune_machine;

/* The machine this process runs on (target.h for vectors and cores; the caches from sysconf,
 * else /sys, else 32 KiB / 1 MiB). Read once; thread-safe. */
tune_machine tune_machine_host(void);

/* Loops described, from the hot loop (the loop whose body does the most work) outwards. */
#define TUNE_FEATURE_LEVELS 5
/* Floats per feature vector: 29 of the kernel and its hot loop, 7 per level. */
#define TUNE_FEATURE_DIM (29 + 7 * TUNE_FEATURE_LEVELS)

/* The name ("acc_regs", "l0_extent") and one-line meaning of feature i (0 <= i <
 * TUNE_FEATURE_DIM); NULL outside. */
const char *tune_feature_name(int i);
const char *tune_feature_doc(int i);

/* Pruning thresholds (conservative: a pruned config is one that certainly runs badly).
 * Accumulators beyond the register file spill: every multiply-add of the tile then goes
 * through memory (the conv template measured a 28-register tile already slower than 16). A
 * reduction nest touching more than this many times L2 streams from L3 or DRAM on every
 * accumulator tile. */
#define TUNE_PRUNE_MAX_ACC_OVER_REGS 1.0
#define TUNE_PRUNE_MAX_WS_OVER_L2 2.0

/* The raw numbers behind the features and the pruning. */
typedef struct tune_loop_stats {
    int64_t accumulators;    /* vector registers the hot loop's accumulators take */
    int64_t working_set;     /* bytes the reduction nest around them touches (0: no tile) */
    int64_t par_extent;      /* extent of the parallel loop around the hot loop (1: none) */
    int64_t lanes;           /* widest vector of the hot body */
    int64_t hot_stores;      /* stores in the hot body (unrolled statements) */
    double hot_trips;        /* times the hot body runs */
} tune_loop_stats;

/* Features of one lowered kernel into out[TUNE_FEATURE_DIM] (log-scaled; see the names), and
 * its raw statistics into *stats (may be NULL). Pure; allocates nothing. */
void tune_features_of_func(const loop_func *f, const tune_machine *m, float *out,
                           tune_loop_stats *stats);

typedef enum tune_prune {
    TUNE_PRUNE_NONE = 0,     /* legal */
    TUNE_PRUNE_LOWER,        /* the template or the lowering rejects the config */
    TUNE_PRUNE_REGISTERS,    /* accumulators exceed the vector registers */
    TUNE_PRUNE_CACHE         /* the reduction working set exceeds TUNE_PRUNE_MAX_WS_OVER_L2 x L2 */
} tune_prune;

/* Why stats would be pruned on machine m. */
tune_prune tune_prune_of(const tune_loop_stats *stats, const tune_machine *m);

/* Features and legality of one task's configs: each config is built and lowered once (no C
 * compiled), its features and verdict kept by config (up to 64Ki configs; later ones are
 * computed again each time, with the same answer). Not thread-safe. */
typedef struct tune_featurizer tune_featurizer;

/* For a DSL template's task (tmpl->build set; NULL and WPK_ERR_INVALID_ARG on ctx for a library
 * template). task (borrowed) must outlive the featurizer. m: NULL for tune_machine_host().
 * Lowering errors are kept out of ctx. NULL on out of memory (message on ctx). */
tune_featurizer *tune_featurizer_create(wpk_context *ctx, const tune_task *task,
                                        const tune_machine *m);
void tune_featurizer_free(tune_featurizer *f);
/* The space the featurizer reads configs in (the task template's). */
const tune_space *tune_featurizer_space(const tune_featurizer *f);

/* Features of config c into out (at most max floats): TUNE_FEATURE_DIM written and returned,
 * or -1 when the config does not lower (or out of memory). stats: may be NULL. */
int tune_featurizer_get(tune_featurizer *f, const tune_config *c, float *out, int max,
                        tune_loop_stats *stats);
/* The same for a config in text form ("knob=value,..."); -1 when it does not parse or lower. */
int tune_featurizer_get_text(tune_featurizer *f, const char *config, float *out, int max);
/* Why c is pruned (TUNE_PRUNE_NONE: legal). Out of memory: TUNE_PRUNE_NONE (not judged). */
tune_prune tune_featurizer_check(tune_featurizer *f, const tune_config *c);

/* Adapters for tune_strategy_params: user is a tune_featurizer. */
int tune_featurize_config(void *user, const tune_config *c, float *out, int max);
bool tune_config_legal(void *user, const tune_config *c);

/* Configs lowered so far (cache misses) and the seconds that took. */
void tune_featurizer_cost(const tune_featurizer *f, int64_t *lowered, double *seconds);

#endif
