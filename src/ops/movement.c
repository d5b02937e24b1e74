/* movement.c -- data movement: Transpose, Concat, Split, Slice, Gather, Expand, Pad. These
 * copy elements without looking at them, so they run on every dtype (elements moved by size).
 * Transpose, Slice and Expand are all "copy a strided view densely" and share strided_copy. */
#include "ops/op_util.h"

#include <string.h>

/* Copies of fewer bytes than this stay on one thread. */
#define PAR_MIN_BYTES (1 << 20)
#define CONCAT_CHUNK_BYTES ((size_t)256 << 10)

static wpk_status need_elem(wpk_context *ctx, const ir_node *n, const ir_tensor *t) {
    if (!wpk_dtype_size(t->dtype))
        return op_unsupported(ctx, n, "dtype %d is not supported", (int)t->dtype);
    return WPK_OK;
}

static bool has_input(const ir_node *n, ir_tensor *const *in, int i) {
    return i < n->nin && in[i];
}

/* Product of dims[from, to). */
static int64_t prod(const int64_t *dims, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= dims[i];
    return p;
}

/* Row-major strides of t, in elements. */
static void dense_strides(const ir_tensor *t, int64_t *strides) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= t->dims[i];
    }
}

/* len elements of es bytes from src (every stride-th element, stride may be 0 or negative) to
 * dense dst. Fixed-size memcpy compiles to one load and store. */
static void copy_run(char *dst, const char *src, size_t es, int64_t len, int64_t stride) {
    int64_t step = stride * (int64_t)es;
    switch (es) {
    case 1:
        for (int64_t i = 0; i < len; i++) dst[i] = src[i * step];
        break;
    case 4:
        for (int64_t i = 0; i < len; i++) memcpy(dst + 4 * i, src + i * step, 4);
        break;
    case 8:
        for (int64_t i = 0; i < len; i++) memcpy(dst + 8 * i, src + i * step, 8);
        break;
    default:
        for (int64_t i = 0; i < len; i++) memcpy(dst + (int64_t)es * i, src + i * step, es);
        break;
    }
}

/* A strided view merged into m dims (d, element strides s), copied densely one row (the
 * innermost dim, `inner` elements of e bytes) at a time. */
typedef struct copy_job {
    int m;
    int64_t d[WPK_MAX_DIMS], s[WPK_MAX_DIMS], inner, e;
    const char *src;
    char *dst;
} copy_job;

static void copy_row(const copy_job *j, int64_t r) {
    int64_t off = 0, rem = r, is = j->s[j->m - 1];
    for (int k = j->m - 2; k >= 0; k--) {
        off += (rem % j->d[k]) * j->s[k];
        rem /= j->d[k];
    }
    char *o = j->dst + r * j->inner * j->e;
    const char *p = j->src + off * j->e;
    if (is == 1) memcpy(o, p, (size_t)(j->inner * j->e));
    else copy_run(o, p, (size_t)j->e, j->inner, is);
}

/* Write the view of src with dims[nd] and element strides[nd] (src points at the view's first
 * element) densely to dst. Size-1 dims are dropped and dims that stay contiguous in the view
 * merge, so the innermost run is as long as possible and a memcpy when its stride is 1. */
static void strided_copy(void *dst, const void *src, size_t es, int nd, const int64_t *dims,
                         const int64_t *strides) {
    copy_job j = {.e = (int64_t)es, .src = src, .dst = dst};
    int64_t total = 1;
    int m = 0;
    for (int i = 0; i < nd; i++) {
        total *= dims[i];
        if (dims[i] == 1) continue;
        if (m > 0 && j.s[m - 1] == strides[i] * dims[i]) {
            j.d[m - 1] *= dims[i];
            j.s[m - 1] = strides[i];
        } else {
            j.d[m] = dims[i];
            j.s[m] = strides[i];
            m++;
        }
    }
    if (total == 0) return;
    if (m == 0) {
        memcpy(dst, src, es);
        return;
    }
    j.m = m;
    j.inner = j.d[m - 1];
    int64_t rows = total / j.inner;
    if (op_parallel(total * j.e, PAR_MIN_BYTES)) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++) copy_row(&j, r);
    } else {
        for (int64_t r = 0; r < rows; r++) copy_row(&j, r);
    }
}

/* ---- Transpose ---- */

