/* strategy_ga.c -- genetic algorithm (Woodpecker-DL's search): a chromosome is the knob choice
 * vector; fitness is speed (1/seconds, a failure 0); roulette-wheel selection (power-scaled),
 * uniform crossover, per-gene mutation, elitism; the population is sized from the space and the
 * budget; the first generation is random, but up to a quarter of it params.prior_configs (the
 * fastest configs of other workloads), and up to half in all mutants of them and of
 * params.start when given. It stops (propose returns 0) when the best has not improved for
 * STALL_GENERATIONS generations or when no unmeasured legal config can be found at all. A child
 * that is still a repeat (or illegal) after RETRIES re-mutations is replaced by a random
 * unmeasured config, an immigrant: a small population (a budget of a few trials) in a heavily
 * pruned space collapses that way long before the space is used up.
 *
 * A memetic step: each generation after the first also measures a few of the best config's
 * unmeasured one-knob neighbours, any value of any knob, in a seeded random order. Mutation
 * reaches a particular far value of a knob rarely (a child changes one gene on average, to an
 * adjacent value half the time), and crossover cannot build a change that no individual
 * carries: the best config two knobs from a good start, one of them a far value of an
 * enumeration (56x56 64->64 Winograd: the parallel form 8 -> 5, then tile_p 8 -> 7), was out
 * of reach of four of five 80-trial runs before this step (tune_strategies.md, 11-27).
 *
 * Ask/tell makes generations soft: a generation is bred when the previous one has been handed
 * out; whatever was told since the last breeding (children, or records loaded from the
 * database) competes for the next population, so late or partial results are never lost. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "tune/strategy_impl.h"

#define STALL_GENERATIONS 8
#define CROSSOVER_RATE 0.9
/* The wheel's slice is fitness^SELECTION_POWER (power scaling): late in a search the population
 * is within a few percent of each other, and raw 1/seconds would then select almost uniformly.
 * With 4, a 5% faster config is picked ~22% more often; on the synthetic conv objective of
 * tests/unit/test_strategies.c it cut trials to within 5% of the optimum by ~40% against 1. */
#define SELECTION_POWER 4
#define RETRIES 16 /* re-mutations of a child that was measured already */
#define LOCAL_SHARE 4 /* a quarter of each generation: the best's one-knob neighbours */

typedef struct ga_ind {
    tune_config c;
    double fit;
    int order; /* tie-break so sorting is deterministic */
    bool fresh; /* told since the last breeding */
} ga_ind;

typedef struct ga_state {
    int pop_size, elites;
    ga_ind *pop; /* current population, best first */
    int npop;
    ga_ind *in;  /* told since the last breeding */
    int nin, in_cap;
    ga_ind *merge; /* scratch: pop + in */
    int merge_cap;
    double *wheel; /* cumulative selection weights over pop */
    tune_config *queue; /* bred, not yet handed out */
    int nqueue, qhead;
    tune_cfg_set dedup; /* scratch */
    double best_fit;
    int stall;
    bool converged;
} ga_state;

static double fitness(const tune_result *r) {
    return r->status == TUNE_OK && r->seconds > 0 ? 1.0 / r->seconds : 0.0;
}

static wpk_status ga_init(tune_strategy *s) {
    ga_state *g = wpk_calloc(1, sizeof *g);
    if (!g) return wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy 'ga': out of memory");
    s->impl = g;
    /* sqrt(size) individuals within [16, 64]: enough diversity for spaces of millions of
     * configs without spending the budget on one generation; at most a quarter of the budget,
     * so at least four generations run */
    int64_t p = 16;
    while (p < 64 && p * p < s->size) p++;
    if (s->params.budget > 0 && p > s->params.budget / 4) p = s->params.budget / 4;
    if (p < 2) p = 2;
    if (p > s->size) p = s->size;
    g->pop_size = (int)p;
    g->elites = g->pop_size / 10 > 1 ? g->pop_size / 10 : 1;
    g->pop = wpk_calloc((size_t)g->pop_size, sizeof *g->pop);
    g->wheel = wpk_calloc((size_t)g->pop_size, sizeof *g->wheel);
    g->queue = wpk_calloc((size_t)g->pop_size, sizeof *g->queue);
    if (!g->pop || !g->wheel || !g->queue) {
        s->ops->free(s);
        return wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy 'ga': out of memory");
    }
    return WPK_OK;
}

static int by_fitness(const void *pa, const void *pb) {
    const ga_ind *a = pa, *b = pb;
    if (a->fit != b->fit) return a->fit > b->fit ? -1 : 1;
    return a->order - b->order;
}

/* The next population: the elites (best of everything), then this generation's children by
 * fitness, then the previous population's survivors by fitness. False when out of memory. */
