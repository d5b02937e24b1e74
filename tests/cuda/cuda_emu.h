/* cuda_emu.h -- running generated CUDA on the CPU, for tests on machines without a GPU: the
 * kernel text from cg_cuda_emit is compiled by the host C++ compiler together with a small
 * harness (threadIdx/blockIdx, __syncthreads as a pthread barrier, dynamic shared memory as one
 * buffer, float4) and run block after block, each thread of a block a pthread. It checks what
 * NVRTC cannot: that the indexing, the launch dims, the barriers and the per-thread tiles compute
 * the right values when threads really run concurrently. Shared memory starts as NaN bytes so a
 * read before any write shows in the result. Header-only: static functions for one test file. */
#ifndef WPK_TESTS_CUDA_EMU_H
#define WPK_TESTS_CUDA_EMU_H

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen/cuda/cg_cuda.h"

extern char **environ;

typedef struct emu_kernel {
    void *so;
    int (*run)(const long long *grid, const long long *block, long long shared, void *const *args);
} emu_kernel;

static const char EMU_PRELUDE[] =
    "#include <math.h>\n#include <pthread.h>\n#include <string.h>\n"
    "struct wpk_emu_dim3 { unsigned x, y, z; };\n"
    "static thread_local wpk_emu_dim3 threadIdx;\n"
    "static wpk_emu_dim3 blockIdx;\n"
    "static pthread_barrier_t wpk_emu_barrier;\n"
    "alignas(16) unsigned char wpk_smem[1 << 20];\n"
    "struct alignas(16) float4 { float x, y, z, w; };\n"
    "static inline float4 make_float4(float a, float b, float c, float d) {\n"
    "    float4 v = {a, b, c, d};\n    return v;\n}\n"
    "static inline float __int_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }\n"
    "#define __global__\n#define __device__\n#define __forceinline__ inline\n"
    "#define __launch_bounds__(n)\n#define __shared__\n#define __align__(n) __attribute__((aligned(n)))\n"
    "#define __syncthreads() pthread_barrier_wait(&wpk_emu_barrier)\n";

static const char EMU_RUNNER[] =
    "struct wpk_emu_job { void *const *args; unsigned x, y, z; };\n"
    "static void *wpk_emu_thread(void *p) {\n"
    "    wpk_emu_job *j = (wpk_emu_job *)p;\n"
    "    threadIdx.x = j->x; threadIdx.y = j->y; threadIdx.z = j->z;\n"
    "    wpk_emu_entry(j->args);\n    return 0;\n}\n"
    "extern \"C\" int wpk_emu_run(const long long *grid, const long long *block, long long shared,\n"
    "                             void *const *args) {\n"
    "    long long nt = block[0] * block[1] * block[2];\n"
    "    if (shared > (long long)sizeof wpk_smem) return 2;\n"
    "    wpk_emu_job *jobs = new wpk_emu_job[nt];\n"
    "    pthread_t *th = new pthread_t[nt];\n"
    "    pthread_attr_t attr;\n    pthread_attr_init(&attr);\n"
    "    pthread_attr_setstacksize(&attr, 1 << 20);\n"
    "    int rc = 0;\n"
    "    for (unsigned bz = 0; bz < grid[2]; bz++)\n"
    "        for (unsigned by = 0; by < grid[1]; by++)\n"
    "            for (unsigned bx = 0; bx < grid[0]; bx++) {\n"
    "                blockIdx.x = bx; blockIdx.y = by; blockIdx.z = bz;\n"
    "                memset(wpk_smem, 0xff, sizeof wpk_smem);\n"
    "                pthread_barrier_init(&wpk_emu_barrier, 0, (unsigned)nt);\n"
    "                long long t = 0;\n"
    "                for (unsigned z = 0; z < block[2]; z++)\n"
    "                    for (unsigned y = 0; y < block[1]; y++)\n"
    "                        for (unsigned x = 0; x < block[0]; x++, t++) {\n"
    "                            jobs[t].args = args; jobs[t].x = x; jobs[t].y = y; jobs[t].z = z;\n"
    "                            if (pthread_create(&th[t], &attr, wpk_emu_thread, &jobs[t])) rc = 1;\n"
    "                        }\n"
    "                for (long long i = 0; i < t; i++) pthread_join(th[i], 0);\n"
    "                pthread_barrier_destroy(&wpk_emu_barrier);\n"
    "                if (rc) goto out;\n"
    "            }\n"
    "out:\n"
    "    pthread_attr_destroy(&attr);\n    delete[] jobs;\n    delete[] th;\n    return rc;\n}\n";

