/* nvrtc.c -- CUDA C -> PTX or cubin through NVRTC, loaded with dlopen at run time (never
 * linked), with an on-disk cache keyed by the SHA-256 of everything that determines the image.
 * The few NVRTC declarations it needs are its own, so the build needs no CUDA header. */
#include "codegen/cuda/cg_cuda.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "codegen/kcache.h"

#define KEY_VERSION "wpk-cg_cuda-1"  /* bump when the image layout or the options change */
#define MSG_LOG_MAX 3000             /* of NVRTC's log, what goes into the status message */
#define DEFAULT_SM 90

/* NVRTC's C API as nvrtc.h declares it (nvrtcResult is an int-sized enum, 0 = success). */
typedef int nvrtc_result;
typedef struct nvrtc_program_s *nvrtc_program;

static struct {
    bool tried, ok;
    char why[1024];
    void *lib;
    int major, minor;
    int archs[64];
    int narchs;
    nvrtc_result (*version)(int *, int *);
    nvrtc_result (*create)(nvrtc_program *, const char *, const char *, int, const char *const *,
                           const char *const *);
    nvrtc_result (*destroy)(nvrtc_program *);
    nvrtc_result (*compile)(nvrtc_program, int, const char *const *);
    nvrtc_result (*ptx_size)(nvrtc_program, size_t *);
    nvrtc_result (*ptx)(nvrtc_program, char *);
    nvrtc_result (*cubin_size)(nvrtc_program, size_t *);
    nvrtc_result (*cubin)(nvrtc_program, char *);
    nvrtc_result (*log_size)(nvrtc_program, size_t *);
    nvrtc_result (*log)(nvrtc_program, char *);
    const char *(*error_string)(nvrtc_result);
    nvrtc_result (*num_archs)(int *);
    nvrtc_result (*get_archs)(int *);
} nv;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int compile_count;

cg_cuda_compile_options cg_cuda_default_compile_options(void) {
    return (cg_cuda_compile_options){.sm = DEFAULT_SM, .cubin = false, .line_info = false};
}

int cg_cuda_compile_count(void) {
    pthread_mutex_lock(&lock);
    int n = compile_count;
    pthread_mutex_unlock(&lock);
    return n;
}

static void *sym(void *lib, const char *name, bool *missing, const char **which) {
    void *p = dlsym(lib, name);
    if (!p && !*missing) {
        *missing = true;
        *which = name;
    }
    return p;
}

/* Find and bind the library; called once under the lock. */
static void load(void) {
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
                                        "/usr/local/cuda/lib64/libnvrtc.so.13",
                                        "/usr/local/cuda/lib64/libnvrtc.so.12",
                                        "/usr/local/cuda/lib64/libnvrtc.so"};
    nv.tried = true;
    const char *env = getenv("WPK_NVRTC_LIBRARY");
    char tried[768] = "";
    size_t used = 0;
    if (env && *env) {
        nv.lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (!nv.lib) {
            const char *e = dlerror();
            snprintf(nv.why, sizeof nv.why, "NVRTC not found: $WPK_NVRTC_LIBRARY '%s' does not "
                     "load (%s)", env, e ? e : "?");
            return;
        }
    }
    for (size_t i = 0; !nv.lib && i < sizeof names / sizeof *names; i++) {
        nv.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!nv.lib && used < sizeof tried)
            used += (size_t)snprintf(tried + used, sizeof tried - used, "%s%s", i ? ", " : "",
                                     names[i]);
    }
    if (!nv.lib) {
        snprintf(nv.why, sizeof nv.why, "NVRTC not found (tried %s): install the CUDA toolkit's "
                 "NVRTC or set WPK_NVRTC_LIBRARY", tried);
        return;
    }
    bool missing = false;
    const char *which = NULL;
    /* dlsym's data pointers convert to function pointers (POSIX) */
#define BIND(field, name)                                                                  \
    do {                                                                                   \
        void *p_ = sym(nv.lib, name, &missing, &which);                                    \
        memcpy(&nv.field, &p_, sizeof p_);                                                 \
    } while (0)
    BIND(version, "nvrtcVersion");
    BIND(create, "nvrtcCreateProgram");
    BIND(destroy, "nvrtcDestroyProgram");
    BIND(compile, "nvrtcCompileProgram");
    BIND(ptx_size, "nvrtcGetPTXSize");
    BIND(ptx, "nvrtcGetPTX");
    BIND(cubin_size, "nvrtcGetCUBINSize");
    BIND(cubin, "nvrtcGetCUBIN");
    BIND(log_size, "nvrtcGetProgramLogSize");
    BIND(log, "nvrtcGetProgramLog");
    BIND(error_string, "nvrtcGetErrorString");
