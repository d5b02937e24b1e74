/* qmaxpool.c -- the int8 max-pool provider ("qpool"): wpk::MaxPool (MaxPool on int8/uint8
 * NCHW tensors with two spatial dims, explicit pads) run on the bytes. Each output row is two
 * passes over one row buffer: the max of the window's input rows, with the pads and the space
 * past the end holding the smallest value, then the max of each run of kernel-width taps; the
 * output takes every stride-th. int8 bytes are flipped (x ^ 0x80) into unsigned order so one
 * unsigned max serves both. SSE2 (every x86-64) does 16 bytes at a time, a plain loop the
 * tails (and everything elsewhere). */
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "kernels/vendor/lib.h"
#include "ops/quant.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#define QPOOL_VEC 16
#else
#define QPOOL_VEC 1
#endif

struct lib_kernel {
    char name[64];
    int64_t planes, h, w, oh, ow;
    int64_t kh, kw, sh, sw, dh, dw, ph, pw;
    int64_t row;   /* bytes of one row buffer, padded for whole vectors */
    uint8_t flip;  /* 0x80 for int8, 0 for uint8 */
    int threads;
    uint8_t *bufs; /* two row buffers per thread */
};

/* The kernel's geometry from n's attributes and the shapes; false where it does not apply. */
static bool geometry(const ir_node *n, const ir_tensor *x, const ir_tensor *y,
                     struct lib_kernel *k) {
    if (x->ndim != 4 || y->ndim != 4 || n->nout != 1) return false;
    const char *ap = ir_attr_str(n, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") && strcmp(ap, "")) return false;
    const ir_attr *ks = ir_attr_find(n, "kernel_shape"), *st = ir_attr_find(n, "strides");
    const ir_attr *pd = ir_attr_find(n, "pads"), *dl = ir_attr_find(n, "dilations");
    if (!ks || ks->kind != IR_ATTR_INTS || ks->n != 2) return false;
    if ((st && (st->kind != IR_ATTR_INTS || st->n != 2)) ||
        (pd && (pd->kind != IR_ATTR_INTS || pd->n != 4)) ||
        (dl && (dl->kind != IR_ATTR_INTS || dl->n != 2)))
        return false;
    k->kh = ks->ints[0], k->kw = ks->ints[1];
    k->sh = st ? st->ints[0] : 1, k->sw = st ? st->ints[1] : 1;
    k->dh = dl ? dl->ints[0] : 1, k->dw = dl ? dl->ints[1] : 1;
    k->ph = pd ? pd->ints[0] : 0, k->pw = pd ? pd->ints[1] : 0;
    if (k->kh < 1 || k->kw < 1 || k->sh < 1 || k->sw < 1 || k->dh < 1 || k->dw < 1 ||
        k->ph < 0 || k->pw < 0 || (pd && (pd->ints[2] < 0 || pd->ints[3] < 0)))
        return false;
    for (int i = 0; i < 4; i++)
        if (x->dims[i] <= 0 || y->dims[i] <= 0) return false;
    if (y->dims[0] != x->dims[0] || y->dims[1] != x->dims[1]) return false;
    k->planes = x->dims[0] * x->dims[1];
    k->h = x->dims[2], k->w = x->dims[3], k->oh = y->dims[2], k->ow = y->dims[3];
    /* the row buffer: left pad, the row, then up to the last window's end, and two vectors
       more (whole 32-byte pairs: the stride-2 split reads them) */
    int64_t end = (k->ow - 1) * k->sw + (k->kw - 1) * k->dw + 1;
    if (end < k->pw + k->w) end = k->pw + k->w;
    k->row = (end + 31) / 32 * 32 + 32;
    return k->row < ((int64_t)1 << 24);
}

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out) {
    (void)self;
    struct lib_kernel k;
    return n->op == IR_OP_MAX_POOL_INT8_WPK && n->nin >= 1 && in[0] && out && out[0] &&
           quant_is_int8(in[0]->dtype) && out[0]->dtype == in[0]->dtype &&
           geometry(n, in[0], out[0], &k);
}

static int configs(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                   ir_tensor *const *out, char (*names)[LIB_CONFIG_MAX]) {
    if (!supports(self, n, in, out)) return 0;
    snprintf(names[0], LIB_CONFIG_MAX, "%s", "rows");
    return 1;
}

static void destroy(const kernel_provider *self, lib_kernel *k) {
    (void)self;
    if (!k) return;
    wpk_free(k->bufs);
    wpk_free(k);
}

