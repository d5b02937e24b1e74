/* mapper.h -- ISA mapping: finds the accumulations of a loop nest (C[...] += X[...] * Y[...]),
 * classifies each enclosing loop by the operands its variable indexes, and lists every way an
 * instruction of isa/intrin.h computes one of them: which loop carries the instruction's m, n
 * and k, under which operand order, with the layout and type changes that mapping needs. */
#ifndef WPK_ISA_MAPPER_H
#define WPK_ISA_MAPPER_H

#include "isa/intrin.h"
#include "loop/loop.h"

#define ISA_MAX_LOOPS 16
#define ISA_MAX_CHANGES 6

/* What a loop of an accumulation is, from the operands its variable indexes:
 * M: C and the left operand; N: C and the right one; K: both operands, not C (a reduction);
 * SHARED: all three (a group of a grouped conv, a channel of a depthwise one). */
typedef enum isa_role {
    ISA_ROLE_M, ISA_ROLE_N, ISA_ROLE_K, ISA_ROLE_SHARED,
    ISA_ROLE_OTHER             /* any other pattern (a loop only C or one operand sees) */
} isa_role;

typedef struct isa_loop {
    const te_iter *var;
    int64_t extent;
    isa_role role;             /* for the operand order x, y (nest.x left) */
    int64_t stride[3];         /* elements one step of the loop moves in C, x, y */
} isa_loop;

/* An accumulation C[c] = C[c] + x[ix] * y[iy] with every index affine in its loops. */
typedef struct isa_nest {
    const loop_stmt *update;   /* borrowed: the store inside the nest */
    const loop_buffer *c, *x, *y;
    int nloops;
    isa_loop loops[ISA_MAX_LOOPS]; /* enclosing loops, outermost first */
} isa_nest;

typedef enum isa_change_kind {
    ISA_CHANGE_CONVERT,        /* the operand's elements converted to the instruction's type */
    ISA_CHANGE_INNERMOST,      /* the operand re-laid out with the named loop innermost */
    ISA_CHANGE_K_GROUPS        /* the operand packed as [k / g][n][g]: k groups innermost */
} isa_change_kind;

typedef struct isa_change {
    char operand;              /* 'A', 'B' or 'C', as the instruction names them */
    isa_change_kind kind;
    int loop;                  /* the loop it concerns (INNERMOST, K_GROUPS), else -1 */
    isa_dtype from, to;        /* CONVERT */
} isa_change;

/* One way to run a nest's accumulation on an instruction. */
typedef struct isa_mapping {
    const isa_intrin *intrin;
    bool swapped;              /* the instruction's A is the nest's y and B its x */
    int m_loop, n_loop, k_loop; /* indices into the nest's loops; m_loop -1: m runs over none */
    int nchanges;
    isa_change changes[ISA_MAX_CHANGES];
} isa_mapping;

/* Every accumulation in s (at most max into out; *n gets how many were found, which may exceed
 * max). Stores of another shape, and accumulations with an index that is not affine in the
 * enclosing loops, are skipped: the mapper declines what it cannot prove. */
void isa_find_nests(const loop_stmt *s, isa_nest *out, int max, int *n);
/* The ways intrinsic `in` computes nest's accumulation, checked against in's description in the
 * tensor IR (the same sum of products, each loop's role matching the role the description's
 * axis plays, extents whole multiples of the instruction's tile), at most max into out; returns
 * how many exist (may exceed max). Operands whose buffers hold another type than the
 * instruction's get a CONVERT change. */
int isa_map(te_ctx *c, const isa_nest *nest, const isa_intrin *in, isa_mapping *out, int max);
/* "avx512_bf16_dot: m=ow<56 n=oci<16 k=ici<16 (A=x B=y); convert A f32->bf16, pack B k groups
 * of 2 over ici". Deterministic, no newline. */
void isa_mapping_print(const isa_nest *nest, const isa_mapping *m, strbuf *b);
const char *isa_role_name(isa_role r);

#endif
