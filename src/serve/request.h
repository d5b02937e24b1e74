/* request.h -- one inference request as the server holds it: the decoded input tensors, which
 * outputs to return and how, the outputs once its batch has run, and its timestamps. Built by
 * the codec, queued by the batcher, run by the served model, answered by the HTTP front. */
#ifndef WPK_SERVE_REQUEST_H
#define WPK_SERVE_REQUEST_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wpk.h"

typedef struct serve_tensor {
    wpk_dtype dtype;
    int ndim;
    int64_t dims[WPK_MAX_DIMS];
    void *data; /* owned: nbytes */
    size_t nbytes;
} serve_tensor;

typedef struct serve_request {
    char *id;              /* owned; NULL when the client sent none */
    serve_tensor *inputs;  /* owned, one per model input in the model's order */
    int ninputs;
    int64_t rows;          /* the batch dim of every input when the model batches, else 1 */
    bool *want;            /* owned, per model output: part of the response */
    bool *binary;          /* owned, per model output: sent as binary data */
    serve_tensor *outputs; /* owned, per model output: set when the batch has run */
    int noutputs;
    /* set by the batcher under its lock */
    bool done;
    int status;            /* HTTP status once done: 200, or 500 with error */
    char *error;           /* owned */
    int batch_rows;        /* rows of the batch it ran in (padding excluded) */
    double t_arrive, t_enqueue, t_start, t_done; /* seconds, CLOCK_MONOTONIC */
    pthread_cond_t done_cv;
    struct serve_request *next; /* the batcher's queue */
} serve_request;

/* A request for a model of ninputs inputs and noutputs outputs, every output wanted as JSON.
 * NULL when out of memory. Free with serve_request_free. */
serve_request *serve_request_create(int ninputs, int noutputs);
void serve_request_free(serve_request *r);

/* Seconds on the monotonic clock. */
double serve_now(void);

/* Product of dims (1 for a scalar); -1 when a dim is negative or the product overflows. */
int64_t serve_elements(const int64_t *dims, int ndim);

#endif
