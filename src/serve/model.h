/* model.h -- the served model: an ONNX model or a compiled plan behind one session, what
 * clients see of it (name, platform, inputs and outputs with -1 for the batch dim), and the
 * running of a batch of requests: their rows gathered into one input per model input, padded
 * to a batch size the session has a plan for, run, and the outputs split back per request. */
#ifndef WPK_SERVE_MODEL_H
#define WPK_SERVE_MODEL_H

#include "serve/request.h"
#include "wpk.h"

typedef struct serve_io {
    const char *name; /* borrowed from the session */
    wpk_dtype dtype;
    int ndim;
    int64_t dims[WPK_MAX_DIMS]; /* -1 where the request chooses (the batch dim, symbolic dims) */
} serve_io;

typedef struct serve_model {
    char *name;           /* owned */
    const char *platform; /* "wpk_onnx" or "wpk_plan" */
    bool batched;         /* dim 0 of every input and output is one free batch dim */
    int max_batch;        /* rows one run may hold; 1 when not batched */
    int64_t plan_batch;   /* a plan's compiled batch (every run pads to it); 0 for a model */
    int ninputs, noutputs;
    serve_io *inputs, *outputs; /* owned */
    /* private */
    wpk_context *ctx;     /* borrowed; used by one thread at a time */
    wpk_model *model;
    wpk_session *session;
    void **gather;        /* per input: the batch's rows, gather_cap[i] bytes */
    size_t *gather_cap;
} serve_model;

typedef struct serve_model_params {
    const char *name;  /* NULL: the file's stem */
    int threads;       /* OpenMP threads of a run; 0: the physical cores */
    int max_batch;     /* >= 1 */
} serve_model_params;

/* Load path (.wpk: a compiled plan; else an ONNX model on the cpu backend) and describe it.
 * ctx must outlive the model; errors name the file. *out: serve_model_free. */
wpk_status serve_model_load(wpk_context *ctx, const char *path, const serve_model_params *params,
                            serve_model **out);
void serve_model_free(serve_model *m);

/* Make the session's plan for every batch size a run can have (1, 2, 4, ... up to max_batch,
 * and max_batch), so that no request waits for kernels to compile. */
wpk_status serve_model_warm(serve_model *m);

/* The rows a run of `rows` request rows executes (padding up to a size warmed ahead). */
int64_t serve_model_run_rows(const serve_model *m, int64_t rows);

/* Whether b may share a run with a: both batch along dim 0 and agree on every other dim. */
bool serve_model_can_merge(const serve_model *m, const serve_request *a, const serve_request *b);

/* Run reqs[0..n) as one batch and give each request its wanted outputs (its own rows).
 * Called by one thread at a time. On failure no request has outputs; ctx has the message. */
wpk_status serve_model_run(serve_model *m, serve_request **reqs, int n);

/* The KServe v2 datatype name of dtype ("FP32"), or NULL for none. */
const char *serve_datatype_name(wpk_dtype dtype);
/* The dtype of a KServe v2 datatype name, WPK_DTYPE_UNDEFINED for an unknown one. */
wpk_dtype serve_datatype_parse(const char *name);

#endif
