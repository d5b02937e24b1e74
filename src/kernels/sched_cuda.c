/* sched_cuda.c -- what the CUDA schedules share (templates_cuda.h): the knobs and default of the
 * flat schedule of injective outputs and the schedule itself, the candidate lists of the tiled
 * templates' knobs, and the cooperative copy of a shared-memory stage. */
#include <string.h>

#include "kernels/common.h"
#include "kernels/conv.h"
#include "kernels/templates_cuda.h"

int64_t tune_cuda_pow2_at_least(int64_t v) {
    int64_t p = 1;
    while (p < v) p *= 2;
    return p;
}

void tune_cuda_add_upto(tune_space *s, const char *name, const int64_t *cand, int n,
                        int64_t limit) {
    int64_t v[TUNE_MAX_VALUES];
    int k = 0;
    for (int i = 0; i < n && k < TUNE_MAX_VALUES; i++)
        if (i == 0 || cand[i] <= limit) v[k++] = cand[i];
    tune_space_add(s, name, k, v);
}

wpk_status tune_cuda_cooperative(te_stage *st, int ndims, const int64_t *threads) {
    static const char *const idx[3] = {"threadIdx.x", "threadIdx.y", "threadIdx.z"};
    te_tensor *t = st->tensor;
    te_iter *f = t->axes[0], *lane[3], *order[4];
    for (int d = 1; d < t->ndim; d++) TRY(te_fuse(st, f, t->axes[d], &f));
    for (int d = 0; d < ndims; d++) TRY(te_split(st, f, threads[d], &f, &lane[d]));
    /* the outer rest, then z, y, x: x fastest */
    order[0] = f;
    for (int d = 0; d < ndims; d++) order[1 + d] = lane[ndims - 1 - d];
    TRY(te_reorder(st, ndims + 1, order));
    for (int d = ndims - 1; d >= 0; d--) TRY(te_bind(st, lane[d], idx[d]));
    return WPK_OK;
}

void tune_cuda_flat_space(const tune_task *t, tune_space *s, bool vec_knob, bool vec_ok) {
    memset(s, 0, sizeof *s);
    static const int64_t threads[] = {32, 64, 128, 256, 512, 1024}, per[] = {1, 2, 4};
    static const int64_t vecs[] = {1, 4};
    const int64_t n = ir_numel(&t->out[0]);
    int k = 1;
    while (k < 6 && threads[k - 1] < n) k++;
    tune_space_add(s, "threads", k, threads);
    int kp = 1;
    while (kp < 3 && per[kp] * 32 <= n) kp++;
    tune_space_add(s, "per_thread", kp, per);
    if (vec_knob) tune_space_add(s, "vec", vec_ok ? 2 : 1, vecs);
}

void tune_cuda_flat_default(const tune_task *t, const tune_space *s, bool vec_ok,
                            tune_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    const int64_t n = ir_numel(&t->out[0]);
    const bool v = vec_ok && n >= 4096;
    tune_config_set(s, cfg, "vec", v ? 4 : 1);
    int64_t th = 256;
    while (th > 32 && th * (v ? 4 : 1) / 2 >= n) th /= 2;
    tune_config_set(s, cfg, "threads", th);
    tune_config_set(s, cfg, "per_thread", 1);
}

wpk_status tune_cuda_schedule_flat(te_ctx *c, const char *tmpl, te_tensor *y, int64_t threads,
                                   int64_t per, int64_t vec, te_schedule **out) {
    *out = NULL;
    /* a fresh schedule of y: whatever schedule built it before is not this one */
    te_schedule *sc = te_schedule_create(c, &y, 1);
    if (!sc) return tune_failed(c, tmpl);
    *out = sc;
    te_stage *so = te_stage_of(sc, y);
    te_iter *f = y->axes[0], *v = NULL;
    if (vec > 1) {
        TRY(te_split(so, y->axes[y->ndim - 1], vec, &f, &v));
        if (y->ndim > 1) {
            TRY(te_reorder(so, 2, (te_iter *[]){y->axes[y->ndim - 2], f}));
            te_iter *last = f;
            f = y->axes[0];
            for (int d = 1; d < y->ndim - 1; d++) TRY(te_fuse(so, f, y->axes[d], &f));
            TRY(te_fuse(so, f, last, &f));
        }
    } else {
        for (int d = 1; d < y->ndim; d++) TRY(te_fuse(so, f, y->axes[d], &f));
    }
    te_iter *fo, *th, *bl, *u;
    TRY(te_split(so, f, threads, &fo, &th));
    TRY(te_split(so, fo, per, &bl, &u));
    TRY(te_reorder(so, 3, (te_iter *[]){bl, th, u}));
    TRY(te_bind(so, bl, "blockIdx.x"));
    TRY(te_bind(so, th, "threadIdx.x"));
    if (per > 1) TRY(te_unroll(so, u));
    if (v) TRY(te_vectorize(so, v));

    /* every other stage: inlined, or a reduction accumulated in the thread's registers */
    for (int i = 0; i < sc->nstages; i++) {
        te_stage *st = sc->stages[i];
        if (st == so) continue;
        if (st->tensor->body && st->tensor->body->kind == TE_REDUCE) {
            if (v)
                return wpk_error(c->err, WPK_ERR_INVALID_ARG, "%s: vec=4 with a reduction "
                                 "('%s')", tmpl, st->tensor->name);
            TRY(te_compute_at(st, so, u));
            TRY(te_set_scope(st, "local"));
        } else {
            TRY(te_compute_inline(st));
        }
    }
    return WPK_OK;
}

wpk_status tune_cuda_build_flat(const kernel_provider *self, te_ctx *c, const tune_space *s,
                                const tune_config *cfg, tune_build *out) {
    return tune_cuda_schedule_flat(c, self->name, out->args[out->nargs - 1],
                                   tune_value(s, cfg, "threads"), tune_value(s, cfg, "per_thread"),
                                   tune_config_get(s, cfg, "vec", 1), &out->schedule);
}
