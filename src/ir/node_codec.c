/* node_codec.c -- a node's bytes (node_codec.h), written and read with base/bytes.h:
 * little-endian integers, length-prefixed strings and arrays, every read bounds-checked. */
#include "ir/node_codec.h"

#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"

#define MAX_ATTRS 4096
#define MAX_ELEMS (1u << 28)

/* Strings as a length and their bytes (no NUL: read back into the arena). */
static void put_str(byte_writer *w, const char *s) {
    size_t n = s ? strlen(s) : 0;
    bw_u64(w, n);
    bw_raw(w, s, n);
}

wpk_status ir_node_encode(wpk_context *ctx, const ir_node *n, uint8_t **out, size_t *len) {
    *out = NULL;
    *len = 0;
    byte_writer w = {0};
    put_str(&w, n->name);
    put_str(&w, n->op_type);
    put_str(&w, n->domain);
    bw_u64(&w, (uint64_t)n->opset);
    bw_u64(&w, (uint64_t)n->nin);
    bw_u64(&w, (uint64_t)n->nout);
    bw_u64(&w, (uint64_t)n->nattr);
    for (int i = 0; i < n->nattr; i++) {
        const ir_attr *a = &n->attrs[i];
        put_str(&w, a->name);
        bw_u64(&w, (uint64_t)a->kind);
        switch (a->kind) {
        case IR_ATTR_INT: bw_u64(&w, (uint64_t)a->i); break;
        case IR_ATTR_FLOAT: bw_f32(&w, a->f); break;
        case IR_ATTR_STRING: put_str(&w, a->s); break;
        case IR_ATTR_INTS:
            bw_u64(&w, (uint64_t)a->n);
            for (int k = 0; k < a->n; k++) bw_u64(&w, (uint64_t)a->ints[k]);
            break;
        case IR_ATTR_FLOATS:
            bw_u64(&w, (uint64_t)a->n);
            for (int k = 0; k < a->n; k++) bw_f32(&w, a->floats[k]);
            break;
        case IR_ATTR_STRINGS:
            bw_u64(&w, (uint64_t)a->n);
            for (int k = 0; k < a->n; k++) put_str(&w, a->strs[k]);
            break;
        case IR_ATTR_TENSOR:
            bw_u64(&w, (uint64_t)a->t->dtype);
            bw_u64(&w, (uint64_t)a->t->ndim);
            for (int k = 0; k < a->t->ndim; k++) bw_u64(&w, (uint64_t)a->t->dims[k]);
            bw_u64(&w, a->t->data ? ir_nbytes(a->t) : 0);
            if (a->t->data) bw_raw(&w, a->t->data, ir_nbytes(a->t));
            break;
        default:
            wpk_free(w.data);
            return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s': attribute '%s' (kind %d) "
                             "cannot be written into a plan", n->name, a->name, (int)a->kind);
        }
    }
    if (w.oom) {
        wpk_free(w.data);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory writing node '%s'", n->name);
    }
    *out = w.data;
    *len = w.len;
    return WPK_OK;
}

/* A count of items of `each` bytes that must fit in what is left. */
static uint64_t get_count(byte_reader *r, uint64_t max, size_t each) {
    uint64_t n = br_u64(r);
    if (r->bad || n > max || n * each > (uint64_t)(r->end - r->p)) {
        r->bad = true;
        return 0;
    }
    return n;
}

/* NULL only when out of memory; "" when the bytes are bad (r->bad says so). */
static const char *get_str(byte_reader *r, arena *mem) {
    uint64_t n = get_count(r, MAX_ELEMS, 1);
    const uint8_t *s = br_raw(r, (size_t)n);
    if (!s) return "";
    if (memchr(s, 0, (size_t)n)) {
        r->bad = true;
        return "";
    }
    return arena_strndup(mem, (const char *)s, (size_t)n);
}

