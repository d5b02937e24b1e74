/* measure.c -- the measurer's parent side (see measure.h): the task's inputs and reference
 * outputs, the worker processes (fork, a pipe back, a deadline, a memory cap), and the
 * classification of what came back. The event loop and the parallelism policy are in
 * measure_stream.c; what the children do is in measure_child.c. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */

#include "tune/measure.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "base/alloc.h"
#include "base/context.h"
#include "base/target.h"
#include "codegen/c/cg_c.h"
#include "tune/measure_impl.h"
#include "codegen/cuda/cg_cuda.h"

double tune_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *tune_status_name(tune_status s) {
    static const char *const names[] = {
        [TUNE_OK] = "OK",           [TUNE_COMPILE_ERROR] = "COMPILE_ERROR",
        [TUNE_TIMEOUT] = "TIMEOUT", [TUNE_CRASH] = "CRASH",
        [TUNE_WRONG_RESULT] = "WRONG_RESULT", [TUNE_INVALID] = "INVALID",
    };
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "?";
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* v sorted into tmp (n <= TUNE_MAX_SAMPLES). */
static int sorted(const double *v, int n, double *tmp) {
    if (n > TUNE_MAX_SAMPLES) n = TUNE_MAX_SAMPLES;
    memcpy(tmp, v, sizeof *v * (size_t)(n > 0 ? n : 0));
    qsort(tmp, (size_t)(n > 0 ? n : 0), sizeof *tmp, cmp_double);
    return n;
}

/* The q-quantile of sorted s[0..n) with linear interpolation. */
static double quantile(const double *s, int n, double q) {
    double pos = q * (n - 1);
    int lo = (int)pos;
    if (lo >= n - 1) return s[n - 1];
    return s[lo] + (pos - lo) * (s[lo + 1] - s[lo]);
}

double tune_median(const double *v, int n) {
    double s[TUNE_MAX_SAMPLES];
    n = sorted(v, n, s);
    return n > 0 ? quantile(s, n, 0.5) : 0.0;
}

double tune_spread(const double *v, int n) {
    double s[TUNE_MAX_SAMPLES];
    n = sorted(v, n, s);
    if (n < 2) return INFINITY;
    double med = quantile(s, n, 0.5);
    return med > 0 ? (quantile(s, n, 0.75) - quantile(s, n, 0.25)) / med : INFINITY;
}

tune_measure_params tune_measure_default_params(void) {
    tune_measure_params p;
    memset(&p, 0, sizeof p);
    p.build_timeout_s = 60;
    p.run_timeout_s = 30;
    p.mem_cap_bytes = (int64_t)4 << 30;
    p.min_repeat_ms = 50;
    p.max_repeat_ms = 400;
    p.min_sample_ms = 1;
    p.max_spread = 0.05;
    p.cold_bytes = target_llc_bytes() > 0 ? target_llc_bytes() : -1;
    p.min_samples = 5;
    p.max_samples = 64;
    p.warmup_calls = 2;
    p.tolerance = 1e-4;
    p.seed = 1;
    return p;
}

void tune_parallelism_init(tune_parallelism *p, int fixed, int kernel_threads) {
    memset(p, 0, sizeof *p);
    int cores = target_cores();
    if (kernel_threads <= 0 || kernel_threads > cores) kernel_threads = cores;
    p->automatic = fixed <= 0;
    p->builds = p->max_builds = fixed > 0 ? fixed : cores;
    /* concurrent measurements only where each kernel's threads get cores of their own */
    p->max_level = p->automatic ? cores / kernel_threads : 0;
    p->backoff = 4;
    p->tolerance = 0.05;
    p->last_error = -1;
}

/* ---- bytes ---- */

bool tune_bytes_put(tune_bytes *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        char *d = wpk_realloc(b->data, cap);
        if (!d) return false;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return true;
}

void tune_bytes_free(tune_bytes *b) {
    wpk_free(b->data);
    memset(b, 0, sizeof *b);
}

bool tune_write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        c += w;
        n -= (size_t)w;
    }
    return true;
}

