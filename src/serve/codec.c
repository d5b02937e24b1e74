/* codec.c -- KServe v2 infer requests decoded and checked against the model; responses,
 * metadata and errors encoded. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/strbuf.h"
#include "serve/codec.h"

/* Prints the client's mistake into err and returns 400. */
static int bad(char *err, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, size, fmt, ap);
    va_end(ap);
    return 400;
}

static void put_string(strbuf *b, const char *s) {
    sb_puts(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') sb_printf(b, "\\%c", c);
        else if (c < 0x20) sb_printf(b, "\\u%04x", c);
        else sb_printf(b, "%c", c);
    }
    sb_puts(b, "\"");
}

static void put_dims(strbuf *b, const int64_t *dims, int ndim) {
    sb_puts(b, "[");
    for (int d = 0; d < ndim; d++) sb_printf(b, "%s%lld", d ? "," : "", (long long)dims[d]);
    sb_puts(b, "]");
}

static void dims_text(const int64_t *dims, int ndim, char *buf, size_t size) {
    strbuf b = {0};
    put_dims(&b, dims, ndim);
    snprintf(buf, size, "%s", b.s ? b.s : "[]");
    sb_free(&b);
}

static void names_text(const serve_io *ios, int n, char *buf, size_t size) {
    buf[0] = 0;
    for (int i = 0; i < n; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, size - l, "%s'%s'", i ? ", " : "", ios[i].name);
    }
}

static int find_io(const serve_io *ios, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(ios[i].name, name) == 0) return i;
    return -1;
}

/* Counts the leaves of a (nested) data array; -1 at the first leaf that is not a number or
 * a boolean, its index in *bad_at. */
static int64_t count_leaves(const cJSON *node, int64_t *bad_at, int64_t seen) {
    if (!cJSON_IsArray(node)) {
        if (cJSON_IsNumber(node) || cJSON_IsBool(node)) return 1;
        *bad_at = seen;
        return -1;
    }
    int64_t n = 0;
    for (const cJSON *c = node->child; c; c = c->next) {
        int64_t k = count_leaves(c, bad_at, seen + n);
        if (k < 0) return -1;
        n += k;
    }
    return n;
}

/* Stores the leaves in order as dtype; 400 for a value the dtype cannot hold. */
static int store_leaves(const cJSON *node, wpk_dtype dt, char *dst, int64_t *at, const char *name,
                        char *err, size_t size) {
    if (cJSON_IsArray(node)) {
        for (const cJSON *c = node->child; c; c = c->next) {
            int rc = store_leaves(c, dt, dst, at, name, err, size);
            if (rc != 200) return rc;
        }
        return 200;
    }
    double v = cJSON_IsBool(node) ? (cJSON_IsTrue(node) ? 1.0 : 0.0) : node->valuedouble;
    int64_t i = (*at)++;
    bool integral = v == floor(v);
    switch (dt) {
    case WPK_DTYPE_FLOAT32: ((float *)dst)[i] = (float)v; return 200;
    case WPK_DTYPE_FLOAT64: ((double *)dst)[i] = v; return 200;
    case WPK_DTYPE_BOOL: ((uint8_t *)dst)[i] = v != 0; return 200;
    default: break;
    }
    double lo = dt == WPK_DTYPE_INT8 ? -128 : dt == WPK_DTYPE_UINT8 ? 0
              : dt == WPK_DTYPE_INT32 ? -2147483648.0 : -9223372036854775808.0;
    double hi = dt == WPK_DTYPE_INT8 ? 127 : dt == WPK_DTYPE_UINT8 ? 255
              : dt == WPK_DTYPE_INT32 ? 2147483647.0 : 9223372036854775807.0;
    if (!integral || v < lo || v > hi)
        return bad(err, size, "input '%s': data element %lld (%g) is not a %s value", name,
                   (long long)i, v, serve_datatype_name(dt));
    if (dt == WPK_DTYPE_INT8) ((int8_t *)dst)[i] = (int8_t)v;
    else if (dt == WPK_DTYPE_UINT8) ((uint8_t *)dst)[i] = (uint8_t)v;
    else if (dt == WPK_DTYPE_INT32) ((int32_t *)dst)[i] = (int32_t)v;
    else ((int64_t *)dst)[i] = (int64_t)v;
    return 200;
}

