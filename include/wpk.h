/* wpk.h -- Woodpecker's public C API: load an ONNX model, inspect it, run it, compile it into a
 * plan. The types it shares with the runtime (status, dtype, context, tensor view, profile) and
 * the runtime's own API (wpk_plan_*) are in wpk_runtime.h, included here.
 *
 * Every call that can fail returns a wpk_status and leaves a message naming the cause
 * and place (file, node, op, attribute) on the wpk_context it was given; read it with
 * wpk_context_error(). Handles are opaque. A context is not thread-safe: use one per
 * thread, or serialize calls. Models are immutable after load and may be shared by
 * sessions created on the same thread.
 */
#ifndef WPK_H
#define WPK_H

#include "wpk_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wpk_model wpk_model;
typedef struct wpk_session wpk_session;

/* ---- model: a loaded, checked ONNX graph ---- */

/* Load an ONNX file (with external data files next to it) and infer its shapes.
 * A model whose ops are all read but some unsupported still loads (so wpk_model_describe
 * can list them); wpk_session_create refuses it. *out is owned by the caller. */
wpk_status wpk_model_load(wpk_context *ctx, const char *path, wpk_model **out);
void wpk_model_free(wpk_model *model);

int wpk_model_num_inputs(const wpk_model *model);
int wpk_model_num_outputs(const wpk_model *model);
/* Describe graph input/output i (0 <= i < count); data is NULL. */
wpk_tensor_view wpk_model_input(const wpk_model *model, int i);
wpk_tensor_view wpk_model_output(const wpk_model *model, int i);

/* List every unsupported op at once: returns WPK_ERR_UNSUPPORTED with a message naming each
 * op type and its nodes, WPK_OK when everything is supported. */
wpk_status wpk_model_check_supported(wpk_context *ctx, const wpk_model *model);

/* A human-readable report: inputs/outputs, op histogram, parameter count, FLOPs (with symbolic
 * dims bound to 1), unsupported ops. The returned string is owned by the caller (free()). */
char *wpk_model_describe(const wpk_model *model);

/* The graph as text (one line per node, with inferred shapes): for `wpk info --graph` and
 * golden tests. Owned by the caller (free()). */
char *wpk_model_print(const wpk_model *model);

/* ---- optimization ---- */

typedef struct wpk_optimize_params {
    int level;           /* 0: none; 1: cleanup (constant folding, identity removal, reshape
                            simplification, CSE, dead nodes); 2 (default): + BatchNormalization
                            folding and epilogue fusion; 3: + blocked NCHW[x]c layout */
    const char *dump;    /* print the graph after this pass, or after every pass with "all",
                            through the log callback at WPK_LOG_INFO; NULL: $WPK_DUMP */
    const char *passes;  /* comma-separated pass names to run instead of the level's; NULL */
} wpk_optimize_params;

wpk_optimize_params wpk_optimize_default_params(void);

/* Rewrite the model's graph with the graph passes and infer its shapes again. Per-pass change
 * counts are logged at WPK_LOG_INFO. On failure the model is unchanged only in the sense that
 * it must not be used further: free it. */
wpk_status wpk_model_optimize(wpk_context *ctx, wpk_model *model, const wpk_optimize_params *params);

/* Write the model as an ONNX file: standard ops where the semantics are standard, the ops our
 * passes create in the "wpk" domain. WPK_ERR_IO when the file cannot be written (an existing
 * file at path is replaced only once the new one is complete). */
wpk_status wpk_model_save(wpk_context *ctx, const wpk_model *model, const char *path);

int wpk_model_num_nodes(const wpk_model *model);

typedef struct wpk_memory_stats {
    size_t planned_bytes;    /* peak of the planned activation workspace */
    size_t unplanned_bytes;  /* the sum of every activation's size (no reuse) */
} wpk_memory_stats;

/* Plan activation memory for the model's graph as it is (optimize first to plan the optimized
 * graph), with symbolic dims bound to 1. */
wpk_status wpk_model_memory_stats(wpk_context *ctx, const wpk_model *model, wpk_memory_stats *out);

/* ---- kernels of the cpu backend ---- */

