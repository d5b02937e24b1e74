/* loop.h -- the loop-nest IR: what lowering produces and code generators consume. Statements
 * are immutable trees built by checking constructors in a te_ctx arena; passes rebuild what
 * they change. Expressions are te_expr (te/expr.h) using TE_BUF_LOAD, TE_RAMP, TE_BROADCAST. */
#ifndef WPK_LOOP_LOOP_H
#define WPK_LOOP_LOOP_H

#include "base/strbuf.h"
#include "te/expr.h"

#define LOOP_MAX_DIMS 8

typedef enum loop_scope {
    LOOP_SCOPE_ARG,     /* a kernel argument: caller-owned memory */
    LOOP_SCOPE_HEAP,    /* an intermediate the kernel allocates (root stages that are not outputs) */
    LOOP_SCOPE_STACK,   /* small and local (accumulators): on the stack, ideally in registers */
    LOOP_SCOPE_SHARED   /* GPU shared memory */
} loop_scope;

struct loop_buffer {
    const char *name;
    te_scalar dtype;
    int ndim;
    int64_t shape[LOOP_MAX_DIMS]; /* logical shape; row-major, flat index = sum idx*stride */
    int64_t size;                 /* elements */
    loop_scope scope;
    int align;                    /* bytes the base pointer is known to be aligned to */
    int id;
};

/* LOOP_BARRIER: a GPU block barrier, placed by loop/sync.c after every other pass. */
typedef enum loop_stmt_kind {
    LOOP_FOR, LOOP_LET, LOOP_IF, LOOP_STORE, LOOP_ALLOC, LOOP_SEQ, LOOP_BARRIER
} loop_stmt_kind;

typedef enum loop_for_kind {
    LOOP_SERIAL, LOOP_PARALLEL, LOOP_VECTORIZED, LOOP_UNROLLED, LOOP_BIND
} loop_for_kind;

typedef struct loop_stmt loop_stmt;
struct loop_stmt {
    loop_stmt_kind kind;
    const te_iter *var;             /* FOR, LET */
    const te_expr *min, *extent;    /* FOR */
    loop_for_kind for_kind;         /* FOR */
    const char *bind_tag;           /* FOR with LOOP_BIND */
    const te_expr *value;           /* LET: the value; STORE: the value stored */
    const te_expr *cond;            /* IF */
    const loop_buffer *buffer;      /* STORE, ALLOC */
    const te_expr *index;           /* STORE: flat element index (a ramp for vector stores) */
    const loop_stmt *body;          /* FOR, LET, ALLOC; IF: the then branch */
    const loop_stmt *else_body;     /* IF (may be NULL) */
    const loop_stmt **stmts;        /* SEQ */
    int nstmts;
};

/* A kernel: void name(void *const *args), args[i] pointing at buffer args[i]'s data. */
typedef struct loop_func {
    const char *name;
    loop_buffer **args;     /* inputs first, then outputs */
    int nargs, ninputs;
    const loop_stmt *body;
} loop_func;

loop_buffer *loop_buffer_new(te_ctx *c, const char *name, te_scalar dtype, int ndim,
                             const int64_t *shape, loop_scope scope);
/* b[index], a vector of index's lanes when index is a ramp. */
const te_expr *loop_load(te_ctx *c, const loop_buffer *b, const te_expr *index);
const loop_stmt *loop_for(te_ctx *c, const te_iter *var, const te_expr *min, const te_expr *extent,
                          loop_for_kind kind, const loop_stmt *body);
const loop_stmt *loop_let(te_ctx *c, const te_iter *var, const te_expr *value, const loop_stmt *body);
const loop_stmt *loop_if(te_ctx *c, const te_expr *cond, const loop_stmt *then_s,
                         const loop_stmt *else_s);
const loop_stmt *loop_store(te_ctx *c, const loop_buffer *b, const te_expr *index,
                            const te_expr *value);
const loop_stmt *loop_alloc(te_ctx *c, const loop_buffer *b, const loop_stmt *body);
const loop_stmt *loop_seq(te_ctx *c, int n, const loop_stmt *const *stmts);
/* Every thread of a GPU block waits here until all have arrived, and sees what the others wrote
 * to shared memory before (CUDA's __syncthreads). Sequential execution needs nothing. */
const loop_stmt *loop_barrier(te_ctx *c);
bool loop_is_barrier(const loop_stmt *s);

/* Deterministic text of the loops ("for (x_3, 0, 56) parallel {" ...), for goldens and
 * `wpk lower`. */
void loop_print_stmt(const loop_stmt *s, int indent, strbuf *b);
/* One expression in the same notation ("n_3*3136 + c_4*56", "ramp(x_7, 1, 16)"). */
void loop_print_expr(const te_expr *e, strbuf *b);
void loop_print_func(const loop_func *f, strbuf *b);

#endif
