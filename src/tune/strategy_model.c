/* strategy_model.c -- cost-model-guided search: a model of speed from config features (features of
 * the lowered loop IR, supplied by the tuner), retrained on every batch of measurements, ranks a
 * few thousand candidate configs -- every neighbour of the best, mutations of the best few,
 * random ones -- and the top few unmeasured are proposed, with an epsilon share of random
 * configs so a wrong model cannot hide a region for ever. Cold start: with records of other
 * workloads (params.prior_*) their fastest configs are proposed first and the model trained on
 * all of them ranks the rest of the first batch; without, the first batch is mutants of
 * params.start when given, else random. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "tune/cost_model.h"
#include "tune/strategy_impl.h"

#define CANDIDATES 2048
#define PARENTS 8          /* mutations start from the best this many measured configs */
#define EPSILON 0.1        /* share of each batch proposed at random */
#define MAX_FEATURES 256
/* ranking beat squared error on log-seconds ~2x in trials to within 5% (synthetic conv) */
#define OBJECTIVE TUNE_COST_RANK

typedef struct ranked {
    float score;
    uint32_t tie; /* a seeded random key: equal scores in random order, not the candidates' */
    int idx;
} ranked;

typedef struct model_state {
    tune_cost_model *cm;
    int dim;             /* features per row; 0 until the first row is seen */
    float *x;            /* measured rows: features ... */
    double *seconds;     /* ... and seconds, or -1 for a failure */
    int nrows, cap;
    int fit_rows;        /* nrows when last trained (-1: never) */
    bool fitted;         /* that training succeeded */
    tune_config *cand;   /* scratch, CANDIDATES each */
    float *cx, *score;
    ranked *order;
    tune_cfg_set cand_set;
    /* Hashes of the measured rows' features: a candidate whose features equal a measured
       config's (other knobs, the same code as the features see it) would teach nothing */
    uint64_t *row_hash;
    int nhash, hash_cap;
} model_state;

