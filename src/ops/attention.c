/* attention.c -- wpk::Attention, scaled dot-product attention as one op (passes/fuse_attention.c
 * creates it): softmax(scale * Q K^T + mask) V over the trailing two dims, batched over the
 * leading ones. Q, K, V and the output may be stored transposed (q_perm, k_perm, v_perm,
 * out_perm), so the head split/merge transposes around attention are never materialized, and
 * Q, K, V may be strided views into a larger tensor (q_view, k_view, v_view: the slices of a
 * fused QKV projection read in place). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "base/target.h"
#include "ops/op_util.h"
#if defined(__x86_64__)
#include "ops/vec_math.h"
#endif

/* Keys scored at once per block of query rows, and query rows sharing one packed key block. */
#define KEY_BLOCK 64
#define ROW_BLOCK 4
#define QUERY_CHUNK 64
/* Query rows the AVX-512 kernel takes at once: every row of a head when the heads alone keep
 * the threads busy, so each key block is transposed once per head rather than once per chunk. */
#define QUERY_CHUNK_WIDE 256
/* Head sizes the kernel holds in its fixed stack blocks. */
#define HEAD_DIM_MAX 512

typedef struct attn_dims {
    int rank;
    int64_t batch[WPK_MAX_DIMS - 2]; /* the leading (batch, head) dims */
    int64_t groups;                   /* their product */
    int64_t sq, sk, d, dv;
    int64_t q_off, k_off, v_off; /* first element of each operand's view */
    /* element strides of each logical dim in the stored tensor */
    int64_t qs[WPK_MAX_DIMS], ks[WPK_MAX_DIMS], vs[WPK_MAX_DIMS], os[WPK_MAX_DIMS],
        ms[WPK_MAX_DIMS];
} attn_dims;

/* The permutation attribute `name` of rank r into perm (absent: identity). */
static wpk_status read_perm(wpk_context *ctx, const ir_node *n, const char *name, int r,
                            int *perm) {
    int count;
    const int64_t *p = ir_attr_ints(n, name, &count);
    for (int i = 0; i < r; i++) perm[i] = i;
    if (!p) return WPK_OK;
    if (count != r) return op_fail(ctx, n, "attribute '%s' has %d entries, rank is %d", name,
                                   count, r);
    bool seen[WPK_MAX_DIMS] = {false};
    for (int i = 0; i < r; i++) {
        if (p[i] < 0 || p[i] >= r || seen[p[i]])
            return op_fail(ctx, n, "attribute '%s' is not a permutation of 0..%d", name, r - 1);
        seen[p[i]] = true;
        perm[i] = (int)p[i];
    }
    if (perm[r - 1] != r - 1)
        return op_unsupported(ctx, n, "attribute '%s' moves the last dim (rows must stay "
                              "contiguous)", name);
    return WPK_OK;
}

/* The stored operand `what` ("q", "k" or "v") of rank r: t's dims with contiguous strides, or the
 * strided view the attribute `<what>_view` describes ([offset, r dims, r strides] in elements
 * of t, read in place); the view must stay inside t and keep rows contiguous. */
static wpk_status stored(wpk_context *ctx, const ir_node *n, const ir_tensor *t, const char *what,
                         int r, int64_t *offset, int64_t *dims, int64_t *strides) {
    char name[16];
    snprintf(name, sizeof name, "%s_view", what);
    int count;
    const int64_t *v = ir_attr_ints(n, name, &count);
    *offset = 0;
    if (!v) {
        if (t->ndim != r)
            return op_fail(ctx, n, "%s has rank %d, Q has %d; they must be equal", what,
                           t->ndim, r);
        int64_t s = 1;
        for (int i = r - 1; i >= 0; i--) {
            dims[i] = t->dims[i];
            strides[i] = s;
            s *= t->dims[i];
        }
        return WPK_OK;
    }
    if (count != 1 + 2 * r)
        return op_fail(ctx, n, "attribute '%s' has %d entries, needs %d (offset, %d dims, %d "
                       "strides)", name, count, 1 + 2 * r, r, r);
    int64_t last = v[0];
    for (int i = 0; i < r; i++) {
        dims[i] = v[1 + i];
        strides[i] = v[1 + r + i];
        if (dims[i] < 1 || strides[i] < 0)
            return op_fail(ctx, n, "attribute '%s' has dim %lld stride %lld at %d", name,
                           (long long)dims[i], (long long)strides[i], i);
        last += (dims[i] - 1) * strides[i];
    }
    *offset = v[0];
    if (v[0] < 0 || last >= ir_numel(t))
        return op_fail(ctx, n, "attribute '%s' reaches element %lld of input %s, which has %lld",
                       name, (long long)last, what, (long long)ir_numel(t));
    if (strides[r - 1] != 1)
        return op_unsupported(ctx, n, "attribute '%s' has rows of stride %lld (rows must be "
                              "contiguous)", name, (long long)strides[r - 1]);
    return WPK_OK;
}

