/* strategy_rl.c -- reinforcement learning (Woodpecker-DL's RL search): a stochastic policy over
 * knob choices, an independent softmax per knob (not autoregressive: knobs are sampled
 * independently, interactions are left to the reward), trained by REINFORCE on measured speed.
 *
 * Reward: log(best_so_far / seconds) -- scale-free (the same for a 10 us and a 10 ms kernel),
 * 0 for the best, negative otherwise; a failure scores one unit below the slowest success.
 * Advantage: the reward minus a moving-average baseline, divided by a moving spread, so the step
 * size does not depend on how spread out the speeds are. An entropy bonus on knobs whose policy
 * has nearly collapsed keeps every choice alive. Configs already measured are
 * never proposed: a sample that was seen is redrawn, then nudged, then replaced by a random one. */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "tune/strategy_impl.h"

#define LEARNING_RATE 0.1  /* per sample, on the normalized advantage */
/* The entropy bonus applies to a knob whose policy entropy fell under ENTROPY_FLOOR of its
 * maximum (log of its value count): a floor against collapse, not a pull towards uniform on
 * knobs still being learnt (a bonus everywhere measurably slowed the search). */
#define ENTROPY_BONUS 0.02
#define ENTROPY_FLOOR 0.2
#define BASELINE_DECAY 0.05 /* weight of a new reward in the moving baseline and spread */
#define ADVANTAGE_CLIP 3.0
#define SAMPLE_TRIES 32

typedef struct rl_state {
    double logit[TUNE_MAX_KNOBS][TUNE_MAX_VALUES];
    double baseline, spread; /* moving mean and mean square deviation of the reward */
    bool have_baseline;
    double worst; /* slowest successful seconds told */
} rl_state;

static wpk_status rl_init(tune_strategy *s) {
    s->impl = wpk_calloc(1, sizeof(rl_state));
    if (!s->impl) return wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy 'rl': out of memory");
    return WPK_OK; /* all logits 0: the uniform policy */
}

static void policy(const rl_state *r, const tune_knob *knob, int k, double *p) {
    double mx = r->logit[k][0], sum = 0;
    for (int v = 1; v < knob->nvalues; v++)
        if (r->logit[k][v] > mx) mx = r->logit[k][v];
    for (int v = 0; v < knob->nvalues; v++) sum += p[v] = exp(r->logit[k][v] - mx);
    for (int v = 0; v < knob->nvalues; v++) p[v] /= sum;
}

static void sample(tune_strategy *s, const rl_state *r, tune_config *c) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < s->nmutable; i++) {
        int k = s->mutable_knob[i];
        const tune_knob *knob = &s->space->knobs[k];
        double p[TUNE_MAX_VALUES], x = tune_rng_unit(&s->rng);
        policy(r, knob, k, p);
        int v = 0;
        while (v < knob->nvalues - 1 && (x -= p[v]) >= 0) v++;
        c->choice[k] = v;
    }
}

static int rl_propose(tune_strategy *s, tune_config *out, int max) {
    rl_state *r = s->impl;
    int n = 0;
    while (n < max) {
        tune_config c;
        bool found = false;
        for (int t = 0; t < SAMPLE_TRIES && !found; t++) {
            sample(s, r, &c);
            found = tune_strategy_fresh(s, &c);
        }
        /* a policy that has settled keeps drawing measured configs: step next to one */
        for (int t = 0; t < SAMPLE_TRIES && !found; t++) {
            tune_strategy_mutate(s, &c, 0.5);
            found = tune_strategy_fresh(s, &c);
        }
        if (!found && !tune_strategy_random_fresh(s, &c)) break; /* exhausted */
        if (tune_strategy_take(s, &c) <= 0) break;
        out[n++] = c;
    }
    return n;
}

static void rl_tell(tune_strategy *s, const tune_config *c, const tune_result *res, int n) {
    rl_state *r = s->impl;
    for (int i = 0; i < n; i++)
        if (res[i].status == TUNE_OK && res[i].seconds > r->worst) r->worst = res[i].seconds;
    tune_result best;
    if (!tune_strategy_best(s, NULL, &best) || !(best.seconds > 0)) return; /* no scale yet */
    double fail_reward = log(best.seconds / r->worst) - 1.0;
    double grad[TUNE_MAX_KNOBS][TUNE_MAX_VALUES];
    memset(grad, 0, sizeof grad);
    for (int i = 0; i < n; i++) {
        double reward = res[i].status == TUNE_OK && res[i].seconds > 0
                            ? log(best.seconds / res[i].seconds) : fail_reward;
        if (!r->have_baseline) {
            r->baseline = reward;
            r->spread = 1.0;
            r->have_baseline = true;
        }
        double adv = (reward - r->baseline) / sqrt(r->spread + 1e-6);
        if (adv > ADVANTAGE_CLIP) adv = ADVANTAGE_CLIP;
        if (adv < -ADVANTAGE_CLIP) adv = -ADVANTAGE_CLIP;
        double d = reward - r->baseline;
        r->baseline += BASELINE_DECAY * d;
        r->spread += BASELINE_DECAY * (d * d - r->spread);
        /* d log pi(a) / d logit[k][v] = [v == a_k] - pi_k(v) */
        for (int j = 0; j < s->nmutable; j++) {
            int k = s->mutable_knob[j];
            const tune_knob *knob = &s->space->knobs[k];
            double p[TUNE_MAX_VALUES];
            policy(r, knob, k, p);
            for (int v = 0; v < knob->nvalues; v++)
                grad[k][v] += adv * ((v == c[i].choice[k]) - p[v]);
        }
    }
    for (int j = 0; j < s->nmutable; j++) {
        int k = s->mutable_knob[j];
        const tune_knob *knob = &s->space->knobs[k];
        double p[TUNE_MAX_VALUES], h = 0;
        policy(r, knob, k, p);
        for (int v = 0; v < knob->nvalues; v++) h -= p[v] * log(p[v] + 1e-300);
        double bonus = h < ENTROPY_FLOOR * log(knob->nvalues) ? ENTROPY_BONUS : 0;
        /* d H / d logit[k][v] = -pi(v) (log pi(v) + H), once per sample told */
        for (int v = 0; v < knob->nvalues; v++)
            r->logit[k][v] += LEARNING_RATE * (grad[k][v] - n * bonus * p[v] *
                                                                (log(p[v] + 1e-300) + h));
    }
}

static void rl_free(tune_strategy *s) {
    wpk_free(s->impl);
}

const tune_strategy_ops tune_rl_ops = {"rl", rl_init, rl_propose, rl_tell, rl_free};