void *tune_alloc64(size_t n, void **raw) {
    char *r = wpk_malloc(n + 64);
    *raw = r;
    if (!r) return NULL;
    return r + (64 - (uintptr_t)r % 64) % 64;
}

/* ---- processes ---- */

/* The child's address space may grow by cap beyond what it inherited (the parent's model,
 * heap and libraries are not the candidate's doing). */
static void limit_memory(int64_t cap) {
    if (cap <= 0) return;
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%lu", &pages) != 1) pages = 0;
        fclose(f);
    }
    rlim_t lim = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (rlim_t)cap;
    struct rlimit rl = {lim, lim};
    setrlimit(RLIMIT_AS, &rl);
}

/* Fork a child that runs body(m, arg, fd) and exits; fd is the write end of the pipe whose
 * read end p->fd gets. The child leads its own process group (a timeout kills the group: a
 * build worker's compiler too) and dies with the parent. False (errno) when there is no
 * process or pipe to be had. */
bool tune_proc_start(tune_measurer *m, tune_proc *p, double timeout_s,
                       void (*body)(tune_measurer *, void *, int), void *arg) {
    int fds[2];
    if (pipe(fds) != 0) return false;
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    /* the write end must not leak into a build worker's compiler: a killed worker's pipe
       would stay open until the compiler finished */
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        errno = e;
        return false;
    }
    if (pid == 0) {
        close(fds[0]);
        setpgid(0, 0);
#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
        if (getppid() != parent) _exit(127);
        signal(SIGPIPE, SIG_DFL);
        limit_memory(m->params.mem_cap_bytes);
        body(m, arg, fds[1]);
        /* _exit closes the pipe: the parent's end of file then means the child is gone, not
           paused (SIGSTOP) on its way out with the parent waiting for it */
        _exit(0);
    }
    setpgid(pid, pid); /* as the child does: whichever runs first, the group exists */
    close(fds[1]);
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->fd = fds[0];
    p->start = tune_now();
    p->deadline = p->start + timeout_s;
    return true;
}

