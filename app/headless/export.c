/* export.c - headless --top and --export. */
#include "headless/export.h"
#include "config/files.h"
#include "render/colormap.h"
#include "view/maps.h"
#include "headless/npy.h"
#include "render/text.h"

#include <zlib.h>

/* PNG's deflate through zlib: stb_image_write's own compressor took 37% of an --export's time
 * (perf, the built-in model's 103 PNGs) and most of its run under valgrind. `data` [len] bytes
 * in, a malloc'd zlib stream out (stb frees it), NULL when zlib fails. zlib's default level
 * (6) whatever stb's `quality` (its own scale): about stb's size, at a fraction of the time. */
static unsigned char *png_deflate(unsigned char *data, int len, int *out_len, int quality) {
    (void)quality;
    uLongf n = compressBound((uLong)len);
    unsigned char *out = malloc(n);
    if (!out || compress2(out, &n, data, (uLong)len, Z_DEFAULT_COMPRESSION) != Z_OK) {
        free(out);
        return NULL;
    }
    *out_len = (int)n;
    return out;
}
#define STBIW_ZLIB_COMPRESS png_deflate
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* --- top-K ----------------------------------------------------------------- */

int export_top(FILE *out, const Model *m, const Scene *sc, int k) {
    int C = m->vit.cfg.n_classes;
    if (C == 0) { /* what the checkpoint's head was left out for: model_warn, on loading */
        fprintf(stderr, "vitlens: %s: model has no classification head, no predictions%s\n",
                m->vit.path,
                m->clip ? " (a CLIP model: its zero-shot classes come from --classes, --prompts "
                          "or --text)"
                        : "");
        return 1;
    }
    if (m->clip && k > C) k = C; /* zero-shot: as many as were given */
    if (k < 1 || k > C) {
        fprintf(stderr, "vitlens: --top %d: expected 1 to %d (the model's classes)\n", k, C);
        return 1;
    }
    int *idx = malloc((size_t)k * sizeof *idx);
    if (!idx) {
        fprintf(stderr, "vitlens: out of memory\n");
        return 1;
    }
    /* one line per class, RANK PROB CLASS_ID LABEL as --help documents it (scripts parse it);
     * SigLIP's are sigmoids, each label on its own: said on stderr, the lines stay the same */
    if (clip_sigmoid(m->clip))
        fprintf(stderr, "vitlens: SigLIP's scores: each PROB is sigmoid(logit_scale * cos + "
                        "logit_bias) of its label alone; they do not sum to 1\n");
    vit_top_k(idx, sc->run.probs, C, k);
    for (int i = 0; i < k; i++) {
        const char *label = model_label(m, idx[i]);
        fprintf(out, "%d %.4f %d%s%s\n", i + 1, sc->run.probs[idx[i]], idx[i], label ? " " : "",
                label ? label : "");
    }
    free(idx);
    return 0;
}

/* --- the kinds left out ------------------------------------------------------------ */

/* Why kind k is left out of an export explaining `score` (export_say_skipped's), or NULL. */
static const char *skipped_why(int k, const VitConfig *c, int score) {
    if (score && MAP_KINDS[k].uses_target && !MAP_KINDS[k].backward)
        return "it reads a class, and --contrast or --similar gives a score";
    return map_kind_unusable_scored(k, c, score == 2);
}

void export_say_skipped(FILE *err, const Model *m, int score) {
    const VitConfig *c = &m->vit.cfg;
    int done[MAP_KIND_COUNT] = {0};
    for (int k = 0; k < MAP_KIND_COUNT; k++) {
        const char *why = skipped_why(k, c, score);
        if (!why || done[k]) continue;
        /* every kind with the same reason on this line */
        fprintf(err, "vitlens: --export: skipped");
        for (int j = k, n = 0; j < MAP_KIND_COUNT; j++) {
            const char *w = skipped_why(j, c, score);
            if (!w || strcmp(w, why)) continue;
            fprintf(err, "%s %s", n++ ? "," : "", MAP_KINDS[j].tag);
            done[j] = 1;
        }
        fprintf(err, " (%s%s)\n", why,
                m->clip && MAP_KINDS[k].uses_target
                    ? "; a CLIP or SigLIP model: give --text, --classes or --prompts"
                    : "");
    }
}

/* --- PNG export ------------------------------------------------------------ */

/* Map value at output pixel (x, y) of an out_w x out_h picture of the crop, as
 * heatmap.frag.glsl: nearest cell (patch, or pixel of a pixel map), or bilinear
 * between cell centres. map [mh, mw]. */