/* Logical dims of a stored operand seen through perm (logical = Transpose(t, perm)), and
 * their strides. */
static void view(const int64_t *sdims, const int64_t *sstrides, const int *perm, int r,
                 int64_t *dims, int64_t *strides) {
    for (int i = 0; i < r; i++) {
        dims[i] = sdims[perm[i]];
        strides[i] = sstrides[perm[i]];
    }
}

static wpk_status setup(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        attn_dims *a, int64_t *out_dims) {
    wpk_status st;
    for (int i = 0; i < 3; i++) {
        static const char *const what[] = {"Q", "K", "V"};
        if ((st = op_need_input(ctx, n, in, i, what[i])) || (st = op_need_f32(ctx, n, in, i)))
            return st;
    }
    /* the rank: Q's view's, else Q's own */
    int count, r = in[0]->ndim;
    if (ir_attr_ints(n, "q_view", &count)) r = (count - 1) / 2;
    if (r < 3 || r > WPK_MAX_DIMS)
        return op_fail(ctx, n, "Q has rank %d, needs 3 to %d", r, WPK_MAX_DIMS);
    int qp[WPK_MAX_DIMS], kp[WPK_MAX_DIMS], vp[WPK_MAX_DIMS], op[WPK_MAX_DIMS];
    if ((st = read_perm(ctx, n, "q_perm", r, qp)) || (st = read_perm(ctx, n, "k_perm", r, kp)) ||
        (st = read_perm(ctx, n, "v_perm", r, vp)) || (st = read_perm(ctx, n, "out_perm", r, op)))
        return st;
    int64_t qd[WPK_MAX_DIMS], kd[WPK_MAX_DIMS], vd[WPK_MAX_DIMS], sdims[WPK_MAX_DIMS],
        sstr[WPK_MAX_DIMS];
    if ((st = stored(ctx, n, in[0], "q", r, &a->q_off, sdims, sstr))) return st;
    view(sdims, sstr, qp, r, qd, a->qs);
    if ((st = stored(ctx, n, in[1], "k", r, &a->k_off, sdims, sstr))) return st;
    view(sdims, sstr, kp, r, kd, a->ks);
    if ((st = stored(ctx, n, in[2], "v", r, &a->v_off, sdims, sstr))) return st;
    view(sdims, sstr, vp, r, vd, a->vs);
    a->rank = r;
    a->groups = 1;
    for (int i = 0; i < r - 2; i++) {
        if (kd[i] != qd[i] || vd[i] != qd[i])
            return op_fail(ctx, n, "batch dim %d differs between Q (%lld), K (%lld) and V "
                           "(%lld)", i, (long long)qd[i], (long long)kd[i], (long long)vd[i]);
        a->batch[i] = qd[i];
        a->groups *= qd[i];
    }
    a->sq = qd[r - 2];
    a->d = qd[r - 1];
    a->sk = kd[r - 2];
    a->dv = vd[r - 1];
    if (kd[r - 1] != a->d)
        return op_fail(ctx, n, "Q's head size %lld differs from K's %lld", (long long)a->d,
                       (long long)kd[r - 1]);
    if (vd[r - 2] != a->sk)
        return op_fail(ctx, n, "V has %lld keys, K has %lld", (long long)vd[r - 2],
                       (long long)a->sk);
    if (a->d > HEAD_DIM_MAX || a->dv > HEAD_DIM_MAX)
        return op_unsupported(ctx, n, "head size %lld above %d", (long long)(a->d > a->dv ? a->d
                              : a->dv), HEAD_DIM_MAX);
    /* output: logical [batch..., Sq, Dv] stored as Transpose(logical, out_perm) */
    int64_t logical[WPK_MAX_DIMS];
    for (int i = 0; i < r - 2; i++) logical[i] = a->batch[i];
    logical[r - 2] = a->sq;
    logical[r - 1] = a->dv;
    int64_t st_out[WPK_MAX_DIMS], s = 1;
    for (int i = 0; i < r; i++) out_dims[i] = logical[op[i]];
    for (int i = r - 1; i >= 0; i--) {
        st_out[i] = s;
        s *= out_dims[i];
    }
    for (int i = 0; i < r; i++) a->os[op[i]] = st_out[i];
    memset(a->ms, 0, sizeof a->ms);
    if (n->nin > 3 && in[3]) {
        const ir_tensor *m = in[3];
        if ((st = op_need_f32(ctx, n, in, 3))) return st;
        if (m->ndim > r) return op_fail(ctx, n, "mask has rank %d above Q's %d", m->ndim, r);
        int64_t scores[WPK_MAX_DIMS];
        for (int i = 0; i < r - 2; i++) scores[i] = a->batch[i];
        scores[r - 2] = a->sq;
        scores[r - 1] = a->sk;
        for (int i = 0; i < m->ndim; i++) {
            int64_t md = m->dims[i], sd = scores[r - m->ndim + i];
            if (md != 1 && md != sd) {
                char buf[64];
                return op_fail(ctx, n, "mask %s does not broadcast to the scores' shape",
                               op_dims_str(buf, sizeof buf, m->ndim, m->dims));
            }
        }
        op_broadcast_strides(m, r, scores, a->ms);
    }
    return WPK_OK;
}

