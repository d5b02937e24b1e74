/* plan_io.c -- a cpu_program saved into a compiled plan and loaded back without a compiler (see
 * plan_io.h). Layout: the kernel objects, the kernels (symbol, object, argument layout), then
 * one record per node (what it runs, why, and its packed weights). */
#define _GNU_SOURCE /* dladdr, memfd_create */
#include "compile/plan_io.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/alloc.h"
#include "compile/program.h"

#define MAX_OBJECTS 64
#define MAX_STEP_PACKED TUNE_MAX_ARGS
/* far beyond any plan, small enough that sizes computed from them cannot overflow */
#define MAX_BYTES ((int64_t)1 << 40)

/* ---- saving ---- */

static const char *object_of(cg_kernel_fn fn) {
    Dl_info info;
    void *addr;
    memcpy(&addr, &fn, sizeof addr);
    return dladdr(addr, &info) && info.dli_fname ? info.dli_fname : NULL;
}

static wpk_status put_file(wpk_context *ctx, const char *path, artifact_writer *w) {
    FILE *f = fopen(path, "rb");
    if (!f) return wpk_error(ctx, WPK_ERR_IO, "kernel object '%s': %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 65536;
            uint8_t *b = wpk_realloc(buf, cap);
            if (!b) {
                wpk_free(buf);
                fclose(f);
                return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory reading '%s'", path);
            }
            buf = b;
        }
        size_t k = fread(buf + len, 1, cap - len, f);
        if (k == 0) break;
        len += k;
    }
    bool err = ferror(f);
    fclose(f);
    if (!err) aw_bytes(w, buf, len);
    wpk_free(buf);
    return err ? wpk_error(ctx, WPK_ERR_IO, "kernel object '%s': read error", path) : WPK_OK;
}

wpk_status cpu_program_save(wpk_context *ctx, const cpu_program *p, const ir_graph *g,
                            artifact_writer *w) {
    /* the objects the kernels live in: one per unit compiled */
    const char *objects[MAX_OBJECTS];
    int nobj = 0;
    int *obj_of = wpk_calloc((size_t)p->nkernels + 1, sizeof *obj_of);
    if (!obj_of) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory saving the plan");
    int nsaved = 0;
    for (int i = 0; i < p->nkernels; i++) {
        obj_of[i] = -1;
        if (!p->kernels[i].fn) continue;
        const char *path = object_of(p->kernels[i].fn);
        if (!path) {
            wpk_free(obj_of);
            return wpk_error(ctx, WPK_ERR_INTERNAL, "kernel %s: no object file behind it",
                             p->kernels[i].name);
        }
        int o = 0;
        while (o < nobj && strcmp(objects[o], path)) o++;
        if (o == nobj) {
            if (nobj == MAX_OBJECTS) {
                wpk_free(obj_of);
                return wpk_error(ctx, WPK_ERR_INTERNAL, "more than %d kernel objects",
                                 MAX_OBJECTS);
            }
            objects[nobj++] = path;
        }
        obj_of[i] = o;
        nsaved++;
    }
    wpk_status st = WPK_OK;
    aw_u32(w, (uint32_t)p->threads);
    aw_u32(w, (uint32_t)nobj);
    for (int o = 0; st == WPK_OK && o < nobj; o++) st = put_file(ctx, objects[o], w);
    aw_u32(w, (uint32_t)p->nkernels);
    aw_u32(w, (uint32_t)nsaved);
    for (int i = 0; st == WPK_OK && i < p->nkernels; i++) {
        const cpu_kernel *k = &p->kernels[i];
        if (obj_of[i] < 0) continue;
        aw_u32(w, (uint32_t)i);
        aw_u32(w, (uint32_t)obj_of[i]);
        aw_str(w, k->name);
        aw_str(w, k->tmpl ? k->tmpl->name : "");
        aw_str(w, k->config);
        aw_u32(w, (uint32_t)k->ninputs);
        aw_u32(w, (uint32_t)k->noutputs);
        aw_u32(w, (uint32_t)k->nscratch);
        for (int s = 0; s < k->nscratch; s++) aw_i64(w, k->scratch_off[s]);
        aw_i64(w, k->scratch_bytes);
        for (int a = 0; a < TUNE_MAX_ARGS; a++) aw_i64(w, k->pack_numel[a]);
    }
    wpk_free(obj_of);
    aw_u32(w, (uint32_t)g->nnodes);
    for (int n = 0; st == WPK_OK && n < g->nnodes; n++) {
        const cpu_step *s = &p->steps[n];
        aw_str(w, g->nodes[n].name);
        aw_str(w, g->nodes[n].op_type);
        aw_u32(w, (uint32_t)s->kind);
        aw_u32(w, (uint32_t)s->source);
        aw_str(w, s->impl);
        if (s->kind == CPU_STEP_LIB) {
            aw_str(w, s->lib->name);
            aw_u32(w, (uint32_t)s->lib_config);
        } else if (s->kind == CPU_STEP_KERNEL) {
            const cpu_kernel *k = &p->kernels[s->kernel];
            aw_u32(w, (uint32_t)s->kernel);
            int npacked = 0;
            for (int a = 0; a < k->ninputs && a < TUNE_MAX_ARGS; a++) npacked += k->pack_numel[a] > 0;
            aw_u32(w, (uint32_t)npacked);
            /* input argument a is argv[a]: the packed form made at plan time */
            for (int a = 0; a < k->ninputs && a < TUNE_MAX_ARGS; a++) {
                if (k->pack_numel[a] <= 0) continue;
                aw_u32(w, (uint32_t)a);
                aw_bytes(w, s->argv[a], sizeof(float) * (size_t)k->pack_numel[a]);
            }
        }
    }
    if (st == WPK_OK && w->oom) st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory saving the plan");
    return st;
}

