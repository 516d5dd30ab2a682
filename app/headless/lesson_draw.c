/* lesson_draw.c - the lesson's pictures: one CPU drawing per step (the PNGs of
 * --lesson-export and the window's lesson view), of the numbers lesson.c computes. See
 * lesson.h. */
#include "headless/lesson.h"
#include "headless/export.h"
#include "render/colormap.h"
#include "render/text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- drawing ---------------------------------------------------------------------- */

/* the largest cell of a strip, px: two strips and their legends fit one picture */
enum { STRIP_CELL = 26 };

static const uint8_t BG[3] = {15, 17, 21}, FG[3] = {236, 238, 241}, DIM[3] = {158, 166, 176},
                     MARK[3] = {255, 214, 0};

typedef struct {
    uint8_t *rgb;
    int w, h;
    Text *font;
} Canvas;

static void fill(Canvas *cv, int x, int y, int w, int h, const uint8_t c[3]) {
    int x0 = x < 0 ? 0 : x, x1 = x + w < cv->w ? x + w : cv->w;
    int y0 = y < 0 ? 0 : y, y1 = y + h < cv->h ? y + h : cv->h;
    if (x0 >= x1 || y0 >= y1) return;
    uint8_t *first = cv->rgb + ((size_t)y0 * cv->w + x0) * 3;
    for (int xx = x0; xx < x1; xx++) memcpy(first + (size_t)(xx - x0) * 3, c, 3);
    for (int yy = y0 + 1; yy < y1; yy++) /* the other rows: copies of the first */
        memcpy(cv->rgb + ((size_t)yy * cv->w + x0) * 3, first, (size_t)(x1 - x0) * 3);
}

static void frame(Canvas *cv, int x, int y, int w, int h, int t, const uint8_t c[3]) {
    fill(cv, x - t, y - t, w + 2 * t, t, c);
    fill(cv, x - t, y + h, w + 2 * t, t, c);
    fill(cv, x - t, y, t, h, c);
    fill(cv, x + w, y, t, h, c);
}

static void text(Canvas *cv, const char *s, int px, int x, int y, int max_w, const uint8_t c[3]) {
    export_text(cv->rgb, cv->w, cv->h, cv->font, s, px, x, y, max_w, c);
}

/* Diverging blue - white - red (ColorBrewer RdBu's ends): v in [-1, 1]. */
static void diverging(uint8_t out[3], float v) {
    static const float neg[3] = {33, 102, 172}, mid[3] = {247, 247, 247}, pos[3] = {178, 24, 43};
    if (!(v == v)) v = 0.0f;
    v = v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v;
    const float *end = v < 0.0f ? neg : pos;
    float a = fabsf(v);
    for (int i = 0; i < 3; i++) out[i] = (uint8_t)lrintf(mid[i] + a * (end[i] - mid[i]));
}

static float max_abs(const float *v, size_t n) {
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) m = fabsf(v[i]) > m ? fabsf(v[i]) : m;
    return m > 0.0f ? m : 1.0f;
}

/* A matrix v [rows, cols] as cells in the rectangle, diverging around 0 (scale: the
 * value drawn darkest), nearest sampling when there are more cells than pixels. */
static void draw_matrix(Canvas *cv, const float *v, int rows, int cols, int x, int y, int w, int h,
                        float scale) {
    int prev_r = -1;
    for (int yy = 0; yy < h && y + yy < cv->h; yy++) {
        int r = (int)((long long)yy * rows / h);
        uint8_t *row = cv->rgb + ((size_t)(y + yy) * cv->w + x) * 3;
        int n = x + w < cv->w ? w : cv->w - x;
        if (r == prev_r && n > 0) { /* the same matrix row: a copy of the line above */
            memcpy(row, row - (size_t)cv->w * 3, (size_t)n * 3);
            continue;
        }
        prev_r = r;
        for (int xx = 0; xx < n; xx++) {
            int c = (int)((long long)xx * cols / w);
            diverging(row + (size_t)xx * 3, v[(size_t)r * cols + c] / scale);
        }
    }
}

/* A vector v [n] as a strip wrapped into rows of `per_row` cells, each cell_px square. */
static int draw_strip(Canvas *cv, const float *v, int n, int x, int y, int max_w, float scale,
                      const char *label, int max_cell) {
    int per_row = n <= 32 ? n : n <= 256 ? 32 : n <= 1024 ? 64 : 128;
    int cell = max_w / per_row, rows = (n + per_row - 1) / per_row;
    if (cell > max_cell) cell = max_cell;
    if (cell < 4) cell = 4;
    if (label) text(cv, label, 26, x, y, max_w, DIM), y += 36;
    for (int i = 0; i < n; i++) {
        uint8_t px[3];
        diverging(px, v[i] / scale);
        fill(cv, x + (i % per_row) * cell, y + (i / per_row) * cell, cell - (cell > 6),
             cell - (cell > 6), px);
    }
    return y + rows * cell + 12;
}

