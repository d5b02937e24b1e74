/* openblas.c -- the OpenBLAS provider (lib.h): Conv / wpk::FusedConv (NCHW, one group) as
 * im2col + cblas_sgemm per image (a 1x1, stride-1, unpadded conv multiplies X directly), and
 * Gemm / wpk::FusedGemm / MatMul / wpk::FusedMatMul as cblas_sgemm per matrix; the epilogue
 * (bias, residual Z, activation) runs after the product in the reference kernels' order
 * (ops/fused.c: y + bias, then + Z, then the activation of ops/activation.h).
 *
 * Memory: constant inputs are copied at create (their data is not read again), and so is the
 * im2col buffer allocated there; run allocates nothing. Threads: an OpenMP build of OpenBLAS
 * (openblas_get_parallel() == 2) follows omp_get_max_threads(), so a kernel with threads > 0
 * sets that around its run and puts the caller's value back. A pthread build (what Debian's
 * alternatives select when both are installed) runs on one thread: its own workers spin after
 * each call and fight the OpenMP team of the kernels around it inside a model, which a kernel
 * timed alone never shows; its version says so, so its records stay apart from the OpenMP
 * build's. The im2col and epilogue loops are OpenMP loops on the kernel's count. */
#include <cblas.h>
#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "kernels/vendor/lib.h"
#include "kernels/vendor/lib_node.h"
#include "ops/op_util.h"
#include "ops/spatial.h"

#define MAX_IN 4
/* Elements below which an im2col or epilogue loop stays on one thread. */
#define PARALLEL_MIN 32768

struct lib_kernel {
    char name[64];          /* the node's, for messages */
    bool is_conv, direct;   /* direct: a 1x1 conv that multiplies X itself (no im2col) */
    lib_conv c;
    lib_gemm g;
    int nin, threads;
    int64_t ynumel;
    float *konst[MAX_IN];   /* copies of the constant inputs, NULL for the others */
    size_t konst_bytes[MAX_IN];
    float *col;             /* im2col buffer: C*KH*KW x OH*OW */
};

static char version_buf[200];
static pthread_once_t version_once = PTHREAD_ONCE_INIT;

static bool pthread_build(void) {
    return openblas_get_parallel() == 1;
}

static void version_init(void) {
    snprintf(version_buf, sizeof version_buf, "OpenBLAS %s%s", openblas_get_config(),
             pthread_build() ? " (pthread build, run on one thread)" : "");
}

static const char *version(const kernel_provider *self) {
    (void)self;
    pthread_once(&version_once, version_init);
    return version_buf;
}

/* ---- what it takes ---- */

/* cblas takes int sizes. */
static bool fits_int(int64_t a, int64_t b, int64_t c) {
    return a <= INT_MAX && b <= INT_MAX && c <= INT_MAX && a * b <= INT_MAX && b * c <= INT_MAX;
}

static wpk_status check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out, lib_conv *c, lib_gemm *g) {
    if (n->nin > MAX_IN) return op_unsupported(ctx, n, "has %d inputs", n->nin);
    wpk_status st;
    if (lib_is_gemm(n)) {
        if ((st = lib_gemm_read(ctx, n, in, out, g))) return st;
        if (!fits_int(g->m, g->k, g->n) || g->m * g->n > INT_MAX)
            return op_unsupported(ctx, n, "matrices past cblas's int sizes");
        return WPK_OK;
    }
    if (!lib_is_conv(n))
        return op_unsupported(ctx, n, "the openblas provider takes convolutions and matrix "
                              "products, not %s", n->op_type);
    if ((st = lib_conv_read(ctx, n, in, out, c))) return st;
    if (!fits_int(c->k, c->c * c->kh * c->kw, c->oh * c->ow) || c->k * c->oh * c->ow > INT_MAX)
        return op_unsupported(ctx, n, "matrices past cblas's int sizes");
    if (c->xblock || c->yblock)
        return op_unsupported(ctx, n, "blocked tensors (NCHW[x]c); the openblas provider takes "
                              "NCHW");
    if (c->group != 1)
        return op_unsupported(ctx, n, "%lld groups; the openblas provider's im2col + sgemm takes "
                              "one", (long long)c->group);
    return WPK_OK;
}

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out) {
    (void)self;
    lib_conv c;
    lib_gemm g;
    return check(NULL, n, in, out, &c, &g) == WPK_OK;
}

