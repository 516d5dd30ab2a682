/* panels.c - everything drawn around and over the map: the help overlay, the legend, the
 * prefix tokens' bars, the overview's cells and labels, the side panels (top-5
 * predictions, the list, the attention distance plot, the perturbation test's curve), the
 * tooltip, the command palette and the status bar. Each records primitives (record.c); the layout
 * is render.c's. */
#include "render/internal.h"
#include "render/bar.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- the help overlay ------------------------------------------------------ */

/* How the help overlay's descriptions wrap. */
#define HELP_WRAP_EM 44 /* a description wider than this many px-sized ems wraps */
#define HELP_LINES   4  /* lines of one description, at most */

/* A help row's description as lines no wider than max_w px at size px, split between
 * words (a word wider than max_w gets a line of its own): into lines, how many. The
 * width of the widest into *w. */
static int help_lines(Ren *r, const char *str, int px, float max_w, char lines[][256], float *w) {
    int n = 0;
    *w = 0.0f;
    const char *p = str;
    while (*p && n < HELP_LINES) {
        size_t len = strlen(p), fit = len;
        if (n + 1 < HELP_LINES && ren_text_width(r, p, px) > max_w) {
            fit = 0; /* the most words that fit, at least one */
            for (size_t i = 1; i <= len; i++) {
                if (p[i] != ' ' && p[i] != '\0') continue;
                char cand[256];
                snprintf(cand, sizeof cand, "%.*s", (int)i, p);
                if (fit && ren_text_width(r, cand, px) > max_w) break;
                fit = i;
            }
        }
        snprintf(lines[n], 256, "%.*s", (int)fit, p);
        float lw = ren_text_width(r, lines[n], px);
        if (lw > *w) *w = lw;
        n++;
        p += fit;
        while (*p == ' ') p++;
    }
    return n;
}

/* The help panel's rows in `cols` columns, the first rows first: column c holds rows
 * [c * per, (c + 1) * per), per = ceil(n / cols). */
#define HELP_COLS  2
#define HELP_PAGES 4 /* at most: the rows split into this many pages before the text shrinks */

/* Size of a help panel of rows[n] at font size px in cols columns: width, height; each
 * column's key width and width. A row is 1.5 px high, and 1.2 px more per wrapped line of
 * its description; columns are 2 px apart. */
static void help_size(Ren *r, const char *(*rows)[2], int n_rows, int px, int cols, float *w,
                      float *h, float *key_w, float *col_w) {
    int per = (n_rows + cols - 1) / cols;
    float most = 0, sum_w = 0;
    for (int c = 0; c < cols; c++) {
        float kw = 0, ww = 0, height = 0;
        for (int i = c * per; i < n_rows && i < (c + 1) * per; i++) {
            const RenText *k = ren_text_get(r, rows[i][0], px);
            if (k && k->w > kw) kw = (float)k->w;
            char lines[HELP_LINES][256];
            float lw;
            int n = help_lines(r, rows[i][1], px, (float)(HELP_WRAP_EM * px), lines, &lw);
            if (lw > ww) ww = lw;
            height += 1.5f + 1.2f * (float)(n > 0 ? n - 1 : 0);
        }
        key_w[c] = kw, col_w[c] = kw + (float)px * 1.5f + ww;
        sum_w += col_w[c];
        if (height > most) most = height;
    }
    *w = (float)px * (1.2f * 2 + 2.0f * (float)(cols - 1)) + sum_w;
    *h = (float)px * (1.2f * 2 + 2.2f + most);
}

/* The key list in a panel centred on the window above y = bottom (px), opaque: in one
 * column or, when that keeps the text larger (a projector's readers at the back), two.
 * When the rows do not fit at a legible size (px * 0.7, at least 11 px; an 800x600
 * window), they go on pages (f->help_page of r->help_pages, H turns them) before the text
 * gets any smaller. A long description wraps onto lines 1.2 px apart, so that the panel
 * stays about as wide as its other rows. */
void ren_draw_help(Ren *r, const RenFrame *f, int px, float bottom) {
    float room_w = (float)r->fb_w * 0.96f, room_h = bottom * 0.94f;
    float pw, ph, key_w[HELP_COLS], col_w[HELP_COLS];
    int legible = (int)((float)px * 0.7f) < 11 ? 11 : (int)((float)px * 0.7f);
    int cols = 1, pages = 1, per_page = f->n_help;
    float best = -1.0f;
    /* the fewest pages, then the column count, that keep the text largest */
    for (int p = 1; p <= HELP_PAGES && best * (float)px < (float)legible; p++) {
        int per = (f->n_help + p - 1) / p;
        for (int c = 1; c <= HELP_COLS; c++) {
            float s = 1.0f;
            for (int i0 = 0; i0 < f->n_help; i0 += per) { /* every page must fit */
                int n = f->n_help - i0 < per ? f->n_help - i0 : per;
                help_size(r, f->help_rows + i0, n, px, c, &pw, &ph, key_w, col_w);
                s = fminf(s, fminf(room_w / pw, room_h / ph));
            }
            if (s > best + 1e-3f) best = s, cols = c, pages = p, per_page = per;
        }
    }
    r->help_pages = pages;
    int page = f->help_page < 0 ? 0 : f->help_page >= pages ? pages - 1 : f->help_page;
    int i0 = page * per_page, n_rows = f->n_help - i0 < per_page ? f->n_help - i0 : per_page;
    const char *(*rows)[2] = f->help_rows + i0;
    help_size(r, rows, n_rows, px, cols, &pw, &ph, key_w, col_w);
    /* too large for the window even so: one smaller font size that fits both ways, measured
     * again because the wrapping changes with it; never below 6 px */
    if (pw > room_w || ph > room_h) {
        float s = room_w / pw < room_h / ph ? room_w / pw : room_h / ph;
        px = (int)((float)px * s);
        if (px < 6) px = 6;
        help_size(r, rows, n_rows, px, cols, &pw, &ph, key_w, col_w);
    }
    float pad = (float)px * 1.2f, gap = (float)px * 1.5f, row_h = (float)px * 1.5f;
    float line_h = (float)px * 1.2f;
    float x = floorf(((float)r->fb_w - pw) / 2), y = floorf((bottom - ph) / 2);
    if (x < 0) x = 0;
    if (y < 0) y = 0;
    r->help_px = px;
    r->help_box[0] = (int)x, r->help_box[1] = (int)y, r->help_box[2] = (int)pw;
    r->help_box[3] = (int)ph;
    const float opaque[4] = {COL_PANEL[0], COL_PANEL[1], COL_PANEL[2], 1.0f};
    ren_fill(r, x, y, pw, ph, opaque);
    ren_fill(r, x, y, pw, roundf((float)px * 0.15f) + 1, COL_ACCENT);
    char title[96] = "vitlens \xe2\x80\x94 keys";
    if (pages > 1)
        snprintf(title, sizeof title, "vitlens \xe2\x80\x94 keys, page %d of %d (H: %s)", page + 1,
                 pages, page + 1 < pages ? "the next" : "close");
    ren_text_line(r, title, (int)((float)px * 1.3f), x + pad, y + pad, (float)px * 1.8f,
                  COL_ACCENT);
    int per = (n_rows + cols - 1) / cols;
    float cx = x + pad;
    for (int c = 0; c < cols; c++) {
        for (int i = c * per, wrapped = 0; i < n_rows && i < (c + 1) * per; i++) {
            char lines[HELP_LINES][256]; /* wrapped: extra lines above in this column */
            float lw;
            int n = help_lines(r, rows[i][1], px, (float)(HELP_WRAP_EM * px), lines, &lw);
            float ry =
                y + pad + (float)px * 2.2f + row_h * (float)(i - c * per) + line_h * (float)wrapped;
            ren_text_line(r, rows[i][0], px, cx, ry, row_h, COL_ACCENT);
            for (int j = 0; j < n; j++)
                ren_text_line(r, lines[j], px, cx + key_w[c] + gap, ry + line_h * (float)j, row_h,
                              COL_TEXT);
            wrapped += n > 0 ? n - 1 : 0;
        }
        cx += col_w[c] + (float)px * 2.0f;
    }
}

