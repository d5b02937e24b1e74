/* mma_gemm.c -- a mapped accumulation printed as a tensor-core GEMM (mma.sync m16n8k8 TF32):
 * fragment ownership per lane as the PTX ISA defines it (group = lane / 4, thread-in-group =
 * lane % 4), and a software mma for hosts that emulate a warp with threads. */
#include "codegen/cuda/mma_gemm.h"

#include <string.h>

#include "base/context.h"

/* the device helpers: PTX on a GPU; a warp-wide product through shared scratch elsewhere
 * (one warp per block, so a block barrier is a warp barrier) */
static const char HELPERS[] =
    "#ifdef __CUDA_ARCH__\n"
    "__device__ __forceinline__ unsigned wpk_tf32(float x) {\n"
    "    unsigned r;\n"
    "    asm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"(r) : \"f\"(x));\n"
    "    return r;\n"
    "}\n"
    "__device__ __forceinline__ void wpk_mma_tf32(float *c, const unsigned *a,\n"
    "                                             const unsigned *b) {\n"
    "    asm volatile(\"" /* the instruction's spelling goes here */;

static const char HELPERS_TAIL[] =
    " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, \"\n"
    "                 \"{%0, %1, %2, %3};\"\n"
    "                 : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3])\n"
    "                 : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), "
    "\"r\"(b[1]));\n"
    "}\n"
    "#else\n"
    "static inline unsigned wpk_tf32(float x) {\n"
    "    unsigned u;\n"
    "    memcpy(&u, &x, 4);\n"
    "    if ((u & 0x7f800000u) != 0x7f800000u) u += 0x1000u;\n"
    "    return u & 0xffffe000u;\n"
    "}\n"
    "static float wpk_mma_a[16][8], wpk_mma_b[8][8];\n"
    "static inline float wpk_f(unsigned u) { float f; memcpy(&f, &u, 4); return f; }\n"
    "static inline void wpk_mma_tf32(float *c, const unsigned *a, const unsigned *b) {\n"
    "    const int g = threadIdx.x >> 2, t = threadIdx.x & 3;\n"
    "    wpk_mma_a[g][t] = wpk_f(a[0]);\n"
    "    wpk_mma_a[g + 8][t] = wpk_f(a[1]);\n"
    "    wpk_mma_a[g][t + 4] = wpk_f(a[2]);\n"
    "    wpk_mma_a[g + 8][t + 4] = wpk_f(a[3]);\n"
    "    wpk_mma_b[t][g] = wpk_f(b[0]);\n"
    "    wpk_mma_b[t + 4][g] = wpk_f(b[1]);\n"
    "    __syncthreads();\n"
    "    for (int i = 0; i < 4; i++) {\n"
    "        const int row = g + (i >> 1) * 8, col = 2 * t + (i & 1);\n"
    "        float s = c[i];\n"
    "        for (int k = 0; k < 8; k++) s += wpk_mma_a[row][k] * wpk_mma_b[k][col];\n"
    "        c[i] = s;\n"
    "    }\n"
    "    __syncthreads();\n"
    "}\n"
    "#endif\n\n";

/* stride of loop i in operand o (0 C, 1 x, 2 y) */
static long long st(const isa_nest *nest, int i, int o) {
    return (long long)nest->loops[i].stride[o];
}

