/* strategy_anneal.c -- simulated annealing: a few chains walk the space by neighbour moves, one
 * knob at a time (to an adjacent value mostly, sometimes to any value of that knob); a slower
 * neighbour is accepted with probability exp(-(log t_new - log t_cur) / T).
 *
 * The chains start where good configs are known: the start config (the template's default)
 * and the fastest configs of other workloads (prior_configs, proposed first themselves), so
 * the first proposals are those configs and their one-knob neighbours, not random configs.
 * Energies are log-seconds; the temperature comes from the spread of the uphill steps seen so
 * far (their median: an uphill step of typical size is accepted with p ~ exp(-1/T_SCALE) =
 * 0.02 at first, so the chains stay near good configs), cooled geometrically over the budget.
 * A move changes one knob mostly, two or three sometimes (the extra knobs to any of their
 * values): a config whose gain needs knobs changed together (a wider tile with fewer rows) is
 * out of reach of one-knob steps through the slower configs between. A chain that has not
 * improved on its own best for CHAIN_STALL of its moves, or whose neighbourhood is all
 * measured, restarts at the best config found so far with a two- or three-knob move or, every
 * other time, at a random one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "tune/strategy_impl.h"

#define T_SCALE 0.25        /* the starting T, in units of the typical uphill step */
#define T_COOL 0.02         /* T at the end of the budget over T at the start */
#define T_UNKNOWN 0.05      /* before any uphill step was seen: a 5% slower move, p ~ 0.37 */
#define P_ADJACENT 0.75
#define NEIGHBOUR_TRIES 48
#define DEFAULT_BUDGET 1000
#define MAX_STEPS 64        /* uphill steps kept for the spread */
#define MAX_CHAINS 8
#define P_TWO_KNOBS 0.25    /* a move changes a second knob */
#define P_THREE_KNOBS 0.1   /* and a third */
#define CHAIN_STALL 12      /* a chain's moves without a new best of its own before it restarts */

typedef struct chain {
    tune_config cur;
    double energy;  /* log seconds of cur, valid when known */
    bool has_cur;   /* cur is where the chain stands (its energy may not be known yet) */
    bool known;     /* cur's result has been told */
    bool propose_cur; /* cur is another workload's config, not measured here yet: propose it */
    double best_energy; /* the lowest energy this chain has stood on since it (re)started */
    int stall;          /* its moves told since best_energy last fell */
} chain;

typedef struct pending {
    tune_config c;
    int chain;
} pending;

typedef struct anneal_state {
    chain *chains;
    int nchains, turn, restarts;
    pending *pend; /* proposed, not told: which chain moves when the result comes */
    int npend, pend_cap;
    double steps[MAX_STEPS]; /* the latest uphill steps (log-time differences) */
    int nsteps, step_at;
} anneal_state;

static wpk_status anneal_init(tune_strategy *s) {
    anneal_state *a = wpk_calloc(1, sizeof *a);
    if (!a) return wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy 'anneal': out of memory");
    s->impl = a;
    /* a chain per 128 trials of the budget, 2..MAX_CHAINS: enough to fill part of a batch and
     * to hedge against a poor basin, few enough that each walks far from a good start */
    int64_t n = s->params.budget > 0 ? s->params.budget / 128 : 4;
    /* the seeds: the start, then other workloads' fastest configs (a chain for each, up to
       MAX_CHAINS), round-robin over the chains */
    const tune_config *seeds[MAX_CHAINS];
    int nseeds = 0;
    for (int i = -1; i < s->params.prior_config_count && nseeds < MAX_CHAINS; i++) {
        if (i < 0 && !s->params.has_start) continue;
        const tune_config *c = i < 0 ? &s->params.start : &s->params.prior_configs[i];
        bool dup = !tune_strategy_legal(s, c);
        for (int j = 0; j < nseeds && !dup; j++) dup = tune_config_equal(s->space, seeds[j], c);
        if (!dup) seeds[nseeds++] = c;
    }
    if (n < nseeds) n = nseeds;
    a->nchains = (int)(n < 2 ? 2 : n > MAX_CHAINS ? MAX_CHAINS : n);
    a->chains = wpk_calloc((size_t)a->nchains, sizeof *a->chains);
    if (!a->chains) {
        wpk_free(a);
        return wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy 'anneal': out of memory");
    }
    for (int i = 0; i < a->nchains && nseeds > 0; i++) {
        const tune_config *seed = seeds[i % nseeds];
        a->chains[i].cur = *seed;
        a->chains[i].has_cur = true;
        /* the start is measured by the tuner; another workload's config is proposed here */
        a->chains[i].propose_cur = !(s->params.has_start && seed == &s->params.start);
    }
    return WPK_OK;
}

