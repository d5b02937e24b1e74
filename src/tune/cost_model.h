/* cost_model.h -- a learned ranking of configs by speed from their features (for the
 * cost-model-guided search): gradient-boosted trees through XGBoost's C API, trained afresh on
 * each call to fit. Rows come in groups (one per workload: this task's measurements, records of
 * other workloads) and are only compared within their group, so records of a kernel ten times
 * slower still teach which features make a config fast. */
#ifndef WPK_TUNE_COST_MODEL_H
#define WPK_TUNE_COST_MODEL_H

#include <stdint.h>

#include "wpk.h"

typedef enum tune_cost_objective {
    TUNE_COST_RANK,      /* pairwise ranking within each group (XGBoost rank:pairwise) */
    TUNE_COST_REGRESSION /* squared error on the score minus its group's mean */
} tune_cost_objective;

typedef struct tune_cost_model tune_cost_model;

/* A model with no training yet. ctx (borrowed) must outlive it: fit/predict errors go there.
 * Deterministic: the same seed and rows give the same predictions (one thread). NULL on OOM. */
tune_cost_model *tune_cost_model_create(wpk_context *ctx, tune_cost_objective objective,
                                        uint64_t seed);
void tune_cost_model_free(tune_cost_model *m);

/* Train afresh on n rows of dim features each (row-major, NAN = missing) with a score per row,
 * higher = faster (e.g. -log seconds). group_sizes: ngroups counts of consecutive rows summing
 * to n; NULL means one group. WPK_ERR_INVALID_ARG for bad sizes, WPK_ERR_INTERNAL with
 * XGBoost's message when it fails; on failure the previous training is gone (predict refuses). */
wpk_status tune_cost_model_fit(tune_cost_model *m, const float *x, int n, int dim,
                               const float *score, const unsigned *group_sizes, int ngroups);
/* Predicted scores (higher = faster; comparable with each other, not with the training scores
 * when ranking) of n rows of the dim used in fit, into out[n]. WPK_ERR_INVALID_ARG before a
 * successful fit or for another dim. */
wpk_status tune_cost_model_predict(tune_cost_model *m, const float *x, int n, int dim, float *out);

#endif