static float map_sample(const float *map, int mw, int mh, int x, int y, int out_w, int out_h,
                        int bilinear) {
    float gx = ((float)x + 0.5f) * (float)mw / (float)out_w;
    float gy = ((float)y + 0.5f) * (float)mh / (float)out_h;
    if (!bilinear) {
        int ix = (int)gx, iy = (int)gy;
        ix = ix >= mw ? mw - 1 : ix;
        iy = iy >= mh ? mh - 1 : iy;
        return map[iy * mw + ix];
    }
    /* bilinear: from the four nearest cell centres, clamped at the edges (the texture's
     * GL_CLAMP_TO_EDGE), so the map's border cells keep their value out to the edge */
    float tx = gx - 0.5f, ty = gy - 0.5f;
    int x0 = (int)floorf(tx), y0 = (int)floorf(ty);
    float fx = tx - (float)x0, fy = ty - (float)y0;
    int xs[2] = {x0, x0 + 1}, ys[2] = {y0, y0 + 1};
    for (int i = 0; i < 2; i++) {
        xs[i] = xs[i] < 0 ? 0 : xs[i] >= mw ? mw - 1 : xs[i];
        ys[i] = ys[i] < 0 ? 0 : ys[i] >= mh ? mh - 1 : ys[i];
    }
    float a = map[ys[0] * mw + xs[0]], b = map[ys[0] * mw + xs[1]];
    float d = map[ys[1] * mw + xs[0]], e = map[ys[1] * mw + xs[1]];
    float top = a + (b - a) * fx, bot = d + (e - d) * fx;
    return top + (bot - top) * fy;
}

void export_blend(uint8_t *out, int stride_px, int out_w, int out_h, const uint8_t *crop,
                  const float *map, int map_w, int map_h, const VitConfig *cfg,
                  const ExportStyle *st) {
    /* each output pixel: the mean of the crop pixels [Sh, Sw, 3] under it (a box filter,
     * one source pixel at least), mixed toward the colormap by opacity as the shader does */
    int Sh = cfg->image_h, Sw = cfg->image_w;
    const uint8_t(*lut)[3] = colormap_luts[st->colormap];
    for (int y = 0; y < out_h; y++) {
        int sy0 = (int)((long)y * Sh / out_h), sy1 = (int)((long)(y + 1) * Sh / out_h);
        if (sy1 <= sy0) sy1 = sy0 + 1;
        for (int x = 0; x < out_w; x++) {
            int sx0 = (int)((long)x * Sw / out_w), sx1 = (int)((long)(x + 1) * Sw / out_w);
            if (sx1 <= sx0) sx1 = sx0 + 1;
            float src[3] = {0, 0, 0};
            for (int sy = sy0; sy < sy1; sy++) /* area of the crop under the pixel */
                for (int sx = sx0; sx < sx1; sx++)
                    for (int ch = 0; ch < 3; ch++) src[ch] += crop[((size_t)sy * Sw + sx) * 3 + ch];
            float n = (float)((sy1 - sy0) * (sx1 - sx0));
            float v = map_sample(map, map_w, map_h, x, y, out_w, out_h, st->bilinear);
            const uint8_t *col = lut[colormap_index(v)];
            uint8_t *dst = out + ((size_t)y * stride_px + x) * 3;
            for (int ch = 0; ch < 3; ch++) {
                float s = src[ch] / n;
                float o = s + st->opacity * ((float)col[ch] - s);
                dst[ch] = (uint8_t)lrintf(o < 0.0f ? 0.0f : o > 255.0f ? 255.0f : o);
            }
        }
    }
}

int export_png(const char *path, const uint8_t *rgb, int w, int h, char *msg, size_t msg_bytes) {
    /* every row Paeth-filtered, not each row's best of five tried (stb's default): an export
     * 3.6 -> 3.0 s (the built-in model's 103 PNGs), the files 1% larger, the pixels the same */
    stbi_write_force_png_filter = 4;
    errno = 0;
    if (stbi_write_png(path, w, h, 3, rgb, w * 3)) return 0;
    snprintf(msg, msg_bytes, "%s: cannot write PNG: %s", path,
             errno ? strerror(errno) : "write failed");
    return -1;
}

