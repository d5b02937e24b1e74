/* strategy_grid.c -- grid search with pruning: every config in mixed-radix order (the last knob
 * varies fastest), skipping those the space's legality predicate rejects (register counts, cache
 * sizes). In a space too big to finish it still proposes in order; the tuner's budget stops it. */
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "tune/strategy_impl.h"

typedef struct grid_state {
    int64_t next; /* index of the next config to consider */
} grid_state;

static wpk_status grid_init(tune_strategy *s) {
    s->impl = wpk_calloc(1, sizeof(grid_state));
    if (!s->impl) return wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy 'grid': out of memory");
    return WPK_OK;
}

static int grid_propose(tune_strategy *s, tune_config *out, int max) {
    grid_state *g = s->impl;
    int n = 0;
    long skips = 0;
    while (n < max && g->next < s->size && skips < TUNE_MAX_SKIPS) {
        tune_config c;
        memset(&c, 0, sizeof c);
        tune_config_from_index(s->space, g->next, &c);
        int t = tune_strategy_take(s, &c);
        if (t < 0) break; /* out of memory: this index is considered again next call */
        g->next++;
        if (t == 0) {
            skips++; /* pruned, or told earlier from records */
            continue;
        }
        out[n++] = c;
    }
    return n;
}

static void grid_tell(tune_strategy *s, const tune_config *c, const tune_result *r, int n) {
    (void)s, (void)c, (void)r, (void)n; /* the order does not depend on results */
}

static void grid_free(tune_strategy *s) {
    wpk_free(s->impl);
}

const tune_strategy_ops tune_grid_ops = {"grid", grid_init, grid_propose, grid_tell, grid_free};
