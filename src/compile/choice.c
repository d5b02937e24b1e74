/* choice.c -- per node, the implementation to run: the candidate with the fastest record, the
 * primary template's default, or the reference kernel; forced providers narrow the candidates
 * (see choice.h). */
#include "compile/choice.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/strbuf.h"
#include "kernels/conv_bf16.h"
#include "kernels/cpu_kernel.h"
#include "kernels/graph_tasks.h"
#include "kernels/vendor/lib.h"
#include "tune/finalists.h"
#include "base/target_fingerprint.h"

#define MAX_NODE_ARGS 64
#define MAX_CANDIDATES 16

const char *cpu_source_name(cpu_source s) {
    switch (s) {
    case CPU_SOURCE_DEFAULT: return "default";
    case CPU_SOURCE_TUNED: return "tuned";
    case CPU_SOURCE_FORCED: return "forced";
    case CPU_SOURCE_BATCH_ONE: return "tuned-b1";
    default: return "reference";
    }
}

bool cpu_source_measured(cpu_source s) {
    return s == CPU_SOURCE_TUNED || s == CPU_SOURCE_BATCH_ONE;
}

static bool is_auto(const char *provider) {
    return !provider || !*provider || !strcmp(provider, "auto");
}

wpk_status cpu_provider_check(wpk_context *ctx, const char *provider) {
    if (is_auto(provider) || !strcmp(provider, "generated") || !strcmp(provider, "ref") ||
        lib_provider_find(provider))
        return WPK_OK;
    char names[256] = "auto, generated, ref";
    const kernel_provider *const *libs = lib_providers();
    for (int i = 0; libs[i]; i++) {
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, ", %s", libs[i]->name);
    }
    return wpk_error(ctx, WPK_ERR_INVALID_ARG, "unknown provider '%s' (available: %s)%s",
                     provider, names,
                     !strcmp(provider, "onednn") || !strcmp(provider, "openblas")
                         ? "; this wpk was built without that library" : "");
}

/* The best usable record of one candidate's workload; and the record of the config its
 * latest finals chose, when there are finals. */
typedef struct best_rec {
    wpk_context *ctx;
    const tune_task *task;
    tune_space space;
    char config[256];
    double median;
    bool found;
    char final[256];     /* "" when the workload has no finals */
    double final_median; /* the final config's fastest record; 0: none seen */
    double final_time;   /* the final config's median in its finals */
} best_rec;

static bool consider(void *user, const tune_record *r) {
    best_rec *b = user;
    if (r->status != TUNE_OK || r->median <= 0) return true;
    if (b->final[0] && !strcmp(r->config, b->final) &&
        (b->final_median <= 0 || r->median < b->final_median))
        b->final_median = r->median;
    if (b->found && r->median >= b->median) return true;
    if (r->template_name && strcmp(r->template_name, b->task->tmpl->name)) return true;
    /* a config the template no longer has (its knobs changed since it was measured) cannot run:
       say so and let the next best win */
    tune_config cfg;
    wpk_context *quiet = wpk_context_create();
    wpk_status st = quiet ? cpu_config_resolve(quiet, b->task, &b->space, r->config, &cfg)
                          : WPK_ERR_NOMEM;
    if (st) {
        wpk_log(b->ctx, WPK_LOG_WARN, "node '%s': the record of %s config '%s' does not fit "
                "the template any more (%s); using the next best", b->task->node->name,
                b->task->tmpl->name, r->config, quiet ? wpk_context_error(quiet) : "out of memory");
    } else {
        snprintf(b->config, sizeof b->config, "%s", r->config);
        b->median = r->median;
        b->found = true;
    }
    wpk_context_free(quiet);
    return true;
}

/* The finals' pick as the tuner's summary has it: the default, when the finals timed it and the
 * fastest config there does not beat it by more than their noise (tune_final_beats). */
