/* space.h -- a schedule template's search space as data: named knobs, each with its legal
 * values, and configs that pick one value per knob. The tuner searches these spaces;
 * `wpk space` prints them. */
#ifndef WPK_KERNELS_SPACE_H
#define WPK_KERNELS_SPACE_H

#include <stdint.h>

#include "base/strbuf.h"
#include "wpk.h"

#define TUNE_MAX_KNOBS 16
#define TUNE_MAX_VALUES 32

typedef struct tune_knob {
    const char *name;                 /* "tile_ow", "vec", "order", "parallel_axis", "pack" */
    int nvalues;
    int64_t values[TUNE_MAX_VALUES];  /* legal values; flags are {0, 1}, loop orders an index */
} tune_knob;

typedef struct tune_space {
    int nknobs;
    tune_knob knobs[TUNE_MAX_KNOBS];
} tune_space;

typedef struct tune_config {
    int choice[TUNE_MAX_KNOBS];       /* index into knobs[k].values */
} tune_config;

/* Append a knob (name must outlive the space, e.g. a literal). Values are deduplicated and
 * kept in the given order. Returns WPK_ERR_INVALID_ARG when full or empty. */
wpk_status tune_space_add(tune_space *s, const char *name, int nvalues, const int64_t *values);
/* Number of configs (the product of value counts), saturating at INT64_MAX. */
int64_t tune_space_size(const tune_space *s);
/* The value knob `name` takes in c; `def` when the space has no such knob. */
int64_t tune_config_get(const tune_space *s, const tune_config *c, const char *name, int64_t def);
/* Choose, for knob `name`, the value closest to v (for building default configs). */
void tune_config_set(const tune_space *s, tune_config *c, const char *name, int64_t v);
/* "tile_ow=8,tile_oc=16,vec=16" -- stable text: the key of a config in the records. */
void tune_config_print(const tune_space *s, const tune_config *c, strbuf *b);
/* Parse the text form back; WPK_ERR_INVALID_ARG naming the knob or value that does not fit. */
wpk_status tune_config_parse(wpk_context *ctx, const tune_space *s, const char *text, tune_config *c);
/* A uniformly random config (xorshift state in *rng, seeded by the caller). */
void tune_config_random(const tune_space *s, uint64_t *rng, tune_config *c);
/* The i-th config in mixed-radix order (0 <= i < size), for grid search. */
void tune_config_from_index(const tune_space *s, int64_t i, tune_config *c);

#endif