/* Reads "shape" of input `name` (index which) and checks it against the model's. */
static int read_shape(const serve_model *m, int which, const cJSON *in, serve_tensor *t,
                      char *err, size_t size) {
    const char *name = m->inputs[which].name;
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(in, "shape");
    if (!cJSON_IsArray(shape))
        return bad(err, size, "input '%s': field 'shape' is %s", name,
                   shape ? "not an array" : "missing");
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > WPK_MAX_DIMS)
        return bad(err, size, "input '%s': shape has %d dims, more than %d", name, ndim,
                   WPK_MAX_DIMS);
    t->ndim = ndim;
    int d = 0;
    for (const cJSON *c = shape->child; c; c = c->next, d++) {
        if (!cJSON_IsNumber(c) || c->valuedouble < 0 || c->valuedouble != floor(c->valuedouble) ||
            c->valuedouble > 9.0e15)
            return bad(err, size, "input '%s': shape entry %d is not a non-negative integer",
                       name, d);
        t->dims[d] = (int64_t)c->valuedouble;
    }
    const serve_io *io = &m->inputs[which];
    bool ok = ndim == io->ndim;
    for (d = 0; ok && d < ndim; d++) ok = io->dims[d] < 0 || io->dims[d] == t->dims[d];
    if (ok && m->batched && t->dims[0] < 1) ok = false;
    if (!ok) {
        char got[160], want[160];
        dims_text(t->dims, t->ndim, got, sizeof got);
        dims_text(io->dims, io->ndim, want, sizeof want);
        return bad(err, size, "input '%s': shape %s does not match the model's %s (-1: any size%s)",
                   name, got, want, m->batched ? ", the batch at least 1" : "");
    }
    if (serve_elements(t->dims, t->ndim) < 0)
        return bad(err, size, "input '%s': shape is too large", name);
    return 200;
}

/* Reads one entry of "inputs" into r; bin/bin_len/bin_at: the binary data and how much of
 * it earlier inputs took. */