/* The scale's legend: "-s  [bar]  +s". */
static void legend(Canvas *cv, float scale, int x, int y) {
    char buf[64];
    for (int i = 0; i < 200; i++) {
        uint8_t px[3];
        diverging(px, (i - 100) / 100.0f);
        fill(cv, x + 90 + i, y, 1, 24, px);
    }
    snprintf(buf, sizeof buf, "%+.3g", -scale);
    text(cv, buf, 22, x, y, 88, DIM);
    snprintf(buf, sizeof buf, "%+.3g", scale);
    text(cv, buf, 22, x + 300, y, 120, DIM);
}

/* The crop the model saw at (x, y), side px on its longer side, the patch grid drawn and
 * patch `mark` boxed (-1: none); map [gh, gw] in [0, 1] blended over it (colormap) when
 * not NULL. */
static void draw_photo(Canvas *cv, const LessonData *ld, int x, int y, int side, int grid,
                       const float *map, int colormap, int mark) {
    const VitConfig *c = &ld->vit->cfg;
    int S = c->image_h > c->image_w ? c->image_h : c->image_w;
    int w = side * c->image_w / S, h = side * c->image_h / S;
    uint8_t *tmp = malloc((size_t)w * h * 3);
    if (!tmp) return;
    float zero = 0.0f;
    ExportStyle st = {map ? 0.65f : 0.0f, 0.0f, colormap, 0};
    export_blend(tmp, w, w, h, ld->sc->crop_rgb, map ? map : &zero, map ? c->grid_w : 1,
                 map ? c->grid_h : 1, c, &st);
    for (int yy = 0; yy < h && y + yy < cv->h; yy++)
        memcpy(cv->rgb + ((size_t)(y + yy) * cv->w + x) * 3, tmp + (size_t)yy * w * 3,
               (size_t)w * 3);
    free(tmp);
    static const uint8_t line[3] = {255, 255, 255};
    if (grid) {
        for (int r = 1; r < c->grid_h; r++) fill(cv, x, y + r * h / c->grid_h, w, 1, line);
        for (int q = 1; q < c->grid_w; q++) fill(cv, x + q * w / c->grid_w, y, 1, h, line);
    }
    if (mark < 0) return;
    int r = mark / c->grid_w, q = mark % c->grid_w;
    frame(cv, x + q * w / c->grid_w, y + r * h / c->grid_h, w / c->grid_w, h / c->grid_h, 3, MARK);
}

/* Values over the tokens, v [T]: the patches as a map over the photo (min-max), the
 * prefix tokens as labelled cells beside it. */
static void draw_token_map(Canvas *cv, const LessonData *ld, const float *v, int x, int y, int side,
                           int signed_scale, int colormap) {
    const VitConfig *c = &ld->vit->cfg;
    int N = c->n_patches, Np = c->n_prefix;
    float *map = malloc((size_t)N * sizeof(float));
    if (!map) return;
    float lo = v[Np], hi = v[Np];
    for (int i = 0; i < N; i++)
        lo = v[Np + i] < lo ? v[Np + i] : lo, hi = v[Np + i] > hi ? v[Np + i] : hi;
    if (signed_scale) {
        float s = max_abs(v, (size_t)c->n_tokens);
        draw_matrix(cv, v + Np, c->grid_h, c->grid_w, x, y,
                    side * c->image_w / (c->image_h > c->image_w ? c->image_h : c->image_w),
                    side * c->image_h / (c->image_h > c->image_w ? c->image_h : c->image_w), s);
        legend(cv, s, x, y + side + 14);
    } else {
        for (int i = 0; i < N; i++) map[i] = hi > lo ? (v[Np + i] - lo) / (hi - lo) : 0.0f;
        draw_photo(cv, ld, x, y, side, 0, map, colormap, ld->patch);
        char buf[96];
        snprintf(buf, sizeof buf, "patches: %.3g .. %.3g", lo, hi);
        text(cv, buf, 22, x, y + side + 14, side, DIM);
    }
    free(map);
    /* the prefix tokens */
    int bx = x + side + 30;
    for (int i = 0; i < Np && i < 8; i++) {
        char name[16], buf[64];
        vit_prefix_name(name, sizeof name, c, i);
        snprintf(buf, sizeof buf, "%s  %.3g", name, v[i]);
        uint8_t px[3];
        if (signed_scale)
            diverging(px, v[i] / max_abs(v, (size_t)c->n_tokens));
        else
            memcpy(px,
                   colormap_luts[colormap]
                                [colormap_index(hi > 0 ? v[i] / (hi > v[i] ? hi : v[i]) : 0)],
                   3);
        fill(cv, bx, y + i * 50, 40, 40, px);
        text(cv, buf, 26, bx + 52, y + i * 50 + 4, 300, FG);
    }
}

