/* npy.h -- reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0). */
#ifndef WPK_BASE_NPY_H
#define WPK_BASE_NPY_H

#include <stdint.h>

#include "base/context.h"

typedef struct npy_array {
    wpk_dtype dtype;
    int ndim;
    int64_t dims[WPK_MAX_DIMS];
    void *data;      /* owned: release with npy_free */
    size_t nbytes;
} npy_array;

/* Read path into *out. WPK_ERR_IO when it cannot be read, WPK_ERR_PARSE naming the file and
 * what is wrong (not an .npy, bad header, Fortran order, a dtype we do not hold, short data). */
wpk_status npy_read(wpk_context *ctx, const char *path, npy_array *out);
/* Parse an .npy image held in memory (`what` names it in messages). */
wpk_status npy_parse(wpk_context *ctx, const uint8_t *buf, size_t len, const char *what,
                     npy_array *out);
/* Write a little-endian, C-order .npy (version 1.0). WPK_ERR_IO on failure; a partly written
 * file is removed. */
wpk_status npy_write(wpk_context *ctx, const char *path, wpk_dtype dtype, int ndim,
                     const int64_t *dims, const void *data);
void npy_free(npy_array *a);

#endif
