/* onednn.c -- the oneDNN provider (lib.h), on oneDNN's v2 C API (dnnl.h): Conv /
 * wpk::FusedConv (NCHW) and wpk::ConvNCHWc (nChw4c / nChw8c / nChw16c) through the
 * convolution primitive, Gemm / wpk::FusedGemm / MatMul / wpk::FusedMatMul through the matmul
 * primitive, the epilogue as the primitive's own: bias as its bias, the residual Z as a binary
 * add post-op, the activation as eltwise post-ops (ops/fused.c's order: + bias, + Z, act).
 *
 * Configs: a convolution offers oneDNN's algorithms "auto" (oneDNN picks), "direct" and, for
 * 3x3 stride-1 dense convs of one group, "winograd" (the CPU engine implements it on AVX-512
 * machines for blocked layouts only; elsewhere create says so: WPK_ERR_UNSUPPORTED). A product
 * offers "matmul". A config whose only implementation is oneDNN's reference code ("ref:any") is
 * refused the same way: it is never a contender and would only cost tuning time.
 *
 * Memory: src/dst (and Z) use the node's own layouts, the weights the layout oneDNN chooses
 * (format_tag any), reordered once at create from the constant weight (ConvNCHWc's packed form
 * unpacked first); a constant bias is copied; the scratchpad is the kernel's (user mode). A run
 * sets the data handles that changed since the last one and executes. oneDNN itself still
 * allocates per execute (its argument map; more in its gemm-based NCHW convolutions): 7 to 23
 * small blocks a call, counted by test_lib_providers, which this provider cannot avoid.
 *
 * Exactness: every activation has post-ops computing the reference's function (to rounding);
 * they differ only on NaN inputs to Clip (oneDNN's clip returns its bound where the reference
 * keeps the NaN), and Clip with min > max is refused.
 *
 * Threads: oneDNN's OpenMP runtime reads omp_get_max_threads() when it creates a primitive (the
 * work split) and when it runs; a kernel with threads > 0 sets it around both and puts the
 * caller's value back. */
#include <dnnl.h>
#include <dnnl_debug.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "kernels/vendor/lib.h"
#include "kernels/vendor/lib_node.h"
#include "ops/op_util.h"

#define MAX_IN 4
/* The memory objects of one primitive: src, weights, bias, dst, Z, scratchpad. */
#define MAX_ARGS 6
/* Buffers a kernel owns at most: constant src, weights, bias and Z copies, scratchpad. */
#define MAX_OWNED 5
#define ALIGN 64

/* Where a memory object's buffer comes from at run time. */
enum { FROM_OUTPUT = -1, FROM_KERNEL = -2 };

typedef struct binding {
    dnnl_memory_t mem;
    int from;   /* a node input index, FROM_OUTPUT, or FROM_KERNEL (set once at create) */
    void *last; /* the handle it has now */
} binding;

struct lib_kernel {
    char name[64];   /* the node's, for messages */
    char impl[64];   /* oneDNN's implementation, e.g. "jit:avx512_core" */
    int threads;
    int64_t ynumel;
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    dnnl_primitive_t prim;
    int nargs;
    binding bind[MAX_ARGS];
    dnnl_exec_arg_t args[MAX_ARGS];
    void *owned[MAX_OWNED]; /* buffers the kernel allocated (wpk_malloc'd, unaligned) */
    int nowned;
    struct {
        const void *start;
        size_t bytes;
    } konst[MAX_OWNED];     /* which of them hold constants (aligned starts) */
    int nkonst;
};

/* ---- version ---- */

static char version_buf[128];
static pthread_once_t version_once = PTHREAD_ONCE_INIT;

