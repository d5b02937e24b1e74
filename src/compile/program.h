/* program.h -- the body of a cpu_program, shared by the file that makes one (cpu_compile.c,
 * from the templates and the C compiler) and the one that makes it a runtime plan
 * (plan_io.c). Internal to src/compile. */
#ifndef WPK_COMPILE_PROGRAM_H
#define WPK_COMPILE_PROGRAM_H

#include "compile/choice.h"
#include "compile/cpu_compile.h"
#include "kernels/cpu_kernel.h"
#include "kernels/cpu_unit.h"
#include "kernels/vendor/lib.h"

typedef enum cpu_step_kind { CPU_STEP_REF = 0, CPU_STEP_KERNEL, CPU_STEP_LIB } cpu_step_kind;

/* One node's work: a compiled kernel, a library kernel, or its reference kernel. */
typedef struct cpu_step {
    cpu_step_kind kind;
    int kernel;             /* KERNEL: index into cpu_program.kernels */
    int nargs;              /* KERNEL: the kernel's arguments */
    void **argv;            /* KERNEL, per argument: a pre-packed constant, else NULL */
    const kernel_provider *lib; /* LIB: the library provider */
    int lib_config;         /* LIB: the provider's config index */
    cpu_source source;
    const char *impl;       /* "conv2d_nchwc tile_ow=8,..." / "onednn direct" / "" (arena) */
} cpu_step;

struct cpu_program {
    arena mem;          /* steps, their argument arrays and texts */
    void **blocks;      /* wpk_malloc'd blocks behind the 64-byte aligned buffers (packed
                           weights, aligned constants they are packed from): arena memory
                           is not aligned that far */
    int nblocks, cap_blocks;
    cpu_step *steps;    /* one per node */
    int nsteps;
    cpu_kernel *kernels; /* the compiled kernels (sources dropped), fn set */
    int nkernels;
    int64_t scratch_bytes; /* the largest kernel's scratch (the plan places it) */
    int threads;        /* what the kernels were made for (>= 1) */
    cpu_units units;    /* modules compiled here */
    cpu_compile_stats stats;
};

/* The threads a program made for opt runs on: opt->threads, else the session's default
 * (target_default_threads). */
int cpu_program_threads(const cpu_options *opt);

#endif
