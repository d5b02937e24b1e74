/* wpk_runtime.h -- Woodpecker's runtime API: load a compiled plan (.wpk, made by `wpk compile`
 * or wpk_compile) and run it, with no compiler, no ONNX reader and no tuning database. Link
 * libwpk_runtime (pkg-config wpk_runtime). Also the types the whole API shares (status, dtype,
 * context, tensor view), which wpk.h includes from here.
 *
 * Every call that can fail returns a wpk_status and leaves a message naming the cause and
 * place (file, node) on the wpk_context it was given; read it with wpk_context_error(). Handles
 * are opaque. A context is not thread-safe: use one per thread, or serialize calls.
 */
#ifndef WPK_RUNTIME_H
#define WPK_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum wpk_status {
    WPK_OK = 0,
    WPK_ERR_INVALID_ARG,  /* a bad argument: wrong input name, shape or dtype, bad option */
    WPK_ERR_IO,           /* a file could not be opened, read or written */
    WPK_ERR_PARSE,        /* the bytes are not what they claim to be (not an ONNX model, bad .npy) */
    WPK_ERR_MODEL,        /* a well-formed model that is inconsistent (bad attribute, dangling edge) */
    WPK_ERR_UNSUPPORTED,  /* valid ONNX that Woodpecker does not implement (op, dtype, opset) */
    WPK_ERR_NOMEM,        /* an allocation failed */
    WPK_ERR_INTERNAL      /* a bug in Woodpecker */
} wpk_status;

/* Element types, numbered as ONNX's TensorProto.DataType. */
typedef enum wpk_dtype {
    WPK_DTYPE_UNDEFINED = 0,
    WPK_DTYPE_FLOAT32 = 1,
    WPK_DTYPE_UINT8 = 2,
    WPK_DTYPE_INT8 = 3,
    WPK_DTYPE_INT32 = 6,
    WPK_DTYPE_INT64 = 7,
    WPK_DTYPE_BOOL = 9,
    WPK_DTYPE_FLOAT16 = 10,
    WPK_DTYPE_FLOAT64 = 11,
    WPK_DTYPE_BFLOAT16 = 16
} wpk_dtype;

#define WPK_MAX_DIMS 8

typedef enum wpk_log_level { WPK_LOG_ERROR, WPK_LOG_WARN, WPK_LOG_INFO, WPK_LOG_DEBUG } wpk_log_level;

typedef void (*wpk_log_fn)(void *user, wpk_log_level level, const char *message);

typedef struct wpk_context wpk_context;
typedef struct wpk_plan wpk_plan;

/* A borrowed view of a tensor: shape, dtype and data owned by someone else. */
typedef struct wpk_tensor_view {
    const char *name;          /* borrowed; valid while the owning model/session/plan lives */
    wpk_dtype dtype;
    int ndim;
    int64_t dims[WPK_MAX_DIMS]; /* -1 for a dim that is symbolic in the model */
    const char *dim_names[WPK_MAX_DIMS]; /* symbolic dim names ("N"), NULL where the dim is fixed */
    const void *data;          /* NULL where the view only describes (model inputs) */
} wpk_tensor_view;

/* One node of the last run's profile (a session or plan created with profile set). */
typedef struct wpk_node_profile {
    const char *node;      /* borrowed until the session / plan is freed */
    const char *op;        /* "Conv", "wpk::FusedConv" */
    const char *provider;  /* "generated", "onednn", "openblas", "ref" */
    const char *impl;      /* the template or library and its config:
                              "conv2d_nchwc tile_ow=8,..." / "onednn algo=direct" / "" */
    const char *source;    /* "tuned" (best of its records), "tuned-b1" (no records of this
                              workload: the best of the same node's at batch 1), "default" (no
                              records: the default config), "forced" (params.provider),
                              "reference" */
    double ms;             /* wall time of the node in the last run */
} wpk_node_profile;

/* ---- context: error messages and logging ---- */