static void version_init(void) {
    const dnnl_version_t *v = dnnl_version();
    const char *rt = v->cpu_runtime == DNNL_RUNTIME_OMP          ? "OpenMP"
                     : v->cpu_runtime == DNNL_RUNTIME_TBB        ? "TBB"
                     : v->cpu_runtime == DNNL_RUNTIME_SEQ        ? "sequential"
                     : v->cpu_runtime == DNNL_RUNTIME_THREADPOOL ? "threadpool"
                                                                 : "other";
    snprintf(version_buf, sizeof version_buf, "oneDNN v%d.%d.%d (cpu runtime: %s)", v->major,
             v->minor, v->patch, rt);
}

static const char *version(const kernel_provider *self) {
    (void)self;
    pthread_once(&version_once, version_init);
    return version_buf;
}

/* ---- what it takes ---- */

static bool is_winograd_shape(const lib_conv *c) {
    return c->kh == 3 && c->kw == 3 && c->stride[0] == 1 && c->stride[1] == 1 &&
           c->dil[0] == 1 && c->dil[1] == 1 && c->group == 1;
}

/* The activation's post-ops, checked: Clip with lo > hi is refused (the reference gives hi
 * everywhere; oneDNN's clip gives lo below it). */
static wpk_status check_act(wpk_context *ctx, const ir_node *n, const act_params *a) {
    if (a->kind == ACT_CLIP && a->lo > a->hi)
        return op_unsupported(ctx, n, "Clip with min %g > max %g has no oneDNN post-op that "
                              "computes it", (double)a->lo, (double)a->hi);
    return WPK_OK;
}

static wpk_status check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out, lib_conv *c, lib_gemm *g) {
    if (n->nin > MAX_IN) return op_unsupported(ctx, n, "has %d inputs", n->nin);
    wpk_status st;
    if (lib_is_conv(n)) {
        if ((st = lib_conv_read(ctx, n, in, out, c))) return st;
        return check_act(ctx, n, &c->act);
    }
    if (!lib_is_gemm(n))
        return op_unsupported(ctx, n, "the onednn provider takes convolutions and matrix "
                              "products, not %s", n->op_type);
    if ((st = lib_gemm_read(ctx, n, in, out, g))) return st;
    if (g->alpha != 1.0f && !in[1]->data)
        return op_unsupported(ctx, n, "alpha %g with a B that is not constant (oneDNN's matmul "
                              "has no scale before its bias; a constant B is scaled instead)",
                              (double)g->alpha);
    if (g->has_c && g->cm > 1 && g->cn == 1 && g->n > 1 && !in[LIB_IN_BIAS]->data)
        return op_unsupported(ctx, n, "a column C [%lld, 1] that is not constant (oneDNN "
                              "broadcasts it in its reference implementation only)",
                              (long long)g->cm);
    if (g->has_c && g->beta != 1.0f && !in[LIB_IN_BIAS]->data)
        return op_unsupported(ctx, n, "beta %g with a C that is not constant (a constant C is "
                              "scaled instead)", (double)g->beta);
    return check_act(ctx, n, &g->act);
}

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out) {
    (void)self;
    lib_conv c;
    lib_gemm g;
    return check(NULL, n, in, out, &c, &g) == WPK_OK;
}

static const char *const conv_algos[] = {"auto", "direct", "winograd"};

static int configs(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                   ir_tensor *const *out,
                   char (*names)[LIB_CONFIG_MAX]) {
    (void)self;
    lib_conv c;
    lib_gemm g;
    if (check(NULL, n, in, out, &c, &g)) return 0;
    if (!lib_is_conv(n)) {
        snprintf(names[0], LIB_CONFIG_MAX, "matmul");
        return 1;
    }
    int count = is_winograd_shape(&c) ? 3 : 2;
    for (int i = 0; i < count; i++) snprintf(names[i], LIB_CONFIG_MAX, "%s", conv_algos[i]);
    return count;
}

/* ---- helpers ---- */

/* A oneDNN failure as a status: no implementation (or arguments it does not take) is a config
 * that is not available; out of memory is that; anything else is unexpected. */
