/* module.c -- kernel modules of a plan loaded from memory (cpu_rt.h): the shared objects the C
 * compiler made, dlopen'd without a compiler and without a file of their own. */
#define _GNU_SOURCE /* memfd_create */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/alloc.h"
#include "runtime/cpu/cpu_rt.h"

struct rt_cpu_module {
    void *handle;
    int fd;     /* the memfd it was loaded from, open while it is loaded (-1: none): the loader
                   knows an object by its name "/proc/self/fd/N", so N must not be reused for
                   another object while this one is loaded */
};

wpk_status rt_cpu_module_load(wpk_context *ctx, const char *what, const void *data, size_t n,
                              rt_cpu_module **out) {
    *out = NULL;
    rt_cpu_module *m = wpk_malloc(sizeof *m);
    if (!m) return wpk_error(ctx, WPK_ERR_NOMEM, "%s: out of memory loading a kernel module", what);
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
        wpk_free(m);
        return wpk_error(ctx, WPK_ERR_IO, "%s: no place to load the kernels from: %s", what,
                         strerror(errno));
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
    if (!h || temp) {
        close(fd);
        fd = -1;
    }
    if (!h) {
        wpk_free(m);
        return wpk_error(ctx, WPK_ERR_INTERNAL, "%s: a kernel object of the plan does not load: "
                         "%s", what, why ? why : "?");
    }
    m->handle = h;
    m->fd = fd;
    *out = m;
    return WPK_OK;
}

void rt_cpu_module_free(rt_cpu_module *m) {
    if (!m) return;
    dlclose(m->handle);
    if (m->fd >= 0) close(m->fd);
    wpk_free(m);
}

void *rt_cpu_module_symbol(const rt_cpu_module *m, const char *symbol) {
    return dlsym(m->handle, symbol);
}
