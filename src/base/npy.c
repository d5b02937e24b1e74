/* npy.c -- the .npy format: magic, version, a Python-dict header, then raw C-order data. */
#include "base/npy.h"

#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

static const struct {
    const char *descr;
    wpk_dtype dtype;
} descrs[] = {
    {"<f4", WPK_DTYPE_FLOAT32}, {"<f8", WPK_DTYPE_FLOAT64}, {"<i4", WPK_DTYPE_INT32},
    {"<i8", WPK_DTYPE_INT64},   {"|i1", WPK_DTYPE_INT8},    {"|u1", WPK_DTYPE_UINT8},
    {"|b1", WPK_DTYPE_BOOL},    {"<f2", WPK_DTYPE_FLOAT16},
    /* .npy has no bfloat16; ml_dtypes' bfloat16 arrays are saved as 2-byte voids */
    {"<V2", WPK_DTYPE_BFLOAT16}, {"|V2", WPK_DTYPE_BFLOAT16},
};

/* Find the value after 'key': in the header dict; NULL when absent. */
static const char *dict_value(const char *h, const char *key) {
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(h, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ') p++;
    if (*p != ':') return NULL;
    p++;
    while (*p == ' ') p++;
    return p;
}

static wpk_status parse_header(wpk_context *ctx, const char *h, const char *what, npy_array *a) {
    const char *d = dict_value(h, "descr");
    if (!d || *d != '\'')
        return wpk_error(ctx, WPK_ERR_PARSE, "%s: .npy header has no 'descr'", what);
    d++;
    const char *end = strchr(d, '\'');
    if (!end || end - d > 15)
        return wpk_error(ctx, WPK_ERR_PARSE, "%s: .npy header has a bad 'descr'", what);
    char descr[16];
    memcpy(descr, d, (size_t)(end - d));
    descr[end - d] = 0;
    if (descr[0] == '=') descr[0] = '<'; /* native order is little-endian on our targets */
    a->dtype = WPK_DTYPE_UNDEFINED;
    for (size_t i = 0; i < sizeof descrs / sizeof descrs[0]; i++)
        if (strcmp(descrs[i].descr, descr) == 0) a->dtype = descrs[i].dtype;
    if (!a->dtype)
        return wpk_error(ctx, WPK_ERR_PARSE, "%s: .npy dtype '%s' is not supported (float32, "
                         "float64, float16, bfloat16 (2-byte void), int32, int64, int8, uint8, "
                         "bool are)", what, descr);
    const char *f = dict_value(h, "fortran_order");
    if (!f) return wpk_error(ctx, WPK_ERR_PARSE, "%s: .npy header has no 'fortran_order'", what);
    if (strncmp(f, "True", 4) == 0)
        return wpk_error(ctx, WPK_ERR_PARSE, "%s: Fortran-order .npy arrays are not supported; "
                         "save with numpy.ascontiguousarray", what);
    const char *s = dict_value(h, "shape");
    if (!s || *s != '(') return wpk_error(ctx, WPK_ERR_PARSE, "%s: .npy header has no 'shape'", what);
    s++;
    a->ndim = 0;
    for (;;) {
        while (*s == ' ' || *s == ',') s++;
        if (*s == ')') break;
        if (!isdigit((unsigned char)*s))
            return wpk_error(ctx, WPK_ERR_PARSE, "%s: .npy header has a bad 'shape'", what);
        if (a->ndim == WPK_MAX_DIMS)
            return wpk_error(ctx, WPK_ERR_PARSE, "%s: .npy array has more than %d dims", what,
                             WPK_MAX_DIMS);
        errno = 0;
        char *next;
        long long v = strtoll(s, &next, 10);
        if (errno || v > ((int64_t)1 << 40))
            return wpk_error(ctx, WPK_ERR_PARSE, "%s: .npy dim is too large", what);
        a->dims[a->ndim++] = v;
        s = next;
    }
    return WPK_OK;
}

wpk_status npy_parse(wpk_context *ctx, const uint8_t *buf, size_t len, const char *what,
                     npy_array *out) {
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return wpk_error(ctx, WPK_ERR_PARSE, "%s: not an .npy file (bad magic)", what);
    int major = buf[6];
    size_t hlen, off;
    if (major == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        off = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) return wpk_error(ctx, WPK_ERR_PARSE, "%s: truncated .npy header", what);
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        off = 12;
    } else {
        return wpk_error(ctx, WPK_ERR_PARSE, "%s: .npy format version %d is not supported", what,
                         major);
    }
    if (hlen > len - off) return wpk_error(ctx, WPK_ERR_PARSE, "%s: truncated .npy header", what);
    char *h = wpk_malloc(hlen + 1);
    if (!h) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory reading %s", what);
    memcpy(h, buf + off, hlen);
    h[hlen] = 0;
    wpk_status st = parse_header(ctx, h, what, out);
    wpk_free(h);
    if (st) return st;
    size_t n = wpk_dtype_size(out->dtype);
    for (int i = 0; i < out->ndim; i++) {
        if (out->dims[i] && n > SIZE_MAX / (size_t)out->dims[i])
            return wpk_error(ctx, WPK_ERR_PARSE, "%s: .npy array is too large", what);
        n *= (size_t)out->dims[i];
    }
    off += hlen;
    if (len - off < n)
        return wpk_error(ctx, WPK_ERR_PARSE, "%s: .npy data is truncated: %zu bytes, the header "
                         "promises %zu", what, len - off, n);
    out->data = wpk_malloc(n ? n : 1);
    if (!out->data) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory reading %s", what);
    memcpy(out->data, buf + off, n);
    out->nbytes = n;
    return WPK_OK;
}

