/* artifact.c -- the .wpk container: header, body, checksum; atomic writing, checked reading
 * (see artifact.h). Integers are little-endian whatever the host, so the checks that come
 * before the target's (magic, version, checksum) read the same everywhere. */
#include "runtime/artifact.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/hash.h"

#define MAGIC_LEN 8
#define DIGEST_LEN 32
#define MAX_FINGERPRINT 4096

static bool write_all(int fd, const void *data, size_t n) {
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

wpk_status artifact_write(wpk_context *ctx, const char *path, const char *fingerprint,
                          const byte_writer *body) {
    if (body->oom) return wpk_error(ctx, WPK_ERR_NOMEM, "%s: out of memory writing the plan", path);
    byte_writer head = {0};
    bw_raw(&head, ARTIFACT_MAGIC, MAGIC_LEN);
    bw_u32(&head, ARTIFACT_VERSION);
    bw_u32(&head, (uint32_t)strlen(fingerprint));
    bw_raw(&head, fingerprint, strlen(fingerprint));
    bw_u64(&head, body->len);
    if (head.oom) {
        bw_free(&head);
        return wpk_error(ctx, WPK_ERR_NOMEM, "%s: out of memory writing the plan", path);
    }
    wpk_sha256 h;
    uint8_t digest[DIGEST_LEN];
    wpk_sha256_init(&h);
    wpk_sha256_update(&h, head.data, head.len);
    wpk_sha256_update(&h, body->data, body->len);
    wpk_sha256_final(&h, digest);

    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof tmp) {
        bw_free(&head);
        return wpk_error(ctx, WPK_ERR_IO, "%s: path too long", path);
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        int err = errno;
        bw_free(&head);
        return wpk_error(ctx, WPK_ERR_IO, "%s: cannot write the plan: %s", path, strerror(err));
    }
    bool ok = write_all(fd, head.data, head.len) && write_all(fd, body->data, body->len) &&
              write_all(fd, digest, DIGEST_LEN) && fsync(fd) == 0;
    int err = errno;
    ok = close(fd) == 0 && ok;
    bw_free(&head);
    /* the old file, if any, stays until the new one is complete */
    if (!ok || rename(tmp, path) != 0) {
        if (ok) err = errno;
        unlink(tmp);
        return wpk_error(ctx, WPK_ERR_IO, "%s: cannot write the plan: %s", path, strerror(err));
    }
    return WPK_OK;
}

static wpk_status read_file(wpk_context *ctx, const char *path, uint8_t **out, size_t *len) {
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return wpk_error(ctx, WPK_ERR_IO, "%s: cannot open the plan: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return wpk_error(ctx, WPK_ERR_IO, "%s: not a regular file", path);
    }
    size_t n = (size_t)sb.st_size;
    uint8_t *buf = wpk_malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        return wpk_error(ctx, WPK_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, n);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, buf + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    *out = buf;
    *len = got;
    return WPK_OK;
}

wpk_status artifact_read(wpk_context *ctx, const char *path, const char *expect_target,
                         uint8_t **file, byte_reader *body, char *target, size_t target_cap) {
    *file = NULL;
    memset(body, 0, sizeof *body);
    uint8_t *buf = NULL;
    size_t len = 0;
    wpk_status st = read_file(ctx, path, &buf, &len);
    if (st) return st;
    byte_reader r = {buf, buf + len, false};
    const uint8_t *magic = br_raw(&r, MAGIC_LEN);
    if (!magic || memcmp(magic, ARTIFACT_MAGIC, MAGIC_LEN)) {
        wpk_free(buf);
        return wpk_error(ctx, WPK_ERR_PARSE, "%s: not a compiled wpk plan (no '%.7s' header)%s",
                         path, ARTIFACT_MAGIC, magic ? "" : ": the file is truncated");
    }
    uint32_t version = br_u32(&r);
    if (r.bad) {
        wpk_free(buf);
        return wpk_error(ctx, WPK_ERR_PARSE, "%s: the plan is truncated (%zu bytes)", path, len);
    }
    if (version != ARTIFACT_VERSION) {
        wpk_free(buf);
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "%s: plan format version %u, this wpk reads "
                         "%u; compile the model again with this wpk", path, version,
                         ARTIFACT_VERSION);
    }
    uint32_t fplen = br_u32(&r);
    const uint8_t *fp = fplen <= MAX_FINGERPRINT ? br_raw(&r, fplen) : NULL;
    uint64_t blen = br_u64(&r);
    size_t head_len = (size_t)(r.p - buf);
    if (!fp || r.bad || blen > len || len - head_len < DIGEST_LEN ||
        len - head_len - DIGEST_LEN != blen) {
        wpk_free(buf);
        return wpk_error(ctx, WPK_ERR_PARSE, "%s: the plan is truncated or damaged (%zu bytes, "
                         "its header says otherwise)", path, len);
    }
    wpk_sha256 h;
    uint8_t digest[DIGEST_LEN];
    wpk_sha256_init(&h);
    wpk_sha256_update(&h, buf, len - DIGEST_LEN);
    wpk_sha256_final(&h, digest);
    if (memcmp(digest, buf + len - DIGEST_LEN, DIGEST_LEN)) {
        wpk_free(buf);
        return wpk_error(ctx, WPK_ERR_PARSE, "%s: the plan is damaged (checksum mismatch)", path);
    }
    char fps[MAX_FINGERPRINT + 1];
    memcpy(fps, fp, fplen);
    fps[fplen] = 0;
    if (target) snprintf(target, target_cap, "%s", fps);
    if (expect_target && strcmp(fps, expect_target)) {
        wpk_free(buf);
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "%s: the plan was built for '%s', this machine "
                         "is '%s'; compile the model again here", path, fps, expect_target);
    }
    *file = buf;
    body->p = r.p;
    body->end = r.p + blen;
    return WPK_OK;
}
