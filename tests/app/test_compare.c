/* test_compare.c - app/view/compare.c: the compare view's patch cursor through two crops
 * and two grids, the relative depth, the resampled map and the agreement of two maps,
 * against cases worked by hand (the numbers in the comments). */
#include "view/compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures;

static void check(int ok, const char *what) {
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    failures += !ok;
}

/* A scene as scene_run leaves it, for the fields compare.c reads: a model of input
 * img x img px and patch P, a photo of w x h px of which the rectangle (cx, cy, cw, ch)
 * was seen. */
static Scene scene(int img, int P, int w, int h, int cx, int cy, int cw, int ch) {
    Scene s;
    memset(&s, 0, sizeof s);
    VitConfig *c = &s.run.cfg;
    c->image_w = c->image_h = img, c->patch_size = P;
    c->grid_w = c->grid_h = img / P, c->n_patches = c->grid_w * c->grid_h;
    s.src_w = w, s.src_h = h;
    s.run.crop_x = cx, s.run.crop_y = cy, s.run.crop_w = cw, s.run.crop_h = ch;
    return s;
}

int main(void) {
    char what[200];
    /* a 640 x 480 photo: timm's centre crop at 224 (short side to 256, 224 of it: 420 px of
     * the photo from (110, 30)), DeiT's 14 x 14 grid (P 16) and a 16 x 16 one (P 14) */
    Scene deit = scene(224, 16, 640, 480, 110, 30, 420, 420);
    Scene p14 = scene(224, 14, 640, 480, 110, 30, 420, 420);
    int same = 1;
    for (int p = 0; p < 196; p++) same &= compare_patch(&deit, p, &deit) == p;
    check(same, "one scene against itself: every patch maps to itself");
    /* centres 8, 216 and 120 px -> columns 8/14 = 0, 216/14 = 15, 120/14 = 8 */
    check(compare_patch(&deit, 0, &p14) == 0, "14x14 -> 16x16: patch (0,0) -> (0,0)");
    check(compare_patch(&deit, 13, &p14) == 15, "14x14 -> 16x16: patch (0,13) -> (0,15)");
    check(compare_patch(&deit, 7 * 14 + 7, &p14) == 8 * 16 + 8,
          "14x14 -> 16x16: patch (7,7) -> (8,8)");
    /* 16x16 -> 14x14: centre 7 px -> column 0; (15,15) centre 217 -> 13 */
    check(compare_patch(&p14, 0, &deit) == 0 && compare_patch(&p14, 255, &deit) == 195,
          "16x16 -> 14x14: the corners");
    /* DINOv2 at 518 (37 x 37, P 14) on the same crop: centre 120/224 of the crop ->
     * 120 * 518 / 224 = 277.5 px -> column 19 */
    Scene dino = scene(518, 14, 640, 480, 110, 30, 420, 420);
    check(compare_patch(&deit, 7 * 14 + 7, &dino) == 19 * 37 + 19,
          "224 px -> 518 px: patch (7,7) -> (19,19)");
    /* the whole photo squashed to 224 against the centre crop: column 0's centre is at
     * 8 / 224 * 640 = 22.9 px, left of the crop (110): -1; the middle patch (7,7) at
     * (342.9, 257.1) px -> ((342.9 - 110) * 224/420, (257.1 - 30) * 224/420) = (124.2,
     * 121.1) -> (7, 7) */
    Scene whole = scene(224, 16, 640, 480, 0, 0, 640, 480);
    check(compare_patch(&whole, 0, &deit) == -1, "squashed -> centre crop: (0,0) is not seen (-1)");
    check(compare_patch(&whole, 7 * 14 + 7, &deit) == 7 * 14 + 7,
          "squashed -> centre crop: (7,7) -> (7,7)");
    /* ... and the row: (7,13)'s centre x = 216/224*640 = 617.1 px, right of 530: -1 */
    check(compare_patch(&whole, 7 * 14 + 13, &deit) == -1, "squashed -> centre crop: (7,13) -> -1");
    /* the other way every patch of the crop is in the photo: (0,0) at (110 + 8*420/224,
     * 30 + 15) = (125, 45) px -> (125/640*224, 45/480*224) = (43.75, 21) -> (1, 2)... in
     * (row, col): row 21/16 = 1, col 43.75/16 = 2 */
    check(compare_patch(&deit, 0, &whole) == 1 * 14 + 2, "centre crop -> squashed: (0,0) -> (1,2)");
    /* two photos, each squashed whole: place to place, whatever their sizes */
    Scene small = scene(224, 16, 320, 200, 0, 0, 320, 200);
    same = 1;
    for (int p = 0; p < 196; p++) same &= compare_patch(&whole, p, &small) == p;
    check(same, "two photos of other sizes, both whole: the same place, the same patch");
    check(compare_patch(&deit, -1, &p14) == -1 && compare_patch(&deit, 196, &p14) == -1,
          "a patch out of range: -1");
    /* the mistake of mapping input px to input px, ignoring the crops, would give (0,0)
     * for squashed -> centre crop (0,0): the crop is what the cases above rest on */

    /* relative depth */
    int layers[][4] = {{0, 12, 24, 1},   {11, 12, 24, 23}, {0, 24, 12, 0}, {1, 24, 12, 0},
                       {23, 24, 12, 11}, {5, 12, 12, 5},   {3, 4, 12, 10}, {6, 12, 24, 13}};
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
        int *t = layers[i], got = compare_layer(t[0], t[1], t[2]);
        snprintf(what, sizeof what, "layer %d of %d -> %d of %d (got %d)", t[0], t[1], t[3], t[2],
                 got);
        check(got == t[3], what);
    }

    /* the resampled map: squashed -> centre crop, b's values its patch index */
    float mb[196], out[196];
    for (int i = 0; i < 196; i++) mb[i] = (float)i;
    compare_resample(out, mb, &whole, &deit);
    check(isnan(out[0]) && out[7 * 14 + 7] == 7 * 14 + 7 && isnan(out[7 * 14 + 13]),
          "compare_resample: b's value at the mapped patch, NaN where unseen");

    /* agreement: ranks [1,2,3,4] against [1,3,2,4] (the NaN pair left out): 1 - 6*2/(4*15)
     * = 0.8; the top 10 % of 4 patches is 1 patch, index 3 in both: IoU 1 */
    float a[] = {1, 2, 3, 4, NAN}, b[] = {10, 30, 20, 40, 50};
    CompareStats s = compare_stats(a, b, 5);
    check(s.n == 4 && fabs(s.spearman - 0.8) < 1e-12 && s.iou == 1.0,
          "compare_stats: the NaN patch left out, Spearman 0.8, IoU 1");
    float c[] = {4, 3, 2, 1, 0};
    s = compare_stats(a, c, 5);
    check(s.n == 4 && fabs(s.spearman + 1.0) < 1e-12 && s.iou == 0.0,
          "compare_stats: reversed ranks -1, disjoint tops IoU 0");
    float flat[] = {2, 2, 2, 2, 2};
    s = compare_stats(a, flat, 5);
    check(isnan(s.spearman) && isnan(s.iou), "compare_stats: a constant map: NaN");
    float one[] = {NAN, NAN, NAN, 1, NAN};
    s = compare_stats(a, one, 5);
    check(s.n == 1 && isnan(s.spearman) && isnan(s.iou), "compare_stats: one patch left: NaN");
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures != 0;
}
