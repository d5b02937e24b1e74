/* onnx_tensor.c -- TensorProto -> ir_tensor: dtype and dims checks, the in-file storage forms
 * (raw_data and the typed repeated fields), and external data files (path checks, bounds). */
#include "onnx/onnx_tensor.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "base/alloc.h"
#include "onnx/onnx_import.h"
#include "onnx/onnx_proto.h"

/* Indexed by TensorProto.DataType, named as Woodpecker names its own dtypes. */
static const char *const onnx_type_names[] = {
    "undefined", "float32", "uint8", "int8", "uint16", "int16", "int32", "int64", "string",
    "bool", "float16", "float64", "uint32", "uint64", "complex64", "complex128", "bfloat16",
    "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4", "int4",
    "float4e2m1", "float8e8m0", "uint2", "int2"};

wpk_dtype onnx_dtype(int32_t onnx_type) {
    switch (onnx_type) {
    case WPK_DTYPE_FLOAT32: case WPK_DTYPE_UINT8: case WPK_DTYPE_INT8: case WPK_DTYPE_INT32:
    case WPK_DTYPE_INT64: case WPK_DTYPE_BOOL: case WPK_DTYPE_FLOAT64: case WPK_DTYPE_FLOAT16:
    case WPK_DTYPE_BFLOAT16:
        return (wpk_dtype)onnx_type;
    default:
        return WPK_DTYPE_UNDEFINED;
    }
}

const char *onnx_dtype_name(int32_t onnx_type) {
    int n = (int)(sizeof onnx_type_names / sizeof onnx_type_names[0]);
    return onnx_type >= 0 && onnx_type < n ? onnx_type_names[onnx_type] : "unknown";
}

wpk_status onnx_dtype_check(wpk_context *ctx, int32_t onnx_type, const char *what, wpk_dtype *out) {
    *out = onnx_dtype(onnx_type);
    if (onnx_type == 0) return wpk_error(ctx, WPK_ERR_MODEL, "%s has no element type", what);
    if (*out == WPK_DTYPE_UNDEFINED)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED,
                         "%s has dtype %s (%" PRId32 "), which Woodpecker does not support "
                         "(it holds float32, float64, float16, bfloat16, int32, int64, int8, "
                         "uint8 and bool)",
                         what, onnx_dtype_name(onnx_type), onnx_type);
    return WPK_OK;
}

