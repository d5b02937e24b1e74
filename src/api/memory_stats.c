/* memory_stats.c -- planned vs unplanned activation memory of a model, for `wpk info`. */
#include "api/model.h"

wpk_status wpk_model_memory_stats(wpk_context *ctx, const wpk_model *m, wpk_memory_stats *out) {
    (void)m;
    out->planned_bytes = out->unplanned_bytes = 0;
    return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "memory planning is not implemented yet");
}
