/* intrin.c -- the table of instructions (AVX-512 FMA register tiles, VNNI and BF16 dot products,
 * CUDA mma.sync shapes), their computations built in the tensor IR, and the CPU flag check. */
#include "isa/intrin.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BC ISA_LAYOUT_BROADCAST
#define LN ISA_LAYOUT_LANES
#define ROW ISA_LAYOUT_ROW
#define COL ISA_LAYOUT_COL

static const isa_intrin table[] = {
    /* one zmm of C: 16 lanes of n, A broadcast from memory; a register tile repeats it */
    {"avx512_fma", "_mm512_fmadd_ps", ISA_DEVICE_CPU, "avx512f", "avx512f", 0,
     1, 16, 1, 1, ISA_F32, ISA_F32, ISA_F32, BC, LN, LN, true},
    /* vdpbf16ps: per lane, the f32 sum of a bf16 pair of A times a bf16 pair of B */
    {"avx512_bf16_dot", "_mm512_dpbf16_ps", ISA_DEVICE_CPU, "avx512_bf16",
     "avx512bf16,avx512f", 0, 1, 16, 2, 2, ISA_BF16, ISA_BF16, ISA_F32, BC, LN, LN, false},
    /* vpdpbusd: per lane, the s32 sum of 4 u8 of A times 4 s8 of B */
    {"avx512_vnni_dot", "_mm512_dpbusd_epi32", ISA_DEVICE_CPU, "avx512_vnni",
     "avx512vnni,avx512f", 0, 1, 16, 4, 4, ISA_U8, ISA_S8, ISA_S32, BC, LN, LN, false},
    {"mma_m16n8k8_tf32", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", ISA_DEVICE_CUDA,
     NULL, NULL, 80, 16, 8, 8, 1, ISA_TF32, ISA_TF32, ISA_F32, ROW, COL, ROW, false},
    {"mma_m16n8k16_f16", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", ISA_DEVICE_CUDA,
     NULL, NULL, 80, 16, 8, 16, 2, ISA_F16, ISA_F16, ISA_F32, ROW, COL, ROW, false},
    {"mma_m16n8k16_bf16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
     ISA_DEVICE_CUDA, NULL, NULL, 80, 16, 8, 16, 2, ISA_BF16, ISA_BF16, ISA_F32, ROW, COL, ROW,
     false},
    {"mma_m16n8k32_s8", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", ISA_DEVICE_CUDA,
     NULL, NULL, 80, 16, 8, 32, 4, ISA_S8, ISA_S8, ISA_S32, ROW, COL, ROW, false},
};

const isa_intrin *isa_intrins(int *n) {
    *n = (int)(sizeof table / sizeof table[0]);
    return table;
}

const isa_intrin *isa_intrin_find(const char *name) {
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].name, name)) return &table[i];
    return NULL;
}

const char *isa_dtype_name(isa_dtype t) {
    static const char *const names[] = {"f32", "bf16", "f16", "tf32", "u8", "s8", "s32"};
    return names[t];
}

int isa_dtype_bytes(isa_dtype t) {
    static const int bytes[] = {4, 2, 2, 4, 1, 1, 4};
    return bytes[t];
}

static bool is_integer(isa_dtype t) { return t == ISA_U8 || t == ISA_S8 || t == ISA_S32; }

wpk_status isa_intrin_describe(te_ctx *c, const isa_intrin *in, isa_desc *out) {
    memset(out, 0, sizeof *out);
    out->intrin = in;
    te_scalar s = is_integer(in->c_type) ? TE_I32 : TE_F32;
    out->a = te_placeholder(c, "A", s, 2, (int64_t[]){in->m, in->k});
    out->b = te_placeholder(c, "B", s, 2, (int64_t[]){in->k, in->n});
    te_iter **ax = te_compute_axes(c, 2, (int64_t[]){in->m, in->n}, (const char *[]){"m", "n"});
    te_iter *k = te_reduce_axis(c, "k", 0, in->k);
    if (!out->a || !out->b || !ax || !k) return WPK_ERR_NOMEM;
    const te_expr *va = te_load(c, out->a, 2, (const te_expr *[]){te_var(c, ax[0]), te_var(c, k)});
    const te_expr *vb = te_load(c, out->b, 2, (const te_expr *[]){te_var(c, k), te_var(c, ax[1])});
    const te_expr *body = va && vb ? te_reduce(c, TE_REDUCE_SUM, te_mul(c, va, vb), 1, &k) : NULL;
    out->c = body ? te_compute(c, "C", 2, (int64_t[]){in->m, in->n}, ax, body) : NULL;
    return out->c ? WPK_OK : WPK_ERR_NOMEM;
}

static const char *layout_name(isa_layout l) {
    static const char *const names[] = {"broadcast", "lanes", "row", "col"};
    return names[l];
}

void isa_intrin_print(const isa_desc *d, strbuf *b) {
    const isa_intrin *in = d->intrin;
    sb_printf(b, "%s (%s, %s): ", in->name, in->spelling,
              in->device == ISA_DEVICE_CPU ? in->cpu_flag : "sm_80+");
    te_print_tensor(d->c, b);
    sb_printf(b, "; A %s %s, B %s %s, C %s %s", isa_dtype_name(in->a_type),
              layout_name(in->a_layout), isa_dtype_name(in->b_type), layout_name(in->b_layout),
              isa_dtype_name(in->c_type), layout_name(in->c_layout));
    if (in->k_group > 1) sb_printf(b, ", k groups of %d", in->k_group);
}

/* ---- the running CPU's flags ---- */

static char cpu_flags[8192];
static pthread_once_t flags_once = PTHREAD_ONCE_INIT;

static void read_flags(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5)) continue;
        const char *colon = strchr(line, ':');
        if (!colon) continue;
        snprintf(cpu_flags, sizeof cpu_flags, " %s", colon + 1);
        size_t n = strlen(cpu_flags);
        while (n && (cpu_flags[n - 1] == '\n' || cpu_flags[n - 1] == ' ')) cpu_flags[--n] = 0;
        strncat(cpu_flags, " ", sizeof cpu_flags - strlen(cpu_flags) - 1);
        break;
    }
    fclose(f);
}

/* whether word appears as a whole item of the comma-separated list */
static bool listed(const char *list, const char *word) {
    size_t n = strlen(word);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, word, n)) return true;
        p = end ? end + 1 : NULL;
    }
    return false;
}

bool isa_cpu_flag(const char *flag) {
    if (listed(getenv("WPK_CPU_FLAGS_OFF"), flag)) return false;
    pthread_once(&flags_once, read_flags);
    char word[64];
    snprintf(word, sizeof word, " %s ", flag);
    return strstr(cpu_flags, word) != NULL;
}

bool isa_cpu_has(const isa_intrin *in) {
    return in->device == ISA_DEVICE_CPU && isa_cpu_flag(in->cpu_flag);
}
