/* einsum.c -- Einsum: the equation parsed into labels (letters, and the broadcast dims an
 * ellipsis stands for), then every output element summed over the labels the output omits.
 * A label repeated in one operand walks its diagonal (the strides of its dims add up). */
#include <string.h>

#include "ops/op_util.h"

#define EINSUM_MAX_OPERANDS 8
#define EINSUM_LETTERS 52
#define EINSUM_MAX_LABELS (EINSUM_LETTERS + WPK_MAX_DIMS)
#define EINSUM_MAX_EQUATION 256
#define ELLIPSIS (-1)

typedef struct einsum_term {
    int lab[EINSUM_MAX_LABELS]; /* letter ids, ELLIPSIS where "..." stands */
    int count;
    bool ellipsis;
} einsum_term;

/* What the kernel walks: the output's dims and the summed labels' sizes, and each operand's
 * stride along every one of them (0 where the operand lacks the label or broadcasts it). */
typedef struct einsum_plan {
    int nops, nout, nsum;
    int64_t out_dims[WPK_MAX_DIMS], sum_dims[EINSUM_MAX_LABELS];
    int64_t out_str[EINSUM_MAX_OPERANDS][WPK_MAX_DIMS];
    int64_t sum_str[EINSUM_MAX_OPERANDS][EINSUM_MAX_LABELS];
} einsum_plan;

/* 'a'..'z' -> 0..25, 'A'..'Z' -> 26..51, else -1. */
static int letter_id(char c) {
    if (c >= 'a' && c <= 'z') return c - 'a';
    if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
    return -1;
}

static char letter_of(int id) { return id < 26 ? (char)('a' + id) : (char)('A' + id - 26); }

/* Parses one term of the equation, [from, to). */
static wpk_status parse_term(wpk_context *ctx, const ir_node *n, const char *from,
                             const char *to, einsum_term *t) {
    t->count = 0;
    t->ellipsis = false;
    for (const char *p = from; p < to;) {
        if (t->count >= EINSUM_MAX_LABELS)
            return op_fail(ctx, n, "attribute 'equation': a term has too many labels");
        if (*p == '.') {
            if (to - p < 3 || p[1] != '.' || p[2] != '.' || t->ellipsis)
                return op_fail(ctx, n, "attribute 'equation': a term has a '.' that is not "
                               "one ellipsis '...'");
            t->ellipsis = true;
            t->lab[t->count++] = ELLIPSIS;
            p += 3;
            continue;
        }
        int id = letter_id(*p);
        if (id < 0)
            return op_fail(ctx, n, "attribute 'equation' has the character '%c'; labels are "
                           "letters", *p);
        t->lab[t->count++] = id;
        p++;
    }
    return WPK_OK;
}

static bool einsum_dtype_ok(wpk_dtype t) {
    return t == WPK_DTYPE_FLOAT32 || t == WPK_DTYPE_FLOAT64;
}

/* The labels of operand i's dims, in order (ellipsis dims as EINSUM_LETTERS + their place
 * among the ell right-aligned broadcast dims). */
static void operand_labels(const einsum_term *t, int rank, int ell, int *lab) {
    int e = rank - (t->count - (t->ellipsis ? 1 : 0)), d = 0;
    for (int k = 0; k < t->count; k++) {
        if (t->lab[k] != ELLIPSIS) {
            lab[d++] = t->lab[k];
            continue;
        }
        for (int q = 0; q < e; q++) lab[d++] = EINSUM_LETTERS + ell - e + q;
    }
}

