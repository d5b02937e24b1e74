/* runner.c -- the registry of step runners (runner.h): a fixed table under a lock, since
 * runners register from library constructors and lookups come from any thread. */
#include "runtime/runner.h"

#include <pthread.h>
#include <string.h>

#define MAX_RUNNERS 32

static const rt_runner *runners[MAX_RUNNERS];
static int nrunners;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

wpk_status rt_runner_register(const rt_runner *r) {
    wpk_status st = WPK_OK;
    pthread_mutex_lock(&lock);
    int i = 0;
    while (i < nrunners && strcmp(runners[i]->name, r->name)) i++;
    if (i < nrunners) runners[i] = r;
    else if (nrunners < MAX_RUNNERS) runners[nrunners++] = r;
    else st = WPK_ERR_NOMEM;
    pthread_mutex_unlock(&lock);
    return st;
}

const rt_runner *rt_runner_find(const char *name) {
    const rt_runner *found = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nrunners && !found; i++)
        if (!strcmp(runners[i]->name, name)) found = runners[i];
    pthread_mutex_unlock(&lock);
    return found;
}
