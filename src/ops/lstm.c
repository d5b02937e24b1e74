/* lstm.c -- LSTM: its shape function, reference kernel and cell. Gates in ONNX's order i, o, f,
 * c; optional peepholes P (i, o, f), input_forget (f = 1 - i) and clip of the gate inputs. The
 * time loop, packing and input projection are recurrent.c's. */
#include "ops/recurrent.h"

/* Panels [p0, p1) of step s: the recurrent product of the gates and the cell, one pass. */
RNN_MULTI_ISA static void lstm_step(const rnn_job *j, int d, int64_t s, int64_t p0, int64_t p1,
                                    const rnn_team *team) {
    (void)team;
    const rnn_dir *dd = &j->dir[d];
    const float *hprev = dd->h[s & 1];
    float *hnext = dd->h[(s + 1) & 1];
    const int64_t hp = j->hp, ldp = j->panels * 4 * RNN_NB, batch = j->s.batch;
    const float clip = j->s.clip;
    const rnn_act *fa = &dd->act[0], *ga = &dd->act[1], *ha = &dd->act[2];
    float tile[4 * 4 * RNN_NB];
    for (int64_t p = p0; p < p1; p++)
        for (int64_t b0 = 0; b0 < batch; b0 += 4) {
            int rows = batch - b0 < 4 ? (int)(batch - b0) : 4;
            rnn_recurrent_tile(j, hprev, dd->rpack, 4, p, b0, rows, tile);
            for (int r = 0; r < rows; r++) {
                int64_t b = b0 + r, t = rnn_time_at(j, d, s, b);
                float *hn = hnext + b * hp + p * RNN_NB;
                if (t < 0) {
                    memcpy(hn, hprev + b * hp + p * RNN_NB, sizeof(float) * RNN_NB);
                    continue;
                }
                const float *pr = dd->proj + rnn_row(j, t, b) * ldp + p * 4 * RNN_NB;
                const float *g = tile + r * 4 * RNN_NB;
                rnn_v16 gi = rnn_ld(g) + rnn_ld(pr);
                rnn_v16 go = rnn_ld(g + RNN_NB) + rnn_ld(pr + RNN_NB);
                rnn_v16 gf = rnn_ld(g + 2 * RNN_NB) + rnn_ld(pr + 2 * RNN_NB);
                rnn_v16 gc = rnn_ld(g + 3 * RNN_NB) + rnn_ld(pr + 3 * RNN_NB);
                float *cp = dd->c + b * hp + p * RNN_NB;
                rnn_v16 c = rnn_ld(cp);
                if (dd->peep) {
                    gi += rnn_ld(dd->peep + p * RNN_NB) * c;
                    gf += rnn_ld(dd->peep + 2 * hp + p * RNN_NB) * c;
                }
                rnn_v16 i = rnn_act_apply(fa, rnn_clip(gi, clip));
                rnn_v16 f = j->s.input_forget ? 1.0f - i : rnn_act_apply(fa, rnn_clip(gf, clip));
                c = f * c + i * rnn_act_apply(ga, rnn_clip(gc, clip));
                rnn_st(cp, c);
                if (dd->peep) go += rnn_ld(dd->peep + hp + p * RNN_NB) * c;
                rnn_v16 o = rnn_act_apply(fa, rnn_clip(go, clip));
                rnn_st(hn, o * rnn_act_apply(ha, c));
                rnn_emit(j, d, t, b, p, hn);
            }
        }
}

wpk_status op_lstm_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                         ir_tensor *const *out) {
    return rnn_shape(ctx, n, in, out, RNN_KIND_LSTM);
}

wpk_status op_lstm_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                       ir_tensor *const *out) {
    return rnn_run(ctx, n, in, out, RNN_KIND_LSTM, lstm_step);
}
