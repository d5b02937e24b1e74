/* finalists.h -- a task's finalists: its best few distinct configs by their measured medians,
 * fastest first, each at its fastest median. The tuner's final re-measurement chooses from
 * them (tuner.c), and the strategies bench judges a run by them (bench/tune_resnet18_convs.c). */
#ifndef WPK_TUNE_FINALISTS_H
#define WPK_TUNE_FINALISTS_H

#include <stdbool.h>

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

/* Whether a challenger's time in the finals beats the default's by more than the finals' noise
 * (TUNE_FINAL_MARGIN of the default's time): the default stays unless it does. The fastest of a
 * few configs within noise of each other is fastest by luck as much as by speed; on the
 * 2-core Intel Xeon, picks 1-2% faster than their default in the finals re-timed 1-6% slower
 * in the bench. The tuner's summary and `wpk compile` both apply it. */
#define TUNE_FINAL_MARGIN 0.02
bool tune_final_beats(double challenger_s, double default_s);

#endif
