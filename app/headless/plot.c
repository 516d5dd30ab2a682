/* plot.c - line plots and matrix heatmaps as PNG (plot.h): lines drawn as anti-aliased
 * discs along each segment, text with export_text. */
#include "headless/plot.h"
#include "headless/export.h"
#include "render/text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Twelve colours that stay apart (Paul Tol's "muted" and "bright" schemes). */
static const uint8_t PALETTE[][3] = {
    {68, 119, 170}, {238, 102, 119}, {34, 136, 51},   {204, 187, 68},  {102, 204, 238},
    {170, 51, 119}, {136, 34, 85},   {68, 170, 153},  {153, 153, 51},  {221, 204, 119},
    {17, 119, 51},  {51, 34, 136},   {204, 102, 119}, {136, 204, 238},
};
#define N_PALETTE ((int)(sizeof PALETTE / sizeof PALETTE[0]))
/* The page, the axes and text, the grid lines, the tick labels: RGB. */
static const uint8_t BG[3] = {255, 255, 255}, INK[3] = {30, 30, 30}, GRID[3] = {225, 225, 225},
                     GREY[3] = {120, 120, 120};

/* The picture being drawn: px [h, w, 3] RGB, and the app's font (t NULL without one). */
typedef struct {
    uint8_t *px;
    int w, h;
    Text font, *t;
} Canvas;

/* A disc of radius r px at (x, y), blended by coverage: alpha falls from 1 to 0 over the
 * pixel straddling the rim, which is what anti-aliases the lines. */
static void dot(Canvas *c, float x, float y, float r, const uint8_t rgb[3]) {
    int x0 = (int)floorf(x - r - 1), x1 = (int)ceilf(x + r + 1);
    int y0 = (int)floorf(y - r - 1), y1 = (int)ceilf(y + r + 1);
    for (int yy = y0; yy <= y1; yy++)
        for (int xx = x0; xx <= x1; xx++) {
            if (xx < 0 || yy < 0 || xx >= c->w || yy >= c->h) continue;
            float d = hypotf((float)xx + 0.5f - x, (float)yy + 0.5f - y);
            float a = r + 0.5f - d;
            if (a <= 0.0f) continue;
            if (a > 1.0f) a = 1.0f;
            uint8_t *p = c->px + ((size_t)yy * c->w + xx) * 3;
            for (int k = 0; k < 3; k++) p[k] = (uint8_t)lrintf(p[k] + a * (rgb[k] - p[k]));
        }
}

/* A line of width 2r from (xa, ya) to (xb, yb); dashed: 8 px on, 6 off. */
static void line(Canvas *c, float xa, float ya, float xb, float yb, float r, int dashed,
                 const uint8_t rgb[3]) {
    /* a disc every half pixel along the segment: close enough that the edge stays smooth */
    float len = hypotf(xb - xa, yb - ya);
    int n = (int)ceilf(len * 2.0f) + 1;
    for (int i = 0; i <= n; i++) {
        float t = (float)i / (float)n, along = t * len;
        if (dashed && fmodf(along, 14.0f) > 8.0f) continue;
        dot(c, xa + t * (xb - xa), ya + t * (yb - ya), r, rgb);
    }
}

/* A filled w x h px rectangle at (x, y), clipped to the canvas, not blended. */
static void rect(Canvas *c, int x, int y, int w, int h, const uint8_t rgb[3]) {
    for (int yy = y; yy < y + h; yy++)
        for (int xx = x; xx < x + w; xx++)
            if (xx >= 0 && yy >= 0 && xx < c->w && yy < c->h) {
                uint8_t *p = c->px + ((size_t)yy * c->w + xx) * 3;
                p[0] = rgb[0], p[1] = rgb[1], p[2] = rgb[2];
            }
}

/* c as a w x h px page of BG with the font: 0, or 1 (out of memory, said on stderr naming
 * path). Then canvas_save. */
static int canvas_open(Canvas *c, int w, int h, const char *path) {
    *c = (Canvas){.px = malloc((size_t)w * h * 3), .w = w, .h = h};
    if (!c->px) {
        fprintf(stderr, "vitlens: %s: out of memory\n", path);
        return 1;
    }
    rect(c, 0, 0, w, h, BG);
    char warn[512];
    c->t = text_init(&c->font, warn, sizeof warn) == 0 ? &c->font : NULL;
    return 0;
}