static void keep_default_within_noise(tune_db *db, const char *target, const tune_task *task,
                                      const tune_space *space, char *final, size_t size,
                                      double *final_time) {
    tune_config def;
    task->tmpl->default_config(task->tmpl, task, space, &def);
    strbuf text = {0};
    tune_config_print(space, &def, &text);
    double def_time;
    if (text.s && strcmp(text.s, final) && strlen(text.s) < size &&
        tune_db_final_of(db, target, task->key, text.s, &def_time) == 1 &&
        !tune_final_beats(*final_time, def_time)) {
        snprintf(final, size, "%s", text.s);
        *final_time = def_time;
    }
    sb_free(&text);
}

/* The fastest usable record of task: into config and *median, and the config's median in the
 * latest finals into *final (0: the workload has no finals, or they chose a config that no
 * longer fits); false when there is none. */
static bool best_record(wpk_context *ctx, const cpu_choose_options *o, const tune_task *task,
                        char *config, size_t size, double *median, double *final) {
    if (!o->db) return false;
    best_rec *b = wpk_calloc(1, sizeof *b);
    if (!b) return false;
    b->ctx = ctx;
    b->task = task;
    task->tmpl->space(task->tmpl, task, &b->space);
    const char *target = o->target ? o->target : target_fingerprint();
    wpk_context *rctx = wpk_context_create();
    /* The config the tuner's finals chose (timed alone, back to back) over the fastest trial:
       among hundreds of trials on a shared machine, whose speed drifts by tens of percent, the
       lowest median is low by luck as much as by speed. */
    if (tune_db_final_best(o->db, target, task->key, b->final, sizeof b->final,
                           &b->final_time) != 1)
        b->final[0] = 0;
    else
        keep_default_within_noise(o->db, target, task, &b->space, b->final, sizeof b->final,
                                  &b->final_time);
    /* a database that cannot be read leaves the node at its default: never a failed run */
    if (rctx && tune_db_each(o->db, target, task->key, consider, b) != WPK_OK)
        wpk_log(ctx, WPK_LOG_WARN, "node '%s': tuning records unreadable: %s", task->node->name,
                wpk_context_error(rctx));
    wpk_context_free(rctx);
    if (b->final[0] && b->final_median > 0 && strcmp(b->final, b->config)) {
        tune_config cfg;
        wpk_context *quiet = wpk_context_create();
        /* the median the candidates are compared by stays a record's, as theirs */
        if (quiet && cpu_config_resolve(quiet, task, &b->space, b->final, &cfg) == WPK_OK) {
            snprintf(b->config, sizeof b->config, "%s", b->final);
            b->median = b->final_median;
        }
        wpk_context_free(quiet);
    }
    bool found = b->found;
    if (found) {
        snprintf(config, size, "%s", b->config);
        *median = b->median;
        *final = b->final[0] && !strcmp(b->final, b->config) ? b->final_time : 0;
    }
    wpk_free(b);
    return found;
}

wpk_status cpu_precision_check(wpk_context *ctx, const char *precision, bool cuda, bool *bf16) {
    *bf16 = false;
    if (!precision || !strcmp(precision, "fp32")) return WPK_OK;
    if (!strcmp(precision, "bf16")) {
        if (cuda)
            return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "precision bf16 runs on the cpu target "
                             "(AVX-512 BF16); the CUDA target has no bf16 kernels yet");
        if (!conv_bf16_cpu_ok())
            return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "precision bf16 needs a CPU with "
                             "avx512_bf16 (AVX-512 BF16), which this CPU does not list in "
                             "/proc/cpuinfo; use fp32");
        *bf16 = true;
        return WPK_OK;
    }
    if (!strcmp(precision, "tf32"))
        return wpk_error(ctx, WPK_ERR_UNSUPPORTED, "precision tf32 is for CUDA tensor cores "
                         "(mma.sync m16n8k8); %s", cuda ? "the CUDA target does not build "
                         "mma kernels into plans yet" : "the cpu target has no TF32");
    return wpk_error(ctx, WPK_ERR_INVALID_ARG, "unknown precision '%s' (fp32, bf16, tf32)",
                     precision);
}

static bool wanted(const kernel_provider *t, const char *provider) {
    if (is_auto(provider)) return true;
    return !strcmp(t->family, provider);
}