static wpk_status einsum_plan_make(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                   einsum_plan *p) {
    const char *eq = ir_attr_str(n, "equation", NULL);
    if (!eq) return op_fail(ctx, n, "attribute 'equation' (a string) is required");
    char buf[EINSUM_MAX_EQUATION];
    size_t len = 0;
    for (const char *c = eq; *c; c++) {
        if (*c == ' ') continue;
        if (len + 1 >= sizeof buf)
            return op_fail(ctx, n, "attribute 'equation' is longer than %d characters",
                           EINSUM_MAX_EQUATION - 1);
        buf[len++] = *c;
    }
    buf[len] = 0;
    if (n->nin < 1 || n->nin > EINSUM_MAX_OPERANDS)
        return op_unsupported(ctx, n, "%d operands; 1 to %d are supported", n->nin,
                              EINSUM_MAX_OPERANDS);
    p->nops = n->nin;
    wpk_status st;
    for (int i = 0; i < n->nin; i++) {
        if ((st = op_need_input(ctx, n, in, i, "Inputs"))) return st;
        if (!einsum_dtype_ok(in[i]->dtype) || in[i]->dtype != in[0]->dtype)
            return op_unsupported(ctx, n, "input %d has dtype %s; Einsum supports float32 and "
                                  "float64, the same for every operand", i,
                                  wpk_dtype_name(in[i]->dtype));
    }
    char *arrow = strstr(buf, "->");
    const char *lhs_end = arrow ? arrow : buf + len;
    /* the operands' terms */
    einsum_term terms[EINSUM_MAX_OPERANDS];
    int nterms = 0;
    for (const char *from = buf;;) {
        const char *comma = memchr(from, ',', (size_t)(lhs_end - from));
        const char *to = comma ? comma : lhs_end;
        if (nterms == n->nin)
            return op_fail(ctx, n, "attribute 'equation' '%s' has more terms than the %d "
                           "inputs", eq, n->nin);
        if ((st = parse_term(ctx, n, from, to, &terms[nterms++]))) return st;
        if (!comma) break;
        from = comma + 1;
    }
    if (nterms != n->nin)
        return op_fail(ctx, n, "attribute 'equation' '%s' has %d terms for %d inputs", eq,
                       nterms, n->nin);
    /* the ellipsis's rank, and every label's size */
    int ell = 0, uses[EINSUM_MAX_LABELS] = {0};
    int64_t size[EINSUM_MAX_LABELS];
    for (int l = 0; l < EINSUM_MAX_LABELS; l++) size[l] = -2; /* not seen */
    for (int i = 0; i < n->nin; i++) {
        int letters = terms[i].count - (terms[i].ellipsis ? 1 : 0);
        int e = in[i]->ndim - letters;
        if (e < 0 || (!terms[i].ellipsis && e != 0))
            return op_fail(ctx, n, "input %d has %d dims, but its term in 'equation' names %d",
                           i, in[i]->ndim, letters);
        if (e > ell) ell = e;
    }
    int labs[EINSUM_MAX_OPERANDS][WPK_MAX_DIMS];
    for (int i = 0; i < n->nin; i++) {
        operand_labels(&terms[i], in[i]->ndim, ell, labs[i]);
        for (int d = 0; d < in[i]->ndim; d++) {
            int l = labs[i][d];
            int64_t have = size[l], got = in[i]->dims[d];
            uses[l]++;
            if (have == -2 || have < 0 || (l >= EINSUM_LETTERS && have == 1)) {
                if (have == -2 || got >= 0) size[l] = got;
            } else if (got >= 0 && got != have && !(l >= EINSUM_LETTERS && got == 1)) {
                if (l >= EINSUM_LETTERS)
                    return op_fail(ctx, n, "the dims under '...' do not broadcast (input %d "
                                   "dim %d has %lld, another %lld)", i, d, (long long)got,
                                   (long long)have);
                return op_fail(ctx, n, "label '%c' has size %lld in input %d but %lld "
                               "elsewhere", letter_of(l), (long long)got, i, (long long)have);
            }
        }
    }
    /* the output's labels: explicit, or (implicit) the ellipsis then the letters used once,
     * in ASCII order (upper case first) */
    int out_lab[EINSUM_MAX_LABELS], nout = 0;
    bool in_out[EINSUM_MAX_LABELS] = {false};
    if (arrow) {
        einsum_term ot;
        if ((st = parse_term(ctx, n, arrow + 2, buf + len, &ot))) return st;
        for (int k = 0; k < ot.count; k++) {
            if (ot.lab[k] == ELLIPSIS) {
                for (int q = 0; q < ell; q++) out_lab[nout++] = EINSUM_LETTERS + q;
                continue;
            }
            int l = ot.lab[k];
            if (!uses[l])
                return op_fail(ctx, n, "attribute 'equation': output label '%c' is in no "
                               "input", letter_of(l));
            if (in_out[l])
                return op_fail(ctx, n, "attribute 'equation': output label '%c' appears twice",
                               letter_of(l));
            in_out[l] = true;
            out_lab[nout++] = l;
        }
        for (int q = 0; q < nout; q++) in_out[out_lab[q]] = true;
    } else {
        for (int q = 0; q < ell; q++) in_out[out_lab[nout++] = EINSUM_LETTERS + q] = true;
        for (int pass = 0; pass < 2; pass++)
            for (int l = pass ? 0 : 26; l < (pass ? 26 : EINSUM_LETTERS); l++)
                if (uses[l] == 1) in_out[out_lab[nout++] = l] = true;
    }
    if (nout > WPK_MAX_DIMS)
        return op_unsupported(ctx, n, "the output has %d dims; at most %d are supported", nout,
                              WPK_MAX_DIMS);
    p->nout = nout;
    for (int k = 0; k < nout; k++) p->out_dims[k] = size[out_lab[k]];
    int sum_lab[EINSUM_MAX_LABELS];
    p->nsum = 0;
    for (int l = 0; l < EINSUM_MAX_LABELS; l++)
        if (uses[l] && !in_out[l]) {
            sum_lab[p->nsum] = l;
            p->sum_dims[p->nsum++] = size[l];
        }
    /* each operand's stride along every label */
    for (int i = 0; i < n->nin; i++) {
        int64_t str[EINSUM_MAX_LABELS] = {0}, s = 1;
        for (int d = in[i]->ndim - 1; d >= 0; d--) {
            int l = labs[i][d];
            if (!(in[i]->dims[d] == 1 && size[l] != 1)) str[l] += s;
            s *= in[i]->dims[d];
        }
        for (int k = 0; k < nout; k++) p->out_str[i][k] = str[out_lab[k]];
        for (int k = 0; k < p->nsum; k++) p->sum_str[i][k] = str[sum_lab[k]];
    }
    return WPK_OK;
}