static int configs(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                   ir_tensor *const *out,
                   char (*names)[LIB_CONFIG_MAX]) {
    if (!supports(self, n, in, out)) return 0;
    snprintf(names[0], LIB_CONFIG_MAX, "%s", lib_is_conv(n) ? "im2col_gemm" : "gemm");
    return 1;
}

/* ---- threads ---- */

/* Run on k's thread count; returns what end_threads puts back (-1: nothing). */
static int begin_threads(const lib_kernel *k) {
    if (pthread_build()) openblas_set_num_threads(1);
    if (k->threads <= 0) return -1;
    int saved = omp_get_max_threads();
    omp_set_num_threads(k->threads);
    return saved;
}

static void end_threads(int saved) {
    if (saved > 0) omp_set_num_threads(saved);
}

/* ---- create / destroy ---- */

static void destroy(const kernel_provider *self, lib_kernel *k) {
    (void)self;
    if (!k) return;
    for (int i = 0; i < MAX_IN; i++) wpk_free(k->konst[i]);
    wpk_free(k->col);
    wpk_free(k);
}

static int constants(const kernel_provider *self, const lib_kernel *k, const void **start,
                     size_t *bytes, int max) {
    (void)self;
    int n = 0;
    for (int i = 0; i < MAX_IN && n < max; i++)
        if (k->konst[i]) {
            start[n] = k->konst[i];
            bytes[n++] = k->konst_bytes[i];
        }
    return n;
}

static wpk_status create(const kernel_provider *self, wpk_context *ctx, const ir_node *n,
                         ir_tensor *const *in,
                         ir_tensor *const *out, int config, const kernel_device *dev,
                         lib_kernel **out_k) {
    *out_k = NULL;
    if (dev->cuda) return lib_host_only(ctx, self, n);
    lib_kernel *k = wpk_calloc(1, sizeof *k);
    if (!k) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory creating an openblas kernel");
    wpk_status st = check(ctx, n, in, out, &k->c, &k->g);
    if (!st && config != 0)
        st = op_unsupported(ctx, n, "openblas has one config (0), not %d", config);
    if (st) {
        destroy(self, k);
        return st;
    }
    snprintf(k->name, sizeof k->name, "%s", n->name);
    k->is_conv = lib_is_conv(n);
    k->nin = n->nin;
    k->threads = dev->threads;
    k->ynumel = ir_numel(out[0]);
    const lib_conv *c = &k->c;
    k->direct = k->is_conv && c->kh == 1 && c->kw == 1 && c->stride[0] == 1 &&
                c->stride[1] == 1 && !c->pad0[0] && !c->pad0[1] && !c->pad1[0] && !c->pad1[1];
    bool nomem = false;
    for (int i = 0; i < n->nin && !nomem; i++) {
        if (!in[i] || !in[i]->data) continue;
        size_t bytes = ir_nbytes(in[i]);
        if (!(k->konst[i] = wpk_malloc(bytes ? bytes : 1))) nomem = true;
        else memcpy(k->konst[i], in[i]->data, bytes);
        k->konst_bytes[i] = bytes;
    }
    if (k->is_conv && !k->direct && !nomem) {
        size_t rows = (size_t)(c->c * c->kh * c->kw), cols = (size_t)(c->oh * c->ow);
        if (!(k->col = wpk_malloc(sizeof(float) * rows * cols))) nomem = true;
    }
    if (nomem) {
        destroy(self, k);
        return wpk_error(ctx, WPK_ERR_NOMEM, "node '%s' (%s): out of memory creating an "
                         "openblas kernel", n->name, n->op_type);
    }
    *out_k = k;
    return WPK_OK;
}

/* ---- run ---- */

/* Input i's data for this run: the copy made at create, else the caller's. */
static const float *data_of(const lib_kernel *k, ir_tensor *const *in, int i) {
    if (i >= k->nin) return NULL;
    if (k->konst[i]) return k->konst[i];
    return in[i] ? in[i]->data : NULL;
}

/* One row of the epilogue after the bias: y = act(y + z) over len elements (z may be NULL). */
static void epilogue_row(float *restrict y, int64_t len, const float *restrict z,
                         const act_params *act) {
    if (z)
        for (int64_t i = 0; i < len; i++) y[i] += z[i];
    act_apply(act, y, len);
}

/* col[(ci * KH + i) * KW + j][oh * OW + ow] = x[ci][oh * sh + i * dh - ph][ow * sw + j * dw - pw],
 * zero where that falls in the padding; rows are independent (the parallel loop). */