wpk_status op_attention_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                              ir_tensor *const *out) {
    attn_dims a;
    int64_t dims[WPK_MAX_DIMS];
    wpk_status st = setup(ctx, n, in, &a, dims);
    if (st) return st;
    if ((st = op_need_output(ctx, n, out, 0))) return st;
    op_set_shape(out[0], WPK_DTYPE_FLOAT32, a.rank, dims);
    return WPK_OK;
}

typedef struct attn_job {
    const attn_dims *a;
    float scale;
    const float *q, *k, *v, *mask; /* mask may be NULL */
    float *out;
} attn_job;

/* Offsets of batch group g in each operand. */
static void group_base(const attn_dims *a, int64_t g, int64_t *q, int64_t *k, int64_t *v,
                       int64_t *o, int64_t *m) {
    *q = *k = *v = *o = *m = 0;
    for (int i = a->rank - 3; i >= 0; i--) {
        int64_t idx = g % a->batch[i];
        g /= a->batch[i];
        *q += idx * a->qs[i];
        *k += idx * a->ks[i];
        *v += idx * a->vs[i];
        *o += idx * a->os[i];
        *m += idx * a->ms[i];
    }
}

/* Output rows [i0, i0 + rows) zeroed, their running max and sum reset. */
static void start_rows(const attn_job *j, int64_t ob, int64_t i0, int64_t rows, float *mx,
                       float *sum) {
    const attn_dims *a = j->a;
    for (int64_t i = 0; i < rows; i++) {
        mx[i] = -INFINITY;
        sum[i] = 0.0f;
        float *orow = j->out + ob + (i0 + i) * a->os[a->rank - 2];
        for (int64_t c = 0; c < a->dv; c++) orow[c] = 0.0f;
    }
}

/* Keys [k0, k0 + nk) of the group at kb into kt, transposed: [d][KEY_BLOCK]; a short last
 * block is padded with zeros, so no stale keys. */
static void transpose_keys(const attn_job *j, int64_t kb, int64_t k0, int64_t nk, float *kt) {
    const attn_dims *a = j->a;
    const int64_t d = a->d;
    for (int64_t t = 0; t < nk; t++) {
        const float *krow = j->k + kb + (k0 + t) * a->ks[a->rank - 2];
        for (int64_t c = 0; c < d; c++) kt[c * KEY_BLOCK + t] = krow[c];
    }
    for (int64_t c = 0; c < d && nk < KEY_BLOCK; c++)
        for (int64_t t = nk; t < KEY_BLOCK; t++) kt[c * KEY_BLOCK + t] = 0.0f;
}

/* Query rows [i0, i0 + rows) of batch group g, keys in blocks with an online softmax: the
 * running max and sum per row rescale the output rows accumulated so far, so no row of
 * scores longer than a key block is ever held. */