static bool get_attr(byte_reader *r, arena *mem, ir_attr *a, bool *oom) {
    a->name = get_str(r, mem);
    a->kind = (ir_attr_kind)br_u64(r);
    if (!a->name) return !(*oom = true);
    switch (a->kind) {
    case IR_ATTR_INT: a->i = (int64_t)br_u64(r); break;
    case IR_ATTR_FLOAT: a->f = br_f32(r); break;
    case IR_ATTR_STRING:
        if (!(a->s = get_str(r, mem))) return !(*oom = true);
        break;
    case IR_ATTR_INTS:
        a->n = (int)get_count(r, MAX_ELEMS, 8);
        if (!(a->ints = arena_alloc(mem, sizeof *a->ints * (size_t)(a->n + 1))))
            return !(*oom = true);
        for (int k = 0; k < a->n; k++) a->ints[k] = (int64_t)br_u64(r);
        break;
    case IR_ATTR_FLOATS:
        a->n = (int)get_count(r, MAX_ELEMS, 4);
        if (!(a->floats = arena_alloc(mem, sizeof *a->floats * (size_t)(a->n + 1))))
            return !(*oom = true);
        for (int k = 0; k < a->n; k++) a->floats[k] = br_f32(r);
        break;
    case IR_ATTR_STRINGS:
        a->n = (int)get_count(r, MAX_ELEMS, 8);
        if (!(a->strs = arena_alloc(mem, sizeof *a->strs * (size_t)(a->n + 1))))
            return !(*oom = true);
        for (int k = 0; k < a->n; k++)
            if (!(a->strs[k] = get_str(r, mem))) return !(*oom = true);
        break;
    case IR_ATTR_TENSOR: {
        if (!(a->t = arena_alloc(mem, sizeof *a->t))) return !(*oom = true);
        a->t->dtype = (wpk_dtype)br_u64(r);
        uint64_t nd = br_u64(r);
        if (r->bad || nd > WPK_MAX_DIMS || wpk_dtype_size(a->t->dtype) == 0) return false;
        a->t->ndim = (int)nd;
        for (int k = 0; k < a->t->ndim; k++) {
            a->t->dims[k] = (int64_t)br_u64(r);
            if (a->t->dims[k] < 0 || a->t->dims[k] > (int64_t)MAX_ELEMS) return false;
        }
        uint64_t bytes = get_count(r, (uint64_t)1 << 40, 1);
        if (r->bad || (bytes && bytes != ir_nbytes(a->t))) return false;
        const uint8_t *d = br_raw(r, (size_t)bytes);
        if (bytes && !(a->t->data = arena_memdup(mem, d, (size_t)bytes))) return !(*oom = true);
        break;
    }
    default: return false;
    }
    return !r->bad;
}

wpk_status ir_node_decode(wpk_context *ctx, const void *data, size_t len, arena *mem,
                          ir_node *n) {
    memset(n, 0, sizeof *n);
    byte_reader r = {data, (const uint8_t *)data + len, false};
    bool oom = false;
    n->name = get_str(&r, mem);
    n->op_type = get_str(&r, mem);
    n->domain = get_str(&r, mem);
    n->opset = (int)br_u64(&r);
    uint64_t nin = br_u64(&r), nout = br_u64(&r);
    n->nattr = (int)get_count(&r, MAX_ATTRS, 16);
    oom = !n->name || !n->op_type || !n->domain;
    if (!oom && !r.bad && nin <= MAX_ATTRS && nout <= MAX_ATTRS) {
        n->nin = (int)nin;
        n->nout = (int)nout;
        n->in = arena_alloc(mem, sizeof *n->in * (nin + 1));
        n->out = arena_alloc(mem, sizeof *n->out * (nout + 1));
        n->attrs = arena_alloc(mem, sizeof *n->attrs * (size_t)(n->nattr + 1));
        oom = !n->in || !n->out || !n->attrs;
        for (int i = 0; !oom && i < n->nin; i++) n->in[i] = -1;
        for (int i = 0; !oom && i < n->nout; i++) n->out[i] = -1;
        for (int i = 0; !oom && !r.bad && i < n->nattr; i++)
            if (!get_attr(&r, mem, &n->attrs[i], &oom)) r.bad = true;
    } else {
        r.bad = true;
    }
    if (oom) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory reading a node");
    if (r.bad || r.p != r.end)
        return wpk_error(ctx, WPK_ERR_PARSE, "the plan is damaged: a node's bytes");
    n->op = ir_op_from_onnx(n->domain, n->op_type);
    return WPK_OK;
}
