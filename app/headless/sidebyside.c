/* sidebyside.c - --compare and --compare-image with --export: after each pane's own export
 * (DIR/a/, DIR/b/), what compares them: compare.csv (how far each pair of maps agrees),
 * DIR/diff/ (A - B where the grids agree) and compare_sheet.png. The links between the
 * panes are view/compare.h's, as the window's compare view uses them. */
#include "headless/export.h"
#include "config/files.h"
#include "headless/npy.h"
#include "render/text.h"
#include "view/compare.h"
#include "view/maps.h"
#include "view/mapkind.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The view of pane b that goes with pane a's view v: the layer at the same relative depth,
 * the same fusion of b's heads, b's own class (its explained one). */
static View pane_b_view(const View *v, const Scene *a, const Scene *b) {
    const VitConfig *ca = &a->run.cfg, *cb = &b->run.cfg;
    View w = *v;
    w.layer = compare_layer(v->layer, ca->n_layers, cb->n_layers);
    if (v->head >= ca->n_heads) w.head = cb->n_heads + (v->head - ca->n_heads); /* a fusion */
    if (MAP_KINDS[v->kind].uses_target) w.target = b->expl_target;
    return w;
}

/* The maps the sheet shows, a row each: the last layer's attention (heads' mean), its
 * rollout, Chefer et al.'s map when both panes have one. */
static int sheet_rows(View rows[3], const Scene *a, const Scene *b, float discard) {
    const VitConfig *ca = &a->run.cfg;
    int n = 0, L = ca->n_layers, mean = ca->n_heads + VIT_FUSE_MEAN;
    rows[n++] = (View){.kind = MAP_ATTENTION, .layer = L - 1, .head = mean, .target = VIEW_TOP1};
    rows[n++] = (View){.kind = MAP_ROLLOUT,
                       .layer = L - 1,
                       .head = mean,
                       .discard_ratio = discard,
                       .target = VIEW_TOP1};
    if (a->expl_target >= 0 && b->expl_target >= 0)
        rows[n++] = (View){.kind = MAP_CHEFER, .target = a->expl_target};
    return n;
}

/* One cell of the sheet: map [mh, mw] (normalised) over sc's crop, cell x cell px at
 * (x, y) of img [H, W, 3]. */
static void sheet_cell(uint8_t *img, int W, int x, int y, int cell, const Scene *sc,
                       const float *map, int mw, int mh, const ExportStyle *st) {
    export_blend(img + ((size_t)y * W + x) * 3, W, cell, cell, sc->crop_rgb, map, mw, mh,
                 &sc->run.cfg, st);
}

/* compare_sheet.png: a row per sheet_rows map, columns A | B | A - B (the last only where
 * the maps have one shape, and no such column when none has), each labelled. */
