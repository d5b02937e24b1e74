/* dot_conv.c -- the C source of a blocked convolution on the AVX-512 BF16 dot product, printed
 * from a mapping the ISA mapper found: the input converted to bf16 pairs, register tiles of
 * tile_w pixels x tile_k channel blocks, one _mm512_dpbf16_ps per pixel, block and channel pair,
 * the epilogue in f32. The tiles are printed as straight-line code with one variable per
 * accumulator, so they stay in registers under any compiler. */
#include "codegen/c/dot_conv.h"

#include <string.h>

#include "base/context.h"

#define LANES 16
#define PAIRS (LANES / 2)

int64_t cg_dot_conv_hp(const cg_dot_conv *g) {
    int64_t need = (g->oh - 1) * g->stride[0] + (g->kh - 1) * g->dil[0] + 1;
    int64_t hp = g->pad0[0] + g->h;
    return need > hp ? need : hp;
}

int64_t cg_dot_conv_wp(const cg_dot_conv *g) {
    int64_t need = (g->ow - 1) * g->stride[1] + (g->kw - 1) * g->dil[1] + 1;
    int64_t wp = g->pad0[1] + g->w;
    return need > wp ? need : wp;
}

int64_t cg_dot_conv_xp_elems(const cg_dot_conv *g) {
    return g->n * g->cb * cg_dot_conv_hp(g) * cg_dot_conv_wp(g) * LANES;
}

/* the loop of the mapping's role r is nest loop `want` */
static bool is_loop(int got, int want) { return got >= 0 && got == want; }

static wpk_status check_mapping(wpk_context *ctx, const isa_nest *nest, const isa_mapping *m,
                                int lanes_k, int lanes_c, int cols) {
    if (strcmp(m->intrin->name, "avx512_bf16_dot") || m->swapped ||
        !is_loop(m->n_loop, lanes_k) || !is_loop(m->k_loop, lanes_c) || !is_loop(m->m_loop, cols))
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "dot conv codegen: mapping onto %s "
                         "(m loop %d, n loop %d, k loop %d) is not the lanes-over-channels one "
                         "it emits", m->intrin->name, m->m_loop, m->n_loop, m->k_loop);
    for (int i = 0; i < m->nchanges; i++)
        if (m->changes[i].operand == 'A' && m->changes[i].kind != ISA_CHANGE_CONVERT)
            return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "dot conv codegen: the mapping re-lays "
                             "out the input (loop %s innermost); only a conversion is emitted",
                             nest->loops[m->changes[i].loop].var->name);
    return WPK_OK;
}