static void im2col_row(const lib_conv *c, const float *x, float *col, int64_t r) {
    const int64_t ci = r / (c->kh * c->kw), i = r / c->kw % c->kh, j = r % c->kw;
    const float *xp = x + ci * c->h * c->w;
    float *dst = col + r * c->oh * c->ow;
    int64_t ow0, ow1;
    sp_tap_range(c->ow, c->stride[1], j * c->dil[1] - c->pad0[1], c->w, &ow0, &ow1);
    for (int64_t oh = 0; oh < c->oh; oh++, dst += c->ow) {
        int64_t ih = oh * c->stride[0] + i * c->dil[0] - c->pad0[0];
        if (ih < 0 || ih >= c->h) {
            memset(dst, 0, sizeof(float) * (size_t)c->ow);
            continue;
        }
        const float *xr = xp + ih * c->w + j * c->dil[1] - c->pad0[1];
        for (int64_t ow = 0; ow < ow0; ow++) dst[ow] = 0.0f;
        if (c->stride[1] == 1) {
            memcpy(dst + ow0, xr + ow0, sizeof(float) * (size_t)(ow1 - ow0));
        } else {
            for (int64_t ow = ow0; ow < ow1; ow++) dst[ow] = xr[ow * c->stride[1]];
        }
        for (int64_t ow = ow1; ow < c->ow; ow++) dst[ow] = 0.0f;
    }
}

/* Y's rows start as the bias (zeros without one) and the product accumulates onto them
 * (beta = 1): sgemm's result gets the bias added as the reference adds it, and OpenBLAS's
 * small-matrix kernels for beta = 0, which allocate a buffer on every call, are not taken. */
static void run_conv(const lib_kernel *k, ir_tensor *const *in, float *y) {
    const lib_conv *c = &k->c;
    const float *x = data_of(k, in, 0), *w = data_of(k, in, 1);
    const float *b = c->has_bias ? data_of(k, in, LIB_IN_BIAS) : NULL;
    const float *z = c->has_z ? data_of(k, in, LIB_IN_Z) : NULL;
    const int64_t rows = c->c * c->kh * c->kw, plane = c->oh * c->ow;
    for (int64_t img = 0; img < c->n; img++) {
        const float *xi = x + img * c->c * c->h * c->w, *bm = xi;
        float *yi = y + img * c->k * plane;
        if (!k->direct) {
            if (op_parallel(rows * plane, PARALLEL_MIN)) {
#pragma omp parallel for schedule(static)
                for (int64_t r = 0; r < rows; r++) im2col_row(c, xi, k->col, r);
            } else {
                for (int64_t r = 0; r < rows; r++) im2col_row(c, xi, k->col, r);
            }
            bm = k->col;
        }
        for (int64_t oc = 0; oc < c->k; oc++) {
            float v = b ? b[oc] : 0.0f, *yr = yi + oc * plane;
            for (int64_t i = 0; i < plane; i++) yr[i] = v;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)c->k, (int)plane, (int)rows,
                    1.0f, w, (int)rows, bm, (int)plane, 1.0f, yi, (int)plane);
        if (!z && c->act.kind == ACT_NONE) continue;
        const float *zi = z ? z + img * c->k * plane : NULL;
        if (op_parallel(c->k * plane, PARALLEL_MIN)) {
#pragma omp parallel for schedule(static)
            for (int64_t oc = 0; oc < c->k; oc++)
                epilogue_row(yi + oc * plane, plane, zi ? zi + oc * plane : NULL, &c->act);
        } else {
            for (int64_t oc = 0; oc < c->k; oc++)
                epilogue_row(yi + oc * plane, plane, zi ? zi + oc * plane : NULL, &c->act);
        }
    }
}

/* Row r of Y = act(Y + bias + Z) with FusedMatMul's per-column bias. */
static void bias_row(float *restrict y, int64_t len, const float *restrict bias,
                     const float *restrict z, const act_params *act) {
    if (bias)
        for (int64_t i = 0; i < len; i++) y[i] += bias[i];
    if (z)
        for (int64_t i = 0; i < len; i++) y[i] += z[i];
    act_apply(act, y, len);
}

/* Whether every batch matrix of A multiplies the same B and A's batch dims are all Y's (none
 * broadcast): then the batch is one product of count * m rows, a single sgemm instead of count
 * small ones (vit's attention projection is 197 products of one row each). */