static int write_sheet(const char *dir, const Scene *a, const Scene *b, const char *name_a,
                       const char *name_b, const ExportStyle *st) {
    enum { CELL = 320, PAD = 12, TOP = 70, LABEL = 30 };
    View rows[3];
    int n = sheet_rows(rows, a, b, st->discard), cols = 2;
    for (int r = 0; r < n; r++) { /* a third column when some row has A - B */
        View vb = pane_b_view(&rows[r], a, b);
        int wa, ha, wb, hb;
        map_kind_size(&wa, &ha, rows[r].kind, &a->run.cfg);
        map_kind_size(&wb, &hb, vb.kind, &b->run.cfg);
        if (wa == wb && ha == hb) cols = 3;
    }
    int W = cols * CELL + (cols + 1) * PAD, H = TOP + n * (CELL + LABEL + PAD) + PAD;
    uint8_t *img = calloc((size_t)W * H * 3, 1);
    float *ma = malloc(map_kind_max_floats(&a->run.cfg, 0) * sizeof *ma),
          *mb = malloc(map_kind_max_floats(&b->run.cfg, 0) * sizeof *mb);
    size_t nd = map_kind_max_floats(&a->run.cfg, 0);
    float *md = malloc(nd * sizeof *md);
    int rc = 0;
    if (!img || !ma || !mb || !md) {
        fprintf(stderr, "vitlens: out of memory for compare_sheet.png\n");
        rc = 1;
        goto done;
    }
    memset(img, 24, (size_t)W * H * 3);
    Text font;
    char warn[512], label[400];
    int has_font = text_init(&font, warn, sizeof warn) == 0;
    const uint8_t white[3] = {235, 235, 235}, grey[3] = {170, 170, 170};
    snprintf(label, sizeof label, "A: %.150s   B: %.150s", name_a, name_b);
    export_text(img, W, H, has_font ? &font : NULL, label, 22, PAD, 12, W - 2 * PAD, white);
    if (cols == 2) {
        snprintf(label, sizeof label, "no A - B: A's grid is %dx%d, B's %dx%d", a->run.cfg.grid_h,
                 a->run.cfg.grid_w, b->run.cfg.grid_h, b->run.cfg.grid_w);
        export_text(img, W, H, has_font ? &font : NULL, label, 15, PAD, 42, W - 2 * PAD, grey);
    }
    for (int r = 0; r < n && !rc; r++) {
        View va = rows[r], vb = pane_b_view(&rows[r], a, b);
        VitError err;
        int wa, ha, wb, hb;
        map_kind_size(&wa, &ha, va.kind, &a->run.cfg);
        map_kind_size(&wb, &hb, vb.kind, &b->run.cfg);
        if (view_map(ma, a, &va, &err) || view_map(mb, b, &vb, &err)) {
            fprintf(stderr, "vitlens: compare_sheet.png: %s\n", err.msg);
            rc = 1;
            break;
        }
        int y = TOP + r * (CELL + LABEL + PAD), same = wa == wb && ha == hb;
        if (same)
            for (int i = 0; i < wa * ha; i++) md[i] = ma[i] - mb[i];
        map_kind_normalize(ma, ma, wa * ha, va.kind, NULL, NULL);
        map_kind_normalize(mb, mb, wb * hb, vb.kind, NULL, NULL);
        sheet_cell(img, W, PAD, y, CELL, a, ma, wa, ha, st);
        sheet_cell(img, W, 2 * PAD + CELL, y, CELL, b, mb, wb, hb, st);
        const char *what = MAP_KINDS[va.kind].name;
        char la[64] = "", lb[64] = "";
        if (MAP_KINDS[va.kind].per_layer)
            snprintf(la, sizeof la, ", layer %d", va.layer + 1),
                snprintf(lb, sizeof lb, ", layer %d", vb.layer + 1);
        snprintf(label, sizeof label, "A: %s%s", what, la);
        export_text(img, W, H, has_font ? &font : NULL, label, 16, PAD, y + CELL + 6, CELL, grey);
        snprintf(label, sizeof label, "B: %s%s", what, lb);
        export_text(img, W, H, has_font ? &font : NULL, label, 16, 2 * PAD + CELL, y + CELL + 6,
                    CELL, grey);
        if (same) { /* 0 mid-scale: A above B one way, below the other */
            map_normalize_signed(md, md, wa * ha, NULL, NULL);
            sheet_cell(img, W, 3 * PAD + 2 * CELL, y, CELL, a, md, wa, ha, st);
            export_text(img, W, H, has_font ? &font : NULL, "A - B (0 mid-scale)", 16,
                        3 * PAD + 2 * CELL, y + CELL + 6, CELL, grey);
        } else if (cols == 3) {
            snprintf(label, sizeof label, "no A - B: grids %dx%d and %dx%d", wa, ha, wb, hb);
            export_text(img, W, H, has_font ? &font : NULL, label, 16, 3 * PAD + 2 * CELL,
                        y + CELL / 2, CELL, grey);
        }
    }
    if (has_font) text_free(&font);
    if (!rc) {
        char path[2048], msg[2200];
        snprintf(path, sizeof path, "%s/compare_sheet.png", dir);
        if (export_png(path, img, W, H, msg, sizeof msg)) {
            fprintf(stderr, "vitlens: %s\n", msg);
            rc = 1;
        }
    }
done:
    free(img), free(ma), free(mb), free(md);
    return rc;
}

