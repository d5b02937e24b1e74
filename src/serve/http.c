/* http.c -- the KServe v2 HTTP routes on libmicrohttpd: a thread per connection, which blocks
 * in the batcher while its request waits for its batch. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "serve/codec.h"
#include "serve/http.h"

struct serve_http {
    const serve_model *model; /* borrowed */
    serve_batcher *batcher;   /* borrowed */
    serve_metrics *metrics;   /* borrowed */
    serve_http_params params;
    struct MHD_Daemon *daemon;
    int port;
    pthread_mutex_t mu;
    pthread_cond_t idle_cv;   /* in_flight reached 0 */
    int in_flight;            /* requests begun and not yet completed */
    bool draining;
};

/* What one request gathers across the callbacks of its connection. */
typedef struct exchange {
    serve_http *h;
    double t_arrive;
    bool announced;      /* an infer request the batcher was told of, not yet handed to it */
    bool refused;        /* answered before its body was read (draining, too large) */
    char *body;
    size_t len, cap;
} exchange;

/* The batcher stops expecting x's request: it will not be queued. */
static void settle(exchange *x) {
    if (!x->announced) return;
    x->announced = false;
    serve_batcher_arrived(x->h->batcher);
}

static bool is_draining(serve_http *h) {
    pthread_mutex_lock(&h->mu);
    bool d = h->draining;
    pthread_mutex_unlock(&h->mu);
    return d;
}

static enum MHD_Result send_body(struct MHD_Connection *c, int status, char *body, size_t len,
                                 const char *type, size_t json_len) {
    struct MHD_Response *resp =
        MHD_create_response_from_buffer_with_free_callback(len, body, wpk_free);
    if (!resp) {
        wpk_free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (json_len) {
        char v[32];
        snprintf(v, sizeof v, "%zu", json_len);
        MHD_add_response_header(resp, "Inference-Header-Content-Length", v);
    }
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, int status, char *json) {
    if (!json) return MHD_NO;
    return send_body(c, status, json, strlen(json), "application/json", 0);
}

static enum MHD_Result send_error(struct MHD_Connection *c, int status, const char *msg) {
    return send_json(c, status, serve_encode_error(msg));
}

/* Answers an infer request whose body is complete; returns the HTTP status it sent. */
static int infer(serve_http *h, struct MHD_Connection *c, exchange *x, enum MHD_Result *ret) {
    const char *hlen = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                   "Inference-Header-Content-Length");
    int64_t json_len = -1;
    if (hlen) {
        char *end = NULL;
        long long v = strtoll(hlen, &end, 10);
        if (!*hlen || *end || v < 0) {
            settle(x);
            *ret = send_error(c, 400, "header Inference-Header-Content-Length is not a "
                              "non-negative integer");
            return 400;
        }
        json_len = v;
    }
    char err[1024] = "";
    serve_request *r = NULL;
    int status = serve_decode_infer(h->model, x->body ? x->body : "", x->len, json_len, &r, err,
                                    sizeof err);
    if (status != 200) {
        settle(x);
        *ret = send_error(c, status, err);
        return status;
    }
    r->t_arrive = x->t_arrive;
    x->announced = false; /* serve_batcher_run counts it as arrived */
    if (serve_batcher_run(h->batcher, r) == 503) {
        serve_request_free(r);
        *ret = send_error(c, 503, is_draining(h) ? "the server is shutting down"
                                              : "the request queue is full; try again later");
        return 503;
    }
    status = r->status;
    if (status != 200) {
        *ret = send_error(c, status, r->error ? r->error : "the batch failed");
    } else {
        char *body = NULL;
        size_t len = 0, jl = 0;
        if (serve_encode_infer(h->model, r, &body, &len, &jl) != 0) {
            status = 500;
            *ret = send_error(c, 500, "out of memory encoding the response");
        } else {
            *ret = send_body(c, 200, body, len,
                             jl ? "application/octet-stream" : "application/json", jl);
        }
    }
    serve_request_free(r);
    return status;
}

/* The model route's rest after /v2/models/<name>: "", "/ready" or "/infer", an optional
 * "/versions/<v>" before it skipped. NULL when the name is not the model's. */
