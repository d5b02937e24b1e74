/* recurrent.c -- what LSTM, GRU and RNN share (recurrent.h): attributes and inputs checked,
 * output shapes, and the driver: scratch, weight packing, the input projection of all
 * timesteps as one GEMM, the time loop over a cell's step, and the final states. */
#include "ops/recurrent.h"

#include <math.h>
#include <omp.h>
#include <strings.h>

#include "base/alloc.h"

static bool has_in(const ir_node *n, ir_tensor *const *in, int i) { return i < n->nin && in[i]; }
static bool has_out(const ir_node *n, ir_tensor *const *out, int i) {
    return i < n->nout && out[i];
}

/* ---- attributes ---- */

typedef struct act_name {
    const char *name;
    rnn_act_kind kind;
    int params;          /* how many of alpha, beta it takes */
    float alpha, beta;   /* their defaults */
} act_name;

static const act_name act_names[] = {
    {"Sigmoid", RNN_ACT_SIGMOID, 0, 0, 0},
    {"Tanh", RNN_ACT_TANH, 0, 0, 0},
    {"Relu", RNN_ACT_RELU, 0, 0, 0},
    {"Affine", RNN_ACT_AFFINE, 2, 1.0f, 0.0f},
    {"LeakyRelu", RNN_ACT_LEAKY_RELU, 1, 0.01f, 0},
    {"ThresholdedRelu", RNN_ACT_THRESHOLDED_RELU, 1, 1.0f, 0},
    {"ScaledTanh", RNN_ACT_SCALED_TANH, 2, 1.0f, 1.0f},
    {"HardSigmoid", RNN_ACT_HARD_SIGMOID, 2, 0.2f, 0.5f},
    {"Elu", RNN_ACT_ELU, 1, 1.0f, 0},
    {"Softsign", RNN_ACT_SOFTSIGN, 0, 0, 0},
    {"Softplus", RNN_ACT_SOFTPLUS, 0, 0, 0},
};

/* activations, activation_alpha and activation_beta: alphas and betas are taken in order by
 * the activations that have the parameter; the op's default where the list has run out. A
 * bidirectional node that names one direction's activations uses them for both. */
static wpk_status read_activations(wpk_context *ctx, const ir_node *n, rnn_spec *s) {
    static const rnn_act_kind defaults[3][3] = {
        {RNN_ACT_TANH}, {RNN_ACT_SIGMOID, RNN_ACT_TANH},
        {RNN_ACT_SIGMOID, RNN_ACT_TANH, RNN_ACT_TANH}};
    const rnn_act_kind *def = defaults[s->kind];
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < s->nact; i++) s->act[d][i] = (rnn_act){def[i], 0, 0};
    const ir_attr *a = ir_attr_find(n, "activations");
    if (!a) return WPK_OK;
    if (a->kind != IR_ATTR_STRINGS)
        return op_fail(ctx, n, "attribute 'activations' must be a list of strings");
    if (a->n != s->nact * s->dirs && !(s->dirs == 2 && a->n == s->nact))
        return op_fail(ctx, n, "attribute 'activations' has %d entries, expected %d (%d per "
                       "direction)", a->n, s->nact * s->dirs, s->nact);
    const ir_attr *alphas = ir_attr_find(n, "activation_alpha");
    const ir_attr *betas = ir_attr_find(n, "activation_beta");
    if ((alphas && alphas->kind != IR_ATTR_FLOATS) || (betas && betas->kind != IR_ATTR_FLOATS))
        return op_fail(ctx, n, "attributes 'activation_alpha' and 'activation_beta' must be "
                       "lists of floats");
    int na = 0, nb = 0;
    for (int i = 0; i < a->n; i++) {
        const act_name *found = NULL;
        for (size_t k = 0; k < sizeof act_names / sizeof act_names[0]; k++)
            if (strcasecmp(a->strs[i], act_names[k].name) == 0) found = &act_names[k];
        if (!found)
            return op_fail(ctx, n, "attribute 'activations': unknown activation '%s' (entry %d)",
                           a->strs[i], i);
        rnn_act act = {found->kind, found->alpha, found->beta};
        if (found->params >= 1 && alphas && na < alphas->n) act.alpha = alphas->floats[na++];
        if (found->params >= 2 && betas && nb < betas->n) act.beta = betas->floats[nb++];
        s->act[i / s->nact][i % s->nact] = act;
    }
    if (a->n < s->nact * s->dirs)
        for (int i = 0; i < s->nact; i++) s->act[1][i] = s->act[0][i];
    return WPK_OK;
}