/* The permutation: attribute 'perm', or the dims reversed when it is absent. */
static wpk_status get_perm(wpk_context *ctx, const ir_node *n, int ndim, int *perm) {
    int count;
    const int64_t *p = ir_attr_ints(n, "perm", &count);
    if (!p) {
        for (int i = 0; i < ndim; i++) perm[i] = ndim - 1 - i;
        return WPK_OK;
    }
    if (count != ndim)
        return op_fail(ctx, n, "attribute 'perm' has %d values but the input has %d dims", count,
                       ndim);
    bool seen[WPK_MAX_DIMS] = {false};
    for (int i = 0; i < ndim; i++) {
        if (p[i] < 0 || p[i] >= ndim || seen[p[i]])
            return op_fail(ctx, n, "attribute 'perm' is not a permutation of 0..%d: value %lld "
                           "at index %d", ndim - 1, (long long)p[i], i);
        seen[p[i]] = true;
        perm[i] = (int)p[i];
    }
    return WPK_OK;
}

wpk_status op_transpose_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                              ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "data");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (!st) st = need_elem(ctx, n, in[0]);
    if (st) return st;
    int perm[WPK_MAX_DIMS];
    st = get_perm(ctx, n, in[0]->ndim, perm);
    if (st) return st;
    int64_t dims[WPK_MAX_DIMS];
    for (int i = 0; i < in[0]->ndim; i++) dims[i] = in[0]->dims[perm[i]];
    op_set_shape(out[0], in[0]->dtype, in[0]->ndim, dims);
    return WPK_OK;
}

wpk_status op_transpose_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                            ir_tensor *const *out) {
    int perm[WPK_MAX_DIMS];
    wpk_status st = get_perm(ctx, n, in[0]->ndim, perm);
    if (st) return st;
    int64_t in_strides[WPK_MAX_DIMS], strides[WPK_MAX_DIMS];
    dense_strides(in[0], in_strides);
    for (int i = 0; i < in[0]->ndim; i++) strides[i] = in_strides[perm[i]];
    strided_copy(out[0]->data, in[0]->data, wpk_dtype_size(in[0]->dtype), out[0]->ndim,
                 out[0]->dims, strides);
    return WPK_OK;
}

/* ---- Concat ---- */

static wpk_status concat_axis(wpk_context *ctx, const ir_node *n, int ndim, int *axis) {
    const ir_attr *a = ir_attr_find(n, "axis");
    if (!a && n->opset >= 4) return op_fail(ctx, n, "attribute 'axis' is missing");
    return op_axis(ctx, n, a ? a->i : 1, ndim, axis, "attribute 'axis'");
}

wpk_status op_concat_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                           ir_tensor *const *out) {
    wpk_status st = op_need_output(ctx, n, out, 0);
    if (st) return st;
    if (n->nin < 1) return op_fail(ctx, n, "has no inputs");
    for (int i = 0; i < n->nin; i++)
        if (!in[i]) return op_fail(ctx, n, "input %d is missing", i);
    const ir_tensor *x = in[0];
    st = need_elem(ctx, n, x);
    if (st) return st;
    int axis;
    st = concat_axis(ctx, n, x->ndim, &axis);
    if (st) return st;
    int64_t dims[WPK_MAX_DIMS];
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    char b1[160], b2[160];
    for (int i = 1; i < n->nin; i++) {
        const ir_tensor *t = in[i];
        if (t->dtype != x->dtype)
            return op_fail(ctx, n, "input %d has dtype %s but input 0 has %s", i,
                           wpk_dtype_name(t->dtype), wpk_dtype_name(x->dtype));
        bool ok = t->ndim == x->ndim;
        for (int k = 0; ok && k < x->ndim; k++)
            if (k != axis && t->dims[k] != x->dims[k] && t->dims[k] >= 0 && x->dims[k] >= 0)
                ok = false;
        if (!ok)
            return op_fail(ctx, n, "input %d has shape %s, which does not match input 0's %s "
                           "outside axis %d", i, op_dims_str(b1, sizeof b1, t->ndim, t->dims),
                           op_dims_str(b2, sizeof b2, x->ndim, x->dims), axis);
        dims[axis] = dims[axis] < 0 || t->dims[axis] < 0 ? -1 : dims[axis] + t->dims[axis];
    }
    op_set_shape(out[0], x->dtype, x->ndim, dims);
    return WPK_OK;
}

