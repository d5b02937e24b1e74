/* common.h -- what the templates of the non-conv ops (dense.c, pool.c, softmax.c, layernorm.c,
 * elementwise.c) share: reading a node's tensors into placeholders, the check that a config
 * belongs to the workload's space, parts of workload keys, the parallel/vector split every
 * elementwise-shaped loop nest uses, and the templates' declarations for the registry
 * (templates.c). The conv templates' helpers (conv.h: tune_value, tune_vector_floats) are
 * used as they are. */
#ifndef WPK_KERNELS_COMMON_H
#define WPK_KERNELS_COMMON_H

#include "te/algo/epilogue.h"
#include "kernels/provider.h"

/* float32 with every dim at least 1 (0-d counts: one element). */
bool tune_static_f32(const ir_tensor *t);

/* The node's input i as the template sees it: present (not an omitted optional input). */
static inline const ir_tensor *tune_task_in(const tune_task *t, int i) {
    return i < t->nin && t->in[i].dtype != WPK_DTYPE_UNDEFINED ? &t->in[i] : NULL;
}

/* A placeholder named `name` of t's shape (a 0-d tensor as [1]), marked constant when t's data
 * is known at compile time. NULL when out of memory (reported on c). */
te_tensor *tune_placeholder(te_ctx *c, const char *name, const ir_tensor *t);

/* WPK_ERR_INVALID_ARG naming the template and the knob when cfg picks a value index outside
 * a knob's values. */
wpk_status tune_check_config(te_ctx *c, const char *tmpl, const tune_space *s,
                             const tune_config *cfg);

/* WPK_ERR_INVALID_ARG naming the template and the knob when cfg picks a value index outside
 * s, or a value that the workload's own space (self->space) does not hold. */
wpk_status tune_check_legal(te_ctx *c, const kernel_provider *self, const tune_task *t,
                            const tune_space *s, const tune_config *cfg);

/* After an algorithm or primitive left its message on c: WPK_ERR_NOMEM when out of memory,
 * else WPK_ERR_INVALID_ARG with the template's name in front of the message. */
wpk_status tune_failed(te_ctx *c, const char *tmpl);

/* The activation of a fused node (attributes `activation`, `alpha`, ...). False when the
 * attributes are not an activation act_read accepts. */
bool tune_read_act(const ir_node *n, te_act *a);
/* Append to task->key (printf-style; truncated at its size, never allocating: describe()
 * cannot fail). */
void tune_key_add(tune_task *task, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append ",act=relu" (nothing for none). */
void tune_key_act(tune_task *task, const te_act *a);
/* Append t's dims as "1x64x56x56" ("1" for 0-d). */
void tune_key_dims(tune_task *task, const ir_tensor *t);

/* The loops of an elementwise-shaped stage: `outer` (extent `nouter`, may be NULL when 1) and
 * `inner` (extent `ninner`, contiguous in memory) become
 *     parallel(outer x inner blocks) > block loop > unrolled vectors > vector lanes
 * with blocks of `grain` elements, `unroll` vectors of `vec` lanes each (vec 1: scalar). With
 * `parallel` false nothing runs in parallel. Tails are guards that loop partitioning takes
 * out of the main loop. */
wpk_status tune_schedule_flat(te_stage *st, te_iter *outer, int64_t nouter, te_iter *inner,
                              int64_t ninner, int64_t vec, int64_t unroll, int64_t grain,
                              bool parallel);

/* The provider table of a DSL template `var` called `label`: its supports and describe entry
 * points, and the file's static space, default_config and build. */
#define TUNE_TEMPLATE(var, label, supports_fn, describe_fn, legal_fn)                      \
    const kernel_provider var = {                                                          \
        .name = label,                                                                     \
        .family = "generated",                                                             \
        .supports = supports_fn,                                                           \
        .describe = describe_fn,                                                           \
        .space = space,                                                                    \
        .default_config = default_config,                                                  \
        .legal = legal_fn,                                                                 \
        .build = build,                                                                    \
    }

/* Return the status of x from the enclosing function when it failed (the schedule primitives',
 * the checks'). */
#define TRY(x)                                                                             \
    do {                                                                                   \
        wpk_status st_ = (x);                                                              \
        if (st_) return st_;                                                               \
    } while (0)

/* Threads a parallel loop may use here (target_cores()). */
int tune_threads(void);

extern const kernel_provider tune_dense;
extern const kernel_provider tune_pool2d;
extern const kernel_provider tune_global_pool;
extern const kernel_provider tune_softmax;
extern const kernel_provider tune_layernorm;
extern const kernel_provider tune_elementwise;

#endif
