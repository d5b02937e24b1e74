/* test_target_fingerprint.c -- the machine's fingerprint: non-empty, printable, the same across
 * calls, threads and processes, and agreeing with the compiler's own view of the CPU. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "base/target_fingerprint.h"

#define NTHREADS 8

static const char *seen[NTHREADS];

static void *in_thread(void *arg) {
    seen[(long)arg] = target_fingerprint();
    return NULL;
}

/* flag is one of the comma-separated extensions (the third field) */
static bool has_flag(const char *fp, const char *flag) {
    char copy[512];
    snprintf(copy, sizeof copy, "%s", fp);
    char *end = strrchr(copy, ' ');
    if (!end) return false;
    *end = '\0';
    char *flags = strrchr(copy, ' ');
    if (!flags) return false;
    flags++;
    for (char *save = NULL, *t = strtok_r(flags, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (strcmp(t, flag) == 0) return true;
    return false;
}

int main(void) {
    /* first calls race in threads: every one gets the one string */
    pthread_t th[NTHREADS];
    for (long i = 0; i < NTHREADS; i++) pthread_create(&th[i], NULL, in_thread, (void *)i);
    for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    const char *fp = target_fingerprint();
    printf("fingerprint: %s\n", fp);
    for (int i = 0; i < NTHREADS; i++) CHECK(seen[i] == fp);
    CHECK(fp && strlen(fp) > 8);
    for (const char *p = fp; *p; p++) CHECK(*p >= ' ' && *p < 0x7f);
    CHECK(fp[0] != ' ' && strstr(fp, "  ") == NULL);

    /* architecture first, CPU count last */
    struct utsname u;
    CHECK(uname(&u) == 0 && strncmp(fp, u.machine, strlen(u.machine)) == 0 &&
          fp[strlen(u.machine)] == ' ');
    char count[32];
    snprintf(count, sizeof count, " %ldc", sysconf(_SC_NPROCESSORS_ONLN));
    size_t n = strlen(fp), c = strlen(count);
    CHECK(n > c && strcmp(fp + n - c, count) == 0);

    /* another process computes the same text */
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        const char *mine = target_fingerprint();
        ssize_t w = write(fds[1], mine, strlen(mine));
        _exit(w == (ssize_t)strlen(mine) ? 0 : 1);
    }
    close(fds[1]);
    char other[600] = {0};
    size_t got = 0;
    ssize_t r;
    while ((r = read(fds[0], other + got, sizeof other - 1 - got)) > 0) got += (size_t)r;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && strcmp(other, fp) == 0);

#if defined(__x86_64__) || defined(__i386__)
    /* the fingerprint reads cpuid itself: it must agree with the compiler's runtime */
    __builtin_cpu_init();
    CHECK(has_flag(fp, "avx") == !!__builtin_cpu_supports("avx"));
    CHECK(has_flag(fp, "avx2") == !!__builtin_cpu_supports("avx2"));
    CHECK(has_flag(fp, "fma") == !!__builtin_cpu_supports("fma"));
    CHECK(has_flag(fp, "avx512f") == !!__builtin_cpu_supports("avx512f"));
    CHECK(has_flag(fp, "avx512bw") == !!__builtin_cpu_supports("avx512bw"));
    CHECK(has_flag(fp, "avx512vnni") == !!__builtin_cpu_supports("avx512vnni"));
    CHECK(!has_flag(fp, "none") || !__builtin_cpu_supports("avx"));
#endif
    CHECK_DONE();
}
