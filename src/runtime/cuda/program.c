/* program.c -- the CUDA backend's executor (cuda_program.h): a compiled plan's kernels, weights
 * and workspace on one device, run on the backend's stream directly or as one captured CUDA
 * Graph. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/context.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_program.h"

typedef struct pstep {
    rt_cuda_step s;
    uint64_t args[RT_CUDA_STEP_ARGS];  /* resolved device addresses */
    uint64_t src, dst;
} pstep;

struct rt_cuda_program {
    rt_cuda *d;
    rt_cuda_kernel **kernels;
    int nkernels;
    pstep *steps;
    int nsteps;
    uint64_t workspace, weights;
    size_t workspace_bytes, weights_bytes;
    rt_cuda_io *inputs, *outputs;
    int ninputs, noutputs;
    size_t *in_off, *out_off;          /* offsets into the pinned staging */
    unsigned char *pinned;             /* inputs then outputs */
    size_t pinned_bytes;
    bool want_graph;
    cu_graph graph;
    cu_graph_exec exec;
    int64_t graph_launches, kernel_launches;
};

static wpk_status bad(rt_cuda *d, const char *node, const char *fmt, const char *what,
                      uint64_t off, uint64_t bytes, uint64_t cap) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, what);
    return wpk_error(rt_cuda_ctx(d), WPK_ERR_INVALID_ARG, "CUDA program: step '%s': %s at offset "
                     "%" PRIu64 " (+%" PRIu64 " bytes) is outside its space of %" PRIu64 " bytes",
                     node ? node : "?", msg, off, bytes, cap);
}

/* The device address of r, checked to hold `bytes` (0: just inside). */
static wpk_status resolve(rt_cuda_program *p, const char *node, const char *what, rt_cuda_ref r,
                          uint64_t bytes, uint64_t *out) {
    uint64_t base = r.space == RT_CUDA_WEIGHTS ? p->weights : p->workspace;
    uint64_t cap = r.space == RT_CUDA_WEIGHTS ? p->weights_bytes : p->workspace_bytes;
    if ((r.space != RT_CUDA_WEIGHTS && r.space != RT_CUDA_WORKSPACE) || r.offset > cap ||
        bytes > cap - r.offset || (bytes == 0 && r.offset >= cap))
        return bad(p->d, node, "%s", what, r.offset, bytes, cap);
    *out = base + r.offset;
    return WPK_OK;
}

void rt_cuda_program_free(rt_cuda_program *p) {
    if (!p) return;
    const rt_cu_api *cu = rt_cuda_cu(p->d);
    if (p->exec) cu->graph_exec_destroy(p->exec);
    if (p->graph) cu->graph_destroy(p->graph);
    for (int i = 0; i < p->nkernels; i++) rt_cuda_kernel_free(p->kernels[i]);
    if (p->pinned) cu->mem_free_host(p->pinned);
    rt_cuda_free(p->d, p->workspace);
    rt_cuda_free(p->d, p->weights);
    wpk_free(p->kernels);
    wpk_free(p->steps);
    wpk_free(p->inputs);
    wpk_free(p->outputs);
    wpk_free(p->in_off);
    wpk_free(p->out_off);
    wpk_free(p);
}

static void *dup(const void *src, size_t n, size_t size) {
    void *p = wpk_calloc(n ? n : 1, size);
    if (p && n) memcpy(p, src, n * size);
    return p;
}