static wpk_status dnnl_fail(wpk_context *ctx, const char *node, dnnl_status_t s,
                            const char *what) {
    wpk_status st = s == dnnl_out_of_memory                                  ? WPK_ERR_NOMEM
                    : s == dnnl_unimplemented || s == dnnl_invalid_arguments ? WPK_ERR_UNSUPPORTED
                                                                              : WPK_ERR_INTERNAL;
    return wpk_error(ctx, st, "node '%s' (onednn): %s: %s", node, what, dnnl_status2str(s));
}

#define DNNL_TRY(call, what)                                                                 \
    do {                                                                                     \
        dnnl_status_t s_ = (call);                                                           \
        if (s_ != dnnl_success) {                                                            \
            st = dnnl_fail(ctx, k->name, s_, what);                                          \
            goto done;                                                                       \
        }                                                                                    \
    } while (0)

/* size bytes, ALIGN-aligned, owned by k (freed by destroy); NULL when out of memory. */
static void *kernel_alloc(lib_kernel *k, size_t size) {
    if (k->nowned == MAX_OWNED) return NULL;
    void *raw = wpk_malloc(size + ALIGN);
    if (!raw) return NULL;
    k->owned[k->nowned++] = raw;
    return (void *)(((uintptr_t)raw + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
}

/* kernel_alloc for a copy of a constant, listed for the constants hook. */
static void *constant_alloc(lib_kernel *k, size_t size) {
    void *p = kernel_alloc(k, size);
    if (p) {
        k->konst[k->nkonst].start = p;
        k->konst[k->nkonst++].bytes = size;
    }
    return p;
}

/* Add argument `arg` bound to a new memory object of md; its buffer `from` a node input, the
 * output, or (FROM_KERNEL) `data`. */
static dnnl_status_t bind_arg(lib_kernel *k, int arg, const dnnl_memory_desc_t *md, int from,
                              void *data) {
    binding *b = &k->bind[k->nargs];
    dnnl_status_t s = dnnl_memory_create(&b->mem, md, k->eng,
                                         from == FROM_KERNEL ? data : DNNL_MEMORY_NONE);
    if (s != dnnl_success) return s;
    b->from = from;
    b->last = from == FROM_KERNEL ? data : NULL;
    k->args[k->nargs] = (dnnl_exec_arg_t){arg, b->mem};
    k->nargs++;
    return dnnl_success;
}

/* Add argument `arg` bound to node input i (md describes it as it is stored): read at run, or,
 * when it is constant (its data known now), a copy the kernel keeps. */
static wpk_status bind_input(wpk_context *ctx, lib_kernel *k, int arg,
                             const dnnl_memory_desc_t *md, ir_tensor *const *in, int i) {
    wpk_status st = WPK_OK;
    void *copy = NULL;
    if (in[i]->data) {
        if (!(copy = constant_alloc(k, ir_nbytes(in[i]))))
            return wpk_error(ctx, WPK_ERR_NOMEM, "node '%s' (onednn): out of memory", k->name);
        memcpy(copy, in[i]->data, ir_nbytes(in[i]));
    }
    DNNL_TRY(bind_arg(k, arg, md, copy ? FROM_KERNEL : i, copy), "memory");
done:
    return st;
}

/* A kernel-owned copy of the plain f32 data `src` (described by user_md) in the layout `want`
 * (a reorder run once), bound as argument arg. scale multiplies every value first. */
static wpk_status bind_packed(wpk_context *ctx, lib_kernel *k, int arg,
                              const dnnl_memory_desc_t *user_md, const float *src,
                              const dnnl_memory_desc_t *want, float scale) {
    wpk_status st = WPK_OK;
    dnnl_memory_t user = NULL, packed = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t r = NULL;
    float *scaled = NULL;
    size_t user_size = dnnl_memory_desc_get_size(user_md);
    void *dst = constant_alloc(k, dnnl_memory_desc_get_size(want));
    if (!dst) return wpk_error(ctx, WPK_ERR_NOMEM, "node '%s' (onednn): out of memory", k->name);
    if (scale != 1.0f) {
        if (!(scaled = wpk_malloc(user_size)))
            return wpk_error(ctx, WPK_ERR_NOMEM, "node '%s' (onednn): out of memory", k->name);
        for (size_t i = 0; i < user_size / sizeof(float); i++) scaled[i] = scale * src[i];
        src = scaled;
    }
    DNNL_TRY(dnnl_memory_create(&user, user_md, k->eng, (void *)src), "weights memory");
    DNNL_TRY(dnnl_memory_create(&packed, want, k->eng, dst), "packed weights memory");
    DNNL_TRY(dnnl_reorder_primitive_desc_create(&rpd, user_md, k->eng, want, k->eng, NULL),
             "weights reorder");
    DNNL_TRY(dnnl_primitive_create(&r, rpd), "weights reorder");
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, packed}};
    DNNL_TRY(dnnl_primitive_execute(r, k->stream, 2, a), "weights reorder");
    DNNL_TRY(dnnl_stream_wait(k->stream), "weights reorder");
    DNNL_TRY(bind_arg(k, arg, want, FROM_KERNEL, dst), "weights memory");
done:
    if (r) dnnl_primitive_destroy(r);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (packed) dnnl_memory_destroy(packed);
    if (user) dnnl_memory_destroy(user);
    wpk_free(scaled);
    return st;
}

