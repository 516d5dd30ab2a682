/* compare.c - what links the two panes of the compare view (compare.h). */
#include "view/compare.h"

#include <math.h>
#include <stdlib.h>

int compare_patch(const Scene *a, int pa, const Scene *b) {
    const VitConfig *ca = &a->run.cfg, *cb = &b->run.cfg;
    if (pa < 0 || pa >= ca->n_patches || a->src_w < 1 || a->src_h < 1 || b->src_w < 1 ||
        b->src_h < 1 || a->run.crop_w < 1 || a->run.crop_h < 1 || b->run.crop_w < 1 ||
        b->run.crop_h < 1)
        return -1;
    /* pa's centre in a's input, px */
    double ix = ((double)(pa % ca->grid_w) + 0.5) * ca->patch_size,
           iy = ((double)(pa / ca->grid_w) + 0.5) * ca->patch_size;
    /* the place in a's photo, as a fraction of its width and height */
    double u = (a->run.crop_x + ix * a->run.crop_w / ca->image_w) / a->src_w,
           v = (a->run.crop_y + iy * a->run.crop_h / ca->image_h) / a->src_h;
    /* that place in b's input, px */
    double jx = (u * b->src_w - b->run.crop_x) * cb->image_w / b->run.crop_w,
           jy = (v * b->src_h - b->run.crop_y) * cb->image_h / b->run.crop_h;
    if (!(jx >= 0 && jx < cb->image_w && jy >= 0 && jy < cb->image_h)) return -1;
    int col = (int)(jx / cb->patch_size), row = (int)(jy / cb->patch_size);
    if (col >= cb->grid_w) col = cb->grid_w - 1;
    if (row >= cb->grid_h) row = cb->grid_h - 1;
    return row * cb->grid_w + col;
}

int compare_layer(int la, int La, int Lb) {
    if (La == Lb) return la;
    if (La < 1 || Lb < 1) return 0;
    int l = (int)lround((la + 0.5) * Lb / La - 0.5);
    return l < 0 ? 0 : l >= Lb ? Lb - 1 : l;
}

void compare_resample(float *out, const float *map_b, const Scene *a, const Scene *b) {
    for (int p = 0; p < a->run.cfg.n_patches; p++) {
        int q = compare_patch(a, p, b);
        out[p] = q < 0 ? NAN : map_b[q];
    }
}

CompareStats compare_stats(const float *a, const float *b, int n) {
    CompareStats s = {NAN, NAN, 0};
    float *ka = malloc((size_t)(n > 0 ? n : 1) * sizeof *ka),
          *kb = malloc((size_t)(n > 0 ? n : 1) * sizeof *kb);
    if (ka && kb) {
        for (int i = 0; i < n; i++)
            if (isfinite(a[i]) && isfinite(b[i])) ka[s.n] = a[i], kb[s.n] = b[i], s.n++;
        if (s.n >= 2) {
            s.spearman = vit_spearman(ka, kb, s.n);
            s.iou = vit_top_iou(ka, kb, s.n, COMPARE_TOP_FRAC, NULL);
        }
    }
    free(ka), free(kb);
    return s;
}
