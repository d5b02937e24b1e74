/* printer.h -- the printer both code generators are built on: loop IR statements and scalar
 * expressions as C-family text through one string builder with indentation, with the scope of
 * variables and buffers. A dialect (codegen/c, codegen/cuda) supplies what differs: types,
 * literals, vectors, memory accesses, allocations, bound loops and barriers. */
#ifndef WPK_CODEGEN_PRINTER_H
#define WPK_CODEGEN_PRINTER_H

#include "base/strbuf.h"
#include "loop/facts.h"
#include "loop/loop.h"

#define CG_NO_LANE (-1)   /* a scalar, or a vector as a whole */
#define CG_LANE_VAR (-2)  /* the lane held in `wpk_l`, a loop over lanes the dialect printed */

/* A variable in scope: a loop's or a let's. */
typedef struct cg_binding {
    loop_var_fact fact;
    const te_iter *it;
    te_type t;             /* a let of a vector value binds a vector */
    int axis;              /* a bound loop's axis in the dialect's numbering, else -1 */
    bool ranged;           /* lo..hi known (loops of constant range) */
    int64_t lo, hi;
    const te_expr *value;  /* a scalar integer let's value, for analyses that see through it */
} cg_binding;

/* Scalar helpers a dialect defines once per kernel ("wpk_floordiv_i32"). */
typedef enum cg_helper { CG_FLOORDIV, CG_FLOORMOD, CG_MIN, CG_MAX, CG_ABS } cg_helper;

typedef struct cg_printer cg_printer;

/* What differs between targets. Function members get the printer (self), which the dialect's
 * own state embeds as its first member. */
typedef struct cg_dialect {
    const char *name;                       /* "C": in messages ("C codegen, kernel 'k': ...") */
    const char *nan, *inf, *neg_inf;        /* float literals */
    const char *incr_pre, *incr_post;       /* around a loop variable's increment */
    bool bool_lanes_are_masks;              /* boolean vector variables hold -1/0 */
    const char *(*ctype)(cg_printer *self, te_scalar s);
    const char *(*tag)(cg_printer *self, te_scalar s); /* helper suffix: "i32", "i64", "f32" */
    void (*put_int)(cg_printer *self, strbuf *out, te_scalar s, int64_t v);
    /* Record that helper h of s is used; false (having failed) when the target has none. */
    bool (*use_helper)(cg_printer *self, cg_helper h, te_scalar s);
    void (*vector)(cg_printer *self, const te_expr *e, strbuf *out); /* a whole vector */
    void (*load)(cg_printer *self, const te_expr *e, int lane, strbuf *out);
    void (*ramp)(cg_printer *self, const te_expr *e, int lane, strbuf *out);
    /* Pragmas in front of a serial loop; what it returns is passed to loop_close. */
    int (*loop_open)(cg_printer *self, const loop_stmt *s);
    void (*loop_close)(cg_printer *self, const loop_stmt *s, int token);
    void (*bound_loop)(cg_printer *self, const loop_stmt *s);          /* LOOP_BIND */
    void (*let_open)(cg_printer *self, const loop_stmt *s); /* "{", indent, the declaration */
    void (*store)(cg_printer *self, const loop_stmt *s);
    void (*alloc)(cg_printer *self, const loop_stmt *s);
    void (*barrier)(cg_printer *self, const loop_stmt *s);
} cg_dialect;

struct cg_printer {
    const cg_dialect *d;
    wpk_context *ctx;
    const loop_func *f;
    wpk_status st;          /* the first failure; printing stops at it */
    strbuf body;            /* the function body */
    int indent;
    int ntemps;             /* wpk_tN temporaries so far */
    int guarded;            /* inside an operand that is evaluated only sometimes (?:, &&) */
    cg_binding *vars;
    int nvars, cap_vars;
    const loop_buffer **bufs;   /* visible: arguments, then enclosing allocations */
    int nbufs, cap_bufs;
    const loop_buffer **stored; /* buffers some store writes (inputs among them are not const) */
    int nstored, cap_stored;
    loop_fact_scope facts;  /* the variables in scope, for loop/facts.h */
};

/* Start printing f (borrowed; must outlive p) for dialect d. */
void cg_printer_init(cg_printer *p, const cg_dialect *d, wpk_context *ctx, const loop_func *f);
/* Append src to out when all went well; then p->st. */
wpk_status cg_printer_finish(cg_printer *p, const strbuf *src, strbuf *out);
void cg_printer_free(cg_printer *p);

void cg_fail(cg_printer *p, wpk_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Grow *arr (elements of size sz) to hold n+1; false (having failed) when out of memory. */
bool cg_grow(cg_printer *p, void **arr, int n, int *cap, size_t sz);
/* Free a temporary text; one that ran out of memory fails the printing, so a truncated
 * expression can never reach the output. */
void cg_release(cg_printer *p, strbuf *b);
/* One line of the body at the current indentation. */
void cg_line(cg_printer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Identifiers stay valid C whatever the IR calls things ("conv.local" -> conv_local_7). */
void cg_put_ident(strbuf *b, const char *name, int id);
void cg_put_var(strbuf *b, const te_iter *it);
void cg_put_buf(strbuf *b, const loop_buffer *buf);
bool cg_valid_ident(const char *s);
/* A float literal, NaN and infinities as the dialect spells them. */
void cg_put_float(cg_printer *p, strbuf *out, double v);
const char *cg_fn_name(te_fn fn);
const char *cg_op_text(te_expr_kind k);

cg_binding *cg_lookup(cg_printer *p, const te_iter *it);
bool cg_push_var(cg_printer *p, cg_binding b);
bool cg_push_buf(cg_printer *p, const loop_buffer *b);
/* A loop's binding (its range when constant) and a let's (its value when a scalar integer). */
cg_binding cg_loop_binding(cg_printer *p, const loop_stmt *s);
cg_binding cg_let_binding(cg_printer *p, const loop_stmt *s);
bool cg_nonneg(cg_printer *p, const te_expr *e);
int64_t cg_multiple(cg_printer *p, const te_expr *e);
/* b is an argument or allocated around the use; fails otherwise. */
bool cg_check_buffer(cg_printer *p, const loop_buffer *b);
/* Fill p->stored from f's body; then cg_is_stored. */
void cg_collect_stored(cg_printer *p);
bool cg_is_stored(const cg_printer *p, const loop_buffer *b);

/* Expression e, or lane `lane` of it (CG_NO_LANE, CG_LANE_VAR or a lane number). */
void cg_expr(cg_printer *p, const te_expr *e, int lane, strbuf *out);
void cg_put_lane(strbuf *out, int lane);
void cg_binop(cg_printer *p, const te_expr *e, const char *op, int lane, strbuf *out);
/* name(a) or name(a, b) */
void cg_call(cg_printer *p, const char *name, const te_expr *a, const te_expr *b, int lane,
             strbuf *out);
/* A statement; an allocation's body with its buffer in scope. */
void cg_stmt(cg_printer *p, const loop_stmt *s);
void cg_alloc_body(cg_printer *p, const loop_stmt *s);

#endif
