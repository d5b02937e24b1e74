/* unit.h -- compiling a program's kernels together: their sources merged into a few translation
 * units, compiled concurrently by cg_c_compile (cached on disk), each kernel's functions looked
 * up in its unit. Internal to src/compile. */
#ifndef WPK_KERNELS_CPU_UNIT_H
#define WPK_KERNELS_CPU_UNIT_H

#include "kernels/cpu_kernel.h"

#define CPU_MAX_UNITS 8

typedef struct cpu_units {
    cg_module *modules[CPU_MAX_UNITS];
    int nunits;
    int compiled;   /* compiler runs (units not found in the cache) */
} cpu_units;

/* Merge n emitted sources (each a complete cg_c_emit text, or several appended) into one
 * translation unit appended to out: includes and typedefs, then helpers, each once, then every
 * function in order. Deterministic. WPK_ERR_NOMEM. */
wpk_status cpu_unit_merge(wpk_context *ctx, const strbuf *const *sources, int n, strbuf *out);

/* Compile kernels ks[0..n) (their sources) and set each one's fn and pack_fn. The modules are
 * the caller's (cpu_units_free) and must outlive every use of the functions. Errors: those of
 * cg_c_compile (the first unit's that failed), WPK_ERR_INTERNAL for a symbol missing. */
wpk_status cpu_units_compile(wpk_context *ctx, cpu_kernel *const *ks, int n, cpu_units *out);
void cpu_units_free(cpu_units *u);

#endif
