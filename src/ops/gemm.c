/* gemm.c -- Gemm (alpha, beta, transposes, broadcast C) and MatMul (numpy semantics: 1-D
 * promotion, broadcast batch dims): shape functions and reference kernels.
 *
 * Both run through one blocked core: a task is up to ROWS rows x COLS columns of one output
 * matrix, accumulated in a small stack tile in i-k-j order so the innermost loop runs over
 * contiguous columns of B (or, when B is transposed, as dot products over contiguous k). */
#include <string.h>

#include "ops/op_util.h"

#define ROWS 4
#define COLS 256

static bool has_in(const ir_node *n, ir_tensor *const *in, int i) { return i < n->nin && in[i]; }

/* One matrix product: A'(i, k) = a[i * ars + k * acs]; B'(k, j) = b[k * n + j], or
 * b[j * k + k] when tb. */
typedef struct mm {
    const float *a, *b;
    int64_t m, n, k, ars, acs;
    bool tb;
} mm;

/* tile[r][j] = sum over k of A'(i0 + r, k) * B'(k, j0 + j), for r < ni, j < nj. */
static void mm_tile(const mm *p, int64_t i0, int ni, int64_t j0, int64_t nj,
                    float tile[ROWS][COLS]) {
    if (p->tb) {
        for (int r = 0; r < ni; r++) {
            const float *ar = p->a + (i0 + r) * p->ars;
            for (int64_t j = 0; j < nj; j++) {
                const float *br = p->b + (j0 + j) * p->k;
                float s = 0.0f;
                if (p->acs == 1) {
#pragma omp simd reduction(+ : s)
                    for (int64_t q = 0; q < p->k; q++) s += ar[q] * br[q];
                } else {
                    for (int64_t q = 0; q < p->k; q++) s += ar[q * p->acs] * br[q];
                }
                tile[r][j] = s;
            }
        }
        return;
    }
    for (int r = 0; r < ni; r++) memset(tile[r], 0, sizeof(float) * (size_t)nj);
    for (int64_t q = 0; q < p->k; q++) {
        const float *restrict br = p->b + q * p->n + j0;
        float av[ROWS];
        for (int r = 0; r < ni; r++) av[r] = p->a[(i0 + r) * p->ars + q * p->acs];
        if (ni == ROWS) {
            /* four rows share each load of B */
            float *restrict t0 = tile[0], *restrict t1 = tile[1], *restrict t2 = tile[2],
                            *restrict t3 = tile[3];
#pragma omp simd
            for (int64_t j = 0; j < nj; j++) {
                t0[j] += av[0] * br[j];
                t1[j] += av[1] * br[j];
                t2[j] += av[2] * br[j];
                t3[j] += av[3] * br[j];
            }
        } else {
            for (int r = 0; r < ni; r++) {
                float *restrict t = tile[r];
#pragma omp simd
                for (int64_t j = 0; j < nj; j++) t[j] += av[r] * br[j];
            }
        }
    }
}

/* ---- Gemm ---- */

typedef struct gemm_dims {
    int64_t m, n, k;
    bool ta, tb;
} gemm_dims;

static wpk_status gemm_check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             gemm_dims *d) {
    wpk_status st;
    if ((st = op_need_input(ctx, n, in, 0, "A")) || (st = op_need_input(ctx, n, in, 1, "B")) ||
        (st = op_need_f32(ctx, n, in, 0)) || (st = op_need_f32(ctx, n, in, 1)))
        return st;
    if (has_in(n, in, 2) && (st = op_need_f32(ctx, n, in, 2))) return st;
    const ir_tensor *a = in[0], *b = in[1];
    if (a->ndim != 2) return op_fail(ctx, n, "input A has %d dims, expected 2", a->ndim);
    if (b->ndim != 2) return op_fail(ctx, n, "input B has %d dims, expected 2", b->ndim);
    d->ta = ir_attr_int(n, "transA", 0) != 0;
    d->tb = ir_attr_int(n, "transB", 0) != 0;
    d->m = a->dims[d->ta ? 1 : 0];
    d->k = a->dims[d->ta ? 0 : 1];
    d->n = b->dims[d->tb ? 0 : 1];
    int64_t kb = b->dims[d->tb ? 1 : 0];
    if (d->k >= 0 && kb >= 0 && d->k != kb)
        return op_fail(ctx, n, "inner dims differ: A%s gives K = %lld, B%s gives K = %lld",
                       d->ta ? " (transA)" : "", (long long)d->k, d->tb ? " (transB)" : "",
                       (long long)kb);
    if (d->k < 0) d->k = kb;
    if (has_in(n, in, 2)) {
        const ir_tensor *c = in[2];
        int64_t want[2] = {d->m, d->n};
        bool ok = c->ndim <= 2;
        for (int i = 0; ok && i < c->ndim; i++) {
            int64_t have = c->dims[i], w = want[2 - c->ndim + i];
            ok = have == 1 || have == w || have < 0 || w < 0;
        }
        if (!ok)
            return op_fail(ctx, n, "input C (%d-d) does not broadcast to the %lld x %lld output",
                           c->ndim, (long long)d->m, (long long)d->n);
    }
    return WPK_OK;
}