/* --- beside the map: prefix tokens, legend, overview cells ------------------ */

/* The prefix tokens' share of the row, one row each: name and percentage above
 * a bar whose full width is 100%; then what is left for the patches (the map). */
void ren_draw_prefix(Ren *r, const RenFrame *f, float x, float y, float w, float h, int font_px) {
    int n = f->n_prefix + 1, px = (int)(font_px * 0.8f);
    float row_h = floorf(h / (float)n), max_row = (float)font_px * 2.6f;
    if (row_h > max_row) row_h = max_row;
    float bar_h = roundf(row_h * 0.32f), text_h = row_h - bar_h - roundf(row_h * 0.18f);
    if (bar_h < 3 || text_h < 6) return;
    /* the patches' row is what the prefix tokens leave of the row's sum of 1 */
    double rest = 1.0;
    for (int i = 0; i < n; i++) {
        double share = i < f->n_prefix ? (double)f->prefix_share[i] : rest;
        if (i < f->n_prefix) rest -= share;
        share = share < 0 ? 0 : share > 1 ? 1 : share;
        char pct[16];
        snprintf(pct, sizeof pct, "%.0f%%", 100.0 * share);
        float ry = y + row_h * (float)i;
        const char *name = i < f->n_prefix ? f->prefix_names[i] : "patches";
        ren_text_line(r, name, px, x, ry, text_h, i < f->n_prefix ? COL_TEXT : COL_DIM);
        const RenText *t = ren_text_get(r, pct, px);
        if (t)
            ren_text_draw(r, t, x + w - (float)t->w, ry + (text_h - (float)t->h) * 0.5f, 1.0f,
                          COL_DIM);
        ren_fill(r, x, ry + text_h, w, bar_h, COL_EMPTY);
        ren_fill(r, x, ry + text_h, roundf(w * (float)share), bar_h,
                 i < f->n_prefix ? COL_ACCENT : COL_DIM);
    }
}

/* The colour bar: the colormap from the maximum (top) to the minimum, labelled. */
void ren_draw_legend(Ren *r, const RenFrame *f, float x, float y, float h, int font_px) {
    int px = (int)((float)font_px * 0.8f);
    const RenText *th = ren_text_get(r, f->legend_hi, px), *tl = ren_text_get(r, f->legend_lo, px);
    const RenText *tc = ren_text_get(r, f->legend_caption, (int)((float)px * 0.85f));
    float label_h = th ? (float)th->h : (float)px;
    float cap_h = tc ? (float)tc->h * 1.1f : 0.0f;
    float bar_w = (float)font_px * 0.8f, bar_y = y + cap_h + label_h * 1.2f;
    float bar_h = h - cap_h - label_h * 2.4f;
    if (bar_h < 20) return;
    ren_text_draw(r, tc, x, y, 1.0f, COL_DIM);
    ren_fill(r, x - 1, bar_y - 1, bar_w + 2, bar_h + 2, COL_DIM);
    ren_ramp(r, x, bar_y, bar_w, bar_h);
    ren_text_draw(r, th, x, y + cap_h, 1.0f, COL_DIM);
    ren_text_draw(r, tl, x, y + h - label_h, 1.0f, COL_DIM);
}

