/* kcache.c -- the on-disk kernel cache both compile drivers share (see kcache.h). */
#include "codegen/kcache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/hash.h"

/* mkdir -p */
static bool make_dirs(const char *path) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return false;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return false;
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return false;
    struct stat st;
    return stat(tmp, &st) == 0 && S_ISDIR(st.st_mode);
}

wpk_status cg_cache_dir(wpk_context *ctx, const char *sub, const char *what, char *dir,
                        size_t cap) {
    const char *env = getenv("WPK_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    if (env && *env) n = snprintf(dir, cap, "%s%s", env, sub);
    else if (xdg && *xdg) n = snprintf(dir, cap, "%s/wpk/kernels%s", xdg, sub);
    else if (home && *home) n = snprintf(dir, cap, "%s/.cache/wpk/kernels%s", home, sub);
    else
        return wpk_error(ctx, WPK_ERR_IO, "%s: no WPK_CACHE_DIR, XDG_CACHE_HOME or HOME to put "
                         "it in", what);
    if (n < 0 || (size_t)n >= cap)
        return wpk_error(ctx, WPK_ERR_IO, "%s: directory name too long", what);
    if (!make_dirs(dir))
        return wpk_error(ctx, WPK_ERR_IO, "%s: cannot create directory '%s': %s (set "
                         "WPK_CACHE_DIR to a writable one)", what, dir, strerror(errno));
    return WPK_OK;
}

void cg_cache_key(const char *const *parts, int n, const char *source, char *key) {
    wpk_sha256 h;
    wpk_sha256_init(&h);
    for (int i = 0; i < n; i++) wpk_sha256_update(&h, parts[i], strlen(parts[i]) + 1);
    wpk_sha256_update(&h, source, strlen(source));
    uint8_t digest[32];
    wpk_sha256_final(&h, digest);
    wpk_sha256_hex(digest, key);
}

bool cg_cache_write(const char *path, const void *data, size_t len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return false;
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, (const char *)data + done, len - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            close(fd);
            unlink(path);
            return false;
        }
        done += (size_t)n;
    }
    return close(fd) == 0;
}

long cg_cache_serial(void) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static long serial;
    pthread_mutex_lock(&lock);
    long id = serial++;
    pthread_mutex_unlock(&lock);
    return id;
}

void cg_cache_trim(const char *text, size_t max, char *dst, size_t cap) {
    size_t n = strlen(text);
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' ' || text[n - 1] == '\r')) n--;
    bool cut = n > max;
    if (cut) n = max;
    snprintf(dst, cap, "%.*s%s", (int)n, text, cut ? "\n[...]" : "");
}
