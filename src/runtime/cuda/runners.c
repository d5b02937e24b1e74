/* runners.c -- the CUDA backend's step runners (cuda_rt.h): "cuda_kernel" launches a kernel of
 * a loaded module (the step's symbol) with the launch dims of its payload on the step's tensors;
 * "cuda_copy" copies a byte range of its first tensor into its second (at the start, or at an
 * offset the payload names) on the device. Both
 * queue on the backend's stream and allocate nothing when they run. */
#include <inttypes.h>
#include <string.h>

#include "base/alloc.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_runners.h"

#define MAX_ARGS 64

static void put64(uint8_t *at, uint64_t v) {
    for (int i = 0; i < 8; i++) at[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *at) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)at[i] << (8 * i);
    return v;
}

void rt_cuda_launch_payload(const rt_cuda_dims *dims, uint8_t out[RT_CUDA_LAUNCH_PAYLOAD]) {
    for (int i = 0; i < 3; i++) {
        put64(out + 8 * i, (uint64_t)dims->grid[i]);
        put64(out + 24 + 8 * i, (uint64_t)dims->block[i]);
    }
    put64(out + 48, (uint64_t)dims->shared_bytes);
}

void rt_cuda_copy_payload(uint64_t src_offset, uint64_t bytes, uint8_t out[RT_CUDA_COPY_PAYLOAD]) {
    put64(out, src_offset);
    put64(out + 8, bytes);
}

void rt_cuda_copy_to_payload(uint64_t src_offset, uint64_t bytes, uint64_t dst_offset,
                             uint8_t out[RT_CUDA_COPY_TO_PAYLOAD]) {
    rt_cuda_copy_payload(src_offset, bytes, out);
    put64(out + 16, dst_offset);
}

/* ---- cuda_kernel ---- */

typedef struct kernel_state {
    rt_cuda *d;
    rt_cuda_kernel *k;
    int64_t *launches;      /* the backend's count */
    int nargs;
} kernel_state;

static wpk_status kernel_prepare(const rt_runner *self, wpk_context *ctx, const rt_step_env *env,
                                 int step, void **state) {
    (void)self;
    *state = NULL;
    const rt_step *s = &env->plan->steps[step];
    if (s->module < 0 || !env->modules[s->module])
        return wpk_error(ctx, WPK_ERR_PARSE, "the plan is damaged: node '%s' runs a CUDA kernel "
                         "from no module", s->node);
    if (s->payload_len != RT_CUDA_LAUNCH_PAYLOAD || s->nargs > MAX_ARGS)
        return wpk_error(ctx, WPK_ERR_PARSE, "the plan is damaged: node '%s': a launch payload "
                         "of %zu bytes (want %d), %d arguments (at most %d)", s->node,
                         s->payload_len, RT_CUDA_LAUNCH_PAYLOAD, s->nargs, MAX_ARGS);
    for (int a = 0; a < s->nargs; a++)
        if (s->args[a] < 0 || !env->data[s->args[a]])
            return wpk_error(ctx, WPK_ERR_PARSE, "the plan is damaged: node '%s': kernel "
                             "argument %d has no device memory", s->node, a);
    const uint8_t *p = s->payload;
    rt_cuda_dims dims;
    for (int i = 0; i < 3; i++) {
        dims.grid[i] = (int64_t)get64(p + 8 * i);
        dims.block[i] = (int64_t)get64(p + 24 + 8 * i);
        if (dims.grid[i] < 1 || dims.grid[i] > INT32_MAX || dims.block[i] < 1 ||
            dims.block[i] > 1024)
            return wpk_error(ctx, WPK_ERR_PARSE, "the plan is damaged: node '%s': launch "
                             "dims out of range", s->node);
    }
    dims.shared_bytes = (int64_t)get64(p + 48);
    if (dims.shared_bytes < 0 || dims.shared_bytes > INT32_MAX)
        return wpk_error(ctx, WPK_ERR_PARSE, "the plan is damaged: node '%s': %" PRId64 " bytes "
                         "of shared memory", s->node, dims.shared_bytes);
    kernel_state *ks = wpk_calloc(1, sizeof *ks);
    if (!ks) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory preparing node '%s'", s->node);
    rt_cuda_module *m = env->modules[s->module];
    ks->d = rt_cuda_module_device(m);
    ks->launches = rt_cuda_backend_launch_count(env->backend);
    ks->nargs = s->nargs;
    wpk_status st = rt_cuda_module_kernel(m, s->symbol, &dims, &ks->k);
    if (st) {
        wpk_free(ks);
        wpk_error_prefix(ctx, "node '%s'", s->node);
        return st;
    }
    *state = ks;
    return WPK_OK;
}

