/* injective_cuda.c -- the CUDA templates of the ops whose outputs are independent elements:
 * elementwise_cuda (unary activations and math, broadcasting binary ops), pool2d_cuda (NCHW
 * MaxPool / AveragePool) and global_pool_cuda (GlobalAveragePool / GlobalMaxPool).
 *
 * The algorithm is the CPU template's (elementwise.c, pool.c): the same tensor expressions,
 * built by its build() and then given a fresh schedule of the same output -- Halide's split of
 * algorithm from schedule: the CPU schedule those builds applied (parallel loops, vectors) is
 * dropped, every algorithmic choice (padding, broadcasts, the average's divisor, ONNX's
 * semantics) is kept, and the node readers exist once.
 *
 * The GPU schedule (tune_cuda_schedule_flat, sched_cuda.c): the output's axes fused into one index space laid over the grid,
 *     f = (block * per_thread + u) * threads + thread
 * so that the threads of a warp touch consecutive elements in every one of the `per_thread`
 * unrolled steps (coalesced); elementwise_cuda with `vec` 4 makes each element a float4 group
 * of four consecutive ones instead (the generator proves the 16-byte alignment or writes lanes).
 * Every other compute is inlined except reductions (a pooling window, a global pool's plane),
 * which become a per-thread accumulator computed at the thread's element: registers. */
#include <stdio.h>
#include <string.h>

#include "kernels/common.h"
#include "kernels/conv.h"
#include "kernels/templates_cuda.h"

/* A CUDA template over a CPU template's algorithm (kernel_provider.impl of the three below). */
typedef struct borrowed {
    const kernel_provider *cpu;     /* whose algorithm it schedules */
    bool vec;                       /* offers the float4 knob (no reductions) */
    bool plain_pools_only;          /* leaves the blocked layout's pools (NCHWc) to the CPU */
} borrowed;

static const borrowed *borrowed_of(const kernel_provider *self) { return self->impl; }

static bool is_pool2d_nchw(const ir_node *n) {
    return n && (n->op == IR_OP_MAX_POOL || n->op == IR_OP_AVERAGE_POOL);
}

static bool b_supports(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                       ir_tensor *const *out) {
    const borrowed *b = borrowed_of(self);
    if (!n || n->nout != 1) return false;
    /* the blocked layout's pools (NCHWc) are the CPU's */
    if (b->plain_pools_only && !is_pool2d_nchw(n)) return false;
    return b->cpu->supports(b->cpu, n, in, out);
}

/* The CPU template's key with this template's name in front: "pool2d_cuda:MaxPool,x=...". */
static void b_describe(const kernel_provider *self, tune_task *t) {
    const borrowed *b = borrowed_of(self);
    b->cpu->describe(b->cpu, t);
    const char *colon = strchr(t->key, ':');
    char key[sizeof t->key + 32];
    snprintf(key, sizeof key, "%s:%s", self->name, colon ? colon + 1 : t->key);
    /* truncated at the key's size, as tune_key_add does */
    memcpy(t->key, key, sizeof t->key - 1);
    t->key[sizeof t->key - 1] = '\0';
}

/* vec 4 only where the innermost dim holds whole groups of four (so a group never straddles a
 * row of a broadcast input) */
static bool can_vec(const borrowed *b, const tune_task *t) {
    const ir_tensor *y = &t->out[0];
    return b->vec && y->ndim >= 1 && y->dims[y->ndim - 1] % 4 == 0;
}

static void b_space(const kernel_provider *self, const tune_task *t, tune_space *s) {
    tune_cuda_flat_space(t, s, true, can_vec(borrowed_of(self), t));
}

static void b_default(const kernel_provider *self, const tune_task *t, const tune_space *s,
                      tune_config *cfg) {
    tune_cuda_flat_default(t, s, can_vec(borrowed_of(self), t), cfg);
}

static wpk_status b_build(const kernel_provider *self, te_ctx *c, const tune_task *t,
                          const tune_space *s, const tune_config *cfg, tune_build *out) {
    const borrowed *b = borrowed_of(self);
    memset(out, 0, sizeof *out);
    if (!t->node || t->nout != 1)
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, "%s: node '%s' is not one this template "
                         "takes", self->name, t->node ? t->node->name : "(null)");
    TRY(tune_check_legal(c, self, t, s, cfg));

    /* the algorithm: the CPU template's build at its default config (no pre-packing there) */
    tune_space cs;
    tune_config cc;
    b->cpu->space(b->cpu, t, &cs);
    b->cpu->default_config(b->cpu, t, &cs, &cc);
    TRY(b->cpu->build(b->cpu, c, t, &cs, &cc, out));
    for (int i = 0; i < TUNE_MAX_ARGS; i++)
        if (out->prepack[i])
            return wpk_error(c->err, WPK_ERR_INTERNAL, "%s: the algorithm of '%s' pre-packs input "
                             "%d, which this template does not handle", self->name, b->cpu->name, i);
    if (out->nargs != out->ninputs + 1)
        return wpk_error(c->err, WPK_ERR_INVALID_ARG, "%s: %d outputs", self->name,
                         out->nargs - out->ninputs);
    return tune_cuda_build_flat(self, c, s, cfg, out);
}

/* The three templates: one set of entry points, each template's description in impl. */
#define BORROWED(var, label, cpu_template, vec_ok, plain_pools)                              \
    static const borrowed var##_impl = {&cpu_template, vec_ok, plain_pools};                \
    const kernel_provider var = {                                                           \
        .name = label,                                                                      \
        .family = "generated",                                                              \
        .impl = &var##_impl,                                                                \
        .supports = b_supports,                                                             \
        .describe = b_describe,                                                             \
        .space = b_space,                                                                   \
        .default_config = b_default,                                                        \
        .legal = kernel_legal_in_space,                                                     \
        .build = b_build,                                                                   \
    }

BORROWED(tune_elementwise_cuda, "elementwise_cuda", tune_elementwise, true, false);
BORROWED(tune_pool2d_cuda, "pool2d_cuda", tune_pool2d, false, true);
BORROWED(tune_global_pool_cuda, "global_pool_cuda", tune_global_pool, false, false);
