/* conv_bf16.c -- the "isa_bf16" provider: a blocked convolution described in the tensor IR,
 * lowered, mapped by the ISA mapper onto avx512_bf16_dot, printed by codegen/c/dot_conv.c and
 * compiled by the JIT; weights packed into bf16 k-pairs (the layout change the mapping asks
 * for) once per kernel. */
#include "kernels/conv_bf16.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "base/target.h"
#include "codegen/c/cg_c.h"
#include "codegen/c/dot_conv.h"
#include "ir/flops.h"
#include "isa/mapper.h"
#include "kernels/step_runners.h"
#include "kernels/vendor/lib.h"
#include "kernels/vendor/lib_node.h"
#include "loop/lower.h"
#include "ops/op_util.h"
#include "runtime/runner.h"

#define LANES 16
#define INTRIN "avx512_bf16_dot"

/* register tiles: pixels x output blocks, the accumulators plus a weight vector per block and
 * a broadcast within AVX-512's 32 registers */
static const int tiles[][2] = {{12, 2}, {14, 2}, {8, 3}, {6, 4}, {7, 3}, {24, 1}, {4, 4}, {28, 1}};
#define NTILES ((int)(sizeof tiles / sizeof tiles[0]))

struct lib_kernel {
    cg_dot_conv geom;
    cg_module *mod;
    cg_kernel_fn fn;
    int32_t *weights;       /* bf16 pairs: [kb][kh][kw][cb*8][16][2] */
    size_t weight_bytes;
    float *bias;            /* [kb * 16], zero past the real channels */
    uint16_t *xp;           /* the padded bf16 input copy */
    int threads;
};

bool conv_bf16_cpu_ok(void) { return isa_cpu_has(isa_intrin_find(INTRIN)); }

static const char *version(const kernel_provider *self) {
    (void)self;
    return "wpk isa_bf16 (AVX-512 BF16 vdpbf16ps, generated C)";
}

/* What this provider takes, with the reason when it does not (ctx may be NULL). */
static wpk_status check(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out, lib_conv *c) {
    if (n->op != IR_OP_CONV_NCHWC)
        return op_unsupported(ctx, n, "isa_bf16 takes blocked convolutions (ConvNCHWc)");
    wpk_status st = lib_conv_read(ctx, n, in, out, c);
    if (st) return st;
    if (c->xblock != LANES || c->yblock != LANES)
        return op_unsupported(ctx, n, "isa_bf16 takes %d-lane blocked input and output (here "
                              "%lld and %lld)", LANES, (long long)c->xblock, (long long)c->yblock);
    if (c->group != 1)
        return op_unsupported(ctx, n, "isa_bf16 takes group 1 (here %lld)", (long long)c->group);
    const act_params *a = &c->act;
    bool zero_kept = a->kind == ACT_NONE || a->kind == ACT_RELU ||
                     (a->kind == ACT_CLIP && a->lo <= 0 && a->hi >= 0);
    if (!zero_kept || (a->kind != ACT_NONE && a->kind != ACT_RELU && a->kind != ACT_CLIP))
        return op_unsupported(ctx, n, "isa_bf16 has no epilogue for activation %s",
                              act_name(a->kind));
    return WPK_OK;
}

int64_t conv_bf16_macs(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    lib_conv c;
    if (check(NULL, n, in, out, &c)) return 0;
    return c.n * c.k * c.oh * c.ow * c.cg * c.kh * c.kw;
}

static bool supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out) {
    (void)self;
    lib_conv c;
    return conv_bf16_cpu_ok() && check(NULL, n, in, out, &c) == WPK_OK;
}

static void geometry(const lib_conv *c, cg_dot_conv *g) {
    memset(g, 0, sizeof *g);
    g->name = "wpk_dot_conv";
    g->n = c->n, g->cb = c->c / LANES, g->h = c->h, g->w = c->w;
    g->kb = (c->k + LANES - 1) / LANES, g->oh = c->oh, g->ow = c->ow;
    g->kh = c->kh, g->kw = c->kw;
    for (int i = 0; i < 2; i++) {
        g->stride[i] = c->stride[i], g->dil[i] = c->dil[i], g->pad0[i] = c->pad0[i];
    }
    g->bias = c->has_bias;
    g->z = c->has_z;
    g->act = c->act.kind == ACT_RELU ? CG_DOT_ACT_RELU
             : c->act.kind == ACT_CLIP ? CG_DOT_ACT_CLIP : CG_DOT_ACT_NONE;
    g->lo = c->act.lo, g->hi = c->act.hi;
}

