/* report.c -- the tuning report: CSV curves per strategy and their PNG plot (see report.h). */
#include "tune/report.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/alloc.h"
#include "base/context.h"

#define MAX_PANELS 16
#define MAX_SERIES 128
#define PANEL_W 440
#define PANEL_H 290
#define LEGEND_H 40

/* ---- CSV ---- */

static wpk_status make_dir(wpk_context *ctx, const char *dir) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp)
        return wpk_error(ctx, WPK_ERR_IO, "report directory name too long: %s", dir);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        mkdir(tmp, 0755);
        *p = '/';
    }
    struct stat st;
    if ((mkdir(tmp, 0755) != 0 && errno != EEXIST) || stat(tmp, &st) != 0 || !S_ISDIR(st.st_mode))
        return wpk_error(ctx, WPK_ERR_IO, "%s: cannot create the report directory: %s", dir,
                         strerror(errno));
    return WPK_OK;
}

/* Write text to path through a temporary file and a rename: a reader never sees half. */
static wpk_status write_atomic(wpk_context *ctx, const char *path, const void *data, size_t n) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return wpk_error(ctx, WPK_ERR_IO, "%s: cannot write: %s", tmp, strerror(errno));
    bool ok = fwrite(data, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return wpk_error(ctx, WPK_ERR_IO, "%s: cannot write: %s", path, strerror(e));
    }
    return WPK_OK;
}

static void csv_curves(const tune_summary *s, strbuf *b) {
    sb_puts(b, "strategy,task,workload,nodes,flops,trial,status,seconds,gflops,best_gflops,at_s\n");
    for (int i = 0; i < s->ntasks; i++) {
        const tune_task_summary *t = &s->tasks[i];
        double best = 0;
        for (int k = 0; k < t->ncurve; k++) {
            const tune_curve_point *c = &t->curve[k];
            double g = c->status == TUNE_OK && c->median > 0 ? (double)t->flops / c->median * 1e-9
                                                             : 0;
            if (g > best) best = g;
            /* workload keys hold commas, never quotes */
            sb_printf(b, "%s,%d,\"%s\",%d,%lld,%d,%s,", s->strategy, i, t->key, t->count,
                      (long long)t->flops, k + 1, tune_status_name(c->status));
            if (c->status == TUNE_OK) sb_printf(b, "%.9g", c->median);
            sb_printf(b, ",%.4f,%.4f,", g, best);
            if (c->at_s >= 0) sb_printf(b, "%.3f", c->at_s);
            sb_puts(b, "\n");
        }
    }
}

/* ---- reading curves back ---- */

typedef struct series {
    char strategy[32];
    int panel;
    double *x, *y;
    int n, cap;
} series;

typedef struct plot {
    char workload[MAX_PANELS][160];
    int task[MAX_PANELS];
    int npanels;
    char strategies[MAX_SERIES][32];
    int nstrategies;
    series s[MAX_SERIES];
    int nseries;
    bool oom;
} plot;

/* Split a CSV line into at most max fields (quotes around a field are removed). */
static int split_csv(char *line, char **f, int max) {
    int n = 0;
    char *p = line;
    while (n < max) {
        if (*p == '"') {
            f[n++] = ++p;
            while (*p && *p != '"') p++;
            if (*p) *p++ = '\0';
        } else {
            f[n++] = p;
            while (*p && *p != ',' && *p != '\n' && *p != '\r') p++;
        }
        if (*p != ',') {
            *p = '\0';
            break;
        }
        *p++ = '\0';
    }
    return n;
}

