/* strategy_rl.c -- reinforcement learning (Woodpecker-DL's RL search): a stochastic policy that
 * moves from a good config (the anchor: one of the fastest so far, else the start) by changing
 * one or two knobs. Which knobs move and to which values is the policy's choice: each value of
 * each knob has a logit linear in a state -- the workload's features (the start config's
 * loop-IR features) and the anchor's config -- with weights shared by every workload of the
 * same space and kept between runs (rl_policy.h). A knob is moved with probability ~ exp of
 * its move score (how much the policy prefers its other values to the anchor's), and goes to
 * a value with probability ~ exp(logit), the adjacent values favoured while the policy is
 * flat. A fresh policy thus moves a uniformly chosen knob, mostly to a neighbouring value;
 * a trained one moves the knobs it has learnt to change, to the values it has learnt.
 * Trained by REINFORCE (the exact gradient of the sample's log-probability) on measured speed.
 *
 * Reward: log(anchor's seconds / seconds) -- scale-free, positive for an improvement over the
 * config the sample moved from; a failure scores one unit below the slowest success. Advantage:
 * the reward minus a moving baseline, over a moving spread. The other workloads' fastest
 * configs (prior_configs) are proposed first. Configs already measured are never proposed: a
 * sample that was seen is redrawn, moving more knobs as redraws fail, then replaced by a
 * random fresh config. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "tune/rl_policy.h"
#include "tune/strategy_impl.h"

#define LEARNING_RATE 0.02 /* per sample, on the normalized advantage (0.05 destabilized it) */
#define WEIGHT_LIMIT 8.0   /* |w| stays under this */
#define LOGIT_LIMIT 2.0    /* the learnt logits stay within +-this: no choice becomes impossible */
#define BASELINE_DECAY 0.1 /* weight of a new reward in the moving baseline and spread */
#define ADVANTAGE_CLIP 3.0
#define SAMPLE_TRIES 48
#define TRIES_PER_MOVE 12  /* redraws of seen configs after which a sample moves one more knob */
#define P_ADJACENT 0.6     /* a flat policy's share of the adjacent values in a knob's move */
#define P_SECOND 0.3       /* a sample moves a second knob */
#define MAX_MOVES 4
#define CTX0 (1 + TUNE_RL_WORKLOAD)
#define TOP_ANCHORS 4
/* Told results without a new best after which a sample moves one more knob: within a budget
 * of 80 trials a plateau of 16 already takes two- and three-knob moves */
#define STALL_STEP 16

typedef struct sampled {
    tune_config c, anchor;
    int moved[MAX_MOVES]; /* the knobs moved, in the order drawn */
    int nmoved;
    double anchor_s;      /* the anchor's seconds when sampled (0: unknown) */
} sampled;

/* One knob's choice at an anchor: the learnt logits, the probabilities of its values when it
 * moves (0 for the anchor's), and its move score. */
typedef struct knob_choice {
    double x[TUNE_RL_INPUTS];   /* the state */
    double z[TUNE_MAX_VALUES];  /* learnt logits, squashed to +-LOGIT_LIMIT */
    double dz[TUNE_MAX_VALUES]; /* the squashing's slope at each */
    double q[TUNE_MAX_VALUES];
    double score;
} knob_choice;

typedef struct rl_state {
    tune_rl_policy *policy; /* borrowed from params, or own */
    bool own_policy;
    uint64_t space_key;
    float workload[TUNE_RL_WORKLOAD];
    double baseline, spread; /* moving mean and mean square deviation of the advantage */
    bool have_baseline;
    double worst;            /* slowest successful seconds told */
    int next_prior;          /* prior_configs proposed so far */
    int stall;               /* results told since the best last improved */
    int last_best;
    sampled *pend;           /* proposed by the policy, not told */
    int npend, pend_cap;
} rl_state;

static uint64_t space_key(const tune_space *s) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)s->nknobs;
    for (int k = 0; k < s->nknobs; k++) {
        for (const char *c = s->knobs[k].name; c && *c; c++)
            h = (h ^ (unsigned char)*c) * 1099511628211ull;
        h = (h ^ ',') * 1099511628211ull;
    }
    return h;
}