/* The chunks a copy of `bytes` is cut into (none when it is empty). */
static int64_t concat_chunks(size_t bytes) {
    return (int64_t)((bytes + CONCAT_CHUNK_BYTES - 1) / CONCAT_CHUNK_BYTES);
}

/* Copy chunk t of the concat of in[] along axis into y, whose rows (outer of them, row bytes
 * each) hold each input's part (dims[axis] x inner bytes) in order. */
static void concat_chunk(ir_tensor *const *in, const ir_tensor *y, int axis, int64_t outer,
                         size_t inner, size_t row, int64_t t) {
    size_t off = 0; /* the input's place in an output row */
    for (int i = 0;; i++) {
        size_t part = (size_t)in[i]->dims[axis] * inner;
        int64_t chunks = concat_chunks(part);
        if (t < outer * chunks) {
            int64_t o = t / chunks;
            size_t at = (size_t)(t % chunks) * CONCAT_CHUNK_BYTES;
            size_t len = part - at < CONCAT_CHUNK_BYTES ? part - at : CONCAT_CHUNK_BYTES;
            memcpy((char *)y->data + (size_t)o * row + off + at,
                   (const char *)in[i]->data + (size_t)o * part + at, len);
            return;
        }
        t -= outer * chunks;
        off += part;
    }
}

wpk_status op_concat_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out) {
    ir_tensor *y = out[0];
    int axis;
    wpk_status st = concat_axis(ctx, n, y->ndim, &axis);
    if (st) return st;
    size_t es = wpk_dtype_size(y->dtype);
    int64_t outer = prod(y->dims, 0, axis);
    size_t inner = (size_t)prod(y->dims, axis + 1, y->ndim) * es;
    size_t row = (size_t)y->dims[axis] * inner;
    if (ir_nbytes(y) == 0) return WPK_OK;
    /* inputs the memory plan laid in their slices of the output: nothing to copy */
    bool in_place = outer == 1;
    size_t at = 0;
    for (int i = 0; in_place && i < n->nin; i++) {
        in_place = in[i]->data == (const char *)y->data + at;
        at += ir_nbytes(in[i]);
    }
    if (in_place) return WPK_OK;
    /* Each input's part of an output row is one copy; a long copy is cut into chunks, so that
     * the team shares the copies even when there is one row (batch 1, channel axis). */
    int64_t total = 0;
    for (int i = 0; i < n->nin; i++)
        total += outer * concat_chunks((size_t)in[i]->dims[axis] * inner);
    /* no parallel region at all below the size: even an if(0) one allocates in libgomp */
    if (op_parallel((int64_t)ir_nbytes(y), PAR_MIN_BYTES)) {
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < total; t++) concat_chunk(in, y, axis, outer, inner, row, t);
    } else {
        for (int64_t t = 0; t < total; t++) concat_chunk(in, y, axis, outer, inner, row, t);
    }
    return WPK_OK;
}

/* ---- Split ---- */

