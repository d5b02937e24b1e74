/* choice.h -- which implementation each node of a specialized graph runs: among the node's
 * candidates (kernel_providers_for: DSL templates, alternatives, vendor libraries), the one whose
 * tuning records hold the smallest median ("tuned"), else the one whose records of the same node
 * at batch 1 do ("tuned-b1"; a template whose buffers grow with the batch then runs image by
 * image, as measured), else the primary template's default config ("default"), else its reference kernel ("reference"); a provider named by the user narrows the
 * candidates ("forced"). Nodes whose choice is the same workload at the same config share one
 * kernel. Internal to src/compile. */
#ifndef WPK_COMPILE_CHOICE_H
#define WPK_COMPILE_CHOICE_H

#include "tune/records.h"
#include "kernels/provider.h"

typedef enum cpu_source {
    CPU_SOURCE_REFERENCE = 0, /* no template takes the node, or provider "ref" */
    CPU_SOURCE_DEFAULT,       /* no records: the primary template's default config */
    CPU_SOURCE_TUNED,         /* the fastest of the node's records */
    CPU_SOURCE_FORCED,        /* a library kernel asked for by the provider, without records */
    CPU_SOURCE_BATCH_ONE      /* no records of the workload: the fastest of the same node's at
                                 batch 1 (where `wpk tune` specializes a symbolic batch) */
} cpu_source;

/* "reference", "default", "tuned", "forced", "tuned-b1": the words of
 * wpk_node_profile.source. */
const char *cpu_source_name(cpu_source s);
/* The config came from measurements: tuned or tuned-b1. */
bool cpu_source_measured(cpu_source s);

typedef struct cpu_choice {
    tune_task task;     /* the chosen template's task (task.tmpl; task.node: the first node) */
    char config[256];   /* the config text; "" for the template's default */
    cpu_source source;
    double median;      /* seconds, of the record chosen (0 when not tuned) */
    int64_t images;     /* > 1: tuned-b1 on a template with batch_buffers: its kernel runs
                           once per image of this many (cpu_kernel_build_per_image) */
    int count;          /* nodes sharing this choice */
    int64_t flops;      /* of all of them */
} cpu_choice;

typedef struct cpu_choices {
    cpu_choice *choices; /* in order of first appearance */
    int n;
    int *node_choice;    /* per node: index into choices, or -1 (reference kernel) */
    int nnodes;
} cpu_choices;

typedef struct cpu_choose_options {
    tune_db *db;          /* borrowed records, or NULL: every node at its default */
    const char *target;   /* the fingerprint records are looked up for (NULL: this machine's) */
    const char *provider; /* NULL or "auto"; "generated", "ref", or a library's name */
    bool bf16;            /* --precision bf16: nodes isa_bf16 takes run on it (source forced) */
    double bf16_fp32_share; /* with bf16: those of cpu_bf16_fp32_nodes stay fp32 */
} cpu_choose_options;

/* The nodes --precision bf16 keeps fp32 at `share`: those isa_bf16 takes, from the first in
 * execution order, while their multiply-adds so far are within share of all of theirs.
 * keep[k] (g->nnodes entries) says node k; *kept_share (optional) gets their share of the
 * multiply-adds; returns how many. g and vals as cpu_choose. */
int cpu_bf16_fp32_nodes(const ir_graph *g, const ir_tensor *vals, double share, bool *keep,
                        double *kept_share);

/* Whether `precision` is one a cpu session takes (NULL, "fp32", or "bf16" on a CPU with
 * avx512_bf16); WPK_ERR_UNSUPPORTED naming the missing flag or the target, WPK_ERR_INVALID_ARG
 * for an unknown name. *bf16 says whether it asks for bf16. */
wpk_status cpu_precision_check(wpk_context *ctx, const char *precision, bool cuda, bool *bf16);

/* Whether `provider` is a name cpu_choose accepts (NULL, "auto", "generated", "ref", or a
 * library built in); otherwise WPK_ERR_INVALID_ARG naming the ones there are. */
wpk_status cpu_provider_check(wpk_context *ctx, const char *provider);

/* Choose an implementation for every node of g, whose values have the static types of vals (as
 * cpu_tasks_collect). A record whose config no longer fits its template is skipped with a
 * warning naming the node and the config. A library forced where it does not take the node
 * falls back to the generated choice. WPK_ERR_NOMEM, or the records' read errors (WPK_ERR_IO).
 * *out is the caller's (cpu_choices_free). */
wpk_status cpu_choose(wpk_context *ctx, const ir_graph *g, const ir_tensor *vals,
                      const cpu_choose_options *opt, cpu_choices *out);
void cpu_choices_free(cpu_choices *c);

/* Node k leaves its choice (a library kernel it could not make): it takes the generated one
 * its primary template gives at the default config (shared with a node that has the same),
 * and k's entry in node_choice is updated. Returns the new index, or -1: the reference kernel.
 * The choice k had keeps its other nodes (its count drops). */
int cpu_choices_fall_back(cpu_choices *c, int k);

/* For a choice whose kernel failed to build: the node's primary template at its default config
 * (source "default"), into c. False when the choice already was that (nothing to fall back to). */
bool cpu_choice_fallback(cpu_choice *c);

#endif