/* ---- loading ---- */

static wpk_status damaged(wpk_context *ctx, const char *what, const char *why) {
    return wpk_error(ctx, WPK_ERR_PARSE, "%s: the plan is damaged: %s", what, why);
}

/* dlopen an object held in memory: through a memfd (nothing touches the disk), else a private
 * temporary file removed once loaded. */
static void *load_object(wpk_context *ctx, const char *what, const void *data, size_t n,
                         int *keep_fd, wpk_status *st) {
    *keep_fd = -1;
    char path[4200];
    int fd = -1;
    bool temp = false;
#ifdef MFD_CLOEXEC
    fd = memfd_create("wpk-kernels", MFD_CLOEXEC);
#endif
    if (fd >= 0) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/wpk-kernels-XXXXXX.so", tmp && *tmp ? tmp : "/tmp");
        fd = mkstemps(path, 3);
        temp = true;
    }
    if (fd < 0) {
        *st = wpk_error(ctx, WPK_ERR_IO, "%s: no place to load the kernels from: %s", what,
                        strerror(errno));
        return NULL;
    }
    const uint8_t *p = data;
    size_t left = n;
    while (left > 0) {
        ssize_t k = write(fd, p, left);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        p += k;
        left -= (size_t)k;
    }
    void *h = left == 0 ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    const char *why = h ? NULL : left ? strerror(errno) : dlerror();
    if (temp) unlink(path);
    if (h && !temp) *keep_fd = fd; /* see cpu_program.handle_fds */
    else close(fd);
    if (!h)
        *st = wpk_error(ctx, WPK_ERR_INTERNAL, "%s: a kernel object of the plan does not load: "
                        "%s", what, why ? why : "?");
    return h;
}