/* The activation as eltwise post-ops (HardSigmoid: a linear one, then a clip to [0, 1]). */
static dnnl_status_t append_act(dnnl_post_ops_t po, const act_params *a) {
    switch (a->kind) {
    case ACT_NONE: return dnnl_success;
    case ACT_RELU: return dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
    case ACT_LEAKY_RELU:
        return dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, a->alpha, 0.0f);
    case ACT_CLIP: return dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, a->lo, a->hi);
    case ACT_HARD_SIGMOID: {
        dnnl_status_t s =
            dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, a->alpha, a->beta);
        return s ? s : dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, 0.0f, 1.0f);
    }
    case ACT_HARD_SWISH:
        return dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_hardswish, 0.0f, 0.0f);
    case ACT_SIGMOID:
        return dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_logistic, 0.0f, 0.0f);
    case ACT_SILU: return dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_swish, 1.0f, 0.0f);
    case ACT_GELU: return dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_gelu_erf, 0.0f, 0.0f);
    case ACT_TANH: return dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_tanh, 0.0f, 0.0f);
    case ACT_COUNT: break;
    }
    return dnnl_invalid_arguments;
}

/* The primitive's attributes: a user scratchpad, binary add post-ops of adds[0..nadds) (post-ops
 * 0, 1, ...: Gemm's C when it is not a row, then the residual Z), then the activation. *attr is
 * the caller's to destroy. */
static dnnl_status_t make_attr(dnnl_primitive_attr_t *attr, const dnnl_memory_desc_t *adds,
                               int nadds, const act_params *act) {
    dnnl_post_ops_t po = NULL;
    dnnl_status_t s = dnnl_primitive_attr_create(attr);
    if (!s) s = dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
    if (!s) s = dnnl_post_ops_create(&po);
    for (int i = 0; i < nadds && !s; i++) s = dnnl_post_ops_append_binary(po, dnnl_binary_add, &adds[i]);
    if (!s) s = append_act(po, act);
    if (!s) s = dnnl_primitive_attr_set_post_ops(*attr, po);
    if (po) dnnl_post_ops_destroy(po);
    return s;
}