/* The overview: n_cols x n_rows thumbnails in (x, y, w, h), labelled. */
void ren_draw_cells(Ren *r, const RenFrame *f, float x, float y, float w, float h, int font_px) {
    int table = f->col_labels || f->row_labels;
    int lpx = (int)((float)font_px * 0.75f);
    float row_lab_w = 0, col_lab_h = 0;
    if (f->row_labels)
        for (int i = 0; i < f->n_rows; i++) {
            float tw = ren_text_width(r, f->row_labels[i], lpx) + (float)lpx * 0.6f;
            if (tw > row_lab_w) row_lab_w = tw;
        }
    if (f->col_labels) col_lab_h = (float)lpx * 1.5f;
    float gap = floorf((float)font_px * (table ? 0.15f : 0.35f)) + 1;
    /* cells at the crop's aspect ratio, as large as both directions allow */
    float aspect = r->image_h ? (float)r->image_w / (float)r->image_h : 1.0f; /* w / h */
    float room_w = (w - row_lab_w) / (float)f->n_cols - gap;
    float room_h = (h - col_lab_h) / (float)f->n_rows - gap;
    float cell_w = floorf(fminf(room_w, room_h * aspect)), cell_h = floorf(cell_w / aspect);
    if (cell_w < 4) cell_w = 4;
    if (cell_h < 4) cell_h = 4;
    float step_x = cell_w + gap, step_y = cell_h + gap;
    float gw = row_lab_w + step_x * (float)f->n_cols, gh = col_lab_h + step_y * (float)f->n_rows;
    float x0 = floorf(x + (w - gw) / 2 + row_lab_w), y0 = floorf(y + (h - gh) / 2 + col_lab_h);
    /* the grid as drawn, kept for ren_cell_at: a click or hover maps to a cell from it */
    r->cells_x = (int)x0, r->cells_y = (int)y0;
    r->cell_w_px = (int)cell_w, r->cell_h_px = (int)cell_h;
    r->cell_step_x = (int)step_x, r->cell_step_y = (int)step_y;
    r->n_cols = f->n_cols, r->n_rows = f->n_rows;
    r->col_stride = f->col_stride, r->row_stride = f->row_stride;
    r->n_cells = r->atlas_maps;
    for (int row = 0; row < f->n_rows; row++) {
        for (int col = 0; col < f->n_cols; col++) {
            /* k: the map's index in the atlas (a table's row is a layer, its column a
             * head or fusion); a grid with more cells than maps leaves the rest empty */
            int k = col * f->col_stride + row * f->row_stride;
            if (k >= r->atlas_maps) continue;
            float cx = x0 + step_x * (float)col, cy = y0 + step_y * (float)row;
            ren_heat(r, f, cx, cy, cell_w, cell_h, k, 0);
            if (k == f->selected) {
                float t = floorf((float)font_px * 0.15f) + 2;
                ren_frame_rect(r, cx, cy, cell_w, cell_h, t, COL_ACCENT);
            }
            if (!table && f->cell_labels && f->cell_labels[k]) {
                const RenText *t = ren_text_get(r, f->cell_labels[k], font_px);
                if (t) {
                    float pad = (float)font_px * 0.25f;
                    ren_fill(r, cx, cy, (float)t->w + 2 * pad, (float)t->h + pad, COL_TIP);
                    ren_text_draw(r, t, cx + pad, cy + pad * 0.5f, 1.0f, COL_TEXT);
                }
            }
        }
    }
    for (int col = 0; f->col_labels && col < f->n_cols; col++)
        if (f->col_labels[col]) {
            float tw = ren_text_width(r, f->col_labels[col], lpx);
            ren_text_line(r, f->col_labels[col], lpx, x0 + step_x * (float)col + (cell_w - tw) / 2,
                          y0 - col_lab_h, col_lab_h, COL_DIM);
        }
    if (f->col_labels && f->row_labels)
        ren_text_line(r, "layer", lpx, x0 - row_lab_w, y0 - col_lab_h, col_lab_h, COL_DIM);
    for (int row = 0; f->row_labels && row < f->n_rows; row++)
        if (f->row_labels[row])
            ren_text_line(r, f->row_labels[row], lpx, x0 - row_lab_w, y0 + step_y * (float)row,
                          cell_h, COL_DIM);
}

/* --- the side panels ------------------------------------------------------- */

/* Predictions: "top-5", then per class its name, probability and a bar. Keeps the rows'
 * position for ren_pred_at (a click picks the class to explain). Returns the height
 * drawn, px. */
static float draw_preds(Ren *r, const RenFrame *f, float x, float y, float w, int font_px) {
    float pad = (float)font_px * 0.6f, row_h = (float)font_px * 2.15f;
    float h = pad * 2 + (float)font_px * 1.6f + row_h * (float)f->n_preds;
    ren_fill(r, x, y, w, h, COL_SIDE);
    ren_text_fit(r, f->pred_title ? f->pred_title : "top-5 predictions", font_px, x + pad, y + pad,
                 (float)font_px * 1.4f, w - 2 * pad, COL_ACCENT);
    float px = (float)font_px * 0.85f;
    r->pred_y0 = (int)(y + pad + (float)font_px * 1.6f), r->pred_row_h = (int)row_h;
    r->n_pred_rows = f->n_preds;
    for (int i = 0; i < f->n_preds; i++) {
        float ry = y + pad + (float)font_px * 1.6f + row_h * (float)i;
        if (i == f->pred_marked) { /* the explained class: a frame and a bar at the left */
            float fy = ry - pad * 0.35f, fh = row_h - pad * 0.2f, t = (float)font_px * 0.12f + 1;
            ren_fill(r, x + pad * 0.3f, fy, w - pad * 0.6f, t, COL_ACCENT);
            ren_fill(r, x + pad * 0.3f, fy + fh - t, w - pad * 0.6f, t, COL_ACCENT);
            ren_fill(r, x + pad * 0.3f, fy, t, fh, COL_ACCENT);
            ren_fill(r, x + w - pad * 0.3f - t, fy, t, fh, COL_ACCENT);
        }
        char pct[32];
        snprintf(pct, sizeof pct, "%.1f%%", 100.0 * (double)f->pred_probs[i]);
        float pw = ren_text_width(r, pct, (int)px);
        ren_text_line(r, pct, (int)px, x + w - pad - pw, ry, px * 1.4f, COL_TEXT);
        ren_text_fit(r, f->pred_labels[i], (int)px, x + pad, ry, px * 1.4f, w - 3 * pad - pw,
                     i == 0 || i == f->pred_marked ? COL_TEXT : COL_DIM);
        float by = ry + px * 1.45f, bh = floorf((float)font_px * 0.38f) + 1, bw = w - 2 * pad;
        ren_fill(r, x + pad, by, bw, bh, COL_TRACK);
        float p = f->pred_probs[i] < 0 ? 0 : f->pred_probs[i] > 1 ? 1 : f->pred_probs[i];
        ren_fill(r, x + pad, by, roundf(bw * p), bh, i == 0 ? COL_ACCENT : COL_DIM);
    }
    return h;
}

