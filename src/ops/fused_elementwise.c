/* fused_elementwise.c -- wpk::FusedElementwise: a chain of elementwise ops, each reading the
 * previous one's output alone, in one loop: each task takes a block of elements through every
 * step in a buffer on its stack, so no intermediate goes to memory.
 *
 * Inputs: X, then the binary steps' other operands, each of X's shape or of one element.
 * Attributes: `ops` (strings: the steps in order, fused_elementwise_step's names), `operands`
 * (ints, per step: the input of its other operand, -1 for a unary step) and `swapped` (ints,
 * per step: 1 when the chain's value is the step's second operand, as in Sub(c, x)). */
#include <math.h>
#include <string.h>

#include "ops/fused_stage.h"
#include "ops/op_util.h"

/* Elements per task: the block every step runs over. */
#define BLOCK 2048

typedef enum step_op {
    S_RELU, S_SIGMOID, S_TANH, S_EXP, S_LOG, S_NEG, S_ABS, S_SQRT, S_RECIPROCAL, S_ERF,
    S_ADD, S_SUB, S_MUL, S_DIV, S_COUNT
} step_op;

static const char *const step_names[S_COUNT] = {
    "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Neg", "Abs", "Sqrt", "Reciprocal", "Erf",
    "Add", "Sub", "Mul", "Div"};

bool fused_elementwise_step(const char *op_type, bool *binary) {
    for (int s = 0; s < S_COUNT; s++)
        if (strcmp(op_type, step_names[s]) == 0) {
            *binary = s >= S_ADD;
            return true;
        }
    return false;
}

typedef struct chain {
    int n;
    step_op op[FUSED_ELEMENTWISE_MAX_STEPS];
    int operand[FUSED_ELEMENTWISE_MAX_STEPS];
    bool swapped[FUSED_ELEMENTWISE_MAX_STEPS];
} chain;

static wpk_status read_chain(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                             chain *c) {
    const ir_attr *ops = ir_attr_find(n, "ops");
    int no = 0, ns = 0;
    const int64_t *operand = ir_attr_ints(n, "operands", &no);
    const int64_t *swapped = ir_attr_ints(n, "swapped", &ns);
    if (!ops || ops->kind != IR_ATTR_STRINGS || ops->n < 1 ||
        ops->n > FUSED_ELEMENTWISE_MAX_STEPS)
        return op_fail(ctx, n, "attribute 'ops' must list 1 to %d steps",
                       FUSED_ELEMENTWISE_MAX_STEPS);
    if (!operand || no != ops->n || !swapped || ns != ops->n)
        return op_fail(ctx, n, "attributes 'operands' and 'swapped' must have one value per "
                       "step (%d)", ops->n);
    c->n = ops->n;
    for (int s = 0; s < c->n; s++) {
        bool binary = false;
        int k = 0;
        while (k < S_COUNT && strcmp(ops->strs[s], step_names[k])) k++;
        if (k == S_COUNT || !fused_elementwise_step(ops->strs[s], &binary))
            return op_fail(ctx, n, "step %d: '%s' is not an elementwise op it fuses", s,
                           ops->strs[s]);
        c->op[s] = (step_op)k;
        c->swapped[s] = swapped[s] != 0;
        c->operand[s] = (int)operand[s];
        if (binary != (operand[s] >= 0) || operand[s] >= n->nin || operand[s] == 0)
            return op_fail(ctx, n, "step %d (%s): operand %lld is not one of its inputs 1..%d",
                           s, ops->strs[s], (long long)operand[s], n->nin - 1);
        if (!binary) continue;
        const ir_tensor *o = in[operand[s]];
        wpk_status st = op_need_input(ctx, n, in, (int)operand[s], "operand");
        if (!st) st = op_need_f32(ctx, n, in, (int)operand[s]);
        if (st) return st;
        bool same = o->ndim == in[0]->ndim;
        for (int d = 0; same && d < o->ndim; d++) same = o->dims[d] == in[0]->dims[d];
        if (!same && ir_numel(o) != 1)
            return op_fail(ctx, n, "step %d (%s): its operand must have X's shape or one "
                           "element", s, ops->strs[s]);
    }
    return WPK_OK;
}

