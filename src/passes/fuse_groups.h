/* fuse_groups.h -- fusion groups beyond epilogues, as candidates a plan search chooses among:
 * a constant zero Pad folded into the Conv reading it, a depthwise conv read only by a
 * pointwise conv (wpk::FusedDwPw), a conv read only by a MaxPool/AveragePool
 * (wpk::FusedConvPool), an elementwise op read only by another (wpk::FusedElementwise).
 * Found on an epilogue-fused graph; each group applied rewrites two nodes into one. */
#ifndef WPK_PASSES_FUSE_GROUPS_H
#define WPK_PASSES_FUSE_GROUPS_H

#include <stdbool.h>

#include "ir/graph.h"

typedef enum fusion_kind {
    FUSION_PAD_CONV,    /* Pad(constant 0) -> Conv: the Conv's pads grow */
    FUSION_DW_PW,       /* depthwise Conv -> 1x1 Conv: wpk::FusedDwPw */
    FUSION_CONV_POOL,   /* Conv -> MaxPool/AveragePool: wpk::FusedConvPool */
    FUSION_ELEMENTWISE, /* elementwise op (or chain) -> elementwise op: wpk::FusedElementwise,
                           grown a step by each group along a chain */
    FUSION_KIND_COUNT
} fusion_kind;

typedef struct fusion_group {
    fusion_kind kind;
    int first, second;  /* node indices: the producer and its only reader */
} fusion_group;

/* "pad+conv", "dw+pw", "conv+pool", "elementwise". */
const char *fusion_kind_name(fusion_kind kind);

/* The groups of g (shapes inferred, no dead nodes), in node order, at most max into out;
 * returns how many there are (may exceed max). Two groups may share a node: applying the
 * first leaves the second unmatched, and it is skipped. */
int fusion_groups_find(const ir_graph *g, fusion_group *out, int max);

/* Apply the groups with chosen[i] (NULL: all) to g, in order, each checked again first; the
 * nodes fused away are dropped at the end (node indices change then). *applied (may be NULL):
 * how many were applied. WPK_ERR_NOMEM. */
wpk_status fusion_groups_apply(wpk_context *ctx, ir_graph *g, const fusion_group *groups, int n,
                               const bool *chosen, int *applied);

#endif