static void add_point(plot *P, const char *strategy, int task, const char *workload, double x,
                      double y) {
    int panel = -1;
    for (int i = 0; i < P->npanels && panel < 0; i++)
        if (!strncmp(P->workload[i], workload, sizeof P->workload[i] - 1)) panel = i;
    if (panel < 0) {
        if (P->npanels == MAX_PANELS) return;
        panel = P->npanels++;
        snprintf(P->workload[panel], sizeof P->workload[panel], "%s", workload);
        P->task[panel] = task;
    }
    int k = -1;
    for (int i = 0; i < P->nstrategies && k < 0; i++)
        if (!strcmp(P->strategies[i], strategy)) k = i;
    if (k < 0 && P->nstrategies < MAX_SERIES) {
        k = P->nstrategies++;
        snprintf(P->strategies[k], sizeof P->strategies[k], "%s", strategy);
    }
    series *s = NULL;
    for (int i = 0; i < P->nseries && !s; i++)
        if (P->s[i].panel == panel && !strcmp(P->s[i].strategy, strategy)) s = &P->s[i];
    if (!s) {
        if (P->nseries == MAX_SERIES) return;
        s = &P->s[P->nseries++];
        snprintf(s->strategy, sizeof s->strategy, "%s", strategy);
        s->panel = panel;
    }
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        double *nx = wpk_realloc(s->x, sizeof *nx * (size_t)cap);
        if (nx) s->x = nx;
        double *ny = nx ? wpk_realloc(s->y, sizeof *ny * (size_t)cap) : NULL;
        if (!ny) {
            P->oom = true;
            return;
        }
        s->y = ny;
        s->cap = cap;
    }
    s->x[s->n] = x;
    s->y[s->n++] = y;
}

static void read_csv(plot *P, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[2048];
    bool header = true;
    while (fgets(line, sizeof line, f)) {
        if (header) {
            header = false;
            continue;
        }
        char *fl[12];
        if (split_csv(line, fl, 12) < 10) continue;
        add_point(P, fl[0], atoi(fl[1]), fl[2], atof(fl[5]), atof(fl[9]));
    }
    fclose(f);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static wpk_status read_all(wpk_context *ctx, const char *dir, const char *first, plot *P) {
    /* this run's strategy first, so its panels come in its task order */
    read_csv(P, first);
    DIR *d = opendir(dir);
    if (!d) return wpk_error(ctx, WPK_ERR_IO, "%s: cannot read: %s", dir, strerror(errno));
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "curves_", 7) || len < 12 || strcmp(e->d_name + len - 4, ".csv"))
            continue;
        names[n] = wpk_strdup(e->d_name);
        if (names[n]) n++;
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (strcmp(path, first)) read_csv(P, path);
        wpk_free(names[i]);
    }
    return P->oom ? wpk_error(ctx, WPK_ERR_NOMEM, "out of memory reading the curves") : WPK_OK;
}

/* ---- drawing ---- */

typedef struct canvas {
    unsigned char *px;
    int w, h;
} canvas;

static void dot(canvas *c, int x, int y, const unsigned char *rgb) {
    if (x < 0 || y < 0 || x >= c->w || y >= c->h) return;
    memcpy(c->px + 3 * ((size_t)y * (size_t)c->w + (size_t)x), rgb, 3);
}

static void rect(canvas *c, int x0, int y0, int x1, int y1, const unsigned char *rgb) {
    for (int y = y0; y <= y1; y++)
        for (int x = x0; x <= x1; x++) dot(c, x, y, rgb);
}

/* A line two pixels wide (Bresenham). */
static void line(canvas *c, int x0, int y0, int x1, int y1, const unsigned char *rgb) {
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (;;) {
        dot(c, x0, y0, rgb);
        dot(c, x0 + 1, y0, rgb);
        dot(c, x0, y0 + 1, rgb);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * err;
        if (e2 >= dy) err += dy, x0 += sx;
        if (e2 <= dx) err += dx, y0 += sy;
    }
}

