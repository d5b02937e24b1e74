/* layout_conv.c -- GFLOP/s of the NCHW reference Conv (ops/conv.c) against ConvNCHWc on the
 * blocked layout (ops/blocked.c) on ResNet-18 and MobileNetV2 conv shapes, and the cost of a
 * Reorder per element (what the layout pass weighs against the convs' gain). Checks that both
 * convs agree before timing. Built and run by bench/layout_conv.py, which adds provenance.
 *
 * usage: layout_conv [-t THREADS] [-r REPEATS] [-x BLOCK]
 * Output: one line per shape and kernel: name, kernel, threads, GFLOP/s (median, best), the raw
 * milliseconds of every sample; then one line per Reorder direction in ns per element. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ir/graph.h"
#include "ops/blocked.h"

typedef struct shape {
    const char *name;
    int64_t c, m, h, w, k, s, p, group;
} shape;

static const shape shapes[] = {
    {"r18.conv1 224 3->64 k7s2", 3, 64, 224, 224, 7, 2, 3, 1},
    {"r18.l1 56 64->64 k3", 64, 64, 56, 56, 3, 1, 1, 1},
    {"r18.l2 28 128->128 k3", 128, 128, 28, 28, 3, 1, 1, 1},
    {"r18.l3 14 256->256 k3", 256, 256, 14, 14, 3, 1, 1, 1},
    {"r18.l4 7 512->512 k3", 512, 512, 7, 7, 3, 1, 1, 1},
    {"r18.l2.0 56 64->128 k3s2", 64, 128, 56, 56, 3, 2, 1, 1},
    {"r18.down 56 64->128 k1s2", 64, 128, 56, 56, 1, 2, 0, 1},
    {"1x1 28 128->512", 128, 512, 28, 28, 1, 1, 0, 1},
    {"1x1 14 256->1024", 256, 1024, 14, 14, 1, 1, 0, 1},
    {"mnv2 dw 112 32 k3", 32, 32, 112, 112, 3, 1, 1, 32},
    {"mnv2 dw 14 384 k3", 384, 384, 14, 14, 3, 1, 1, 384},
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static float *rnd(int64_t count, unsigned *seed) {
    float *p = malloc(sizeof(float) * (size_t)(count + 1));
    for (int64_t i = 0; i < count; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        p[i] = (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    return p;
}

static ir_tensor tensor(int ndim, const int64_t *dims, void *data) {
    ir_tensor t = {.dtype = WPK_DTYPE_FLOAT32, .ndim = ndim, .data = data};
    memcpy(t.dims, dims, sizeof(int64_t) * (size_t)ndim);
    return t;
}

/* Shape function, allocation of the output, and a function that runs the kernel once. */
typedef struct call {
    wpk_context *ctx;
    ir_node node;
    ir_tensor *in[4], *out[1];
    ir_tensor y;
} call;

static int prepare(call *c) {
    const ir_op_info *info = ir_op_get(c->node.op);
    c->out[0] = &c->y;
    if (info->shape(c->ctx, &c->node, c->in, c->out)) {
        fprintf(stderr, "%s\n", wpk_context_error(c->ctx));
        return 1;
    }
    c->y.data = calloc((size_t)ir_numel(&c->y) + 1, sizeof(float));
    return 0;
}

static int invoke(call *c) {
    if (ir_op_get(c->node.op)->ref(c->ctx, &c->node, c->in, c->out)) {
        fprintf(stderr, "%s\n", wpk_context_error(c->ctx));
        return 1;
    }
    return 0;
}

/* Time `reps` calls one by one after two warm-ups; samples in ms, sorted. */
static int timeit(call *c, int reps, double *ms) {
    for (int i = 0; i < 2; i++)
        if (invoke(c)) return 1;
    for (int i = 0; i < reps; i++) {
        double t0 = now();
        if (invoke(c)) return 1;
        ms[i] = 1e3 * (now() - t0);
    }
    return 0;
}

