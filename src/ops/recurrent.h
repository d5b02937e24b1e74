/* recurrent.h -- what LSTM, GRU and RNN share: reading and checking their attributes and inputs,
 * their output shapes, and the driver that runs a cell over time (weights packed into panels,
 * the input projection of every timestep as one GEMM, then per step the recurrent product and
 * the cell, threads splitting the hidden units or taking a direction each). */
#ifndef WPK_OPS_RECURRENT_H
#define WPK_OPS_RECURRENT_H

#include "ops/op_util.h"
#include "ops/recurrent_math.h"

/* Input and output positions the three ops share. */
enum { RNN_IN_X, RNN_IN_W, RNN_IN_R, RNN_IN_B, RNN_IN_LENS, RNN_IN_H0, RNN_IN_C0, RNN_IN_P };
enum { RNN_OUT_Y, RNN_OUT_YH, RNN_OUT_YC };

typedef enum rnn_kind { RNN_KIND_RNN, RNN_KIND_GRU, RNN_KIND_LSTM } rnn_kind;

/* A node's attributes and dims, checked. */
typedef struct rnn_spec {
    rnn_kind kind;
    int gates;              /* G: 1, 3 (z, r, h) or 4 (i, o, f, c) */
    int nact;               /* activations per direction: 1, 2 or 3 */
    int dirs;               /* 1 or 2 */
    bool reverse;           /* the one direction runs backwards */
    bool batch_major;       /* layout = 1 */
    bool linear_before_reset, input_forget;
    float clip;             /* INFINITY when absent */
    int64_t seq, batch, input, hidden; /* -1 where not known (shape inference) */
    rnn_act act[2][3];      /* per direction */
} rnn_spec;

/* Reads and checks attributes and input shapes of an LSTM/GRU/RNN node; WPK_ERR_MODEL naming
 * the attribute or input that is wrong, WPK_ERR_UNSUPPORTED for a dtype other than float32. */
wpk_status rnn_spec_read(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         rnn_kind kind, rnn_spec *s);

/* Shape function shared by the three ops (Y, Y_h and, for LSTM, Y_c). */
wpk_status rnn_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                     ir_tensor *const *out, rnn_kind kind);

/* One direction's working set, in the driver's scratch. Hidden units are padded to hp, a
 * multiple of RNN_NB; state rows have stride hp. */
typedef struct rnn_dir {
    const rnn_act *act;
    bool reverse;
    float *wpack;           /* W^T in panels: [panels][input][G][NB] */
    float *rpack;           /* R^T in panels: [panels][hidden][G][NB]; GRU without
                               linear_before_reset: z and r only ([..][2][NB]) */
    float *rpack_h;         /* GRU without linear_before_reset: R_h^T, [panels][hidden][NB] */
    float *proj_bias;       /* [panels][G][NB]: the biases the projection takes */
    float *rbias_h;         /* GRU with linear_before_reset: Rb_h, [hp] */
    float *peep;            /* LSTM: P as [3][hp] (i, o, f), NULL without P */
    float *proj;            /* X W^T + bias per row of X: [rows][panels][G][NB] */
    float *h[2];            /* state, [batch][hp], alternating per step */
    float *c;               /* LSTM cell state, [batch][hp] */
    float *rh, *z;          /* GRU without linear_before_reset: r (.) H and z, [batch][hp] */
} rnn_dir;

/* Everything a step needs. */
typedef struct rnn_job {
    rnn_spec s;
    int64_t panels, hp, rows; /* rows of X: seq * batch */
    const float *x;
    const ir_tensor *lens;  /* sequence_lens; NULL: every batch entry runs seq steps */
    float *y, *yh, *yc;     /* outputs, NULL when omitted */
    rnn_dir dir[2];
} rnn_job;

/* Batch entry b's timestep at step s of direction d, or -1 when its sequence has ended. */
int64_t rnn_time_at(const rnn_job *j, int d, int64_t s, int64_t b);
/* Offset of row (t, b) in X and in a direction's projection rows. */
int64_t rnn_row(const rnn_job *j, int64_t t, int64_t b);
/* Offset in Y of element (t, d, b, 0), in either layout. */
int64_t rnn_y_offset(const rnn_job *j, int64_t t, int d, int64_t b);

/* A thread's share of a step: panels [p0, p1) of direction d. `sync` waits for the threads
 * of the team (a phase boundary inside a step, GRU's r before its h); it must be called the
 * same number of times by every thread. */
typedef struct rnn_team rnn_team;
void rnn_team_sync(const rnn_team *t);
typedef void (*rnn_step_fn)(const rnn_job *j, int d, int64_t s, int64_t p0, int64_t p1,
                            const rnn_team *team);

/* Runs the node: reads spec and inputs, packs, projects, steps `step` over time and writes the
 * outputs. Allocates its scratch once per call. */
wpk_status rnn_run(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                   ir_tensor *const *out, rnn_kind kind, rnn_step_fn step);

/* The tile for rows [b0, b0 + rows) of the state times one packed panel of gc gates, into
 * tile (rows x gc x NB). */
void rnn_recurrent_tile(const rnn_job *j, const float *state, const float *rpack, int gc,
                        int64_t p, int64_t b0, int rows, float *tile);

/* Copies a panel's new hidden state h (its lanes below hidden_size) into Y at (t, d, b), when
 * Y is wanted. */
void rnn_emit(const rnn_job *j, int d, int64_t t, int64_t b, int64_t p, const float *h);

#endif