static inline __attribute__((always_inline)) void
attn_chunk_body(const attn_job *j, int64_t g, int64_t i0, int64_t rows) {
    const attn_dims *a = j->a;
    int64_t qb, kb, vb, ob, mb;
    group_base(a, g, &qb, &kb, &vb, &ob, &mb);
    const int64_t d = a->d, dv = a->dv, r = a->rank;
    float kt[HEAD_DIM_MAX * KEY_BLOCK]; /* a key block, transposed: [d][KEY_BLOCK] */
    float mx[QUERY_CHUNK], sum[QUERY_CHUNK];
    start_rows(j, ob, i0, rows, mx, sum);
    for (int64_t k0 = 0; k0 < a->sk; k0 += KEY_BLOCK) {
        const int64_t nk = a->sk - k0 < KEY_BLOCK ? a->sk - k0 : KEY_BLOCK;
        transpose_keys(j, kb, k0, nk, kt);
        for (int64_t ib = 0; ib < rows; ib += ROW_BLOCK) {
            const int64_t nr = rows - ib < ROW_BLOCK ? rows - ib : ROW_BLOCK;
            float s[ROW_BLOCK][KEY_BLOCK];
            for (int64_t x = 0; x < nr; x++) {
                const float *qrow = j->q + qb + (i0 + ib + x) * a->qs[r - 2];
                float *sx = s[x];
                for (int64_t t = 0; t < KEY_BLOCK; t++) sx[t] = 0.0f;
                for (int64_t c = 0; c < d; c++) {
                    const float qc = qrow[c];
                    const float *kc = kt + c * KEY_BLOCK;
#pragma omp simd
                    for (int64_t t = 0; t < KEY_BLOCK; t++) sx[t] += qc * kc[t];
                }
            }
            for (int64_t x = 0; x < nr; x++) {
                const int64_t i = ib + x;
                float *sx = s[x];
                float bmax = -INFINITY;
                const float *mrow = j->mask ? j->mask + mb + (i0 + i) * a->ms[r - 2] : NULL;
                for (int64_t t = 0; t < nk; t++) {
                    float v = sx[t] * j->scale;
                    if (mrow) v += mrow[(k0 + t) * a->ms[r - 1]];
                    sx[t] = v;
                    if (v > bmax) bmax = v;
                }
                float *orow = j->out + ob + (i0 + i) * a->os[r - 2];
                const float nmax = bmax > mx[i] ? bmax : mx[i];
                if (nmax == -INFINITY) continue; /* every key so far masked out entirely */
                const float corr = expf(mx[i] - nmax);
                float bsum = 0.0f;
                for (int64_t t = 0; t < nk; t++) {
                    sx[t] = expf(sx[t] - nmax);
                    bsum += sx[t];
                }
                if (corr != 1.0f) {
#pragma omp simd
                    for (int64_t c = 0; c < dv; c++) orow[c] *= corr;
                }
                sum[i] = sum[i] * corr + bsum;
                mx[i] = nmax;
                for (int64_t t = 0; t < nk; t++) {
                    const float p = sx[t];
                    const float *vrow = j->v + vb + (k0 + t) * a->vs[r - 2];
#pragma omp simd
                    for (int64_t c = 0; c < dv; c++) orow[c] += p * vrow[c];
                }
            }
        }
    }
    for (int64_t i = 0; i < rows; i++) {
        float *orow = j->out + ob + (i0 + i) * a->os[r - 2];
        /* a row whose keys are all -inf: ONNX's Softmax gives NaN there too */
        const float inv = sum[i] > 0.0f ? 1.0f / sum[i] : NAN;
        for (int64_t c = 0; c < dv; c++) orow[c] *= inv;
    }
}

/* The library builds for the baseline ISA; where the CPU has AVX2 and FMA, the same loops
 * compiled for them run 8 lanes with fused multiply-adds (a third less time at BERT's sizes). */
#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx2,fma"))) static void attn_chunk_avx2(const attn_job *j, int64_t g,
                                                                int64_t i0, int64_t rows) {
    attn_chunk_body(j, g, i0, rows);
}
#endif

static void attn_chunk_generic(const attn_job *j, int64_t g, int64_t i0, int64_t rows) {
    attn_chunk_body(j, g, i0, rows);
}

#if defined(__GNUC__) && defined(__x86_64__)
/* The same online softmax with AVX-512 register tiles, for value rows of 16 to 64 floats in
 * whole vectors (BERT's and ViT's 64): the scores of ROW_BLOCK query rows against a key block
 * (4 x 4 vectors) and their P V product (4 x dv / 16 vectors) accumulate in registers, the
 * exponentials are vec_exp's. Rows past `nr` in a row block repeat the last row and are
 * dropped. */
#define AVX512_DV_MAX 64

VEC_TARGET static void attn_scores(const attn_job *j, const float *kt, const float *const *qrow,
                                   __m512 s[ROW_BLOCK][KEY_BLOCK / 16]) {
    for (int x = 0; x < ROW_BLOCK; x++)
        for (int v = 0; v < KEY_BLOCK / 16; v++) s[x][v] = _mm512_setzero_ps();
    const int64_t d = j->a->d;
    for (int64_t c = 0; c < d; c++) {
        const float *kc = kt + c * KEY_BLOCK;
        const __m512 k0 = _mm512_loadu_ps(kc), k1 = _mm512_loadu_ps(kc + 16),
                     k2 = _mm512_loadu_ps(kc + 32), k3 = _mm512_loadu_ps(kc + 48);
#pragma GCC unroll 4
        for (int x = 0; x < ROW_BLOCK; x++) {
            const __m512 q = _mm512_set1_ps(qrow[x][c]);
            s[x][0] = _mm512_fmadd_ps(q, k0, s[x][0]);
            s[x][1] = _mm512_fmadd_ps(q, k1, s[x][1]);
            s[x][2] = _mm512_fmadd_ps(q, k2, s[x][2]);
            s[x][3] = _mm512_fmadd_ps(q, k3, s[x][3]);
        }
    }
}