/* Read what is there; true at end of file (the child closed the pipe or died). */
bool tune_proc_read(tune_proc *p) {
    char buf[65536];
    ssize_t n = read(p->fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return false;
    if (n <= 0) return true;
    if (!tune_bytes_put(&p->out, buf, (size_t)n)) p->oom = true;
    return false;
}

double tune_group_cpu_s(pid_t pgid) {
#ifdef __linux__
    DIR *d = opendir("/proc");
    if (!d) return -1;
    const double tick = (double)sysconf(_SC_CLK_TCK);
    double total = 0;
    bool seen = false;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        char path[64], line[1024];
        snprintf(path, sizeof path, "/proc/%.20s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue; /* ended since the listing */
        size_t n = fread(line, 1, sizeof line - 1, f);
        fclose(f);
        line[n] = '\0';
        /* after the command's closing parenthesis (a command may contain one): state ppid
           pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime
           cstime */
        const char *at = strrchr(line, ')');
        long long v[15];
        int got = 0;
        if (at) {
            at++;
            while (*at == ' ') at++;
            at = strchr(at, ' '); /* past the state letter */
            for (char *end; at && got < 14; at = end) {
                long long x = strtoll(at, &end, 10);
                if (end == at) break;
                v[1 + got++] = x;
            }
        }
        if (got < 14 || v[2] != (long long)pgid) continue;
        seen = true;
        total += (double)(v[11] + v[12] + v[13] + v[14]) / tick;
    }
    closedir(d);
    return seen ? total : -1;
#else
    (void)pgid;
    return -1;
#endif
}

bool tune_proc_expired(tune_proc *p, double now) {
    if (p->deadline > now) return false;
    if (p->cpu_limit <= 0) return true;
    double cap = p->start + p->paused_s + TUNE_WALL_CAP * p->cpu_limit;
    double cpu = now < cap ? tune_group_cpu_s(p->pid) : -1;
    if (cpu < 0) return true;
    p->cpu_s = cpu;
    if (cpu >= p->cpu_limit) return true;
    /* it cannot reach its limit sooner than this (one core): look again then */
    double left = p->cpu_limit - cpu;
    p->deadline = now + (left > 0.25 ? left : 0.25);
    if (p->deadline > cap) p->deadline = cap;
    return false;
}

void tune_proc_kill(tune_proc *p) {
    if (p->pid > 0 && !p->killed) {
        kill(-p->pid, SIGKILL);
        kill(p->pid, SIGKILL);
        p->killed = true;
    }
}

void tune_proc_resume(tune_proc *p) {
    if (!p->stopped) return;
    kill(-p->pid, SIGCONT);
    p->deadline += tune_now() - p->stopped_at;
    p->paused_s += tune_now() - p->stopped_at;
    p->stopped = false;
}

/* Reap the child after end of file; p->status as waitpid's. */
void tune_proc_reap(tune_proc *p) {
    close(p->fd);
    p->fd = -1;
    /* a child paused after its pipe closed (its own body closed it) has nothing left to do
       but exit: waiting for it stopped would wait for ever */
    tune_proc_resume(p);
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(p->pid, &status, 0, &ru) < 0 && errno == EINTR) {
    }
    p->status = status;
    /* on Linux its own time and that of what it reaped (a build worker's compiler) */
    p->cpu_total = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                   (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    p->end = tune_now();
    p->pid = 0;
}

/* Why a child ended without saying so: a signal (ours at the deadline, or its own crash), or
 * an exit status. */
void tune_proc_describe(const tune_proc *p, const char *who, double timeout_s, char *msg,
                         size_t cap) {
    if (p->killed && p->cpu_limit > 0)
        snprintf(msg, cap, "%s timed out: %.1f s of CPU time in %.1f s (limits: %.1f s of CPU "
                 "time, %.0f s)", who, p->cpu_s, p->end - p->start - p->paused_s, timeout_s,
                 TUNE_WALL_CAP * timeout_s);
    else if (p->killed)
        snprintf(msg, cap, "%s timed out after %.1f s", who, timeout_s);
    else if (WIFSIGNALED(p->status))
        snprintf(msg, cap, "%s killed by signal %d (%s)", who, WTERMSIG(p->status),
                 strsignal(WTERMSIG(p->status)));
    else
        snprintf(msg, cap, "%s exited with status %d without a result", who,
                 WIFEXITED(p->status) ? WEXITSTATUS(p->status) : -1);
}

/* Run one child to its end (no other child of this measurer running). */
void tune_proc_wait(tune_proc *p) {
    for (;;) {
        double left = p->deadline - tune_now();
        if (left <= 0) tune_proc_kill(p);
        struct pollfd pf = {p->fd, POLLIN, 0};
        int r = poll(&pf, 1, p->killed ? 1000 : (int)(left * 1000) + 1);
        if (r > 0 && tune_proc_read(p)) break;
    }
    tune_proc_reap(p);
}

/* ---- toolchain ---- */

const char *tune_toolchain(void) {
    static char text[512];
    if (text[0]) return text;
    const char *cc = getenv("CC");
    if (!cc || !*cc) cc = "cc";
    char version[256] = "unknown";
    char cmd[512];
    /* the first word of $CC is the compiler (cg_c_compile splits it the same way) */
    snprintf(cmd, sizeof cmd, "%s", cc);
    char *argv[16];
    int n = 0;
    char *save = NULL;
    for (char *w = strtok_r(cmd, " \t", &save); w && n < 14; w = strtok_r(NULL, " \t", &save))
        argv[n++] = w;
    argv[n++] = "--version";
    argv[n] = NULL;
    int fds[2];
    if (n > 1 && pipe(fds) == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fds[1], 1);
            int devnull = open("/dev/null", O_WRONLY);
            if (devnull >= 0) dup2(devnull, 2);
            close(fds[0]);
            execvp(argv[0], argv);
            _exit(127);
        }
        close(fds[1]);
        char buf[256];
        ssize_t got = pid > 0 ? read(fds[0], buf, sizeof buf - 1) : -1;
        close(fds[0]);
        if (pid > 0) waitpid(pid, NULL, 0);
        if (got > 0) {
            buf[got] = '\0';
            buf[strcspn(buf, "\n")] = '\0';
            snprintf(version, sizeof version, "%s", buf);
        }
    }
    snprintf(text, sizeof text, "%s (%s) -O3 -march=native -fopenmp -std=c11 -ffp-contract=fast "
             "-fno-math-errno", cc, version);
    return text;
}