static bool next_population(tune_strategy *s, ga_state *g) {
    int need = g->npop + g->nin;
    if (need > g->merge_cap) {
        ga_ind *m = wpk_realloc(g->merge, (size_t)need * sizeof *m);
        if (!m) return false;
        g->merge = m;
        g->merge_cap = need;
    }
    /* newest first, so that a config told twice keeps its latest result */
    tune_cfg_set_clear(&g->dedup);
    int n = 0;
    for (int i = g->nin - 1; i >= -g->npop; i--) {
        const ga_ind *src = i >= 0 ? &g->in[i] : &g->pop[-1 - i];
        tune_cfg_key key = tune_cfg_key_of(s->space, &src->c);
        if (tune_cfg_set_find(&g->dedup, key)) continue;
        if (tune_cfg_set_put(&g->dedup, key, 0) != WPK_OK) return false;
        g->merge[n] = *src;
        g->merge[n].fresh = i >= 0;
        g->merge[n].order = n;
        n++;
    }
    if (n > 1) qsort(g->merge, (size_t)n, sizeof *g->merge, by_fitness);
    int np = 0;
    for (int i = 0; i < n && np < g->elites; i++)
        g->pop[np++] = g->merge[i], g->merge[i].order = -1;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n && np < g->pop_size; i++)
            if (g->merge[i].order >= 0 && g->merge[i].fresh == (pass == 0))
                g->pop[np++] = g->merge[i], g->merge[i].order = -1;
    /* the children replaced their parents; keep the population sorted, best first */
    for (int i = 0; i < np; i++) g->pop[i].order = i;
    if (np > 1) qsort(g->pop, (size_t)np, sizeof *g->pop, by_fitness);
    g->npop = np;
    g->nin = 0;
    return true;
}

/* Roulette wheel: an individual is picked with probability proportional to its (scaled)
 * fitness; all zero (everything failed) picks uniformly. */
