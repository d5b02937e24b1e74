/* broadcast.c -- the run walker of broadcasting elementwise ops (see broadcast.h). */
#include "ops/broadcast.h"

#include "ops/op_util.h"

/* Below this many output elements a loop stays on one thread (op_parallel). */
#define PAR_MIN 32768
/* Elements per task: long runs are cut so one big same-shape op still spreads over threads. */
#define BLOCK 16384

/* y's dims merged into m dims (dim), each input's element strides along them (0 where
 * broadcast); a task is one block of one run of the innermost dim. */
typedef struct bcast_job {
    bcast_run_fn fn;
    const void *self;
    int nin, m;
    int64_t dim[WPK_MAX_DIMS], stride[BCAST_MAX_IN][WPK_MAX_DIMS];
    int64_t inner, nblock;
    size_t esize[BCAST_MAX_IN], ysize;
    const char *src[BCAST_MAX_IN];
    char *dst;
} bcast_job;

static void run_task(const bcast_job *j, int64_t t) {
    int64_t row = t / j->nblock, start = (t % j->nblock) * BLOCK;
    int64_t len = j->inner - start < BLOCK ? j->inner - start : BLOCK;
    int64_t off[BCAST_MAX_IN], step[BCAST_MAX_IN];
    for (int k = 0; k < j->nin; k++) {
        step[k] = j->stride[k][j->m - 1];
        off[k] = start * step[k];
    }
    int64_t rem = row;
    for (int d = j->m - 2; d >= 0; d--) {
        int64_t idx = rem % j->dim[d];
        rem /= j->dim[d];
        for (int k = 0; k < j->nin; k++) off[k] += idx * j->stride[k][d];
    }
    const char *src[BCAST_MAX_IN];
    for (int k = 0; k < j->nin; k++) src[k] = j->src[k] + off[k] * (int64_t)j->esize[k];
    j->fn(j->self, src, step, j->dst + (row * j->inner + start) * (int64_t)j->ysize, len);
}

/* Whether dim i (of extent d) continues the last merged dim contiguously for every input. */
static bool mergeable(const bcast_job *j, int64_t (*s)[WPK_MAX_DIMS], int i, int64_t d) {
    for (int k = 0; k < j->nin; k++)
        if (j->stride[k][j->m - 1] != s[k][i] * d) return false;
    return true;
}

void op_bcast_apply(const ir_tensor *const *in, int nin, ir_tensor *y, bcast_run_fn fn,
                    const void *self) {
    int64_t total = ir_numel(y);
    if (total == 0) return;
    int64_t s[BCAST_MAX_IN][WPK_MAX_DIMS];
    bcast_job j = {.fn = fn, .self = self, .nin = nin, .ysize = wpk_dtype_size(y->dtype),
                   .dst = y->data};
    for (int k = 0; k < nin; k++) {
        op_broadcast_strides(in[k], y->ndim, y->dims, s[k]);
        j.esize[k] = wpk_dtype_size(in[k]->dtype);
        j.src[k] = in[k]->data;
    }
    for (int i = 0; i < y->ndim; i++) {
        int64_t d = y->dims[i];
        if (d == 1) continue;
        if (j.m > 0 && mergeable(&j, s, i, d)) {
            j.dim[j.m - 1] *= d;
            for (int k = 0; k < nin; k++) j.stride[k][j.m - 1] = s[k][i];
        } else {
            j.dim[j.m] = d;
            for (int k = 0; k < nin; k++) j.stride[k][j.m] = s[k][i];
            j.m++;
        }
    }
    if (j.m == 0) { /* one element */
        j.dim[0] = 1;
        for (int k = 0; k < nin; k++) j.stride[k][0] = 1;
        j.m = 1;
    }
    j.inner = j.dim[j.m - 1];
    j.nblock = (j.inner + BLOCK - 1) / BLOCK;
    int64_t tasks = total / j.inner * j.nblock;
    if (op_parallel(total, PAR_MIN)) {
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < tasks; t++) run_task(&j, t);
    } else {
        for (int64_t t = 0; t < tasks; t++) run_task(&j, t);
    }
}
