/* request.c -- an inference request's lifetime: creation with per-output choices, free. */
#include <time.h>

#include "base/alloc.h"
#include "serve/request.h"

serve_request *serve_request_create(int ninputs, int noutputs) {
    serve_request *r = wpk_calloc(1, sizeof *r);
    if (!r) return NULL;
    r->ninputs = ninputs;
    r->noutputs = noutputs;
    r->rows = 1;
    r->inputs = wpk_calloc((size_t)ninputs + 1, sizeof *r->inputs);
    r->outputs = wpk_calloc((size_t)noutputs + 1, sizeof *r->outputs);
    r->want = wpk_calloc((size_t)noutputs + 1, sizeof *r->want);
    r->binary = wpk_calloc((size_t)noutputs + 1, sizeof *r->binary);
    if (!r->inputs || !r->outputs || !r->want || !r->binary ||
        pthread_cond_init(&r->done_cv, NULL) != 0) {
        wpk_free(r->inputs);
        wpk_free(r->outputs);
        wpk_free(r->want);
        wpk_free(r->binary);
        wpk_free(r);
        return NULL;
    }
    for (int i = 0; i < noutputs; i++) r->want[i] = true;
    r->t_arrive = serve_now();
    return r;
}

void serve_request_free(serve_request *r) {
    if (!r) return;
    for (int i = 0; i < r->ninputs; i++) wpk_free(r->inputs[i].data);
    for (int i = 0; i < r->noutputs; i++) wpk_free(r->outputs[i].data);
    wpk_free(r->inputs);
    wpk_free(r->outputs);
    wpk_free(r->want);
    wpk_free(r->binary);
    wpk_free(r->id);
    wpk_free(r->error);
    pthread_cond_destroy(&r->done_cv);
    wpk_free(r);
}

double serve_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t serve_elements(const int64_t *dims, int ndim) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0) return -1;
        if (dims[i] && n > INT64_MAX / dims[i]) return -1;
        n *= dims[i];
    }
    return n;
}