/* The fastest of the wanted candidates of node n, whose tensors are in/out, into c (task,
 * config, its record's median) and true; false when no candidate has a record. By their
 * records, or, when every candidate with records has finals (the tuner re-measures a
 * workload's implementations in the same rounds), by their finals: one measurement instead of
 * trials taken minutes apart. */
static bool fastest_record(wpk_context *ctx, const cpu_choose_options *o, const ir_node *n,
                           ir_tensor *const *in, ir_tensor *const *out,
                           const kernel_provider *const *cand, int ncand, const char *provider,
                           cpu_choice *c) {
    struct {
        tune_task task;
        char config[256];
        double median, final;
    } found[MAX_CANDIDATES];
    int nf = 0;
    bool all_final = true;
    for (int i = 0; i < ncand && nf < MAX_CANDIDATES; i++) {
        if (!wanted(cand[i], provider)) continue;
        tune_task_init(&found[nf].task, cand[i], n, in, out);
        if (!best_record(ctx, o, &found[nf].task, found[nf].config, sizeof found[nf].config,
                         &found[nf].median, &found[nf].final))
            continue;
        all_final &= found[nf].final > 0;
        nf++;
    }
    int bi = -1;
    double best = 0;
    for (int i = 0; i < nf; i++) {
        double t = all_final ? found[i].final : found[i].median;
        if (bi < 0 || t < best) bi = i, best = t;
    }
    if (bi < 0) return false;
    c->task = found[bi].task;
    snprintf(c->config, sizeof c->config, "%s", found[bi].config);
    c->median = found[bi].median;
    return true;
}

/* The batch of node n: the leading dim of its first non-constant input (0: none). */
static int64_t batch_of(const ir_node *n, ir_tensor *const *in) {
    for (int i = 0; i < n->nin; i++)
        if (in[i] && !in[i]->data && in[i]->ndim >= 1) return in[i]->dims[0];
    return 0;
}

/* The node's tensors at batch 1, into in1/out1 (pointers into store): the leading dim of every
 * non-constant input and output that has the batch of the first non-constant input. False
 * when that batch is not above 1 (nothing to look up). */

static bool at_batch_one(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out,
                         ir_tensor *store, ir_tensor **in1, ir_tensor **out1) {
    const int64_t batch = batch_of(n, in);
    if (batch <= 1) return false;
    int k = 0;
    for (int i = 0; i < n->nin + n->nout; i++) {
        ir_tensor *t = i < n->nin ? in[i] : out[i - n->nin];
        ir_tensor **dst = i < n->nin ? &in1[i] : &out1[i - n->nin];
        *dst = NULL;
        if (!t) continue;
        store[k] = cpu_tensor_at_one_image(t, batch);
        *dst = &store[k++];
    }
    return true;
}

/* A config measured at batch 1 must also build for the node's own workload. */
static bool config_fits(const tune_task *t, const char *config) {
    tune_space space;
    t->tmpl->space(t->tmpl, t, &space);
    tune_config cfg;
    wpk_context *quiet = wpk_context_create();
    bool ok = quiet && cpu_config_resolve(quiet, t, &space, config, &cfg) == WPK_OK;
    wpk_context_free(quiet);
    return ok;
}

/* Without records, a large GEMM of constant weights (the linear layers of transformers) runs on
 * the packed AVX-512 GEMM where the CPU has it, else on OpenBLAS where the build has it: on
 * BERT's 128 x 768 x 3072 linear layer (AVX-512, 2 threads) the dense template's default config
 * was 3 to 5 times slower than OpenBLAS, and the packed GEMM about twice as fast as OpenBLAS's
 * AVX2 kernels. oneDNN is as fast, but its executions allocate, and the runtime allocates
 * nothing while a model runs. Small GEMMs (classifier heads) keep the template, as do nodes with
 * records. NULL: the rule does not apply. */
#define UNTUNED_LIBRARY_MIN_MACS ((int64_t)1 << 22)

