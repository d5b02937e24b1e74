/* qelementwise.c -- the int8 elementwise provider ("qelem"): QuantizeLinear and DequantizeLinear
 * (float32 <-> int8/uint8, per tensor or per slice along `axis`, constant scales and zero
 * points) and wpk::QLinearAdd (the quantized residual add of passes/fuse_qdq.c), vectorized with
 * AVX-512 where the CPU has it and a portable loop elsewhere. Every path does the float
 * operations of the reference kernels in the same order (x / scale, round half to even, + zero
 * point, saturate), so the bytes are theirs. Threads split the elements in contiguous parts. */
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "kernels/vendor/lib.h"
#include "ops/quant.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define QELEM_X86 1
#include <immintrin.h>
#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))
#endif

/* Below this many elements a node runs on one thread: a parallel region costs more. */
#define QELEM_PARALLEL_MIN 32768

enum qelem_kind { QELEM_QUANTIZE, QELEM_DEQUANTIZE, QELEM_ADD };

struct lib_kernel {
    char name[64];
    enum qelem_kind kind;
    int64_t count, inner, channels; /* elements; run length of one parameter; parameters */
    bool x_signed, y_signed, relu;
    int32_t lo, hi;
    float *scale;   /* channels values (QLinearAdd: a, b, c scales) */
    int32_t *zp;    /* channels values (QLinearAdd: a, b, c zero points) */
    int threads;
};

/* One run of n elements sharing parameter (s, z); x and y advanced to the run's start. */
typedef struct qelem_run {
    const struct lib_kernel *k;
    const void *x, *b;
    void *y;
    int64_t n;
    float s;
    int32_t z;
} qelem_run;

/* ---- the portable loops ---- */

static void quantize_portable(const qelem_run *r) {
    const float *x = r->x;
    const int32_t lo = r->k->lo, hi = r->k->hi;
    uint8_t *y = r->y;
    for (int64_t i = 0; i < r->n; i++) y[i] = (uint8_t)quant_round_clamp(x[i] / r->s, r->z, lo, hi);
}

static void dequantize_portable(const qelem_run *r) {
    float *y = r->y;
    if (r->k->x_signed) {
        const int8_t *x = r->x;
        for (int64_t i = 0; i < r->n; i++) y[i] = (float)(x[i] - r->z) * r->s;
    } else {
        const uint8_t *x = r->x;
        for (int64_t i = 0; i < r->n; i++) y[i] = (float)(x[i] - r->z) * r->s;
    }
}

static inline int32_t byte_at(const void *p, int64_t i, bool is_signed) {
    return is_signed ? ((const int8_t *)p)[i] : ((const uint8_t *)p)[i];
}

/* The float graph it replaces: DQ(a) + DQ(b), Relu when fused, then Q. */
static void add_portable(const qelem_run *r) {
    const struct lib_kernel *k = r->k;
    uint8_t *y = r->y;
    for (int64_t i = 0; i < r->n; i++) {
        /* separate statements: never contracted into a fused multiply-add */
        float fa = (float)(byte_at(r->x, i, k->x_signed) - k->zp[0]) * k->scale[0];
        float fb = (float)(byte_at(r->b, i, k->x_signed) - k->zp[1]) * k->scale[1];
        float v = fa + fb;
        if (k->relu) v = v > 0.0f ? v : 0.0f;
        y[i] = (uint8_t)quant_round_clamp(v / k->scale[2], k->zp[2], k->lo, k->hi);
    }
}

/* ---- AVX-512 ---- */

#ifdef QELEM_X86
/* round(v) + z clamped to [lo, hi] as 16 bytes; NaN goes to lo (max takes its second operand
 * when the first is NaN), as in quant_round_clamp. */
AVX512_TARGET static inline __m128i round_pack(__m512 v, __m512 z, __m512 lo, __m512 hi) {
    v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(v, z), lo), hi);
    return _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(v));
}

AVX512_TARGET static inline __m512 widen(const void *p, bool is_signed, __mmask16 m) {
    __m128i b = _mm_maskz_loadu_epi8(m, p);
    __m512i i = is_signed ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);
    return _mm512_cvtepi32_ps(i);
}

static inline __mmask16 tail_mask(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

AVX512_TARGET static void quantize_avx512(const qelem_run *r) {
    const float *x = r->x;
    uint8_t *y = r->y;
    const __m512 s = _mm512_set1_ps(r->s), z = _mm512_set1_ps((float)r->z);
    const __m512 lo = _mm512_set1_ps((float)r->k->lo), hi = _mm512_set1_ps((float)r->k->hi);
    for (int64_t i = 0; i < r->n; i += 16) {
        __mmask16 m = tail_mask(r->n - i);
        __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(m, x + i), s);
        _mm_mask_storeu_epi8(y + i, m, round_pack(v, z, lo, hi));
    }
}

