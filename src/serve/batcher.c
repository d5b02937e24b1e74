/* batcher.c -- the request queue and the worker thread that forms and runs batches. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "serve/batcher.h"

struct serve_batcher {
    serve_model *model;     /* borrowed */
    serve_metrics *metrics; /* borrowed */
    serve_batcher_params params;
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* the queue or the arrivals changed, or stop */
    serve_request *head, *tail;
    int queued;
    int arriving;           /* requests being received, not yet queued */
    bool stopping;
    pthread_t worker;
    serve_request **batch;  /* the batch being formed: max_batch entries */
};

/* The absolute CLOCK_REALTIME time `seconds` from now on the monotonic clock's scale, for
 * pthread_cond_timedwait (whose default clock is the realtime one). */
static struct timespec deadline_in(double seconds) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (seconds < 0) seconds = 0;
    double whole = floor(seconds);
    ts.tv_sec += (time_t)whole;
    ts.tv_nsec += (long)((seconds - whole) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Rows of the queued requests that merge with the head, up to max_batch. */
static int64_t mergeable_rows(const serve_batcher *b) {
    int64_t rows = 0;
    for (const serve_request *r = b->head; r; r = r->next) {
        if (r != b->head && !serve_model_can_merge(b->model, b->head, r)) continue;
        if (r != b->head && rows + r->rows > b->model->max_batch) break;
        rows += r->rows;
    }
    return rows;
}

/* Takes the head and the queued requests that merge with it, in arrival order, while their
 * rows fit; returns how many. */
static int take_batch(serve_batcher *b) {
    int n = 0;
    int64_t rows = 0;
    serve_request *prev = NULL;
    for (serve_request *r = b->head; r;) {
        serve_request *next = r->next;
        bool take = n == 0 || (serve_model_can_merge(b->model, b->batch[0], r) &&
                               rows + r->rows <= b->model->max_batch);
        if (take) {
            b->batch[n++] = r;
            rows += r->rows;
            if (prev) prev->next = next;
            else b->head = next;
            if (b->tail == r) b->tail = prev;
            r->next = NULL;
            b->queued--;
        } else {
            prev = r;
        }
        if (rows >= b->model->max_batch) break;
        r = next;
    }
    return n;
}

static void run_batch(serve_batcher *b, int n) {
    double start = serve_now();
    int64_t rows = 0;
    for (int i = 0; i < n; i++) {
        b->batch[i]->t_start = start;
        rows += b->batch[i]->rows;
    }
    wpk_status st = serve_model_run(b->model, b->batch, n);
    double end = serve_now();
    const char *msg = st ? wpk_context_error(b->model->ctx) : NULL;
    serve_metrics_batch(b->metrics, n, rows, serve_model_run_rows(b->model, rows), end - start);
    pthread_mutex_lock(&b->mu);
    for (int i = 0; i < n; i++) {
        serve_request *r = b->batch[i];
        r->status = st ? 500 : 200;
        if (st) r->error = wpk_strdup(msg && *msg ? msg : wpk_status_name(st));
        r->batch_rows = (int)rows;
        r->t_done = end;
        r->done = true;
        pthread_cond_signal(&r->done_cv);
    }
    pthread_mutex_unlock(&b->mu);
}

static void *worker_main(void *arg) {
    serve_batcher *b = arg;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!b->head && !b->stopping) pthread_cond_wait(&b->work_cv, &b->mu);
        if (!b->head) break; /* stopping with nothing queued */
        /* wait for requests being received, while the batch has room and the oldest may wait */
        while (!b->stopping && b->arriving > 0 && mergeable_rows(b) < b->model->max_batch) {
            double left = b->head->t_enqueue + b->params.max_delay_s - serve_now();
            if (left <= 0) break;
            struct timespec until = deadline_in(left);
            if (pthread_cond_timedwait(&b->work_cv, &b->mu, &until) == ETIMEDOUT) break;
        }
        int n = take_batch(b);
        serve_metrics_queue_depth(b->metrics, b->queued);
        pthread_mutex_unlock(&b->mu);
        run_batch(b, n);
        pthread_mutex_lock(&b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

serve_batcher *serve_batcher_create(serve_model *model, serve_metrics *metrics,
                                    const serve_batcher_params *params) {
    serve_batcher *b = wpk_calloc(1, sizeof *b);
    if (!b) return NULL;
    b->model = model;
    b->metrics = metrics;
    b->params = *params;
    b->batch = wpk_calloc((size_t)model->max_batch, sizeof *b->batch);
    if (!b->batch) {
        wpk_free(b);
        return NULL;
    }
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->work_cv, NULL);
    if (pthread_create(&b->worker, NULL, worker_main, b) != 0) {
        pthread_cond_destroy(&b->work_cv);
        pthread_mutex_destroy(&b->mu);
        wpk_free(b->batch);
        wpk_free(b);
        return NULL;
    }
    return b;
}

void serve_batcher_free(serve_batcher *b) {
    if (!b) return;
    pthread_mutex_lock(&b->mu);
    b->stopping = true;
    pthread_cond_broadcast(&b->work_cv);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->worker, NULL);
    pthread_cond_destroy(&b->work_cv);
    pthread_mutex_destroy(&b->mu);
    wpk_free(b->batch);
    wpk_free(b);
}

void serve_batcher_arriving(serve_batcher *b) {
    pthread_mutex_lock(&b->mu);
    b->arriving++;
    pthread_mutex_unlock(&b->mu);
}

void serve_batcher_arrived(serve_batcher *b) {
    pthread_mutex_lock(&b->mu);
    if (b->arriving > 0) b->arriving--;
    pthread_cond_signal(&b->work_cv);
    pthread_mutex_unlock(&b->mu);
}

int serve_batcher_run(serve_batcher *b, serve_request *r) {
    pthread_mutex_lock(&b->mu);
    if (b->stopping || b->queued >= b->params.queue_limit) {
        if (b->arriving > 0) b->arriving--;
        pthread_cond_signal(&b->work_cv);
        pthread_mutex_unlock(&b->mu);
        return 503;
    }
    if (b->arriving > 0) b->arriving--; /* it has arrived: counted now, under the same lock */
    r->t_enqueue = serve_now();
    r->next = NULL;
    if (b->tail) b->tail->next = r;
    else b->head = r;
    b->tail = r;
    b->queued++;
    serve_metrics_queue_depth(b->metrics, b->queued);
    pthread_cond_signal(&b->work_cv);
    while (!r->done) pthread_cond_wait(&r->done_cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    serve_metrics_queued(b->metrics, r->t_start - r->t_enqueue);
    return 0;
}