wpk_status op_split_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                          ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "input");
    if (!st) st = need_elem(ctx, n, in[0]);
    if (st) return st;
    const ir_tensor *x = in[0];
    int nout = n->nout;
    if (nout < 1) return op_fail(ctx, n, "has no outputs");
    for (int i = 0; i < nout; i++) {
        st = op_need_output(ctx, n, out, i);
        if (st) return st;
    }
    int axis;
    st = op_axis(ctx, n, ir_attr_int(n, "axis", 0), x->ndim, &axis, "attribute 'axis'");
    if (st) return st;
    int64_t d = x->dims[axis];
    const ir_attr *num = n->opset >= 18 ? ir_attr_find(n, "num_outputs") : NULL;
    char b1[160];
    for (int i = 0; i < nout; i++) op_set_shape(out[i], x->dtype, x->ndim, x->dims);

    /* an empty 'split' tensor means no sizes were given */
    if (has_input(n, in, 1) && ir_numel(in[1]) != 0) {
        if (num)
            return op_fail(ctx, n, "both input 'split' and attribute 'num_outputs' are given");
        st = op_need_data(ctx, n, in, 1, "split");
        if (st) return st;
        const ir_tensor *s = in[1];
        if (s->dtype != WPK_DTYPE_INT64 && s->dtype != WPK_DTYPE_INT32)
            return op_fail(ctx, n, "input 'split' must be int64, not %s",
                           wpk_dtype_name(s->dtype));
        if (ir_numel(s) != nout)
            return op_fail(ctx, n, "input 'split' has %lld values but the node has %d outputs",
                           (long long)ir_numel(s), nout);
        int64_t sum = 0;
        for (int i = 0; i < nout; i++) {
            int64_t v = op_int_at(s, i);
            if (v < 0)
                return op_fail(ctx, n, "input 'split' has the negative size %lld at index %d",
                               (long long)v, i);
            out[i]->dims[axis] = v;
            sum += v;
        }
        if (d >= 0 && sum != d)
            return op_fail(ctx, n, "input 'split' sums to %lld, but axis %d of %s has size %lld",
                           (long long)sum, axis, op_dims_str(b1, sizeof b1, x->ndim, x->dims),
                           (long long)d);
        return WPK_OK;
    }
    if (num && num->i != nout)
        return op_fail(ctx, n, "attribute 'num_outputs' is %lld but the node has %d outputs",
                       (long long)num->i, nout);
    if (d < 0) {
        for (int i = 0; i < nout; i++) out[i]->dims[axis] = -1;
        return WPK_OK;
    }
    /* opset 18's num_outputs rounds the chunk up and leaves the last one smaller; without it
     * the split must be even */
    int64_t chunk = num ? (d + nout - 1) / nout : d / nout;
    int64_t last = d - chunk * (nout - 1);
    if (num ? last < 0 : d % nout != 0)
        return op_fail(ctx, n, "axis %d of %s (size %lld) cannot be split into %d outputs", axis,
                       op_dims_str(b1, sizeof b1, x->ndim, x->dims), (long long)d, nout);
    for (int i = 0; i < nout; i++) out[i]->dims[axis] = i < nout - 1 ? chunk : last;
    return WPK_OK;
}

wpk_status op_split_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out) {
    const ir_tensor *x = in[0];
    int axis;
    wpk_status st = op_axis(ctx, n, ir_attr_int(n, "axis", 0), x->ndim, &axis,
                            "attribute 'axis'");
    if (st) return st;
    size_t es = wpk_dtype_size(x->dtype);
    int64_t outer = prod(x->dims, 0, axis);
    size_t inner = (size_t)prod(x->dims, axis + 1, x->ndim) * es;
    size_t row = (size_t)x->dims[axis] * inner;
    size_t off = 0;
    for (int i = 0; i < n->nout; i++) {
        size_t part = (size_t)out[i]->dims[axis] * inner;
        if (part == 0) continue;
        const char *src = (const char *)x->data + off;
        char *dst = out[i]->data;
        for (int64_t o = 0; o < outer; o++) memcpy(dst + o * part, src + o * row, part);
        off += part;
    }
    return WPK_OK;
}

/* ---- Slice ---- */

/* Per input dim: first element, step and count of the slice, computed as the spec says:
 * negative starts/ends count from the back, then starts clamp to [0, d] ([0, d-1] when
 * stepping backwards) and ends to [0, d] ([-1, d-1]), which makes INT64_MAX / INT64_MIN
 * mean "to the end". Unknown dims (< 0) give an unknown count. */