/* Write c as a PNG to path and free it: 0, or 1 with the message on stderr. */
static int canvas_save(Canvas *c, const char *path) {
    if (c->t) text_free(c->t);
    char msg[600];
    int rc = 0;
    if (export_png(path, c->px, c->w, c->h, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        rc = 1;
    }
    free(c->px);
    return rc;
}

int plot_lines(const char *path, const char *title, const char *x_label, float x0, float x1,
               float y0, float y1, const PlotSeries *s, int n) {
    Canvas c;
    if (canvas_open(&c, PLOT_W_PX, PLOT_H_PX, path)) return 1;
    Text *t = c.t;
    /* the frame: left margin for the y ticks, right for the legend */
    int L = 70, R = 800, T = 50, B = c.h - 60;
    /* grid lines and tick labels at quarters of both ranges; the labels' widths are
     * guessed at 8 px a character (export_text does not measure) */
    for (int k = 0; k <= 4; k++) {
        float fy = (float)k / 4.0f;
        int y = (int)lrintf(B - fy * (B - T)), x = (int)lrintf(L + fy * (R - L));
        rect(&c, L, y, R - L, 1, GRID), rect(&c, x, T, 1, B - T, GRID);
        char lab[32];
        snprintf(lab, sizeof lab, "%g", (double)(y0 + fy * (y1 - y0)));
        export_text(c.px, c.w, c.h, t, lab, 15, L - 12 - 8 * (int)strlen(lab), y - 9, 60, GREY);
        snprintf(lab, sizeof lab, "%g", (double)(x0 + fy * (x1 - x0)));
        export_text(c.px, c.w, c.h, t, lab, 15, x - 4 * (int)strlen(lab), B + 8, 60, GREY);
    }
    rect(&c, L, T, 1, B - T, INK), rect(&c, L, B, R - L, 1, INK);
    export_text(c.px, c.w, c.h, t, title, 19, L, 14, c.w - L - 20, INK);
    export_text(c.px, c.w, c.h, t, x_label, 16, L + (R - L) / 2 - 4 * (int)strlen(x_label), B + 32,
                R - L, INK);
    /* each series: its n points spread evenly over [x0, x1], y clamped to [y0, y1], a nan
     * point breaking the line; then its legend entry on the right */
    for (int i = 0; i < n; i++) {
        const uint8_t *col = PALETTE[i % N_PALETTE];
        for (int k = 0; k + 1 < s[i].n; k++) {
            float ya = s[i].y[k], yb = s[i].y[k + 1];
            if (isnan(ya) || isnan(yb)) continue;
            ya = fminf(fmaxf(ya, y0), y1), yb = fminf(fmaxf(yb, y0), y1);
            float xa = L + (float)k / (float)(s[i].n - 1) * (R - L);
            float xb = L + (float)(k + 1) / (float)(s[i].n - 1) * (R - L);
            line(&c, xa, B - (ya - y0) / (y1 - y0) * (B - T), xb,
                 B - (yb - y0) / (y1 - y0) * (B - T), 1.4f, s[i].dashed, col);
        }
        int ly = T + 6 + i * 26;
        line(&c, (float)R + 20, (float)ly + 9, (float)R + 52, (float)ly + 9, 1.6f, s[i].dashed,
             col);
        export_text(c.px, c.w, c.h, t, s[i].name, 15, R + 60, ly, c.w - R - 66, INK);
    }
    return canvas_save(&c, path);
}

/* The diverging scale at t in [0, 1]: blue (0), white (0.5), red (1), linear in RGB
 * between Paul Tol's sunset ends. */
static void diverging(uint8_t rgb[3], double t) {
    static const uint8_t BLUE[3] = {54, 75, 154}, RED[3] = {165, 0, 38};
    const uint8_t *end = t < 0.5 ? BLUE : RED;
    double a = t < 0.5 ? 1.0 - 2.0 * t : 2.0 * t - 1.0; /* 0 white .. 1 the end */
    for (int k = 0; k < 3; k++) rgb[k] = (uint8_t)lrint(255.0 + a * (end[k] - 255.0));
}

int plot_matrix(const char *path, const char *title, const char *const *row_labels,
                const char *const *col_labels, const double *v, int n, double lo, double hi) {
    /* the cells wide enough for the longest column label at ~8 px a character (export_text
     * does not measure; it shrinks a label that would not fit), the rows' labels on the
     * left, the colour bar below */
    int cell = 96, left = 40;
    for (int i = 0; i < n; i++) {
        int cw = 8 * (int)strlen(col_labels[i]) + 12, rw = 9 * (int)strlen(row_labels[i]) + 24;
        cell = cw > cell ? (cw < 160 ? cw : 160) : cell;
        left = rw > left ? (rw < 320 ? rw : 320) : left;
    }
    int top = 90, W = left + n * cell + 40, H = top + n * cell + 110;
    if (W < 640) W = 640;
    Canvas c;
    if (canvas_open(&c, W, H, path)) return 1;
    Text *t = c.t;
    char lab[32];
    export_text(c.px, c.w, c.h, t, title, 19, 20, 14, c.w - 40, INK);
    for (int i = 0; i < n; i++) {
        export_text(c.px, c.w, c.h, t, row_labels[i], 16, 12, top + i * cell + cell / 2 - 10,
                    left - 20, INK);
        export_text(c.px, c.w, c.h, t, col_labels[i], 15,
                    left + i * cell + cell / 2 - 4 * (int)strlen(col_labels[i]), top - 28, cell - 6,
                    INK);
        for (int j = 0; j < n; j++) {
            double x = v[(size_t)i * n + j];
            uint8_t rgb[3] = {200, 200, 200};
            if (!isnan(x)) diverging(rgb, fmin(fmax((x - lo) / (hi - lo), 0.0), 1.0));
            int x0 = left + j * cell, y0 = top + i * cell;
            rect(&c, x0, y0, cell - 2, cell - 2, rgb);
            /* the number in white on a dark cell, in ink on a light one */
            int dark = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2] < 140.0;
            static const uint8_t WHITE[3] = {255, 255, 255};
            if (isnan(x))
                snprintf(lab, sizeof lab, "n/a");
            else
                snprintf(lab, sizeof lab, "%.2f", x);
            export_text(c.px, c.w, c.h, t, lab, 20, x0 + cell / 2 - 5 * (int)strlen(lab),
                        y0 + cell / 2 - 12, cell - 8, dark ? WHITE : INK);
        }
    }
    /* the colour bar: lo .. hi under the matrix */
    int by = top + n * cell + 30, bx = left, bw = n * cell - 2;
    for (int x = 0; x < bw; x++) {
        uint8_t rgb[3];
        diverging(rgb, (double)x / (bw - 1));
        rect(&c, bx + x, by, 1, 20, rgb);
    }
    for (int k = 0; k <= 4; k++) {
        snprintf(lab, sizeof lab, "%g", lo + k * (hi - lo) / 4.0);
        export_text(c.px, c.w, c.h, t, lab, 15, bx + k * (bw - 1) / 4 - 4 * (int)strlen(lab),
                    by + 26, 60, GREY);
    }
    return canvas_save(&c, path);
}