static bool batch_folds(const lib_gemm *g) {
    if (g->ta) return false;
    for (int i = 0; i < g->nb; i++)
        if (g->bbatch[i] != 1 || g->abatch[i] != g->batch[i]) return false;
    return true;
}

/* Rows [0, m) of y: act(y + bias + z), in parallel over rows when there is enough work. */
static void gemm_epilogue(const lib_gemm *g, float *y, int64_t m, const float *bias,
                          const float *z) {
    const int64_t n = g->n;
    if (op_parallel(m * n, PARALLEL_MIN)) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < m; i++)
            bias_row(y + i * n, n, bias, z ? z + i * n : NULL, &g->act);
    } else {
        for (int64_t i = 0; i < m; i++)
            bias_row(y + i * n, n, bias, z ? z + i * n : NULL, &g->act);
    }
}

static void run_gemm(const lib_kernel *k, ir_tensor *const *in, float *y) {
    const lib_gemm *g = &k->g;
    const float *a = data_of(k, in, 0), *b = data_of(k, in, 1);
    const float *cc = g->has_c ? data_of(k, in, LIB_IN_BIAS) : NULL;
    const float *bias = g->has_bias ? data_of(k, in, LIB_IN_BIAS) : NULL;
    const float *z = g->has_z ? data_of(k, in, LIB_IN_Z) : NULL;
    int64_t m = g->m, count = 1;
    const int64_t n = g->n, kk = g->k;
    for (int i = 0; i < g->nb; i++) count *= g->batch[i];
    if (count > 1 && batch_folds(g)) {
        m *= count;
        count = 1;
    }
    for (int64_t bi = 0; bi < count; bi++) {
        /* the matrices of batch index bi, broadcast dims of A and B staying at 0 */
        int64_t ao = 0, bo = 0, as = m * kk, bs = kk * n, rest = bi;
        for (int i = g->nb - 1; i >= 0; i--) {
            int64_t at = rest % g->batch[i];
            rest /= g->batch[i];
            if (g->abatch[i] > 1) ao += at * as;
            if (g->bbatch[i] > 1) bo += at * bs;
            as *= g->abatch[i];
            bs *= g->bbatch[i];
        }
        /* Y = beta * C (broadcast) or zeros, then the product accumulates onto it (beta = 1,
         * as run_conv says why) */
        float *yb = y + bi * m * n;
        if (cc) {
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++)
                    yb[i * n + j] = g->beta * cc[(g->cm > 1 ? i * g->cn : 0) + (g->cn > 1 ? j : 0)];
        } else {
            memset(yb, 0, sizeof(float) * (size_t)(m * n));
        }
        cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
                    g->tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)kk, g->alpha, a + ao,
                    (int)(g->ta ? m : kk), b + bo, (int)(g->tb ? kk : n), 1.0f, yb, (int)n);
        if (!bias && !z && g->act.kind == ACT_NONE) continue;
        gemm_epilogue(g, yb, m, bias, z ? z + bi * m * n : NULL);
    }
}

static wpk_status run(const kernel_provider *self, wpk_context *ctx, lib_kernel *k,
                      ir_tensor *const *in,
                      ir_tensor *const *out) {
    (void)self;
    if (!out || !out[0] || !out[0]->data || ir_numel(out[0]) != k->ynumel)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "node '%s' (openblas): the output is not the "
                         "one the kernel was created for", k->name);
    for (int i = 0; i < k->nin; i++)
        if (!k->konst[i] && in[i] && !in[i]->data)
            return wpk_error(ctx, WPK_ERR_INVALID_ARG, "node '%s' (openblas): input %d has no "
                             "data", k->name, i);
    if (!data_of(k, in, 0) || !data_of(k, in, 1))
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "node '%s' (openblas): inputs 0 and 1 are "
                         "required", k->name);
    int saved = begin_threads(k);
    if (k->is_conv) run_conv(k, in, out[0]->data);
    else run_gemm(k, in, out[0]->data);
    end_threads(saved);
    return WPK_OK;
}

const kernel_provider lib_openblas = {
    .name = "openblas",
    .family = "openblas",
    .describe = lib_describe,
    .space = lib_space,
    .default_config = lib_default_config,
    .legal = kernel_legal_in_space,
    .supports = supports,
    .configs = configs,
    .create = create,
    .run = run,
    .destroy = destroy,
    .constants = constants,
    .version = version,
};
