/* jit.c -- generated C -> shared object -> loaded kernel: runs the system C compiler (no shell),
 * keeps each object in an on-disk cache keyed by the SHA-256 of everything that determines it,
 * and loads it with dlopen. */
#include "codegen/c/cg_c.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc.h"
#include "codegen/kcache.h"

extern char **environ;

/* No -ffast-math: it would let the compiler assume no NaN/Inf and reassociate sums, which
 * changes results the reference kernels define (NaN propagation, erf/exp accuracy, rounding of
 * long reductions). -ffp-contract=fast only fuses a*b+c into an FMA (one rounding instead of
 * two); -fno-math-errno only stops sqrtf & co. from setting errno, which no kernel reads, so
 * they can stay vector instructions. */
static const char *const CC_FLAGS[] = {"-O3", "-march=native", "-fopenmp", "-shared", "-fPIC",
                                       "-std=c11", "-ffp-contract=fast", "-fno-math-errno"};
#define N_CC_FLAGS ((int)(sizeof CC_FLAGS / sizeof *CC_FLAGS))
#define MAX_CC_WORDS 16
#define MAX_CAPTURE (16 * 1024)   /* compiler output kept for the message */
#define MSG_COMPILER_TAIL 3000    /* of it, what goes into the status message */
#define KEY_VERSION "wpk-cg_c-1"  /* bump when the object layout or loading changes */

struct cg_module {
    void *handle;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int compile_count;     /* compiler runs that produced (or failed to produce) a kernel */
static char memo_cc[256];      /* the compiler command the memo below belongs to */
static char memo_version[256]; /* first line of `cc --version` */
static char memo_cpu[4096];    /* what -march=native depends on */
static bool memo_cpu_done;

/* Spawning is serialised so that a pipe made for one child cannot leak into another spawned at
 * the same moment from another thread (which would hold its write end open). */
static pthread_mutex_t spawn_lock = PTHREAD_MUTEX_INITIALIZER;

int cg_c_compile_count(void) {
    pthread_mutex_lock(&lock);
    int n = compile_count;
    pthread_mutex_unlock(&lock);
    return n;
}

static const char *compiler_command(void) {
    const char *cc = getenv("CC");
    return cc && *cc ? cc : "cc";
}

/* $CC may carry words ("ccache gcc", "gcc -m64"): split on blanks, no shell. */
static int split_words(char *s, char **words, int max) {
    int n = 0;
    char *save = NULL;
    for (char *p = strtok_r(s, " \t", &save); p && n < max; p = strtok_r(NULL, " \t", &save))
        words[n++] = p;
    return n;
}

/* Run argv (argv[0] looked up in PATH) with stdin from /dev/null, stdout and stderr into *out
 * (first MAX_CAPTURE bytes). *exit_code is the exit status, or -1 when killed by a signal.
 * Returns false with errno when it could not be started. */
static bool run_capture(char *const *argv, strbuf *out, int *exit_code) {
    int fds[2];
    posix_spawn_file_actions_t fa;
    pid_t pid;
    pthread_mutex_lock(&spawn_lock);
    if (pipe(fds) != 0) {
        pthread_mutex_unlock(&spawn_lock);
        return false;
    }
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    pthread_mutex_unlock(&spawn_lock);
    if (rc != 0) {
        close(fds[0]);
        errno = rc;
        return false;
    }
    char buf[4096];
    for (;;) {
        ssize_t n = read(fds[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (out->len < MAX_CAPTURE) {
            size_t keep = (size_t)n;
            if (out->len + keep > MAX_CAPTURE) keep = MAX_CAPTURE - out->len;
            sb_printf(out, "%.*s", (int)keep, buf);
        }
    }
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            *exit_code = -1;
            return true;
        }
    *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return true;
}

/* Lines of /proc/cpuinfo's first processor that say what the CPU is and can do (not its
 * clock, which varies): objects built with -march=native are only valid for them. */
static void read_cpu_identity(char *dst, size_t cap) {
    static const char *const keys[] = {"vendor_id", "cpu family", "model", "model name", "stepping",
                                       "flags", "Features", "CPU implementer", "CPU architecture",
                                       "CPU variant", "CPU part"};
    dst[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char ln[8192];
    size_t len = 0;
    while (fgets(ln, sizeof ln, f)) {
        if (ln[0] == '\n') break; /* end of the first processor */
        for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
            size_t k = strlen(keys[i]);
            if (strncmp(ln, keys[i], k) == 0 && (ln[k] == '\t' || ln[k] == ' ' || ln[k] == ':')) {
                size_t n = strlen(ln);
                if (len + n < cap) {
                    memcpy(dst + len, ln, n + 1);
                    len += n;
                }
                break;
            }
        }
    }
    fclose(f);
}

/* The first line of `$CC --version` and the CPU identity, read once per compiler command. */
static wpk_status toolchain_identity(wpk_context *ctx, const char *cc, char *version, size_t vcap,
                                     char *cpu, size_t ccap) {
    pthread_mutex_lock(&lock);
    if (!memo_cpu_done) {
        read_cpu_identity(memo_cpu, sizeof memo_cpu);
        memo_cpu_done = true;
    }
    if (strcmp(memo_cc, cc) != 0 || !memo_version[0]) {
        char words_buf[256];
        snprintf(words_buf, sizeof words_buf, "%s", cc);
        char *argv[MAX_CC_WORDS + 2];
        int n = split_words(words_buf, argv, MAX_CC_WORDS);
        if (n == 0) {
            pthread_mutex_unlock(&lock);
            return wpk_error(ctx, WPK_ERR_INVALID_ARG, "C compiler: $CC is blank");
        }
        argv[n++] = "--version";
        argv[n] = NULL;
        strbuf out = {0};
        int code;
        if (!run_capture(argv, &out, &code)) {
            int err = errno;
            sb_free(&out);
            pthread_mutex_unlock(&lock);
            return wpk_error(ctx, WPK_ERR_UNSUPPORTED,
                             "C compiler '%s' could not be run (%s); install one or set CC", cc,
                             strerror(err));
        }
        if (code != 0 || !out.s) {
            sb_free(&out);
            pthread_mutex_unlock(&lock);
            return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "C compiler '%s --version' failed (exit %d)",
                             cc, code);
        }
        size_t first = strcspn(out.s, "\n");
        snprintf(memo_version, sizeof memo_version, "%.*s", (int)first, out.s);
        snprintf(memo_cc, sizeof memo_cc, "%s", cc);
        sb_free(&out);
    }
    snprintf(version, vcap, "%s", memo_version);
    snprintf(cpu, ccap, "%s", memo_cpu);
    pthread_mutex_unlock(&lock);
    return WPK_OK;
}

/* A kernel object brings in the OpenMP runtime when the process had not loaded it. Unloading
 * the kernel would then unload the runtime under its idle worker threads, which crash; so the
 * first time a runtime is seen loaded it gets a reference that is never dropped. */
static void pin_openmp_runtime(void) {
    static const char *const names[] = {"libgomp.so.1", "libomp.so", "libomp.so.5", "libiomp5.so"};
    static bool pinned;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < sizeof names / sizeof *names && !pinned; i++)
        pinned = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) != NULL;
    pthread_mutex_unlock(&lock);
}