void export_name(char *buf, size_t n, int kind, int layer, const char *head, const char *what,
                 const char *ext) {
    char part[4][40];
    int k = 0;
    if (layer >= 0) snprintf(part[k++], sizeof part[0], "L%02d", layer + 1);
    if (head) snprintf(part[k++], sizeof part[0], "%s", head);
    if (what) snprintf(part[k++], sizeof part[0], "%s", what);
    if (kind != 0 || k == 0) snprintf(part[k++], sizeof part[0], "%s", MAP_KINDS[kind].tag);
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < k && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? "_" : "", part[i]);
    if (len < n) snprintf(buf + len, n - len, "%s", ext);
}

/* Colours [mh, mw, 4] over the crop (the feature PCA), as heatmap.frag.glsl's u_rgb:
 * mix(crop, rgb, opacity * A), nearest or bilinear per channel. */
static void export_blend_rgba(uint8_t *out, int out_w, int out_h, const uint8_t *crop,
                              const float *rgba, int mw, int mh, const VitConfig *cfg,
                              const ExportStyle *st) {
    int Sh = cfg->image_h, Sw = cfg->image_w;
    float *plane = malloc((size_t)mw * mh * sizeof *plane);
    float *val = malloc((size_t)out_w * out_h * 4 * sizeof *val);
    if (!plane || !val) {
        free(plane), free(val);
        return;
    }
    /* each channel sampled on its own, as the GPU filters an RGBA texture; the crop is
     * then taken at the nearest pixel, not averaged */
    for (int ch = 0; ch < 4; ch++) {
        for (int i = 0; i < mw * mh; i++) plane[i] = rgba[(size_t)i * 4 + ch];
        for (int y = 0; y < out_h; y++)
            for (int x = 0; x < out_w; x++)
                val[((size_t)y * out_w + x) * 4 + ch] =
                    map_sample(plane, mw, mh, x, y, out_w, out_h, st->bilinear);
    }
    for (int y = 0; y < out_h; y++)
        for (int x = 0; x < out_w; x++) {
            int sx = (int)((long)x * Sw / out_w), sy = (int)((long)y * Sh / out_h);
            const float *v = val + ((size_t)y * out_w + x) * 4;
            float a = st->opacity * (v[3] < 0 ? 0 : v[3] > 1 ? 1 : v[3]);
            uint8_t *dst = out + ((size_t)y * out_w + x) * 3;
            for (int ch = 0; ch < 3; ch++) {
                float s = crop[((size_t)sy * Sw + sx) * 3 + ch];
                float col = 255.0f * (v[ch] < 0 ? 0 : v[ch] > 1 ? 1 : v[ch]);
                float o = s + a * (col - s);
                dst[ch] = (uint8_t)lrintf(o < 0.0f ? 0.0f : o > 255.0f ? 255.0f : o);
            }
        }
    free(plane), free(val);
}

/* Compute the map of view v (a worker kind's here, on this thread, with joint for the
 * PCA over several photos), write its raw values to dir/base.npy ([h, w] float32,
 * [h, w, 4] for colours), then normalise, blend and write it to dir/base.png. */
