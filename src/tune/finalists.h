/* finalists.h -- a task's finalists: its best few distinct configs by their measured medians,
 * fastest first, each at its fastest median. The tuner's final re-measurement chooses from
 * them (tuner.c), and the strategies bench judges a run by them (bench/tune_resnet18_convs.c). */
#ifndef WPK_TUNE_FINALISTS_H
#define WPK_TUNE_FINALISTS_H

#include "tune/measure.h"

typedef struct tune_finalists {
    struct {
        double s;             /* the config's fastest median, seconds */
        char text[512];
    } v[TUNE_MAX_BATCH];
    int n, max;               /* max: how many are kept, 1 to TUNE_MAX_BATCH */
} tune_finalists;

/* One measurement of `config`: it joins (or moves up in) f when it is among the max fastest. */
void tune_finalists_add(tune_finalists *f, const char *config, double median);

#endif