/* t must be ndim-D with dims `want` (-1: any); WPK_ERR_MODEL naming it otherwise. */
static wpk_status check_dims(wpk_context *ctx, const ir_node *n, const ir_tensor *t,
                             const char *what, int ndim, const int64_t *want) {
    bool ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = want[i] < 0 || t->dims[i] < 0 || t->dims[i] == want[i];
    if (ok) return WPK_OK;
    char have[96], exp[96];
    int64_t shown[WPK_MAX_DIMS];
    for (int i = 0; i < ndim; i++) shown[i] = want[i];
    return op_fail(ctx, n, "input '%s' has shape %s, expected %s", what,
                   op_dims_str(have, sizeof have, t->ndim, t->dims),
                   op_dims_str(exp, sizeof exp, ndim, shown));
}

wpk_status rnn_spec_read(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         rnn_kind kind, rnn_spec *s) {
    static const int gates[3] = {1, 3, 4}, nacts[3] = {1, 2, 3};
    *s = (rnn_spec){.kind = kind, .gates = gates[kind], .nact = nacts[kind]};
    wpk_status st;
    static const char *names[3] = {"X", "W", "R"};
    for (int i = 0; i < 3; i++)
        if ((st = op_need_input(ctx, n, in, i, names[i])) || (st = op_need_f32(ctx, n, in, i)))
            return st;
    int max_in = kind == RNN_KIND_LSTM ? 8 : 6;
    if (n->nin > max_in)
        return op_fail(ctx, n, "has %d inputs, at most %d expected", n->nin, max_in);
    const char *dir = ir_attr_str(n, "direction", "forward");
    if (strcmp(dir, "forward") == 0 || strcmp(dir, "reverse") == 0) {
        s->dirs = 1;
        s->reverse = dir[0] == 'r';
    } else if (strcmp(dir, "bidirectional") == 0) {
        s->dirs = 2;
    } else {
        return op_fail(ctx, n, "attribute 'direction' = '%s' is not one of forward, reverse, "
                       "bidirectional", dir);
    }
    int64_t layout = ir_attr_int(n, "layout", 0);
    if (layout != 0 && layout != 1)
        return op_fail(ctx, n, "attribute 'layout' = %lld is not 0 or 1", (long long)layout);
    s->batch_major = layout == 1;
    s->clip = INFINITY;
    const ir_attr *clip = ir_attr_find(n, "clip");
    if (clip) {
        if (clip->kind != IR_ATTR_FLOAT || !(clip->f > 0.0f))
            return op_fail(ctx, n, "attribute 'clip' must be a positive float");
        s->clip = clip->f;
    }
    if (kind == RNN_KIND_GRU &&
        (st = op_attr_flag(ctx, n, "linear_before_reset", &s->linear_before_reset)))
        return st;
    if (kind == RNN_KIND_LSTM && (st = op_attr_flag(ctx, n, "input_forget", &s->input_forget)))
        return st;

    const ir_tensor *x = in[RNN_IN_X], *w = in[RNN_IN_W], *r = in[RNN_IN_R];
    if (x->ndim != 3)
        return op_fail(ctx, n, "input 'X' has %d dims, expected 3 (%s)", x->ndim,
                       s->batch_major ? "batch, seq, input" : "seq, batch, input");
    s->seq = x->dims[s->batch_major ? 1 : 0];
    s->batch = x->dims[s->batch_major ? 0 : 1];
    s->input = x->dims[2];
    if (r->ndim != 3) return op_fail(ctx, n, "input 'R' has %d dims, expected 3", r->ndim);
    s->hidden = ir_attr_int(n, "hidden_size", r->dims[2]);
    if (ir_attr_find(n, "hidden_size") && s->hidden <= 0)
        return op_fail(ctx, n, "attribute 'hidden_size' = %lld must be positive",
                       (long long)s->hidden);
    const int64_t h = s->hidden, gh = h < 0 ? -1 : s->gates * h, dirs = s->dirs;
    int64_t wd[3] = {dirs, gh, s->input}, rd[3] = {dirs, gh, h};
    if ((st = check_dims(ctx, n, w, "W", 3, wd)) || (st = check_dims(ctx, n, r, "R", 3, rd)))
        return st;
    if (has_in(n, in, RNN_IN_B)) {
        int64_t bd[2] = {dirs, gh < 0 ? -1 : 2 * gh};
        if ((st = op_need_f32(ctx, n, in, RNN_IN_B)) ||
            (st = check_dims(ctx, n, in[RNN_IN_B], "B", 2, bd)))
            return st;
    }
    if (has_in(n, in, RNN_IN_LENS)) {
        const ir_tensor *l = in[RNN_IN_LENS];
        if (l->dtype != WPK_DTYPE_INT32 && l->dtype != WPK_DTYPE_INT64)
            return op_fail(ctx, n, "input 'sequence_lens' has dtype %s, expected int32",
                           wpk_dtype_name(l->dtype));
        if ((st = check_dims(ctx, n, l, "sequence_lens", 1, &s->batch))) return st;
    }
    int64_t sd[3] = {dirs, s->batch, h};
    if (s->batch_major) {
        sd[0] = s->batch;
        sd[1] = dirs;
    }
    static const char *state_names[2] = {"initial_h", "initial_c"};
    for (int i = RNN_IN_H0; i <= (kind == RNN_KIND_LSTM ? RNN_IN_C0 : RNN_IN_H0); i++)
        if (has_in(n, in, i) && ((st = op_need_f32(ctx, n, in, i)) ||
                                 (st = check_dims(ctx, n, in[i], state_names[i - RNN_IN_H0], 3,
                                                  sd))))
            return st;
    if (kind == RNN_KIND_LSTM && has_in(n, in, RNN_IN_P)) {
        int64_t pd[2] = {dirs, h < 0 ? -1 : 3 * h};
        if ((st = op_need_f32(ctx, n, in, RNN_IN_P)) ||
            (st = check_dims(ctx, n, in[RNN_IN_P], "P", 2, pd)))
            return st;
    }
    return read_activations(ctx, n, s);
}

