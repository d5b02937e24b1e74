/* library.c -- vendor-library providers wrapped as templates (library.h). A provider's task
 * key is "<library>|" + the key the node's first DSL template gives, so the records of one
 * workload's implementations sit side by side; build is NULL: the measurer and the cpu backend
 * make the kernel through lib->create. */
#include "kernels/library.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ir/flops.h"
#include "kernels/vendor/lib.h"
#include "kernels/common.h"

#define MAX_LIBS 8

static kernel_provider templates[MAX_LIBS];
static const kernel_provider *list[MAX_LIBS + 1];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* The provider behind template t (the table is parallel to lib_providers()). */
static const lib_provider *provider_of(const kernel_provider *t) { return t->lib; }

static void task_tensors(const tune_task *task, ir_tensor **in, ir_tensor **out) {
    tune_task *m = (tune_task *)task;
    for (int i = 0; i < task->nin; i++)
        in[i] = m->in[i].dtype != WPK_DTYPE_UNDEFINED ? &m->in[i] : NULL;
    for (int i = 0; i < task->nout; i++)
        out[i] = m->out[i].dtype != WPK_DTYPE_UNDEFINED ? &m->out[i] : NULL;
}

/* supports() is not told its template, so each slot gets a function of its own that asks
 * its provider. */
#define WRAP(i)                                                                              \
    static bool supports_##i(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) { \
        return templates[i].lib->supports(n, in, out);                                      \
    }
WRAP(0) WRAP(1) WRAP(2) WRAP(3) WRAP(4) WRAP(5) WRAP(6) WRAP(7)
static bool (*const supports_fns[MAX_LIBS])(const ir_node *, ir_tensor *const *,
                                            ir_tensor *const *) = {
    supports_0, supports_1, supports_2, supports_3, supports_4, supports_5, supports_6, supports_7};

static const kernel_provider *template_of(const tune_task *task) { return task->tmpl; }

static void describe(tune_task *task) {
    const kernel_provider *self = template_of(task);
    ir_tensor *in[TUNE_MAX_ARGS] = {0}, *out[TUNE_MAX_ARGS] = {0};
    task_tensors(task, in, out);
    const kernel_provider *dsl = kernel_provider_for(task->node, in, out);
    if (dsl) {
        tune_task inner;
        tune_task_init(&inner, dsl, task->node, in, out);
        /* "<library>|<key>", cut at the key's size like any key */
        size_t n = (size_t)snprintf(task->key, sizeof task->key, "%s|", self->name);
        size_t len = strlen(inner.key);
        if (n + len >= sizeof task->key) len = sizeof task->key - n - 1;
        memcpy(task->key + n, inner.key, len);
        task->key[n + len] = 0;
        task->flops = inner.flops;
        return;
    }
    snprintf(task->key, sizeof task->key, "%s|%s:", self->name, task->node->op_type);
    for (int i = 0; i < task->nin; i++) {
        if (!in[i]) continue;
        tune_key_add(task, "%si%d=", i ? "," : "", i);
        for (int d = 0; d < in[i]->ndim; d++)
            tune_key_add(task, "%s%lld", d ? "x" : "", (long long)in[i]->dims[d]);
    }
    task->flops = ir_node_flops(task->node, in, out);
}

static void space(const tune_task *task, tune_space *s) {
    memset(s, 0, sizeof *s);
    ir_tensor *in[TUNE_MAX_ARGS] = {0}, *out[TUNE_MAX_ARGS] = {0};
    task_tensors(task, in, out);
    char names[LIB_MAX_CONFIGS][LIB_CONFIG_MAX];
    int n = provider_of(task->tmpl)->configs(task->node, in, out, names);
    if (n < 1) n = 1;
    int64_t v[LIB_MAX_CONFIGS];
    for (int i = 0; i < n && i < LIB_MAX_CONFIGS; i++) v[i] = i;
    tune_space_add(s, "algo", n < LIB_MAX_CONFIGS ? n : LIB_MAX_CONFIGS, v);
}

static void default_config(const tune_task *task, const tune_space *s, tune_config *out) {
    (void)task;
    (void)s;
    memset(out, 0, sizeof *out);
}

static void init(void) {
    const lib_provider *const *libs = lib_providers();
    int k = 0;
    for (int i = 0; libs[i] && k < MAX_LIBS; i++, k++) {
        templates[k] = (kernel_provider){
            .name = libs[i]->name,
            .supports = supports_fns[k],
            .describe = describe,
            .space = space,
            .default_config = default_config,
            .build = NULL,
            .lib = libs[i],
        };
        list[k] = &templates[k];
    }
    list[k] = NULL;
}

const kernel_provider *const *kernel_library_providers(void) {
    pthread_once(&once, init);
    return list;
}
