/* fuzz_model_reader.c -- libFuzzer target: any bytes given to the ONNX model reader end in a
 * graph or a status with a message, never a crash, hang, leak or sanitizer report.
 * Build: CC=clang cmake -S . -B build-fuzz -DWPK_FUZZ=ON -DWPK_SANITIZE=ON
 * Run:   build-fuzz/fuzz_model_reader -max_total_time=120 tests/fuzz/corpus */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "onnx/onnx_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static wpk_context *ctx;
    if (!ctx) ctx = wpk_context_create();
    if (!ctx) return 0;
    ir_graph *g = NULL;
    wpk_status st = onnx_import_buffer(ctx, data, size, NULL, "fuzz", &g);
    /* a failure must leave no graph and a message that names the source */
    if (st != WPK_OK && (g != NULL || strncmp(wpk_context_error(ctx), "fuzz", 4) != 0))
        __builtin_trap();
    if (st == WPK_OK && g == NULL) __builtin_trap();
    ir_graph_free(g);
    return 0;
}