/* What the cpu backend compiles for the model's graph as it is (optimize first to see the
 * optimized graph's), specialized with symbolic dims bound to 1: one entry per kernel task
 * (nodes of the same workload share one), giving its workload key, template, node count, share
 * of the FLOPs, knobs with their value counts and the size of its search space, then the line
 * of wpk_model_reference_kernels. Deterministic. *out is the caller's (free()). */
wpk_status wpk_model_space(wpk_context *ctx, const wpk_model *model, char **out);

/* "reference kernels (no template): Op (n nodes), ..." ("none" when every node that computes
 * runs a generated kernel; views such as Reshape are not listed), for the graph as it is,
 * specialized as wpk_model_space does. *out is the caller's (free()). */
wpk_status wpk_model_reference_kernels(wpk_context *ctx, const wpk_model *model, char **out);

/* The kernel of node `node` of the graph as it is (specialized as above), at `config`
 * ("knob=value,..." overriding the knobs it names; NULL or "": the template's default): its
 * task, the tensor expressions, the schedule and the lowered loops (also of its pre-pack
 * kernels). WPK_ERR_INVALID_ARG when no node has that name, no template takes it (it runs its
 * reference kernel), or the config names a knob or value the template does not have.
 * *out is the caller's (free()). */
wpk_status wpk_model_lower(wpk_context *ctx, const wpk_model *model, const char *node,
                           const char *config, char **out);

/* ---- session: a model prepared to run on a backend ---- */

/* Where a session's kernels come from. REF: the reference kernels (plain C, the numeric
 * reference). CPU: per node the fastest implementation measured on this machine -- a kernel
 * generated from a schedule template at its best tuned config, or a vendor library's (oneDNN,
 * OpenBLAS) -- as the tuning records say (`wpk tune`); a node with no records runs its
 * template's default config. Generated kernels are compiled with the system C compiler when a
 * plan is first made for a set of input shapes (cached on disk: $WPK_CACHE_DIR, else
 * ~/.cache/wpk/kernels); nodes no template takes run reference kernels (`wpk info` names
 * them). */
typedef enum wpk_backend {
    WPK_BACKEND_REF = 0,
    WPK_BACKEND_CPU = 1,
    /* the GPU: every node a generated CUDA kernel (NVRTC), the plan's workspace on the
     * device, runs as one CUDA Graph. Needs an NVIDIA driver and device: wpk_session_create
     * returns WPK_ERR_UNSUPPORTED "CUDA unavailable: <reason>" without them, and
     * "CUDA backend: no CUDA kernel for ..." naming the nodes that have none. */
    WPK_BACKEND_CUDA = 2
} wpk_backend;

typedef struct wpk_session_params {
    wpk_backend backend;  /* default: WPK_BACKEND_REF (`wpk run` defaults to CPU) */
    int threads;    /* 0 = the machine's physical cores. The kernels run on the process's
                       OpenMP pool, whose idle workers wait as the environment says, read when
                       libgomp loads: the wpk CLI sets GOMP_SPINCOUNT=10000 (a 0.5 ms spin, then
                       sleep); a program embedding wpk should set it too, or OMP_WAIT_POLICY */
    int opt_level;  /* graph optimization level of the session's copy (wpk_optimize_params.level);
                       default 3 */
    const char *records;  /* CPU and CUDA (the records of this machine's CPU or GPU, from
                             `wpk tune [--target cuda]`): the database the choices come from;
                             NULL: the default one ($WPK_CACHE_DIR or
                             ~/.cache/wpk/records.db) when it exists; "": none (every node
                             at its default) */
    const char *provider; /* CPU: "auto" (NULL: the fastest measured per node), or every node
                             that can on one: "generated", "onednn", "openblas", "ref" */
    int profile;          /* nonzero: time every node of each run (wpk_session_profile) */
    const char *precision; /* NULL or "fp32": as the model says; "bf16" (CPU, fp32 models):
                              convolutions the ISA mapper maps onto AVX-512 BF16 run with bf16
                              weights and inputs and f32 accumulation, WPK_ERR_UNSUPPORTED
                              naming the flag on a CPU without avx512_bf16; "tf32" (CUDA tensor
                              cores) is WPK_ERR_UNSUPPORTED: not built into a target yet */
    double bf16_fp32_share; /* with "bf16": the leading convolutions (execution order) that
                               would run on bf16 stay fp32 while their multiply-adds are within
                               this share (0..1) of all those convolutions' (0: none). Rounding
                               in the first layers is what the rest of a deep network amplifies
                               most; wpk_compile chooses it by measurement */
} wpk_session_params;

