/* tasks.c -- releasing a model's tuning tasks (tasks.h). */
#include "tune/tasks.h"

#include <string.h>

#include "base/alloc.h"

void tune_taskset_free(tune_taskset *t) {
    if (!t) return;
    wpk_free(t->tasks);
    if (t->owner_free) t->owner_free(t->owner);
    memset(t, 0, sizeof *t);
}
