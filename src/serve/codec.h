/* codec.h -- KServe v2 (Open Inference Protocol) bodies: an infer request decoded into a
 * serve_request checked against the model (JSON tensors, flat or nested, and the binary
 * tensor data extension), an infer response, the model metadata and an error encoded. */
#ifndef WPK_SERVE_CODEC_H
#define WPK_SERVE_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "serve/model.h"

/* Decode an infer request's body of len bytes: the first json_len bytes are the JSON header
 * and the rest the binary data of the inputs sent with "binary_data_size"; json_len < 0: the
 * whole body is JSON. Returns 200 with *out (serve_request_free), or 400 (the message, in
 * err, names the field or the input) or 500 (out of memory) without. */
int serve_decode_infer(const serve_model *m, const char *body, size_t len, int64_t json_len,
                       serve_request **out, char *err, size_t err_size);

/* Encode the response to r (done, status 200): its wanted outputs, as JSON data or, where
 * r->binary says, as binary data after the JSON. *json_len is the JSON's length when some
 * output is binary (the Inference-Header-Content-Length), else 0. *body: wpk_free. Returns
 * 0, or -1 when out of memory. */
int serve_encode_infer(const serve_model *m, const serve_request *r, char **body, size_t *len,
                       size_t *json_len);

/* The model metadata (name, versions, platform, inputs and outputs with datatype and shape,
 * -1 for the dims a request chooses). wpk_free; NULL when out of memory. */
char *serve_encode_metadata(const serve_model *m);

/* {"error": message}. wpk_free; NULL when out of memory. */
char *serve_encode_error(const char *message);

#endif
