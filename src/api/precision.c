/* precision.c -- a reduced-precision session against the fp32 one on the same random inputs,
 * and the search for the share of leading bf16 convs kept fp32: what `wpk compile
 * --precision` prints and writes into the plan. */
#include "api/precision.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"

/* Shares of the bf16 convs' multiply-adds tried in order: the first layers are few
 * multiply-adds and the most sensitive, so small steps come first. */
static const double shares[] = {0, 0.01, 0.02, 0.04, 0.07, WPK_BF16_MAX_FP32_SHARE};
#define NSHARES ((int)(sizeof shares / sizeof shares[0]))

static float uniform(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((*s >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static wpk_status bind_random(wpk_context *ctx, wpk_session *s, const wpk_model *m, int batch) {
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < wpk_model_num_inputs(m); i++) {
        wpk_tensor_view v = wpk_model_input(m, i);
        size_t n = 1;
        for (int d = 0; d < v.ndim; d++) {
            if (v.dims[d] < 0) v.dims[d] = batch;
            n *= (size_t)v.dims[d];
        }
        size_t bytes = n * wpk_dtype_size(v.dtype);
        void *data = wpk_calloc(bytes ? bytes : 1, 1);
        if (!data) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory binding '%s'", v.name);
        if (v.dtype == WPK_DTYPE_FLOAT32)
            for (size_t k = 0; k < n; k++) ((float *)data)[k] = uniform(&seed);
        wpk_status st = wpk_session_set_input(s, v.name, v.dtype, v.dims, v.ndim, data);
        wpk_free(data);
        if (st) return st;
    }
    return WPK_OK;
}

/* r's session at precision and share, run once on the seeded inputs: *out is the caller's */
static wpk_status open_run(wpk_context *ctx, const api_precision_run *r, const char *precision,
                           double share, wpk_session **out) {
    wpk_session_params sp = wpk_session_default_params();
    sp.backend = WPK_BACKEND_CPU;
    sp.threads = r->threads;
    sp.records = r->records;
    sp.provider = r->provider;
    sp.precision = precision;
    sp.bf16_fp32_share = share;
    wpk_status st = wpk_session_create(ctx, r->m, &sp, out);
    if (st == WPK_OK) st = bind_random(ctx, *out, r->m, r->batch);
    if (st == WPK_OK) st = wpk_session_run(*out);
    return st;
}

static size_t numel(const wpk_tensor_view *v) {
    size_t n = 1;
    for (int d = 0; d < v->ndim; d++) n *= (size_t)v->dims[d];
    return n;
}

/* ||output 0 of s - ref|| / ||ref|| over n floats; -1 when the output is not that */
static wpk_status error_of(wpk_session *s, const float *ref, size_t n, double *rel_l2) {
    wpk_tensor_view a;
    wpk_status st = wpk_session_output(s, 0, &a);
    *rel_l2 = -1;
    if (st || a.dtype != WPK_DTYPE_FLOAT32 || numel(&a) != n) return st;
    double diff = 0, norm = 0;
    for (size_t i = 0; i < n; i++) {
        double x = ((const float *)a.data)[i], y = ref[i];
        diff += (x - y) * (x - y);
        norm += y * y;
    }
    *rel_l2 = norm > 0 ? sqrt(diff / norm) : sqrt(diff);
    return WPK_OK;
}

wpk_status api_precision_search(wpk_context *ctx, const api_precision_run *r, double tolerance,
                                double *share, double *rel_l2) {
    *share = 0;
    *rel_l2 = -1;
    wpk_session *s = NULL;
    wpk_status st = open_run(ctx, r, "fp32", 0, &s);
    wpk_tensor_view b;
    if (st == WPK_OK) st = wpk_session_output(s, 0, &b);
    float *ref = NULL;
    size_t n = 0;
    if (st == WPK_OK && b.dtype == WPK_DTYPE_FLOAT32) {
        n = numel(&b);
        ref = wpk_malloc(n ? n * sizeof *ref : 1);
        if (!ref) st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory keeping the fp32 output");
        else memcpy(ref, b.data, n * sizeof *ref);
    }
    wpk_session_free(s);
    for (int i = 0; st == WPK_OK && ref && i < NSHARES; i++) {
        double err = -1;
        s = NULL;
        st = open_run(ctx, r, r->precision, shares[i], &s);
        if (st == WPK_OK) st = error_of(s, ref, n, &err);
        wpk_session_free(s);
        if (st || err < 0) break;
        wpk_log(ctx, WPK_LOG_INFO, "precision %s: %.0f%% of the bf16 convs' multiply-adds "
                "kept fp32: relative L2 error %.3g", r->precision, 100 * shares[i], err);
        if (*rel_l2 < 0 || err < *rel_l2) {
            *share = shares[i];
            *rel_l2 = err;
        }
        if (err <= tolerance) {
            *share = shares[i];
            *rel_l2 = err;
            break;
        }
        if (tolerance <= 0) break;
    }
    wpk_free(ref);
    return st;
}
