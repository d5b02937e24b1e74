/* model.c -- the served model: loading, the metadata clients see, and running one batch of
 * requests on the session (gather rows, pad, run, split). */
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "serve/model.h"

static const struct {
    wpk_dtype dtype;
    const char *name;
} DATATYPES[] = {
    {WPK_DTYPE_FLOAT32, "FP32"}, {WPK_DTYPE_FLOAT64, "FP64"}, {WPK_DTYPE_INT8, "INT8"},
    {WPK_DTYPE_UINT8, "UINT8"},  {WPK_DTYPE_INT32, "INT32"},  {WPK_DTYPE_INT64, "INT64"},
    {WPK_DTYPE_BOOL, "BOOL"},
};

const char *serve_datatype_name(wpk_dtype dtype) {
    for (size_t i = 0; i < sizeof DATATYPES / sizeof *DATATYPES; i++)
        if (DATATYPES[i].dtype == dtype) return DATATYPES[i].name;
    return NULL;
}

wpk_dtype serve_datatype_parse(const char *name) {
    for (size_t i = 0; i < sizeof DATATYPES / sizeof *DATATYPES; i++)
        if (strcmp(DATATYPES[i].name, name) == 0) return DATATYPES[i].dtype;
    return WPK_DTYPE_UNDEFINED;
}

static char *file_stem(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t len = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    char *s = wpk_malloc(len + 1);
    if (!s) return NULL;
    memcpy(s, base, len);
    s[len] = 0;
    return s;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Describes view into io: -1 for the batch dim when the model batches, and for a model's
 * other symbolic dims; a plan's other dims are the ones it was compiled for. */
static void describe(serve_io *io, const wpk_tensor_view *v, bool batched, bool is_plan) {
    io->name = v->name;
    io->dtype = v->dtype;
    io->ndim = v->ndim;
    for (int d = 0; d < v->ndim; d++)
        io->dims[d] = (d == 0 && batched) || (!is_plan && v->dim_names[d]) ? -1 : v->dims[d];
}

/* A model batches when dim 0 of every input and output is the same symbolic dim: requests
 * stacked along it are independent rows. A plan names its inputs' symbolic dims only: it
 * batches when dim 0 of every input is named, with one compiled size, which dim 0 of every
 * output has too. */
static bool batch_dim_free(const wpk_tensor_view *in, int nin, const wpk_tensor_view *out,
                           int nout, bool is_plan) {
    const char *name = NULL;
    for (int i = 0; i < nin + nout; i++) {
        const wpk_tensor_view *v = i < nin ? &in[i] : &out[i - nin];
        if (v->ndim < 1) return false;
        if (is_plan && i >= nin) {
            if (v->dims[0] != in[0].dims[0]) return false;
            continue;
        }
        if (!v->dim_names[0] || (name && strcmp(name, v->dim_names[0]) != 0)) return false;
        if (is_plan && v->dims[0] != in[0].dims[0]) return false;
        name = v->dim_names[0];
    }
    return nin > 0;
}

static wpk_status describe_all(serve_model *m, bool is_plan) {
    wpk_context *ctx = m->ctx;
    m->ninputs = wpk_session_num_inputs(m->session);
    m->noutputs = wpk_session_num_outputs(m->session);
    m->inputs = wpk_calloc((size_t)m->ninputs + 1, sizeof *m->inputs);
    m->outputs = wpk_calloc((size_t)m->noutputs + 1, sizeof *m->outputs);
    m->gather = wpk_calloc((size_t)m->ninputs + 1, sizeof *m->gather);
    m->gather_cap = wpk_calloc((size_t)m->ninputs + 1, sizeof *m->gather_cap);
    wpk_tensor_view *views = wpk_calloc((size_t)(m->ninputs + m->noutputs) + 1, sizeof *views);
    if (!m->inputs || !m->outputs || !m->gather || !m->gather_cap || !views) {
        wpk_free(views);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory describing the model");
    }
    wpk_tensor_view *outs = views + m->ninputs;
    for (int i = 0; i < m->ninputs; i++) views[i] = wpk_session_input_info(m->session, i);
    for (int i = 0; i < m->noutputs; i++) outs[i] = wpk_session_output_info(m->session, i);
    wpk_status st = WPK_OK;
    for (int i = 0; i < m->ninputs + m->noutputs && !st; i++)
        if (!serve_datatype_name(views[i].dtype))
            st = wpk_error(ctx, WPK_ERR_UNSUPPORTED, "%s '%s' has dtype %s, which the server "
                           "cannot carry", i < m->ninputs ? "input" : "output", views[i].name,
                           wpk_dtype_name(views[i].dtype));
    m->batched = st == WPK_OK && batch_dim_free(views, m->ninputs, outs, m->noutputs, is_plan);
    for (int i = 0; i < m->ninputs; i++) describe(&m->inputs[i], &views[i], m->batched, is_plan);
    for (int i = 0; i < m->noutputs; i++)
        describe(&m->outputs[i], &outs[i], m->batched, is_plan);
    m->plan_batch = is_plan && m->batched ? views[0].dims[0] : 0;
    wpk_free(views);
    return st;
}

wpk_status serve_model_load(wpk_context *ctx, const char *path, const serve_model_params *params,
                            serve_model **out) {
    *out = NULL;
    if (params->max_batch < 1)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "max batch must be >= 1, not %d",
                         params->max_batch);
    serve_model *m = wpk_calloc(1, sizeof *m);
    if (!m) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory loading %s", path);
    m->ctx = ctx;
    m->name = params->name ? wpk_strdup(params->name) : file_stem(path);
    if (!m->name) {
        serve_model_free(m);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory loading %s", path);
    }
    wpk_session_params sp = wpk_session_default_params();
    sp.backend = WPK_BACKEND_CPU;
    sp.threads = params->threads;
    wpk_status st;
    bool is_plan = ends_with(path, ".wpk");
    if (is_plan) {
        m->platform = "wpk_plan";
        st = wpk_session_create_from_plan(ctx, path, &sp, &m->session);
    } else {
        m->platform = "wpk_onnx";
        st = wpk_model_load(ctx, path, &m->model);
        if (st == WPK_OK) st = wpk_session_create(ctx, m->model, &sp, &m->session);
    }
    /* the loaders' messages name the file already */
    if (st == WPK_OK && (st = describe_all(m, is_plan)) != WPK_OK)
        wpk_error_prefix(ctx, "%s", path);
    if (st) {
        serve_model_free(m);
        return st;
    }
    m->max_batch = m->batched ? params->max_batch : 1;
    /* a plan runs exactly its compiled batch: no run can hold more rows */
    if (m->plan_batch > 0 && m->max_batch > m->plan_batch) m->max_batch = (int)m->plan_batch;
    *out = m;
    return WPK_OK;
}

