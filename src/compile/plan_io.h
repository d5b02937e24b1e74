/* plan_io.h -- a cpu_program as a runtime plan (runtime/plan.h): the tensor table from the
 * memory plan (activations at their workspace offsets, kernel scratch above them), constants
 * and pre-packed weights in the constants blob, the compiled kernel objects copied whole, and
 * one step per node: the generated kernel (module + symbol), a library kernel or the reference
 * kernel (the node as payload, kernels/step_runners.h). The plan is built in memory (a session
 * runs it through the runtime's executor) or written into an artifact (`wpk compile`); loading
 * and running are the runtime's alone. Internal to src/compile and src/api. */
#ifndef WPK_COMPILE_PLAN_IO_H
#define WPK_COMPILE_PLAN_IO_H

#include "runtime/plan.h"
#include "compile/cpu_compile.h"

/* How a plan was made, kept in it for reports. */
typedef struct plan_meta {
    int opt_level, batch;
    const char *provider, *records; /* "" for none */
} plan_meta;

/* A plan in memory and the bytes it points at (modules, payloads, the constants blob). */
typedef struct cpu_plan cpu_plan;

/* p, made for g (specialized: vals one static type per value, mem its memory plan), as a plan
 * into *out (the caller's, cpu_plan_free). named: the graph before specialization, whose
 * inputs keep their symbolic dim names, or NULL (no names). meta: NULL for none. The plan
 * borrows strings of p, g, named and meta: they must outlive it. Its constants blob is 64-byte
 * aligned. WPK_ERR_IO when a kernel object cannot be read back from the kernel cache,
 * WPK_ERR_UNSUPPORTED for a node whose attributes cannot be written, WPK_ERR_NOMEM. */
wpk_status cpu_program_plan(wpk_context *ctx, const cpu_program *p, const ir_graph *g,
                            const ir_tensor *vals, const memory_plan *mem, const ir_graph *named,
                            const plan_meta *meta, cpu_plan **out);
const rt_plan *cpu_plan_get(const cpu_plan *c);
void cpu_plan_free(cpu_plan *c);

/* cpu_program_plan's plan appended to w. Its errors. */
wpk_status cpu_program_save(wpk_context *ctx, const cpu_program *p, const ir_graph *g,
                            const ir_tensor *vals, const memory_plan *mem, const ir_graph *named,
                            const plan_meta *meta, byte_writer *w);

#endif