/* orow = orow * corr + (o0 o1 o2 o3), over the vectors vm selects. */
VEC_TARGET static inline void attn_out_update(float *orow, float corr, const __mmask16 *vm,
                                              __m512 o0, __m512 o1, __m512 o2, __m512 o3) {
    const __m512 o[4] = {o0, o1, o2, o3}, cx = _mm512_set1_ps(corr);
    for (int v = 0; v < 4; v++)
        _mm512_mask_storeu_ps(orow + 16 * v, vm[v],
                              _mm512_fmadd_ps(_mm512_maskz_loadu_ps(vm[v], orow + 16 * v), cx,
                                              o[v]));
}

VEC_TARGET static void attn_chunk_avx512(const attn_job *j, int64_t g, int64_t i0,
                                         int64_t rows) {
    const attn_dims *a = j->a;
    int64_t qb, kb, vb, ob, mb;
    group_base(a, g, &qb, &kb, &vb, &ob, &mb);
    const int64_t dv = a->dv, r = a->rank, nv = dv / 16;
    float kt[HEAD_DIM_MAX * KEY_BLOCK]; /* a key block, transposed: [d][KEY_BLOCK] */
    float mx[QUERY_CHUNK_WIDE], sum[QUERY_CHUNK_WIDE];
    start_rows(j, ob, i0, rows, mx, sum);
    const __m512 scale = _mm512_set1_ps(j->scale);
    for (int64_t k0 = 0; k0 < a->sk; k0 += KEY_BLOCK) {
        const int64_t nk = a->sk - k0 < KEY_BLOCK ? a->sk - k0 : KEY_BLOCK;
        transpose_keys(j, kb, k0, nk, kt);
        __mmask16 live[KEY_BLOCK / 16]; /* the key lanes of this block */
        for (int v = 0; v < KEY_BLOCK / 16; v++) {
            int64_t in = nk - 16 * v;
            live[v] = in >= 16 ? 0xffff : in <= 0 ? 0 : (__mmask16)((1u << in) - 1);
        }
        for (int64_t ib = 0; ib < rows; ib += ROW_BLOCK) {
            const int64_t nr = rows - ib < ROW_BLOCK ? rows - ib : ROW_BLOCK;
            const float *qrow[ROW_BLOCK];
            for (int x = 0; x < ROW_BLOCK; x++)
                qrow[x] = j->q + qb + (i0 + ib + (x < nr ? x : nr - 1)) * a->qs[r - 2];
            __m512 s[ROW_BLOCK][KEY_BLOCK / 16];
            attn_scores(j, kt, qrow, s);
            /* per row: scale, mask, the block's max, exp(s - max) into p */
            float p[ROW_BLOCK][KEY_BLOCK], corr[ROW_BLOCK];
            for (int64_t x = 0; x < ROW_BLOCK; x++) {
                const int64_t i = ib + x;
                corr[x] = 1.0f;
                if (x >= nr) {
                    memset(p[x], 0, sizeof p[x]);
                    continue;
                }
                const __m512 ninf = _mm512_set1_ps(-INFINITY);
                __m512 vmax = ninf;
                for (int v = 0; v < KEY_BLOCK / 16; v++) {
                    __m512 sv = _mm512_mul_ps(s[x][v], scale);
                    if (j->mask) {
                        const float *mrow = j->mask + mb + (i0 + i) * a->ms[r - 2];
                        float mv[16] = {0};
                        for (int64_t t = 0; t < 16 && 16 * v + t < nk; t++)
                            mv[t] = mrow[(k0 + 16 * v + t) * a->ms[r - 1]];
                        sv = _mm512_add_ps(sv, _mm512_loadu_ps(mv));
                    }
                    s[x][v] = _mm512_mask_blend_ps(live[v], ninf, sv);
                    vmax = _mm512_max_ps(vmax, s[x][v]);
                }
                const float bmax = _mm512_reduce_max_ps(vmax);
                const float nmax = bmax > mx[i] ? bmax : mx[i];
                if (nmax == -INFINITY) { /* every key so far masked out entirely */
                    memset(p[x], 0, sizeof p[x]);
                    continue;
                }
                corr[x] = expf(mx[i] - nmax);
                __m512 vsum = _mm512_setzero_ps();
                for (int v = 0; v < KEY_BLOCK / 16; v++) {
                    __m512 e = _mm512_maskz_mov_ps(live[v], vec_exp(_mm512_sub_ps(
                                                                s[x][v], _mm512_set1_ps(nmax))));
                    vsum = _mm512_add_ps(vsum, e);
                    _mm512_storeu_ps(p[x] + 16 * v, e);
                }
                sum[i] = sum[i] * corr[x] + _mm512_reduce_add_ps(vsum);
                mx[i] = nmax;
            }
            /* P V for the row block, then out = out * corr + P V; the accumulators are named
               variables so that they stay in registers */
            __mmask16 vm[AVX512_DV_MAX / 16];
            for (int v = 0; v < AVX512_DV_MAX / 16; v++) vm[v] = v < nv ? 0xffff : 0;
#define PV_ACC(x) __m512 o##x##0 = _mm512_setzero_ps(), o##x##1 = o##x##0, o##x##2 = o##x##0, \
                         o##x##3 = o##x##0;
            PV_ACC(0) PV_ACC(1) PV_ACC(2) PV_ACC(3)
#undef PV_ACC
            for (int64_t t = 0; t < nk; t++) {
                const float *vrow = j->v + vb + (k0 + t) * a->vs[r - 2];
                const __m512 v0 = _mm512_maskz_loadu_ps(vm[0], vrow),
                             v1 = _mm512_maskz_loadu_ps(vm[1], vrow + 16),
                             v2 = _mm512_maskz_loadu_ps(vm[2], vrow + 32),
                             v3 = _mm512_maskz_loadu_ps(vm[3], vrow + 48);
#define PV_ROW(x)                                                                          \
    {                                                                                      \
        const __m512 pb = _mm512_set1_ps(p[x][t]);                                         \
        o##x##0 = _mm512_fmadd_ps(pb, v0, o##x##0);                                        \
        o##x##1 = _mm512_fmadd_ps(pb, v1, o##x##1);                                        \
        o##x##2 = _mm512_fmadd_ps(pb, v2, o##x##2);                                        \
        o##x##3 = _mm512_fmadd_ps(pb, v3, o##x##3);                                        \
    }
                PV_ROW(0) PV_ROW(1) PV_ROW(2) PV_ROW(3)
#undef PV_ROW
            }
#define PV_STORE(x)                                                                        \
    if (x < nr)                                                                            \
        attn_out_update(j->out + ob + (i0 + ib + x) * a->os[r - 2], corr[x], vm, o##x##0,  \
                        o##x##1, o##x##2, o##x##3);
            PV_STORE(0) PV_STORE(1) PV_STORE(2) PV_STORE(3)
#undef PV_STORE
        }
    }
    for (int64_t i = 0; i < rows; i++) {
        float *orow = j->out + ob + (i0 + i) * a->os[r - 2];
        /* a row whose keys are all -inf: ONNX's Softmax gives NaN there too */
        const float inv = sum[i] > 0.0f ? 1.0f / sum[i] : NAN;
        for (int64_t c = 0; c < dv; c++) orow[c] *= inv;
    }
}

/* Whole rows of scores at once, where a head's K^T fits the online kernel's stack block: K^T
 * of the group is packed once per chunk ([d][keys rounded up to a vector], zero padded), each
 * block of ROW_BLOCK query rows gets its full score rows (register tiles of up to 4 x 4
 * vectors, the last key vector masked), one exact max and sum per row, then P V over every
 * key with the output tile in registers, written once. Compared with the online kernel no
 * partial block is scored in full, and no output row is rescaled and rewritten per key block
 * (ViT's 197 keys: 13 vectors, not 4 blocks of 4). */
#define WHOLE_ROW_FLOATS (HEAD_DIM_MAX * KEY_BLOCK)

/* The scores of ROW_BLOCK query rows against nv (1..4) key vectors of kt at column t0. */
VEC_TARGET static inline __attribute__((always_inline)) void
score_tile(const float *kt, int64_t ldk, int64_t d, const float *const *qrow, int nv,
           __m512 acc[ROW_BLOCK][4]) {
#pragma GCC unroll 4
    for (int x = 0; x < ROW_BLOCK; x++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) acc[x][v] = _mm512_setzero_ps();
    for (int64_t c = 0; c < d; c++) {
        const float *kc = kt + c * ldk;
        __m512 kv[4];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) kv[v] = _mm512_loadu_ps(kc + 16 * v);
#pragma GCC unroll 4
        for (int x = 0; x < ROW_BLOCK; x++) {
            const __m512 q = _mm512_set1_ps(qrow[x][c]);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) acc[x][v] = _mm512_fmadd_ps(q, kv[v], acc[x][v]);
        }
    }
}

