/* provider_defaults.c -- what every provider may share, DSL template or library: appending to a
 * workload key (common.h) and the legality of a config limited by its knobs' ranges alone. Apart
 * from the templates' helpers, so that the library providers, which the runtime library
 * carries, need nothing else of them. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kernels/common.h"

bool kernel_legal_in_space(const kernel_provider *self, const tune_task *task, const tune_space *s,
                           const tune_config *cfg) {
    (void)self;
    (void)task;
    for (int k = 0; k < s->nknobs; k++)
        if (cfg->choice[k] < 0 || cfg->choice[k] >= s->knobs[k].nvalues) return false;
    return true;
}

void tune_key_add(tune_task *task, const char *fmt, ...) {
    size_t len = strnlen(task->key, sizeof task->key);
    if (len + 1 >= sizeof task->key) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(task->key + len, sizeof task->key - len, fmt, ap);
    va_end(ap);
}
