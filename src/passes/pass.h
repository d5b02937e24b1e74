/* pass.h -- graph passes: the interface each pass implements and the pipeline that runs them. */
#ifndef WPK_PASSES_PASS_H
#define WPK_PASSES_PASS_H

#include <stdbool.h>

#include "ir/graph.h"

typedef struct pass_options {
    int level;           /* 0 runs nothing; passes.def gives each pass its minimum level */
    const char *dump;    /* print the graph after this pass ("all": after every pass) when it
                            changed something; NULL: take it from $WPK_DUMP */
    const char *only;    /* comma-separated pass names: run just these (tests); NULL: all */
    int vector_floats;   /* floats in a vector register of the target (8 AVX2, 16 AVX-512) */
} pass_options;

pass_options pass_default_options(void);

/* A pass rewrites g in place and sets *changed to how many rewrites it made (0: g untouched).
 * Value shapes (g->values[v].t) are inferred before each pass; a pass that adds values sets
 * their dtype and shape itself or leaves them for the next inference. A pass meeting unclear
 * semantics (unknown shapes, aliasing) declines instead of guessing. */
typedef wpk_status (*pass_fn)(wpk_context *ctx, ir_graph *g, const pass_options *opt,
                              int *changed);

#define P(name, fn, level, doc) \
    wpk_status fn(wpk_context *ctx, ir_graph *g, const pass_options *opt, int *changed);
#include "passes/passes.def"
#undef P

/* Run the pipeline on g. Logs "pass NAME: N changes" at WPK_LOG_INFO; dumps go through the
 * log callback at WPK_LOG_INFO too (the CLI prints them). In debug builds the graph is
 * verified after every pass. */
wpk_status passes_run(wpk_context *ctx, ir_graph *g, const pass_options *opt);

/* Infer every value's dtype and shape into g->values[v].t (graph inputs keep their symbolic
 * dims as -1; values whose shape cannot be known statically get dtype UNDEFINED). Never folds.
 * Returns WPK_ERR_MODEL when a node is inconsistent. */
wpk_status pass_infer_shapes(wpk_context *ctx, ir_graph *g);

/* True when every dim of t is known (no -1) and its dtype is set. */
bool pass_shape_known(const ir_tensor *t);

#endif
