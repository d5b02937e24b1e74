/* metrics.h -- the server's counters and histograms (infer requests by HTTP status, batch
 * sizes, queue time, request latency, run time) and their Prometheus text exposition. */
#ifndef WPK_SERVE_METRICS_H
#define WPK_SERVE_METRICS_H

#include <stdint.h>

typedef struct serve_metrics serve_metrics;

/* model_name is copied. NULL when out of memory. */
serve_metrics *serve_metrics_create(const char *model_name);
void serve_metrics_free(serve_metrics *m);

/* Every function below is thread-safe. */
/* An infer request answered with http_status after latency_s seconds. */
void serve_metrics_request(serve_metrics *m, int http_status, double latency_s);
/* A batch of `requests` requests and `rows` rows run as run_rows rows in run_s seconds. */
void serve_metrics_batch(serve_metrics *m, int requests, int64_t rows, int64_t run_rows,
                         double run_s);
/* A request waited queue_s seconds in the queue before its batch started. */
void serve_metrics_queued(serve_metrics *m, double queue_s);
void serve_metrics_queue_depth(serve_metrics *m, int depth);

/* The Prometheus text format (version 0.0.4) of every metric; the caller frees it with
 * wpk_free. NULL when out of memory. */
char *serve_metrics_text(serve_metrics *m);

#endif