static wpk_status rl_init(tune_strategy *s) {
    rl_state *r = wpk_calloc(1, sizeof *r);
    if (!r) return wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy 'rl': out of memory");
    r->policy = s->params.rl_policy;
    if (!r->policy) {
        r->policy = tune_rl_policy_create(s->ctx);
        r->own_policy = true;
        if (!r->policy) {
            wpk_free(r);
            return wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy 'rl': out of memory");
        }
    }
    r->space_key = space_key(s->space);
    /* the workload as its start config lowers: log-scaled loop features, squashed to about
       [-2, 2] so that no one feature dominates the state */
    if (s->params.featurize && s->params.has_start) {
        float f[256];
        int n = s->params.featurize(s->params.featurize_user, &s->params.start, f, 256);
        for (int i = 0; i < n && i < TUNE_RL_WORKLOAD; i++)
            r->workload[i] = isfinite(f[i]) ? (float)tanh(f[i] / 8.0) * 2.0f : 0.0f;
    }
    r->last_best = -1;
    s->impl = r;
    return WPK_OK;
}

/* The config the policy moves from: one of the TOP_ANCHORS fastest so far, the fastest most
 * often (probability ~ 1 / rank), so that a sample's neighbourhood is not always the same
 * basin's; else the start. */
static bool anchor_of(tune_strategy *s, tune_config *a, double *seconds) {
    int top[TOP_ANCHORS], ntop = 0;
    for (int i = 0; i < s->ntrials; i++) {
        const tune_result *ri = &s->trials[i].result;
        if (ri->status != TUNE_OK || !(ri->seconds > 0)) continue;
        int at = ntop < TOP_ANCHORS ? ntop++ : TOP_ANCHORS;
        while (at > 0 && tune_result_better(ri, &s->trials[top[at - 1]].result)) {
            if (at < TOP_ANCHORS) top[at] = top[at - 1];
            at--;
        }
        if (at < TOP_ANCHORS) top[at] = i;
    }
    *seconds = 0;
    if (ntop == 0) {
        if (!s->params.has_start) return false;
        *a = s->params.start;
        return true;
    }
    double z = 0, u;
    for (int i = 0; i < ntop; i++) z += 1.0 / (i + 1);
    u = tune_rng_unit(&s->rng) * z;
    int pick = 0;
    while (pick < ntop - 1 && (u -= 1.0 / (pick + 1)) >= 0) pick++;
    *a = s->trials[top[pick]].config;
    *seconds = s->trials[top[pick]].result.seconds;
    return true;
}

/* Knob k's choice at `anchor`: the state is a bias, the workload, and the anchor's other
 * knobs (each choice normalized to [-0.5, 0.5]). */
static void choice_at(const tune_strategy *s, const rl_state *r, const tune_config *anchor,
                      int k, knob_choice *d) {
    double *x = d->x;
    memset(x, 0, sizeof(double) * TUNE_RL_INPUTS);
    x[0] = 1;
    for (int i = 0; i < TUNE_RL_WORKLOAD; i++) x[1 + i] = r->workload[i];
    for (int j = 0; j < s->space->nknobs && CTX0 + j < TUNE_RL_INPUTS; j++) {
        int n = s->space->knobs[j].nvalues;
        if (j != k && n > 1) x[CTX0 + j] = (double)anchor->choice[j] / (n - 1) - 0.5;
    }
    const tune_knob *knob = &s->space->knobs[k];
    const int n = knob->nvalues, a = anchor->choice[k];
    int nadj = 0;
    for (int v = 0; v < n; v++) nadj += abs(v - a) == 1;
    const int nfar = n - 1 - nadj;
    double sum = 0;
    for (int v = 0; v < n; v++) {
        const double *w = tune_rl_policy_find(r->policy, r->space_key, knob->name,
                                              knob->values[v]);
        double u = 0;
        for (int i = 0; w && i < TUNE_RL_INPUTS; i++) u += w[i] * x[i];
        /* a preference, never a certainty */
        const double th = tanh(u / LOGIT_LIMIT);
        d->z[v] = LOGIT_LIMIT * th;
        d->dz[v] = 1 - th * th;
        /* the flat policy's move: the adjacent values P_ADJACENT, the others the rest */
        double base = abs(v - a) == 1 ? (nfar ? P_ADJACENT : 1.0) / nadj
                                      : (nadj ? 1 - P_ADJACENT : 1.0) / (nfar ? nfar : 1);
        d->q[v] = v == a ? 0 : base * exp(d->z[v]);
        sum += d->q[v];
    }
    for (int v = 0; v < n; v++) d->q[v] /= sum;
    /* log E_base[exp z] - z(anchor): 0 for a flat policy, so every knob is as likely to move */
    d->score = log(sum) - d->z[a];
}

