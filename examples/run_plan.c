/* run_plan.c -- an application of libwpk_runtime alone: load a compiled plan (.wpk, made by
 * `wpk compile`), feed each input from a .npy file or seeded random values, run it, and write
 * every output as OUTDIR/<name>.npy. It uses nothing but include/wpk_runtime.h; the small .npy
 * reader and writer below are its own.
 *
 *   run_plan PLAN.wpk [-i NAME=FILE.npy]... [-o OUTDIR] [--threads N] [--seed S]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "wpk_runtime.h"

#define MAX_INPUTS 64

static const char *npy_descr(wpk_dtype t) {
    switch (t) {
    case WPK_DTYPE_FLOAT32: return "<f4";
    case WPK_DTYPE_FLOAT64: return "<f8";
    case WPK_DTYPE_INT64: return "<i8";
    case WPK_DTYPE_INT32: return "<i4";
    case WPK_DTYPE_INT8: return "|i1";
    case WPK_DTYPE_UINT8: return "|u1";
    case WPK_DTYPE_BOOL: return "|b1";
    default: return NULL;
    }
}

static size_t numel(const wpk_tensor_view *v) {
    size_t n = 1;
    for (int d = 0; d < v->ndim; d++) n *= (size_t)v->dims[d];
    return n;
}

/* Write v as a version 1.0 .npy file (little-endian host assumed, as the runtime's). */
static int npy_write(const char *path, const wpk_tensor_view *v) {
    const char *descr = npy_descr(v->dtype);
    if (!descr) return fprintf(stderr, "run_plan: %s: no .npy type for this dtype\n", path), -1;
    char shape[256] = "";
    size_t n = 0;
    for (int d = 0; d < v->ndim; d++)
        n += (size_t)snprintf(shape + n, sizeof shape - n, "%lld,%s", (long long)v->dims[d],
                              v->ndim > 1 && d + 1 < v->ndim ? " " : "");
    if (v->ndim > 1) shape[strlen(shape) - 1] = 0; /* (a, b) rather than (a, b,) */
    char head[512];
    int len = snprintf(head, sizeof head, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                       descr, shape);
    int total = (10 + len + 1 + 63) / 64 * 64; /* magic, version, length, dict, newline */
    memset(head + len, ' ', (size_t)(total - 10 - len - 1));
    head[total - 10 - 1] = '\n';
    FILE *f = fopen(path, "wb");
    if (!f) return fprintf(stderr, "run_plan: %s: %s\n", path, strerror(errno)), -1;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)((total - 10) & 255),
                             (unsigned char)((total - 10) >> 8)};
    size_t bytes = numel(v) * wpk_dtype_size(v->dtype);
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(head, 1, (size_t)(total - 10), f) == (size_t)(total - 10) &&
             (bytes == 0 || fwrite(v->data, 1, bytes, f) == bytes);
    ok = fclose(f) == 0 && ok;
    if (!ok) fprintf(stderr, "run_plan: %s: write error\n", path);
    return ok ? 0 : -1;
}

/* Read a C-order .npy file of dtype `want` and exactly `count` elements into a new buffer. */
static void *npy_read(const char *path, const wpk_tensor_view *want) {
    FILE *f = fopen(path, "rb");
    if (!f) return fprintf(stderr, "run_plan: %s: %s\n", path, strerror(errno)), NULL;
    unsigned char pre[10];
    char head[4096];
    void *data = NULL;
    size_t hlen = 0;
    if (fread(pre, 1, 10, f) == 10 && pre[0] == 0x93 && !memcmp(pre + 1, "NUMPY", 5) && pre[6] == 1)
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    if (hlen == 0 || hlen >= sizeof head || fread(head, 1, hlen, f) != hlen) {
        fprintf(stderr, "run_plan: %s: not a version 1 .npy file\n", path);
    } else {
        head[hlen] = 0;
        const char *descr = npy_descr(want->dtype);
        char key[32];
        snprintf(key, sizeof key, "'%s'", descr ? descr : "?");
        /* the shape's product must be the input's element count */
        size_t count = 1;
        const char *s = strstr(head, "'shape':");
        s = s ? strchr(s, '(') : NULL;
        while (s && *s && *s != ')') {
            char *end;
            long long d = strtoll(s + 1, &end, 10);
            if (end != s + 1) count *= (size_t)d;
            s = strpbrk(end, ",)");
            if (s && *s == ',') continue;
        }
        if (!strstr(head, key) || strstr(head, "True"))
            fprintf(stderr, "run_plan: %s: expected C-order %s data\n", path, key);
        else if (count != numel(want))
            fprintf(stderr, "run_plan: %s: %zu elements, the input takes %zu\n", path, count,
                    numel(want));
        else if ((data = malloc(count * wpk_dtype_size(want->dtype) + 1)) &&
                 fread(data, wpk_dtype_size(want->dtype), count, f) != count) {
            fprintf(stderr, "run_plan: %s: truncated\n", path);
            free(data);
            data = NULL;
        }
    }
    fclose(f);
    return data;
}

