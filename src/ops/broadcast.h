/* broadcast.h -- the loop of broadcasting elementwise ops with up to three inputs (comparison,
 * logic, Where, Mod, PRelu, the variadic Min/Max/Sum/Mean): the output walked as contiguous
 * runs in which every input either advances one element per output element or stays put. */
#ifndef WPK_OPS_BROADCAST_H
#define WPK_OPS_BROADCAST_H

#include <stdint.h>

#include "ir/tensor.h"

#define BCAST_MAX_IN 3

/* One run: dst[i] = f(src[0][i * step[0]], ...) for i < len, each step 0 (that input is
 * broadcast along the run) or 1. The pointers are already at the run's start. `self` is the
 * caller's (parameters of the op), borrowed for the call. */
typedef void (*bcast_run_fn)(const void *self, const char *const *src, const int64_t *step,
                             char *dst, int64_t len);

/* Run fn over y with the nin (1..BCAST_MAX_IN) inputs in[] broadcast to y's shape (numpy rules,
 * checked by the caller's shape function). Dims of size 1 are dropped and neighbouring dims
 * that stay contiguous for every input merge, so a same-shape op is one long run; long runs
 * are cut into blocks, and the blocks run on the OpenMP threads when there are enough
 * elements (op_parallel). y may be in[0]'s buffer when they have the same shape. */
void op_bcast_apply(const ir_tensor *const *in, int nin, ir_tensor *y, bcast_run_fn fn,
                    const void *self);

/* Define `static void NAME(...)`, a bcast_run_fn of two inputs computing y = EXPR from x0 (an
 * element of input 0, type TA) and x1 (input 1, TB), with a loop for each stride case so the
 * compiler vectorizes the common ones without a multiply per element. */
#define BCAST_BINARY_FN(NAME, TA, TB, TY, EXPR)                                    \
    static void NAME(const void *self_, const char *const *src_, const int64_t *step_, \
                     char *dst_, int64_t len_) {                                   \
        (void)self_;                                                               \
        const TA *a_ = (const TA *)src_[0];                                        \
        const TB *b_ = (const TB *)src_[1];                                        \
        TY *y_ = (TY *)dst_;                                                       \
        if (step_[0] && step_[1]) {                                                \
            _Pragma("omp simd")                                                    \
            for (int64_t i = 0; i < len_; i++) {                                   \
                TA x0 = a_[i];                                                     \
                TB x1 = b_[i];                                                     \
                y_[i] = (EXPR);                                                    \
            }                                                                      \
        } else if (step_[0]) {                                                     \
            const TB x1 = b_[0];                                                   \
            _Pragma("omp simd")                                                    \
            for (int64_t i = 0; i < len_; i++) {                                   \
                TA x0 = a_[i];                                                     \
                y_[i] = (EXPR);                                                    \
            }                                                                      \
        } else if (step_[1]) {                                                     \
            const TA x0 = a_[0];                                                   \
            _Pragma("omp simd")                                                    \
            for (int64_t i = 0; i < len_; i++) {                                   \
                TB x1 = b_[i];                                                     \
                y_[i] = (EXPR);                                                    \
            }                                                                      \
        } else {                                                                   \
            const TA x0 = a_[0];                                                   \
            const TB x1 = b_[0];                                                   \
            const TY r_ = (EXPR);                                                  \
            for (int64_t i = 0; i < len_; i++) y_[i] = r_;                         \
        }                                                                          \
    }

#endif
