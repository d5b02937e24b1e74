/* target.h -- what the machine we run on offers (read once): vector width, cores, cache. */
#ifndef WPK_BASE_TARGET_H
#define WPK_BASE_TARGET_H

#include <stdint.h>

/* Floats per vector register the code may use: 16 with AVX-512F, 8 with AVX2+FMA, else 4;
 * $WPK_VECTOR_FLOATS (4, 8 or 16) overrides it (golden tests pin it). */
int target_vector_floats(void);
/* Physical cores available to this process (at least 1): the CPUs of its affinity mask,
 * counted once per core (SMT siblings share one), from /sys's topology; the online CPU count
 * where /sys does not say. Read once; thread-safe. */
int target_cores(void);
/* The threads a session runs on when told 0: $OMP_NUM_THREADS (its first number) when set,
 * else target_cores(). */
int target_default_threads(void);
/* Bytes of cpu0's data (or unified) cache of `level` (1, 2, 3) from /sys, 0 when it does not
 * say. Reads /sys on every call. */
int64_t target_cache_bytes(int level);
/* Bytes of the last-level cache (the highest level /sys lists for cpu0: on most machines the
 * L3 its cores share), 0 when unknown. Read once; thread-safe. */
int64_t target_llc_bytes(void);

#endif
