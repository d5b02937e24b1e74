/* cpu_rt.h -- the cpu backend's parts shared by its files: kernel modules (shared objects)
 * loaded from a plan's bytes, and its step runner "generated" (a module's symbol called as
 * fn(void **argv)). Internal to src/runtime/cpu. */
#ifndef WPK_RUNTIME_CPU_CPU_RT_H
#define WPK_RUNTIME_CPU_CPU_RT_H

#include "runtime/runner.h"

typedef struct rt_cpu_module rt_cpu_module;

/* dlopen the shared object held in data (borrowed for the call): through a memfd (nothing
 * touches the disk), else a private temporary file removed once loaded. WPK_ERR_IO when there
 * is no place to load it from, WPK_ERR_INTERNAL when it does not load (the loader's message),
 * WPK_ERR_NOMEM. `what` names the plan. *out is the caller's (rt_cpu_module_free). */
wpk_status rt_cpu_module_load(wpk_context *ctx, const char *what, const void *data, size_t len,
                              rt_cpu_module **out);
void rt_cpu_module_free(rt_cpu_module *m);
/* The address of symbol in m, or NULL. */
void *rt_cpu_module_symbol(const rt_cpu_module *m, const char *symbol);

/* The runner "generated". */
extern const rt_runner rt_cpu_generated_runner;

#endif
