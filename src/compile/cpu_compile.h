/* cpu_compile.h -- the cpu backend's compile step: a specialized graph (static shapes, memory
 * planned) becomes a program of kernels. Per node, compile/choice.h picks the implementation
 * (the fastest in the tuning records among the generated templates and the vendor libraries,
 * else the primary template's default config, else the reference kernel); nodes with the same
 * workload and config share one generated kernel. Each generated kernel is built at its config,
 * lowered (loop_lower), emitted as C (cg_c_emit), and all kernels of the program are compiled
 * together (translation units of many kernels, compiled concurrently, cached on disk by
 * cg_c_compile). Constant weights a template wants in another layout are pre-packed once,
 * here, by compiled pack kernels; buffers a kernel would allocate (root intermediates such as
 * a padded input) become arguments pointing into one scratch area of the program. The program
 * runs as a runtime plan (compile/plan_io.h) on the runtime's executor: each node's kernel, or
 * its reference kernel when no template takes it. */
#ifndef WPK_COMPILE_CPU_COMPILE_H
#define WPK_COMPILE_CPU_COMPILE_H

#include <stdbool.h>

#include "ir/graph.h"
#include "passes/memory_plan.h"

typedef struct cpu_program cpu_program;

typedef struct cpu_compile_stats {
    int nodes;          /* nodes of the graph */
    int kernel_nodes;   /* nodes that run generated kernels */
    int lib_nodes;      /* nodes that run library kernels */
    int tuned_nodes;    /* nodes (generated or library) on a config from the records */
    int kernels;        /* distinct kernels (workloads) */
    int fallbacks;      /* nodes a template took but could not build: reference kernels (each
                           logged as a warning naming the node and the cause) */
    int prepacked;      /* constant tensors pre-packed */
    int units;          /* translation units compiled */
    int compiler_runs;  /* of them, compiled now rather than found in the cache */
    double build_ms;    /* templates built, lowered and emitted */
    double compile_ms;  /* C compiler and loading (wall time) */
    double pack_ms;     /* pre-packing and constant copies */
} cpu_compile_stats;

typedef struct cpu_options {
    int threads;        /* threads the program runs on (0: OpenMP's default). With 1 the kernels
                           are compiled without OpenMP: a parallel region that runs on one
                           thread makes libgomp allocate a team on every run */
    const char *provider; /* cpu_choose_options.provider: NULL/"auto", "generated", "ref", or a
                             library's name */
    struct tune_db *db;   /* borrowed tuning records the choices come from, or NULL */
    bool require_compiler; /* no C compiler: fail (WPK_ERR_UNSUPPORTED) instead of running the
                              reference kernels */
    bool bf16;            /* cpu_choose_options.bf16 */
    double bf16_fp32_share; /* cpu_choose_options.bf16_fp32_share */
} cpu_options;

/* Compile g (borrowed: must outlive the program; nodes in execution order) whose values have
 * the static types of vals (one per value; constants' data set, activations' data ignored)
 * and whose activations mem places, for opt's threads (NULL: OpenMP's default). The log of ctx hears one INFO line of statistics, a WARN
 * per fallback, and, with $WPK_DUMP=lower, every kernel's loops (loop_print_func) at INFO.
 * Without a C compiler the program runs every node on its reference kernel (a warning says
 * so). Returns WPK_ERR_INTERNAL with the compiler's message when compiling fails, WPK_ERR_NOMEM.
 * *out is the caller's (cpu_program_free). */
wpk_status cpu_program_create(wpk_context *ctx, const ir_graph *g, const ir_tensor *vals,
                              const memory_plan *mem, const cpu_options *opt, cpu_program **out);
void cpu_program_free(cpu_program *p);

const cpu_compile_stats *cpu_program_stats(const cpu_program *p);

/* What node k runs: provider ("generated", "ref", or a library's name), impl (template or
 * library and its config, "" on a reference kernel) and source ("tuned", "default", "forced",
 * "reference"). Strings live as long as p. */
void cpu_program_node_info(const cpu_program *p, int k, const char **provider,
                           const char **impl, const char **source);

#endif
