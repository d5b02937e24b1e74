/* finalists.c -- see finalists.h. */
#include "tune/finalists.h"

#include <stdio.h>
#include <string.h>

void tune_finalists_add(tune_finalists *f, const char *config, double median) {
    int at = -1;
    for (int i = 0; i < f->n && at < 0; i++)
        if (!strcmp(f->v[i].text, config)) at = i;
    if (at >= 0) {
        if (median >= f->v[at].s) return;
        /* faster this time: take it out and insert it again below */
        memmove(&f->v[at], &f->v[at + 1], sizeof f->v[0] * (size_t)(f->n - at - 1));
        f->n--;
    }
    at = f->n;
    while (at > 0 && f->v[at - 1].s > median) at--;
    if (at >= f->max) return;
    int keep = f->n < f->max ? f->n : f->max - 1;
    memmove(&f->v[at + 1], &f->v[at], sizeof f->v[0] * (size_t)(keep - at));
    f->v[at].s = median;
    snprintf(f->v[at].text, sizeof f->v[at].text, "%s", config);
    if (f->n < f->max) f->n++;
}

bool tune_final_beats(double challenger_s, double default_s) {
    return challenger_s < default_s * (1.0 - TUNE_FINAL_MARGIN);
}