wpk_status op_fused_elementwise_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                      ir_tensor *const *out) {
    wpk_status st = op_need_input(ctx, n, in, 0, "X");
    if (!st) st = op_need_f32(ctx, n, in, 0);
    chain c;
    if (!st) st = read_chain(ctx, n, in, &c);
    if (!st) op_set_shape(out[0], WPK_DTYPE_FLOAT32, in[0]->ndim, in[0]->dims);
    return st;
}

typedef struct chain_job {
    const chain *c;
    const float *x;
    const float *operand[FUSED_ELEMENTWISE_MAX_STEPS];
    bool scalar[FUSED_ELEMENTWISE_MAX_STEPS];
    float *y;
    int64_t count;
} chain_job;

FUSED_MULTI_ISA static void chain_block(const chain_job *j, int64_t b) {
    float buf[BLOCK];
    int64_t start = b * BLOCK, len = j->count - start < BLOCK ? j->count - start : BLOCK;
    memcpy(buf, j->x + start, sizeof(float) * (size_t)len);
    for (int s = 0; s < j->c->n; s++) {
        const float *o = j->operand[s];
        float k = o && j->scalar[s] ? o[0] : 0.0f;
        const float *ob = o && !j->scalar[s] ? o + start : NULL;
        bool sw = j->c->swapped[s];
        switch (j->c->op[s]) {
        case S_RELU: for (int64_t i = 0; i < len; i++) buf[i] = buf[i] > 0 ? buf[i] : 0.0f; break;
        case S_SIGMOID:
            for (int64_t i = 0; i < len; i++) buf[i] = 1.0f / (1.0f + expf(-buf[i]));
            break;
        case S_TANH: for (int64_t i = 0; i < len; i++) buf[i] = tanhf(buf[i]); break;
        case S_EXP: for (int64_t i = 0; i < len; i++) buf[i] = expf(buf[i]); break;
        case S_LOG: for (int64_t i = 0; i < len; i++) buf[i] = logf(buf[i]); break;
        case S_NEG: for (int64_t i = 0; i < len; i++) buf[i] = -buf[i]; break;
        case S_ABS: for (int64_t i = 0; i < len; i++) buf[i] = fabsf(buf[i]); break;
        case S_SQRT: for (int64_t i = 0; i < len; i++) buf[i] = sqrtf(buf[i]); break;
        case S_RECIPROCAL: for (int64_t i = 0; i < len; i++) buf[i] = 1.0f / buf[i]; break;
        case S_ERF: for (int64_t i = 0; i < len; i++) buf[i] = erff(buf[i]); break;
        case S_ADD:
            for (int64_t i = 0; i < len; i++) buf[i] += ob ? ob[i] : k;
            break;
        case S_MUL:
            for (int64_t i = 0; i < len; i++) buf[i] *= ob ? ob[i] : k;
            break;
        case S_SUB:
            for (int64_t i = 0; i < len; i++) {
                float v = ob ? ob[i] : k;
                buf[i] = sw ? v - buf[i] : buf[i] - v;
            }
            break;
        case S_DIV:
            for (int64_t i = 0; i < len; i++) {
                float v = ob ? ob[i] : k;
                buf[i] = sw ? v / buf[i] : buf[i] / v;
            }
            break;
        default: break;
        }
    }
    memcpy(j->y + start, buf, sizeof(float) * (size_t)len);
}

wpk_status op_fused_elementwise_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                                    ir_tensor *const *out) {
    chain c;
    wpk_status st = op_need_input(ctx, n, in, 0, "X");
    if (!st) st = op_need_f32(ctx, n, in, 0);
    if (!st) st = read_chain(ctx, n, in, &c);
    if (st) return st;
    chain_job j = {.c = &c, .x = in[0]->data, .y = out[0]->data, .count = ir_numel(in[0])};
    for (int s = 0; s < c.n; s++) {
        if (c.operand[s] < 0) continue;
        j.operand[s] = in[c.operand[s]]->data;
        j.scalar[s] = ir_numel(in[c.operand[s]]) == 1 && ir_numel(in[0]) != 1;
    }
    int64_t blocks = (j.count + BLOCK - 1) / BLOCK;
    if (op_parallel(j.count * c.n, 1 << 16)) {
#pragma omp parallel for schedule(static)
        for (int64_t b = 0; b < blocks; b++) chain_block(&j, b);
    } else {
        for (int64_t b = 0; b < blocks; b++) chain_block(&j, b);
    }
    return WPK_OK;
}
