/* plot.c - line plots as PNG (plot.h): lines drawn as anti-aliased discs along each
 * segment, text with export_text. */
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

/* The picture being drawn: px [h, w, 3] RGB. */
typedef struct {
    uint8_t *px;
    int w, h;
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

int plot_lines(const char *path, const char *title, const char *x_label, float x0, float x1,
               float y0, float y1, const PlotSeries *s, int n) {
    Canvas c = {malloc((size_t)PLOT_W_PX * PLOT_H_PX * 3), PLOT_W_PX, PLOT_H_PX};
    if (!c.px) {
        fprintf(stderr, "vitlens: %s: out of memory\n", path);
        return 1;
    }
    rect(&c, 0, 0, c.w, c.h, BG);
    Text font;
    char warn[512];
    int has_font = text_init(&font, warn, sizeof warn) == 0;
    Text *t = has_font ? &font : NULL;
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
    if (has_font) text_free(&font);
    char msg[600];
    int rc = 0;
    if (export_png(path, c.px, c.w, c.h, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        rc = 1;
    }
    free(c.px);
    return rc;
}