static int read_input(const serve_model *m, const cJSON *in, int k, serve_request *r,
                      const char *bin, size_t bin_len, size_t *bin_at, char *err, size_t size) {
    if (!cJSON_IsObject(in)) return bad(err, size, "inputs[%d] is not an object", k);
    const cJSON *jname = cJSON_GetObjectItemCaseSensitive(in, "name");
    if (!cJSON_IsString(jname))
        return bad(err, size, "inputs[%d]: field 'name' is %s", k,
                   jname ? "not a string" : "missing");
    const char *name = jname->valuestring;
    int which = find_io(m->inputs, m->ninputs, name);
    if (which < 0) {
        char names[512];
        names_text(m->inputs, m->ninputs, names, sizeof names);
        return bad(err, size, "the model has no input named '%s' (its inputs: %s)", name, names);
    }
    serve_tensor *t = &r->inputs[which];
    if (t->data) return bad(err, size, "input '%s' is given twice", name);
    const cJSON *jtype = cJSON_GetObjectItemCaseSensitive(in, "datatype");
    if (!cJSON_IsString(jtype))
        return bad(err, size, "input '%s': field 'datatype' is %s", name,
                   jtype ? "not a string" : "missing");
    t->dtype = serve_datatype_parse(jtype->valuestring);
    if (t->dtype != m->inputs[which].dtype)
        return bad(err, size, "input '%s': datatype '%s' does not match the model's %s", name,
                   jtype->valuestring, serve_datatype_name(m->inputs[which].dtype));
    int rc = read_shape(m, which, in, t, err, size);
    if (rc != 200) return rc;
    int64_t elems = serve_elements(t->dims, t->ndim);
    size_t bytes = (size_t)elems * wpk_dtype_size(t->dtype);
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(in, "parameters");
    const cJSON *bsize = cJSON_GetObjectItemCaseSensitive(params, "binary_data_size");
    if (bsize) {
        if (!cJSON_IsNumber(bsize) || bsize->valuedouble < 0)
            return bad(err, size, "input '%s': parameter 'binary_data_size' is not a "
                       "non-negative number", name);
        size_t want = (size_t)bsize->valuedouble;
        if (want != bytes)
            return bad(err, size, "input '%s': binary_data_size is %zu bytes, shape and "
                       "datatype need %zu", name, want, bytes);
        if (bin_len - *bin_at < want)
            return bad(err, size, "input '%s': binary_data_size %zu runs past the body's "
                       "binary data (%zu bytes left)", name, want, bin_len - *bin_at);
        if (!(t->data = wpk_malloc(bytes ? bytes : 1))) return 500;
        memcpy(t->data, bin + *bin_at, bytes);
        *bin_at += bytes;
        t->nbytes = bytes;
        return 200;
    }
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(in, "data");
    if (!data)
        return bad(err, size, "input '%s': field 'data' is missing (and no binary_data_size "
                   "parameter)", name);
    int64_t bad_at = 0;
    int64_t n = count_leaves(data, &bad_at, 0);
    if (n < 0)
        return bad(err, size, "input '%s': data element %lld is not a number", name,
                   (long long)bad_at);
    if (n != elems)
        return bad(err, size, "input '%s': data has %lld elements, shape needs %lld", name,
                   (long long)n, (long long)elems);
    if (!(t->data = wpk_malloc(bytes ? bytes : 1))) return 500;
    t->nbytes = bytes;
    int64_t at = 0;
    return store_leaves(data, t->dtype, t->data, &at, name, err, size);
}

/* Reads "outputs" (which to return, which as binary) and "parameters.binary_data_output". */
static int read_outputs(const serve_model *m, const cJSON *root, serve_request *r, char *err,
                        size_t size) {
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "parameters");
    const cJSON *all_bin = cJSON_GetObjectItemCaseSensitive(params, "binary_data_output");
    bool binary = cJSON_IsTrue(all_bin);
    for (int i = 0; i < m->noutputs; i++) r->binary[i] = binary;
    const cJSON *outs = cJSON_GetObjectItemCaseSensitive(root, "outputs");
    if (!outs) return 200;
    if (!cJSON_IsArray(outs)) return bad(err, size, "request field 'outputs' is not an array");
    for (int i = 0; i < m->noutputs; i++) r->want[i] = false;
    int k = 0;
    for (const cJSON *o = outs->child; o; o = o->next, k++) {
        const cJSON *jname = cJSON_GetObjectItemCaseSensitive(o, "name");
        if (!cJSON_IsString(jname))
            return bad(err, size, "outputs[%d]: field 'name' is %s", k,
                       jname ? "not a string" : "missing");
        int which = find_io(m->outputs, m->noutputs, jname->valuestring);
        if (which < 0) {
            char names[512];
            names_text(m->outputs, m->noutputs, names, sizeof names);
            return bad(err, size, "the model has no output named '%s' (its outputs: %s)",
                       jname->valuestring, names);
        }
        r->want[which] = true;
        const cJSON *op = cJSON_GetObjectItemCaseSensitive(o, "parameters");
        const cJSON *jbin = cJSON_GetObjectItemCaseSensitive(op, "binary_data");
        if (jbin) r->binary[which] = cJSON_IsTrue(jbin);
    }
    return 200;
}