/* The list panel: a title, then rows of a label, a value at the right and a thin bar
 * (values in [0, 1]); the marked row framed. As many rows as fit in max_h, around the
 * marked one. Returns the height drawn. */
static float draw_list(Ren *r, const RenFrame *f, float x, float y, float w, float max_h,
                       int font_px) {
    float pad = (float)font_px * 0.6f, px = (float)font_px * 0.8f, row_h = px * 1.75f;
    float head = pad + (float)font_px * 1.6f;
    int fit = (int)((max_h - head - pad) / row_h), n = f->n_list, first = 0;
    if (fit < 1) return 0.0f;
    /* more rows than fit: a window of them centred on the marked row, or the last rows
     * when none is marked */
    if (n > fit) {
        first = f->list_marked >= 0 ? f->list_marked - fit / 2 : n - fit;
        first = first < 0 ? 0 : first > n - fit ? n - fit : first;
        n = fit;
    }
    float h = head + row_h * (float)n + pad;
    ren_fill(r, x, y, w, h, COL_SIDE);
    ren_text_fit(r, f->list_title ? f->list_title : "", font_px, x + pad, y + pad,
                 (float)font_px * 1.4f, w - 2 * pad, COL_ACCENT);
    r->list_x = (int)x, r->list_y = (int)y, r->list_w = (int)w, r->list_h = (int)h;
    for (int k = 0; k < n; k++) {
        int i = first + k;
        float ry = y + head + row_h * (float)k;
        if (i == f->list_marked) {
            float t = (float)font_px * 0.1f + 1;
            ren_frame_rect(r, x + pad * 0.3f, ry - t, w - pad * 0.6f, row_h, t, COL_ACCENT);
        }
        const char *right = f->list_right ? f->list_right[i] : NULL;
        float rw = right ? ren_text_width(r, right, (int)px) : 0.0f;
        if (right) ren_text_line(r, right, (int)px, x + w - pad - rw, ry, px * 1.3f, COL_TEXT);
        ren_text_fit(r, f->list_labels[i], (int)px, x + pad, ry, px * 1.3f, w - 3 * pad - rw,
                     i == f->list_marked ? COL_TEXT : COL_DIM);
        float by = ry + px * 1.35f, bh = floorf((float)font_px * 0.22f) + 1, bw = w - 2 * pad;
        float v = f->list_values ? f->list_values[i] : 0.0f;
        v = v < 0 ? 0 : v > 1 ? 1 : v;
        ren_fill(r, x + pad, by, bw, bh, COL_TRACK);
        ren_fill(r, x + pad, by, roundf(bw * v), bh, i == f->list_marked ? COL_ACCENT : COL_DIM);
    }
    return h;
}

/* Mean attention distance, the ViT paper's Fig. 7: layer on x, px on y, a dot
 * per head; the current layer's heads white, the current head yellow. */
static void draw_distance(Ren *r, const RenFrame *f, float x, float y, float w, float h,
                          int font_px) {
    ren_fill(r, x, y, w, h, COL_SIDE);
    float pad = (float)font_px * 0.6f;
    int spx = (int)((float)font_px * 0.75f);
    ren_text_fit(r, "mean attention distance (px)", font_px, x + pad, y + pad,
                 (float)font_px * 1.4f, w - 2 * pad, COL_ACCENT);
    float ax_w = ren_text_width(r, "000", spx) + (float)spx * 0.5f;
    float px0 = x + pad + ax_w, py0 = y + pad + (float)font_px * 2.0f;
    float pw = w - 2 * pad - ax_w, ph = h - (py0 - y) - pad - (float)spx * 1.6f -
                                        (f->dist_caption ? (float)font_px * 1.5f : 0.0f);
    if (pw < 20 || ph < 20) return;
    int L = f->dist_layers, H = f->dist_heads;
    float ymax = f->dist_max_px > 0 ? f->dist_max_px : 1.0f;
    /* axes, the y ticks at 0, 1/2 and the top, the current layer's band */
    float step = pw / (float)L;
    ren_fill(r, px0 + step * (float)f->dist_layer, py0, step, ph, COL_TRACK);
    ren_fill(r, px0, py0 + ph, pw, 1, COL_DIM);
    ren_fill(r, px0, py0, 1, ph, COL_DIM);
    for (int t = 0; t <= 2; t++) {
        char lab[16];
        snprintf(lab, sizeof lab, "%.0f", (double)(ymax * (float)t / 2.0f));
        float ty = py0 + ph * (1.0f - (float)t / 2.0f);
        float tw = ren_text_width(r, lab, spx);
        ren_text_line(r, lab, spx, px0 - tw - (float)spx * 0.4f, ty - (float)spx, (float)spx * 2,
                      COL_DIM);
        ren_fill(r, px0 - 3, ty, 3, 1, COL_DIM);
    }
    char lab[32];
    snprintf(lab, sizeof lab, "layer 1 \xe2\x80\xa6 %d", L);
    float tw = ren_text_width(r, lab, spx);
    ren_text_line(r, lab, spx, px0 + (pw - tw) / 2, py0 + ph + 2, (float)spx * 1.5f, COL_DIM);
    /* the dots shrink with the layer's column, but no smaller than 3 px */
    float dot = floorf((float)font_px * 0.42f) + 2;
    if (dot > step * 0.9f) dot = step * 0.9f < 3 ? 3 : step * 0.9f;
    for (int pass = 0; pass < 3; pass++) /* others, then the current layer, then the head */
        for (int l = 0; l < L; l++)
            for (int hh = 0; hh < H; hh++) {
                int cur_layer = l == f->dist_layer, cur_head = cur_layer && hh == f->dist_head;
                if ((pass == 0) != !cur_layer || (pass == 2) != cur_head) continue;
                float v = f->distance[l * H + hh] / ymax;
                v = v < 0 ? 0 : v > 1 ? 1 : v;
                float cx = px0 + step * ((float)l + 0.5f), cy = py0 + ph * (1.0f - v);
                if (cur_head) {
                    ren_disc(r, cx, cy, dot * 1.9f, COL_BG);
                    ren_disc(r, cx, cy, dot * 1.6f, COL_ACCENT);
                } else {
                    ren_disc(r, cx, cy, dot, cur_layer ? COL_TEXT : COL_DOT);
                }
            }
    if (f->dist_caption)
        ren_text_fit(r, f->dist_caption, spx, x + pad, y + h - pad - (float)font_px * 1.3f,
                     (float)font_px * 1.3f, w - 2 * pad, COL_TEXT);
}