/* A line from (x0, y0) to (x1, y1), t px thick (a square brush stepped along it). */
static void line(Canvas *cv, float x0, float y0, float x1, float y1, int t, const uint8_t c[3]) {
    int n = (int)ceilf(fmaxf(fabsf(x1 - x0), fabsf(y1 - y0))) + 1;
    for (int i = 0; i <= n; i++) {
        float a = (float)i / (float)n;
        fill(cv, (int)lroundf(x0 + a * (x1 - x0)) - t / 2, (int)lroundf(y0 + a * (y1 - y0)) - t / 2,
             t, t, c);
    }
}

/* The RoPE step: one dial per rotated pair (i, i + Dh/2), the query's pair before (dim)
 * and after (bright) the rotation and the key's likewise, as arrows from the dial's
 * centre (one scale for all: the largest pair); rows of dials turn with the patch's row
 * (y) then its column (x), faster frequencies first. Beside it the score of the rotated
 * query with the token's own key moved to every patch (VitLesson.rope_scores): a pattern
 * around the chosen patch that depends on the offset only. */
static void draw_rope(Canvas *cv, const LessonData *ld, int left, int top, int avail) {
    const VitConfig *c = &ld->vit->cfg;
    const VitLesson *b = &ld->blk;
    if (!c->rope) {
        text(cv,
             "No rotary position embedding: this model adds its position embedding to the "
             "tokens (the tokens step).",
             30, left, top + 100, avail, FG);
        return;
    }
    static const uint8_t Q[3] = {255, 214, 0}, QD[3] = {120, 104, 30}, K[3] = {80, 200, 255},
                         KD[3] = {40, 90, 120}, RING[3] = {60, 66, 76};
    int Dh = c->head_dim, h2 = Dh / 2, cols = 8, rows = (h2 + cols - 1) / cols;
    int cell = (560 - 40) / rows < 84 ? (560 - 40) / rows : 84;
    if (cell < 24) cell = 24;
    const float *kr = b->keys + (size_t)ld->token * Dh;
    float m = 0.0f; /* the largest pair, before or after (a rotation keeps the length) */
    for (int i = 0; i < h2; i++) {
        m = fmaxf(m, hypotf(b->query0[i], b->query0[i + h2]));
        m = fmaxf(m, hypotf(b->key0[i], b->key0[i + h2]));
    }
    if (!(m > 0.0f)) m = 1.0f;
    char buf[128];
    text(cv, "q (yellow) and k (blue): before dim, after bright", 24, left, top, cols * cell + 60,
         DIM);
    int y0 = top + 36;
    for (int i = 0; i < h2; i++) {
        int row = i / cols, col = i % cols;
        float cx = (float)(left + 40 + col * cell + cell / 2),
              cy = (float)(y0 + row * cell + cell / 2), rad = 0.42f * (float)cell;
        for (int k = 0; k < 64; k++) { /* the ring */
            float a = 6.2831853f * (float)k / 64.0f;
            fill(cv, (int)lroundf(cx + rad * cosf(a)), (int)lroundf(cy + rad * sinf(a)), 1, 1,
                 RING);
        }
        float s = rad / m; /* y up on screen */
        line(cv, cx, cy, cx + s * b->key0[i], cy - s * b->key0[i + h2], 2, KD);
        line(cv, cx, cy, cx + s * b->query0[i], cy - s * b->query0[i + h2], 2, QD);
        line(cv, cx, cy, cx + s * kr[i], cy - s * kr[i + h2], 2, K);
        line(cv, cx, cy, cx + s * b->query[i], cy - s * b->query[i + h2], 3, Q);
        if (col == 0) text(cv, i < h2 / 2 ? "y" : "x", 24, left, (int)cy - 14, 30, DIM);
    }
    int yb = y0 + rows * cell + 8;
    text(cv, "pairs: turned by the patch's row (y), then its column (x); fast to slow", 22, left,
         yb, cols * cell + 60, DIM);
    int Q4 = h2 / 2 > 0 ? h2 / 2 : 1;
    snprintf(buf, sizeof buf, "angles: y %.2f .. %.2f rad, x %.2f .. %.2f rad", b->angles[0],
             b->angles[Q4 - 1], b->angles[Q4 < h2 ? Q4 : 0], b->angles[h2 - 1]);
    text(cv, buf, 22, left, yb + 30, cols * cell + 60, DIM);
    /* the score per offset */
    int gx = left + 40 + cols * cell + 40, side = avail - (gx - left);
    side = side < 440 ? side : 440;
    int gw = c->grid_w, gh = c->grid_h, G = gh > gw ? gh : gw;
    int mw = side * gw / G, mh = side * gh / G;
    float sc = max_abs(b->rope_scores, (size_t)c->n_patches);
    text(cv, "q . k moved to each patch / sqrt(d)", 24, gx, top, side + 60, DIM);
    draw_matrix(cv, b->rope_scores, gh, gw, gx, y0, mw, mh, sc);
    int r = ld->patch / gw, q = ld->patch % gw;
    frame(cv, gx + q * mw / gw, y0 + r * mh / gh, mw / gw, mh / gh, 2, MARK);
    legend(cv, sc, gx, y0 + mh + 12);
    text(cv, "the same at every equal offset: RoPE", 22, gx, y0 + mh + 46, side + 60, DIM);
}

