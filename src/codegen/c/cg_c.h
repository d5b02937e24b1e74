/* cg_c.h -- C code generation from the loop IR, and the JIT that compiles it with the system C
 * compiler into a shared object loaded with dlopen. The C target is the reference every other
 * code generator is tested against. */
#ifndef WPK_CODEGEN_C_CG_C_H
#define WPK_CODEGEN_C_CG_C_H

#include "base/strbuf.h"
#include "loop/loop.h"

typedef struct cg_c_options {
    int vector_bits;   /* widest vector the target has: 512 (AVX-512), 256 (AVX2), 0 (scalar) */
    bool openmp;       /* emit #pragma omp parallel for on LOOP_PARALLEL loops */
} cg_c_options;

cg_c_options cg_c_default_options(void); /* from the running CPU (base/target.h) */

/* Append the C source of f: `void NAME(void *const *args)` with restrict-qualified, aligned
 * typed pointers, GCC vector types for vector expressions, OpenMP pragmas. Returns
 * WPK_ERR_UNSUPPORTED for IR it cannot express. Deterministic for the same f and options.
 * Contract with the caller: args[i] is aligned to f->args[i]->align bytes (the code tells the
 * compiler so) and distinct arguments do not overlap (restrict). f->name must be a C identifier
 * (WPK_ERR_INVALID_ARG otherwise); other names (buffers, variables) are made valid as name_id.
 * Vectors take their lane count from the IR; lane counts that are not powers of two live in the
 * next power of two. Integer DIV/MOD are floor division/modulo; float MIN/MAX keep a NaN first
 * operand (b < a ? b : a), as the reference kernels' comparisons do. LOOP_PARALLEL loops become
 * `omp parallel for` when not inside another; leftover LOOP_VECTORIZED loops get `omp simd` only
 * when iterations are evidently independent; LOOP_BIND is WPK_ERR_UNSUPPORTED. A stack
 * allocation that every access reads or writes as a whole vector at a constant offset (a
 * register tile with its loops unrolled) becomes one vector variable per offset. `out` is
 * appended to only on success. */
wpk_status cg_c_emit(wpk_context *ctx, const loop_func *f, const cg_c_options *opt, strbuf *out);

typedef struct cg_module cg_module;
typedef void (*cg_kernel_fn)(void *const *args);

/* Compile `source` into a shared object (cc -O3 -march=native -fopenmp -shared -fPIC) and load
 * it. Objects are cached under $WPK_CACHE_DIR (default ~/.cache/wpk/kernels) by a hash of source,
 * flags and compiler version, so nothing compiles twice; a cache entry is written atomically.
 * A compile error returns WPK_ERR_INTERNAL with the compiler's message. Thread-safe.
 * Details: the compiler is $CC (words split on blanks, run without a shell) or `cc`, with
 * -std=c11 -ffp-contract=fast -fno-math-errno and never -ffast-math (NaN and accuracy as the
 * reference kernels define them). The key is the SHA-256 of source, compiler command, flags, the
 * first line of `$CC --version` and the CPU's identity (-march=native depends on it); the cache
 * directory is $WPK_CACHE_DIR, else $XDG_CACHE_HOME/wpk/kernels, else ~/.cache/wpk/kernels,
 * created when missing (WPK_ERR_IO when it cannot be). Each object's source sits next to it
 * (KEY.c); a source that failed to compile is kept as KEY.failed.c and named in the message.
 * No compiler at all: WPK_ERR_UNSUPPORTED. *out is the caller's, freed with cg_module_free. */
wpk_status cg_c_compile(wpk_context *ctx, const char *source, cg_module **out);
/* Compiler runs by cg_c_compile in this process so far (a cache hit runs none): for tests and
 * statistics. Thread-safe. */
int cg_c_compile_count(void);
/* The function `symbol` in m, or NULL; valid until cg_module_free(m). */
cg_kernel_fn cg_module_fn(const cg_module *m, const char *symbol);
/* Unload m (NULL is fine). Its kernels must not be running. */
void cg_module_free(cg_module *m);

#endif