static void tile_fn(const cg_dot_conv *g, int tw, strbuf *b) {
    const int tk = g->tile_k;
    const int64_t hp = cg_dot_conv_hp(g), wp = cg_dot_conv_wp(g);
    const int64_t cpairs = g->cb * PAIRS;
    const int64_t wblock = g->kh * g->kw * cpairs * LANES; /* u32 per output block */
    sb_printf(b, "static WPK_DOT_TARGET void\n"
                 "tile_%d(const int32_t *restrict xp, const int32_t *restrict wt, "
                 "const float *restrict bias, const float *restrict z, float *restrict y, "
                 "long n, long ob, long oh, long ow0) {\n", tw);
    for (int j = 0; j < tk; j++)
        for (int t = 0; t < tw; t++)
            sb_printf(b, "    __m512 a%d_%d = _mm512_setzero_ps();\n", j, t);
    sb_printf(b, "    for (long cb = 0; cb < %lld; cb++)\n", (long long)g->cb);
    sb_printf(b, "    for (long r = 0; r < %lld; r++) {\n", (long long)g->kh);
    sb_printf(b, "        const int32_t *xrow = xp + ((n * %lld + cb) * %lld + oh * %lld + r * "
                 "%lld) * %lld * %d + ow0 * %lld * %d;\n",
              (long long)g->cb, (long long)hp, (long long)g->stride[0], (long long)g->dil[0],
              (long long)wp, PAIRS, (long long)g->stride[1], PAIRS);
    sb_printf(b, "        for (long s = 0; s < %lld; s++) {\n", (long long)g->kw);
    sb_printf(b, "            const int32_t *xs = xrow + s * %lld;\n",
              (long long)(g->dil[1] * PAIRS));
    sb_printf(b, "            const int32_t *ws = wt + ((ob * %lld + r) * %lld + s) * %lld + "
                 "cb * %d;\n", (long long)g->kh, (long long)g->kw,
              (long long)(cpairs * LANES), PAIRS * LANES);
    sb_printf(b, "            for (int p = 0; p < %d; p++) {\n", PAIRS);
    for (int j = 0; j < tk; j++)
        sb_printf(b, "                __m512bh w%d = (__m512bh)_mm512_loadu_si512(ws + %lld + "
                     "p * %d);\n", j, (long long)(j * wblock), LANES);
    for (int t = 0; t < tw; t++) {
        sb_printf(b, "                { __m512bh x = (__m512bh)_mm512_set1_epi32(xs[%lld + p]);",
                  (long long)(t * g->stride[1] * PAIRS));
        for (int j = 0; j < tk; j++)
            sb_printf(b, " a%d_%d = _mm512_dpbf16_ps(a%d_%d, x, w%d);", j, t, j, t, j);
        sb_puts(b, " }\n");
    }
    sb_puts(b, "            }\n        }\n    }\n");
    for (int j = 0; j < tk; j++) {
        sb_printf(b, "    {\n        const long o = ((n * %lld + ob + %d) * %lld + oh) * %lld + "
                     "ow0;\n", (long long)g->kb, j, (long long)g->oh, (long long)g->ow);
        if (g->bias)
            sb_printf(b, "        const __m512 bv = _mm512_loadu_ps(bias + (ob + %d) * %d);\n",
                      j, LANES);
        for (int t = 0; t < tw; t++) {
            sb_printf(b, "        { __m512 v = a%d_%d;", j, t);
            if (g->bias) sb_puts(b, " v = _mm512_add_ps(v, bv);");
            if (g->z)
                sb_printf(b, " v = _mm512_add_ps(v, _mm512_loadu_ps(z + (o + %d) * %d));", t,
                          LANES);
            if (g->act == CG_DOT_ACT_RELU)
                sb_puts(b, " v = _mm512_max_ps(v, _mm512_setzero_ps());");
            if (g->act == CG_DOT_ACT_CLIP)
                sb_printf(b, " v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(%.9ef)), "
                             "_mm512_set1_ps(%.9ef));", g->lo, g->hi);
            sb_printf(b, " _mm512_storeu_ps(y + (o + %d) * %d, v); }\n", t, LANES);
        }
        sb_puts(b, "    }\n");
    }
    sb_puts(b, "}\n\n");
}

