/* plan_io.h -- a cpu_program as bytes of a compiled plan and back: per node what it runs (the
 * generated kernel, the library and its config, or the reference kernel) and why, the compiled
 * kernel objects (the shared objects the C compiler made, copied whole), each kernel's symbol and
 * argument layout, and every pre-packed weight. Loading needs no C compiler: the objects are
 * loaded from memory (memfd_create, else a private temporary file), the weights copied back, the
 * library kernels made again from their configs. Internal to src/compile and src/api. */
#ifndef WPK_COMPILE_PLAN_IO_H
#define WPK_COMPILE_PLAN_IO_H

#include "runtime/artifact.h"
#include "compile/cpu_compile.h"

/* Append p (made for g) to w. WPK_ERR_IO when a kernel object cannot be read back from the
 * kernel cache, WPK_ERR_NOMEM. */
wpk_status cpu_program_save(wpk_context *ctx, const cpu_program *p, const ir_graph *g,
                            artifact_writer *w);

/* Read a program written by cpu_program_save for the graph g (the same graph, specialized and
 * planned the same way: vals and mem as for cpu_program_create) from r, to run on `threads`
 * threads (0: the default). The node names and op types must match the saved ones
 * (WPK_ERR_PARSE otherwise, as for any inconsistent byte); `what` names the file in messages.
 * WPK_ERR_INTERNAL when a kernel object does not load, errors of the libraries' create.
 * *out is the caller's (cpu_program_free). */
wpk_status cpu_program_load(wpk_context *ctx, const char *what, artifact_reader *r,
                            const ir_graph *g, const ir_tensor *vals, const memory_plan *mem,
                            int threads, cpu_program **out);

#endif
