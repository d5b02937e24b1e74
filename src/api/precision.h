/* precision.h -- the error a reduced-precision session makes against the fp32 one, measured on
 * seeded random inputs, and the share of bf16 convs kept fp32 that brings it within a
 * tolerance, for `wpk compile --precision`. Internal to src/api. */
#ifndef WPK_API_PRECISION_H
#define WPK_API_PRECISION_H

#include "wpk.h"

/* How a precision is measured: m (borrowed) on cpu sessions, batch the value of symbolic
 * dims, threads, records and provider as a session takes them. */
typedef struct api_precision_run {
    const wpk_model *m;
    const char *precision;
    int batch, threads;
    const char *records, *provider;
} api_precision_run;

/* Run r at fp32 and at r->precision with bf16_fp32_share 0, then, while the relative L2 error
 * of output 0 (||reduced - fp32|| / ||fp32||, seeded inputs: float uniform in [-1, 1), others
 * zero) is above tolerance (> 0), at growing shares up to WPK_BF16_MAX_FP32_SHARE. *share gets
 * the first share within tolerance, else the one with the least error, and *rel_l2 its error;
 * -1 when output 0 is not float32 (then *share 0). Errors of the sessions. */
wpk_status api_precision_search(wpk_context *ctx, const api_precision_run *r, double tolerance,
                                double *share, double *rel_l2);

#endif
