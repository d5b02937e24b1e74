/* isolate.c -- measuring a GPU candidate in a child process (cuda_rt.h: rt_cuda_run_isolated):
 * fork, the child opens the device and runs the caller's function, its result comes back over
 * a pipe; the parent's host-side watchdog kills a child that outlives its deadline, so a hung
 * or crashed kernel costs one child and a classified result, never the tuner. */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/context.h"
#include "runtime/cuda/cuda_rt.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void set_message(rt_cuda_result *r, const char *text) {
    snprintf(r->message, sizeof r->message, "%s", text ? text : "");
}

/* The child: open, run, report. Never returns. */
static void child(int fd, int ordinal, rt_cuda_child_fn fn, void *user) {
    /* die with the parent, so a killed tuner leaves no child holding the GPU */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    rt_cuda_result r;
    memset(&r, 0, sizeof r);
    r.error = -1;
    wpk_context *ctx = wpk_context_create();
    rt_cuda *d = NULL;
    wpk_status st = ctx ? rt_cuda_open(ctx, ordinal, &d) : WPK_ERR_NOMEM;
    if (st) {
        r.fault = RT_CUDA_FAULT_UNAVAILABLE;
        set_message(&r, ctx ? wpk_context_error(ctx) : "out of memory");
    } else {
        st = fn(user, d, &r);
        if (st && r.fault == RT_CUDA_FAULT_NONE) {
            r.fault = rt_cuda_last_fault(d);
            /* an error that is no device fault (a refused argument) still fails the candidate */
            if (r.fault == RT_CUDA_FAULT_NONE)
                r.fault = st == WPK_ERR_NOMEM ? RT_CUDA_FAULT_OOM : RT_CUDA_FAULT_CRASH;
        }
        if (st && !r.message[0]) set_message(&r, wpk_context_error(ctx));
        /* a lost context is left to the exit, untouched (rt_cuda_close): it could hang */
        rt_cuda_close(d);
    }
    const char *p = (const char *)&r;
    size_t left = sizeof r;
    while (left) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        p += n, left -= (size_t)n;
    }
    _exit(left ? 3 : 0);
}

wpk_status rt_cuda_run_isolated(wpk_context *ctx, int ordinal, double timeout_s,
                                rt_cuda_child_fn fn, void *user, rt_cuda_result *r) {
    memset(r, 0, sizeof *r);
    r->error = -1;
    if (!fn) return wpk_error(ctx, WPK_ERR_INVALID_ARG, "rt_cuda_run_isolated: no function");
    if (timeout_s <= 0) timeout_s = 60;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return wpk_error(ctx, WPK_ERR_IO, "CUDA measurement: no pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]), close(fds[1]);
        return wpk_error(ctx, WPK_ERR_IO, "CUDA measurement: cannot fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        child(fds[1], ordinal, fn, user);
    }
    close(fds[1]);
    const double deadline = now_s() + timeout_s;
    char *p = (char *)r;
    size_t got = 0;
    bool timed_out = false;
    while (got < sizeof *r) {
        double left = deadline - now_s();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd pf = {fds[0], POLLIN, 0};
        int n = poll(&pf, 1, left > 1 ? 1000 : (int)(left * 1000) + 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) continue;
        ssize_t k = read(fds[0], p + got, sizeof *r - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break; /* the child is gone */
        got += (size_t)k;
    }
    close(fds[0]);
    if (timed_out) kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (timed_out) {
        memset(r, 0, sizeof *r);
        r->error = -1;
        r->fault = RT_CUDA_FAULT_TIMEOUT;
        snprintf(r->message, sizeof r->message, "killed after %.3g s (watchdog): the kernel did "
                 "not finish", timeout_s);
    } else if (got < sizeof *r) {
        memset(r, 0, sizeof *r);
        r->error = -1;
        r->fault = RT_CUDA_FAULT_CRASH;
        if (WIFSIGNALED(status))
            snprintf(r->message, sizeof r->message, "the measuring process died of signal %d (%s)",
                     WTERMSIG(status), strsignal(WTERMSIG(status)));
        else
            snprintf(r->message, sizeof r->message, "the measuring process exited with status %d "
                     "without a result", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    if (r->nsamples < 0 || r->nsamples > RT_CUDA_MAX_SAMPLES) r->nsamples = 0;
    r->message[sizeof r->message - 1] = '\0';
    return WPK_OK;
}
