/* eval.c -- static shape inference with folding, and the reference interpreter. */
#include "ir/eval.h"

#include <string.h>

#include "base/alloc.h"

/* Outputs up to this many elements are folded during inference: enough for every shape
 * computation, small enough that inference never does real work. */
#define FOLD_MAX_ELEMS 4096

static void gather_args(const ir_node *n, ir_tensor *vals, ir_tensor **in, ir_tensor **out) {
    for (int i = 0; i < n->nin; i++) in[i] = n->in[i] >= 0 ? &vals[n->in[i]] : NULL;
    for (int i = 0; i < n->nout; i++) out[i] = n->out[i] >= 0 ? &vals[n->out[i]] : NULL;
}

static wpk_status alloc_args(wpk_context *ctx, const ir_node *n, ir_tensor ***in,
                             ir_tensor ***out) {
    *in = wpk_calloc((size_t)n->nin + 1, sizeof(ir_tensor *));
    *out = wpk_calloc((size_t)n->nout + 1, sizeof(ir_tensor *));
    if (!*in || !*out) {
        wpk_free(*in);
        wpk_free(*out);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory at node '%s'", n->name);
    }
    return WPK_OK;
}

static void mark_unknown(const ir_node *n, ir_tensor *vals) {
    for (int i = 0; i < n->nout; i++)
        if (n->out[i] >= 0) memset(&vals[n->out[i]], 0, sizeof(ir_tensor));
}

/* Shape reads only its input's dims, so it folds once they are concrete (a session binds the
 * batch dim), which is what lets the Shape->Gather->Concat->Reshape chains fold. Its kernel
 * refuses (WPK_ERR_UNSUPPORTED, so nothing is folded) when a dim it reports is still symbolic. */
static bool needs_data(const ir_node *n, int i) { return !(n->op == IR_OP_SHAPE && i == 0); }

wpk_status ir_infer(wpk_context *ctx, const ir_graph *g, ir_tensor *vals, arena *mem) {
    for (int k = 0; k < g->nnodes; k++) {
        const ir_node *n = &g->nodes[k];
        const ir_op_info *info = ir_op_get(n->op);
        bool known = info->shape != NULL, all_data = true;
        for (int i = 0; i < n->nin; i++) {
            if (n->in[i] < 0) continue;
            const ir_tensor *t = &vals[n->in[i]];
            if (t->dtype == WPK_DTYPE_UNDEFINED) known = false;
            if (!t->data && needs_data(n, i)) all_data = false;
        }
        if (!known) {
            mark_unknown(n, vals);
            continue;
        }
        ir_tensor **in, **out;
        wpk_status st = alloc_args(ctx, n, &in, &out);
        if (st) return st;
        gather_args(n, vals, in, out);
        for (int i = 0; i < n->nout; i++)
            if (out[i]) memset(out[i], 0, sizeof(ir_tensor));
        st = info->shape(ctx, n, in, out);
        bool symbolic = false;
        for (int i = 0; i < n->nin; i++)
            for (int d = 0; in[i] && d < in[i]->ndim; d++) symbolic |= in[i]->dims[d] < 0;
        if (st == WPK_ERR_UNSUPPORTED || (st != WPK_OK && st != WPK_ERR_NOMEM && symbolic)) {
            /* e.g. a shape computed at run time: the session infers it then */
            wpk_clear_error(ctx);
            mark_unknown(n, vals);
            st = WPK_OK;
        } else if (st == WPK_OK && all_data && mem) {
            int64_t elems = 0;
            for (int i = 0; i < n->nout; i++)
                if (out[i]) elems += ir_numel(out[i]);
            if (elems <= FOLD_MAX_ELEMS || n->op == IR_OP_CONSTANT) {
                for (int i = 0; i < n->nout && st == WPK_OK; i++)
                    if (out[i] && !(out[i]->data = arena_alloc(mem, ir_nbytes(out[i]))))
                        st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory folding node '%s'",
                                       n->name);
                if (st == WPK_OK) st = info->ref(ctx, n, in, out);
                if (st == WPK_ERR_UNSUPPORTED) {
                    wpk_clear_error(ctx);
                    for (int i = 0; i < n->nout; i++)
                        if (out[i]) out[i]->data = NULL;
                    st = WPK_OK;
                }
            }
        }
        wpk_free(in);
        wpk_free(out);
        if (st) return st;
    }
    return WPK_OK;
}