/* A 5x7 font, one glyph per string, rows separated by '/' ('#' ink). */
static const struct glyph {
    char c;
    const char *rows;
} FONT[] = {
    {'0', ".###./#...#/#..##/#.#.#/##..#/#...#/.###."}, {'1', "..#../.##../..#../..#../..#../..#../.###."},
    {'2', ".###./#...#/....#/...#./..#../.#.../#####"}, {'3', "#####/...#./..#../...#./....#/#...#/.###."},
    {'4', "...#./..##./.#.#./#..#./#####/...#./...#."}, {'5', "#####/#..../####./....#/....#/#...#/.###."},
    {'6', "..##./.#.../#..../####./#...#/#...#/.###."}, {'7', "#####/....#/...#./..#../.#.../.#.../.#..."},
    {'8', ".###./#...#/#...#/.###./#...#/#...#/.###."}, {'9', ".###./#...#/#...#/.####/....#/...#./.##.."},
    {'a', "...../...../.###./....#/.####/#...#/.####"}, {'b', "#..../#..../#.##./##..#/#...#/#...#/####."},
    {'c', "...../...../.###./#..../#..../#...#/.###."}, {'d', "....#/....#/.##.#/#..##/#...#/#...#/.####"},
    {'e', "...../...../.###./#...#/#####/#..../.###."}, {'f', "..##./.#..#/.#.../###../.#.../.#.../.#..."},
    {'g', "...../.####/#...#/#...#/.####/....#/.###."}, {'h', "#..../#..../#.##./##..#/#...#/#...#/#...#"},
    {'i', "..#../...../.##../..#../..#../..#../.###."}, {'j', "...#./...../..##./...#./...#./#..#./.##.."},
    {'k', "#..../#..../#..#./#.#../##.../#.#../#..#."}, {'l', ".##../..#../..#../..#../..#../..#../.###."},
    {'m', "...../...../##.#./#.#.#/#.#.#/#...#/#...#"}, {'n', "...../...../#.##./##..#/#...#/#...#/#...#"},
    {'o', "...../...../.###./#...#/#...#/#...#/.###."}, {'p', "...../...../####./#...#/####./#..../#...."},
    {'q', "...../...../.##.#/#..##/.####/....#/....#"}, {'r', "...../...../#.##./##..#/#..../#..../#...."},
    {'s', "...../...../.###./#..../.###./....#/####."}, {'t', ".#.../.#.../###../.#.../.#.../.#..#/..##."},
    {'u', "...../...../#...#/#...#/#...#/#..##/.##.#"}, {'v', "...../...../#...#/#...#/#...#/.#.#./..#.."},
    {'w', "...../...../#...#/#...#/#.#.#/#.#.#/.#.#."}, {'x', "...../...../#...#/.#.#./..#../.#.#./#...#"},
    {'y', "...../...../#...#/#...#/.####/....#/.###."}, {'z', "...../...../#####/...#./..#../.#.../#####"},
    {'.', "...../...../...../...../...../.##../.##.."}, {',', "...../...../...../...../.##../..#../.#..."},
    {':', "...../.##../.##../...../.##../.##../....."}, {'-', "...../...../...../#####/...../...../....."},
    {'_', "...../...../...../...../...../...../#####"}, {'=', "...../...../#####/...../#####/...../....."},
    {'>', ".#.../..#../...#./....#/...#./..#../.#..."}, {'/', "...../....#/...#./..#../.#.../#..../....."},
    {'(', "...#./..#../.#.../.#.../.#.../..#../...#."}, {')', ".#.../..#../...#./...#./...#./..#../.#..."},
    {'+', "...../..#../..#../#####/..#../..#../....."}, {'%', "##.../##..#/...#./..#../.#.../#..##/...##"},
    {'#', ".#.#./.#.#./#####/.#.#./#####/.#.#./.#.#."},
};

static const char *glyph_rows(char ch) {
    if (ch >= 'A' && ch <= 'Z') ch = (char)(ch - 'A' + 'a');
    for (size_t i = 0; i < sizeof FONT / sizeof *FONT; i++)
        if (FONT[i].c == ch) return FONT[i].rows;
    return NULL; /* a blank */
}

static void text(canvas *c, int x, int y, int scale, const char *s, const unsigned char *rgb) {
    for (; *s; s++, x += 6 * scale) {
        const char *g = glyph_rows(*s);
        for (int r = 0; g && r < 7; r++)
            for (int k = 0; k < 5; k++)
                if (g[r * 6 + k] == '#')
                    rect(c, x + k * scale, y + r * scale, x + k * scale + scale - 1,
                         y + r * scale + scale - 1, rgb);
    }
}