wpk_status rnn_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out, rnn_kind kind) {
    rnn_spec s;
    wpk_status st = rnn_spec_read(ctx, n, in, kind, &s);
    if (st) return st;
    int max_out = kind == RNN_KIND_LSTM ? 3 : 2;
    if (n->nout > max_out)
        return op_fail(ctx, n, "has %d outputs, at most %d expected", n->nout, max_out);
    int64_t y[4] = {s.seq, s.dirs, s.batch, s.hidden};
    int64_t state[3] = {s.dirs, s.batch, s.hidden};
    if (s.batch_major) {
        y[0] = s.batch;
        y[1] = s.seq;
        y[2] = s.dirs;
        state[0] = s.batch;
        state[1] = s.dirs;
    }
    if (has_out(n, out, RNN_OUT_Y)) op_set_shape(out[RNN_OUT_Y], WPK_DTYPE_FLOAT32, 4, y);
    for (int i = RNN_OUT_YH; i < max_out; i++)
        if (has_out(n, out, i)) op_set_shape(out[i], WPK_DTYPE_FLOAT32, 3, state);
    return WPK_OK;
}

/* ---- indexing ---- */

int64_t rnn_time_at(const rnn_job *j, int d, int64_t s, int64_t b) {
    int64_t len = j->lens ? op_int_at(j->lens, b) : j->s.seq;
    if (s >= len) return -1;
    return j->dir[d].reverse ? len - 1 - s : s;
}

