/* fusion_plan.h -- wpk_compile's fusion and team size plan: the fusion groups
 * (passes/fuse_groups.h) and per-layer team sizes of an optimized graph, chosen by the search of
 * tune/fusion_search.h with every plan timed in the model, then applied to the graph. */
#ifndef WPK_API_FUSION_PLAN_H
#define WPK_API_FUSION_PLAN_H

#include "ir/graph.h"
#include "wpk.h"

/* g: the model's graph optimized at min(level, 2), borrowed; its inputs' symbolic dims are
 * bound at cp->batch (the plan's batch) first. Choose as cp->fusion_search says,
 * timing plans compiled as cp says (records at `records`), then apply the choice to g and run
 * the passes above level 2 (the blocked layout) when level is 3. report (may be NULL): what
 * was found. Errors of the search, of compiling and running a plan, WPK_ERR_NOMEM. */
wpk_status fusion_plan_apply(wpk_context *ctx, ir_graph *g, int level,
                             const wpk_compile_params *cp, const char *records,
                             wpk_fusion_report *report);

#endif
