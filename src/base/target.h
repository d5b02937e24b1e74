/* target.h -- what the machine we run on offers (read once): vector width, cores. */
#ifndef WPK_BASE_TARGET_H
#define WPK_BASE_TARGET_H

/* Floats per vector register the code may use: 16 with AVX-512F, 8 with AVX2+FMA, else 4;
 * $WPK_VECTOR_FLOATS (4, 8 or 16) overrides it (golden tests pin it). */
int target_vector_floats(void);
/* Physical cores available to this process (at least 1). */
int target_cores(void);

#endif