AVX512_TARGET static void dequantize_avx512(const qelem_run *r) {
    const uint8_t *x = r->x;
    float *y = r->y;
    const __m512 s = _mm512_set1_ps(r->s), z = _mm512_set1_ps((float)r->z);
    const bool sg = r->k->x_signed;
    for (int64_t i = 0; i < r->n; i += 16) {
        __mmask16 m = tail_mask(r->n - i);
        /* x - z is exact in float (both are small integers), as the integer subtraction */
        __m512 v = _mm512_mul_ps(_mm512_sub_ps(widen(x + i, sg, m), z), s);
        _mm512_mask_storeu_ps(y + i, m, v);
    }
}

AVX512_TARGET static void add_avx512(const qelem_run *r) {
    const struct lib_kernel *k = r->k;
    const uint8_t *a = r->x, *b = r->b;
    uint8_t *y = r->y;
    const __m512 sa = _mm512_set1_ps(k->scale[0]), sb = _mm512_set1_ps(k->scale[1]);
    const __m512 sc = _mm512_set1_ps(k->scale[2]);
    const __m512 za = _mm512_set1_ps((float)k->zp[0]), zb = _mm512_set1_ps((float)k->zp[1]);
    const __m512 zc = _mm512_set1_ps((float)k->zp[2]), zero = _mm512_setzero_ps();
    const __m512 lo = _mm512_set1_ps((float)k->lo), hi = _mm512_set1_ps((float)k->hi);
    const bool sg = k->x_signed;
    for (int64_t i = 0; i < r->n; i += 16) {
        __mmask16 m = tail_mask(r->n - i);
        __m512 va = _mm512_mul_ps(_mm512_sub_ps(widen(a + i, sg, m), za), sa);
        __m512 vb = _mm512_mul_ps(_mm512_sub_ps(widen(b + i, sg, m), zb), sb);
        __m512 v = _mm512_add_ps(va, vb);
        if (k->relu) v = _mm512_max_ps(v, zero);
        _mm_mask_storeu_epi8(y + i, m, round_pack(_mm512_div_ps(v, sc), zc, lo, hi));
    }
}

/* AVX-512 F, BW and VL, unless WPK_CPU_FLAGS_OFF (a comma-separated list) names avx512f: how the
 * portable path is run and tested on a machine that has AVX-512. */
static bool have_avx512(void) {
    const char *off = getenv("WPK_CPU_FLAGS_OFF");
    for (const char *p = off; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 7 && !strncmp(p, "avx512f", 7)) return false;
        p = end ? end + 1 : NULL;
    }
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
}
#else
static bool have_avx512(void) { return false; }
#endif

typedef void (*run_fn)(const qelem_run *r);

static run_fn fns[3];
static pthread_once_t fns_once = PTHREAD_ONCE_INIT;

static void choose(void) {
    fns[QELEM_QUANTIZE] = quantize_portable;
    fns[QELEM_DEQUANTIZE] = dequantize_portable;
    fns[QELEM_ADD] = add_portable;
#ifdef QELEM_X86
    if (have_avx512()) {
        fns[QELEM_QUANTIZE] = quantize_avx512;
        fns[QELEM_DEQUANTIZE] = dequantize_avx512;
        fns[QELEM_ADD] = add_avx512;
    }
#endif
}

static run_fn pick(enum qelem_kind kind) {
    pthread_once(&fns_once, choose);
    return fns[kind];
}

static const char *version(const kernel_provider *self) {
    (void)self;
    return pick(QELEM_QUANTIZE) == quantize_portable ? "wpk int8 elementwise (portable)"
                                                     : "wpk int8 elementwise (avx512)";
}

/* ---- what it takes ---- */

static bool constant(const ir_tensor *t) { return t && t->data; }

/* A scale / zero point pair that is constant, float32 / 8-bit, with 1 or `channels` values. */
static bool params_ok(const ir_tensor *s, const ir_tensor *z, int64_t channels,
                      wpk_dtype qtype) {
    if (!constant(s) || s->dtype != WPK_DTYPE_FLOAT32 || s->ndim > 1) return false;
    int64_t ns = ir_numel(s);
    if (ns != 1 && ns != channels) return false;
    if (z && (!constant(z) || z->dtype != qtype || ir_numel(z) != ns)) return false;
    for (int64_t i = 0; i < ns; i++)
        if (!(quant_float_at(s, i) != 0.0f)) return false;
    return true;
}

