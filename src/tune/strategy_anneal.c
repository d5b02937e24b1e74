/* strategy_anneal.c -- simulated annealing: several independent chains walk the space by neighbour
 * moves (one knob to an adjacent value, sometimes to any value); a slower neighbour is accepted
 * with probability exp(-(log t_new - log t_cur) / T). Energies are log-seconds, so the schedule
 * does not depend on the kernel's scale; T cools geometrically from T_START to T_END over the
 * budget. The chains fill a batch round-robin, so a batch of b measures b moves at once. A chain
 * whose neighbourhood is all measured restarts at a random config. */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "tune/strategy_impl.h"

#define T_START 0.2    /* a 10% slower neighbour is accepted with p ~ 0.6 at first */
#define T_END 0.002    /* ... and with p ~ 1e-22 at the end of the budget */
#define P_ADJACENT 0.75
#define NEIGHBOUR_TRIES 32
#define DEFAULT_BUDGET 1000

typedef struct chain {
    tune_config cur;
    double energy; /* log seconds of cur */
    bool has_cur;  /* false until a start point succeeded */
} chain;

typedef struct pending {
    tune_config c;
    int chain;
} pending;

typedef struct anneal_state {
    chain *chains;
    int nchains, turn;
    pending *pend; /* proposed, not told: which chain moves when the result comes */
    int npend, pend_cap;
} anneal_state;

static wpk_status anneal_init(tune_strategy *s) {
    anneal_state *a = wpk_calloc(1, sizeof *a);
    if (!a) return wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy 'anneal': out of memory");
    s->impl = a;
    /* a chain per 64 trials of the budget, 4..16: enough to fill a batch and to hedge against
     * a chain stuck in a poor basin, few enough that each walks far */
    int64_t n = s->params.budget > 0 ? s->params.budget / 64 : 8;
    a->nchains = (int)(n < 4 ? 4 : n > 16 ? 16 : n);
    a->chains = wpk_calloc((size_t)a->nchains, sizeof *a->chains);
    if (!a->chains) {
        wpk_free(a);
        return wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy 'anneal': out of memory");
    }
    return WPK_OK;
}

static double temperature(const tune_strategy *s) {
    double budget = s->params.budget > 0 ? (double)s->params.budget : DEFAULT_BUDGET;
    double progress = s->ntold / budget;
    if (progress > 1) progress = 1;
    return T_START * pow(T_END / T_START, progress);
}

/* The next config chain ch should measure; false when the space is exhausted. */
static bool move(tune_strategy *s, chain *ch, tune_config *c) {
    if (ch->has_cur) {
        for (int t = 0; t < NEIGHBOUR_TRIES; t++) {
            *c = ch->cur;
            tune_strategy_mutate(s, c, P_ADJACENT);
            if (t >= NEIGHBOUR_TRIES / 2) tune_strategy_mutate(s, c, P_ADJACENT); /* two steps */
            if (tune_strategy_fresh(s, c)) return true;
        }
        ch->has_cur = false; /* every nearby config was measured: restart */
    }
    return tune_strategy_random_fresh(s, c);
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
        if (!move(s, &a->chains[ci], &c)) break;
        if (tune_strategy_take(s, &c) <= 0) break;
        a->pend[a->npend++] = (pending){c, ci};
        out[n++] = c;
    }
    return n;
}

static void anneal_tell(tune_strategy *s, const tune_config *c, const tune_result *r, int n) {
    anneal_state *a = s->impl;
    double temp = temperature(s);
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < a->npend && !tune_config_equal(s->space, &a->pend[j].c, &c[i])) j++;
        if (j == a->npend) continue; /* not one of ours (records): no chain is waiting on it */
        chain *ch = &a->chains[a->pend[j].chain];
        a->pend[j] = a->pend[--a->npend];
        /* a failure is never a chain's state */
        if (r[i].status != TUNE_OK || !(r[i].seconds > 0)) continue;
        double e = log(r[i].seconds);
        /* Metropolis: downhill always, uphill with a probability that shrinks as T cools */
        if (!ch->has_cur || e <= ch->energy ||
            tune_rng_unit(&s->rng) < exp(-(e - ch->energy) / temp)) {
            ch->cur = c[i];
            ch->energy = e;
            ch->has_cur = true;
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
