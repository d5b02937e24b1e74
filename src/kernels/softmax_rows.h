/* softmax_rows.h -- Softmax as both of its templates see it (softmax.c on the CPU,
 * softmax_cuda.c on CUDA): the node read as rows [outer, len, inner] with the normalized axis in
 * the middle, its workload key, and the algorithm (te/algo/softmax.h) on that view. A template
 * adds only its schedule. */
#ifndef WPK_KERNELS_SOFTMAX_ROWS_H
#define WPK_KERNELS_SOFTMAX_ROWS_H

#include "te/algo/softmax.h"
#include "kernels/provider.h"

/* opset 13: one axis; older opsets: everything from `axis` on flattened into len, inner 1 (as
 * the reference kernel reads it). */
typedef struct tune_softmax_rows {
    int64_t outer, len, inner;
} tune_softmax_rows;

/* Whether node n (one input, one output, float32, static shapes) is a Softmax the templates
 * take; fills g. */
bool tune_softmax_read(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out,
                       tune_softmax_rows *g);
/* The same for a task. */
bool tune_softmax_read_task(const tune_task *t, tune_softmax_rows *g);
/* "<tmpl>:outer1,len1000,inner1" and the FLOPs (5 per element). */
void tune_softmax_describe(const char *tmpl, const tune_softmax_rows *g, tune_task *t);

/* The provider entry points both templates use: supports (tune_softmax_read) and describe
 * (the key prefixed by self->name: "softmax:..." / "softmax_cuda:..."). */
bool tune_softmax_supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                           ir_tensor *const *out);
void tune_softmax_describe_task(const kernel_provider *self, tune_task *t);

/* A zeroed space (or config) and the task's rows in g, for a template's space (default_config);
 * false when the task is not a Softmax it takes. */
bool tune_softmax_space_start(const tune_task *t, tune_space *s, tune_softmax_rows *g);
bool tune_softmax_default_start(const tune_task *t, tune_config *cfg, tune_softmax_rows *g);

/* The algorithm of task t after checking cfg against self's space: x [outer, len, inner] as
 * out->args[0], the softmax along len (split_max: te_softmax_split_max) as args[1], and a fresh
 * schedule of it in out->schedule for the template's own. parts and g receive the computes and
 * the rows. WPK_ERR_INVALID_ARG naming self for a node or config it does not take. */
wpk_status tune_softmax_build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                              const tune_space *s, const tune_config *cfg, bool split_max,
                              tune_build *out, te_algo_parts *parts, tune_softmax_rows *g);

#endif