/* Seeded uniform values in [-1, 1) for float inputs, zeros otherwise (a small LCG: the
 * example needs no particular generator, only a repeatable one). */
static void *random_input(const wpk_tensor_view *v, unsigned long long *seed) {
    size_t n = numel(v);
    void *data = calloc(n + 1, wpk_dtype_size(v->dtype) ? wpk_dtype_size(v->dtype) : 1);
    if (data && v->dtype == WPK_DTYPE_FLOAT32)
        for (size_t i = 0; i < n; i++) {
            *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
            ((float *)data)[i] = (float)((double)(*seed >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
        }
    return data;
}

int main(int argc, char **argv) {
    const char *plan_path = NULL, *outdir = ".";
    const char *given[MAX_INPUTS];
    int ngiven = 0;
    wpk_plan_params params = wpk_plan_default_params();
    unsigned long long seed = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-i") && i + 1 < argc && ngiven < MAX_INPUTS) given[ngiven++] = argv[++i];
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) outdir = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) params.threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (argv[i][0] != '-' && !plan_path) plan_path = argv[i];
        else {
            fprintf(stderr, "usage: run_plan PLAN.wpk [-i NAME=FILE.npy]... [-o OUTDIR] "
                    "[--threads N] [--seed S]\n");
            return 1;
        }
    }
    if (!plan_path) return fprintf(stderr, "run_plan: no plan given\n"), 1;
    wpk_context *ctx = wpk_context_create();
    wpk_plan *plan = NULL;
    if (!ctx) return 2;
    wpk_status st = wpk_plan_load(ctx, plan_path, &params, &plan);
    for (int i = 0; st == WPK_OK && i < wpk_plan_num_inputs(plan); i++) {
        wpk_tensor_view in = wpk_plan_input_info(plan, i);
        const char *file = NULL;
        for (int g = 0; g < ngiven; g++) {
            size_t n = strlen(in.name);
            if (!strncmp(given[g], in.name, n) && given[g][n] == '=') file = given[g] + n + 1;
        }
        void *data = file ? npy_read(file, &in) : random_input(&in, &seed);
        if (!data) {
            wpk_plan_free(plan);
            wpk_context_free(ctx);
            return 1;
        }
        st = wpk_plan_set_input(plan, in.name, in.dtype, in.dims, in.ndim, data);
        free(data);
    }
    if (st == WPK_OK) st = wpk_plan_run(plan);
    if (st == WPK_OK) mkdir(outdir, 0755);
    int rc = st == WPK_OK ? 0 : 1;
    for (int i = 0; st == WPK_OK && rc == 0 && i < wpk_plan_num_outputs(plan); i++) {
        wpk_tensor_view out;
        st = wpk_plan_output(plan, i, &out);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.npy", outdir, out.name);
        if (st == WPK_OK && npy_write(path, &out)) rc = 1;
        if (st == WPK_OK && rc == 0) printf("output %s: %s\n", out.name, path);
    }
    if (st) {
        fprintf(stderr, "run_plan: %s: %s\n", wpk_status_name(st), wpk_context_error(ctx));
        rc = st == WPK_ERR_INTERNAL ? 2 : 1;
    }
    wpk_plan_free(plan);
    wpk_context_free(ctx);
    return rc;
}
