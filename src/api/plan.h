/* plan.h -- the body of a compiled plan (.wpk) as wpk_compile writes it and sessions read it:
 * the optimized graph (ONNX bytes, wpk-domain ops included), how it was made (optimization
 * level, batch, provider, records), the input shapes it is specialized to, then the cpu
 * program (compile/plan_io.h). Internal to src/api. */
#ifndef WPK_API_PLAN_H
#define WPK_API_PLAN_H

#include "runtime/artifact.h"
#include "ir/graph.h"

typedef struct api_plan {
    uint8_t *file;          /* the whole file; everything below points into it */
    const uint8_t *graph;   /* ONNX bytes of the optimized graph (before specialization) */
    size_t graph_len;
    int opt_level, batch;
    const char *provider;   /* "" for the default choice */
    const char *records;    /* the records database the choices came from ("" none) */
    int ninputs;
    ir_tensor *shapes;      /* per graph input: dtype and dims the program was made for */
    artifact_reader program; /* positioned at the cpu program */
} api_plan;

/* Read and check the plan at path for this machine (artifact_read's errors: WPK_ERR_IO,
 * WPK_ERR_PARSE, WPK_ERR_UNSUPPORTED), up to its program. *out is the caller's
 * (api_plan_free). */
wpk_status api_plan_read(wpk_context *ctx, const char *path, api_plan *out);
void api_plan_free(api_plan *p);

#endif
