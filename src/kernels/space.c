/* space.c -- knob spaces and configs: size, lookup, text form, random and indexed configs. */
#include "kernels/space.h"

#include <stdlib.h>
#include <string.h>

#include "base/context.h"

wpk_status tune_space_add(tune_space *s, const char *name, int nvalues, const int64_t *values) {
    if (s->nknobs == TUNE_MAX_KNOBS || nvalues <= 0) return WPK_ERR_INVALID_ARG;
    tune_knob *k = &s->knobs[s->nknobs];
    memset(k, 0, sizeof *k);
    k->name = name;
    for (int i = 0; i < nvalues && k->nvalues < TUNE_MAX_VALUES; i++) {
        bool dup = false;
        for (int j = 0; j < k->nvalues; j++) dup |= k->values[j] == values[i];
        if (!dup) k->values[k->nvalues++] = values[i];
    }
    s->nknobs++;
    return WPK_OK;
}

int64_t tune_space_size(const tune_space *s) {
    int64_t n = 1;
    for (int k = 0; k < s->nknobs; k++) {
        if (n > INT64_MAX / s->knobs[k].nvalues) return INT64_MAX;
        n *= s->knobs[k].nvalues;
    }
    return n;
}

static int find(const tune_space *s, const char *name) {
    for (int k = 0; k < s->nknobs; k++)
        if (strcmp(s->knobs[k].name, name) == 0) return k;
    return -1;
}

int64_t tune_config_get(const tune_space *s, const tune_config *c, const char *name, int64_t def) {
    int k = find(s, name);
    return k < 0 ? def : s->knobs[k].values[c->choice[k]];
}

void tune_config_set(const tune_space *s, tune_config *c, const char *name, int64_t v) {
    int k = find(s, name);
    if (k < 0) return;
    int best = 0;
    for (int i = 1; i < s->knobs[k].nvalues; i++)
        if (llabs(s->knobs[k].values[i] - v) < llabs(s->knobs[k].values[best] - v)) best = i;
    c->choice[k] = best;
}

void tune_config_print(const tune_space *s, const tune_config *c, strbuf *b) {
    for (int k = 0; k < s->nknobs; k++)
        sb_printf(b, "%s%s=%lld", k ? "," : "", s->knobs[k].name,
                  (long long)s->knobs[k].values[c->choice[k]]);
}

wpk_status tune_config_parse(wpk_context *ctx, const tune_space *s, const char *text, tune_config *c) {
    memset(c, 0, sizeof *c);
    bool seen[TUNE_MAX_KNOBS] = {false};
    const char *p = text;
    while (*p) {
        const char *eq = strchr(p, '='), *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        if (!eq || eq > end)
            return wpk_error(ctx, WPK_ERR_INVALID_ARG, "config '%s': expected knob=value", text);
        char name[64];
        size_t nl = (size_t)(eq - p);
        if (nl >= sizeof name) nl = sizeof name - 1;
        memcpy(name, p, nl);
        name[nl] = 0;
        int k = find(s, name);
        if (k < 0) return wpk_error(ctx, WPK_ERR_INVALID_ARG, "config '%s': no knob '%s'", text, name);
        char *num_end;
        long long v = strtoll(eq + 1, &num_end, 10);
        if (num_end != end)
            return wpk_error(ctx, WPK_ERR_INVALID_ARG, "config '%s': knob '%s' needs an integer",
                             text, name);
        int idx = -1;
        for (int i = 0; i < s->knobs[k].nvalues; i++)
            if (s->knobs[k].values[i] == v) idx = i;
        if (idx < 0)
            return wpk_error(ctx, WPK_ERR_INVALID_ARG, "config '%s': %lld is not a legal value of "
                             "knob '%s'", text, v, name);
        c->choice[k] = idx;
        seen[k] = true;
        p = *end ? end + 1 : end;
    }
    for (int k = 0; k < s->nknobs; k++)
        if (!seen[k])
            return wpk_error(ctx, WPK_ERR_INVALID_ARG, "config '%s': knob '%s' is missing", text,
                             s->knobs[k].name);
    return WPK_OK;
}

static uint64_t next(uint64_t *x) {
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 2685821657736338717ULL;
}

void tune_config_random(const tune_space *s, uint64_t *rng, tune_config *c) {
    if (!*rng) *rng = 0x9E3779B97F4A7C15ULL; /* xorshift must not start at 0 */
    for (int k = 0; k < s->nknobs; k++) c->choice[k] = (int)(next(rng) % (uint64_t)s->knobs[k].nvalues);
}

void tune_config_from_index(const tune_space *s, int64_t i, tune_config *c) {
    for (int k = s->nknobs - 1; k >= 0; k--) {
        c->choice[k] = (int)(i % s->knobs[k].nvalues);
        i /= s->knobs[k].nvalues;
    }
}