/* The plot's axes box, framebuffer px, and the curve's steps: where step s and value v
 * (clamped to [0, 1]) are drawn. */
typedef struct {
    float x, y, w, h;
    int steps;
} PlotBox;

/* x of step s in [0, steps], px. */
static float plot_x(const PlotBox *b, int s) {
    return b->x + b->w * (float)s / (float)b->steps;
}

/* y of value v, px: 1 at the top of the box, 0 at the bottom. */
static float plot_y(const PlotBox *b, float v) {
    return b->y + b->h * (1.0f - (v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v));
}

/* The perturbation test's plot (the curves of Chefer et al. 2021, §4): patches removed,
 * 0 to 100%, on x; the class probability, 0 to 1, on y. The curve up to the current step
 * with a marker there, the other order's finished curve dim behind it, a title, a
 * subtitle and a caption. */
static void draw_plot(Ren *r, const RenFrame *f, float x, float y, float w, float h, int font_px) {
    ren_fill(r, x, y, w, h, COL_SIDE);
    const float *curve = COL_CURVE[f->plot_alt ? 1 : 0];
    float pad = (float)font_px * 0.6f, line_h = (float)font_px * 1.4f, ty = y + pad;
    int spx = (int)((float)font_px * 0.75f);
    if (f->plot_title)
        ren_text_fit(r, f->plot_title, font_px, x + pad, ty, line_h, w - 2 * pad, curve);
    ty += line_h;
    if (f->plot_subtitle) {
        ren_text_fit(r, f->plot_subtitle, font_px, x + pad, ty, line_h, w - 2 * pad, COL_TEXT);
        ty += line_h;
    }
    int gpx = (int)((float)font_px * 0.8f);
    float ghost_h = f->plot_ghost_caption ? (float)gpx * 1.4f : 0.0f;
    float cap_h = (f->plot_caption ? line_h : 0.0f) + ghost_h;
    float ax_w = ren_text_width(r, "0.5", spx) + (float)spx * 0.5f;
    float half_tick = ren_text_width(r, "100%", spx) * 0.5f; /* the last x label's overhang */
    float px0 = floorf(x + pad + ax_w), py0 = floorf(ty + (float)spx);
    float pw = floorf(x + w - pad - half_tick - px0);
    float ph = floorf(y + h - pad - cap_h - (float)spx * 3.2f - py0); /* x labels, axis name */
    if (pw < 20 || ph < 20 || f->plot_steps < 1) return;
    /* the axes box as drawn, for VITLENS_TRACE: the GUI tests read the curve off the screen */
    r->plot_x = (int)px0, r->plot_y = (int)py0, r->plot_w = (int)pw, r->plot_h = (int)ph;
    for (int t = 0; t <= 2; t++) { /* probability 0, 0.5, 1: ticks, labels, grid lines */
        static const char *const lab[3] = {"0", "0.5", "1"};
        float gy = py0 + ph * (1.0f - (float)t / 2.0f);
        if (t) ren_fill(r, px0, gy, pw, 1, COL_TRACK);
        ren_fill(r, px0 - 3, gy, 3, 1, COL_DIM);
        float tw = ren_text_width(r, lab[t], spx);
        ren_text_line(r, lab[t], spx, px0 - tw - (float)spx * 0.4f, gy - (float)spx, (float)spx * 2,
                      COL_DIM);
    }
    for (int t = 0; t <= 2; t++) { /* removed 0, 50, 100% */
        static const char *const lab[3] = {"0%", "50%", "100%"};
        float gx = px0 + pw * (float)t / 2.0f, tw = ren_text_width(r, lab[t], spx);
        ren_fill(r, gx, py0 + ph, 1, 4, COL_DIM);
        ren_text_line(r, lab[t], spx, gx - tw / 2, py0 + ph + 3, (float)spx * 1.5f, COL_DIM);
    }
    const char *name = "patches removed";
    ren_text_line(r, name, spx, px0 + (pw - ren_text_width(r, name, spx)) / 2,
                  py0 + ph + 3 + (float)spx * 1.5f, (float)spx * 1.5f, COL_DIM);
    ren_fill(r, px0, py0 + ph, pw + 1, 1, COL_DIM);
    ren_fill(r, px0, py0, 1, ph, COL_DIM);
    /* the curve's line width; the other order's curve (the ghost) thinner, behind it */
    float lw = roundf((float)font_px * 0.15f);
    if (lw < 2) lw = 2;
    PlotBox b = {px0, py0, pw, ph, f->plot_steps};
    for (int s = 1; f->plot_ghost && s <= f->plot_steps; s++)
        ren_segment(r, plot_x(&b, s - 1), plot_y(&b, f->plot_ghost[s - 1]), plot_x(&b, s),
                    plot_y(&b, f->plot_ghost[s]), lw * 0.7f, COL_GHOST);
    for (int s = 1; f->plot_y && s < f->plot_n; s++)
        ren_segment(r, plot_x(&b, s - 1), plot_y(&b, f->plot_y[s - 1]), plot_x(&b, s),
                    plot_y(&b, f->plot_y[s]), lw, curve);
    if (f->plot_y && f->plot_n > 0) { /* the current step */
        float mx = plot_x(&b, f->plot_n - 1), my = plot_y(&b, f->plot_y[f->plot_n - 1]);
        ren_disc(r, mx, my, lw * 3.6f, COL_TEXT);
        ren_disc(r, mx, my, lw * 2.4f, curve);
    }
    if (f->plot_caption)
        ren_text_fit(r, f->plot_caption, font_px, x + pad, y + h - pad - cap_h, cap_h - ghost_h,
                     w - 2 * pad, COL_TEXT);
    if (f->plot_ghost_caption)
        ren_text_fit(r, f->plot_ghost_caption, gpx, x + pad, y + h - pad - ghost_h, ghost_h,
                     w - 2 * pad, COL_GHOST);
}