wpk_status cg_dot_conv_emit(wpk_context *ctx, const cg_dot_conv *g, const isa_nest *nest,
                            const isa_mapping *m, int lanes_k, int lanes_c, int cols,
                            strbuf *out) {
    wpk_status st = check_mapping(ctx, nest, m, lanes_k, lanes_c, cols);
    if (st) return st;
    if (g->tile_w < 1 || g->tile_k < 1 || g->kb % g->tile_k)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "dot conv codegen: tile %d x %d does not "
                         "divide %lld output blocks", g->tile_w, g->tile_k, (long long)g->kb);
    const int64_t hp = cg_dot_conv_hp(g), wp = cg_dot_conv_wp(g);
    const int tw = g->tile_w < g->ow ? g->tile_w : (int)g->ow;
    const int tail = (int)(g->ow % tw);
    strbuf b = {0};
    sb_printf(&b, "/* %s: blocked conv on %s (register tile %d pixels x %d blocks, %s "
                  "outer) */\n", g->name, m->intrin->spelling, tw, g->tile_k,
              g->rows_outer ? "rows" : "blocks");
    sb_puts(&b, "#include <immintrin.h>\n#include <stdint.h>\n\n");
    sb_printf(&b, "#define WPK_DOT_TARGET __attribute__((target(\"%s\")))\n\n",
              m->intrin->target_attr);
    /* vector code sits in functions of the instruction's target: OpenMP outlines parallel
       regions into functions that do not inherit the attribute (clang refuses the vectors) */
    sb_printf(&b, "static WPK_DOT_TARGET void convert_row(const float *restrict src, "
                  "uint16_t *restrict dst) {\n"
                  "    for (long w = 0; w < %lld; w++)\n"
                  "        _mm256_storeu_si256((__m256i *)(dst + w * %d), "
                  "(__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + w * %d)));\n}\n\n",
              (long long)g->w, LANES, LANES);
    tile_fn(g, tw, &b);
    if (tail) tile_fn(g, tail, &b);
    sb_printf(&b, "WPK_DOT_TARGET void %s(void *const *args) {\n", g->name);
    sb_puts(&b, "    const float *restrict x = args[0];\n"
                "    const int32_t *restrict wt = args[1];\n"
                "    const float *restrict bias = args[2];\n"
                "    const float *restrict z = args[3];\n"
                "    float *restrict y = args[4];\n"
                "    uint16_t *restrict xq = args[5];\n"
                "    const int32_t *restrict xp = args[5];\n");
    sb_puts(&b, "    #pragma omp parallel\n    {\n");
    /* the interior of the padded copy, converted to bf16 with round-to-nearest-even */
    sb_puts(&b, "    #pragma omp for collapse(2) schedule(static)\n");
    sb_printf(&b, "    for (long nc = 0; nc < %lld; nc++)\n", (long long)(g->n * g->cb));
    sb_printf(&b, "    for (long h = 0; h < %lld; h++) {\n", (long long)g->h);
    sb_printf(&b, "        const float *src = x + (nc * %lld + h) * %lld;\n", (long long)g->h,
              (long long)(g->w * LANES));
    sb_printf(&b, "        uint16_t *dst = xq + ((nc * %lld + h + %lld) * %lld + %lld) * %d;\n",
              (long long)hp, (long long)g->pad0[0], (long long)wp, (long long)g->pad0[1], LANES);
    sb_puts(&b, "        convert_row(src, dst);\n    }\n");
    sb_puts(&b, "    #pragma omp for collapse(3) schedule(static)\n");
    sb_printf(&b, "    for (long n = 0; n < %lld; n++)\n", (long long)g->n);
    if (g->rows_outer) {
        sb_printf(&b, "    for (long oh = 0; oh < %lld; oh++)\n", (long long)g->oh);
        sb_printf(&b, "    for (long ob = 0; ob < %lld; ob += %d) {\n", (long long)g->kb,
                  g->tile_k);
    } else {
        sb_printf(&b, "    for (long ob = 0; ob < %lld; ob += %d)\n", (long long)g->kb,
                  g->tile_k);
        sb_printf(&b, "    for (long oh = 0; oh < %lld; oh++) {\n", (long long)g->oh);
    }
    sb_printf(&b, "        long ow0 = 0;\n        for (; ow0 + %d <= %lld; ow0 += %d) "
                  "tile_%d(xp, wt, bias, z, y, n, ob, oh, ow0);\n", tw, (long long)g->ow, tw, tw);
    if (tail) sb_printf(&b, "        tile_%d(xp, wt, bias, z, y, n, ob, oh, ow0);\n", tail);
    sb_puts(&b, "    }\n    }\n}\n");
    if (b.oom) {
        sb_free(&b);
        return wpk_error(ctx, WPK_ERR_NOMEM, "dot conv codegen: out of memory");
    }
    sb_puts(out, b.s);
    sb_free(&b);
    return out->oom ? wpk_error(ctx, WPK_ERR_NOMEM, "dot conv codegen: out of memory") : WPK_OK;
}
