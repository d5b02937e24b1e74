/* expr.h -- scalar and vector expressions, shared by tensor expressions (src/te) and the loop
 * IR (src/loop). Expressions are immutable, built through constructors that check their
 * invariants and fold constants, and live in an arena (te_ctx). */
#ifndef WPK_TE_EXPR_H
#define WPK_TE_EXPR_H

#include <stdbool.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/context.h"

/* Element types. Indices are int64; `lanes` > 1 makes a vector of that many elements. */
typedef enum te_scalar { TE_BOOL, TE_I32, TE_I64, TE_F32 } te_scalar;

typedef struct te_type {
    te_scalar scalar;
    int lanes; /* 1 for scalars */
} te_type;

typedef enum te_expr_kind {
    TE_INT,       /* i: integer constant (type I64 or I32) */
    TE_FLOAT,     /* f: float constant */
    TE_VAR,       /* var: an index variable (loop variable, let variable, axis) */
    TE_ADD, TE_SUB, TE_MUL,
    TE_DIV,       /* integer: floor division; float: true division */
    TE_MOD,       /* integer floor modulo (result has the divisor's sign) */
    TE_MIN, TE_MAX,
    TE_LT, TE_LE, TE_EQ, TE_NE, /* comparisons: BOOL result */
    TE_AND, TE_OR, TE_NOT,
    TE_SELECT,    /* a ? b : c (a: BOOL) */
    TE_CAST,      /* a converted to `type` */
    TE_CALL,      /* fn(a[, b]): math intrinsic */
    TE_LOAD,      /* tensor access: tensor[index[0], ..., index[n-1]] (TE level) */
    TE_REDUCE,    /* reduction of `a` over `raxes` with `rop` (TE level, top of a compute body) */
    TE_BUF_LOAD,  /* buffer[a] with a flat element index (loop level; vector when a is a ramp) */
    TE_RAMP,      /* a + i*b for i in [0, lanes) (loop level) */
    TE_BROADCAST  /* a repeated `lanes` times (loop level) */
} te_expr_kind;

typedef enum te_fn { TE_FN_EXP, TE_FN_LOG, TE_FN_TANH, TE_FN_ERF, TE_FN_SQRT, TE_FN_ABS,
                     TE_FN_FLOOR, TE_FN_POW } te_fn;

typedef enum te_reduce_op { TE_REDUCE_SUM, TE_REDUCE_MAX, TE_REDUCE_MIN } te_reduce_op;

typedef struct te_iter te_iter;
typedef struct te_tensor te_tensor;
typedef struct loop_buffer loop_buffer;

typedef struct te_expr te_expr;
struct te_expr {
    te_expr_kind kind;
    te_type type;
    int64_t i;              /* TE_INT */
    double f;               /* TE_FLOAT */
    const te_iter *var;     /* TE_VAR */
    const te_expr *a, *b, *c; /* operands, in order (SELECT: a cond, b then, c else) */
    te_fn fn;               /* TE_CALL */
    const te_tensor *tensor;   /* TE_LOAD */
    const te_expr **index;     /* TE_LOAD: ndim index expressions */
    int nindex;
    te_reduce_op rop;          /* TE_REDUCE */
    te_iter **raxes;           /* TE_REDUCE: the reduction axes */
    int nraxes;
    const loop_buffer *buffer; /* TE_BUF_LOAD */
};

/* An iteration variable: a data-parallel axis of a compute, a reduction axis, a loop variable
 * created by a schedule (split/fuse), or a let variable. Ranges are [min, min + extent). */
typedef enum te_iter_kind { TE_ITER_DATA, TE_ITER_REDUCE, TE_ITER_LOOP, TE_ITER_LET } te_iter_kind;

struct te_iter {
    const char *name;
    te_iter_kind kind;
    int64_t min, extent;    /* extent -1: not known statically */
    int id;                 /* unique within a te_ctx: printers and codegen name it name_id */
};