/* "float32 [2, 3]" into buf, for messages. */
static const char *describe(char *buf, size_t cap, const ir_tensor *t) {
    size_t len = (size_t)snprintf(buf, cap, "%s [", wpk_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%" PRId64, i ? ", " : "", t->dims[i]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
    return buf;
}

static bool host_little_endian(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* raw_data and external data are little-endian whatever the host. */
static void from_little_endian(uint8_t *p, size_t nbytes, size_t elem) {
    if (elem == 1 || host_little_endian()) return;
    for (size_t off = 0; off + elem <= nbytes; off += elem)
        for (size_t i = 0; i < elem / 2; i++) {
            uint8_t tmp = p[off + i];
            p[off + i] = p[off + elem - 1 - i];
            p[off + elem - 1 - i] = tmp;
        }
}

/* Kernels rely on bools being 0 or 1; ONNX readers treat any nonzero byte as true. */
static void normalize_bools(wpk_dtype dt, uint8_t *p, size_t n) {
    if (dt != WPK_DTYPE_BOOL) return;
    for (size_t i = 0; i < n; i++) p[i] = p[i] != 0;
}

/* A non-negative decimal integer that fits int64 (ONNX writes offsets and lengths as strings). */
static bool parse_count(const char *s, int64_t *out) {
    if (!s || !*s) return false;
    int64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        int d = *s - '0';
        if (v > (INT64_MAX - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* External data must stay inside the model's directory: no absolute paths, no ".." component.
 * Symbolic links are followed on purpose (model caches such as Hugging Face's link files into a
 * blob store); a path that names them is still one the model's owner put there. */
static bool location_inside(const char *loc) {
    if (loc[0] == '/') return false;
    for (const char *c = loc; *c;) {
        const char *end = strchr(c, '/');
        size_t n = end ? (size_t)(end - c) : strlen(c);
        if (n == 2 && c[0] == '.' && c[1] == '.') return false;
        c += n;
        if (*c == '/') c++;
    }
    return true;
}

static wpk_status read_external(wpk_context *ctx, const Onnx__TensorProto *tp, const char *base_dir,
                                const char *what, uint8_t *dst, size_t nbytes) {
    const char *location = NULL;
    int64_t offset = 0, length = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        const char *key = e->key ? e->key : "";
        if (strcmp(key, "location") == 0) {
            location = e->value;
        } else if (strcmp(key, "offset") == 0 || strcmp(key, "length") == 0) {
            if (!parse_count(e->value, key[0] == 'o' ? &offset : &length))
                return wpk_error(ctx, WPK_ERR_MODEL,
                                 "%s: external data %s '%s' is not a non-negative integer", what,
                                 key, e->value ? e->value : "");
        }
        /* "checksum" and keys from newer ONNX versions are not needed to read the bytes */
    }
    if (!base_dir)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED,
                         "%s keeps its data in an external file, which cannot be read for a model "
                         "given in memory", what);
    if (!location || !location[0])
        return wpk_error(ctx, WPK_ERR_MODEL, "%s: external data has no location", what);
    if (!location_inside(location))
        return wpk_error(ctx, WPK_ERR_MODEL,
                         "%s: external data location '%s' is outside the model's directory "
                         "(absolute paths and '..' are refused)", what, location);
    size_t plen = strlen(base_dir) + 1 + strlen(location) + 1;
    char *path = wpk_malloc(plen);
    if (!path) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory reading %s", what);
    snprintf(path, plen, "%s/%s", base_dir, location);

    wpk_status st = WPK_OK;
    FILE *f = fopen(path, "rb");
    struct stat sb;
    if (!f) {
        st = wpk_error(ctx, WPK_ERR_IO, "%s: cannot open external data file '%s': %s", what, path,
                       strerror(errno));
    } else if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = wpk_error(ctx, WPK_ERR_IO, "%s: external data '%s' is not a regular file", what, path);
    } else if (length >= 0 && (uint64_t)length != nbytes) {
        st = wpk_error(ctx, WPK_ERR_MODEL,
                       "%s: external data length %" PRId64 " does not match its dims (%zu bytes)",
                       what, length, nbytes);
    } else if (offset > (int64_t)sb.st_size || nbytes > (uint64_t)((int64_t)sb.st_size - offset)) {
        st = wpk_error(ctx, WPK_ERR_MODEL,
                       "%s: external data needs %zu bytes at offset %" PRId64
                       ", but '%s' has only %" PRId64 " bytes",
                       what, nbytes, offset, path, (int64_t)sb.st_size);
    } else if (fseeko(f, (off_t)offset, SEEK_SET) != 0 || fread(dst, 1, nbytes, f) != nbytes) {
        st = wpk_error(ctx, WPK_ERR_IO, "%s: cannot read external data file '%s': %s", what, path,
                       ferror(f) ? strerror(errno) : "unexpected end of file");
    }
    if (f) fclose(f);
    wpk_free(path);
    return st;
}

/* The typed repeated fields of a TensorProto, in one table so each check is one loop. */
enum { F_FLOAT, F_INT32, F_STRING, F_INT64, F_DOUBLE, F_UINT64, F_COUNT };

static int field_for(wpk_dtype dt) {
    switch (dt) {
    case WPK_DTYPE_FLOAT32: return F_FLOAT;
    case WPK_DTYPE_INT64: return F_INT64;
    case WPK_DTYPE_FLOAT64: return F_DOUBLE;
    /* ONNX keeps int32, int8, uint8 and bool values, and float16 / bfloat16 bit patterns, in
     * int32_data */
    default: return F_INT32;
    }
}

static wpk_status decode_typed(wpk_context *ctx, const Onnx__TensorProto *tp, const char *what,
                               const char *field, uint8_t *dst, size_t n) {
    switch (field_for((wpk_dtype)tp->data_type)) {
    case F_FLOAT: memcpy(dst, tp->float_data, n * sizeof(float)); return WPK_OK;
    case F_INT64: memcpy(dst, tp->int64_data, n * sizeof(int64_t)); return WPK_OK;
    case F_DOUBLE: memcpy(dst, tp->double_data, n * sizeof(double)); return WPK_OK;
    default: break;
    }
    if (tp->data_type == WPK_DTYPE_INT32) {
        memcpy(dst, tp->int32_data, n * sizeof(int32_t));
        return WPK_OK;
    }
    bool half = tp->data_type == WPK_DTYPE_FLOAT16 || tp->data_type == WPK_DTYPE_BFLOAT16;
    for (size_t i = 0; i < n; i++) {
        int32_t v = tp->int32_data[i];
        if (half) {
            if (v < 0 || v > UINT16_MAX)
                return wpk_error(ctx, WPK_ERR_MODEL, "%s: %s value %" PRId32 " at index %zu is "
                                 "not a 16-bit pattern", what, field, v, i);
            uint16_t bits = (uint16_t)v;
            memcpy(dst + 2 * i, &bits, 2);
        } else if (tp->data_type == WPK_DTYPE_BOOL) {
            dst[i] = v != 0;
        } else if (tp->data_type == WPK_DTYPE_INT8 ? (v < INT8_MIN || v > INT8_MAX)
                                                   : (v < 0 || v > UINT8_MAX)) {
            return wpk_error(ctx, WPK_ERR_MODEL, "%s: %s value %" PRId32 " at index %zu is out of "
                             "range for %s", what, field, v, i,
                             wpk_dtype_name((wpk_dtype)tp->data_type));
        } else {
            dst[i] = (uint8_t)v;
        }
    }
    return WPK_OK;
}

wpk_status onnx_tensor_decode(wpk_context *ctx, const Onnx__TensorProto *tp, const char *base_dir,
                              arena *a, ir_tensor *t, const char *what) {
    memset(t, 0, sizeof *t);
    wpk_dtype dt;
    wpk_status st = onnx_dtype_check(ctx, tp->has_data_type ? tp->data_type : 0, what, &dt);
    if (st) return st;
    if (tp->segment)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED,
                         "%s is segmented (TensorProto.segment), which Woodpecker does not read",
                         what);
    if (tp->n_dims > WPK_MAX_DIMS)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "%s has %zu dims; at most %d are supported", what,
                         tp->n_dims, WPK_MAX_DIMS);
    t->dtype = dt;
    t->ndim = (int)tp->n_dims;
    bool empty = false;
    for (int i = 0; i < t->ndim; i++) {
        t->dims[i] = tp->dims[i];
        if (t->dims[i] < 0)
            return wpk_error(ctx, WPK_ERR_MODEL, "%s has a negative dim (%" PRId64 " at index %d)",
                             what, t->dims[i], i);
        empty |= t->dims[i] == 0;
    }
    char shape[160];
    size_t esize = wpk_dtype_size(dt);
    /* the byte count must fit both size_t and int64 (file offsets, ir_numel) */
    uint64_t limit = (SIZE_MAX < (uint64_t)INT64_MAX ? SIZE_MAX : (uint64_t)INT64_MAX) / esize;
    uint64_t numel = 1;
    for (int i = 0; i < t->ndim && !empty; i++) {
        if ((uint64_t)t->dims[i] > limit / numel)
            return wpk_error(ctx, WPK_ERR_MODEL, "%s: %s has more elements than fit in memory",
                             what, describe(shape, sizeof shape, t));
        numel *= (uint64_t)t->dims[i];
    }
    if (empty) numel = 0;
    size_t nbytes = (size_t)numel * esize;

    const size_t counts[F_COUNT] = {tp->n_float_data, tp->n_int32_data,  tp->n_string_data,
                                    tp->n_int64_data, tp->n_double_data, tp->n_uint64_data};
    static const char *const names[F_COUNT] = {"float_data",  "int32_data",  "string_data",
                                               "int64_data",  "double_data", "uint64_data"};
    int want = field_for(dt);
    for (int f = 0; f < F_COUNT; f++)
        if (f != want && counts[f])
            return wpk_error(ctx, WPK_ERR_MODEL, "%s (%s) has %s, which cannot hold %s values",
                             what, describe(shape, sizeof shape, t), names[f], wpk_dtype_name(dt));
    bool external = tp->has_data_location && tp->data_location == 1;
    if (tp->has_data_location && tp->data_location != 0 && !external)
        return wpk_error(ctx, WPK_ERR_MODEL, "%s has an unknown data_location (%" PRId32 ")", what,
                         tp->data_location);
    if (external && (tp->has_raw_data || counts[want]))
        return wpk_error(ctx, WPK_ERR_MODEL,
                         "%s has data both in the model and in an external file", what);
    if (tp->has_raw_data && counts[want])
        return wpk_error(ctx, WPK_ERR_MODEL, "%s has both raw_data and %s", what, names[want]);
    if (tp->has_raw_data && tp->raw_data.len != nbytes)
        return wpk_error(ctx, WPK_ERR_MODEL, "%s: raw_data has %zu bytes, but %s needs %zu", what,
                         tp->raw_data.len, describe(shape, sizeof shape, t), nbytes);
    if (!external && !tp->has_raw_data && counts[want] != numel) {
        if (counts[want] == 0)
            return wpk_error(ctx, WPK_ERR_MODEL, "%s has no data, but %s needs %" PRIu64 " values",
                             what, describe(shape, sizeof shape, t), numel);
        return wpk_error(ctx, WPK_ERR_MODEL, "%s: %s holds %zu values, but %s needs %" PRIu64, what,
                         names[want], counts[want], describe(shape, sizeof shape, t), numel);
    }

    uint8_t *data = arena_alloc(a, nbytes);
    if (!data)
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory reading %s (%zu bytes)", what, nbytes);
    if (external) {
        st = read_external(ctx, tp, base_dir, what, data, nbytes);
        if (st) return st;
        from_little_endian(data, nbytes, esize);
        normalize_bools(dt, data, nbytes);
    } else if (tp->has_raw_data) {
        if (nbytes) memcpy(data, tp->raw_data.data, nbytes);
        from_little_endian(data, nbytes, esize);
        normalize_bools(dt, data, nbytes);
    } else if (numel) {
        st = decode_typed(ctx, tp, what, names[want], data, (size_t)numel);
        if (st) return st;
    }
    t->data = data;
    return WPK_OK;
}

