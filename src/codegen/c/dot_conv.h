/* dot_conv.h -- C source of a blocked (NCHW16c) convolution run on a CPU dot-product
 * instruction found by the ISA mapper (isa/mapper.h): the input converted to the instruction's
 * type into a zero-padded copy, register tiles of output pixels x output-channel blocks
 * accumulated with the instruction over input-channel groups, then bias, residual and
 * activation in f32. Emitted with the instruction's target attribute, so the rest of the
 * program needs no -m flag; the caller checks the CPU (isa_cpu_has) before running it. */
#ifndef WPK_CODEGEN_C_DOT_CONV_H
#define WPK_CODEGEN_C_DOT_CONV_H

#include <stdbool.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "isa/mapper.h"

typedef enum cg_dot_act { CG_DOT_ACT_NONE, CG_DOT_ACT_RELU, CG_DOT_ACT_CLIP } cg_dot_act;

/* The convolution, every tensor blocked by the mapping's lane count (16):
 * X [n][cb][h][w][16] f32, Y [n][kb][oh][ow][16] f32 (Z, the residual, as Y), bias [kb*16]. */
typedef struct cg_dot_conv {
    const char *name;            /* the C function's name (an identifier) */
    int64_t n, cb, h, w;
    int64_t kb, oh, ow;
    int64_t kh, kw, stride[2], dil[2], pad0[2];
    int tile_w;                  /* output pixels per register tile (the mapping's m) */
    int tile_k;                  /* output-channel blocks per register tile (kb % tile_k == 0) */
    bool rows_outer;             /* loop order: output rows outside channel blocks (the input
                                    read once, the weights from cache) or inside them (each
                                    block's weights read once, the input from cache) */
    bool bias, z;
    cg_dot_act act;
    float lo, hi;                /* CG_DOT_ACT_CLIP */
} cg_dot_conv;

/* Padded height and width of the converted input copy. */
int64_t cg_dot_conv_hp(const cg_dot_conv *g);
int64_t cg_dot_conv_wp(const cg_dot_conv *g);
/* Elements of the converted, padded input copy (2-byte elements for bf16). */
int64_t cg_dot_conv_xp_elems(const cg_dot_conv *g);

/* Append `void NAME(void *const *args)`: args[0] X, args[1] the packed weight (k groups of the
 * instruction innermost: [kb][kh][kw][cb*16/g][16][g], isa_pack order), args[2] bias or NULL,
 * args[3] Z or NULL, args[4] Y, args[5] the padded input copy (zero where padding; the kernel
 * writes only its interior). Runs its loops under OpenMP.
 * WPK_ERR_UNSUPPORTED (message on ctx) when the mapping is not one this emitter takes: the
 * instruction must be avx512_bf16_dot with lanes over the nest's output-channel lane loop (n),
 * k over the input-channel lane loop and m over output columns -- the loops named by `lanes_k`,
 * `lanes_c` and `cols` of the nest -- and no change to the input's layout besides conversion. */
wpk_status cg_dot_conv_emit(wpk_context *ctx, const cg_dot_conv *g, const isa_nest *nest,
                            const isa_mapping *m, int lanes_k, int lanes_c, int cols,
                            strbuf *out);

#endif