/* ---- the measurer ---- */

static int64_t numel(const ir_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->dims[d];
    return n;
}

/* Seeded uniform floats in [-1, 1). */
static void fill_random(float *p, int64_t n, uint64_t *s) {
    for (int64_t i = 0; i < n; i++) {
        *s ^= *s >> 12;
        *s ^= *s << 25;
        *s ^= *s >> 27;
        uint64_t r = *s * 2685821657736338717ULL;
        p[i] = (float)((double)(r >> 40) / (double)(1 << 23) - 1.0);
    }
}

static wpk_status prepare_inputs(tune_measurer *m) {
    const tune_task *t = m->task;
    uint64_t s = m->params.seed ? m->params.seed : 1;
    for (int i = 0; i < t->nin; i++) {
        const ir_tensor *x = &t->in[i];
        if (x->dtype == WPK_DTYPE_UNDEFINED) continue; /* an omitted optional input */
        size_t bytes = ir_nbytes(x);
        void *p = tune_alloc64(bytes ? bytes : 1, &m->in_raw[i]);
        if (!p) return wpk_error(m->ctx, WPK_ERR_NOMEM, "out of memory for the inputs of %s",
                                 t->key);
        if (x->data) memcpy(p, x->data, bytes);
        else if (x->dtype == WPK_DTYPE_FLOAT32) fill_random(p, numel(x), &s);
        else memset(p, 0, bytes); /* indices and the like: zeros are always in range */
        m->in[i] = *x;
        m->in[i].data = p;
        m->present[m->npresent++] = i;
    }
    size_t total = 0;
    for (int i = 0; i < t->nout; i++) {
        m->ref_off[i] = total;
        total += (ir_nbytes(&t->out[i]) + 63) / 64 * 64;
    }
    /* shared with the child that computes them */
    m->ref_bytes = total ? total : 64;
    m->ref = mmap(NULL, m->ref_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m->ref == MAP_FAILED) {
        m->ref = NULL;
        return wpk_error(m->ctx, WPK_ERR_NOMEM, "out of memory for the reference outputs of %s",
                         t->key);
    }
    return WPK_OK;
}

static wpk_status compute_reference(tune_measurer *m) {
    const ir_op_info *info = ir_op_get(m->task->node->op);
    if (m->task->node->nin > TUNE_MAX_ARGS || m->task->node->nout > TUNE_MAX_ARGS)
        return wpk_error(m->ctx, WPK_ERR_UNSUPPORTED, "%s: node '%s' has more than %d inputs or "
                         "outputs", m->task->key, m->task->node->name, TUNE_MAX_ARGS);
    if (!info || !info->ref)
        return wpk_error(m->ctx, WPK_ERR_UNSUPPORTED, "%s: op %s has no reference kernel to check "
                         "candidates against", m->task->key, m->task->node->op_type);
    tune_proc p;
    double timeout = m->params.run_timeout_s * 10 > 120 ? m->params.run_timeout_s * 10 : 120;
    if (!tune_proc_start(m, &p, timeout, tune_reference_child, NULL))
        return wpk_error(m->ctx, WPK_ERR_IO, "%s: cannot start a process for the reference "
                         "kernel: %s", m->task->key, strerror(errno));
    tune_proc_wait(&p);
    tune_ref_msg r;
    wpk_status st = WPK_OK;
    if (p.out.len >= sizeof r) {
        memcpy(&r, p.out.data, sizeof r);
        if (r.status)
            st = wpk_error(m->ctx, WPK_ERR_INTERNAL, "%s: the reference kernel failed: %.*s",
                           m->task->key, (int)(p.out.len - sizeof r), p.out.data + sizeof r);
    } else {
        char why[256];
        tune_proc_describe(&p, "the reference kernel", timeout, why, sizeof why);
        st = wpk_error(m->ctx, WPK_ERR_INTERNAL, "%s: %s", m->task->key, why);
    }
    tune_bytes_free(&p.out);
    return st;
}

