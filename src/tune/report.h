/* report.h -- the tuning report (`wpk tune --report DIR`): per strategy, best-so-far GFLOP/s
 * against trials for every task as CSV, and one PNG that plots the curves of every strategy
 * whose CSV is in DIR (run the tuner once per strategy into the same DIR to compare them).
 * The PNG is drawn here (a small rasterizer with a built-in 5x7 font) and encoded with zlib
 * (compress2 + crc32); nothing else is needed. */
#ifndef WPK_TUNE_REPORT_H
#define WPK_TUNE_REPORT_H

#include "tune/tuner.h"

/* Write DIR/curves_<strategy>.csv from s (replacing that file), then DIR/curves.png from every
 * DIR/curves_*.csv. The directory is created when missing. CSV columns: strategy, task,
 * workload, nodes, flops (of one node), trial (1-based, in record order), status, seconds (the
 * trial's median, empty unless OK), gflops, best_gflops (best so far), at_s (seconds into the
 * run when it was stored, empty for records stored before). Errors: WPK_ERR_IO naming the
 * file, WPK_ERR_NOMEM. */
wpk_status tune_report_write(wpk_context *ctx, const char *dir, const tune_summary *s);

/* Encode an RGB image (w x h, 3 bytes per pixel, rows top to bottom) as a PNG file at path
 * (written to a temporary name and renamed). WPK_ERR_IO naming the file, WPK_ERR_NOMEM. */
wpk_status tune_png_write(wpk_context *ctx, const char *path, const unsigned char *rgb, int w,
                          int h);

#endif
