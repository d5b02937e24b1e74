/* measure.h -- the measurer (builder + runner): turns one task's candidate configs into
 * timings. Each candidate is built (template build -> loop_lower -> cg_c_emit -> cg_c_compile,
 * through the cpu backend's kernel builder, so what is measured is what the backend runs) in a
 * forked build worker; the compiled object lands in the kernel cache, where an isolated forked
 * run child loads it and runs it with a timeout and a memory cap on 64-byte aligned inputs:
 * checked once against the reference kernel, warmed up, then repeated until min_repeat_ms has
 * passed and the samples' spread is small, every sample kept -- but, by CPU time, those whose
 * threads waited for a core while another process ran there (wall time well over CPU time:
 * measure_child.c), which are left out where at least three others remain. A candidate whose
 * constants outgrow the last-level cache (cold_bytes) is timed as a model runs it: each call
 * on its own, its constants flushed from the caches before it. A compile error, a hang, a
 * crash or a wrong result is classified and never stops the batch.
 *
 * Parallelism (DOPpler): builds run in parallel with each other (build slots; with several,
 * the waiting candidate expected to build longest -- build CPU time learned per knob value --
 * starts first, so that no long compile runs alone at the end) while
 * measurements run in measure slots of their own, by default one at a time and never while a
 * build runs (a kernel timed beside a compiler on a few cores reads slow). With the automatic
 * policy the measurer raises that level while a control candidate, re-timed under the same
 * concurrency, stays within tolerance of its time alone, and cuts it (re-timing the batch
 * alone) when the error or the failures rise. Re-measuring the final top candidates alone is
 * the caller's TUNE_MEASURE_ALONE batch.
 *
 * Process rules: the calling process should not have run OpenMP parallel regions before it
 * forks measurement children (GNU OpenMP is not fork-safe: a child would wait for the parent's
 * pool threads forever -- it would be timed out, not hang the tuner); the measurer computes the
 * reference outputs in a child for that reason. Children are killed with the measurer's
 * process (PR_SET_PDEATHSIG on Linux). A run child pins its OpenMP threads to distinct CPUs
 * where only one measurement can run at a time (kernel threads > half the CPUs): a fresh
 * child's threads otherwise could share a CPU for its first tens of milliseconds. */
#ifndef WPK_TUNE_MEASURE_H
#define WPK_TUNE_MEASURE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "tune/strategy.h"
#include "kernels/provider.h"

#define TUNE_MAX_SAMPLES 128
/* Candidates in flight in one batch (a longer batch is measured in pieces this long). */
#define TUNE_MAX_BATCH 64

/* The degree of parallelism, kept across the measurers of one tuning job (the caller's;
 * tune_parallelism_init). Read it for reports; the measurer changes it. */
typedef struct tune_parallelism {
    bool automatic;     /* the policy adjusts builds and level */
    int builds;         /* build workers now */
    int max_builds;
    int level;          /* 0: measurements alone; L >= 1: measurements overlap builds, L slots */
    int max_level;      /* L * kernel threads <= cores */
    int wait;           /* windows before the next promotion try */
    int backoff;        /* wait after the next failed try (doubles) */
    int clean;          /* windows in a row at this level without trouble */
    int clean_builds;   /* windows of builds in a row without build workers lost */
    int counted;        /* results timed alone since the policy's last step */
    double tolerance;   /* control error that is still accurate (relative) */
    double last_error;  /* the control's error in the last batch that had one (-1: none) */
    int promotions, demotions, remeasured;  /* counters for reports */
} tune_parallelism;

/* fixed > 0: that many build workers, measurements alone, never changed. fixed == 0: the
 * automatic policy, starting at one build worker per core, measurements alone. */
void tune_parallelism_init(tune_parallelism *p, int fixed, int kernel_threads);

/* What a sample's time is: wall-clock time (what a caller waits; the default), or the CPU
 * time of the kernel's busiest OpenMP thread (insensitive to other processes taking the cores
 * on a shared machine, and a thread left idle does not make the kernel look faster; meant for
 * OMP_WAIT_POLICY=passive, where waiting threads sleep instead of spinning). */
