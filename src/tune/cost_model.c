/* cost_model.c -- the tuner's cost model over XGBoost's C API: a booster trained from scratch on
 * every fit (the data is small; retraining avoids trees fitted to an older scale), one thread
 * (the measurer owns the cores, and one thread keeps the result deterministic). */
#include "tune/cost_model.h"

#include <math.h>
#include <stdio.h>
#include <xgboost/c_api.h>

#include "base/alloc.h"
#include "base/context.h"

#define ROUNDS 60

struct tune_cost_model {
    wpk_context *ctx; /* borrowed */
    tune_cost_objective objective;
    uint64_t seed;
    BoosterHandle booster; /* NULL until a fit succeeded */
    int dim;
};

tune_cost_model *tune_cost_model_create(wpk_context *ctx, tune_cost_objective objective,
                                        uint64_t seed) {
    tune_cost_model *m = wpk_calloc(1, sizeof *m);
    if (!m) {
        wpk_error(ctx, WPK_ERR_NOMEM, "cost model: out of memory");
        return NULL;
    }
    m->ctx = ctx;
    m->objective = objective;
    m->seed = seed;
    return m;
}

static void drop_booster(tune_cost_model *m) {
    if (m->booster) XGBoosterFree(m->booster);
    m->booster = NULL;
    m->dim = 0;
}

void tune_cost_model_free(tune_cost_model *m) {
    if (!m) return;
    drop_booster(m);
    wpk_free(m);
}

static wpk_status xgb_failed(tune_cost_model *m, const char *what) {
    return wpk_error(m->ctx, WPK_ERR_INTERNAL, "cost model: XGBoost %s failed: %s", what,
                     XGBGetLastError());
}

static wpk_status train(tune_cost_model *m, DMatrixHandle data) {
    char seed[32];
    snprintf(seed, sizeof seed, "%u", (unsigned)(m->seed & 0x7fffffff));
    const char *params[][2] = {
        {"objective", m->objective == TUNE_COST_RANK ? "rank:pairwise" : "reg:squarederror"},
        {"nthread", "1"},
        {"verbosity", "0"},
        {"seed", seed},
        {"eta", "0.3"},
        {"max_depth", "8"},
        {"min_child_weight", "0"}, /* pairwise hessians are small; do not block every split */
        {"gamma", "0.0001"},
        {"tree_method", "exact"},
    };
    if (XGBoosterCreate(&data, 1, &m->booster)) return xgb_failed(m, "booster create");
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++)
        if (XGBoosterSetParam(m->booster, params[i][0], params[i][1]))
            return xgb_failed(m, "parameter");
    for (int it = 0; it < ROUNDS; it++)
        if (XGBoosterUpdateOneIter(m->booster, it, data)) return xgb_failed(m, "training");
    return WPK_OK;
}

wpk_status tune_cost_model_fit(tune_cost_model *m, const float *x, int n, int dim,
                               const float *score, const unsigned *group_sizes, int ngroups) {
    drop_booster(m);
    unsigned one = (unsigned)n;
    if (!group_sizes) group_sizes = &one, ngroups = 1;
    long total = 0;
    for (int g = 0; g < ngroups; g++) total += group_sizes[g];
    if (n <= 0 || dim <= 0 || ngroups <= 0 || total != n)
        return wpk_error(m->ctx, WPK_ERR_INVALID_ARG, "cost model: %d rows of %d features in "
                         "groups summing to %ld", n, dim, total);
    float *label = wpk_malloc((size_t)n * sizeof *label);
    if (!label) return wpk_error(m->ctx, WPK_ERR_NOMEM, "cost model: out of memory");
    for (int g = 0, r = 0; g < ngroups; r += (int)group_sizes[g], g++) {
        /* regression learns the score relative to its group: workloads differ in scale */
        double mean = 0;
        for (unsigned i = 0; i < group_sizes[g]; i++) mean += score[r + (int)i];
        mean = m->objective == TUNE_COST_REGRESSION && group_sizes[g] ? mean / group_sizes[g] : 0;
        for (unsigned i = 0; i < group_sizes[g]; i++)
            label[r + (int)i] = (float)(score[r + (int)i] - mean);
    }
    DMatrixHandle data;
    wpk_status st = WPK_OK;
    if (XGDMatrixCreateFromMat(x, (bst_ulong)n, (bst_ulong)dim, NAN, &data)) {
        wpk_free(label);
        return xgb_failed(m, "matrix");
    }
    if (XGDMatrixSetFloatInfo(data, "label", label, (bst_ulong)n)) st = xgb_failed(m, "labels");
    else if (m->objective == TUNE_COST_RANK &&
             XGDMatrixSetUIntInfo(data, "group", group_sizes, (bst_ulong)ngroups))
        st = xgb_failed(m, "groups");
    else st = train(m, data);
    XGDMatrixFree(data);
    wpk_free(label);
    if (st != WPK_OK) drop_booster(m);
    else m->dim = dim;
    return st;
}

wpk_status tune_cost_model_predict(tune_cost_model *m, const float *x, int n, int dim, float *out) {
    if (!m->booster || dim != m->dim)
        return wpk_error(m->ctx, WPK_ERR_INVALID_ARG, "cost model: predict on %d features, "
                         "trained on %d", dim, m->dim);
    if (n <= 0) return WPK_OK;
    DMatrixHandle data;
    if (XGDMatrixCreateFromMat(x, (bst_ulong)n, (bst_ulong)dim, NAN, &data))
        return xgb_failed(m, "matrix");
    bst_ulong len = 0;
    const float *pred = NULL;
    wpk_status st = WPK_OK;
    if (XGBoosterPredict(m->booster, data, 0, 0, 0, &len, &pred)) st = xgb_failed(m, "predict");
    else if (len != (bst_ulong)n)
        st = wpk_error(m->ctx, WPK_ERR_INTERNAL, "cost model: %lu predictions for %d rows",
                       (unsigned long)len, n);
    else
        for (int i = 0; i < n; i++) out[i] = pred[i];
    XGDMatrixFree(data);
    return st;
}
