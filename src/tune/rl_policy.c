/* rl_policy.c -- the rl strategy's shared policy: its table of weight vectors and its file
 * (see rl_policy.h). The file is text: a header line with the version and the state size, then
 * one line per entry: space key (hex), knob name, value, weights. */
#include "tune/rl_policy.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"

#define KNOB_NAME_MAX 48

typedef struct entry {
    uint64_t space;
    int64_t value;
    char knob[KNOB_NAME_MAX];
    double w[TUNE_RL_INPUTS];
} entry;

struct tune_rl_policy {
    entry *e;
    int n, cap;
    int *slot; /* open addressing over entries: index + 1, 0 empty */
    int nslot; /* a power of two, at least twice n */
    int64_t updates;
};

static uint64_t mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t key_of(uint64_t space, const char *knob, int64_t value) {
    uint64_t h = mix(space ^ (uint64_t)value * 0x2545F4914F6CDD1Dull);
    for (const char *c = knob; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    return mix(h);
}

tune_rl_policy *tune_rl_policy_create(wpk_context *ctx) {
    tune_rl_policy *p = wpk_calloc(1, sizeof *p);
    if (!p) wpk_error(ctx, WPK_ERR_NOMEM, "rl policy: out of memory");
    return p;
}

void tune_rl_policy_free(tune_rl_policy *p) {
    if (!p) return;
    wpk_free(p->e);
    wpk_free(p->slot);
    wpk_free(p);
}

static int find(const tune_rl_policy *p, uint64_t space, const char *knob, int64_t value) {
    if (!p->nslot) return -1;
    unsigned mask = (unsigned)p->nslot - 1;
    for (unsigned i = (unsigned)key_of(space, knob, value) & mask;; i = (i + 1) & mask) {
        int k = p->slot[i] - 1;
        if (k < 0) return -1;
        const entry *e = &p->e[k];
        if (e->space == space && e->value == value && !strcmp(e->knob, knob)) return k;
    }
}

static void index_put(int *slot, int nslot, const entry *e, int k) {
    unsigned mask = (unsigned)nslot - 1;
    unsigned i = (unsigned)key_of(e->space, e->knob, e->value) & mask;
    while (slot[i]) i = (i + 1) & mask;
    slot[i] = k + 1;
}

/* Room for one more entry; false when out of memory (p unchanged). */
static bool reserve(tune_rl_policy *p) {
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 64;
        entry *e = wpk_realloc(p->e, sizeof *e * (size_t)cap);
        if (!e) return false;
        p->e = e;
        p->cap = cap;
    }
    if (2 * (p->n + 1) > p->nslot) {
        int nslot = p->nslot ? 2 * p->nslot : 128;
        int *slot = wpk_calloc((size_t)nslot, sizeof *slot);
        if (!slot) return false;
        for (int k = 0; k < p->n; k++) index_put(slot, nslot, &p->e[k], k);
        wpk_free(p->slot);
        p->slot = slot;
        p->nslot = nslot;
    }
    return true;
}

const double *tune_rl_policy_find(const tune_rl_policy *p, uint64_t space, const char *knob,
                                  int64_t value) {
    int k = find(p, space, knob, value);
    return k < 0 ? NULL : p->e[k].w;
}

double *tune_rl_policy_weights(tune_rl_policy *p, uint64_t space, const char *knob,
                               int64_t value) {
    int k = find(p, space, knob, value);
    if (k >= 0) return p->e[k].w;
    if (strlen(knob) >= KNOB_NAME_MAX || !reserve(p)) return NULL;
    entry *e = &p->e[p->n];
    memset(e, 0, sizeof *e);
    e->space = space;
    e->value = value;
    snprintf(e->knob, sizeof e->knob, "%s", knob);
    index_put(p->slot, p->nslot, e, p->n);
    return p->e[p->n++].w;
}

int tune_rl_policy_size(const tune_rl_policy *p) {
    return p->n;
}

int64_t tune_rl_policy_updates(const tune_rl_policy *p) {
    return p->updates;
}

