/* conv_bf16.h -- the reduced-precision convolution provider: blocked convs (wpk::ConvNCHWc,
 * 16 lanes, group 1) whose accumulation the ISA mapper maps onto AVX-512 BF16's dot product,
 * with the weights converted to bf16 pairs at creation, the input converted at each run and f32
 * accumulation. Never a candidate of an fp32 choice: only `--precision bf16` selects it. */
#ifndef WPK_KERNELS_CONV_BF16_H
#define WPK_KERNELS_CONV_BF16_H

#include "kernels/provider.h"

/* The provider ("isa_bf16"): make kernels at load time (create/run/destroy), its configs the
 * mapper's mappings times register tiles, the first a good default. Its step runner is
 * registered under the same name when the library loads, so plans that use it load anywhere
 * the CPU has avx512_bf16 (create refuses naming the flag elsewhere). */
const kernel_provider *conv_bf16_provider(void);

/* Multiply-adds of a node the provider takes (0 for one it does not): batch x output channels
 * x output pixels x input channels per group x kernel window. */
int64_t conv_bf16_macs(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out);

/* Whether this CPU runs it (avx512_bf16 in /proc/cpuinfo, not hidden by $WPK_CPU_FLAGS_OFF). */
bool conv_bf16_cpu_ok(void);

#endif
