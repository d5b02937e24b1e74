/* fusion_search.h -- the joint search over a model's fusion plan (which fusion groups fuse) and
 * each layer's OpenMP team size (DLFusion): a short measured search guided by each layer's
 * operation count and channel count, and the exhaustive oracle over the same space for small
 * models. The space is abstract (layers, groups); the caller measures a point in the model. */
#ifndef WPK_TUNE_FUSION_SEARCH_H
#define WPK_TUNE_FUSION_SEARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "wpk.h"

#define FUSION_MAX_LAYERS 1024
#define FUSION_MAX_GROUPS 256
/* The most plans the exhaustive search times: it is an oracle for small models. */
#define FUSION_EXHAUSTIVE_MAX 4096
/* A layer's team grows by one thread per this many FLOPs (the fork and join of a team costs
 * about what a core computes in that time) ... */
#define FUSION_FLOPS_PER_THREAD 2000000
/* ... and by one per this many output channels at most (the kernels split channels and rows). */
#define FUSION_CHANNELS_PER_THREAD 8

/* A layer: a node whose team size is a knob. A group: two nodes that fuse into one, which
 * keeps the attributes (and the team size) of layer `kept`; `absorbed` is the other node's
 * layer, or -1 when that node is not a layer. */
typedef struct fusion_space {
    int nlayers, ngroups;
    int max_threads;                     /* the plan's threads: teams are 1 .. max_threads */
    int64_t flops[FUSION_MAX_LAYERS];
    int64_t channels[FUSION_MAX_LAYERS]; /* output channels (0: unknown) */
    int kept[FUSION_MAX_GROUPS], absorbed[FUSION_MAX_GROUPS];
} fusion_space;

typedef struct fusion_point {
    bool fuse[FUSION_MAX_GROUPS];
    int threads[FUSION_MAX_LAYERS];      /* 1 .. max_threads; an absorbed layer's is unused */
} fusion_point;

/* Time point p in the model: *ms its latency; with layer_ms (else NULL), per layer that is a
 * node of p's plan (not absorbed), the time of that node and the nodes run since the previous
 * layer's (the reorders and copies it needs), -1 for the others. */
typedef wpk_status (*fusion_measure_fn)(void *user, const fusion_point *p, double *ms,
                                        double *layer_ms);

typedef enum fusion_search_mode {
    FUSION_SEARCH_PROFILE,    /* rule-guided, per-layer times from a few profiled plans */
    FUSION_SEARCH_EXHAUSTIVE  /* every fusion plan x every team size of every layer */
} fusion_search_mode;

typedef struct fusion_result {
    fusion_point best;
    double best_ms;          /* its latency as measured in the search */
    double base_ms;          /* the plan without fusion groups, every team at max_threads */
    int evaluations;         /* plans timed */
    double search_ms;        /* wall time of the search */
} fusion_result;

/* The team size the rule gives a layer of `flops` FLOPs and `channels` output channels. */
int fusion_rule_threads(int64_t flops, int64_t channels, int max_threads);

/* Number of plans the exhaustive search would time over s (capped at INT32_MAX). */
int64_t fusion_exhaustive_count(const fusion_space *s);

/* Search s in mode, timing plans with measure(user, ...). The result is never slower as
 * measured than the base plan (which it is when nothing beats it by 1%). Errors: measure's;
 * WPK_ERR_INVALID_ARG for an exhaustive search over more than FUSION_EXHAUSTIVE_MAX plans or
 * a space past the limits; WPK_ERR_NOMEM. */
wpk_status fusion_search(wpk_context *ctx, const fusion_space *s, fusion_search_mode mode,
                         fusion_measure_fn measure, void *user, fusion_result *out);

#endif