typedef enum tune_clock { TUNE_CLOCK_WALL = 0, TUNE_CLOCK_CPU } tune_clock;

/* Where candidates run: the host (C + OpenMP kernels of the cpu templates), or CUDA device 0
 * (the CUDA templates' kernels compiled by NVRTC in the build workers, timed with CUDA events
 * in the run children: measure_cuda.c). */
typedef enum tune_device { TUNE_DEVICE_CPU = 0, TUNE_DEVICE_CUDA } tune_device;

typedef struct tune_measure_params {
    tune_parallelism *parallel; /* borrowed, must outlive the measurer; NULL: one build worker,
                                   measurements alone */
    int threads;               /* OpenMP threads of the kernels: 0 = target_cores() */
    double build_timeout_s;    /* one build worker (template, lowering, C compiler), in CPU
                                  seconds of the worker and its compiler (Linux; elsewhere wall
                                  seconds), and at most 10 times that in wall seconds: builds
                                  starved of cores by other builds or users are not cut short */
    double run_timeout_s;      /* one run child: load, pack, check, warm-up, repeats */
    int64_t mem_cap_bytes;     /* address space a child may take beyond what it inherits */
    double min_repeat_ms;      /* time every measurement at least this long */
    double max_repeat_ms;      /* and at most this long while the spread stays large */
    double min_sample_ms;      /* calls per sample so that one sample lasts this long */
    double max_spread;         /* stop once IQR / median of the samples is below this */
    int64_t cold_bytes;        /* a candidate whose constants (packed weights, bias) take more
                                  bytes than this has each call timed on its own, after
                                  flushing them from the caches: in a model whose weights
                                  outgrow the cache they are not cached between its calls, but
                                  timed call after call they would be (x86; -1: never; the
                                  tuner sets 0, every candidate, for such a model). Default:
                                  the last-level cache's size (-1 when unknown) */
    int min_samples, max_samples;
    int warmup_calls;          /* after the checked call, before the first sample */
    tune_clock clock;
    double tolerance;          /* check: max |out - ref| <= tolerance * max |ref| */
    uint64_t seed;             /* of the random inputs */
    tune_device device;
    int cuda_sm;               /* the device's SM version (device CUDA; 0: 90) */
    /* time candidates without comparing their outputs with the reference kernel's: only for
       a device that computes nothing (the tests' mock CUDA driver) */
    bool skip_check;
    /* Tests: rewrite a candidate's C source (config text, source) in the build worker before
     * it is compiled, to make kernels that crash, hang, compute garbage or do not compile. */
    void (*edit_source)(void *user, const char *config, strbuf *source);
    void *edit_user;
} tune_measure_params;

tune_measure_params tune_measure_default_params(void);

typedef struct tune_measurement {
    tune_status status;
    double median;                     /* seconds per call; 0 unless TUNE_OK */
    double samples[TUNE_MAX_SAMPLES];  /* seconds per call, each the mean of calls_per_sample */
    int nsamples;
    int64_t calls_per_sample;
    bool cold;                         /* each call timed after its constants were flushed
                                          (cold_bytes) */
    double error;                      /* the check: max |out - ref| / max |ref| (-1: unchecked) */
    double build_s, run_s;             /* wall time of its build worker and of its run child */
    int level;                         /* the parallelism level it was timed at (0: alone) */
    char message[640];                 /* why it failed: compiler output, signal, mismatch */
    const char *target;                /* the fingerprint of the machine that measured it and */
    const char *toolchain;             /* its compiler and flags, borrowed for the callback
                                          (NULL: this process's) */
} tune_measurement;

/* Called for each candidate as soon as its result is final (from the calling thread, inside
 * tune_measure_batch / tune_measure_stream): i numbers the candidates in the order they were
 * given, cfg is the candidate. Results timed at level >= 1 are final once the control of
 * their window has been checked. */