wpk_status op_gemm_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out) {
    gemm_dims d;
    wpk_status st = gemm_check(ctx, n, in, &d);
    if (st) return st;
    int64_t dims[2] = {d.m, d.n};
    op_set_shape(out[0], WPK_DTYPE_FLOAT32, 2, dims);
    return WPK_OK;
}

/* One Gemm's operands: a task is one ROWS x COLS tile of Y (cb tiles per row of tiles). */
typedef struct gemm_job {
    mm p;
    float alpha, beta;
    const float *c; /* or NULL */
    int64_t crs, ccs; /* C's row and column strides within Y, 0 where broadcast */
    int64_t cb;
    float *y;
} gemm_job;

static void gemm_task(const gemm_job *j, int64_t t) {
    const int64_t m = j->p.m, n = j->p.n;
    int64_t i0 = (t / j->cb) * ROWS, j0 = (t % j->cb) * COLS;
    int ni = (int)(m - i0 < ROWS ? m - i0 : ROWS);
    int64_t nj = n - j0 < COLS ? n - j0 : COLS;
    float tile[ROWS][COLS];
    mm_tile(&j->p, i0, ni, j0, nj, tile);
    for (int r = 0; r < ni; r++) {
        float *yr = j->y + (i0 + r) * n + j0;
        if (j->c) {
            const float *cr = j->c + (i0 + r) * j->crs + j0 * j->ccs;
            for (int64_t q = 0; q < nj; q++)
                yr[q] = j->alpha * tile[r][q] + j->beta * cr[q * j->ccs];
        } else {
            for (int64_t q = 0; q < nj; q++) yr[q] = j->alpha * tile[r][q];
        }
    }
}

/* Y = alpha * A' B' + beta * C. */
wpk_status op_gemm_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                       ir_tensor *const *out) {
    gemm_dims d;
    wpk_status st = gemm_check(ctx, n, in, &d);
    if (st) return st;
    const ir_tensor *c = has_in(n, in, 2) ? in[2] : NULL;
    gemm_job j = {.p = {in[0]->data, in[1]->data, d.m, d.n, d.k, d.ta ? 1 : d.k, d.ta ? d.m : 1,
                        d.tb},
                  .alpha = ir_attr_float(n, "alpha", 1.0f), .beta = ir_attr_float(n, "beta", 1.0f),
                  .c = c ? c->data : NULL, .cb = (d.n + COLS - 1) / COLS, .y = out[0]->data};
    if (c) {
        int64_t cm = c->ndim == 2 ? c->dims[0] : 1, cn = c->ndim >= 1 ? c->dims[c->ndim - 1] : 1;
        j.crs = cm == 1 ? 0 : cn;
        j.ccs = cn == 1 ? 0 : 1;
    }
    int64_t tasks = (d.m + ROWS - 1) / ROWS * j.cb;
    if (op_parallel(tasks, 2)) {
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < tasks; t++) gemm_task(&j, t);
    } else {
        for (int64_t t = 0; t < tasks; t++) gemm_task(&j, t);
    }
    return WPK_OK;
}

/* ---- MatMul ---- */

/* Batch dims of A and B (right-aligned, numpy broadcast) and the matrix sizes. A 1-D A is a
 * row vector (1, K) and a 1-D B a column vector (K, 1), the promoted dim dropped from Y. */
typedef struct matmul_dims {
    int nb;                      /* batch dims of Y */
    int64_t batch[WPK_MAX_DIMS]; /* Y's batch dims */
    int64_t astr[WPK_MAX_DIMS],
        bstr[WPK_MAX_DIMS]; /* matrix strides per batch dim, 0 = broadcast */
    int64_t m, n, k;
} matmul_dims;