void serve_model_free(serve_model *m) {
    if (!m) return;
    wpk_session_free(m->session);
    wpk_model_free(m->model);
    for (int i = 0; m->gather && i < m->ninputs; i++) wpk_free(m->gather[i]);
    wpk_free(m->gather);
    wpk_free(m->gather_cap);
    wpk_free(m->inputs);
    wpk_free(m->outputs);
    wpk_free(m->name);
    wpk_free(m);
}

int64_t serve_model_run_rows(const serve_model *m, int64_t rows) {
    if (!m->batched) return rows;
    if (m->plan_batch > 0) return m->plan_batch;
    if (rows >= m->max_batch) return rows;
    /* powers of two below max_batch: few plans to make ahead, at most half the rows padding */
    int64_t p = 1;
    while (p < rows) p *= 2;
    return p < m->max_batch ? p : m->max_batch;
}

bool serve_model_can_merge(const serve_model *m, const serve_request *a, const serve_request *b) {
    if (!m->batched) return false;
    for (int i = 0; i < m->ninputs; i++) {
        const serve_tensor *x = &a->inputs[i], *y = &b->inputs[i];
        if (x->ndim != y->ndim) return false;
        for (int d = 1; d < x->ndim; d++)
            if (x->dims[d] != y->dims[d]) return false;
    }
    return true;
}

/* Gathers input i of every request into one buffer of run_rows rows, zeros after the last. */
static wpk_status gather_input(serve_model *m, int i, serve_request **reqs, int n,
                               int64_t run_rows, const void **data) {
    const serve_tensor *first = &reqs[0]->inputs[i];
    size_t row_bytes = first->nbytes / (size_t)(first->dims[0] ? first->dims[0] : 1);
    size_t bytes = row_bytes * (size_t)run_rows;
    if (bytes > m->gather_cap[i] || !m->gather[i]) {
        void *buf = wpk_malloc(bytes ? bytes : 1);
        if (!buf)
            return wpk_error(m->ctx, WPK_ERR_NOMEM, "out of memory gathering input '%s' of a "
                             "batch of %lld rows", m->inputs[i].name, (long long)run_rows);
        wpk_free(m->gather[i]);
        m->gather[i] = buf;
        m->gather_cap[i] = bytes;
    }
    char *dst = m->gather[i];
    size_t at = 0;
    for (int r = 0; r < n; r++) {
        memcpy(dst + at, reqs[r]->inputs[i].data, reqs[r]->inputs[i].nbytes);
        at += reqs[r]->inputs[i].nbytes;
    }
    memset(dst + at, 0, bytes - at);
    *data = dst;
    return WPK_OK;
}

