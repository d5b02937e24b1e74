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
 * WPK_ERR_UNSUPPORTED for IR it cannot express. Deterministic for the same f and options. */
wpk_status cg_c_emit(wpk_context *ctx, const loop_func *f, const cg_c_options *opt, strbuf *out);

typedef struct cg_module cg_module;
typedef void (*cg_kernel_fn)(void *const *args);

/* Compile `source` into a shared object (cc -O3 -march=native -fopenmp -shared -fPIC) and load
 * it. Objects are cached under $WPK_CACHE_DIR (default ~/.cache/wpk/kernels) by a hash of source,
 * flags and compiler version, so nothing compiles twice; a cache entry is written atomically.
 * A compile error returns WPK_ERR_INTERNAL with the compiler's message. Thread-safe. */
wpk_status cg_c_compile(wpk_context *ctx, const char *source, cg_module **out);
/* The function `symbol` in m, or NULL. */
cg_kernel_fn cg_module_fn(const cg_module *m, const char *symbol);
void cg_module_free(cg_module *m);

#endif