wpk_status op_einsum_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                           ir_tensor *const *out) {
    einsum_plan p;
    wpk_status st = einsum_plan_make(ctx, n, in, &p);
    if (st) return st;
    op_set_shape(out[0], in[0]->dtype, p.nout, p.out_dims);
    return WPK_OK;
}

typedef struct einsum_job {
    const einsum_plan *p;
    int64_t total, per_task, sum_outer; /* sum_outer: the summed combos but the last label's */
    int row_a;                          /* the matrix-product form's operand a (row_form) */
    const void *x[EINSUM_MAX_OPERANDS];
    void *y;
} einsum_job;

/* One task: outputs [t * per_task, ...), walking the output index with an odometer. For each
 * output the summed labels but the last step by an odometer too; the last is the inner loop. */
#define EINSUM_TASK(SUF, T)                                                                     \
    static void SUF##_task(const einsum_job *j, int64_t t) {                                   \
        const einsum_plan *p = j->p;                                                           \
        const int nops = p->nops, nsum = p->nsum;                                              \
        const T *const *x = (const T *const *)j->x;                                            \
        int64_t o0 = t * j->per_task, o1 = o0 + j->per_task;                                   \
        if (o1 > j->total) o1 = j->total;                                                      \
        int64_t idx[WPK_MAX_DIMS], off[EINSUM_MAX_OPERANDS] = {0}, rem = o0;                   \
        for (int k = p->nout - 1; k >= 0; k--) {                                               \
            idx[k] = rem % p->out_dims[k];                                                     \
            rem /= p->out_dims[k];                                                             \
            for (int i = 0; i < nops; i++) off[i] += idx[k] * p->out_str[i][k];                \
        }                                                                                      \
        int64_t last = nsum ? p->sum_dims[nsum - 1] : 1;                                       \
        int64_t ls[EINSUM_MAX_OPERANDS];                                                       \
        for (int i = 0; i < nops; i++) ls[i] = nsum ? p->sum_str[i][nsum - 1] : 0;             \
        /* the summed odometer is back at zero after each output's full cycle */               \
        int64_t sidx[EINSUM_MAX_LABELS] = {0};                                                 \
        for (int64_t o = o0; o < o1; o++) {                                                    \
            double acc = 0.0;                                                                  \
            int64_t soff[EINSUM_MAX_OPERANDS];                                                 \
            for (int i = 0; i < nops; i++) soff[i] = off[i];                                   \
            for (int64_t q = 0; q < j->sum_outer; q++) {                                       \
                if (nops == 2) {                                                               \
                    const T *a = x[0] + soff[0], *b = x[1] + soff[1];                          \
                    const int64_t sa = ls[0], sb = ls[1];                                      \
                    double part = 0.0;                                                         \
                    if (sa == 1 && sb == 1) {                                                  \
                        _Pragma("omp simd reduction(+ : part)")                                \
                        for (int64_t l = 0; l < last; l++) part += (double)a[l] * b[l];        \
                    } else {                                                                   \
                        for (int64_t l = 0; l < last; l++) part += (double)a[l * sa] * b[l * sb]; \
                    }                                                                          \
                    acc += part;                                                               \
                } else {                                                                       \
                    for (int64_t l = 0; l < last; l++) {                                       \
                        double v = 1.0;                                                        \
                        for (int i = 0; i < nops; i++) v *= x[i][soff[i] + l * ls[i]];         \
                        acc += v;                                                              \
                    }                                                                          \
                }                                                                              \
                for (int g = nsum - 2; g >= 0; g--) {                                          \
                    for (int i = 0; i < nops; i++) soff[i] += p->sum_str[i][g];                \
                    if (++sidx[g] < p->sum_dims[g]) break;                                     \
                    for (int i = 0; i < nops; i++) soff[i] -= sidx[g] * p->sum_str[i][g];      \
                    sidx[g] = 0;                                                               \
                }                                                                              \
            }                                                                                  \
            ((T *)j->y)[o] = (T)acc;                                                           \
            for (int k = p->nout - 1; k >= 0; k--) {                                           \
                for (int i = 0; i < nops; i++) off[i] += p->out_str[i][k];                     \
                if (++idx[k] < p->out_dims[k]) break;                                          \
                for (int i = 0; i < nops; i++) off[i] -= idx[k] * p->out_str[i][k];            \
                idx[k] = 0;                                                                    \
            }                                                                                  \
        }                                                                                      \
    }