wpk_status npy_read(wpk_context *ctx, const char *path, npy_array *out) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return wpk_error(ctx, WPK_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    wpk_status st = WPK_OK;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            uint8_t *nb = wpk_realloc(buf, cap);
            if (!nb) {
                st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory reading %s", path);
                break;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) st = wpk_error(ctx, WPK_ERR_IO, "%s: read error", path);
            break;
        }
    }
    fclose(f);
    if (st == WPK_OK) st = npy_parse(ctx, buf, len, path, out);
    wpk_free(buf);
    return st;
}

wpk_status npy_write(wpk_context *ctx, const char *path, wpk_dtype dtype, int ndim,
                     const int64_t *dims, const void *data) {
    const char *descr = NULL;
    for (size_t i = 0; i < sizeof descrs / sizeof descrs[0]; i++)
        if (descrs[i].dtype == dtype) descr = descrs[i].descr;
    if (!descr)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "cannot write dtype %s to .npy",
                         wpk_dtype_name(dtype));
    char shape[256] = "";
    size_t n = wpk_dtype_size(dtype);
    for (int i = 0; i < ndim; i++) {
        size_t l = strlen(shape);
        snprintf(shape + l, sizeof shape - l, "%lld,%s", (long long)dims[i],
                 (i + 1 < ndim) ? " " : "");
        n *= (size_t)dims[i];
    }
    if (ndim > 1) shape[strlen(shape) - 1] = 0; /* (2, 3) but (5,) */
    char header[512];
    int hl = snprintf(header, sizeof header,
                      "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape);
    /* pad with spaces so that magic + header is a multiple of 64, ending in a newline */
    int total = 10 + hl + 1;
    int pad = (64 - total % 64) % 64;
    memset(header + hl, ' ', (size_t)pad);
    hl += pad;
    header[hl++] = '\n';
    FILE *f = fopen(path, "wb");
    if (!f) return wpk_error(ctx, WPK_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(hl & 0xff), (uint8_t)(hl >> 8)};
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, (size_t)hl, f) == (size_t)hl &&
              (n == 0 || fwrite(data, 1, n, f) == n);
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        remove(path);
        return wpk_error(ctx, WPK_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    }
    return WPK_OK;
}

void npy_free(npy_array *a) {
    wpk_free(a->data);
    a->data = NULL;
}