static wpk_status matmul_check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                               matmul_dims *d) {
    wpk_status st;
    if ((st = op_need_input(ctx, n, in, 0, "A")) || (st = op_need_input(ctx, n, in, 1, "B")) ||
        (st = op_need_f32(ctx, n, in, 0)) || (st = op_need_f32(ctx, n, in, 1)))
        return st;
    const ir_tensor *a = in[0], *b = in[1];
    if (a->ndim < 1 || b->ndim < 1)
        return op_fail(ctx, n, "input %s is a scalar; MatMul needs at least 1-D inputs",
                       a->ndim < 1 ? "A" : "B");
    d->m = a->ndim == 1 ? 1 : a->dims[a->ndim - 2];
    d->k = a->dims[a->ndim - 1];
    int64_t kb = b->ndim == 1 ? b->dims[0] : b->dims[b->ndim - 2];
    d->n = b->ndim == 1 ? 1 : b->dims[b->ndim - 1];
    if (d->k >= 0 && kb >= 0 && d->k != kb)
        return op_fail(ctx, n, "inner dims differ: A has K = %lld, B has K = %lld", (long long)d->k,
                       (long long)kb);
    if (d->k < 0) d->k = kb;
    int na = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
    d->nb = na > nbb ? na : nbb;
    int64_t sa = d->m * d->k, sb = d->k * d->n;
    for (int i = d->nb - 1; i >= 0; i--) {
        int ia = i - (d->nb - na), ib = i - (d->nb - nbb);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da >= 0 && db >= 0 && da != db && da != 1 && db != 1)
            return op_fail(ctx, n, "batch dims cannot be broadcast: %lld in A and %lld in B",
                           (long long)da, (long long)db);
        /* an unknown dim against 1 stays unknown; against a known size it is that size */
        d->batch[i] = da == 1 ? db : db == 1 ? da : da >= 0 ? da : db;
        d->astr[i] = da == 1 ? 0 : sa;
        d->bstr[i] = db == 1 ? 0 : sb;
        sa *= da;
        sb *= db;
    }
    return WPK_OK;
}

wpk_status op_matmul_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                           ir_tensor *const *out) {
    matmul_dims d;
    wpk_status st = matmul_check(ctx, n, in, &d);
    if (st) return st;
    int64_t dims[WPK_MAX_DIMS];
    int nd = d.nb;
    memcpy(dims, d.batch, sizeof(int64_t) * (size_t)nd);
    if (in[0]->ndim > 1) dims[nd++] = d.m;
    if (in[1]->ndim > 1) dims[nd++] = d.n;
    op_set_shape(out[0], WPK_DTYPE_FLOAT32, nd, dims);
    return WPK_OK;
}

/* A MatMul's operands: a task is one ROWS x COLS tile of one matrix of Y. */
typedef struct matmul_job {
    const matmul_dims *d;
    int64_t cb, per; /* tiles per row of tiles, per matrix */
    const float *a, *b;
    float *y;
} matmul_job;

static void matmul_task(const matmul_job *j, int64_t t) {
    const matmul_dims *d = j->d;
    int64_t bi = t / j->per, i0 = (t % j->per / j->cb) * ROWS, j0 = (t % j->cb) * COLS;
    int64_t ao = 0, bo = 0, rest = bi;
    for (int i = d->nb - 1; i >= 0; i--) {
        int64_t at = rest % d->batch[i];
        rest /= d->batch[i];
        ao += at * d->astr[i];
        bo += at * d->bstr[i];
    }
    mm p = {j->a + ao, j->b + bo, d->m, d->n, d->k, d->k, 1, false};
    int ni = (int)(d->m - i0 < ROWS ? d->m - i0 : ROWS);
    int64_t nj = d->n - j0 < COLS ? d->n - j0 : COLS;
    float tile[ROWS][COLS];
    mm_tile(&p, i0, ni, j0, nj, tile);
    float *y = j->y + bi * d->m * d->n;
    for (int r = 0; r < ni; r++)
        memcpy(y + (i0 + r) * d->n + j0, tile[r], sizeof(float) * (size_t)nj);
}

wpk_status op_matmul_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out) {
    matmul_dims d;
    wpk_status st = matmul_check(ctx, n, in, &d);
    if (st) return st;
    int64_t nbatch = 1;
    for (int i = 0; i < d.nb; i++) nbatch *= d.batch[i];
    matmul_job j = {.d = &d, .cb = (d.n + COLS - 1) / COLS, .a = in[0]->data, .b = in[1]->data,
                    .y = out[0]->data};
    j.per = (d.m + ROWS - 1) / ROWS * j.cb;
    int64_t tasks = nbatch * j.per;
    if (op_parallel(tasks, 2)) {
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < tasks; t++) matmul_task(&j, t);
    } else {
        for (int64_t t = 0; t < tasks; t++) matmul_task(&j, t);
    }
    return WPK_OK;
}