static wpk_status read_kernels(wpk_context *ctx, const char *what, artifact_reader *r,
                               cpu_program *p) {
    uint32_t nobj = ar_count(r, MAX_OBJECTS, 8);
    const void *obj_data[MAX_OBJECTS];
    size_t obj_len[MAX_OBJECTS];
    for (uint32_t o = 0; o < nobj; o++) obj_data[o] = ar_bytes(r, &obj_len[o]);
    uint32_t nk = ar_count(r, 1u << 20, 0);
    uint32_t nsaved = ar_count(r, nk, 16);
    if (r->bad) return damaged(ctx, what, "kernel objects");
    p->handles = wpk_calloc((size_t)nobj + 1, sizeof *p->handles);
    p->handle_fds = wpk_calloc((size_t)nobj + 1, sizeof *p->handle_fds);
    p->kernels = wpk_calloc((size_t)nk + 1, sizeof *p->kernels);
    if (!p->handles || !p->handle_fds || !p->kernels)
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory");
    p->nkernels = (int)nk;
    wpk_status st = WPK_OK;
    for (uint32_t o = 0; o < nobj && st == WPK_OK; o++) {
        p->handles[o] = load_object(ctx, what, obj_data[o], obj_len[o], &p->handle_fds[o], &st);
        p->nhandles = (int)o + 1;
    }
    for (uint32_t j = 0; st == WPK_OK && j < nsaved; j++) {
        uint32_t i = ar_u32(r), o = ar_u32(r);
        const char *name = ar_str(r), *tmpl = ar_str(r), *config = ar_str(r);
        uint32_t nin = ar_u32(r), nout = ar_u32(r), nscr = ar_u32(r);
        if (r->bad || i >= nk || o >= nobj || nin > TUNE_MAX_ARGS * 2 || nout > TUNE_MAX_ARGS * 2 ||
            nscr > CPU_MAX_SCRATCH || p->kernels[i].fn)
            return damaged(ctx, what, "kernel table");
        cpu_kernel *k = &p->kernels[i];
        snprintf(k->name, sizeof k->name, "%s", name);
        snprintf(k->config, sizeof k->config, "%s", config);
        k->tmpl = kernel_provider_find(tmpl);
        k->ninputs = (int)nin;
        k->noutputs = (int)nout;
        k->nscratch = (int)nscr;
        for (uint32_t s = 0; s < nscr; s++) k->scratch_off[s] = ar_i64(r);
        k->scratch_bytes = ar_i64(r);
        bool ok = k->scratch_bytes >= 0 && k->scratch_bytes <= MAX_BYTES;
        for (uint32_t s = 0; s < nscr; s++)
            ok = ok && k->scratch_off[s] >= 0 && k->scratch_off[s] <= k->scratch_bytes;
        for (int a = 0; a < TUNE_MAX_ARGS; a++) {
            k->pack_numel[a] = ar_i64(r);
            ok = ok && k->pack_numel[a] >= 0 && k->pack_numel[a] <= MAX_BYTES / 4;
        }
        if (r->bad || !ok) return damaged(ctx, what, "kernel table");
        void *sym = dlsym(p->handles[o], k->name);
        if (!sym)
            return wpk_error(ctx, WPK_ERR_PARSE, "%s: the plan is damaged: kernel '%s' is not in "
                             "its object", what, k->name);
        memcpy(&k->fn, &sym, sizeof sym);
        if (k->scratch_bytes > p->scratch_bytes) p->scratch_bytes = k->scratch_bytes;
    }
    return st;
}

