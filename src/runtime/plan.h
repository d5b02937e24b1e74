/* plan.h -- the target-neutral compiled plan: a tensor table (each tensor's type and where it
 * lives: a workspace offset, an offset in the constants blob, or nowhere), the workspace size,
 * the constants blob (weights and pre-packed weights, 64-byte aligned offsets), the kernel
 * modules' bytes, the graph inputs and outputs, and the steps in order (runner, module and
 * symbol, argument tensors, an opaque payload the runner reads, and report texts). Written
 * into and read from an artifact body (artifact.h); reading checks every index and offset, so
 * an executor can trust what it gets. */
#ifndef WPK_RUNTIME_PLAN_H
#define WPK_RUNTIME_PLAN_H

#include "base/arena.h"
#include "runtime/artifact.h"
#include "wpk_runtime.h"

/* Where a tensor's bytes are while the plan runs. */
typedef enum rt_place {
    RT_PLACE_NONE = 0,      /* no bytes: an output nothing reads, which no planner placed */
    RT_PLACE_WORKSPACE = 1, /* at offset in the workspace (activations, inputs, kernel scratch) */
    RT_PLACE_CONST = 2      /* at offset in the constants blob */
} rt_place;

/* The device a plan's code is for: which backend runs it and which fingerprint it must match. */
typedef enum rt_target {
    RT_TARGET_CPU = 0,      /* the cpu backend; the CPU's fingerprint (target_fingerprint) */
    RT_TARGET_CUDA = 1      /* the cuda backend; the GPU's (target_cuda_fingerprint) */
} rt_target;

typedef struct rt_tensor_desc {
    const char *name;
    wpk_dtype dtype;
    int ndim;
    int64_t dims[WPK_MAX_DIMS];
    rt_place place;
    int64_t offset;         /* bytes; 64-byte aligned for RT_PLACE_CONST */
} rt_tensor_desc;

typedef struct rt_io {
    int tensor;             /* index into the tensor table */
    const char *dim_names[WPK_MAX_DIMS]; /* inputs: the model's symbolic dims ("" where fixed) */
} rt_io;

typedef struct rt_module {
    const void *data;       /* the module's bytes (a shared object on the cpu) */
    size_t len;
} rt_module;

typedef struct rt_step {
    const char *runner;     /* "generated", "ref", "onednn", ... (runner.h) */
    int module;             /* index into modules, -1 when the runner takes none */
    const char *symbol;     /* the module's function ("" when none) */
    int nargs;
    const int32_t *args;    /* tensor indices; -1 for an omitted optional tensor */
    const void *payload;    /* bytes the runner interprets (a node, a config), maybe empty */
    size_t payload_len;
    const char *node, *op, *impl, *source; /* for reports (wpk_node_profile) */
    int threads;            /* its OpenMP team size; 0: the backend's (the plan's) */
} rt_step;

/* A plan read from, or about to be written into, an artifact body. Read plans point into the
 * file's bytes (which must outlive it) and into mem. */
typedef struct rt_plan {
    arena mem;              /* arrays of a read plan (or of one being built) */
    rt_target target;       /* zero (a plan built in memory without saying): the cpu */
    int opt_level, batch;   /* how it was compiled, for reports */
    const char *provider, *records;
    int threads;            /* the threads it was compiled for (the kernels run on any count) */
    int64_t workspace;      /* bytes */
    const void *consts;     /* the constants blob */
    int64_t consts_len;
    int nmodules;
    rt_module *modules;
    int ntensors;
    rt_tensor_desc *tensors;
    int ninputs, noutputs;
    rt_io *inputs, *outputs;
    int nsteps;
    rt_step *steps;
} rt_plan;

/* Append p to w (WPK_ERR_NOMEM when w ran out of memory). */
wpk_status rt_plan_write(wpk_context *ctx, const rt_plan *p, byte_writer *w);

/* Read a plan from r (the rest of an artifact body). Every tensor index, offset and size is
 * checked: WPK_ERR_PARSE "<what>: the plan is damaged: <why>" otherwise; WPK_ERR_NOMEM. *out
 * points into r's bytes; free it with rt_plan_free. */
wpk_status rt_plan_read(wpk_context *ctx, const char *what, byte_reader *r, rt_plan *out);
void rt_plan_free(rt_plan *p);

/* Per step of p, what a profile reports of it (node, op, provider = runner, impl, source;
 * strings borrowed from p), into out[0..p->nsteps); the times are left alone. */
void rt_plan_profile_entries(const rt_plan *p, wpk_node_profile *out);

/* Bytes of tensor t's elements. */
size_t rt_tensor_bytes(const rt_tensor_desc *t);

/* "float32[2, 3, 8, 8]" into buf. */
void rt_type_text(wpk_dtype dtype, int ndim, const int64_t *dims, char *buf, size_t cap);

#endif
