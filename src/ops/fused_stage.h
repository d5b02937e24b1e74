/* fused_stage.h -- a fusion group node seen as one of its member ops: the attributes of that
 * member (those under its prefix, the prefix dropped, or those under no member's prefix), so
 * the member op's own shape function, attribute readers and activation reader check them. */
#ifndef WPK_OPS_FUSED_STAGE_H
#define WPK_OPS_FUSED_STAGE_H

#include "ir/graph.h"

#define FUSED_STAGE_MAX_ATTRS 48
#define FUSED_STAGE_MAX_INPUTS 8

/* Limits of the fused kernels' on-stack buffers, which a pass checks before it fuses. */
#define FUSED_DWPW_MAX_CHANNELS 8192 /* depthwise channels of wpk::FusedDwPw */
#define FUSED_CONV_POOL_MAX_PLANE 16384 /* elements of one conv output plane (wpk::FusedConvPool) */
#define FUSED_ELEMENTWISE_MAX_STEPS 16 /* steps of one wpk::FusedElementwise */

/* The fused kernels' hot loops are compiled for AVX-512, AVX2 and baseline, picked at load
 * (the library itself is built for baseline x86-64), their products contracted into FMAs. */
#if defined(__x86_64__) && defined(__has_attribute) && !defined(__clang__)
#if __has_attribute(target_clones)
#define FUSED_MULTI_ISA                                                                   \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"),         \
                   optimize("fp-contract=fast")))
#endif
#endif
#ifndef FUSED_MULTI_ISA
#define FUSED_MULTI_ISA
#endif

typedef struct fused_stage {
    ir_node node;                       /* node.attrs points into attrs */
    ir_attr attrs[FUSED_STAGE_MAX_ATTRS];
    int in[FUSED_STAGE_MAX_INPUTS];
} fused_stage;

/* The view of n as op `op` with nin inputs: with prefix, n's attributes named prefix + X, as
 * X; without, n's attributes that start with none of the prefixes in skip (NULL-terminated).
 * Names point into n's strings (n must outlive the view). WPK_ERR_MODEL naming n when it has
 * too many attributes. */
wpk_status fused_stage_view(wpk_context *ctx, const ir_node *n, ir_op op, int nin,
                            const char *prefix, const char *const *skip, fused_stage *out);

/* Whether wpk::FusedElementwise takes op_type as a step; *binary: it has a second operand. */
bool fused_elementwise_step(const char *op_type, bool *binary);

#endif
