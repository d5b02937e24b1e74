/* runner.h -- step runners: what runs one step of a plan, found by the name the step carries
 * ("generated", "ref", "onednn", ...). A runner is a vtable with a self pointer: prepare makes a
 * step's state once at load (looks up a symbol, decodes a payload, packs weights), run executes
 * the step on its argument pointers and allocates nothing, release frees the state. The
 * runtime registers its own ("generated", runtime/cpu); runners that need the compiler's IR
 * (reference kernels, vendor libraries) are registered from outside (kernels/step_runners.h). */
#ifndef WPK_RUNTIME_RUNNER_H
#define WPK_RUNTIME_RUNNER_H

#include "runtime/plan.h"

/* What prepare may read: the plan, each tensor's address (NULL where it has no bytes), the
 * loaded modules (as the backend loaded them), the threads to run on, the backend. All
 * borrowed: they outlive the state. */
typedef struct rt_step_env {
    const rt_plan *plan;
    void *const *data;      /* per tensor of plan */
    void *const *modules;   /* per module of plan */
    int threads;
    struct rt_backend *backend; /* what the steps run on (a device runner reaches its stream) */
} rt_step_env;

typedef struct rt_runner rt_runner;
struct rt_runner {
    const char *name;
    /* The state of step `step` of env->plan into *state (NULL is a valid state). Errors name
     * the step's node: WPK_ERR_PARSE for a payload or argument list it cannot take,
     * WPK_ERR_UNSUPPORTED, WPK_ERR_NOMEM. */
    wpk_status (*prepare)(const rt_runner *self, wpk_context *ctx, const rt_step_env *env,
                          int step, void **state);
    /* Run the step: argv[a] is the address of the step's argument a (NULL for -1). */
    wpk_status (*run)(void *state, wpk_context *ctx, void *const *argv);
    void (*release)(void *state);
    void *user;             /* the runner's own data (a library provider) */
};

/* Add r (borrowed: must stay for the process's life) to the registry; a runner of the same
 * name is replaced. Thread-safe. WPK_ERR_NOMEM when the registry is full. */
wpk_status rt_runner_register(const rt_runner *r);
/* The runner called name, or NULL. Thread-safe. */
const rt_runner *rt_runner_find(const char *name);

#endif
