/* batcher.h -- the request queue and the dynamic batcher: one worker thread takes queued
 * requests in arrival order and runs as many as merge into one batch (up to the model's
 * max_batch rows). While more requests are being received it waits for them, at most
 * max_delay after the oldest queued request; with none arriving it runs what it has at once.
 * Each request is answered with its own rows, or all of a failed batch with its error. */
#ifndef WPK_SERVE_BATCHER_H
#define WPK_SERVE_BATCHER_H

#include "serve/metrics.h"
#include "serve/model.h"

typedef struct serve_batcher serve_batcher;

typedef struct serve_batcher_params {
    double max_delay_s; /* the longest the oldest queued request waits for others */
    int queue_limit;    /* requests queued (not yet running) at most; more are refused */
} serve_batcher_params;

/* Start the worker. model and metrics must outlive the batcher; the worker is the only user
 * of the model (and its context) until serve_batcher_free returns. NULL when the thread
 * cannot start or memory runs out. */
serve_batcher *serve_batcher_create(serve_model *model, serve_metrics *metrics,
                                    const serve_batcher_params *params);

/* Stop taking requests, run every queued one, join the worker and free. */
void serve_batcher_free(serve_batcher *b);

/* A request is being received: the worker may wait for it. serve_batcher_run counts it as
 * arrived; one that never reaches it (a bad request) is counted by serve_batcher_arrived.
 * Thread-safe. */
void serve_batcher_arriving(serve_batcher *b);
void serve_batcher_arrived(serve_batcher *b);

/* Queue r (announced by serve_batcher_arriving; the batcher's until it is done) and wait
 * until its batch has run: returns 0 with r->status and r->outputs or r->error set, or 503
 * without queueing it when the queue is full or the batcher stops; the caller frees r either
 * way. Thread-safe. */
int serve_batcher_run(serve_batcher *b, serve_request *r);

#endif