/* A vector v [n] as a block of cells w px wide, `cols` to a row (n a multiple of cols; else
 * a strip) and at most h_max px tall, diverging around 0 at its own largest |value|
 * (written at the label's right), under a label; returns the y below it. */
static int draw_vector(Canvas *cv, const float *v, int n, int x, int y, int w, int h_max,
                       const char *label) {
    char buf[32];
    float s = max_abs(v, (size_t)n);
    snprintf(buf, sizeof buf, "%.3g", s);
    text(cv, buf, 22, x + w - 70, y + 2, 70, DIM);
    text(cv, label, 26, x, y, w - 80, FG);
    int cols = n <= 256 ? 32 : 64;
    if (n % cols) return draw_strip(cv, v, n, x, y + 34, w, s, NULL, STRIP_CELL);
    int rows = n / cols, cell_h = h_max / rows < STRIP_CELL ? h_max / rows : STRIP_CELL;
    if (cell_h < 2) cell_h = 2;
    draw_matrix(cv, v, rows, cols, x, y + 36, w, rows * cell_h, s);
    return y + 36 + rows * cell_h + 16;
}

/* The colormap's legend: "lo [bar] hi", the bar w px. */
static void colormap_legend(Canvas *cv, int colormap, const char *lo, const char *hi, int x, int y,
                            int w) {
    for (int i = 0; i < w; i++)
        fill(cv, x + 70 + i, y, 1, 22, colormap_luts[colormap][colormap_index((float)i / (w - 1))]);
    text(cv, lo, 22, x, y - 2, 66, DIM);
    text(cv, hi, 22, x + 78 + w, y - 2, 120, DIM);
}

/* The probe step (a MAP head): left, the photo under the mean of the heads' attention;
 * middle, each head's attention over the patch grid on one scale (0 .. the largest weight of
 * any head), its largest weight and where, the lesson's head boxed; right, what the head
 * makes of it: the learned probe, the weighted sum projected, the MLP's addition and the
 * embedding with its norm. Every number is LessonData.probe's, the exported arrays'. */