/* The conv's accumulation as the mapper sees it: on the padded input,
 * Y[n, kb, oh, ow, oc] = sum(cb, r, s, ic: X[n, cb, oh*s0 + r*d0, ow*s1 + s*d1, ic] *
 * W[kb, cb, r, s, ic, oc]). Lowering drops loops of extent 1, so loops are found by name. */
typedef struct mapped {
    te_ctx te;
    isa_nest nest;
    int ow, oc, ic;        /* the nest's loops over output columns, channel lanes, input lanes */
    isa_mapping maps[8];
    int nmaps;             /* those the emitter takes */
} mapped;

static int loop_named(const isa_nest *nest, const char *name) {
    for (int i = 0; i < nest->nloops; i++)
        if (!strcmp(nest->loops[i].var->name, name)) return i;
    return -1;
}

static wpk_status map_conv(wpk_context *ctx, const cg_dot_conv *g, mapped *mp) {
    te_ctx *C = &mp->te;
    te_ctx_init(C, ctx);
    int64_t hp = cg_dot_conv_hp(g), wp = cg_dot_conv_wp(g);
    te_tensor *X = te_placeholder(C, "X", TE_F32, 5, (int64_t[]){g->n, g->cb, hp, wp, LANES});
    te_tensor *W = te_placeholder(C, "W", TE_F32, 6,
                                  (int64_t[]){g->kb, g->cb, g->kh, g->kw, LANES, LANES});
    te_iter **ax = te_compute_axes(C, 5, (int64_t[]){g->n, g->kb, g->oh, g->ow, LANES},
                                   (const char *[]){"n", "ob", "oh", "ow", "oc"});
    te_iter *cb = te_reduce_axis(C, "cb", 0, g->cb), *r = te_reduce_axis(C, "r", 0, g->kh);
    te_iter *s = te_reduce_axis(C, "s", 0, g->kw), *ic = te_reduce_axis(C, "ic", 0, LANES);
    if (!X || !W || !ax || !cb || !r || !s || !ic) return WPK_ERR_NOMEM;
#define V(it) te_var(C, it)
    const te_expr *ih = te_add(C, te_mul(C, V(ax[2]), te_int(C, g->stride[0])),
                               te_mul(C, V(r), te_int(C, g->dil[0])));
    const te_expr *iw = te_add(C, te_mul(C, V(ax[3]), te_int(C, g->stride[1])),
                               te_mul(C, V(s), te_int(C, g->dil[1])));
    const te_expr *xv = te_load(C, X, 5, (const te_expr *[]){V(ax[0]), V(cb), ih, iw, V(ic)});
    const te_expr *wv = te_load(C, W, 6, (const te_expr *[]){V(ax[1]), V(cb), V(r), V(s), V(ic),
                                                            V(ax[4])});
#undef V
    te_tensor *Y = te_compute(C, "Y", 5, (int64_t[]){g->n, g->kb, g->oh, g->ow, LANES}, ax,
                              te_reduce(C, TE_REDUCE_SUM, te_mul(C, xv, wv), 4,
                                        (te_iter *[]){cb, r, s, ic}));
    te_schedule *sch = Y ? te_schedule_create(C, &Y, 1) : NULL;
    loop_func *f = NULL;
    if (!sch) return WPK_ERR_NOMEM;
    wpk_status st = loop_lower(C, sch, "conv", (te_tensor *[]){X, W, Y}, 3, &f);
    if (st) return st;
    int nn = 0;
    isa_find_nests(f->body, &mp->nest, 1, &nn);
    if (nn != 1)
        return wpk_error(ctx, WPK_ERR_INTERNAL, "isa_bf16: the mapper found %d accumulations in "
                         "the conv's loop nest (expected 1)", nn);
    mp->ow = loop_named(&mp->nest, "ow");
    mp->oc = loop_named(&mp->nest, "oc");
    mp->ic = loop_named(&mp->nest, "ic");
    isa_mapping all[64];
    int na = isa_map(C, &mp->nest, isa_intrin_find(INTRIN), all, 64);
    mp->nmaps = 0;
    for (int i = 0; i < na && i < 64 && mp->nmaps < 8; i++) {
        const isa_mapping *m = &all[i];
        if (!m->swapped && m->n_loop == mp->oc && m->k_loop == mp->ic && m->m_loop == mp->ow &&
            mp->ow >= 0)
            mp->maps[mp->nmaps++] = *m;
    }
    if (!mp->nmaps)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "isa_bf16: no mapping of the conv onto %s "
                         "puts output channels on the lanes and input-channel pairs on k", INTRIN);
    return WPK_OK;
}

