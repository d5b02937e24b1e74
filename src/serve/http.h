/* http.h -- the HTTP front end (libmicrohttpd, a thread per connection): the KServe v2 routes
 * (health, model metadata and readiness, infer), /metrics, and a drain that stops taking
 * requests and lets those already begun be answered. */
#ifndef WPK_SERVE_HTTP_H
#define WPK_SERVE_HTTP_H

#include <stddef.h>

#include "serve/batcher.h"
#include "serve/metrics.h"
#include "serve/model.h"

typedef struct serve_http serve_http;

typedef struct serve_http_params {
    const char *host;  /* IPv4 address to listen on */
    int port;          /* 0: any free port (serve_http_port says which) */
    size_t max_body;   /* larger request bodies are refused with 413 */
} serve_http_params;

/* Listen and serve. model, batcher and metrics must outlive it. NULL on failure with the
 * cause in err. */
serve_http *serve_http_start(const serve_model *model, serve_batcher *batcher,
                             serve_metrics *metrics, const serve_http_params *params, char *err,
                             size_t err_size);

int serve_http_port(const serve_http *h);

/* Stop accepting connections; requests that begin from now on are answered 503; wait (at most
 * timeout_s) until every request already begun has been answered. */
void serve_http_drain(serve_http *h, double timeout_s);

/* Close every connection and free. */
void serve_http_free(serve_http *h);

#endif