/* The side panels, top aligned with the main area: the predictions, then the
 * perturbation test's plot, or the list and the attention distance. */
void ren_draw_side(Ren *r, const RenFrame *f, const RenLayout *l) {
    /* the kept rectangles are cleared first: a panel not drawn this frame cannot be hit */
    r->panel_x = 0, r->panel_w = 0, r->n_pred_rows = 0, r->list_w = 0;
    r->plot_x = r->plot_y = r->plot_w = r->plot_h = 0;
    if (!(l->panel_w > 0 && r->image_w)) return;
    float panel_w = l->panel_w, margin = l->margin;
    int font_px = l->font_px;
    float px = l->ix + l->iw + (l->legend ? l->legend_gap + l->legend_w : 0.0f) + l->legend_gap;
    float py = margin, room = l->area_h;
    r->panel_x = (int)px, r->panel_w = (int)panel_w;
    if (f->n_preds > 0 || f->pred_title) { /* a title alone: the classes still to come */
        float ph = draw_preds(r, f, px, py, panel_w, font_px);
        py += ph + margin, room -= ph + margin;
    }
    if (f->plot) { /* the perturbation test: its plot instead of the list and distance */
        if (room > font_px * 8.0f) draw_plot(r, f, px, py, panel_w, room, font_px);
    } else if (f->n_list > 0 && room > font_px * 4.0f) {
        float lh = draw_list(r, f, px, py, panel_w, f->distance ? room * 0.6f : room, font_px);
        py += lh + margin, room -= lh + margin;
    }
    if (!f->plot && f->distance && room > font_px * 6.0f)
        draw_distance(r, f, px, py, panel_w, room < panel_w * 1.1f ? room : panel_w * 1.1f,
                      font_px);
}

/* --- over everything: tooltip and status bar ---------------------------------- */

/* The tooltip f->tooltip below and right of the pointer (tip_x, tip_y), flipped to its
 * left or above it where it would leave the window or cover the status bar; or above or
 * left of the point as f->tip_side asks (a control's, a menu row's). */
void ren_draw_tooltip(Ren *r, const RenFrame *f, const RenLayout *l) {
    int font_px = l->font_px, tpx = (int)((float)font_px * 0.85f);
    const RenText *t = ren_text_get(r, f->tooltip, tpx);
    if (!t) return;
    float pad = (float)tpx * 0.4f, tw = (float)t->w + 2 * pad, th = (float)t->h + pad;
    float tx = f->tip_x + (float)font_px, ty = f->tip_y + (float)font_px;
    if (tx + tw > l->W) tx = f->tip_x - tw - (float)font_px * 0.5f;
    if (f->tip_side == 1 || (f->tip_side == 0 && ty + th > l->H - l->bar_h - l->err_h))
        ty = f->tip_y - th - (float)font_px * 0.5f;
    if (f->tip_side == 2) tx = f->tip_x - tw - (float)font_px * 0.25f, ty = f->tip_y;
    tx = tx < 0 ? 0 : tx;
    ren_fill(r, tx, ty, tw, th, COL_TIP);
    ren_frame_rect(r, tx, ty, tw, th, 1, COL_DIM);
    ren_text_draw(r, t, tx + pad, ty + pad * 0.5f, 1.0f, COL_TEXT);
}

/* --- the controls' strip ------------------------------------------------------- */

/* One item of the strip or a menu in box b: a button's face (lighter under the mouse,
 * white while held down, the accent colour for the choice on screen, dark with grey text
 * when it would change nothing) with its label (centred, or from the left in a menu, its
 * hint dim at the right); a read-out just its text. Text at tpx. */
static void draw_item(Ren *r, const RenControl *c, const DlBox *b, int hover, int pressed, int tpx,
                      int left) {
    float bx = (float)b->x0, by = (float)b->y0, bw = (float)(b->x1 - b->x0);
    float bh = (float)(b->y1 - b->y0), edge = floorf((float)tpx * 0.06f) + 1;
    const float *text = COL_TEXT, *hint = COL_DIM;
    if (c->button) {
        const float *face = COL_BTN;
        if (!c->enabled)
            face = COL_SIDE, text = hint = COL_BTN_OFF;
        else if (pressed)
            face = COL_BTN_DOWN, text = hint = COL_BG;
        else if (c->active)
            face = COL_ACCENT, text = hint = COL_BG;
        else if (hover)
            face = COL_BTN_HOVER;
        ren_fill(r, bx, by, bw, bh, face);
        if (c->enabled && !c->active && !pressed) /* an edge: a button */
            ren_frame_rect(r, bx + edge, by + edge, bw - 2 * edge, bh - 2 * edge, edge,
                           COL_BTN_EDGE);
    } else if (!c->enabled) {
        text = COL_BTN_OFF;
    }
    float pad = roundf((float)tpx * 0.6f), hint_w = 0.0f;
    if (c->hint) {
        const RenText *h = ren_text_get(r, c->hint, tpx);
        if (h) {
            hint_w = (float)h->w + pad;
            ren_text_draw(r, h, bx + bw - pad - (float)h->w, floorf(by + (bh - (float)h->h) / 2),
                          1.0f, hint);
        }
    }
    const RenText *t = ren_text_get(r, c->label, tpx);
    if (!t) return;
    float room = left ? bw - 2 * pad - hint_w : bw - 2;
    float ts = (float)t->w > room ? room / (float)t->w : 1.0f;
    float tx = left ? bx + pad : bx + (bw - (float)t->w * ts) / 2;
    ren_text_draw(r, t, floorf(tx), floorf(by + (bh - (float)t->h * ts) / 2), ts, text);
}

