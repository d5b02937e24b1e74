/* lib.h -- vendor-library kernel providers (src/kernels/vendor): oneDNN and OpenBLAS kernels
 * for the nodes the cpu backend runs, offered as candidates next to the generated ones. Each
 * provider lists its algorithms for a node as configs; the tuner measures every one into the
 * records like any generated config (through kernels/library.c, which wraps each
 * provider as a template), and the cpu backend runs the one measured fastest.
 *
 * Nodes are seen as the cpu backend sees them after optimization, with static float32 shapes:
 * Conv and wpk::FusedConv (NCHW; bias, fused activation and residual add as the node's
 * attributes and inputs say), wpk::ConvNCHWc (blocked tensors), Gemm / wpk::FusedGemm, MatMul /
 * wpk::FusedMatMul. A provider that cannot reproduce the node's exact semantics (an activation
 * the library has no post-op for, a layout it does not take) does not support it. */
#ifndef WPK_LIB_LIB_H
#define WPK_LIB_LIB_H

#include <stdbool.h>

#include "ir/graph.h"

#define LIB_CONFIG_MAX 64
#define LIB_MAX_CONFIGS 16

typedef struct lib_kernel lib_kernel;

typedef struct lib_provider {
    const char *name;   /* "onednn", "openblas" */
    /* Whether the provider implements node n with these tensors (in/out: one per node input /
     * output, NULL where omitted; static shapes; constants' data set). */
    bool (*supports)(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out);
    /* Names of its configs for n ("direct", "gemm", "winograd", ...), at most LIB_MAX_CONFIGS,
     * into names; returns how many (>= 1 when supports is true). Config i is what create gets. */
    int (*configs)(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out,
                   char (*names)[LIB_CONFIG_MAX]);
    /* A kernel for n at config index `config`, to run on `threads` threads (0: OpenMP's
     * default). Constant inputs (those whose tensors have data here: weights, bias) are packed
     * now into the layout the library wants and their data is not read again. Errors:
     * WPK_ERR_UNSUPPORTED when the library refuses this config for this node (the message says
     * why: not a candidate, not a failure of the model), WPK_ERR_NOMEM. *out_k is the caller's
     * (destroy). */
    wpk_status (*create)(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out, int config, int threads, lib_kernel **out_k);
    /* Run on this call's buffers: in/out as at create, data set (for the non-constant inputs and
     * the outputs; the constants' are ignored). Allocates nothing. */
    wpk_status (*run)(wpk_context *ctx, lib_kernel *k, ir_tensor *const *in,
                      ir_tensor *const *out);
    void (*destroy)(lib_kernel *k);
    /* The buffers holding k's copies of its constant inputs (packed weights, bias), as
     * (start, bytes) pairs, at most max; returns how many. The tuner flushes them from the
     * caches to time k as a model runs it when they are larger than the cache. */
    int (*constants)(const lib_kernel *k, const void **start, size_t *bytes, int max);
    /* "oneDNN v3.0.0 (cpu runtime: OpenMP)", for provenance; static. */
    const char *(*version)(void);
} lib_provider;

/* The providers built in, NULL-terminated (a library that was not found at build time is left
 * out). */
const lib_provider *const *lib_providers(void);
/* The provider called name, or NULL. */
const lib_provider *lib_provider_find(const char *name);

#endif
