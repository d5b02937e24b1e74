/* test_data.h -- what the CUDA tests share about data: seeded random inputs, NaN-filled
 * outputs (a value never written shows), and the comparison with the stated tolerance.
 * Header-only, for one test file each. */
#ifndef WPK_TESTS_CUDA_TEST_DATA_H
#define WPK_TESTS_CUDA_TEST_DATA_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* max |got - want| <= TOL * max(1, max |want|) */
#define TOL 1e-5

static unsigned rng_state = 2024;
static float frand(void) {
    rng_state = rng_state * 1103515245u + 12345u;
    return (float)((rng_state >> 9) & 0xffff) / 32768.0f - 1.0f;
}
static float *randoms(int64_t n) {
    float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));
    for (int64_t i = 0; i < n; i++) p[i] = frand();
    return p;
}
static float *nans(int64_t n) {
    float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));
    for (int64_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

static bool close_all(const float *got, const float *want, int64_t n, const char *what) {
    double err = 0, big = 1;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= err)) err = d, at = i;
        if (fabs(want[i]) > big) big = fabs(want[i]);
    }
    if (err <= TOL * big) return true;
    fprintf(stderr, "%s: [%lld] = %g, want %g (max error %g)\n", what, (long long)at, got[at],
            want[at], err);
    return false;
}

#endif