/* An open menu (f->menu) in a column above control f->menu_of, left-aligned with it (kept
 * inside the window), as wide as its widest row, over the main area; its rows' boxes kept
 * for ren_menu_at. */
static void draw_menu(Ren *r, const RenFrame *f, const RenLayout *l, int tpx) {
    int n = f->n_menu < REN_MAX_MENU ? f->n_menu : REN_MAX_MENU;
    if (n <= 0 || f->menu_of < 0 || f->menu_of >= r->n_control_boxes) return;
    float pad = roundf((float)tpx * 0.6f), w = 0.0f;
    for (int i = 0; i < n; i++) {
        float rw = ren_text_width(r, f->menu[i].label, tpx) + 2 * pad;
        if (f->menu[i].hint) rw += ren_text_width(r, f->menu[i].hint, tpx) + 2 * pad;
        w = fmaxf(w, rw);
    }
    const DlBox *of = &r->control_box[f->menu_of];
    float x = fminf((float)of->x0, l->W - l->margin - w), gap = roundf(l->margin * 0.25f);
    x = fmaxf(x, 0.0f);
    bar_column(r->menu_box, n, x, (float)of->y0 - gap, l->margin, w, roundf(l->ctrl_h * 0.8f));
    r->n_menu_boxes = n;
    float top = (float)r->menu_box[0].y0, bottom = (float)r->menu_box[n - 1].y1;
    ren_fill(r, x - gap, top - gap, w + 2 * gap, bottom - top + 2 * gap, COL_PANEL);
    ren_frame_rect(r, x - gap, top - gap, w + 2 * gap, bottom - top + 2 * gap, 1, COL_BTN_EDGE);
    for (int i = 0; i < n; i++)
        draw_item(r, &f->menu[i], &r->menu_box[i], i == f->menu_hover, 0, tpx, 1);
}

/* The on-screen controls in the strip above the status bar, at the status line's text size
 * (they scale with the window); a row wider than the window is shrunk as a whole (bar.h);
 * then an open menu above its control. */
void ren_draw_controls(Ren *r, const RenFrame *f, const RenLayout *l) {
    r->n_control_boxes = r->n_menu_boxes = 0; /* none drawn: none can be hit */
    int n = f->n_controls < REN_MAX_CONTROLS ? f->n_controls : REN_MAX_CONTROLS;
    if (n <= 0 || l->ctrl_h <= 0) return;
    int px = l->font_px;
    float pad = roundf((float)px * 0.6f), w[REN_MAX_CONTROLS];
    int group[REN_MAX_CONTROLS];
    for (int i = 0; i < n; i++) {
        const RenControl *c = &f->controls[i];
        float tw = ren_text_width(r, c->label, px);
        if (c->sizer) tw = fmaxf(tw, ren_text_width(r, c->sizer, px));
        w[i] = tw + 2 * pad;
        if (c->button && w[i] < l->ctrl_h * 1.1f) w[i] = roundf(l->ctrl_h * 1.1f); /* "?", arrows */
        group[i] = c->group;
    }
    float s = bar_layout(r->control_box, w, group, n, l->margin, l->ctrl_y, l->W - 2 * l->margin,
                         l->ctrl_h, roundf((float)px * 0.2f), roundf((float)px * 1.1f));
    r->n_control_boxes = n;
    int tpx = s < 1.0f ? (int)((float)px * s) : px; /* a shrunk row: a smaller font, not a blur */
    for (int i = 0; i < n; i++)
        draw_item(r, &f->controls[i], &r->control_box[i], i == f->control_hover,
                  i == f->control_pressed, tpx, 0);
    draw_menu(r, f, l, tpx);
}

/* --- the command palette ---------------------------------------------------------- */

void ren_draw_palette(Ren *r, const RenFrame *f, const RenLayout *l) {
    r->n_palette_boxes = r->palette_fit = 0; /* closed: nothing to hit */
    if (!f->palette_input) return;
    /* the status line's text size, rows as high as the kinds' menu's: a projector's */
    int px = l->font_px;
    float pad = roundf((float)px * 0.6f), gap = roundf(l->margin * 0.5f);
    float row_h = roundf(l->bar_h * 0.8f), field_h = l->bar_h, edge = floorf((float)px * 0.1f) + 1;
    float pw = fminf(l->W - 2 * l->margin, roundf((float)px * 34.0f));
    float x = floorf((l->W - pw) / 2), y = l->margin;
    float bottom = (l->ctrl_h > 0 ? l->ctrl_y : l->H - l->bar_h - l->err_h) - l->margin;
    float rows_y = y + pad + field_h + gap;
    int fit = (int)floorf((bottom - rows_y - pad) / row_h);
    fit = fit < 1 ? 1 : fit > REN_MAX_PALETTE ? REN_MAX_PALETTE : fit;
    int first = f->palette_first < 0 ? 0 : f->palette_first;
    int n = f->n_palette - first < fit ? f->n_palette - first : fit;
    if (n < 0) n = 0;
    float ph = rows_y - y + row_h * (float)(n > 0 ? n : 1) + pad;
    r->palette_fit = fit, r->palette_first = first;
    r->palette_panel = (DlBox){(int)x, (int)y, (int)(x + pw), (int)(y + ph)};
    ren_fill(r, x, y, pw, ph, COL_BAR); /* opaque: the map does not show through the text */
    ren_frame_rect(r, x, y, pw, ph, 1, COL_BTN_EDGE);
    ren_fill(r, x, y, pw, roundf((float)px * 0.15f) + 1, COL_ACCENT);
    /* the field: what is typed and a caret, or a hint; the count at its right */
    float fx = x + pad, fy = y + pad, fw = pw - 2 * pad;
    ren_fill(r, fx, fy, fw, field_h, COL_SIDE);
    ren_frame_rect(r, fx, fy, fw, field_h, 2, COL_ACCENT);
    const RenText *tc = f->palette_count ? ren_text_get(r, f->palette_count, px) : NULL;
    float count_w = tc ? (float)tc->w + pad : 0.0f;
    if (tc)
        ren_text_draw(r, tc, fx + fw - pad - (float)tc->w,
                      floorf(fy + (field_h - (float)tc->h) / 2), 1.0f, COL_DIM);
    float tw = 0.0f, room = fw - 2 * pad - count_w;
    if (f->palette_input[0])
        tw = ren_text_fit(r, f->palette_input, px, fx + pad, fy, field_h, room, COL_TEXT);
    else if (f->palette_empty)
        ren_text_fit(r, f->palette_empty, px, fx + pad + edge * 3, fy, field_h, room - edge * 3,
                     COL_DIM);
    ren_fill(r, fx + pad + tw + 1, fy + field_h * 0.2f, edge + 1, field_h * 0.6f, COL_ACCENT);
    /* the rows, the selection in the accent colour (framed when it is greyed) */
    float scroll_w = f->n_palette > fit ? roundf((float)px * 0.35f) : 0.0f;
    float rw = fw - (scroll_w > 0 ? scroll_w + edge * 2 : 0.0f);
    for (int i = 0; i < n; i++) {
        DlBox *b = &r->palette_box[i];
        *b = (DlBox){(int)fx, (int)(rows_y + row_h * (float)i), (int)(fx + rw),
                     (int)(rows_y + row_h * (float)(i + 1)) - 1};
        const RenControl *c = &f->palette[first + i];
        draw_item(r, c, b, 0, 0, px, 1);
        if (c->active && !c->enabled)
            ren_frame_rect(r, (float)b->x0 + edge, (float)b->y0 + edge,
                           (float)(b->x1 - b->x0) - 2 * edge, (float)(b->y1 - b->y0) - 2 * edge,
                           edge + 1, COL_ACCENT);
    }
    r->n_palette_boxes = n;
    if (n == 0 && f->palette_none)
        ren_text_fit(r, f->palette_none, px, fx + pad, rows_y, row_h, fw - 2 * pad, COL_DIM);
    if (scroll_w > 0) { /* where the rows shown are in the whole list */
        float th = row_h * (float)n, tx = fx + fw - scroll_w;
        float t0 = th * (float)first / (float)f->n_palette;
        float t1 = th * (float)(first + n) / (float)f->n_palette;
        ren_fill(r, tx, rows_y, scroll_w, th, COL_TRACK);
        ren_fill(r, tx, rows_y + floorf(t0), scroll_w, fmaxf(2.0f, floorf(t1 - t0)), COL_DIM);
    }
}