static void draw_probe(Canvas *cv, const LessonData *ld, int left, int top, int avail,
                       int colormap) {
    const VitConfig *c = &ld->vit->cfg;
    const VitLessonProbe *p = &ld->probe;
    char buf[160];
    if (!ld->has_probe) {
        text(cv,
             "No attention-pooling head: this model reads a token (or the patches' mean), "
             "not a probe.",
             30, left, top + 100, avail, FG);
        return;
    }
    int H = c->n_heads, N = c->n_patches, gh = c->grid_h, gw = c->grid_w, G = gh > gw ? gh : gw;
    /* left: the photo under the mean, 0 .. its largest */
    int side = 330;
    float mx = 0.0f, *map = malloc((size_t)N * sizeof *map);
    for (int i = 0; i < N; i++) mx = ld->probe_mean[i] > mx ? ld->probe_mean[i] : mx;
    snprintf(buf, sizeof buf, "mean of the %d heads", H);
    text(cv, buf, 26, left, top, side, FG);
    if (map) {
        for (int i = 0; i < N; i++) map[i] = mx > 0.0f ? ld->probe_mean[i] / mx : 0.0f;
        draw_photo(cv, ld, left, top + 40, side, 0, map, colormap, -1);
        free(map);
    }
    int y = top + 40 + side * gh / G + 16;
    snprintf(buf, sizeof buf, "%.3g", mx);
    colormap_legend(cv, colormap, "0", buf, left, y, 160);
    text(cv, "The probe: one learned query,", 24, left, y + 44, side, FG);
    text(cv, "not a patch. Its softmax over", 24, left, y + 74, side, FG);
    snprintf(buf, sizeof buf, "the %d patches sums to 1.", N);
    text(cv, buf, 24, left, y + 104, side, FG);
    /* middle: the heads */
    int bx = left + side + 40, bw = 470, gap = 14, lab = 34;
    int cols = H <= 4 ? 2 : H <= 9 ? 3 : H <= 16 ? 4 : 6, rows = (H + cols - 1) / cols;
    int tile = (bw - (cols - 1) * gap) / cols, th = (560 - 40 - rows * (lab + gap)) / rows;
    tile = tile < th ? tile : th;
    int tw = tile * gw / G, tht = tile * gh / G;
    float top_all = 0.0f;
    for (size_t i = 0; i < (size_t)H * N; i++) top_all = p->att[i] > top_all ? p->att[i] : top_all;
    snprintf(buf, sizeof buf, "each head over the %d x %d patches (0 .. %.3g)", gh, gw, top_all);
    text(cv, buf, 26, bx, top, bw, FG);
    for (int h = 0; h < H; h++) {
        const float *a = p->att + (size_t)h * N;
        int x = bx + (h % cols) * (tile + gap), yy = top + 40 + (h / cols) * (tht + lab + gap);
        for (int r = 0; r < gh; r++)
            for (int q = 0; q < gw; q++) {
                float v = top_all > 0.0f ? a[r * gw + q] / top_all : 0.0f;
                int x0 = x + q * tw / gw, y0 = yy + r * tht / gh;
                fill(cv, x0, y0, x + (q + 1) * tw / gw - x0, yy + (r + 1) * tht / gh - y0,
                     colormap_luts[colormap][colormap_index(v)]);
            }
        int at;
        double ent;
        float w = lesson_probe_peak(a, N, &at, &ent);
        static const uint8_t PEAK[3] = {255, 255, 255};
        frame(cv, x + (at % gw) * tw / gw, yy + (at / gw) * tht / gh, tw / gw, tht / gh,
              tw / gw > 12 ? 2 : 1, PEAK);
        if (h == ld->head) frame(cv, x, yy, tw, tht, 4, MARK);
        if (tile >= 200)
            snprintf(buf, sizeof buf, "h%d  %.3f at (%d, %d)", h + 1, w, at / gw + 1, at % gw + 1);
        else /* a small tile: its number and weight, the place is the white box */
            snprintf(buf, sizeof buf, "h%d %.3f", h + 1, w);
        text(cv, buf, tile >= 200 ? 24 : 22, x, yy + tht + 6, tile + gap,
             h == ld->head ? MARK : FG);
    }
    /* right: pooled, LayerNorm + MLP, + residual -> the embedding */
    int rx = bx + bw + 30, rw = left + avail - rx, vh = 80; /* each vector's block, px */
    text(cv, "|max| of each:", 20, rx + rw - 150, top - 24, 150, DIM);
    y = draw_vector(cv, p->probe, c->dim, rx, top, rw, vh, "the probe (learned)");
    y = draw_vector(cv, p->attended, c->dim, rx, y, rw, vh, "pooled: sum a.v, out_proj");
    y = draw_vector(cv, p->mlp, c->dim, rx, y, rw, vh, "+ MLP(LayerNorm(.))");
    y = draw_vector(cv, p->embedding, c->dim, rx, y, rw, vh, "= the image embedding");
    snprintf(buf, sizeof buf, "|embedding| %.2f", lesson_norm2(p->embedding, c->dim));
    text(cv, buf, 32, rx, y + 4, rw, FG);
}

/* The photo cut into patches, the patch enlarged and its three channels' values. */
static void draw_patches(Canvas *cv, const LessonData *ld, int left, int top, int colormap) {
    const VitConfig *c = &ld->vit->cfg;
    int P = c->patch_size;
    draw_photo(cv, ld, left, top, 500, 1, NULL, colormap, ld->patch);
    text(cv, "flattened row by row, left to right", 26, left, top + 510, 500, DIM);
    /* the patch enlarged, then its three channels' normalised values */
    int x0 = left + 580, cell = 230 / P < 1 ? 1 : 230 / P;
    const VitConfig *cc = c;
    int r = ld->patch / cc->grid_w, q = ld->patch % cc->grid_w;
    for (int yy = 0; yy < P * cell; yy++)
        for (int xx = 0; xx < P * cell; xx++) {
            const uint8_t *s =
                ld->sc->crop_rgb +
                (((size_t)(r * P + yy / cell)) * cc->image_w + q * P + xx / cell) * 3;
            memcpy(cv->rgb + ((size_t)(top + yy) * cv->w + x0 + xx) * 3, s, 3);
        }
    frame(cv, x0, top, P * cell, P * cell, 3, MARK);
    float s = max_abs(ld->pixels, (size_t)3 * P * P);
    static const char *ch[3] = {"R", "G", "B"};
    int cw = 190;
    for (int k = 0; k < 3; k++) {
        draw_matrix(cv, ld->pixels + (size_t)k * P * P, P, P, x0 + k * (cw + 16), top + 300, cw, cw,
                    s);
        text(cv, ch[k], 26, x0 + k * (cw + 16), top + 300 + cw + 4, 40, FG);
    }
    legend(cv, s, x0, top + 540);
}

