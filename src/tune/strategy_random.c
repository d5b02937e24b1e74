/* strategy_random.c -- random search: configs drawn uniformly without replacement until the space
 * is exhausted. A lazy Fisher-Yates shuffle of the config indices: only the positions touched so
 * far are stored, so a draw costs O(1) in any space and the n-th draw never repeats one. */
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "tune/strategy_impl.h"

/* position -> index of the shuffled array; a position not stored holds its own index */
typedef struct perm_map {
    int64_t *pos, *idx; /* pos -1: empty slot */
    size_t cap, count;
} perm_map;

typedef struct random_state {
    perm_map map;
    int64_t next; /* positions [0, next) are drawn */
} random_state;

static size_t slot_of(int64_t pos, size_t cap) {
    uint64_t h = (uint64_t)pos * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

static int64_t map_get(const perm_map *m, int64_t pos) {
    if (!m->cap) return pos;
    for (size_t i = slot_of(pos, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->pos[i] == pos) return m->idx[i];
        if (m->pos[i] < 0) return pos;
    }
}

/* Store idx at pos; 1 when pos was not stored before. */
static int put_slot(int64_t *pos_arr, int64_t *idx_arr, size_t cap, int64_t pos, int64_t idx) {
    size_t i = slot_of(pos, cap);
    while (pos_arr[i] >= 0 && pos_arr[i] != pos) i = (i + 1) & (cap - 1);
    int added = pos_arr[i] < 0;
    pos_arr[i] = pos;
    idx_arr[i] = idx;
    return added;
}

/* Make room for one more entry; false when out of memory (the map is unchanged). */
static bool map_reserve(perm_map *m) {
    if ((m->count + 1) * 2 <= m->cap) return true;
    size_t cap = m->cap ? m->cap * 2 : 256;
    int64_t *pos = wpk_malloc(cap * sizeof *pos), *idx = wpk_malloc(cap * sizeof *idx);
    if (!pos || !idx) {
        wpk_free(pos);
        wpk_free(idx);
        return false;
    }
    memset(pos, 0xff, cap * sizeof *pos); /* all -1 */
    for (size_t i = 0; i < m->cap; i++)
        if (m->pos[i] >= 0) put_slot(pos, idx, cap, m->pos[i], m->idx[i]);
    wpk_free(m->pos);
    wpk_free(m->idx);
    m->pos = pos;
    m->idx = idx;
    m->cap = cap;
    return true;
}

static wpk_status random_init(tune_strategy *s) {
    s->impl = wpk_calloc(1, sizeof(random_state));
    if (!s->impl) return wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy 'random': out of memory");
    return WPK_OK;
}

/* The next config of the shuffle into *c; false when the space is exhausted or out of memory. */
static bool draw(tune_strategy *s, random_state *r, tune_config *c, bool *oom) {
    memset(c, 0, sizeof *c);
    if (s->size == INT64_MAX) {
        /* a space too large to index (saturated size): repeats are then vanishingly rare, and
         * tune_strategy_take still refuses them */
        tune_config_random(s->space, &s->rng, c);
        return true;
    }
    if (r->next >= s->size) return false;
    if (!map_reserve(&r->map)) {
        *oom = true;
        return false;
    }
    int64_t j = r->next + tune_rng_below(&s->rng, s->size - r->next);
    int64_t at_j = map_get(&r->map, j), at_next = map_get(&r->map, r->next);
    /* swap positions next and j; position next is never read again, so only j is stored */
    if (j != r->next) r->map.count += put_slot(r->map.pos, r->map.idx, r->map.cap, j, at_next);
    r->next++;
    tune_config_from_index(s->space, at_j, c);
    return true;
}

static int random_propose(tune_strategy *s, tune_config *out, int max) {
    random_state *r = s->impl;
    int n = 0;
    long skips = 0;
    bool oom = false;
    while (n < max && skips < TUNE_MAX_SKIPS) {
        tune_config c;
        if (!draw(s, r, &c, &oom)) break;
        int t = tune_strategy_take(s, &c);
        if (t < 0) break;
        if (t == 0) {
            skips++; /* told earlier (records) or illegal */
            continue;
        }
        out[n++] = c;
    }
    if (oom) wpk_error(s->ctx, WPK_ERR_NOMEM, "tune strategy 'random': out of memory");
    return n;
}

static void random_tell(tune_strategy *s, const tune_config *c, const tune_result *res, int n) {
    (void)s, (void)c, (void)res, (void)n; /* nothing to learn: the shared bookkeeping suffices */
}

static void random_free(tune_strategy *s) {
    random_state *r = s->impl;
    wpk_free(r->map.pos);
    wpk_free(r->map.idx);
    wpk_free(r);
}

const tune_strategy_ops tune_random_ops = {"random", random_init, random_propose, random_tell,
                                           random_free};