wpk_status tune_measurer_create(wpk_context *ctx, const tune_task *task,
                                const tune_measure_params *params, tune_measurer **out) {
    *out = NULL;
    tune_measurer *m = wpk_calloc(1, sizeof *m);
    if (!m) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory creating a measurer");
    m->ctx = ctx;
    m->task = task;
    m->params = params ? *params : tune_measure_default_params();
    if (m->params.threads <= 0) m->params.threads = target_cores();
    if (m->params.max_samples > TUNE_MAX_SAMPLES || m->params.max_samples < 1)
        m->params.max_samples = TUNE_MAX_SAMPLES;
    if (m->params.min_samples < 1) m->params.min_samples = 1;
    tune_parallelism_init(&m->own_parallel, 1, m->params.threads);
    m->par = m->params.parallel ? m->params.parallel : &m->own_parallel;
    task->tmpl->space(task->tmpl, task, &m->space);
    bool cuda = m->params.device == TUNE_DEVICE_CUDA;
    /* a CUDA context maps the device's memory into the process: no address-space cap */
    if (cuda) m->params.mem_cap_bytes = 0;
    tune_toolchain();
    wpk_status st = prepare_inputs(m);
    if (st == WPK_OK) st = compute_reference(m);
    if (st == WPK_OK && cuda) st = cg_cuda_nvrtc_available(ctx);
    if (st == WPK_OK && !cuda) {
        /* a compiler is there, and its identity is known before any child asks (children
           inherit it instead of each running `cc --version`) */
        cg_module *probe = NULL;
        st = cg_c_compile(ctx, "void wpk_tune_probe(void *const *args);\n"
                               "void wpk_tune_probe(void *const *args) { (void)args; }\n",
                          &probe);
        cg_module_free(probe);
    }
    if (st) {
        tune_measurer_free(m);
        return st;
    }
    *out = m;
    return WPK_OK;
}

void tune_job_clear(tune_job *j) {
    wpk_free(j->source);
    tune_bytes_free(&j->build.out);
    tune_bytes_free(&j->run.out);
    memset(j, 0, sizeof *j);
}

void tune_measurer_free(tune_measurer *m) {
    if (!m) return;
    for (int i = 0; i < TUNE_MAX_ARGS; i++) wpk_free(m->in_raw[i]);
    if (m->ref) munmap(m->ref, m->ref_bytes);
    tune_job_clear(&m->control);
    wpk_free(m);
}

void tune_measurer_text(const tune_measurer *m, const tune_config *c, char *dst, size_t cap) {
    strbuf b = {0};
    tune_config_print(&m->space, c, &b);
    snprintf(dst, cap, "%s", b.s ? b.s : "");
    sb_free(&b);
}

void tune_measurer_set_idle(tune_measurer *m, void (*fn)(void *user), void *user) {
    m->idle = fn;
    m->idle_user = user;
}

void tune_measurer_set_control(tune_measurer *m, const tune_config *cfg) {
    tune_job_clear(&m->control);
    m->control.index = -1;
    m->control.cfg = *cfg;
    tune_measurer_text(m, cfg, m->control.text, sizeof m->control.text);
    m->has_control = true;
    m->baseline_s = 0;
}

/* ---- finishing a child ---- */

static void fail(tune_job *j, tune_status s, const char *fmt, const char *detail) {
    j->res.status = s;
    j->res.median = 0;
    snprintf(j->res.message, sizeof j->res.message, fmt, detail);
}

