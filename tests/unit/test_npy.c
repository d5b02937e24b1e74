/* test_npy.c -- .npy round trips and must-fail cases. */
#include <stdint.h>
#include <stdlib.h>

#include "base/npy.h"
#include "check.h"

static void roundtrip(wpk_context *ctx) {
    float data[6] = {1, -2, 3.5f, 4, 5, 6};
    int64_t dims[2] = {2, 3};
    const char *path = "build_test_roundtrip.npy";
    CHECK(npy_write(ctx, path, WPK_DTYPE_FLOAT32, 2, dims, data) == WPK_OK);
    npy_array a;
    CHECK(npy_read(ctx, path, &a) == WPK_OK);
    CHECK(a.dtype == WPK_DTYPE_FLOAT32 && a.ndim == 2 && a.dims[0] == 2 && a.dims[1] == 3);
    CHECK(a.data && memcmp(a.data, data, sizeof data) == 0);
    npy_free(&a);

    int64_t one[1] = {5};
    int64_t ints[5] = {1, 2, 3, 4, -5};
    CHECK(npy_write(ctx, path, WPK_DTYPE_INT64, 1, one, ints) == WPK_OK);
    CHECK(npy_read(ctx, path, &a) == WPK_OK);
    CHECK(a.dtype == WPK_DTYPE_INT64 && a.ndim == 1 && a.dims[0] == 5);
    CHECK(a.data && ((int64_t *)a.data)[4] == -5);
    npy_free(&a);

    float scalar = 7;
    CHECK(npy_write(ctx, path, WPK_DTYPE_FLOAT32, 0, NULL, &scalar) == WPK_OK);
    CHECK(npy_read(ctx, path, &a) == WPK_OK);
    CHECK(a.ndim == 0 && a.data && *(float *)a.data == 7);
    npy_free(&a);
    remove(path);
}

static void parse_case(wpk_context *ctx, const char *header, size_t data_len, wpk_status want,
                       const char *needle) {
    uint8_t buf[512] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    size_t hl = strlen(header);
    buf[8] = (uint8_t)hl;
    buf[9] = 0;
    memcpy(buf + 10, header, hl);
    npy_array a;
    CHECK_ERR(ctx, npy_parse(ctx, buf, 10 + hl + data_len, "x.npy", &a), want, needle);
    npy_free(&a);
}

static void must_fail(wpk_context *ctx) {
    npy_array a;
    CHECK_ERR(ctx, npy_read(ctx, "no/such/file.npy", &a), WPK_ERR_IO, "no/such/file.npy");
    const uint8_t junk[] = "this is not numpy at all";
    CHECK_ERR(ctx, npy_parse(ctx, junk, sizeof junk, "junk.npy", &a), WPK_ERR_PARSE, "bad magic");
    CHECK_ERR(ctx, npy_parse(ctx, junk, 3, "short.npy", &a), WPK_ERR_PARSE, "short.npy");
    parse_case(ctx, "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }", 4,
               WPK_ERR_PARSE, "'<u2' is not supported");
    parse_case(ctx, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8, WPK_ERR_PARSE,
               "Fortran");
    parse_case(ctx, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 8,
               WPK_ERR_PARSE, "truncated");
    parse_case(ctx, "{'descr': '<f4', 'fortran_order': False, 'shape': (x,), }", 8,
               WPK_ERR_PARSE, "shape");
    parse_case(ctx, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
               8, WPK_ERR_PARSE, "too large");
    parse_case(ctx, "{'fortran_order': False, 'shape': (2,), }", 8, WPK_ERR_PARSE, "descr");
}

int main(void) {
    wpk_context *ctx = wpk_context_create();
    roundtrip(ctx);
    must_fail(ctx);
    wpk_context_free(ctx);
    CHECK_DONE();
}