/* The choices of every mutable knob at `anchor`. */
static void choices_at(const tune_strategy *s, const rl_state *r, const tune_config *anchor,
                       knob_choice *d) {
    for (int m = 0; m < s->nmutable; m++) choice_at(s, r, anchor, s->mutable_knob[m], &d[m]);
}

/* Probabilities of moving each mutable knob still available (avail[m]): ~ exp(score). */
static void move_probs(const tune_strategy *s, const knob_choice *d, const bool *avail,
                       double *p) {
    double mx = -INFINITY, sum = 0;
    for (int m = 0; m < s->nmutable; m++)
        if (avail[m] && d[m].score > mx) mx = d[m].score;
    for (int m = 0; m < s->nmutable; m++) sum += p[m] = avail[m] ? exp(d[m].score - mx) : 0;
    for (int m = 0; m < s->nmutable; m++) p[m] /= sum;
}

static int draw(tune_strategy *s, const double *p, int n) {
    double u = tune_rng_unit(&s->rng);
    int i = 0;
    while (i < n - 1 && (u -= p[i]) >= 0) i++;
    while (i > 0 && p[i] == 0) i--; /* rounding past the last nonzero */
    return i;
}

/* A sample `moves` knobs away from e->anchor into e->c (d: the choices at the anchor). */
static void sample(tune_strategy *s, const knob_choice *d, int moves, sampled *e) {
    bool avail[TUNE_MAX_KNOBS];
    double p[TUNE_MAX_KNOBS];
    for (int m = 0; m < s->nmutable; m++) avail[m] = true;
    if (moves > s->nmutable) moves = s->nmutable;
    if (moves > MAX_MOVES) moves = MAX_MOVES;
    e->c = e->anchor;
    e->nmoved = 0;
    for (int i = 0; i < moves; i++) {
        move_probs(s, d, avail, p);
        const int m = draw(s, p, s->nmutable), k = s->mutable_knob[m];
        e->c.choice[k] = draw(s, d[m].q, s->space->knobs[k].nvalues);
        e->moved[e->nmoved++] = m;
        avail[m] = false;
    }
}

static bool remember(tune_strategy *s, rl_state *r, const sampled *e) {
    if (r->npend == r->pend_cap) {
        int cap = r->pend_cap ? 2 * r->pend_cap : 64;
        sampled *p = wpk_realloc(r->pend, sizeof *p * (size_t)cap);
        if (!p) {
            wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy 'rl': out of memory");
            return false;
        }
        r->pend = p;
        r->pend_cap = cap;
    }
    r->pend[r->npend++] = *e;
    return true;
}

static int rl_propose(tune_strategy *s, tune_config *out, int max) {
    rl_state *r = s->impl;
    int n = 0;
    while (n < max && r->next_prior < s->params.prior_config_count) {
        const tune_config *c = &s->params.prior_configs[r->next_prior++];
        int t = tune_strategy_take(s, c);
        if (t < 0) return n;
        if (t > 0) out[n++] = *c;
    }
    knob_choice d[TUNE_MAX_KNOBS];
    while (n < max) {
        sampled e;
        bool found = false;
        if (s->nmutable > 0 && anchor_of(s, &e.anchor, &e.anchor_s)) {
            choices_at(s, r, &e.anchor, d);
            /* one knob, sometimes two; more as the search stalls and as redraws hit
               measured configs */
            const int moves = 1 + (tune_rng_unit(&s->rng) < P_SECOND) + r->stall / STALL_STEP;
            for (int t = 0; t < SAMPLE_TRIES && !found; t++) {
                sample(s, d, moves + t / TRIES_PER_MOVE, &e);
                found = tune_strategy_fresh(s, &e.c);
            }
        }
        /* nothing to move from, or the policy keeps drawing measured configs: any fresh
           config (not the policy's choice: nothing to learn from it) */
        const bool drawn = found;
        if (!found && !tune_strategy_random_fresh(s, &e.c)) break; /* exhausted */
        if (tune_strategy_take(s, &e.c) <= 0) break;
        out[n++] = e.c;
        if (drawn && !remember(s, r, &e)) break;
    }
    return n;
}