static wpk_status slice_plan(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             int64_t *start, int64_t *step, int64_t *len) {
    wpk_status st = op_need_input(ctx, n, in, 0, "data");
    if (!st) st = op_need_data(ctx, n, in, 1, "starts");
    if (!st) st = op_need_data(ctx, n, in, 2, "ends");
    if (st) return st;
    const ir_tensor *x = in[0];
    int64_t starts[WPK_MAX_DIMS], ends[WPK_MAX_DIMS], axes[WPK_MAX_DIMS], steps[WPK_MAX_DIMS];
    int ns, ne, na, nst;
    st = op_read_ints(ctx, n, in[1], starts, WPK_MAX_DIMS, &ns, "starts");
    if (!st) st = op_read_ints(ctx, n, in[2], ends, WPK_MAX_DIMS, &ne, "ends");
    if (st) return st;
    if (ne != ns)
        return op_fail(ctx, n, "inputs 'starts' and 'ends' have %d and %d values", ns, ne);
    if (has_input(n, in, 3)) {
        st = op_need_data(ctx, n, in, 3, "axes");
        if (!st) st = op_read_ints(ctx, n, in[3], axes, WPK_MAX_DIMS, &na, "axes");
        if (st) return st;
        if (na != ns)
            return op_fail(ctx, n, "input 'axes' has %d values but 'starts' has %d", na, ns);
    } else {
        if (ns > x->ndim)
            return op_fail(ctx, n, "input 'starts' has %d values but the data has %d dims", ns,
                           x->ndim);
        for (int i = 0; i < ns; i++) axes[i] = i;
    }
    if (has_input(n, in, 4)) {
        st = op_need_data(ctx, n, in, 4, "steps");
        if (!st) st = op_read_ints(ctx, n, in[4], steps, WPK_MAX_DIMS, &nst, "steps");
        if (st) return st;
        if (nst != ns)
            return op_fail(ctx, n, "input 'steps' has %d values but 'starts' has %d", nst, ns);
    } else {
        for (int i = 0; i < ns; i++) steps[i] = 1;
    }
    for (int i = 0; i < x->ndim; i++) {
        start[i] = 0;
        step[i] = 1;
        len[i] = x->dims[i];
    }
    bool seen[WPK_MAX_DIMS] = {false};
    for (int k = 0; k < ns; k++) {
        int a;
        st = op_axis(ctx, n, axes[k], x->ndim, &a, "axis in 'axes'");
        if (st) return st;
        if (seen[a]) return op_fail(ctx, n, "input 'axes' names axis %d twice", a);
        seen[a] = true;
        int64_t s = starts[k], e = ends[k], sp = steps[k], d = x->dims[a];
        if (sp == 0) return op_fail(ctx, n, "input 'steps' is 0 for axis %d", a);
        step[a] = sp;
        if (d < 0) {
            len[a] = -1;
            continue;
        }
        if (s < 0) s += d; /* cannot overflow: d >= 0 */
        if (e < 0) e += d;
        if (d == 0) {
            start[a] = 0;
            len[a] = 0;
        } else if (sp > 0) {
            s = s < 0 ? 0 : s > d ? d : s;
            e = e < 0 ? 0 : e > d ? d : e;
            start[a] = s;
            len[a] = e > s ? (e - s - 1) / sp + 1 : 0;
        } else {
            s = s < 0 ? 0 : s > d - 1 ? d - 1 : s;
            e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
            int64_t back = sp == INT64_MIN ? INT64_MAX : -sp; /* |step|, saturated */
            start[a] = s;
            len[a] = s > e ? (s - e - 1) / back + 1 : 0;
        }
    }
    return WPK_OK;
}

wpk_status op_slice_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                          ir_tensor *const *out) {
    int64_t start[WPK_MAX_DIMS], step[WPK_MAX_DIMS], len[WPK_MAX_DIMS];
    wpk_status st = slice_plan(ctx, n, in, start, step, len);
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (!st) st = need_elem(ctx, n, in[0]);
    if (st) return st;
    op_set_shape(out[0], in[0]->dtype, in[0]->ndim, len);
    return WPK_OK;
}

wpk_status op_slice_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out) {
    int64_t start[WPK_MAX_DIMS], step[WPK_MAX_DIMS], len[WPK_MAX_DIMS];
    wpk_status st = slice_plan(ctx, n, in, start, step, len);
    if (st) return st;
    const ir_tensor *x = in[0];
    if (ir_numel(out[0]) == 0) return WPK_OK;
    int64_t in_strides[WPK_MAX_DIMS], strides[WPK_MAX_DIMS], off = 0;
    dense_strides(x, in_strides);
    for (int i = 0; i < x->ndim; i++) {
        off += start[i] * in_strides[i];
        strides[i] = step[i] * in_strides[i];
    }
    size_t es = wpk_dtype_size(x->dtype);
    strided_copy(out[0]->data, (const char *)x->data + off * (int64_t)es, es, x->ndim, len,
                 strides);
    return WPK_OK;
}

/* ---- Gather ---- */