wpk_status onnx_read_tensor(wpk_context *ctx, const uint8_t *buf, size_t len, arena *a,
                            ir_tensor *t, const char **name) {
    memset(t, 0, sizeof *t);
    if (name) *name = NULL;
    ProtobufCMessage *msg;
    const char *why;
    wpk_status st = onnx_proto_unpack(&onnx__tensor_proto__descriptor, buf, len, &msg, &why);
    if (st == WPK_ERR_NOMEM) return wpk_error(ctx, st, "out of memory parsing a TensorProto");
    if (st) return wpk_error(ctx, st, "not a TensorProto: %s", why);
    const Onnx__TensorProto *tp = (const Onnx__TensorProto *)msg;
    const char *tname = tp->name ? tp->name : "";
    char what[256];
    snprintf(what, sizeof what, "tensor '%.200s'", tname);
    /* any bytes that parse are some message; a tensor without a dtype is not a tensor at all */
    if (!tp->has_data_type || tp->data_type == 0)
        st = wpk_error(ctx, WPK_ERR_PARSE, "not a TensorProto: it has no data_type");
    else
        st = onnx_tensor_decode(ctx, tp, NULL, a, t, what);
    if (!st && name && !(*name = arena_strdup(a, tname)))
        st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory reading %s", what);
    onnx_proto_free(msg);
    if (st) memset(t, 0, sizeof *t);
    return st;
}