int64_t rnn_row(const rnn_job *j, int64_t t, int64_t b) {
    return j->s.batch_major ? b * j->s.seq + t : t * j->s.batch + b;
}

int64_t rnn_y_offset(const rnn_job *j, int64_t t, int d, int64_t b) {
    const rnn_spec *s = &j->s;
    int64_t slot = s->batch_major ? (b * s->seq + t) * s->dirs + d
                                  : (t * s->dirs + d) * s->batch + b;
    return slot * s->hidden;
}

/* Offset of (d, b) in initial_h, initial_c, Y_h and Y_c. */
static int64_t state_offset(const rnn_job *j, int d, int64_t b) {
    const rnn_spec *s = &j->s;
    return (s->batch_major ? b * s->dirs + d : d * s->batch + b) * s->hidden;
}

void rnn_emit(const rnn_job *j, int d, int64_t t, int64_t b, int64_t p, const float *h) {
    if (!j->y) return;
    int64_t u0 = p * RNN_NB, lanes = j->s.hidden - u0 < RNN_NB ? j->s.hidden - u0 : RNN_NB;
    memcpy(j->y + rnn_y_offset(j, t, d, b) + u0, h, sizeof(float) * (size_t)lanes);
}

void rnn_recurrent_tile(const rnn_job *j, const float *state, const float *rpack, int gc,
                        int64_t p, int64_t b0, int rows, float *tile) {
    const int64_t k = j->s.hidden, width = (int64_t)gc * RNN_NB;
    const float *panel = rpack + p * k * width;
    for (int r = 0; r < rows;) {
        int m = rows - r < rnn_tile_rows(gc) ? rows - r : rnn_tile_rows(gc);
        rnn_gemm_tile(m, gc, k, state + (b0 + r) * j->hp, j->hp, panel, NULL, tile + r * width,
                      width);
        r += m;
    }
}

/* ---- the team ---- */

struct rnn_team {
    int tid, nth;
};

void rnn_team_sync(const rnn_team *t) {
    if (t->nth > 1) {
#pragma omp barrier
    }
}

/* [lo, hi) of n items for member `rank` of `size`. */
static void share(int64_t n, int rank, int size, int64_t *lo, int64_t *hi) {
    *lo = n * rank / size;
    *hi = n * (rank + 1) / size;
}

typedef struct run_ctx {
    rnn_job *j;
    const ir_tensor *w, *r;
    rnn_step_fn step;
} run_ctx;

/* Packs W and R of every direction, panels split over the team. */
static void pack_weights(const run_ctx *c, const rnn_team *t) {
    const rnn_job *j = c->j;
    const rnn_spec *s = &j->s;
    int64_t p0, p1;
    share(j->panels, t->tid, t->nth, &p0, &p1);
    for (int d = 0; d < s->dirs; d++) {
        const rnn_dir *dd = &j->dir[d];
        const float *w = (const float *)c->w->data + d * s->gates * s->hidden * s->input;
        const float *r = (const float *)c->r->data + d * s->gates * s->hidden * s->hidden;
        rnn_pack(w, s->hidden, s->input, 0, s->gates, p0, p1, dd->wpack);
        if (dd->rpack_h) {
            rnn_pack(r, s->hidden, s->hidden, 0, 2, p0, p1, dd->rpack);
            rnn_pack(r, s->hidden, s->hidden, 2, 1, p0, p1, dd->rpack_h);
        } else {
            rnn_pack(r, s->hidden, s->hidden, 0, s->gates, p0, p1, dd->rpack);
        }
    }
}

#define PROJ_ROWS 32