static const kernel_provider *untuned_gemm_library(const ir_node *n, ir_tensor *const *in,
                                                   const kernel_provider *const *cand,
                                                   int ncand) {
    bool gemm = n->op == IR_OP_MATMUL || n->op == IR_OP_FUSED_MATMUL || n->op == IR_OP_GEMM ||
                n->op == IR_OP_FUSED_GEMM;
    if (!gemm || n->nin < 2 || !in[0] || !in[1] || !in[1]->data || in[0]->ndim < 1) return NULL;
    int64_t k = in[0]->dims[in[0]->ndim - 1];
    if (k <= 0 || ir_numel(in[0]) * (ir_numel(in[1]) / k) < UNTUNED_LIBRARY_MIN_MACS)
        return NULL;
    static const char *const preferred[] = {"packed", "openblas"};
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < ncand; i++)
            if (!strcmp(cand[i]->family, preferred[p])) return cand[i];
    return NULL;
}

/* Without records, a convolution of a batch of UNTUNED_CONV_LIBRARY_MIN_BATCH images or more
 * runs on oneDNN where the build has it: its kernels gain on the template's defaults as the
 * batch grows. Whole models untuned on an AVX-512 machine, 1 thread, CPU time per image,
 * template -> oneDNN: at batch 8 ResNet-50 42 -> 34 ms, MobileNetV2 4.9 -> 3.9, SqueezeNet 1.1
 * 4.9 -> 3.5, ResNet-18 16.0 -> 15.0; at batch 4 all four are faster on oneDNN (ResNet-18 by
 * 3%); at batch 2 ResNet-18 is 7% slower on it, at batch 1 ResNet-18 and -50 by 11-20% (the
 * lighter two gain 7-12% there, but batch-1 plans must not allocate). oneDNN's executions
 * allocate a few small blocks (its argument map), which plans of such batches accept. */
#define UNTUNED_CONV_LIBRARY_MIN_BATCH 4

static const kernel_provider *untuned_conv_library(const ir_node *n, ir_tensor *const *in,
                                                   const kernel_provider *const *cand,
                                                   int ncand) {
    bool conv = n->op == IR_OP_CONV || n->op == IR_OP_FUSED_CONV || n->op == IR_OP_CONV_NCHWC;
    if (!conv || batch_of(n, in) < UNTUNED_CONV_LIBRARY_MIN_BATCH) return NULL;
    for (int i = 0; i < ncand; i++)
        if (!strcmp(cand[i]->family, "onednn")) return cand[i];
    return NULL;
}

/* Node k's choice into c; false when it runs its reference kernel. keep_fp32: a node bf16
 * would take stays on the fp32 choice. */