wpk_status rt_cuda_program_create(rt_cuda *d, const rt_cuda_program_desc *desc, bool graph,
                                  rt_cuda_program **out) {
    *out = NULL;
    wpk_context *ctx = rt_cuda_ctx(d);
    const rt_cu_api *cu = rt_cuda_cu(d);
    if (!desc || desc->nimages < 0 || desc->nsteps < 0 || desc->ninputs < 0 ||
        desc->noutputs < 0 || (desc->weights_bytes && !desc->weights))
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "CUDA program: a malformed description");
    rt_cuda_program *p = wpk_calloc(1, sizeof *p);
    if (!p) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory creating a CUDA program");
    p->d = d;
    p->want_graph = graph && cu->stream_begin_capture && cu->stream_end_capture &&
                    cu->graph_instantiate && cu->graph_launch && cu->graph_exec_destroy &&
                    cu->graph_destroy;
    p->kernels = wpk_calloc(desc->nimages ? (size_t)desc->nimages : 1, sizeof *p->kernels);
    p->steps = wpk_calloc(desc->nsteps ? (size_t)desc->nsteps : 1, sizeof *p->steps);
    p->inputs = dup(desc->inputs, (size_t)desc->ninputs, sizeof *p->inputs);
    p->outputs = dup(desc->outputs, (size_t)desc->noutputs, sizeof *p->outputs);
    p->in_off = wpk_calloc(desc->ninputs ? (size_t)desc->ninputs : 1, sizeof *p->in_off);
    p->out_off = wpk_calloc(desc->noutputs ? (size_t)desc->noutputs : 1, sizeof *p->out_off);
    wpk_status st = WPK_OK;
    if (!p->kernels || !p->steps || !p->inputs || !p->outputs || !p->in_off || !p->out_off) {
        rt_cuda_program_free(p);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory creating a CUDA program");
    }
    p->ninputs = desc->ninputs, p->noutputs = desc->noutputs;
    for (int i = 0; i < desc->nimages && !st; i++) {
        const rt_cuda_image *im = &desc->images[i];
        st = rt_cuda_kernel_load(d, im->data, im->size, im->name, &im->dims, &p->kernels[i]);
        if (!st) p->nkernels++;
    }
    /* the workspace and the weights: one allocation each, the weights uploaded once */
    p->workspace_bytes = desc->workspace_bytes, p->weights_bytes = desc->weights_bytes;
    if (!st && p->workspace_bytes) st = rt_cuda_alloc(d, p->workspace_bytes, &p->workspace);
    if (!st && p->weights_bytes) st = rt_cuda_alloc(d, p->weights_bytes, &p->weights);
    if (!st && p->weights_bytes)
        st = rt_cuda_upload(d, p->weights, desc->weights, p->weights_bytes);
    /* pinned staging: copies from it run asynchronously and can be captured in a graph */
    size_t pin = 0;
    for (int i = 0; i < p->ninputs; i++)
        p->in_off[i] = pin, pin += (p->inputs[i].bytes + 63) & ~(size_t)63;
    for (int i = 0; i < p->noutputs; i++)
        p->out_off[i] = pin, pin += (p->outputs[i].bytes + 63) & ~(size_t)63;
    p->pinned_bytes = pin;
    if (!st && pin) {
        if (!cu->mem_alloc_host || !cu->mem_free_host) {
            st = wpk_error(ctx, WPK_ERR_UNSUPPORTED, "CUDA program: the driver has no pinned host "
                           "memory (cuMemAllocHost)");
        } else {
            void *h = NULL;
            st = rt_cuda_check(d, cu->mem_alloc_host(&h, pin), "allocating pinned staging");
            p->pinned = h;
        }
    }
    for (int i = 0; i < desc->nsteps && !st; i++) {
        pstep *ps = &p->steps[i];
        ps->s = desc->steps[i];
        const char *node = ps->s.node;
        if (ps->s.kernel >= 0) {
            if (ps->s.kernel >= p->nkernels || ps->s.nargs < 0 || ps->s.nargs > RT_CUDA_STEP_ARGS)
                st = wpk_error(ctx, WPK_ERR_INVALID_ARG, "CUDA program: step '%s' names kernel %d "
                               "of %d with %d arguments", node ? node : "?", ps->s.kernel,
                               p->nkernels, ps->s.nargs);
            for (int a = 0; a < ps->s.nargs && !st; a++)
                st = resolve(p, node, "an argument", ps->s.args[a], 0, &ps->args[a]);
        } else {
            if (!cu->memcpy_dtod_async)
                st = wpk_error(ctx, WPK_ERR_UNSUPPORTED, "CUDA program: the driver has no "
                               "device-to-device copy (cuMemcpyDtoDAsync)");
            if (!st) st = resolve(p, node, "the copy's source", ps->s.copy_src, ps->s.copy_bytes,
                                  &ps->src);
            if (!st) st = resolve(p, node, "the copy's destination", ps->s.copy_dst,
                                  ps->s.copy_bytes, &ps->dst);
        }
        p->nsteps = i + 1;
    }
    for (int i = 0; i < p->ninputs && !st; i++) {
        uint64_t a;
        st = resolve(p, "(input)", "an input", p->inputs[i].at, p->inputs[i].bytes, &a);
    }
    for (int i = 0; i < p->noutputs && !st; i++) {
        uint64_t a;
        st = resolve(p, "(output)", "an output", p->outputs[i].at, p->outputs[i].bytes, &a);
    }
    if (st) {
        rt_cuda_program_free(p);
        return st;
    }
    *out = p;
    return WPK_OK;
}