static const char *emu_ctype(te_scalar s) {
    switch (s) {
    case TE_BOOL: return "bool";
    case TE_I32: return "int";
    case TE_I64: return "long long";
    case TE_F32: return "float";
    }
    return "void";
}

/* Run argv with stdout and stderr into `log`; the exit status, -1 when it could not start. */
static int emu_spawn(char *const *argv, const char *log) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return -1;
    int status;
    if (waitpid(pid, &status, 0) < 0) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Whether a host C++ compiler runs here ($CXX or c++). */
static const char *emu_compiler(void) {
    const char *cxx = getenv("CXX");
    return cxx && *cxx ? cxx : "c++";
}

/* Compile kernel `source` (f's emitted text) in directory dir as `tag`. 0 on success; -1 when no
 * compiler runs (the caller skips); 1 on a compile error (printed). */
static int emu_build(const char *source, const loop_func *f, const char *dir, const char *tag,
                     emu_kernel *out) {
    memset(out, 0, sizeof *out);
    char src[512], so[512], log[512];
    snprintf(src, sizeof src, "%s/emu_%s.cpp", dir, tag);
    snprintf(so, sizeof so, "%s/emu_%s.so", dir, tag);
    snprintf(log, sizeof log, "%s/emu_%s.log", dir, tag);
    FILE *fp = fopen(src, "w");
    if (!fp) return 1;
    fputs(EMU_PRELUDE, fp);
    fputs(source, fp);
    fprintf(fp, "extern \"C\" void wpk_emu_entry(void *const *a) {\n    %s(", f->name);
    for (int i = 0; i < f->nargs; i++)
        fprintf(fp, "%s(%s *)a[%d]", i ? ", " : "", emu_ctype(f->args[i]->dtype), i);
    fputs(");\n}\n", fp);
    fputs(EMU_RUNNER, fp);
    fclose(fp);
    char *argv[] = {(char *)emu_compiler(), "-std=c++17", "-O1", "-fPIC", "-shared", "-pthread",
                    "-w", "-o", so, src, NULL};
    int rc = emu_spawn(argv, log);
    if (rc == -1 || rc == 127) return -1;
    if (rc != 0) {
        fprintf(stderr, "emulator: %s does not compile (log %s):\n", src, log);
        FILE *lf = fopen(log, "r");
        char ln[512];
        for (int n = 0; lf && n < 30 && fgets(ln, sizeof ln, lf); n++) fputs(ln, stderr);
        if (lf) fclose(lf);
        return 1;
    }
    out->so = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!out->so) {
        fprintf(stderr, "emulator: %s does not load: %s\n", so, dlerror());
        return 1;
    }
    void *p = dlsym(out->so, "wpk_emu_run");
    memcpy(&out->run, &p, sizeof p);
    return out->run ? 0 : 1;
}

static int emu_run(const emu_kernel *k, const cg_cuda_launch *L, void *const *args) {
    long long grid[3], block[3];
    for (int i = 0; i < 3; i++) grid[i] = L->grid[i], block[i] = L->block[i];
    return k->run(grid, block, L->shared_bytes, args);
}

static void emu_free(emu_kernel *k) {
    if (k->so) dlclose(k->so);
    k->so = NULL;
}

#endif