/* The layout of the parameters over x: *channels parameters, each over runs of *inner
 * elements. False when the node asks for what this provider does not take. */
static bool layout(const ir_node *n, const ir_tensor *x, const ir_tensor *s, int64_t *channels,
                   int64_t *inner) {
    *channels = 1;
    *inner = ir_numel(x);
    if (ir_attr_int(n, "block_size", 0) != 0) return false;
    if (ir_numel(s) == 1 && s->ndim <= 1) return true;
    int64_t a = ir_attr_int(n, "axis", 1);
    if (a < 0) a += x->ndim;
    if (a < 0 || a >= x->ndim) return false;
    *channels = x->dims[a];
    *inner = 1;
    for (int i = (int)a + 1; i < x->ndim; i++) *inner *= x->dims[i];
    return true;
}

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out) {
    (void)self;
    bool q = n->op == IR_OP_QUANTIZE_LINEAR, dq = n->op == IR_OP_DEQUANTIZE_LINEAR;
    if ((!q && !dq && n->op != IR_OP_QLINEAR_ADD_WPK) || n->nin < 2) return false;
    if (!out || n->nout != 1 || !out[0] || !in[0]) return false;
    for (int i = 0; i < in[0]->ndim; i++)
        if (in[0]->dims[i] < 0) return false;
    if (n->op == IR_OP_QLINEAR_ADD_WPK) {
        if (n->nin != 8 || !in[3] || !quant_is_int8(in[0]->dtype) ||
            in[3]->dtype != in[0]->dtype || ir_numel(in[0]) != ir_numel(in[3]) ||
            ir_numel(out[0]) != ir_numel(in[0]) || !quant_is_int8(out[0]->dtype))
            return false;
        return params_ok(in[1], in[2], 1, in[0]->dtype) &&
               params_ok(in[4], in[5], 1, in[0]->dtype) &&
               params_ok(in[6], in[7], 1, out[0]->dtype);
    }
    if (constant(in[0])) return false;
    const ir_tensor *z = n->nin > 2 ? in[2] : NULL;
    if (q && (in[0]->dtype != WPK_DTYPE_FLOAT32 || !quant_is_int8(out[0]->dtype)))
        return false;
    if (dq && (!quant_is_int8(in[0]->dtype) || out[0]->dtype != WPK_DTYPE_FLOAT32)) return false;
    int64_t channels, inner;
    if (!in[1] || !layout(n, in[0], in[1], &channels, &inner)) return false;
    return params_ok(in[1], z, channels, q ? out[0]->dtype : in[0]->dtype);
}

static int configs(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                   ir_tensor *const *out, char (*names)[LIB_CONFIG_MAX]) {
    if (!supports(self, n, in, out)) return 0;
    snprintf(names[0], LIB_CONFIG_MAX, "%s", "vector");
    return 1;
}

/* ---- create / destroy ---- */

static void destroy(const kernel_provider *self, lib_kernel *k) {
    (void)self;
    if (!k) return;
    wpk_free(k->scale);
    wpk_free(k->zp);
    wpk_free(k);
}

static void set_range(lib_kernel *k, wpk_dtype ytype) {
    k->y_signed = ytype == WPK_DTYPE_INT8;
    k->lo = k->y_signed ? -128 : 0;
    k->hi = k->y_signed ? 127 : 255;
}