static uint64_t row_hash(const float *row, int dim) {
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *p = (const unsigned char *)row;
    for (size_t i = 0; i < (size_t)dim * sizeof *row; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static bool hash_in(const uint64_t *h, int n, uint64_t v) {
    for (int i = 0; i < n; i++)
        if (h[i] == v) return true;
    return false;
}

static wpk_status oom(tune_strategy *s) {
    return wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy 'model': out of memory");
}

static wpk_status model_init(tune_strategy *s) {
    model_state *m = wpk_calloc(1, sizeof *m);
    if (!m) return oom(s);
    s->impl = m;
    m->fit_rows = -1;
    m->cm = tune_cost_model_create(s->ctx, OBJECTIVE, s->params.seed);
    m->cand = wpk_malloc(CANDIDATES * sizeof *m->cand);
    m->score = wpk_malloc(CANDIDATES * sizeof *m->score);
    m->order = wpk_malloc(CANDIDATES * sizeof *m->order);
    if (!m->cm || !m->cand || !m->score || !m->order) {
        s->ops->free(s);
        return oom(s);
    }
    const tune_strategy_params *p = &s->params;
    if (p->prior_count > 0 && p->prior_dim > 0 && p->prior_features && p->prior_seconds)
        m->dim = p->prior_dim < MAX_FEATURES ? p->prior_dim : MAX_FEATURES;
    return WPK_OK;
}

/* Features of c into row[dim] (missing ones NAN); false when c cannot be lowered. The first
 * config featurized fixes dim, unless the prior records did. */
static bool featurize(tune_strategy *s, model_state *m, const tune_config *c, float *row) {
    float buf[MAX_FEATURES];
    int got;
    if (s->params.featurize) {
        got = s->params.featurize(s->params.featurize_user, c, buf, MAX_FEATURES);
        if (got < 0) return false;
        if (got > MAX_FEATURES) got = MAX_FEATURES;
    } else {
        /* no featurizer: the knob values themselves (trees only need their order) */
        got = s->space->nknobs;
        for (int k = 0; k < got; k++) buf[k] = (float)s->space->knobs[k].values[c->choice[k]];
    }
    if (!m->dim) m->dim = got > 0 ? got : 1;
    if (!row) return true;
    for (int i = 0; i < m->dim; i++) row[i] = i < got ? buf[i] : NAN;
    return true;
}

static bool ensure_scratch(model_state *m) {
    if (m->cx) return true;
    m->cx = wpk_malloc((size_t)CANDIDATES * (size_t)m->dim * sizeof *m->cx);
    return m->cx != NULL;
}

static void model_tell(tune_strategy *s, const tune_config *c, const tune_result *r, int n) {
    model_state *m = s->impl;
    for (int i = 0; i < n; i++) {
        if (!m->dim && !featurize(s, m, &c[i], NULL)) continue;
        if (m->nrows == m->cap) {
            int cap = m->cap ? m->cap * 2 : 256;
            float *x = wpk_realloc(m->x, (size_t)cap * (size_t)m->dim * sizeof *x);
            if (x) m->x = x;
            double *sec = x ? wpk_realloc(m->seconds, (size_t)cap * sizeof *sec) : NULL;
            if (!sec) {
                wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy 'model': out of memory (a "
                          "result is left out of the training)");
                return;
            }
            m->seconds = sec;
            m->cap = cap;
        }
        if (!featurize(s, m, &c[i], &m->x[(size_t)m->nrows * (size_t)m->dim])) continue;
        if (s->params.featurize && m->nhash == m->hash_cap) {
            int cap = m->hash_cap ? 2 * m->hash_cap : 256;
            uint64_t *h = wpk_realloc(m->row_hash, (size_t)cap * sizeof *h);
            if (h) m->row_hash = h, m->hash_cap = cap;
        }
        if (s->params.featurize && m->nhash < m->hash_cap)
            m->row_hash[m->nhash++] = row_hash(&m->x[(size_t)m->nrows * (size_t)m->dim], m->dim);
        m->seconds[m->nrows++] = r[i].status == TUNE_OK && r[i].seconds > 0 ? r[i].seconds : -1;
    }
}

/* Scores (higher = faster) for rows of one group: -log seconds, and a failure one unit below
 * the slowest success of its group, so the model learns to steer clear of failing regions.
 * False when the group has nothing to rank: one row (the default config alone, in the tuner),
 * or no success. A model trained on that predicts one score for every candidate. */
static bool group_scores(const double *seconds, int n, float *out) {
    if (n < 2) return false;
    double worst = -INFINITY;
    for (int i = 0; i < n; i++)
        if (seconds[i] > 0 && isfinite(seconds[i])) {
            out[i] = (float)-log(seconds[i]);
            if (-out[i] > worst) worst = -out[i];
        }
    if (worst == -INFINITY) return false;
    for (int i = 0; i < n; i++)
        if (!(seconds[i] > 0 && isfinite(seconds[i]))) out[i] = (float)(-worst - 1.0);
    return true;
}

/* Train on the prior records (group 0) and this task's rows (group 1). False when there is
 * nothing to learn from or the model failed (then the batch is random). */
static bool fit(tune_strategy *s, model_state *m) {
    const tune_strategy_params *p = &s->params;
    int np = p->prior_count > 0 && p->prior_dim > 0 && p->prior_features && p->prior_seconds
                 ? p->prior_count : 0;
    int n = np + m->nrows;
    if (!n || !m->dim) return false;
    float *x = wpk_malloc((size_t)n * (size_t)m->dim * sizeof *x);
    float *score = wpk_malloc((size_t)n * sizeof *score);
    double *psec = np ? wpk_malloc((size_t)np * sizeof *psec) : NULL;
    bool ok = x && score && (psec || !np);
    unsigned groups[2];
    int ngroups = 0, rows = 0;
    if (ok && np) {
        for (int i = 0; i < np; i++) {
            psec[i] = p->prior_seconds[i];
            for (int j = 0; j < m->dim; j++)
                x[(size_t)i * m->dim + j] =
                    j < p->prior_dim ? p->prior_features[(size_t)i * p->prior_dim + j] : NAN;
        }
        if (group_scores(psec, np, score)) groups[ngroups++] = (unsigned)np, rows = np;
    }
    if (ok && m->nrows) {
        memcpy(&x[(size_t)rows * m->dim], m->x, (size_t)m->nrows * m->dim * sizeof *x);
        if (group_scores(m->seconds, m->nrows, &score[rows]))
            groups[ngroups++] = (unsigned)m->nrows, rows += m->nrows;
    }
    if (!ok) oom(s);
    bool fitted = ok && ngroups &&
                  tune_cost_model_fit(m->cm, x, rows, m->dim, score, groups, ngroups) == WPK_OK;
    if (ok && ngroups && !fitted)
        wpk_log(s->ctx, WPK_LOG_WARN, "tune strategy 'model': %s; proposing at random",
                wpk_context_error(s->ctx));
    wpk_free(x);
    wpk_free(score);
    wpk_free(psec);
    return fitted;
}

/* Add c to the candidates if it is fresh, new and can be featurized. */
static void add_candidate(tune_strategy *s, model_state *m, int *nc, const tune_config *c) {
    if (*nc >= CANDIDATES || !tune_strategy_fresh(s, c)) return;
    tune_cfg_key key = tune_cfg_key_of(s->space, c);
    if (tune_cfg_set_find(&m->cand_set, key)) return;
    if (!featurize(s, m, c, &m->cx[(size_t)*nc * m->dim])) return;
    if (m->nhash && hash_in(m->row_hash, m->nhash, row_hash(&m->cx[(size_t)*nc * m->dim], m->dim)))
        return;
    if (tune_cfg_set_put(&m->cand_set, key, *nc) != WPK_OK) return;
    m->cand[(*nc)++] = *c;
}

/* The best `want` measured successes (indices into s->trials), fastest first. */
static int best_trials(const tune_strategy *s, int *idx, int want) {
    int n = 0;
    for (int i = 0; i < s->ntrials; i++) {
        if (s->trials[i].result.status != TUNE_OK) continue;
        int j = n < want ? n++ : want;
        if (j == want &&
            !tune_result_better(&s->trials[i].result, &s->trials[idx[want - 1]].result))
            continue;
        if (j == want) j = want - 1;
        while (j > 0 && tune_result_better(&s->trials[i].result, &s->trials[idx[j - 1]].result)) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
    return n;
}

static int gather(tune_strategy *s, model_state *m) {
    tune_cfg_set_clear(&m->cand_set);
    int nc = 0;
    tune_config c;
    memset(&c, 0, sizeof c);
    if (s->size <= CANDIDATES) {
        /* a small space: rank all of what is left */
        for (int64_t i = 0; i < s->size; i++) {
            tune_config_from_index(s->space, i, &c);
            add_candidate(s, m, &nc, &c);
        }
        return nc;
    }
    int parents[PARENTS], np = best_trials(s, parents, PARENTS);
    if (np) {
        /* every neighbour of the best, one knob changed */
        const tune_config *best = &s->trials[parents[0]].config;
        for (int i = 0; i < s->nmutable; i++) {
            int k = s->mutable_knob[i];
            for (int v = 0; v < s->space->knobs[k].nvalues; v++) {
                c = *best;
                c.choice[k] = v;
                add_candidate(s, m, &nc, &c);
            }
        }
        /* mutations of the best few, up to half the candidates */
        for (int t = 0; t < CANDIDATES && nc < CANDIDATES / 2; t++) {
            c = s->trials[parents[tune_rng_below(&s->rng, np)]].config;
            int steps = 1 + (int)tune_rng_below(&s->rng, 3);
            for (int j = 0; j < steps; j++) tune_strategy_mutate(s, &c, 0.5);
            add_candidate(s, m, &nc, &c);
        }
    }
    for (int t = 0; t < 2 * CANDIDATES && nc < CANDIDATES; t++) {
        tune_config_random(s->space, &s->rng, &c);
        add_candidate(s, m, &nc, &c);
    }
    return nc;
}

static int by_score(const void *pa, const void *pb) {
    const ranked *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    /* ties in a seeded random order: the candidates come in order (every neighbour of the
     * best, knob by knob), and a weak model's ties would otherwise sweep the first knob */
    if (a->tie != b->tie) return a->tie < b->tie ? -1 : 1;
    return a->idx - b->idx;
}

static int model_propose(tune_strategy *s, tune_config *out, int max) {
    model_state *m = s->impl;
    if (m->nrows != m->fit_rows) {
        m->fitted = fit(s, m); /* every new batch of results retrains */
        m->fit_rows = m->nrows;
    }
    int n = 0, nc = 0;
    /* other workloads' fastest configs before anything else (once: then they are taken) */
    for (int i = 0; i < s->params.prior_config_count && n < max; i++) {
        tune_config c = s->params.prior_configs[i];
        int t = tune_strategy_take(s, &c);
        if (t < 0) return n;
        if (t > 0) out[n++] = c;
    }
    if (m->fitted) {
        if (!ensure_scratch(m)) oom(s);
        else nc = gather(s, m);
        if (nc && tune_cost_model_predict(m->cm, m->cx, nc, m->dim, m->score) != WPK_OK) nc = 0;
    }
    for (int i = 0; i < nc; i++)
        m->order[i] = (ranked){m->score[i], (uint32_t)tune_rng_next(&s->rng), i};
    if (nc > 1) qsort(m->order, (size_t)nc, sizeof *m->order, by_score);
    int next = 0;
    uint64_t taken[TUNE_MAX_KNOBS * TUNE_MAX_VALUES];
    int ntaken = 0;
    while (n < max) {
        tune_config c;
        /* exploit the ranking, except for an epsilon share (and when it runs dry) */
        bool explore = next >= nc || tune_rng_unit(&s->rng) < EPSILON;
        if (explore) {
            /* untrained (no records yet, no prior ones): near the start while there are such */
            bool near = !m->fitted && tune_strategy_near_start(s, &c);
            if (!near && !tune_strategy_random_fresh(s, &c)) {
                if (next >= nc) break; /* exhausted */
                explore = false;
            }
        }
        if (!explore) {
            int idx = m->order[next++].idx;
            /* one config per distinct feature row in a batch: the rest score the same */
            uint64_t h = s->params.featurize ? row_hash(&m->cx[(size_t)idx * m->dim], m->dim) : 0;
            if (s->params.featurize && hash_in(taken, ntaken, h)) continue;
            if (s->params.featurize && ntaken < (int)(sizeof taken / sizeof taken[0]))
                taken[ntaken++] = h;
            c = m->cand[idx];
        }
        int t = tune_strategy_take(s, &c);
        if (t < 0) break;
        if (t > 0) out[n++] = c;
    }
    return n;
}

static void model_free(tune_strategy *s) {
    model_state *m = s->impl;
    tune_cost_model_free(m->cm);
    wpk_free(m->x);
    wpk_free(m->seconds);
    wpk_free(m->cand);
    wpk_free(m->cx);
    wpk_free(m->score);
    wpk_free(m->order);
    tune_cfg_set_free(&m->cand_set);
    wpk_free(m->row_hash);
    wpk_free(m);
}

const tune_strategy_ops tune_model_ops = {"model", model_init, model_propose, model_tell,
                                          model_free};