void tune_job_finish_build(tune_measurer *m, tune_job *j) {
    tune_proc *p = &j->build;
    tune_proc_reap(p);
    j->res.build_s = p->end - p->start;
    tune_build_msg h;
    if (p->oom || p->out.len < sizeof h) {
        char why[256];
        tune_proc_describe(p, "the build worker", m->params.build_timeout_s, why, sizeof why);
        if (p->oom) snprintf(why, sizeof why, "out of memory reading the build worker");
        fail(j, TUNE_COMPILE_ERROR, "%s", why);
        /* not the candidate's fault unless it made the compiler crash or spend its whole CPU
           time: the policy counts it */
        bool over_cpu = p->killed && p->cpu_limit > 0 && p->cpu_s >= p->cpu_limit;
        j->sys_fail = !over_cpu && (p->killed || p->oom ||
                                    (WIFSIGNALED(p->status) && WTERMSIG(p->status) == SIGKILL));
        j->state = J_DONE;
        return;
    }
    memcpy(&h, p->out.data, sizeof h);
    size_t want = sizeof h + (size_t)h.msg_len + (size_t)h.src_len;
    if (h.msg_len < 0 || h.src_len < 0 || p->out.len != want) {
        fail(j, TUNE_COMPILE_ERROR, "%s", "the build worker's answer was cut short");
        j->sys_fail = true;
        j->state = J_DONE;
        return;
    }
    const char *msg = p->out.data + sizeof h;
    if (h.status != TUNE_OK) {
        j->res.status = (tune_status)h.status;
        snprintf(j->res.message, sizeof j->res.message, "%.*s", (int)h.msg_len, msg);
        j->state = J_DONE;
        return;
    }
    j->meta = h;
    wpk_free(j->source);
    j->source = wpk_malloc((size_t)h.src_len + 1);
    if (!j->source) {
        fail(j, TUNE_COMPILE_ERROR, "%s", "out of memory keeping the kernel source");
        j->sys_fail = true;
        j->state = J_DONE;
        return;
    }
    memcpy(j->source, msg + h.msg_len, (size_t)h.src_len);
    j->source[h.src_len] = '\0';
    tune_bytes_free(&p->out);
    j->state = J_BUILT;
}

void tune_job_finish_run(tune_measurer *m, tune_job *j) {
    tune_proc *p = &j->run;
    tune_proc_reap(p);
    j->res.run_s = p->end - p->start;
    tune_run_msg h;
    size_t need = sizeof h;
    if (!p->oom && p->out.len >= need) {
        memcpy(&h, p->out.data, sizeof h);
        need += sizeof(double) * (size_t)(h.nsamples > 0 ? h.nsamples : 0) + (size_t)h.msg_len;
    }
    if (p->oom || p->out.len < sizeof h || p->out.len != need || h.nsamples < 0 ||
        h.nsamples > TUNE_MAX_SAMPLES) {
        /* it died before it could say: at the deadline (ours), or by its own hand */
        char why[256];
        tune_proc_describe(p, "the kernel", m->params.run_timeout_s, why, sizeof why);
        fail(j, p->killed ? TUNE_TIMEOUT : TUNE_CRASH, "%s", why);
        j->state = J_DONE;
        tune_bytes_free(&p->out);
        return;
    }
    j->res.status = (tune_status)h.status;
    j->res.nsamples = h.nsamples;
    memcpy(j->res.samples, p->out.data + sizeof h, sizeof(double) * (size_t)h.nsamples);
    j->res.calls_per_sample = h.calls;
    j->res.cold = h.cold != 0;
    j->res.error = h.error;
    j->res.median = h.status == TUNE_OK ? tune_median(j->res.samples, h.nsamples) : 0;
    snprintf(j->res.message, sizeof j->res.message, "%.*s", (int)h.msg_len,
             p->out.data + sizeof h + sizeof(double) * (size_t)h.nsamples);
    tune_bytes_free(&p->out);
    j->state = J_DONE;
}

