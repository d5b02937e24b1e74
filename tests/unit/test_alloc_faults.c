/* test_alloc_faults.c -- fail every allocation in turn while loading and running a model:
 * each failure must come back as a status with a message, never a crash or a leak (the
 * sanitizer build checks leaks). */
#include <stdlib.h>

#include "base/alloc.h"
#include "check.h"
#include "wpk.h"

static const char *models[] = {"tests/fuzz/corpus/conv_relu.onnx",
                               "tests/fuzz/corpus/legacy_ops.onnx"};

/* Load, create a session, bind random inputs, run. Returns the first failing status. */
static wpk_status load_and_run(wpk_context *ctx, const char *path) {
    wpk_model *m = NULL;
    wpk_session *s = NULL;
    float *data = NULL;
    wpk_status st = wpk_model_load(ctx, path, &m);
    if (st == WPK_OK) st = wpk_session_create(ctx, m, NULL, &s);
    for (int i = 0; st == WPK_OK && i < wpk_model_num_inputs(m); i++) {
        wpk_tensor_view in = wpk_model_input(m, i);
        int64_t n = 1;
        for (int d = 0; d < in.ndim; d++) {
            if (in.dims[d] < 0) in.dims[d] = 2;
            n *= in.dims[d];
        }
        free(data);
        data = calloc((size_t)n + 1, wpk_dtype_size(in.dtype));
        st = wpk_session_set_input(s, in.name, in.dtype, in.dims, in.ndim, data);
    }
    if (st == WPK_OK) st = wpk_session_run(s);
    free(data);
    wpk_session_free(s);
    wpk_model_free(m);
    return st;
}

int main(void) {
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        wpk_context *ctx = wpk_context_create();
        wpk_alloc_fail_at(0);
        CHECK(load_and_run(ctx, models[k]) == WPK_OK);
        long total = wpk_alloc_count();
        CHECK(total > 10);
        int nomem = 0;
        for (long n = 1; n <= total; n++) {
            wpk_alloc_fail_at(n);
            wpk_status st = load_and_run(ctx, models[k]);
            /* protobuf-c reports its allocation failures as a parse failure */
            CHECK(st == WPK_ERR_NOMEM || st == WPK_ERR_PARSE);
            CHECK(wpk_context_error(ctx)[0] != 0);
            nomem += st == WPK_ERR_NOMEM;
        }
        CHECK(nomem > total / 2);
        wpk_alloc_fail_at(0);
        CHECK(load_and_run(ctx, models[k]) == WPK_OK);
        wpk_context_free(ctx);
    }
    CHECK_DONE();
}