/* REINFORCE on one sample: every logit moves along adv x d log P(sample) / d logit, through
 * the squashing, onto the weights of its state. P(sample) is the product over its moves of
 * P(knob | the knobs still available) x q(value | knob). */
static void learn(tune_strategy *s, rl_state *r, const sampled *e, double adv) {
    knob_choice d[TUNE_MAX_KNOBS];
    double g[TUNE_MAX_KNOBS][TUNE_MAX_VALUES] = {{0}}, p[TUNE_MAX_KNOBS];
    bool avail[TUNE_MAX_KNOBS];
    choices_at(s, r, &e->anchor, d);
    for (int m = 0; m < s->nmutable; m++) avail[m] = true;
    for (int i = 0; i < e->nmoved; i++) {
        move_probs(s, d, avail, p);
        const int km = e->moved[i];
        for (int m = 0; m < s->nmutable; m++) {
            if (!avail[m]) continue;
            /* d log P(knob) / d score(m), and d score / d z: q for the others, -1 for the
               anchor's value */
            const double coef = (m == km) - p[m];
            const int a = e->anchor.choice[s->mutable_knob[m]];
            for (int v = 0; v < s->space->knobs[s->mutable_knob[m]].nvalues; v++)
                g[m][v] += coef * (v == a ? -1.0 : d[m].q[v]);
        }
        const int k = s->mutable_knob[km], a = e->anchor.choice[k];
        for (int v = 0; v < s->space->knobs[k].nvalues; v++)
            if (v != a) g[km][v] += (v == e->c.choice[k]) - d[km].q[v];
        avail[km] = false;
    }
    for (int m = 0; m < s->nmutable; m++) {
        const tune_knob *knob = &s->space->knobs[s->mutable_knob[m]];
        for (int v = 0; v < knob->nvalues; v++) {
            const double step = LEARNING_RATE * adv * g[m][v] * d[m].dz[v];
            if (fabs(step) < 1e-12) continue;
            double *w = tune_rl_policy_weights(r->policy, r->space_key, knob->name,
                                               knob->values[v]);
            for (int i = 0; w && i < TUNE_RL_INPUTS; i++) {
                w[i] += step * d[m].x[i];
                if (w[i] > WEIGHT_LIMIT) w[i] = WEIGHT_LIMIT;
                if (w[i] < -WEIGHT_LIMIT) w[i] = -WEIGHT_LIMIT;
            }
        }
    }
    tune_rl_policy_count_update(r->policy);
}

static void rl_tell(tune_strategy *s, const tune_config *c, const tune_result *res, int n) {
    rl_state *r = s->impl;
    for (int i = 0; i < n; i++)
        if (res[i].status == TUNE_OK && res[i].seconds > r->worst) r->worst = res[i].seconds;
    r->stall = s->best != r->last_best ? 0 : r->stall + n;
    r->last_best = s->best;
    tune_result best;
    if (!tune_strategy_best(s, NULL, &best) || !(best.seconds > 0)) return; /* no scale yet */
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < r->npend && !tune_config_equal(s->space, &r->pend[j].c, &c[i])) j++;
        if (j == r->npend) continue; /* not the policy's sample (a record, a prior config) */
        sampled e = r->pend[j];
        r->pend[j] = r->pend[--r->npend];
        double ref = e.anchor_s > 0 ? e.anchor_s : best.seconds;
        double reward = res[i].status == TUNE_OK && res[i].seconds > 0
                            ? log(ref / res[i].seconds)
                            : log(ref / r->worst) - 1.0;
        if (!r->have_baseline) {
            r->baseline = reward;
            r->spread = 1e-2;
            r->have_baseline = true;
        }
        double d = reward - r->baseline;
        double adv = d / sqrt(r->spread + 1e-6);
        if (adv > ADVANTAGE_CLIP) adv = ADVANTAGE_CLIP;
        if (adv < -ADVANTAGE_CLIP) adv = -ADVANTAGE_CLIP;
        r->baseline += BASELINE_DECAY * d;
        r->spread += BASELINE_DECAY * (d * d - r->spread);
        learn(s, r, &e, adv);
    }
}

static void rl_free(tune_strategy *s) {
    rl_state *r = s->impl;
    if (r->own_policy) tune_rl_policy_free(r->policy);
    wpk_free(r->pend);
    wpk_free(r);
}

const tune_strategy_ops tune_rl_ops = {"rl", rl_init, rl_propose, rl_tell, rl_free};