wpk_status op_gather_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                           ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "data");
    if (!st) st = op_need_input(ctx, n, in, 1, "indices");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (!st) st = need_elem(ctx, n, in[0]);
    if (st) return st;
    const ir_tensor *x = in[0], *idx = in[1];
    if (idx->dtype != WPK_DTYPE_INT64 && idx->dtype != WPK_DTYPE_INT32)
        return op_fail(ctx, n, "input 'indices' must be int32 or int64, not %s",
                       wpk_dtype_name(idx->dtype));
    int axis;
    st = op_axis(ctx, n, ir_attr_int(n, "axis", 0), x->ndim, &axis, "attribute 'axis'");
    if (st) return st;
    int rank = x->ndim - 1 + idx->ndim;
    if (rank > WPK_MAX_DIMS)
        return op_unsupported(ctx, n, "the output would have %d dims; at most %d are supported",
                              rank, WPK_MAX_DIMS);
    /* indices known now (a constant) are checked now, so a bad model fails at load */
    if (idx->data && x->dims[axis] >= 0) {
        st = op_check_indices(ctx, n, idx, x->dims[axis], axis);
        if (st) return st;
    }
    int64_t dims[WPK_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < axis; i++) dims[k++] = x->dims[i];
    for (int i = 0; i < idx->ndim; i++) dims[k++] = idx->dims[i];
    for (int i = axis + 1; i < x->ndim; i++) dims[k++] = x->dims[i];
    op_set_shape(out[0], x->dtype, rank, dims);
    return WPK_OK;
}

/* Gather: for each index (count of them, into an axis of d), one slice of `inner` bytes. */
typedef struct gather_job {
    const ir_tensor *idx;
    int64_t d, count;
    size_t inner;
    const char *src;
    char *dst;
} gather_job;

/* The slices of outer index o. */
static void gather_rows(const gather_job *j, int64_t o) {
    for (int64_t k = 0; k < j->count; k++) {
        int64_t v = op_int_at(j->idx, k);
        if (v < 0) v += j->d;
        memcpy(j->dst + (size_t)(o * j->count + k) * j->inner,
               j->src + (size_t)(o * j->d + v) * j->inner, j->inner);
    }
}

wpk_status op_gather_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out) {
    const ir_tensor *x = in[0], *idx = in[1];
    int axis;
    wpk_status st = op_axis(ctx, n, ir_attr_int(n, "axis", 0), x->ndim, &axis,
                            "attribute 'axis'");
    if (st) return st;
    int64_t d = x->dims[axis];
    st = op_check_indices(ctx, n, idx, d, axis);
    if (st) return st;
    if (ir_numel(out[0]) == 0) return WPK_OK;
    size_t es = wpk_dtype_size(x->dtype);
    gather_job j = {.idx = idx, .d = d, .count = ir_numel(idx),
                    .inner = (size_t)prod(x->dims, axis + 1, x->ndim) * es, .src = x->data,
                    .dst = out[0]->data};
    int64_t outer = prod(x->dims, 0, axis);
    if (op_parallel(outer * j.count * (int64_t)j.inner, PAR_MIN_BYTES)) {
#pragma omp parallel for schedule(static)
        for (int64_t o = 0; o < outer; o++) gather_rows(&j, o);
    } else {
        for (int64_t o = 0; o < outer; o++) gather_rows(&j, o);
    }
    return WPK_OK;
}

/* ---- Expand ---- */

wpk_status op_expand_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                           ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "input");
    if (!st) st = op_need_data(ctx, n, in, 1, "shape");
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (!st) st = need_elem(ctx, n, in[0]);
    if (st) return st;
    const ir_tensor *x = in[0];
    int64_t shape[WPK_MAX_DIMS];
    int ns;
    st = op_read_ints(ctx, n, in[1], shape, WPK_MAX_DIMS, &ns, "shape");
    if (st) return st;
    char b1[160], b2[160];
    for (int i = 0; i < ns; i++)
        if (shape[i] < 0)
            return op_fail(ctx, n, "input 'shape' %s has the negative value %lld",
                           op_dims_str(b1, sizeof b1, ns, shape), (long long)shape[i]);
    /* bidirectional: a 1 on either side takes the other side's dim */
    int nd = x->ndim > ns ? x->ndim : ns;
    int64_t dims[WPK_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        int ix = i - (nd - x->ndim), is = i - (nd - ns);
        int64_t dx = ix >= 0 ? x->dims[ix] : 1, ds = is >= 0 ? shape[is] : 1;
        if (dx == ds || ds == 1) dims[i] = dx;
        else if (dx == 1 || dx < 0) dims[i] = ds;
        else
            return op_fail(ctx, n, "cannot expand %s to shape %s: dim %d is %lld and %lld",
                           op_dims_str(b1, sizeof b1, x->ndim, x->dims),
                           op_dims_str(b2, sizeof b2, ns, shape), i, (long long)dx, (long long)ds);
    }
    op_set_shape(out[0], x->dtype, nd, dims);
    return WPK_OK;
}

