/* intrin.h -- hardware instructions and micro-kernels as data: each one's computation written in
 * the tensor IR (te) with its operand shapes, element types and register layouts, so the mapper
 * (isa/mapper.h) can find where a loop nest computes the same thing. */
#ifndef WPK_ISA_INTRIN_H
#define WPK_ISA_INTRIN_H

#include <stdbool.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "te/tensor.h"

/* Storage types of operands; te computes in F32 or I32, so these say what the registers hold. */
typedef enum isa_dtype { ISA_F32, ISA_BF16, ISA_F16, ISA_TF32, ISA_U8, ISA_S8, ISA_S32 } isa_dtype;

typedef enum isa_device { ISA_DEVICE_CPU, ISA_DEVICE_CUDA } isa_device;

/* How an operand sits in its registers. */
typedef enum isa_layout {
    ISA_LAYOUT_BROADCAST, /* one value (or one k-group) repeated over every lane */
    ISA_LAYOUT_LANES,     /* n across the lanes, one element per lane (k-groups innermost) */
    ISA_LAYOUT_ROW,       /* a warp fragment of a row-major tile (mma A, C) */
    ISA_LAYOUT_COL        /* a warp fragment of a column-major tile (mma B) */
} isa_layout;

/* One instruction: C[m, n] += sum_k A[m, k] * B[k, n] over an m x n x k tile. k_group is how many
 * consecutive k one lane holds (2 for vdpbf16ps's pairs, 4 for vpdpbusd): those k must be adjacent
 * in memory, k-group innermost. */
typedef struct isa_intrin {
    const char *name;         /* "avx512_fma", "avx512_bf16_dot", "mma_m16n8k8_tf32", ... */
    const char *spelling;     /* the C intrinsic or PTX instruction codegen emits */
    isa_device device;
    const char *cpu_flag;     /* /proc/cpuinfo flag the CPU must list (CPU); NULL on CUDA */
    const char *target_attr;  /* __attribute__((target(...))) text, clang-14 spelling (CPU) */
    int min_sm;               /* CUDA compute capability x10 the instruction needs; 0 on CPU */
    int m, n, k;              /* the tile one instruction computes */
    int k_group;
    isa_dtype a_type, b_type, c_type;
    isa_layout a_layout, b_layout, c_layout;
    /* the lanes may run over an axis every operand shares (depthwise: C[b] += A[b] * B[b]) */
    bool lanes_over_shared;
} isa_intrin;

/* The instructions known, in a fixed order; *n gets their count. Static data. */
const isa_intrin *isa_intrins(int *n);
/* The one called name, or NULL. */
const isa_intrin *isa_intrin_find(const char *name);
const char *isa_dtype_name(isa_dtype t);
/* Bytes of one element of t. */
int isa_dtype_bytes(isa_dtype t);

/* An instruction's computation in the tensor IR: A [m, k], B [k, n] placeholders and C [m, n] =
 * sum(k: A[m, k] * B[k, n]), in F32 (float types) or I32 (integer types). */
typedef struct isa_desc {
    const isa_intrin *intrin;
    te_tensor *a, *b, *c;
} isa_desc;

/* Build in's description in c's arena. WPK_ERR_NOMEM when the arena is exhausted. */
wpk_status isa_intrin_describe(te_ctx *c, const isa_intrin *in, isa_desc *out);
/* "avx512_bf16_dot (vdpbf16ps, avx512_bf16): float32[1, 16] C = sum(k<2: A[m, k] * B[k, n]);
 * A bf16 broadcast, B bf16 lanes, C f32 lanes, k groups of 2". Deterministic, no newline. */
void isa_intrin_print(const isa_desc *d, strbuf *b);

/* Whether the running CPU has in's flag (read from /proc/cpuinfo once; false on CUDA ones). */
bool isa_cpu_has(const isa_intrin *in);
/* Whether the running CPU lists `flag` ("avx512_bf16") in /proc/cpuinfo. $WPK_CPU_FLAGS_OFF
 * (a comma-separated list) hides flags, so the refusal paths can be tested on any machine. */
bool isa_cpu_flag(const char *flag);

#endif