static int spin(tune_strategy *s, ga_state *g) {
    double total = g->npop ? g->wheel[g->npop - 1] : 0;
    if (total <= 0) return (int)tune_rng_below(&s->rng, g->npop);
    double x = tune_rng_unit(&s->rng) * total;
    int lo = 0, hi = g->npop - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (g->wheel[mid] > x) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

static int gcd(int a, int b) {
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static bool queued(const tune_strategy *s, const ga_state *g, const tune_config *c) {
    for (int i = 0; i < g->nqueue; i++)
        if (tune_config_equal(s->space, &g->queue[i], c)) return true;
    return false;
}

/* One child into the queue; false when none unmeasured was found. */
static bool breed_child(tune_strategy *s, ga_state *g) {
    int a = spin(s, g), b = spin(s, g);
    for (int t = 0; t < 4 && b == a && g->npop > 1; t++) b = spin(s, g);
    tune_config child = g->pop[a].c;
    if (tune_rng_unit(&s->rng) < CROSSOVER_RATE)
        for (int k = 0; k < s->space->nknobs; k++)
            if (tune_rng_next(&s->rng) & 1) child.choice[k] = g->pop[b].c.choice[k];
    /* per-gene mutation, one gene per child on average */
    double pm = s->nmutable ? 1.0 / s->nmutable : 0;
    for (int i = 0; i < s->nmutable; i++) {
        if (tune_rng_unit(&s->rng) >= pm) continue;
        int k = s->mutable_knob[i], n = s->space->knobs[k].nvalues, v;
        if (tune_rng_next(&s->rng) & 1) {
            v = child.choice[k] + (tune_rng_next(&s->rng) & 1 ? 1 : -1);
            if (v < 0 || v >= n) v = 2 * child.choice[k] - v;
        } else {
            v = (int)tune_rng_below(&s->rng, n - 1);
            if (v >= child.choice[k]) v++;
        }
        child.choice[k] = v;
    }
    /* no duplicate proposals: a child that was measured (or is illegal) mutates again */
    for (int t = 0; t < RETRIES && (!tune_strategy_fresh(s, &child) || queued(s, g, &child)); t++)
        tune_strategy_mutate(s, &child, 0.5);
    if (!tune_strategy_fresh(s, &child) || queued(s, g, &child)) return false;
    g->queue[g->nqueue++] = child;
    return true;
}

/* Up to n of the best individual's unmeasured legal one-knob neighbours into the queue, in a
 * random order over every (knob, value) pair: a random start in the pairs' enumeration and a
 * random stride coprime to their count visits each pair once. */
static void local_step(tune_strategy *s, ga_state *g, int n) {
    int total = 0;
    for (int i = 0; i < s->nmutable; i++) total += s->space->knobs[s->mutable_knob[i]].nvalues - 1;
    if (!g->npop || total < 1) return;
    int at = (int)tune_rng_below(&s->rng, total), stride;
    do stride = 1 + (int)tune_rng_below(&s->rng, total);
    while (gcd(stride, total) != 1);
    for (int visited = 0; visited < total && n > 0 && g->nqueue < g->pop_size; visited++) {
        int pair = at, i = 0;
        at = (at + stride) % total;
        while (pair >= s->space->knobs[s->mutable_knob[i]].nvalues - 1)
            pair -= s->space->knobs[s->mutable_knob[i++]].nvalues - 1;
        tune_config c = g->pop[0].c;
        int k = s->mutable_knob[i];
        c.choice[k] = pair >= c.choice[k] ? pair + 1 : pair;
        if (tune_strategy_fresh(s, &c) && !queued(s, g, &c)) {
            g->queue[g->nqueue++] = c;
            n--;
        }
    }
}

/* A random unmeasured config into the queue; false when the space seems used up. */
static bool immigrant(tune_strategy *s, ga_state *g) {
    tune_config c;
    for (int t = 0; t < 4; t++)
        if (tune_strategy_random_fresh(s, &c) && !queued(s, g, &c)) {
            g->queue[g->nqueue++] = c;
            return true;
        }
    return false;
}

/* Fill the queue with the next generation; sets converged when there is none. False when out
 * of memory. */
static bool breed(tune_strategy *s, ga_state *g) {
    bool told = g->nin > 0;
    if (!next_population(s, g)) return false;
    g->nqueue = g->qhead = 0;
    if (!g->npop) {
        /* nothing measured yet: the first generation is random, but up to a quarter of it
           the configs that were the fastest on other workloads (transfer: what suits a
           workload's kind of loop nest suits another's), then up to half in all mutants of
           a start config (the template's default: its neighbourhood is where the template's
           author expects the good configs) and of those configs in turn, handed out first
           -- the next generation is bred from all of them either way */
        tune_config c;
        const int np = s->params.prior_config_count, nfrom = np + s->params.has_start;
        for (int i = 0; i < np && 4 * g->nqueue < g->pop_size; i++) {
            c = s->params.prior_configs[i];
            if (tune_strategy_fresh(s, &c) && !queued(s, g, &c)) g->queue[g->nqueue++] = c;
        }
        for (int t = 0; g->nqueue < g->pop_size && t < 4 * g->pop_size; t++) {
            const tune_config *from = !nfrom ? NULL
                                      : t % nfrom < np ? &s->params.prior_configs[t % nfrom]
                                                       : &s->params.start;
            bool near = 2 * g->nqueue < g->pop_size && from && tune_strategy_near(s, from, &c);
            if (!near && !tune_strategy_random_fresh(s, &c)) break; /* exhausted */
            if (!queued(s, g, &c)) g->queue[g->nqueue++] = c;
        }
        if (!g->nqueue) g->converged = true;
        return true;
    }
    if (told) {
        /* only generations that were measured count towards convergence */
        if (g->pop[0].fit > g->best_fit) {
            g->best_fit = g->pop[0].fit;
            g->stall = 0;
        } else if (++g->stall >= STALL_GENERATIONS) {
            g->converged = true;
            return true;
        }
    }
    double acc = 0;
    /* fitness relative to the best (<= 1) before the power, so nothing overflows */
    for (int i = 0; i < g->npop; i++)
        g->wheel[i] = acc +=
            g->pop[0].fit > 0 ? pow(g->pop[i].fit / g->pop[0].fit, SELECTION_POWER) : 0;
    int children = g->pop_size - g->elites;
    local_step(s, g, children / LOCAL_SHARE > 1 ? children / LOCAL_SHARE : 1);
    for (int i = g->nqueue; i < children; i++)
        if (!breed_child(s, g) && !immigrant(s, g)) break;
    if (!g->nqueue) g->converged = true; /* nothing unmeasured to be found */
    return true;
}

static int ga_propose(tune_strategy *s, tune_config *out, int max) {
    ga_state *g = s->impl;
    int n = 0;
    while (n < max) {
        if (g->qhead == g->nqueue) {
            if (g->converged) break;
            if (!breed(s, g)) {
                wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy 'ga': out of memory breeding");
                break;
            }
            if (g->qhead == g->nqueue) break;
        }
        tune_config c = g->queue[g->qhead++];
        int t = tune_strategy_take(s, &c);
        if (t < 0) break;
        if (t > 0) out[n++] = c;
    }
    return n;
}

static void ga_tell(tune_strategy *s, const tune_config *c, const tune_result *r, int n) {
    ga_state *g = s->impl;
    for (int i = 0; i < n; i++) {
        if (g->nin == g->in_cap) {
            int cap = g->in_cap ? g->in_cap * 2 : 64;
            ga_ind *in = wpk_realloc(g->in, (size_t)cap * sizeof *in);
            if (!in) {
                wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy 'ga': out of memory (a result "
                          "is left out of the population)");
                return;
            }
            g->in = in;
            g->in_cap = cap;
        }
        ga_ind *ind = &g->in[g->nin++];
        memset(ind, 0, sizeof *ind);
        for (int k = 0; k < s->space->nknobs; k++) ind->c.choice[k] = c[i].choice[k];
        ind->fit = fitness(&r[i]);
    }
}

static void ga_free(tune_strategy *s) {
    ga_state *g = s->impl;
    wpk_free(g->pop);
    wpk_free(g->in);
    wpk_free(g->merge);
    wpk_free(g->wheel);
    wpk_free(g->queue);
    tune_cfg_set_free(&g->dedup);
    wpk_free(g);
}

const tune_strategy_ops tune_ga_ops = {"ga", ga_init, ga_propose, ga_tell, ga_free};
