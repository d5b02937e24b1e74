/* precision.c -- a reduced-precision session against the fp32 one on the same random inputs:
 * the relative L2 error `wpk compile --precision` prints. */
#include "api/precision.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"

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

static wpk_status open_run(wpk_context *ctx, const wpk_model *m, const char *precision,
                           int batch, int threads, const char *records, const char *provider,
                           wpk_session **out) {
    wpk_session_params sp = wpk_session_default_params();
    sp.backend = WPK_BACKEND_CPU;
    sp.threads = threads;
    sp.records = records;
    sp.provider = provider;
    sp.precision = precision;
    wpk_status st = wpk_session_create(ctx, m, &sp, out);
    if (st == WPK_OK) st = bind_random(ctx, *out, m, batch);
    if (st == WPK_OK) st = wpk_session_run(*out);
    return st;
}

wpk_status api_precision_error(wpk_context *ctx, const wpk_model *m, const char *precision,
                               int batch, int threads, const char *records,
                               const char *provider, double *rel_l2) {
    *rel_l2 = -1;
    wpk_session *lo = NULL, *ref = NULL;
    wpk_status st = open_run(ctx, m, precision, batch, threads, records, provider, &lo);
    if (st == WPK_OK) st = open_run(ctx, m, "fp32", batch, threads, records, provider, &ref);
    wpk_tensor_view a, b;
    if (st == WPK_OK) st = wpk_session_output(lo, 0, &a);
    if (st == WPK_OK) st = wpk_session_output(ref, 0, &b);
    if (st == WPK_OK && a.dtype == WPK_DTYPE_FLOAT32 && b.dtype == WPK_DTYPE_FLOAT32) {
        size_t n = 1;
        for (int d = 0; d < b.ndim; d++) n *= (size_t)b.dims[d];
        double diff = 0, norm = 0;
        for (size_t i = 0; i < n; i++) {
            double x = ((const float *)a.data)[i], y = ((const float *)b.data)[i];
            diff += (x - y) * (x - y);
            norm += y * y;
        }
        *rel_l2 = norm > 0 ? sqrt(diff / norm) : sqrt(diff);
    }
    wpk_session_free(lo);
    wpk_session_free(ref);
    return st;
}