/* The patch embedding's first principal components, each as a P x P colour patch. */
static void draw_filters(Canvas *cv, const LessonData *ld, int left, int top) {
    int P = ld->vit->cfg.patch_size;
    int K = 3 * P * P, cols = 7, cell = 130;
    for (int i = 0; i < ld->n_filters; i++) {
        const float *f = ld->filters + (size_t)i * K;
        float lo = f[0], hi = f[0];
        for (int j = 0; j < K; j++) lo = f[j] < lo ? f[j] : lo, hi = f[j] > hi ? f[j] : hi;
        int x = left + (i % cols) * (cell + 40), y = top + (i / cols) * (cell + 16);
        for (int yy = 0; yy < cell; yy++)
            for (int xx = 0; xx < cell; xx++) {
                int py = yy * P / cell, pxx = xx * P / cell;
                uint8_t *d = cv->rgb + ((size_t)(y + yy) * cv->w + x + xx) * 3;
                for (int k = 0; k < 3; k++) {
                    float v = f[(size_t)k * P * P + py * P + pxx];
                    d[k] = (uint8_t)lrintf(hi > lo ? 255.0f * (v - lo) / (hi - lo) : 128.0f);
                }
            }
    }
}

/* Each patch's position embedding's cosine similarity with every other, one grid each. */
static void draw_position(Canvas *cv, const LessonData *ld, int left, int top) {
    const VitConfig *c = &ld->vit->cfg;
    char buf[256];
    int gh = c->grid_h, gw = c->grid_w, N = c->n_patches, side = 560;
    int cw = side / gw, chh = side / gh;
    for (int i = 0; i < N; i++)
        draw_matrix(cv, ld->pos_sim + (size_t)i * N, gh, gw, left + (i % gw) * cw,
                    top + (i / gw) * chh, cw - 1, chh - 1, 1.0f);
    int r = ld->patch / gw, q = ld->patch % gw;
    frame(cv, left + q * cw, top + r * chh, cw - 1, chh - 1, 2, MARK);
    draw_matrix(cv, ld->pos_sim + (size_t)ld->patch * N, gh, gw, left + side + 60, top, 420, 420,
                1.0f);
    snprintf(buf, sizeof buf, "patch (%d, %d)'s row", r + 1, q + 1);
    text(cv, buf, 28, left + side + 60, top + 430, 420, FG);
    legend(cv, 1.0f, left + side + 60, top + 480);
}

/* The token through the block's first LayerNorm, three rows: x (the residual stream),
 * x hat = (x - mean) / std, then gamma . x hat + beta (norm1's output), each on its own
 * scale (its legend at the right) with its own statistics beside its name, computed from
 * the row drawn (lesson_stats_label: the caption's and steps.json's too). */
static void draw_layernorm(Canvas *cv, const LessonData *ld, int left, int top, int avail) {
    const VitLesson *b = &ld->blk;
    int D = ld->vit->cfg.dim, t = ld->token;
    const float *row[3] = {b->x + (size_t)t * D, ld->xhat, b->xn1 + (size_t)t * D};
    static const char *name[3] = {"x (the residual stream)", "x̂ = (x - mean) / std",
                                  "γ·x̂ + β (LayerNorm's output)"};
    int per_row = D <= 32 ? D : D <= 256 ? 32 : D <= 1024 ? 64 : 128;
    int rows = (D + per_row - 1) / per_row, cell = 110 / rows; /* three rows fit */
    cell = cell > STRIP_CELL ? STRIP_CELL : cell < 4 ? 4 : cell;
    char buf[64];
    int y = top;
    for (int k = 0; k < 3; k++) {
        float s = max_abs(row[k], (size_t)D);
        text(cv, name[k], 26, left, y + 4, 390, k == 1 ? MARK : FG);
        lesson_stats_label(buf, sizeof buf, row[k], D);
        text(cv, buf, 30, left + 400, y, 380, FG);
        legend(cv, s, left + avail - 390, y + 4);
        y = draw_strip(cv, row[k], D, left, y + 40, avail, s, NULL, cell) + 14;
    }
}

