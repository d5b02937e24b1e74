/* generated.c -- the step runner "generated": a compiled kernel, a module's symbol called as
 * fn(void **argv) with the step's argument addresses (inputs, outputs, scratch). Its state is
 * the function itself. */
#include <string.h>

#include "runtime/cpu/cpu_rt.h"

typedef void (*kernel_fn)(void **argv);

static wpk_status prepare(const rt_runner *self, wpk_context *ctx, const rt_step_env *env,
                          int step, void **state) {
    (void)self;
    const rt_step *s = &env->plan->steps[step];
    if (s->module < 0)
        return wpk_error(ctx, WPK_ERR_PARSE, "the plan is damaged: node '%s' runs a generated "
                         "kernel from no module", s->node);
    void *sym = rt_cpu_module_symbol(env->modules[s->module], s->symbol);
    if (!sym)
        return wpk_error(ctx, WPK_ERR_PARSE, "the plan is damaged: kernel '%s' is not in its "
                         "object", s->symbol);
    *state = sym;
    return WPK_OK;
}

static wpk_status run(void *state, wpk_context *ctx, void *const *argv) {
    (void)ctx;
    kernel_fn fn;
    memcpy(&fn, &state, sizeof fn); /* a data pointer from dlsym, called as the function it is */
    fn((void **)argv);
    return WPK_OK;
}

const rt_runner rt_cpu_generated_runner = {
    .name = "generated",
    .prepare = prepare,
    .run = run,
    .release = NULL,
    .user = NULL,
};
