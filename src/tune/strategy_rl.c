/* strategy_rl.c -- reinforcement learning (Woodpecker-DL's RL search): a stochastic policy that
 * builds a config knob by knob, each choice a softmax over the knob's values whose logits are
 * linear in a state -- the workload's features (the start config's loop-IR features) and the
 * config built so far -- with weights shared by every workload of the same space and kept
 * between runs (rl_policy.h). Trained by REINFORCE on measured speed.
 *
 * Exploration is anchored: each logit also gets a fixed offset that favours the anchor's value
 * (the fastest config so far, else the start) and its neighbours, so that a fresh policy
 * proposes configs about one or two knobs from the anchor and the learnt weights decide which
 * knobs move and where; weights that have learnt a strong preference outvote the offset.
 *
 * Reward: log(anchor's seconds / seconds) -- scale-free, positive for an improvement over the
 * config the sample moved from; a failure scores one unit below the slowest success. Advantage:
 * the reward minus a moving baseline, over a moving spread. The other workloads' fastest
 * configs (prior_configs) are proposed first. Configs already measured are never proposed: a
 * sample that was seen is redrawn, then replaced by a random fresh config. */
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
#define SAMPLE_TRIES 64
#define MOVED_KNOBS 1.5    /* knobs a fresh policy changes from the anchor, on average */
#define NEIGHBOUR_WEIGHT 3 /* an adjacent value over any other, among the changes */
#define CTX0 (1 + TUNE_RL_WORKLOAD)
#define TOP_ANCHORS 4
/* Told results without a new best after which a sample moves one more knob (at most half) */
#define STALL_STEP 64

typedef struct sampled {
    tune_config c, anchor;
    bool has_anchor;
    double anchor_s;       /* the anchor's seconds when sampled (0: unknown) */
} sampled;

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

/* The state for the choice of knob position k, given the choices of knobs 0..k-1 in c. */
static void state_of(const tune_strategy *s, const rl_state *r, const tune_config *c,
                     const tune_config *anchor, int k, double *x) {
    memset(x, 0, sizeof(double) * TUNE_RL_INPUTS);
    x[0] = 1;
    for (int i = 0; i < TUNE_RL_WORKLOAD; i++) x[1 + i] = r->workload[i];
    int moved = 0;
    for (int j = 0; j < k; j++) {
        int n = s->space->knobs[j].nvalues;
        if (n > 1) x[CTX0 + j] = (double)c->choice[j] / (n - 1) - 0.5;
        moved += anchor && c->choice[j] != anchor->choice[j];
    }
    x[TUNE_RL_INPUTS - 1] = s->nmutable ? (double)moved / s->nmutable : 0;
}

/* Probabilities of knob k's values in state x, the anchor's offsets included. */
static void policy(tune_strategy *s, rl_state *r, int k, const double *x,
                   const tune_config *anchor, double *p) {
    const tune_knob *knob = &s->space->knobs[k];
    const int n = knob->nvalues;
    double off[TUNE_MAX_VALUES] = {0};
    if (anchor) {
        /* the anchor's value kept with probability 1 - MOVED_KNOBS / knobs (at least 1/2),
           an adjacent value NEIGHBOUR_WEIGHT times as likely as another among the rest */
        int a = anchor->choice[k];
        double moved = MOVED_KNOBS + (double)r->stall / STALL_STEP;
        double change = moved / (s->nmutable > 0 ? s->nmutable : 1);
        if (change > 0.5) change = 0.5;
        double rest = 0;
        for (int v = 0; v < n; v++)
            if (v != a) rest += abs(v - a) == 1 ? NEIGHBOUR_WEIGHT : 1;
        for (int v = 0; v < n; v++)
            off[v] = v == a ? log((1 - change) / change * rest)
                            : log(abs(v - a) == 1 ? NEIGHBOUR_WEIGHT : 1);
    }
    double mx = -INFINITY, sum = 0;
    for (int v = 0; v < n; v++) {
        const double *w = tune_rl_policy_find(r->policy, r->space_key, knob->name,
                                              knob->values[v]);
        double z = 0;
        for (int i = 0; w && i < TUNE_RL_INPUTS; i++) z += w[i] * x[i];
        /* the learnt part squashed to +-LOGIT_LIMIT: a preference, never a certainty */
        z = off[v] + LOGIT_LIMIT * tanh(z / LOGIT_LIMIT);
        p[v] = z;
        if (z > mx) mx = z;
    }
    for (int v = 0; v < n; v++) sum += p[v] = exp(p[v] - mx);
    for (int v = 0; v < n; v++) p[v] /= sum;
}

static void sample(tune_strategy *s, rl_state *r, const tune_config *anchor, tune_config *c) {
    memset(c, 0, sizeof *c);
    for (int k = 0; k < s->space->nknobs; k++) {
        const tune_knob *knob = &s->space->knobs[k];
        if (knob->nvalues < 2) continue;
        double x[TUNE_RL_INPUTS], p[TUNE_MAX_VALUES], u = tune_rng_unit(&s->rng);
        state_of(s, r, c, anchor, k, x);
        policy(s, r, k, x, anchor, p);
        int v = 0;
        while (v < knob->nvalues - 1 && (u -= p[v]) >= 0) v++;
        c->choice[k] = v;
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
    sampled e;
    e.has_anchor = anchor_of(s, &e.anchor, &e.anchor_s);
    while (n < max) {
        bool found = false;
        for (int t = 0; t < SAMPLE_TRIES && !found; t++) {
            sample(s, r, e.has_anchor ? &e.anchor : NULL, &e.c);
            found = tune_strategy_fresh(s, &e.c);
        }
        /* a policy that keeps drawing measured configs: one step from the anchor, then any
           (not the policy's choice: nothing to learn from it) */
        const bool drawn = found;
        if (!found && e.has_anchor) found = tune_strategy_near(s, &e.anchor, &e.c);
        if (!found && !tune_strategy_random_fresh(s, &e.c)) break; /* exhausted */
        if (tune_strategy_take(s, &e.c) <= 0) break;
        out[n++] = e.c;
        if (drawn && !remember(s, r, &e)) break;
    }
    return n;
}

/* REINFORCE on one sample: w(k, a_k) moves along adv x (1 - pi(a_k)) x state, the others
 * along -adv x pi(v) x state. */
static void learn(tune_strategy *s, rl_state *r, const sampled *e, double adv) {
    const tune_config *anchor = e->has_anchor ? &e->anchor : NULL;
    for (int k = 0; k < s->space->nknobs; k++) {
        const tune_knob *knob = &s->space->knobs[k];
        if (knob->nvalues < 2) continue;
        double x[TUNE_RL_INPUTS], p[TUNE_MAX_VALUES];
        state_of(s, r, &e->c, anchor, k, x);
        policy(s, r, k, x, anchor, p);
        for (int v = 0; v < knob->nvalues; v++) {
            double g = adv * ((v == e->c.choice[k]) - p[v]);
            const double *wf = tune_rl_policy_find(r->policy, r->space_key, knob->name,
                                                   knob->values[v]);
            double z = 0;
            for (int i = 0; wf && i < TUNE_RL_INPUTS; i++) z += wf[i] * x[i];
            double th = tanh(z / LOGIT_LIMIT);
            g *= 1 - th * th; /* through the squashing */
            if (fabs(g) < 1e-9) continue;
            double *w = tune_rl_policy_weights(r->policy, r->space_key, knob->name,
                                               knob->values[v]);
            for (int i = 0; w && i < TUNE_RL_INPUTS; i++) {
                w[i] += LEARNING_RATE * g * x[i];
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