static wpk_status kernel_run(void *state, wpk_context *ctx, void *const *argv) {
    (void)ctx;
    kernel_state *ks = state;
    uint64_t args[MAX_ARGS];
    for (int a = 0; a < ks->nargs; a++) args[a] = (uint64_t)(uintptr_t)argv[a];
    wpk_status st = rt_cuda_kernel_launch(ks->d, ks->k, args, ks->nargs);
    if (st == WPK_OK) (*ks->launches)++;
    return st;
}

static void kernel_release(void *state) {
    kernel_state *ks = state;
    if (!ks) return;
    rt_cuda_kernel_free(ks->k);
    wpk_free(ks);
}

const rt_runner rt_cuda_kernel_runner = {
    .name = "cuda_kernel",
    .prepare = kernel_prepare,
    .run = kernel_run,
    .release = kernel_release,
    .user = NULL,
};

/* ---- cuda_copy ---- */

typedef struct copy_state {
    rt_cuda *d;
    uint64_t offset, bytes, dst_offset;
} copy_state;

static wpk_status copy_prepare(const rt_runner *self, wpk_context *ctx, const rt_step_env *env,
                               int step, void **state) {
    (void)self;
    *state = NULL;
    const rt_plan *pl = env->plan;
    const rt_step *s = &pl->steps[step];
    if ((s->payload_len != RT_CUDA_COPY_PAYLOAD && s->payload_len != RT_CUDA_COPY_TO_PAYLOAD) ||
        s->nargs != 2 || s->args[0] < 0 || s->args[1] < 0 || !env->data[s->args[0]] ||
        !env->data[s->args[1]])
        return wpk_error(ctx, WPK_ERR_PARSE, "the plan is damaged: node '%s': a device copy "
                         "takes two placed tensors and a %d- or %d-byte payload", s->node,
                         RT_CUDA_COPY_PAYLOAD, RT_CUDA_COPY_TO_PAYLOAD);
    const uint8_t *pay = s->payload;
    uint64_t off = get64(pay), bytes = get64(pay + 8);
    uint64_t dst = s->payload_len == RT_CUDA_COPY_TO_PAYLOAD ? get64(pay + 16) : 0;
    uint64_t have = rt_tensor_bytes(&pl->tensors[s->args[0]]);
    uint64_t room = rt_tensor_bytes(&pl->tensors[s->args[1]]);
    if (off > have || bytes > have - off || dst > room || bytes > room - dst)
        return wpk_error(ctx, WPK_ERR_PARSE, "the plan is damaged: node '%s': a copy of %" PRIu64
                         " bytes at offset %" PRIu64 " from %" PRIu64 " bytes to offset %" PRIu64
                         " of %" PRIu64, s->node, bytes, off, have, dst, room);
    rt_cuda *d = rt_cuda_backend_device(env->backend);
    if (!rt_cuda_cu(d)->memcpy_dtod_async)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "node '%s': the CUDA driver has no "
                         "device-to-device copy (cuMemcpyDtoDAsync)", s->node);
    copy_state *cs = wpk_calloc(1, sizeof *cs);
    if (!cs) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory preparing node '%s'", s->node);
    cs->d = d;
    cs->offset = off;
    cs->bytes = bytes;
    cs->dst_offset = dst;
    *state = cs;
    return WPK_OK;
}

static wpk_status copy_run(void *state, wpk_context *ctx, void *const *argv) {
    (void)ctx;
    copy_state *cs = state;
    if (!cs->bytes) return WPK_OK;
    const rt_cu_api *cu = rt_cuda_cu(cs->d);
    uint64_t src = (uint64_t)(uintptr_t)argv[0] + cs->offset;
    uint64_t dst = (uint64_t)(uintptr_t)argv[1] + cs->dst_offset;
    return rt_cuda_check(cs->d, cu->memcpy_dtod_async(dst, src, cs->bytes, rt_cuda_stream(cs->d)),
                         "a device copy");
}

const rt_runner rt_cuda_copy_runner = {
    .name = "cuda_copy",
    .prepare = copy_prepare,
    .run = copy_run,
    .release = wpk_free,
    .user = NULL,
};