/* The status bar at the bottom (status_left, status_right, a spinner while busy) and the
 * error bar above it when there is an error. Text wider than the bar is scaled down to
 * fit rather than cut: the whole message stays readable. */
void ren_draw_status(Ren *r, const RenFrame *f, const RenLayout *l) {
    const float W = l->W, H = l->H, bar_h = l->bar_h, err_h = l->err_h;
    int font_px = l->font_px;
    float pad = roundf(bar_h * 0.45f);
    if (err_h > 0) {
        ren_fill(r, 0, H - bar_h - err_h, W, err_h, COL_ERRBAR);
        const RenText *t = ren_text_get(r, f->error, font_px);
        if (t) {
            float s = t->w > W - 2 * pad ? (W - 2 * pad) / t->w : 1.0f;
            ren_text_draw(r, t, pad, H - bar_h - err_h + (err_h - t->h * s) / 2, s, COL_ERR);
        }
    }
    float by = H - bar_h;
    ren_fill(r, 0, by, W, bar_h, COL_BAR);
    ren_fill(r, 0, by, W, 1, COL_BG);
    if (f->input) { /* the text box: prompt, text, caret; a long text shrinks to fit */
        ren_fill(r, pad * 0.5f, by + bar_h * 0.1f, W - pad, bar_h * 0.8f, COL_SIDE);
        ren_frame_rect(r, pad * 0.5f, by + bar_h * 0.1f, W - pad, bar_h * 0.8f, 2, COL_ACCENT);
        const RenText *tp = ren_text_get(r, f->input_prompt, font_px);
        const RenText *ti = f->input[0] ? ren_text_get(r, f->input, font_px) : NULL;
        float x = pad, pw = tp ? (float)tp->w + pad * 0.5f : 0.0f;
        float tw = ti ? (float)ti->w : 0.0f, room = W - 2 * pad - pw - pad;
        float s = tw > room && tw > 0 ? room / tw : 1.0f;
        if (tp) ren_text_draw(r, tp, x, by + (bar_h - tp->h) / 2, 1.0f, COL_ACCENT);
        if (ti && f->input_selected) /* selected: the accent behind, the text dark on it */
            ren_fill(r, x + pw - 2, by + bar_h * 0.18f, tw * s + 4, bar_h * 0.64f, COL_ACCENT);
        if (ti)
            ren_text_draw(r, ti, x + pw, by + (bar_h - ti->h * s) / 2, s,
                          f->input_selected ? COL_BAR : COL_TEXT);
        ren_fill(r, x + pw + tw * s + 2, by + bar_h * 0.22f, roundf(bar_h * 0.06f) + 1,
                 bar_h * 0.56f, COL_ACCENT);
        return;
    }
    const RenText *tl = ren_text_get(r, f->status_left, font_px);
    const RenText *tr = ren_text_get(r, f->status_right, font_px);
    float spin_w = f->busy ? bar_h : 0.0f;
    float lw = tl ? (float)tl->w : 0, rw = tr ? (float)tr->w : 0;
    float room = W - 2 * pad - spin_w - (tl && tr ? pad * 2 : 0);
    float s = lw + rw > room && lw + rw > 0 ? room / (lw + rw) : 1.0f;
    if (tl) ren_text_draw(r, tl, pad, by + (bar_h - tl->h * s) / 2, s, COL_TEXT);
    if (tr)
        ren_text_draw(r, tr, W - pad - rw * s - spin_w, by + (bar_h - tr->h * s) / 2, s,
                      f->busy ? COL_ACCENT : COL_TEXT);
    if (f->busy)
        ren_spinner(r, W - pad - bar_h * 0.35f, by + bar_h / 2, bar_h * 0.26f, f->spinner_turns);
}