static int cmp_dbl(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double temperature(const tune_strategy *s, const anneal_state *a) {
    double budget = s->params.budget > 0 ? (double)s->params.budget : DEFAULT_BUDGET;
    double progress = s->ntold / budget;
    if (progress > 1) progress = 1;
    double t0 = T_UNKNOWN;
    if (a->nsteps > 0) {
        double v[MAX_STEPS];
        memcpy(v, a->steps, sizeof(double) * (size_t)a->nsteps);
        qsort(v, (size_t)a->nsteps, sizeof v[0], cmp_dbl);
        t0 = T_SCALE * v[a->nsteps / 2];
        if (t0 < 1e-4) t0 = 1e-4;
    }
    return t0 * pow(T_COOL, progress);
}

/* The energy of a chain's config when its result is known (told by us, or as a record). */
static void learn_energy(const tune_strategy *s, chain *ch) {
    if (!ch->has_cur || ch->known) return;
    const tune_trial *t = tune_strategy_trial(s, &ch->cur);
    if (!t) return;
    if (t->result.status != TUNE_OK || !(t->result.seconds > 0)) {
        ch->has_cur = false; /* a failing seed: the chain restarts */
        return;
    }
    ch->energy = ch->best_energy = log(t->result.seconds);
    ch->known = true;
    ch->stall = 0;
}

/* A restart point: the best config so far, or (every other restart, or with none) random. */
static bool restart(tune_strategy *s, anneal_state *a, chain *ch, tune_config *c) {
    tune_config best;
    ch->has_cur = false;
    if (a->restarts++ % 2 == 0 && tune_strategy_best(s, &best, NULL)) {
        ch->cur = best;
        ch->has_cur = ch->known = true;
        ch->energy = log(s->trials[s->best].result.seconds);
        ch->best_energy = ch->energy;
        ch->stall = 0;
        for (int t = 0; t < NEIGHBOUR_TRIES; t++) {
            *c = best;
            tune_strategy_mutate(s, c, P_ADJACENT);
            tune_strategy_mutate(s, c, 0);
            if (t % 2) tune_strategy_mutate(s, c, 0);
            if (tune_strategy_fresh(s, c)) return true;
        }
        ch->has_cur = false;
    }
    return tune_strategy_random_fresh(s, c);
}

/* The next config chain ch should measure; false when the space is exhausted. */
static bool move(tune_strategy *s, anneal_state *a, chain *ch, tune_config *c) {
    learn_energy(s, ch);
    if (ch->propose_cur) {
        ch->propose_cur = false;
        *c = ch->cur;
        if (tune_strategy_fresh(s, c)) {
            ch->has_cur = false; /* its result makes it the chain's state */
            return true;
        }
    }
    if (ch->has_cur && ch->stall < CHAIN_STALL) {
        const double u = tune_rng_unit(&s->rng);
        const int extra = (u < P_TWO_KNOBS + P_THREE_KNOBS) + (u < P_THREE_KNOBS);
        for (int t = 0; t < NEIGHBOUR_TRIES; t++) {
            *c = ch->cur;
            /* one knob, sometimes two or three; one more once the moves keep landing on
               measured configs */
            tune_strategy_mutate(s, c, P_ADJACENT);
            for (int i = 0; i < extra + (t >= NEIGHBOUR_TRIES / 2); i++)
                tune_strategy_mutate(s, c, 0);
            if (tune_strategy_fresh(s, c)) return true;
        }
    }
    return restart(s, a, ch, c);
}

static int anneal_propose(tune_strategy *s, tune_config *out, int max) {
    anneal_state *a = s->impl;
    int n = 0;
    while (n < max) {
        if (a->npend == a->pend_cap) {
            int cap = a->pend_cap ? a->pend_cap * 2 : 64;
            pending *p = wpk_realloc(a->pend, (size_t)cap * sizeof *p);
            if (!p) {
                wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy 'anneal': out of memory");
                break;
            }
            a->pend = p;
            a->pend_cap = cap;
        }
        int ci = a->turn;
        a->turn = (a->turn + 1) % a->nchains;
        tune_config c;
        memset(&c, 0, sizeof c);
        if (!move(s, a, &a->chains[ci], &c)) break;
        if (tune_strategy_take(s, &c) <= 0) break;
        a->pend[a->npend++] = (pending){c, ci};
        out[n++] = c;
    }
    return n;
}

static void anneal_tell(tune_strategy *s, const tune_config *c, const tune_result *r, int n) {
    anneal_state *a = s->impl;
    for (int i = 0; i < a->nchains; i++) learn_energy(s, &a->chains[i]);
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < a->npend && !tune_config_equal(s->space, &a->pend[j].c, &c[i])) j++;
        if (j == a->npend) continue; /* not one of ours (records): no chain is waiting on it */
        chain *ch = &a->chains[a->pend[j].chain];
        a->pend[j] = a->pend[--a->npend];
        /* a failure is never a chain's state */
        if (r[i].status != TUNE_OK || !(r[i].seconds > 0)) continue;
        double e = log(r[i].seconds);
        if (!ch->has_cur || !ch->known) {
            /* the chain's seed is not measured yet (or it restarted): the move is its state */
            ch->cur = c[i];
            ch->energy = ch->best_energy = e;
            ch->has_cur = ch->known = true;
            ch->stall = 0;
            continue;
        }
        if (e < ch->best_energy) {
            ch->best_energy = e;
            ch->stall = 0;
        } else {
            ch->stall++;
        }
        if (e > ch->energy) {
            a->steps[a->step_at] = e - ch->energy;
            a->step_at = (a->step_at + 1) % MAX_STEPS;
            if (a->nsteps < MAX_STEPS) a->nsteps++;
        }
        /* Metropolis: downhill always, uphill with a probability that shrinks as T cools */
        if (e <= ch->energy ||
            tune_rng_unit(&s->rng) < exp(-(e - ch->energy) / temperature(s, a))) {
            ch->cur = c[i];
            ch->energy = e;
        }
    }
}

static void anneal_free(tune_strategy *s) {
    anneal_state *a = s->impl;
    wpk_free(a->chains);
    wpk_free(a->pend);
    wpk_free(a);
}

const tune_strategy_ops tune_anneal_ops = {"anneal", anneal_init, anneal_propose, anneal_tell,
                                           anneal_free};