wpk_status cg_cuda_mma_gemm_emit(wpk_context *ctx, const isa_nest *nest, const isa_mapping *m,
                                 const char *name, strbuf *out, cg_cuda_launch *launch) {
    if (strcmp(m->intrin->name, "mma_m16n8k8_tf32") || m->m_loop < 0)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "mma gemm codegen: takes mma_m16n8k8_tf32 "
                         "mappings with an m loop, not %s", m->intrin->name);
    for (int i = 0; i < nest->nloops; i++)
        if (i != m->m_loop && i != m->n_loop && i != m->k_loop && nest->loops[i].extent != 1)
            return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "mma gemm codegen: loop %s (extent %lld) "
                             "is neither m, n nor k", nest->loops[i].var->name,
                             (long long)nest->loops[i].extent);
    if (nest->x->dtype != TE_F32 || nest->y->dtype != TE_F32 || nest->c->dtype != TE_F32)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "mma gemm codegen: takes float32 buffers");
    /* the instruction's A and B are the nest's x and y, or y and x when swapped */
    const char *pa = m->swapped ? "B" : "A", *pb = m->swapped ? "A" : "B";
    int oa = m->swapped ? 2 : 1, ob = m->swapped ? 1 : 2;
    const int mi = m->m_loop, ni = m->n_loop, ki = m->k_loop;
    const long long K = (long long)nest->loops[ki].extent;
    strbuf b = {0};
    sb_printf(&b, "/* %s: %s over m=%s n=%s k=%s, one warp per 16 x 8 tile */\n", name,
              m->intrin->spelling, nest->loops[mi].var->name, nest->loops[ni].var->name,
              nest->loops[ki].var->name);
    sb_puts(&b, HELPERS);
    sb_puts(&b, m->intrin->spelling);
    sb_puts(&b, HELPERS_TAIL);
    sb_printf(&b, "extern \"C\" __global__ void __launch_bounds__(32)\n%s(const float "
                  "*__restrict__ A, const float *__restrict__ B, float *__restrict__ C) {\n",
              name);
    sb_puts(&b, "    const int g = threadIdx.x >> 2, t = threadIdx.x & 3;\n"
                "    const long long m0 = (long long)blockIdx.y * 16;\n"
                "    const long long n0 = (long long)blockIdx.x * 8;\n"
                "    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n");
    sb_printf(&b, "    for (long long k0 = 0; k0 < %lld; k0 += 8) {\n", K);
    /* A[m][k] fragments: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4) */
    sb_puts(&b, "        unsigned a[4], b[2];\n");
    static const int arow[4] = {0, 8, 0, 8}, acol[4] = {0, 0, 4, 4};
    for (int i = 0; i < 4; i++)
        sb_printf(&b, "        a[%d] = wpk_tf32(%s[(m0 + g + %d) * %lld + (k0 + t + %d) * "
                  "%lld]);\n", i, pa, arow[i], st(nest, mi, oa), acol[i], st(nest, ki, oa));
    /* B[k][n] fragments: b0 (k t, n g), b1 (k t+4, n g) */
    for (int i = 0; i < 2; i++)
        sb_printf(&b, "        b[%d] = wpk_tf32(%s[(k0 + t + %d) * %lld + (n0 + g) * %lld]);\n",
                  i, pb, 4 * i, st(nest, ki, ob), st(nest, ni, ob));
    sb_puts(&b, "        wpk_mma_tf32(c, a, b);\n    }\n");
    /* C fragments: c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1) */
    for (int i = 0; i < 4; i++)
        sb_printf(&b, "    C[(m0 + g + %d) * %lld + (n0 + 2 * t + %d) * %lld] = c[%d];\n",
                  (i >> 1) * 8, st(nest, mi, 0), i & 1, st(nest, ni, 0), i);
    sb_puts(&b, "}\n");
    if (b.oom) {
        sb_free(&b);
        return wpk_error(ctx, WPK_ERR_NOMEM, "mma gemm codegen: out of memory");
    }
    sb_puts(out, b.s);
    sb_free(&b);
    memset(launch, 0, sizeof *launch);
    launch->grid[0] = nest->loops[ni].extent / 8;
    launch->grid[1] = nest->loops[mi].extent / 16;
    launch->grid[2] = 1;
    launch->block[0] = 32;
    launch->block[1] = launch->block[2] = 1;
    return out->oom ? wpk_error(ctx, WPK_ERR_NOMEM, "mma gemm codegen: out of memory") : WPK_OK;
}