/* Queue one inference on the stream: inputs in, the steps, outputs out. */
static wpk_status enqueue(rt_cuda_program *p) {
    rt_cuda *d = p->d;
    const rt_cu_api *cu = rt_cuda_cu(d);
    cu_stream s = rt_cuda_stream(d);
    wpk_status st;
    for (int i = 0; i < p->ninputs; i++) {
        uint64_t dst = p->workspace + p->inputs[i].at.offset;
        if ((st = rt_cuda_upload_async(d, dst, p->pinned + p->in_off[i], p->inputs[i].bytes)))
            return st;
    }
    for (int i = 0; i < p->nsteps; i++) {
        pstep *ps = &p->steps[i];
        if (ps->s.kernel >= 0) {
            st = rt_cuda_kernel_launch(d, p->kernels[ps->s.kernel], ps->args, ps->s.nargs);
            if (!st) p->kernel_launches++;
        } else {
            st = rt_cuda_check(d, cu->memcpy_dtod_async(ps->dst, ps->src, ps->s.copy_bytes, s),
                               "a device copy");
        }
        if (st) {
            wpk_error_prefix(rt_cuda_ctx(d), "step '%s'", ps->s.node ? ps->s.node : "?");
            return st;
        }
    }
    for (int i = 0; i < p->noutputs; i++) {
        uint64_t src = p->workspace + p->outputs[i].at.offset;
        if ((st = rt_cuda_download_async(d, p->pinned + p->out_off[i], src, p->outputs[i].bytes)))
            return st;
    }
    return WPK_OK;
}

/* Capture one inference into a graph and instantiate it; on a driver or capture failure the
 * program falls back to direct launches (the capture's error stays on the context as a note). */
static wpk_status capture(rt_cuda_program *p) {
    rt_cuda *d = p->d;
    const rt_cu_api *cu = rt_cuda_cu(d);
    cu_stream s = rt_cuda_stream(d);
    int64_t before = p->kernel_launches;
    wpk_status st = rt_cuda_check(d, cu->stream_begin_capture(s,
                                                              CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                                  "beginning the graph capture");
    if (st) return st;
    wpk_status qs = enqueue(p);
    cu_graph g = NULL;
    st = rt_cuda_check(d, cu->stream_end_capture(s, &g), "ending the graph capture");
    p->kernel_launches = before; /* captured, not launched */
    if (qs || st) {
        if (g) cu->graph_destroy(g);
        return qs ? qs : st;
    }
    p->graph = g;
    return rt_cuda_check(d, cu->graph_instantiate(&p->exec, g, 0), "instantiating the graph");
}

wpk_status rt_cuda_program_run(rt_cuda_program *p, const void *const *inputs,
                               void *const *outputs, int timeout_ms) {
    rt_cuda *d = p->d;
    for (int i = 0; i < p->ninputs; i++)
        memcpy(p->pinned + p->in_off[i], inputs[i], p->inputs[i].bytes);
    wpk_status st;
    if (p->want_graph && !p->exec) {
        st = capture(p);
        if (st) {
            if (rt_cuda_lost(d)) return st;
            p->want_graph = false; /* run the steps one by one from now on */
        }
    }
    if (p->exec) {
        st = rt_cuda_check(d, rt_cuda_cu(d)->graph_launch(p->exec, rt_cuda_stream(d)),
                           "launching the graph");
        if (!st) p->graph_launches++;
    } else {
        st = enqueue(p);
    }
    if (!st) st = rt_cuda_sync(d, timeout_ms);
    if (st) return st;
    for (int i = 0; i < p->noutputs; i++)
        memcpy(outputs[i], p->pinned + p->out_off[i], p->outputs[i].bytes);
    return WPK_OK;
}

bool rt_cuda_program_uses_graph(const rt_cuda_program *p) { return p->exec != NULL; }

void rt_cuda_program_counts(const rt_cuda_program *p, int64_t *graph_launches,
                            int64_t *kernel_launches) {
    if (graph_launches) *graph_launches = p->graph_launches;
    if (kernel_launches) *kernel_launches = p->kernel_launches;
}

size_t rt_cuda_program_device_bytes(const rt_cuda_program *p) {
    return p->workspace_bytes + p->weights_bytes;
}
