/* hoist_scratch.c -- a loop pass of the cpu backend: the heap allocations that enclose a
 * kernel's whole body (lowering puts root intermediates, e.g. a padded copy of the input,
 * there) become kernel arguments, so the caller hands in scratch memory planned once instead
 * of the kernel calling aligned_alloc and free on every run. Allocations inside loops stay:
 * each iteration (each thread of a parallel loop) needs its own. */
#include "kernels/cpu_kernel.h"

int cpu_hoist_scratch(te_ctx *c, loop_func *f, int max) {
    int n = 0;
    const loop_stmt *body = f->body;
    const loop_buffer *taken[CPU_MAX_SCRATCH];
    if (max > CPU_MAX_SCRATCH) max = CPU_MAX_SCRATCH;
    while (body && body->kind == LOOP_ALLOC && body->buffer->scope == LOOP_SCOPE_HEAP && n < max) {
        taken[n++] = body->buffer;
        body = body->body;
    }
    if (!n) return 0;
    loop_buffer **args = arena_alloc(&c->mem, sizeof *args * (size_t)(f->nargs + n));
    if (!args) {
        c->oom = true;
        return -1;
    }
    for (int i = 0; i < f->nargs; i++) args[i] = f->args[i];
    for (int i = 0; i < n; i++) {
        /* the buffer is the lowering's, in this arena; as an argument it is caller memory */
        loop_buffer *b = (loop_buffer *)taken[i];
        b->scope = LOOP_SCOPE_ARG;
        args[f->nargs + i] = b;
    }
    f->args = args;
    f->nargs += n;
    f->body = body;
    return n;
}