wpk_status op_expand_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out) {
    (void)ctx;
    (void)n;
    int64_t strides[WPK_MAX_DIMS];
    op_broadcast_strides(in[0], out[0]->ndim, out[0]->dims, strides);
    strided_copy(out[0]->data, in[0]->data, wpk_dtype_size(in[0]->dtype), out[0]->ndim,
                 out[0]->dims, strides);
    return WPK_OK;
}

/* ---- Pad ---- */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

/* One axis of a Pad: negative pads crop first (as ONNX Runtime does), then the cropped range
 * [lo, lo + len) of the input is padded with before and after elements. */
typedef struct pad_axis {
    int64_t lo, len, before, out;
} pad_axis;

static wpk_status pad_plan(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                           pad_axis *ax, int *mode) {
    wpk_status st = op_need_input(ctx, n, in, 0, "data");
    if (!st) st = op_need_data(ctx, n, in, 1, "pads");
    if (st) return st;
    const ir_tensor *x = in[0];
    int r = x->ndim;
    const char *m = ir_attr_str(n, "mode", "constant");
    if (strcmp(m, "constant") == 0) *mode = PAD_CONSTANT;
    else if (strcmp(m, "reflect") == 0) *mode = PAD_REFLECT;
    else if (strcmp(m, "edge") == 0) *mode = PAD_EDGE;
    else if (strcmp(m, "wrap") == 0) *mode = PAD_WRAP;
    else
        return op_fail(ctx, n, "attribute 'mode' is '%s'; it must be constant, reflect, edge or "
                       "wrap", m);
    int64_t pads[2 * WPK_MAX_DIMS], axes_raw[WPK_MAX_DIMS];
    int np, na;
    st = op_read_ints(ctx, n, in[1], pads, 2 * WPK_MAX_DIMS, &np, "pads");
    if (st) return st;
    int axes[WPK_MAX_DIMS];
    if (has_input(n, in, 3)) {
        st = op_need_data(ctx, n, in, 3, "axes");
        if (!st) st = op_read_ints(ctx, n, in[3], axes_raw, WPK_MAX_DIMS, &na, "axes");
        if (st) return st;
        bool seen[WPK_MAX_DIMS] = {false};
        for (int i = 0; i < na; i++) {
            st = op_axis(ctx, n, axes_raw[i], r, &axes[i], "axis in 'axes'");
            if (st) return st;
            if (seen[axes[i]]) return op_fail(ctx, n, "input 'axes' names axis %d twice", axes[i]);
            seen[axes[i]] = true;
        }
    } else {
        na = r;
        for (int i = 0; i < r; i++) axes[i] = i;
    }
    if (np != 2 * na)
        return op_fail(ctx, n, "input 'pads' has %d values; %d axes need %d", np, na, 2 * na);
    for (int i = 0; i < r; i++) ax[i] = (pad_axis){0, x->dims[i], 0, x->dims[i]};
    for (int k = 0; k < na; k++) {
        int a = axes[k];
        int64_t b = pads[k], e = pads[na + k], d = x->dims[a];
        if (d < 0) {
            ax[a] = (pad_axis){0, -1, 0, -1};
            continue;
        }
        int64_t crop_b = b < 0 ? -b : 0, crop_e = e < 0 ? -e : 0;
        if (crop_b > d || crop_e > d - crop_b)
            return op_fail(ctx, n, "pads %lld and %lld on axis %d crop more than its size %lld",
                           (long long)b, (long long)e, a, (long long)d);
        pad_axis p = {crop_b, d - crop_b - crop_e, b > 0 ? b : 0, 0};
        p.out = p.len + p.before + (e > 0 ? e : 0);
        if (*mode != PAD_CONSTANT && p.len == 0 && p.out > 0)
            return op_fail(ctx, n, "axis %d is empty, so there is nothing to pad it with in "
                           "mode '%s'", a, m);
        ax[a] = p;
    }
    return WPK_OK;
}