static const unsigned char PALETTE[][3] = {
    {31, 119, 180}, {214, 39, 40}, {44, 160, 44}, {255, 127, 14},
    {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {23, 190, 207},
};
static const unsigned char BLACK[3] = {0, 0, 0}, GRID[3] = {225, 225, 225},
                           WHITE[3] = {255, 255, 255}, GREY[3] = {90, 90, 90};

static void draw_panel(canvas *c, const plot *P, int p, int ox, int oy) {
    const int left = ox + 62, right = ox + PANEL_W - 14, top = oy + 30, bottom = oy + PANEL_H - 34;
    double xmax = 1, ymax = 0;
    for (int i = 0; i < P->nseries; i++) {
        const series *s = &P->s[i];
        if (s->panel != p) continue;
        for (int k = 0; k < s->n; k++) {
            if (s->x[k] > xmax) xmax = s->x[k];
            if (s->y[k] > ymax) ymax = s->y[k];
        }
    }
    ymax = ymax > 0 ? ymax * 1.08 : 1;
    char title[96];
    snprintf(title, sizeof title, "task %d: %.56s", P->task[p], P->workload[p]);
    text(c, ox + 8, oy + 10, 1, title, BLACK);
    for (int k = 0; k <= 4; k++) {
        int y = bottom - (bottom - top) * k / 4, x = left + (right - left) * k / 4;
        line(c, left, y, right, y, GRID);
        char lab[32];
        snprintf(lab, sizeof lab, ymax >= 40 ? "%.0f" : "%.1f", ymax * k / 4);
        text(c, left - 8 - 6 * (int)strlen(lab), y - 3, 1, lab, GREY);
        snprintf(lab, sizeof lab, "%.0f", xmax * k / 4);
        text(c, x - 3 * (int)strlen(lab), bottom + 8, 1, lab, GREY);
    }
    line(c, left, top, left, bottom, BLACK);
    line(c, left, bottom, right, bottom, BLACK);
    text(c, ox + 8, top - 12 + 2, 1, "gflop/s", GREY);
    text(c, right - 6 * 6, bottom + 20, 1, "trials", GREY);
    for (int i = 0; i < P->nseries; i++) {
        const series *s = &P->s[i];
        if (s->panel != p) continue;
        int color = 0;
        for (int k = 0; k < P->nstrategies; k++)
            if (!strcmp(P->strategies[k], s->strategy)) color = k;
        const unsigned char *rgb = PALETTE[color % 8];
        int px = -1, py = -1;
        for (int k = 0; k < s->n; k++) {
            if (s->y[k] <= 0) continue;
            int x = left + (int)((right - left) * (s->x[k] / xmax));
            int y = bottom - (int)((bottom - top) * (s->y[k] / ymax));
            if (px >= 0) {
                line(c, px, py, x, py, rgb); /* best so far: a step */
                line(c, x, py, x, y, rgb);
            } else {
                rect(c, x - 1, y - 1, x + 1, y + 1, rgb);
            }
            px = x, py = y;
        }
    }
}

static wpk_status render(wpk_context *ctx, const plot *P, const char *path) {
    int n = P->npanels > 0 ? P->npanels : 1;
    int cols = 1;
    while (cols * cols < n) cols++;
    int rows = (n + cols - 1) / cols;
    canvas c = {NULL, cols * PANEL_W, LEGEND_H + rows * PANEL_H};
    c.px = wpk_malloc((size_t)c.w * (size_t)c.h * 3);
    if (!c.px) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory drawing the report");
    rect(&c, 0, 0, c.w - 1, c.h - 1, WHITE);
    int x = 12;
    text(&c, x, 12, 2, "best gflop/s vs trials:", BLACK);
    x += 24 * 12 + 12;
    for (int k = 0; k < P->nstrategies; k++) {
        rect(&c, x, 14, x + 14, 26, PALETTE[k % 8]);
        text(&c, x + 20, 12, 2, P->strategies[k], BLACK);
        x += 20 + 12 * (int)strlen(P->strategies[k]) + 24;
    }
    for (int p = 0; p < P->npanels; p++)
        draw_panel(&c, P, p, (p % cols) * PANEL_W, LEGEND_H + (p / cols) * PANEL_H);
    wpk_status st = tune_png_write(ctx, path, c.px, c.w, c.h);
    wpk_free(c.px);
    return st;
}

/* ---- PNG ---- */

static void be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

/* A chunk: length, type, data, CRC of type and data. */
static bool chunk(unsigned char **out, size_t *len, size_t *cap, const char *type,
                  const unsigned char *data, uint32_t n) {
    size_t need = *len + 12 + n;
    if (need > *cap) {
        size_t c = *cap ? *cap : 1024;
        while (c < need) c *= 2;
        unsigned char *o = wpk_realloc(*out, c);
        if (!o) return false;
        *out = o;
        *cap = c;
    }
    unsigned char *p = *out + *len;
    be32(p, n);
    memcpy(p + 4, type, 4);
    if (n) memcpy(p + 8, data, n);
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, p + 4, 4 + n);
    be32(p + 8 + n, (uint32_t)crc);
    *len = need;
    return true;
}