EINSUM_TASK(f32, float)
EINSUM_TASK(f64, double)

/* Output columns a row task accumulates at once. */
#define EINSUM_ROW_BLOCK 256

/* The matrix-product form (one summed label; operand `a` constant along the output's last
 * dim, operand `b` contiguous along it, as in bij,bjk->bik): task t is one output row, built
 * as a sum of b's rows scaled by a's elements, so the inner loop runs over contiguous memory. */
#define EINSUM_ROW_TASK(SUF, T)                                                                 \
    static void SUF##_row_task(const einsum_job *j, int64_t t) {                               \
        const einsum_plan *p = j->p;                                                           \
        const int last = p->nout - 1, ai = j->row_a, bi = 1 - ai;                              \
        const int64_t cols = p->out_dims[last], len = p->sum_dims[0];                          \
        const int64_t sa = p->sum_str[ai][0], sb = p->sum_str[bi][0];                          \
        int64_t oa = 0, ob = 0, rem = t;                                                       \
        for (int k = last - 1; k >= 0; k--) {                                                  \
            int64_t i = rem % p->out_dims[k];                                                  \
            rem /= p->out_dims[k];                                                             \
            oa += i * p->out_str[ai][k];                                                       \
            ob += i * p->out_str[bi][k];                                                       \
        }                                                                                      \
        const T *a = (const T *)j->x[ai] + oa, *b = (const T *)j->x[bi] + ob;                  \
        T *y = (T *)j->y + t * cols;                                                           \
        for (int64_t c0 = 0; c0 < cols; c0 += EINSUM_ROW_BLOCK) {                              \
            int64_t nc = cols - c0 < EINSUM_ROW_BLOCK ? cols - c0 : EINSUM_ROW_BLOCK;          \
            double acc[EINSUM_ROW_BLOCK];                                                      \
            for (int64_t k = 0; k < nc; k++) acc[k] = 0.0;                                     \
            for (int64_t l = 0; l < len; l++) {                                                \
                const double av = a[l * sa];                                                   \
                const T *br = b + l * sb + c0;                                                 \
                _Pragma("omp simd")                                                            \
                for (int64_t k = 0; k < nc; k++) acc[k] += av * br[k];                         \
            }                                                                                  \
            for (int64_t k = 0; k < nc; k++) y[c0 + k] = (T)acc[k];                            \
        }                                                                                      \
    }