static wpk_status create(const kernel_provider *self, wpk_context *ctx, const ir_node *n,
                         ir_tensor *const *in, ir_tensor *const *out, int config,
                         const kernel_device *dev, lib_kernel **out_k) {
    *out_k = NULL;
    if (dev->cuda) return lib_host_only(ctx, self, n);
    lib_kernel *k = wpk_calloc(1, sizeof *k);
    if (!k) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory creating an int8 kernel");
    if (!supports(self, n, in, out) || !geometry(n, in[0], out[0], k)) {
        wpk_free(k);
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s' (%s): the qpool provider takes "
                         "wpk::MaxPool on 4-D int8/uint8 tensors with explicit pads",
                         n->name, n->op_type);
    }
    if (config != 0) {
        wpk_free(k);
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s': the qpool provider has one "
                         "config (0), not %d", n->name, config);
    }
    snprintf(k->name, sizeof k->name, "%s", n->name);
    k->flip = in[0]->dtype == WPK_DTYPE_INT8 ? 0x80 : 0;
    k->threads = dev->threads > 0 ? dev->threads : 1;
    k->bufs = wpk_malloc((size_t)k->row * 2 * (size_t)k->threads);
    if (!k->bufs) {
        wpk_free(k);
        return wpk_error(ctx, WPK_ERR_NOMEM, "node '%s' (%s): out of memory creating an int8 "
                         "kernel", n->name, n->op_type);
    }
    *out_k = k;
    return WPK_OK;
}

/* SSE2 unless WPK_CPU_FLAGS_OFF (a comma-separated list) names sse2: how the plain loops are
 * run and tested on an x86-64 machine. */
static bool vec_on;
static pthread_once_t vec_once = PTHREAD_ONCE_INIT;

static void choose(void) {
    const char *off = getenv("WPK_CPU_FLAGS_OFF");
    bool named = false;
    for (const char *p = off; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        named |= len == 4 && !strncmp(p, "sse2", 4);
        p = end ? end + 1 : NULL;
    }
    vec_on = QPOOL_VEC > 1 && !named;
}

static bool vector_on(void) {
    pthread_once(&vec_once, choose);
    return vec_on;
}

static const char *version(const kernel_provider *self) {
    (void)self;
    return vector_on() ? "wpk int8 max pool (sse2)" : "wpk int8 max pool (portable)";
}

/* dst[i] = max(dst[i], src[i] ^ flip) for i < n. */
static void max_into(uint8_t *dst, const uint8_t *src, int64_t n, uint8_t flip, bool vec) {
    int64_t i = 0;
#if QPOOL_VEC > 1
    const __m128i f = _mm_set1_epi8((char)flip);
    for (; vec && i + 16 <= n; i += 16) {
        __m128i v = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(src + i)), f);
        __m128i d = _mm_loadu_si128((const __m128i *)(dst + i));
        _mm_storeu_si128((__m128i *)(dst + i), _mm_max_epu8(d, v));
    }
    if (vec && i < n && n >= 16) { /* max is idempotent: the last vector may overlap */
        i = n - 16;
        __m128i v = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(src + i)), f);
        __m128i d = _mm_loadu_si128((const __m128i *)(dst + i));
        _mm_storeu_si128((__m128i *)(dst + i), _mm_max_epu8(d, v));
        i = n;
    }
#endif
    (void)vec;
    for (; i < n; i++) {
        uint8_t v = src[i] ^ flip;
        if (v > dst[i]) dst[i] = v;
    }
}

/* out[o] = max over the kernel's taps of row[o * sw + j * dw] ^ flip, o < ow; the plain loop. */
static void taps_plain(const lib_kernel *k, uint8_t *out, const uint8_t *row) {
    for (int64_t o = 0; o < k->ow; o++) {
        const uint8_t *r = row + o * k->sw;
        uint8_t m = r[0];
        for (int64_t j = 1; j < k->kw; j++)
            if (r[j * k->dw] > m) m = r[j * k->dw];
        out[o] = m ^ k->flip;
    }
}

#if QPOOL_VEC > 1
/* taps_plain's result 16 outputs at a time. Stride 1 reads the row at the taps' offsets;
 * stride 2 first splits it into even and odd bytes (wide), so tap j of output o is even byte
 * o + j*dw/2 or odd byte o + (j*dw-1)/2; other strides take every stride-th of stride 1's
 * maxima. The row buffer holds whole vectors past every read. */