/* X W^T + bias for every row of X and every direction, tasks of (direction, panel, rows). */
static void project(const run_ctx *c, const rnn_team *t) {
    const rnn_job *j = c->j;
    const rnn_spec *s = &j->s;
    const int g = s->gates, mr = rnn_tile_rows(g);
    const int64_t chunks = (j->rows + PROJ_ROWS - 1) / PROJ_ROWS;
    const int64_t per_dir = j->panels * chunks, ldp = j->panels * g * RNN_NB;
    int64_t lo, hi;
    share(per_dir * s->dirs, t->tid, t->nth, &lo, &hi);
    for (int64_t task = lo; task < hi; task++) {
        int d = (int)(task / per_dir);
        int64_t p = task % per_dir / chunks, r0 = task % chunks * PROJ_ROWS;
        int64_t r1 = r0 + PROJ_ROWS < j->rows ? r0 + PROJ_ROWS : j->rows;
        const rnn_dir *dd = &j->dir[d];
        const float *panel = dd->wpack + p * s->input * g * RNN_NB;
        for (int64_t r = r0; r < r1; r += mr) {
            int m = r1 - r < mr ? (int)(r1 - r) : mr;
            rnn_gemm_tile(m, g, s->input, j->x + r * s->input, s->input, panel,
                          dd->proj_bias + p * g * RNN_NB, dd->proj + r * ldp + p * g * RNN_NB,
                          ldp);
        }
    }
}

/* Multiply-adds of one step's recurrent product below which a direction's time loop runs on
 * one thread: a step then takes about a microsecond, no more than a team barrier per step on
 * a quiet machine. (On a busy one a barrier can cost a time slice, when the thread waited for
 * is descheduled; raising this trades the split steps' speed for that robustness.) */
#define PARALLEL_STEP_MIN_WORK (1 << 16)

/* Every step of direction d on member `rank` of a group of `size`; `sync` is the team, or a
 * team of one where no thread of the region waits on another. */
static void run_direction(const run_ctx *c, int d, int rank, int size, const rnn_team *sync) {
    int64_t p0, p1;
    share(c->j->panels, rank, size, &p0, &p1);
    for (int64_t s = 0; s < c->j->s.seq; s++) {
        c->step(c->j, d, s, p0, p1, sync);
        rnn_team_sync(sync);
    }
}

static void run_team(const run_ctx *c, int tid, int nth) {
    const rnn_team t = {tid, nth}, solo = {0, 1};
    const rnn_job *j = c->j;
    pack_weights(c, &t);
    rnn_team_sync(&t);
    project(c, &t);
    rnn_team_sync(&t);
    const rnn_spec *s = &j->s;
    bool split_steps = s->batch * s->gates * s->hidden * s->hidden >= PARALLEL_STEP_MIN_WORK;
    if (s->dirs == 2 && nth >= 2) {
        /* a direction per half of the team: no step waits on the other direction */
        int half = nth / 2, d = tid < half ? 0 : 1;
        int rank = d ? tid - half : tid, size = d ? nth - half : half;
        if (!split_steps || nth == 2) {
            if (rank == 0) run_direction(c, d, 0, 1, &solo);
            return;
        }
        /* both halves pass the team's barriers, one per step (and phase), in step */
        run_direction(c, d, rank, size, &t);
        return;
    }
    for (int d = 0; d < s->dirs; d++) {
        if (split_steps)
            run_direction(c, d, tid, nth, &t);
        else if (tid == 0)
            run_direction(c, d, 0, 1, &solo);
    }
}

/* ---- setup ---- */

/* Scratch floats per direction, each region a multiple of RNN_NB floats. */
typedef struct layout_sizes {
    int64_t wpack, rpack, rpack_h, proj_bias, rbias_h, peep, proj, h, c, rh, z;
} layout_sizes;

static layout_sizes sizes_of(const rnn_job *j, bool peephole) {
    const rnn_spec *s = &j->s;
    const int64_t g = s->gates, gw = g * RNN_NB, hp = j->hp, bh = s->batch * hp;
    bool gru_split = s->kind == RNN_KIND_GRU && !s->linear_before_reset;
    layout_sizes z = {0};
    z.wpack = j->panels * s->input * gw;
    z.rpack = j->panels * s->hidden * (gru_split ? 2 * RNN_NB : gw);
    z.rpack_h = gru_split ? j->panels * s->hidden * RNN_NB : 0;
    z.proj_bias = j->panels * gw;
    z.rbias_h = s->kind == RNN_KIND_GRU && s->linear_before_reset ? hp : 0;
    z.peep = peephole ? 3 * hp : 0;
    z.proj = j->rows * j->panels * gw;
    z.h = 2 * bh;
    z.c = s->kind == RNN_KIND_LSTM ? bh : 0;
    z.rh = z.z = gru_split ? bh : 0;
    return z;
}