/* A config: a register tile and a loop order. */
typedef struct bf16_config {
    int tile;              /* index into tiles */
    bool rows_outer;
} bf16_config;

/* Bytes of g's bf16 weights. */
static int64_t weight_bytes(const cg_dot_conv *g) {
    return g->kb * LANES * g->cb * LANES * g->kh * g->kw * 2;
}

/* The configs that fit g, best guess first: tiles that divide a row, and rows
 * outside blocks while the weights fit the L2 cache (then the input streams through once). */
static int config_list(const cg_dot_conv *g, bf16_config *out) {
    int64_t l2 = target_cache_bytes(2);
    bool rows_first = weight_bytes(g) <= (l2 > 0 ? l2 : 1 << 20) / 2;
    int n = 0;
    for (int order = 0; order < 2; order++)
        for (int pass = 0; pass < 3; pass++)
            for (int i = 0; i < NTILES && n < LIB_MAX_CONFIGS; i++) {
                int tw = tiles[i][0], tk = tiles[i][1];
                if (g->kb % tk) continue;
                /* whole rows without a tail first, then wide rows, then the rest */
                int rank = g->ow % tw == 0 ? 0 : g->ow > 2 * tw ? 1 : 2;
                if (rank != pass) continue;
                /* the first order takes every tile, the other the best few */
                if (order == 1 && n >= LIB_MAX_CONFIGS / 2 + 4) continue;
                out[n++] = (bf16_config){i, order == 0 ? rows_first : !rows_first};
            }
    return n;
}

static int configs(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                   ir_tensor *const *out, char (*names)[LIB_CONFIG_MAX]) {
    (void)self;
    lib_conv c;
    if (check(NULL, n, in, out, &c)) return 0;
    cg_dot_conv g;
    geometry(&c, &g);
    bf16_config list[LIB_MAX_CONFIGS];
    int nc = config_list(&g, list);
    for (int i = 0; i < nc; i++)
        snprintf(names[i], LIB_CONFIG_MAX, "m=ow n=oc k=ic tile=%dx%d %s outer",
                 tiles[list[i].tile][0], tiles[list[i].tile][1],
                 list[i].rows_outer ? "rows" : "blocks");
    return nc;
}

