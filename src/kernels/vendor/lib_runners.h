/* lib_runners.h -- the plan's step runners of the vendor libraries: one per provider built in
 * ("onednn", "openblas") and per CUDA library ("cudnn", "cublas", "cublaslt": steps of a plan
 * for a GPU), each running a step's node on the library kernel made at load from its config
 * (kernels/step_runners.h's payload and arguments). Both libwpk and libwpk_runtime
 * hold them; in libwpk_runtime they register when the library loads. */
#ifndef WPK_KERNELS_VENDOR_LIB_RUNNERS_H
#define WPK_KERNELS_VENDOR_LIB_RUNNERS_H

/* Register them into the runtime's registry (once; later calls do nothing). */
void lib_runners_register(void);

#endif
