/* bytes.c -- little-endian byte strings (bytes.h). */
#include "base/bytes.h"

#include <string.h>

#include "base/alloc.h"

void bw_raw(byte_writer *w, const void *data, size_t n) {
    if (w->oom) return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n) cap *= 2;
        uint8_t *d = wpk_realloc(w->data, cap);
        if (!d) {
            w->oom = true;
            return;
        }
        w->data = d;
        w->cap = cap;
    }
    if (n) memcpy(w->data + w->len, data, n);
    w->len += n;
}

void bw_u64(byte_writer *w, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    bw_raw(w, b, 8);
}

void bw_u32(byte_writer *w, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
    bw_raw(w, b, 4);
}

void bw_i64(byte_writer *w, int64_t v) { bw_u64(w, (uint64_t)v); }

void bw_f32(byte_writer *w, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    bw_u32(w, u);
}

void bw_f64(byte_writer *w, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    bw_u64(w, u);
}

void bw_bytes(byte_writer *w, const void *data, size_t n) {
    bw_u64(w, n);
    bw_raw(w, data, n);
}

void bw_str(byte_writer *w, const char *s) {
    if (!s) s = "";
    bw_bytes(w, s, strlen(s) + 1);
}

void bw_free(byte_writer *w) {
    wpk_free(w->data);
    memset(w, 0, sizeof *w);
}

const void *br_raw(byte_reader *r, size_t n) {
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    return p;
}

uint64_t br_u64(byte_reader *r) {
    const uint8_t *b = br_raw(r, 8);
    uint64_t v = 0;
    for (int i = 0; b && i < 8; i++) v |= (uint64_t)b[i] << (8 * i);
    return v;
}

uint32_t br_u32(byte_reader *r) {
    const uint8_t *b = br_raw(r, 4);
    uint32_t v = 0;
    for (int i = 0; b && i < 4; i++) v |= (uint32_t)b[i] << (8 * i);
    return v;
}

int64_t br_i64(byte_reader *r) { return (int64_t)br_u64(r); }

float br_f32(byte_reader *r) {
    uint32_t u = br_u32(r);
    float v;
    memcpy(&v, &u, 4);
    return v;
}

double br_f64(byte_reader *r) {
    uint64_t u = br_u64(r);
    double v;
    memcpy(&v, &u, 8);
    return v;
}

const void *br_bytes(byte_reader *r, size_t *n) {
    uint64_t len = br_u64(r);
    if (r->bad || len > (uint64_t)(r->end - r->p)) {
        r->bad = true;
        *n = 0;
        return NULL;
    }
    *n = (size_t)len;
    return br_raw(r, (size_t)len);
}

const char *br_str(byte_reader *r) {
    size_t n;
    const char *s = br_bytes(r, &n);
    if (!s || n == 0 || s[n - 1] != 0 || memchr(s, 0, n) != s + n - 1) {
        r->bad = true;
        return "";
    }
    return s;
}

uint32_t br_count(byte_reader *r, uint32_t max, size_t each) {
    uint32_t n = br_u32(r);
    if (r->bad || n > max || (each && (uint64_t)n * each > (uint64_t)(r->end - r->p))) {
        r->bad = true;
        return 0;
    }
    return n;
}
