/* compare.h - two panes side by side (issue 36): what links them. A patch of one pane
 * and the patch at the same place of the photo in the other, through each model's own
 * crop and grid; a layer and the layer at the same relative depth; how far two maps agree
 * (Spearman's rank correlation, the IoU of their top patches). The window's compare view
 * and --compare's export read these; they hold no state. */
#ifndef VITLENS_COMPARE_H
#define VITLENS_COMPARE_H

#include "view/scene.h"

/* The share of patches whose overlap compare_stats gives (the top 10 %). */
#define COMPARE_TOP_FRAC 0.1

/* The patch of scene b at the place of the photo under patch pa (0 .. N_a - 1) of scene a:
 * pa's centre in a's input (px) -> a's photo through the crop a's model saw (run.crop_x,
 * crop_y, crop_w, crop_h) -> the same relative place of b's photo (src_w, src_h: the same
 * photo maps px to px, two photos place to place) -> b's input -> b's grid (gh x gw,
 * row-major). -1 when pa is out of range or b's crop does not cover that place (a squashed
 * whole photo against a centre crop). Both scenes must have run (scene_run). */
int compare_patch(const Scene *a, int pa, const Scene *b);

/* The layer (0-based) of a model of Lb layers at the relative depth of layer la of a model
 * of La layers: the layers' centres matched, round((la + 0.5) * Lb / La - 0.5) clamped to
 * 0 .. Lb - 1, halves away from 0 (12 against 24: 0 -> 1, 11 -> 23; 24 against 12: 0 and
 * 1 -> 0, 23 -> 11). la itself when La == Lb. */
int compare_layer(int la, int La, int Lb);

/* b's patch map [Nb] on a's grid: out[pa] = map_b[compare_patch(a, pa, b)], NaN where that
 * is -1. out [Na], the caller's. */
void compare_resample(float *out, const float *map_b, const Scene *a, const Scene *b);

typedef struct {
    double spearman; /* Spearman's rank correlation (vit_spearman), NaN when undefined */
    double iou;      /* IoU of the top COMPARE_TOP_FRAC patches (vit_top_iou), NaN likewise */
    int n;           /* patches compared: those where both maps are finite */
} CompareStats;

/* How far two maps on one grid agree, a [n] and b [n] (a patch map each, or one resampled
 * by compare_resample): the patches where either is NaN or infinite are left out of both;
 * then vit_spearman and vit_top_iou(COMPARE_TOP_FRAC) of the rest. NaN (n as counted)
 * when fewer than 2 are left, a map is constant there, or memory runs out. */
CompareStats compare_stats(const float *a, const float *b, int n);

#endif
