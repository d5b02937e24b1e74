/* measure_impl.h -- what the measurer's parent side (measure.c) and its children
 * (measure_child.c) share: the measurer's state, a batch job, the messages children send back
 * through their pipes. Internal to src/tune/measure*.c. */
#ifndef WPK_TUNE_MEASURE_IMPL_H
#define WPK_TUNE_MEASURE_IMPL_H

#include <sys/types.h>

#include "kernels/cpu_kernel.h"
#include "tune/measure.h"

typedef struct tune_bytes {
    char *data;
    size_t len, cap;
} tune_bytes;

bool tune_bytes_put(tune_bytes *b, const void *p, size_t n);
void tune_bytes_free(tune_bytes *b);

/* One child process and what it sent. */
typedef struct tune_proc {
    pid_t pid;           /* 0: none */
    int fd;              /* read end of its pipe */
    double start, deadline, end;
    /* > 0: its limit is this many seconds of CPU time of its process group (a build worker
       and its compiler), not of wall time: deadline is then only when to look again */
    double cpu_limit;
    double cpu_s;        /* the group's CPU seconds at the last look (cpu_limit > 0) */
    double cpu_total;    /* once reaped: CPU seconds of it and of the children it reaped */
    tune_bytes out;
    bool killed;         /* by us, at its deadline */
    bool stopped;        /* paused (SIGSTOP) while a measurement runs alone */
    double stopped_at;
    double paused_s;     /* wall time spent paused, over its life */
    bool oom;            /* its answer did not fit in our memory */
    int status;          /* waitpid's */
} tune_proc;

/* Build worker -> parent: this, then msg_len bytes of message, then src_len bytes of the C
 * source (the translation unit whose cached object the run child loads). Kernel fields as
 * cpu_kernel's. */
typedef struct tune_build_msg {
    int32_t status;      /* TUNE_OK or TUNE_COMPILE_ERROR */
    int32_t ninputs, noutputs, nscratch;
    int64_t scratch_off[CPU_MAX_SCRATCH];
    int64_t scratch_bytes;
    char name[32];
    char pack_name[TUNE_MAX_ARGS][40];
    int64_t pack_numel[TUNE_MAX_ARGS];
    double seconds;
    int64_t msg_len, src_len;
    int64_t launch[7];   /* a CUDA kernel's grid[3], block[3], dynamic shared bytes */
} tune_build_msg;

/* Run child -> parent: this, nsamples doubles, msg_len bytes of message. */
typedef struct tune_run_msg {
    int32_t status;
    int32_t nsamples;
    int64_t calls;
    double error;
    int64_t msg_len;
    int32_t cold; /* timed with its constants flushed before each call */
} tune_run_msg;

/* Reference child -> parent: this, then msg_len bytes of message (status != 0: failed). */
typedef struct tune_ref_msg {
    int32_t status;
    int32_t unused;
    int64_t msg_len;
} tune_ref_msg;

typedef enum tune_job_state { J_NEW, J_BUILDING, J_BUILT, J_RUNNING, J_DONE } tune_job_state;

typedef struct tune_job {
    int index;                /* in the caller's batch; -1: the control */
    tune_config cfg;
    char text[512];           /* the config's text form */
    tune_job_state state;
    tune_proc build, run;
    tune_build_msg meta;      /* once built */
    char *source;             /* once built: the unit's C source (wpk_malloc'd) */
    tune_measurement res;
    bool sys_fail;            /* its build failed for a reason that is not the candidate's */
    bool alone;               /* its run must have nothing else running (builders paused) */
} tune_job;

