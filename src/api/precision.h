/* precision.h -- the error a reduced-precision session makes against the fp32 one, measured on
 * seeded random inputs, for `wpk compile --precision` to report. Internal to src/api. */
#ifndef WPK_API_PRECISION_H
#define WPK_API_PRECISION_H

#include "wpk.h"

/* Run m (batch: the value of symbolic dims) on cpu sessions at `precision` and at fp32, with
 * the same seeded random inputs (float inputs uniform in [-1, 1), others zero), and put the
 * relative L2 error of output 0 (||reduced - fp32|| / ||fp32||) into *rel_l2; -1 when output 0
 * is not float32. Threads, records and provider as given. Errors of the sessions. */
wpk_status api_precision_error(wpk_context *ctx, const wpk_model *m, const char *precision,
                               int batch, int threads, const char *records,
                               const char *provider, double *rel_l2);

#endif
