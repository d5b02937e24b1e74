/* target.c -- CPU features from the compiler's cpuid builtins; cores from sysconf. */
#include "base/target.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int target_vector_floats(void) {
    /* an override, so golden tests print the same blocked layouts on every machine */
    const char *env = getenv("WPK_VECTOR_FLOATS");
    if (env && (strcmp(env, "4") == 0 || strcmp(env, "8") == 0 || strcmp(env, "16") == 0))
        return atoi(env);
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return 16;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 8;
#endif
    return 4;
}

int target_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