struct tune_measurer {
    wpk_context *ctx;
    const tune_task *task;    /* borrowed */
    tune_measure_params params;
    tune_parallelism own_parallel, *par;
    tune_space space;
    /* inputs: per node input slot (omitted ones zero), data 64-byte aligned */
    ir_tensor in[TUNE_MAX_ARGS];
    void *in_raw[TUNE_MAX_ARGS];
    int present[TUNE_MAX_ARGS]; /* slots of the present inputs, in order: kernel input i */
    int npresent;
    /* reference outputs, shared with the child that computes them */
    char *ref;
    size_t ref_bytes, ref_off[TUNE_MAX_ARGS];
    /* the control candidate (its source kept across batches) and its time alone */
    tune_job control;
    bool has_control;
    double baseline_s;
    int since_baseline;
    double fail_rate_alone;   /* of timeouts and crashes among kernels timed alone */
    /* what builds cost (log CPU seconds), overall and per knob value: with several build
       workers the costliest waiting candidate starts first (measure_stream.c) */
    double build_log_sum[TUNE_MAX_KNOBS][TUNE_MAX_VALUES];
    int build_count[TUNE_MAX_KNOBS][TUNE_MAX_VALUES];
    double build_log_total;
    int build_total;
    void (*idle)(void *user); /* tune_measurer_set_idle's */
    void *idle_user;
};

double tune_now(void);
bool tune_write_all(int fd, const void *p, size_t n);
/* n bytes at a 64-byte aligned address inside a wpk_malloc'd block (*raw, to free). */
void *tune_alloc64(size_t n, void **raw);

/* Wall time a CPU-time limited child may take, in multiples of its limit. */
#define TUNE_WALL_CAP 10

/* Processes (measure.c). tune_proc_start forks a child running body(m, arg, fd) that answers
 * through fd, leads its own process group (the group is what a timeout kills and a pause
 * stops), dies with the parent and has the memory cap; false with errno when there is no
 * process or pipe. tune_proc_read reads what is there, true at end of file; tune_proc_reap
 * then collects its status. tune_proc_wait runs one child to its end (deadline included). */
bool tune_proc_start(tune_measurer *m, tune_proc *p, double timeout_s,
                     void (*body)(tune_measurer *, void *, int), void *arg);
bool tune_proc_read(tune_proc *p);
/* Whether p is past its limit at time now. With a CPU-time limit the group's CPU seconds are
 * read (Linux: /proc) when its wall deadline passes, and the deadline moves on by what is
 * left: a build starved of cores (builds beside it, other users) is slow, not hung. A group
 * whose CPU time cannot be read, or that has run TUNE_WALL_CAP times its limit in wall
 * time (waiting, not computing), is past it. */
bool tune_proc_expired(tune_proc *p, double now);
/* CPU seconds the members of process group pgid have used, with what they have reaped of
 * their children; -1 where that cannot be read. */
double tune_group_cpu_s(pid_t pgid);
void tune_proc_kill(tune_proc *p);
/* Continue a child paused with SIGSTOP (p->stopped), its deadline moved by the pause. */
void tune_proc_resume(tune_proc *p);
void tune_proc_reap(tune_proc *p);
void tune_proc_wait(tune_proc *p);
/* Why a child ended without answering: our timeout, a signal, an exit status. */
void tune_proc_describe(const tune_proc *p, const char *who, double timeout_s, char *msg,
                        size_t cap);

/* Jobs (measure.c): the text of a config, a job's end, the result of a finished build worker
 * (state J_BUILT with its source, or J_DONE with a failure) or run child (J_DONE). */
void tune_measurer_text(const tune_measurer *m, const tune_config *c, char *dst, size_t cap);
void tune_job_clear(tune_job *j);
void tune_job_finish_build(tune_measurer *m, tune_job *j);
void tune_job_finish_run(tune_measurer *m, tune_job *j);

/* Child bodies (measure_child.c): each writes its message to fd and returns. */
void tune_build_child(tune_measurer *m, void *job, int fd);
void tune_run_child(tune_measurer *m, void *job, int fd);
void tune_reference_child(tune_measurer *m, void *unused, int fd);
/* The same for device CUDA (measure_cuda.c): the build answers with the module image (PTX or
 * cubin) as its source and the launch dims; the run child opens the device itself. */
void tune_build_child_cuda(tune_measurer *m, void *job, int fd);
void tune_run_child_cuda(tune_measurer *m, void *job, int fd);

/* max |got - want| / max |want| over n floats (a NaN where want has none: infinite), the
 * index of the worst element in *worst (-1: none). */
double tune_rel_error(const float *got, const float *want, int64_t n, int64_t *worst);

#endif