wpk_status op_pad_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out) {
    pad_axis ax[WPK_MAX_DIMS];
    int mode;
    wpk_status st = pad_plan(ctx, n, in, ax, &mode);
    if (!st) st = op_need_output(ctx, n, out, 0);
    if (!st) st = need_elem(ctx, n, in[0]);
    if (st) return st;
    const ir_tensor *x = in[0];
    if (has_input(n, in, 2)) {
        const ir_tensor *c = in[2];
        if (c->dtype != x->dtype)
            return op_fail(ctx, n, "input 'constant_value' has dtype %s but the data has %s",
                           wpk_dtype_name(c->dtype), wpk_dtype_name(x->dtype));
        if (ir_numel(c) > 1)
            return op_fail(ctx, n, "input 'constant_value' must be a scalar, but has %lld "
                           "elements", (long long)ir_numel(c));
    }
    int64_t dims[WPK_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) dims[i] = ax[i].out;
    op_set_shape(out[0], x->dtype, x->ndim, dims);
    return WPK_OK;
}

/* The input index (within the axis) that output index o reads, or -1 for the constant. */
static int64_t pad_source(const pad_axis *p, int mode, int64_t o) {
    int64_t j = o - p->before, len = p->len;
    if (j >= 0 && j < len) return p->lo + j;
    switch (mode) {
    case PAD_EDGE: return p->lo + (j < 0 ? 0 : len - 1);
    case PAD_WRAP: return p->lo + ((j % len) + len) % len;
    case PAD_REFLECT: {
        /* mirror without repeating the edge: period 2(len-1), as numpy's reflect */
        if (len == 1) return p->lo;
        int64_t period = 2 * (len - 1), k = ((j % period) + period) % period;
        return p->lo + (k < len ? k : period - k);
    }
    default: return -1;
    }
}

static void fill(char *dst, const unsigned char *value, size_t es, int64_t count) {
    for (int64_t i = 0; i < count; i++) memcpy(dst + (int64_t)es * i, value, es);
}

/* Pad: the output row by row (rows of the last axis, `width` elements of e bytes). */
typedef struct pad_job {
    const pad_axis *ax;
    int mode, last;
    int64_t in_strides[WPK_MAX_DIMS], width, e;
    const unsigned char *value;
    const char *src;
    char *dst;
} pad_job;

static void pad_row(const pad_job *j, int64_t row) {
    const int64_t e = j->e, width = j->width;
    const pad_axis *pl = &j->ax[j->last];
    char *dst = j->dst + row * width * e;
    int64_t off = 0, rem = row;
    bool constant_row = false;
    for (int k = j->last - 1; k >= 0; k--) {
        int64_t s = pad_source(&j->ax[k], j->mode, rem % j->ax[k].out);
        rem /= j->ax[k].out;
        if (s < 0) constant_row = true;
        off += s * j->in_strides[k];
    }
    if (constant_row) {
        fill(dst, j->value, (size_t)e, width);
        return;
    }
    const char *line = j->src + off * e;
    /* the middle is one contiguous run; only the padded ends go element by element */
    if (pl->len) memcpy(dst + pl->before * e, line + pl->lo * e, (size_t)(pl->len * e));
    for (int64_t o = 0; o < width; o++) {
        if (o == pl->before) o += pl->len;
        if (o >= width) break;
        int64_t s = pad_source(pl, j->mode, o);
        if (s < 0) memcpy(dst + o * e, j->value, (size_t)e);
        else memcpy(dst + o * e, line + s * e, (size_t)e);
    }
}

wpk_status op_pad_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                      ir_tensor *const *out) {
    pad_axis ax[WPK_MAX_DIMS];
    int mode;
    wpk_status st = pad_plan(ctx, n, in, ax, &mode);
    if (st) return st;
    const ir_tensor *x = in[0];
    ir_tensor *y = out[0];
    size_t es = wpk_dtype_size(x->dtype);
    unsigned char value[16] = {0};
    if (has_input(n, in, 2) && ir_numel(in[2]) == 1) memcpy(value, in[2]->data, es);
    int64_t total = ir_numel(y);
    if (total == 0) return WPK_OK;
    if (x->ndim == 0) {
        memcpy(y->data, x->data, es);
        return WPK_OK;
    }
    pad_job j = {.ax = ax, .mode = mode, .last = x->ndim - 1, .width = ax[x->ndim - 1].out,
                 .e = (int64_t)es, .value = value, .src = x->data, .dst = y->data};
    dense_strides(x, j.in_strides);
    int64_t rows = total / j.width;
    if (op_parallel(total * j.e, PAR_MIN_BYTES)) {
#pragma omp parallel for schedule(static)
        for (int64_t row = 0; row < rows; row++) pad_row(&j, row);
    } else {
        for (int64_t row = 0; row < rows; row++) pad_row(&j, row);
    }
    return WPK_OK;
}