static int decode(const serve_model *m, const cJSON *root, const char *bin, size_t bin_len,
                  serve_request *r, char *err, size_t size) {
    if (!cJSON_IsObject(root)) return bad(err, size, "the request body is not a JSON object");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
    if (id && !cJSON_IsString(id)) return bad(err, size, "request field 'id' is not a string");
    if (id && !(r->id = wpk_strdup(id->valuestring))) return 500;
    const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(root, "inputs");
    if (!cJSON_IsArray(inputs))
        return bad(err, size, "request field 'inputs' is %s", inputs ? "not an array" : "missing");
    size_t bin_at = 0;
    int k = 0;
    for (const cJSON *in = inputs->child; in; in = in->next, k++) {
        int rc = read_input(m, in, k, r, bin, bin_len, &bin_at, err, size);
        if (rc != 200) return rc;
    }
    for (int i = 0; i < m->ninputs; i++)
        if (!r->inputs[i].data) return bad(err, size, "input '%s' is missing", m->inputs[i].name);
    if (bin_at != bin_len)
        return bad(err, size, "the body has %zu bytes of binary data after the inputs' "
                   "binary_data_size total", bin_len - bin_at);
    r->rows = m->batched ? r->inputs[0].dims[0] : 1;
    if (r->rows > m->max_batch)
        return bad(err, size, "input '%s': a batch of %lld rows is more than the server's "
                   "%d (--max-batch)", m->inputs[0].name, (long long)r->rows, m->max_batch);
    for (int i = 1; m->batched && i < m->ninputs; i++)
        if (r->inputs[i].dims[0] != r->rows)
            return bad(err, size, "input '%s': batch dim %lld differs from input '%s''s %lld",
                       m->inputs[i].name, (long long)r->inputs[i].dims[0], m->inputs[0].name,
                       (long long)r->rows);
    return read_outputs(m, root, r, err, size);
}

int serve_decode_infer(const serve_model *m, const char *body, size_t len, int64_t json_len,
                       serve_request **out, char *err, size_t err_size) {
    *out = NULL;
    size_t jlen = len;
    if (json_len >= 0) {
        if ((uint64_t)json_len > len)
            return bad(err, err_size, "header Inference-Header-Content-Length is %lld, more than "
                       "the body's %zu bytes", (long long)json_len, len);
        jlen = (size_t)json_len;
    }
    if (jlen == 0) return bad(err, err_size, "the request body is empty");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, jlen, &end, false);
    if (!root)
        return bad(err, err_size, "the request body is not valid JSON (at byte %td)",
                   end ? end - body : (ptrdiff_t)0);
    serve_request *r = serve_request_create(m->ninputs, m->noutputs);
    int rc = r ? decode(m, root, body + jlen, len - jlen, r, err, err_size) : 500;
    cJSON_Delete(root);
    if (rc == 500) snprintf(err, err_size, "out of memory decoding the request");
    if (rc != 200) {
        serve_request_free(r);
        return rc;
    }
    *out = r;
    return 200;
}

static void put_values(strbuf *b, const serve_tensor *t) {
    int64_t n = serve_elements(t->dims, t->ndim);
    sb_puts(b, "[");
    for (int64_t i = 0; i < n; i++) {
        if (i) sb_puts(b, ",");
        switch (t->dtype) {
        case WPK_DTYPE_FLOAT32: {
            float v = ((const float *)t->data)[i];
            if (isfinite(v)) sb_printf(b, "%.9g", (double)v);
            else sb_puts(b, "null");
            break;
        }
        case WPK_DTYPE_FLOAT64: {
            double v = ((const double *)t->data)[i];
            if (isfinite(v)) sb_printf(b, "%.17g", v);
            else sb_puts(b, "null");
            break;
        }
        case WPK_DTYPE_INT8: sb_printf(b, "%d", ((const int8_t *)t->data)[i]); break;
        case WPK_DTYPE_UINT8: sb_printf(b, "%u", ((const uint8_t *)t->data)[i]); break;
        case WPK_DTYPE_INT32: sb_printf(b, "%d", ((const int32_t *)t->data)[i]); break;
        case WPK_DTYPE_INT64:
            sb_printf(b, "%lld", (long long)((const int64_t *)t->data)[i]);
            break;
        case WPK_DTYPE_BOOL:
            sb_puts(b, ((const uint8_t *)t->data)[i] ? "true" : "false");
            break;
        default: sb_puts(b, "null"); break;
        }
    }
    sb_puts(b, "]");
}