/* out rows = (P V) * inv for ROW_BLOCK rows of p (ldp apart), nv (1..4) value vectors. */
VEC_TARGET static inline __attribute__((always_inline)) void
pv_tile(const attn_job *j, int64_t vb, const float *p, int64_t ldp, int nv, float *const *orow,
        const float *inv, int64_t nr) {
    const attn_dims *a = j->a;
    const int64_t vs = a->vs[a->rank - 2];
    __m512 acc[ROW_BLOCK][4];
#pragma GCC unroll 4
    for (int x = 0; x < ROW_BLOCK; x++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) acc[x][v] = _mm512_setzero_ps();
    const float *vrow = j->v + vb;
    for (int64_t t = 0; t < a->sk; t++, vrow += vs) {
        __m512 vv[4];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) vv[v] = _mm512_loadu_ps(vrow + 16 * v);
#pragma GCC unroll 4
        for (int x = 0; x < ROW_BLOCK; x++) {
            const __m512 pb = _mm512_set1_ps(p[x * ldp + t]);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) acc[x][v] = _mm512_fmadd_ps(pb, vv[v], acc[x][v]);
        }
    }
    for (int64_t x = 0; x < nr; x++) {
        const __m512 sc = _mm512_set1_ps(inv[x]);
        for (int v = 0; v < nv; v++)
            _mm512_storeu_ps(orow[x] + 16 * v, _mm512_mul_ps(acc[x][v], sc));
    }
}

