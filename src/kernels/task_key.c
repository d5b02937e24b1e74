/* task_key.c -- appending to a workload key (common.h), apart from the templates' helpers so
 * that the library providers, which the runtime library carries, need nothing else of them. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kernels/common.h"

void tune_key_add(tune_task *task, const char *fmt, ...) {
    size_t len = strnlen(task->key, sizeof task->key);
    if (len + 1 >= sizeof task->key) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(task->key + len, sizeof task->key - len, fmt, ap);
    va_end(ap);
}