/* Load the object at path. *unloadable is set when dlopen itself refused it (as opposed to
 * running out of memory), so a damaged cache entry can be rebuilt. */
static wpk_status load(wpk_context *ctx, const char *path, cg_module **out, bool *unloadable) {
    *unloadable = false;
    cg_module *m = wpk_malloc(sizeof *m);
    if (!m) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory loading a kernel");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        wpk_free(m);
        *unloadable = true;
        return wpk_error(ctx, WPK_ERR_INTERNAL, "kernel object '%s' does not load: %s", path,
                         why ? why : "?");
    }
    pin_openmp_runtime();
    m->handle = h;
    *out = m;
    return WPK_OK;
}

/* Compile `src_path` into `so_path`. */
static wpk_status run_compiler(wpk_context *ctx, const char *cc, const char *src_path,
                               const char *so_path, const char *keep_path) {
    char words_buf[256];
    snprintf(words_buf, sizeof words_buf, "%s", cc);
    char *argv[MAX_CC_WORDS + N_CC_FLAGS + 8];
    int n = split_words(words_buf, argv, MAX_CC_WORDS);
    for (int i = 0; i < N_CC_FLAGS; i++) argv[n++] = (char *)CC_FLAGS[i];
    argv[n++] = "-o";
    argv[n++] = (char *)so_path;
    argv[n++] = (char *)src_path;
    argv[n++] = "-lm";
    argv[n] = NULL;
    strbuf out = {0};
    int code;
    pthread_mutex_lock(&lock);
    compile_count++;
    pthread_mutex_unlock(&lock);
    if (!run_capture(argv, &out, &code)) {
        int err = errno;
        sb_free(&out);
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "C compiler '%s' could not be run (%s)", cc,
                         strerror(err));
    }
    if (code != 0) {
        char msg[MSG_COMPILER_TAIL + 16];
        cg_cache_trim(out.s ? out.s : "", MSG_COMPILER_TAIL, msg, sizeof msg);
        /* the source stays for whoever reads the message */
        bool kept = rename(src_path, keep_path) == 0;
        sb_free(&out);
        unlink(so_path);
        return wpk_error(ctx, WPK_ERR_INTERNAL, "C compiler '%s' failed (exit %d) on %s:\n%s", cc,
                         code, kept ? keep_path : "the kernel source", msg);
    }
    sb_free(&out);
    return WPK_OK;
}