static const char *model_route(const serve_http *h, const char *path) {
    size_t n = strlen(h->model->name);
    if (strncmp(path, h->model->name, n) != 0 || (path[n] && path[n] != '/')) return NULL;
    const char *rest = path + n;
    if (strncmp(rest, "/versions/", 10) == 0) {
        rest = strchr(rest + 10, '/');
        if (!rest) rest = "";
    }
    return rest;
}

static enum MHD_Result route(serve_http *h, struct MHD_Connection *c, const char *url,
                             const char *method, exchange *x) {
    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    bool post = strcmp(method, "POST") == 0;
    char msg[512];
    if (strcmp(url, "/v2/health/live") == 0 && get)
        return send_json(c, 200, wpk_strdup("{\"live\":true}"));
    if (strcmp(url, "/v2/health/ready") == 0 && get)
        return is_draining(h) ? send_json(c, 503, wpk_strdup("{\"ready\":false}"))
                              : send_json(c, 200, wpk_strdup("{\"ready\":true}"));
    if (strcmp(url, "/v2") == 0 && get)
        return send_json(c, 200, wpk_strdup("{\"name\":\"wpk\",\"version\":\"1\","
                                            "\"extensions\":[\"binary_tensor_data\"]}"));
    if (strcmp(url, "/metrics") == 0 && get) {
        char *text = serve_metrics_text(h->metrics);
        if (!text) return send_error(c, 500, "out of memory printing the metrics");
        return send_body(c, 200, text, strlen(text), "text/plain; version=0.0.4", 0);
    }
    if (strncmp(url, "/v2/models/", 11) == 0) {
        const char *rest = model_route(h, url + 11);
        if (!rest) {
            const char *end = strchr(url + 11, '/');
            int n = end ? (int)(end - (url + 11)) : (int)strlen(url + 11);
            snprintf(msg, sizeof msg, "no model named '%.*s' (this server serves '%s')", n,
                     url + 11, h->model->name);
            if (x->announced) {
                settle(x);
                serve_metrics_request(h->metrics, 404, serve_now() - x->t_arrive);
            }
            return send_error(c, 404, msg);
        }
        if (!*rest && get) return send_json(c, 200, serve_encode_metadata(h->model));
        if (strcmp(rest, "/ready") == 0 && get)
            return is_draining(h) ? send_json(c, 503, wpk_strdup("{\"ready\":false}"))
                                  : send_json(c, 200, wpk_strdup("{\"ready\":true}"));
        if (strcmp(rest, "/infer") == 0 && post) {
            enum MHD_Result ret = MHD_NO;
            int status = infer(h, c, x, &ret);
            serve_metrics_request(h->metrics, status, serve_now() - x->t_arrive);
            return ret;
        }
        if (!*rest || !strcmp(rest, "/ready") || !strcmp(rest, "/infer")) {
            snprintf(msg, sizeof msg, "%s is not allowed on %s", method, url);
            return send_error(c, 405, msg);
        }
    }
    snprintf(msg, sizeof msg, "no route %s %s", method, url);
    return send_error(c, 404, msg);
}

