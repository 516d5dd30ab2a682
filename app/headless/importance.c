/* importance.c - --export's head importance table and pruning curve. */
#include "headless/importance.h"
#include "headless/plot.h"
#include "render/colormap.h"
#include "render/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t BG[3] = {15, 17, 21}, FG[3] = {236, 238, 241}, DIM[3] = {158, 166, 176};

/* The L x H grid as a PNG: a column per layer, a row per head, each cell the colour of its
 * importance on [lo, hi] with the value written in it. */
static int write_grid(const char *path, const float *imp, int L, int H, const char *title,
                      const ExportStyle *st) {
    int cell = 64, gap = 4, label = 14, left = 70, top = 3 * label + 8;
    int w = left + L * (cell + gap) + gap, h = top + H * (cell + gap) + gap + label;
    if (w < 520) w = 520;
    uint8_t *img = malloc((size_t)w * h * 3);
    if (!img) {
        fprintf(stderr, "vitlens: %s: out of memory\n", path);
        return 1;
    }
    for (size_t i = 0; i < (size_t)w * h; i++) memcpy(img + i * 3, BG, 3);
    float lo = imp[0], hi = imp[0];
    for (int i = 1; i < L * H; i++) lo = imp[i] < lo ? imp[i] : lo, hi = imp[i] > hi ? imp[i] : hi;
    Text font;
    char warn[512], s[64];
    int has_font = text_init(&font, warn, sizeof warn) == 0;
    Text *f = has_font ? &font : NULL;
    export_text(img, w, h, f, title, label, gap * 2, 4, w - 4 * gap, FG);
    for (int l = 0; l < L; l++) {
        snprintf(s, sizeof s, "%d", l + 1);
        export_text(img, w, h, f, s, label, left + l * (cell + gap) + cell / 3, top - label - 4,
                    cell, DIM);
    }
    for (int hd = 0; hd < H; hd++) {
        snprintf(s, sizeof s, "head %d", hd + 1);
        export_text(img, w, h, f, s, label, gap, top + hd * (cell + gap) + cell / 2 - label / 2,
                    left - gap, DIM);
    }
    snprintf(s, sizeof s, "layer");
    export_text(img, w, h, f, s, label, gap, top - label - 4, left, DIM);
    for (int l = 0; l < L; l++)
        for (int hd = 0; hd < H; hd++) {
            float v = imp[l * H + hd], t = hi > lo ? (v - lo) / (hi - lo) : 0.0f;
            const uint8_t *rgb = colormap_luts[st->colormap][colormap_index(t)];
            int x0 = left + l * (cell + gap), y0 = top + hd * (cell + gap);
            for (int y = y0; y < y0 + cell; y++)
                for (int x = x0; x < x0 + cell; x++) memcpy(img + ((size_t)y * w + x) * 3, rgb, 3);
            int lum = rgb[0] * 3 + rgb[1] * 6 + rgb[2]; /* dark text on light cells */
            const uint8_t dark[3] = {0, 0, 0}, *tc = lum > 1300 ? dark : FG;
            snprintf(s, sizeof s, "%+.3f", (double)v);
            export_text(img, w, h, f, s, label - 2, x0 + 4, y0 + cell / 2 - label / 2, cell - 6,
                        tc);
        }
    snprintf(s, sizeof s, "colour: %+.3f (low) to %+.3f (high)", (double)lo, (double)hi);
    export_text(img, w, h, f, s, label - 2, gap * 2, h - label - 2, w, DIM);
    if (has_font) text_free(&font);
    char msg[2300];
    int rc = export_png(path, img, w, h, msg, sizeof msg) ? 1 : 0;
    if (rc) fprintf(stderr, "vitlens: %s\n", msg);
    free(img);
    return rc;
}

int export_importance(const char *dir, const Model *m, const Scene *sc, int target,
                      const ExportStyle *st, int *n_png) {
    const Vit *vit = sc->vit;
    const VitConfig *c = &vit->cfg;
    int L = c->n_layers, H = c->n_heads, LH = L * H, rc = 1;
    float *imp = malloc((size_t)LH * sizeof *imp), *pr = malloc((size_t)(LH + 1) * sizeof *pr);
    int *order = malloc((size_t)LH * sizeof *order);
    VitBatch b = {0};
    VitError err;
    char path[2048], title[512];
    float base = 0.0f;
    if (!imp || !pr || !order) {
        fprintf(stderr, "vitlens: out of memory for the head importance\n");
        goto done;
    }
    if (vit_batch_init(&b, vit, H, 0, &err)) {
        fprintf(stderr, "vitlens: head importance: %s\n", err.msg);
        goto done;
    }
    b.intervention = sc->run.intervention;
    if (vit_head_importance(imp, &base, &b, vit, sc->run.input, target, &err) ||
        vit_head_pruning(pr, order, &b, vit, sc->run.input, imp, target, &err)) {
        fprintf(stderr, "vitlens: head importance: %s\n", err.msg);
        goto done;
    }
    const char *label = model_label(m, target);
    snprintf(path, sizeof path, "%s/head_importance.csv", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        goto done;
    }
    fprintf(f, "# class %d (%s), p = %.6f: importance = p - p with the head alone ablated\n",
            target, label ? label : "", (double)base);
    fprintf(f, "layer,head,importance,prob_ablated\n");
    for (int i = 0; i < LH; i++)
        fprintf(f, "%d,%d,%.7f,%.7f\n", i / H + 1, i % H + 1, (double)imp[i],
                (double)(base - imp[i]));
    int bad = fclose(f) != 0;
    snprintf(path, sizeof path, "%s/head_pruning.csv", dir);
    f = bad ? NULL : fopen(path, "w");
    if (!f) {
        perror(path);
        goto done;
    }
    fprintf(f, "pruned,kept,layer,head,prob\n");
    fprintf(f, "0,%d,,,%.7f\n", LH, (double)pr[0]);
    for (int k = 1; k <= LH; k++)
        fprintf(f, "%d,%d,%d,%d,%.7f\n", k, LH - k, order[k - 1] / H + 1, order[k - 1] % H + 1,
                (double)pr[k]);
    if (fclose(f) != 0) {
        perror(path);
        goto done;
    }
    snprintf(path, sizeof path, "%s/head_importance.png", dir);
    snprintf(title, sizeof title,
             "%s  \xc2\xb7  p(%.60s) = %.3f: its drop with each head ablated alone", sc->name,
             label ? label : "class", (double)base);
    if (write_grid(path, imp, L, H, title, st)) goto done;
    snprintf(path, sizeof path, "%s/head_pruning.png", dir);
    snprintf(title, sizeof title,
             "%s  \xc2\xb7  p(%.60s) with the least important heads pruned first (Michel et al. "
             "2019)",
             sc->name, label ? label : "class");
    PlotSeries s = {.name = "p(class)", .y = pr, .n = LH + 1};
    if (plot_lines(path, title, "heads pruned", 0.0f, (float)LH, 0.0f, 1.0f, &s, 1)) goto done;
    *n_png += 2;
    rc = 0;
done:
    vit_batch_free(&b);
    free(imp), free(pr), free(order);
    return rc;
}