wpk_session_params wpk_session_default_params(void);

/* Create a session. model must outlive the session. */
wpk_status wpk_session_create(wpk_context *ctx, const wpk_model *model,
                              const wpk_session_params *params, wpk_session **out);
void wpk_session_free(wpk_session *session);

/* Bind input `name` to a tensor; the data is copied. Symbolic dims take their value from the
 * given shape; a fixed dim that differs, a wrong dtype or an unknown name is WPK_ERR_INVALID_ARG. */
wpk_status wpk_session_set_input(wpk_session *session, const char *name, wpk_dtype dtype,
                                 const int64_t *dims, int ndim, const void *data);

/* Run the graph on the bound inputs. Every graph input must have been bound. */
wpk_status wpk_session_run(wpk_session *session);

/* Output i of the last run; the view's data is borrowed until the next run or free. */
wpk_status wpk_session_output(wpk_session *session, int i, wpk_tensor_view *out);

/* The per-node profile of the last run, in execution order: *out borrowed until the next run
 * or free, *n entries. WPK_ERR_INVALID_ARG when the session does not profile or has not run. */
wpk_status wpk_session_profile(wpk_session *session, const wpk_node_profile **out, int *n);

/* ---- compiled plans (.wpk) ---- */

typedef struct wpk_compile_params {
    int opt_level;        /* default 3, as `wpk tune` and `wpk run` (the records must match) */
    int batch;            /* the value of every symbolic dim (default 1) */
    int threads;          /* 0: the physical cores */
    const char *records;  /* as wpk_session_params.records */
    const char *provider; /* as wpk_session_params.provider */
    int strict;           /* nonzero: fail (WPK_ERR_INVALID_ARG, naming the nodes) when a node
                             has no records and would run its default */
    wpk_backend target;   /* what the plan runs on (default WPK_BACKEND_CPU): the cpu, or
                             WPK_BACKEND_CUDA: CUDA device 0, probed first (WPK_ERR_UNSUPPORTED
                             "CUDA unavailable: <reason>" without one), every node a CUDA kernel
                             at the config the records hold for this GPU, else its template's
                             default, built for the device's SM, the plan keyed by the GPU's
                             fingerprint (name, SM version, driver version); WPK_BACKEND_REF is
                             WPK_ERR_INVALID_ARG */
    int check_speed;      /* CPU, nonzero (the default): when the records chose anything, the
                             chosen plan is timed on the model against the all-defaults plan
                             (and the generated-kernels-only plan when a library was chosen),
                             and the fastest is written: a choice timed alone is checked in
                             context, and a tuned plan is never slower than the untuned one */
    struct wpk_compile_report *report; /* optional: what the speed check measured */
    const char *precision; /* as wpk_session_params.precision; other than fp32, the plan's
                              error against the fp32 model is measured (report, and an INFO
                              line) on seeded random inputs */
    double precision_tolerance; /* "bf16": the relative L2 error against fp32 aimed for
                                   (default 1e-2; 0: no search). Above it, leading convs stay
                                   fp32 in steps up to WPK_BF16_MAX_FP32_SHARE of the bf16
                                   convs' multiply-adds; the first step within it is kept, else
                                   the one with the least error */
    int fusion_search;    /* CPU, a wpk_fusion_search: which fusion groups beyond epilogues fuse
                             (pad+conv, dw+pw, conv+pool) and each layer's team size; the
                             choice is written into the plan. Default WPK_FUSION_NONE */
    struct wpk_fusion_report *fusion_report; /* optional: what the fusion search did */
} wpk_compile_params;