EINSUM_ROW_TASK(f32, float)
EINSUM_ROW_TASK(f64, double)

/* Which operand is `a` of the matrix-product form, or -1 when the plan does not have it. */
static int row_form(const einsum_plan *p) {
    if (p->nops != 2 || p->nsum != 1 || p->nout < 1) return -1;
    const int last = p->nout - 1;
    for (int ai = 0; ai < 2; ai++)
        if (p->out_str[ai][last] == 0 && p->out_str[1 - ai][last] == 1 &&
            p->sum_str[1 - ai][0] != 1)
            return ai;
    return -1;
}

/* Outputs per task: enough that a task's set-up is small against its sums. */
#define EINSUM_TASK_OUTPUTS 64

wpk_status op_einsum_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out) {
    einsum_plan p;
    wpk_status st = einsum_plan_make(ctx, n, in, &p);
    if (st) return st;
    einsum_job j = {.p = &p, .total = ir_numel(out[0]), .per_task = EINSUM_TASK_OUTPUTS,
                    .sum_outer = 1, .y = out[0]->data};
    for (int i = 0; i < p.nops; i++) j.x[i] = in[i]->data;
    int64_t sum_total = 1;
    for (int k = 0; k < p.nsum; k++) sum_total *= p.sum_dims[k];
    for (int k = 0; k + 1 < p.nsum; k++) j.sum_outer *= p.sum_dims[k];
    if (j.total == 0) return WPK_OK;
    if (sum_total == 0) {
        memset(j.y, 0, ir_nbytes(out[0]));
        return WPK_OK;
    }
    bool f64 = in[0]->dtype == WPK_DTYPE_FLOAT64;
    void (*task)(const einsum_job *, int64_t) = f64 ? f64_task : f32_task;
    int64_t tasks = (j.total + j.per_task - 1) / j.per_task;
    j.row_a = row_form(&p);
    if (j.row_a >= 0) {
        task = f64 ? f64_row_task : f32_row_task;
        tasks = j.total / p.out_dims[p.nout - 1];
    }
    if (tasks > 1 && op_parallel(j.total * sum_total, 1 << 15)) {
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < tasks; t++) task(&j, t);
    } else {
        for (int64_t t = 0; t < tasks; t++) task(&j, t);
    }
    return WPK_OK;
}