static wpk_status read_steps(wpk_context *ctx, const char *what, artifact_reader *r,
                             cpu_program *p, const ir_graph *g, const ir_tensor *vals,
                             const memory_plan *mem, void **aligned) {
    uint32_t nn = ar_u32(r);
    if (r->bad || nn != (uint32_t)g->nnodes)
        return damaged(ctx, what, "its node count is not its graph's");
    for (int n = 0; n < g->nnodes; n++) {
        const char *name = ar_str(r), *op = ar_str(r);
        uint32_t kind = ar_u32(r), source = ar_u32(r);
        const char *impl = ar_str(r);
        if (r->bad || strcmp(name, g->nodes[n].name) || strcmp(op, g->nodes[n].op_type) ||
            kind > CPU_STEP_LIB || source > CPU_SOURCE_BATCH_ONE)
            return damaged(ctx, what, "its nodes are not its graph's");
        cpu_step *s = &p->steps[n];
        wpk_status st = WPK_OK;
        if (kind == CPU_STEP_LIB) {
            const char *lib_name = ar_str(r);
            uint32_t config = ar_u32(r);
            if (r->bad || config >= LIB_MAX_CONFIGS) return damaged(ctx, what, "library step");
            const lib_provider *lib = lib_provider_find(lib_name);
            if (!lib)
                return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "%s: node '%s' runs on %s, which this "
                                 "wpk was built without", what, name, lib_name);
            st = cpu_program_lib_step(ctx, p, g, vals, n, lib, (int)config);
            p->stats.lib_nodes++;
        } else if (kind == CPU_STEP_KERNEL) {
            uint32_t ki = ar_u32(r);
            uint32_t npacked = ar_count(r, MAX_STEP_PACKED, 12);
            const void *packed[TUNE_MAX_ARGS] = {0};
            if (r->bad || ki >= (uint32_t)p->nkernels || !p->kernels[ki].fn)
                return damaged(ctx, what, "kernel step");
            const cpu_kernel *k = &p->kernels[ki];
            for (uint32_t j = 0; j < npacked; j++) {
                uint32_t a = ar_u32(r);
                size_t len;
                const void *data = ar_bytes(r, &len);
                if (r->bad || a >= TUNE_MAX_ARGS || len != sizeof(float) * (size_t)k->pack_numel[a])
                    return damaged(ctx, what, "packed weights");
                packed[a] = data;
            }
            for (int a = 0; a < k->ninputs && a < TUNE_MAX_ARGS; a++)
                if (k->pack_numel[a] > 0 && !packed[a])
                    return damaged(ctx, what, "packed weights missing");
            st = cpu_program_kernel_step(ctx, p, g, vals, mem, aligned, n, (int)ki, packed);
            p->stats.kernel_nodes++;
        }
        if (st) return st;
        s->source = (cpu_source)source;
        if (!s->impl && !(s->impl = arena_strdup(&p->mem, impl)))
            return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory");
        p->stats.tuned_nodes +=
            s->kind != CPU_STEP_REF && cpu_source_measured((cpu_source)source);
    }
    return WPK_OK;
}

wpk_status cpu_program_load(wpk_context *ctx, const char *what, artifact_reader *r,
                            const ir_graph *g, const ir_tensor *vals, const memory_plan *mem,
                            int threads, cpu_program **out) {
    *out = NULL;
    cpu_program *p = wpk_calloc(1, sizeof *p);
    if (!p) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory loading the plan");
    p->nsteps = g->nnodes;
    p->stats.nodes = g->nnodes;
    cpu_options o = {threads, NULL, NULL, false};
    p->threads = cpu_program_threads(&o);
    p->steps = arena_alloc(&p->mem, sizeof *p->steps * (size_t)(g->nnodes + 1));
    if (p->steps) memset(p->steps, 0, sizeof *p->steps * (size_t)(g->nnodes + 1));
    void **aligned = wpk_calloc((size_t)g->nvalues + 1, sizeof(void *));
    wpk_status st = p->steps && aligned ? WPK_OK
                                        : wpk_error(ctx, WPK_ERR_NOMEM, "out of memory loading");
    (void)ar_u32(r); /* the threads it was compiled for: the kernels honour any count */
    if (st == WPK_OK) st = read_kernels(ctx, what, r, p);
    for (int i = 0; st == WPK_OK && i < p->nkernels; i++) p->stats.kernels += p->kernels[i].fn != NULL;
    if (st == WPK_OK && p->scratch_bytes > 0 &&
        !(p->scratch = cpu_program_alloc64(p, (size_t)p->scratch_bytes)))
        st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory for kernel scratch");
    if (st == WPK_OK) st = read_steps(ctx, what, r, p, g, vals, mem, aligned);
    wpk_free(aligned);
    if (st) {
        cpu_program_free(p);
        return st;
    }
    *out = p;
    return WPK_OK;
}