#undef BIND
    if (missing) {
        snprintf(nv.why, sizeof nv.why, "NVRTC library lacks %s (too old?)", which);
        dlclose(nv.lib);
        nv.lib = NULL;
        return;
    }
    /* optional: which SM versions this NVRTC can compile for */
    void *pn = dlsym(nv.lib, "nvrtcGetNumSupportedArchs"), *pa = dlsym(nv.lib, "nvrtcGetSupportedArchs");
    memcpy(&nv.num_archs, &pn, sizeof pn);
    memcpy(&nv.get_archs, &pa, sizeof pa);
    if (nv.version(&nv.major, &nv.minor) != 0) {
        snprintf(nv.why, sizeof nv.why, "nvrtcVersion failed");
        return;
    }
    int n = 0;
    if (nv.num_archs && nv.get_archs && nv.num_archs(&n) == 0 && n > 0 && n <= 64 &&
        nv.get_archs(nv.archs) == 0)
        nv.narchs = n;
    nv.ok = true;
}

wpk_status cg_cuda_nvrtc_available(wpk_context *ctx) {
    pthread_mutex_lock(&lock);
    if (!nv.tried) load();
    bool ok = nv.ok;
    char why[sizeof nv.why];
    snprintf(why, sizeof why, "%s", nv.why);
    pthread_mutex_unlock(&lock);
    return ok ? WPK_OK : wpk_error(ctx, WPK_ERR_UNSUPPORTED, "%s", why);
}

int cg_cuda_nvrtc_version(void) {
    pthread_mutex_lock(&lock);
    int v = nv.ok ? nv.major * 1000 + nv.minor * 10 : 0;
    pthread_mutex_unlock(&lock);
    return v;
}

/* ---- the cache ---- */

/* The whole file, or false. A cached image is checked for its kind on read: a PTX must end in
 * its NUL and start with text, a cubin with the ELF magic; anything else counts as damaged. */
static bool read_image(const char *path, bool cubin, cg_cuda_image *img) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return false;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 4) {
        close(fd);
        return false;
    }
    size_t len = (size_t)st.st_size, done = 0;
    char *buf = wpk_malloc(len);
    while (buf && done < len) {
        ssize_t n = read(fd, buf + done, len - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += (size_t)n;
    }
    close(fd);
    bool ok = buf && done == len &&
              (cubin ? memcmp(buf, "\177ELF", 4) == 0 : buf[len - 1] == '\0' && buf[0] != '\0');
    if (!ok) {
        wpk_free(buf);
        return false;
    }
    img->data = buf;
    img->size = len;
    return true;
}

/* The SM NVRTC is asked for: the requested one when it supports it, else (PTX only) the newest
 * it supports below it, whose PTX the driver can still JIT for the device. */
static int pick_sm(int sm, bool cubin) {
    if (nv.narchs == 0) return sm;
    int best = 0;
    for (int i = 0; i < nv.narchs; i++) {
        if (nv.archs[i] == sm) return sm;
        if (nv.archs[i] < sm && nv.archs[i] > best) best = nv.archs[i];
    }
    return cubin || best == 0 ? -1 : best;
}

