/* test_isa_mma.c -- the mapper's CUDA output without a GPU: a matmul nest mapped onto
 * mma.sync m16n8k8 TF32 (both operand orders the mapper finds) is printed as a tensor-core
 * kernel, compiled by NVRTC for sm_90 (PTX and cubin; the PTX must hold the mma instruction),
 * and run on the CPU emulator (tests/cuda/cuda_emu.h), whose software mma takes the same
 * per-lane fragments: the result must match a reference with the same tf32 rounding. A mapping
 * onto another instruction is refused. Exit 77 when neither NVRTC nor a host C++ compiler is
 * there. */
#define _DEFAULT_SOURCE

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cuda/cuda_emu.h"
#include "base/context.h"
#include "check.h"
#include "codegen/cuda/mma_gemm.h"
#include "isa/mapper.h"
#include "loop/lower.h"
#include "te/schedule.h"

#define M 32
#define N 16
#define K 24

static wpk_context *ctx;
static te_ctx C;

static float tf32(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u += 0x1000u;
    u &= 0xffffe000u;
    memcpy(&x, &u, 4);
    return x;
}

/* Out[i, j] = sum_k A[i, k] * B[k, j] lowered, its one accumulation */
static loop_func *matmul(isa_nest *nest) {
    te_tensor *A = te_placeholder(&C, "A", TE_F32, 2, (int64_t[]){M, K});
    te_tensor *B = te_placeholder(&C, "B", TE_F32, 2, (int64_t[]){K, N});
    te_iter **ax = te_compute_axes(&C, 2, (int64_t[]){M, N}, (const char *[]){"i", "j"});
    te_iter *k = te_reduce_axis(&C, "k", 0, K);
    const te_expr *p = te_mul(&C, te_load(&C, A, 2, (const te_expr *[]){te_var(&C, ax[0]),
                                                                         te_var(&C, k)}),
                              te_load(&C, B, 2, (const te_expr *[]){te_var(&C, k),
                                                                    te_var(&C, ax[1])}));
    te_tensor *O = te_compute(&C, "Out", 2, (int64_t[]){M, N}, ax,
                              te_reduce(&C, TE_REDUCE_SUM, p, 1, &k));
    te_schedule *s = te_schedule_create(&C, &O, 1);
    loop_func *f = NULL;
    CHECK(s && loop_lower(&C, s, "mma_gemm", (te_tensor *[]){A, B, O}, 3, &f) == WPK_OK);
    int nn = 0;
    if (f) isa_find_nests(f->body, nest, 1, &nn);
    CHECK(nn == 1);
    return nn == 1 ? f : NULL;
}

int main(void) {
    ctx = wpk_context_create();
    te_ctx_init(&C, ctx);
    isa_nest nest;
    loop_func *f = matmul(&nest);
    if (!f) CHECK_DONE();
    isa_mapping maps[8];
    int nm = isa_map(&C, &nest, isa_intrin_find("mma_m16n8k8_tf32"), maps, 8);
    CHECK(nm == 2); /* m=i n=j, and swapped m=j n=i (the transposed product) */
    bool have_nvrtc = cg_cuda_nvrtc_available(ctx) == WPK_OK;
    wpk_clear_error(ctx);
    char log[] = "/tmp/wpk_isa_mma_XXXXXX";
    char *dir = mkdtemp(log);
    char cxx_log[600];
    snprintf(cxx_log, sizeof cxx_log, "%s/cxx_version.log", dir ? dir : "/tmp");
    char *argv[] = {(char *)emu_compiler(), "--version", NULL};
    bool have_emu = dir && emu_spawn(argv, cxx_log) == 0;
    if (!have_nvrtc && !have_emu) {
        printf("skipped: neither NVRTC nor a host C++ compiler (%s) is here\n", emu_compiler());
        return 77;
    }
    if (!have_nvrtc) fprintf(stderr, "NVRTC unavailable: compile checks skipped\n");
    if (!have_emu) fprintf(stderr, "no host C++ compiler: emulated runs skipped\n");
    float a[M * K], b[K * N], want[M * N], got[M * N];
    uint64_t s = 12345;
    for (int i = 0; i < M * K + K * N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        float v = (float)((s >> 40) & 0xffff) / 32768.0f - 1.0f;
        if (i < M * K) a[i] = v;
        else b[i - M * K] = v;
    }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++) acc += tf32(a[i * K + k]) * tf32(b[k * N + j]);
            want[i * N + j] = acc;
        }
    for (int v = 0; v < nm && v < 8; v++) {
        strbuf src = {0};
        cg_cuda_launch L;
        CHECK(cg_cuda_mma_gemm_emit(ctx, &nest, &maps[v], "mma_gemm", &src, &L) == WPK_OK);
        if (!src.s) continue;
        CHECK(L.block[0] == 32 && L.grid[0] * L.grid[1] == (M / 16) * (N / 8));
        if (have_nvrtc) {
            cg_cuda_compile_options o = cg_cuda_default_compile_options();
            o.sm = 90;
            cg_cuda_image ptx = {0}, cubin = {0};
            wpk_status st = cg_cuda_compile(ctx, src.s, &o, &ptx);
            if (st) fprintf(stderr, "NVRTC: %s\n%s", wpk_context_error(ctx), src.s);
            CHECK(st == WPK_OK);
            CHECK(st || strstr(ptx.data, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"));
            CHECK(st || strstr(ptx.data, "cvt.rna.tf32.f32"));
            o.cubin = true;
            CHECK(cg_cuda_compile(ctx, src.s, &o, &cubin) == WPK_OK);
            cg_cuda_image_free(&ptx);
            cg_cuda_image_free(&cubin);
        }
        if (have_emu) {
            emu_kernel k;
            char tag[16];
            snprintf(tag, sizeof tag, "mma%d", v);
            CHECK(emu_build(src.s, f, dir, tag, &k) == 0);
            memset(got, 0, sizeof got);
            void *args[3] = {a, b, got};
            if (k.run) CHECK(emu_run(&k, &L, args) == 0);
            double worst = 0;
            for (int i = 0; i < M * N; i++) {
                double d = fabs((double)got[i] - want[i]);
                if (d > worst) worst = d;
            }
            if (worst > 1e-4) fprintf(stderr, "mapping %d: worst error %g\n", v, worst);
            CHECK(worst <= 1e-4);
            emu_free(&k);
        }
        sb_free(&src);
    }
    printf("%d mappings onto mma_m16n8k8_tf32: NVRTC sm_90 %s, emulator %s\n", nm,
           have_nvrtc ? "compiled" : "skipped", have_emu ? "ran" : "skipped");
    /* another instruction's mapping is not this emitter's */
    isa_mapping fma[4];
    if (isa_map(&C, &nest, isa_intrin_find("avx512_fma"), fma, 4) > 0) {
        strbuf src = {0};
        cg_cuda_launch L;
        CHECK_ERR(ctx, cg_cuda_mma_gemm_emit(ctx, &nest, &fma[0], "x", &src, &L),
                  WPK_ERR_UNSUPPORTED, "mma_m16n8k8_tf32");
        sb_free(&src);
    }
    te_ctx_free(&C);
    wpk_context_free(ctx);
    CHECK_DONE();
}