static bool is_infer(const char *url, const char *method) {
    size_t n = strlen(url);
    return strcmp(method, "POST") == 0 && strncmp(url, "/v2/models/", 11) == 0 && n > 6 &&
           strcmp(url + n - 6, "/infer") == 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **state) {
    (void)version;
    serve_http *h = cls;
    exchange *x = *state;
    if (!x) {
        /* the first call: headers only */
        if (!(x = wpk_calloc(1, sizeof *x))) return MHD_NO;
        x->h = h;
        x->t_arrive = serve_now();
        *state = x;
        pthread_mutex_lock(&h->mu);
        h->in_flight++;
        bool draining = h->draining;
        pthread_mutex_unlock(&h->mu);
        if (draining) {
            x->refused = true;
            return send_error(c, 503, "the server is shutting down");
        }
        x->announced = is_infer(url, method);
        if (x->announced) serve_batcher_arriving(h->batcher);
        return MHD_YES;
    }
    if (x->refused) {
        *upload_size = 0; /* the answer is sent; the rest of the body is read and dropped */
        return MHD_YES;
    }
    if (*upload_size) {
        if (x->len + *upload_size > h->params.max_body) {
            char msg[128];
            snprintf(msg, sizeof msg, "the request body is larger than %zu bytes",
                     h->params.max_body);
            x->refused = true;
            *upload_size = 0;
            if (x->announced) {
                settle(x);
                serve_metrics_request(h->metrics, 413, serve_now() - x->t_arrive);
            }
            return send_error(c, 413, msg);
        }
        if (x->len + *upload_size > x->cap) {
            /* the whole body at once where its length is known, else doubling */
            const char *declared = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                               MHD_HTTP_HEADER_CONTENT_LENGTH);
            unsigned long long want = declared ? strtoull(declared, NULL, 10) : 0;
            size_t cap = x->cap ? x->cap : 4096;
            if (!x->cap && want > cap && want <= h->params.max_body) cap = (size_t)want;
            while (cap < x->len + *upload_size) cap *= 2;
            char *grown = wpk_realloc(x->body, cap);
            if (!grown) return MHD_NO;
            x->body = grown;
            x->cap = cap;
        }
        memcpy(x->body + x->len, upload, *upload_size);
        x->len += *upload_size;
        *upload_size = 0;
        return MHD_YES;
    }
    return route(h, c, url, method, x);
}

/* Called when a request is over (answered, or its connection lost). */
static void on_completed(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode why) {
    (void)c;
    (void)why;
    serve_http *h = cls;
    exchange *x = *state;
    if (!x) return;
    settle(x); /* a connection lost, or a route error, before the request reached the batcher */
    wpk_free(x->body);
    wpk_free(x);
    *state = NULL;
    pthread_mutex_lock(&h->mu);
    if (--h->in_flight == 0) pthread_cond_broadcast(&h->idle_cv);
    pthread_mutex_unlock(&h->mu);
}

serve_http *serve_http_start(const serve_model *model, serve_batcher *batcher,
                             serve_metrics *metrics, const serve_http_params *params, char *err,
                             size_t err_size) {
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)params->port);
    if (inet_pton(AF_INET, params->host, &addr.sin_addr) != 1) {
        snprintf(err, err_size, "--host '%s' is not an IPv4 address", params->host);
        return NULL;
    }
    if (params->port < 0 || params->port > 65535) {
        snprintf(err, err_size, "--port %d is out of range (0 to 65535)", params->port);
        return NULL;
    }
    serve_http *h = wpk_calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, err_size, "out of memory starting the server");
        return NULL;
    }
    h->model = model;
    h->batcher = batcher;
    h->metrics = metrics;
    h->params = *params;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->idle_cv, NULL);
    h->daemon = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC, 0, NULL,
        NULL, on_request, h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)120, MHD_OPTION_CONNECTION_LIMIT, (unsigned)1000, MHD_OPTION_END);
    if (!h->daemon) {
        snprintf(err, err_size, "cannot listen on %s:%d (in use, or not permitted)",
                 params->host, params->port);
        serve_http_free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? (int)info->port : params->port;
    return h;
}

int serve_http_port(const serve_http *h) { return h->port; }

void serve_http_drain(serve_http *h, double timeout_s) {
    pthread_mutex_lock(&h->mu);
    h->draining = true;
    pthread_mutex_unlock(&h->mu);
    MHD_socket fd = MHD_quiesce_daemon(h->daemon);
    if (fd != MHD_INVALID_SOCKET) close(fd);
    double until = serve_now() + timeout_s;
    pthread_mutex_lock(&h->mu);
    while (h->in_flight > 0 && serve_now() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&h->idle_cv, &h->mu, &ts);
    }
    pthread_mutex_unlock(&h->mu);
}

void serve_http_free(serve_http *h) {
    if (!h) return;
    if (h->daemon) MHD_stop_daemon(h->daemon);
    pthread_cond_destroy(&h->idle_cv);
    pthread_mutex_destroy(&h->mu);
    wpk_free(h);
}