static wpk_status run_nvrtc(wpk_context *ctx, const char *source, int sm, bool cubin,
                            bool line_info, const char *keep_path, const char *failed_source,
                            cg_cuda_image *img) {
    char arch[64];
    snprintf(arch, sizeof arch, "--gpu-architecture=%s_%d", cubin ? "sm" : "compute", sm);
    const char *opts[4] = {arch, "--std=c++17"};
    int nopts = 2;
    if (line_info) opts[nopts++] = "-lineinfo";
    pthread_mutex_lock(&lock);
    compile_count++;
    pthread_mutex_unlock(&lock);
    nvrtc_program prog = NULL;
    nvrtc_result r = nv.create(&prog, source, "wpk_kernel.cu", 0, NULL, NULL);
    if (r != 0)
        return wpk_error(ctx, r == 1 ? WPK_ERR_NOMEM : WPK_ERR_INTERNAL,
                         "nvrtcCreateProgram: %s", nv.error_string(r));
    r = nv.compile(prog, nopts, opts);
    if (r != 0) {
        size_t n = 0;
        char *log = NULL;
        if (nv.log_size(prog, &n) == 0 && n > 0 && (log = wpk_malloc(n + 1)) &&
            nv.log(prog, log) == 0)
            log[n] = '\0';
        char msg[MSG_LOG_MAX + 16];
        cg_cache_trim(log ? log : "", MSG_LOG_MAX, msg, sizeof msg);
        wpk_free(log);
        nv.destroy(&prog);
        /* the source stays for whoever reads the message */
        bool kept = keep_path && cg_cache_write(keep_path, failed_source, strlen(failed_source));
        if (!kept && keep_path && errno == EEXIST) kept = true;
        return wpk_error(ctx, WPK_ERR_INTERNAL, "NVRTC %d.%d failed (%s, %s) on %s:\n%s", nv.major,
                         nv.minor, nv.error_string(r), arch, kept ? keep_path : "the kernel source",
                         msg);
    }
    size_t size = 0;
    r = cubin ? nv.cubin_size(prog, &size) : nv.ptx_size(prog, &size);
    char *buf = r == 0 && size > 0 ? wpk_malloc(size) : NULL;
    if (buf) r = cubin ? nv.cubin(prog, buf) : nv.ptx(prog, buf);
    nv.destroy(&prog);
    if (!buf || r != 0) {
        wpk_free(buf);
        return buf ? wpk_error(ctx, WPK_ERR_INTERNAL, "NVRTC: reading the %s failed: %s",
                               cubin ? "cubin" : "PTX", nv.error_string(r))
                   : wpk_error(ctx, WPK_ERR_NOMEM, "out of memory reading NVRTC's output");
    }
    img->data = buf;
    img->size = size;
    return WPK_OK;
}

wpk_status cg_cuda_compile(wpk_context *ctx, const char *source, const cg_cuda_compile_options *opt,
                           cg_cuda_image *out) {
    if (!source || !out) return wpk_error(ctx, WPK_ERR_INVALID_ARG, "cg_cuda_compile: no source");
    memset(out, 0, sizeof *out);
    cg_cuda_compile_options def = cg_cuda_default_compile_options();
    if (!opt) opt = &def;
    int want = opt->sm ? opt->sm : DEFAULT_SM;
    if (want < 10 || want > 1000)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "cg_cuda_compile: SM version %d", want);
    wpk_status st = cg_cuda_nvrtc_available(ctx);
    if (st) return st;
    int sm = pick_sm(want, opt->cubin);
    if (sm < 0)
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "NVRTC %d.%d cannot compile for sm_%d",
                         nv.major, nv.minor, want);
    char dir[3072];
    if ((st = cg_cache_dir(ctx, "/cuda", "CUDA kernel cache", dir, sizeof dir))) return st;

    char ident[128];
    snprintf(ident, sizeof ident, "%s nvrtc %d.%d %s_%d%s", KEY_VERSION, nv.major, nv.minor,
             opt->cubin ? "sm" : "compute", sm, opt->line_info ? " lineinfo" : "");
    const char *ident_part = ident;
    char key[65];
    cg_cache_key(&ident_part, 1, source, key);
    const char *ext = opt->cubin ? "cubin" : "ptx";
    char path[3200], src_path[3200], keep[3300], tmp[3400];
    snprintf(path, sizeof path, "%s/%s.%s", dir, key, ext);
    snprintf(src_path, sizeof src_path, "%s/%s.cu", dir, key);
    snprintf(keep, sizeof keep, "%s/%s.failed.cu", dir, key);

    out->cubin = opt->cubin;
    out->sm = sm;
    if (read_image(path, opt->cubin, out)) return WPK_OK;
    unlink(path); /* absent, or damaged (a crash mid-copy): rebuild it */

    st = run_nvrtc(ctx, source, sm, opt->cubin, opt->line_info, keep, source, out);
    if (st) return st;
    out->cubin = opt->cubin;
    out->sm = sm;
    /* unique temporaries, then rename: readers see the old file or the new, never half */
    long id = cg_cache_serial();
    snprintf(tmp, sizeof tmp, "%s/%s.%ld.%ld.tmp", dir, key, (long)getpid(), id);
    if (!cg_cache_write(tmp, out->data, out->size) || rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        cg_cuda_image_free(out);
        return wpk_error(ctx, WPK_ERR_IO, "CUDA kernel cache: cannot write '%s': %s", path,
                         strerror(err));
    }
    snprintf(tmp, sizeof tmp, "%s/%s.%ld.%ld.tmp.cu", dir, key, (long)getpid(), id);
    if (cg_cache_write(tmp, source, strlen(source))) {
        if (rename(tmp, src_path) != 0) unlink(tmp);
    }
    return WPK_OK;
}

void cg_cuda_image_free(cg_cuda_image *img) {
    if (!img) return;
    wpk_free(img->data);
    img->data = NULL;
    img->size = 0;
}
