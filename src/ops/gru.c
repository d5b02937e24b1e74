/* gru.c -- GRU: its shape function, reference kernel and cell. Gates in ONNX's order z, r, h;
 * linear_before_reset = 1 (PyTorch's form) takes the recurrent product of all three gates in one
 * pass, 0 needs r before the h gate's product, so its step has two phases. The time loop,
 * packing and input projection are recurrent.c's. */
#include "ops/recurrent.h"

#define W3 (3 * RNN_NB)

/* linear_before_reset = 1: h~ = g(Xt Wh^T + Wbh + r (.) (H Rh^T + Rbh)). */
RNN_MULTI_ISA static void gru_step_linear(const rnn_job *j, int d, int64_t s, int64_t p0,
                                          int64_t p1, const rnn_team *team) {
    (void)team;
    const rnn_dir *dd = &j->dir[d];
    const float *hprev = dd->h[s & 1];
    float *hnext = dd->h[(s + 1) & 1];
    const int64_t hp = j->hp, ldp = j->panels * W3, batch = j->s.batch;
    const float clip = j->s.clip;
    const rnn_act *fa = &dd->act[0], *ga = &dd->act[1];
    float tile[4 * W3];
    for (int64_t p = p0; p < p1; p++)
        for (int64_t b0 = 0; b0 < batch; b0 += 4) {
            int rows = batch - b0 < 4 ? (int)(batch - b0) : 4;
            rnn_recurrent_tile(j, hprev, dd->rpack, 3, p, b0, rows, tile);
            for (int r = 0; r < rows; r++) {
                int64_t b = b0 + r, t = rnn_time_at(j, d, s, b);
                float *hn = hnext + b * hp + p * RNN_NB;
                const float *hv = hprev + b * hp + p * RNN_NB;
                if (t < 0) {
                    memcpy(hn, hv, sizeof(float) * RNN_NB);
                    continue;
                }
                const float *pr = dd->proj + rnn_row(j, t, b) * ldp + p * W3;
                const float *g = tile + r * W3;
                rnn_v16 z = rnn_act_apply(fa, rnn_clip(rnn_ld(g) + rnn_ld(pr), clip));
                rnn_v16 rg = rnn_act_apply(
                    fa, rnn_clip(rnn_ld(g + RNN_NB) + rnn_ld(pr + RNN_NB), clip));
                rnn_v16 pre = rnn_ld(pr + 2 * RNN_NB) +
                              rg * (rnn_ld(g + 2 * RNN_NB) + rnn_ld(dd->rbias_h + p * RNN_NB));
                rnn_v16 hh = rnn_act_apply(ga, rnn_clip(pre, clip));
                rnn_st(hn, (1.0f - z) * hh + z * rnn_ld(hv));
                rnn_emit(j, d, t, b, p, hn);
            }
        }
}

/* linear_before_reset = 0: h~ = g(Xt Wh^T + (r (.) H) Rh^T + Rbh + Wbh). Phase one makes z and
 * r (.) H for this thread's panels, phase two (after every thread's r) the h gate. */
RNN_MULTI_ISA static void gru_step_reset(const rnn_job *j, int d, int64_t s, int64_t p0,
                                         int64_t p1, const rnn_team *team) {
    const rnn_dir *dd = &j->dir[d];
    const float *hprev = dd->h[s & 1];
    float *hnext = dd->h[(s + 1) & 1];
    const int64_t hp = j->hp, ldp = j->panels * W3, batch = j->s.batch;
    const float clip = j->s.clip;
    const rnn_act *fa = &dd->act[0], *ga = &dd->act[1];
    float tile[4 * 2 * RNN_NB];
    for (int64_t p = p0; p < p1; p++)
        for (int64_t b0 = 0; b0 < batch; b0 += 4) {
            int rows = batch - b0 < 4 ? (int)(batch - b0) : 4;
            rnn_recurrent_tile(j, hprev, dd->rpack, 2, p, b0, rows, tile);
            for (int r = 0; r < rows; r++) {
                int64_t b = b0 + r, t = rnn_time_at(j, d, s, b);
                if (t < 0) continue;
                const float *pr = dd->proj + rnn_row(j, t, b) * ldp + p * W3;
                const float *g = tile + r * 2 * RNN_NB;
                int64_t at = b * hp + p * RNN_NB;
                rnn_st(dd->z + at, rnn_act_apply(fa, rnn_clip(rnn_ld(g) + rnn_ld(pr), clip)));
                rnn_v16 rg = rnn_act_apply(
                    fa, rnn_clip(rnn_ld(g + RNN_NB) + rnn_ld(pr + RNN_NB), clip));
                rnn_st(dd->rh + at, rg * rnn_ld(hprev + at));
            }
        }
    rnn_team_sync(team);
    for (int64_t p = p0; p < p1; p++)
        for (int64_t b0 = 0; b0 < batch; b0 += 4) {
            int rows = batch - b0 < 4 ? (int)(batch - b0) : 4;
            rnn_recurrent_tile(j, dd->rh, dd->rpack_h, 1, p, b0, rows, tile);
            for (int r = 0; r < rows; r++) {
                int64_t b = b0 + r, t = rnn_time_at(j, d, s, b);
                int64_t at = b * hp + p * RNN_NB;
                if (t < 0) {
                    memcpy(hnext + at, hprev + at, sizeof(float) * RNN_NB);
                    continue;
                }
                const float *pr = dd->proj + rnn_row(j, t, b) * ldp + p * W3;
                rnn_v16 pre = rnn_ld(pr + 2 * RNN_NB) + rnn_ld(tile + r * RNN_NB);
                rnn_v16 hh = rnn_act_apply(ga, rnn_clip(pre, clip));
                rnn_v16 z = rnn_ld(dd->z + at);
                rnn_st(hnext + at, (1.0f - z) * hh + z * rnn_ld(hprev + at));
                rnn_emit(j, d, t, b, p, hnext + at);
            }
        }
}

wpk_status op_gru_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out) {
    return rnn_shape(ctx, n, in, out, RNN_KIND_GRU);
}

wpk_status op_gru_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                      ir_tensor *const *out) {
    bool linear = false;
    wpk_status st = op_attr_flag(ctx, n, "linear_before_reset", &linear);
    if (st) return st;
    return rnn_run(ctx, n, in, out, RNN_KIND_GRU, linear ? gru_step_linear : gru_step_reset);
}