/* The primitive of pd for k, with its scratchpad; refuses a reference implementation. */
static wpk_status finish(wpk_context *ctx, lib_kernel *k, const_dnnl_primitive_desc_t pd,
                         const char *config) {
    wpk_status st = WPK_OK;
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
        snprintf(k->impl, sizeof k->impl, "%s", impl);
    if (!strncmp(k->impl, "ref", 3))
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s' (onednn): config '%s' has only "
                         "oneDNN's reference implementation (%s) here", k->name, config, k->impl);
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t size = sp ? dnnl_memory_desc_get_size(sp) : 0;
    if (size) {
        void *buf = kernel_alloc(k, size);
        if (!buf) return wpk_error(ctx, WPK_ERR_NOMEM, "node '%s' (onednn): out of memory", k->name);
        DNNL_TRY(bind_arg(k, DNNL_ARG_SCRATCHPAD, sp, FROM_KERNEL, buf), "scratchpad");
    }
    DNNL_TRY(dnnl_primitive_create(&k->prim, pd), "primitive");
done:
    return st;
}

/* ---- convolution ---- */

static dnnl_format_tag_t act_tag(int64_t block) {
    switch (block) {
    case 4: return dnnl_nChw4c;
    case 8: return dnnl_nChw8c;
    case 16: return dnnl_nChw16c;
    default: return dnnl_nchw;
    }
}

static wpk_status create_conv(wpk_context *ctx, lib_kernel *k, const ir_node *n,
                              ir_tensor *const *in, const lib_conv *c, int config) {
    static const dnnl_alg_kind_t algs[] = {dnnl_convolution_auto, dnnl_convolution_direct,
                                           dnnl_convolution_winograd};
    wpk_status st = WPK_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    float *wplain = NULL;
    int count = is_winograd_shape(c) ? 3 : 2;
    if (config < 0 || config >= count)
        return op_unsupported(ctx, n, "onednn has %d configs for this conv, not %d", count,
                              config);
    dnnl_memory_desc_t src, dst, wany, wuser, bias;
    dnnl_dims_t sd = {c->n, c->c, c->h, c->w}, dd = {c->n, c->k, c->oh, c->ow};
    dnnl_dims_t strides = {c->stride[0], c->stride[1]}, dil = {c->dil[0] - 1, c->dil[1] - 1};
    dnnl_dims_t pl = {c->pad0[0], c->pad0[1]}, pr = {c->pad1[0], c->pad1[1]};
    dnnl_dims_t wd = {c->k, c->cg, c->kh, c->kw}, gwd = {c->group, c->k / c->group, c->cg, c->kh,
                                                          c->kw};
    dnnl_dims_t bd = {c->k};
    const bool grouped = c->group > 1;
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_f32, act_tag(c->xblock)), "src");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_f32, act_tag(c->yblock)), "dst");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&wany, grouped ? 5 : 4, grouped ? gwd : wd, dnnl_f32,
                                          dnnl_format_tag_any), "weights");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&wuser, grouped ? 5 : 4, grouped ? gwd : wd, dnnl_f32,
                                          grouped ? dnnl_goihw : dnnl_oihw), "weights");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&bias, 1, bd, dnnl_f32, dnnl_a), "bias");
    /* weights not known until run: in the user's layout, read at run */
    const bool wconst = in[1]->data != NULL;
    dnnl_convolution_desc_t cd;
    DNNL_TRY(dnnl_dilated_convolution_forward_desc_init(
                 &cd, dnnl_forward_inference, algs[config], &src, wconst ? &wany : &wuser,
                 c->has_bias ? &bias : NULL, &dst, strides, dil, pl, pr),
             "convolution descriptor");
    DNNL_TRY(make_attr(&attr, &dst, c->has_z ? 1 : 0, &c->act), "post-ops");
    dnnl_status_t s = dnnl_primitive_desc_create(&pd, &cd, attr, k->eng, NULL);
    if (s == dnnl_unimplemented) {
        st = wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s' (onednn): oneDNN has no '%s' "
                       "convolution for this node on this CPU (%s)", n->name,
                       conv_algos[config], dnnl_status2str(s));
        goto done;
    }
    DNNL_TRY(s, "convolution primitive descriptor");
    if ((st = finish(ctx, k, pd, conv_algos[config]))) goto done;
    if ((st = bind_input(ctx, k, DNNL_ARG_SRC, &src, in, 0))) goto done;
    if (wconst) {
        const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        size_t size = sizeof(float) * (size_t)(c->k * c->cg * c->kh * c->kw);
        if (!(wplain = wpk_malloc(size))) {
            st = wpk_error(ctx, WPK_ERR_NOMEM, "node '%s' (onednn): out of memory", n->name);
            goto done;
        }
        lib_conv_weights(c, in[1], wplain);
        if ((st = bind_packed(ctx, k, DNNL_ARG_WEIGHTS, &wuser, wplain, want, 1.0f))) goto done;
    } else {
        if ((st = bind_input(ctx, k, DNNL_ARG_WEIGHTS, &wuser, in, 1))) goto done;
    }
    if (c->has_bias) {
        const ir_tensor *b = in[LIB_IN_BIAS];
        if (b->data) {
            if ((st = bind_packed(ctx, k, DNNL_ARG_BIAS, &bias, b->data, &bias, 1.0f))) goto done;
        } else {
            if ((st = bind_input(ctx, k, DNNL_ARG_BIAS, &bias, in, LIB_IN_BIAS))) goto done;
        }
    }
    DNNL_TRY(bind_arg(k, DNNL_ARG_DST, &dst, FROM_OUTPUT, NULL), "dst memory");
    if (c->has_z)
        st = bind_input(ctx, k, DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, &dst, in,
                        LIB_IN_Z);
