/* step_runners.c -- the runner of steps on one node (step_runners.h): the node decoded once at
 * load with tensors shaped as the plan says; a run points the tensors at this run's addresses
 * and calls the reference kernel ("ref"), or the library kernel of the provider in self->user
 * (made on the host, or for a CUDA library on the plan's device). */
#include "kernels/step_runners.h"

#include <pthread.h>
#include <string.h>

#include "base/alloc.h"
#include "ir/node_codec.h"
#include "kernels/provider.h"
#include "runtime/backend.h"
#include "runtime/cuda/cuda_rt.h"
#include "runtime/runner.h"

typedef struct node_state {
    arena mem;
    ir_node node;
    ir_tensor *t;           /* per argument */
    ir_tensor **in, **out;  /* per node input / output; NULL where omitted */
    int nargs;
    ir_ref_fn ref;          /* "ref" */
    const kernel_provider *lib; /* a library's */
    lib_kernel *lk;
} node_state;

wpk_status step_payload_encode(wpk_context *ctx, const ir_node *n, int config, uint8_t **out,
                               size_t *len) {
    uint8_t *node = NULL;
    size_t nlen = 0;
    *out = NULL;
    wpk_status st = ir_node_encode(ctx, n, &node, &nlen);
    if (st) return st;
    uint8_t *p = wpk_malloc(nlen + 4);
    if (!p) {
        wpk_free(node);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory writing node '%s'", n->name);
    }
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)((uint32_t)config >> (8 * i));
    memcpy(p + 4, node, nlen);
    wpk_free(node);
    *out = p;
    *len = nlen + 4;
    return WPK_OK;
}

static void release(void *state) {
    node_state *s = state;
    if (!s) return;
    if (s->lk) s->lib->destroy(s->lib, s->lk);
    arena_free(&s->mem);
    wpk_free(s);
}

/* The step's node and its tensors, shaped as the plan says; data set only for constants (what
 * a library packs at create): their host bytes in the plan with host_consts (a device's
 * library copies them itself), else where the backend put them. */
static wpk_status decode(wpk_context *ctx, const rt_step_env *env, int step, bool host_consts,
                         node_state *s, int *config) {
    const rt_step *st = &env->plan->steps[step];
    const uint8_t *p = st->payload;
    if (st->payload_len < 4)
        return wpk_error(ctx, WPK_ERR_PARSE, "the plan is damaged: node '%s' has no payload",
                         st->node);
    *config = (int)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                    (uint32_t)p[3] << 24);
    wpk_status rc = ir_node_decode(ctx, p + 4, st->payload_len - 4, &s->mem, &s->node);
    if (rc) return rc;
    const ir_node *n = &s->node;
    if (st->nargs != n->nin + n->nout || *config < 0)
        return wpk_error(ctx, WPK_ERR_PARSE, "the plan is damaged: node '%s' has %d arguments "
                         "for %d inputs and %d outputs", st->node, st->nargs, n->nin, n->nout);
    s->nargs = st->nargs;
    s->t = arena_alloc(&s->mem, sizeof *s->t * (size_t)(s->nargs + 1));
    s->in = arena_alloc(&s->mem, sizeof *s->in * (size_t)(n->nin + 1));
    s->out = arena_alloc(&s->mem, sizeof *s->out * (size_t)(n->nout + 1));
    if (!s->t || !s->in || !s->out)
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory loading node '%s'", st->node);
    for (int a = 0; a < s->nargs; a++) {
        int t = st->args[a];
        ir_tensor **slot = a < n->nin ? &s->in[a] : &s->out[a - n->nin];
        if (t < 0) continue;
        const rt_tensor_desc *d = &env->plan->tensors[t];
        s->t[a].dtype = d->dtype;
        s->t[a].ndim = d->ndim;
        memcpy(s->t[a].dims, d->dims, sizeof d->dims);
        const bool c = d->place == RT_PLACE_CONST;
        s->t[a].data = !c          ? NULL
                       : host_consts ? (void *)((const uint8_t *)env->plan->consts + d->offset)
                                     : env->data[t];
        *slot = &s->t[a];
    }
    return WPK_OK;
}

static wpk_status prepare_on(const rt_runner *self, wpk_context *ctx, const rt_step_env *env,
                             int step, bool cuda, void **state) {
    *state = NULL;
    if (cuda && env->plan->target != RT_TARGET_CUDA)
        return wpk_error(ctx, WPK_ERR_PARSE, "the plan is damaged: node '%s' runs %s, a CUDA "
                         "library, in a plan for the cpu", env->plan->steps[step].node,
                         self->name);
    if (cuda && (!env->backend || strcmp(env->backend->iface->name, "cuda")))
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s' runs %s, a CUDA library, on the "
                         "%s backend", env->plan->steps[step].node, self->name,
                         env->backend ? env->backend->iface->name : "(no)");
    node_state *s = wpk_calloc(1, sizeof *s);
    if (!s) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory loading a step");
    int config = 0;
    wpk_status st = decode(ctx, env, step, cuda, s, &config);
    if (st == WPK_OK && !self->user) {
        const ir_op_info *info = ir_op_get(s->node.op);
        s->ref = info->ref;
        if (!s->ref)
            st = wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s': op '%s' is not supported",
                           s->node.name, s->node.op_type);
    } else if (st == WPK_OK) {
        s->lib = self->user;
        kernel_device dev = {env->threads, cuda ? rt_cuda_backend_device(env->backend) : NULL};
        if (config >= LIB_MAX_CONFIGS)
            st = wpk_error(ctx, WPK_ERR_PARSE, "the plan is damaged: node '%s' at %s config %d",
                           s->node.name, s->lib->name, config);
        else
            st = s->lib->create(s->lib, ctx, &s->node, s->in, s->out, config, &dev, &s->lk);
    }
    if (st) {
        release(s);
        return st;
    }
    *state = s;
    return WPK_OK;
}

static wpk_status prepare(const rt_runner *self, wpk_context *ctx, const rt_step_env *env,
                          int step, void **state) {
    return prepare_on(self, ctx, env, step, false, state);
}

static wpk_status prepare_cuda(const rt_runner *self, wpk_context *ctx, const rt_step_env *env,
                               int step, void **state) {
    return prepare_on(self, ctx, env, step, true, state);
}

static wpk_status run(void *state, wpk_context *ctx, void *const *argv) {
    node_state *s = state;
    for (int a = 0; a < s->nargs; a++) s->t[a].data = argv[a];
    if (s->lib) return s->lib->run(s->lib, ctx, s->lk, s->in, s->out);
    /* a view the plan laid on its input's buffer: the bytes are already where they belong */
    if (s->ref == op_copy_ref && s->node.nout == 1 && s->node.nin >= 1 && s->in[0] &&
        s->out[0] && s->in[0]->data == s->out[0]->data)
        return WPK_OK;
    return s->ref(ctx, &s->node, s->in, s->out);
}

const rt_runner step_ref_runner = {"ref", prepare, run, release, NULL};
const rt_runner step_cuda_lib_runner = {"cuda_lib", prepare_cuda, run, release, NULL};
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void register_ref(void) { (void)rt_runner_register(&step_ref_runner); }

void step_runners_register(void) { pthread_once(&once, register_ref); }

/* libwpk_runtime has no other door for this runner: its users never call into src/kernels */
__attribute__((constructor)) static void register_at_load(void) { step_runners_register(); }