static int write_map(const char *dir, const char *base, Scene *sc, const View *v, float *map,
                     uint8_t *pixels, int out_w, int out_h, const ExportStyle *st,
                     JointFeatures *joint) {
    const VitConfig *c = &sc->run.cfg;
    VitError err;
    /* a worker kind (attention flow, the joint PCA) is computed here into the back buffer and
     * swapped in, as the window's worker would; view_map then reads it */
    if (view_on_worker(v) && !view_ready(sc, v)) {
        if (view_slow_map(sc, v, joint, &err)) {
            fprintf(stderr, "vitlens: %s: %s\n", base, err.msg);
            return 1;
        }
        scene_slow_swap(sc);
    }
    if (view_map(map, sc, v, &err)) {
        fprintf(stderr, "vitlens: %s: %s\n", base, err.msg);
        return 1;
    }
    int w, h, rgb = MAP_KINDS[v->kind].rgb;
    map_kind_size(&w, &h, v->kind, c);
    char name[128], path[2048], msg[4400];
    snprintf(name, sizeof name, "%s.npy", base);
    if (npy_write(dir, name, map, (const int[]){h, w, 4}, rgb ? 3 : 2, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        return 1;
    }
    map_kind_normalize(map, map, w * h, v->kind, NULL, NULL);
    if (rgb)
        export_blend_rgba(pixels, out_w, out_h, sc->crop_rgb, map, w, h, c, st);
    else
        export_blend(pixels, out_w, out_w, out_h, sc->crop_rgb, map, w, h, c, st);
    snprintf(path, sizeof path, "%s/%s.png", dir, base);
    if (export_png(path, pixels, out_w, out_h, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        return 1;
    }
    return 0;
}

/* Draw str into img [h, w, 3] with its top-left at (x, y), in colour rgb,
 * shrunk to max_w px wide. Nothing without a font. */
void export_text(uint8_t *img, int w, int h, struct Text *t, const char *str, int px, int x, int y,
                 int max_w, const uint8_t rgb[3]) {
    if (!t || !t->font) return;
    SDL_Surface *s = text_render(t, str, px);
    if (!s) return;
    if (s->w > max_w && max_w > 0) { /* too wide: a smaller size */
        int px2 = px * max_w / s->w;
        SDL_FreeSurface(s);
        if (px2 < 6 || !(s = text_render(t, str, px2))) return;
    }
    const uint8_t *src = s->pixels;
    for (int yy = 0; yy < s->h; yy++)
        for (int xx = 0; xx < s->w; xx++) {
            int X = x + xx, Y = y + yy;
            if (X < 0 || Y < 0 || X >= w || Y >= h) continue;
            float a = src[(size_t)yy * s->pitch + (size_t)xx * 4 + 3] / 255.0f;
            uint8_t *d = img + ((size_t)Y * w + X) * 3;
            for (int ch = 0; ch < 3; ch++) d[ch] = (uint8_t)lrintf(d[ch] + a * (rgb[ch] - d[ch]));
        }
    SDL_FreeSurface(s);
}

/* The sheets' colours, RGB: the window's background, text and dimmed text. */
static const uint8_t SHEET_BG[3] = {15, 17, 21}, SHEET_TEXT[3] = {236, 238, 241},
                     SHEET_DIM[3] = {158, 166, 176};

/* An overview as one PNG: cells (n_cols x n_rows) at the crop's aspect ratio,
 * the longer side cell px, map k of maps [n, map_h, map_w] at (k / n_rows,
 * k % n_rows) for the table (a column per layer), else row-major; column / row
 * labels and per-cell labels optional. */
static int write_sheet(const char *path, const Scene *sc, const float *maps, int map_w, int map_h,
                       int n, int n_cols, int n_rows, int by_column, int cell,
                       const char *const *col_labels, const char *const *row_labels,
                       const char *const *cell_labels, const char *title, Text *font,
                       const ExportStyle *st) {
    const VitConfig *c = &sc->run.cfg;
    int S = c->image_h > c->image_w ? c->image_h : c->image_w;
    int cell_w = cell * c->image_w / S,
        cell_h = cell * c->image_h / S; /* cell's width, height px */
    cell_w = cell_w < 1 ? 1 : cell_w, cell_h = cell_h < 1 ? 1 : cell_h;
    /* the gaps and labels scale with the cell; labels stay readable (12 px at least) */
    int gap = cell / 28 + 2, label_px = cell / 7 < 12 ? 12 : cell / 7;
    int left = row_labels ? label_px * 4 : gap,
        top = label_px * 2 + (col_labels ? label_px * 2 : 0);
    int w = left + n_cols * (cell_w + gap) + gap, h = top + n_rows * (cell_h + gap) + gap;
    uint8_t *img = malloc((size_t)w * h * 3);
    if (!img) {
        fprintf(stderr, "vitlens: %s: out of memory for a %dx%d PNG\n", path, w, h);
        return 1;
    }
    for (size_t i = 0; i < (size_t)w * h; i++) memcpy(img + i * 3, SHEET_BG, 3);
    export_text(img, w, h, font, title, label_px, gap * 2, label_px / 3, w - 4 * gap, SHEET_TEXT);
    for (int k = 0; k < n; k++) {
        int col = by_column ? k / n_rows : k % n_cols, row = by_column ? k % n_rows : k / n_cols;
        int x = left + col * (cell_w + gap), y = top + row * (cell_h + gap);
        export_blend(img + ((size_t)y * w + x) * 3, w, cell_w, cell_h, sc->crop_rgb,
                     maps + (size_t)k * map_w * map_h, map_w, map_h, c, st);
        if (cell_labels && cell_labels[k]) {
            int lw = label_px * 5, lh = label_px * 3 / 2;
            for (int yy = y; yy < y + lh && yy < h; yy++) /* a dark tab behind the label */
                for (int xx = x; xx < x + lw && xx < x + cell_w; xx++)
                    for (int ch = 0; ch < 3; ch++) img[((size_t)yy * w + xx) * 3 + ch] /= 4;
            export_text(img, w, h, font, cell_labels[k], label_px, x + label_px / 3,
                        y + label_px / 8, lw, SHEET_TEXT);
        }
    }
    for (int col = 0; col_labels && col < n_cols; col++)
        export_text(img, w, h, font, col_labels[col], label_px,
                    left + col * (cell_w + gap) + cell_w / 3, top - label_px * 3 / 2, cell_w,
                    SHEET_DIM);
    for (int row = 0; row_labels && row < n_rows; row++)
        export_text(img, w, h, font, row_labels[row], label_px, gap,
                    top + row * (cell_h + gap) + cell_h / 2 - label_px * 2 / 3, left - gap,
                    SHEET_DIM);
    char msg[2300];
    int rc = export_png(path, img, w, h, msg, sizeof msg) ? 1 : 0;
    if (rc) fprintf(stderr, "vitlens: %s\n", msg);
    free(img);
    return rc;
}

/* Labels "head 1" ... "head H", "mean", "max", "min" and "1" ... "L", in one
 * allocation of LABEL_SLOT bytes each, room for "head " and any int (free the returned
 * block). NULL when out of memory. */
#define LABEL_SLOT 24
static char *make_labels(const char **heads, const char **layers, int H, int L) {
    char *buf = malloc((size_t)(H + VIEW_N_FUSIONS + L) * LABEL_SLOT);
    if (!buf) return NULL;
    for (int k = 0; k < H + VIEW_N_FUSIONS; k++) {
        char *b = buf + (size_t)k * LABEL_SLOT;
        if (k < H)
            snprintf(b, LABEL_SLOT, "head %d", k + 1);
        else
            snprintf(b, LABEL_SLOT, "%s", vit_fusion_name((VitFusion)(k - H)));
        heads[k] = b;
    }
    for (int l = 0; l < L; l++) {
        char *b = buf + (size_t)(H + VIEW_N_FUSIONS + l) * LABEL_SLOT;
        snprintf(b, LABEL_SLOT, "%d", l + 1);
        layers[l] = b;
    }
    return buf;
}

/* The overviews of every kind with per-head maps: each layer's heads grid
 * (L01_heads.png ..., for kinds whose every head --export writes) and the
 * layers x heads contact sheet (contact_sheet.png, contact_sheet_rollout.png). */
static int write_overviews(const char *dir, const Scene *sc, const ExportStyle *st, int *n_files) {
    const VitConfig *c = &sc->run.cfg;
    int L = c->n_layers, H = c->n_heads, K = H + VIEW_N_FUSIONS;
    int S = c->image_h > c->image_w ? c->image_h : c->image_w; /* the longer side */
    float *maps = malloc((size_t)L * K * map_kind_max_floats(c, 1) * sizeof *maps);
    const char **heads = malloc((size_t)K * sizeof *heads),
               **layers = malloc((size_t)L * sizeof *layers);
    char *labels = heads && layers ? make_labels(heads, layers, H, L) : NULL;
    Text font;
    char warn[512];
    int has_font = text_init(&font, warn, sizeof warn) == 0;
    int rc = 0;
    if (!maps || !labels) {
        fprintf(stderr, "vitlens: out of memory for the overviews\n");
        rc = 1;
        goto done;
    }
    char name[128], path[2048], title[512];
    VitError err;
    /* a layer's heads grid: about square; the contact sheet (L x K cells) at half the
     * crop's size when it is large, to keep the PNG manageable */
    int grid_cols = (int)ceil(sqrt((double)K)), grid_rows = (K + grid_cols - 1) / grid_cols;
    int cell = S > 160 ? S / 2 : S;
    for (int k = 0; k < MAP_KIND_COUNT && !rc; k++) {
        const MapKindInfo *m = &MAP_KINDS[k];
        if (!m->per_head || !m->per_layer) continue;
        const char *of = !m->uses_query ? ""
                         : c->n_prefix  ? " of the CLS token"
                                        : " of the first patch"; /* SigLIP: no CLS */
        int w, h;
        map_kind_size(&w, &h, k, c);
        for (int l = 0; m->export_heads && l < L && !rc; l++) {
            View v = {.kind = k, .layer = l, .discard_ratio = st->discard, .target = VIEW_TOP1};
            if (overview_maps(maps, NULL, NULL, sc, &v, 0, 0, &err)) {
                fprintf(stderr, "vitlens: %s\n", err.msg);
                rc = 1;
                break;
            }
            export_name(name, sizeof name, k, l, NULL, "heads", ".png");
            snprintf(path, sizeof path, "%s/%s", dir, name);
            snprintf(title, sizeof title, "%s  \xc2\xb7  layer %d/%d  \xc2\xb7  %s%s", sc->name,
                     l + 1, L, m->title, of);
            rc = write_sheet(path, sc, maps, w, h, K, grid_cols, grid_rows, 0, S, NULL, NULL, heads,
                             title, has_font ? &font : NULL, st);
            *n_files += !rc;
        }
        if (rc) break;
        View v = {.kind = k, .discard_ratio = st->discard, .target = VIEW_TOP1};
        if (overview_maps(maps, NULL, NULL, sc, &v, 1, 0, &err)) {
            fprintf(stderr, "vitlens: %s\n", err.msg);
            rc = 1;
            break;
        }
        export_name(name, sizeof name, k, -1, NULL, "contact_sheet", ".png");
        snprintf(path, sizeof path, "%s/%s", dir, name);
        snprintf(title, sizeof title, "%s  \xc2\xb7  %s%s: a column per layer", sc->name, m->title,
                 of);
        rc = write_sheet(path, sc, maps, w, h, L * K, L, K, 1, cell, layers, heads, NULL, title,
                         has_font ? &font : NULL, st);
        *n_files += !rc;
    }
done:
    if (has_font) text_free(&font);
    free(maps), free(heads), free(layers), free(labels);
    return rc;
}

/* The class-specific maps of class `target` side by side, a labelled column per
 * method: contact_sheet_class281.png. */
static int write_class_sheet(const char *dir, const Model *m, const Scene *sc, int target,
                             const ExportStyle *st) {
    const VitConfig *c = &sc->run.cfg;
    int S = c->image_h > c->image_w ? c->image_h : c->image_w;
    int n = 0, kinds[MAP_KIND_COUNT];
    for (int k = 0; k < MAP_KIND_COUNT; k++)
        if (MAP_KINDS[k].uses_target && (target != SCENE_SCORE || MAP_KINDS[k].backward))
            kinds[n++] = k;
    if (!n) return 0;
    /* pixel maps are the largest: every cell is drawn from a map of its own size, so
     * the sheet takes them one at a time (write_sheet's maps share one size) */
    size_t stride = (size_t)c->image_h * c->image_w;
    float *maps = malloc((size_t)n * stride * sizeof *maps);
    if (!maps) {
        fprintf(stderr, "vitlens: out of memory for the class sheet\n");
        return 1;
    }
    const char *labels[MAP_KIND_COUNT];
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        View v = {.kind = kinds[i],
                  .layer = c->n_layers - 1, /* a map per layer (logit lens): the last */
                  .discard_ratio = st->discard,
                  .target = target};
        VitError err;
        float *mp = maps + (size_t)i * stride;
        int w, h;
        map_kind_size(&w, &h, kinds[i], c);
        if (view_map(mp, sc, &v, &err)) {
            fprintf(stderr, "vitlens: %s\n", err.msg);
            rc = 1;
            break;
        }
        map_kind_normalize(mp, mp, w * h, kinds[i], NULL, NULL);
        /* a patch map: spread over its pixels, in place; from the last pixel backwards,
         * since each pixel's source cell lies at or before it and is not yet overwritten */
        if (w != c->image_w || h != c->image_h) {
            for (int y = c->image_h - 1; y >= 0; y--)
                for (int x = c->image_w - 1; x >= 0; x--)
                    mp[(size_t)y * c->image_w + x] =
                        mp[(size_t)(y * h / c->image_h) * w + (size_t)(x * w / c->image_w)];
        }
        labels[i] = MAP_KINDS[kinds[i]].name;
    }
    if (!rc) {
        Text font;
        char warn[512], path[2048], title[512];
        int has_font = text_init(&font, warn, sizeof warn) == 0;
        char stem[136], why[400];
        scene_target_stem(stem, sizeof stem, m, sc, target);
        scene_target_title(why, sizeof why, m, sc, target);
        snprintf(path, sizeof path, "%s/contact_sheet_%s.png", dir, stem);
        snprintf(title, sizeof title, "%s  \xc2\xb7  %s", sc->name, why);
        /* bilinear upsampling would blur the patch maps spread over pixels: nearest */
        ExportStyle nearest = *st;
        nearest.bilinear = 0;
        rc = write_sheet(path, sc, maps, c->image_w, c->image_h, n, n, 1, 0, S, NULL, NULL, labels,
                         title, has_font ? &font : NULL, st->bilinear ? st : &nearest);
        if (has_font) text_free(&font);
    }
    free(maps);
    return rc;
}

/* The token views' lists as CSV: logit_lens.csv (per layer the CLS token's top-1 class
 * through the head, its probability, and that of the model's own top-1) and
 * high_norm_tokens.csv (per layer every high-norm token, its norm, the layer's
 * threshold, its first layer and its share of the CLS token's attention). */
static int write_lists(const char *dir, const Model *model, const Scene *sc) {
    const VitConfig *c = &sc->run.cfg;
    char path[2048];
    int rc = 0, T = c->n_tokens, C = c->n_classes;
    VitError err;
    FILE *f;
    if (C > 0) {
        snprintf(path, sizeof path, "%s/logit_lens.csv", dir);
        float *p = malloc((size_t)C * sizeof *p);
        if (!p || !(f = fopen(path, "w"))) {
            fprintf(stderr, "vitlens: %s: cannot write: %s\n", path,
                    p ? strerror(errno) : "no memory");
            free(p);
            return 1;
        }
        /* the label is quoted, its quotes doubled (RFC 4180): ImageNet names hold commas */
        int final;
        vit_top_k(&final, sc->run.probs, C, 1);
        fprintf(f, "layer,class,label,prob,final_class_prob\n");
        for (int l = 0; l < c->n_layers && !rc; l++) {
            int top;
            if (vit_logit_lens(p, &sc->run, sc->vit, l, 0, &err)) {
                fprintf(stderr, "vitlens: %s\n", err.msg);
                rc = 1;
                break;
            }
            vit_top_k(&top, p, C, 1);
            const char *label = model_label(model, top);
            fprintf(f, "%d,%d,\"", l + 1, top);
            for (const char *q = label ? label : ""; *q; q++)
                fprintf(f, *q == '"' ? "\"\"" : "%c", *q);
            fprintf(f, "\",%.6g,%.6g\n", (double)p[top], (double)p[final]);
        }
        free(p);
        if (fclose(f) && !rc) rc = 1;
        if (rc) return rc;
    }
    snprintf(path, sizeof path, "%s/high_norm_tokens.csv", dir);
    int *idx = malloc(2 * (size_t)T * sizeof *idx);
    float *norms = malloc((size_t)T * sizeof *norms), *cls = malloc((size_t)T * sizeof *cls);
    if (!idx || !norms || !cls || !(f = fopen(path, "w"))) {
        fprintf(stderr, "vitlens: %s: cannot write\n", path);
        free(idx), free(norms), free(cls);
        return 1;
    }
    fprintf(f, "layer,token,name,norm,threshold,first_layer,cls_attention\n");
    /* cls: the CLS token's mean-fused attention row [T], the prefix tokens' share in
     * front of the patches' map, so that cls[t] is token t's */
    for (int l = 0; l < c->n_layers && !rc; l++) {
        View v = {.layer = l}; /* view_high_norm reads the layer only */
        float thr;
        int n = view_high_norm(idx, idx + T, &thr, sc, &v, &err);
        if (n < 0 || vit_token_norms(norms, &sc->run, l, &err) ||
            vit_map_fused(cls + c->n_prefix, &sc->run, l, VIT_FUSE_MEAN, 0, &err) ||
            vit_prefix_share(cls, &sc->run, l, -1, VIT_FUSE_MEAN, 0, 0.0f, 0, &err)) {
            fprintf(stderr, "vitlens: %s\n", err.msg);
            rc = 1;
            break;
        }
        for (int i = 0; i < n; i++) {
            int t = idx[i];
            char who[48];
            token_name(who, sizeof who, c, t, ';'); /* no comma in a CSV field */
            fprintf(f, "%d,%d,%s,%.6g,%.6g,%d,%.6g\n", l + 1, t, who, (double)norms[t], (double)thr,
                    idx[T + i] + 1, (double)cls[t]);
        }
    }
    free(idx), free(norms), free(cls);
    if (fclose(f) && !rc) rc = 1;
    return rc;
}

int export_maps(FILE *out, const char *dir, const Model *model, Scene *sc, int target,
                const ExportStyle *st, JointFeatures *joint) {
    const VitConfig *c = &sc->run.cfg;
    char why[4400];
    if (files_make_dir(dir, 0777, why, sizeof why)) { /* out/run1/: out/ too */
        fprintf(stderr, "vitlens: %s\n", why);
        return 1;
    }
    int S = c->image_h > c->image_w ? c->image_h : c->image_w; /* the longer side */
    /* an integer factor (rounded), so every patch covers the same number of pixels */
    int scale = (EXPORT_TARGET_PX + S / 2) / S;
    if (scale < 1) scale = 1;
    int out_w = c->image_w * scale, out_h = c->image_h * scale;
    float *map = malloc(map_kind_max_floats(c, 0) * sizeof *map);
    uint8_t *pixels = malloc((size_t)out_w * out_h * 3);
    int rc = 0, n_maps = 0, n_sheets = 0;
    if (!map || !pixels) {
        fprintf(stderr, "vitlens: out of memory for a %dx%d PNG\n", out_w, out_h);
        rc = 1;
        goto done;
    }
    const int L = c->n_layers, H = c->n_heads;
    char base[224], head[16], stem[136];
    if (target >= 0) scene_target_stem(stem, sizeof stem, model, sc, target);
    for (int k = 0; k < MAP_KIND_COUNT && !rc; k++) {
        const MapKindInfo *m = &MAP_KINDS[k];
        if (m->uses_target) { /* class281_chefer.png, a-blue-square_chefer.png: the class and
                               * the method (model_class_stem) */
            if (target < 0) continue;                            /* no head: no class to explain */
            if (target == SCENE_SCORE && !m->backward) continue; /* reads a class, not a score */
            for (int l = 0; l < (m->per_layer ? L : 1) && !rc; l++) {
                View v = {.kind = k, .layer = l, .discard_ratio = st->discard, .target = target};
                if (m->per_layer)
                    snprintf(base, sizeof base, "%s_L%02d_%s", stem, l + 1, m->tag);
                else
                    snprintf(base, sizeof base, "%s_%s", stem, m->tag);
                rc = write_map(dir, base, sc, &v, map, pixels, out_w, out_h, st, NULL);
                n_maps += !rc;
            }
            continue;
        }
        if (!map_kind_usable(k, c)) continue; /* the probe without a MAP head */
        /* every head and fusion where the kind asks for it (export_heads), else only the
         * mean fusion, one file per layer (or one for the model) */
        int every_head = m->per_head && m->export_heads;
        int h0 = every_head ? 0 : H + VIT_FUSE_MEAN, h1 = every_head ? H + VIEW_N_FUSIONS : h0 + 1;
        for (int l = 0; l < (m->per_layer ? L : 1) && !rc; l++)
            for (int h = h0; h < h1 && !rc; h++) {
                View v = {.kind = k,
                          .layer = l,
                          .head = h,
                          .discard_ratio = st->discard,
                          .target = VIEW_TOP1};
                int f = view_fusion(&v, H);
                if (f < 0)
                    snprintf(head, sizeof head, "H%02d", h + 1);
                else
                    snprintf(head, sizeof head, "%s", vit_fusion_name((VitFusion)f));
                export_name(base, sizeof base, k, m->per_layer ? l : -1, every_head ? head : NULL,
                            NULL, "");
                rc = write_map(dir, base, sc, &v, map, pixels, out_w, out_h, st, NULL);
                n_maps += !rc;
                if (!rc && m->worker == 2 && joint) { /* the PCA over every photo */
                    v.joint = 1;
                    snprintf(base + strlen(base), sizeof base - strlen(base), "-joint");
                    rc = write_map(dir, base, sc, &v, map, pixels, out_w, out_h, st, joint);
                    n_maps += !rc;
                }
            }
    }
    if (!rc) rc = write_lists(dir, model, sc);
    if (!rc) rc = write_overviews(dir, sc, st, &n_sheets);
    if (!rc && target >= 0) {
        rc = write_class_sheet(dir, model, sc, target, st);
        n_sheets += !rc;
    }
    if (!rc)
        fprintf(out,
                "wrote %d PNGs and %d .npy files (%dx%d px, %s, %s, opacity %.2f) of %s to %s\n"
                "and %s as CSV\n",
                n_maps + n_sheets, n_maps, out_w, out_h, colormap_names[st->colormap],
                st->bilinear ? "bilinear" : "nearest", (double)st->opacity, sc->name, dir,
                c->n_classes > 0 ? "the logit lens and the high-norm tokens"
                                 : "the high-norm tokens (no head: no logit lens)");
done:
    free(map);
    free(pixels);
    return rc;
}