done:
    wpk_free(wplain);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st;
}

/* ---- matmul ---- */

/* md of a row-major tensor of `nd` dims, or (trans) one whose last two dims are stored
 * transposed: dims ... x r x c held as ... x c x r. */
static dnnl_status_t strided_md(dnnl_memory_desc_t *md, int nd, const int64_t *dims, bool trans) {
    dnnl_dims_t d = {0}, s = {0};
    int64_t stride = 1;
    for (int i = 0; i < nd; i++) d[i] = dims[i];
    if (trans) {
        s[nd - 2] = 1;
        s[nd - 1] = d[nd - 2];
        stride = d[nd - 2] * d[nd - 1];
        for (int i = nd - 3; i >= 0; i--) s[i] = stride, stride *= d[i];
    } else {
        for (int i = nd - 1; i >= 0; i--) s[i] = stride, stride *= d[i];
    }
    return dnnl_memory_desc_init_by_strides(md, nd, d, dnnl_f32, s);
}

static wpk_status create_matmul(wpk_context *ctx, lib_kernel *k, const ir_node *n,
                                ir_tensor *const *in, const lib_gemm *g, int config) {
    wpk_status st = WPK_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    float *cfull = NULL;
    if (config != 0) return op_unsupported(ctx, n, "onednn has one config (0) here, not %d", config);
    const int nd = g->nb + 2;
    if (nd > DNNL_MAX_NDIMS) return op_unsupported(ctx, n, "%d dims", nd);
    int64_t ad[DNNL_MAX_NDIMS], bd[DNNL_MAX_NDIMS], yd[DNNL_MAX_NDIMS], cd[DNNL_MAX_NDIMS];
    for (int i = 0; i < g->nb; i++) {
        ad[i] = g->abatch[i], bd[i] = g->bbatch[i], yd[i] = g->batch[i], cd[i] = 1;
    }
    ad[nd - 2] = g->m, ad[nd - 1] = g->k;
    bd[nd - 2] = g->k, bd[nd - 1] = g->n;
    yd[nd - 2] = g->m, yd[nd - 1] = g->n;
    /* FusedMatMul's bias and a Gemm C that is one row: the primitive's bias (1, ..., 1, n);
     * any other C (oneDNN's matmul implementations take no other bias but its reference one):
     * a binary add post-op, of C's (m, n) shape (a column C, which only the reference
     * implementation broadcasts, is constant (check) and expanded to it) */
    const bool c_row = g->has_c && g->cm == 1;
    const bool has_bias = g->has_bias || c_row, c_add = g->has_c && !c_row;
    const float *cdata = g->has_c || g->has_bias ? in[LIB_IN_BIAS]->data : NULL;
    cd[nd - 2] = g->has_c ? g->cm : 1, cd[nd - 1] = g->has_c ? g->cn : g->n;
    if (c_add && g->cn != g->n) {
        if (!(cfull = wpk_malloc(sizeof(float) * (size_t)(g->m * g->n))))
            return wpk_error(ctx, WPK_ERR_NOMEM, "node '%s' (onednn): out of memory", n->name);
        for (int64_t i = 0; i < g->m; i++)
            for (int64_t j = 0; j < g->n; j++) cfull[i * g->n + j] = cdata[i];
        cdata = cfull;
        cd[nd - 1] = g->n;
    }
    dnnl_memory_desc_t a, bu, bany, y, bias, adds[2];
    DNNL_TRY(strided_md(&a, nd, ad, g->ta), "A");
    DNNL_TRY(strided_md(&bu, nd, bd, g->tb), "B");
    DNNL_TRY(strided_md(&y, nd, yd, false), "Y");
    DNNL_TRY(strided_md(&bias, nd, cd, false), "bias");
    dnnl_dims_t bdims;
    for (int i = 0; i < nd; i++) bdims[i] = bd[i];
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&bany, nd, bdims, dnnl_f32, dnnl_format_tag_any), "B");
    int nadds = 0;
    if (c_add) adds[nadds++] = bias;
    if (g->has_z) adds[nadds++] = y;
    const bool bconst = in[1]->data != NULL;
    dnnl_matmul_desc_t md;
    DNNL_TRY(dnnl_matmul_desc_init(&md, &a, bconst ? &bany : &bu, has_bias ? &bias : NULL, &y),
             "matmul descriptor");
    DNNL_TRY(make_attr(&attr, adds, nadds, &g->act), "post-ops");
    dnnl_status_t s = dnnl_primitive_desc_create(&pd, &md, attr, k->eng, NULL);
    if (s == dnnl_unimplemented) {
        st = wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s' (onednn): oneDNN has no matmul for "
                       "this node (%s)", n->name, dnnl_status2str(s));
        goto done;
    }
    DNNL_TRY(s, "matmul primitive descriptor");
    if ((st = finish(ctx, k, pd, "matmul"))) goto done;
    if ((st = bind_input(ctx, k, DNNL_ARG_SRC, &a, in, 0))) goto done;
    if (bconst) {
        const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        if ((st = bind_packed(ctx, k, DNNL_ARG_WEIGHTS, &bu, in[1]->data, want, g->alpha)))
            goto done;
    } else {
        if ((st = bind_input(ctx, k, DNNL_ARG_WEIGHTS, &bu, in, 1))) goto done;
    }
    if (g->has_c || g->has_bias) {
        int arg = c_add ? DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1 : DNNL_ARG_BIAS;
        if (cdata) {
            if ((st = bind_packed(ctx, k, arg, &bias, cdata, &bias, g->has_c ? g->beta : 1.0f)))
                goto done;
        } else {
            if ((st = bind_input(ctx, k, arg, &bias, in, LIB_IN_BIAS))) goto done;
        }
    }
    DNNL_TRY(bind_arg(k, DNNL_ARG_DST, &y, FROM_OUTPUT, NULL), "Y memory");
    if (g->has_z)
        st = bind_input(ctx, k, DNNL_ARG_ATTR_MULTIPLE_POST_OP(c_add ? 1 : 0) | DNNL_ARG_SRC_1,
                        &y, in, LIB_IN_Z);