wpk_status cg_c_compile(wpk_context *ctx, const char *source, cg_module **out) {
    if (!source || !out) return wpk_error(ctx, WPK_ERR_INVALID_ARG, "cg_c_compile: no source");
    *out = NULL;
    const char *cc = compiler_command();
    char version[256], cpu[4096], dir[3072];
    wpk_status st = toolchain_identity(ctx, cc, version, sizeof version, cpu, sizeof cpu);
    if (st != WPK_OK) return st;
    st = cg_cache_dir(ctx, "", "kernel cache", dir, sizeof dir);
    if (st != WPK_OK) return st;

    /* the key: every input that changes the object */
    const char *parts[4 + N_CC_FLAGS] = {KEY_VERSION, cc, version, cpu};
    for (int i = 0; i < N_CC_FLAGS; i++) parts[4 + i] = CC_FLAGS[i];
    char key[65];
    cg_cache_key(parts, 4 + N_CC_FLAGS, source, key);

    char so_path[3200], src_path[3200], tmp_so[3300], tmp_src[3300], keep[3300];
    snprintf(so_path, sizeof so_path, "%s/%s.so", dir, key);
    snprintf(src_path, sizeof src_path, "%s/%s.c", dir, key);
    snprintf(keep, sizeof keep, "%s/%s.failed.c", dir, key);

    struct stat sst;
    bool unloadable;
    if (stat(so_path, &sst) == 0) {
        st = load(ctx, so_path, out, &unloadable);
        if (st == WPK_OK || !unloadable) return st;
        /* damaged (truncated by a crash, copied from another machine): rebuild it */
        unlink(so_path);
        wpk_clear_error(ctx);
    }

    /* unique temporaries: the pid separates processes, the counter threads */
    long id = cg_cache_serial();
    snprintf(tmp_src, sizeof tmp_src, "%s/%s.%ld.%ld.tmp.c", dir, key, (long)getpid(), id);
    snprintf(tmp_so, sizeof tmp_so, "%s/%s.%ld.%ld.tmp.so", dir, key, (long)getpid(), id);
    if (!cg_cache_write(tmp_src, source, strlen(source)))
        return wpk_error(ctx, WPK_ERR_IO, "kernel cache: cannot write '%s': %s", tmp_src,
                         strerror(errno));
    st = run_compiler(ctx, cc, tmp_src, tmp_so, keep);
    if (st != WPK_OK) {
        unlink(tmp_src);
        return st;
    }
    /* rename is atomic: a concurrent compile of the same key replaces an identical object, and
     * a reader sees the old file or the new one, never half of one */
    if (rename(tmp_so, so_path) != 0) {
        int err = errno;
        unlink(tmp_so);
        unlink(tmp_src);
        return wpk_error(ctx, WPK_ERR_IO, "kernel cache: cannot rename into '%s': %s", so_path,
                         strerror(err));
    }
    /* the source next to its object, for reading what a cached kernel is */
    if (rename(tmp_src, src_path) != 0) unlink(tmp_src);
    return load(ctx, so_path, out, &unloadable);
}

cg_kernel_fn cg_module_fn(const cg_module *m, const char *symbol) {
    if (!m || !symbol) return NULL;
    void *p = dlsym(m->handle, symbol);
    cg_kernel_fn fn;
    /* POSIX guarantees a data pointer from dlsym converts to a function pointer */
    memcpy(&fn, &p, sizeof fn);
    return p ? fn : NULL;
}

void cg_module_free(cg_module *m) {
    if (!m) return;
    dlclose(m->handle);
    wpk_free(m);
}
