/* rnn.c -- RNN (the plain recurrent op): its shape function, reference kernel and cell,
 * Ht = f(Xt Wi^T + Ht-1 Ri^T + Wbi + Rbi). The time loop, packing and input projection are
 * recurrent.c's. */
#include "ops/recurrent.h"

RNN_MULTI_ISA static void rnn_step(const rnn_job *j, int d, int64_t s, int64_t p0, int64_t p1,
                                   const rnn_team *team) {
    (void)team;
    const rnn_dir *dd = &j->dir[d];
    const float *hprev = dd->h[s & 1];
    float *hnext = dd->h[(s + 1) & 1];
    const int64_t hp = j->hp, ldp = j->panels * RNN_NB, batch = j->s.batch;
    float tile[4 * RNN_NB];
    for (int64_t p = p0; p < p1; p++)
        for (int64_t b0 = 0; b0 < batch; b0 += 4) {
            int rows = batch - b0 < 4 ? (int)(batch - b0) : 4;
            rnn_recurrent_tile(j, hprev, dd->rpack, 1, p, b0, rows, tile);
            for (int r = 0; r < rows; r++) {
                int64_t b = b0 + r, t = rnn_time_at(j, d, s, b);
                float *hn = hnext + b * hp + p * RNN_NB;
                if (t < 0) {
                    memcpy(hn, hprev + b * hp + p * RNN_NB, sizeof(float) * RNN_NB);
                    continue;
                }
                const float *pr = dd->proj + rnn_row(j, t, b) * ldp + p * RNN_NB;
                rnn_v16 pre = rnn_ld(tile + r * RNN_NB) + rnn_ld(pr);
                rnn_st(hn, rnn_act_apply(&dd->act[0], rnn_clip(pre, j->s.clip)));
                rnn_emit(j, d, t, b, p, hn);
            }
        }
}

wpk_status op_rnn_shape(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                        ir_tensor *const *out) {
    return rnn_shape(ctx, n, in, out, RNN_KIND_RNN);
}

wpk_status op_rnn_ref(wpk_context *ctx, const ir_node *n, ir_tensor *const *in,
                      ir_tensor *const *out) {
    return rnn_run(ctx, n, in, out, RNN_KIND_RNN, rnn_step);
}