wpk_status tune_png_write(wpk_context *ctx, const char *path, const unsigned char *rgb, int w,
                          int h) {
    if (w < 1 || h < 1) return wpk_error(ctx, WPK_ERR_INVALID_ARG, "%s: empty image", path);
    /* each row: filter type 0 (none), then its pixels */
    size_t row = (size_t)w * 3 + 1, raw_len = row * (size_t)h;
    unsigned char *raw = wpk_malloc(raw_len);
    uLongf zlen = compressBound((uLong)raw_len);
    unsigned char *z = raw ? wpk_malloc(zlen) : NULL;
    unsigned char *out = NULL;
    size_t len = 0, cap = 0;
    wpk_status st = z ? WPK_OK : wpk_error(ctx, WPK_ERR_NOMEM, "out of memory encoding a PNG");
    if (st == WPK_OK) {
        for (int y = 0; y < h; y++) {
            raw[(size_t)y * row] = 0;
            memcpy(raw + (size_t)y * row + 1, rgb + (size_t)y * (size_t)w * 3, (size_t)w * 3);
        }
        if (compress2(z, &zlen, raw, (uLong)raw_len, 9) != Z_OK)
            st = wpk_error(ctx, WPK_ERR_INTERNAL, "%s: zlib failed to compress the image", path);
    }
    if (st == WPK_OK) {
        static const unsigned char sig[8] = {137, 'P', 'N', 'G', '\r', '\n', 26, '\n'};
        unsigned char ihdr[13];
        be32(ihdr, (uint32_t)w);
        be32(ihdr + 4, (uint32_t)h);
        ihdr[8] = 8;  /* bits per channel */
        ihdr[9] = 2;  /* RGB */
        ihdr[10] = ihdr[11] = ihdr[12] = 0; /* deflate, adaptive filters, no interlace */
        out = wpk_malloc(sizeof sig);
        if (out) memcpy(out, sig, sizeof sig), len = cap = sizeof sig;
        bool ok = out && chunk(&out, &len, &cap, "IHDR", ihdr, 13) &&
                  chunk(&out, &len, &cap, "IDAT", z, (uint32_t)zlen) &&
                  chunk(&out, &len, &cap, "IEND", NULL, 0);
        st = ok ? write_atomic(ctx, path, out, len)
                : wpk_error(ctx, WPK_ERR_NOMEM, "out of memory encoding a PNG");
    }
    wpk_free(raw);
    wpk_free(z);
    wpk_free(out);
    return st;
}

/* ---- the report ---- */

wpk_status tune_report_write(wpk_context *ctx, const char *dir, const tune_summary *s) {
    wpk_status st = make_dir(ctx, dir);
    if (st) return st;
    char csv[4200], png[4200];
    /* the strategy name goes into a file name: letters, digits, '-' and '_' only */
    char name[32];
    snprintf(name, sizeof name, "%s", s->strategy[0] ? s->strategy : "unknown");
    for (char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_'))
            *p = '_';
    snprintf(csv, sizeof csv, "%s/curves_%s.csv", dir, name);
    snprintf(png, sizeof png, "%s/curves.png", dir);
    strbuf b = {0};
    csv_curves(s, &b);
    if (b.oom) {
        sb_free(&b);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory writing the report");
    }
    st = write_atomic(ctx, csv, b.s ? b.s : "", b.len);
    sb_free(&b);
    if (st) return st;
    plot *P = wpk_calloc(1, sizeof *P);
    if (!P) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory writing the report");
    st = read_all(ctx, dir, csv, P);
    if (st == WPK_OK) st = render(ctx, P, png);
    for (int i = 0; i < P->nseries; i++) {
        wpk_free(P->s[i].x);
        wpk_free(P->s[i].y);
    }
    wpk_free(P);
    return st;
}
