/* program.h -- the body of a cpu_program, shared by the files that make one: cpu_compile.c
 * (from the templates and the C compiler) and plan_io.c (from a compiled plan's bytes, no
 * compiler). Internal to src/compile. */
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
    cg_kernel_fn fn;        /* KERNEL */
    int kernel;             /* KERNEL: index into cpu_program.kernels */
    int nargs;
    int *value;             /* per argument: the value whose data it is at run time, -1: fixed */
    void **argv;            /* per argument: the pointer passed (fixed ones set at compile) */
    const kernel_provider *lib; /* LIB: the library provider */
    lib_kernel *lk;
    int lib_config;         /* LIB: the provider's config index */
    cpu_source source;
    const char *impl;       /* "conv2d_nchwc tile_ow=8,..." / "onednn direct" / "" (arena) */
} cpu_step;

struct cpu_program {
    arena mem;          /* steps, their argument arrays and texts */
    void **blocks;      /* wpk_malloc'd blocks behind the 64-byte aligned buffers (packed
                           weights, aligned constants, scratch): arena memory is not aligned
                           that far */
    int nblocks, cap_blocks;
    cpu_step *steps;    /* one per node */
    int nsteps;
    cpu_kernel *kernels; /* the compiled kernels (sources dropped), fn set */
    int nkernels;
    void *scratch;
    int64_t scratch_bytes;
    int threads;        /* what the kernels were made for (>= 1) */
    cpu_units units;    /* modules compiled here, or */
    void **handles;     /* modules loaded from a plan (dlopen handles) */
    int *handle_fds;    /* the memfd each was loaded from, open while it is loaded (-1: none):
                           the loader knows an object by its name "/proc/self/fd/N", so N must
                           not be reused for another object while this one is loaded */
    int nhandles;
    cpu_compile_stats stats;
};

/* n bytes at a 64-byte aligned address, owned by p; NULL when out of memory. */
void *cpu_program_alloc64(cpu_program *p, size_t n);

/* Argument arrays of node k's step on kernel kn (index ki of p->kernels): constants aligned,
 * inputs kn packs either packed now by its pack kernels or (packed[i] non-NULL, numel floats)
 * copied from the given bytes, outputs, then scratch. aligned: per value of g, a cache of the
 * aligned copies of constants (zeroed by the caller, nvalues entries). */
wpk_status cpu_program_kernel_step(wpk_context *ctx, cpu_program *p, const ir_graph *g,
                                   const ir_tensor *vals, const memory_plan *mem, void **aligned,
                                   int k, int ki, const void *const *packed);

/* Node k's step on library lib at config index `config` (lib->create with the node's tensors
 * of vals: constants' data set). Errors of lib->create (WPK_ERR_UNSUPPORTED: the library
 * refuses; the caller falls back). */
wpk_status cpu_program_lib_step(wpk_context *ctx, cpu_program *p, const ir_graph *g,
                                const ir_tensor *vals, int k, const kernel_provider *lib,
                                int config);

/* The threads a program made for opt runs on: opt->threads, else the session's default
 * (target_default_threads). */
int cpu_program_threads(const cpu_options *opt);

#endif
