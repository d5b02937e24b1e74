/* rl_policy.h -- the "rl" strategy's policy parameters, shared by every workload and kept
 * between runs: one weight vector per (space, knob, knob value), over a state of the workload's
 * features and the config it moves from (strategy_rl.c builds the state and samples). Keyed by
 * the value, not its index, so that workloads whose spaces list different values still share
 * what they learnt about a value. Saved as a versioned text file next to the records database. */
#ifndef WPK_TUNE_RL_POLICY_H
#define WPK_TUNE_RL_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wpk_runtime.h"

/* State entries: a bias, the workload's features, and the config the policy moves from (one
 * entry per knob position, the choice normalized to [-0.5, 0.5]; the knob being chosen 0). */
#define TUNE_RL_WORKLOAD 32
#define TUNE_RL_INPUTS (1 + TUNE_RL_WORKLOAD + 16)
/* The file format's version: a file of another version is set aside for a fresh policy. */
#define TUNE_RL_POLICY_VERSION 2

typedef struct tune_rl_policy tune_rl_policy;

/* An empty policy (every weight 0). NULL and a message on ctx (may be NULL) when out of
 * memory. Not thread-safe. */
tune_rl_policy *tune_rl_policy_create(wpk_context *ctx);
void tune_rl_policy_free(tune_rl_policy *p);

/* The policy saved at path. A missing file gives a fresh policy (logged at INFO); an
 * unreadable, corrupt or other-version file gives a fresh one with a WARN naming the file and
 * the cause (the file is left as it is, and replaced at the next save). Returns NULL only when
 * out of memory (message on ctx). */
tune_rl_policy *tune_rl_policy_load(wpk_context *ctx, const char *path);
/* Write p to path through a temporary file renamed over it, so a kill never leaves half a
 * file. WPK_ERR_IO with a message naming the file on failure. */
wpk_status tune_rl_policy_save(wpk_context *ctx, const tune_rl_policy *p, const char *path);

/* The weights (TUNE_RL_INPUTS doubles) of value `value` of knob `knob` in the space whose knob
 * names hash to `space` (tune_rl_space_key), created as zeros on first use; NULL when out of
 * memory. The pointer is valid until the next call that creates an entry. */
double *tune_rl_policy_weights(tune_rl_policy *p, uint64_t space, const char *knob,
                               int64_t value);
/* The same without creating: NULL when the entry does not exist. */
const double *tune_rl_policy_find(const tune_rl_policy *p, uint64_t space, const char *knob,
                                  int64_t value);
/* Entries held, and updates applied since the policy was created (loaded ones included). */
int tune_rl_policy_size(const tune_rl_policy *p);
int64_t tune_rl_policy_updates(const tune_rl_policy *p);
void tune_rl_policy_count_update(tune_rl_policy *p);

/* The path of the policy next to a records database: "<db path>.rl-policy". */
void tune_rl_policy_path(const char *db_path, char *out, size_t cap);

#endif
