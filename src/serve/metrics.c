/* metrics.c -- counters and fixed-bucket histograms behind one lock, printed as Prometheus
 * text. */
#include <pthread.h>
#include <string.h>

#include "base/alloc.h"
#include "base/strbuf.h"
#include "serve/metrics.h"

#define MAX_BUCKETS 16
#define MAX_STATUSES 16

typedef struct histogram {
    const char *name, *help;
    const double *bounds; /* upper bounds, ascending; +Inf is implied */
    int nbounds;
    uint64_t counts[MAX_BUCKETS]; /* per bound, not cumulative */
    uint64_t count;
    double sum;
} histogram;

static const double BATCH_BOUNDS[] = {1, 2, 4, 8, 16, 32, 64, 128};
static const double QUEUE_BOUNDS[] = {0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                      0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
static const double TIME_BOUNDS[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                     0.25, 0.5, 1, 2.5, 5, 10};
#define NB(a) ((int)(sizeof a / sizeof *a))

struct serve_metrics {
    pthread_mutex_t mu;
    char *model;
    int statuses[MAX_STATUSES]; /* HTTP statuses seen, with their counts */
    uint64_t status_counts[MAX_STATUSES];
    int nstatuses;
    uint64_t batches, rows, padded_rows;
    int queue_depth;
    histogram batch_size, queue_time, latency, run_time;
};

static void observe(histogram *h, double v) {
    for (int i = 0; i < h->nbounds; i++)
        if (v <= h->bounds[i]) {
            h->counts[i]++;
            break;
        }
    h->count++;
    h->sum += v;
}

/* The name as a Prometheus label value: backslash, quote and newline escaped. */
static char *label_value(const char *s) {
    strbuf b = {0};
    sb_puts(&b, "");
    for (; *s; s++) {
        if (*s == '\\') sb_puts(&b, "\\\\");
        else if (*s == '"') sb_puts(&b, "\\\"");
        else if (*s == '\n') sb_puts(&b, "\\n");
        else sb_printf(&b, "%c", *s);
    }
    if (b.oom) {
        sb_free(&b);
        return NULL;
    }
    return sb_take(&b);
}

serve_metrics *serve_metrics_create(const char *model_name) {
    serve_metrics *m = wpk_calloc(1, sizeof *m);
    if (!m) return NULL;
    if (!(m->model = label_value(model_name))) {
        wpk_free(m);
        return NULL;
    }
    pthread_mutex_init(&m->mu, NULL);
    m->batch_size = (histogram){"wpk_batch_size", "Requests run together in one batch.",
                                BATCH_BOUNDS, NB(BATCH_BOUNDS), {0}, 0, 0};
    m->queue_time = (histogram){"wpk_queue_seconds", "Time a request waited in the queue.",
                                QUEUE_BOUNDS, NB(QUEUE_BOUNDS), {0}, 0, 0};
    m->latency = (histogram){"wpk_request_latency_seconds",
                             "Time from an infer request's arrival to its response.",
                             TIME_BOUNDS, NB(TIME_BOUNDS), {0}, 0, 0};
    m->run_time = (histogram){"wpk_batch_run_seconds", "Time one batch took to run.",
                              TIME_BOUNDS, NB(TIME_BOUNDS), {0}, 0, 0};
    return m;
}

void serve_metrics_free(serve_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    wpk_free(m->model);
    wpk_free(m);
}

void serve_metrics_request(serve_metrics *m, int http_status, double latency_s) {
    pthread_mutex_lock(&m->mu);
    int i = 0;
    while (i < m->nstatuses && m->statuses[i] != http_status) i++;
    if (i == m->nstatuses && i < MAX_STATUSES) m->statuses[m->nstatuses++] = http_status;
    if (i < m->nstatuses) m->status_counts[i]++;
    observe(&m->latency, latency_s);
    pthread_mutex_unlock(&m->mu);
}

void serve_metrics_batch(serve_metrics *m, int requests, int64_t rows, int64_t run_rows,
                         double run_s) {
    pthread_mutex_lock(&m->mu);
    m->batches++;
    m->rows += (uint64_t)rows;
    m->padded_rows += (uint64_t)(run_rows - rows);
    observe(&m->batch_size, requests);
    observe(&m->run_time, run_s);
    pthread_mutex_unlock(&m->mu);
}

void serve_metrics_queued(serve_metrics *m, double queue_s) {
    pthread_mutex_lock(&m->mu);
    observe(&m->queue_time, queue_s);
    pthread_mutex_unlock(&m->mu);
}

void serve_metrics_queue_depth(serve_metrics *m, int depth) {
    pthread_mutex_lock(&m->mu);
    m->queue_depth = depth;
    pthread_mutex_unlock(&m->mu);
}

static void print_histogram(strbuf *b, const histogram *h, const char *model) {
    sb_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", h->name, h->help, h->name);
    uint64_t cum = 0;
    for (int i = 0; i < h->nbounds; i++) {
        cum += h->counts[i];
        sb_printf(b, "%s_bucket{model=\"%s\",le=\"%g\"} %llu\n", h->name, model, h->bounds[i],
                  (unsigned long long)cum);
    }
    sb_printf(b, "%s_bucket{model=\"%s\",le=\"+Inf\"} %llu\n", h->name, model,
              (unsigned long long)h->count);
    sb_printf(b, "%s_sum{model=\"%s\"} %.9g\n", h->name, model, h->sum);
    sb_printf(b, "%s_count{model=\"%s\"} %llu\n", h->name, model, (unsigned long long)h->count);
}

char *serve_metrics_text(serve_metrics *m) {
    strbuf b = {0};
    pthread_mutex_lock(&m->mu);
    const char *model = m->model;
    sb_puts(&b, "# HELP wpk_requests_total Infer requests answered, by HTTP status.\n"
                "# TYPE wpk_requests_total counter\n");
    for (int i = 0; i < m->nstatuses; i++)
        sb_printf(&b, "wpk_requests_total{model=\"%s\",status=\"%d\"} %llu\n", model,
                  m->statuses[i], (unsigned long long)m->status_counts[i]);
    sb_printf(&b, "# HELP wpk_batches_total Batches run.\n# TYPE wpk_batches_total counter\n"
                  "wpk_batches_total{model=\"%s\"} %llu\n", model,
              (unsigned long long)m->batches);
    sb_printf(&b, "# HELP wpk_rows_total Batch rows run for requests.\n"
                  "# TYPE wpk_rows_total counter\nwpk_rows_total{model=\"%s\"} %llu\n", model,
              (unsigned long long)m->rows);
    sb_printf(&b, "# HELP wpk_padded_rows_total Rows of zeros run to fill a batch size with a "
                  "plan.\n# TYPE wpk_padded_rows_total counter\n"
                  "wpk_padded_rows_total{model=\"%s\"} %llu\n", model,
              (unsigned long long)m->padded_rows);
    sb_printf(&b, "# HELP wpk_queue_depth Requests queued, not yet running.\n"
                  "# TYPE wpk_queue_depth gauge\nwpk_queue_depth{model=\"%s\"} %d\n", model,
              m->queue_depth);
    print_histogram(&b, &m->batch_size, model);
    print_histogram(&b, &m->queue_time, model);
    print_histogram(&b, &m->latency, model);
    print_histogram(&b, &m->run_time, model);
    pthread_mutex_unlock(&m->mu);
    if (b.oom) {
        sb_free(&b);
        return NULL;
    }
    return sb_take(&b);
}