/* The arena and error sink for building expressions, tensors and schedules. */
typedef struct te_ctx {
    arena mem;
    wpk_context *err;       /* borrowed: where invalid constructions are reported */
    int next_id;
    bool oom;               /* an allocation failed: constructors return NULL from then on */
} te_ctx;

void te_ctx_init(te_ctx *c, wpk_context *err);
void te_ctx_free(te_ctx *c);

static inline te_type te_t(te_scalar s) { return (te_type){s, 1}; }

/* Constructors. They fold constants (2+3 -> 5, x*1 -> x, x+0 -> x), promote nothing silently
 * (operands must have the same type, except that an I64/F32 constant adapts to the other side),
 * and return NULL when out of memory or on a type mismatch (a compiler bug: also asserted). */
const te_expr *te_int(te_ctx *c, int64_t v);                 /* I64 */
const te_expr *te_int_t(te_ctx *c, te_type t, int64_t v);
const te_expr *te_float(te_ctx *c, double v);                /* F32 */
const te_expr *te_var(te_ctx *c, const te_iter *it);         /* I64 */
const te_expr *te_binary(te_ctx *c, te_expr_kind k, const te_expr *a, const te_expr *b);
const te_expr *te_add(te_ctx *c, const te_expr *a, const te_expr *b);
const te_expr *te_sub(te_ctx *c, const te_expr *a, const te_expr *b);
const te_expr *te_mul(te_ctx *c, const te_expr *a, const te_expr *b);
const te_expr *te_div(te_ctx *c, const te_expr *a, const te_expr *b);
const te_expr *te_mod(te_ctx *c, const te_expr *a, const te_expr *b);
const te_expr *te_min(te_ctx *c, const te_expr *a, const te_expr *b);
const te_expr *te_max(te_ctx *c, const te_expr *a, const te_expr *b);
const te_expr *te_cmp(te_ctx *c, te_expr_kind k, const te_expr *a, const te_expr *b);
const te_expr *te_and(te_ctx *c, const te_expr *a, const te_expr *b);
const te_expr *te_or(te_ctx *c, const te_expr *a, const te_expr *b);
const te_expr *te_not(te_ctx *c, const te_expr *a);
const te_expr *te_select(te_ctx *c, const te_expr *cond, const te_expr *t, const te_expr *f);
const te_expr *te_cast(te_ctx *c, te_type t, const te_expr *a);
const te_expr *te_call(te_ctx *c, te_fn fn, const te_expr *a, const te_expr *b /* or NULL */);
/* tensor[idx...]; n must equal the tensor's ndim */
const te_expr *te_load(te_ctx *c, const te_tensor *t, int n, const te_expr *const *idx);
/* Reduce body over raxes (TE_ITER_REDUCE iters). Only as the whole body of a compute. */
const te_expr *te_reduce(te_ctx *c, te_reduce_op op, const te_expr *body, int nraxes,
                         te_iter *const *raxes);
/* buffer[index] of element type t (t.lanes > 1: a vector load, index a ramp); loop.h's
 * loop_load takes the type from the buffer. */
const te_expr *te_buf_load(te_ctx *c, const loop_buffer *b, te_type t, const te_expr *index);
const te_expr *te_ramp(te_ctx *c, const te_expr *base, const te_expr *stride, int lanes);
const te_expr *te_broadcast(te_ctx *c, const te_expr *a, int lanes);

/* A new iteration variable. extent -1 when unknown. */
te_iter *te_iter_new(te_ctx *c, const char *name, te_iter_kind kind, int64_t min, int64_t extent);

/* True when e is an integer constant (and sets *v). */
bool te_is_const_int(const te_expr *e, int64_t *v);
/* Structural equality. */
bool te_expr_equal(const te_expr *a, const te_expr *b);
/* Substitute: every TE_VAR of `var` replaced by `value` (a new tree; shares unchanged parts). */
const te_expr *te_substitute(te_ctx *c, const te_expr *e, const te_iter *var, const te_expr *value);

#endif
