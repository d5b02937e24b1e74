/* lib_runners.c -- a step runner per vendor-library provider (lib_runners.h): step_ref_runner
 * (step_cuda_lib_runner for the CUDA libraries) with the provider as its user, named as the
 * provider. */
#include "kernels/vendor/lib_runners.h"

#include <pthread.h>

#include "kernels/step_runners.h"
#include "kernels/vendor/lib.h"

#define MAX_LIBS 8

static rt_runner runners[2 * MAX_LIBS];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void register_list(const kernel_provider *const *libs, const rt_runner *base,
                          rt_runner *slots) {
    for (int i = 0; libs[i] && i < MAX_LIBS; i++) {
        slots[i] = *base;
        slots[i].name = libs[i]->name;
        slots[i].user = (void *)libs[i];
        (void)rt_runner_register(&slots[i]);
    }
}

static void register_libs(void) {
    register_list(lib_providers(), &step_ref_runner, runners);
    register_list(lib_cuda_providers(), &step_cuda_lib_runner, runners + MAX_LIBS);
}

void lib_runners_register(void) { pthread_once(&once, register_libs); }

/* In libwpk_runtime, nothing else would: a plan's library steps find their runners by name. */
__attribute__((constructor)) static void register_at_load(void) { lib_runners_register(); }