static bool choose_node(wpk_context *ctx, const cpu_choose_options *o, const ir_node *n,
                        ir_tensor *const *in, ir_tensor *const *out, bool keep_fp32,
                        cpu_choice *c) {
    const kernel_provider *cand[MAX_CANDIDATES];
    int ncand = kernel_providers_for(n, in, out, cand, MAX_CANDIDATES);
    if (ncand == 0 || (o->provider && !strcmp(o->provider, "ref"))) return false;
    const kernel_provider *bf16 = conv_bf16_provider();
    if (o->bf16 && !keep_fp32 && bf16->supports(bf16, n, in, out)) {
        memset(c, 0, sizeof *c);
        c->source = CPU_SOURCE_FORCED;
        tune_task_init(&c->task, bf16, n, in, out);
        return true;
    }
    const kernel_provider *primary = NULL;
    for (int i = 0; i < ncand && !primary; i++)
        if (kernel_provider_generates(cand[i])) primary = cand[i];
    /* a library forced where it does not take the node: the generated choice */
    bool any = false;
    for (int i = 0; i < ncand; i++) any |= wanted(cand[i], o->provider);
    const char *provider = any ? o->provider : "generated";
    memset(c, 0, sizeof *c);
    if (fastest_record(ctx, o, n, in, out, cand, ncand, provider, c)) {
        c->source = CPU_SOURCE_TUNED;
        return true;
    }
    /* No records of this workload: those of the same node at batch 1, where the model was
       tuned (`wpk tune` specializes symbolic dims at 1), chosen among the same candidates.
       Their best config is usually good at other batches too; it must fit this workload. */
    ir_tensor store[2 * MAX_NODE_ARGS], *in1[MAX_NODE_ARGS], *out1[MAX_NODE_ARGS];
    cpu_choice one;
    memset(&one, 0, sizeof one);
    if (at_batch_one(n, in, out, store, in1, out1) &&
        fastest_record(ctx, o, n, in1, out1, cand, ncand, provider, &one)) {
        tune_task t;
        tune_task_init(&t, one.task.tmpl, n, in, out);
        if (config_fits(&t, one.config)) {
            c->task = t;
            snprintf(c->config, sizeof c->config, "%s", one.config);
            c->median = one.median;
            c->source = CPU_SOURCE_BATCH_ONE;
            /* as measured: squeezenet's fire3 expand (Winograd) at batch 8 in one piece took
               2.9 ms against 8 x 0.13 ms, its transformed tiles 8 times the cache they fitted */
            if (t.tmpl->batch_buffers) c->images = batch_of(n, in);
            return true;
        }
    }
    /* no records: the primary template's default, or the forced library's first config */
    const kernel_provider *t = NULL;
    if (!is_auto(provider) && strcmp(provider, "generated"))
        for (int i = 0; i < ncand && !t; i++)
            if (wanted(cand[i], provider)) t = cand[i];
    c->source = t ? CPU_SOURCE_FORCED : CPU_SOURCE_DEFAULT;
    if (!t && is_auto(provider)) t = untuned_gemm_library(n, in, cand, ncand);
    if (!t && is_auto(provider)) t = untuned_conv_library(n, in, cand, ncand);
    if (!t) t = primary ? primary : cand[0];
    tune_task_init(&c->task, t, n, in, out);
    return true;
}

/* Same kernel: the workload, the config, and which inputs are constants (a template may
 * pre-pack those). */
static bool same_choice(const cpu_choice *a, const cpu_choice *b) {
    if (a->task.tmpl != b->task.tmpl || strcmp(a->task.key, b->task.key) ||
        strcmp(a->config, b->config) || a->task.nin != b->task.nin || a->images != b->images)
        return false;
    for (int i = 0; i < a->task.nin; i++)
        if ((a->task.in[i].data != NULL) != (b->task.in[i].data != NULL)) return false;
    return true;
}

/* Every tensor of the node has a known dtype. */
static bool known(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out) {
    for (int i = 0; i < n->nin; i++)
        if (in[i] && in[i]->dtype == WPK_DTYPE_UNDEFINED) return false;
    for (int i = 0; i < n->nout; i++)
        if (out[i] && out[i]->dtype == WPK_DTYPE_UNDEFINED) return false;
    return true;
}

int cpu_bf16_fp32_nodes(const ir_graph *g, const ir_tensor *vals, double share, bool *keep,
                        double *kept_share) {
    const kernel_provider *bf16 = conv_bf16_provider();
    ir_tensor *in[MAX_NODE_ARGS], *outs[MAX_NODE_ARGS];
    double total = 0, kept_macs = 0;
    if (kept_share) *kept_share = 0;
    for (int pass = 0, kept = 0; pass < 2; pass++) {
        double sum = 0;
        for (int k = 0; k < g->nnodes; k++) {
            const ir_node *n = &g->nodes[k];
            if (pass == 1) keep[k] = false;
            if (n->nin > MAX_NODE_ARGS || n->nout > MAX_NODE_ARGS) continue;
            cpu_node_tensors(n, (ir_tensor *)vals, in, outs);
            if (!known(n, in, outs) || !bf16->supports(bf16, n, in, outs)) continue;
            sum += (double)conv_bf16_macs(n, in, outs);
            /* a share that reaches a node's end keeps it; rounding must not drop it */
            if (pass == 1 && share > 0 && sum <= share * total * (1 + 1e-9)) {
                keep[k] = true;
                kept++;
                kept_macs = sum;
            }
        }
        if (pass == 1) {
            if (kept_share && total > 0) *kept_share = kept_macs / total;
            return kept;
        }
        total = sum;
    }
    return 0;
}

