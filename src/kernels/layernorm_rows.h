/* layernorm_rows.h -- LayerNormalization as both of its templates see it (layernorm.c on the
 * CPU, layernorm_cuda.c on CUDA): the node read as [rows, normalized dims...] and that view's
 * operands. A template adds its algorithm's form and its schedule. */
#ifndef WPK_KERNELS_LAYERNORM_ROWS_H
#define WPK_KERNELS_LAYERNORM_ROWS_H

#include "kernels/provider.h"

typedef struct tune_ln_rows {
    int axis;             /* the first normalized dim of x */
    int64_t rows, cols;   /* the dims before axis, and from axis on, multiplied out */
    float eps;
} tune_ln_rows;

/* Whether task t's node (float32, static shapes, Scale and B broadcasting to the normalized
 * dims, no Mean/InvStdDev outputs) is a LayerNormalization the templates take; fills g. */
bool tune_layernorm_read_task(const tune_task *t, tune_ln_rows *g);

/* x viewed as [rows, normalized dims...], Scale and B (*bias NULL when the node has none) as
 * placeholders, appended to out's arguments as its inputs. */
wpk_status tune_layernorm_operands(te_ctx *c, const tune_task *t, const tune_ln_rows *g,
                                   const char *tmpl, tune_build *out, te_tensor **x,
                                   te_tensor **scale, te_tensor **bias);

#endif