done:
    wpk_free(cfull);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st;
}

/* ---- create / run / destroy ---- */

/* Run on k's thread count; returns what end_threads puts back (-1: nothing). */
static int begin_threads(const lib_kernel *k) {
    if (k->threads <= 0) return -1;
    int saved = omp_get_max_threads();
    omp_set_num_threads(k->threads);
    return saved;
}

static void end_threads(int saved) {
    if (saved > 0) omp_set_num_threads(saved);
}

static void destroy(const kernel_provider *self, lib_kernel *k) {
    (void)self;
    if (!k) return;
    if (k->prim) dnnl_primitive_destroy(k->prim);
    for (int i = 0; i < k->nargs; i++) dnnl_memory_destroy(k->bind[i].mem);
    if (k->stream) dnnl_stream_destroy(k->stream);
    if (k->eng) dnnl_engine_destroy(k->eng);
    for (int i = 0; i < k->nowned; i++) wpk_free(k->owned[i]);
    wpk_free(k);
}

static int constants(const kernel_provider *self, const lib_kernel *k, const void **start,
                     size_t *bytes, int max) {
    (void)self;
    int n = 0;
    for (int i = 0; i < k->nkonst && n < max; i++, n++) {
        start[n] = k->konst[i].start;
        bytes[n] = k->konst[i].bytes;
    }
    return n;
}