static float *take(float **cursor, int64_t count) {
    if (!count) return NULL;
    float *p = *cursor;
    *cursor += count;
    return p;
}

/* Biases of the projection: W's and R's, except R's h-gate bias of a GRU with
 * linear_before_reset, which sits inside r (.) (...) and goes to rbias_h. */
static void fill_biases(rnn_job *j, int d, const ir_tensor *b) {
    const rnn_spec *s = &j->s;
    rnn_dir *dd = &j->dir[d];
    const int64_t g = s->gates, h = s->hidden, gw = g * RNN_NB;
    memset(dd->proj_bias, 0, sizeof(float) * (size_t)(j->panels * gw));
    if (dd->rbias_h) memset(dd->rbias_h, 0, sizeof(float) * (size_t)j->hp);
    if (!b) return;
    const float *wb = (const float *)b->data + d * 2 * g * h, *rb = wb + g * h;
    for (int64_t gate = 0; gate < g; gate++)
        for (int64_t u = 0; u < h; u++) {
            float v = wb[gate * h + u];
            if (dd->rbias_h && gate == 2)
                dd->rbias_h[u] = rb[gate * h + u];
            else
                v += rb[gate * h + u];
            dd->proj_bias[u / RNN_NB * gw + gate * RNN_NB + u % RNN_NB] = v;
        }
}

/* Initial states (zero when absent), the peephole weights padded to hp. */
static void fill_states(rnn_job *j, int d, ir_tensor *const *in, bool lstm_c0, bool peephole) {
    const rnn_spec *s = &j->s;
    rnn_dir *dd = &j->dir[d];
    const int64_t h = s->hidden, hp = j->hp;
    memset(dd->h[0], 0, sizeof(float) * (size_t)(s->batch * hp));
    if (dd->c) memset(dd->c, 0, sizeof(float) * (size_t)(s->batch * hp));
    for (int64_t b = 0; b < s->batch; b++) {
        if (in[RNN_IN_H0])
            memcpy(dd->h[0] + b * hp, (const float *)in[RNN_IN_H0]->data + state_offset(j, d, b),
                   sizeof(float) * (size_t)h);
        if (lstm_c0)
            memcpy(dd->c + b * hp, (const float *)in[RNN_IN_C0]->data + state_offset(j, d, b),
                   sizeof(float) * (size_t)h);
    }
    if (peephole) {
        memset(dd->peep, 0, sizeof(float) * (size_t)(3 * hp));
        const float *p = (const float *)in[RNN_IN_P]->data + d * 3 * h;
        for (int k = 0; k < 3; k++) memcpy(dd->peep + k * hp, p + k * h, sizeof(float) * (size_t)h);
    }
}

/* Multiply-adds of one step of one direction: below this, threads cost more than they save. */
#define PARALLEL_STEP_WORK 32768