typedef enum wpk_fusion_search {
    WPK_FUSION_NONE = 0,       /* no fusion groups, every node on the plan's threads */
    WPK_FUSION_SEARCH = 1,     /* the DLFusion-style search: a rule from each layer's FLOPs and
                                  channels and a few profiled plans, timed in the model */
    WPK_FUSION_EXHAUSTIVE = 2, /* every fusion plan x every team size: an oracle for small models
                                  (WPK_ERR_INVALID_ARG past 4096 plans) */
    WPK_FUSION_ALL = 3         /* every group fused, no search (tests) */
} wpk_fusion_search;

/* What the fusion search found and what it cost. */
typedef struct wpk_fusion_report {
    int groups;           /* fusion groups found in the model */
    int layers;           /* nodes whose team size was a knob */
    int fused;            /* groups the plan fuses */
    int reduced;          /* layers the plan runs on fewer than its threads */
    int evaluations;      /* plans timed in the model */
    double search_ms;     /* wall time of the search */
    double best_ms;       /* the chosen plan's latency as the search measured it */
    double base_ms;       /* the plan without fusion groups on the plan's threads */
} wpk_fusion_report;

/* The plans the speed check timed (median ms over alternating rounds) and the one written. */
#define WPK_COMPILE_MAX_PLANS 3
typedef struct wpk_compile_report {
    int nplans;           /* 0: nothing to compare (no choice from records, or check off) */
    struct {
        const char *name; /* "chosen", "defaults", "generated" (static strings) */
        double median_ms;
    } plans[WPK_COMPILE_MAX_PLANS];
    int kept;             /* index into plans of the plan written */
    double precision_rel_l2; /* reduced precision: relative L2 error of output 0 against the
                                fp32 model (-1: not measured) */
    double precision_fp32_share; /* bf16: the share of the bf16 convs' multiply-adds the plan
                                    keeps fp32 (its bf16_fp32_share rounded down to whole convs) */
    int precision_fp32_convs;    /* bf16: how many convolutions that share keeps fp32 */
    char precision_fp32_names[512]; /* bf16: their node names, ", "-separated ("..." when cut) */
} wpk_compile_report;

/* The largest wpk_session_params.bf16_fp32_share wpk_compile tries: a tenth of the bf16
 * convs' work in fp32 costs about a tenth of bf16's gain on ResNet-50. */
#define WPK_BF16_MAX_FP32_SHARE 0.1

wpk_compile_params wpk_compile_default_params(void);

/* Optimize model's graph, specialize it, choose each node's implementation from the records,
 * pre-pack its weights, plan memory, and write one artifact to path: a versioned header, the
 * target fingerprint (the CPU's, or the GPU's for params.target CUDA), the plan (which names
 * its target), the packed weights and the compiled kernels. The file is
 * replaced only once the new one is complete. Untuned nodes are logged (WARN) by name. */
wpk_status wpk_compile(wpk_context *ctx, const wpk_model *model, const wpk_compile_params *params,
                       const char *path);

/* A session running a compiled plan through the runtime (wpk_plan_load: no C compiler, no
 * graph) on the backend of the plan's target: params' threads and profile are taken, the rest
 * is the plan's. An artifact of another
 * format version or for another target is refused with WPK_ERR_UNSUPPORTED saying what differs;
 * a damaged one with WPK_ERR_PARSE. Inputs of other dims than the plan's are
 * WPK_ERR_UNSUPPORTED ("the plan was compiled for inputs ..."). */
wpk_status wpk_session_create_from_plan(wpk_context *ctx, const char *path,
                                        const wpk_session_params *params, wpk_session **out);

/* The session's graph inputs and outputs (also of a plan's session, which has no model). */
int wpk_session_num_inputs(const wpk_session *session);
int wpk_session_num_outputs(const wpk_session *session);
wpk_tensor_view wpk_session_input_info(const wpk_session *session, int i);
/* Output i as the model declares it (symbolic dims -1, with their names), or as a plan was
 * compiled (its dims, the model's names for the symbolic ones); data NULL. */
wpk_tensor_view wpk_session_output_info(const wpk_session *session, int i);

#ifdef __cplusplus
}
#endif
#endif
