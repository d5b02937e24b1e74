/* matmul.h -- the matrix products as both of their templates see them (dense.c on the CPU,
 * dense_cuda.c on CUDA): Gemm (transposes, alpha, beta, C broadcast to the output),
 * wpk::FusedGemm (C, a residual Z, an activation), MatMul (numpy semantics: 1-D operands
 * promoted, batch dims broadcast) and wpk::FusedMatMul (a bias per column, Z, activation) read
 * into plain numbers, the workload key, and the epilogue's arguments around te_matmul
 * (te/algo/dense.h). A template adds its operands' layout and its schedule. */
#ifndef WPK_KERNELS_MATMUL_H
#define WPK_KERNELS_MATMUL_H

#include "te/algo/dense.h"
#include "kernels/provider.h"

typedef struct tune_mm {
    ir_op op;
    int nb;                      /* batch dims of the output (te shape) */
    int64_t batch[TE_MAX_DIMS];
    int64_t m, n, k;
    bool ta, tb;                 /* Gemm's transposes */
    float alpha, beta;           /* Gemm's (FusedGemm: 1) */
    const ir_tensor *a, *b, *c, *z; /* c: Gemm/FusedGemm's C or FusedMatMul's bias; NULL absent */
    te_act act;
    bool packable;               /* B is a constant matrix: it can be pre-packed */
} tune_mm;

/* Read node n with its tensors (in[i] NULL for an omitted input; every output looked at).
 * False when it is not a product the templates take; never reports an error. */
bool tune_mm_read(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out, tune_mm *g);
/* The same for a task. */
bool tune_mm_read_task(const tune_task *t, tune_mm *g);
/* Whether g is a plain 2-D product with one output of [M, N] (and Z of that shape): what the GPU
 * template takes. */
bool tune_mm_is_2d(const tune_mm *g, int nout, const ir_tensor *y);
/* True for Gemm and FusedGemm (C broadcasts; transposes), false for the MatMuls (a bias). */
bool tune_mm_is_gemm(const tune_mm *g);

/* "<tmpl>:Gemm,a=1x512,b=1000x512,tb,c=1000[,res][,act=relu]" and the FLOPs. */
void tune_mm_describe(const char *tmpl, const tune_mm *g, tune_task *t);

/* The start of a build: out zeroed, the task's product in g (only_2d: tune_mm_is_2d too), cfg
 * checked against self's space. WPK_ERR_INVALID_ARG naming self otherwise. */
wpk_status tune_mm_build_start(const kernel_provider *self, te_ctx *c, const tune_task *t,
                               const tune_space *s, const tune_config *cfg, bool only_2d,
                               tune_mm *g, tune_build *out);

/* Placeholders of C (or the bias) and Z after the operands in out->args (Z of the output's te
 * shape, batch dims included), and the epilogue reading them. NULL tensors only when out of
 * memory (reported on c). */
wpk_status tune_mm_epilogue_args(te_ctx *c, const tune_mm *g, tune_build *out,
                                 te_gemm_epilogue *ep);

#endif