typedef void (*tune_measure_fn)(void *user, int i, const tune_config *cfg,
                                const tune_measurement *r);
/* The stream's source: up to max next configs into out; 0 when there are no more. Called
 * whenever a build slot is free, so builds never wait for the slowest of a batch. */
typedef int (*tune_propose_fn)(void *user, tune_config *out, int max);

typedef struct tune_measurer tune_measurer;

/* A measurer for task (borrowed: it, its node and graph must outlive the measurer). Prepares
 * the inputs once (constant inputs with their data, others seeded uniform in [-1, 1), every
 * buffer 64-byte aligned) and the reference outputs (the op's reference kernel, run in a
 * child). params is copied (NULL: defaults). Errors: WPK_ERR_UNSUPPORTED when there is no C
 * compiler or the op has no reference kernel, WPK_ERR_INTERNAL when the reference kernel fails,
 * WPK_ERR_IO when a child process cannot be made, WPK_ERR_NOMEM. *out is the caller's. */
wpk_status tune_measurer_create(wpk_context *ctx, const tune_task *task,
                                const tune_measure_params *params, tune_measurer **out);
void tune_measurer_free(tune_measurer *m);

/* The config whose re-timing under concurrency tells the policy whether timings stay
 * accurate (the template's default is a good one). Without one the level stays 0. */
void tune_measurer_set_control(tune_measurer *m, const tune_config *cfg);

/* fn (NULL: none) is called about every TUNE_IDLE_MS ms while a stream of m waits for its children:
 * the caller's chance to serve other work (the MPI fleet's rank 0 gathers the other ranks'
 * results there). It may call the stream's own callbacks' code, not m's functions. */
#define TUNE_IDLE_MS 20
void tune_measurer_set_idle(tune_measurer *m, void (*fn)(void *user), void *user);

enum { TUNE_MEASURE_ALONE = 1 };  /* flags: every run with nothing else running */

/* Measure the configs propose gives until it gives none and every candidate has a result;
 * fn hears each result. Build slots are kept full (a slow compile holds one slot, not the
 * stream); a measurement at level 0 runs with every build worker paused (SIGSTOP, their
 * deadlines extended by the pause), so it runs alone. Returns WPK_OK when every candidate got
 * a result (failures included); WPK_ERR_IO when no process can be made even one at a time,
 * WPK_ERR_NOMEM -- then candidates fn did not hear were not measured. */
wpk_status tune_measure_stream(tune_measurer *m, tune_propose_fn propose, void *propose_user,
                               int flags, tune_measure_fn fn, void *user);
/* The same over configs[0..n) (of the task's space). */
wpk_status tune_measure_batch(tune_measurer *m, const tune_config *configs, int n, int flags,
                              tune_measure_fn fn, void *user);

/* "TIMEOUT" etc. */
const char *tune_status_name(tune_status s);

/* The median and the IQR / median of v[0..n) (v is not changed). */
double tune_median(const double *v, int n);
double tune_spread(const double *v, int n);

/* The compiler and flags kernels are built with ("gcc (Debian 12.2.0-14) 12.2.0 -O3
 * -march=native ..."), for the records. Computed once; static string. */
const char *tune_toolchain(void);

/* ---- device CUDA ---- */
struct rt_cuda_info;
/* Device 0's facts (name, SM, driver version, L2 bytes) read in a child process, so that this
 * one never initializes CUDA (its measurement children could not use the device after a
 * fork), and NVRTC loaded. WPK_ERR_UNSUPPORTED "CUDA unavailable: <reason>" (no libcuda, no
 * device, ...) or naming NVRTC; WPK_ERR_IO when no process can be made. */
wpk_status tune_cuda_probe(wpk_context *ctx, struct rt_cuda_info *info);
/* What CUDA records are keyed by: the GPU's fingerprint (target_cuda_fingerprint: name, SM,
 * driver) and the NVRTC version the kernels were compiled with (NVRTC loaded). */
void tune_cuda_target(const struct rt_cuda_info *info, char *buf, size_t cap);

#endif