/* One pair of maps: its row of compare.csv (B on A's grid for patch maps; pixel maps of one
 * size as they are) and, when both have one shape, A - B into DIR/diff/ (.npy, and .png over
 * A's crop, 0 mid-scale). 0, or 1 with the message on stderr. */
static int compare_pair(FILE *csv, const char *diff_dir, const Model *model_a, const Scene *a,
                        const Model *model_b, const Scene *b, const View *va, float *ma, float *mb,
                        float *tmp, int *n_diff, uint8_t *pixels, int out_w, int out_h,
                        const ExportStyle *st) {
    const VitConfig *ca = &a->run.cfg, *cb = &b->run.cfg;
    View vb = pane_b_view(va, a, b);
    VitError err;
    char name_a[224], name_b[224], head[16] = "";
    int f = view_fusion(va, ca->n_heads);
    const char *hd = NULL;
    if (MAP_KINDS[va->kind].per_head && MAP_KINDS[va->kind].export_heads)
        snprintf(head, sizeof head, "%s", vit_fusion_name((VitFusion)f)), hd = head;
    if (MAP_KINDS[va->kind].uses_target) { /* as export_maps names them */
        char stem_a[136], stem_b[136];
        scene_target_stem(stem_a, sizeof stem_a, model_a, a, a->expl_target);
        scene_target_stem(stem_b, sizeof stem_b, model_b, b, b->expl_target);
        if (MAP_KINDS[va->kind].per_layer) {
            snprintf(name_a, sizeof name_a, "%s_L%02d_%s", stem_a, va->layer + 1,
                     MAP_KINDS[va->kind].tag);
            snprintf(name_b, sizeof name_b, "%s_L%02d_%s", stem_b, vb.layer + 1,
                     MAP_KINDS[va->kind].tag);
        } else {
            snprintf(name_a, sizeof name_a, "%s_%s", stem_a, MAP_KINDS[va->kind].tag);
            snprintf(name_b, sizeof name_b, "%s_%s", stem_b, MAP_KINDS[va->kind].tag);
        }
    } else {
        int per_layer = MAP_KINDS[va->kind].per_layer;
        export_name(name_a, sizeof name_a, va->kind, per_layer ? va->layer : -1, hd, NULL, "");
        export_name(name_b, sizeof name_b, vb.kind, per_layer ? vb.layer : -1, hd, NULL, "");
    }
    if (view_map(ma, a, va, &err) || view_map(mb, b, &vb, &err)) {
        fprintf(stderr, "vitlens: --compare: %s: %s\n", name_a, err.msg);
        return 1;
    }
    int wa, ha, wb, hb;
    map_kind_size(&wa, &ha, va->kind, ca);
    map_kind_size(&wb, &hb, vb.kind, cb);
    int patches_a = wa == ca->grid_w && ha == ca->grid_h,
        patches_b = wb == cb->grid_w && hb == cb->grid_h;
    CompareStats s = {NAN, NAN, 0};
    if (patches_a && patches_b) {
        compare_resample(tmp, mb, a, b);
        s = compare_stats(ma, tmp, wa * ha);
    } else if (wa == wb && ha == hb) {
        s = compare_stats(ma, mb, wa * ha);
    }
    fprintf(csv, "%s,%s,%.9g,%.9g,%d\n", name_a, name_b, s.spearman, s.iou, s.n);
    if (wa != wb || ha != hb) return 0;
    for (int i = 0; i < wa * ha; i++) tmp[i] = ma[i] - mb[i];
    char file[240], msg[2400];
    snprintf(file, sizeof file, "%s.npy", name_a);
    if (npy_write(diff_dir, file, tmp, (const int[]){ha, wa}, 2, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        return 1;
    }
    map_normalize_signed(tmp, tmp, wa * ha, NULL, NULL);
    export_blend(pixels, out_w, out_w, out_h, a->crop_rgb, tmp, wa, ha, ca, st);
    char path[2400];
    snprintf(path, sizeof path, "%s/%s.png", diff_dir, name_a);
    if (export_png(path, pixels, out_w, out_h, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        return 1;
    }
    ++*n_diff;
    return 0;
}

int export_compare(FILE *out, const char *dir, const Model *model_a, const Scene *a,
                   const Model *model_b, const Scene *b, const ExportStyle *st) {
    const VitConfig *ca = &a->run.cfg, *cb = &b->run.cfg;
    char diff_dir[2048], path[2048];
    snprintf(diff_dir, sizeof diff_dir, "%s/diff", dir);
    snprintf(path, sizeof path, "%s/compare.csv", dir);
    char why[2400];
    if (files_make_dir(diff_dir, 0777, why, sizeof why)) {
        fprintf(stderr, "vitlens: %s\n", why);
        return 1;
    }
    FILE *csv = fopen(path, "w");
    if (!csv) {
        fprintf(stderr, "vitlens: %s: cannot create: %s\n", path, strerror(errno));
        return 1;
    }
    int S = ca->image_h > ca->image_w ? ca->image_h : ca->image_w;
    int scale = (EXPORT_TARGET_PX + S / 2) / S;
    if (scale < 1) scale = 1;
    int out_w = ca->image_w * scale, out_h = ca->image_h * scale;
    size_t na = map_kind_max_floats(ca, 0), nb = map_kind_max_floats(cb, 0);
    float *ma = malloc(na * sizeof *ma), *mb = malloc(nb * sizeof *mb),
          *tmp = malloc((na > nb ? na : nb) * sizeof *tmp);
    uint8_t *pixels = malloc((size_t)out_w * out_h * 3);
    int rc = 0, n_pairs = 0, n_diff = 0;
    if (!ma || !mb || !tmp || !pixels) {
        fprintf(stderr, "vitlens: out of memory for the comparison\n");
        rc = 1;
    }
    char name_a[300], name_b[300];
    snprintf(name_a, sizeof name_a, "%.100s on %.150s", model_a->name, a->name);
    snprintf(name_b, sizeof name_b, "%.100s on %.150s", model_b->name, b->name);
    fprintf(csv,
            "# A: %s; B: %s; B's patch maps on A's grid (the same place of the photo), "
            "layers by relative depth\n",
            name_a, name_b);
    fprintf(csv, "map_a,map_b,spearman,top10_iou,patches\n");
    /* every map kind both panes have, as --export writes them: per layer the heads' mean
     * (and each other fusion), the class-specific ones for each pane's own class */
    for (int k = 0; k < MAP_KIND_COUNT && !rc; k++) {
        const MapKindInfo *m = &MAP_KINDS[k];
        if (m->rgb || m->worker || !map_kind_usable(k, ca) || !map_kind_usable(k, cb)) continue;
        if (m->uses_target && (a->expl_target < 0 || b->expl_target < 0)) continue;
        int every = m->per_head && m->export_heads;
        int f0 = 0, f1 = every ? VIEW_N_FUSIONS : 1;
        for (int l = 0; l < (m->per_layer ? ca->n_layers : 1) && !rc; l++)
            for (int f = f0; f < f1 && !rc; f++) {
                View v = {.kind = k,
                          .layer = l,
                          .head = ca->n_heads + (every ? f : VIT_FUSE_MEAN),
                          .discard_ratio = st->discard,
                          .target = m->uses_target ? a->expl_target : VIEW_TOP1};
                rc = compare_pair(csv, diff_dir, model_a, a, model_b, b, &v, ma, mb, tmp, &n_diff,
                                  pixels, out_w, out_h, st);
                n_pairs += !rc;
            }
    }
    if (fclose(csv) && !rc) {
        fprintf(stderr, "vitlens: %s: cannot write\n", path);
        rc = 1;
    }
    if (!rc) rc = write_sheet(dir, a, b, name_a, name_b, st);
    if (!rc) {
        fprintf(out,
                "compared %d pairs of maps (compare.csv), %d differences A - B (diff/), "
                "compare_sheet.png in %s\n",
                n_pairs, n_diff, dir);
        if (ca->grid_h != cb->grid_h || ca->grid_w != cb->grid_w)
            fprintf(out,
                    "no A - B of the patch maps: A's grid is %dx%d, B's %dx%d (compare.csv "
                    "has B on A's grid)\n",
                    ca->grid_h, ca->grid_w, cb->grid_h, cb->grid_w);
    }
    free(ma), free(mb), free(tmp), free(pixels);
    return rc;
}
