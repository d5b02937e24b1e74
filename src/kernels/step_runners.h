/* step_runners.h -- the plan's step runners that need the compiler's IR: "ref" (the op's
 * reference kernel from the op table) and one per vendor-library provider ("onednn",
 * "openblas"; "cudnn", "cublas", "cublaslt" on a CUDA device: kernels/vendor/lib_runners.h),
 * registered into the runtime's registry
 * (runtime/runner.h). Their payload is a library config index and the node
 * (ir/node_codec.h); their arguments are the node's inputs then its outputs (-1 where
 * omitted). */
#ifndef WPK_KERNELS_STEP_RUNNERS_H
#define WPK_KERNELS_STEP_RUNNERS_H

#include "ir/graph.h"
#include "runtime/runner.h"

/* "ref"; a copy whose user is a kernel_provider with create/run/destroy runs that library's
 * kernels instead (kernels/vendor/lib_runners.c). */
extern const rt_runner step_ref_runner;
/* The same for a CUDA library's provider (user): its kernel made at load on the device of the
 * plan's cuda backend from the plan's host copy of the constants; a run passes the device
 * addresses. A plan for the cpu with such a step is refused. */
extern const rt_runner step_cuda_lib_runner;

/* Register "ref" (once; later calls do nothing). Also done when the library loads. */
void step_runners_register(void);


/* The payload of node n's step at library config `config` (0 for "ref") into *out (the
 * caller's, wpk_free). Errors of ir_node_encode. */
wpk_status step_payload_encode(wpk_context *ctx, const ir_node *n, int config, uint8_t **out,
                               size_t *len);

#endif
