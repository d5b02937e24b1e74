/* emit_cuda.h -- what the CUDA code generator's files share (internal to src/codegen/cuda):
 * the emitter's state, variable bindings, and the per-thread tile analysis (tile_cuda.c) that
 * the text emission (emit_cuda.c) consults. */
#ifndef WPK_CODEGEN_CUDA_EMIT_CUDA_H
#define WPK_CODEGEN_CUDA_EMIT_CUDA_H

#include "codegen/cuda/cg_cuda.h"
#include "codegen/printer.h"
#include "loop/sync.h"

#define MAX_SHARED_BUFS LOOP_SYNC_MAX_SHARED
#define LIN_MAX 24           /* terms of a linear index */
#define MEMO_MAX 64          /* float4 temporaries of one statement */

/* GPU axes: threadIdx.x/y/z are 0..2, blockIdx.x/y/z 3..5. */
enum { AX_NONE = -1, AX_TX, AX_TY, AX_TZ, AX_BX, AX_BY, AX_BZ, AX_COUNT };
static inline bool is_thread(int ax) { return ax >= AX_TX && ax <= AX_TZ; }

/* A variable in scope; `axis` is a bound loop's (AX_*), else AX_NONE. */
typedef cg_binding binding;

/* A per-thread tile: a stack buffer allocated outside the thread-bound loops whose every
 * element belongs to one thread. dim d of an access splits into a thread part (one bound axis
 * times `coef`) and a local part in [0, ext); the thread keeps ext[0] x ... x ext[n-1]. */
typedef struct priv_plan {
    const loop_buffer *buf;
    bool compact;                 /* false: every thread keeps the whole buffer */
    int64_t ext[LOOP_MAX_DIMS];
    int axis[LOOP_MAX_DIMS];      /* AX_NONE: no thread part in this dim */
    int64_t coef[LOOP_MAX_DIMS];
    int64_t size;
} priv_plan;

/* A float4 load hoisted in front of the statement being printed: chunk `chunk` of load e. */
typedef struct memo {
    const te_expr *e;
    int chunk;
    int temp;
} memo;

/* The CUDA dialect's state: the printer first, so that its hooks get back here; launch dims,
 * shared memory offsets, per-thread tiles and hoisted float4 loads. */
typedef struct em {
    cg_printer p;
    const cg_cuda_options *opt;
    bool idx32;              /* I64 is emitted as int */
    unsigned helpers;
    int64_t dim[AX_COUNT];   /* launch dims (0: unbound) */
    const loop_buffer *shared[MAX_SHARED_BUFS];
    int64_t shared_off[MAX_SHARED_BUFS];
    int nshared;
    int64_t shared_bytes;
    priv_plan *plans;
    int nplans, cap_plans;
    int thread_depth;        /* enclosing thread-bound loops */
    unsigned thread_axes;    /* their axes, as bits */
    memo memos[MEMO_MAX];
    int nmemos;
} em;

/* A linear index form: k + sum coef[i] * var[i] over loop variables. */
typedef struct linform {
    const te_iter *var[LIN_MAX];
    int64_t coef[LIN_MAX];
    int n;
    int64_t k;
} linform;

/* One access of a tile buffer split per dimension (see priv_plan). */
typedef struct split {
    int64_t llo[LOOP_MAX_DIMS], lhi[LOOP_MAX_DIMS]; /* local part's range */
    int64_t digit[LOOP_MAX_DIMS];                    /* the constant's share */
    int axis[LOOP_MAX_DIMS];
    int64_t coef[LOOP_MAX_DIMS];
    int dim_of[LIN_MAX];                             /* per term: its dimension */
    int64_t dcoef[LIN_MAX];                          /* per term: coefficient within it */
} split;

/* Where each thread axis lives in a tile (from the accesses where it varies): dim, coefficient. */
typedef struct homes {
    int dim[AX_COUNT];
    int64_t a[AX_COUNT];
} homes;

/* emit_cuda.c */
/* A loop's binding: its range when constant, its axis when bound. */
binding cg_cuda_loop_binding(em *m, const loop_stmt *s);

/* tile_cuda.c */
/* e * scale added to L (lets seen through); false when e is not linear in loop variables. */
bool cg_cuda_linearize(em *m, const te_expr *e, int64_t scale, linform *L, int depth);
/* L, an index of b, split per dimension (see split); H: where thread axes live (may be NULL). */
bool cg_cuda_split_index(em *m, const loop_buffer *b, const linform *L, const homes *H, split *S,
                         const char **why);
/* How the block-level stack buffer `alloc` allocates lives in each thread; false (with the
 * reason on m) when threads share its elements. */
bool cg_cuda_plan_tile(em *m, const loop_stmt *alloc, priv_plan *p);

#endif
