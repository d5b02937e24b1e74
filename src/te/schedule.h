/* schedule.h -- schedules: how a tensor expression runs, as data separate from the algorithm
 * (Halide's split). A schedule holds one stage per compute tensor; primitives rewrite a stage's
 * loop nest (its leaf iters, outermost first) and annotations. Every primitive validates its
 * arguments and returns WPK_ERR_INVALID_ARG with a message naming the primitive, the stage and
 * why ("split: factor 0 for axis 'oc' of stage 'conv'"). Lowering (src/loop/lower.h) turns a
 * schedule into loops. */
#ifndef WPK_TE_SCHEDULE_H
#define WPK_TE_SCHEDULE_H

#include "te/tensor.h"

typedef enum te_annot {
    TE_ANNOT_NONE,
    TE_ANNOT_PARALLEL,   /* CPU threads (OpenMP) */
    TE_ANNOT_VECTORIZE,  /* SIMD lanes: the loop becomes ramps/broadcasts; extent must be constant */
    TE_ANNOT_UNROLL,     /* fully unrolled; extent must be constant */
    TE_ANNOT_BIND        /* GPU axis: bind_tag is blockIdx.x/y/z or threadIdx.x/y/z */
} te_annot;

typedef enum te_rel_kind { TE_REL_SPLIT, TE_REL_FUSE } te_rel_kind;

/* How leaf iters derive from the original axes: split parent = outer * factor + inner
 * (a guard keeps the tail in range when factor does not divide the extent); fuse
 * fused = outer * extent(inner) + inner. Iters a split or fuse creates are TE_ITER_LOOP with
 * min 0; the equations are relative to the mins of the iters they relate (a split of a parent
 * with min m: parent = m + outer * factor + inner), and te_iter_is_reduce says whether a leaf
 * derives from reduction axes. Extents: split outer ceil(extent / factor), inner factor
 * (-1 when the parent's extent is unknown); fuse the product. */
typedef struct te_relation {
    te_rel_kind kind;
    te_iter *parent, *outer, *inner; /* SPLIT: parent -> (outer, inner); FUSE: (outer, inner) -> parent */
    int64_t factor;                  /* SPLIT */
} te_relation;

typedef enum te_attach_kind {
    TE_ATTACH_ROOT,    /* its own loop nest at the top level, into a buffer of its full shape */
    TE_ATTACH_INLINE,  /* no buffer: its body is substituted into every reader */
    TE_ATTACH_AT       /* computed inside attach_stage's loop over attach_iter, for the region
                          that loop iteration needs (bounds inference sizes its buffer) */
} te_attach_kind;

typedef struct te_schedule te_schedule;
typedef struct te_stage te_stage;
struct te_stage {
    te_schedule *schedule;     /* the owner: its arena makes new iters, its context hears errors */
    te_tensor *tensor;         /* the compute this stage produces */
    te_iter **leaves;          /* current loop order, outermost first: data axes then reduce axes */
    int nleaves, cap_leaves;
    te_annot *annots;          /* per leaf */
    const char **bind_tags;    /* per leaf, for TE_ANNOT_BIND */
    te_relation *rels;
    int nrels, cap_rels;
    te_attach_kind attach;
    te_stage *attach_stage;
    te_iter *attach_iter;
    const char *scope;         /* "global" (outputs, root stages), "local" (cache_write
                                  accumulators: registers/stack), "packed" (cache_read copies),
                                  "shared" (GPU) */
    bool is_output;
};

struct te_schedule {
    te_ctx *c;
    te_stage **stages;         /* producers before consumers */
    int nstages, cap_stages;
    te_tensor **outputs;
    int noutputs;
};

/* A default schedule for the given outputs: every compute they depend on is a root stage with
 * its axes in order (data axes then reduction axes), nothing annotated. NULL when out of memory,
 * or (message on c->err) when an output is not a compute or one iter belongs to two computes. */
te_schedule *te_schedule_create(te_ctx *c, te_tensor *const *outputs, int noutputs);
/* The stage computing t; NULL for placeholders or tensors not in the schedule. */
te_stage *te_stage_of(const te_schedule *s, const te_tensor *t);
/* Whether `it` (a leaf or an iter in st's relations) derives from reduction axes. */
bool te_iter_is_reduce(const te_stage *st, const te_iter *it);

wpk_status te_split(te_stage *st, te_iter *parent, int64_t factor, te_iter **outer, te_iter **inner);
wpk_status te_fuse(te_stage *st, te_iter *outer, te_iter *inner, te_iter **fused);
/* Reorder the listed leaves among the positions they occupy; others keep their place. */
wpk_status te_reorder(te_stage *st, int n, te_iter *const *order);
/* split x by fx and y by fy, then order (xo, yo, xi, yi) -- x outer of y. */
wpk_status te_tile(te_stage *st, te_iter *x, te_iter *y, int64_t fx, int64_t fy, te_iter **xo,
                   te_iter **yo, te_iter **xi, te_iter **yi);
wpk_status te_parallel(te_stage *st, te_iter *it);
wpk_status te_vectorize(te_stage *st, te_iter *it);
wpk_status te_unroll(te_stage *st, te_iter *it);
wpk_status te_bind(te_stage *st, te_iter *it, const char *tag);
wpk_status te_compute_at(te_stage *st, te_stage *parent, te_iter *at);
wpk_status te_compute_inline(te_stage *st);
/* The storage of a non-output stage: "global", "local" (stack / registers), "packed", "shared"
 * (for a compute_at stage whose region should live on the stack: a tile's accumulator). */
wpk_status te_set_scope(te_stage *st, const char *scope);
/* Accumulate t in a new "local" stage (returned in *cache) whose result t copies out: the
 * register/stack accumulator of a tiled reduction. t's stage keeps t's axes; put the cache
 * stage inside it with te_compute_at. */
wpk_status te_cache_write(te_schedule *s, te_tensor *t, const char *scope, te_tensor **cache);
/* Copy t (a placeholder or compute) into a new stage of the given scope read by `readers`
 * instead of t (packed buffers, GPU shared memory). */
wpk_status te_cache_read(te_schedule *s, te_tensor *t, const char *scope, te_tensor *const *readers,
                         int nreaders, te_tensor **cache);

/* Deterministic text of the schedule (stages, relations, leaf order, annotations), per stage:
 *   stage conv.acc (local): compute_at conv, ow_o        (or "root", "inline"; ", output")
 *     float32[1, 8, 6, 6] conv.acc[n, oc, oh, ow] = sum(...)   (te_print_tensor)
 *     split ow<6 by 4 -> ow_o<2, ow_i<4                   (relations in order; "fuse a, b -> f")
 *     loops: n<1 parallel, oc<8, rc<4 reduce, ow_i<4 vectorize, ...   (leaves, outermost first) */
void te_print_schedule(const te_schedule *s, strbuf *b);

#endif