void tune_rl_policy_count_update(tune_rl_policy *p) {
    p->updates++;
}

void tune_rl_policy_path(const char *db_path, char *out, size_t cap) {
    snprintf(out, cap, "%s.rl-policy", db_path);
}

/* ---- the file ---- */

static const char MAGIC[] = "wpk-rl-policy";

/* Parse the entries after the header into p; false with the cause in why. */
static bool parse(FILE *f, tune_rl_policy *p, char *why, size_t cap) {
    int version = 0, inputs = 0;
    long long updates = 0;
    char magic[32];
    if (fscanf(f, "%31s %d %d %lld", magic, &version, &inputs, &updates) != 4 ||
        strcmp(magic, MAGIC)) {
        snprintf(why, cap, "not an rl policy file (no '%s' header)", MAGIC);
        return false;
    }
    if (version != TUNE_RL_POLICY_VERSION || inputs != TUNE_RL_INPUTS) {
        snprintf(why, cap, "version %d with %d state entries, this build reads version %d with "
                 "%d", version, inputs, TUNE_RL_POLICY_VERSION, TUNE_RL_INPUTS);
        return false;
    }
    for (int line = 2;; line++) {
        unsigned long long space;
        long long value;
        char knob[KNOB_NAME_MAX];
        int got = fscanf(f, "%llx %47s %lld", &space, knob, &value);
        if (got == EOF) break;
        double *w = got == 3 ? tune_rl_policy_weights(p, space, knob, value) : NULL;
        if (got == 3 && !w) {
            snprintf(why, cap, "out of memory at entry %d", line - 1);
            return false;
        }
        for (int i = 0; w && i < TUNE_RL_INPUTS; i++)
            if (fscanf(f, "%lf", &w[i]) != 1 || !isfinite(w[i])) w = NULL;
        if (!w) {
            snprintf(why, cap, "entry %d (line %d) is malformed", line - 1, line);
            return false;
        }
    }
    if (ferror(f)) {
        snprintf(why, cap, "read error: %s", strerror(errno));
        return false;
    }
    p->updates = updates;
    return true;
}

tune_rl_policy *tune_rl_policy_load(wpk_context *ctx, const char *path) {
    tune_rl_policy *p = tune_rl_policy_create(ctx);
    if (!p) return NULL;
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            wpk_log(ctx, WPK_LOG_INFO, "rl policy '%s': none yet, starting a fresh policy", path);
        else
            wpk_log(ctx, WPK_LOG_WARN, "rl policy '%s': cannot read it (%s): starting a fresh "
                    "policy", path, strerror(errno));
        return p;
    }
    char why[256];
    bool ok = parse(f, p, why, sizeof why);
    fclose(f);
    if (ok) return p;
    wpk_log(ctx, WPK_LOG_WARN, "rl policy '%s': %s: starting a fresh policy (the file is "
            "replaced when this run saves its own)", path, why);
    tune_rl_policy_free(p);
    return tune_rl_policy_create(ctx);
}

wpk_status tune_rl_policy_save(wpk_context *ctx, const tune_rl_policy *p, const char *path) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return wpk_error(ctx, WPK_ERR_IO, "rl policy '%s': path too long", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return wpk_error(ctx, WPK_ERR_IO, "rl policy '%s': cannot write it: %s", tmp,
                             strerror(errno));
    fprintf(f, "%s %d %d %lld\n", MAGIC, TUNE_RL_POLICY_VERSION, TUNE_RL_INPUTS,
            (long long)p->updates);
    for (int k = 0; k < p->n; k++) {
        const entry *e = &p->e[k];
        fprintf(f, "%016llx %s %lld", (unsigned long long)e->space, e->knob, (long long)e->value);
        for (int i = 0; i < TUNE_RL_INPUTS; i++) fprintf(f, " %.17g", e->w[i]);
        fputc('\n', f);
    }
    bool ok = !ferror(f);
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        int err = errno;
        remove(tmp);
        return wpk_error(ctx, WPK_ERR_IO, "rl policy '%s': cannot write it: %s", path,
                         strerror(err));
    }
    return WPK_OK;
}