wpk_status cpu_choose(wpk_context *ctx, const ir_graph *g, const ir_tensor *vals,
                      const cpu_choose_options *opt, cpu_choices *out) {
    memset(out, 0, sizeof *out);
    cpu_choose_options none = {0};
    if (!opt) opt = &none;
    out->nnodes = g->nnodes;
    out->node_choice = wpk_calloc((size_t)g->nnodes + 1, sizeof *out->node_choice);
    /* room for a fallback per node besides the first choices (cpu_choices_fall_back) */
    out->choices = wpk_calloc(2 * (size_t)g->nnodes + 1, sizeof *out->choices);
    bool *keep = wpk_calloc((size_t)g->nnodes + 1, sizeof *keep);
    if (keep && opt->bf16 && opt->bf16_fp32_share > 0)
        cpu_bf16_fp32_nodes(g, vals, opt->bf16_fp32_share, keep, NULL);
    if (!out->node_choice || !out->choices || !keep) {
        wpk_free(keep);
        cpu_choices_free(out);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory choosing kernels");
    }
    ir_tensor *in[MAX_NODE_ARGS], *outs[MAX_NODE_ARGS];
    for (int k = 0; k < g->nnodes; k++) {
        const ir_node *n = &g->nodes[k];
        out->node_choice[k] = -1;
        if (n->nin > MAX_NODE_ARGS || n->nout > MAX_NODE_ARGS) continue;
        /* the templates only read vals */
        cpu_node_tensors(n, (ir_tensor *)vals, in, outs);
        if (!known(n, in, outs)) continue;
        cpu_choice *c = &out->choices[out->n];
        if (!choose_node(ctx, opt, n, in, outs, keep[k], c)) continue;
        int found = -1;
        for (int j = 0; j < out->n && found < 0; j++)
            if (same_choice(&out->choices[j], c)) found = j;
        if (found < 0) found = out->n++;
        out->choices[found].count++;
        out->choices[found].flops += c->task.flops;
        out->node_choice[k] = found;
    }
    wpk_free(keep);
    return WPK_OK;
}

void cpu_choices_free(cpu_choices *c) {
    wpk_free(c->choices);
    wpk_free(c->node_choice);
    memset(c, 0, sizeof *c);
}

bool cpu_choice_fallback(cpu_choice *c) {
    ir_tensor *in[TUNE_MAX_ARGS] = {0}, *out[TUNE_MAX_ARGS] = {0};
    for (int i = 0; i < c->task.nin; i++)
        in[i] = c->task.in[i].dtype != WPK_DTYPE_UNDEFINED ? &c->task.in[i] : NULL;
    for (int i = 0; i < c->task.nout; i++)
        out[i] = c->task.out[i].dtype != WPK_DTYPE_UNDEFINED ? &c->task.out[i] : NULL;
    const kernel_provider *primary = kernel_provider_for(c->task.node, in, out);
    if (!primary || (primary == c->task.tmpl && !c->config[0])) return false;
    tune_task t;
    tune_task_init(&t, primary, c->task.node, in, out);
    c->task = t;
    c->config[0] = 0;
    c->source = CPU_SOURCE_DEFAULT;
    c->median = 0;
    c->images = 0;
    return true;
}

int cpu_choices_fall_back(cpu_choices *c, int k) {
    int i = c->node_choice[k];
    if (i < 0) return -1;
    cpu_choice *fb = &c->choices[c->n];
    *fb = c->choices[i];
    fb->count = 0;
    fb->flops = 0;
    c->choices[i].count--;
    c->node_choice[k] = -1;
    /* the node's own task: the choice may have been made for another node of its workload */
    if (!cpu_choice_fallback(fb) || !kernel_provider_generates(fb->task.tmpl)) return -1;
    int found = -1;
    for (int j = 0; j < c->n && found < 0; j++)
        if (j != i && c->choices[j].count > 0 && same_choice(&c->choices[j], fb)) found = j;
    if (found < 0) found = c->n++;
    c->choices[found].count++;
    c->node_choice[k] = found;
    return found;
}