wpk_status rnn_run(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                   ir_tensor *const *out, rnn_kind kind, rnn_step_fn step) {
    rnn_job j = {0};
    wpk_status st = rnn_spec_read(ctx, n, in, kind, &j.s);
    if (st) return st;
    const rnn_spec *s = &j.s;
    ir_tensor *opt[8] = {0};
    for (int i = 0; i < n->nin && i < 8; i++) opt[i] = in[i];
    j.lens = opt[RNN_IN_LENS];
    if (j.lens)
        for (int64_t b = 0; b < s->batch; b++) {
            int64_t len = op_int_at(j.lens, b);
            if (len < 0 || len > s->seq)
                return op_fail(ctx, n, "input 'sequence_lens' has %lld at batch entry %lld, "
                               "outside [0, %lld]", (long long)len, (long long)b,
                               (long long)s->seq);
        }
    j.panels = (s->hidden + RNN_NB - 1) / RNN_NB;
    j.hp = j.panels * RNN_NB;
    j.rows = s->seq * s->batch;
    j.x = in[RNN_IN_X]->data;
    j.y = has_out(n, out, RNN_OUT_Y) ? out[RNN_OUT_Y]->data : NULL;
    j.yh = has_out(n, out, RNN_OUT_YH) ? out[RNN_OUT_YH]->data : NULL;
    j.yc = kind == RNN_KIND_LSTM && has_out(n, out, RNN_OUT_YC) ? out[RNN_OUT_YC]->data : NULL;
    bool peephole = kind == RNN_KIND_LSTM && opt[RNN_IN_P];
    bool lstm_c0 = kind == RNN_KIND_LSTM && opt[RNN_IN_C0];

    /* The ref runner hands a kernel no scratch, so the packed weights, projections and states
     * are one allocation per call (64-byte aligned: the tiles load whole cache lines). */
    layout_sizes z = sizes_of(&j, peephole);
    int64_t per_dir = z.wpack + z.rpack + z.rpack_h + z.proj_bias + z.rbias_h + z.peep + z.proj +
                      z.h + z.c + z.rh + z.z;
    size_t bytes = sizeof(float) * (size_t)(per_dir * s->dirs) + 64;
    void *mem = wpk_malloc(bytes);
    if (!mem)
        return wpk_error(ctx, WPK_ERR_NOMEM, "node '%s' (%s): out of memory for %zu bytes of "
                         "scratch", n->name, n->op_type, bytes);
    float *cursor = (float *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
    for (int d = 0; d < s->dirs; d++) {
        rnn_dir *dd = &j.dir[d];
        dd->act = s->act[d];
        dd->reverse = s->reverse || d == 1;
        dd->wpack = take(&cursor, z.wpack);
        dd->rpack = take(&cursor, z.rpack);
        dd->rpack_h = take(&cursor, z.rpack_h);
        dd->proj_bias = take(&cursor, z.proj_bias);
        dd->rbias_h = take(&cursor, z.rbias_h);
        dd->peep = take(&cursor, z.peep);
        dd->proj = take(&cursor, z.proj);
        dd->h[0] = take(&cursor, z.h);
        dd->h[1] = dd->h[0] + s->batch * j.hp;
        dd->c = take(&cursor, z.c);
        dd->rh = take(&cursor, z.rh);
        dd->z = take(&cursor, z.z);
        fill_biases(&j, d, opt[RNN_IN_B]);
        fill_states(&j, d, opt, lstm_c0, peephole);
    }
    /* Y past a sequence's end is zero */
    if (j.y && j.lens) memset(j.y, 0, ir_nbytes(out[RNN_OUT_Y]));

    run_ctx c = {&j, in[RNN_IN_W], in[RNN_IN_R], step};
    int64_t work = s->batch * s->gates * s->hidden * (s->hidden + s->input);
    if (op_parallel(work, PARALLEL_STEP_WORK)) {
#pragma omp parallel
        run_team(&c, omp_get_thread_num(), omp_get_num_threads());
    } else {
        run_team(&c, 0, 1);
    }

    for (int d = 0; d < s->dirs; d++) {
        const rnn_dir *dd = &j.dir[d];
        const float *h = dd->h[s->seq & 1];
        for (int64_t b = 0; b < s->batch; b++) {
            /* an empty sequence has zero final states (ONNX Runtime's choice; the spec is
             * silent), whatever the initial ones */
            bool empty = j.lens && op_int_at(j.lens, b) == 0;
            const size_t row = sizeof(float) * (size_t)s->hidden;
            if (j.yh && empty) memset(j.yh + state_offset(&j, d, b), 0, row);
            if (j.yh && !empty) memcpy(j.yh + state_offset(&j, d, b), h + b * j.hp, row);
            if (j.yc && empty) memset(j.yc + state_offset(&j, d, b), 0, row);
            if (j.yc && !empty) memcpy(j.yc + state_offset(&j, d, b), dd->c + b * j.hp, row);
        }
    }
    wpk_free(mem);
    return WPK_OK;
}