static void report(const char *name, const char *kernel, int threads, double flops, double *ms,
                   int reps) {
    double *sorted = malloc(sizeof(double) * (size_t)reps);
    memcpy(sorted, ms, sizeof(double) * (size_t)reps);
    qsort(sorted, (size_t)reps, sizeof(double), cmp);
    double med = sorted[reps / 2], best = sorted[0];
    printf("%-26s %-10s t=%d  median %7.2f GFLOP/s  best %7.2f GFLOP/s  samples_ms", name,
           kernel, threads, flops / med * 1e-6, flops / best * 1e-6);
    for (int i = 0; i < reps; i++) printf(" %.3f", ms[i]);
    printf("\n");
    free(sorted);
}

static ir_attr ints(const char *name, int n, int64_t *v) {
    return (ir_attr){.name = name, .kind = IR_ATTR_INTS, .n = n, .ints = v};
}

int main(int argc, char **argv) {
    int threads = 1, reps = 9;
    int64_t x = 16;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-r")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-x")) x = atoi(argv[i + 1]);
    }
    omp_set_num_threads(threads);
    wpk_context *ctx = wpk_context_create();
    unsigned seed = 7;
    double *ms = malloc(sizeof(double) * (size_t)reps);
    int fail = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0] && !fail; si++) {
        const shape *s = &shapes[si];
        int64_t cg = s->c / s->group;
        bool dw = s->group > 1 && s->group == s->c && s->group == s->m;
        int64_t oh = (s->h + 2 * s->p - s->k) / s->s + 1, ow = (s->w + 2 * s->p - s->k) / s->s + 1;
        double flops = 2.0 * (double)(s->m * cg * s->k * s->k) * (double)(oh * ow);
        float *xd = rnd(s->c * s->h * s->w, &seed), *wd = rnd(s->m * cg * s->k * s->k, &seed);
        float *bd = rnd(s->m, &seed);
        int64_t xdims[4] = {1, s->c, s->h, s->w}, wdims[4] = {s->m, cg, s->k, s->k},
                bdims[1] = {s->m};
        ir_tensor X = tensor(4, xdims, xd), W = tensor(4, wdims, wd), B = tensor(1, bdims, bd);
        int64_t strides[2] = {s->s, s->s}, pads[4] = {s->p, s->p, s->p, s->p};
        ir_attr attrs[4] = {ints("strides", 2, strides), ints("pads", 4, pads),
                            {.name = "group", .kind = IR_ATTR_INT, .i = s->group},
                            {.name = "channels", .kind = IR_ATTR_INT, .i = s->m}};

        call ref = {.ctx = ctx, .in = {&X, &W, &B}};
        ref.node = (ir_node){.name = "conv", .op_type = "Conv", .domain = "", .op = IR_OP_CONV,
                             .nin = 3, .nout = 1, .nattr = 3, .attrs = attrs};
        if ((fail = prepare(&ref) || timeit(&ref, reps, ms))) break;
        report(s->name, "NCHW", threads, flops, ms, reps);

        /* The blocked input (NCHW when C is not a whole number of blocks, as the pass does). */
        bool nchw_in = s->c % x != 0;
        int64_t bi = nchw_in ? 1 : x, wpd[6];
        blocked_weight_dims(s->m, cg, s->k, s->k, bi, x, dw, wpd);
        float *wp = malloc(sizeof(float) * (size_t)(wpd[0] * wpd[1] * wpd[2] * wpd[3] * wpd[4] *
                                                    wpd[5]));
        blocked_pack_weights(wd, s->m, cg, s->k, s->k, bi, x, dw, wp);
        ir_tensor WP = tensor(6, wpd, wp);
        ir_attr rattrs[2] = {{.name = "to", .kind = IR_ATTR_STRING, .s = "NCHWc"},
                             {.name = "block", .kind = IR_ATTR_INT, .i = x}};
        call to = {.ctx = ctx, .in = {&X}};
        to.node = (ir_node){.name = "to", .op_type = "Reorder", .domain = "wpk",
                            .op = IR_OP_REORDER, .nin = 1, .nout = 1, .nattr = 2, .attrs = rattrs};
        if ((fail = prepare(&to) || invoke(&to))) break;
        call blk = {.ctx = ctx, .in = {nchw_in ? &X : &to.y, &WP, &B}};
        blk.node = (ir_node){.name = "conv", .op_type = "ConvNCHWc", .domain = "wpk",
                             .op = IR_OP_CONV_NCHWC, .nin = 3, .nout = 1, .nattr = 4,
                             .attrs = attrs};
        if ((fail = prepare(&blk) || timeit(&blk, reps, ms))) break;
        report(s->name, "NCHWc", threads, flops, ms, reps);

        /* The same conv reading its NCHW input directly (what the pass does at a region's
         * entry, sparing the Reorder there). */
        if (!nchw_in && s->group == 1) {
            int64_t wnd[6];
            blocked_weight_dims(s->m, cg, s->k, s->k, 1, x, false, wnd);
            float *wn = malloc(sizeof(float) * (size_t)(wnd[0] * wnd[1] * wnd[2] * wnd[3] *
                                                        wnd[4] * wnd[5]));
            blocked_pack_weights(wd, s->m, cg, s->k, s->k, 1, x, false, wn);
            ir_tensor WN = tensor(6, wnd, wn);
            call direct = blk;
            direct.in[0] = &X;
            direct.in[1] = &WN;
            if ((fail = timeit(&direct, reps, ms))) break;
            report(s->name, "NCHWc<NCHW", threads, flops, ms, reps);
            free(wn);
        }

        /* back to NCHW, compared with the reference */
        ir_attr battrs[3] = {{.name = "to", .kind = IR_ATTR_STRING, .s = "NCHW"},
                             {.name = "block", .kind = IR_ATTR_INT, .i = x},
                             {.name = "channels", .kind = IR_ATTR_INT, .i = s->m}};
        call back = {.ctx = ctx, .in = {&blk.y}};
        back.node = (ir_node){.name = "back", .op_type = "Reorder", .domain = "wpk",
                              .op = IR_OP_REORDER, .nin = 1, .nout = 1, .nattr = 3,
                              .attrs = battrs};
        if ((fail = prepare(&back) || invoke(&back))) break;
        const float *a = ref.y.data, *b = back.y.data;
        double err = 0, norm = 0;
        for (int64_t i = 0; i < ir_numel(&ref.y); i++) {
            err += (a[i] - b[i]) * (double)(a[i] - b[i]);
            norm += a[i] * (double)a[i];
        }
        if (sqrt(err / norm) > 1e-5) {
            fprintf(stderr, "%s: NCHWc differs from NCHW (rel L2 %.3g)\n", s->name,
                    sqrt(err / norm));
            fail = 1;
        }
        if (si == 1) { /* Reorder cost, on the 56x56x64 activation */
            double el = (double)ir_numel(&X);
            if ((fail = timeit(&to, reps, ms))) break;
            qsort(ms, (size_t)reps, sizeof(double), cmp);
            printf("reorder to NCHWc 56x56x64 t=%d  median %.3f ns/element\n", threads,
                   ms[reps / 2] * 1e6 / el);
            call back2 = back;
            back2.in[0] = &to.y;
            if ((fail = timeit(&back2, reps, ms))) break;
            qsort(ms, (size_t)reps, sizeof(double), cmp);
            printf("reorder to NCHW  56x56x64 t=%d  median %.3f ns/element\n", threads,
                   ms[reps / 2] * 1e6 / el);
        }
        free(xd), free(wd), free(bd), free(wp);
        free(ref.y.data), free(to.y.data), free(blk.y.data), free(back.y.data);
    }
    free(ms);
    wpk_context_free(ctx);
    return fail;
}
