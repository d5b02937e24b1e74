/* target_fingerprint.h -- the text that names the machine tuning records were measured on:
 * architecture, CPU model, the ISA extensions kernels are generated for, and the CPU count; and
 * the one that names a GPU (model, SM version, driver).
 * Records and artifacts are keyed by it, so a record measured on one machine is never taken
 * for another's. */
#ifndef WPK_BASE_TARGET_FINGERPRINT_H
#define WPK_BASE_TARGET_FINGERPRINT_H

#include <stddef.h>

/* "x86_64 AMD EPYC 7B13 avx,avx2,fma,avx512f,avx512vnni 2c": the architecture (uname), the CPU
 * model (cpuid's brand string on x86, /proc/cpuinfo elsewhere, whitespace collapsed; "unknown"
 * when neither says), the extensions that the CPU has and the OS enables, comma-separated in a
 * fixed order ("none" when there are none), and the online CPU count. Printable ASCII only, so it
 * can be stored and compared as plain text. The same on every call and in every process on the
 * same machine. Computed once; thread-safe; the string is static (never freed). */
const char *target_fingerprint(void);

/* A CUDA GPU's fingerprint into buf (cap bytes, cut where it does not fit): "cuda <name> sm_<sm>
 * driver <driver>", e.g. "cuda NVIDIA H100 80GB HBM3 sm_90 driver 13000": the device's name
 * (cleaned as the CPU model is), its compute capability and the driver version, what decides
 * whether a plan's kernels load and run as they were measured. The caller asks the device
 * (runtime/cuda), so this layer stays free of the driver. Thread-safe. */
void target_cuda_fingerprint(const char *name, int sm, int driver, char *buf, size_t cap);

#endif