static wpk_status create(const kernel_provider *self, wpk_context *ctx, const ir_node *n,
                         ir_tensor *const *in, ir_tensor *const *out, int config,
                         const kernel_device *dev, lib_kernel **out_k) {
    *out_k = NULL;
    if (dev->cuda) return lib_host_only(ctx, self, n);
    if (!supports(self, n, in, out))
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s' (%s): the qelem provider takes "
                         "QuantizeLinear / DequantizeLinear between float32 and 8-bit tensors "
                         "and wpk::QLinearAdd, with constant float32 scales and zero points",
                         n->name, n->op_type);
    if (config != 0)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s': the qelem provider has one "
                         "config (0), not %d", n->name, config);
    lib_kernel *k = wpk_calloc(1, sizeof *k);
    if (!k) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory creating an int8 kernel");
    snprintf(k->name, sizeof k->name, "%s", n->name);
    k->count = ir_numel(in[0]);
    k->threads = dev->threads > 0 ? dev->threads : 1;
    int64_t nparams;
    if (n->op == IR_OP_QLINEAR_ADD_WPK) {
        k->kind = QELEM_ADD;
        k->channels = 1;
        k->inner = k->count;
        k->x_signed = in[0]->dtype == WPK_DTYPE_INT8;
        k->relu = !strcmp(ir_attr_str(n, "activation", ""), "Relu");
        set_range(k, out[0]->dtype);
        nparams = 3;
    } else {
        k->kind = n->op == IR_OP_QUANTIZE_LINEAR ? QELEM_QUANTIZE : QELEM_DEQUANTIZE;
        layout(n, in[0], in[1], &k->channels, &k->inner);
        k->x_signed = in[0]->dtype == WPK_DTYPE_INT8;
        set_range(k, out[0]->dtype);
        nparams = k->channels;
    }
    k->scale = wpk_malloc(sizeof(float) * (size_t)nparams);
    k->zp = wpk_malloc(sizeof(int32_t) * (size_t)nparams);
    if (!k->scale || !k->zp) {
        destroy(self, k);
        return wpk_error(ctx, WPK_ERR_NOMEM, "node '%s' (%s): out of memory creating an int8 "
                         "kernel", n->name, n->op_type);
    }
    if (k->kind == QELEM_ADD) {
        static const int scale_in[3] = {1, 4, 6}, zp_in[3] = {2, 5, 7}; /* A, B, C */
        for (int i = 0; i < 3; i++) {
            k->scale[i] = quant_float_at(in[scale_in[i]], 0);
            k->zp[i] = quant_int_at(in[zp_in[i]], 0);
        }
    } else {
        const ir_tensor *s = in[1], *z = n->nin > 2 ? in[2] : NULL;
        bool per = ir_numel(s) > 1;
        for (int64_t c = 0; c < nparams; c++) {
            k->scale[c] = quant_float_at(s, per ? c : 0);
            k->zp[c] = quant_int_at(z, per ? c : 0);
        }
    }
    *out_k = k;
    return WPK_OK;
}

/* ---- run ---- */

static size_t x_bytes(const lib_kernel *k) { return k->kind == QELEM_QUANTIZE ? 4 : 1; }
static size_t y_bytes(const lib_kernel *k) { return k->kind == QELEM_DEQUANTIZE ? 4 : 1; }

/* Elements [lo, hi): the runs of one parameter each, cut at the part's ends. */
static void run_part(const lib_kernel *k, const void *x, const void *b, void *y, int64_t lo,
                     int64_t hi) {
    run_fn fn = pick(k->kind);
    while (lo < hi) {
        int64_t c = lo / k->inner % k->channels;
        int64_t end = (lo / k->inner + 1) * k->inner;
        if (end > hi) end = hi;
        qelem_run r = {.k = k, .x = (const char *)x + (size_t)lo * x_bytes(k),
                       .b = b ? (const char *)b + lo : NULL,
                       .y = (char *)y + (size_t)lo * y_bytes(k), .n = end - lo,
                       .s = k->scale[c], .z = k->zp[c]};
        fn(&r);
        lo = end;
    }
}

static wpk_status run(const kernel_provider *self, wpk_context *ctx, lib_kernel *k,
                      ir_tensor *const *in, ir_tensor *const *out) {
    (void)self;
    if (!out || !out[0] || !out[0]->data || ir_numel(out[0]) != k->count)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "node '%s' (qelem): the output is not the "
                         "one the kernel was created for", k->name);
    bool add = k->kind == QELEM_ADD;
    if (!in[0] || !in[0]->data || ir_numel(in[0]) != k->count ||
        (add && (!in[3] || !in[3]->data || ir_numel(in[3]) != k->count)))
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "node '%s' (qelem): an input is not the one "
                         "the kernel was created for", k->name);
    const void *x = in[0]->data, *b = add ? in[3]->data : NULL;
    void *y = out[0]->data;
    if (k->threads > 1 && k->count >= QELEM_PARALLEL_MIN) {
#pragma omp parallel num_threads(k->threads)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            /* parts end on 64-element boundaries: no cache line written by two threads */
            int64_t lo = k->count * t / nt / 64 * 64, hi = k->count * (t + 1) / nt / 64 * 64;
            if (t == nt - 1) hi = k->count;
            run_part(k, x, b, y, lo, hi);
        }
    } else {
        run_part(k, x, b, y, 0, k->count);
    }
    return WPK_OK;
}

const kernel_provider lib_qelem = {
    .name = "qelem",
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