int serve_encode_infer(const serve_model *m, const serve_request *r, char **body, size_t *len,
                       size_t *json_len) {
    *body = NULL;
    strbuf b = {0};
    sb_puts(&b, "{\"model_name\":");
    put_string(&b, m->name);
    sb_puts(&b, ",\"model_version\":\"1\"");
    if (r->id) {
        sb_puts(&b, ",\"id\":");
        put_string(&b, r->id);
    }
    sb_puts(&b, ",\"outputs\":[");
    size_t bin_total = 0;
    bool first = true;
    for (int i = 0; i < m->noutputs; i++) {
        if (!r->want[i]) continue;
        const serve_tensor *t = &r->outputs[i];
        sb_puts(&b, first ? "{\"name\":" : ",{\"name\":");
        first = false;
        put_string(&b, m->outputs[i].name);
        sb_printf(&b, ",\"datatype\":\"%s\",\"shape\":", serve_datatype_name(t->dtype));
        put_dims(&b, t->dims, t->ndim);
        if (r->binary[i]) {
            sb_printf(&b, ",\"parameters\":{\"binary_data_size\":%zu}}", t->nbytes);
            bin_total += t->nbytes;
        } else {
            sb_puts(&b, ",\"data\":");
            put_values(&b, t);
            sb_puts(&b, "}");
        }
    }
    sb_puts(&b, "]}");
    if (b.oom) {
        sb_free(&b);
        return -1;
    }
    size_t jl = b.len;
    char *out = sb_take(&b);
    if (bin_total) {
        char *grown = wpk_realloc(out, jl + bin_total);
        if (!grown) {
            wpk_free(out);
            return -1;
        }
        out = grown;
        size_t at = jl;
        for (int i = 0; i < m->noutputs; i++) {
            if (!r->want[i] || !r->binary[i]) continue;
            memcpy(out + at, r->outputs[i].data, r->outputs[i].nbytes);
            at += r->outputs[i].nbytes;
        }
    }
    *body = out;
    *len = jl + bin_total;
    *json_len = bin_total ? jl : 0;
    return 0;
}

static void put_ios(strbuf *b, const serve_io *ios, int n) {
    sb_puts(b, "[");
    for (int i = 0; i < n; i++) {
        sb_puts(b, i ? ",{\"name\":" : "{\"name\":");
        put_string(b, ios[i].name);
        sb_printf(b, ",\"datatype\":\"%s\",\"shape\":", serve_datatype_name(ios[i].dtype));
        put_dims(b, ios[i].dims, ios[i].ndim);
        sb_puts(b, "}");
    }
    sb_puts(b, "]");
}

char *serve_encode_metadata(const serve_model *m) {
    strbuf b = {0};
    sb_puts(&b, "{\"name\":");
    put_string(&b, m->name);
    sb_printf(&b, ",\"versions\":[\"1\"],\"platform\":\"%s\",\"inputs\":", m->platform);
    put_ios(&b, m->inputs, m->ninputs);
    sb_puts(&b, ",\"outputs\":");
    put_ios(&b, m->outputs, m->noutputs);
    sb_printf(&b, ",\"parameters\":{\"max_batch_size\":%d}}", m->batched ? m->max_batch : 0);
    if (b.oom) {
        sb_free(&b);
        return NULL;
    }
    return sb_take(&b);
}

char *serve_encode_error(const char *message) {
    strbuf b = {0};
    sb_puts(&b, "{\"error\":");
    put_string(&b, message);
    sb_puts(&b, "}");
    if (b.oom) {
        sb_free(&b);
        return NULL;
    }
    return sb_take(&b);
}