/* The mask's 16 values of row mrow at keys t0.., lanes outside `live` zero. */
VEC_TARGET static inline __m512 mask_vec(const attn_job *j, const float *mrow, int64_t t0,
                                         __mmask16 live) {
    const int64_t step = j->a->ms[j->a->rank - 1];
    if (step == 1) return _mm512_maskz_loadu_ps(live, mrow + t0);
    if (step == 0) return _mm512_maskz_mov_ps(live, _mm512_set1_ps(mrow[0]));
    float mv[16] = {0};
    for (int t = 0; t < 16; t++)
        if (live >> t & 1) mv[t] = mrow[(t0 + t) * step];
    return _mm512_loadu_ps(mv);
}

static bool whole_rows_fit(const attn_dims *a) {
    return a->d * ((a->sk + 15) / 16 * 16) <= WHOLE_ROW_FLOATS;
}

VEC_TARGET static void attn_rows_avx512(const attn_job *j, int64_t g, int64_t i0,
                                        int64_t rows) {
    const attn_dims *a = j->a;
    int64_t qb, kb, vb, ob, mb;
    group_base(a, g, &qb, &kb, &vb, &ob, &mb);
    const int64_t d = a->d, sk = a->sk, r = a->rank, ldk = (sk + 15) / 16 * 16;
    const int64_t nvec = ldk / 16, nv = a->dv / 16;
    float kt[WHOLE_ROW_FLOATS];
    float p[ROW_BLOCK * (WHOLE_ROW_FLOATS / 16)]; /* score rows, ldk apart */
    for (int64_t t = 0; t < sk; t++) {
        const float *krow = j->k + kb + t * a->ks[r - 2];
        for (int64_t c = 0; c < d; c++) kt[c * ldk + t] = krow[c];
    }
    for (int64_t c = 0; c < d; c++)
        for (int64_t t = sk; t < ldk; t++) kt[c * ldk + t] = 0.0f;
    const __mmask16 tail = sk % 16 ? (__mmask16)((1u << (sk % 16)) - 1) : (__mmask16)0xffff;
    const __m512 scale = _mm512_set1_ps(j->scale), ninf = _mm512_set1_ps(-INFINITY);
    for (int64_t ib = 0; ib < rows; ib += ROW_BLOCK) {
        const int64_t nr = rows - ib < ROW_BLOCK ? rows - ib : ROW_BLOCK;
        const float *qrow[ROW_BLOCK], *mrow[ROW_BLOCK];
        float *orow[ROW_BLOCK];
        for (int x = 0; x < ROW_BLOCK; x++) {
            const int64_t i = i0 + ib + (x < nr ? x : nr - 1); /* past nr: the last row again */
            qrow[x] = j->q + qb + i * a->qs[r - 2];
            orow[x] = j->out + ob + i * a->os[r - 2];
            mrow[x] = j->mask ? j->mask + mb + i * a->ms[r - 2] : NULL;
        }
        __m512 vmax[ROW_BLOCK];
        for (int x = 0; x < ROW_BLOCK; x++) vmax[x] = ninf;
        for (int64_t v0 = 0; v0 < nvec; v0 += 4) {
            const int nk = nvec - v0 < 4 ? (int)(nvec - v0) : 4;
            __m512 acc[ROW_BLOCK][4];
            switch (nk) {
            case 4: score_tile(kt + 16 * v0, ldk, d, qrow, 4, acc); break;
            case 3: score_tile(kt + 16 * v0, ldk, d, qrow, 3, acc); break;
            case 2: score_tile(kt + 16 * v0, ldk, d, qrow, 2, acc); break;
            default: score_tile(kt + 16 * v0, ldk, d, qrow, 1, acc); break;
            }
            for (int x = 0; x < ROW_BLOCK; x++)
                for (int v = 0; v < nk; v++) {
                    const int64_t t0 = 16 * (v0 + v);
                    const __mmask16 live = v0 + v == nvec - 1 ? tail : (__mmask16)0xffff;
                    __m512 sv = _mm512_mul_ps(acc[x][v], scale);
                    if (mrow[x]) sv = _mm512_add_ps(sv, mask_vec(j, mrow[x], t0, live));
                    sv = _mm512_mask_blend_ps(live, ninf, sv);
                    _mm512_storeu_ps(p + x * ldk + t0, sv);
                    vmax[x] = _mm512_max_ps(vmax[x], sv);
                }
        }
        float inv[ROW_BLOCK];
        for (int x = 0; x < ROW_BLOCK; x++) {
            float *px = p + x * ldk;
            const float mx = _mm512_reduce_max_ps(vmax[x]);
            if (mx == -INFINITY) { /* every key masked out: ONNX's Softmax gives NaN too */
                memset(px, 0, sizeof(float) * (size_t)ldk);
                inv[x] = NAN;
                continue;
            }
            const __m512 m = _mm512_set1_ps(mx);
            __m512 vsum = _mm512_setzero_ps();
            for (int64_t v = 0; v < nvec; v++) {
                const __mmask16 live = v == nvec - 1 ? tail : (__mmask16)0xffff;
                const __m512 e = _mm512_maskz_mov_ps(
                    live, vec_exp(_mm512_sub_ps(_mm512_loadu_ps(px + 16 * v), m)));
                _mm512_storeu_ps(px + 16 * v, e);
                vsum = _mm512_add_ps(vsum, e);
            }
            inv[x] = 1.0f / _mm512_reduce_add_ps(vsum);
        }
        switch (nv) {
        case 4: pv_tile(j, vb, p, ldk, 4, orow, inv, nr); break;
        case 3: pv_tile(j, vb, p, ldk, 3, orow, inv, nr); break;
        case 2: pv_tile(j, vb, p, ldk, 2, orow, inv, nr); break;
        default: pv_tile(j, vb, p, ldk, 1, orow, inv, nr); break;
        }
    }
}
#endif