/* f32 to bf16, rounding to nearest even; NaN stays NaN */
static uint16_t to_bf16(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static wpk_status pack(wpk_context *ctx, lib_kernel *k, const lib_conv *c, const ir_node *n,
                       ir_tensor *const *in) {
    const cg_dot_conv *g = &k->geom;
    const int64_t cin = g->cb * LANES, taps = g->kh * g->kw;
    float *w = wpk_malloc(sizeof(float) * (size_t)(c->k * c->cg * taps));
    k->weight_bytes = sizeof(int32_t) * (size_t)(g->kb * taps * (cin / 2) * LANES);
    k->weights = wpk_calloc(1, k->weight_bytes);
    k->bias = wpk_calloc((size_t)(g->kb * LANES), sizeof(float));
    k->xp = wpk_calloc((size_t)cg_dot_conv_xp_elems(g), sizeof(uint16_t));
    if (!w || !k->weights || !k->bias || !k->xp) {
        wpk_free(w);
        return wpk_error(ctx, WPK_ERR_NOMEM, "node '%s': out of memory packing bf16 weights",
                         n->name);
    }
    lib_conv_weights(c, in[1], w);
    /* K_GROUPS: weight [oc][ic][r][s] -> [oc/16][r][s][ic/2][oc%16][ic%2] */
    uint16_t *dst = (uint16_t *)k->weights;
    for (int64_t oc = 0; oc < c->k; oc++)
        for (int64_t ic = 0; ic < c->cg; ic++)
            for (int64_t t = 0; t < taps; t++) {
                int64_t at = (((oc / LANES) * taps + t) * (cin / 2) + ic / 2) * LANES + oc % LANES;
                dst[at * 2 + ic % 2] = to_bf16(w[(oc * c->cg + ic) * taps + t]);
            }
    wpk_free(w);
    const ir_tensor *b = lib_in(n, in, LIB_IN_BIAS);
    if (b) {
        if (!b->data)
            return op_unsupported(ctx, n, "isa_bf16 takes a constant bias");
        memcpy(k->bias, b->data, sizeof(float) * (size_t)c->k);
    }
    return WPK_OK;
}

static void destroy(const kernel_provider *self, lib_kernel *k) {
    (void)self;
    if (!k) return;
    cg_module_free(k->mod);
    wpk_free(k->weights);
    wpk_free(k->bias);
    wpk_free(k->xp);
    wpk_free(k);
}

static wpk_status create(const kernel_provider *self, wpk_context *ctx, const ir_node *n,
                         ir_tensor *const *in, ir_tensor *const *out, int config,
                         const kernel_device *dev, lib_kernel **out_k) {
    *out_k = NULL;
    if (dev->cuda) return lib_host_only(ctx, self, n);
    if (!conv_bf16_cpu_ok())
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s': isa_bf16 needs a CPU with "
                         "avx512_bf16, which this one does not list", n->name);
    lib_conv c;
    wpk_status st = check(ctx, n, in, out, &c);
    if (st) return st;
    lib_kernel *k = wpk_calloc(1, sizeof *k);
    if (!k) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory creating an isa_bf16 kernel");
    k->threads = dev->threads;
    geometry(&c, &k->geom);
    bf16_config list[LIB_MAX_CONFIGS];
    int nc = config_list(&k->geom, list);
    if (config < 0 || config >= nc) {
        destroy(self, k);
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "node '%s': isa_bf16 has %d configs, not %d",
                         n->name, nc, config);
    }
    k->geom.tile_w = tiles[list[config].tile][0];
    k->geom.tile_k = tiles[list[config].tile][1];
    k->geom.rows_outer = list[config].rows_outer;
    mapped mp;
    st = map_conv(ctx, &k->geom, &mp);
    strbuf src = {0};
    if (!st) st = cg_dot_conv_emit(ctx, &k->geom, &mp.nest, &mp.maps[0], mp.oc, mp.ic, mp.ow,
                                    &src);
    te_ctx_free(&mp.te);
    if (!st) st = pack(ctx, k, &c, n, in);
    if (!st) st = cg_c_compile(ctx, src.s, &k->mod);
    sb_free(&src);
    if (!st && !(k->fn = cg_module_fn(k->mod, k->geom.name)))
        st = wpk_error(ctx, WPK_ERR_INTERNAL, "isa_bf16: the compiled module has no %s",
                       k->geom.name);
    if (st) {
        destroy(self, k);
        return st;
    }
    *out_k = k;
    return WPK_OK;
}

static wpk_status run(const kernel_provider *self, wpk_context *ctx, lib_kernel *k,
                      ir_tensor *const *in, ir_tensor *const *out) {
    (void)self, (void)ctx;
    const ir_tensor *z = k->geom.z ? in[LIB_IN_Z] : NULL;
    void *args[6] = {in[0]->data, k->weights, k->bias, z ? z->data : NULL, out[0]->data, k->xp};
    int saved = k->threads > 0 ? omp_get_max_threads() : 0;
    if (saved) omp_set_num_threads(k->threads);
    k->fn(args);
    if (saved) omp_set_num_threads(saved);
    return WPK_OK;
}

static int constants(const kernel_provider *self, const lib_kernel *k, const void **start,
                     size_t *bytes, int max) {
    (void)self;
    if (max < 1) return 0;
    start[0] = k->weights;
    bytes[0] = k->weight_bytes;
    return 1;
}

static const kernel_provider provider = {
    .name = "isa_bf16",
    .family = "isa_bf16",
    .supports = supports,
    .describe = lib_describe,
    .space = lib_space,
    .default_config = lib_default_config,
    .legal = kernel_legal_in_space,
    .configs = configs,
    .create = create,
    .run = run,
    .destroy = destroy,
    .constants = constants,
    .version = version,
};

const kernel_provider *conv_bf16_provider(void) { return &provider; }

static rt_runner runner;

/* plans with bf16 steps find their runner by the provider's name */
__attribute__((constructor)) static void register_runner(void) {
    runner = step_ref_runner;
    runner.name = provider.name;
    runner.user = (void *)&provider;
    (void)rt_runner_register(&runner);
}