static void taps_vec(const lib_kernel *k, uint8_t *out, const uint8_t *row, uint8_t *wide) {
    const __m128i f = _mm_set1_epi8((char)k->flip);
    int64_t o = 0;
    if (k->sw == 2) {
        const __m128i lo = _mm_set1_epi16(0x00ff);
        int64_t half = k->row / 2;
        uint8_t *even = wide, *odd = wide + half;
        for (int64_t i = 0; i + 32 <= k->row; i += 32) {
            __m128i a = _mm_loadu_si128((const __m128i *)(row + i));
            __m128i b = _mm_loadu_si128((const __m128i *)(row + i + 16));
            _mm_storeu_si128((__m128i *)(even + i / 2),
                             _mm_packus_epi16(_mm_and_si128(a, lo), _mm_and_si128(b, lo)));
            _mm_storeu_si128((__m128i *)(odd + i / 2),
                             _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8)));
        }
        for (; o < k->ow && k->ow >= 16; o += 16) {
            if (o + 16 > k->ow) o = k->ow - 16; /* a last vector overlapping the one before */
            __m128i m = _mm_loadu_si128((const __m128i *)(even + o));
            for (int64_t j = 1; j < k->kw; j++) {
                int64_t t = j * k->dw;
                const uint8_t *src = t % 2 ? odd + o + (t - 1) / 2 : even + o + t / 2;
                m = _mm_max_epu8(m, _mm_loadu_si128((const __m128i *)src));
            }
            _mm_storeu_si128((__m128i *)(out + o), _mm_xor_si128(m, f));
        }
        for (; o < k->ow; o++) {
            uint8_t m = even[o];
            for (int64_t j = 1; j < k->kw; j++) {
                int64_t t = j * k->dw;
                uint8_t v = t % 2 ? odd[o + (t - 1) / 2] : even[o + t / 2];
                if (v > m) m = v;
            }
            out[o] = m ^ k->flip;
        }
        return;
    }
    int64_t n = (k->ow - 1) * k->sw + 1;
    uint8_t *dst = k->sw == 1 ? out : wide;
    int64_t x = 0;
    for (; x + 16 <= n; x += 16) {
        __m128i m = _mm_loadu_si128((const __m128i *)(row + x));
        for (int64_t j = 1; j < k->kw; j++)
            m = _mm_max_epu8(m, _mm_loadu_si128((const __m128i *)(row + x + j * k->dw)));
        _mm_storeu_si128((__m128i *)(dst + x), _mm_xor_si128(m, f));
    }
    for (; x < n; x++) {
        uint8_t m = row[x];
        for (int64_t j = 1; j < k->kw; j++)
            if (row[x + j * k->dw] > m) m = row[x + j * k->dw];
        dst[x] = m ^ k->flip;
    }
    if (k->sw != 1)
        for (o = 0; o < k->ow; o++) out[o] = wide[o * k->sw];
}
#endif

/* Output row oy of plane p; row and wide are this thread's buffers. */
static void pool_row(const lib_kernel *k, const uint8_t *x, uint8_t *y, int64_t p, int64_t oy,
                     uint8_t *row, uint8_t *wide, bool vec) {
    const uint8_t *plane = x + p * k->h * k->w;
    memset(row, 0, (size_t)k->row); /* 0: the smallest value in unsigned order */
    int64_t top = oy * k->sh - k->ph;
    for (int64_t j = 0; j < k->kh; j++) {
        int64_t r = top + j * k->dh;
        if (r >= 0 && r < k->h) max_into(row + k->pw, plane + r * k->w, k->w, k->flip, vec);
    }
    uint8_t *out = y + (p * k->oh + oy) * k->ow;
#if QPOOL_VEC > 1
    if (vec) {
        taps_vec(k, out, row, wide);
        return;
    }
#endif
    (void)wide;
    taps_plain(k, out, row);
}

static wpk_status run(const kernel_provider *self, wpk_context *ctx, lib_kernel *k,
                      ir_tensor *const *in, ir_tensor *const *out) {
    (void)self;
    if (!in[0] || !in[0]->data || ir_numel(in[0]) != k->planes * k->h * k->w || !out ||
        !out[0] || !out[0]->data || ir_numel(out[0]) != k->planes * k->oh * k->ow)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "node '%s' (qpool): a tensor is not the one "
                         "the kernel was created for", k->name);
    const uint8_t *x = in[0]->data;
    uint8_t *y = out[0]->data;
    int64_t rows = k->planes * k->oh;
    int threads = rows * k->ow >= 16384 ? k->threads : 1;
    bool vec = vector_on();
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        uint8_t *row = k->bufs + (size_t)k->row * 2 * (size_t)t, *wide = row + k->row;
        for (int64_t i = rows * t / nt; i < rows * (t + 1) / nt; i++)
            pool_row(k, x, y, i / k->oh, i % k->oh, row, wide, vec);
    }
    return WPK_OK;
}

const kernel_provider lib_qpool = {
    .name = "qpool",
    .family = "int8",
    .describe = lib_describe,
    .space = lib_space,
    .default_config = lib_default_config,
    .legal = kernel_legal_in_space,
    .supports = supports,
    .configs = configs,
    .create = create,
    .run = run,
    .destroy = destroy,
    .version = version,
};