/* Copies each request's rows of output i out of the batch's output view. */
static wpk_status split_output(serve_model *m, int i, const wpk_tensor_view *v,
                               serve_request **reqs, int n) {
    size_t total = wpk_dtype_size(v->dtype) * (size_t)serve_elements(v->dims, v->ndim);
    size_t row_bytes = m->batched ? total / (size_t)(v->dims[0] ? v->dims[0] : 1) : total;
    size_t at = 0;
    for (int r = 0; r < n; r++) {
        serve_tensor *o = &reqs[r]->outputs[i];
        size_t bytes = m->batched ? row_bytes * (size_t)reqs[r]->rows : total;
        o->dtype = v->dtype;
        o->ndim = v->ndim;
        memcpy(o->dims, v->dims, sizeof(int64_t) * (size_t)v->ndim);
        if (m->batched) o->dims[0] = reqs[r]->rows;
        o->nbytes = bytes;
        o->data = wpk_malloc(bytes ? bytes : 1);
        if (!o->data)
            return wpk_error(m->ctx, WPK_ERR_NOMEM, "out of memory copying output '%s'",
                             m->outputs[i].name);
        memcpy(o->data, (const char *)v->data + at, bytes);
        at += bytes;
    }
    return WPK_OK;
}

static void drop_outputs(serve_request **reqs, int n) {
    for (int r = 0; r < n; r++)
        for (int i = 0; i < reqs[r]->noutputs; i++) {
            wpk_free(reqs[r]->outputs[i].data);
            reqs[r]->outputs[i].data = NULL;
        }
}

wpk_status serve_model_run(serve_model *m, serve_request **reqs, int n) {
    int64_t rows = 0;
    for (int r = 0; r < n; r++) rows += reqs[r]->rows;
    int64_t run_rows = serve_model_run_rows(m, rows);
    wpk_status st = WPK_OK;
    for (int i = 0; i < m->ninputs && !st; i++) {
        const serve_tensor *t = &reqs[0]->inputs[i];
        const void *data = t->data;
        int64_t dims[WPK_MAX_DIMS];
        memcpy(dims, t->dims, sizeof(int64_t) * (size_t)t->ndim);
        if (m->batched) {
            st = gather_input(m, i, reqs, n, run_rows, &data);
            dims[0] = run_rows;
        }
        if (!st) st = wpk_session_set_input(m->session, m->inputs[i].name, t->dtype, dims,
                                            t->ndim, data);
    }
    if (!st) st = wpk_session_run(m->session);
    for (int i = 0; i < m->noutputs && !st; i++) {
        wpk_tensor_view v;
        st = wpk_session_output(m->session, i, &v);
        if (!st && m->batched && (v.ndim < 1 || v.dims[0] != run_rows))
            st = wpk_error(m->ctx, WPK_ERR_INTERNAL, "output '%s' has %lld rows for a batch of "
                           "%lld", m->outputs[i].name, (long long)(v.ndim ? v.dims[0] : 0),
                           (long long)run_rows);
        if (!st) st = split_output(m, i, &v, reqs, n);
    }
    if (st) drop_outputs(reqs, n);
    return st;
}

/* A request of `rows` rows of zeros, the model's symbolic dims other than the batch at 1. */
static serve_request *zeros_request(const serve_model *m, int64_t rows) {
    serve_request *r = serve_request_create(m->ninputs, m->noutputs);
    if (!r) return NULL;
    r->rows = rows;
    for (int i = 0; i < m->ninputs; i++) {
        serve_tensor *t = &r->inputs[i];
        t->dtype = m->inputs[i].dtype;
        t->ndim = m->inputs[i].ndim;
        for (int d = 0; d < t->ndim; d++)
            t->dims[d] = m->inputs[i].dims[d] >= 0 ? m->inputs[i].dims[d] : 1;
        if (m->batched) t->dims[0] = rows;
        t->nbytes = wpk_dtype_size(t->dtype) * (size_t)serve_elements(t->dims, t->ndim);
        if (!(t->data = wpk_calloc(t->nbytes ? t->nbytes : 1, 1))) {
            serve_request_free(r);
            return NULL;
        }
    }
    return r;
}

wpk_status serve_model_warm(serve_model *m) {
    /* a symbolic dim besides the batch has no size to guess: its plans are made on first use */
    for (int i = 0; i < m->ninputs; i++)
        for (int d = m->batched ? 1 : 0; d < m->inputs[i].ndim; d++)
            if (m->inputs[i].dims[d] < 0) return WPK_OK;
    int64_t last = 0;
    for (int64_t rows = 1; rows <= m->max_batch; rows++) {
        int64_t run = serve_model_run_rows(m, rows);
        if (run == last) continue;
        last = run;
        serve_request *r = zeros_request(m, run);
        if (!r) return wpk_error(m->ctx, WPK_ERR_NOMEM, "out of memory warming the model");
        wpk_status st = serve_model_run(m, &r, 1);
        serve_request_free(r);
        if (st) return st;
    }
    return WPK_OK;
}