/* Create a context. Returns NULL only when out of memory. */
wpk_context *wpk_context_create(void);
void wpk_context_free(wpk_context *ctx);
/* The message of the last failed call on ctx ("" if none). Borrowed until the next call. */
const char *wpk_context_error(const wpk_context *ctx);
/* Route log lines (warnings, info) to fn; NULL silences them. user is passed back as is. */
void wpk_context_set_log(wpk_context *ctx, wpk_log_fn fn, void *user, wpk_log_level max_level);

/* ---- compiled plans ---- */

typedef struct wpk_plan_params {
    int threads;   /* threads the kernels run on; 0: the machine's physical cores */
    int profile;   /* nonzero: time every step of each run (wpk_plan_profile) */
} wpk_plan_params;

wpk_plan_params wpk_plan_default_params(void);

/* Load the plan at path for this machine and make it ready to run on its target's backend:
 * the cpu, or for a CUDA plan CUDA device 0 (its fingerprint must be the plan's; inputs are
 * uploaded and outputs downloaded by each run); its kernels loaded from memory, its constants
 * and workspace allocated, each step prepared. params NULL: the defaults. Errors: WPK_ERR_IO
 * (the file cannot be read), WPK_ERR_PARSE (not a plan, truncated or damaged),
 * WPK_ERR_UNSUPPORTED (another format version; another machine's target or no GPU for a CUDA
 * plan, the message naming the plan's target and this machine's; a step on a library this
 * build lacks), WPK_ERR_NOMEM; the message names the file. *out is the caller's
 * (wpk_plan_free). ctx must outlive the plan (it hears its run errors). */
wpk_status wpk_plan_load(wpk_context *ctx, const char *path, const wpk_plan_params *params,
                         wpk_plan **out);
/* Free the plan and everything it holds (NULL is fine). */
void wpk_plan_free(wpk_plan *plan);

int wpk_plan_num_inputs(const wpk_plan *plan);
int wpk_plan_num_outputs(const wpk_plan *plan);
/* Describe input / output i (0 <= i < count): the dims the plan was compiled for, the names of
 * the model's symbolic dims; data NULL. Strings borrowed from the plan. */
wpk_tensor_view wpk_plan_input_info(const wpk_plan *plan, int i);
wpk_tensor_view wpk_plan_output_info(const wpk_plan *plan, int i);

/* Copy data into input `name` (dtype and dims as the plan's input: a plan runs the shapes it
 * was compiled for). WPK_ERR_INVALID_ARG for an unknown name, another dtype or rank;
 * WPK_ERR_UNSUPPORTED "the plan was compiled for inputs ..." for other dims. Allocates
 * nothing. */
wpk_status wpk_plan_set_input(wpk_plan *plan, const char *name, wpk_dtype dtype,
                              const int64_t *dims, int ndim, const void *data);

/* Run every step on the inputs bound (an input never bound reads as zeros). Allocates
 * nothing; returns a step's first error (the message names its node). Not thread-safe for one
 * plan: the workspace is the plan's; load a plan per thread. */
wpk_status wpk_plan_run(wpk_plan *plan);

/* Output i of the last run: *out's data is borrowed until the next run or wpk_plan_free.
 * WPK_ERR_INVALID_ARG for an index out of range or a plan that has not run. */
wpk_status wpk_plan_output(wpk_plan *plan, int i, wpk_tensor_view *out);

/* The per-step profile of the last run, in execution order (one entry per node of the
 * compiled graph): *out borrowed until the next run or free, *n entries. WPK_ERR_INVALID_ARG
 * when the plan was loaded without params.profile or has not run. */
wpk_status wpk_plan_profile(wpk_plan *plan, const wpk_node_profile **out, int *n);

/* ---- utilities ---- */

const char *wpk_status_name(wpk_status status);
const char *wpk_dtype_name(wpk_dtype dtype);
size_t wpk_dtype_size(wpk_dtype dtype);
const char *wpk_version(void);

#ifdef __cplusplus
}
#endif
#endif