wpk_status ir_exec_init(wpk_context *ctx, ir_exec *x, const ir_graph *g) {
    memset(x, 0, sizeof *x);
    x->vals = wpk_calloc((size_t)g->nvalues + 1, sizeof(ir_tensor));
    x->caps = wpk_calloc((size_t)g->nvalues + 1, sizeof(size_t));
    if (!x->vals || !x->caps) {
        ir_exec_free(x);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory preparing the graph");
    }
    x->nvalues = g->nvalues;
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].is_const) x->vals[v] = g->values[v].t;
    return WPK_OK;
}

void ir_exec_free(ir_exec *x) {
    if (x->vals && x->caps)
        for (int v = 0; v < x->nvalues; v++)
            if (x->caps[v]) wpk_free(x->vals[v].data);
    wpk_free(x->vals);
    wpk_free(x->caps);
    memset(x, 0, sizeof *x);
}

wpk_status ir_exec_reserve(wpk_context *ctx, ir_exec *x, int v, wpk_dtype dtype, int ndim,
                           const int64_t *dims) {
    ir_tensor *t = &x->vals[v];
    void *keep = x->caps[v] ? t->data : NULL;
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim) memmove(t->dims, dims, sizeof(int64_t) * (size_t)ndim);
    for (int i = 0; i < ndim; i++)
        if (dims[i] < 0) return wpk_error(ctx, WPK_ERR_INTERNAL, "negative dim reserving a tensor");
    size_t need = ir_nbytes(t);
    if (need <= x->caps[v] && keep) {
        t->data = keep;
        return WPK_OK;
    }
    wpk_free(keep);
    x->caps[v] = 0;
    /* zero-size tensors still get a valid pointer: kernels may take its address */
    t->data = wpk_malloc(need ? need : 1);
    if (!t->data) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory allocating %zu bytes", need);
    x->caps[v] = need ? need : 1;
    return WPK_OK;
}

wpk_status ir_exec_run(wpk_context *ctx, ir_exec *x, const ir_graph *g) {
    wpk_status st = WPK_OK;
    ir_tensor *in[64], *out[64];
    for (int k = 0; k < g->nnodes && st == WPK_OK; k++) {
        const ir_node *n = &g->nodes[k];
        const ir_op_info *info = ir_op_get(n->op);
        if (!info->shape)
            return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s': op '%s' is not supported",
                             n->name, n->op_type);
        if (n->nin > 64 || n->nout > 64)
            return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s' (%s): more than 64 inputs or "
                             "outputs", n->name, n->op_type);
        gather_args(n, x->vals, in, out);
        ir_tensor shapes[64];
        ir_tensor *shape_out[64];
        for (int i = 0; i < n->nout; i++) {
            memset(&shapes[i], 0, sizeof shapes[i]);
            shape_out[i] = out[i] ? &shapes[i] : NULL;
        }
        st = info->shape(ctx, n, in, shape_out);
        for (int i = 0; i < n->nout && st == WPK_OK; i++)
            if (out[i])
                st = ir_exec_reserve(ctx, x, n->out[i], shapes[i].dtype, shapes[i].ndim,
                                     shapes[i].dims);
        if (st == WPK_OK) st = info->ref(ctx, n, in, out);
    }
    return st;
}

wpk_status ir_exec_static(wpk_context *ctx, const ir_graph *g, ir_tensor *vals) {
    ir_tensor *in[64], *out[64];
    for (int k = 0; k < g->nnodes; k++) {
        const ir_node *n = &g->nodes[k];
        const ir_op_info *info = ir_op_get(n->op);
        if (!info->ref)
            return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s': op '%s' is not supported",
                             n->name, n->op_type);
        if (n->nin > 64 || n->nout > 64)
            return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s' (%s): more than 64 inputs or "
                             "outputs", n->name, n->op_type);
        gather_args(n, vals, in, out);
        /* a view the plan laid on its input's buffer: the bytes are already where they belong */
        if (info->ref == op_copy_ref && n->nout == 1 && out[0] && in[0] &&
            out[0]->data == in[0]->data)
            continue;
        wpk_status st = info->ref(ctx, n, in, out);
        if (st) return st;
    }
    return WPK_OK;
}