/* A residual add (step: LESSON_RESIDUAL1 or 2): the token before and after, their norms. */
static void draw_residual(Canvas *cv, const LessonData *ld, int step, int left, int top,
                          int avail) {
    const VitLesson *b = &ld->blk;
    int D = ld->vit->cfg.dim, t = ld->token;
    char buf[256];
    const float *in = step == LESSON_RESIDUAL1 ? b->x : b->xm,
                *o = step == LESSON_RESIDUAL1 ? b->xm : b->out;
    float s = max_abs(o + (size_t)t * D, (size_t)D);
    int y = draw_strip(cv, in + (size_t)t * D, D, left, top, avail, s, "before", STRIP_CELL);
    y = draw_strip(cv, o + (size_t)t * D, D, left, y + 20, avail, s, "after the add", STRIP_CELL);
    legend(cv, s, left, y);
    snprintf(buf, sizeof buf, "norm %.2f -> %.2f",
             step == LESSON_RESIDUAL1 ? b->norm_in : b->norm_mid,
             step == LESSON_RESIDUAL1 ? b->norm_mid : b->norm_out);
    text(cv, buf, 40, left + 500, y, 700, FG);
}

/* The MLP's hidden units after the activation, and the share that pass. */
static void draw_mlp(Canvas *cv, const LessonData *ld, int left, int top, int avail) {
    const VitConfig *c = &ld->vit->cfg;
    const VitLesson *b = &ld->blk;
    int t = ld->token;
    char buf[256];
    const float *hh = b->hid + (size_t)t * c->mlp_dim;
    float s = max_abs(hh, (size_t)c->mlp_dim);
    char what[64];
    snprintf(what, sizeof what, "%s(fc1(LayerNorm(x)))", vit_activation_name(c->mlp_act));
    int y = draw_strip(cv, hh, c->mlp_dim, left, top, avail, s, what, STRIP_CELL);
    legend(cv, s, left, y);
    snprintf(buf, sizeof buf, "%.0f%% of the hidden units pass", 100.0 * b->gelu_share);
    text(cv, buf, 40, left + 500, y, 700, FG);
}

/* The head: the pooled token's LayerNorm, then the top classes' probabilities. */
static void draw_head(Canvas *cv, const LessonData *ld, int left, int top, int avail,
                      int colormap) {
    const VitConfig *c = &ld->vit->cfg;
    int D = c->dim;
    char buf[256];
    if (!ld->has_head) {
        text(cv, ld->head_msg, 32, left, top + 100, avail, FG);
        return;
    }
    float s = max_abs(ld->cls_norm, (size_t)D);
    int y = draw_strip(cv, ld->cls_norm, D, left, top, avail, s,
                       c->head_pool == VIT_POOL_MAP ? "the pooling head's output (the embedding)"
                                                    : "LayerNorm of the CLS token",
                       STRIP_CELL);
    legend(cv, s, left, y);
    y += 50;
    int k = c->n_classes < LESSON_TOP ? c->n_classes : LESSON_TOP;
    for (int i = 0; i < k; i++) {
        int cls = ld->top[i];
        float p = ld->sc->run.probs[cls];
        fill(cv, left, y + i * 52, (int)(p * 500), 40, colormap_luts[colormap][200]);
        snprintf(buf, sizeof buf, "%.1f%%  %s  (logit %.2f)", 100.0 * p,
                 ld->labels ? ld->labels[cls] : "", ld->sc->run.logits[cls]);
        if (!ld->labels)
            snprintf(buf, sizeof buf, "%.1f%%  class %d  (logit %.2f)", 100.0 * p, cls,
                     ld->sc->run.logits[cls]);
        text(cv, buf, 32, left + 520, y + i * 52 + 2, avail - 520, FG);
    }
}