typedef void (*attn_chunk_fn)(const attn_job *, int64_t, int64_t, int64_t);

/* The widest kernel the CPU runs; target_vector_floats (WPK_VECTOR_FLOATS=8 or 4) narrows the
 * choice, so the AVX2 and portable kernels are tested on an AVX-512 machine. */
static attn_chunk_fn attn_chunk_for_cpu(const attn_dims *a) {
#if defined(__GNUC__) && defined(__x86_64__)
    const int lanes = target_vector_floats();
    if (lanes >= 16 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512dq") && a->dv % 16 == 0 && a->dv <= AVX512_DV_MAX)
        return whole_rows_fit(a) ? attn_rows_avx512 : attn_chunk_avx512;
    if (lanes >= 8 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return attn_chunk_avx2;
#else
    (void)a;
#endif
    return attn_chunk_generic;
}

wpk_status op_attention_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                            ir_tensor *const *out) {
    attn_dims a;
    int64_t dims[WPK_MAX_DIMS];
    wpk_status st = setup(ctx, n, in, &a, dims);
    if (st) return st;
    attn_job j = {.a = &a, .scale = ir_attr_float(n, "scale", 1.0f),
                  .q = (const float *)in[0]->data + a.q_off,
                  .k = (const float *)in[1]->data + a.k_off,
                  .v = (const float *)in[2]->data + a.v_off,
                  .mask = n->nin > 3 && in[3] ? in[3]->data : NULL, .out = out[0]->data};
    const attn_chunk_fn attn_chunk = attn_chunk_for_cpu(&a);
    int64_t rows = QUERY_CHUNK;
#if defined(__GNUC__) && defined(__x86_64__)
    if ((attn_chunk == attn_chunk_avx512 || attn_chunk == attn_rows_avx512) &&
        a.groups >= 2 * (int64_t)omp_get_max_threads())
        rows = a.sq < QUERY_CHUNK_WIDE ? a.sq : QUERY_CHUNK_WIDE;
#endif
    const int64_t chunks = (a.sq + rows - 1) / rows, tasks = a.groups * chunks;
    /* work in multiply-adds of QK^T and PV */
    if (op_parallel(a.groups * a.sq * a.sk * (a.d + a.dv), 1 << 16)) {
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < tasks; t++) {
            int64_t i0 = t % chunks * rows;
            attn_chunk(&j, t / chunks, i0, a.sq - i0 < rows ? a.sq - i0 : rows);
        }
    } else {
        for (int64_t t = 0; t < tasks; t++) {
            int64_t i0 = t % chunks * rows;
            attn_chunk(&j, t / chunks, i0, a.sq - i0 < rows ? a.sq - i0 : rows);
        }
    }
    return WPK_OK;
}
