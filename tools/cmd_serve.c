/* cmd_serve.c -- `wpk serve`: a model (or a compiled plan) behind a KServe v2 HTTP server with
 * dynamic batching, until SIGTERM or SIGINT, which drain it: no new requests, every queued one
 * answered, exit 0. */
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/batcher.h"
#include "serve/http.h"
#include "serve/metrics.h"
#include "serve/model.h"
#include "wpk.h"

int cmd_serve(int argc, char **argv);

static const char USAGE[] =
    "usage: wpk serve MODEL.onnx|PLAN.wpk [--port N] [--host ADDR] [--name NAME]\n"
    "                 [--max-batch B] [--max-delay-us T] [--threads N] [--queue N]\n"
    "\n"
    "Serves the model over HTTP/JSON as KServe v2 (Open Inference Protocol, with the binary\n"
    "tensor data extension) and /metrics (Prometheus). Requests that arrive together run as\n"
    "one batch along the model's batch dim.\n"
    "  --port N          port to listen on (default 8000; 0: any free port, printed)\n"
    "  --host ADDR       IPv4 address to listen on (default 127.0.0.1; 0.0.0.0: every one)\n"
    "  --name NAME       the model's name in the URLs (default: the file's stem)\n"
    "  --max-batch B     rows one run may hold (default 8; 1: no batching)\n"
    "  --max-delay-us T  how long the oldest queued request may wait for others that are\n"
    "                    being received (default 2000); a lone request runs at once\n"
    "  --threads N       threads each batch runs on (default: the physical cores)\n"
    "  --queue N         requests queued at most; more are answered 503 (default 256)\n";

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "wpk: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(run 'wpk serve --help' for usage)\n");
    return 1;
}

/* An integer option's value in [lo, hi]; false when missing or not one. */
static bool int_arg(const char *val, long lo, long hi, long *out) {
    if (!val || !*val) return false;
    char *end = NULL;
    long v = strtol(val, &end, 10);
    if (*end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

typedef struct serve_options {
    const char *path, *host, *name;
    long port, max_batch, max_delay_us, threads, queue;
} serve_options;

static int parse(int argc, char **argv, serve_options *o) {
    *o = (serve_options){NULL, "127.0.0.1", NULL, 8000, 8, 2000, 0, 256};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        long *num = NULL;
        long lo = 0, hi = 0;
        const char *what = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(USAGE, stdout);
            return -1;
        } else if (!strcmp(a, "--port")) {
            num = &o->port, lo = 0, hi = 65535, what = "--port needs a port from 0 to 65535";
        } else if (!strcmp(a, "--max-batch")) {
            num = &o->max_batch, lo = 1, hi = 4096, what = "--max-batch needs 1 to 4096";
        } else if (!strcmp(a, "--max-delay-us")) {
            num = &o->max_delay_us, lo = 0, hi = 10000000,
            what = "--max-delay-us needs 0 to 10000000";
        } else if (!strcmp(a, "--threads")) {
            num = &o->threads, lo = 0, hi = 4096, what = "--threads needs 0 to 4096";
        } else if (!strcmp(a, "--queue")) {
            num = &o->queue, lo = 1, hi = 1000000, what = "--queue needs 1 to 1000000";
        } else if (!strcmp(a, "--host") || !strcmp(a, "--name")) {
            if (!val || !*val) return usage_error("%s needs a value", a);
            if (!strcmp(a, "--host")) o->host = val;
            else o->name = val;
            i++;
            continue;
        } else if (a[0] == '-') {
            return usage_error("unknown option '%s' for 'serve'", a);
        } else if (o->path) {
            return usage_error("unexpected argument '%s' (one model per server)", a);
        } else {
            o->path = a;
            continue;
        }
        if (!int_arg(val, lo, hi, num)) {
            fprintf(stderr, "wpk: error: %s, not '%s'\n(run 'wpk serve --help' for usage)\n",
                    what, val ? val : "");
            return 1;
        }
        i++;
    }
    if (!o->path) return usage_error("%s", "'serve' needs a model file (.onnx) or a plan (.wpk)");
    struct in_addr addr;
    if (inet_pton(AF_INET, o->host, &addr) != 1)
        return usage_error("--host '%s' is not an IPv4 address", o->host);
    if (o->name && (strchr(o->name, '/') || strchr(o->name, '?')))
        return usage_error("--name '%s' may not contain '/' or '?'", o->name);
    return 0;
}

static int fail(wpk_status st, wpk_context *ctx) {
    const char *msg = wpk_context_error(ctx);
    fprintf(stderr, "wpk: error: %s\n", msg && *msg ? msg : wpk_status_name(st));
    return (st == WPK_ERR_NOMEM || st == WPK_ERR_INTERNAL) ? 2 : 1;
}

int cmd_serve(int argc, char **argv) {
    serve_options o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    /* every thread started from here on inherits the mask: only sigwait below sees them */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    wpk_context *ctx = wpk_context_create();
    if (!ctx) return 2;
    serve_model_params mp = {o.name, (int)o.threads, (int)o.max_batch};
    serve_model *model = NULL;
    wpk_status st = serve_model_load(ctx, o.path, &mp, &model);
    if (st == WPK_OK) {
        fprintf(stderr, "wpk serve: preparing '%s' (%s, batches up to %d rows)\n", model->name,
                model->batched ? "batch dim free" : "no batch dim: one request per run",
                model->max_batch);
        st = serve_model_warm(model);
    }
    if (st) {
        rc = fail(st, ctx);
        serve_model_free(model);
        wpk_context_free(ctx);
        return rc;
    }
    serve_metrics *metrics = serve_metrics_create(model->name);
    serve_batcher_params bp = {(double)o.max_delay_us * 1e-6, (int)o.queue};
    serve_batcher *batcher = metrics ? serve_batcher_create(model, metrics, &bp) : NULL;
    char err[512] = "out of memory starting the server";
    serve_http_params hp = {o.host, (int)o.port, (size_t)256 << 20};
    serve_http *http = batcher ? serve_http_start(model, batcher, metrics, &hp, err, sizeof err)
                               : NULL;
    if (!http) {
        fprintf(stderr, "wpk: error: %s\n", err);
        serve_batcher_free(batcher);
        serve_metrics_free(metrics);
        serve_model_free(model);
        wpk_context_free(ctx);
        return 1;
    }
    printf("wpk serve: model '%s' listening on http://%s:%d\n", model->name, o.host,
           serve_http_port(http));
    fflush(stdout);

    int sig = 0;
    sigwait(&stop_signals, &sig);
    fprintf(stderr, "wpk serve: %s: finishing the requests begun, then exiting\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    serve_http_drain(http, 60.0);
    serve_batcher_free(batcher); /* runs whatever is still queued */
    serve_http_free(http);
    serve_metrics_free(metrics);
    serve_model_free(model);
    wpk_context_free(ctx);
    return 0;
}