static void draw_step(Canvas *cv, const LessonData *ld, int step, int colormap) {
    const VitConfig *c = &ld->vit->cfg;
    const VitLesson *b = &ld->blk;
    int D = c->dim, Dh = c->head_dim, T = c->n_tokens, t = ld->token,
        A = vit_att_width(c); /* ctx: the heads side by side */
    int top = 90, left = 40, avail = cv->w - 80;
    char buf[256];
    switch (step) {
    case LESSON_PATCHES: draw_patches(cv, ld, left, top, colormap); break;
    case LESSON_EMBEDDING: {
        draw_photo(cv, ld, left, top, 240, 1, NULL, colormap, ld->patch);
        float s = max_abs(ld->embedding, (size_t)D);
        int y = draw_strip(cv, ld->embedding, D, left + 280, top, avail - 280, s,
                           "embedding of the patch", STRIP_CELL);
        legend(cv, s, left + 280, y + 10);
        break;
    }
    case LESSON_FILTERS: draw_filters(cv, ld, left, top); break;
    case LESSON_TOKENS: {
        const float *x0 = ld->sc->run.tokens;
        float s = max_abs(x0, (size_t)T * D);
        draw_matrix(cv, x0, T, D, left + 100, top, avail - 140, 500, s);
        text(cv, "CLS", 26, left, top, 90, MARK);
        snprintf(buf, sizeof buf, "%d tokens", T);
        text(cv, buf, 24, left, top + 260, 95, DIM);
        snprintf(buf, sizeof buf, "%d numbers each", D);
        text(cv, buf, 24, left + 100, top + 512, 400, DIM);
        legend(cv, s, left + 600, top + 512);
        break;
    }
    case LESSON_POSITION: draw_position(cv, ld, left, top); break;
    case LESSON_LAYERNORM: draw_layernorm(cv, ld, left, top, avail); break;
    case LESSON_QUERY: {
        float s = max_abs(b->query, (size_t)Dh);
        int y = draw_strip(cv, b->query, Dh, left, top + 60, avail, s, "q", STRIP_CELL);
        legend(cv, s, left, y);
        break;
    }
    case LESSON_KEYS: {
        float s = max_abs(b->keys, (size_t)T * Dh);
        draw_matrix(cv, b->keys, T, Dh, left + 100, top, 600, 500, s);
        text(cv, "k_1 (CLS)", 24, left, top, 95, MARK);
        legend(cv, s, left + 100, top + 512);
        float sq = max_abs(b->query, (size_t)Dh);
        text(cv, "q", 26, left + 760, top, 40, FG);
        draw_matrix(cv, b->query, 1, Dh, left + 760, top + 40, 440, 40, sq);
        break;
    }
    case LESSON_ROPE: draw_rope(cv, ld, left, top, avail); break;
    case LESSON_SCORES: draw_token_map(cv, ld, b->scores, left, top, 520, 1, colormap); break;
    case LESSON_SOFTMAX: draw_token_map(cv, ld, b->probs, left, top, 520, 0, colormap); break;
    case LESSON_WEIGHTED: {
        float s = max_abs(b->values, (size_t)T * Dh);
        draw_matrix(cv, b->values, T, Dh, left + 100, top, 500, 500, s);
        text(cv, "values", 24, left, top, 95, DIM);
        legend(cv, s, left + 100, top + 510);
        const float *o = b->ctx + (size_t)t * A + (size_t)ld->head * Dh;
        float so = max_abs(o, (size_t)Dh);
        int y =
            draw_strip(cv, o, Dh, left + 660, top, avail - 660, so, "softmax . values", STRIP_CELL);
        legend(cv, so, left + 660, y);
        break;
    }
    case LESSON_PROJECTION: {
        const float *cc = b->ctx + (size_t)t * A, *p = b->proj + (size_t)t * D;
        float s = max_abs(cc, (size_t)A), s2 = max_abs(p, (size_t)D);
        int y = draw_strip(cv, cc, A, left, top, avail, s, "heads side by side", STRIP_CELL);
        legend(cv, s, left, y);
        y = draw_strip(cv, p, D, left, y + 50, avail, s2, "projected", STRIP_CELL);
        legend(cv, s2, left, y);
        break;
    }
    case LESSON_RESIDUAL1:
    case LESSON_RESIDUAL2: draw_residual(cv, ld, step, left, top, avail); break;
    case LESSON_MLP: draw_mlp(cv, ld, left, top, avail); break;
    case LESSON_MLP_OUT: {
        const float *m = b->mlp + (size_t)t * D;
        float s = max_abs(m, (size_t)D);
        int y = draw_strip(cv, m, D, left, top, avail, s, "fc2(...)", STRIP_CELL);
        legend(cv, s, left, y);
        break;
    }
    case LESSON_PROBE: draw_probe(cv, ld, left, top, avail, colormap); break;
    case LESSON_HEAD: draw_head(cv, ld, left, top, avail, colormap); break;
    }
}

void lesson_draw(uint8_t *rgb, int w, int h, Text *font, const LessonData *ld, int step,
                 int n_steps, int step_index, const char *caption, int colormap) {
    Canvas cv = {rgb, w, h, font};
    fill(&cv, 0, 0, w, h, BG);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", LESSON_STEP_INFO[step].title);
    text(&cv, buf, 44, 40, 18, w - 360, FG);
    snprintf(buf, sizeof buf, "step %d of %d", step_index + 1, n_steps);
    text(&cv, buf, 30, w - 260, 26, 240, DIM);
    draw_step(&cv, ld, step, colormap);
    if (!caption) {
        lesson_caption(buf, sizeof buf, ld, step);
        caption = buf;
    }
    fill(&cv, 0, h - 64, w, 64, BG);
    text(&cv, caption, 30, 40, h - 52, w - 80, FG);
}