static wpk_status create(const kernel_provider *self, wpk_context *ctx, const ir_node *n,
                         ir_tensor *const *in,
                         ir_tensor *const *out, int config, const kernel_device *dev,
                         lib_kernel **out_k) {
    *out_k = NULL;
    if (dev->cuda) return lib_host_only(ctx, self, n);
    lib_conv c;
    lib_gemm g;
    wpk_status st = check(ctx, n, in, out, &c, &g);
    if (st) return st;
    lib_kernel *k = wpk_calloc(1, sizeof *k);
    if (!k) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory creating a onednn kernel");
    snprintf(k->name, sizeof k->name, "%s", n->name);
    k->threads = dev->threads;
    k->ynumel = ir_numel(out[0]);
    int saved = begin_threads(k);
    DNNL_TRY(dnnl_engine_create(&k->eng, dnnl_cpu, 0), "engine");
    DNNL_TRY(dnnl_stream_create(&k->stream, k->eng, dnnl_stream_default_flags), "stream");
    st = lib_is_conv(n) ? create_conv(ctx, k, n, in, &c, config)
                        : create_matmul(ctx, k, n, in, &g, config);
done:
    end_threads(saved);
    if (st) {
        destroy(self, k);
        return st;
    }
    *out_k = k;
    return WPK_OK;
}

static wpk_status run(const kernel_provider *self, wpk_context *ctx, lib_kernel *k,
                      ir_tensor *const *in,
                      ir_tensor *const *out) {
    (void)self;
    wpk_status st = WPK_OK;
    if (!out || !out[0] || !out[0]->data || ir_numel(out[0]) != k->ynumel)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "node '%s' (onednn): the output is not the "
                         "one the kernel was created for", k->name);
    int saved = begin_threads(k);
    for (int i = 0; i < k->nargs; i++) {
        binding *b = &k->bind[i];
        if (b->from == FROM_KERNEL) continue;
        void *data = b->from == FROM_OUTPUT ? out[0]->data : in[b->from] ? in[b->from]->data
                                                                         : NULL;
        if (!data) {
            st = wpk_error(ctx, WPK_ERR_INVALID_ARG, "node '%s' (onednn): input %d has no data",
                           k->name, b->from);
            goto done;
        }
        if (data != b->last) {
            DNNL_TRY(dnnl_memory_set_data_handle_v2(b->mem, data, k->stream), "data handle");
            b->last = data;
        }
    }
    DNNL_TRY(dnnl_primitive_execute(k->prim, k->stream, k->nargs, k->args), "execute");
    DNNL_TRY(dnnl_stream_wait(k->stream), "execute");
done:
    end_threads(saved);
    return st;
}

const kernel_provider lib_onednn = {
    .name = "onednn",
    .family = "onednn",
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
